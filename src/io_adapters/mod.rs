//! Thin drivers that run the [`machine`](crate::machine) over real TCP.
//!
//! Every adapter moves bytes and time between a socket and a
//! [`ServerConnection`](crate::machine::ServerConnection) or
//! [`ClientConnection`](crate::machine::ClientConnection) and holds no
//! protocol logic.
//! Servers take the same application interface, a [`Handler`].
// The adapters own the clock and the threads that the sans-I/O core may not
// touch (clippy.toml forbids them crate-wide for the core's sake).
#![allow(clippy::disallowed_methods)]

mod drive;
mod handler;
pub mod mio_server;
pub mod std_client;
pub mod std_server;
#[cfg(feature = "tokio")]
pub mod tokio_io;

pub use drive::now;
pub use handler::{Exchange, Handler, RequestInfo, ServerOptions};
