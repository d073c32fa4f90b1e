//! Routing over TCP: patterns, 404, 405 with `allowed-methods`, OPTIONS
//! (D11), nesting, the fallback, and large content as a stream (D19), on
//! every runtime with the same router.

use std::io::Read;
use std::sync::{Arc, Mutex};

use jsontp_protocol::app::{
    Content, FromRequestParts, Keys, Parts, Path, Refusal, Router, State, get, on, post, put,
};
use jsontp_protocol::io_adapters::client::ClientOptions;
use jsontp_protocol::io_adapters::client::blocking::Client;
use jsontp_protocol::io_adapters::server::{ServerOptions, SpoolOptions};
use jsontp_protocol::message::{Body, Headers, Method, Request, StatusCode};
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
    use jsontp_protocol::io_adapters::server::HeadCheck;
    use jsontp_protocol::machine::{ContinuePolicy, ServerConfig};

    let config = ServerConfig {
        continue_policy: ContinuePolicy::Ask,
        ..ServerConfig::default()
    };
    // As a Handler (std, mio): the router answers the handshake itself.
    let peer = jsontp_protocol::io_adapters::server::RequestInfo::new("127.0.0.1:1".parse().unwrap());
    let head = |method, path: &str| Request::new(method, path.parse().unwrap());
    let refused = |check| match check {
        HeadCheck::Refused(response) => response.status.code,
        other => panic!("not refused: {other:?}"),
    };
    assert_eq!(
        refused(board().check_head_of(&head(Method::Put, "/nowhere"), &peer)),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        refused(board().check_head_of(&head(Method::Put, "/upload"), &peer)),
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(
        board().check_head_of(&head(Method::Post, "/upload"), &peer),
        HeadCheck::Wanted
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

/// An administrator: the `authorization` header holds the right token.
struct Admin;

impl<S> FromRequestParts<S> for Admin {
    type Rejection = Refusal;

    fn from_request_parts(parts: &Parts<'_>, _state: &S) -> Result<Self, Refusal> {
        match parts.headers().authorization() {
            Some("s3cret") => Ok(Admin),
            Some(_) => Err(Refusal::unauthorized("the token is not the administrator's")),
            None => Err(Refusal::unauthorized("the `authorization` header is missing")),
        }
    }
}

#[derive(Deserialize)]
struct Note {
    #[allow(dead_code)]
    title: String,
}

/// Routes whose handlers' extractors decide a head: an upload for the
/// administrator, a touch that takes no content, a note of body keys.
fn guarded() -> Router {
    Router::new()
        .route(
            "/files/{id}",
            put(|_: Admin, Path(id): Path<u32>, content: Content| {
                format!("file {id}: {} bytes", content.len())
            }),
        )
        .route("/touch/{id}", put(|Path(id): Path<u32>| format!("touched {id}")))
        .route("/notes", post(|_: Admin, Keys(_): Keys<Note>| "noted"))
}

fn head(method: Method, path: &str, token: Option<&str>, keys: serde_json::Value) -> Request {
    let mut head = request(method, path, keys);
    if let Some(token) = token {
        head.headers = Headers::new().with_authorization(token.to_owned());
    }
    head
}

#[test]
fn the_handlers_extractors_decide_the_head_before_its_content() {
    use jsontp_protocol::io_adapters::server::{HeadCheck, RequestInfo};

    let router = guarded();
    let peer = RequestInfo::new("127.0.0.1:1".parse().unwrap());
    let check = |head: Request| router.check_head_of(&head, &peer);
    let refused = |check: HeadCheck| match check {
        HeadCheck::Refused(response) => (response.status.code, response.status.human_message),
        other => panic!("not refused: {other:?}"),
    };

    // A parts extractor that refuses refuses the head, in the handler's
    // argument order: the administrator first, then the path parameter.
    let (code, message) = refused(check(head(Method::Put, "/files/7", None, json!({}))));
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    assert!(message.contains("`authorization`"), "{message}");
    let (code, _) = refused(check(head(Method::Put, "/files/7", Some("guess"), json!({}))));
    assert_eq!(code, StatusCode::UNAUTHORIZED);
    let (code, message) = refused(check(head(Method::Put, "/files/x", Some("s3cret"), json!({}))));
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(message.contains("path parameter `id`"), "{message}");

    // Accepted: the content is kept for a handler that reads it, dropped
    // unstored for one that does not.
    assert_eq!(
        check(head(Method::Put, "/files/7", Some("s3cret"), json!({}))),
        HeadCheck::Wanted
    );
    assert_eq!(
        check(head(Method::Put, "/touch/7", None, json!({}))),
        HeadCheck::Unwanted
    );
    let (code, _) = refused(check(head(Method::Put, "/touch/x", None, json!({}))));
    assert_eq!(code, StatusCode::BAD_REQUEST);

    // Body keys are not the content: none is kept for a handler of body
    // keys. They are not checked at the head, which a handshake sends
    // without them (D10).
    assert_eq!(
        check(head(Method::Post, "/notes", Some("s3cret"), json!({}))),
        HeadCheck::Unwanted
    );
    let (code, _) = refused(check(head(Method::Post, "/notes", None, json!({}))));
    assert_eq!(code, StatusCode::UNAUTHORIZED);
}

#[test]
fn a_handshake_refused_by_an_extractor_never_sends_its_content() {
    use jsontp_protocol::machine::{ContinuePolicy, ServerConfig};

    let config = ServerConfig {
        continue_policy: ContinuePolicy::Ask,
        ..ServerConfig::default()
    };
    let options = || ServerOptions::default().with_config(config.clone());
    let mut servers: Vec<(String, crate::support::Running)> = RUNTIMES
        .iter()
        .map(|&runtime| (format!("{runtime:?}"), start(runtime, guarded(), options())))
        .collect();
    // Behind tower's layers on tokio, the router as the server's hooks.
    #[cfg(feature = "tower")]
    servers.push((
        "tokio behind a timeout layer".to_owned(),
        crate::support::start_hooked(
            tower::ServiceBuilder::new()
                .timeout(std::time::Duration::from_secs(10))
                .service(guarded()),
            guarded(),
            options(),
        ),
    ));
    for (served, server) in &servers {
        let asking = |token: Option<&str>| {
            let mut headers = Headers::new().with_expect_continue(true);
            if let Some(token) = token {
                headers = headers.with_authorization(token.to_owned());
            }
            Request::new(Method::Put, "/files/7".parse().unwrap())
                .with_headers(headers)
                .with_body(Body::text("x".repeat(1000)))
        };
        let mut client = Client::connect(server.addr, ClientOptions::default()).expect("connect");
        let refused = client.send(asking(None)).expect("answer");
        assert_eq!(refused.response.status.code, StatusCode::UNAUTHORIZED, "{served}");
        assert!(!refused.continued, "{served}: refused before the content");

        let mut client = Client::connect(server.addr, ClientOptions::default()).expect("connect");
        let accepted = client.send(asking(Some("s3cret"))).expect("answer");
        assert!(accepted.continued, "{served}");
        assert_eq!(
            accepted.response.body.as_text(),
            Some("file 7: 1000 bytes"),
            "{served}"
        );
    }
}

#[test]
#[should_panic(expected = "route patterns `/a/{x}` and `/a/{y}` conflict")]
fn two_names_for_one_segment_are_refused_naming_both_patterns() {
    let _: Router = Router::new()
        .route("/a/{x}", get(|| "x"))
        .route("/a/{y}", post(|| "y"));
}

#[test]
#[should_panic(expected = "route patterns `/{*a}` and `/{*b}` conflict")]
fn two_names_for_the_rest_are_refused_naming_both_patterns() {
    let _: Router = Router::new()
        .route("/{*a}", get(|| "a"))
        .route("/{*b}", get(|| "b"));
}

#[test]
#[should_panic(expected = "route patterns `/api/{id}/x` and `/api/{name}` conflict")]
fn a_nested_router_conflicting_with_a_route_is_refused_naming_both_patterns() {
    let _: Router = Router::new()
        .route("/api/{id}/x", get(|| "x"))
        .nest("/api", Router::new().route("/{name}", get(|| "name")));
}

#[test]
fn a_literal_branch_that_leads_nowhere_falls_back_to_a_parameter() {
    let router: Router = Router::new()
        .route("/a/{x}/c", get(|Path(x): Path<String>| format!("first {x}")))
        .route("/{y}/b/d", get(|Path(y): Path<String>| format!("second {y}")))
        .route(
            "/{y}/{*rest}",
            get(|Path((y, rest)): Path<(String, String)>| format!("{y}: {rest}")),
        );
    let server = start(crate::support::Runtime::Std, router, ServerOptions::default());
    let text = |path: &str| {
        ask(server.addr, request(Method::Get, path, json!({})))
            .body
            .as_text()
            .map(str::to_owned)
    };
    assert_eq!(text("/a/b/c").as_deref(), Some("first b"));
    // `/a/b/d` matches no `/a/{x}/c`: the `{y}` branch answers.
    assert_eq!(text("/a/b/d").as_deref(), Some("second a"));
    assert_eq!(text("/a/z/q").as_deref(), Some("a: z/q"));
}

#[test]
fn a_handshake_for_body_keys_is_accepted_though_its_first_request_has_none() {
    use jsontp_protocol::machine::{ContinuePolicy, ServerConfig};

    let config = ServerConfig {
        continue_policy: ContinuePolicy::Ask,
        ..ServerConfig::default()
    };
    for &runtime in RUNTIMES {
        let server = start(
            runtime,
            guarded(),
            ServerOptions::default().with_config(config.clone()),
        );
        // The client sends the handshake's first request with an empty
        // body (D10): the keys come with the full request.
        let mut note = request(Method::Post, "/notes", json!({"title": "t"}));
        note.headers = Headers::new()
            .with_expect_continue(true)
            .with_authorization("s3cret".to_owned());
        note.body = Body::text("x".repeat(1000))
            .with_extra("title", json!("t"))
            .expect("body key");
        let mut client = Client::connect(server.addr, ClientOptions::default()).expect("connect");
        let answered = client.send(note).expect("answer");
        assert!(answered.continued, "{runtime:?}");
        assert_eq!(answered.response.body.as_text(), Some("noted"), "{runtime:?}");
    }
}
