//! The conditions that used to hurt, on every server runtime: idle and
//! slow peers, the connection cap, a lack of descriptors, shutdown, and
//! connections that send far more than others.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use jsontp_protocol::machine::{ContinuePolicy, ServerConfig};

use crate::support::{
    Echo, Reader, Runtime, code, connect, content, continue_request, each_runtime, options, request, start,
    with_policy,
};

/// Whether a response arrives on `stream` within `wait`.
fn answered_within(stream: &mut TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).expect("timeout");
    let mut byte = [0u8; 1];
    let answered = matches!(stream.read(&mut byte), Ok(1));
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    answered
}

#[test]
fn idle_and_slow_connections_do_not_keep_a_new_client_waiting() {
    // 16 idle keep-alive connections and 16 sending half a request each
    // used to take every thread of the std pool: a new client got nothing
    // for as long as they stayed. Now a new client is answered at once.
    each_runtime(|runtime| {
        let server = start(runtime, Echo, options(ServerConfig::default(), 2));
        let mut idle = Vec::new();
        for n in 0..16 {
            let mut client = Reader::new(connect(server.addr));
            client.send(&request("GET", &format!("/idle{n}"), ""));
            client.expect();
            idle.push(client);
        }
        let half = request("POST", "/slow", "never finished");
        let slow: Vec<TcpStream> = (0..16)
            .map(|_| {
                let mut stream = connect(server.addr);
                stream
                    .write_all(&half.as_bytes()[..half.len() / 2])
                    .expect("write");
                stream
            })
            .collect();
        let started = Instant::now();
        let mut fresh = Reader::new(connect(server.addr));
        fresh.send(&request("GET", "/fresh", ""));
        assert_eq!(content(&fresh.expect()), "echo /fresh ", "{runtime:?}");
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{runtime:?}: a new client waited {:?}",
            started.elapsed()
        );
        drop((idle, slow, fresh));
        server.shutdown_and_join();
    });
}

#[test]
fn beyond_the_connection_cap_clients_wait_in_the_backlog() {
    // D3: at most `max_connections` open; the next client is not refused,
    // it is accepted once one closes.
    each_runtime(|runtime| {
        let server = start(
            runtime,
            Echo,
            options(ServerConfig::default(), 2).with_max_connections(2),
        );
        // Each busy with a message begun: an idle one would be closed to
        // make room instead (fair_connections.rs). Each is answered once
        // first: with a listening socket per worker, a client queued for a
        // worker still starting would otherwise leave the third one room.
        let mut open: Vec<TcpStream> = (0..2)
            .map(|n| {
                let mut client = connect(server.addr);
                client
                    .write_all(request("GET", &format!("/first{n}"), "").as_bytes())
                    .expect("write");
                assert!(
                    answered_within(&mut client, Duration::from_secs(5)),
                    "{runtime:?}: connection {n} is served"
                );
                let text = request("GET", &format!("/open{n}"), "");
                client
                    .write_all(&text.as_bytes()[..text.len() / 2])
                    .expect("write");
                client
            })
            .collect();
        let mut waiting = connect(server.addr);
        waiting
            .write_all(request("GET", "/waiting", "").as_bytes())
            .expect("the kernel takes the request");
        assert!(
            !answered_within(&mut waiting, Duration::from_millis(400)),
            "{runtime:?}: a third connection is not served while two are open"
        );
        drop(open.pop());
        let started = Instant::now();
        let mut waiting = Reader::new(waiting);
        assert_eq!(content(&waiting.expect()), "echo /waiting ", "{runtime:?}");
        assert!(started.elapsed() < Duration::from_secs(2), "{runtime:?}");
        drop((open, waiting));
        server.shutdown_and_join();
    });
}

#[test]
fn shutdown_stops_listening_at_once() {
    // New clients are refused while the exchange under way finishes: not
    // left waiting in a backlog nobody will accept from.
    each_runtime(|runtime| {
        let server = start(runtime, Echo, options(ServerConfig::default(), 2));
        let mut busy = Reader::new(connect(server.addr));
        let text = request("POST", "/busy", "finished after shutdown");
        let (first, rest) = text.as_bytes().split_at(text.len() / 2);
        busy.stream.write_all(first).expect("write");
        std::thread::sleep(Duration::from_millis(100)); // let the server read it
        server.stop();
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            !server.is_finished(),
            "{runtime:?}: the exchange under way holds the server"
        );
        let started = Instant::now();
        match TcpStream::connect_timeout(&server.addr, Duration::from_secs(2)) {
            Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused, "{runtime:?}"),
            Ok(late) => {
                // Where a listener cannot be shut down, the connection is
                // at least closed promptly.
                late.set_read_timeout(Some(Duration::from_secs(2)))
                    .expect("timeout");
                assert!(
                    Reader::new(late).closed(),
                    "{runtime:?}: no service after shutdown"
                );
            }
        }
        assert!(started.elapsed() < Duration::from_secs(1), "{runtime:?}");
        busy.stream.write_all(rest).expect("write the rest");
        assert_eq!(
            content(&busy.expect()),
            "echo /busy finished after shutdown",
            "{runtime:?}"
        );
        assert!(server.join() < Duration::from_secs(3), "{runtime:?}");
    });
}

