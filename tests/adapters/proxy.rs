//! Behind a TCP load balancer (D21): every runtime reads the PROXY header
//! (versions 1 and 2) before the first message, serves the client it names,
//! and closes a connection without a valid header without a response.

use jsontp_protocol::io_adapters::server::{Handled, Incoming};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jsontp_protocol::io_adapters::server::{AccessRecord, Handler, ServerOptions};
use jsontp_protocol::machine::{ContinuePolicy, ServerConfig};
use jsontp_protocol::message::{Body, Response, Status, StatusCode};

use crate::support::{
    Reader, Runtime, code, connect, content, each_runtime, options, request, start, with_policy,
};

/// Answers with the peer it is told about, and keeps the access records'.
#[derive(Clone, Default)]
struct Peers(Arc<Mutex<Vec<SocketAddr>>>);

impl Handler for Peers {
    fn respond(&self, incoming: Incoming) -> Handled {
        Response::new(Status::new(StatusCode::OK, "peer"))
            .with_body(Body::text(incoming.info.peer.to_string()))
            .into()
    }

    fn log_exchange(&self, record: &AccessRecord<'_>) {
        self.0.lock().expect("log").push(record.peer);
    }
}

impl Peers {
    fn logged(&self) -> Vec<SocketAddr> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let peers = self.0.lock().expect("log").clone();
            if !peers.is_empty() || Instant::now() > deadline {
                return peers;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn proxied(config: ServerConfig) -> ServerOptions {
    options(config, 2).with_proxy_protocol(true)
}

fn v2(command: u8, family: u8, addresses: &[u8]) -> Vec<u8> {
    let mut header = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    header.extend([command, family]);
    header.extend(u16::try_from(addresses.len()).expect("short").to_be_bytes());
    header.extend(addresses);
    header
}

fn v2_ipv4() -> Vec<u8> {
    // 203.0.113.7:40000 -> 10.0.0.1:80
    v2(0x21, 0x11, &[203, 0, 113, 7, 10, 0, 0, 1, 0x9c, 0x40, 0, 80])
}

fn v2_ipv6() -> Vec<u8> {
    let mut addresses = "2001:db8::7"
        .parse::<std::net::Ipv6Addr>()
        .expect("ip")
        .octets()
        .to_vec();
    addresses.extend(std::net::Ipv6Addr::LOCALHOST.octets());
    addresses.extend(40001u16.to_be_bytes());
    addresses.extend(80u16.to_be_bytes());
    // A TLV after the addresses (here: a NOOP of 3 bytes) is skipped.
    addresses.extend([0x04, 0, 3, 1, 2, 3]);
    v2(0x21, 0x21, &addresses)
}

/// Sends `header` then one request, `split` bytes at a time (0: at once),
/// and returns the peer the handler saw and the one the access log saw.
fn peer_behind(runtime: Runtime, header: &[u8], split: usize) -> (String, SocketAddr, SocketAddr) {
    let peers = Peers::default();
    let server = start(
        runtime,
        peers.clone(),
        proxied(with_policy(ContinuePolicy::AutoAccept)),
    );
    let stream = connect(server.addr);
    let _ = stream.set_nodelay(true);
    let local = stream.local_addr().expect("local");
    let mut client = Reader::new(stream);
    let mut bytes = header.to_vec();
    bytes.extend(request("GET", "/who", "").as_bytes());
    if split == 0 {
        client.stream.write_all(&bytes).expect("write");
    } else {
        for piece in bytes.chunks(split) {
            client.stream.write_all(piece).expect("write");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let response = client.expect();
    assert_eq!(code(&response), 200, "{runtime:?}");
    let seen = content(&response).to_owned();
    let logged = peers.logged();
    server.shutdown_and_join();
    (seen, logged[0], local)
}

#[test]
fn v1_tcp4_names_the_client() {
    each_runtime(|runtime| {
        let header = b"PROXY TCP4 198.51.100.9 10.0.0.1 51000 80\r\n";
        let (seen, logged, _) = peer_behind(runtime, header, 0);
        assert_eq!(seen, "198.51.100.9:51000", "{runtime:?}");
        assert_eq!(logged.to_string(), seen, "the access record sees the client too");
    });
}

#[test]
fn v1_tcp6_names_the_client() {
    each_runtime(|runtime| {
        let header = b"PROXY TCP6 2001:db8::1 ::1 51001 80\r\n";
        let (seen, _, _) = peer_behind(runtime, header, 0);
        assert_eq!(seen, "[2001:db8::1]:51001", "{runtime:?}");
    });
}

#[test]
fn v2_ipv4_and_ipv6_name_the_client() {
    each_runtime(|runtime| {
        let (seen, logged, _) = peer_behind(runtime, &v2_ipv4(), 0);
        assert_eq!(seen, "203.0.113.7:40000", "{runtime:?}");
        assert_eq!(logged.to_string(), seen);
        let (seen, _, _) = peer_behind(runtime, &v2_ipv6(), 0);
        assert_eq!(seen, "[2001:db8::7]:40001", "{runtime:?}");
    });
}

#[test]
fn v2_local_keeps_the_socket_peer() {
    // A proxy's own health check names no client: the socket's peer stands.
    each_runtime(|runtime| {
        let (seen, _, local) = peer_behind(runtime, &v2(0x20, 0x00, &[]), 0);
        assert_eq!(seen, local.to_string(), "{runtime:?}");
    });
}

#[test]
fn a_header_split_byte_by_byte_is_read_whole() {
    each_runtime(|runtime| {
        let (seen, _, _) = peer_behind(runtime, &v2_ipv6(), 1);
        assert_eq!(seen, "[2001:db8::7]:40001", "{runtime:?}");
        let (seen, _, _) = peer_behind(runtime, b"PROXY TCP4 198.51.100.9 10.0.0.1 51000 80\r\n", 1);
        assert_eq!(seen, "198.51.100.9:51000", "{runtime:?}");
    });
}

#[test]
fn no_valid_header_is_closed_without_a_response() {
    // D21: garbage, a bare request, a bad v1 line, a v2 of version 3.
    let mut bad_v2 = v2_ipv4();
    bad_v2[12] = 0x31;
    let cases: [&[u8]; 4] = [
        b"GARBAGE GARBAGE GARBAGE\r\n",
        br#"{"jsontp": "1.0", "type": "request"}"#,
        b"PROXY TCP4 1.2.3.4 nowhere 1 2\r\n",
        &bad_v2,
    ];
    each_runtime(|runtime| {
        let server = start(runtime, Peers::default(), proxied(ServerConfig::default()));
        for case in cases {
            let mut client = Reader::new(connect(server.addr));
            client.send(std::str::from_utf8(case).unwrap_or("\u{0}"));
            if !case.is_ascii() {
                client.stream.write_all(case).expect("write");
            }
            assert!(client.closed(), "{runtime:?}: {case:?} got a response");
        }
        server.shutdown_and_join();
    });
}

#[test]
fn a_silent_peer_is_closed_at_the_message_timeout() {
    // D3, D21: the header is bounded in time like a message.
    let mut config = ServerConfig::default();
    config.limits.message_timeout = Duration::from_millis(200);
    each_runtime(|runtime| {
        let server = start(runtime, Peers::default(), proxied(config.clone()));
        let mut client = Reader::new(connect(server.addr));
        client.send("PROXY TCP4 ");
        let started = Instant::now();
        assert!(client.closed(), "{runtime:?}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{runtime:?}: held too long"
        );
        server.shutdown_and_join();
    });
}

#[test]
fn without_the_option_a_header_is_a_framing_error() {
    // D21, D1: a PROXY header is bytes where a message must start.
    each_runtime(|runtime| {
        let server = start(runtime, Peers::default(), options(ServerConfig::default(), 2));
        let mut client = Reader::new(connect(server.addr));
        client.send("PROXY TCP4 198.51.100.9 10.0.0.1 51000 80\r\n");
        client.send(&request("GET", "/who", ""));
        let response = client.expect();
        assert_eq!(code(&response), 400, "{runtime:?}");
        assert!(client.closed(), "{runtime:?}");
        server.shutdown_and_join();
    });
}

#[test]
fn a_header_still_awaited_does_not_hold_up_shutdown() {
    // D21 with the default message timeout (30 s): shutdown does not wait
    // for it.
    each_runtime(|runtime| {
        let server = start(runtime, Peers::default(), proxied(ServerConfig::default()));
        let mut silent = Reader::new(connect(server.addr));
        silent.send("PROXY TCP4 ");
        std::thread::sleep(Duration::from_millis(100));
        let took = server.shutdown_and_join();
        assert!(
            took < Duration::from_secs(5),
            "{runtime:?}: shutdown took {took:?}"
        );
        assert!(silent.closed(), "{runtime:?}");
    });
}
