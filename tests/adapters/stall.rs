//! A peer that asks for a large answer and never reads it: every server
//! runtime closes the connection once the machine's stall timer (D3) runs
//! out, and drops what it had not written.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use jsontp::machine::ServerConfig;

use crate::support::{Echo, each_runtime, options, request, start};

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
        // Never read while the stall limit passes, and well after.
        std::thread::sleep(Duration::from_millis(1500));
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
