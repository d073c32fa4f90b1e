//! Thin drivers that run the [`machine`](crate::machine) over real streams.
//!
//! Laid out by role and runtime:
//!
//! - [`server`]: the application interface ([`server::Handler`]), the one
//!   drive step ([`server::Driver`]) and its runtimes: [`server::blocking`]
//!   (std threads), `server::mio` (an event loop per worker; feature `mio`,
//!   on by default), `server::tokio` (feature `tokio`).
//! - [`client`]: the options, outcomes and errors every client shares, and
//!   the clients: [`client::blocking`] (std only) and `client::tokio`.
//! - `tls` (feature `tls`): TLS streams for both roles (D20), through the
//!   transport seam.
//!
//! Every runtime moves bytes between a [`Transport`] and a drive step that
//! holds every decision; none holds protocol logic or a loop of its own.
//! The transport is the seam for TLS, the PROXY protocol or Unix sockets:
//! a new stream type needs no change to the drive steps.
// The adapters own the clock and the threads that the sans-I/O core may not
// touch (clippy.toml forbids them crate-wide for the core's sake).
#![allow(clippy::disallowed_methods)]

use std::time::{Instant, SystemTime};

use crate::machine::Now;
use crate::message::Date;

pub mod client;
mod linger;
pub mod proxy_protocol;
pub mod server;
#[cfg(feature = "tls")]
pub mod tls;
mod transport;

pub use transport::{IoMode, Transport};

/// Reads both clocks the machine needs (a monotonic instant for timers, the
/// wall clock for `date`) into a [`Now`]. The sans-I/O core never calls
/// this; whoever drives a [`ServerConnection`](crate::machine::ServerConnection) or a
/// [`ClientConnection`](crate::machine::ClientConnection) by hand
/// may.
pub fn now() -> Now {
    Now {
        instant: Instant::now(),
        wall: Date::from_system_time(SystemTime::now()),
    }
}
