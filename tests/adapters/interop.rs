//! Interoperability with the published implementation, the crates.io crate
//! `jsontp` 0.1.3 (a dev-dependency renamed `jsontp_ref`), both ways over
//! loopback.
//!
//! What it does differently (see docs/CLIENT.md):
//! - its client writes one request with no newline, never half-closes, and
//!   reads until a read returns fewer than 1024 bytes (D1, D2);
//! - its server answers one request per connection and closes; its
//!   responses say `1.0-rc1`, carry no headers at all (no `date`, no
//!   `language`), and its 404 has an empty `encoding` (D13).

use jsontp_protocol::io_adapters::server::{Handled, Incoming};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::reference_get::reference_get;
use jsontp_protocol::io_adapters::client::blocking::Client;
use jsontp_protocol::io_adapters::client::{ClientError, ClientOptions};
use jsontp_protocol::message::{Forgiven, Method, Request, StatusCode};
use jsontp_ref::server::{Body as RefBody, JsontpRequest, Language, Response as RefResponse, Server};

const LIMIT: Duration = Duration::from_secs(10);

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// A valid request as raw text, for probing a server.
fn raw_get(resource: &str) -> String {
    format!(
        r#"{{"jsontp":"1.0","type":"request","resource":"{resource}","method":"GET","headers":{{}},"body":{{"content":"","encoding":"identity"}}}}"#
    )
}

// ---------------------------------------------------------------------------
// Our client against the reference server.
// ---------------------------------------------------------------------------

fn reference_hello(request: JsontpRequest) -> RefResponse {
    // The reference refuses empty content with a 400 of its own.
    request.to_response(
        RefBody::new("hello from the reference", "identity", None),
        200,
        None,
        Language::default(),
        None,
    )
}

/// The reference server on a free port, started once for this file; its
/// `start` blocks forever, so it lives on its own thread until the test
/// process ends.
fn reference_server() -> u16 {
    static PORT: OnceLock<u16> = OnceLock::new();
    *PORT.get_or_init(|| {
        let port = free_port();
        thread::spawn(move || {
            let mut server = Server::new("reference", "127.0.0.1", port);
            server.route("/hello", reference_hello);
            server.start();
        });
        // Ready when it answers a whole request (a bare connect would make
        // its handler thread panic on an empty read).
        // Give it time to bind before probing: a connect to a port nobody
        // listens on can, rarely, connect to itself and hold the port.
        thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        loop {
            assert!(started.elapsed() < LIMIT, "the reference server did not start");
            if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
                if stream.write_all(raw_get("/hello").as_bytes()).is_ok() {
                    let mut answer = Vec::new();
                    let _ = stream.read_to_end(&mut answer);
                    if answer.windows(8).any(|w| w == b"response") {
                        break;
                    }
                }
            }
            thread::sleep(Duration::from_millis(50));
        }
        port
    })
}

fn options() -> ClientOptions {
    ClientOptions {
        read_timeout: Some(LIMIT),
        exchange_timeout: Some(LIMIT),
        ..ClientOptions::default()
    }
}

fn get(resource: &str) -> Request {
    Request::new(Method::Get, resource.parse().expect("resource"))
}

#[test]
fn our_lenient_client_gets_the_content_and_reports_what_it_forgave() {
    let port = reference_server();
    let mut client = Client::connect(format!("127.0.0.1:{port}"), options().lenient()).expect("connect");
    let answer = client.send(get("/hello")).expect("a forgiven answer");
    assert_eq!(answer.response.status.code, StatusCode::OK);
    assert_eq!(answer.response.body.as_text(), Some("hello from the reference"));
    assert_eq!(answer.response.version.to_string(), "1.0-rc1");
    assert!(
        answer.forgiven.contains(&Forgiven::MissingDate),
        "{:?}",
        answer.forgiven
    );
    assert!(
        answer.forgiven.contains(&Forgiven::MissingLanguage),
        "{:?}",
        answer.forgiven
    );
    // It closes after one answer: the connection cannot be reused.
    let second = client.send(get("/hello"));
    assert!(
        matches!(
            second,
            Err(ClientError::ConnectionClosed | ClientError::ClosedEarly { .. })
        ),
        "{second:?}"
    );
}

#[test]
fn our_lenient_client_reads_its_404_with_an_empty_encoding() {
    let port = reference_server();
    let mut client = Client::connect(format!("127.0.0.1:{port}"), options().lenient()).expect("connect");
    let answer = client.send(get("/missing")).expect("a forgiven answer");
    assert_eq!(answer.response.status.code, StatusCode::NOT_FOUND);
    assert!(answer.response.body.content().is_empty());
    assert!(
        answer.forgiven.contains(&Forgiven::EmptyEncoding),
        "{:?}",
        answer.forgiven
    );
}

