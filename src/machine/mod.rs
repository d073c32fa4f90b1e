//! The sans-I/O connection state machine (issue 3).
//!
//! One [`Connection`] per TCP connection, in the [`Role::Server`] or
//! [`Role::Client`] role. The caller owns the socket and the clock:
//!
//! ```text
//!   bytes from the socket ──► receive_data(bytes, now) ─┐
//!   end of stream        ──► receive_eof(now)           │
//!                                                       ▼
//!                         next_event() ──► Request / Response / Continue …
//!   answer / send       ──► send_response(…) / send_request(…)
//!   bytes to the socket ◄── pending_output() + consume_output(n)
//!   timers              ◄── poll_timeout(); handle_timeout(now)
//! ```

mod client;
mod config;
mod connection;
mod event;
mod responses;
pub mod scan;
mod server;
pub mod state;

pub use config::{Config, ContinuePolicy, Limits, Now};
pub use connection::Connection;
pub use event::{Event, PeerError, RequestId, UsageError};
pub use scan::{Scan, Scanner, scan};
pub use state::Role;
