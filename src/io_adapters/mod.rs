//! Thin drivers that run the [`machine`](crate::machine) over real streams.
//!
//! Laid out by role and runtime:
//!
//! - [`server`]: the application interface ([`server::Handler`]), the one
//!   drive step ([`server::Driver`]) and its runtimes: [`server::blocking`]
//!   (std threads), `server::mio` (an event loop per worker; feature `mio`,
//!   on by default), `server::tokio` (feature `tokio`).
//! - [`client`]: the options, outcomes and errors every client shares, and
//!   the clients: [`client::blocking`] (std only) and `client::tokio`, each
//!   a pool of connections (`Pool`, what an application calls a service
//!   with) and a client on one connection (`Client`).
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

use std::cell::Cell;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::machine::Now;
use crate::message::Date;

pub mod client;
mod clock;
mod linger;
pub mod proxy_protocol;
#[cfg(target_os = "linux")]
mod sendfile;
pub mod server;
#[cfg(feature = "tls")]
pub mod tls;
mod transport;

pub use clock::Clock;
#[cfg(target_os = "linux")]
pub use sendfile::CopyArena;
pub use transport::{IoMode, Transport};

/// The size of a huge page (x86-64, and arm64 with 4 KiB pages), and the
/// alignment that lets the kernel map memory one at a time.
#[cfg(target_os = "linux")]
pub(crate) const HUGE_PAGE: usize = 2 << 20;

/// Reads both clocks the machine needs (a monotonic instant for timers, the
/// wall clock for `date`) into a [`Now`]. The sans-I/O core never calls
/// this; whoever drives a [`ServerConnection`](crate::machine::ServerConnection) or a
/// [`ClientConnection`](crate::machine::ClientConnection) by hand
/// may.
///
/// The wall clock counts whole seconds, so each thread reads it once per
/// second: until the monotonic clock passes the end of the second last
/// read, that second is the answer. A step of the system clock shows at
/// the next second.
pub fn now() -> Now {
    thread_local! {
        /// The wall clock's second last read, and the instant it ends.
        static SECOND: Cell<Option<(Instant, Date)>> = const { Cell::new(None) };
    }
    let instant = Instant::now();
    let wall = SECOND.with(|second| match second.get() {
        Some((ends, wall)) if instant < ends => wall,
        _ => {
            let system = SystemTime::now();
            let wall = Date::from_system_time(system);
            if let Ok(since_epoch) = system.duration_since(UNIX_EPOCH) {
                let left =
                    Duration::from_secs(1) - Duration::from_nanos(u64::from(since_epoch.subsec_nanos()));
                second.set(Some((instant + left, wall)));
            }
            wall
        }
    });
    Now { instant, wall }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wall_clock_read_once_a_second_is_the_system_clock() {
        let seconds = || Date::from_system_time(SystemTime::now());
        let started = Instant::now();
        // Across at least one change of second.
        while started.elapsed() < Duration::from_millis(1500) {
            let before = seconds();
            let wall = now().wall;
            let after = seconds();
            assert!(before <= wall && wall <= after, "{before} <= {wall} <= {after}");
            std::thread::sleep(Duration::from_micros(300));
        }
    }
}
