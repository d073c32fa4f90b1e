//! What holds a connection's drive step on a mio or io_uring worker: its
//! PROXY header not yet all in (D21), or an `async` answer awaited. One
//! boxed enum, since only some moments of a connection need either, and
//! an idle connection stays small.

use std::time::Instant;

use super::awaited::{Awaited, Probe, Turned};
use crate::io_adapters::proxy_protocol::ProxyHeaderReader;
use crate::io_adapters::server::{Driver, ServerOptions};
use crate::io_adapters::transport::Transport;

/// What holds a connection's drive step. The PROXY header comes before
/// any request, so a connection never waits for both.
pub(in crate::io_adapters::server) enum Paused {
    /// Its PROXY header is not all in (D21): the reader, and the time by
    /// which the header must have arrived.
    Header(ProxyHeaderReader, Instant),
    /// The answer its handler gives later is awaited.
    Answer(Awaited),
}

impl Paused {
    /// The connection's PROXY header, due from a new connection when the
    /// server takes the PROXY protocol.
    pub(in crate::io_adapters::server) fn header_due(options: &ServerOptions) -> Option<Box<Paused>> {
        options.proxy_protocol.then(|| {
            let limit = options.config.limits.message_timeout;
            Box::new(Paused::Header(ProxyHeaderReader::new(), Instant::now() + limit))
        })
    }

    /// The connection's turn while an answer is awaited: what is left of
    /// the earlier answers written, then the answer polled and the peer
    /// watched. `Some` while it still is, so that the drive step
    /// waits; `None` when nothing is awaited or the answer just ended
    /// (given to `driver`, or dropped). `gone`: whether the worker saw the
    /// connection reset.
    pub(in crate::io_adapters::server) fn turn_answer<S: Probe + Transport>(
        paused: &mut Option<Box<Paused>>,
        driver: &mut Driver,
        stream: &mut S,
        gone: impl FnOnce(&S) -> bool,
    ) -> Option<Awaiting> {
        let Some(Paused::Answer(awaited)) = paused.as_deref_mut() else {
            return None;
        };
        let writing = driver.write_while_awaited(stream);
        let gone = gone(stream);
        match awaited.turn(driver, stream, gone) {
            Turned::Waiting(until) => Some(Awaiting { until, writing }),
            Turned::Ended(ended) => {
                if let Some(Paused::Answer(awaited)) = paused.take().map(|paused| *paused) {
                    awaited.end(driver, ended);
                }
                None
            }
        }
    }
}

/// A connection whose answer is still awaited.
pub(in crate::io_adapters::server) struct Awaiting {
    /// When to turn it again if nothing wakes it first (the next newline
    /// to the peer, the drain deadline).
    pub(in crate::io_adapters::server) until: Option<Instant>,
    /// Whether earlier answers still wait for room to be written.
    pub(in crate::io_adapters::server) writing: bool,
}
