//! The graceful close, once for every runtime: shut down our sending side,
//! read and drop what the peer still sends for a moment, then close.
//!
//! Closing a socket with unread input makes the kernel reset the
//! connection, and a reset can overtake our last response in the peer's
//! receive buffer: the peer would lose it. Draining first lets the peer
//! read the response and our end of stream.

use std::time::{Duration, Instant};

use super::transport::{IoMode, Transport, would_block};

/// How long a closing connection drains the peer's input at most.
pub(crate) const LINGER_TIME: Duration = Duration::from_millis(500);
/// How much of the peer's input a closing connection drains at most.
const LINGER_BYTES: usize = 1 << 20;

/// A connection being closed gracefully.
#[derive(Debug)]
pub(crate) struct Linger {
    until: Instant,
    /// Our sending side.
    sending: Sending,
    drained: usize,
}

/// Our sending side while lingering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sending {
    /// Not shut down yet (a TLS close may take more than one try).
    Open,
    /// Shut down: the peer has our end of stream.
    Shut,
}

/// What a lingering connection waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lingering {
    /// Until the transport is readable (or, while the shutdown itself is
    /// pending, writable), or `deadline`.
    Wait {
        /// Waiting to read the peer's input.
        read: bool,
        /// Waiting to finish our own shutdown (a TLS close).
        write: bool,
        /// When the linger ends anyway.
        deadline: Instant,
    },
    /// The peer has closed, or time is up: drop the transport.
    Done,
}

impl Linger {
    /// Starts lingering at `now`.
    pub(crate) fn new(now: Instant) -> Linger {
        Linger {
            until: now + LINGER_TIME,
            sending: Sending::Open,
            drained: 0,
        }
    }

    /// Shuts down our side once, then drains until the peer closes, the
    /// transport would block, or time is up (`now`: the caller's clock).
    pub(crate) fn step<T: Transport + ?Sized>(
        &mut self,
        io: &mut T,
        scratch: &mut [u8],
        mode: IoMode,
        now: Instant,
    ) -> Lingering {
        loop {
            let left = self.until.saturating_duration_since(now);
            if left.is_zero() || self.drained > LINGER_BYTES {
                return Lingering::Done;
            }
            if mode.is_blocking() && io.set_timeout(Some(left)).is_err() {
                return Lingering::Done;
            }
            if self.sending == Sending::Open {
                match io.shutdown_write() {
                    Ok(()) => self.sending = Sending::Shut,
                    Err(e) if would_block(&e) => return self.wait(false, true),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => return Lingering::Done,
                }
            }
            match io.read(scratch) {
                Ok(0) => return Lingering::Done,
                Ok(n) => {
                    self.drained += n;
                    if mode == IoMode::EdgeTriggered && n < scratch.len() {
                        return self.wait(true, false);
                    }
                }
                Err(e) if would_block(&e) => return self.wait(true, false),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Lingering::Done,
            }
        }
    }

    fn wait(&self, read: bool, write: bool) -> Lingering {
        Lingering::Wait {
            read,
            write,
            deadline: self.until,
        }
    }
}
