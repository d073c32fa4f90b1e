/* A jsontp file server on plain epoll, with `jsontp serve`'s flags and its
 * rules: the library's file rules judge every request (D5's order, D11,
 * D14, D17), this program only looks at the folder and moves bytes.
 *
 *   epoll_server [--root .] [--addr 127.0.0.1:8080] [--writable]
 *                [--token TOKEN] [--no-continue] [--language en-US,fr-FR]
 *
 * GET and POST send a file (a folder its index.html); files over 64 KiB
 * stream from disk within the room the connection gives. PUT writes a
 * temporary file beside the target, then renames it over: readers see the
 * old file or the new one. DELETE removes a file. OPTIONS lists the
 * methods. Nothing outside the root is reached: symlinks are followed only
 * while they stay inside it.
 *
 * One thread, one epoll set, level-triggered; the connection machine owns
 * the protocol, this loop owns the sockets and the clock. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jsontp.h"

#define PIECE (64 * 1024)         /* files larger than this stream (D19) */
#define LINGER_NS 1000000000ull   /* draining a closed connection's input */

#define MUST(call)                                                                \
    do {                                                                          \
        if ((call) != JSONTP_OK) {                                                \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, jsontp_last_error()); \
            abort();                                                              \
        }                                                                         \
    } while (0)

static char root[PATH_MAX];
static jsontp_file_rules *rules;

struct conn {
    int fd;
    jsontp_server *machine;
    /* SERVING, then PEER_ENDED once the peer shut its side (what it sent
     * is still answered, D1), LINGERING once the machine closed and its
     * output is out (drain input, then close), DONE to drop. */
    enum { SERVING, PEER_ENDED, LINGERING, DONE } phase;
    uint64_t linger_until;
    int file;               /* >= 0: a large file streaming as exchange `id` */
    uint64_t id;
    struct conn *next;
};

/* ---- the folder: what a path names, inside the root only ---- */

/* `path` with its symlinks followed into `out`, when that stays inside
 * the root. */
static int inside(const char *path, char *out) {
    char real[PATH_MAX];
    if (!realpath(path, real)) return 0;
    size_t n = strlen(root);
    if (strcmp(real, root) != 0 && !(strncmp(real, root, n) == 0 && real[n] == '/')) return 0;
    strcpy(out, real);
    return 1;
}

/* A resource path as plain names under the root (D7), or 0. */
static int relative(const char *path, size_t len, char *out) {
    size_t n = (size_t)snprintf(out, PATH_MAX, "%s", root);
    for (size_t i = 0; i < len;) {
        while (i < len && path[i] == '/') i++;
        size_t start = i;
        while (i < len && path[i] != '/') i++;
        size_t name = i - start;
        if (name == 0) break;
        if ((name == 1 && path[start] == '.') || (name == 2 && !memcmp(path + start, "..", 2)) ||
            memchr(path + start, 0, name) || n + 1 + name >= PATH_MAX)
            return 0;
        out[n++] = '/';
        memcpy(out + n, path + start, name);
        n += name;
        out[n] = 0;
    }
    return 1;
}

/* Whether bytes are UTF-8 text, fed in pieces; `*need` carries a
 * character cut between them, `*low`/`*high` its next byte's range. */
struct utf8 { int need; unsigned char low, high; };
static int utf8_feed(struct utf8 *s, const unsigned char *p, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = p[i];
        if (s->need) {
            if (c < s->low || c > s->high) return 0;
            s->need--, s->low = 0x80, s->high = 0xBF;
        } else if (c >= 0x80) {
            if (c >= 0xC2 && c <= 0xDF) s->need = 1;
            else if (c >= 0xE0 && c <= 0xEF) s->need = 2;
            else if (c >= 0xF0 && c <= 0xF4) s->need = 3;
            else return 0;
            s->low = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
            s->high = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        }
    }
    return 1;
}

/* ---- answers ---- */

static void send_answer(struct conn *c, uint64_t id, const jsontp_response *r) {
    if (jsontp_server_send_response(c->machine, id, r, jsontp_now_ns()) != JSONTP_OK)
        fprintf(stderr, "answer: %s\n", jsontp_last_error());
}