#[test]
fn shutdown_closes_connections_awaiting_the_full_request() {
    // D10: after `100` the server may wait 300 s for the full request; a
    // shutdown does not.
    for policy in [ContinuePolicy::Ask, ContinuePolicy::AutoAccept] {
        each_runtime(|runtime| {
            let server = start(runtime, Echo, options(with_policy(policy), 2));
            let mut client = Reader::new(connect(server.addr));
            client.send(&continue_request("PUT", "/upload"));
            assert_eq!(code(&client.expect()), 100, "{runtime:?} {policy:?}");
            assert!(
                server.shutdown_and_join() < Duration::from_secs(2),
                "{runtime:?} {policy:?}"
            );
            assert!(client.closed(), "{runtime:?} {policy:?}");
        });
    }
}

#[test]
fn a_small_request_is_not_starved_by_connections_streaming_large_messages() {
    // 8 connections pipeline 100 KB JSON5 messages (slow to parse); each
    // gets a bounded turn, so a small request waits for about one parse,
    // not for everything they sent (with one event loop for all).
    const SIZE: usize = 100_000;
    let heavy = format!(
        "{{jsontp:'1.0', type:'request', resource:'/heavy', method:'POST', headers:{{}}, body:{{content:'{}', encoding:'identity'}}}}\n",
        "x".repeat(SIZE)
    );
    each_runtime(|runtime| {
        let server = start(runtime, Echo, options(ServerConfig::default(), 1));
        let floods: Vec<_> = (0..8)
            .map(|_| {
                let mut stream = connect(server.addr);
                let (mut reader, burst) = (stream.try_clone().expect("clone"), heavy.repeat(3));
                std::thread::spawn(move || {
                    let _ = stream.write_all(burst.as_bytes());
                    // Take the answers, so nothing stalls on our side.
                    let _ = std::io::copy(&mut reader, &mut std::io::sink());
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        let mut small = Reader::new(connect(server.addr));
        small.send(&request("GET", "/small", ""));
        assert_eq!(content(&small.expect()), "echo /small ", "{runtime:?}");
        let waited = started.elapsed();
        server.stop();
        server.join();
        for flood in floods {
            flood.join().expect("flood thread");
        }
        assert!(
            waited < Duration::from_millis(1500),
            "{runtime:?}: the small request waited {waited:?}"
        );
    });
}

/// A server in a child process with few descriptors, for
/// [`running_out_of_descriptors_delays_clients_but_loses_none`]. Not a
/// test of its own: the parent runs it.
#[test]
#[ignore = "run by running_out_of_descriptors_delays_clients_but_loses_none in a child process"]
fn descriptor_starved_server() {
    let runtime = match std::env::var("JSONTP_TEST_RUNTIME").as_deref() {
        Ok("std") => Runtime::Std,
        #[cfg(feature = "mio")]
        Ok("mio") => Runtime::Mio,
        #[cfg(feature = "tokio")]
        Ok("tokio") => Runtime::Tokio,
        #[cfg(all(feature = "uring", target_os = "linux"))]
        Ok("uring") => Runtime::Uring,
        _ => return,
    };
    let server = start(runtime, Echo, options(ServerConfig::default(), 1));
    println!("PORT {}", server.addr.port());
    // Serve until the parent closes our input.
    let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
    server.shutdown_and_join();
}

/// Kills the child server when the test ends, however it ends.
struct ChildServer(Child);

impl Drop for ChildServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts [`descriptor_starved_server`] with at most 64 descriptors.
fn starved_server(runtime: Runtime) -> (ChildServer, SocketAddr) {
    let name = format!("{runtime:?}").to_lowercase();
    let exe = std::env::current_exe().expect("the test binary");
    let mut child = ChildServer(
        Command::new("sh")
            .arg("-c")
            .arg("ulimit -n 64 && exec \"$0\" \"$@\"")
            .arg(exe)
            .args([
                "robustness::descriptor_starved_server",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("JSONTP_TEST_RUNTIME", name)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the child server"),
    );
    let stdout = child.0.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // libtest prints the test's name on the same line.
            if let Some((_, port)) = line.split_once("PORT ") {
                let _ = tx.send(port.trim().parse::<u16>());
            }
        }
    });
    let port = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the child prints its port")
        .expect("a port");
    (child, SocketAddr::from(([127, 0, 0, 1], port)))
}

#[cfg(unix)]
#[test]
fn running_out_of_descriptors_delays_clients_but_loses_none() {
    // With 64 descriptors, the server cannot accept 100 clients at once:
    // accept fails (EMFILE) while the rest wait in the backlog. No new
    // connection arrives to wake an edge-triggered listener, yet once the
    // first clients are answered and leave, every other is served.
    each_runtime(|runtime| {
        let (_child, addr) = starved_server(runtime);
        let mut pending: Vec<TcpStream> = (0..100)
            .map(|n| {
                let mut stream = TcpStream::connect(addr).expect("the backlog takes the connection");
                stream
                    .write_all(request("GET", &format!("/c{n}"), "").as_bytes())
                    .expect("write");
                stream
            })
            .collect();
        // Keep every connection open until the server can take no more.
        let mut answered = Vec::new();
        loop {
            let before = answered.len();
            let mut rest = Vec::new();
            for mut stream in pending {
                if answered_within(&mut stream, Duration::from_millis(20)) {
                    answered.push(stream);
                } else {
                    rest.push(stream);
                }
            }
            pending = rest;
            if answered.len() == before {
                break;
            }
        }
        assert!(
            !pending.is_empty(),
            "{runtime:?}: the server never ran out of descriptors"
        );
        // The answered clients leave, which frees the server's descriptors;
        // no new connection arrives to wake the listener.
        drop(answered);
        let started = Instant::now();
        while !pending.is_empty() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{runtime:?}: {} clients never answered",
                pending.len()
            );
            pending.retain_mut(|stream| !answered_within(stream, Duration::from_millis(20)));
        }
    });
}
