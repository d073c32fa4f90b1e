//! Routing over TCP: patterns, 404, 405 with `allowed-methods`, OPTIONS
//! (D11), nesting, the fallback, and large content as a stream (D19), on
//! every runtime with the same router.

use std::io::Read;
use std::sync::{Arc, Mutex};

use jsontp_protocol::app::{Content, Keys, Path, Refusal, Router, State, get, on, post};
use jsontp_protocol::io_adapters::client::ClientOptions;
use jsontp_protocol::io_adapters::client::blocking::Client;
use jsontp_protocol::io_adapters::server::{ServerOptions, SpoolOptions};
use jsontp_protocol::message::{Body, Method, Request, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::support::{RUNTIMES, allowed, ask, request, start};

type Board = Arc<Mutex<Vec<(String, String)>>>;

#[derive(Deserialize)]
struct NewPost {
    subject: String,
}

#[derive(Serialize)]
struct Created {
    id: usize,
}

/// A small board: posts per group, a file area, an admin area nested.
fn board() -> Router {
    let admin = Router::new()
        .route(
            "/stats",
            get(|State(board): State<Board>| format!("{} posts", board.lock().unwrap().len())),
        )
        .fallback(|| Refusal::not_found("no such admin page"));
    Router::new()
        .route(
            "/groups/{group}/posts",
            on(
                &[Method::Get, Method::Post],
                |State(board): State<Board>, Path(group): Path<String>, Keys(new): Keys<NewPost>| {
                    let mut board = board.lock().unwrap();
                    board.push((group, new.subject));
                    (StatusCode::CREATED, Keys(Created { id: board.len() - 1 }))
                },
            ),
        )
        .route(
            "/groups/{group}/posts/{id}",
            get(
                |State(board): State<Board>, Path((group, id)): Path<(String, usize)>| {
                    let board = board.lock().unwrap();
                    match board.get(id) {
                        Some((g, subject)) if *g == group => Ok(subject.clone()),
                        _ => Err(Refusal::not_found(format!("no post {id} in {group}"))),
                    }
                },
            ),
        )
        .route("/groups/new", get(|| "a literal segment wins over {group}"))
        .route(
            "/files/{*path}",
            get(|Path(path): Path<String>| format!("file {path}")),
        )
        .route(
            "/upload",
            post(|content: Content| {
                let mut reader = content.reader()?;
                let mut counted = 0u64;
                let mut buffer = [0u8; 8192];
                loop {
                    let n = reader.read(&mut buffer)?;
                    if n == 0 {
                        break;
                    }
                    counted += n as u64;
                }
                Ok::<_, Refusal>(format!("{counted} bytes, spooled: {}", content.is_spooled()))
            }),
        )
        .nest("/admin", admin)
        .with_state(Board::default())
}

#[test]
fn the_same_router_serves_on_every_runtime() {
    for &runtime in RUNTIMES {
        let server = start(runtime, board(), ServerOptions::default());
        let posted = ask(
            server.addr,
            request(Method::Post, "/groups/rust/posts", json!({"subject": "hello"})),
        );
        assert_eq!(posted.status.code, StatusCode::CREATED, "{runtime:?}: {posted:?}");
        assert_eq!(posted.body.extra()["id"], 0, "{runtime:?}");
        // GET with body keys too, as the NNNTP client sends.
        let again = ask(
            server.addr,
            request(Method::Get, "/groups/rust/posts", json!({"subject": "again"})),
        );
        assert_eq!(again.body.extra()["id"], 1, "{runtime:?}");

        let read = ask(
            server.addr,
            request(Method::Get, "/groups/rust/posts/0", json!({})),
        );
        assert_eq!(read.body.as_text(), Some("hello"), "{runtime:?}");
        let wrong_group = ask(server.addr, request(Method::Get, "/groups/go/posts/0", json!({})));
        assert_eq!(wrong_group.status.code, StatusCode::NOT_FOUND, "{runtime:?}");
        assert_eq!(wrong_group.status.human_message, "no post 0 in go");

        let literal = ask(server.addr, request(Method::Get, "/groups/new", json!({})));
        assert_eq!(
            literal.body.as_text(),
            Some("a literal segment wins over {group}")
        );
        let rest = ask(server.addr, request(Method::Get, "/files/a/b%20c.txt", json!({})));
        assert_eq!(rest.body.as_text(), Some("file a/b c.txt"), "{runtime:?}");

        let stats = ask(server.addr, request(Method::Get, "/admin/stats", json!({})));
        assert_eq!(stats.body.as_text(), Some("2 posts"), "{runtime:?}");
        let nested_fallback = ask(server.addr, request(Method::Get, "/admin/nothing", json!({})));
        assert_eq!(nested_fallback.status.human_message, "no such admin page");
    }
}

#[test]
fn unknown_paths_are_404_and_unserved_methods_405_with_allowed_methods() {
    for &runtime in RUNTIMES {
        let server = start(runtime, board(), ServerOptions::default());
        let missing = ask(server.addr, request(Method::Get, "/nowhere", json!({})));
        assert_eq!(missing.status.code, StatusCode::NOT_FOUND, "{runtime:?}");
        // A parameter never matches an empty segment, nor the rest nothing.
        let empty = ask(server.addr, request(Method::Get, "/files/", json!({})));
        assert_eq!(empty.status.code, StatusCode::NOT_FOUND, "{runtime:?}");

        let wrong = ask(
            server.addr,
            request(Method::Delete, "/groups/rust/posts/0", json!({})),
        );
        assert_eq!(wrong.status.code, StatusCode::METHOD_NOT_ALLOWED, "{runtime:?}");
        assert_eq!(allowed(&wrong), ["GET", "OPTIONS"], "{runtime:?}");

        // OPTIONS from the routes, and never 404 (D11).
        let options = ask(
            server.addr,
            request(Method::Options, "/groups/rust/posts", json!({})),
        );
        assert_eq!(options.status.code, StatusCode::OK, "{runtime:?}");
        assert_eq!(allowed(&options), ["GET", "POST", "OPTIONS"], "{runtime:?}");
        let nowhere = ask(server.addr, request(Method::Options, "/nowhere", json!({})));
        assert_eq!(nowhere.status.code, StatusCode::OK, "{runtime:?}");
        assert_eq!(allowed(&nowhere), ["OPTIONS"], "{runtime:?}");
    }
}

#[test]
fn large_content_reaches_the_handler_as_a_stream_not_a_413() {
    let size = 3 << 20;
    for &runtime in RUNTIMES {
        let options =
            ServerOptions::default().with_spool(SpoolOptions::default().with_memory_limit(64 << 10));
        let server = start(runtime, board(), options);
        let mut client = Client::connect(server.addr, ClientOptions::default()).expect("connect");
        let content = "x".repeat(size);
        let upload = Request::new(Method::Post, "/upload".parse().unwrap()).with_body(Body::text(content));
        let answer = client.send(upload).expect("answer").response;
        assert_eq!(answer.status.code, StatusCode::OK, "{runtime:?}: {answer:?}");
        assert_eq!(
            answer.body.as_text(),
            Some(format!("{size} bytes, spooled: true").as_str())
        );
        // Small content stays in memory, same handler.
        let small = Request::new(Method::Post, "/upload".parse().unwrap()).with_body(Body::text("abc"));
        let answer = client.send(small).expect("answer").response;
        assert_eq!(
            answer.body.as_text(),
            Some("3 bytes, spooled: false"),
            "{runtime:?}"
        );
    }
}

#[test]
#[should_panic(expected = "must be the last segment")]
fn a_rest_before_the_end_is_a_mistake_found_at_once() {
    let _: Router = Router::new().route("/files/{*path}/meta", get(|| "never"));
}

#[test]
fn a_handshake_for_a_path_or_method_not_served_is_refused_before_the_content() {
    use jsontp_protocol::io_adapters::server::Handler;
    use jsontp_protocol::machine::{ContinuePolicy, ServerConfig};
    use jsontp_protocol::message::Headers;

    let config = ServerConfig {
        continue_policy: ContinuePolicy::Ask,
        ..ServerConfig::default()
    };
    // As a Handler (std, mio): the router answers the handshake itself.
    let peer = jsontp_protocol::io_adapters::server::RequestInfo::new("127.0.0.1:1".parse().unwrap());
    let head = |method, path: &str| Request::new(method, path.parse().unwrap());
    let refused = board()
        .check_head(&head(Method::Put, "/nowhere"), &peer)
        .refusal()
        .unwrap();
    assert_eq!(refused.status.code, StatusCode::NOT_FOUND);
    let refused = board()
        .check_head(&head(Method::Put, "/upload"), &peer)
        .refusal()
        .unwrap();
    assert_eq!(refused.status.code, StatusCode::METHOD_NOT_ALLOWED);
    assert!(
        board()
            .check_head(&head(Method::Post, "/upload"), &peer)
            .refusal()
            .is_none()
    );

    for &runtime in RUNTIMES.iter().filter(|r| r.takes_handlers()) {
        let server = start(
            runtime,
            board(),
            ServerOptions::default().with_config(config.clone()),
        );
        let mut client = Client::connect(server.addr, ClientOptions::default()).expect("connect");
        let asking = |method, path: &str| {
            Request::new(method, path.parse().unwrap())
                .with_headers(Headers::new().with_expect_continue(true))
                .with_body(Body::text("x".repeat(1000)))
        };
        let refused = client.send(asking(Method::Put, "/upload")).expect("answer");
        assert_eq!(
            refused.response.status.code,
            StatusCode::METHOD_NOT_ALLOWED,
            "{runtime:?}"
        );
        assert!(!refused.continued, "{runtime:?}: refused before the content");
        let mut client = Client::connect(server.addr, ClientOptions::default()).expect("connect");
        let accepted = client.send(asking(Method::Post, "/upload")).expect("answer");
        assert!(accepted.continued, "{runtime:?}");
        assert_eq!(
            accepted.response.body.as_text(),
            Some("1000 bytes, spooled: false"),
            "{runtime:?}"
        );
    }
}

#[test]
fn d11_options_under_a_fallback_is_200_with_allowed_methods() {
    // A fallback answers every method but OPTIONS, which is never its 404:
    // what no route serves allows OPTIONS alone (D11).
    let with_fallback = Router::new()
        .route("/x", get(|| "x"))
        .fallback(|| Refusal::not_found("no such page"));
    for &runtime in RUNTIMES {
        for (router, path) in [(board(), "/admin/nothing"), (with_fallback.clone(), "/nothing")] {
            let server = start(runtime, router, ServerOptions::default());
            let options = ask(server.addr, request(Method::Options, path, json!({})));
            assert_eq!(
                options.status.code,
                StatusCode::OK,
                "{runtime:?} {path}: {options:?}"
            );
            assert_eq!(allowed(&options), ["OPTIONS"], "{runtime:?} {path}");
            // Every other method still reaches the fallback.
            let fallback = ask(server.addr, request(Method::Delete, path, json!({})));
            assert_eq!(fallback.status.code, StatusCode::NOT_FOUND, "{runtime:?} {path}");
            assert!(
                fallback.status.human_message.starts_with("no such"),
                "{runtime:?} {path}: {fallback:?}"
            );
        }
    }
}

#[test]
fn d7_a_capture_holding_a_backslash_is_400_naming_it() {
    // A capture is what a handler may join to a folder, where a backslash
    // may be a separator: refused, for every method, before any handler.
    for &runtime in RUNTIMES {
        let server = start(runtime, board(), ServerOptions::default());
        for (method, path, part) in [
            (Method::Get, r"/files/..\..\secret.txt", "path"),
            (Method::Get, "/files/a/..%5C..%5Csecret.txt", "path"),
            (Method::Options, r"/files/a\b", "path"),
            (Method::Delete, r"/files/a\b", "path"),
            (Method::Get, r"/groups/..\x/posts/0", "group"),
        ] {
            let refused = ask(server.addr, request(method, path, json!({})));
            assert_eq!(
                refused.status.code,
                StatusCode::BAD_REQUEST,
                "{runtime:?} {method} {path}: {refused:?}"
            );
            let said = &refused.status.human_message;
            assert!(said.contains("backslash"), "{said}");
            assert!(said.contains(&format!("`{part}`")), "{said}");
        }
        // A path with / only is served as before.
        let served = ask(server.addr, request(Method::Get, "/files/a/b.txt", json!({})));
        assert_eq!(served.body.as_text(), Some("file a/b.txt"), "{runtime:?}");
    }
}
