//! Hostile peers over real TCP, on every server runtime (std, mio, tokio),
//! with limits short enough that each case takes seconds: slow and silent
//! connections, readers that never read or read a trickle, bombs (deep,
//! large, compressed), other protocols on our port, smuggling attempts,
//! and connection churn. Each case gets exactly the answer the D-rules give
//! (status code, then the connection kept or closed), and a well-behaved
//! client on a fresh connection is still answered within [`PROMPT`]
//! afterwards (or during, for the slow cases). Every wait is bounded.

use jsontp_protocol::io_adapters::server::{Handled, Incoming};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use jsontp_protocol::io_adapters::server::{Handler, Reply, RequestInfo};
use jsontp_protocol::machine::ServerConfig;
use jsontp_protocol::message::{Body, Request, Response, Status, StatusCode};

use crate::support::{
    Echo, LIMIT, READ_TIMEOUT, Reader, Runtime, assert_served_promptly, child_runtime, code, connect,
    content, each_runtime, options, request, start,
};

/// The D3 limits, made short: each case runs in seconds.
pub(crate) fn hostile_config() -> ServerConfig {
    let mut config = ServerConfig::default();
    let limits = &mut config.limits;
    limits.message.max_message_bytes = 256 << 10;
    limits.message.max_decoded_body = 1 << 20;
    limits.message.max_depth = 16;
    limits.message.max_headers = 100;
    limits.max_content_bytes = 1 << 20;
    limits.message_timeout = Duration::from_secs(2);
    limits.content_gap_timeout = Duration::from_secs(2);
    limits.stall_timeout = Duration::from_secs(1);
    config.idle_timeout = Duration::from_secs(2);
    config
}

/// Writes `bytes` on a clone of `stream` from a thread of its own, in
/// 1 MiB pieces, until done or the server stops taking them (a closed
/// connection, or a 5 s write timeout); returns how many bytes went in.
fn write_in_background(stream: &TcpStream, bytes: Arc<Vec<u8>>) -> JoinHandle<usize> {
    let mut writer = stream.try_clone().expect("clone");
    writer
        .set_write_timeout(Some(Duration::from_secs(5)))
        .expect("write timeout");
    std::thread::spawn(move || {
        let mut sent = 0;
        for piece in bytes.chunks(1 << 20) {
            if writer.write_all(piece).is_err() {
                break;
            }
            sent += piece.len();
        }
        sent
    })
}

/// What follows the expected answers on the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Then {
    /// The end of the stream, nothing more written (D1, D3).
    Closed,
    /// The connection goes on: the next request is answered (D2).
    Kept,
}

/// One hostile input: written at once on a fresh connection; the answers
/// expected, in order, as (status code, echoed `resource` when a D-rule
/// fixes it), and what happens next.
struct Case {
    name: &'static str,
    bytes: Arc<Vec<u8>>,
    answers: &'static [(u64, Option<&'static str>)],
    then: Then,
}

impl Case {
    fn new(
        name: &'static str,
        bytes: impl Into<Vec<u8>>,
        answers: &'static [(u64, Option<&'static str>)],
        then: Then,
    ) -> Case {
        Case {
            name,
            bytes: Arc::new(bytes.into()),
            answers,
            then,
        }
    }

    fn run(&self, runtime: Runtime, addr: SocketAddr) {
        let what = format!("{runtime:?} {}", self.name);
        let stream = connect(addr);
        let writer = write_in_background(&stream, Arc::clone(&self.bytes));
        let mut client = Reader::new(stream);
        for &(status, resource) in self.answers {
            let response = client.expect();
            assert_eq!(code(&response), status, "{what}: {response}");
            if let Some(resource) = resource {
                assert_eq!(response["resource"], resource, "{what}: D7, D12 echo");
            }
        }
        match self.then {
            Then::Closed => {
                assert!(client.closed(), "{what}: the connection closes");
                writer.join().expect("writer");
            }
            Then::Kept => {
                // Every answer is in, so every byte was read: the writer is
                // done, and nothing of ours can interleave.
                assert_eq!(writer.join().expect("writer"), self.bytes.len(), "{what}");
                client.send(&request("GET", "/after", ""));
                assert_eq!(content(&client.expect()), "echo /after ", "{what}: kept open");
            }
        }
        assert_served_promptly(addr, &what);
    }
}

/// A request as raw text with `fields` spliced in before `headers`, and
/// `headers` and `body` as given (JSON text).
fn raw_request(resource: &str, fields: &str, headers: &str, body: &str) -> String {
    format!(
        r#"{{"jsontp":"1.0","type":"request","resource":"{resource}","method":"GET",{fields}"headers":{headers},"body":{body}}}"#
    )
}

const EMPTY_BODY: &str = r#"{"content":"","encoding":"identity"}"#;

