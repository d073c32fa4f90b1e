//! What operators read: `jsontp serve`'s access log (text and JSON lines,
//! a transfer cut short told apart from a success), and the library's
//! events, which reach a subscriber and are never printed by the library
//! itself.
#![allow(clippy::disallowed_methods)] // the tests own their threads

use jsontp_protocol::io_adapters::server::{Handled, Incoming};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::{spawn_serve as serve, temp_root};

fn request(resource: &str) -> String {
    let request = serde_json::json!({
        "jsontp": "1.0", "type": "request", "resource": resource, "method": "GET",
        "headers": {}, "body": {"content": "", "encoding": "identity"}
    });
    format!("{request}\n")
}

/// Asks for `resource` and reads the whole answer; returns its size.
fn get(addr: SocketAddr, resource: &str) -> usize {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    stream.write_all(request(resource).as_bytes()).expect("write");
    stream.shutdown(std::net::Shutdown::Write).expect("half close");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("response then close");
    answer.len()
}

/// The next line of the log that is an access line (`jsontp::access`).
fn access_line(log: &mut impl BufRead) -> String {
    for _ in 0..50 {
        let mut line = String::new();
        if log.read_line(&mut line).expect("log line") == 0 {
            break;
        }
        if line.contains("jsontp::access") {
            return line;
        }
    }
    panic!("no access line");
}

