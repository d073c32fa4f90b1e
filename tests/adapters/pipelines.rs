//! Pipelines of streamed replies (D2, D19) on every server runtime and
//! through TLS: several downloads larger than a reader's piece asked for in
//! one write, each answered whole, in order, with the right bytes; a peer
//! that asks for many and never reads is closed by the stall limit (D3); an
//! upload spooled between two downloads; one answer per message when a
//! message is nested too deep (D1, D3). The graceful shutdown's deadline is
//! at the bottom ([`drain`]).

use jsontp_protocol::io_adapters::server::{Handled, Incoming};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use jsontp_protocol::io_adapters::server::{Handler, Reply, ServerOptions, SpoolOptions};
use jsontp_protocol::machine::ServerConfig;
use jsontp_protocol::message::Encoding;
use jsontp_protocol::message::{Body, Method, Response, Status, StatusCode};
use serde_json::Value;

use crate::support::{Echo, READ_TIMEOUT, Reader, Runtime, code, connect, content, options, request, start};

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

// -- The content, the handler, and a reader of large responses ------------

/// How a download's content goes on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `identity`: UTF-8 text, with a two-byte character on every line, so
    /// that pieces split characters.
    Text,
    Gzip,
    Br,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Text, Kind::Gzip, Kind::Br];

    fn prefix(self) -> &'static str {
        match self {
            Kind::Text => "id",
            Kind::Gzip => "gz",
            Kind::Br => "br",
        }
    }

    fn from_prefix(prefix: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|kind| kind.prefix() == prefix)
    }

    fn encoding(self) -> Encoding {
        match self {
            Kind::Text => Encoding::Identity,
            Kind::Gzip => Encoding::Gzip,
            Kind::Br => Encoding::Br,
        }
    }
}

/// The content of download `seed`: about `len` bytes of numbered lines that
/// name the seed, so that a response swapped, cut or repeated differs.
/// Text is cut at a character boundary; binary lines end with a NUL.
fn content_of(kind: Kind, len: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 64);
    let mut line = 0u32;
    while out.len() < len {
        match kind {
            Kind::Text => {
                out.extend_from_slice(format!("{seed:03} {line:07} é the quick brown fox\n").as_bytes())
            }
            _ => out.extend_from_slice(format!("{seed:03} {line:07} the quick brown fox\0").as_bytes()),
        }
        line += 1;
    }
    let mut end = len;
    if kind == Kind::Text {
        while std::str::from_utf8(&out[..end]).is_err() {
            end -= 1;
        }
    }
    out.truncate(end);
    out
}

/// The resource of download `seed` of `kind` and `len` bytes.
fn download(kind: Kind, len: usize, seed: u64) -> String {
    format!("/{}/{len}/{seed}", kind.prefix())
}

/// CRC-32 and length of `bytes`, as the upload answer reports them.
fn digest(bytes: &[u8]) -> String {
    let mut crc = flate2::Crc::new();
    crc.update(bytes);
    format!("{} {:08x}", bytes.len(), crc.sum())
}

/// `GET /{id,gz,br}/LEN/SEED` streams [`content_of`] with
/// [`Reply::streamed`]; `GET /small/SEED` answers `small SEED` from memory;
/// `PUT` answers `201` with the upload's length and CRC, and whether it was
/// spooled.
#[derive(Clone, Copy)]
struct Streams;

impl Streams {
    /// The answer to `incoming`.
    fn reply(&self, incoming: Incoming) -> Reply {
        let Incoming { request, upload, .. } = incoming;
        let request = &*request;
        if request.method == Method::Put {
            let (bytes, spooled) = match &upload {
                Some(upload) => {
                    let mut bytes = Vec::new();
                    upload
                        .reader()
                        .expect("reopen the upload")
                        .read_to_end(&mut bytes)
                        .expect("read the upload");
                    (bytes, true)
                }
                None => (request.body.content().to_vec(), false),
            };
            let text = format!("{} {spooled}", digest(&bytes));
            return Response::new(Status::new(StatusCode::CREATED, "stored"))
                .with_body(Body::text(text))
                .into();
        }
        let path = request.resource.path();
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        match parts.as_slice() {
            ["small", seed] => Response::new(Status::new(StatusCode::OK, "small"))
                .with_body(Body::text(format!("small {seed}")))
                .into(),
            [prefix, len, seed] => {
                let (Some(kind), Ok(len), Ok(seed)) = (Kind::from_prefix(prefix), len.parse(), seed.parse())
                else {
                    return Response::new(Status::new(StatusCode::NOT_FOUND, "no")).into();
                };
                let head = Response::new(Status::new(StatusCode::OK, "streamed"))
                    .with_body(Body::empty().with_encoding(kind.encoding()).expect("an encoding"));
                Reply::streamed(head, io::Cursor::new(content_of(kind, len, seed)))
            }
            _ => Response::new(Status::new(StatusCode::NOT_FOUND, "no")).into(),
        }
    }
}

