//! The tokio server and the tokio client over loopback (feature `tokio`).
#![cfg(feature = "tokio")]

use std::net::SocketAddr;
use std::time::Duration;

use jsontp::io_adapters::std_client::{ClientError, ClientOptions};
use jsontp::io_adapters::tokio_io::{Client, serve};
use jsontp::io_adapters::{Handler, RequestInfo, ServerOptions};
use jsontp::machine::{ContinuePolicy, ServerConfig};
use jsontp::message::{Body, Headers, Method, Request, Response, Status, StatusCode};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(10);

/// Echoes the method, path and content; `/panic` panics; PUT to `/locked`
/// is refused at the 100-continue stage.
struct Echo;

impl Handler for Echo {
    fn handle(&self, request: &Request, _info: &RequestInfo) -> Response {
        if request.resource.path() == "/panic" {
            panic!("the handler fails on purpose");
        }
        if request.resource.path() == "/slow" {
            std::thread::sleep(Duration::from_millis(300));
        }
        let text = format!(
            "{} {} {}",
            request.method,
            request.resource.path(),
            request.body.as_text().unwrap_or("<bytes>")
        );
        Response::new(Status::new(StatusCode::OK, "echoed"))
            .with_resource(request.resource.as_str())
            .with_body(Body::text(text))
    }

    fn check_continue(&self, request: &Request, _info: &RequestInfo) -> Result<(), Response> {
        if request.resource.path() == "/locked" {
            return Err(
                Response::new(Status::new(StatusCode::UNAUTHORIZED, "no uploads here"))
                    .with_resource(request.resource.as_str()),
            );
        }
        Ok(())
    }
}

struct Running {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

impl Running {
    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        timeout(LIMIT, self.task)
            .await
            .expect("serve returns after shutdown")
            .expect("the serve task did not panic")
            .expect("serve ends without error");
    }
}

async fn start<H: Handler>(handler: H) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    // Ask: 100-continue handshakes go to `check_continue` (D10).
    let options = ServerOptions::default().with_config(ServerConfig {
        continue_policy: ContinuePolicy::Ask,
        ..ServerConfig::default()
    });
    let task = tokio::spawn(serve(listener, handler, options, async {
        let _ = stopped.await;
    }));
    Running {
        addr,
        stop: Some(stop),
        task,
    }
}

fn request(method: Method, resource: &str, content: &str) -> Request {
    Request::new(method, resource.parse().expect("resource")).with_body(Body::text(content))
}

