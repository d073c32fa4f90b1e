/* The connections through the C API: a client and a server connection
 * wired to each other in memory, on a clock of the test's making. */
#include "check.h"

static const uint64_t T0 = 1000 * SECOND;

/* Moves every pending byte from the client to the server and back until
 * neither has more, using both ways out: the copy and the borrow. */
static void pump(jsontp_client *client, jsontp_server *server, uint64_t now) {
    for (int moved = 1; moved;) {
        moved = 0;
        uint8_t buf[4096];
        size_t n = 0;
        OK(jsontp_client_data_to_send(client, buf, sizeof buf, now, &n));
        if (n > 0) {
            OK(jsontp_server_receive_data(server, buf, n, now));
            moved = 1;
        }
        const uint8_t *pending = NULL;
        size_t len = 0;
        OK(jsontp_server_pending_output(server, &pending, &len));
        if (len > 0) {
            size_t take = len < 1000 ? len : 1000;
            OK(jsontp_client_receive_data(client, pending, take, now));
            OK(jsontp_server_consume_output(server, take, now));
            moved = 1;
        }
    }
}

/* The next server event, which must be of `kind`. */
static jsontp_event *server_event(jsontp_server *server, uint64_t now, jsontp_event_kind kind) {
    jsontp_event *event = NULL;
    OK(jsontp_server_next_event(server, now, &event));
    jsontp_event_kind got;
    OK(jsontp_event_get_kind(event, &got));
    if (got != kind) fprintf(stderr, "server event %d, expected %d\n", got, kind);
    CHECK(got == kind);
    return event;
}

static jsontp_event *client_event(jsontp_client *client, uint64_t now, jsontp_event_kind kind) {
    jsontp_event *event = NULL;
    OK(jsontp_client_next_event(client, now, &event));
    jsontp_event_kind got;
    OK(jsontp_event_get_kind(event, &got));
    if (got != kind) fprintf(stderr, "client event %d, expected %d\n", got, kind);
    CHECK(got == kind);
    return event;
}

static uint64_t id_of(const jsontp_event *event) {
    uint64_t id = 99;
    OK(jsontp_event_id(event, &id));
    return id;
}

static jsontp_request *request(const char *method, const char *resource) {
    jsontp_request *r = NULL;
    OK(jsontp_request_new(method, resource, &r));
    return r;
}

static jsontp_response *response(uint16_t status, const char *message, const char *content) {
    jsontp_response *r = NULL;
    OK(jsontp_response_new(status, message, &r));
    if (content) OK(jsontp_response_set_content(r, (const uint8_t *)content, strlen(content), NULL));
    return r;
}

static void answer(jsontp_server *server, uint64_t id, uint16_t status, const char *content, uint64_t now) {
    jsontp_response *r = response(status, "here it is", content);
    OK(jsontp_server_send_response(server, id, r, now));
    jsontp_response_free(r);
}

