//! A server machine driven by hand, as an event loop of your own drives
//! it: no socket and no real clock. The peer is an in-memory pipe that
//! sends two pipelined requests in odd pieces, then either ends its
//! stream or falls quiet; the clock is a value the loop moves to the
//! machine's next deadline.
//!
//! The five calls an embedder must get right are all here:
//!
//! - feed input only while [`ServerConnection::wants_read`] says so, and
//!   [`receive_eof`](ServerConnection::receive_eof) when the peer ends;
//! - take events with `next_event` and answer each request;
//! - write [`pending_output`](ServerConnection::pending_output) and report
//!   what the transport took with `consume_output`;
//! - sleep until [`poll_timeout`](ServerConnection::poll_timeout) and call
//!   [`handle_timeout`](ServerConnection::handle_timeout) then;
//! - close the transport once the machine [is closed](ServerConnection::is_closed)
//!   and its output is written.
//!
//! ```text
//! cargo run --example machine_by_hand
//! ```

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use jsontp_protocol::machine::{Now, ServerConfig, ServerConnection, ServerEvent};
use jsontp_protocol::message::{Body, Date, Method, Response};

/// The peer's side of an in-memory pipe: what it sends, piece by piece,
/// and what it has received.
struct Pipe {
    to_server: VecDeque<Vec<u8>>,
    ended: bool,
    from_server: Vec<u8>,
}

impl Pipe {
    fn new(text: &str, piece: usize) -> Pipe {
        Pipe {
            to_server: text.as_bytes().chunks(piece).map(<[u8]>::to_vec).collect(),
            ended: false,
            from_server: Vec::new(),
        }
    }
}

fn main() {
    println!("== the peer ends its stream after its requests");
    run(true);
    println!("\n== the peer falls quiet and keeps the connection open");
    run(false);
}

/// One connection; `peer_ends`: the peer half-closes once it has sent
/// everything, or it stays silent.
fn run(peer_ends: bool) {
    // The clock is data: a start instant and an offset the loop advances.
    #[allow(clippy::disallowed_methods)] // the one reading of the real clock
    let start = Instant::now();
    let mut elapsed = Duration::ZERO;
    let wall = Date::from_unix_seconds(1_767_225_600);
    let now = |elapsed: Duration| Now {
        instant: start + elapsed,
        wall,
    };

    let config = ServerConfig {
        idle_timeout: Duration::from_secs(5),
        ..ServerConfig::default()
    };
    let mut server = ServerConnection::new(config, now(elapsed));

    // Two requests in one stream, cut into 40-byte pieces, as TCP may.
    let mut peer = Pipe::new(
        concat!(
            r#"{"jsontp":"1.0","type":"request","resource":"/hello","method":"GET","headers":{},"body":{"encoding":"identity"}}"#,
            "\n",
            r#"{"jsontp":"1.0","type":"request","resource":"/hello","method":"DELETE","headers":{},"body":{"encoding":"identity"}}"#,
            "\n",
        ),
        40,
    );

    loop {
        let at = now(elapsed);
        let mut moved = false;

        // 1. Input, while the machine wants it (it pauses while answers
        //    are owed, D3). The pipe's end of stream is reported once.
        if server.wants_read() {
            if let Some(piece) = peer.to_server.pop_front() {
                server.receive_data(&piece, at);
                moved = true;
            } else if peer_ends && !peer.ended {
                // The peer's end of stream (a read of 0 bytes): what it is
                // owed is still written, then the machine closes (D1).
                peer.ended = true;
                server.receive_eof(at);
                moved = true;
            }
        }

        // 2. Events: answer each request; the machine keeps them in order.
        while let Some(event) = server.next_event(at) {
            moved = true;
            match event {
                ServerEvent::Request { id, request } => {
                    let response = match request.method {
                        Method::Get => Response::ok("hello").with_body(Body::text("Hello, world!")),
                        other => Response::method_not_allowed(other, &[Method::Get]),
                    };
                    println!("request {}: {} {}", id.index(), request.method, request.resource);
                    server.send_response(id, response, at).expect("a live exchange");
                }
                ServerEvent::Closed => println!("the machine closed the connection"),
                other => println!("event: {other:?}"),
            }
        }

        // 3. Output: "write" it to the pipe and say how much went.
        let pending = server.pending_output();
        if !pending.is_empty() {
            peer.from_server.extend_from_slice(pending);
            let n = pending.len();
            server.consume_output(n, at);
            moved = true;
        }

        // 4. The end: closed and everything written.
        if server.is_closed() && server.pending_output().is_empty() {
            break;
        }

        // 5. Nothing moved: an event loop waits for the socket or for the
        //    machine's next deadline, whichever comes first. The pipe has
        //    nothing more, so the clock jumps to the deadline.
        if !moved {
            let deadline = server
                .poll_timeout()
                .expect("an open connection always has a deadline or something to read");
            elapsed = deadline.duration_since(start);
            println!("{:.3} s: a deadline is due", elapsed.as_secs_f64());
            server.handle_timeout(now(elapsed));
        }
    }

    println!("the peer received:");
    print!("{}", String::from_utf8_lossy(&peer.from_server));
}
