//! The std and mio server adapters over real TCP on 127.0.0.1:0 (issue 4).
//! Every test runs against both adapters and is bounded in time: reads time
//! out after a few seconds.
#![allow(clippy::disallowed_methods)] // tests own threads and the clock

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use jsontp::io_adapters::mio_server::MioServer;
use jsontp::io_adapters::std_server::StdServer;
use jsontp::io_adapters::{Handler, RequestInfo, ServerOptions};
use jsontp::machine::{ContinuePolicy, ServerConfig};
use jsontp::message::{Body, Request, Response, Status, StatusCode};
use serde_json::Value;

const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Answers 200 with `echo <resource> <content>`; refuses a 100-continue
/// handshake on `/refuse` with 401.
struct Echo;

impl Handler for Echo {
    fn handle(&self, request: &Request, _info: &RequestInfo) -> Response {
        if request.resource.path() == "/informational" {
            // A handler bug: only the D10 acknowledgement may be a 1xx.
            return Response::new(Status::new(StatusCode::CONTINUE, "wrong"))
                .with_resource(request.resource.as_str());
        }
        let text = format!(
            "echo {} {}",
            request.resource.path(),
            request.body.as_text().unwrap_or("<binary>")
        );
        Response::new(Status::new(StatusCode::OK, "echoed"))
            .with_resource(request.resource.as_str())
            .with_body(Body::text(text))
    }

    #[allow(clippy::result_large_err)] // the trait's signature
    fn check_continue(&self, request: &Request, _info: &RequestInfo) -> Result<(), Response> {
        if request.resource.path() == "/refuse" {
            let status = Status::new(StatusCode::UNAUTHORIZED, "not you");
            return Err(Response::new(status).with_resource(request.resource.as_str()));
        }
        Ok(())
    }
}

/// [`Echo`], with an access log kept in memory: (status, echoed resource)
/// for every response, the connection's own errors included.
#[derive(Clone, Default)]
struct Logged(Arc<Mutex<Vec<(u16, String)>>>);

impl Handler for Logged {
    fn handle(&self, request: &Request, info: &RequestInfo) -> Response {
        Echo.handle(request, info)
    }

    fn log_exchange(&self, exchange: &jsontp::io_adapters::Exchange<'_>) {
        let line = (exchange.status.as_u16(), exchange.resource.to_owned());
        self.0.lock().expect("log").push(line);
    }
}