impl Handler for Streams {
    fn respond(&self, incoming: Incoming) -> Handled {
        self.reply(incoming).into()
    }
}

/// Reads responses of any size off a stream: finds each one's end by
/// counting brackets outside strings (the server writes strict JSON), so
/// that a large response is scanned once, not once per read.
struct Wire<S> {
    stream: S,
    buf: Vec<u8>,
    pos: usize,
    depth: usize,
    string: bool,
    escaped: bool,
    /// Bytes read from the stream in all.
    received: usize,
    /// Responses read.
    responses: usize,
}

impl<S: Read> Wire<S> {
    fn new(stream: S) -> Wire<S> {
        Wire {
            stream,
            buf: Vec::new(),
            pos: 0,
            depth: 0,
            string: false,
            escaped: false,
            received: 0,
            responses: 0,
        }
    }

    /// Where the response at the start of the buffer ends, once it has.
    fn frame_end(&mut self) -> Option<usize> {
        while self.pos < self.buf.len() {
            let byte = self.buf[self.pos];
            self.pos += 1;
            if self.string {
                if self.escaped {
                    self.escaped = false;
                } else if byte == b'\\' {
                    self.escaped = true;
                } else if byte == b'"' {
                    self.string = false;
                }
                continue;
            }
            match byte {
                b'"' => self.string = true,
                b'{' | b'[' => self.depth += 1,
                b'}' | b']' => {
                    self.depth = self.depth.checked_sub(1).expect("the server's brackets match");
                    if self.depth == 0 {
                        return Some(self.pos);
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// Reads once more; `false` at the end of the stream (or a reset).
    /// Panics when nothing arrives within the stream's read timeout.
    fn fill(&mut self, what: &str) -> bool {
        let mut chunk = vec![0u8; 64 * KIB];
        match self.stream.read(&mut chunk) {
            Ok(0) => false,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                self.received += n;
                true
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => false,
            Err(e) => panic!(
                "{what}: nothing more within the read timeout ({e}) after {} whole responses; \
                 {} bytes of the next one held: {:?}…",
                self.responses,
                self.buf.len(),
                String::from_utf8_lossy(&self.buf[..self.buf.len().min(240)])
            ),
        }
    }

    /// The next response, or `None` when the stream ends first (a response
    /// cut short included: see `held`).
    fn next(&mut self, what: &str) -> Option<Value> {
        loop {
            if let Some(end) = self.frame_end() {
                let value = serde_json::from_slice(&self.buf[..end])
                    .unwrap_or_else(|e| panic!("{what}: not a JSON response: {e}"));
                self.buf.drain(..end);
                self.pos = 0;
                self.responses += 1;
                return Some(value);
            }
            if !self.fill(what) {
                return None;
            }
        }
    }

    /// Bytes of a response not ended yet (beyond whitespace).
    fn held(&self) -> usize {
        self.buf.iter().filter(|b| !b.is_ascii_whitespace()).count()
    }

    fn expect(&mut self, what: &str) -> Value {
        let responses = self.responses;
        self.next(what).unwrap_or_else(|| {
            panic!(
                "{what}: the stream ended after {responses} whole responses, {} bytes of the next held",
                self.held()
            )
        })
    }

    /// Asserts that the next response answers `GET resource` (a download or
    /// `/small/N`) with exactly its content.
    fn expect_download(&mut self, what: &str, resource: &str) {
        let what = format!("{what}: response {} ({resource})", self.responses + 1);
        let response = self.expect(&what);
        assert_eq!(code(&response), 200, "{what}: {}", response["status"]);
        assert_eq!(
            response["resource"], resource,
            "{what}: answers in request order (D2)"
        );
        let got = decoded(&response, &what);
        let want = expected(resource);
        if got != want {
            let at = got.iter().zip(&want).position(|(a, b)| a != b);
            panic!(
                "{what}: {} bytes, {} expected; the first difference at {at:?}",
                got.len(),
                want.len()
            );
        }
    }

    /// Asserts that the stream ends (end of stream or reset) with no more
    /// response, within `limit`.
    fn expect_end(&mut self, what: &str, limit: Duration) {
        let started = Instant::now();
        if let Some(extra) = self.next(what) {
            panic!("{what}: one more response: {}", short(&extra));
        }
        assert!(
            started.elapsed() < limit,
            "{what}: the end took {:?}",
            started.elapsed()
        );
    }
}

impl<S: Write> Wire<S> {
    fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
        self.stream.flush().expect("flush");
    }
}

/// What `GET resource` should bring.
fn expected(resource: &str) -> Vec<u8> {
    let parts: Vec<&str> = resource.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["small", seed] => format!("small {seed}").into_bytes(),
        [prefix, len, seed] => content_of(
            Kind::from_prefix(prefix).expect("a kind"),
            len.parse().expect("a length"),
            seed.parse().expect("a seed"),
        ),
        _ => panic!("not a download: {resource}"),
    }
}

/// The response's content, decoded without the crate's help.
fn decoded(response: &Value, what: &str) -> Vec<u8> {
    use base64::Engine;
    let text = response["body"]["content"].as_str().unwrap_or("");
    let encoding = response["body"]["encoding"].as_str().unwrap_or("identity");
    if encoding == "identity" {
        return text.as_bytes().to_vec();
    }
    let packed = base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap_or_else(|e| panic!("{what}: not base64: {e}"));
    let mut out = Vec::new();
    let unpacked = match encoding {
        "gzip" => flate2::read::GzDecoder::new(&packed[..]).read_to_end(&mut out),
        "br" => brotli::Decompressor::new(&packed[..], 4096).read_to_end(&mut out),
        other => panic!("{what}: encoding {other}"),
    };
    unpacked.unwrap_or_else(|e| panic!("{what}: not {encoding}: {e}"));
    out
}

/// A response without its content, for a message.
fn short(response: &Value) -> String {
    let mut response = response.clone();
    if let Some(body) = response.get_mut("body").and_then(Value::as_object_mut) {
        body.remove("content");
    }
    response.to_string()
}

/// `GET resource`, compact plus `\n`.
fn get(resource: &str) -> String {
    request("GET", resource, "")
}

/// `PUT resource` with `content` as identity text, `body` last and
/// `content` last inside it (D19), so that a streaming server spools it.
fn put(resource: &str, content: &str) -> String {
    format!(
        r#"{{"jsontp":"1.0","type":"request","resource":{},"method":"PUT","headers":{{}},"body":{{"encoding":"identity","content":{}}}}}"#,
        Value::from(resource),
        Value::from(content),
    ) + "\n"
}

/// A connection to `addr` with a read timeout, and a receive buffer of
/// `window` bytes when given (the kernel then holds little for us).
fn socket(addr: SocketAddr, window: Option<usize>) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    if let Some(window) = window {
        socket.set_recv_buffer_size(window).expect("buffer size");
    }
    socket.connect(&addr.into()).expect("connect");
    let stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(READ_TIMEOUT)).expect("timeout");
    stream.set_write_timeout(Some(READ_TIMEOUT)).expect("timeout");
    stream
}

/// Writes `bytes` in one `write_all` on a thread of its own, so that a
/// server that answers as it reads never waits for us to read.
fn send_behind(stream: &TcpStream, bytes: Vec<u8>) -> JoinHandle<io::Result<()>> {
    let mut writer = stream.try_clone().expect("clone");
    std::thread::spawn(move || writer.write_all(&bytes))
}

/// Runs `test` on every runtime, each to its end even when one before it
/// failed, then fails naming every runtime that did: a defect fixed on one
/// runtime only shows as such.
fn every_runtime(test: impl Fn(Runtime)) {
    let failed: Vec<Runtime> = crate::support::RUNTIMES
        .iter()
        .copied()
        .filter(|&runtime| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| test(runtime))).is_err())
        .collect();
    assert!(
        failed.is_empty(),
        "failed on {failed:?} (each one's panic is above)"
    );
}

