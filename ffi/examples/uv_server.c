/* A jsontp hello server on libuv (Node's event loop): every GET or POST
 * is answered "Hello from jsontp on libuv!", anything else 405 (D11).
 *
 *   uv_server [--addr 127.0.0.1:8080]
 *
 * libuv owns the sockets and the timers, the connection machine the
 * protocol. The clock is libuv's: uv_hrtime() counts nanoseconds of
 * CLOCK_MONOTONIC, which is what the library takes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "jsontp.h"

#define MUST(call)                                                             \
    do {                                                                       \
        if ((call) != JSONTP_OK) {                                             \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, jsontp_last_error()); \
            abort();                                                           \
        }                                                                      \
    } while (0)

static const char HELLO[] = "Hello from jsontp on libuv!\n";

struct conn {
    uv_tcp_t tcp;           /* first: a uv_handle_t* is a struct conn* */
    uv_timer_t timer;
    uv_shutdown_t shutdown;
    jsontp_server *machine;
    int reading, ending, handles;
};

static void pump(struct conn *c);

static void answer(struct conn *c, uint64_t id, const jsontp_request *request) {
    const char *method;
    size_t len;
    MUST(jsontp_request_method(request, &method, &len));
    jsontp_response *r;
    if ((len == 3 && !memcmp(method, "GET", 3)) || (len == 4 && !memcmp(method, "POST", 4))) {
        MUST(jsontp_response_new(200, "hello", &r));
        MUST(jsontp_response_set_header_string(r, "content-type", "text/plain"));
        MUST(jsontp_response_set_content(r, (const uint8_t *)HELLO, strlen(HELLO), NULL));
    } else {
        MUST(jsontp_response_new(405, "this server answers GET and POST only", &r));
        MUST(jsontp_response_set_body_key(r, "allowed-methods", "[\"GET\",\"POST\"]"));
    }
    MUST(jsontp_server_send_response(c->machine, id, r, uv_hrtime()));
    jsontp_response_free(r);
}

static void on_closed(uv_handle_t *handle) {
    struct conn *c = handle->data;
    if (--c->handles == 0) {
        jsontp_server_free(c->machine);
        free(c);
    }
}

static void on_shutdown(uv_shutdown_t *req, int status) {
    struct conn *c = req->data;
    (void)status;
    uv_close((uv_handle_t *)&c->tcp, on_closed);
    uv_close((uv_handle_t *)&c->timer, on_closed);
}

static void on_written(uv_write_t *req, int status) {
    (void)status;
    free(req->data);
    free(req);
}

static void alloc_buffer(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void)handle;
    buf->base = malloc(suggested);
    buf->len = suggested;
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf) {
    struct conn *c = stream->data;
    if (n > 0) MUST(jsontp_server_receive_data(c->machine, (const uint8_t *)buf->base, (size_t)n, uv_hrtime()));
    else if (n < 0) MUST(jsontp_server_receive_eof(c->machine, uv_hrtime()));
    free(buf->base);
    pump(c);
}

static void on_timer(uv_timer_t *timer) {
    struct conn *c = timer->data;
    MUST(jsontp_server_handle_timeout(c->machine, uv_hrtime()));
    pump(c);
}

/* Takes the events, hands libuv what to write, and sets reading and the
 * timer as the machine says. */
static void pump(struct conn *c) {
    if (c->ending) return;
    uint64_t now = uv_hrtime();
    jsontp_event *event;
    while (jsontp_server_next_event(c->machine, now, &event) == JSONTP_OK) {
        jsontp_event_kind kind;
        MUST(jsontp_event_get_kind(event, &kind));
        uint64_t id;
        const jsontp_request *request;
        if (kind == JSONTP_EVENT_CONTINUE_REQUESTED) {
            MUST(jsontp_event_id(event, &id));
            MUST(jsontp_server_accept_continue(c->machine, id, now));
        } else if (kind == JSONTP_EVENT_REQUEST) {
            MUST(jsontp_event_id(event, &id));
            MUST(jsontp_event_request(event, &request));
            answer(c, id, request);
        }
        jsontp_event_free(event);
    }
    const uint8_t *pending;
    size_t len;
    MUST(jsontp_server_pending_output(c->machine, &pending, &len));
    if (len > 0) {
        /* libuv writes a copy; the machine's bytes are taken at once. */
        uv_write_t *req = malloc(sizeof *req);
        req->data = malloc(len);
        memcpy(req->data, pending, len);
        uv_buf_t buf = uv_buf_init(req->data, (unsigned)len);
        uv_write(req, (uv_stream_t *)&c->tcp, &buf, 1, on_written);
        MUST(jsontp_server_consume_output(c->machine, len, now));
    }
    bool wants_read, closed;
    MUST(jsontp_server_wants_read(c->machine, &wants_read));
    MUST(jsontp_server_is_closed(c->machine, &closed));
    if (closed) {
        /* libuv shuts the socket once the queued writes are out. */
        c->ending = 1;
        c->shutdown.data = c;
        uv_read_stop((uv_stream_t *)&c->tcp);
        uv_timer_stop(&c->timer);
        if (uv_shutdown(&c->shutdown, (uv_stream_t *)&c->tcp, on_shutdown) != 0) on_shutdown(&c->shutdown, 0);
        return;
    }
    if (wants_read != c->reading) {
        c->reading = wants_read;
        if (wants_read) uv_read_start((uv_stream_t *)&c->tcp, alloc_buffer, on_read);
        else uv_read_stop((uv_stream_t *)&c->tcp);
    }
    uint64_t deadline;
    MUST(jsontp_server_poll_timeout(c->machine, &deadline));
    if (deadline != UINT64_MAX)
        uv_timer_start(&c->timer, on_timer, deadline <= now ? 0 : (deadline - now) / 1000000 + 1, 0);
}

static void on_connection(uv_stream_t *listener, int status) {
    if (status < 0) return;
    struct conn *c = calloc(1, sizeof *c);
    uv_tcp_init(listener->loop, &c->tcp);
    uv_timer_init(listener->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->handles = 2;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, on_closed);
        uv_close((uv_handle_t *)&c->timer, on_closed);
        return;
    }
    MUST(jsontp_server_new(NULL, uv_hrtime(), &c->machine));
    pump(c);
}

int main(int argc, char **argv) {
    const char *addr = argc == 3 && !strcmp(argv[1], "--addr") ? argv[2] : "127.0.0.1:8080";
    char host[256];
    int port;
    struct sockaddr_in sa;
    if (sscanf(addr, "%255[^:]:%d", host, &port) != 2 || uv_ip4_addr(host, port, &sa) != 0) {
        fprintf(stderr, "usage: %s [--addr IPv4-ADDRESS:PORT]\n", argv[0]);
        return 2;
    }
    uv_loop_t *loop = uv_default_loop();
    uv_tcp_t listener;
    uv_tcp_init(loop, &listener);
    int error = uv_tcp_bind(&listener, (const struct sockaddr *)&sa, 0);
    if (!error) error = uv_listen((uv_stream_t *)&listener, 512, on_connection);
    if (error) {
        fprintf(stderr, "%s: %s\n", addr, uv_strerror(error));
        return 1;
    }
    printf("serving hello on %s (libuv)\n", addr);
    fflush(stdout);
    return uv_run(loop, UV_RUN_DEFAULT);
}
