//! The tokio server serving tower services: `async` handlers, tower's
//! layers in front of a router, errors and panics answered, the
//! connection still correct afterwards.

use jsontp_protocol::io_adapters::server::Handled;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use jsontp_protocol::app::{Keys, Path, Router, State, get, post};
use jsontp_protocol::io_adapters::server::{Incoming, Reply, ServerOptions};
use jsontp_protocol::message::{Method, Response, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tower::ServiceBuilder;

use crate::support::{client, request, start_hooked, start_service};

/// The `human-message` of a `504`: the outcome is unknown (D13).
const STOPPED_WAITING: &str = "the server stopped waiting for its application, which may still finish: \
                               the request may or may not have been applied";

#[derive(Serialize)]
struct Waited {
    waited_ms: u64,
}

/// Counts the slow handlers that ran to their end.
#[derive(Clone, Default)]
struct Finished(Arc<AtomicUsize>);

async fn slow(State(finished): State<Finished>, Path(ms): Path<u64>) -> Keys<Waited> {
    // A tokio timer: this future needs the runtime, which a handler run
    // with block_on on a pool thread would not have.
    tokio::time::sleep(Duration::from_millis(ms)).await;
    finished.0.fetch_add(1, Ordering::SeqCst);
    Keys(Waited { waited_ms: ms })
}

async fn panics() -> &'static str {
    panic!("the handler fell over")
}

fn router(finished: Finished) -> Router {
    Router::new()
        .route("/sleep/{ms}", get(slow))
        .route("/panic", get(panics))
        .route(
            "/blocking",
            get(|| {
                std::thread::sleep(Duration::from_millis(20));
                "blocked a pool thread, not the runtime"
            }),
        )
        .with_state(finished)
}