impl Logged {
    /// The log once it holds `n` lines (it is written on the server's
    /// thread), or as it stands after a few seconds.
    fn lines(&self, n: usize) -> Vec<(u16, String)> {
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

#[derive(Clone, Copy, Debug)]
enum Adapter {
    Std,
    Mio,
}

/// A server running on its own thread.
struct Running {
    addr: SocketAddr,
    stop: Box<dyn Fn() + Send>,
    thread: JoinHandle<io::Result<()>>,
}

impl Running {
    fn shutdown_and_join(self) -> Duration {
        let started = Instant::now();
        (self.stop)();
        self.thread.join().expect("server thread").expect("server run");
        started.elapsed()
    }
}

fn start(adapter: Adapter, policy: ContinuePolicy, workers: usize) -> Running {
    let config = ServerConfig {
        continue_policy: policy,
        ..ServerConfig::default()
    };
    start_with(adapter, Echo, config, workers)
}

fn start_with<H: Handler>(adapter: Adapter, handler: H, config: ServerConfig, workers: usize) -> Running {
    let options = ServerOptions::default().with_config(config).with_workers(workers);
    match adapter {
        Adapter::Std => {
            let server = StdServer::bind("127.0.0.1:0", handler, options).expect("bind");
            let (addr, handle) = (server.local_addr().expect("addr"), server.shutdown_handle());
            let thread = std::thread::spawn(move || server.run());
            Running {
                addr,
                stop: Box::new(move || handle.shutdown()),
                thread,
            }
        }
        Adapter::Mio => {
            let server = MioServer::bind("127.0.0.1:0", handler, options).expect("bind");
            let (addr, handle) = (server.local_addr().expect("addr"), server.shutdown_handle());
            let thread = std::thread::spawn(move || server.run());
            Running {
                addr,
                stop: Box::new(move || handle.shutdown()),
                thread,
            }
        }
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(READ_TIMEOUT)).expect("timeout");
    stream
}

fn request(method: &str, resource: &str, content: &str) -> String {
    serde_json::json!({
        "jsontp": "1.0", "type": "request", "resource": resource, "method": method,
        "headers": {}, "body": {"content": content, "encoding": "identity"}
    })
    .to_string()
        + "\n"
}

fn continue_request(method: &str, resource: &str) -> String {
    serde_json::json!({
        "jsontp": "1.0", "type": "request", "resource": resource, "method": method,
        "headers": {"expect": "100-continue"}, "body": {}
    })
    .to_string()
        + "\n"
}

/// Reads responses off one stream; the bytes after a response are kept for
/// the next.
struct Reader {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl Reader {
    fn new(stream: TcpStream) -> Reader {
        Reader {
            stream,
            buffer: Vec::new(),
        }
    }

    fn send(&mut self, text: &str) {
        self.stream.write_all(text.as_bytes()).expect("write");
    }

    /// The next response, or `None` when the server closed first.
    fn next(&mut self) -> Option<Value> {
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
                Err(e) => panic!("no response within {READ_TIMEOUT:?}: {e}"),
            }
        }
    }

    fn expect(&mut self) -> Value {
        self.next().expect("a response before the close")
    }

    /// Whether the server closes (end of stream) with nothing more to say.
    fn closed(&mut self) -> bool {
        self.next().is_none()
    }
}

fn code(response: &Value) -> u64 {
    response["status"]["code"].as_u64().expect("status.code")
}

fn content(response: &Value) -> &str {
    response["body"]["content"].as_str().expect("body.content")
}

fn both(test: impl Fn(Adapter)) {
    test(Adapter::Std);
    test(Adapter::Mio);
}

#[test]
fn one_request() {
    both(|adapter| {
        let server = start(adapter, ContinuePolicy::AutoAccept, 2);
        let mut client = Reader::new(connect(server.addr));
        client.send(&request("GET", "/a", "hi"));
        let response = client.expect();
        assert_eq!(code(&response), 200, "{adapter:?}");
        assert_eq!(content(&response), "echo /a hi");
        assert_eq!(response["resource"], "/a", "D7 echo");
        server.shutdown_and_join();
    });
}

#[test]
fn keep_alive_serves_a_second_request() {
    // D2: the connection stays open after a response.
    both(|adapter| {
        let server = start(adapter, ContinuePolicy::AutoAccept, 2);
        let mut client = Reader::new(connect(server.addr));
        for n in 0..3 {
            client.send(&request("GET", &format!("/n{n}"), ""));
            assert_eq!(content(&client.expect()), format!("echo /n{n} "), "{adapter:?}");
        }
        server.shutdown_and_join();
    });
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    // D2: several requests in one write, answers in request order.
    both(|adapter| {
        let server = start(adapter, ContinuePolicy::AutoAccept, 2);
        let mut client = Reader::new(connect(server.addr));
        let burst: String = (0..10).map(|n| request("POST", &format!("/p{n}"), "x")).collect();
        client.send(&burst);
        for n in 0..10 {
            assert_eq!(client.expect()["resource"], format!("/p{n}"), "{adapter:?}");
        }
        server.shutdown_and_join();
    });
}

#[test]
fn a_handler_answering_1xx_gets_500_and_the_pipeline_goes_on() {
    // D12: a 1xx is only the acknowledgement; the adapter must not leave the
    // exchange unanswered, or every pipelined answer behind it would stall.
    both(|adapter| {
        let server = start(adapter, ContinuePolicy::AutoAccept, 2);
        let mut client = Reader::new(connect(server.addr));
        client.send(&(request("GET", "/informational", "") + &request("GET", "/after", "")));
        let first = client.expect();
        assert_eq!(
            (code(&first), first["resource"].as_str()),
            (500, Some("/informational")),
            "{adapter:?}"
        );
        assert_eq!(content(&client.expect()), "echo /after ", "{adapter:?}");
        server.shutdown_and_join();
    });
}

#[test]
fn continue_accepted_then_full_request() {
    // D10: 100, then the full request is answered.
    both(|adapter| {
        let server = start(adapter, ContinuePolicy::Ask, 2);
        let mut client = Reader::new(connect(server.addr));
        client.send(&continue_request("PUT", "/up"));
        let ack = client.expect();
        assert_eq!(code(&ack), 100, "{adapter:?}");
        client.send(&request("PUT", "/up", "the body"));
        assert_eq!(content(&client.expect()), "echo /up the body");
        server.shutdown_and_join();
    });
}

#[test]
fn continue_refused_by_the_handler_keeps_the_connection() {
    // D10: the application refuses with a final 4xx; the connection stays open.
    both(|adapter| {
        let server = start(adapter, ContinuePolicy::Ask, 2);
        let mut client = Reader::new(connect(server.addr));
        client.send(&continue_request("PUT", "/refuse"));
        assert_eq!(code(&client.expect()), 401, "{adapter:?}");
        client.send(&request("GET", "/after", ""));
        assert_eq!(content(&client.expect()), "echo /after ");
        server.shutdown_and_join();
    });
}

#[test]
fn continue_refused_by_policy_is_501_and_close() {
    // D10: a server configured without 100-continue answers 501 and closes.
    both(|adapter| {
        let server = start(adapter, ContinuePolicy::Refuse, 2);
        let mut client = Reader::new(connect(server.addr));
        client.send(&continue_request("PUT", "/up"));
        assert_eq!(code(&client.expect()), 501, "{adapter:?}");
        assert!(client.closed(), "{adapter:?}: the server closes after 501");
        server.shutdown_and_join();
    });
}

#[test]
fn slow_client_trickling_bytes() {
    // D1: the message is reassembled from small pieces.
    both(|adapter| {
        let server = start(adapter, ContinuePolicy::AutoAccept, 2);
        let mut client = Reader::new(connect(server.addr));
        let text = request("POST", "/slow", "trickled");
        for piece in text.as_bytes().chunks(7) {
            client.stream.write_all(piece).expect("write");
            std::thread::sleep(Duration::from_millis(3));
        }
        assert_eq!(content(&client.expect()), "echo /slow trickled", "{adapter:?}");
        server.shutdown_and_join();
    });
}

#[test]
fn client_disconnecting_mid_message_does_not_hurt_the_server() {
    both(|adapter| {
        let server = start(adapter, ContinuePolicy::AutoAccept, 2);
        for _ in 0..5 {
            let mut gone = connect(server.addr);
            let text = request("PUT", "/cut", "never finished");
            gone.write_all(&text.as_bytes()[..text.len() / 2]).expect("write");
            drop(gone);
        }
        let mut client = Reader::new(connect(server.addr));
        client.send(&request("GET", "/still", ""));
        assert_eq!(content(&client.expect()), "echo /still ", "{adapter:?}");
        server.shutdown_and_join();
    });
}

#[test]
fn half_close_after_a_message_still_gets_the_answer() {
    // D1: a peer that half-closes after a complete message gets its response, then the close.
    both(|adapter| {
        let server = start(adapter, ContinuePolicy::AutoAccept, 2);
        let mut client = Reader::new(connect(server.addr));
        client.send(&request("GET", "/half", ""));
        client.stream.shutdown(Shutdown::Write).expect("half close");
        assert_eq!(content(&client.expect()), "echo /half ", "{adapter:?}");
        assert!(client.closed());
        server.shutdown_and_join();
    });
}

fn many_clients(adapter: Adapter, workers: usize, clients: usize) {
    let server = start(adapter, ContinuePolicy::AutoAccept, workers);
    let done = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..clients)
        .map(|n| {
            let (addr, done) = (server.addr, Arc::clone(&done));
            std::thread::spawn(move || {
                let mut client = Reader::new(connect(addr));
                for k in 0..2 {
                    client.send(&request("GET", &format!("/c{n}/{k}"), ""));
                    assert_eq!(content(&client.expect()), format!("echo /c{n}/{k} "));
                }
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("client thread");
    }
    assert_eq!(done.load(Ordering::SeqCst), clients);
    server.shutdown_and_join();
}

#[test]
fn mio_serves_200_clients_at_once() {
    many_clients(Adapter::Mio, 2, 200);
}

#[test]
fn std_serves_more_clients_than_its_pool() {
    // Connections beyond the pool wait (queue, then backlog); none is dropped.
    many_clients(Adapter::Std, 4, 40);
}

#[test]
fn graceful_shutdown_finishes_the_exchange_under_way() {
    both(|adapter| {
        let server = start(adapter, ContinuePolicy::AutoAccept, 2);
        let mut idle = Reader::new(connect(server.addr));
        idle.send(&request("GET", "/warm", ""));
        idle.expect();
        let mut busy = Reader::new(connect(server.addr));
        let text = request("POST", "/busy", "finished after shutdown");
        let (first, rest) = text.as_bytes().split_at(text.len() / 2);
        busy.stream.write_all(first).expect("write");
        std::thread::sleep(Duration::from_millis(100)); // let the server read it
        (server.stop)();
        // The idle connection is closed...
        assert!(idle.closed(), "{adapter:?}: idle connection closed at shutdown");
        // ...the one under way is answered.
        busy.stream.write_all(rest).expect("write the rest");
        assert_eq!(
            content(&busy.expect()),
            "echo /busy finished after shutdown",
            "{adapter:?}"
        );
        let started = Instant::now();
        server.thread.join().expect("server thread").expect("run");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{adapter:?}: run returns"
        );
        // No longer accepting.
        let refused = TcpStream::connect_timeout(&server.addr, Duration::from_secs(1))
            .map(|s| {
                s.set_read_timeout(Some(Duration::from_secs(1))).ok();
                Reader::new(s).closed()
            })
            .unwrap_or(true);
        assert!(refused, "{adapter:?}: no service after shutdown");
    });
}

#[test]
fn a_client_that_reads_late_gets_every_pipelined_answer() {
    // D3 back-pressure: the server stops reading while responses are owed,
    // and resumes once the client takes them; nothing is lost or reordered.
    both(|adapter| {
        let server = start(adapter, ContinuePolicy::AutoAccept, 2);
        let mut client = Reader::new(connect(server.addr));
        let filler = "y".repeat(20_000);
        let burst: String = (0..60)
            .map(|n| request("POST", &format!("/b{n}"), &filler))
            .collect();
        let mut writer = client.stream.try_clone().expect("clone");
        let sender = std::thread::spawn(move || writer.write_all(burst.as_bytes()));
        std::thread::sleep(Duration::from_millis(200)); // let the buffers fill up
        for n in 0..60 {
            let response = client.expect();
            assert_eq!(response["resource"], format!("/b{n}"), "{adapter:?}");
            assert_eq!(
                content(&response).len(),
                format!("echo /b{n} ").len() + filler.len()
            );
        }
        sender.join().expect("sender").expect("the whole burst is taken");
        server.shutdown_and_join();
    });
}

#[test]
fn errors_the_connection_writes_itself_reach_the_access_log() {
    // D1: a stream cut short mid-message is answered 400 "incomplete
    // message"; D3: a message that does not end in time, 408. Both are the
    // machine's own answers and must be logged like any other.
    both(|adapter| {
        let log = Logged::default();
        let mut config = ServerConfig::default();
        config.limits.message_timeout = Duration::from_millis(200);
        let server = start_with(adapter, log.clone(), config, 2);

        let mut cut = Reader::new(connect(server.addr));
        cut.stream.write_all(b"{\"jsontp\":\"1.0\",").expect("write");
        cut.stream.shutdown(Shutdown::Write).expect("half close");
        assert_eq!(code(&cut.expect()), 400, "{adapter:?}");
        assert!(cut.closed(), "{adapter:?}");
        assert_eq!(log.lines(1), [(400, String::new())], "{adapter:?}");

        let mut slow = Reader::new(connect(server.addr));
        slow.stream.write_all(b"{\"jsontp\":\"1.0\",").expect("write");
        assert_eq!(code(&slow.expect()), 408, "{adapter:?}");
        assert!(slow.closed(), "{adapter:?}");
        assert_eq!(
            log.lines(2),
            [(400, String::new()), (408, String::new())],
            "{adapter:?}"
        );
        server.shutdown_and_join();
    });
}
