//! `jsontp serve` as a process: the start line, an answer over TCP, the
//! access log, start errors and a graceful stop.
#![allow(clippy::disallowed_methods)] // the tests own their threads

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use crate::support::{BIN, spawn_serve as serve, temp_root};

fn get(addr: SocketAddr, resource: &str) -> serde_json::Value {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let request = serde_json::json!({
        "jsontp": "1.0", "type": "request", "resource": resource, "method": "GET",
        "headers": {}, "body": {"content": "", "encoding": "identity"}
    });
    stream
        .write_all(format!("{request}\n").as_bytes())
        .expect("write");
    stream.shutdown(std::net::Shutdown::Write).expect("half close");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("response then close");
    serde_json::from_str(text.trim()).expect("one JSON response")
}

#[test]
fn serves_the_root_and_logs_each_request() {
    let root = temp_root("serve");
    let (_server, addr, mut log) = serve(&root, &[]);
    let response = get(addr, "/hello.txt");
    assert_eq!(response["status"]["code"], 200);
    assert_eq!(response["body"]["content"], "Hello, world!");
    let mut line = String::new();
    log.read_line(&mut line).expect("access log line");
    assert!(
        line.contains("GET") && line.contains("/hello.txt") && line.contains(" status=200 "),
        "{line:?}"
    );
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn quiet_serves_without_a_log() {
    let root = temp_root("quiet");
    let (server, addr, log) = serve(&root, &["--quiet"]);
    assert_eq!(get(addr, "/missing.txt")["status"]["code"], 404);
    drop(server); // the process ends, so its stderr ends
    let rest: Vec<String> = log.lines().map_while(Result::ok).collect();
    assert!(rest.is_empty(), "nothing logged with --quiet: {rest:?}");
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_missing_root_fails_in_one_line() {
    let output = Command::new(BIN)
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--root",
            "/definitely/not/here/jsontp",
        ])
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("/definitely/not/here/jsontp"), "{stderr}");
}

#[test]
fn a_port_in_use_fails_in_one_line() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let output = Command::new(BIN)
        .args(["serve", "--root", ".", "--addr", &addr])
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&addr), "{stderr}");
}

#[test]
fn an_incomplete_message_has_an_access_log_line() {
    // D1: end of stream mid-message is answered 400 "incomplete message" by
    // the machine itself; the access log shows it like any other answer.
    let root = temp_root("incomplete");
    let (_server, addr, log) = serve(&root, &[]);
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    stream
        .write_all(br#"{"jsontp":"1.0","type":"requ"#)
        .expect("write");
    stream.shutdown(std::net::Shutdown::Write).expect("half close");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("response then close");
    let response: serde_json::Value = serde_json::from_str(text.trim()).expect("one JSON response");
    assert_eq!(response["status"]["code"], 400);
    // Read the log on a thread, so that a missing line fails the test
    // instead of hanging it (the test owns its threads).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut log = log;
        let mut line = String::new();
        let _ = log.read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("an access-log line for the 400");
    assert!(line.contains(" status=400 "), "{line:?}");
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn sigterm_finishes_the_exchange_under_way_then_exits_0() {
    let root = temp_root("sigterm");
    let (mut server, addr, _log) = serve(&root, &["--quiet"]);
    let request = serde_json::json!({
        "jsontp": "1.0", "type": "request", "resource": "/hello.txt", "method": "GET",
        "headers": {}, "body": {"content": "", "encoding": "identity"}
    })
    .to_string();
    let (first, rest) = request.split_at(request.len() / 2);
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    // Half a message is an exchange under way when the signal comes.
    stream.write_all(first.as_bytes()).expect("write");
    std::thread::sleep(Duration::from_millis(200));
    server.terminate();
    std::thread::sleep(Duration::from_millis(200));
    stream.write_all(rest.as_bytes()).expect("the rest still goes in");
    let mut line = String::new();
    BufReader::new(&stream)
        .read_line(&mut line)
        .expect("the answer to the exchange under way");
    let response: serde_json::Value = serde_json::from_str(&line).expect("a JSON response");
    assert_eq!(response["status"]["code"], 200);
    drop(stream);
    // Then the server exits on its own, successfully.
    // Polled for at most 10 s.
    let status = (0..200)
        .find_map(|_| {
            let exited = server.0.try_wait().expect("wait");
            if exited.is_none() {
                std::thread::sleep(Duration::from_millis(50));
            }
            exited
        })
        .expect("the server exits after SIGTERM");
    assert!(status.success(), "exit status {status}");
}

#[test]
fn d1_an_http_request_gets_a_sentence_in_http_and_other_strays_json() {
    let root = temp_root("serve-http");
    let (_server, addr, _log) = serve(&root, &[]);
    let said = |bytes: &[u8]| {
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        stream.write_all(bytes).expect("write");
        let mut text = String::new();
        let _ = stream.read_to_string(&mut text);
        text
    };
    let answer = said(b"GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: test\r\n\r\n");
    assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
    assert!(
        answer.ends_with("not HTTP.\nTry: jsontp get jsontp://127.0.0.1:8080/\n"),
        "{answer}"
    );
    // Anything else is answered as before (D1): JSON, 400, resource "".
    for stray in [&b"GARBAGE\n"[..], b"GET nothing\n", b"get / HTTP/1.1\r\n"] {
        let answer = said(stray);
        let response: serde_json::Value = serde_json::from_str(answer.trim()).expect("JSON");
        assert_eq!(response["status"]["code"], 400, "{answer}");
        assert_eq!(response["resource"], "", "{answer}");
    }
    // curl, as a person would aim it at the port.
    if let Ok(out) = Command::new("curl")
        .args(["-s", "--max-time", "5", &format!("http://{addr}/")])
        .output()
    {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("This is a jsontp server"), "{text}");
        assert!(text.contains(&format!("jsontp get jsontp://{addr}/")), "{text}");
    }
    let _ = std::fs::remove_dir_all(root);
}

/// The names of the process's threads.
#[cfg(target_os = "linux")]
fn thread_names(pid: u32) -> Vec<String> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the server's threads");
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

#[test]
#[cfg(target_os = "linux")]
fn runtime_uring_serves_a_get_on_io_uring_workers() {
    let root = temp_root("uring");
    let (server, addr, mut log) = serve(&root, &["--runtime", "uring"]);
    let response = get(addr, "/hello.txt");
    assert_eq!(response["status"]["code"], 200);
    assert_eq!(response["body"]["content"], "Hello, world!");
    let mut line = String::new();
    log.read_line(&mut line).expect("access log line");
    assert!(
        line.contains("/hello.txt") && line.contains(" status=200 "),
        "the access log, not a fallback to mio: {line:?}"
    );
    let names = thread_names(server.0.id());
    assert!(
        names.iter().any(|name| name == "jsontp-uring-0")
            && !names.iter().any(|name| name.starts_with("jsontp-mio")),
        "served by io_uring workers: {names:?}"
    );
    let _ = std::fs::remove_dir_all(root);
}