/// A TLS 1.2-style ClientHello record: what a TLS client sends first.
fn tls_client_hello() -> Vec<u8> {
    let mut hello = vec![0x03, 0x03];
    hello.extend([0x5a; 32]); // random
    hello.push(0); // no session id
    hello.extend([0x00, 0x04, 0x13, 0x01, 0xc0, 0x2f]); // two cipher suites
    hello.extend([0x01, 0x00]); // no compression
    hello.extend([0x00, 0x00]); // no extensions
    let mut handshake = vec![0x01, 0x00];
    handshake.extend(u16::try_from(hello.len()).expect("short").to_be_bytes());
    handshake.extend(hello);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend(u16::try_from(handshake.len()).expect("short").to_be_bytes());
    record.extend(handshake);
    record
}

/// 4 KiB of bytes from a fixed linear congruential generator, the first
/// one made a byte no message starts with.
fn random_bytes() -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut bytes: Vec<u8> = (0..4096)
        .map(|_| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 56) as u8
        })
        .collect();
    bytes[0] = 0x9c;
    bytes
}

/// A PROXY v2 header (IPv4) followed by a request.
fn proxy_v2_then_request() -> Vec<u8> {
    let mut bytes = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    bytes.extend([0x21, 0x11, 0, 12, 203, 0, 113, 7, 10, 0, 0, 1, 0x9c, 0x40, 0, 80]);
    bytes.extend(request("GET", "/who", "").as_bytes());
    bytes
}

/// A request on `/a` whose last field is followed by a `//` comment that
/// holds `}` and `{` and ends at `end`, then the closing brace; then a
/// request on `/b`. A reader that ended the comment elsewhere would frame
/// the two differently: one message, or none.
fn comment_ended_by(end: &str) -> Vec<u8> {
    let first = raw_request("/a", "", "{}", EMPTY_BODY);
    let first = first.strip_suffix('}').expect("an object");
    format!(
        "{first} // a note with }} and {{ in it{end}}}{}",
        request("GET", "/b", "")
    )
    .into_bytes()
}