static void test_request_cycle(void) {
    jsontp_server *server;
    jsontp_client *client;
    OK(jsontp_server_new(NULL, T0, &server));
    OK(jsontp_client_new(NULL, T0, &client));

    jsontp_request *get = request("GET", "/docs/hello.txt?lang=en");
    OK(jsontp_request_set_header(get, "accept-language", "\"en-US\""));
    OK(jsontp_request_set_body_key(get, "note", "{\"n\":1}"));
    uint64_t sent_id = 99;
    OK(jsontp_client_send_request(client, get, T0, &sent_id));
    CHECK(sent_id == 0);
    jsontp_request_free(get);
    pump(client, server, T0);

    jsontp_event *event = server_event(server, T0, JSONTP_EVENT_REQUEST);
    CHECK(id_of(event) == 0);
    const jsontp_request *got = NULL;
    OK(jsontp_event_request(event, &got));
    const char *text;
    size_t len;
    OK(jsontp_request_method(got, &text, &len));
    CHECK(text_is(text, len, "GET"));
    OK(jsontp_request_resource(got, &text, &len));
    CHECK(text_is(text, len, "/docs/hello.txt?lang=en"));
    OK(jsontp_request_path(got, &text, &len));
    CHECK(text_is(text, len, "/docs/hello.txt"));
    OK(jsontp_request_query(got, &text, &len));
    CHECK(text_is(text, len, "lang=en"));
    OK(jsontp_request_headers(got, &text, &len));
    CHECK(text_has(text, len, "\"accept-language\":[\"en-US\"]"));
    OK(jsontp_request_body(got, &text, &len));
    CHECK(text_is(text, len, "{\"note\":{\"n\":1}}"));
    OK(jsontp_request_encoding(got, &text, &len));
    CHECK(text_is(text, len, "identity"));
    const uint8_t *data;
    OK(jsontp_request_content(got, &data, &len));
    CHECK(len == 0);
    /* Not a content event, not a response event: the accessors say so and
     * leave the outputs alone. */
    data = (const uint8_t *)"untouched";
    CHECK(jsontp_event_content(event, &data, &len) == JSONTP_NOT_APPLICABLE);
    CHECK(memcmp(data, "untouched", 9) == 0);
    jsontp_event_free(event);
    CHECK(jsontp_server_next_event(server, T0, &event) == JSONTP_DONE);

    jsontp_response *ok = response(200, "here is the file", "Hello, world!");
    OK(jsontp_response_set_header_string(ok, "content-type", "text/plain"));
    OK(jsontp_server_send_response(server, 0, ok, T0));
    jsontp_response_free(ok);
    pump(client, server, T0);

    event = server_event(server, T0, JSONTP_EVENT_RESPONSE_SENT);
    uint64_t bytes = 0;
    OK(jsontp_event_bytes(event, &bytes));
    CHECK(bytes > 100);
    jsontp_event_free(event);

    event = client_event(client, T0, JSONTP_EVENT_RESPONSE);
    CHECK(id_of(event) == 0);
    const jsontp_response *res = NULL;
    OK(jsontp_event_response(event, &res));
    uint16_t status = 0;
    OK(jsontp_response_status(res, &status));
    CHECK(status == 200);
    OK(jsontp_response_message(res, &text, &len));
    CHECK(text_is(text, len, "here is the file"));
    OK(jsontp_response_resource(res, &text, &len));
    CHECK(text_is(text, len, "/docs/hello.txt?lang=en"));
    OK(jsontp_response_headers(res, &text, &len));
    CHECK(text_has(text, len, "\"content-type\":\"text/plain\""));
    CHECK(text_has(text, len, "\"language\":\"en-US\""));
    CHECK(text_has(text, len, "\"date\":"));
    OK(jsontp_response_content(res, &data, &len));
    CHECK(len == 13 && memcmp(data, "Hello, world!", 13) == 0);
    jsontp_event_free(event);

    bool idle = false;
    OK(jsontp_server_is_idle(server, &idle));
    CHECK(idle);
    jsontp_server_free(server);
    jsontp_client_free(client);
}

static void test_pipelining_order(void) {
    jsontp_server *server;
    jsontp_client *client;
    OK(jsontp_server_new(NULL, T0, &server));
    OK(jsontp_client_new(NULL, T0, &client));
    const char *resources[] = {"/a", "/b", "/c"};
    for (int i = 0; i < 3; i++) {
        jsontp_request *r = request("GET", resources[i]);
        uint64_t id;
        OK(jsontp_client_send_request(client, r, T0, &id));
        CHECK(id == (uint64_t)i);
        jsontp_request_free(r);
    }
    /* All three arrive at once; the server takes them in order. */
    pump(client, server, T0);
    for (int i = 0; i < 3; i++) {
        jsontp_event *event = server_event(server, T0, JSONTP_EVENT_REQUEST);
        CHECK(id_of(event) == (uint64_t)i);
        jsontp_event_free(event);
    }
    /* Answered last first, they still leave in request order (D2). */
    answer(server, 2, 200, "c", T0);
    answer(server, 1, 200, "b", T0);
    const uint8_t *pending;
    size_t len;
    OK(jsontp_server_pending_output(server, &pending, &len));
    CHECK(len == 0);
    answer(server, 0, 200, "a", T0);
    pump(client, server, T0);
    for (int i = 0; i < 3; i++) {
        jsontp_event *event = client_event(client, T0, JSONTP_EVENT_RESPONSE);
        CHECK(id_of(event) == (uint64_t)i);
        const jsontp_response *res;
        OK(jsontp_event_response(event, &res));
        const char *text;
        OK(jsontp_response_resource(res, &text, &len));
        CHECK(text_is(text, len, resources[i]));
        const uint8_t *data;
        OK(jsontp_response_content(res, &data, &len));
        CHECK(len == 1 && data[0] == "abc"[i]);
        jsontp_event_free(event);
    }
    /* An exchange answered twice is the caller's mistake. */
    jsontp_response *again = response(200, NULL, NULL);
    CHECK(jsontp_server_send_response(server, 1, again, T0) == JSONTP_USAGE);
    CHECK(strstr(jsontp_last_error(), "already answered") != NULL);
    jsontp_response_free(again);
    jsontp_server_free(server);
    jsontp_client_free(client);
}

