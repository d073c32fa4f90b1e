//! `jsontp get|post|put|delete|options` end to end, as processes: against
//! `jsontp serve` on a temporary folder, and against the published reference
//! server for `--lenient`.
#![allow(clippy::disallowed_methods)] // the reference server blocks: a thread

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(10);

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// Starts `jsontp serve` on port 0 and reads the port it bound from its
/// start line (`… on jsontp://127.0.0.1:PORT`): no race with other tests for
/// a free port, and no probing connect that could meet itself.
fn spawn_serve(root: &std::path::Path) -> (Child, u16) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_jsontp"))
        .args(["serve", "--quiet", "--root"])
        .arg(root)
        .args(["--addr", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start jsontp serve");
    let mut stderr = BufReader::new(child.stderr.take().expect("piped stderr"));
    let mut line = String::new();
    // The server writes this line once it listens, or exits with an error.
    let _ = stderr.read_line(&mut line);
    let port = line
        .trim_end()
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse::<u16>().ok());
    let Some(port) = port else {
        let _ = child.kill();
        panic!("jsontp serve did not start: {line:?}");
    };
    // Keep draining its stderr so that it never blocks on a full pipe.
    thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, port)
}

/// `jsontp serve` on a fresh folder; killed and cleaned up on drop.
struct Served {
    child: Child,
    port: u16,
    root: PathBuf,
}