/// Reads `stream` until the server closes it (end of stream, or a reset
/// once what the kernels held is taken); how many bytes came. Fails when it
/// is still open at `deadline`.
fn read_to_close(stream: &mut TcpStream, deadline: Instant, what: &str) -> usize {
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let mut chunk = vec![0u8; 64 * KIB];
    let mut received = 0;
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return received,
            Ok(n) => received += n,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return received,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) => panic!("{what}: {e}"),
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still open ({received} bytes taken in the meantime)"
        );
    }
}

/// Runs `test` on every runtime at once, each on a thread of its own: for
/// the tests that mostly wait on a clock.
fn each_runtime_at_once(test: impl Fn(Runtime) + Sync) {
    std::thread::scope(|scope| {
        for &runtime in crate::support::RUNTIMES {
            let test = &test;
            scope.spawn(move || test(runtime));
        }
    });
}

/// Sends `resources` as GETs in one write on a fresh connection and checks
/// every answer, in order, whole; then that nothing more comes.
fn pipeline(addr: SocketAddr, what: &str, resources: &[String]) {
    let stream = socket(addr, None);
    let bytes: String = resources.iter().map(|r| get(r)).collect();
    let writer = send_behind(&stream, bytes.into_bytes());
    let mut wire = Wire::new(stream);
    for resource in resources {
        wire.expect_download(what, resource);
    }
    writer.join().expect("writer").expect("the requests were taken");
    wire.stream
        .shutdown(std::net::Shutdown::Write)
        .expect("half-close");
    wire.expect_end(what, READ_TIMEOUT);
}

