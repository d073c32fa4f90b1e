//! The mio server's listening sockets: one per worker, spread evenly by
//! the kernel (`SO_REUSEPORT`), sockets passed in from outside, and a
//! hand-over that leaves them to another process without refusing anyone.

#![cfg(all(feature = "mio", target_os = "linux"))]

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use jsontp_protocol::io_adapters::server::listen_group;
use jsontp_protocol::io_adapters::server::mio::MioServer;
use jsontp_protocol::machine::ServerConfig;

use crate::support::{Echo, LIMIT, Reader, Running, connect, content, options, request};

/// Serves [`Echo`] on `listeners` with two workers.
fn serve_on(listeners: Vec<TcpListener>) -> Running {
    let server =
        MioServer::from_listeners(listeners, Echo, options(ServerConfig::default(), 2)).expect("serve");
    let (addr, handle) = (server.local_addr().expect("addr"), server.shutdown_handle());
    Running::new(
        addr,
        Box::new(move || handle.hand_over()),
        std::thread::spawn(move || server.run()),
    )
}

fn clones(listeners: &[TcpListener]) -> Vec<TcpListener> {
    listeners.iter().map(|l| l.try_clone().expect("clone")).collect()
}

fn echoes(addr: SocketAddr, path: &str) {
    let mut client = Reader::new(connect(addr));
    client.send(&request("GET", path, ""));
    assert_eq!(content(&client.expect()), format!("echo {path} "));
}

#[test]
fn a_group_of_sockets_shares_one_port_and_the_connections() {
    let group = listen_group("127.0.0.1:0", 2).expect("bind");
    assert_eq!(group.len(), 2);
    let addr = group[0].local_addr().expect("addr");
    assert_eq!(group[1].local_addr().expect("addr"), addr);
    for socket in &group {
        socket.set_nonblocking(true).expect("nonblocking");
    }
    // Each connection lands in exactly one socket's queue; the kernel
    // hashes them, so neither takes much more than half.
    let mut taken = [0usize; 2];
    let total = 1000;
    for _ in 0..total {
        let client = TcpStream::connect(addr).expect("connect");
        let until = Instant::now() + LIMIT;
        'found: loop {
            for (n, socket) in group.iter().enumerate() {
                if socket.accept().is_ok() {
                    taken[n] += 1;
                    break 'found;
                }
            }
            assert!(Instant::now() < until, "a connection reached no socket");
            std::thread::yield_now();
        }
        drop(client);
    }
    assert_eq!(taken[0] + taken[1], total);
    assert!(
        taken.iter().all(|&n| n * 10 >= total * 4),
        "connections per socket: {taken:?}"
    );
}

#[test]
fn a_server_serves_every_socket_passed_in_whatever_its_workers() {
    // Three sockets on three ports for two workers: none is left without
    // one (a client queued on it would wait for nobody).
    let sockets: Vec<TcpListener> = (0..3)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind"))
        .collect();
    let addrs: Vec<SocketAddr> = sockets.iter().map(|s| s.local_addr().expect("addr")).collect();
    let server = serve_on(sockets);
    for (n, addr) in addrs.into_iter().enumerate() {
        echoes(addr, &format!("/socket{n}"));
    }
    server.shutdown_and_join();
}

#[test]
fn a_hand_over_leaves_new_clients_waiting_for_the_next_server_not_refused() {
    let group = listen_group("127.0.0.1:0", 2).expect("bind");
    let kept = clones(&group);
    let first = serve_on(group);
    let addr = first.addr;
    echoes(addr, "/before");
    let stopped = first.stop_within(LIMIT).expect("the first server stops");
    assert!(stopped < Duration::from_secs(2), "{stopped:?}");
    // Nobody accepts now, but the sockets still listen: a client connects
    // and its request waits in a queue.
    let waiting: Vec<Reader> = (0..8)
        .map(|n| {
            let mut client =
                Reader::new(TcpStream::connect_timeout(&addr, Duration::from_secs(2)).expect("not refused"));
            client.send(&request("GET", &format!("/waiting{n}"), ""));
            client
        })
        .collect();
    let next = serve_on(kept);
    for (n, mut client) in waiting.into_iter().enumerate() {
        assert_eq!(content(&client.expect()), format!("echo /waiting{n} "));
    }
    echoes(addr, "/after");
    next.shutdown_and_join();
}