/* Everything the server has to send, as a C string (the test's buffer). */
static const char *output_of(jsontp_server *server, char *buf, size_t cap) {
    size_t n = 0;
    OK(jsontp_server_data_to_send(server, (uint8_t *)buf, cap - 1, T0, &n));
    buf[n] = 0;
    return buf;
}

static void test_malformed_request(void) {
    jsontp_server *server;
    OK(jsontp_server_new(NULL, T0, &server));
    /* No `jsontp` field: 400 (D5), and the resource echoed. */
    const char *wire = "{\"type\":\"request\",\"resource\":\"/hello.txt\",\"method\":\"GET\","
                       "\"headers\":{},\"body\":{\"content\":\"\",\"encoding\":\"identity\"}}\n";
    OK(jsontp_server_receive_data(server, (const uint8_t *)wire, strlen(wire), T0));
    jsontp_event *event = server_event(server, T0, JSONTP_EVENT_PEER_ERROR);
    const jsontp_error *error = NULL;
    OK(jsontp_event_error(event, &error));
    jsontp_error_kind kind;
    OK(jsontp_error_get_kind(error, &kind));
    CHECK(kind == JSONTP_ERROR_REJECTED);
    uint16_t status = 0;
    OK(jsontp_error_status(error, &status));
    CHECK(status == 400);
    const char *message;
    size_t len;
    OK(jsontp_error_message(error, &message, &len));
    CHECK(text_is(message, len, "field \"jsontp\" is missing"));
    /* The human-message the error carries is the one written. */
    char out[4096];
    const char *written = output_of(server, out, sizeof out);
    CHECK(strstr(written, "\"code\":400") != NULL);
    CHECK(strstr(written, "\"resource\":\"/hello.txt\"") != NULL);
    CHECK(strstr(written, "\"human-message\":\"field \\\"jsontp\\\" is missing\"") != NULL);
    jsontp_event_free(event);
    jsontp_server_free(server);
}

