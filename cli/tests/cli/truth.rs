//! The file server tells the truth about files, seen from outside as a
//! client meets it: a pipe is refused at once (and never blocks a worker),
//! a file rewritten while it is sent arrives cut off, never as a complete
//! answer, and a server out of descriptors says so instead of "no file".
#![allow(clippy::disallowed_methods)] // the tests own their threads

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::support::{Served, jsontp, spawn_serve_short_of_descriptors, stderr, temp_root};

#[test]
fn a_pipe_in_the_root_is_refused_without_blocking_a_worker() {
    let server = Served::start("truth-fifo");
    let made = Command::new("mkfifo").arg(server.root.join("pipe")).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("no mkfifo here");
        return;
    }
    // More requests than the server has workers: each must be answered.
    let started = Instant::now();
    for _ in 0..4 {
        let out = jsontp(&["get", &server.url("/pipe")]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("403 Forbidden: this is not a regular file"),
            "{}",
            stderr(&out)
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    let hello = jsontp(&["get", &server.url("/hello.txt")]);
    assert_eq!(hello.status.code(), Some(0), "{}", stderr(&hello));
}

/// Sends a GET for `resource` and returns the stream, its head not read.
fn ask(addr: SocketAddr, resource: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let request = serde_json::json!({
        "jsontp": "1.0", "type": "request", "resource": resource, "method": "GET",
        "headers": {"accept-encoding": "identity"},
        "body": {"content": "", "encoding": "identity"}
    });
    stream
        .write_all(format!("{request}\n").as_bytes())
        .expect("write");
    stream
}

#[test]
fn a_file_rewritten_or_truncated_during_a_download_arrives_cut_off() {
    let server = Served::start("truth-rewrite");
    // Larger than the cache keeps the escaped form of (64 MiB), so that it
    // streams: a text file the cache keeps is read whole, as measured,
    // before its answer is sent, and goes out whole as it was read.
    let size = 65 << 20;
    for change in ["rewrite", "truncate"] {
        let file = server.root.join("big.txt");
        std::fs::write(&file, vec![b'a'; size]).expect("fixture");
        let mut stream = ask(server.addr, "/big.txt");
        let mut first = vec![0u8; 64 << 10];
        stream.read_exact(&mut first).expect("the start of the answer");
        thread::sleep(Duration::from_millis(20));
        match change {
            "rewrite" => {
                let mut writer = std::fs::OpenOptions::new().write(true).open(&file).expect("open");
                writer.write_all(&vec![b'b'; size]).expect("rewrite in place");
            }
            _ => std::fs::OpenOptions::new()
                .write(true)
                .open(&file)
                .and_then(|f| f.set_len(1 << 20))
                .expect("truncate"),
        }
        let mut rest = Vec::new();
        let _ = stream.read_to_end(&mut rest);
        first.extend_from_slice(&rest);
        assert!(
            !first.ends_with(b"\"}}\n"),
            "{change}: the answer must not be complete ({} bytes)",
            first.len()
        );
        assert!(
            serde_json::from_slice::<serde_json::Value>(&first).is_err(),
            "{change}: not a whole message"
        );
    }
}

#[test]
fn a_server_out_of_descriptors_says_so_rather_than_no_such_file() {
    let root = temp_root("truth-descriptors");
    let Some((server, addr)) = spawn_serve_short_of_descriptors(&root, "") else {
        return;
    };
    // Idle connections take the descriptors, until one more is not
    // accepted (it waits in the backlog) …
    let mut idle = Vec::new();
    let answered = |stream: &mut TcpStream| {
        let request = serde_json::json!({
            "jsontp": "1.0", "type": "request", "resource": "/hello.txt", "method": "OPTIONS",
            "headers": {}, "body": {"content": "", "encoding": "identity"}
        });
        stream
            .set_read_timeout(Some(Duration::from_millis(500)))
            .expect("timeout");
        let _ = stream.write_all(format!("{request}\n").as_bytes());
        let mut reader = BufReader::new(stream.try_clone().expect("clone"));
        let mut answer = String::new();
        reader.read_line(&mut answer).is_ok_and(|n| n > 0)
    };
    loop {
        let mut stream = TcpStream::connect(addr).expect("connect");
        if !answered(&mut stream) {
            drop(stream);
            break;
        }
        idle.push(stream);
        assert!(idle.len() < 64, "the descriptor limit did not bite");
    }
    // … then one leaves, and the next connection takes its descriptor:
    // none is left to open the file with.
    idle.pop();
    thread::sleep(Duration::from_millis(200));
    let mut stream = ask(addr, "/hello.txt");
    let mut answer = String::new();
    BufReader::new(&mut stream)
        .read_line(&mut answer)
        .expect("an answer");
    let answer: serde_json::Value = serde_json::from_str(&answer).expect("JSON");
    assert_eq!(answer["status"]["code"], 503, "{answer}");
    let said = answer["status"]["human-message"].as_str().unwrap_or_default();
    assert!(said.contains("too many files open"), "{answer}");
    drop(idle);
    drop(server);
    let _ = std::fs::remove_dir_all(&root);
}
