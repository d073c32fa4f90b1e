//! What the adapter tests share: handlers, a way to run any server runtime
//! on its own thread, a raw reader of responses, and one face for both
//! clients.

use jsontp_protocol::io_adapters::server::{Handled, HeadCheck, Incoming};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use jsontp_protocol::io_adapters::client::{Answer, ClientError, ClientOptions, Direction};
use jsontp_protocol::io_adapters::server::{AccessRecord, Handler, RequestInfo, ServerOptions};
use jsontp_protocol::machine::{ContinuePolicy, ServerConfig};
use jsontp_protocol::message::{Body, Method, Request, Response, Status, StatusCode};
use serde_json::Value;

/// How long a test waits for anything before it fails.
pub const LIMIT: Duration = Duration::from_secs(10);
/// How long a raw reader waits for a response.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Answers 200 with `echo <resource> <content>`. `/informational` answers a
/// 1xx (a handler bug), `/panic` panics, `/slow` takes 300 ms, `/big/N`
/// answers N bytes; a handshake on `/refuse` is refused with 401.
pub struct Echo;

impl Echo {
    pub fn handle(&self, request: &Request, _info: &RequestInfo) -> Response {
        let path = request.resource.path();
        if path == "/informational" {
            return Response::new(Status::new(StatusCode::CONTINUE, "wrong"));
        }
        if path == "/panic" {
            panic!("the handler fails on purpose");
        }
        if path == "/slow" {
            std::thread::sleep(Duration::from_millis(300));
        }
        if let Some(size) = path.strip_prefix("/big/").and_then(|n| n.parse::<usize>().ok()) {
            return Response::new(Status::new(StatusCode::OK, "big")).with_body(Body::text("y".repeat(size)));
        }
        let text = format!("echo {} {}", path, request.body.as_text().unwrap_or("<binary>"));
        Response::new(Status::new(StatusCode::OK, "echoed")).with_body(Body::text(text))
    }
}

impl Handler for Echo {
    fn respond(&self, incoming: Incoming) -> Handled {
        let info = incoming.info;
        match incoming.into_request() {
            Ok(request) => self.handle(&request, &info).into(),
            Err(refused) => refused.into(),
        }
    }

    fn check_head(&self, head: &Request, _info: &RequestInfo) -> HeadCheck {
        if head.resource.path() == "/refuse" {
            return HeadCheck::Refused(Box::new(Response::new(Status::new(
                StatusCode::UNAUTHORIZED,
                "not you",
            ))));
        }
        HeadCheck::Wanted
    }
}

/// One line of [`Logged`]'s access log.
pub type LogLine = (Option<Method>, u16, String);

/// [`Echo`], with an access log kept in memory, the connection's own error
/// responses included.
#[derive(Clone, Default)]
pub struct Logged(Arc<Mutex<Vec<LogLine>>>);

impl Handler for Logged {
    fn respond(&self, incoming: Incoming) -> Handled {
        Echo.respond(incoming)
    }

    fn log_exchange(&self, record: &AccessRecord<'_>) {
        let line = (record.method, record.status.as_u16(), record.resource.to_owned());
        self.0.lock().expect("log").push(line);
    }
}

