//! The transport seam: a server connection and a client over a stream that
//! is not TCP (a Unix socket pair), on std and on tokio. Nothing in the
//! drive steps knows the difference.
#![cfg(unix)]

use std::net::SocketAddr;
use std::time::Duration;

use jsontp_protocol::io_adapters::client::ClientError;
use jsontp_protocol::io_adapters::server::ServerOptions;
use jsontp_protocol::message::Method;

use crate::support::{Echo, api_request, get, quick};

/// What the handler is told about a peer that has no IP address.
fn unix_peer() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

#[test]
fn std_serves_a_unix_socket_and_the_blocking_client_talks_over_one() {
    use jsontp_protocol::io_adapters::client::blocking::Client;
    use jsontp_protocol::io_adapters::server::blocking::serve_connection;
    use std::os::unix::net::UnixStream;

    let (server_end, client_end) = UnixStream::pair().expect("a socket pair");
    let server = std::thread::spawn(move || {
        serve_connection(server_end, unix_peer(), &Echo, &ServerOptions::default());
    });
    let mut client = Client::from_stream(client_end, quick());
    let answer = client
        .send(api_request(Method::Post, "/unix", "over a pair"))
        .expect("answered");
    assert_eq!(answer.response.body.as_text(), Some("echo /unix over a pair"));
    let results = client.send_all([get("/one"), get("/big/500000"), get("/two")]);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(
        results[1].as_ref().map(|a| a.response.body.content().len()).ok(),
        Some(500_000)
    );
    // Our end of stream ends the connection: serve_connection returns.
    drop(client);
    let started = std::time::Instant::now();
    while !server.is_finished() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "serve_connection returns"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    server.join().expect("no panic");
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_serves_a_unix_socket_and_the_async_client_talks_over_one() {
    use jsontp_protocol::io_adapters::client::tokio::Client;
    use jsontp_protocol::io_adapters::server::tokio::serve_connection;
    use jsontp_protocol::message::StatusCode;
    use std::sync::Arc;
    use tokio::net::UnixStream;

    let (server_end, client_end) = UnixStream::pair().expect("a socket pair");
    let server = tokio::spawn(serve_connection(
        server_end,
        unix_peer(),
        Arc::new(Echo),
        &ServerOptions::default(),
    ));
    let mut client = Client::from_stream(client_end, quick());
    let limit = Duration::from_secs(10);
    let answer = tokio::time::timeout(limit, client.send(api_request(Method::Post, "/unix", "async")))
        .await
        .expect("in time")
        .expect("answered");
    assert_eq!(answer.response.body.as_text(), Some("echo /unix async"));
    let panicked = tokio::time::timeout(limit, client.send(get("/panic")))
        .await
        .expect("in time")
        .expect("answered");
    assert_eq!(panicked.response.status.code, StatusCode::INTERNAL_SERVER_ERROR);
    drop(client);
    tokio::time::timeout(limit, server)
        .await
        .expect("serve_connection returns once the client is gone")
        .expect("no panic");
}

#[test]
fn a_client_over_a_closed_pair_reports_the_close() {
    use jsontp_protocol::io_adapters::client::blocking::Client;
    use std::os::unix::net::UnixStream;

    let (server_end, client_end) = UnixStream::pair().expect("a socket pair");
    drop(server_end);
    let mut client = Client::from_stream(client_end, quick());
    let result = client.send(get("/"));
    assert!(
        matches!(result, Err(ClientError::ClosedEarly { .. } | ClientError::Io(_))),
        "{result:?}"
    );
    assert!(client.is_closed());
}