// -- 1. Pipelined streamed downloads ---------------------------------------

#[test]
fn two_pipelined_streamed_downloads_arrive_whole_and_in_order() {
    every_runtime(|runtime| {
        let server = start(runtime, Streams, ServerOptions::default());
        for kind in Kind::ALL {
            let what = format!("{runtime:?} {kind:?}");
            pipeline(
                server.addr,
                &what,
                &[download(kind, 200 * KIB, 1), download(kind, MIB, 2)],
            );
        }
        server.shutdown_and_join();
    });
}

#[test]
fn three_and_sixteen_pipelined_streamed_downloads_arrive_whole_and_in_order() {
    every_runtime(|runtime| {
        let server = start(runtime, Streams, ServerOptions::default());
        let three: Vec<String> = Kind::ALL
            .iter()
            .enumerate()
            .map(|(n, &kind)| download(kind, 300 * KIB + n * 100 * KIB, n as u64))
            .collect();
        pipeline(server.addr, &format!("{runtime:?} three"), &three);
        // 200 KiB to 950 KiB, the three kinds in turn: 16 is the most the
        // server takes before it waits for us (D3).
        let sixteen: Vec<String> = (0..16)
            .map(|n| download(Kind::ALL[n % 3], 200 * KIB + n * 50 * KIB, n as u64))
            .collect();
        pipeline(server.addr, &format!("{runtime:?} sixteen"), &sixteen);
        server.shutdown_and_join();
    });
}

#[test]
fn big_small_big_pipelined_arrive_whole_and_in_order() {
    every_runtime(|runtime| {
        let server = start(runtime, Streams, ServerOptions::default());
        let resources = [
            download(Kind::Gzip, MIB, 1),
            "/small/2".to_owned(),
            download(Kind::Text, MIB, 3),
            "/small/4".to_owned(),
            download(Kind::Br, 500 * KIB, 5),
        ];
        pipeline(server.addr, &format!("{runtime:?}"), &resources);
        server.shutdown_and_join();
    });
}

/// How long a client pauses its reading so that the server's writes block
/// and every runtime reads the next request while a streamed reply is
/// still being read from its reader (the std runtime reads only when a
/// blocking write has waited a while).
const PAUSE: Duration = Duration::from_millis(1000);

