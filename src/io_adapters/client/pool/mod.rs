//! What the two pools share ([`blocking::Pool`](super::blocking::Pool),
//! `tokio::Pool`): where a call goes ([`Origin`]), how a pool behaves
//! ([`PoolOptions`]), the request builder ([`RequestBuilder`]), and the
//! bookkeeping of connections per host, which each pool runs under its
//! own lock and wakes its own waiters from.
//!
//! One exchange per connection at a time: a call takes a connection of
//! its own for as long as its exchange lasts (no pipelining across calls:
//! an answer never waits behind another call's), and gives it back when
//! the answer is whole.

//!
//! Here are the parts' names, as the pools and the crate use them. The
//! parts are in files by concern:
//!
//! - `origin.rs`: [`Origin`] and [`split_url`], where a call goes;
//! - `options.rs`: [`PoolOptions`];
//! - `retry.rs`: which failed exchange is sent again (D13), and a call's
//!   deadline over each step's own limit;
//! - `hosts.rs`: the connections of each origin, the per-host limit, and
//!   the lease a call holds its connection by;
//! - `builder.rs`: [`RequestBuilder`];
//! - `tests.rs`: the tests of them all.

pub use builder::RequestBuilder;
pub(crate) use hosts::{Checkout, Lease, Pooled, Reaper, Shared, socket_spoke};
pub use options::PoolOptions;
pub use origin::{DEFAULT_PORT, DEFAULT_TLS_PORT, Origin, Scheme, split_url};
pub(crate) use retry::{Deadline, Resend, may_retry};

mod builder;
mod hosts;
mod options;
mod origin;
mod retry;

#[cfg(test)]
mod tests;
