//! `jsontp serve` when the ground moves under it: a root that turns
//! read-only while clients write (the old file stays, the answer is `500`,
//! the server goes on serving), and a SIGTERM in the middle of a large
//! streamed download (the transfer finishes whole, then the process exits
//! 0). Loopback only; every wait bounded.
#![allow(clippy::disallowed_methods)] // the tests own their threads

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Served, spawn_serve, temp_root, temporaries};

/// One request on its own connection, half-closed after it (D1: the
/// answer still comes, then the close); the response, parsed. The body
/// comes last, its content last in it, as D19 asks of a sender, so that
/// large content streams.
fn exchange(addr: SocketAddr, method: &str, resource: &str, content: &str) -> Value {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let request = format!(
        r#"{{"jsontp":"1.0","type":"request","resource":{},"method":"{method}","headers":{{}},"body":{{"encoding":"identity","content":{}}}}}"#,
        json!(resource),
        json!(content)
    );
    stream
        .write_all(format!("{request}\n").as_bytes())
        .expect("write");
    stream.shutdown(Shutdown::Write).expect("half close");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("response then close");
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("one JSON response ({e}): {text:?}"))
}

fn code(response: &Value) -> u64 {
    response["status"]["code"].as_u64().expect("a status code")
}

/// A folder made read-only for as long as this lives: by its mode, and
/// where that does not stop this process (it runs as root) by the
/// immutable attribute. `None` when neither works here.
struct ReadOnly(PathBuf);

impl ReadOnly {
    fn make(folder: &Path) -> Option<ReadOnly> {
        use std::os::unix::fs::PermissionsExt;
        let guard = ReadOnly(folder.to_path_buf());
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o555)).expect("chmod");
        if !guard.writable() {
            return Some(guard);
        }
        let immutable = Command::new("chattr")
            .arg("+i")
            .arg(folder)
            .status()
            .is_ok_and(|s| s.success());
        (immutable && !guard.writable()).then_some(guard)
    }

    /// Whether this process can still create a file in the folder (the
    /// server runs as the same user).
    fn writable(&self) -> bool {
        let probe = self.0.join(".probe");
        let made = std::fs::write(&probe, "x").is_ok();
        let _ = std::fs::remove_file(&probe);
        made
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
        let _ = std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o755));
    }
}

#[test]
fn a_root_turned_read_only_refuses_writes_with_500_and_keeps_the_old_file() {
    let server = Served::start("read-only-root");
    let hello = server.root.join("hello.txt");
    assert_eq!(code(&exchange(server.addr, "PUT", "/hello.txt", "first")), 201);
    let Some(_read_only) = ReadOnly::make(&server.root) else {
        eprintln!("skipped: no way to make a folder read-only for this user here");
        return;
    };
    // The file server cannot write its temporary file (small content), and
    // content past the 1 MiB held in memory cannot be spooled on the
    // root's file system (D19): `500`, the server's own failure, naming
    // the cause.
    let large = "z".repeat(2 << 20);
    for (what, content, cause) in [
        ("small", "second", "could not access the file"),
        ("spooled", large.as_str(), "could not store the request's content"),
    ] {
        for resource in ["/hello.txt", "/new.txt"] {
            let answer = exchange(server.addr, "PUT", resource, content);
            assert_eq!(code(&answer), 500, "{what} PUT {resource}: {answer}");
            let why = answer["status"]["human-message"].as_str().unwrap_or_default();
            assert!(why.contains(cause), "{what}: {why}");
        }
    }
    assert_eq!(std::fs::read_to_string(&hello).expect("the old file"), "first");
    assert!(!server.root.join("new.txt").exists());
    // D19: a refused upload leaves nothing behind.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !temporaries(&server.root).is_empty() {
        assert!(Instant::now() < deadline, "a spooled upload was left behind");
        std::thread::sleep(Duration::from_millis(20));
    }
    // And the server goes on serving what it can.
    let answer = exchange(server.addr, "GET", "/hello.txt", "");
    assert_eq!(
        (code(&answer), answer["body"]["content"].as_str()),
        (200, Some("first"))
    );
}

#[test]
fn sigterm_during_a_large_streamed_download_finishes_it_then_exits_0() {
    // The graceful stop lets the exchange under way finish (the file
    // streams, D19), then the process exits successfully.
    const SIZE: usize = 64 << 20;
    let root = temp_root("sigterm-download");
    let line = "0123456789 the quick brown fox jumps over the lazy dog\n";
    let file: String = line.repeat(SIZE / line.len() + 1)[..SIZE].to_owned();
    std::fs::write(root.join("big.txt"), &file).expect("fixture");
    let (mut server, addr, mut log) = spawn_serve(&root, &["--quiet"]);
    std::thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));

    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let request = json!({
        "jsontp": "1.0", "type": "request", "resource": "/big.txt", "method": "GET",
        "headers": {}, "body": {"content": "", "encoding": "identity"}
    });
    stream
        .write_all(format!("{request}\n").as_bytes())
        .expect("write");
    stream.shutdown(Shutdown::Write).expect("half close");
    // The first MiB, so the transfer is surely under way (the kernels'
    // buffers hold a few MiB at most of the 64).
    let mut answer = vec![0u8; 1 << 20];
    stream.read_exact(&mut answer).expect("the download starts");
    server.terminate();
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    stream.read_to_end(&mut answer).expect("the rest, then the close");
    let response: Value = serde_json::from_slice(&answer).expect("one whole JSON response");
    assert_eq!(code(&response), 200);
    let content = response["body"]["content"].as_str().expect("text content");
    assert!(content.len() == file.len() && content == file, "the file, whole");
    let status = loop {
        if let Some(status) = server.0.try_wait().expect("wait") {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the server exits after the download"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "exit status {status}");
    let _ = std::fs::remove_dir_all(root);
}