#[test]
fn a_slow_async_handler_gets_the_timeout_layers_answer_and_the_connection_goes_on() {
    let finished = Finished::default();
    let service = ServiceBuilder::new()
        .timeout(Duration::from_millis(300))
        .service(router(finished.clone()));
    let server = start_service(service, ServerOptions::default());
    let mut client = client(server.addr);

    let quick = client
        .send(request(Method::Get, "/sleep/10", json!({})))
        .expect("answer");
    assert_eq!(quick.response.status.code, StatusCode::OK);
    assert_eq!(quick.response.body.extra()["waited_ms"], 10);

    let started = Instant::now();
    let slow = client
        .send(request(Method::Get, "/sleep/5000", json!({})))
        .expect("answer");
    // The handler had the request: whether it would have been applied is
    // unknown, and the answer says so rather than "try again" (D13).
    assert_eq!(slow.response.status.code, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(slow.response.status.human_message, STOPPED_WAITING);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    // The same connection answers the next request, in order (D2).
    let after = client
        .send(request(Method::Get, "/sleep/1", json!({})))
        .expect("answer");
    assert_eq!(after.response.status.code, StatusCode::OK);
    assert_eq!(after.response.body.extra()["waited_ms"], 1);
    assert!(!client.is_closed());
    // The timed-out future was dropped, not left running.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(finished.0.load(Ordering::SeqCst), 2);

    // Pipelined: a slow one between two quick ones keeps its place.
    let answers = client.send_all([
        request(Method::Get, "/sleep/1", json!({})),
        request(Method::Get, "/sleep/4000", json!({})),
        request(Method::Get, "/sleep/2", json!({})),
    ]);
    let codes: Vec<u16> = answers
        .into_iter()
        .map(|a| a.expect("answer").response.status.code.as_u16())
        .collect();
    assert_eq!(codes, [200, 504, 200]);
}

#[test]
fn a_panicking_handler_is_500_and_a_blocking_one_runs_beside_async_ones() {
    let server = start_service(router(Finished::default()), ServerOptions::default());
    let mut client = client(server.addr);
    let panicked = client
        .send(request(Method::Get, "/panic", json!({})))
        .expect("answer");
    assert_eq!(panicked.response.status.code, StatusCode::INTERNAL_SERVER_ERROR);
    let blocking = client
        .send(request(Method::Get, "/blocking", json!({})))
        .expect("answer");
    assert_eq!(
        blocking.response.body.as_text(),
        Some("blocked a pool thread, not the runtime")
    );
}

#[test]
fn load_shedding_in_front_of_a_concurrency_limit_answers_503_to_the_excess() {
    let service = ServiceBuilder::new()
        .load_shed()
        .concurrency_limit(1)
        .service(router(Finished::default()));
    let server = start_service(service, ServerOptions::default());
    let addr = server.addr;
    // One connection holds the only slot; another asks meanwhile.
    let holder = std::thread::spawn(move || {
        let mut client = client(addr);
        client
            .send(request(Method::Get, "/sleep/1500", json!({})))
            .expect("answer")
    });
    std::thread::sleep(Duration::from_millis(300));
    let shed = client(addr)
        .send(request(Method::Get, "/sleep/1", json!({})))
        .expect("answer");
    assert_eq!(shed.response.status.code, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        shed.response.status.human_message,
        "the server is overloaded; try again later"
    );
    let held = holder.join().expect("holder");
    assert_eq!(held.response.status.code, StatusCode::OK);
}

#[test]
fn any_service_of_requests_is_served_and_its_errors_are_500() {
    // A service written by hand, no router: it fails `/fail` with an
    // error of its own.
    let service = tower::service_fn(|incoming: Incoming| async move {
        let path = incoming.request.resource.path().to_owned();
        if path == "/fail" {
            return Err(std::io::Error::other("failed on purpose"));
        }
        Ok::<Reply, std::io::Error>(Response::ok(format!("served {path}")).into())
    });
    let server = start_service(service, ServerOptions::default());
    let mut client = client(server.addr);
    let served = client
        .send(request(Method::Get, "/ab", json!({})))
        .expect("answer");
    assert_eq!(served.response.status.human_message, "served /ab");
    let failed = client
        .send(request(Method::Get, "/fail", json!({})))
        .expect("answer");
    assert_eq!(failed.response.status.code, StatusCode::INTERNAL_SERVER_ERROR);
    let again = client
        .send(request(Method::Get, "/cd", json!({})))
        .expect("answer");
    assert_eq!(again.response.status.human_message, "served /cd");
}

#[test]
fn a_shutdown_does_not_wait_past_its_deadline_for_a_slow_async_handler() {
    let finished = Finished::default();
    let options = ServerOptions::default().with_shutdown_timeout(Duration::from_millis(500));
    let server = start_service(router(finished.clone()), options);
    let addr = server.addr;
    let asking =
        std::thread::spawn(move || client(addr).send(request(Method::Get, "/sleep/30000", json!({}))));
    // A quick exchange on another connection, finished before the shutdown.
    let mut quick = client(addr);
    let answer = quick
        .send(request(Method::Get, "/sleep/1", json!({})))
        .expect("answer");
    assert_eq!(answer.response.status.code, StatusCode::OK);
    std::thread::sleep(Duration::from_millis(300));

    let took = server.shutdown_and_join();
    assert!(took < Duration::from_secs(5), "the server took {took:?} to stop");
    assert!(
        took >= Duration::from_millis(400),
        "it waited for the deadline: {took:?}"
    );
    // The slow exchange was cut short: the connection closed unanswered.
    assert!(asking.join().expect("asking").is_err());
    assert_eq!(finished.0.load(Ordering::SeqCst), 1);
}

/// A router behind a layer, with a method for each answer a handshake can
/// get: `POST /upload` takes content; `PUT` there is `405`, any other
/// path `404`.
fn uploads() -> (
    Router,
    impl tower::Service<Incoming, Response = Reply, Error = tower::BoxError, Future: Send>
    + Clone
    + Send
    + 'static,
) {
    use jsontp_protocol::app::{Content, post};
    let router = Router::new().route(
        "/upload",
        post(|content: Content| format!("{} bytes", content.len())),
    );
    let service = ServiceBuilder::new()
        .timeout(Duration::from_secs(10))
        .service(router.clone());
    (router, service)
}

#[test]
fn a_router_behind_layers_refuses_a_handshake_before_the_content() {
    // D10: served as a tower service with itself as the hooks, the router
    // refuses a path it does not serve (404) and a method its route does
    // not serve (405) before the client sends the content, as it does on
    // the std and mio servers.
    use jsontp_protocol::io_adapters::client::ClientOptions;
    use jsontp_protocol::io_adapters::client::blocking::Client;
    use jsontp_protocol::machine::{ContinuePolicy, ServerConfig};
    use jsontp_protocol::message::{Body, Headers, Request};
    let config = ServerConfig {
        continue_policy: ContinuePolicy::Ask,
        ..ServerConfig::default()
    };
    let (router, service) = uploads();
    let server = start_hooked(service, router, ServerOptions::default().with_config(config));
    let asking = |method, path: &str| {
        Request::new(method, path.parse().unwrap())
            .with_headers(Headers::new().with_expect_continue(true))
            .with_body(Body::text("x".repeat(100_000)))
    };
    for (method, path, status) in [
        (Method::Put, "/nowhere", StatusCode::NOT_FOUND),
        (Method::Put, "/upload", StatusCode::METHOD_NOT_ALLOWED),
    ] {
        let mut client = Client::connect(server.addr, ClientOptions::default()).expect("connect");
        let refused = client.send(asking(method, path)).expect("answer");
        assert_eq!(refused.response.status.code, status, "{method} {path}");
        assert!(!refused.continued, "{method} {path}: refused before the content");
    }
    let mut client = Client::connect(server.addr, ClientOptions::default()).expect("connect");
    let accepted = client.send(asking(Method::Post, "/upload")).expect("answer");
    assert!(accepted.continued);
    assert_eq!(accepted.response.body.as_text(), Some("100000 bytes"));
}

/// Hooks that ask the router about each head, and keep an access log of
/// their own.
#[derive(Clone)]
struct Logged {
    router: Router,
    log: Arc<std::sync::Mutex<Vec<(u16, String, bool)>>>,
}

impl jsontp_protocol::io_adapters::server::Handler for Logged {
    fn respond(&self, incoming: Incoming) -> Handled {
        self.router.respond(incoming)
    }

    fn check_head(
        &self,
        head: &jsontp_protocol::message::Request,
        info: &jsontp_protocol::io_adapters::server::RequestInfo,
    ) -> jsontp_protocol::io_adapters::server::HeadCheck {
        self.router.check_head(head, info)
    }

    fn log_exchange(&self, record: &jsontp_protocol::io_adapters::server::AccessRecord<'_>) {
        let line = (
            record.status.as_u16(),
            record.resource.to_owned(),
            record.complete,
        );
        self.log.lock().expect("log").push(line);
    }
}

#[test]
fn the_hooks_of_a_service_are_told_every_response_once_it_has_left() {
    // The access record of a service's answers, its refusals and the
    // connection's own error responses, as a handler's on std and mio.
    let (router, service) = uploads();
    let hooks = Logged {
        router,
        log: Arc::default(),
    };
    let server = start_hooked(service, hooks.clone(), ServerOptions::default());
    let mut client = client(server.addr);
    let posted = client
        .send(request(Method::Post, "/upload", json!({})))
        .expect("answer");
    assert_eq!(posted.response.status.code, StatusCode::OK);
    let missing = client
        .send(request(Method::Get, "/nowhere", json!({})))
        .expect("answer");
    assert_eq!(missing.response.status.code, StatusCode::NOT_FOUND);
    // Not a request (D5 level 3): the connection answers it itself.
    let mut raw = std::net::TcpStream::connect(server.addr).expect("connect");
    std::io::Write::write_all(&mut raw, b"{\"jsontp\":\"1.0\"}\n").expect("write");
    let mut answer = Vec::new();
    raw.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    while !answer.ends_with(b"\n") {
        let mut byte = [0u8; 1024];
        match std::io::Read::read(&mut raw, &mut byte) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&byte[..n]),
        }
    }
    assert!(String::from_utf8_lossy(&answer).contains("\"code\":400"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while hooks.log.lock().expect("log").len() < 3 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut log = hooks.log.lock().expect("log").clone();
    log.sort();
    assert_eq!(
        log,
        [
            (200, "/upload".to_owned(), true),
            (400, String::new(), true),
            (404, "/nowhere".to_owned(), true)
        ]
    );
}

/// Counts the blocking handlers running and the most at once, and which
/// requests (by their key `n`) reached one.
#[derive(Clone, Default)]
struct Work {
    running: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    ran: Arc<Mutex<Vec<u64>>>,
}

#[derive(Deserialize)]
struct Numbered {
    n: u64,
}

fn work(State(work): State<Work>, Keys(Numbered { n }): Keys<Numbered>) -> StatusCode {
    work.ran.lock().unwrap().push(n);
    let now = work.running.fetch_add(1, Ordering::SeqCst) + 1;
    work.most.fetch_max(now, Ordering::SeqCst);
    // A database that is busy: far longer than the timeout.
    std::thread::sleep(Duration::from_millis(1000));
    work.running.fetch_sub(1, Ordering::SeqCst);
    StatusCode::CREATED
}

#[test]
fn under_a_timeout_no_more_blocking_handlers_run_than_places_and_each_answer_says_whether_one_ran() {
    let state = Work::default();
    let router = Router::new().route("/work", post(work)).with_state(state.clone());
    // The limit lets four through; the server has places for two. A
    // timed-out request gives its permit back, but a handler that runs on
    // keeps its place.
    let service = ServiceBuilder::new()
        .timeout(Duration::from_millis(250))
        .concurrency_limit(4)
        .service(router);
    let server = start_service(service, ServerOptions::default().with_max_handlers(2));
    let addr = server.addr;
    let askers: Vec<_> = (0..8u64)
        .map(|n| {
            std::thread::spawn(move || {
                let answer = client(addr)
                    .send(request(Method::Post, "/work", json!({ "n": n })))
                    .expect("answer");
                (n, answer.response.status)
            })
        })
        .collect();
    let answers: Vec<_> = askers.into_iter().map(|a| a.join().expect("asker")).collect();
    // Every handler that began has ended; none begins later.
    let waited = Instant::now();
    while state.running.load(Ordering::SeqCst) > 0 {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "handlers still running"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));

    let most = state.most.load(Ordering::SeqCst);
    assert!(most <= 2, "{most} blocking handlers ran at once");
    let ran = state.ran.lock().unwrap().clone();
    let (mut unknown, mut refused) = (0, 0);
    for (n, status) in &answers {
        match status.code {
            // A handler had it: the outcome is unknown (D13).
            StatusCode::GATEWAY_TIMEOUT => {
                assert!(
                    ran.contains(n),
                    "request {n} answered 504 never reached a handler"
                );
                assert_eq!(status.human_message, STOPPED_WAITING);
                unknown += 1;
            }
            // Never handed to a handler, and never will be: a retry is safe.
            StatusCode::SERVICE_UNAVAILABLE => {
                assert!(!ran.contains(n), "request {n} answered 503 reached a handler");
                assert_eq!(
                    status.human_message,
                    "the server was too busy to begin this request in time, and never did; try again later"
                );
                refused += 1;
            }
            other => panic!("request {n}: {other:?}"),
        }
    }
    assert!(unknown >= 1 && refused >= 1, "{answers:?}");
    assert_eq!(
        ran.len(),
        unknown,
        "every request that reached a handler was answered 504"
    );
}

