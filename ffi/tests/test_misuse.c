/* NULL and misuse: every call answers with a code, writes nothing, says
 * why in words, and never crashes. */
#include <errno.h>

#include "check.h"

static const uint64_t T0 = 1000 * SECOND;

static void test_null(void) {
    jsontp_server *server = (jsontp_server *)0x1; /* a sentinel: must stay */
    CHECK(jsontp_server_new(NULL, T0, NULL) == JSONTP_NULL_PARAMETER);
    CHECK(strstr(jsontp_last_error(), "out_server is NULL") != NULL);
    CHECK(jsontp_server_receive_data(NULL, (const uint8_t *)"x", 1, T0) == JSONTP_NULL_PARAMETER);
    CHECK(jsontp_server_receive_eof(NULL, T0) == JSONTP_NULL_PARAMETER);
    jsontp_event *event = (jsontp_event *)0x1;
    CHECK(jsontp_server_next_event(NULL, T0, &event) == JSONTP_NULL_PARAMETER);
    CHECK(event == (jsontp_event *)0x1);
    CHECK(jsontp_client_next_event(NULL, T0, &event) == JSONTP_NULL_PARAMETER);
    CHECK(jsontp_server_send_response(NULL, 0, NULL, T0) == JSONTP_NULL_PARAMETER);
    CHECK(jsontp_server_handle_timeout(NULL, T0) == JSONTP_NULL_PARAMETER);
    uint64_t deadline = 5;
    CHECK(jsontp_server_poll_timeout(NULL, &deadline) == JSONTP_NULL_PARAMETER && deadline == 5);
    bool answer = true;
    CHECK(jsontp_server_wants_read(NULL, &answer) == JSONTP_NULL_PARAMETER && answer);
    CHECK(jsontp_client_is_closed(NULL, &answer) == JSONTP_NULL_PARAMETER && answer);
    jsontp_request *request = NULL;
    CHECK(jsontp_request_new(NULL, "/", &request) == JSONTP_NULL_PARAMETER && request == NULL);
    CHECK(jsontp_request_new("GET", NULL, &request) == JSONTP_NULL_PARAMETER);
    const char *text = "kept";
    size_t len = 4;
    CHECK(jsontp_request_method(NULL, &text, &len) == JSONTP_NULL_PARAMETER);
    CHECK(text_is(text, len, "kept"));
    CHECK(jsontp_event_get_kind(NULL, NULL) == JSONTP_NULL_PARAMETER);
    CHECK(jsontp_error_status(NULL, NULL) == JSONTP_NULL_PARAMETER);
    CHECK(jsontp_file_rules_judge_read(NULL, NULL, NULL, NULL, NULL, NULL) == JSONTP_NULL_PARAMETER);
    /* Freeing NULL is nothing. */
    jsontp_server_free(NULL);
    jsontp_client_free(NULL);
    jsontp_event_free(NULL);
    jsontp_request_free(NULL);
    jsontp_response_free(NULL);
    jsontp_verdict_free(NULL);
    jsontp_file_rules_free(NULL);
    jsontp_server_config_free(NULL);
    jsontp_client_config_free(NULL);
    (void)server;

    /* With a live connection, a NULL output is still refused. */
    OK(jsontp_server_new(NULL, T0, &server));
    CHECK(jsontp_server_next_event(server, T0, NULL) == JSONTP_NULL_PARAMETER);
    CHECK(jsontp_server_pending_output(server, NULL, &len) == JSONTP_NULL_PARAMETER);
    CHECK(jsontp_server_data_to_send(server, NULL, 0, T0, NULL) == JSONTP_NULL_PARAMETER);
    /* NULL data of length 0 is no data; of length 1 it is a mistake. */
    OK(jsontp_server_receive_data(server, NULL, 0, T0));
    CHECK(jsontp_server_receive_data(server, NULL, 1, T0) == JSONTP_NULL_PARAMETER);
    jsontp_server_free(server);
}