/// A second download asked for while the first is still being sent: the
/// first finishes, then the second comes. The first is 12 MiB of text: far
/// more than the kernels' buffers and the server's bound on output owed
/// (D3) hold, so its reader is still under way when the second arrives.
fn second_download_mid_first<S: Read + Write>(wire: &mut Wire<S>, what: &str) {
    let first = download(Kind::Text, 12 * MIB, 11);
    let second = download(Kind::Gzip, MIB, 12);
    wire.send(get(&first).as_bytes());
    while wire.buf.len() < 64 * KIB {
        assert!(
            wire.fill(what),
            "{what}: the stream ended at {} bytes",
            wire.buf.len()
        );
    }
    wire.send(get(&second).as_bytes());
    std::thread::sleep(PAUSE);
    wire.expect_download(what, &first);
    wire.expect_download(what, &second);
}

#[test]
fn a_download_asked_for_mid_download_lets_the_first_finish() {
    every_runtime(|runtime| {
        let server = start(runtime, Streams, ServerOptions::default());
        // A window of 64 KiB: the 8 MiB answer cannot all be in the
        // kernels' buffers when the second request comes.
        let mut wire = Wire::new(socket(server.addr, Some(64 * KIB)));
        second_download_mid_first(&mut wire, &format!("{runtime:?}"));
        wire.stream
            .shutdown(std::net::Shutdown::Write)
            .expect("half-close");
        wire.expect_end(&format!("{runtime:?}"), READ_TIMEOUT);
        server.shutdown_and_join();
    });
}

/// The same pipelines inside a TLS session (D20), where output waits in the
/// session's buffer before the socket's.
#[cfg(feature = "tls")]
#[test]
fn pipelined_streamed_downloads_over_tls_arrive_whole_and_in_order() {
    use jsontp_protocol::io_adapters::tls::{ClientTls, ServerTls};

    let dir = tempfile::tempdir().expect("temp dir");
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("certificate");
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).expect("write");
    std::fs::write(&key, certified.key_pair.serialize_pem()).expect("write");
    let tls = ServerTls::from_pem_files(&cert, &key, None).expect("server TLS");
    every_runtime(|runtime| {
        let what = format!("{runtime:?} TLS");
        let server = start(runtime, Streams, ServerOptions::default().with_tls(tls.clone()));
        let session = ClientTls::insecure()
            .connect("localhost", socket(server.addr, Some(64 * KIB)))
            .expect("session");
        let mut wire = Wire::new(session);
        // Requests are small: written whole before any reading.
        let mut resources: Vec<String> = Kind::ALL
            .iter()
            .enumerate()
            .map(|(n, &kind)| download(kind, 300 * KIB + n * 100 * KIB, n as u64))
            .collect();
        resources.push("/small/3".to_owned());
        resources.push(download(Kind::Text, MIB, 4));
        let bytes: String = resources.iter().map(|r| get(r)).collect();
        wire.send(bytes.as_bytes());
        for resource in &resources {
            wire.expect_download(&what, resource);
        }
        second_download_mid_first(&mut wire, &what);
        server.shutdown_and_join();
    });
}

// -- 2. A peer that asks for many and never reads --------------------------

#[test]
fn a_peer_that_pipelines_sixteen_downloads_and_never_reads_is_closed_after_the_stall_limit() {
    const STALL: Duration = Duration::from_secs(2);
    // 16 × 1 MiB of text: far more than the kernels hold.
    const EACH: usize = MIB;
    each_runtime_at_once(|runtime| {
        let mut config = ServerConfig::default();
        config.limits.stall_timeout = STALL;
        let server = start(runtime, Streams, options(config, 1));
        let mut stream = socket(server.addr, Some(4 * KIB));
        let requests: String = (0..16).map(|n| get(&download(Kind::Text, EACH, n))).collect();
        stream.write_all(requests.as_bytes()).expect("write");
        // Never read while the stall limit passes twice, and a margin
        // after. Twice: once its buffers are full, the peer's kernel may
        // still acknowledge a little more for a second or two (it packs
        // its receive queue tighter to make room), and bytes acknowledged
        // are bytes taken (D3); the limit runs from the last of them.
        let unread = 2 * STALL + Duration::from_millis(1000);
        std::thread::sleep(unread);
        let what = format!("{runtime:?}: the peer took nothing for {unread:?}, the stall limit is {STALL:?}");
        let received = read_to_close(&mut stream, Instant::now() + Duration::from_secs(3), &what);
        // Only what the kernels held arrives, then the end of the stream.
        assert!(
            received < 16 * EACH / 2,
            "{runtime:?}: {received} bytes arrived after the stall"
        );
        server.shutdown_and_join();
    });
}

