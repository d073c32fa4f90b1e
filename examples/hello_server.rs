//! A handler of your own on the mio, the io_uring or the std adapter.
//!
//! ```text
//! cargo run --example hello_server            # mio, 127.0.0.1:8080
//! cargo run --example hello_server -- std 127.0.0.1:9000
//! cargo run --example hello_server --features uring -- uring 127.0.0.1:9000
//! jsontp get localhost:8080/anything
//! ```
#![allow(clippy::disallowed_methods)] // an application owns its threads

use jsontp_protocol::io_adapters::server::blocking::StdServer;
use jsontp_protocol::io_adapters::server::mio::MioServer;
use jsontp_protocol::io_adapters::server::{Handled, Handler, Incoming, ServerOptions};
use jsontp_protocol::message::{Body, Method, Response};

/// What this server answers.
const ALLOWED: &[Method] = &[Method::Get, Method::Post, Method::Options];

/// Greets on GET and POST, lists its methods on OPTIONS, and refuses
/// everything else with 405 (D11).
///
/// The greeting is the same 13 bytes on every path, as the hyper "Hello,
/// world!" server it is measured beside answers (BENCHMARKS.md); the
/// request's path and the peer are in `incoming` for a handler
/// that wants them.
struct Hello;

impl Handler for Hello {
    fn respond(&self, incoming: Incoming) -> Handled {
        let response = match incoming.request.method {
            Method::Get | Method::Post => Response::ok("hello").with_body(Body::from_static("Hello, world!")),
            Method::Options => Response::allowed_methods(ALLOWED),
            other => Response::method_not_allowed(other, ALLOWED),
        };
        response.into()
    }
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let adapter = args.next().unwrap_or_else(|| "mio".into());
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".into());
    let options = ServerOptions::default();
    match adapter.as_str() {
        "std" => {
            let server = StdServer::bind(&addr, Hello, options.with_workers(16))?;
            eprintln!("hello_server (std) on {}", server.local_addr()?);
            server.run()
        }
        "mio" => {
            let server = MioServer::bind(&addr, Hello, options)?;
            eprintln!("hello_server (mio) on {}", server.local_addr()?);
            server.run()
        }
        #[cfg(all(feature = "uring", target_os = "linux"))]
        "uring" => {
            use jsontp_protocol::io_adapters::server::uring::UringServer;
            let server = UringServer::bind(&addr, Hello, options)?;
            eprintln!("hello_server (uring) on {}", server.local_addr()?);
            server.run()
        }
        #[cfg(not(all(feature = "uring", target_os = "linux")))]
        "uring" => {
            eprintln!("built without io_uring: build with `--features uring`, on Linux");
            std::process::exit(2)
        }
        other => {
            eprintln!("unknown adapter {other:?}: use std, mio or uring");
            std::process::exit(2)
        }
    }
}