/// The hostile inputs that are one write and a fixed answer.
fn cases() -> Vec<Case> {
    let good = request("GET", "/good", "");
    let headers: String = (0..10_000)
        .map(|n| format!(r#""x-h{n}":"v""#))
        .collect::<Vec<_>>()
        .join(",");
    let mut number = raw_request("/n", "", "{}", r#"{"content":"","encoding":"identity","n":1"#).into_bytes();
    number.truncate(number.len() - 2); // no closing braces yet
    number.resize(number.len() + 50_000_000, b'7');
    number.extend(b"}}\n");
    vec![
        // D1: bytes where a message must start that are not `{`: `400`
        // (resource `""`, D12) and close.
        Case::new(
            "a TLS ClientHello",
            tls_client_hello(),
            &[(400, Some(""))],
            Then::Closed,
        ),
        // Bytes that start like HTTP but are no request line.
        Case::new(
            "an HTTP-like line",
            "GET /index.html HTTP/2\r\nHost: localhost\r\n\r\n",
            &[(400, Some(""))],
            Then::Closed,
        ),
        Case::new("random bytes", random_bytes(), &[(400, Some(""))], Then::Closed),
        // D21: without the option a PROXY header is bytes where a message
        // must start (D1). The v2 signature starts with CR LF CR LF, which
        // is whitespace between messages; its NUL is not.
        Case::new(
            "a PROXY v2 header",
            proxy_v2_then_request(),
            &[(400, Some(""))],
            Then::Closed,
        ),
        // D4: duplicate keys are `400` however they are spelled; the
        // message is well framed, so the connection goes on (D2).
        Case::new(
            "a duplicate key spelled with an escape",
            raw_request("/dup", r#""meth\u006fd":"DELETE","#, "{}", EMPTY_BODY),
            &[(400, None)],
            Then::Kept,
        ),
        // D4, D8: header names are compared case-insensitively.
        Case::new(
            "header names differing in case",
            raw_request(
                "/case",
                "",
                r#"{"Accept-Language":"en-US","accept-language":"fr-FR"}"#,
                EMPTY_BODY,
            ),
            &[(400, None)],
            Then::Kept,
        ),
        // D1: a `//` comment ends at CR, U+2028 or U+2029, for the scanner
        // and the parser alike: two messages, two answers, in order (D2).
        Case::new(
            "a comment ended by CR",
            comment_ended_by("\r"),
            &[(200, Some("/a")), (200, Some("/b"))],
            Then::Kept,
        ),
        Case::new(
            "a comment ended by U+2028",
            comment_ended_by("\u{2028}"),
            &[(200, Some("/a")), (200, Some("/b"))],
            Then::Kept,
        ),
        Case::new(
            "a comment ended by U+2029",
            comment_ended_by("\u{2029}"),
            &[(200, Some("/a")), (200, Some("/b"))],
            Then::Kept,
        ),
        // D1: a BOM is skipped at the very start of a connection only.
        Case::new(
            "a BOM at the start",
            format!("\u{feff}{good}"),
            &[(200, Some("/good"))],
            Then::Kept,
        ),
        Case::new(
            "a BOM between two messages",
            format!("{good}\u{feff}{good}"),
            &[(200, Some("/good")), (400, Some(""))],
            Then::Closed,
        ),
        // D3: more headers than the limit: `431`; not among D2's reasons
        // to close.
        Case::new(
            "10,000 headers",
            raw_request("/h", "", &format!("{{{headers}}}"), EMPTY_BODY),
            &[(431, Some("/h"))],
            Then::Kept,
        ),
        // D3: a message past the size limit: `413` and close, at the
        // first byte past it.
        Case::new("a 50 MB number", number, &[(413, None)], Then::Closed),
        // D1: only whitespace between messages, and no limit on it; it is
        // no part of a message, so the size limit (256 KiB here) does not
        // count it.
        Case::new(
            "4 MiB of whitespace between two messages",
            format!("{good}{}{good}", " \t\r\n".repeat(1 << 20)),
            &[(200, Some("/good")), (200, Some("/good"))],
            Then::Kept,
        ),
    ]
}

#[test]
fn one_write_cases_get_the_answer_the_rules_give() {
    let cases = cases();
    each_runtime(|runtime| {
        let server = start(runtime, Echo, options(hostile_config(), 2));
        for case in &cases {
            case.run(runtime, server.addr);
        }
        server.shutdown_and_join();
    });
}

#[test]
fn d1_an_http_request_line_gets_one_plain_http_answer_then_the_close() {
    each_runtime(|runtime| {
        let server = start(runtime, Echo, options(hostile_config(), 2));
        let mut stream = connect(server.addr);
        stream
            .write_all(b"GET /index.html HTTP/1.1\r\nHost: localhost:8080\r\nAccept: */*\r\n\r\n")
            .expect("write");
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .expect("the answer, then the close");
        assert!(
            answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{runtime:?}: {answer}"
        );
        assert!(answer.contains("Connection: close\r\n"), "{runtime:?}: {answer}");
        assert!(
            answer.ends_with("Try: jsontp get jsontp://localhost:8080/\n"),
            "{runtime:?}: {answer}"
        );
        server.shutdown_and_join();
    });
}

#[test]
fn a_message_nested_too_deep_is_refused_before_it_ends() {
    // D3: depth past the limit (16 here) is `400`, answered as soon as the
    // level opens: the rest of the message is read and dropped, and the
    // connection goes on (not among D2's reasons to close).
    let start = raw_request(
        "/deep",
        "",
        "{}",
        r#"{"content":"","encoding":"identity","deep":"#,
    );
    let start = start.strip_suffix('}').expect("an open body");
    each_runtime(|runtime| {
        let server = start_hostile(runtime);
        let mut client = Reader::new(connect(server.addr));
        client.send(&format!("{start}{}", "[".repeat(10_000)));
        let refused = client.expect();
        assert_eq!(code(&refused), 400, "{runtime:?}: {refused}");
        assert_served_promptly(server.addr, format!("{runtime:?} while a deep message is open"));
        client.send(&format!("{}}}}}\n", "]".repeat(10_000)));
        client.send(&request("GET", "/after", ""));
        assert_eq!(
            content(&client.expect()),
            "echo /after ",
            "{runtime:?}: kept open"
        );
        server.shutdown_and_join();
    });
}

fn start_hostile(runtime: Runtime) -> crate::support::Running {
    start(runtime, Echo, options(hostile_config(), 2))
}

/// Writes a request whose `field` holds 100 MiB, in 1 MiB pieces, and
/// returns the answer, how many bytes the server let in before it closed,
/// and how long the answer took.
fn send_100_mib(addr: SocketAddr, body_first: bool) -> (serde_json::Value, usize, Duration) {
    const SIZE: usize = 100 << 20;
    let (head, tail) = if body_first {
        // `content` streams (D19): bounded by the content limit.
        let head = raw_request("/big", "", "{}", r#"{"encoding":"identity","content":""#);
        (
            head.strip_suffix('}').expect("open").to_owned(),
            "\"}}\n".to_owned(),
        )
    } else {
        // A header's value: part of the message, bounded by its size.
        let head =
            r#"{"jsontp":"1.0","type":"request","resource":"/big","method":"GET","headers":{"authorization":""#
                .to_owned();
        (head, format!("\"}},\"body\":{EMPTY_BODY}}}\n"))
    };
    let mut bytes = head.into_bytes();
    bytes.resize(bytes.len() + SIZE, b'x');
    bytes.extend(tail.as_bytes());
    let started = std::time::Instant::now();
    let stream = connect(addr);
    let writer = write_in_background(&stream, Arc::new(bytes));
    let mut client = Reader::new(stream);
    let answer = client.expect();
    let took = started.elapsed();
    assert!(client.closed(), "closed after the answer");
    (answer, writer.join().expect("writer"), took)
}

#[test]
fn a_100_mib_message_is_refused_long_before_it_is_read() {
    // D19, D3: streamed `content` past the content limit (1 MiB here) is
    // `413` and close; so is a message past the size limit (256 KiB here)
    // anywhere else. Neither waits for the end of the 100 MiB.
    each_runtime(|runtime| {
        let server = start_hostile(runtime);
        let limits = [
            (true, "content", "body.content"),
            (false, "a header's value", "the message is larger"),
        ];
        for (body_first, what, which_limit) in limits {
            let (answer, sent, took) = send_100_mib(server.addr, body_first);
            let what = format!("{runtime:?} 100 MiB of {what}");
            assert_eq!(code(&answer), 413, "{what}: {answer}");
            let why = answer["status"]["human-message"].as_str().unwrap_or_default();
            assert!(why.contains(which_limit), "{what}: {why}");
            // The kernels' buffers on both sides (and the server's drain
            // of 1 MiB as it closes) take some; nothing near 100 MiB.
            assert!(sent < 16 << 20, "{what}: {sent} bytes went in");
            assert!(took < Duration::from_secs(2), "{what}: answered after {took:?}");
            assert_served_promptly(server.addr, &what);
        }
        server.shutdown_and_join();
    });
}

/// A message that puts a split point inside every state the scanner has:
/// comments holding brackets and quotes (one ended by U+2028), escapes, a
/// surrogate pair, a single-quoted string, multi-byte UTF-8 (in the
/// streamed content too), nested values.
const TRICKY: &str = concat!(
    r#"{"jsontp":"1.0", /* a } and a " */ "type":"request","resource":"/split/%C3%A9","method":"GET","#,
    "// a note with { and ] in it\u{2028}",
    r#""headers":{"accept-language":["en-US"],'accept':'text/plain'},"#,
    r#""body":{"encoding":"identity","content":"plain é 😀 }{ ][ text","#,
    r#""note":[1,{"a":"]\"}\u00e9\ud83d\ude00"},'it\'s }'],},}"#,
    "\n",
);

#[test]
fn a_message_split_at_any_point_gets_the_same_answer() {
    // D1: the scan resumes where it stopped, in whatever state; every
    // split point on one runtime, a sample of them on the others.
    each_runtime(|runtime| {
        let server = start_hostile(runtime);
        let stream = connect(server.addr);
        stream.set_nodelay(true).expect("no delay");
        let mut client = Reader::new(stream);
        client.send(TRICKY);
        let whole = client.expect();
        assert_eq!(code(&whole), 200, "{runtime:?}: {whole}");
        let expected = (whole["resource"].clone(), content(&whole).to_owned());
        assert_eq!(content(&whole), "echo /split/é plain é 😀 }{ ][ text");
        let step = if runtime == Runtime::Std { 1 } else { 7 };
        for at in (1..TRICKY.len()).step_by(step) {
            let (first, second) = TRICKY.as_bytes().split_at(at);
            client.stream.write_all(first).expect("write");
            // Let the server read the first part on its own.
            std::thread::sleep(Duration::from_millis(1));
            client.stream.write_all(second).expect("write");
            let answer = client.expect();
            assert_eq!(code(&answer), 200, "{runtime:?} split at {at}: {answer}");
            assert_eq!(
                (answer["resource"].clone(), content(&answer).to_owned()),
                expected,
                "{runtime:?} split at {at}"
            );
        }
        server.shutdown_and_join();
    });
}

/// Writes `bytes` one at a time, `every` apart, from a thread of its own,
/// until done or the server closes.
fn trickle(stream: &TcpStream, bytes: Vec<u8>, every: Duration) -> JoinHandle<()> {
    let mut writer = stream.try_clone().expect("clone");
    std::thread::spawn(move || {
        for byte in bytes {
            if writer.write_all(&[byte]).is_err() {
                return;
            }
            std::thread::sleep(every);
        }
    })
}

#[test]
fn slowloris_connections_are_timed_out_while_others_are_served() {
    // Eight connections send a request one byte a second: D3's message
    // time (2 s here) runs from its first byte, so each gets `408` and the
    // close. Four send a space a second: whitespace between messages is
    // no message (D1), so D3's idle time (2 s here) runs and closes them
    // without a response; so it does for four that send nothing at all.
    // Meanwhile a fresh client is answered at once.
    let text = request("GET", "/loris", "").into_bytes();
    each_runtime(|runtime| {
        let config = hostile_config();
        let server = start(runtime, Echo, options(config.clone(), 2));
        let started = Instant::now();
        let open = |bytes: &[u8]| {
            let stream = connect(server.addr);
            let writer = trickle(&stream, bytes.to_vec(), Duration::from_secs(1));
            (Reader::new(stream), writer)
        };
        let loris: Vec<_> = (0..8).map(|_| open(&text)).collect();
        let spaces: Vec<_> = (0..4).map(|_| open(&[b' '; 10])).collect();
        let silent: Vec<_> = (0..4).map(|_| open(&[])).collect();
        std::thread::sleep(Duration::from_millis(300));
        assert_served_promptly(server.addr, format!("{runtime:?} among slow peers"));
        std::thread::sleep(Duration::from_millis(1000));
        assert_served_promptly(server.addr, format!("{runtime:?} among slow peers"));
        let limits = config.limits;
        let mut writers = Vec::new();
        for (mut client, writer) in loris {
            assert_eq!(code(&client.expect()), 408, "{runtime:?}");
            assert!(client.closed(), "{runtime:?}: 408 closes");
            let took = started.elapsed();
            assert!(
                took >= limits.message_timeout - Duration::from_millis(200)
                    && took < limits.message_timeout * 2,
                "{runtime:?}: 408 after {took:?}"
            );
            writers.push(writer);
        }
        for (mut client, writer) in spaces.into_iter().chain(silent) {
            assert!(client.closed(), "{runtime:?}: closed without a response");
            let took = started.elapsed();
            assert!(
                took >= config.idle_timeout - Duration::from_millis(200) && took < config.idle_timeout * 2,
                "{runtime:?}: closed after {took:?}"
            );
            writers.push(writer);
        }
        for writer in writers {
            writer.join().expect("writer");
        }
        assert_served_promptly(server.addr, format!("{runtime:?} after slow peers"));
        server.shutdown_and_join();
    });
}

/// A connection whose receive buffer is `buffer` bytes (the kernel may
/// double it), so that the kernel holds little of what the server sends.
pub(crate) fn small_window(addr: SocketAddr, buffer: usize) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    socket.set_recv_buffer_size(buffer).expect("buffer size");
    socket.connect(&addr.into()).expect("connect");
    let stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(READ_TIMEOUT)).expect("timeout");
    stream
}

/// Reads until the end of the stream (or a reset); how many bytes came.
fn drain(stream: &mut TcpStream, what: &str) -> usize {
    let started = Instant::now();
    let mut received = 0;
    let mut chunk = vec![0u8; 256 << 10];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return received,
            Ok(n) => received += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return received,
            Err(e) => panic!("{what}: the server neither closed nor sent: {e}"),
        }
        assert!(started.elapsed() < LIMIT, "{what}: the stream ends");
    }
}

/// A client pipelines 500,000 requests for 1 MiB each and never reads.
/// D3: with 16 answers owed, or 1 MiB beyond the one being written, the
/// server stops reading and handling; after the stall time (1 s here) with
/// no byte taken, it closes and drops what it held. Thousands of requests
/// sent, a handful handled: memory bounded whatever the peer sends.
fn a_pipelining_client_that_never_reads(runtime: Runtime) {
    const ANSWER: usize = 1 << 20;
    let requests = Arc::new(request("GET", "/p", "").repeat(500_000).into_bytes());
    let handled = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&handled);
    let handler = move |request: &Request| {
        if request.resource.path() != "/p" {
            return Echo.handle(request, &RequestInfo::new(([127, 0, 0, 1], 0).into()));
        }
        counter.fetch_add(1, Ordering::SeqCst);
        Response::new(Status::new(StatusCode::OK, "big")).with_body(Body::text("y".repeat(ANSWER)))
    };
    let config = hostile_config();
    let server = start(runtime, handler, options(config.clone(), 2));
    let mut stream = small_window(server.addr, 4096);
    let writer = write_in_background(&stream, Arc::clone(&requests));
    // Never read while the stall time passes, and well after.
    std::thread::sleep(config.limits.stall_timeout * 5 / 2);
    let count = handled.load(Ordering::SeqCst);
    // What the kernel's send buffer takes (4 MiB at most here), the answer
    // being written and 1 MiB beyond it: a handful.
    assert!(
        (1..=config.max_pipelined).contains(&count),
        "{runtime:?}: {count} requests handled"
    );
    let sent = writer.join().expect("writer");
    assert!(
        sent < requests.len() / 4,
        "{runtime:?}: the server stopped reading"
    );
    let received = drain(&mut stream, &format!("{runtime:?}"));
    // Only what the kernels held arrives, then the end of the stream.
    assert!(received < count * ANSWER, "{runtime:?}: {received} bytes arrived");
    assert_eq!(
        handled.load(Ordering::SeqCst),
        count,
        "{runtime:?}: nothing more handled"
    );
    assert_served_promptly(server.addr, format!("{runtime:?} after a stalled pipeline"));
    assert!(server.shutdown_and_join() < Duration::from_secs(3), "{runtime:?}");
}