// -- 3. An upload pipelined behind a download ------------------------------

#[test]
fn an_upload_pipelined_between_downloads_is_spooled_and_answered_in_order() {
    every_runtime(|runtime| {
        let what = format!("{runtime:?}");
        let spool = tempfile::tempdir().expect("spool");
        let options = ServerOptions::default().with_spool(
            SpoolOptions::default()
                .with_memory_limit(64 * KIB)
                .with_folder(spool.path()),
        );
        let server = start(runtime, Streams, options);
        let upload = String::from_utf8(content_of(Kind::Text, 600 * KIB, 7)).expect("text");
        // The first download is larger than what the kernels and the bound
        // on output owed hold: still streaming while the upload arrives.
        let (first, last) = (download(Kind::Text, 8 * MIB, 1), download(Kind::Gzip, MIB, 2));
        let stream = socket(server.addr, Some(64 * KIB));
        let bytes = get(&first) + &put("/up", &upload) + &get(&last);
        let writer = send_behind(&stream, bytes.into_bytes());
        std::thread::sleep(PAUSE);
        let mut wire = Wire::new(stream);
        wire.expect_download(&what, &first);
        let stored = wire.expect(&what);
        assert_eq!(code(&stored), 201, "{what}: {}", short(&stored));
        assert_eq!(
            content(&stored),
            format!("{} true", digest(upload.as_bytes())),
            "{what}: the upload, whole and spooled"
        );
        wire.expect_download(&what, &last);
        writer.join().expect("writer").expect("the requests were taken");
        wire.stream
            .shutdown(std::net::Shutdown::Write)
            .expect("half-close");
        wire.expect_end(&what, READ_TIMEOUT);
        server.shutdown_and_join();
        assert_eq!(
            std::fs::read_dir(spool.path()).expect("spool").count(),
            0,
            "{what}: the spooled upload is deleted"
        );
    });
}

// -- 5. One answer per message ---------------------------------------------