#[test]
fn a_text_access_line_has_a_timestamp_and_every_field() {
    let root = temp_root("log-text");
    let (_server, addr, mut log) = serve(&root, &[]);
    let size = get(addr, "/hello.txt");
    let line = access_line(&mut log);
    let stamp = line.split_whitespace().next().expect("a first word");
    assert!(
        chrono::DateTime::parse_from_rfc3339(stamp).is_ok(),
        "RFC 3339 timestamp first: {line:?}"
    );
    for field in [
        "peer=127.0.0.1:".to_owned(),
        "method=GET ".to_owned(),
        "resource=\"/hello.txt\"".to_owned(),
        " status=200 ".to_owned(),
        // Every byte of the response (its newline included) was taken.
        format!(" bytes={size} "),
        " duration_ms=".to_owned(),
        " aborted=false".to_owned(),
    ] {
        assert!(line.contains(&field), "{field:?} in {line:?}");
    }
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn json_lines_parse_and_carry_the_fields() {
    let root = temp_root("log-json");
    let (_server, addr, mut log) = serve(&root, &["--log-format", "json"]);
    get(addr, "/missing.txt");
    let line = access_line(&mut log);
    let record: serde_json::Value = serde_json::from_str(&line).expect("one JSON object per line");
    let stamp = record["timestamp"].as_str().expect("a timestamp");
    assert!(chrono::DateTime::parse_from_rfc3339(stamp).is_ok(), "{line}");
    assert_eq!(record["target"], "jsontp::access", "{line}");
    assert_eq!(record["method"], "GET", "{line}");
    assert_eq!(record["resource"], "/missing.txt", "{line}");
    assert_eq!(record["status"], 404, "{line}");
    assert_eq!(record["aborted"], false, "{line}");
    assert!(record["bytes"].as_u64().is_some_and(|b| b > 0), "{line}");
    assert!(record["duration_ms"].is_number(), "{line}");
    assert!(
        record["peer"]
            .as_str()
            .is_some_and(|p| p.starts_with("127.0.0.1:")),
        "{line}"
    );
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_client_leaving_mid_download_is_logged_as_aborted() {
    let root = temp_root("log-abort");
    // Large enough not to fit in the socket buffers (the client's is made
    // small), within the file server's limit on a file.
    let big = vec![b'a'; 7 << 20];
    std::fs::write(root.join("big.txt"), &big).expect("fixture");
    let (_server, addr, mut log) = serve(&root, &["--log-format", "json"]);

    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    socket.set_recv_buffer_size(4096).expect("small receive buffer");
    socket.connect(&addr.into()).expect("connect");
    let mut stream: TcpStream = socket.into();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    stream.write_all(request("/big.txt").as_bytes()).expect("write");
    let mut first = [0; 1024];
    stream.read_exact(&mut first).expect("the download starts");
    // Gone with unread data: the kernel resets the connection.
    drop(stream);

    let line = access_line(&mut log);
    let record: serde_json::Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(record["resource"], "/big.txt", "{line}");
    assert_eq!(record["aborted"], true, "not a success: {line}");
    let bytes = record["bytes"].as_u64().expect("bytes");
    assert!(bytes < big.len() as u64, "only part of it left: {line}");
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn quiet_keeps_the_warnings_and_drops_the_access_log() {
    let root = temp_root("log-quiet");
    let (server, addr, log) = serve(&root, &["--quiet", "--log-format", "json"]);
    get(addr, "/hello.txt");
    drop(server);
    let lines: Vec<String> = log.lines().map_while(Result::ok).collect();
    assert!(lines.iter().all(|l| !l.contains("jsontp::access")), "{lines:?}");
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_bad_log_filter_is_a_usage_error() {
    let output = crate::support::serve_command(&["--log-level", "jsontp=loud"], &[])
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--log-level"), "{stderr}");
}

/// Events as a subscriber receives them: the message and each field as
/// text.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<(tracing::Level, String)>>>);

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write as _;
        let _ = write!(self.0, "{}={:?} ", field.name(), value);
    }
}

impl tracing::Subscriber for Captured {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut text = String::new();
        event.record(&mut Fields(&mut text));
        let level = *event.metadata().level();
        self.0.lock().expect("not poisoned").push((level, text));
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn the_library_emits_events_to_a_subscriber() {
    use jsontp_protocol::io_adapters::server::{ServerOptions, blocking};
    use jsontp_protocol::message::{Request, Response, Status, StatusCode};

    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let client = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        // One bad message (refused and logged with its status), then one
        // request whose handler panics (an error, answered 500).
        stream
            .write_all(format!("{{\"jsontp\": 1}}\n{}", request("/boom")).as_bytes())
            .expect("write");
        stream.shutdown(std::net::Shutdown::Write).expect("half close");
        let mut text = String::new();
        match BufReader::new(stream).read_to_string(&mut text) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            Err(e) => panic!("{e}"),
        }
        text
    });
    let (stream, peer) = listener.accept().expect("accept");
    let captured = Captured::default();
    let handler = |request: &Request| -> Response {
        if request.resource.as_str() == "/boom" {
            panic!("the handler fails on purpose");
        }
        Response::new(Status::new(StatusCode::OK, "fine"))
    };
    // Silence the default hook's message for the planned panic.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    tracing::subscriber::with_default(captured.clone(), || {
        blocking::serve_connection(stream, peer, &handler, &ServerOptions::default());
    });
    std::panic::set_hook(hook);
    let answers = client.join().expect("client");
    assert!(answers.contains("500"), "{answers}");

    let events = captured.0.lock().expect("not poisoned").clone();
    let has = |level: tracing::Level, words: &[&str]| {
        events
            .iter()
            .any(|(l, text)| *l == level && words.iter().all(|w| text.contains(w)))
    };
    assert!(has(tracing::Level::DEBUG, &["connection opened"]), "{events:?}");
    assert!(
        has(tracing::Level::DEBUG, &["request rejected", "status=400"]),
        "{events:?}"
    );
    assert!(
        has(tracing::Level::ERROR, &["panicked", "/boom", "on purpose"]),
        "{events:?}"
    );
    assert!(
        has(tracing::Level::DEBUG, &["connection closed", "reason="]),
        "{events:?}"
    );
}

/// A handler that keeps every access record: (status, bytes, complete).
#[derive(Clone, Default)]
struct Records(Arc<Mutex<Vec<(u16, u64, bool)>>>);

