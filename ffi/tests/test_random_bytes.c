/* Random bytes through server and client connections: whatever arrives,
 * every call answers with a code and nothing crashes or leaks. Bounded:
 * a fixed seed, a fixed number of rounds. */
#include "check.h"

static uint64_t state = 0x9e3779b97f4a7c15ull;

static uint64_t next(void) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
}

/* Pieces that lead the parser deeper than bytes alone would. */
static const char *const PIECES[] = {
    "{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/a\",\"method\":\"GET\",",
    "\"headers\":{\"expect\":\"100-continue\"},", "\"body\":{\"content\":\"",
    "\",\"encoding\":\"gzip\"}}\n", "{\"jsontp\":\"1.0\",\"type\":\"response\",\"status\":{\"code\":200,",
    "\"formal-message\":\"OK\",\"human-message\":\"ok\"},", "[[[[[[[[", "\"\\u00", "}", "\n", "/*", "*/",
};

static void drain_server(jsontp_server *server, uint64_t now) {
    jsontp_event *event;
    while (jsontp_server_next_event(server, now, &event) == JSONTP_OK) {
        jsontp_event_kind kind;
        OK(jsontp_event_get_kind(event, &kind));
        uint64_t id;
        if (jsontp_event_id(event, &id) == JSONTP_OK) {
            if (kind == JSONTP_EVENT_CONTINUE_REQUESTED && next() % 2)
                jsontp_server_accept_continue(server, id, now);
            if (kind == JSONTP_EVENT_REQUEST) {
                jsontp_response *r;
                OK(jsontp_response_new(200, NULL, &r));
                jsontp_server_send_response(server, id, r, now);
                jsontp_response_free(r);
            }
        }
        jsontp_event_free(event);
    }
    uint8_t out[1024];
    size_t n;
    OK(jsontp_server_data_to_send(server, out, next() % sizeof out, now, &n));
}

static void drain_client(jsontp_client *client, uint64_t now) {
    jsontp_event *event;
    while (jsontp_client_next_event(client, now, &event) == JSONTP_OK) jsontp_event_free(event);
    uint8_t out[1024];
    size_t n;
    OK(jsontp_client_data_to_send(client, out, sizeof out, now, &n));
}

int main(void) {
    const int rounds = 3000;
    uint8_t buf[512];
    for (int round = 0; round < rounds; round++) {
        uint64_t now = 1000 * SECOND;
        jsontp_server_config *config;
        OK(jsontp_server_config_new(&config));
        OK(jsontp_server_config_set_stream_content(config, round % 2));
        OK(jsontp_server_config_set_continue_policy(config, (uint32_t)(round % 3)));
        jsontp_server *server;
        jsontp_client *client;
        OK(jsontp_server_new(config, now, &server));
        jsontp_server_config_free(config);
        OK(jsontp_client_new(NULL, now, &client));
        jsontp_request *get;
        OK(jsontp_request_new("GET", "/a", &get));
        uint64_t id;
        OK(jsontp_client_send_request(client, get, now, &id));
        jsontp_request_free(get);
        for (int step = 0; step < 8; step++) {
            size_t len = 0;
            while (len < sizeof buf - 80) {
                if (next() % 3 == 0) {
                    const char *piece = PIECES[next() % (sizeof PIECES / sizeof *PIECES)];
                    memcpy(buf + len, piece, strlen(piece));
                    len += strlen(piece);
                } else {
                    size_t n = 1 + next() % 16;
                    for (size_t i = 0; i < n; i++) buf[len++] = (uint8_t)next();
                }
                if (next() % 4 == 0) break;
            }
            jsontp_server_receive_data(server, buf, len, now);
            jsontp_client_receive_data(client, buf, len, now);
            drain_server(server, now);
            drain_client(client, now);
            now += (next() % 40) * SECOND;
            jsontp_server_handle_timeout(server, now);
            jsontp_client_handle_timeout(client, now);
        }
        jsontp_server_receive_eof(server, now);
        jsontp_client_receive_eof(client, now);
        drain_server(server, now);
        drain_client(client, now);
        jsontp_server_free(server);
        jsontp_client_free(client);
    }
    printf("test_random_bytes: ok (%d rounds)\n", rounds);
    return 0;
}
