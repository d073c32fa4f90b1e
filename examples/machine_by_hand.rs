//! The sans-I/O core with no socket at all: a client machine and a server
//! machine wired together in memory, the caller moving the bytes and the
//! time between them.
//!
//! ```text
//! cargo run --example machine_by_hand
//! ```
#![allow(clippy::disallowed_methods)] // the caller owns the clock

use std::time::{Instant, SystemTime};

use jsontp::machine::{Config, Connection, Event, Now, Role};
use jsontp::message::{Body, Date, Headers, Method, Request, Response, Status, StatusCode};

fn now() -> Now {
    Now {
        instant: Instant::now(),
        wall: Date::from_system_time(SystemTime::now()),
    }
}

/// Moves every pending byte from one machine to the other.
fn pump(from: &mut Connection, to: &mut Connection) {
    let bytes = from.pending_output().to_vec();
    if !bytes.is_empty() {
        print!("{:?} wrote {}", from.role(), String::from_utf8_lossy(&bytes));
        from.consume_output(bytes.len());
        to.receive_data(&bytes, now());
    }
}

fn main() {
    let mut client = Connection::new(Role::Client, Config::default(), now());
    let mut server = Connection::new(Role::Server, Config::default(), now());

    // A PUT with the 100-continue handshake (D10): the client machine sends
    // the preliminary request, waits for `100`, then sends the full one.
    let put = Request::new(Method::Put, "/notes.txt".parse().expect("a valid resource"))
        .with_headers(Headers::new().with_expect_continue(true))
        .with_body(Body::text("remember the milk"));
    client.send_request(put, now()).expect("a client may send");

    for _round in 0..4 {
        pump(&mut client, &mut server);
        while let Some(event) = server.next_event(now()) {
            if let Event::Request { id, request } = event {
                let text = request.body.as_text().unwrap_or_default().to_owned();
                let created = Response::new(Status::new(StatusCode::CREATED, "stored"))
                    .with_body(Body::text(format!("stored {} bytes", text.len())));
                server.send_response(id, created, now()).expect("a live exchange");
            }
        }
        pump(&mut server, &mut client);
        while let Some(event) = client.next_event(now()) {
            match event {
                Event::Continue { id } => println!("client: request {} acknowledged with 100", id.index()),
                Event::Response { response, .. } => {
                    println!(
                        "client: {} {}",
                        response.status.code,
                        response.body.as_text().unwrap_or("")
                    );
                    return;
                }
                other => println!("client: {other:?}"),
            }
        }
    }
}
