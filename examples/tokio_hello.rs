//! A handler on the tokio adapter, stopped by ctrl-c.
//!
//! ```text
//! cargo run --features tokio --example tokio_hello
//! ```

use jsontp_protocol::io_adapters::server::tokio::serve;
use jsontp_protocol::io_adapters::server::{ServerOptions, listen};
use jsontp_protocol::message::{Body, Request, Response, Status, StatusCode};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    // `listen` binds with a backlog that takes a burst of connects.
    let listener = listen("127.0.0.1:8080")?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    eprintln!("tokio_hello on {}", listener.local_addr()?);
    let hello = |_request: &Request| {
        Response::new(Status::new(StatusCode::OK, "hello")).with_body(Body::text("hello from tokio\n"))
    };
    serve(listener, hello, ServerOptions::default(), async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
}