#[test]
fn a_pipelining_client_that_never_reads_on_every_runtime() {
    // Several answers are cut short at once when the stall closes the
    // connection: the access log counts each one's bytes (it used to
    // underflow, a panic that took a std thread or a mio worker down).
    each_runtime(a_pipelining_client_that_never_reads);
}

/// [`Echo`], and `GET /stream/N`: N bytes of `y` streamed from a reader
/// (D19), produced as the peer takes them.
pub(crate) struct Streamer;

impl Handler for Streamer {
    fn respond(&self, incoming: Incoming) -> Handled {
        let size = incoming.request.resource.path().strip_prefix("/stream/");
        match size.and_then(|n| n.parse::<u64>().ok()) {
            Some(size) => Reply::streamed(
                Response::new(Status::new(StatusCode::OK, "streamed")),
                std::io::repeat(b'y').take(size),
            )
            .into(),
            None => Echo.respond(incoming),
        }
    }
}

/// The size of the answers the slow readers ask for: far more than the
/// kernels' buffers on both sides hold, so that the server holds output
/// for as long as they read.
pub(crate) const SLOW_ANSWER: usize = 16 << 20;

/// D3: the stall limit counts time with no byte of our output taken; it
/// sets no minimum rate. A reader taking 64 KiB every 100 ms of a 16 MiB
/// answer, for several stall times of 500 ms, gets all of it.
fn a_slow_reader_that_keeps_taking_output(runtime: Runtime) {
    {
        let mut config = hostile_config();
        config.limits.stall_timeout = Duration::from_millis(500);
        let server = start(runtime, Streamer, options(config, 2));
        let mut stream = small_window(server.addr, 64 << 10);
        stream
            .write_all(request("GET", &format!("/stream/{SLOW_ANSWER}"), "").as_bytes())
            .expect("write");
        // D1: after a half close every answer still comes, then the end
        // of the stream.
        stream.shutdown(Shutdown::Write).expect("half close");
        let started = Instant::now();
        let mut taken = Vec::new();
        let mut chunk = vec![0u8; 64 << 10];
        while started.elapsed() < Duration::from_secs(2) {
            let n = stream.read(&mut chunk).expect("the answer flows");
            assert!(
                n > 0,
                "{runtime:?}: closed after {} bytes, {:?}",
                taken.len(),
                started.elapsed()
            );
            taken.extend_from_slice(&chunk[..n]);
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(taken.len() < SLOW_ANSWER / 4, "{runtime:?}: the reading was slow");
        assert_served_promptly(server.addr, format!("{runtime:?} beside a slow reader"));
        stream
            .read_to_end(&mut taken)
            .expect("the rest, then the end of the stream");
        let answer: serde_json::Value =
            serde_json::from_slice(&taken).unwrap_or_else(|e| panic!("{runtime:?}: {e}"));
        assert_eq!(
            content(&answer).len(),
            SLOW_ANSWER,
            "{runtime:?}: the whole answer"
        );
        server.shutdown_and_join();
    }
}

#[test]
fn a_slow_reader_that_keeps_taking_output_is_not_closed_on_std() {
    a_slow_reader_that_keeps_taking_output(Runtime::Std);
}

#[test]
fn a_slow_reader_that_keeps_taking_output_is_not_closed_on_mio_and_tokio() {
    // Linux reports the socket writable only once a third of its send
    // buffer is free; the drive offers the output again before acting on
    // the stall timer (and the tokio server asks the kernel when tokio's
    // cached readiness says no), so the bytes the reader took count (D3).
    #[cfg(feature = "mio")]
    a_slow_reader_that_keeps_taking_output(Runtime::Mio);
    #[cfg(feature = "tokio")]
    a_slow_reader_that_keeps_taking_output(Runtime::Tokio);
    // The outbox counts as output the peer has not taken (D3).
    #[cfg(all(feature = "uring", target_os = "linux"))]
    a_slow_reader_that_keeps_taking_output(Runtime::Uring);
}

#[test]
fn a_reader_taking_a_byte_at_a_time_takes_no_output_and_is_closed() {
    // D3 counts bytes of our output taken by the peer's transport. A peer
    // that reads one byte at a time (here every 250 ms, more often than the
    // stall time of 1 s) from a full receive buffer never frees enough of
    // it for TCP to open its window again: the server's output stays
    // untaken, and the connection is closed at the stall limit, the rest
    // of the answer dropped.
    each_runtime(|runtime| {
        let config = hostile_config();
        let server = start(runtime, Streamer, options(config.clone(), 2));
        let mut stream = small_window(server.addr, 4096);
        stream
            .write_all(request("GET", &format!("/stream/{SLOW_ANSWER}"), "").as_bytes())
            .expect("write");
        let trickle_for = config.limits.stall_timeout * 5 / 2;
        let started = Instant::now();
        let mut byte = [0u8; 1];
        while started.elapsed() < trickle_for {
            stream.read_exact(&mut byte).expect("a byte");
            std::thread::sleep(Duration::from_millis(250));
        }
        assert_served_promptly(server.addr, format!("{runtime:?} beside a trickling reader"));
        let received = drain(&mut stream, &format!("{runtime:?}"));
        // The kernels' buffers, not the 16 MiB, then the end of the stream.
        assert!(
            (1..SLOW_ANSWER / 2).contains(&received),
            "{runtime:?}: {received} bytes arrived"
        );
        server.shutdown_and_join();
    });
}

#[test]
fn a_large_answer_built_slower_than_the_stall_time_still_goes_out() {
    // D3: the stall limit is the time the peer leaves our output untaken.
    // Here the peer reads as fast as it can; building the 64 MiB answer
    // (in a debug build, more than a second) is the server's time, not the
    // peer's: the output is offered to the socket before the stall timer
    // may act (every runtime used to close without a byte written).
    const ANSWER: usize = 64 << 20;
    each_runtime(|runtime| {
        let mut config = hostile_config();
        config.limits.stall_timeout = Duration::from_millis(200);
        let server = start(runtime, Echo, options(config, 2));
        let mut stream = connect(server.addr);
        stream
            .write_all(request("GET", &format!("/big/{ANSWER}"), "").as_bytes())
            .expect("write");
        stream.shutdown(Shutdown::Write).expect("half close");
        let mut taken = Vec::new();
        stream
            .read_to_end(&mut taken)
            .expect("the answer, then the end of the stream");
        assert!(taken.len() > ANSWER, "{runtime:?}: {} bytes arrived", taken.len());
        server.shutdown_and_join();
    });
}

/// The child process the bomb and churn tests run a server in, so that
/// its memory and descriptors are its own: a server with
/// [`hostile_config`] on the runtime the environment names, serving until
/// its standard input closes. Without the variable (an ordinary
/// `--ignored` run) it does nothing.
#[test]
#[ignore = "run as a child process by the bomb and churn tests"]
fn child_server() {
    let Some(runtime) = child_runtime(CHILD_RUNTIME) else {
        return;
    };
    let server = start_hostile(runtime);
    println!("ADDR {}", server.addr);
    std::io::stdout().flush().expect("stdout");
    let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
    server.shutdown_and_join();
}

const CHILD_RUNTIME: &str = "JSONTP_HOSTILE_CHILD_RUNTIME";

/// [`child_server`] running; killed when dropped, however the test ends.
struct ChildServer {
    child: Child,
    addr: SocketAddr,
}

impl ChildServer {
    fn start(runtime: Runtime) -> ChildServer {
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args(["hostile::child_server", "--exact", "--ignored", "--nocapture"])
            .env(CHILD_RUNTIME, format!("{runtime:?}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("child server");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // libtest may print the test's name on the same line.
                if let Some((_, addr)) = line.split_once("ADDR ") {
                    let _ = tx.send(addr.trim().parse::<SocketAddr>());
                }
            }
        });
        let mut server = ChildServer {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        server.addr = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the child prints its address")
            .expect("an address");
        // One ordinary exchange, so that every figure read later includes
        // what serving at all costs.
        assert_served_promptly(server.addr, format!("{runtime:?} child"));
        server
    }

    /// A field of /proc/PID/status, in KiB.
    fn status_kib(&self, field: &str) -> usize {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("/proc status");
        let line = status.lines().find(|l| l.starts_with(field)).expect("the field");
        line.split_whitespace()
            .nth(1)
            .and_then(|n| n.parse().ok())
            .expect("a number")
    }

    /// How many descriptors the server has open.
    fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .expect("/proc fd")
            .count()
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a compression bomb expands to.
const BOMB: usize = 1 << 30;

/// `mib` MiB of zeros, compressed as `encoding`: the first MiB compressed,
/// then the next one, flushed after each so that the second is a run of
/// whole blocks that refer only to zeros before them; that run repeated
/// makes any size in a few milliseconds.
fn bomb(encoding: &str, mib: usize) -> Vec<u8> {
    let zeros = vec![0u8; 1 << 20];
    let written = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = SharedSink(Arc::clone(&written));
    let mut encoder: Box<dyn Write> = match encoding {
        "br" => Box::new(brotli::CompressorWriter::new(sink, 1 << 16, 5, 24)),
        // The raw deflate stream inside both gzip and zlib.
        _ => Box::new(flate2::write::DeflateEncoder::new(
            sink,
            flate2::Compression::best(),
        )),
    };
    let mut pieces = Vec::new();
    for _ in 0..2 {
        encoder.write_all(&zeros).expect("compress");
        encoder.flush().expect("flush");
        pieces.push(written.lock().expect("buffer").len());
    }
    // Dropping the encoder ends the stream.
    drop(encoder);
    let compressed = written.lock().expect("buffer").clone();
    let (first, second) = (pieces[0], pieces[1]);
    let mut out = compressed[..first].to_vec();
    for _ in 1..mib {
        out.extend_from_slice(&compressed[first..second]);
    }
    out.extend_from_slice(&compressed[second..]);
    let len = (mib as u64) << 20;
    match encoding {
        "gzip" => {
            let mut crc = flate2::Crc::new();
            for _ in 0..mib {
                crc.update(&zeros);
            }
            let mut gzip = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 0xff];
            gzip.extend(out);
            gzip.extend(crc.sum().to_le_bytes());
            gzip.extend((len as u32).to_le_bytes());
            gzip
        }
        "deflate" => {
            // The zlib format (RFC 1950, D9); Adler-32 of zeros is 1 in its
            // low half and their count in its high half.
            let mut zlib = vec![0x78, 0xda];
            zlib.extend(out);
            zlib.extend((((len % 65_521) as u32) << 16 | 1).to_be_bytes());
            zlib
        }
        _ => out,
    }
}

/// A writer into a buffer the caller keeps a handle on.
struct SharedSink(Arc<std::sync::Mutex<Vec<u8>>>);

impl Write for SharedSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("buffer").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// How many bytes `bytes`, compressed as `encoding`, decode to (the
/// decoders check the gzip and zlib trailers).
fn decoded_len(encoding: &str, bytes: &[u8]) -> u64 {
    let mut sink = std::io::sink();
    match encoding {
        "gzip" => std::io::copy(&mut flate2::read::GzDecoder::new(bytes), &mut sink),
        "deflate" => std::io::copy(&mut flate2::read::ZlibDecoder::new(bytes), &mut sink),
        _ => std::io::copy(&mut brotli::Decompressor::new(bytes, 1 << 16), &mut sink),
    }
    .expect("a valid stream")
}

#[test]
fn the_bombs_expand_as_claimed() {
    // A bomb of 3 MiB is the head, the repeated run twice, and the end:
    // if it decodes to exactly 3 MiB, trailers and all, every size does.
    for encoding in ["gzip", "deflate", "br"] {
        assert_eq!(decoded_len(encoding, &bomb(encoding, 3)), 3 << 20, "{encoding}");
    }
}

#[cfg(target_os = "linux")]
#[test]
fn compression_bombs_get_413_at_once_and_memory_stays_bounded() {
    // D3, D19: decoded content past the content limit (1 MiB here) is
    // `413` and close; decoding stops there, never allocating past it.
    // Three bombs of 1 GiB of zeros each; the server, in a child process,
    // answers each at once, and its peak resident memory grows by far less
    // than one of them would take.
    let requests: Vec<(&str, Arc<Vec<u8>>)> = ["gzip", "deflate", "br"]
        .into_iter()
        .map(|encoding| {
            use base64::Engine;
            let content = base64::engine::general_purpose::STANDARD.encode(bomb(encoding, BOMB >> 20));
            let body = format!(r#"{{"encoding":"{encoding}","content":"{content}"}}"#);
            let text = raw_request("/bomb", "", "{}", &body) + "\n";
            (encoding, Arc::new(text.into_bytes()))
        })
        .collect();
    each_runtime(|runtime| {
        let server = ChildServer::start(runtime);
        let before = server.status_kib("VmHWM:");
        for (encoding, text) in &requests {
            let what = format!("{runtime:?} {encoding} bomb of {} bytes", text.len());
            let started = Instant::now();
            let stream = connect(server.addr);
            let writer = write_in_background(&stream, Arc::clone(text));
            let mut client = Reader::new(stream);
            let answer = client.expect();
            let took = started.elapsed();
            assert_eq!(code(&answer), 413, "{what}: {answer}");
            let why = answer["status"]["human-message"].as_str().unwrap_or_default();
            assert!(why.contains("body.content"), "{what}: {why}");
            assert!(client.closed(), "{what}: closed after 413");
            assert!(took < Duration::from_secs(1), "{what}: answered after {took:?}");
            writer.join().expect("writer");
            assert_served_promptly(server.addr, &what);
        }
        let grown = server.status_kib("VmHWM:").saturating_sub(before);
        assert!(
            grown < 64 << 10,
            "{runtime:?}: peak resident memory grew by {grown} KiB"
        );
    });
}

/// Connects `count` times and closes at once, each close a reset
/// (SO_LINGER 0) when `reset`; how long that took.
fn churn(addr: SocketAddr, count: usize, reset: bool) -> Duration {
    let started = Instant::now();
    for _ in 0..count {
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
        if reset {
            socket.set_linger(Some(Duration::ZERO)).expect("linger");
        }
        socket.connect(&addr.into()).expect("connect");
        drop(socket);
    }
    started.elapsed()
}

#[cfg(target_os = "linux")]
#[test]
fn connection_churn_leaves_no_descriptor_behind() {
    // Connections opened and closed at once, or reset (SO_LINGER 0), ten
    // thousand of each: the server (in a child process, so that the count
    // is its own) ends with the descriptors it had, and a fresh client is
    // answered at once. The closes leave the client's ends in TIME_WAIT
    // for a minute; loopback connects reuse them (and they hold no port
    // another destination needs).
    const COUNT: usize = 10_000;
    each_runtime(|runtime| {
        let server = ChildServer::start(runtime);
        let before = server.open_fds();
        let closed = churn(server.addr, COUNT, false);
        let reset = churn(server.addr, COUNT, true);
        // 10,000 of each take a few hundred milliseconds to two seconds
        // on a loaded debug build.
        assert!(
            closed + reset < LIMIT,
            "{runtime:?}: churn took {closed:?} and {reset:?}"
        );
        let started = Instant::now();
        let mut after = server.open_fds();
        while after > before && started.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(20));
            after = server.open_fds();
        }
        assert!(after <= before, "{runtime:?}: descriptors {before} → {after}");
        assert_served_promptly(server.addr, format!("{runtime:?} after churn"));
    });
}
