//! The hyper baseline: "Hello, world!" over HTTP/1.1 on one tokio
//! current-thread runtime, as hyper's own hello example, so the figure is
//! hyper's out of the box.
//!
//! ```text
//! hyper_hello 127.0.0.1:3000
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    Ok(Response::new(Full::new(Bytes::from_static(b"Hello, world!"))))
}

fn main() -> std::io::Result<()> {
    let addr: SocketAddr = match std::env::args().nth(1).map(|a| a.parse()) {
        Some(Ok(addr)) => addr,
        None => SocketAddr::from(([127, 0, 0, 1], 3000)),
        Some(Err(e)) => {
            eprintln!("hyper_hello: the address: {e}");
            std::process::exit(2);
        }
    };
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()?
        .block_on(serve(addr))
}

async fn serve(addr: SocketAddr) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    eprintln!("hyper_hello on {}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        // Small responses go out at once, as every other server here does.
        stream.set_nodelay(true)?;
        tokio::spawn(async move {
            let served = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service_fn(hello))
                .await;
            if let Err(e) = served {
                // A client that goes away mid-request; nothing to do.
                let _ = e;
            }
        });
    }
}
