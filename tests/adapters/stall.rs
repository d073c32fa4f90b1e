//! A peer that asks for a large answer and never reads it: every server
//! runtime closes the connection once the machine's stall timer (D3) runs
//! out, and drops what it had not written.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use jsontp_protocol::machine::ServerConfig;

use crate::hostile::small_window;
use crate::support::{Echo, Runtime, child_runtime, each_runtime, options, request, start};

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

/// Every runtime: a reader that pauses now and then, long enough for the
/// server's buffers to fill each time, gets the rest of the answer as soon
/// as it reads again, not at the stall timer's next check. The checks come
/// every 64th of the stall limit, here almost five seconds: a runtime that
/// misses the socket's room (io_uring's send completing while the step
/// waits to write) would wait for one at every pause.
#[test]
fn a_reader_that_pauses_is_sent_the_rest_when_it_reads_again() {
    each_runtime(|runtime| {
        let server = start(runtime, Echo, options(patient(), 1));
        let mut stream = small_window(server.addr, 4096);
        stream
            .write_all(request("GET", &format!("/big/{PAUSED_ANSWER}"), "").as_bytes())
            .expect("write");
        read_with_pauses(&mut stream, runtime);
        server.shutdown_and_join();
    });
}

/// The answer [`read_with_pauses`] reads.
pub(crate) const PAUSED_ANSWER: usize = 8 << 20;

/// A stall limit that long, its checks are seconds apart.
pub(crate) fn patient() -> ServerConfig {
    let mut config = ServerConfig::default();
    config.limits.stall_timeout = Duration::from_secs(300);
    config
}

/// Reads [`PAUSED_ANSWER`] bytes, pausing 50 ms before each eighth, and
/// fails if that took much more than the pauses.
pub(crate) fn read_with_pauses(stream: &mut impl Read, runtime: Runtime) {
    const PAUSES: usize = 8;
    let started = Instant::now();
    let (mut received, mut chunk, mut paused) = (0usize, vec![0u8; 64 * 1024], 0);
    while received < PAUSED_ANSWER {
        if received >= paused * (PAUSED_ANSWER / PAUSES) {
            std::thread::sleep(Duration::from_millis(50));
            paused += 1;
        }
        match stream.read(&mut chunk) {
            Ok(0) => panic!("{runtime:?}: closed after {received} bytes"),
            Ok(n) => received += n,
            Err(e) => panic!("{runtime:?}: nothing more after {received} bytes: {e}"),
        }
    }
    // Eight pauses of 50 ms, and the answer's building and escaping (a
    // fraction of a second in a debug build); one missed wake-up alone
    // would take more than all that.
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(2000),
        "{runtime:?}: {PAUSED_ANSWER} bytes with {PAUSES} pauses took {took:?}"
    );
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

/// Downloads a peer stops reading, with the peer's own buffers, plain and
/// over TLS (the test PKI needs the `tls` feature).
#[cfg(feature = "tls")]
mod stopped_downloads {
    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::time::{Duration, Instant};

    use jsontp_protocol::machine::ServerConfig;

    use crate::hostile::Streamer;
    use crate::pki::Pki;
    use crate::support::{RUNTIMES, Runtime, options, request, start};

    /// The size of the download a never-reading peer asks for: far more than
    /// a server could send in the test's time, so that a server still sending
    /// when the peer starts reading is seen at once.
    const ENDLESS: u64 = 1 << 40;

    /// More than the kernels on both sides hold for a peer that stopped
    /// reading: the server's send buffer (Linux allows 4 MiB by default)
    /// and the peer's receive buffer, which grows only as its application
    /// reads. Only a server still sending gives this much.
    const HELD_AT_MOST: usize = 16 << 20;

    /// A peer, plain or TLS, that asks `server` for an endless streamed
    /// download; returns its socket (its TLS session set aside: the test
    /// reads the records raw, and the kernels see the same reading) and
    /// when the request went.
    fn asking_peer(server: SocketAddr, tls: Option<&Pki>) -> (TcpStream, Instant) {
        let socket = TcpStream::connect(server).expect("connect");
        let text = request("GET", &format!("/stream/{ENDLESS}"), "");
        let Some(pki) = tls else {
            let mut socket = socket;
            socket.write_all(text.as_bytes()).expect("write");
            return (socket, Instant::now());
        };
        let mut stream = pki.raw_session(socket);
        stream.write_all(text.as_bytes()).expect("write");
        stream.flush().expect("flush");
        (stream.sock, Instant::now())
    }

    /// What the peer of a stalled download does before it stops reading.
    #[derive(Clone, Copy, Debug)]
    enum Peer {
        /// Never reads a byte.
        NeverReads,
        /// Reads [`READ_ONCE`] bytes a second after its request, then stops:
        /// its kernel acknowledges them and more, and nothing tells the server
        /// (too little of its send buffer is freed for the socket to be
        /// reported writable), until it looks.
        ReadsOnce,
    }

    /// What [`Peer::ReadsOnce`] reads: well under a third of a Linux send
    /// buffer.
    const READ_ONCE: usize = 512 << 10;

