//! Fair shares of what a server holds for its connections, on every
//! runtime over real sockets: at the connection cap (D3) the connection
//! idle longest makes room for a new client, never one with an exchange
//! under way; and request content held in memory stays within the
//! server's memory budget, the rest going to the spool (D19).

use jsontp_protocol::io_adapters::server::{Handled, Incoming};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use jsontp_protocol::io_adapters::server::{Handler, RequestInfo, SpoolOptions};
use jsontp_protocol::machine::ServerConfig;
use jsontp_protocol::message::{Body, Request, Response, Status, StatusCode};

use crate::support::{Echo, Reader, code, connect, content, each_runtime, options, request, start};

/// The answer a download asks for: far more than the kernels' buffers
/// hold for a peer that reads nothing yet.
const ANSWER: usize = 8 << 20;

/// How long after a response a connection has surely told the server it
/// is idle: the std server's connection sees it after its read times out
/// (a fifth of a second at most).
const SETTLE: Duration = Duration::from_millis(400);

/// How soon a client waiting at the cap must be answered once an idle
/// connection can make room: the idle one closes gracefully (its linger
/// lasts half a second at most) before the newcomer is served.
const ADMITTED: Duration = Duration::from_secs(2);

/// A connection with a small receive buffer, so that the kernel holds
/// little of a large answer the test does not read yet.
fn small_window(addr: SocketAddr) -> Reader {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    socket.set_recv_buffer_size(4096).expect("buffer size");
    socket.connect(&addr.into()).expect("connect");
    let stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    Reader::new(stream)
}

/// A keep-alive connection that had one exchange and is now idle.
fn idle_after_one_exchange(addr: SocketAddr, name: &str) -> Reader {
    let mut reader = Reader::new(connect(addr));
    reader.send(&request("GET", name, ""));
    assert_eq!(content(&reader.expect()), format!("echo {name} "));
    std::thread::sleep(SETTLE);
    reader
}

/// Asks for a large answer and reads it whole, at last.
fn read_download(busy: &mut Reader, what: &str) {
    let answer = busy.expect();
    assert_eq!(code(&answer), 200, "{what}");
    assert_eq!(content(&answer).len(), ANSWER, "{what}: the whole download");
}

#[test]
fn at_the_cap_the_connection_idle_longest_makes_room_for_a_new_client() {
    each_runtime(|runtime| {
        let server = start(
            runtime,
            Echo,
            options(ServerConfig::default(), 2).with_max_connections(4),
        );
        // First in, and busy: a download it does not read yet. It stood
        // idle before any other, but an exchange is under way now.
        let mut busy = small_window(server.addr);
        busy.send(&request("GET", &format!("/big/{ANSWER}"), ""));
        // Three idle keep-alive connections, idle since one after the
        // other: four open, the cap.
        let mut idle: Vec<Reader> = ["/a", "/b", "/c"]
            .iter()
            .map(|name| idle_after_one_exchange(server.addr, name))
            .collect();

        let started = Instant::now();
        let mut newcomer = Reader::new(connect(server.addr));
        newcomer.send(&request("GET", "/new", ""));
        let answer = newcomer.next();
        let took = started.elapsed();
        assert_eq!(
            answer.as_ref().map(content),
            Some("echo /new "),
            "{runtime:?}: the newcomer is served"
        );
        assert!(
            took < ADMITTED,
            "{runtime:?}: the newcomer waited {took:?} at the cap"
        );

        // The one idle longest was closed, without a response (D2, D3).
        assert!(idle[0].closed(), "{runtime:?}: /a, idle longest, was closed");
        // The others are still served, and so is the download.
        for (reader, name) in idle[1..].iter_mut().zip(["/b2", "/c2"]) {
            reader.send(&request("GET", name, ""));
            assert_eq!(
                content(&reader.expect()),
                format!("echo {name} "),
                "{runtime:?}: an idle connection idle for less time stays open"
            );
        }
        read_download(&mut busy, &format!("{runtime:?}: the busy connection"));
        server.shutdown_and_join();
    });
}

#[test]
fn at_the_cap_with_none_idle_a_new_client_waits_until_one_is_idle() {
    each_runtime(|runtime| {
        let server = start(
            runtime,
            Echo,
            options(ServerConfig::default(), 2).with_max_connections(2),
        );
        let mut first = small_window(server.addr);
        first.send(&request("GET", &format!("/big/{ANSWER}"), ""));
        let mut second = small_window(server.addr);
        second.send(&request("GET", &format!("/big/{ANSWER}"), ""));
        std::thread::sleep(SETTLE);

        // Both are busy: the newcomer waits, as in the backlog (D3).
        let mut newcomer = Reader::new(connect(server.addr));
        newcomer.send(&request("GET", "/new", ""));
        newcomer
            .stream
            .set_read_timeout(Some(Duration::from_millis(800)))
            .expect("timeout");
        let mut byte = [0u8; 1];
        let early = std::io::Read::read(&mut newcomer.stream, &mut byte);
        assert!(
            early.as_ref().is_err_and(|e| matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            )),
            "{runtime:?}: no answer while every connection is busy: {early:?}"
        );

        // Once the second has its download it is idle, and makes room.
        read_download(&mut second, &format!("{runtime:?}: the second download"));
        let started = Instant::now();
        newcomer
            .stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let answer = newcomer.next();
        assert_eq!(
            answer.as_ref().map(content),
            Some("echo /new "),
            "{runtime:?}: the newcomer is served"
        );
        let took = started.elapsed();
        assert!(
            took < ADMITTED,
            "{runtime:?}: served {took:?} after a connection became idle"
        );
        assert!(second.closed(), "{runtime:?}: the idle one made room");
        read_download(&mut first, &format!("{runtime:?}: the first download"));
        server.shutdown_and_join();
    });
}

