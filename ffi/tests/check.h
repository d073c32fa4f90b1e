/* A few helpers the C tests share: CHECK stops the test with the line and
 * the library's words when a condition fails. */
#ifndef JSONTP_TEST_CHECK_H
#define JSONTP_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsontp.h"

#define CHECK(cond)                                                             \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n",       \
                    __FILE__, __LINE__, #cond, jsontp_last_error());            \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

#define OK(call) CHECK((call) == JSONTP_OK)

#define SECOND 1000000000ull

/* Whether borrowed text (pointer, length) equals a C string. */
static inline int text_is(const char *text, size_t len, const char *expected) {
    return len == strlen(expected) && memcmp(text, expected, len) == 0;
}

/* Whether borrowed text contains a C string. */
static inline int text_has(const char *text, size_t len, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= len; i++)
        if (memcmp(text + i, needle, n) == 0) return 1;
    return 0;
}

#endif