impl Logged {
    /// The log once it holds `n` lines (it is written on the server's
    /// threads), or as it stands after a few seconds.
    pub fn lines(&self, n: usize) -> Vec<LogLine> {
        let deadline = Instant::now() + READ_TIMEOUT;
        loop {
            let lines = self.0.lock().expect("log").clone();
            if lines.len() >= n || Instant::now() > deadline {
                return lines;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// A server runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    Std,
    #[cfg(feature = "mio")]
    Mio,
    #[cfg(feature = "tokio")]
    Tokio,
    #[cfg(all(feature = "uring", target_os = "linux"))]
    Uring,
}

/// Every server runtime this build has.
pub const RUNTIMES: &[Runtime] = &[
    Runtime::Std,
    #[cfg(feature = "mio")]
    Runtime::Mio,
    #[cfg(feature = "tokio")]
    Runtime::Tokio,
    #[cfg(all(feature = "uring", target_os = "linux"))]
    Runtime::Uring,
];

/// In a child process a test started to run a server of its own: the
/// runtime the environment variable `var` names; `None` when it is not set
/// (an ordinary `--ignored` run, which does nothing).
pub fn child_runtime(var: &str) -> Option<Runtime> {
    let name = std::env::var(var).ok()?;
    let runtime = RUNTIMES.iter().find(|r| format!("{r:?}") == name);
    Some(*runtime.unwrap_or_else(|| panic!("no runtime named {name}")))
}

/// Runs `test` against every server runtime.
pub fn each_runtime(test: impl Fn(Runtime)) {
    for &runtime in RUNTIMES {
        test(runtime);
    }
}

/// A server running on its own thread.
pub struct Running {
    pub addr: SocketAddr,
    stop: Box<dyn Fn() + Send>,
    thread: JoinHandle<io::Result<()>>,
}

impl Running {
    /// A server running on `thread`, stopped by `stop`.
    pub fn new(addr: SocketAddr, stop: Box<dyn Fn() + Send>, thread: JoinHandle<io::Result<()>>) -> Running {
        Running { addr, stop, thread }
    }

    /// Stops the server and waits at most `limit` for it to return: how
    /// long it took, or `None` if it did not return in time.
    pub fn stop_within(&self, limit: Duration) -> Option<Duration> {
        let started = Instant::now();
        self.stop();
        while !self.thread.is_finished() {
            if started.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Some(started.elapsed())
    }

    /// Starts the graceful shutdown; returns at once.
    pub fn stop(&self) {
        (self.stop)();
    }

    /// Whether `run` (or `serve`) has returned.
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Waits for the server to return; how long that took.
    pub fn join(self) -> Duration {
        let started = Instant::now();
        while !self.thread.is_finished() {
            assert!(started.elapsed() < LIMIT, "the server did not return in time");
            std::thread::sleep(Duration::from_millis(5));
        }
        self.thread.join().expect("server thread").expect("server run");
        started.elapsed()
    }

    pub fn shutdown_and_join(self) -> Duration {
        self.stop();
        self.join()
    }
}

/// Options with `config` and `workers`.
pub fn options(config: ServerConfig, workers: usize) -> ServerOptions {
    ServerOptions::default().with_config(config).with_workers(workers)
}

/// ServerConfig with a 100-continue policy.
pub fn with_policy(policy: ContinuePolicy) -> ServerConfig {
    ServerConfig {
        continue_policy: policy,
        ..ServerConfig::default()
    }
}

/// Starts `handler` on `runtime`, on 127.0.0.1 and a free port.
pub fn start<H: Handler>(runtime: Runtime, handler: H, options: ServerOptions) -> Running {
    use jsontp_protocol::io_adapters::server::blocking::StdServer;
    match runtime {
        Runtime::Std => {
            let server = StdServer::bind("127.0.0.1:0", handler, options).expect("bind");
            let (addr, handle) = (server.local_addr().expect("addr"), server.shutdown_handle());
            Running {
                addr,
                stop: Box::new(move || handle.shutdown()),
                thread: std::thread::spawn(move || server.run()),
            }
        }
        #[cfg(feature = "mio")]
        Runtime::Mio => {
            use jsontp_protocol::io_adapters::server::mio::MioServer;
            let server = MioServer::bind("127.0.0.1:0", handler, options).expect("bind");
            let (addr, handle) = (server.local_addr().expect("addr"), server.shutdown_handle());
            Running {
                addr,
                stop: Box::new(move || handle.shutdown()),
                thread: std::thread::spawn(move || server.run()),
            }
        }
        #[cfg(all(feature = "uring", target_os = "linux"))]
        Runtime::Uring => {
            use jsontp_protocol::io_adapters::server::uring::UringServer;
            let server = UringServer::bind("127.0.0.1:0", handler, options).expect("bind");
            let (addr, handle) = (server.local_addr().expect("addr"), server.shutdown_handle());
            Running {
                addr,
                stop: Box::new(move || handle.shutdown()),
                thread: std::thread::spawn(move || server.run()),
            }
        }
        #[cfg(feature = "tokio")]
        Runtime::Tokio => {
            let server = crate::on_tokio::on_tokio(move |listener, shutdown| {
                jsontp_protocol::io_adapters::server::tokio::serve(listener, handler, options, shutdown)
            });
            Running {
                addr: server.addr,
                stop: server.stop,
                thread: server.thread,
            }
        }
    }
}

/// A raw connection with a read timeout.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(READ_TIMEOUT)).expect("timeout");
    stream
}

/// A request as raw text, compact plus `\n`.
pub fn request(method: &str, resource: &str, content: &str) -> String {
    serde_json::json!({
        "jsontp": "1.0", "type": "request", "resource": resource, "method": method,
        "headers": {}, "body": {"content": content, "encoding": "identity"}
    })
    .to_string()
        + "\n"
}

/// The first request of a 100-continue handshake, as raw text.
pub fn continue_request(method: &str, resource: &str) -> String {
    serde_json::json!({
        "jsontp": "1.0", "type": "request", "resource": resource, "method": method,
        "headers": {"expect": "100-continue"}, "body": {}
    })
    .to_string()
        + "\n"
}

/// Reads responses off one stream; the bytes after a response are kept for
/// the next.
pub struct Reader {
    pub stream: TcpStream,
    buffer: Vec<u8>,
}

impl Reader {
    pub fn new(stream: TcpStream) -> Reader {
        Reader {
            stream,
            buffer: Vec::new(),
        }
    }

    pub fn send(&mut self, text: &str) {
        self.stream.write_all(text.as_bytes()).expect("write");
    }

    /// The next response, or `None` when the server closed first.
    pub fn next(&mut self) -> Option<Value> {
        loop {
            let mut values = serde_json::Deserializer::from_slice(&self.buffer).into_iter::<Value>();
            match values.next() {
                Some(Ok(value)) => {
                    let used = values.byte_offset();
                    self.buffer.drain(..used);
                    return Some(value);
                }
                Some(Err(e)) if !e.is_eof() => panic!("not JSON from the server: {e}"),
                _ => {}
            }
            let mut chunk = [0u8; 8192];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buffer.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("no response within the read timeout: {e}"),
            }
        }
    }

    pub fn expect(&mut self) -> Value {
        self.next().expect("a response before the close")
    }

    /// Whether the server closes (end of stream) with nothing more to say.
    pub fn closed(&mut self) -> bool {
        self.next().is_none()
    }
}

pub fn code(response: &Value) -> u64 {
    response["status"]["code"].as_u64().expect("status.code")
}

pub fn content(response: &Value) -> &str {
    response["body"]["content"].as_str().expect("body.content")
}

/// A client kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientKind {
    Blocking,
    #[cfg(feature = "tokio")]
    Tokio,
}

/// Every client this build has.
pub const CLIENTS: &[ClientKind] = &[
    ClientKind::Blocking,
    #[cfg(feature = "tokio")]
    ClientKind::Tokio,
];

/// Runs `test` with every client.
pub fn each_client(test: impl Fn(ClientKind)) {
    for &kind in CLIENTS {
        test(kind);
    }
}

/// Runs `test` for every server runtime with every client.
pub fn each_pair(test: impl Fn(Runtime, ClientKind)) {
    for &runtime in RUNTIMES {
        for &kind in CLIENTS {
            test(runtime, kind);
        }
    }
}

/// Either client, behind one blocking face (the async one on a runtime of
/// its own).
#[derive(Debug)]
pub enum AnyClient {
    Blocking(jsontp_protocol::io_adapters::client::blocking::Client),
    #[cfg(feature = "tokio")]
    Tokio(
        tokio::runtime::Runtime,
        jsontp_protocol::io_adapters::client::tokio::Client,
    ),
}

impl AnyClient {
    pub fn connect(
        kind: ClientKind,
        addr: impl std::fmt::Display,
        options: ClientOptions,
    ) -> Result<AnyClient, ClientError> {
        let addr = addr.to_string();
        match kind {
            ClientKind::Blocking => {
                jsontp_protocol::io_adapters::client::blocking::Client::connect(addr, options)
                    .map(AnyClient::Blocking)
            }
            #[cfg(feature = "tokio")]
            ClientKind::Tokio => {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                let client = runtime.block_on(
                    jsontp_protocol::io_adapters::client::tokio::Client::connect(addr, options),
                )?;
                Ok(AnyClient::Tokio(runtime, client))
            }
        }
    }

