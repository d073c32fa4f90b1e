//! A handler on the tokio adapter, stopped by ctrl-c.
//!
//! ```text
//! cargo run --features tokio --example tokio_hello
//! ```

use jsontp::io_adapters::ServerOptions;
use jsontp::io_adapters::tokio_io::serve;
use jsontp::message::{Body, Request, Response, Status, StatusCode};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
    eprintln!("tokio_hello on {}", listener.local_addr()?);
    let hello = |_request: &Request| {
        Response::new(Status::new(StatusCode::OK, "hello")).with_body(Body::text("hello from tokio\n"))
    };
    serve(listener, hello, ServerOptions::default(), async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
}
