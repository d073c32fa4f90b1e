/* A jsontp client on plain epoll: GET a resource to a file, or PUT a
 * file, in any encoding, optionally asking first with 100-continue (D10).
 *
 *   epoll_client get HOST:PORT /path [-o FILE] [-H name=value]...
 *   epoll_client put HOST:PORT /path --file FILE [--encoding gzip|br|deflate|identity]
 *                [--continue] [-H name=value]...
 *
 * A download streams to its file as it arrives (D19); the status and the
 * human-message go to stderr. Exit status: 0 for 1xx-3xx, 1 for 4xx/5xx,
 * 2 when there was no answer. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jsontp.h"

#define MUST(call)                                                             \
    do {                                                                       \
        if ((call) != JSONTP_OK) {                                             \
            fprintf(stderr, "epoll_client: %s\n", jsontp_last_error());        \
            exit(2);                                                           \
        }                                                                      \
    } while (0)

static void fail(const char *what) {
    fprintf(stderr, "epoll_client: %s: %s\n", what, strerror(errno));
    exit(2);
}

/* A whole file in memory (an upload is one message, D3). */
static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail(path);
    uint8_t *data = NULL;
    size_t cap = 0, n;
    *len = 0;
    do {
        if (*len == cap) data = realloc(data, cap = cap ? cap * 2 : 65536);
        n = fread(data + *len, 1, cap - *len, f);
        *len += n;
    } while (n > 0);
    fclose(f);
    return data;
}

static int connect_to(const char *addr) {
    char host[256];
    int port;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    if (sscanf(addr, "%255[^:]:%d", host, &port) != 2 || inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "epoll_client: %s is not IPv4-ADDRESS:PORT\n", addr);
        exit(2);
    }
    sa.sin_port = htons((uint16_t)port);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS) fail(addr);
    return fd;
}

int main(int argc, char **argv) {
    if (argc < 4 || (strcmp(argv[1], "get") && strcmp(argv[1], "put"))) {
        fprintf(stderr, "usage: %s get|put HOST:PORT /path [-o FILE] [--file FILE] [--encoding E] "
                        "[--continue] [-H name=value]...\n", argv[0]);
        return 2;
    }
    int put = !strcmp(argv[1], "put"), ask_first = 0;
    const char *output = NULL, *input = NULL, *encoding = NULL;
    jsontp_request *request;
    MUST(jsontp_request_new(put ? "PUT" : "GET", argv[3], &request));
    MUST(jsontp_request_set_header(request, "accept-encoding", "[\"br\",\"gzip\",\"deflate\",\"identity\"]"));
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--continue")) ask_first = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "-o")) output = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--file")) input = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--encoding")) encoding = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "-H") && strchr(argv[i + 1], '=')) {
            char *name = argv[++i], *value = strchr(name, '=');
            *value++ = 0;
            MUST(jsontp_request_set_header_string(request, name, value));
        } else {
            fprintf(stderr, "epoll_client: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (put) {
        if (!input) {
            fprintf(stderr, "epoll_client: put needs --file FILE\n");
            return 2;
        }
        size_t len;
        uint8_t *data = slurp(input, &len);
        MUST(jsontp_request_set_content(request, data, len, encoding));
        free(data);
    }
    if (ask_first) MUST(jsontp_request_set_header_string(request, "expect", "100-continue"));
    FILE *out = output ? fopen(output, "wb") : stdout;
    if (!out) fail(output);

    /* Responses stream to the file as they come. */
    jsontp_client_config *config;
    MUST(jsontp_client_config_new(&config));
    MUST(jsontp_client_config_set_stream_content(config, true));
    jsontp_client *client;
    MUST(jsontp_client_new(config, jsontp_now_ns(), &client));
    jsontp_client_config_free(config);
    uint64_t id;
    MUST(jsontp_client_send_request(client, request, jsontp_now_ns(), &id));
    jsontp_request_free(request);

    int fd = connect_to(argv[2]), ep = epoll_create1(EPOLL_CLOEXEC), status = 0;
    struct epoll_event interest = {.events = EPOLLOUT};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &interest);
    while (!status) {
        uint64_t now = jsontp_now_ns();
        /* Write what the connection has to send, as far as the socket takes. */
        const uint8_t *pending;
        size_t len;
        MUST(jsontp_client_pending_output(client, &pending, &len));
        if (len > 0) {
            ssize_t n = send(fd, pending, len, MSG_NOSIGNAL);
            if (n > 0) MUST(jsontp_client_consume_output(client, (size_t)n, now));
            else if (errno != EAGAIN && errno != ENOTCONN) fail("send");
        }
        jsontp_event *event;
        while (!status && jsontp_client_next_event(client, now, &event) == JSONTP_OK) {
            jsontp_event_kind kind;
            MUST(jsontp_event_get_kind(event, &kind));
            if (kind == JSONTP_EVENT_CONTENT) {
                const uint8_t *data;
                MUST(jsontp_event_content(event, &data, &len));
                if (fwrite(data, 1, len, out) != len) fail("write");
            } else if (kind == JSONTP_EVENT_CONTINUE) {
                fprintf(stderr, "100 continue: sending the content\n");
            } else if (kind == JSONTP_EVENT_RESPONSE) {
                const jsontp_response *response;
                const char *message;
                uint16_t code;
                MUST(jsontp_event_response(event, &response));
                MUST(jsontp_response_status(response, &code));
                MUST(jsontp_response_message(response, &message, &len));
                fprintf(stderr, "%u %.*s\n", code, (int)len, message);
                status = code < 400 ? 200 : 400;
            } else if (kind == JSONTP_EVENT_PEER_ERROR || kind == JSONTP_EVENT_CLOSED) {
                const jsontp_error *error;
                const char *text = "the connection closed before the answer";
                len = strlen(text);
                if (jsontp_event_error(event, &error) == JSONTP_OK) MUST(jsontp_error_text(error, &text, &len));
                fprintf(stderr, "epoll_client: %.*s\n", (int)len, text);
                status = 1;
            }
            jsontp_event_free(event);
        }
        if (status) break;
        /* Wait for the socket, or for the next timer (the wait for 100,
         * D10; the response's deadline, D3). */
        bool wants_read;
        uint64_t deadline;
        MUST(jsontp_client_wants_read(client, &wants_read));
        MUST(jsontp_client_pending_output(client, &pending, &len));
        MUST(jsontp_client_poll_timeout(client, &deadline));
        interest.events = (wants_read ? EPOLLIN : 0) | (len > 0 ? EPOLLOUT : 0);
        epoll_ctl(ep, EPOLL_CTL_MOD, fd, &interest);
        now = jsontp_now_ns();
        int wait = deadline == UINT64_MAX ? -1 : deadline <= now ? 0 : (int)((deadline - now) / 1000000 + 1);
        struct epoll_event ready;
        int n = epoll_wait(ep, &ready, 1, wait);
        now = jsontp_now_ns();
        if (n == 0) MUST(jsontp_client_handle_timeout(client, now));
        if (n == 1 && (ready.events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
            static uint8_t buf[64 * 1024];
            ssize_t got = read(fd, buf, sizeof buf);
            if (got > 0) MUST(jsontp_client_receive_data(client, buf, (size_t)got, now));
            else if (got == 0 || errno != EAGAIN) MUST(jsontp_client_receive_eof(client, now));
        }
    }
    jsontp_client_free(client);
    close(fd);
    close(ep);
    if (out != stdout && fclose(out) != 0) fail(output);
    return status == 200 ? 0 : status == 400 ? 1 : 2;
}