static void test_timers(void) {
    jsontp_server_config *config;
    OK(jsontp_server_config_new(&config));
    OK(jsontp_server_config_set_idle_timeout(config, 5 * SECOND));
    OK(jsontp_server_config_set_message_timeout(config, 2 * SECOND));

    /* Idle: closed at the deadline, with no response (D3). */
    jsontp_server *server;
    OK(jsontp_server_new(config, T0, &server));
    uint64_t deadline = 0;
    OK(jsontp_server_poll_timeout(server, &deadline));
    CHECK(deadline == T0 + 5 * SECOND);
    OK(jsontp_server_handle_timeout(server, T0 + 4 * SECOND));
    bool closed = true;
    OK(jsontp_server_is_closed(server, &closed));
    CHECK(!closed);
    OK(jsontp_server_handle_timeout(server, T0 + 5 * SECOND));
    OK(jsontp_server_is_closed(server, &closed));
    CHECK(closed);
    jsontp_event *event = server_event(server, T0 + 5 * SECOND, JSONTP_EVENT_CLOSED);
    const char *reason;
    size_t len;
    OK(jsontp_event_reason(event, &reason, &len));
    CHECK(text_has(reason, len, "idle"));
    uint64_t id = 7;
    CHECK(jsontp_event_id(event, &id) == JSONTP_NOT_APPLICABLE && id == 7);
    jsontp_event_free(event);
    const uint8_t *pending;
    OK(jsontp_server_pending_output(server, &pending, &len));
    CHECK(len == 0);
    jsontp_server_free(server);

    /* A message begun and not finished: 408 at the message deadline. */
    OK(jsontp_server_new(config, T0, &server));
    const char *half = "{\"jsontp\":\"1.0\",\"type\":";
    OK(jsontp_server_receive_data(server, (const uint8_t *)half, strlen(half), T0 + SECOND));
    CHECK(jsontp_server_next_event(server, T0 + SECOND, &event) == JSONTP_DONE);
    OK(jsontp_server_poll_timeout(server, &deadline));
    CHECK(deadline == T0 + 3 * SECOND);
    OK(jsontp_server_handle_timeout(server, deadline));
    event = server_event(server, deadline, JSONTP_EVENT_PEER_ERROR);
    const jsontp_error *error;
    OK(jsontp_event_error(event, &error));
    uint16_t status = 0;
    OK(jsontp_error_status(error, &status));
    CHECK(status == 408);
    bool closes = false;
    OK(jsontp_error_closes(error, &closes));
    CHECK(closes);
    jsontp_event_free(event);
    char out[4096];
    CHECK(strstr(output_of(server, out, sizeof out), "\"code\":408") != NULL);
    /* The machine's own refusal is a response like any other. */
    event = server_event(server, deadline, JSONTP_EVENT_RESPONSE_SENT);
    jsontp_event_free(event);
    event = server_event(server, deadline, JSONTP_EVENT_CLOSED);
    jsontp_event_free(event);
    jsontp_server_free(server);
    jsontp_server_config_free(config);
}

static jsontp_request *put_with_continue(const char *resource, const char *content) {
    jsontp_request *put = request("PUT", resource);
    OK(jsontp_request_set_header_string(put, "expect", "100-continue"));
    OK(jsontp_request_set_content(put, (const uint8_t *)content, strlen(content), NULL));
    return put;
}

