//! # jsontp-protocol
//!
//! A Rust implementation of the jsontp protocol: an HTTP-like request/response
//! protocol in which every message is one JSON object sent over TCP.
//!
//! The crate is built in three layers:
//!
//! - [`message`]: the types of jsontp messages and the pure functions that
//!   parse, validate and serialize them. No I/O.
//! - [`machine`]: a sans-I/O connection state machine for both the server and
//!   the client role. Bytes and the current time go in; events and bytes to
//!   send come out. No sockets, no threads, no clock.
//! - `io_adapters` (feature `adapters`, on by default): thin drivers that
//!   run the machine over real TCP with std blocking sockets, mio (feature
//!   `mio`), or tokio (feature `tokio`), plain or TLS (feature `tls`).
//!
//! `app` (feature `adapters`) builds applications on the servers: a router,
//! extractors and answers, handlers plain or `async`, tower services
//! (feature `tower`). With `default-features = false` the crate is the
//! sans-I/O core alone: [`message`] and [`machine`], nothing that touches a
//! socket, a file or the clock. The `jsontp` command and its file server
//! are the package `jsontp-cli`, built on this one.
//!
//! Rule numbers such as D5 refer to [`rules`]: this crate's account of how it
//! reads the jsontp reference where the reference is silent or contradicts
//! itself. Each rule has an anchor, so `[D5](crate::rules#d5)` links to
//! [D5](rules#d5).
//!
//! # In a minute
//!
//! An application on tokio: a `Router` (module `app`) whose handlers take
//! what they need of the request as arguments (extractors) and answer with
//! text, a status, typed body keys or a whole response. The same router
//! serves on every runtime; refusals it can decide from a request's head
//! (`404`, `405`, a missing token) go out before the client sends any
//! content (D10).
//!
#![cfg_attr(feature = "tower", doc = "```no_run")]
#![cfg_attr(not(feature = "tower"), doc = "```ignore")]
//! use jsontp_protocol::app::{Path, Router, get};
//! use jsontp_protocol::io_adapters::server::{ServerOptions, tokio::serve};
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let app: Router = Router::new().route(
//!         "/hello/{name}",
//!         get(|Path(name): Path<String>| async move { format!("hello, {name}") }),
//!     );
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//!     serve(listener, app, ServerOptions::default(), async {
//!         let _ = tokio::signal::ctrl_c().await;
//!     })
//!     .await
//! }
//! ```
//!
//! A call to it, from a pool of connections (blocking here; the `tokio`
//! feature has the same pool to `.await`):
//!
#![cfg_attr(feature = "adapters", doc = "```no_run")]
#![cfg_attr(not(feature = "adapters"), doc = "```ignore")]
//! use jsontp_protocol::io_adapters::client::PoolOptions;
//! use jsontp_protocol::io_adapters::client::blocking::Pool;
//!
//! let pool = Pool::new(PoolOptions::default());
//! let answer = pool.get("jsontp://127.0.0.1:8080/hello/ada").send()?;
//! assert_eq!(answer.response.body.as_text(), Some("hello, ada"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! And a server with no runtime at all, on std's threads: any function of
//! a request is a handler. Framing, validation, the `date` and `language`
//! headers, pipelining, timeouts and the error answers are the machine's.
//!
#![cfg_attr(feature = "adapters", doc = "```no_run")]
#![cfg_attr(not(feature = "adapters"), doc = "```ignore")]
//! use jsontp_protocol::io_adapters::server::ServerOptions;
//! use jsontp_protocol::io_adapters::server::blocking::StdServer;
//! use jsontp_protocol::message::{Body, Method, Request, Response};
//!
//! let hello = |request: &Request| match request.method {
//!     Method::Get => Response::ok("hello").with_body(Body::text("Hello, world!")),
//!     other => Response::method_not_allowed(other, &[Method::Get]),
//! };
//! let server = StdServer::bind("127.0.0.1:8080", hello, ServerOptions::default())?;
//! server.run()?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! `docs/writing-an-application.md` walks through a whole application
//! (NNNTP, a news server); the module `app` lists the extractors.
//!
//! # Messages without a connection
//!
//! The message layer on its own: parse a request from the bytes of one
//! message, answer it, and answer a message that fails validation with the
//! status and `human-message` its [`Rejection`](message::Rejection) carries.
//!
//! ```
//! use jsontp_protocol::message::{
//!     Body, MessageLimits, RequestContext, Response, Status, StatusCode, parse_request,
//! };
//!
//! // Written the way the protocol's own examples are: a comment and a
//! // trailing comma are accepted (D4).
//! let bytes = br#"{
//!     "jsontp": "1.0",
//!     "type": "request",
//!     "resource": "/greeting.txt",
//!     "method": "GET",
//!     "headers": {"accept-language": "en-US"}, // optional
//!     "body": {"content": "", "encoding": "identity"},
//! }"#;
//!
//! let limits = MessageLimits::default();
//! let request = parse_request(bytes, RequestContext::Fresh, &limits)?;
//! assert_eq!(request.method.as_str(), "GET");
//! assert_eq!(request.resource.path(), "/greeting.txt");
//!
//! // The response echoes the request's `resource` (D7). A server built on
//! // the connection machine gets that, and the `date` and `language`
//! // headers, filled in for it.
//! let response = Response::new(Status::new(StatusCode::OK, "here is your greeting"))
//!     .with_resource(request.resource.as_str())
//!     .with_body(Body::text("hello"));
//! let wire = response.to_bytes();
//! assert!(wire.starts_with(br#"{"jsontp":"1.0","type":"response","status":{"code":200,"#));
//! assert!(wire.ends_with(b"}\n")); // compact JSON and one newline (D1)
//!
//! // A version with major 2 is well formed but not supported: 505 (D6).
//! let too_new = br#"{"jsontp":"2.0","type":"request","resource":"/","method":"GET",
//!     "headers":{},"body":{"content":"","encoding":"identity"}}"#;
//! let rejection = parse_request(too_new, RequestContext::Fresh, &limits).unwrap_err();
//! assert_eq!(rejection.status(), StatusCode::VERSION_NOT_SUPPORTED);
//! let refusal = Response::new(Status::new(rejection.status(), rejection.message))
//!     .with_resource(rejection.resource);
//! assert_eq!(refusal.resource, "/");
//! # Ok::<(), jsontp_protocol::message::Rejection>(())
//! ```
#![warn(missing_docs)]
#![warn(unreachable_pub)]
// One call needs it, what a TCP peer acknowledged (`io_adapters/transport.rs`),
// allowed there alone with its safety argument.
#![deny(unsafe_code)]
// On docs.rs (nightly, `--cfg docsrs`): each item a feature gates is
// labelled with the features it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "adapters")]
pub mod app;
#[cfg(feature = "adapters")]
pub mod io_adapters;
pub mod machine;
pub mod message;
pub mod rules;
#[cfg(test)]
mod test_origin;