/// Says where a request's content was when its handler got it: `memory`
/// (in the request) or `upload` (spooled); `/plain` answers as a handler
/// that only implements `handle` does.
struct Where;

impl Handler for Where {
    fn respond(&self, incoming: Incoming) -> Handled {
        if incoming.request.resource.path() == "/plain" {
            return Plain.respond(incoming);
        }
        let text = match &incoming.upload {
            None => format!("memory {}", incoming.request.body.content().len()),
            Some(upload) => format!("upload {}", upload.len()),
        };
        Response::new(Status::new(StatusCode::OK, "here"))
            .with_body(Body::text(text))
            .into()
    }
}

/// A handler with `handle` only: the server's default `respond`.
struct Plain;

impl Plain {
    fn handle(&self, request: &Request, _info: &RequestInfo) -> Response {
        let text = format!("handled {}", request.body.content().len());
        Response::new(Status::new(StatusCode::OK, "here")).with_body(Body::text(text))
    }
}

impl Handler for Plain {
    fn respond(&self, incoming: Incoming) -> Handled {
        let info = incoming.info;
        match incoming.into_request() {
            Ok(request) => self.handle(&request, &info).into(),
            Err(refused) => refused.into(),
        }
    }
}

/// The head of a `PUT` whose content streams (D19: `content` last).
fn streamed_put_head(resource: &str) -> String {
    format!(
        r#"{{"jsontp":"1.0","type":"request","resource":"{resource}","method":"PUT","headers":{{}},"body":{{"encoding":"identity","content":""#
    )
}

const END: &str = "\"}}\n";

/// A connection that sent `bytes` of a `PUT`'s content, and not its end.
fn partial_put(addr: SocketAddr, bytes: usize) -> Reader {
    let mut reader = Reader::new(connect(addr));
    reader.send(&(streamed_put_head("/where") + &"a".repeat(bytes)));
    reader
}

/// Waits until `count` reads `want`.
fn until(what: &str, want: u64, count: impl Fn() -> u64) {
    let started = Instant::now();
    while count() != want {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{what}: {} bytes, not {want}",
            count()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A whole `PUT` of `bytes` on a fresh connection, and its answer.
fn put(addr: SocketAddr, resource: &str, bytes: usize) -> serde_json::Value {
    let mut reader = Reader::new(connect(addr));
    reader.send(&(streamed_put_head(resource) + &"b".repeat(bytes) + END));
    reader.expect()
}

#[test]
fn request_content_in_memory_stays_within_the_servers_memory_budget() {
    const KIB: usize = 1024;
    each_runtime(|runtime| {
        let folder = tempfile::tempdir().expect("folder");
        // 64 KiB each in memory, 100 KiB for all at once; 80 KiB on disk.
        let spool = SpoolOptions::default()
            .with_memory_limit(64 * KIB)
            .with_max_memory(100 * KIB as u64)
            .with_max_total(80 * KIB as u64)
            .with_folder(folder.path());
        // Clones share the budgets: the test reads them.
        let budget = spool.clone();
        let server = start(
            runtime,
            Where,
            options(ServerConfig::default(), 2).with_spool(spool),
        );
        let what = format!("{runtime:?}");

        // A slow upload holds 60 KiB in memory.
        let mut slow = partial_put(server.addr, 60 * KIB);
        until(&what, 60 * KIB as u64, || budget.held_bytes());

        // Another of 60 KiB would pass the budget: it goes to the spool,
        // and its handler gets it as an upload.
        let answer = put(server.addr, "/where", 60 * KIB);
        assert_eq!(content(&answer), format!("upload {}", 60 * KIB), "{what}");
        assert_eq!(budget.held_bytes(), 60 * KIB as u64, "{what}");
        // A handler that only implements `handle` still gets it whole.
        let answer = put(server.addr, "/plain", 60 * KIB);
        assert_eq!(content(&answer), format!("handled {}", 60 * KIB), "{what}");

        // Another slow upload, past the memory limit, holds 70 KiB of the
        // spool: a third upload finds both budgets short, and is refused
        // saying so.
        let mut large = partial_put(server.addr, 70 * KIB);
        until(&what, 70 * KIB as u64, || budget.spooled_bytes());
        let answer = put(server.addr, "/where", 50 * KIB);
        assert_eq!(code(&answer), 503, "{what}");
        let message = answer["status"]["human-message"].as_str().expect("human-message");
        assert!(
            message.starts_with(
                "the server's memory for request content is in use (its budget of 100 KiB for all \
                 requests at once), and the server's storage for uploads is full"
            ),
            "{what}: {message}"
        );
        assert!(budget.held_bytes() <= 100 * KIB as u64, "{what}");

        // The slow ones end well, the first still in memory.
        slow.send(END);
        assert_eq!(content(&slow.expect()), format!("memory {}", 60 * KIB), "{what}");
        large.send(END);
        assert_eq!(content(&large.expect()), format!("upload {}", 70 * KIB), "{what}");
        until(&what, 0, || budget.held_bytes());
        until(&what, 0, || budget.spooled_bytes());
        server.shutdown_and_join();
    });
}