/// Reads whole messages with a plain JSON stream reader.
async fn read_responses(stream: &mut TcpStream, count: usize) -> Vec<Value> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let values: Vec<Value> = serde_json::Deserializer::from_slice(&buf)
            .into_iter::<Value>()
            .map_while(Result::ok)
            .collect();
        if values.len() >= count {
            return values;
        }
        let n = timeout(LIMIT, stream.read(&mut chunk))
            .await
            .expect("responses within the limit")
            .expect("read");
        assert!(n > 0, "the server closed after {} responses", values.len());
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_answers_pipelined_raw_requests_in_order() {
    let server = start(Echo).await;
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    // Two requests in one write, without newlines (D1, D2).
    let raw = concat!(
        r#"{"jsontp":"1.0","type":"request","resource":"/slow","method":"GET","headers":{},"body":{"content":"","encoding":"identity"}}"#,
        r#"{"jsontp":"1.0-rc1","type":"request","resource":"/fast","method":"POST","headers":{},"body":{"content":"a=b","encoding":"identity"}}"#
    );
    stream.write_all(raw.as_bytes()).await.expect("write");
    let responses = read_responses(&mut stream, 2).await;
    assert_eq!(responses[0]["resource"], "/slow");
    assert_eq!(responses[0]["body"]["content"], "GET /slow ");
    assert_eq!(responses[1]["resource"], "/fast");
    assert_eq!(responses[1]["body"]["content"], "POST /fast a=b");
    for r in &responses {
        assert_eq!(r["status"]["code"], 200);
        assert!(r["headers"]["date"].is_string(), "the machine fills in date");
        assert!(
            r["headers"]["language"].is_string(),
            "the machine fills in language"
        );
    }
    drop(stream);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_client_talks_to_the_async_server() {
    let server = start(Echo).await;
    let mut client = Client::connect(server.addr, ClientOptions::default())
        .await
        .expect("connect");
    let exchange = timeout(LIMIT, client.send(request(Method::Put, "/a", "one")))
        .await
        .expect("in time")
        .expect("answered");
    assert_eq!(exchange.response.body.as_text(), Some("PUT /a one"));
    assert!(exchange.forgiven.is_empty());
    // Keep-alive, then a pipeline on the same connection.
    let results = timeout(
        LIMIT,
        client.send_all(vec![
            request(Method::Get, "/b", ""),
            request(Method::Delete, "/c", ""),
            request(Method::Options, "/d", ""),
        ]),
    )
    .await
    .expect("in time");
    let texts: Vec<String> = results
        .into_iter()
        .map(|r| {
            r.expect("answered")
                .response
                .body
                .as_text()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert_eq!(texts, ["GET /b ", "DELETE /c ", "OPTIONS /d "]);
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handler_sees_the_continue_handshake() {
    let server = start(Echo).await;
    let mut client = Client::connect(server.addr, ClientOptions::default())
        .await
        .expect("connect");
    let upload = |path: &str| {
        request(Method::Put, path, "payload").with_headers(Headers::new().with_expect_continue(true))
    };
    let accepted = timeout(LIMIT, client.send(upload("/open")))
        .await
        .expect("in time")
        .expect("answered");
    assert!(accepted.continued, "the server acknowledged with 100 (D10)");
    assert_eq!(accepted.response.body.as_text(), Some("PUT /open payload"));
    let refused = timeout(LIMIT, client.send(upload("/locked")))
        .await
        .expect("in time")
        .expect("answered");
    assert!(!refused.continued);
    assert_eq!(refused.response.status.code, StatusCode::UNAUTHORIZED);
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_gets_a_500_and_the_connection_goes_on() {
    let server = start(Echo).await;
    let mut client = Client::connect(server.addr, ClientOptions::default())
        .await
        .expect("connect");
    let failed = timeout(LIMIT, client.send(request(Method::Get, "/panic", "")))
        .await
        .expect("in time")
        .expect("answered");
    assert_eq!(failed.response.status.code, StatusCode::INTERNAL_SERVER_ERROR);
    let next = timeout(LIMIT, client.send(request(Method::Get, "/after", "")))
        .await
        .expect("in time")
        .expect("answered");
    assert_eq!(next.response.status.code, StatusCode::OK);
    drop(client);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_answers_what_was_read_then_closes() {
    let server = start(Echo).await;
    let mut client = Client::connect(server.addr, ClientOptions::default())
        .await
        .expect("connect");
    let first = timeout(LIMIT, client.send(request(Method::Get, "/x", "")))
        .await
        .expect("in time")
        .expect("answered");
    assert_eq!(first.response.status.code, StatusCode::OK);
    // The connection is open and idle: shutdown closes it and returns.
    let addr = server.addr;
    server.stop().await;
    let after = timeout(LIMIT, client.send(request(Method::Get, "/y", "")))
        .await
        .expect("in time");
    assert!(
        matches!(
            after,
            Err(ClientError::ClosedEarly | ClientError::ConnectionClosed)
        ),
        "{after:?}"
    );
    let refused = Client::connect(addr, ClientOptions::default()).await;
    assert!(
        matches!(refused, Err(ClientError::Refused { .. })),
        "no longer listening"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_client_reports_a_silent_server_as_a_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let silent = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.expect("accept");
        let mut sink = Vec::new();
        // Reads until the client gives up and closes.
        let _ = timeout(LIMIT, stream.read_to_end(&mut sink)).await;
        sink
    });
    let options = ClientOptions {
        read_timeout: Some(Duration::from_millis(300)),
        ..ClientOptions::default()
    };
    let mut client = Client::connect(addr, options).await.expect("connect");
    let result = timeout(LIMIT, client.send(request(Method::Get, "/", "")))
        .await
        .expect("in time");
    assert!(
        matches!(
            result,
            Err(ClientError::TimedOut(
                jsontp::io_adapters::std_client::Timeout::Read
            ))
        ),
        "{result:?}"
    );
    drop(client);
    let sink = silent.await.expect("the silent server");
    assert!(sink.ends_with(b"\n"), "the request was sent whole");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_a_half_received_request_finish() {
    let server = start(Echo).await;
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    let raw = r#"{"jsontp":"1.0","type":"request","resource":"/late","method":"GET","headers":{},"body":{"content":"","encoding":"identity"}}"#;
    let (first, rest) = raw.split_at(40);
    stream.write_all(first.as_bytes()).await.expect("write");
    // Let the server read the first half before asking it to stop.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let Running { addr: _, stop, task } = server;
    let _ = stop.expect("not stopped yet").send(());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!task.is_finished(), "an exchange under way holds the shutdown");
    stream.write_all(rest.as_bytes()).await.expect("write the rest");
    let responses = read_responses(&mut stream, 1).await;
    assert_eq!(responses[0]["resource"], "/late");
    assert_eq!(responses[0]["status"]["code"], 200);
    timeout(LIMIT, task)
        .await
        .expect("serve returns once the exchange is done")
        .expect("no panic")
        .expect("no error");
}

type Log = std::sync::Arc<std::sync::Mutex<Vec<(Option<Method>, String, u16)>>>;

/// Records what the access-log hook is told.
struct Logged(Log);

impl Handler for Logged {
    fn handle(&self, request: &Request, info: &RequestInfo) -> Response {
        Echo.handle(request, info)
    }

    fn log_exchange(&self, exchange: &jsontp::io_adapters::Exchange<'_>) {
        if let Ok(mut seen) = self.0.lock() {
            seen.push((
                exchange.method,
                exchange.resource.to_owned(),
                exchange.status.as_u16(),
            ));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_reaches_the_access_log_hook() {
    let log = Log::default();
    let server = start(Logged(std::sync::Arc::clone(&log))).await;
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    let raw = concat!(
        r#"{"jsontp":"1.0","type":"request","resource":"/ok","method":"GET","headers":{},"body":{"content":"","encoding":"identity"}}"#,
        r#"{"jsontp":"1.0","type":"request","resource":"/bad","method":"FETCH","headers":{},"body":{"content":"","encoding":"identity"}}"#
    );
    stream.write_all(raw.as_bytes()).await.expect("write");
    let responses = read_responses(&mut stream, 2).await;
    assert_eq!(
        responses[1]["status"]["code"], 400,
        "the machine refused the method (D5)"
    );
    drop(stream);
    server.stop().await;
    let seen = log.lock().expect("log").clone();
    assert_eq!(
        seen,
        vec![
            (Some(Method::Get), "/ok".to_owned(), 200),
            (None, "/bad".to_owned(), 400)
        ]
    );
}