#[test]
fn our_strict_client_refuses_its_responses_with_a_clear_error() {
    let port = reference_server();
    let mut client = Client::connect(format!("127.0.0.1:{port}"), options()).expect("connect");
    match client.send(get("/hello")) {
        Err(e @ ClientError::InvalidResponse(_)) => {
            let text = e.to_string();
            assert!(
                text.contains("date") || text.contains("language"),
                "the error names what is missing: {text}"
            );
        }
        other => panic!("strict mode must refuse the reference's response, got {other:?}"),
    }
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_async_client_in_lenient_mode_too() {
    let port = reference_server();
    let mut client = jsontp_protocol::io_adapters::client::tokio::Client::connect(
        format!("127.0.0.1:{port}"),
        options().lenient(),
    )
    .await
    .expect("connect");
    let answer = tokio::time::timeout(LIMIT, client.send(get("/hello")))
        .await
        .expect("in time")
        .expect("a forgiven answer");
    assert_eq!(answer.response.body.as_text(), Some("hello from the reference"));
    assert!(answer.forgiven.contains(&Forgiven::MissingDate));
}

// ---------------------------------------------------------------------------
// The reference client against our servers.
// ---------------------------------------------------------------------------

#[cfg(feature = "tokio")]
#[test]
fn the_reference_client_gets_a_correct_answer_from_our_tokio_server() {
    use jsontp_protocol::io_adapters::server::ServerOptions;
    use jsontp_protocol::io_adapters::server::tokio::serve;
    use jsontp_protocol::message::{Body, Response, Status};

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let hello = |request: &Request| {
        let text = match request.resource.path() {
            "/big" => "x".repeat(3000),
            path => format!("you asked for {path}"),
        };
        Response::new(Status::new(StatusCode::OK, "here it is")).with_body(Body::text(text))
    };
    let server = runtime.spawn(serve(listener, hello, ServerOptions::default(), async {
        let _ = stopped.await;
    }));

    let answer = reference_get(port, "/greeting");
    assert_eq!(answer.status.code, 200);
    assert_eq!(answer.status.formal_message, "OK");
    assert_eq!(answer.resource, "/greeting");
    assert_eq!(answer.body.content, "you asked for /greeting");
    assert_eq!(answer.body.encoding, "identity");
    assert!(answer.headers.contains_key("date"));
    assert!(answer.headers.contains_key("language"));

    // Larger than the reference's 1024-byte read, and not a multiple of it.
    let big = reference_get(port, "/big");
    assert_eq!(big.body.content.len(), 3000);

    let _ = stop.send(());
    runtime
        .block_on(async { tokio::time::timeout(LIMIT, server).await })
        .expect("serve stops")
        .expect("no panic")
        .expect("no error");
}

#[test]
fn the_reference_client_gets_a_correct_answer_from_our_std_server() {
    use jsontp_protocol::io_adapters::server::ServerOptions;
    use jsontp_protocol::io_adapters::server::blocking::StdServer;
    use jsontp_protocol::message::{Body, Response, Status};

    let hello = |request: &Request| {
        Response::new(Status::new(StatusCode::OK, "here it is"))
            .with_body(Body::text(format!("std server: {}", request.resource.path())))
    };
    let server =
        StdServer::bind("127.0.0.1:0", hello, ServerOptions::default().with_workers(2)).expect("bind");
    let port = server.local_addr().expect("addr").port();
    let stop = server.shutdown_handle();
    let running = thread::spawn(move || server.run());

    let answer = reference_get(port, "/std");
    assert_eq!(answer.status.code, 200);
    assert_eq!(answer.resource, "/std");
    assert_eq!(answer.body.content, "std server: /std");
    assert!(answer.headers.contains_key("date"));

    stop.shutdown();
    running.join().expect("no panic").expect("run ends without error");
}

/// The reference writes `body.content` before `body.encoding` (its struct's
/// field order). D19 streams content past the message limit only when it
/// is written last; written first, the message is bounded as a whole by
/// the 1 MiB limit (D3), which the conformance suite holds us to
/// (`framing.over-size-limit` sends such a message and expects `413`).
#[test]
#[ignore = "limitation of the sender: content written before its encoding is bounded by the \
            1 MiB message limit (D3, D19), so the reference client's 2 MiB upload is 413"]
fn the_reference_client_uploads_two_mib() {
    use std::io::Read;

    use jsontp_protocol::io_adapters::server::blocking::StdServer;
    use jsontp_protocol::io_adapters::server::{Handler, Reply, RequestInfo, ServerOptions};
    use jsontp_protocol::message::{Body, Response, Status};

    /// Answers with the length and the distinct bytes of what it received.
    struct Sizes;
    impl Sizes {
        fn handle(&self, request: &Request, _: &RequestInfo) -> Response {
            stored(request.body.content())
        }

        /// The answer to `incoming`.
        fn reply(&self, incoming: Incoming) -> Reply {
            let Incoming {
                request,
                upload,
                info,
                ..
            } = incoming;
            let (request, info) = (&*request, &info);
            let Some(upload) = upload else {
                return self.handle(request, info).into();
            };
            let mut content = Vec::new();
            upload
                .reader()
                .expect("spooled")
                .read_to_end(&mut content)
                .expect("read");
            stored(&content).into()
        }
    }

    impl Handler for Sizes {
        fn respond(&self, incoming: Incoming) -> Handled {
            self.reply(incoming).into()
        }
    }
    fn stored(content: &[u8]) -> Response {
        let mut distinct: Vec<u8> = content.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        Response::new(Status::new(StatusCode::OK, "stored")).with_body(Body::text(format!(
            "{} {}",
            content.len(),
            String::from_utf8_lossy(&distinct)
        )))
    }

    let server =
        StdServer::bind("127.0.0.1:0", Sizes, ServerOptions::default().with_workers(2)).expect("bind");
    let port = server.local_addr().expect("addr").port();
    let stop = server.shutdown_handle();
    let running = thread::spawn(move || server.run());

    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let answer = jsontp_ref::client::Request::new()
            .method("PUT")
            .resource("/upload.txt")
            .body("x".repeat(2 << 20), "identity")
            .send("127.0.0.1", port);
        let _ = tx.send(answer);
    });
    let answer = rx
        .recv_timeout(LIMIT)
        .expect("an answer in time")
        .expect("the reference client parsed our response");
    assert_eq!(answer.status.code, 200, "{}", answer.status.human_message);
    assert_eq!(answer.body.content, format!("{} x", 2 << 20));

    stop.shutdown();
    running.join().expect("no panic").expect("run ends without error");
}
