//! A peer that asks for a large answer and never reads it: every server
//! runtime closes the connection once the machine's stall timer (D3) runs
//! out, and drops what it had not written.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use jsontp_protocol::machine::ServerConfig;

use crate::support::{Echo, child_runtime, each_runtime, options, request, start};

#[test]
fn a_peer_that_never_reads_is_closed_after_the_stall_limit() {
    const ANSWER: usize = 32 << 20;
    each_runtime(|runtime| {
        let mut config = ServerConfig::default();
        config.limits.stall_timeout = Duration::from_millis(300);
        let server = start(runtime, Echo, options(config, 1));
        // A small receive buffer, so that the kernel holds little of the
        // answer for us.
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
        socket.set_recv_buffer_size(4096).expect("buffer size");
        socket.connect(&server.addr.into()).expect("connect");
        let mut stream: TcpStream = socket.into();
        stream
            .write_all(request("GET", &format!("/big/{ANSWER}"), "").as_bytes())
            .expect("write");
        // Never read while the stall limit passes, and well after: the
        // limit runs from when the answer is first offered to the socket,
        // after it is built (most of a second in a debug build), and
        // restarts each time the kernels take a little more of it.
        std::thread::sleep(Duration::from_millis(3000));
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let started = Instant::now();
        let mut received = 0usize;
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            match stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => received += n,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("{runtime:?}: the server neither closed nor sent: {e}"),
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "{runtime:?}: the stream ends"
            );
        }
        // The server's buffered answer is gone: only what the kernels held
        // arrives, then the end of the stream.
        assert!(
            received < ANSWER / 2,
            "{runtime:?}: {received} bytes of {ANSWER} arrived after the stall"
        );
        server.shutdown_and_join();
    });
}

/// The child process of [`memory_returns_after_a_stalled_peer_is_closed`]:
/// a server with a short stall limit on the runtime the environment names,
/// which prints its address and serves until the parent kills it. Without
/// the variable (an ordinary `--ignored` run) it does nothing.
#[test]
#[ignore = "run as a child process by memory_returns_after_a_stalled_peer_is_closed"]
fn stall_child_server() {
    let Some(runtime) = child_runtime(CHILD_RUNTIME) else {
        return;
    };
    let mut config = ServerConfig::default();
    config.limits.stall_timeout = Duration::from_millis(300);
    let server = start(runtime, Echo, options(config, 1));
    println!("ADDR {}", server.addr);
    std::io::stdout().flush().expect("stdout");
    std::thread::sleep(Duration::from_secs(60));
}

const CHILD_RUNTIME: &str = "JSONTP_STALL_CHILD_RUNTIME";

/// The server's resident memory (VmRSS), in bytes.
fn resident(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    let kib: usize = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("a number");
    kib * 1024
}

/// Every runtime: a peer that asks for 48 MiB and never reads holds that
/// memory in the server only until the stall limit; once the connection is
/// closed, the server's resident memory is back within 10 % of where it
/// was. Each server runs in a child process of its own, so the figure is
/// the server's alone.
#[test]
#[cfg(target_os = "linux")]
fn memory_returns_after_a_stalled_peer_is_closed() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};
    const ANSWER: usize = 48 << 20;
    each_runtime(|runtime| {
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args(["stall::stall_child_server", "--exact", "--ignored", "--nocapture"])
            .env(CHILD_RUNTIME, format!("{runtime:?}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("child server");
        let pid = child.id();
        let mut lines = std::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
        let addr = lines
            .find_map(|line| line.ok()?.strip_prefix("ADDR ").map(str::to_owned))
            .expect("the child's address");
        // One ordinary exchange first, so the baseline includes what any
        // connection costs.
        let mut warm = TcpStream::connect(&addr).expect("connect");
        warm.write_all(request("GET", "/warm", "").as_bytes())
            .expect("write");
        warm.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut byte = [0u8; 1];
        warm.read_exact(&mut byte).expect("an answer");
        drop(warm);
        std::thread::sleep(Duration::from_millis(200));
        let before = resident(pid);

        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
        socket.set_recv_buffer_size(4096).expect("buffer size");
        let target: std::net::SocketAddr = addr.parse().expect("address");
        socket.connect(&target.into()).expect("connect");
        let mut stream: TcpStream = socket.into();
        stream
            .write_all(request("GET", &format!("/big/{ANSWER}"), "").as_bytes())
            .expect("write");
        // While the answer waits for a reader, the server holds it.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut peak = resident(pid);
        while peak < before + ANSWER / 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
            peak = peak.max(resident(pid));
        }
        assert!(
            peak >= before + ANSWER / 2,
            "{runtime:?}: the answer was never held ({before} → {peak} bytes)"
        );
        // The stall limit (300 ms) passes; the connection is closed and its
        // output dropped. A loaded machine may take a while to build and
        // then drop 48 MiB: wait for the memory to come back, up to 10 s.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut after = resident(pid);
        while after > before + before / 10 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            after = resident(pid);
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            after <= before + before / 10,
            "{runtime:?}: resident memory {before} bytes before, {peak} at the peak, {after} after the close"
        );
    });
}