impl jsontp_protocol::io_adapters::server::Handler for Records {
    fn respond(&self, _incoming: Incoming) -> Handled {
        use jsontp_protocol::message::{Response, Status, StatusCode};
        Response::new(Status::new(StatusCode::OK, "fine")).into()
    }

    fn log_exchange(&self, record: &jsontp_protocol::io_adapters::server::AccessRecord<'_>) {
        let entry = (record.status.as_u16(), record.bytes_written, record.complete);
        self.0.lock().expect("not poisoned").push(entry);
    }
}

#[test]
fn each_record_counts_the_bytes_of_its_own_response() {
    use jsontp_protocol::io_adapters::server::{ServerOptions, blocking};

    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let client = std::thread::spawn(move || {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        // Pipelined: an answer, a refusal the connection writes itself
        // (queued behind the answer, D2), another answer.
        let bad = "{\"jsontp\": \"1.0\", \"type\": \"request\", \"resource\": \"/bad\", \"method\": \"FETCH\", \"headers\": {}, \"body\": {\"content\": \"\", \"encoding\": \"identity\"}}\n";
        let batch = request("/one") + bad + &request("/three");
        stream.write_all(batch.as_bytes()).expect("write");
        stream.shutdown(std::net::Shutdown::Write).expect("half close");
        let mut text = String::new();
        BufReader::new(stream).read_to_string(&mut text).expect("answers");
        text
    });
    let (stream, peer) = listener.accept().expect("accept");
    let records = Records::default();
    blocking::serve_connection(stream, peer, &records, &ServerOptions::default());
    let answers = client.join().expect("client");
    let sizes: Vec<u64> = answers.split_inclusive('\n').map(|l| l.len() as u64).collect();
    let logged = records.0.lock().expect("not poisoned").clone();
    assert_eq!(
        logged,
        [
            (200, sizes[0], true),
            (400, sizes[1], true),
            (200, sizes[2], true)
        ],
        "{answers}"
    );
}

#[test]
fn behind_a_proxy_the_log_names_the_client_the_header_names() {
    // D21: the PROXY header's client is the peer served and logged, with
    // the flag or its environment variable.
    let root = temp_root("log-proxy");
    for (extra, env) in [
        (&["--proxy-protocol"][..], &[][..]),
        (&[][..], &[("JSONTP_PROXY_PROTOCOL", "1")][..]),
    ] {
        let (_server, addr, mut log) = crate::support::spawn_serve_with_env(&root, extra, env);
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let header = "PROXY TCP4 198.51.100.9 127.0.0.1 51000 80\r\n";
        stream
            .write_all((header.to_owned() + &request("/hello.txt")).as_bytes())
            .expect("write");
        stream.shutdown(std::net::Shutdown::Write).expect("half close");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).expect("response then close");
        assert!(!answer.is_empty(), "answered");
        let line = access_line(&mut log);
        assert!(line.contains("peer=198.51.100.9:51000"), "{line:?}");
    }
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn under_json_the_start_line_is_json_too() {
    let root = temp_root("log-json-start");
    let mut child = crate::support::serve_command(
        &[
            "--log-format",
            "json",
            "--addr",
            "127.0.0.1:0",
            "--root",
            &root.to_string_lossy(),
        ],
        &[],
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("start");
    let mut line = String::new();
    let _ = std::io::BufReader::new(child.stderr.take().expect("stderr")).read_line(&mut line);
    let _ = child.kill();
    let _ = child.wait();
    let record: serde_json::Value = serde_json::from_str(&line).expect("one JSON object");
    assert_eq!(record["message"], "serving", "{line}");
    assert_eq!(record["level"], "INFO");
    assert!(
        record["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("jsontp://127.0.0.1:")),
        "{line}"
    );
    assert!(
        record["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{line}"
    );
    let _ = std::fs::remove_dir_all(&root);
}