static void test_invalid_values(void) {
    jsontp_request *request = NULL;
    CHECK(jsontp_request_new("FETCH", "/", &request) == JSONTP_INVALID_ARGUMENT && request == NULL);
    CHECK(strstr(jsontp_last_error(), "is not one of the protocol's") != NULL);
    CHECK(jsontp_request_new("GET", "/\xff", &request) == JSONTP_INVALID_ARGUMENT);
    OK(jsontp_request_new("PUT", "/x", &request));
    CHECK(jsontp_request_set_header(request, "content-type", "not json") == JSONTP_INVALID_ARGUMENT);
    CHECK(jsontp_request_set_header(request, "content-type", "5") == JSONTP_INVALID_ARGUMENT);
    CHECK(jsontp_request_set_header(request, "language", "\"english\"") == JSONTP_INVALID_ARGUMENT);
    /* Identity content must be UTF-8 text (D9); gzip carries any bytes. */
    const uint8_t binary[] = {0xff, 0x00, 0xfe};
    CHECK(jsontp_request_set_content(request, binary, 3, NULL) == JSONTP_INVALID_ARGUMENT);
    CHECK(strstr(jsontp_last_error(), "D9") != NULL);
    CHECK(jsontp_request_set_content(request, binary, 3, "zip") == JSONTP_INVALID_ARGUMENT);
    OK(jsontp_request_set_content(request, binary, 3, "gzip"));
    CHECK(jsontp_request_set_body_key(request, "k", "{") == JSONTP_INVALID_ARGUMENT);
    const char *text;
    size_t len;
    CHECK(jsontp_request_query(request, &text, &len) == JSONTP_NOT_APPLICABLE);
    jsontp_request_free(request);

    jsontp_response *response = NULL;
    CHECK(jsontp_response_new(42, NULL, &response) == JSONTP_INVALID_ARGUMENT && response == NULL);
    OK(jsontp_response_new(404, NULL, &response));
    OK(jsontp_response_message(response, &text, &len));
    CHECK(text_is(text, len, "Not Found"));
    OK(jsontp_response_reason(response, &text, &len));
    CHECK(text_is(text, len, "Not Found"));
    jsontp_response_free(response);

    jsontp_server_config *config;
    OK(jsontp_server_config_new(&config));
    CHECK(jsontp_server_config_set_continue_policy(config, 9) == JSONTP_INVALID_ARGUMENT);
    CHECK(jsontp_server_config_set_language(config, "english") == JSONTP_INVALID_ARGUMENT);
    CHECK(jsontp_server_config_set_max_pipelined(config, 0) == JSONTP_INVALID_ARGUMENT);
    jsontp_server_config_free(config);
    jsontp_client_config *client_config;
    OK(jsontp_client_config_new(&client_config));
    CHECK(jsontp_client_config_set_validation(client_config, 2) == JSONTP_INVALID_ARGUMENT);
    jsontp_client_config_free(client_config);

    jsontp_file_rules *rules = NULL;
    CHECK(jsontp_file_rules_new(true, NULL, "en-US,??", &rules) == JSONTP_INVALID_ARGUMENT && rules == NULL);
    char media[4];
    CHECK(jsontp_media_type_of("/a.json", media, sizeof media, &len) == JSONTP_BUFFER_TOO_SMALL);

    CHECK(strcmp(jsontp_result_name(JSONTP_USAGE), "JSONTP_USAGE") == 0);
}

static void test_usage(void) {
    jsontp_server *server;
    OK(jsontp_server_new(NULL, T0, &server));
    jsontp_response *response;
    OK(jsontp_response_new(200, NULL, &response));
    /* No such exchange yet. */
    CHECK(jsontp_server_send_response(server, 0, response, T0) == JSONTP_USAGE);
    CHECK(jsontp_server_accept_continue(server, 0, T0) == JSONTP_USAGE);
    CHECK(jsontp_server_send_content(server, 0, (const uint8_t *)"x", 1, T0) == JSONTP_USAGE);
    CHECK(jsontp_server_end_content(server, 0, T0) == JSONTP_USAGE);
    /* More consumed than pending. */
    CHECK(jsontp_server_consume_output(server, 1, T0) == JSONTP_INVALID_ARGUMENT);
    size_t room = 9;
    OK(jsontp_server_content_room(server, 0, &room));
    CHECK(room == 0);
    jsontp_response_free(response);

    /* Accessors that do not apply say so. */
    OK(jsontp_server_handle_timeout(server, T0 + 3600 * SECOND));
    jsontp_event *event;
    OK(jsontp_server_next_event(server, T0 + 3600 * SECOND, &event));
    const jsontp_request *request = NULL;
    CHECK(jsontp_event_request(event, &request) == JSONTP_NOT_APPLICABLE && request == NULL);
    const jsontp_error *error = NULL;
    CHECK(jsontp_event_error(event, &error) == JSONTP_NOT_APPLICABLE && error == NULL);
    uint64_t bytes = 3;
    CHECK(jsontp_event_bytes(event, &bytes) == JSONTP_NOT_APPLICABLE && bytes == 3);
    jsontp_event_free(event);
    /* Closed: nothing more may be sent. */
    jsontp_client *client;
    OK(jsontp_client_new(NULL, T0, &client));
    OK(jsontp_client_receive_eof(client, T0));
    jsontp_request *get;
    OK(jsontp_request_new("GET", "/", &get));
    uint64_t id = 77;
    jsontp_result result = jsontp_client_send_request(client, get, T0, &id);
    CHECK(result == JSONTP_USAGE && id == 77);
    jsontp_request_free(get);
    jsontp_client_free(client);
    jsontp_server_free(server);
    (void)errno;
}

int main(void) {
    test_null();
    test_invalid_values();
    test_usage();
    puts("test_misuse: ok");
    return 0;
}