static void test_continue(void) {
    jsontp_server_config *config;
    OK(jsontp_server_config_new(&config));
    OK(jsontp_server_config_set_continue_policy(config, JSONTP_CONTINUE_ASK));

    /* Asked and accepted: 100, then the full request (D10). */
    jsontp_server *server;
    jsontp_client *client;
    OK(jsontp_server_new(config, T0, &server));
    OK(jsontp_client_new(NULL, T0, &client));
    jsontp_request *put = put_with_continue("/f.txt", "the content");
    uint64_t id;
    OK(jsontp_client_send_request(client, put, T0, &id));
    jsontp_request_free(put);
    pump(client, server, T0);
    jsontp_event *event = server_event(server, T0, JSONTP_EVENT_CONTINUE_REQUESTED);
    const jsontp_request *head;
    OK(jsontp_event_request(event, &head));
    const uint8_t *data;
    size_t len;
    OK(jsontp_request_content(head, &data, &len));
    CHECK(len == 0);
    OK(jsontp_server_accept_continue(server, id_of(event), T0));
    CHECK(jsontp_server_accept_continue(server, id_of(event), T0) == JSONTP_USAGE);
    jsontp_event_free(event);
    pump(client, server, T0);
    event = client_event(client, T0, JSONTP_EVENT_CONTINUE);
    jsontp_event_free(event);
    pump(client, server, T0);
    event = server_event(server, T0, JSONTP_EVENT_REQUEST);
    const jsontp_request *full;
    OK(jsontp_event_request(event, &full));
    OK(jsontp_request_content(full, &data, &len));
    CHECK(len == 11 && memcmp(data, "the content", 11) == 0);
    answer(server, id_of(event), 201, NULL, T0);
    jsontp_event_free(event);
    pump(client, server, T0);
    event = client_event(client, T0, JSONTP_EVENT_RESPONSE);
    const jsontp_response *res;
    OK(jsontp_event_response(event, &res));
    uint16_t status;
    OK(jsontp_response_status(res, &status));
    CHECK(status == 201);
    jsontp_event_free(event);
    jsontp_server_free(server);
    jsontp_client_free(client);

    /* Asked and refused: the final answer, the content never sent, the
     * connection open for the next request. */
    OK(jsontp_server_new(config, T0, &server));
    OK(jsontp_client_new(NULL, T0, &client));
    put = put_with_continue("/g.txt", "never sent");
    OK(jsontp_client_send_request(client, put, T0, &id));
    jsontp_request_free(put);
    pump(client, server, T0);
    event = server_event(server, T0, JSONTP_EVENT_CONTINUE_REQUESTED);
    answer(server, id_of(event), 401, NULL, T0);
    jsontp_event_free(event);
    pump(client, server, T0);
    event = client_event(client, T0, JSONTP_EVENT_RESPONSE);
    OK(jsontp_event_response(event, &res));
    OK(jsontp_response_status(res, &status));
    CHECK(status == 401);
    jsontp_event_free(event);
    pump(client, server, T0);
    event = server_event(server, T0, JSONTP_EVENT_RESPONSE_SENT);
    jsontp_event_free(event);
    CHECK(jsontp_server_next_event(server, T0, &event) == JSONTP_DONE);
    bool closed = true;
    OK(jsontp_server_is_closed(server, &closed));
    CHECK(!closed);
    jsontp_server_free(server);
    jsontp_client_free(client);

    /* Refused by configuration: 501 and close. */
    OK(jsontp_server_config_set_continue_policy(config, JSONTP_CONTINUE_REFUSE));
    OK(jsontp_server_new(config, T0, &server));
    OK(jsontp_client_new(NULL, T0, &client));
    put = put_with_continue("/h.txt", "x");
    OK(jsontp_client_send_request(client, put, T0, &id));
    jsontp_request_free(put);
    pump(client, server, T0);
    /* The 501 left as the test moved the bytes: its RESPONSE_SENT may
     * come first. */
    jsontp_event_kind kind = JSONTP_EVENT_RESPONSE_SENT;
    for (;;) {
        OK(jsontp_server_next_event(server, T0, &event));
        OK(jsontp_event_get_kind(event, &kind));
        if (kind != JSONTP_EVENT_RESPONSE_SENT) break;
        jsontp_event_free(event);
    }
    CHECK(kind == JSONTP_EVENT_PEER_ERROR);
    const jsontp_error *error;
    OK(jsontp_event_error(event, &error));
    OK(jsontp_error_status(error, &status));
    CHECK(status == 501);
    jsontp_event_free(event);
    jsontp_server_free(server);
    jsontp_client_free(client);
    jsontp_server_config_free(config);
}

