//! An `async` answer awaited by an event-loop worker (mio, io_uring).
//!
//! The handler's future is polled on the worker's thread, first when the
//! handler gives it and then each time its waker names the connection in
//! the worker's mailbox, so that one connection's answer never holds the
//! worker's other connections. Meanwhile the peer is watched as the tokio
//! server watches it ([`watch`](crate::io_adapters::server::watch)): a
//! reset ends the wait, and so does a peer that closed and left, told by
//! the newlines it no longer takes; the drain deadline ends it too.

use std::io;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::io_adapters::server::drive::{Deferred, Pending};
use crate::io_adapters::server::reply::{ReplyFuture, poll_caught};
use crate::io_adapters::server::watch::{PROBE_FIRST, next_probe_wait, peer_gone};
use crate::io_adapters::server::{Accepted, Driver, Reply};
use crate::io_adapters::transport::Transport;

/// A connection's answer, awaited on its worker.
pub(crate) struct Awaited {
    future: ReplyFuture,
    /// What the driver takes back with the answer.
    pending: Pending,
    /// Names the connection in its worker's mailbox.
    waker: Waker,
    watch: Watch,
}

/// How the peer is watched while its answer is awaited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watch {
    /// Its stream is open, as far as the worker knows.
    Open,
    /// Its stream ended: the next newline goes at `at`, the one after it
    /// `wait` later.
    Probing { at: Instant, wait: Duration },
    /// Nothing more to learn (the stream ended while a byte written would
    /// fall inside a message, or a newline could not go out): only the
    /// answer is awaited.
    Unwatched,
}

/// What became of an awaited answer at the connection's turn.
// Made and taken apart at once, as `Handled` is: boxing the reply would
// cost an allocation.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Turned {
    /// Still awaited; the worker turns the connection again when woken,
    /// or at this time (the next newline, the drain deadline).
    Waiting(Option<Instant>),
    /// Over: hand it to [`Awaited::end`], and step the connection on.
    Ended(Ended),
}

/// How an awaited answer ended.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Ended {
    /// The reply is ready.
    Ready(Reply),
    /// The peer left: nothing is to be sent.
    PeerLeft,
    /// The shutdown's drain deadline passed.
    DrainDeadline,
}

/// What a worker's stream can do for the watch.
pub(crate) trait Probe {
    /// Writes one newline towards the peer, flushed: `Err` when the peer
    /// is gone ([`peer_gone`]) or nothing could be learnt.
    fn probe(&mut self) -> io::Result<()>;
}

impl Awaited {
    /// The answer `deferred` hands out, woken through `waker`.
    pub(crate) fn new(deferred: Deferred, waker: Waker) -> Awaited {
        let (future, pending) = deferred.into_future();
        Awaited {
            future,
            pending,
            waker,
            watch: Watch::Open,
        }
    }

    /// The connection's turn while its answer is awaited: polls the
    /// answer, and otherwise watches the peer through `stream` (`gone`:
    /// the worker saw the connection reset; a connection whose earlier
    /// answers could not be written is gone too) and the drain deadline.
    pub(crate) fn turn(&mut self, driver: &Driver, stream: &mut impl Probe, gone: bool) -> Turned {
        let mut cx = Context::from_waker(&self.waker);
        if let Poll::Ready(reply) = poll_caught(&mut self.future, &mut cx) {
            return Turned::Ended(Ended::Ready(reply));
        }
        let now = Instant::now();
        if gone || driver.is_closed() || self.watch(driver, stream, now) {
            return Turned::Ended(Ended::PeerLeft);
        }
        let drain = driver.drain_deadline();
        if drain.is_some_and(|until| now >= until) {
            return Turned::Ended(Ended::DrainDeadline);
        }
        let probe = match self.watch {
            Watch::Probing { at, .. } => Some(at),
            Watch::Open | Watch::Unwatched => None,
        };
        Turned::Waiting(probe.into_iter().chain(drain).min())
    }

    /// Gives the driver what `ended` says: the reply, or the request
    /// recorded as never answered and the connection closed. The future
    /// is dropped first (a handler cancelled before its exchange is
    /// recorded).
    pub(crate) fn end(self, driver: &mut Driver, ended: Ended) {
        let Awaited { future, pending, .. } = self;
        drop(future);
        match ended {
            Ended::Ready(reply) => driver.answer_later(pending, reply),
            Ended::PeerLeft => driver.answer_abandoned(pending),
            Ended::DrainDeadline => driver.answer_cut_short(pending),
        }
    }

    /// Watches the peer at `now`: whether it left.
    fn watch(&mut self, driver: &Driver, stream: &mut impl Probe, now: Instant) -> bool {
        if self.watch == Watch::Open && driver.peer_input_ended() {
            self.watch = if driver.between_messages() {
                Watch::Probing {
                    at: now,
                    wait: PROBE_FIRST,
                }
            } else {
                Watch::Unwatched
            };
        }
        let Watch::Probing { at, wait } = self.watch else {
            return false;
        };
        if now < at {
            return false;
        }
        match stream.probe() {
            Ok(()) => {
                self.watch = Watch::Probing {
                    at: now + wait,
                    wait: next_probe_wait(wait),
                };
                false
            }
            Err(e) if peer_gone(&e) => true,
            Err(_) => {
                self.watch = Watch::Unwatched;
                false
            }
        }
    }
}

/// A newline written through the connection's stream, as its next bytes
/// (under TLS, one record).
impl<S: Transport> Probe for Accepted<S> {
    fn probe(&mut self) -> io::Result<()> {
        use std::io::Write;
        match self.write(b"\n")? {
            0 => Err(io::ErrorKind::WriteZero.into()),
            _ => self.flush(),
        }
    }
}
