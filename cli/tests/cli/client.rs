//! `jsontp get|post|put|delete|options` end to end: against `jsontp serve`
//! on a temporary folder, against small loopback peers, and against the
//! published reference server for `--lenient`.
#![allow(clippy::disallowed_methods)] // the reference server blocks: a thread

use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};

use crate::support::{Served, binary, jsontp, one_answer_peer, stderr, stdout, temp_root, temporaries};

const LIMIT: Duration = Duration::from_secs(10);

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
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
        format!("jsontp://{}/hello.txt", server.addr),
        format!("{}/hello.txt", server.addr),
        format!("localhost:{}/hello.txt", server.addr.port()),
        // D7: the scheme in any case.
        format!("JSONTP://{}/hello.txt", server.addr),
        format!("Jsontp://localhost:{}/hello.txt", server.addr.port()),
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
    assert_eq!(out.stdout, binary());
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
    // Not UTF-8: identity cannot carry it, and asking for it says how out.
    let refused = jsontp(&[
        "put",
        &server.url("/copy.bin"),
        "--file",
        &source,
        "--encoding",
        "identity",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(stderr(&refused).contains("--encoding"), "{}", stderr(&refused));
    let put = jsontp(&[
        "put",
        &server.url("/copy.bin"),
        "--file",
        &source,
        "--encoding",
        "deflate",
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

// ---------------------------------------------------------------------------
// Copying ordinary files, as a newcomer does: no encoding flags.
// ---------------------------------------------------------------------------

/// A binary file of some size: a PNG header, then every byte value over
/// and over, with runs that compress.
fn logo() -> Vec<u8> {
    let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
    for i in 0..40_000u32 {
        bytes.push((i % 251) as u8);
        if i % 97 == 0 {
            bytes.extend_from_slice(&[0; 64]);
        }
    }
    bytes
}

#[test]
fn get_of_a_binary_file_needs_no_accept_encoding() {
    // The client decodes every encoding, so it accepts them all unless told
    // otherwise; a binary file cannot travel as identity (D9).
    let server = Served::start("accept-encoding");
    let out = jsontp(&["get", &server.url("/binary.bin"), "-vv"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(out.stdout, binary());
    let err = stderr(&out);
    assert!(
        err.contains(r#""accept-encoding":["br","gzip","deflate","identity"]"#),
        "{err}"
    );
    // -H still decides: identity alone cannot carry it, so the server
    // refuses, and the client says so.
    let identity = jsontp(&[
        "get",
        &server.url("/binary.bin"),
        "-H",
        "accept-encoding: identity",
    ]);
    assert_eq!(identity.status.code(), Some(1), "{}", stderr(&identity));
    assert!(identity.stdout.is_empty());
}

#[test]
fn put_of_a_binary_file_picks_gzip_and_text_stays_identity() {
    let server = Served::start("auto-encoding");
    let source = server.root.join("source.png");
    std::fs::write(&source, logo()).expect("source");
    let source = source.to_string_lossy().into_owned();
    let put = jsontp(&["put", &server.url("/logo.png"), "--file", &source, "-vv"]);
    assert_eq!(put.status.code(), Some(0), "{}", stderr(&put));
    let sent = stderr(&put);
    assert!(
        sent.contains(r#""encoding":"gzip""#),
        "binary goes as gzip: {sent}"
    );
    assert_eq!(
        std::fs::read(server.root.join("logo.png")).expect("written"),
        logo()
    );

    let text = jsontp(&["put", &server.url("/note.txt"), "--data", "plain text", "-vv"]);
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    let sent = stderr(&text);
    assert!(
        sent.contains(r#""body":{"encoding":"identity","content":"plain text"}"#),
        "text goes as itself: {sent}"
    );
}

#[test]
fn a_binary_file_round_trips_through_put_and_get_without_flags() {
    let server = Served::start("round-trip");
    let source = server.root.join("upload.png");
    std::fs::write(&source, logo()).expect("source");
    let downloaded = server.root.join("downloaded.png");
    let put = jsontp(&[
        "put",
        &server.url("/logo.png"),
        "--file",
        &source.to_string_lossy(),
    ]);
    assert_eq!(put.status.code(), Some(0), "{}", stderr(&put));
    assert!(stderr(&put).is_empty(), "{}", stderr(&put));
    let get = jsontp(&[
        "get",
        &server.url("/logo.png"),
        "-o",
        &downloaded.to_string_lossy(),
    ]);
    assert_eq!(get.status.code(), Some(0), "{}", stderr(&get));
    assert!(get.stdout.is_empty(), "the content went to the file");
    assert!(std::fs::read(&downloaded).expect("downloaded") == logo());
}

#[test]
fn a_put_past_max_upload_is_413_and_leaves_the_old_file() {
    // D19: the server decodes up to --max-upload, then answers 413 and
    // closes; nothing of the upload reaches the file.
    let server = Served::start_with("too-large", &["--max-upload", "1M"]);
    std::fs::write(server.root.join("keep.txt"), "old").expect("old file");
    let source = server.root.join("source.txt");
    std::fs::write(&source, "0123456789abcdef\n".repeat(2_000_000 / 17)).expect("source");
    let put = jsontp(&[
        "put",
        &server.url("/keep.txt"),
        "--file",
        &source.to_string_lossy(),
    ]);
    assert_eq!(put.status.code(), Some(1), "{}", stderr(&put));
    let err = stderr(&put);
    assert!(err.starts_with("jsontp: 413 Payload Too Large: "), "{err}");
    assert!(err.contains("1048576"), "the server's own message: {err}");
    assert_eq!(
        std::fs::read_to_string(server.root.join("keep.txt")).unwrap(),
        "old"
    );
    assert_eq!(
        temporaries(&server.root),
        Vec::<std::path::PathBuf>::new(),
        "no upload left behind"
    );
}

#[test]
fn files_of_many_megabytes_stream_both_ways_and_leave_nothing_behind() {
    // Larger than every message limit (D3): they stream (D19).
    let server = Served::start("streamed");
    let source = server.root.join("big.bin");
    let bytes: Vec<u8> = (0..20u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    std::fs::write(&source, &bytes).expect("source");
    let put = jsontp(&[
        "put",
        &server.url("/copy.bin"),
        "--file",
        &source.to_string_lossy(),
    ]);
    assert_eq!(put.status.code(), Some(0), "{}", stderr(&put));
    assert!(std::fs::read(server.root.join("copy.bin")).unwrap() == bytes);
    let folder = temp_root("streamed-download");
    let target = folder.join("got.bin");
    let get = jsontp(&["get", &server.url("/copy.bin"), "-o", &target.to_string_lossy()]);
    assert_eq!(get.status.code(), Some(0), "{}", stderr(&get));
    assert!(
        stderr(&get).is_empty(),
        "no progress bar when stderr is not a terminal: {}",
        stderr(&get)
    );
    assert!(std::fs::read(&target).unwrap() == bytes);
    // Neither a partial download nor a spooled upload remains (the folder
    // held hello.txt).
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 2);
    assert_eq!(temporaries(&server.root), Vec::<std::path::PathBuf>::new());
    // A refused download leaves no file, not even a partial one.
    let missing = folder.join("missing.bin");
    let get = jsontp(&[
        "get",
        &server.url("/nothing.bin"),
        "-o",
        &missing.to_string_lossy(),
    ]);
    assert_eq!(get.status.code(), Some(1));
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 2);
    let _ = std::fs::remove_dir_all(&folder);
}

#[test]
fn max_file_refuses_larger_files_and_sizes_are_checked() {
    let server = Served::start_with("max-file", &["--max-file", "1K"]);
    std::fs::write(server.root.join("big.txt"), "x".repeat(2000)).expect("file");
    let get = jsontp(&["get", &server.url("/big.txt")]);
    assert_eq!(get.status.code(), Some(1));
    assert!(stderr(&get).contains("1024"), "{}", stderr(&get));
    let get = jsontp(&["get", &server.url("/binary.bin"), "-o", "-"]);
    assert_eq!(get.status.code(), Some(0), "{}", stderr(&get));
}

/// A response with this status and echoed resource, as one line.
fn response(code: u16, formal: &str, human: &str, resource: &str) -> Vec<u8> {
    let message = serde_json::json!({
        "jsontp": "1.0", "type": "response",
        "status": {"code": code, "formal-message": formal, "human-message": human},
        "resource": resource,
        "headers": {"date": "2026-11-22T01:58:36Z+0000", "language": "en-US"},
        "body": {"content": "", "encoding": "identity"},
    });
    format!("{message}\n").into_bytes()
}

#[test]
fn a_response_echoing_an_empty_resource_is_the_answer() {
    let peer = one_answer_peer(&response(400, "Bad Request", "the request is not JSON", ""));
    let out = jsontp(&["get", &format!("{peer}/x"), "-w", "%{code}"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stdout(&out), "400");
    assert_eq!(stderr(&out), "jsontp: 400 Bad Request: the request is not JSON\n");
}

#[test]
fn a_response_for_another_resource_is_a_failure_in_plain_words() {
    // D13: not an answer to our request.
    let peer = one_answer_peer(&response(200, "OK", "here", "/other"));
    let out = jsontp(&["get", &format!("{peer}/x")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        err,
        "jsontp: the server answered for resource \"/other\", not \"/x\" as requested\n"
    );
    assert!(out.stdout.is_empty());
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

#[test]
fn an_upload_cut_off_or_refused_mid_stream_leaves_the_old_file_and_no_spool() {
    use std::io::{Read, Write};
    // D19: the file is replaced only by a whole, valid request.
    let server = Served::start("cut-off");
    std::fs::write(server.root.join("keep.txt"), "old").expect("old file");
    let head = "{\"jsontp\":\"1.0\",\"type\":\"request\",\"resource\":\"/keep.txt\",\"method\":\"PUT\",\
                \"headers\":{},\"body\":{\"encoding\":\"identity\",\"content\":\"";
    // Cut off: 3 MiB of content (past the memory threshold, so spooled to
    // a file), then the connection closes without the message's end.
    let mut stream = std::net::TcpStream::connect(server.addr).expect("connect");
    stream.write_all(head.as_bytes()).expect("head");
    let chunk = "x".repeat(64 * 1024);
    for _ in 0..48 {
        stream.write_all(chunk.as_bytes()).expect("content");
    }
    stream.shutdown(std::net::Shutdown::Write).expect("half close");
    let mut answer = String::new();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let _ = stream.read_to_string(&mut answer);
    assert!(answer.contains("\"code\":400"), "{answer}");
    // Refused mid-stream: base64 broken after the first megabytes.
    let mut stream = std::net::TcpStream::connect(server.addr).expect("connect");
    let gzip_head = head.replace("\"identity\"", "\"gzip\"");
    stream.write_all(gzip_head.as_bytes()).expect("head");
    let b64 = "QUJD".repeat(16 * 1024);
    for _ in 0..32 {
        stream.write_all(b64.as_bytes()).expect("content");
    }
    stream.write_all(b"*\"}}").expect("end");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut first = [0u8; 4096];
    let n = stream.read(&mut first).expect("answer");
    let answer = String::from_utf8_lossy(&first[..n]);
    assert!(
        answer.contains("\"code\":400") && answer.contains("does not decode"),
        "{answer}"
    );
    drop(stream);
    assert_eq!(
        std::fs::read_to_string(server.root.join("keep.txt")).unwrap(),
        "old"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !temporaries(&server.root).is_empty() {
        assert!(Instant::now() < deadline, "a spooled upload was left behind");
        thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(target_os = "linux")]
#[test]
fn serving_a_file_larger_than_any_buffer_keeps_the_server_small() {
    // D19: a 96 MiB file streams from the open handle; the server's peak
    // resident memory stays far below the file (32 MiB is the bound the
    // project set; it runs at a few MiB).
    let root = crate::support::temp_root("large-file-memory");
    let block: Vec<u8> = (0..1u32 << 20)
        .map(|i| b"abcdefghijklmnop"[(i % 16) as usize])
        .collect();
    {
        let mut file = std::fs::File::create(root.join("big.txt")).expect("file");
        for _ in 0..96 {
            std::io::Write::write_all(&mut file, &block).expect("write");
        }
    }
    let (serve, addr, mut log) = crate::support::spawn_serve(&root, &["--quiet"]);
    thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
    let get = std::process::Command::new(env!("CARGO_BIN_EXE_jsontp"))
        .args([
            "get",
            &format!("{addr}/big.txt"),
            "-s",
            "-H",
            "accept-encoding=identity",
        ])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("jsontp get");
    assert!(get.success());
    let status = std::fs::read_to_string(format!("/proc/{}/status", serve.0.id())).expect("status");
    let peak_kib: u64 = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .expect("VmHWM");
    assert!(
        peak_kib < 32 * 1024,
        "the server peaked at {peak_kib} KiB for a 96 MiB file"
    );
    drop(serve);
    let _ = std::fs::remove_dir_all(&root);
}

// ---------------------------------------------------------------------------
// The habits of curl users: -v's order, the missing verb, TLS failures in
// words, -o into a folder that is not there.
// ---------------------------------------------------------------------------

#[test]
fn output_into_a_missing_folder_names_the_path_given() {
    let server = Served::start("output-missing-folder");
    let missing = server.root.join("no-such-folder");
    let target = missing.join("copy.txt");
    let target_arg = target.to_string_lossy().into_owned();
    let out = jsontp(&["get", &server.url("/hello.txt"), "-o", &target_arg]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(
        err.trim_end(),
        format!(
            "jsontp: cannot write {target_arg}: the folder {} does not exist",
            missing.display()
        ),
        "the path given, never the hidden temporary file"
    );
    assert!(!err.contains(".part"), "{err}");
    assert!(!missing.exists(), "no folder was made");

    // A file where the folder should be is said so too.
    let under_a_file = server.root.join("hello.txt").join("copy.txt");
    let under_a_file = under_a_file.to_string_lossy().into_owned();
    let out = jsontp(&["get", &server.url("/hello.txt"), "-o", &under_a_file]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("cannot write {under_a_file}:")) && err.contains("is not a folder"),
        "{err}"
    );
    assert!(!err.contains(".part"), "{err}");
}

#[test]
fn a_url_without_its_method_gets_the_line_with_get_as_a_hint() {
    use crate::support::BIN;
    let server = Served::start("verb-hint");
    let url = server.url("/hello.txt");
    let run = |args: &[&str]| {
        std::process::Command::new(BIN)
            .args(args)
            .output()
            .expect("run jsontp")
    };
    let out = run(&[&url, "-o", "a copy.txt"]);
    // clap's usage errors exit 2; nothing was sent.
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    let err = stderr(&out);
    assert!(err.starts_with("error: unrecognized subcommand"), "{err}");
    let hint = format!("did you mean `jsontp get {url} -o 'a copy.txt'`?");
    assert!(err.contains(&hint), "{err}");
    assert!(!server.root.join("a copy.txt").exists());

    // The hint is a command that works.
    let out = run(&["get", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "Hello, world!");

    // curl's schemes are said as ours; host:port alone is a URL too.
    let err = stderr(&run(&["http://localhost:8080/a?b=1&c=2"]));
    assert!(
        err.contains("did you mean `jsontp get 'jsontp://localhost:8080/a?b=1&c=2'`?"),
        "{err}"
    );
    let err = stderr(&run(&[&server.addr.to_string()]));
    assert!(
        err.contains(&format!("did you mean `jsontp get {}`?", server.addr)),
        "{err}"
    );

    // A mistyped command keeps clap's own error and tip.
    let out = run(&["serv"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("unrecognized subcommand 'serv'") && err.contains("'serve'"),
        "{err}"
    );
    assert!(!err.contains("did you mean"), "{err}");
}

/// A certificate and its key as PEM files in `dir`: `(cert, key)` paths.
fn write_pem(
    dir: &std::path::Path,
    stem: &str,
    cert: &rcgen::Certificate,
    key: &rcgen::KeyPair,
) -> (String, String) {
    let (cert_path, key_path) = (dir.join(format!("{stem}.pem")), dir.join(format!("{stem}.key")));
    std::fs::write(&cert_path, cert.pem()).expect("cert.pem");
    std::fs::write(&key_path, key.serialize_pem()).expect("key.pem");
    (
        cert_path.to_string_lossy().into_owned(),
        key_path.to_string_lossy().into_owned(),
    )
}

fn named(common: &str) -> rcgen::DistinguishedName {
    let mut name = rcgen::DistinguishedName::new();
    name.push(rcgen::DnType::CommonName, common);
    name
}

/// `jsontp serve` over TLS with this certificate, its log drained.
fn serve_tls(
    root: &std::path::Path,
    cert: &str,
    key: &str,
    extra: &[&str],
) -> (crate::support::Serve, std::net::SocketAddr) {
    let mut args = vec!["--quiet", "--tls-cert", cert, "--tls-key", key];
    args.extend_from_slice(extra);
    let (serve, addr, mut log) = crate::support::spawn_serve(root, &args);
    thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
    (serve, addr)
}

/// `jsontp get ARGS…` trusting `roots` where it would trust the system's
/// (rustls-native-certs reads `SSL_CERT_FILE`), and no `JSONTP_CACERT`
/// from the developer's environment.
fn get_tls(args: &[&str], roots: &str) -> std::process::Output {
    std::process::Command::new(crate::support::BIN)
        .arg("get")
        .args(args)
        .args(["--timeout", "10"])
        .env("SSL_CERT_FILE", roots)
        .env_remove("SSL_CERT_DIR")
        .env_remove("JSONTP_CACERT")
        .output()
        .expect("run jsontp")
}

/// A TLS failure as the command says it: exit 2, one line holding every
/// one of `words`, and none of rustls' names for it (`UnknownIssuer`,
/// `Other(OtherError(CaUsedAsEndEntity))`, `received fatal alert`).
fn said_in_words(out: &std::process::Output, words: &[&str]) -> String {
    assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
    let err = stderr(out);
    assert_eq!(err.lines().count(), 1, "{err}");
    for word in words {
        assert!(err.contains(word), "{word:?} is not in: {err}");
    }
    let camel_case = err.split(|c: char| !c.is_ascii_alphanumeric()).find(|w| {
        w.as_bytes()
            .windows(2)
            .any(|p| p[0].is_ascii_lowercase() && p[1].is_ascii_uppercase())
    });
    assert_eq!(camel_case, None, "a rustls name in: {err}");
    for internal in [
        "Other(",
        "fatal alert",
        "invalid peer certificate",
        "corrupt message",
    ] {
        assert!(!err.contains(internal), "{internal:?} in: {err}");
    }
    err
}

#[test]
fn certificate_failures_are_said_in_words_with_the_next_step() {
    let keys = temp_root("tls-words-keys");
    let root = temp_root("tls-words");
    // A private CA, a leaf it signed for localhost, the same expired, a
    // self-signed CA:TRUE certificate as `openssl req -x509` makes, and an
    // unrelated CA standing for the system's roots.
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name = named("words test CA");
    let ca = params.self_signed(&ca_key).expect("CA");
    let (ca_pem, _) = write_pem(&keys, "ca", &ca, &ca_key);
    let leaf = |stem: &str, expired: bool| {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        params.distinguished_name = named(stem);
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2020, 1, 2);
        }
        let cert = params.signed_by(&key, &ca, &ca_key).expect("signed");
        write_pem(&keys, stem, &cert, &key)
    };
    let self_signed = |stem: &str| {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name = named(stem);
        let cert = params.self_signed(&key).expect("self-signed");
        write_pem(&keys, stem, &cert, &key)
    };
    let (leaf_pem, leaf_key) = leaf("server", false);
    let (expired_pem, expired_key) = leaf("expired", true);
    let (own_pem, own_key) = self_signed("self-signed");
    let (roots, _) = self_signed("system-roots");

    let (_leaf_server, leaf_addr) = serve_tls(&root, &leaf_pem, &leaf_key, &[]);
    let (_expired_server, expired_addr) = serve_tls(&root, &expired_pem, &expired_key, &[]);
    let (_own_server, own_addr) = serve_tls(&root, &own_pem, &own_key, &[]);
    let url = |host: &str, addr: std::net::SocketAddr| format!("jsontps://{host}:{}/hello.txt", addr.port());

    // A self-signed CA:TRUE certificate: rustls' "CA used as end entity".
    said_in_words(
        &get_tls(&[&url("localhost", own_addr)], &roots),
        &[
            "a CA certificate (CA:TRUE",
            "not signed by an authority this client trusts",
            "--cacert FILE",
            "-k",
        ],
    );
    // A private CA's certificate, without that CA.
    said_in_words(
        &get_tls(&[&url("localhost", leaf_addr)], &roots),
        &[
            "not signed by an authority this client trusts",
            "--cacert FILE",
            "-k",
        ],
    );
    said_in_words(
        &get_tls(&["--cacert", &own_pem, &url("localhost", leaf_addr)], &roots),
        &[
            "not signed by an authority",
            &format!("is neither in {own_pem}"),
            "-k",
        ],
    );
    // A name the certificate is not for.
    said_in_words(
        &get_tls(&["--cacert", &ca_pem, &url("127.0.0.1", leaf_addr)], &roots),
        &[
            "not made out for the name 127.0.0.1 (it is for localhost)",
            "connect by a name",
        ],
    );
    // Expired.
    said_in_words(
        &get_tls(&["--cacert", &ca_pem, &url("localhost", expired_addr)], &roots),
        &["the server's certificate expired on 2020-01-02", "renew", "-k"],
    );
    // What each one says to do works.
    for args in [
        vec!["--cacert", own_pem.as_str()],
        vec!["--cacert", ca_pem.as_str()],
        vec!["-k"],
    ] {
        let server = if args[0] == "-k" {
            expired_addr
        } else if args[1] == own_pem {
            own_addr
        } else {
            leaf_addr
        };
        let mut args = args.clone();
        let target = url("localhost", server);
        args.push(&target);
        let out = get_tls(&args, &roots);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert_eq!(stdout(&out), "Hello, world!");
    }
    let _ = std::fs::remove_dir_all(&keys);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_server_refusing_the_handshake_is_said_in_words_with_the_next_step() {
    use std::io::{Read, Write};
    use std::sync::Arc;
    let keys = temp_root("tls-refusals-keys");
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .expect("params")
        .self_signed(&key)
        .expect("certificate");
    let (cert_pem, _) = write_pem(&keys, "server", &cert, &key);

    // A TLS server of another protocol: ALPN `http/1.1` only, so rustls
    // refuses the `jsontp` this client offers.
    let mut config =
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
            )
            .expect("server config");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let config = Arc::new(config);
    // Each peer answers one connection, then reads to the client's close
    // so that its answer is not lost to a reset.
    let peer = |answer: Box<dyn FnOnce(&mut std::net::TcpStream) + Send>| {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        thread::spawn(move || {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let _ = stream.set_read_timeout(Some(LIMIT));
            answer(&mut stream);
            let _ = stream.read_to_end(&mut Vec::new());
        });
        addr
    };
    let https = peer(Box::new(move |stream| {
        let mut conn = rustls::ServerConnection::new(config).expect("connection");
        let _ = conn.complete_io(stream);
    }));
    said_in_words(
        &get_tls(
            &[
                "--cacert",
                &cert_pem,
                &format!("jsontps://localhost:{}/", https.port()),
            ],
            &cert_pem,
        ),
        &[
            "does not speak jsontp over TLS",
            "ALPN",
            "check the host and port",
        ],
    );

    // A server that ends the handshake with an alert: handshake_failure,
    // as one with no TLS version or cipher suite in common answers.
    let alert = peer(Box::new(|stream| {
        let _ = stream.read(&mut [0u8; 4096]);
        let _ = stream.write_all(&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28]);
    }));
    said_in_words(
        &get_tls(&[&format!("jsontps://localhost:{}/", alert.port())], &cert_pem),
        &["found nothing in common with this client", "jsontps:// server"],
    );

    // A plain jsontp server at a jsontps:// URL.
    let plain = Served::start("tls-plain");
    let err = said_in_words(
        &get_tls(&[&format!("jsontps://{}/hello.txt", plain.addr)], &cert_pem),
        &["did not answer with TLS"],
    );
    assert!(
        err.contains(&format!("use jsontp://{}/hello.txt", plain.addr)),
        "{err}"
    );

    // Mutual TLS: the server wants a certificate this command cannot show;
    // a TLS 1.3 server says so after the client's side of the handshake.
    let pki = crate::pki::Pki::new();
    let root = temp_root("tls-mutual-words");
    let ca = pki.path("ca.pem").to_string_lossy().into_owned();
    let (_mutual, mutual_addr) = serve_tls(
        &root,
        &pki.path("server.pem").to_string_lossy(),
        &pki.path("server.key").to_string_lossy(),
        &["--tls-client-ca", &ca],
    );
    said_in_words(
        &get_tls(
            &[
                "--cacert",
                &ca,
                &format!("jsontps://localhost:{}/hello.txt", mutual_addr.port()),
            ],
            &cert_pem,
        ),
        &[
            "admits only clients that show a certificate",
            "cannot show a client certificate",
        ],
    );
    let _ = std::fs::remove_dir_all(&keys);
    let _ = std::fs::remove_dir_all(&root);
}

/// Runs `jsontp ARGS…` with stdout and stderr into one file, as a
/// terminal shows them: what came first is first. Returns the exit status
/// and the bytes.
fn interleaved(name: &str, args: &[&str]) -> (Option<i32>, Vec<u8>) {
    let path = std::env::temp_dir().join(format!("jsontp-cli-{name}-{}.out", std::process::id()));
    let file = std::fs::File::create(&path).expect("output file");
    // One open file for both: each write lands after the one before.
    let status = std::process::Command::new(crate::support::BIN)
        .args(args)
        .args(["--timeout", "10"])
        .stdout(file.try_clone().expect("dup"))
        .stderr(file)
        .status()
        .expect("run jsontp");
    let bytes = std::fs::read(&path).expect("output");
    let _ = std::fs::remove_file(&path);
    (status.code(), bytes)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[test]
fn verbose_shows_the_heads_before_the_content_as_curl_does() {
    let server = Served::start("verbose-order");
    let (code, out) = interleaved("verbose-small", &["get", &server.url("/hello.txt"), "-v"]);
    let text = String::from_utf8_lossy(&out);
    assert_eq!(code, Some(0), "{text}");
    let request = find(&out, b"> jsontp 1.0 GET /hello.txt").expect("the request's head");
    let answer = find(&out, b"< jsontp 1.0 200 OK").expect("the answer's head");
    let keys = find(&out, b"< (body encoding").expect("the answer's body line");
    let content = find(&out, b"Hello, world!").expect("the content");
    assert!(request < answer && answer < keys && keys < content, "{text}");

    // A download that streams (past the message limit, in many pieces):
    // the head still comes first, and the content is whole after it.
    let text = "0123456789abcdef\n".repeat(3_000_000 / 17);
    std::fs::write(server.root.join("large.txt"), &text).expect("fixture");
    for encoding in ["identity", "gzip"] {
        let (code, out) = interleaved(
            "verbose-large",
            &[
                "get",
                &server.url("/large.txt"),
                "-v",
                "-H",
                &format!("accept-encoding={encoding}"),
            ],
        );
        assert_eq!(code, Some(0), "{encoding}");
        let head = find(&out, b"< jsontp 1.0 200 OK").expect("the head");
        let content = find(&out, b"0123456789abcdef\n").expect("the content");
        assert!(
            head < content,
            "{encoding}: the head at {head}, content from {content}"
        );
        let last_head_line =
            find(&out, format!("< (body encoding {encoding})\n").as_bytes()).expect("body line");
        assert!(
            out[last_head_line..].ends_with(text.as_bytes()),
            "{encoding}: the content whole after the head"
        );
    }

    // A 100 Continue is shown as it comes, before the final answer.
    let (code, out) = interleaved(
        "verbose-continue",
        &[
            "put",
            &server.url("/note.txt"),
            "-d",
            "remember",
            "--continue",
            "-v",
        ],
    );
    let text = String::from_utf8_lossy(&out);
    assert_eq!(code, Some(0), "{text}");
    let continued = find(&out, b"< (the server answered 100 Continue)").expect("the 100");
    let answer = find(&out, b"< jsontp 1.0 20").expect("the final answer");
    assert!(continued < answer, "{text}");
    assert_eq!(text.matches("100 Continue").count(), 1, "{text}");
}

#[test]
fn verbose_holds_content_sent_before_its_head_until_the_head_is_shown() {
    // D19: a sender may write the content before the rest; the head is
    // whole only at the message's end, and the content waits for it.
    let answer = "{\"body\":{\"content\":\"early content\",\"encoding\":\"identity\"},\
                  \"headers\":{\"date\":\"2026-11-22T01:58:36Z+0000\",\"language\":\"en-US\"},\
                  \"jsontp\":\"1.0\",\"resource\":\"/x\",\
                  \"status\":{\"code\":200,\"formal-message\":\"OK\",\"human-message\":\"late head\"},\
                  \"type\":\"response\"}\n";
    let peer = one_answer_peer(answer.as_bytes());
    let (code, out) = interleaved("verbose-late-head", &["get", &format!("{peer}/x"), "-v"]);
    let text = String::from_utf8_lossy(&out);
    assert_eq!(code, Some(0), "{text}");
    let head = find(&out, b"< jsontp 1.0 200 OK (late head)").expect("the head");
    let content = find(&out, b"early content").expect("the content");
    assert!(head < content, "{text}");
    assert_eq!(text.matches("< jsontp 1.0 200").count(), 1, "shown once: {text}");
}