    pub fn send(&mut self, request: Request) -> Result<Answer, ClientError> {
        self.send_all([request]).pop().expect("one outcome")
    }

    pub fn send_all(
        &mut self,
        requests: impl IntoIterator<Item = Request>,
    ) -> Vec<Result<Answer, ClientError>> {
        let requests: Vec<Request> = requests.into_iter().collect();
        match self {
            AnyClient::Blocking(client) => client.send_all(requests),
            #[cfg(feature = "tokio")]
            AnyClient::Tokio(runtime, client) => runtime.block_on(async {
                tokio::time::timeout(LIMIT * 3, client.send_all(requests))
                    .await
                    .expect("the async client finishes in time")
            }),
        }
    }

    pub fn set_tracer(&mut self, tracer: impl FnMut(Direction, &[u8]) + Send + 'static) {
        match self {
            AnyClient::Blocking(client) => client.set_tracer(tracer),
            #[cfg(feature = "tokio")]
            AnyClient::Tokio(_, client) => client.set_tracer(tracer),
        }
    }

    pub fn is_closed(&self) -> bool {
        match self {
            AnyClient::Blocking(client) => client.is_closed(),
            #[cfg(feature = "tokio")]
            AnyClient::Tokio(_, client) => client.is_closed(),
        }
    }
}

/// Client options with short, test-sized clocks.
pub fn quick() -> ClientOptions {
    ClientOptions {
        connect_timeout: Some(Duration::from_secs(5)),
        read_timeout: Some(LIMIT),
        exchange_timeout: Some(LIMIT * 2),
        ..ClientOptions::default()
    }
}

/// A request as the client API builds it.
pub fn api_request(method: Method, resource: &str, content: &str) -> Request {
    Request::new(method, resource.parse().expect("a valid resource")).with_body(Body::text(content))
}

pub fn get(resource: &str) -> Request {
    Request::new(Method::Get, resource.parse().expect("a valid resource"))
}

// -- Hostile peers (hostile.rs) ------------------------------------------

/// How soon a well-behaved client must be answered while hostile peers
/// are at work, or after them.
pub const PROMPT: Duration = Duration::from_millis(100);

/// How long a fresh connection waits for the answer to `GET /fresh`: the
/// fastest of three tries, each on a new connection and each bounded by
/// [`READ_TIMEOUT`]. Three, because on a shared machine the scheduler may
/// delay any single exchange; a server held up by its peers delays all
/// three.
pub fn fresh_exchange_time(addr: SocketAddr) -> Duration {
    (0..3)
        .map(|_| {
            let started = Instant::now();
            let mut client = Reader::new(connect(addr));
            client.send(&request("GET", "/fresh", ""));
            assert_eq!(
                content(&client.expect()),
                "echo /fresh ",
                "a fresh client is answered"
            );
            started.elapsed()
        })
        .min()
        .expect("three tries")
}

/// Asserts that a fresh client at `addr` is answered within [`PROMPT`].
pub fn assert_served_promptly(addr: SocketAddr, what: impl std::fmt::Display) {
    let took = fresh_exchange_time(addr);
    assert!(took < PROMPT, "{what}: a fresh client waited {took:?}");
}
