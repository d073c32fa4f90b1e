/* The file rules through the C API: the facts in, the verdict or the
 * answer out, in D5's order. */
#include <errno.h>

#include "check.h"

static jsontp_request *request(const char *method, const char *resource) {
    jsontp_request *r = NULL;
    OK(jsontp_request_new(method, resource, &r));
    return r;
}

static uint16_t status_of(const jsontp_response *response) {
    uint16_t status = 0;
    OK(jsontp_response_status(response, &status));
    return status;
}

/* Judges a place; returns the refusal's status, or 0 for a verdict (then
 * `*verdict` is it). */
static uint16_t judge_place(const jsontp_file_rules *rules, const jsontp_request *r, jsontp_place_kind kind,
                            bool exists, jsontp_verdict **verdict) {
    jsontp_place place = {.kind = kind, .has_modified = false};
    jsontp_response *refusal = (jsontp_response *)0x1;
    *verdict = (jsontp_verdict *)0x1;
    OK(jsontp_file_rules_judge_place(rules, r, &place, exists, verdict, &refusal));
    /* Exactly one of the two. */
    CHECK((*verdict == NULL) != (refusal == NULL));
    if (refusal == NULL) return 0;
    uint16_t status = status_of(refusal);
    jsontp_response_free(refusal);
    return status;
}

static void test_order(void) {
    jsontp_file_rules *rules;
    OK(jsontp_file_rules_new(true, "s3cret", NULL, &rules));
    jsontp_verdict *verdict;

    /* The token (D14) is judged before existence: 401, not 404. */
    jsontp_request *del = request("DELETE", "/missing.txt");
    CHECK(judge_place(rules, del, JSONTP_PLACE_MISSING, false, &verdict) == 401);
    OK(jsontp_request_set_header_string(del, "authorization", "s3cret"));
    CHECK(judge_place(rules, del, JSONTP_PLACE_MISSING, false, &verdict) == 404);
    /* A folder is 409 (D11); a file is removed. */
    CHECK(judge_place(rules, del, JSONTP_PLACE_FOLDER, true, &verdict) == 409);
    CHECK(judge_place(rules, del, JSONTP_PLACE_FILE, true, &verdict) == 0);
    jsontp_action action;
    OK(jsontp_verdict_action(verdict, &action));
    CHECK(action == JSONTP_ACTION_REMOVE);
    const char *text;
    size_t len;
    OK(jsontp_verdict_language(verdict, &text, &len));
    CHECK(text_is(text, len, "en-US") && text[len] == 0);
    CHECK(jsontp_verdict_media(verdict, &text, &len) == JSONTP_NOT_APPLICABLE);
    jsontp_verdict_free(verdict);
    jsontp_request_free(del);

    /* content-type is level 5, before the token of level 6: 415 first. */
    jsontp_request *put = request("PUT", "/new.txt");
    OK(jsontp_request_set_header_string(put, "content-type", "image/png"));
    CHECK(judge_place(rules, put, JSONTP_PLACE_MISSING, false, &verdict) == 415);
    jsontp_request_free(put);

    /* OPTIONS lists what the place allows (D11). */
    jsontp_request *options = request("OPTIONS", "/new.txt");
    CHECK(judge_place(rules, options, JSONTP_PLACE_MISSING, false, &verdict) == 0);
    OK(jsontp_verdict_action(verdict, &action));
    CHECK(action == JSONTP_ACTION_OPTIONS);
    OK(jsontp_verdict_methods(verdict, &text, &len));
    CHECK(text_is(text, len, "[\"PUT\",\"OPTIONS\"]"));
    const jsontp_response *answer;
    OK(jsontp_verdict_response(verdict, &answer));
    CHECK(status_of(answer) == 200);
    OK(jsontp_response_body(answer, &text, &len));
    CHECK(text_has(text, len, "\"allowed-methods\":[\"PUT\",\"OPTIONS\"]"));
    jsontp_verdict_free(verdict);
    jsontp_request_free(options);
    jsontp_file_rules_free(rules);

    /* A read-only server answers writes 405 (D11). */
    OK(jsontp_file_rules_new(false, NULL, NULL, &rules));
    bool writable = true;
    OK(jsontp_file_rules_writable(rules, &writable));
    CHECK(!writable);
    put = request("PUT", "/hello.txt");
    CHECK(judge_place(rules, put, JSONTP_PLACE_FILE, true, &verdict) == 405);
    jsontp_request_free(put);
    jsontp_file_rules_free(rules);
}