/// Tells when it is dropped: when the future that holds it is cancelled.
struct Dropped(mpsc::Sender<&'static str>);

impl Drop for Dropped {
    fn drop(&mut self) {
        let _ = self.0.send("dropped");
    }
}

/// What an awaiting handler tells the test.
#[derive(Clone)]
struct Tell(Arc<Mutex<mpsc::Sender<&'static str>>>);

async fn awaits(State(tell): State<Tell>) -> &'static str {
    let sender = tell.0.lock().unwrap().clone();
    let _dropped = Dropped(sender.clone());
    let _ = sender.send("began");
    tokio::time::sleep(Duration::from_secs(30)).await;
    "finished"
}

/// A request as it goes on the wire.
fn wire(resource: &str) -> String {
    json!({
        "jsontp": "1.0", "type": "request", "resource": resource, "method": "GET",
        "headers": {}, "body": {"content": "", "encoding": "identity"}
    })
    .to_string()
        + "\n"
}

/// The next `count` responses on `stream`, as JSON.
fn read_answers(stream: &mut TcpStream, count: usize) -> Vec<serde_json::Value> {
    let mut bytes = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let values: Vec<_> = serde_json::Deserializer::from_slice(&bytes)
            .into_iter::<serde_json::Value>()
            .filter_map(Result::ok)
            .collect();
        if values.len() >= count {
            return values;
        }
        let n = stream
            .read(&mut chunk)
            .expect("an answer within the read timeout");
        assert!(n > 0, "closed after {} answers", values.len());
        bytes.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn a_peer_that_resets_the_connection_cancels_the_async_handler_at_once() {
    let (tell, told) = mpsc::channel();
    let router = Router::new()
        .route("/await", get(awaits))
        .with_state(Tell(Arc::new(Mutex::new(tell))));
    let server = start_service(router, ServerOptions::default());
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    stream.write_all(wire("/await").as_bytes()).expect("send");
    assert_eq!(told.recv_timeout(Duration::from_secs(5)), Ok("began"));
    // Closed with a reset: the peer is gone for certain.
    socket2::SockRef::from(&stream)
        .set_linger(Some(Duration::ZERO))
        .expect("linger");
    drop(stream);
    assert_eq!(
        told.recv_timeout(Duration::from_secs(1)),
        Ok("dropped"),
        "the handler's future was not dropped when its peer left"
    );
}

#[test]
fn a_half_closed_peer_still_gets_its_answer_and_bytes_sent_meanwhile_are_kept() {
    let server = start_service(router(Finished::default()), ServerOptions::default());
    let mut stream = TcpStream::connect(server.addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    // The second request arrives while the first one's handler works: it
    // is read then, and answered after it, in order (D2).
    stream.write_all(wire("/sleep/400").as_bytes()).expect("send");
    std::thread::sleep(Duration::from_millis(150));
    stream.write_all(wire("/sleep/1").as_bytes()).expect("send");
    // Then the peer ends its side, and waits (D1).
    std::thread::sleep(Duration::from_millis(50));
    stream.shutdown(Shutdown::Write).expect("half-close");
    let answers = read_answers(&mut stream, 2);
    let waited: Vec<_> = answers.iter().map(|a| a["body"]["waited_ms"].clone()).collect();
    assert_eq!(waited, [json!(400), json!(1)]);
}