/// A message opening 70 arrays inside the message object: level 71, past
/// D3's 64.
fn too_deep_start() -> String {
    format!(r#"{{"deep":{}"#, "[".repeat(70))
}

/// Opens a connection, lets `tail` send what follows the too-deep start,
/// and checks that exactly one `400` comes before the close.
fn one_400_then_the_close(runtime: Runtime, tail: impl Fn(&mut Reader)) {
    let server = start(runtime, Echo, ServerOptions::default());
    let mut client = Reader::new(connect(server.addr));
    client.send(&too_deep_start());
    tail(&mut client);
    let answer = client.expect();
    assert_eq!(code(&answer), 400, "{runtime:?}: {answer}");
    if let Some(second) = client.next() {
        panic!("{runtime:?}: a second answer instead of the close: {second}");
    }
    server.shutdown_and_join();
}

#[test]
fn too_deep_then_a_mismatched_bracket_gets_one_400_and_the_close() {
    every_runtime(|runtime| one_400_then_the_close(runtime, |client| client.send("}")));
}

#[test]
fn too_deep_then_the_half_close_gets_one_400() {
    every_runtime(|runtime| {
        one_400_then_the_close(runtime, |client| {
            client
                .stream
                .shutdown(std::net::Shutdown::Write)
                .expect("half-close");
        })
    });
}

#[test]
fn too_deep_message_then_a_valid_request_gets_two_answers() {
    every_runtime(|runtime| {
        let server = start(runtime, Echo, ServerOptions::default());
        let mut client = Reader::new(connect(server.addr));
        let deep = too_deep_start() + &"]".repeat(70) + "}\n";
        client.send(&(deep + &request("GET", "/after", "")));
        let answer = client.expect();
        assert_eq!(code(&answer), 400, "{runtime:?}: {answer}");
        let after = client.expect();
        assert_eq!(
            code(&after),
            200,
            "{runtime:?}: the second request's own answer: {after}"
        );
        assert_eq!(content(&after), "echo /after ", "{runtime:?}");
        client
            .stream
            .shutdown(std::net::Shutdown::Write)
            .expect("half-close");
        if let Some(third) = client.next() {
            panic!("{runtime:?}: a third answer: {third}");
        }
        server.shutdown_and_join();
    });
}

// -- 4. The graceful shutdown's deadline -----------------------------------

/// The drain deadline of a graceful shutdown
/// (`ServerOptions::with_shutdown_timeout`).
mod drain {
    use super::*;

    /// The drain deadline, and the margin past it for the last writes and
    /// the runtime's own stop.
    const DEADLINE: Duration = Duration::from_secs(2);
    const MARGIN: Duration = Duration::from_secs(3);

    /// A server with a 2 s drain deadline and the default stall and content
    /// clocks (30 s): only the deadline can end the exchanges below in time.
    #[test]
    fn a_graceful_shutdown_ends_within_its_deadline_whatever_the_peers_do() {
        each_runtime_at_once(|runtime| {
            let options = ServerOptions::default()
                .with_workers(2)
                .with_shutdown_timeout(DEADLINE);
            let server = start(runtime, Streams, options);
            let addr = server.addr;

            // (a) Mid-download, never reading.
            let mut stalled = socket(addr, Some(4 * KIB));
            stalled
                .write_all(get(&download(Kind::Text, 16 * MIB, 1)).as_bytes())
                .expect("write");

            // (b) Reading slowly: 4 KiB every 100 ms (the answer would take
            // minutes), until told to stop; then the stream back, and when
            // it ended if it did.
            let mut slow = socket(addr, Some(16 * KIB));
            slow.write_all(get(&download(Kind::Text, 16 * MIB, 2)).as_bytes())
                .expect("write");
            slow.set_read_timeout(Some(Duration::from_millis(200)))
                .expect("timeout");
            let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let slow_reader = std::thread::spawn({
                let done = std::sync::Arc::clone(&done);
                move || {
                    let mut chunk = [0u8; 4 * KIB];
                    let started = Instant::now();
                    while !done.load(std::sync::atomic::Ordering::SeqCst)
                        && started.elapsed() < Duration::from_secs(15)
                    {
                        match slow.read(&mut chunk) {
                            Ok(0) => return (slow, Some(Instant::now())),
                            Ok(_) => std::thread::sleep(Duration::from_millis(100)),
                            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                                return (slow, Some(Instant::now()));
                            }
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                                ) => {}
                            Err(e) => panic!("the slow reader: {e}"),
                        }
                    }
                    (slow, None)
                }
            });

            // (c) Mid-upload: the head and part of the content, then silence.
            let mut uploading = socket(addr, None);
            let whole = put("/up", &"x".repeat(512 * KIB));
            uploading
                .write_all(&whole.as_bytes()[..256 * KIB])
                .expect("write");

            // (d) Idle, after one exchange.
            let mut idle = Wire::new(socket(addr, None));
            idle.send(get("/small/9").as_bytes());
            idle.expect_download(&format!("{runtime:?}"), "/small/9");

            // Every exchange under way.
            std::thread::sleep(Duration::from_millis(500));
            let stopped = Instant::now();
            server.stop();

            // Nothing under way on (d): closed at once, not at the deadline.
            read_to_close(
                &mut idle.stream,
                stopped + DEADLINE / 2,
                &format!("{runtime:?}: the idle connection, {DEADLINE:?} / 2 after the shutdown began"),
            );

            // The server returns by the deadline, and a margin.
            server.join();
            let took = stopped.elapsed();
            assert!(
                took < DEADLINE + MARGIN,
                "{runtime:?}: the shutdown took {took:?}"
            );

            // And no connection outlives it.
            let by = stopped + DEADLINE + MARGIN;
            read_to_close(&mut stalled, by, &format!("{runtime:?}: the download never read"));
            read_to_close(&mut uploading, by, &format!("{runtime:?}: the upload cut short"));
            // The slow reader takes what the kernels still hold at full
            // speed: the server's end comes after it.
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            let (mut slow, ended) = slow_reader.join().expect("slow reader");
            match ended {
                Some(ended) => assert!(
                    ended < by,
                    "{runtime:?}: the slow reader was closed {:?} after the shutdown began",
                    ended - stopped
                ),
                None => {
                    read_to_close(&mut slow, by, &format!("{runtime:?}: the slow reader"));
                }
            }
        });
    }
}