static void test_read(void) {
    jsontp_file_rules *rules;
    OK(jsontp_file_rules_new(true, NULL, "en-US, fr-FR", &rules));
    char media[64];
    size_t len;
    OK(jsontp_media_type_of("/hello.txt", media, sizeof media, &len));
    CHECK(strcmp(media, "text/plain") == 0 && len == 10);
    OK(jsontp_media_type_of("/data.bin", media, sizeof media, &len));
    CHECK(strcmp(media, "application/octet-stream") == 0);

    /* A text file, asked for in French and gzip: served so. */
    jsontp_request *get = request("GET", "/hello.txt");
    OK(jsontp_request_set_header(get, "accept-language", "[\"fr-FR\"]"));
    OK(jsontp_request_set_header(get, "accept-encoding", "[\"gzip\"]"));
    jsontp_found found = {.kind = JSONTP_FOUND_FILE, .text = true, .has_modified = true, .modified = 1577836800};
    jsontp_verdict *verdict = NULL;
    jsontp_response *refusal = NULL;
    OK(jsontp_file_rules_judge_read(rules, get, "text/plain", &found, &verdict, &refusal));
    CHECK(verdict != NULL && refusal == NULL);
    const char *text;
    OK(jsontp_verdict_media(verdict, &text, &len));
    CHECK(text_is(text, len, "text/plain"));
    OK(jsontp_verdict_encoding(verdict, &text, &len));
    CHECK(text_is(text, len, "gzip"));
    OK(jsontp_verdict_language(verdict, &text, &len));
    CHECK(text_is(text, len, "fr-FR"));
    jsontp_verdict_free(verdict);
    jsontp_request_free(get);

    /* The conditional headers come before 404 (D17): 412, not 404. */
    get = request("GET", "/gone.txt");
    OK(jsontp_request_set_header_string(get, "if-unmodified-since", "2020-01-01T00:00:00Z+0000"));
    found = (jsontp_found){.kind = JSONTP_FOUND_MISSING};
    OK(jsontp_file_rules_judge_read(rules, get, "text/plain", &found, &verdict, &refusal));
    CHECK(verdict == NULL && refusal != NULL);
    uint16_t status = status_of(refusal);
    jsontp_response_free(refusal);
    jsontp_request_free(get);
    get = request("GET", "/gone.txt");
    OK(jsontp_file_rules_judge_read(rules, get, "text/plain", &found, &verdict, &refusal));
    CHECK(status == 412 && status_of(refusal) == 404);
    jsontp_response_free(refusal);

    /* Unreadable: out of descriptors is 503, another failure 500. */
    found = (jsontp_found){.kind = JSONTP_FOUND_CANNOT_OPEN, .os_error = EMFILE};
    OK(jsontp_file_rules_judge_read(rules, get, "text/plain", &found, &verdict, &refusal));
    CHECK(status_of(refusal) == 503);
    jsontp_response_free(refusal);
    found.kind = 99;
    verdict = (jsontp_verdict *)0x1;
    CHECK(jsontp_file_rules_judge_read(rules, get, "text/plain", &found, &verdict, &refusal) ==
          JSONTP_INVALID_ARGUMENT);
    CHECK(verdict == (jsontp_verdict *)0x1);
    jsontp_request_free(get);

    jsontp_response *failed;
    OK(jsontp_write_failed(ENOSPC, "fr-FR", &failed));
    CHECK(status_of(failed) == 500);
    OK(jsontp_response_headers(failed, &text, &len));
    CHECK(text_has(text, len, "\"language\":\"fr-FR\""));
    jsontp_response_free(failed);
    OK(jsontp_write_failed(EMFILE, "en-US", &failed));
    CHECK(status_of(failed) == 503);
    jsontp_response_free(failed);
    jsontp_file_rules_free(rules);
}

int main(void) {
    test_order();
    test_read();
    puts("test_files: ok");
    return 0;
}