    /// D3 with the peer's own buffers (no small window): a peer that stops
    /// reading an endless streamed download (or never starts), on `runtime`,
    /// plain or over TLS, with `stall` as the limit, is closed within a second
    /// of the limit. Checked by reading from then on: only what the kernels
    /// held arrives, then the end of the stream; a server still sending would
    /// send on.
    fn closes_a_stalled_download_in_time(runtime: Runtime, tls: bool, peer: Peer, stall: Duration) {
        let mut config = ServerConfig::default();
        config.limits.stall_timeout = stall;
        let pki = tls.then(Pki::new);
        let mut options = options(config, 2);
        if let Some(pki) = &pki {
            options = options.with_tls(pki.server(false));
        }
        let server = start(runtime, Streamer, options);
        let what = format!("{runtime:?}{}, {peer:?}", if tls { " over TLS" } else { "" });
        let (mut socket, asked) = asking_peer(server.addr, pki.as_ref());
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let sleep_until = |t: Instant| std::thread::sleep(t.saturating_duration_since(Instant::now()));
        let last_taken = match peer {
            Peer::NeverReads => asked,
            Peer::ReadsOnce => {
                sleep_until(asked + Duration::from_secs(1));
                let mut once = vec![0u8; READ_ONCE];
                socket.read_exact(&mut once).expect("the start of the download");
                Instant::now()
            }
        };
        sleep_until(last_taken + stall + Duration::from_secs(1));
        let mut received = 0usize;
        let mut chunk = vec![0u8; 256 << 10];
        loop {
            match socket.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => received += n,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("{what}: the server neither closed nor sent: {e}"),
            }
            assert!(
                received < HELD_AT_MOST,
                "{what}: still sending {stall:?} + 1 s after the peer's last read, {received} bytes read since"
            );
        }
        server.shutdown_and_join();
    }

    /// Runs `case` against every runtime, plain and TLS, at once.
    fn on_every_runtime_at_once(case: fn(Runtime, bool)) {
        let cases: Vec<_> = RUNTIMES
            .iter()
            .flat_map(|&runtime| [(runtime, false), (runtime, true)])
            .map(|(runtime, tls)| std::thread::spawn(move || case(runtime, tls)))
            .collect();
        for case in cases {
            if let Err(panic) = case.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }

    /// The limit of the cases run on every runtime at once.
    const SHORT_STALL: Duration = Duration::from_secs(5);

    #[test]
    fn a_peer_that_never_reads_a_download_is_closed_within_a_second_of_the_stall_limit() {
        // The peer's kernel acknowledges what its receive buffer holds, and
        // may do so a little after the server last looked: seen only when the
        // limit came, that used to restart the timer.
        on_every_runtime_at_once(|runtime, tls| {
            closes_a_stalled_download_in_time(runtime, tls, Peer::NeverReads, SHORT_STALL);
        });
    }

    #[test]
    fn a_peer_that_reads_once_and_stops_is_closed_within_a_second_of_the_stall_limit_after() {
        // What the peer took counts from when it took it, not from when the
        // server next looked: the same as above, made certain.
        on_every_runtime_at_once(|runtime, tls| {
            closes_a_stalled_download_in_time(runtime, tls, Peer::ReadsOnce, SHORT_STALL);
        });
    }

    /// A reader of 8 KiB a second, with its own buffers, for more than the
    /// default limit on `runtime`; then, read fast, the download goes on.
    fn a_reader_of_a_few_kib_a_second_is_never_closed(runtime: Runtime) {
        let stall = ServerConfig::default().limits.stall_timeout;
        let server = start(runtime, Streamer, options(ServerConfig::default(), 2));
        let (mut socket, asked) = asking_peer(server.addr, None);
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut piece = vec![0u8; 8 << 10];
        while asked.elapsed() < stall * 4 / 3 {
            std::thread::sleep(Duration::from_secs(1));
            socket.read_exact(&mut piece).expect("the download goes on");
        }
        let mut received = 0usize;
        let mut chunk = vec![0u8; 256 << 10];
        while received < HELD_AT_MOST {
            match socket.read(&mut chunk) {
                Ok(0) => panic!("{runtime:?}: closed as stalled, {received} bytes after the slow reading"),
                Ok(n) => received += n,
                Err(e) => panic!("{runtime:?}: {e} after {received} bytes"),
            }
        }
        // Gone: the endless download ends with it.
        drop(socket);
        server.shutdown_and_join();
    }

    #[test]
    fn the_default_limit_closes_a_peer_that_never_reads_within_31_s_and_never_a_slow_reader() {
        // The default limit (D3: 30 s), every runtime, all at once. The
        // slow reader's kernel acknowledges in steps, as its application
        // empties the receive buffer and the window reopens; the server,
        // asking often, sees each.
        let stall = ServerConfig::default().limits.stall_timeout;
        let cases: Vec<_> = RUNTIMES
            .iter()
            .flat_map(|&runtime| {
                [
                    std::thread::spawn(move || a_reader_of_a_few_kib_a_second_is_never_closed(runtime)),
                    std::thread::spawn(move || {
                        closes_a_stalled_download_in_time(runtime, false, Peer::NeverReads, stall);
                    }),
                ]
            })
            .collect();
        for case in cases {
            if let Err(panic) = case.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}
