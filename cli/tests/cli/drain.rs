//! `jsontp serve --shutdown-timeout SECS`: after SIGTERM the server lets
//! the exchanges under way finish for at most that long, then exits, even
//! when a peer asked for large files and never reads them.
#![allow(clippy::disallowed_methods)] // the test owns its threads and the clock

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::support::{Serve, spawn_serve, temp_root};

/// The drain deadline given on the command line.
const DEADLINE: Duration = Duration::from_secs(2);
/// How long after SIGTERM the process must be gone: the deadline and a
/// margin for its last writes and the runtime's own stop.
const EXIT_WITHIN: Duration = Duration::from_secs(4);

/// `len` bytes that do not compress (xorshift): every request costs its
/// full size on the wire.
fn noise(len: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn get(resource: &str) -> String {
    serde_json::json!({
        "jsontp": "1.0", "type": "request", "resource": resource, "method": "GET",
        "headers": {}, "body": {"content": "", "encoding": "identity"}
    })
    .to_string()
        + "\n"
}

/// Waits up to `limit` for the process to exit.
fn exited_within(server: &mut Serve, limit: Duration) -> Option<std::process::ExitStatus> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Some(status) = server.0.try_wait().expect("wait") {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn sigterm_with_a_peer_that_never_reads_exits_within_the_shutdown_timeout() {
    let root = temp_root("drain");
    std::fs::write(root.join("big.bin"), noise(8 << 20)).expect("fixture");
    let seconds = DEADLINE.as_secs().to_string();
    let (mut server, addr, mut log) = spawn_serve(&root, &["--quiet", "--shutdown-timeout", &seconds]);
    std::thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));

    // An idle connection, after one exchange.
    let mut idle = TcpStream::connect(addr).expect("connect");
    idle.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    idle.write_all(get("/hello.txt").as_bytes()).expect("write");
    let mut answer = [0u8; 64 << 10];
    let n = idle.read(&mut answer).expect("an answer");
    assert!(n > 0, "the idle connection was answered");

    // A peer that pipelines four 8 MiB downloads with a small window and
    // never reads: far more than the kernels hold.
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    socket.set_recv_buffer_size(4096).expect("buffer size");
    socket.connect(&addr.into()).expect("connect");
    let mut stalled: TcpStream = socket.into();
    stalled
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let requests: String = (0..4).map(|_| get("/big.bin")).collect();
    stalled.write_all(requests.as_bytes()).expect("write");
    // The download has begun (seen without taking a byte of it).
    std::thread::sleep(Duration::from_millis(300));
    let mut head = [0u8; 256];
    let n = stalled.peek(&mut head).expect("the download starts");
    let head = String::from_utf8_lossy(&head[..n]);
    assert!(head.contains(r#""code":200"#), "the download starts: {head}");

    let stopped = Instant::now();
    server.terminate();
    // Nothing under way on the idle connection: closed at once.
    let mut rest = [0u8; 1];
    match idle.read(&mut rest) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the idle connection is closed by the shutdown, not {other:?}"),
    }
    assert!(
        stopped.elapsed() < DEADLINE / 2,
        "the idle connection was closed after {:?}",
        stopped.elapsed()
    );
    // The process exits by the deadline and a margin, successfully; if it
    // does not, `Serve` kills it when dropped.
    let status = exited_within(&mut server, EXIT_WITHIN.saturating_sub(stopped.elapsed()))
        .unwrap_or_else(|| panic!("jsontp serve still runs {EXIT_WITHIN:?} after SIGTERM"));
    assert!(status.success(), "exit status {status}");
    drop(stalled);
    let _ = std::fs::remove_dir_all(&root);
}