static jsontp_response *answer(uint16_t status, const char *message, const char *language) {
    jsontp_response *r;
    MUST(jsontp_response_new(status, message, &r));
    MUST(jsontp_response_set_header_string(r, "language", language));
    return r;
}

/* GET, POST: gather what the path holds, let the rules judge, send it. */
static void serve_read(struct conn *c, uint64_t id, const jsontp_request *request) {
    const char *path;
    size_t len;
    MUST(jsontp_request_path(request, &path, &len));
    char rel[PATH_MAX], real[PATH_MAX], media[64], name[PATH_MAX];
    snprintf(name, sizeof name, "%.*s", (int)len, path);
    MUST(jsontp_media_type_of(name, media, sizeof media, &len));
    jsontp_found found = {.kind = JSONTP_FOUND_MISSING};
    struct stat info = {0};
    unsigned char *content = NULL;
    size_t size = 0;
    int file = -1;
    if (relative(name, strlen(name), rel) && inside(rel, real)) {
        if (stat(real, &info) != 0) {
            if (errno != ENOENT) found = (jsontp_found){.kind = JSONTP_FOUND_CANNOT_OPEN, .os_error = errno};
            goto judge;
        }
        if (S_ISDIR(info.st_mode)) {
            char index[PATH_MAX + 16];
            snprintf(index, sizeof index, "%s/index.html", real);
            strcpy(media, "text/html");
            if (!inside(index, real) || stat(real, &info) != 0 || !S_ISREG(info.st_mode)) {
                found.folder = true;
                goto judge;
            }
        }
        if (!S_ISREG(info.st_mode)) {
            found.kind = JSONTP_FOUND_NOT_A_FILE;
            goto judge;
        }
        file = open(real, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        if (file < 0) {
            found = (jsontp_found){.kind = JSONTP_FOUND_CANNOT_OPEN, .os_error = errno};
            goto judge;
        }
        /* Read through once: a small file whole, a large one only for its
         * kind (UTF-8 text or not, D8); it streams from its start later. A
         * small file that grew past PIECE reads PIECE + 1 bytes: changed. */
        int large = info.st_size > PIECE;
        struct utf8 text = {0};
        int is_text = 1;
        ssize_t n = 0;
        content = malloc(PIECE + 1);
        for (size_t room; (room = large ? PIECE : PIECE + 1 - size) > 0;) {
            unsigned char *at = large ? content : content + size;
            if ((n = read(file, at, room)) <= 0) break;
            is_text = is_text && utf8_feed(&text, at, (size_t)n);
            size += (size_t)n;
        }
        struct stat after;
        if (n < 0) {
            found = (jsontp_found){.kind = JSONTP_FOUND_CANNOT_READ, .os_error = errno};
        } else if ((off_t)size != info.st_size || fstat(file, &after) != 0 ||
                   after.st_mtim.tv_sec != info.st_mtim.tv_sec || after.st_mtim.tv_nsec != info.st_mtim.tv_nsec) {
            found.kind = JSONTP_FOUND_CHANGED;
        } else {
            found = (jsontp_found){.kind = JSONTP_FOUND_FILE, .text = is_text && !text.need,
                                   .has_modified = true, .modified = info.st_mtim.tv_sec};
        }
    }
judge:;
    jsontp_verdict *verdict;
    jsontp_response *refusal;
    MUST(jsontp_file_rules_judge_read(rules, request, media, &found, &verdict, &refusal));
    if (refusal) {
        send_answer(c, id, refusal);
        jsontp_response_free(refusal);
    } else {
        const char *language, *type, *encoding;
        MUST(jsontp_verdict_language(verdict, &language, &len));
        MUST(jsontp_verdict_media(verdict, &type, &len));
        MUST(jsontp_verdict_encoding(verdict, &encoding, &len));
        jsontp_response *r = answer(200, "here is the file", language);
        MUST(jsontp_response_set_header_string(r, "content-type", type));
        if (info.st_size > PIECE) {
            /* Streamed: the head now, the pieces as the peer takes them. */
            MUST(jsontp_response_set_content(r, NULL, 0, encoding));
            MUST(jsontp_server_send_response_head(c->machine, id, r, jsontp_now_ns()));
            lseek(file, 0, SEEK_SET);
            c->file = file, c->id = id, file = -1;
        } else {
            MUST(jsontp_response_set_content(r, content, size, encoding));
            send_answer(c, id, r);
        }
        jsontp_response_free(r);
        jsontp_verdict_free(verdict);
    }
    free(content);
    if (file >= 0) close(file);
}

/* What PUT, DELETE and OPTIONS act on; `target` the path to act on. */
static jsontp_place place_of(const char *path, size_t len, char *target) {
    char rel[PATH_MAX], folder[PATH_MAX];
    jsontp_place nowhere = {.kind = JSONTP_PLACE_NOWHERE};
    if (!relative(path, len, rel)) return nowhere;
    if (strcmp(rel, root) == 0) return (jsontp_place){.kind = JSONTP_PLACE_FOLDER};
    char *slash = strrchr(rel, '/');
    *slash = 0;
    struct stat info;
    if (!inside(rel, folder) || stat(folder, &info) != 0 || !S_ISDIR(info.st_mode)) return nowhere;
    if (snprintf(target, PATH_MAX, "%s/%s", folder, slash + 1) >= PATH_MAX) return nowhere;
    if (lstat(target, &info) != 0) return (jsontp_place){.kind = JSONTP_PLACE_MISSING};
    if (S_ISDIR(info.st_mode)) return (jsontp_place){.kind = JSONTP_PLACE_FOLDER};
    int known = stat(target, &info) == 0;
    return (jsontp_place){.kind = JSONTP_PLACE_FILE, .has_modified = known, .modified = known ? info.st_mtim.tv_sec : 0};
}

/* The content into a temporary file beside the target, then renamed over
 * it, so that no reader sees half a file. 0, or the errno. */
static int write_file(const char *target, const jsontp_request *request) {
    char temporary[PATH_MAX + 32];
    snprintf(temporary, sizeof temporary, "%s", target);
    snprintf(strrchr(temporary, '/') + 1, 32, ".jsontp-put-XXXXXX");
    int fd = mkstemp(temporary);
    if (fd < 0) return errno;
    const uint8_t *data;
    size_t len, done = 0;
    MUST(jsontp_request_content(request, &data, &len));
    int error = 0;
    while (done < len && !error) {
        ssize_t n = write(fd, data + done, len - done);
        if (n < 0) error = errno;
        else done += (size_t)n;
    }
    if (!error && (fsync(fd) != 0 || fchmod(fd, 0644) != 0)) error = errno;
    if (close(fd) != 0 && !error) error = errno;
    if (!error && rename(temporary, target) != 0) error = errno;
    if (error) unlink(temporary);
    return error;
}

/* PUT, DELETE, OPTIONS. At a 100-continue handshake (D10) a write that
 * passes is accepted, anything else answered at once. */
static void serve_place(struct conn *c, uint64_t id, const jsontp_request *request, int handshake) {
    const char *path;
    size_t len;
    MUST(jsontp_request_path(request, &path, &len));
    char target[PATH_MAX] = "";
    jsontp_place place = place_of(path, len, target);
    jsontp_verdict *verdict;
    jsontp_response *refusal;
    /* Where the place is missing, a GET finds nothing there either. */
    MUST(jsontp_file_rules_judge_place(rules, request, &place, false, &verdict, &refusal));
    if (refusal) {
        send_answer(c, id, refusal);
        jsontp_response_free(refusal);
        return;
    }
    jsontp_action action;
    const char *language;
    MUST(jsontp_verdict_action(verdict, &action));
    MUST(jsontp_verdict_language(verdict, &language, &len));
    jsontp_response *r = NULL;
    if (action == JSONTP_ACTION_OPTIONS) {
        const jsontp_response *options;
        MUST(jsontp_verdict_response(verdict, &options));
        send_answer(c, id, options);
    } else if (action == JSONTP_ACTION_WRITE && handshake) {
        MUST(jsontp_server_accept_continue(c->machine, id, jsontp_now_ns()));
    } else if (action == JSONTP_ACTION_WRITE) {
        int error = write_file(target, request);
        if (error) MUST(jsontp_write_failed(error, language, &r));
        else r = answer(201, "the file was written", language);
    } else if (unlink(target) != 0) {
        MUST(jsontp_access_failed(errno, language, &r));
    } else {
        r = answer(204, "the file was deleted", language);
    }
    if (r) send_answer(c, id, r);
    jsontp_response_free(r);
    jsontp_verdict_free(verdict);
}

static void handle(struct conn *c, const jsontp_event *event) {
    jsontp_event_kind kind;
    MUST(jsontp_event_get_kind(event, &kind));
    if (kind != JSONTP_EVENT_REQUEST && kind != JSONTP_EVENT_CONTINUE_REQUESTED) return;
    uint64_t id;
    const jsontp_request *request;
    const char *method;
    size_t len;
    MUST(jsontp_event_id(event, &id));
    MUST(jsontp_event_request(event, &request));
    MUST(jsontp_request_method(request, &method, &len));
    int read = (len == 3 && !memcmp(method, "GET", 3)) || (len == 4 && !memcmp(method, "POST", 4));
    if (read && kind == JSONTP_EVENT_CONTINUE_REQUESTED)
        MUST(jsontp_server_accept_continue(c->machine, id, jsontp_now_ns())); /* judged whole */
    else if (read)
        serve_read(c, id, request);
    else
        serve_place(c, id, request, kind == JSONTP_EVENT_CONTINUE_REQUESTED);
}

/* ---- the loop's side: bytes, events, interest, timers ---- */

/* Takes events, streams file pieces and writes until nothing moves; then
 * says what the socket is waited on for. */
static void progress(int ep, struct conn *c) {
    uint64_t now = jsontp_now_ns();
    for (int moved = 1; moved && c->phase < LINGERING;) {
        moved = 0;
        jsontp_event *event;
        while (c->file < 0 && jsontp_server_next_event(c->machine, now, &event) == JSONTP_OK) {
            handle(c, event);
            jsontp_event_free(event);
            moved = 1;
        }
        size_t room;
        while (c->file >= 0 && jsontp_server_content_room(c->machine, c->id, &room) == JSONTP_OK && room > 0) {
            static uint8_t piece[PIECE];
            ssize_t n = read(c->file, piece, room < PIECE ? room : PIECE);
            if (n > 0) {
                MUST(jsontp_server_send_content(c->machine, c->id, piece, (size_t)n, now));
                continue;
            }
            if (n == 0) MUST(jsontp_server_end_content(c->machine, c->id, now));
            else MUST(jsontp_server_abort_content(c->machine, c->id, now));
            close(c->file);
            c->file = -1;
            moved = 1;
        }
        const uint8_t *pending;
        size_t len;
        MUST(jsontp_server_pending_output(c->machine, &pending, &len));
        if (len > 0) {
            ssize_t n = send(c->fd, pending, len, MSG_NOSIGNAL);
            if (n > 0) {
                MUST(jsontp_server_consume_output(c->machine, (size_t)n, now));
                moved = 1;
            }
        }
    }
    bool wants_read, closed;
    const uint8_t *pending;
    size_t len;
    MUST(jsontp_server_wants_read(c->machine, &wants_read));
    MUST(jsontp_server_is_closed(c->machine, &closed));
    MUST(jsontp_server_pending_output(c->machine, &pending, &len));
    if (closed && len == 0 && c->phase < LINGERING) {
        /* Shut our side, then read what the peer still sends for a moment:
         * closing with unread input would reset the connection. */
        shutdown(c->fd, SHUT_WR);
        c->phase = LINGERING;
        c->linger_until = now + LINGER_NS;
    }
    struct epoll_event interest = {.data.ptr = c};
    interest.events = (c->phase == LINGERING || (c->phase == SERVING && wants_read) ? EPOLLIN : 0) |
                      (c->phase < LINGERING && len > 0 ? EPOLLOUT : 0);
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &interest);
}

