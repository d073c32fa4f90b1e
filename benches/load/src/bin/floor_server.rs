//! The kernel's floor: a server that does nothing a server must do.
//!
//! It frames each request with the crate's scanner and answers it with the
//! same bytes the mio hello sends, fixed once at start: no parsing, no
//! validation, no handler, no serializing, no clock. What is left is one
//! `recv` and one `send` per request on a mio loop, the least any server
//! that answers each request in its own TCP segment can do. Its rate is
//! the ceiling for such a server on this machine, and its CPU per request
//! is the kernel's share that no user-space work can remove
//! (BENCHMARKS.md: "The kernel's floor" under Load, and the last section).
//!
//! ```text
//! floor_server 127.0.0.1:3001
//! ```
//!
//! Not a jsontp server: it answers anything framed as a JSON object, valid
//! request or not, and drops a connection whose bytes are not JSON objects
//! without a word.

use std::io::{self, Read, Write};
use std::net::SocketAddr;

use jsontp_protocol::message::framing::{Scan, Scanner};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

/// The mio hello's answer to the load's GET, byte for byte but the date.
const RESPONSE: &[u8] = br#"{"jsontp":"1.0","type":"response","status":{"code":200,"formal-message":"OK","human-message":"hello"},"resource":"/hello.txt","headers":{"date":"2026-11-24T17:40:26Z+0000","language":"en-US"},"body":{"encoding":"identity","content":"Hello, world!"}}
"#;

const LISTENER: Token = Token(usize::MAX);

/// One connection: what was received and not yet framed, and what is owed.
struct Connection {
    stream: TcpStream,
    scanner: Scanner,
    input: Vec<u8>,
    output: Vec<u8>,
    writable_wanted: bool,
}

fn main() -> io::Result<()> {
    let addr: SocketAddr = match std::env::args().nth(1).map(|a| a.parse()) {
        Some(Ok(addr)) => addr,
        None => SocketAddr::from(([127, 0, 0, 1], 3001)),
        Some(Err(e)) => {
            eprintln!("floor_server: the address: {e}");
            std::process::exit(2);
        }
    };
    let mut poll = Poll::new()?;
    let mut listener = TcpListener::bind(addr)?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    eprintln!("floor_server on {}", listener.local_addr()?);
    let mut connections: Vec<Option<Connection>> = Vec::new();
    let mut events = Events::with_capacity(1024);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match poll.poll(&mut events, None) {
            Ok(()) => {}
            // A signal, or a tracer attaching (strace): wait again.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        for event in &events {
            if event.token() == LISTENER {
                accept(&poll, &listener, &mut connections);
                continue;
            }
            let slot = event.token().0;
            let Some(conn) = connections.get_mut(slot).and_then(Option::as_mut) else {
                continue;
            };
            // Any error ends the connection, never the server.
            if !serve(conn, &mut chunk) || !want_writable(&poll, conn, slot) {
                if let Some(mut gone) = connections[slot].take() {
                    let _ = poll.registry().deregister(&mut gone.stream);
                }
            }
        }
    }
}

/// Accepts every connection waiting. A peer that left before it was
/// accepted, or a failure to take options or register, costs only that
/// connection.
fn accept(poll: &Poll, listener: &TcpListener, connections: &mut Vec<Option<Connection>>) {
    loop {
        let mut stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("floor_server: accept: {e}");
                return;
            }
        };
        let slot = connections.iter().position(Option::is_none).unwrap_or_else(|| {
            connections.push(None);
            connections.len() - 1
        });
        let set_up = stream.set_nodelay(true).is_ok()
            && poll
                .registry()
                .register(&mut stream, Token(slot), Interest::READABLE)
                .is_ok();
        if set_up {
            connections[slot] = Some(Connection {
                stream,
                scanner: Scanner::new(),
                input: Vec::new(),
                output: Vec::new(),
                writable_wanted: false,
            });
        }
    }
}

/// Reads what there is, owes one response per whole message, sends what
/// it can; `false` when the connection is over.
fn serve(conn: &mut Connection, chunk: &mut [u8]) -> bool {
    // A short read drains the socket, as tokio and the mio adapter take it.
    loop {
        match conn.stream.read(chunk) {
            Ok(0) => return false,
            Ok(n) => {
                conn.input.extend_from_slice(&chunk[..n]);
                if n < chunk.len() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
    let mut taken = 0;
    loop {
        match conn.scanner.scan(&conn.input[taken..]) {
            Scan::Complete(frame) => {
                taken += frame.end();
                conn.output.extend_from_slice(RESPONSE);
            }
            Scan::Partial => break,
            _ => return false,
        }
    }
    conn.input.drain(..taken);
    while !conn.output.is_empty() {
        match conn.stream.write(&conn.output) {
            Ok(n) => {
                conn.output.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return false,
        }
    }
    true
}

/// Asks to hear of writability while something is owed, and only then;
/// `false` when the connection cannot be registered any more.
fn want_writable(poll: &Poll, conn: &mut Connection, slot: usize) -> bool {
    let wants = !conn.output.is_empty();
    if wants == conn.writable_wanted {
        return true;
    }
    conn.writable_wanted = wants;
    let interest = if wants {
        Interest::READABLE | Interest::WRITABLE
    } else {
        Interest::READABLE
    };
    poll.registry()
        .reregister(&mut conn.stream, Token(slot), interest)
        .is_ok()
}