static void test_streamed_content(void) {
    jsontp_server_config *server_config;
    OK(jsontp_server_config_new(&server_config));
    OK(jsontp_server_config_set_stream_content(server_config, true));
    jsontp_client_config *client_config;
    OK(jsontp_client_config_new(&client_config));
    OK(jsontp_client_config_set_stream_content(client_config, true));
    jsontp_server *server;
    jsontp_client *client;
    OK(jsontp_server_new(server_config, T0, &server));
    OK(jsontp_client_new(client_config, T0, &client));

    /* Up: a request's content in pieces, read in pieces. */
    static char upload[200000];
    for (size_t i = 0; i < sizeof upload; i++) upload[i] = (char)('a' + i % 26);
    jsontp_request *put = request("PUT", "/big.txt");
    uint64_t id;
    OK(jsontp_client_send_request_head(client, put, T0, &id));
    jsontp_request_free(put);
    size_t sent = 0;
    static char received[sizeof upload];
    size_t got = 0;
    int saw_head = 0, saw_request = 0;
    while (!saw_request) {
        size_t room = 0;
        OK(jsontp_client_content_room(client, id, &room));
        if (sent < sizeof upload && room > 0) {
            size_t n = sizeof upload - sent < room ? sizeof upload - sent : room;
            if (n > 7000) n = 7000;
            OK(jsontp_client_send_content(client, id, (const uint8_t *)upload + sent, n, T0));
            sent += n;
            if (sent == sizeof upload) OK(jsontp_client_end_content(client, id, T0));
        }
        pump(client, server, T0);
        jsontp_event *event;
        while (jsontp_server_next_event(server, T0, &event) == JSONTP_OK) {
            jsontp_event_kind kind;
            OK(jsontp_event_get_kind(event, &kind));
            if (kind == JSONTP_EVENT_CONTENT_HEAD) {
                CHECK(!saw_head && got == 0);
                saw_head = 1;
            } else if (kind == JSONTP_EVENT_CONTENT) {
                const uint8_t *data;
                size_t len;
                OK(jsontp_event_content(event, &data, &len));
                CHECK(got + len <= sizeof received);
                memcpy(received + got, data, len);
                got += len;
            } else {
                CHECK(kind == JSONTP_EVENT_REQUEST);
                saw_request = 1;
            }
            jsontp_event_free(event);
        }
    }
    CHECK(saw_head && got == sizeof upload && memcmp(received, upload, got) == 0);
    CHECK(jsontp_client_send_content(client, id, (const uint8_t *)"late", 4, T0) == JSONTP_USAGE);

    /* Down: a gzip response in pieces within the room given (D3). */
    jsontp_response *head = response(200, "here it comes", NULL);
    OK(jsontp_response_set_content(head, NULL, 0, "gzip"));
    OK(jsontp_server_send_response_head(server, id, head, T0));
    jsontp_response_free(head);
    sent = 0;
    got = 0;
    int done = 0, saw_response_head = 0;
    while (!done) {
        size_t room = 0;
        OK(jsontp_server_content_room(server, id, &room));
        if (sent < sizeof upload && room > 0) {
            size_t n = sizeof upload - sent < room ? sizeof upload - sent : room;
            OK(jsontp_server_send_content(server, id, (const uint8_t *)upload + sent, n, T0));
            sent += n;
            if (sent == sizeof upload) OK(jsontp_server_end_content(server, id, T0));
        }
        pump(client, server, T0);
        jsontp_event *event;
        while (jsontp_client_next_event(client, T0, &event) == JSONTP_OK) {
            jsontp_event_kind kind;
            OK(jsontp_event_get_kind(event, &kind));
            if (kind == JSONTP_EVENT_RESPONSE_HEAD) {
                /* The status is known before the first byte of content. */
                const jsontp_response *res;
                uint16_t code;
                OK(jsontp_event_response(event, &res));
                OK(jsontp_response_status(res, &code));
                CHECK(!saw_response_head && got == 0 && code == 200);
                saw_response_head = 1;
            } else if (kind == JSONTP_EVENT_CONTENT) {
                const uint8_t *data;
                size_t len;
                CHECK(saw_response_head);
                OK(jsontp_event_content(event, &data, &len));
                CHECK(got + len <= sizeof received);
                memcpy(received + got, data, len);
                got += len;
            } else {
                CHECK(kind == JSONTP_EVENT_RESPONSE);
                const jsontp_response *res;
                OK(jsontp_event_response(event, &res));
                const char *text;
                size_t len;
                OK(jsontp_response_encoding(res, &text, &len));
                CHECK(text_is(text, len, "gzip"));
                done = 1;
            }
            jsontp_event_free(event);
        }
    }
    CHECK(got == sizeof upload && memcmp(received, upload, got) == 0);
    jsontp_server_free(server);
    jsontp_client_free(client);
    jsontp_server_config_free(server_config);
    jsontp_client_config_free(client_config);
}

int main(void) {
    test_request_cycle();
    test_pipelining_order();
    test_malformed_request();
    test_timers();
    test_continue();
    test_streamed_content();
    puts("test_connection: ok");
    return 0;
}