/* Reads what the socket has; 0 when the connection is done with. */
static int receive(struct conn *c) {
    static uint8_t buf[64 * 1024];
    ssize_t n = read(c->fd, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 1;
    if (c->phase == LINGERING) return n > 0;
    if (n < 0) return 0;
    uint64_t now = jsontp_now_ns();
    if (n == 0) {
        c->phase = PEER_ENDED;
        MUST(jsontp_server_receive_eof(c->machine, now));
    } else {
        MUST(jsontp_server_receive_data(c->machine, buf, (size_t)n, now));
    }
    return 1;
}

static uint64_t deadline_of(struct conn *c) {
    uint64_t deadline;
    if (c->phase == LINGERING) return c->linger_until;
    MUST(jsontp_server_poll_timeout(c->machine, &deadline));
    return deadline;
}

static void drop(struct conn **link) {
    struct conn *c = *link;
    *link = c->next;
    if (c->file >= 0) close(c->file);
    close(c->fd);
    jsontp_server_free(c->machine);
    free(c);
}

int main(int argc, char **argv) {
    const char *root_arg = ".", *addr = "127.0.0.1:8080", *token = NULL, *languages = NULL;
    int writable = 0, no_continue = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--writable")) writable = 1;
        else if (!strcmp(argv[i], "--no-continue")) no_continue = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--root")) root_arg = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--addr")) addr = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--token")) token = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--language")) languages = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--root DIR] [--addr HOST:PORT] [--writable] [--token TOKEN] "
                            "[--no-continue] [--language L1,L2]\n", argv[0]);
            return 2;
        }
    }
    if (!realpath(root_arg, root)) {
        perror(root_arg);
        return 2;
    }
    if (jsontp_file_rules_new(writable || token, token, languages, &rules) != JSONTP_OK) {
        fprintf(stderr, "%s\n", jsontp_last_error());
        return 2;
    }
    /* The connections' language is the first offered (D18). */
    char language[64] = "en-US";
    if (languages) sscanf(languages, " %63[^, ]", language);
    jsontp_server_config *config;
    MUST(jsontp_server_config_new(&config));
    MUST(jsontp_server_config_set_continue_policy(config, no_continue ? JSONTP_CONTINUE_REFUSE : JSONTP_CONTINUE_ASK));
    if (jsontp_server_config_set_language(config, language) != JSONTP_OK) {
        fprintf(stderr, "%s\n", jsontp_last_error());
        return 2;
    }

    char host[256];
    int port;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    if (sscanf(addr, "%255[^:]:%d", host, &port) != 2 || inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        fprintf(stderr, "--addr %s is not IPv4-ADDRESS:PORT\n", addr);
        return 2;
    }
    sa.sin_port = htons((uint16_t)port);
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(listener, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(listener, 512) != 0) {
        perror(addr);
        return 1;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event interest = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, listener, &interest);
    printf("serving %s on %s, %s\n", root, addr,
           !(writable || token) ? "read-only" : token ? "writable with the token" : "writable by anyone");
    fflush(stdout);

    struct conn *conns = NULL;
    for (;;) {
        /* Sleep until a socket is ready or the earliest timer is due. */
        uint64_t now = jsontp_now_ns(), earliest = UINT64_MAX;
        for (struct conn *c = conns; c; c = c->next) {
            uint64_t d = deadline_of(c);
            if (d < earliest) earliest = d;
        }
        int wait = earliest == UINT64_MAX ? -1 : earliest <= now ? 0 : (int)((earliest - now) / 1000000 + 1);
        struct epoll_event ready[64];
        int n = epoll_wait(ep, ready, 64, wait);
        for (int i = 0; i < n; i++) {
            struct conn *c = ready[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    c = calloc(1, sizeof *c);
                    c->fd = fd, c->file = -1, c->next = conns, conns = c;
                    MUST(jsontp_server_new(config, jsontp_now_ns(), &c->machine));
                    struct epoll_event in = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &in);
                }
                continue;
            }
            if ((ready[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !receive(c)) c->phase = DONE;
            else if (c->phase < LINGERING) progress(ep, c);
        }
        now = jsontp_now_ns();
        for (struct conn **link = &conns; *link;) {
            struct conn *c = *link;
            if (c->phase != DONE && deadline_of(c) <= now) {
                if (c->phase == LINGERING) c->phase = DONE;
                else {
                    MUST(jsontp_server_handle_timeout(c->machine, now));
                    progress(ep, c);
                }
            }
            if (c->phase == DONE) drop(link);
            else link = &c->next;
        }
    }
}