impl Served {
    fn start(name: &str) -> Served {
        let root = std::env::temp_dir().join(format!("jsontp-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("temp root");
        std::fs::write(root.join("hello.txt"), "Hello, world!").expect("fixture");
        std::fs::write(root.join("binary.bin"), (0..=255u8).collect::<Vec<u8>>()).expect("fixture");
        let (child, port) = spawn_serve(&root);
        Served { child, port, root }
    }

    fn url(&self, path: &str) -> String {
        format!("127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Runs `jsontp ARGS…`, bounded in time by the client's own `--timeout`.
fn jsontp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jsontp"))
        .args(args)
        .args(["--timeout", "10"])
        .output()
        .expect("run jsontp")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn get_prints_the_content_and_exits_0() {
    let server = Served::start("get");
    let out = jsontp(&["get", &server.url("/hello.txt")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Hello, world!");
    assert!(stderr(&out).is_empty(), "quiet without -v: {}", stderr(&out));
}

#[test]
fn every_url_form_reaches_the_server() {
    let server = Served::start("urls");
    for url in [
        format!("jsontp://127.0.0.1:{}/hello.txt", server.port),
        format!("127.0.0.1:{}/hello.txt", server.port),
        format!("localhost:{}/hello.txt", server.port),
    ] {
        let out = jsontp(&["get", &url]);
        assert_eq!(out.status.code(), Some(0), "{url}: {}", stderr(&out));
        assert_eq!(stdout(&out), "Hello, world!", "{url}");
    }
}

#[test]
fn binary_content_is_written_as_bytes() {
    let server = Served::start("binary");
    let out = jsontp(&["get", &server.url("/binary.bin"), "-H", "accept-encoding=gzip"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, (0..=255u8).collect::<Vec<u8>>());
}

#[test]
fn a_file_larger_than_the_servers_own_message_limit_downloads() {
    // The server serves files up to the D3 decoded-body limit (8 MiB); a
    // response carrying 3 MB is larger than the 1 MiB a server accepts per
    // message, and the client must still take it.
    let server = Served::start("large");
    let text = "0123456789abcdef\n".repeat(3_000_000 / 17);
    std::fs::write(server.root.join("large.txt"), &text).expect("fixture");
    for encoding in ["identity", "gzip"] {
        let out = jsontp(&[
            "get",
            &server.url("/large.txt"),
            "-H",
            &format!("accept-encoding={encoding}"),
        ]);
        assert_eq!(out.status.code(), Some(0), "{encoding}: {}", stderr(&out));
        assert!(out.stdout == text.as_bytes(), "{encoding}: the content differs");
    }
}

#[test]
fn verbose_shows_the_status_line_and_headers_on_stderr() {
    let server = Served::start("verbose");
    let out = jsontp(&["get", &server.url("/hello.txt"), "-v"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), "Hello, world!", "stdout keeps only the content");
    let err = stderr(&out);
    assert!(err.contains("200 OK"), "{err}");
    assert!(err.contains("< date: "), "{err}");
    assert!(err.contains("< language: en-US"), "{err}");

    let raw = jsontp(&["get", &server.url("/hello.txt"), "-vv"]);
    let err = stderr(&raw);
    assert!(
        err.contains(r#"> {"jsontp":"1.0","type":"request""#),
        "the raw request: {err}"
    );
    assert!(err.contains(r#""resource":"/hello.txt""#), "{err}");
    assert!(err.contains(r#"< {"jsontp":"#), "the raw response: {err}");
}

#[test]
fn put_then_get_then_delete_round_trips_in_every_encoding() {
    let server = Served::start("put");
    for encoding in ["gzip", "deflate", "br"] {
        let path = format!("/note-{encoding}.txt");
        let text = format!("written with {encoding}");
        let put = jsontp(&["put", &server.url(&path), "--data", &text, "--encoding", encoding]);
        assert_eq!(put.status.code(), Some(0), "{}", stderr(&put));
        let on_disk = std::fs::read_to_string(server.root.join(&path[1..])).expect("the file was written");
        assert_eq!(on_disk, text, "the server decoded the {encoding} content");
        let get = jsontp(&["get", &server.url(&path)]);
        assert_eq!(stdout(&get), text);
        let delete = jsontp(&["delete", &server.url(&path)]);
        assert_eq!(delete.status.code(), Some(0), "{}", stderr(&delete));
        assert!(!server.root.join(&path[1..]).exists());
    }
}

#[test]
fn put_from_a_file_with_continue() {
    let server = Served::start("file");
    let source = server.root.join("source.bin");
    std::fs::write(&source, [0u8, 159, 146, 150, 255]).expect("source");
    let source = source.to_string_lossy().into_owned();
    // Not UTF-8: identity cannot carry it.
    let refused = jsontp(&["put", &server.url("/copy.bin"), "--file", &source]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr(&refused).contains("--encoding"), "{}", stderr(&refused));
    let put = jsontp(&[
        "put",
        &server.url("/copy.bin"),
        "--file",
        &source,
        "--encoding",
        "gzip",
        "--continue",
        "-v",
    ]);
    assert_eq!(put.status.code(), Some(0), "{}", stderr(&put));
    assert!(stderr(&put).contains("100 Continue"), "{}", stderr(&put));
    assert_eq!(
        std::fs::read(server.root.join("copy.bin")).expect("written"),
        [0u8, 159, 146, 150, 255]
    );
}

#[test]
fn post_sends_form_content() {
    let server = Served::start("post");
    let out = jsontp(&["post", &server.url("/hello.txt"), "--data", "a=1&b=2"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Hello, world!");
}

#[test]
fn options_prints_the_allowed_methods() {
    let server = Served::start("options");
    let out = jsontp(&["options", &server.url("/hello.txt")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line = stdout(&out);
    for method in ["GET", "POST", "PUT", "DELETE", "OPTIONS"] {
        assert!(line.contains(method), "{line}");
    }
}

#[test]
fn a_4xx_exits_1_with_one_line_on_stderr() {
    let server = Served::start("notfound");
    let out = jsontp(&["get", &server.url("/nope.txt")]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.starts_with("jsontp: 404 Not Found"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn headers_go_through_the_message_layer() {
    let server = Served::start("headers");
    let ok = jsontp(&[
        "get",
        &server.url("/hello.txt"),
        "-H",
        "accept-language=en-US",
        "-H",
        "accept=[\"text/plain\"]",
        "-H",
        "Accept-Encoding=br",
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert_eq!(stdout(&ok), "Hello, world!", "br content is decoded");

    let not_acceptable = jsontp(&["get", &server.url("/hello.txt"), "-H", "accept-language=de-DE"]);
    assert_eq!(not_acceptable.status.code(), Some(1));

    // Refused before anything is sent: exit 2, the header named.
    for (header, named) in [
        ("accept-language=english", "accept-language"),
        ("x-custom=1", "x-custom"),
        ("if-modified-since=yesterday", "if-modified-since"),
        ("novalue", "name=value"),
    ] {
        let out = jsontp(&["get", &server.url("/hello.txt"), "-H", header]);
        assert_eq!(out.status.code(), Some(2), "{header}");
        let err = stderr(&out);
        assert!(err.contains(named), "{header}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    let ignored = jsontp(&[
        "get",
        &server.url("/hello.txt"),
        "-H",
        "x-custom=1",
        "-H",
        "ignore-invalid-headers=true",
    ]);
    assert_eq!(ignored.status.code(), Some(0), "{}", stderr(&ignored));
}

#[test]
fn transport_and_usage_errors_exit_2_with_one_line() {
    let port = free_port();
    let refused = jsontp(&["get", &format!("127.0.0.1:{port}/")]);
    assert_eq!(refused.status.code(), Some(2));
    let err = stderr(&refused);
    assert!(err.contains("could not connect"), "{err}");
    assert_eq!(err.lines().count(), 1);

    let bad_url = jsontp(&["get", "http://example.com/"]);
    assert_eq!(bad_url.status.code(), Some(2));
    assert!(stderr(&bad_url).contains("jsontp://"), "{}", stderr(&bad_url));

    let bad_resource = jsontp(&["get", &format!("127.0.0.1:{port}/../etc/passwd")]);
    assert_eq!(bad_resource.status.code(), Some(2));
    assert!(
        stderr(&bad_resource).contains("resource"),
        "{}",
        stderr(&bad_resource)
    );
}

// ---------------------------------------------------------------------------
// Against the published reference server: `--lenient`.
// ---------------------------------------------------------------------------

fn reference_hello(request: jsontp_ref::server::JsontpRequest) -> jsontp_ref::server::Response {
    request.to_response(
        jsontp_ref::server::Body::new("hello from the reference", "identity", None),
        200,
        None,
        jsontp_ref::server::Language::default(),
        None,
    )
}

#[test]
fn lenient_reads_the_reference_server_and_strict_refuses_it() {
    let port = free_port();
    thread::spawn(move || {
        let mut server = jsontp_ref::server::Server::new("reference", "127.0.0.1", port);
        server.route("/", reference_hello);
        server.start();
    });
    // Ready when a lenient request gets through (a bare connect would make
    // its handler thread panic on an empty read). Give it time to bind
    // first: a connect to a port nobody listens on can, rarely, connect to
    // itself and hold the port.
    thread::sleep(Duration::from_millis(100));
    let url = format!("127.0.0.1:{port}/");
    let started = Instant::now();
    let lenient = loop {
        let out = jsontp(&["get", &url, "--lenient"]);
        if out.status.code() == Some(0) || started.elapsed() > LIMIT {
            break out;
        }
        thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(lenient.status.code(), Some(0), "{}", stderr(&lenient));
    assert_eq!(stdout(&lenient), "hello from the reference");
    let note = stderr(&lenient);
    assert!(note.contains("forgave") && note.contains("date"), "{note}");

    // Its response ends without a newline; -vv still ends the raw line
    // before the status line.
    let raw = jsontp(&["get", &url, "--lenient", "-vv"]);
    let err = stderr(&raw);
    assert!(err.contains("}\n< jsontp 1.0-rc1 200 OK"), "{err}");

    let strict = jsontp(&["get", &url]);
    assert_eq!(strict.status.code(), Some(2));
    let err = stderr(&strict);
    assert!(err.starts_with("jsontp: invalid response"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}
