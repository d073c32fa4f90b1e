//! The sans-I/O core with no socket at all: a client machine and a server
//! machine wired together in memory, the caller moving the bytes and the
//! time between them.
//!
//! ```text
//! cargo run --example machine_by_hand
//! ```
#![allow(clippy::disallowed_methods)] // the caller owns the clock

use std::time::{Instant, SystemTime};

use jsontp::machine::{
    ClientConfig, ClientConnection, ClientEvent, Now, ServerConfig, ServerConnection, ServerEvent,
};
use jsontp::message::{Body, Date, Headers, Method, Request, Response, Status, StatusCode};

fn now() -> Now {
    Now {
        instant: Instant::now(),
        wall: Date::from_system_time(SystemTime::now()),
    }
}

/// Takes every pending byte of one machine, as a socket would; prints it.
fn take(who: &str, pending: &[u8]) -> Vec<u8> {
    if !pending.is_empty() {
        print!("{who} wrote {}", String::from_utf8_lossy(pending));
    }
    pending.to_vec()
}

fn main() {
    let mut client = ClientConnection::new(ClientConfig::default(), now());
    let mut server = ServerConnection::new(ServerConfig::default(), now());

    // A PUT with the 100-continue handshake (D10): the client machine sends
    // the preliminary request, waits for `100`, then sends the full one.
    let put = Request::new(Method::Put, "/notes.txt".parse().expect("a valid resource"))
        .with_headers(Headers::new().with_expect_continue(true))
        .with_body(Body::text("remember the milk"));
    client.send_request(put, now()).expect("a client may send");

    for _round in 0..4 {
        let bytes = take("client", client.pending_output());
        client.consume_output(bytes.len(), now());
        server.receive_data(&bytes, now());
        while let Some(event) = server.next_event(now()) {
            if let ServerEvent::Request { id, request } = event {
                let text = request.body.as_text().unwrap_or_default().to_owned();
                let created = Response::new(Status::new(StatusCode::CREATED, "stored"))
                    .with_body(Body::text(format!("stored {} bytes", text.len())));
                server.send_response(id, created, now()).expect("a live exchange");
            }
        }
        let bytes = take("server", server.pending_output());
        server.consume_output(bytes.len(), now());
        client.receive_data(&bytes, now());
        while let Some(event) = client.next_event(now()) {
            match event {
                ClientEvent::Continue { id } => {
                    println!("client: request {} acknowledged with 100", id.index())
                }
                ClientEvent::Response { response, .. } => {
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
