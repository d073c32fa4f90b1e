//! The step: bytes moved between the transport and the machine, the
//! machine's timers run, and what the runtime does next decided
//! ([`Step`]). A turn moves at most [`TURN_BYTES`] before the other
//! connections of an event loop get theirs; a blocking transport's calls
//! are bounded by the nearest deadline and by [`BLOCKING_SLICE`].

use std::borrow::Cow;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::super::http_line::Look;
use super::{BLOCKING_SLICE, CloseCause, Driver, Phase, Step};
use crate::io_adapters::linger::Lingering;
use crate::io_adapters::transport::{IoMode, Transport, retime, socket_timeout, would_block};
use crate::machine::{Now, ServerConnection};

/// Bytes one connection may read and write in one turn before the others
/// get theirs. Parsing costs about as much per byte whatever the message,
/// so this bounds the work of a turn: with 8 connections streaming 900 KB
/// JSON5 messages, a small request waits for a round of 8 × 32 KiB of
/// their parsing, not for everything they sent.
pub(super) const TURN_BYTES: usize = 32 * 1024;

/// The peer's side of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PeerInput {
    /// Bytes may come.
    Open,
    /// The runtime saw the peer's end of stream coming (EPOLLRDHUP): a
    /// short read no longer proves the socket drained, since the end may
    /// follow the data with no new readiness event; read until the read
    /// answers 0.
    Ending,
    /// The read answered 0; the machine has not been told yet (received
    /// bytes wait for `dispatch`, [`Intake::Deferred`]).
    EndRead,
    /// The machine knows the stream ended.
    Ended,
}

/// Where received bytes are parsed.
// The box is the point: a connection parsing in `step` carries a pointer,
// not a `Vec`.
#[allow(clippy::box_collection)]
#[derive(Debug)]
pub(super) enum Intake {
    /// In `step`, as they are read.
    Direct,
    /// In `dispatch` ([`Driver::parse_in_dispatch`]): they wait here;
    /// boxed, as only the async runtime asks for it.
    Deferred(Box<Vec<u8>>),
}

/// What the current turn has done: bytes moved, the clock as read, and
/// whether an edge-triggered socket is known to be drained.
#[derive(Debug, Default)]
pub(super) struct Turn {
    /// Bytes read and written (a turn ends soon past [`TURN_BYTES`]).
    moved: u32,
    /// The clock as read in this turn, without blocking: the turn is
    /// microseconds of work and the machine's timers count seconds, so
    /// `step` and a `dispatch` that only logs share one reading. A
    /// dispatch that did work drops it (the next step reads the clock
    /// again), and a blocking transport reads it after every call instead
    /// (see `after_io`).
    pub(super) clock: Option<Now>,
    readiness: Readiness,
}

impl Turn {
    /// Bytes read and written so far.
    #[inline]
    fn moved(&self) -> usize {
        self.moved as usize
    }

    /// `n` more bytes were read or written.
    #[inline]
    fn add_moved(&mut self, n: usize) {
        self.moved = self.moved.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
    }
}

/// What an edge-triggered socket is known to hold.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) enum Readiness {
    /// It may hold input: read.
    #[default]
    Unknown,
    /// A short read drained it this turn: wait for the next event.
    Drained,
}

/// Whether the pending output has been offered to the transport since it
/// became pending: a blocking write waits for the peer itself, up to the
/// deadline, so there one offer per wait is enough.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Offer {
    Untried,
    Offered,
}

/// What one call to the transport did, for the step to go on from.
enum Transfer {
    /// Bytes moved (or the call was interrupted): go round again.
    Moved,
    /// A read moved bytes, and its shortness shows an edge-triggered
    /// socket drained: go round, but wait for the next event to read.
    Drained,
    /// The transport answered `WouldBlock`: that direction waits.
    Blocked,
    /// The first line was HTTP's (D1): answered, and the connection
    /// lingers.
    Lingers,
    /// The transport failed: the connection is closed, this is the step.
    Over(Step),
}

impl Driver {
    /// Moves bytes and time until the runtime has something to do; see
    /// [`Step`]. `scratch` is the read buffer (it may be shared by every
    /// connection of a thread: nothing is kept in it between calls).
    pub fn step<T: Transport + ?Sized>(&mut self, io: &mut T, scratch: &mut [u8]) -> Step {
        // Within one call: a direction that answered WouldBlock is not
        // tried again (a blocking call has already waited).
        let span = self.span();
        let _entered = span.enter();
        let mut write_blocked = false;
        let mut read_blocked = self.turn.readiness == Readiness::Drained;
        loop {
            let at = if self.mode.is_blocking() {
                self.now()
            } else {
                *self.turn.clock.get_or_insert_with(|| self.settings.0.clock.now())
            };
            match &mut self.phase {
                // What was not wholly written is logged as cut short first.
                Phase::Closed if self.answers.is_empty() => return Step::Close,
                Phase::Closed => return Step::Dispatch,
                Phase::Lingering { linger, why } => {
                    let why = *why;
                    return match linger.step(io, scratch, self.mode, at.instant) {
                        Lingering::Wait {
                            read,
                            write,
                            deadline,
                        } => self.end_turn(Step::Wait {
                            read,
                            write,
                            deadline: Some(deadline),
                        }),
                        Lingering::Done => self.move_to_closed(why, None),
                    };
                }
                Phase::Draining { until, .. } if *until <= at.instant => {
                    return self.move_to_closed(CloseCause::DrainDeadline, None);
                }
                Phase::Serving { .. } | Phase::Draining { .. } => {}
            }
            // Input, a timer, or output taken (which lets held requests
            // through, D3) may each have produced events.
            if self.conn.has_event(at) || self.intake_due() || self.content_due() {
                return Step::Dispatch;
            }
            // Pending output is offered to the transport before a timer is
            // acted on (D3: the stall limit is the peer's time, not ours):
            // the peer may have taken bytes that no readiness event
            // reported (Linux reports a socket writable only once a third
            // of its send buffer is free), and an answer that took longer
            // to build than the limit has not been offered at all yet. A
            // blocking write waits for the peer itself, up to the
            // deadline, so there one offer is enough.
            let pending = !self.conn.pending_output().is_empty();
            if !pending {
                self.offer = Offer::Untried;
            }
            let output_untried = pending
                && !write_blocked
                && self.turn.moved() < TURN_BYTES
                && !(self.mode.is_blocking() && self.offer == Offer::Offered);
            // The nearest deadline is asked only where it decides
            // something: a turn that writes and reads again does not need it.
            let mut known = None;
            if !output_untried {
                let deadline = self.deadline();
                if deadline.is_some_and(|t| t <= at.instant) {
                    // The stall timer is the peer's progress (D3): what the
                    // transport says the peer acknowledged decides whether
                    // it took any, so it is asked at every due timer.
                    self.report_acknowledged(io, at);
                    self.act_on_timers(at);
                    continue;
                }
                known = Some(deadline);
            }
            if !pending && (self.conn.is_closed() || self.may_stop()) {
                let why = if self.conn.is_closed() {
                    CloseCause::PeerClosed
                } else {
                    CloseCause::Shutdown
                };
                self.move_to_lingering(why, at.instant);
                continue;
            }
            let over_budget = self.turn.moved() >= TURN_BYTES;
            let mut moved = false;

            // Only a blocking call is bounded by it.
            let io_deadline = if self.mode.is_blocking() {
                *known.get_or_insert_with(|| self.deadline())
            } else {
                None
            };
            if pending && !write_blocked && !over_budget {
                match self.write_out(io, io_deadline, at) {
                    Transfer::Moved | Transfer::Drained => moved = true,
                    Transfer::Blocked => write_blocked = true,
                    Transfer::Lingers => continue,
                    Transfer::Over(step) => return step,
                }
            }

            let pending = !self.conn.pending_output().is_empty();
            let want_read = self.wants_input();
            // A blocking read would hold a pending write back: read only
            // once the write is done, or has timed out.
            let read_turn = !self.mode.is_blocking() || !pending || write_blocked;
            let room = scratch.len().min(TURN_BYTES.saturating_sub(self.turn.moved()));
            if want_read && read_turn && !read_blocked && room > 0 {
                match self.read_in(io, &mut scratch[..room], io_deadline, at) {
                    Transfer::Moved => moved = true,
                    Transfer::Drained => (moved, read_blocked) = (true, true),
                    Transfer::Blocked => read_blocked = true,
                    Transfer::Lingers => continue,
                    Transfer::Over(step) => return step,
                }
            }
            if moved {
                continue;
            }
            let deadline = known.unwrap_or_else(|| self.deadline());
            if deadline.is_some_and(|t| t <= at.instant) {
                continue;
            }
            let budget_stopped = (want_read && !read_blocked) || (pending && !write_blocked);
            if over_budget && budget_stopped {
                return self.end_turn(Step::Yield);
            }
            let deadline = self.wake_at(deadline);
            return self.end_turn(Step::Wait {
                read: want_read,
                write: pending,
                deadline,
            });
        }
    }

    /// While the answer of a request handed out is awaited, and the step
    /// with it: writes what is left of the earlier answers, their
    /// streamed content included, until the transport would block or
    /// nothing is left, so that they do not wait for a later answer.
    /// Whether output is still pending (the runtime then waits for room).
    /// A failed write closes the connection ([`is_closed`](Self::is_closed)).
    #[cfg(any(feature = "mio", feature = "tokio"))]
    pub(crate) fn write_while_awaited<T: Transport + ?Sized>(&mut self, io: &mut T) -> bool {
        let span = self.span();
        let _entered = span.enter();
        let at = self.now();
        loop {
            if self.content_due() {
                self.send_content(at);
            }
            if self.conn.pending_output().is_empty() || self.is_closed() {
                return false;
            }
            match self.write_out(io, None, at) {
                Transfer::Moved | Transfer::Drained => {}
                Transfer::Blocked => return true,
                Transfer::Lingers | Transfer::Over(_) => return false,
            }
        }
    }

    /// Offers the pending output to the transport once.
    fn write_out<T: Transport + ?Sized>(
        &mut self,
        io: &mut T,
        deadline: Option<Instant>,
        at: Now,
    ) -> Transfer {
        if let Err(e) = self.bound(io, self.wake_at(deadline), at.instant) {
            return Transfer::Over(self.move_to_closed(CloseCause::TransportFailed, Some(&e)));
        }
        self.offer = Offer::Offered;
        let (written, offered) = write_pending(&self.conn, io);
        match written {
            // The peer is gone: nothing more can be sent.
            Ok(0) => Transfer::Over(self.move_to_closed(CloseCause::TransportFailed, None)),
            Ok(n) => {
                if let Some(metrics) = self.settings.metrics() {
                    metrics.sent(n);
                }
                let short = n < offered;
                let after = self.after_io(at);
                self.conn.consume_output(n, after);
                if short {
                    self.report_acknowledged(io, after);
                }
                self.turn.add_moved(n);
                Transfer::Moved
            }
            Err(e) if would_block(&e) => {
                self.report_acknowledged(io, self.after_io(at));
                Transfer::Blocked
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Transfer::Moved,
            Err(e) => Transfer::Over(self.move_to_closed(CloseCause::TransportFailed, Some(&e))),
        }
    }

    /// Reads from the transport once, into `room`, and takes in what came
    /// (or the end of stream); the first bytes go through the look for an
    /// HTTP request line (D1).
    fn read_in<T: Transport + ?Sized>(
        &mut self,
        io: &mut T,
        room: &mut [u8],
        deadline: Option<Instant>,
        at: Now,
    ) -> Transfer {
        if let Err(e) = self.bound(io, self.wake_at(deadline), at.instant) {
            return Transfer::Over(self.move_to_closed(CloseCause::TransportFailed, Some(&e)));
        }
        match io.read(room) {
            Ok(0) => {
                self.input = PeerInput::EndRead;
                // What was held as a possible HTTP line goes first (D1).
                let held = self.first_line.release();
                self.take_in(&held, self.after_io(at));
                if let Intake::Direct = self.intake {
                    self.input = PeerInput::Ended;
                    self.conn.receive_eof(self.after_io(at));
                }
                Transfer::Moved
            }
            Ok(n) => {
                if let Some(metrics) = self.settings.metrics() {
                    metrics.received(n);
                }
                let at = self.after_io(at);
                let message_time = self.settings.0.config.limits.message_timeout;
                let received = match self.first_line.look(&room[..n], at.instant, message_time) {
                    Look::Pass(bytes) => bytes,
                    Look::Hold => Cow::Borrowed(&[][..]),
                    Look::Http(answer) => {
                        // Best effort, a few hundred bytes on a fresh socket.
                        if let Ok(sent) = io.write(&answer)
                            && let Some(metrics) = self.settings.metrics()
                        {
                            metrics.sent(sent);
                        }
                        self.move_to_lingering(CloseCause::Rejected, at.instant);
                        return Transfer::Lingers;
                    }
                };
                self.take_in(&received, at);
                self.turn.add_moved(n);
                if self.mode == IoMode::EdgeTriggered && n < room.len() && self.input == PeerInput::Open {
                    self.turn.readiness = Readiness::Drained;
                    return Transfer::Drained;
                }
                Transfer::Moved
            }
            Err(e) if would_block(&e) => Transfer::Blocked,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Transfer::Moved,
            // Reset by the peer: nothing can be sent.
            Err(e) => Transfer::Over(self.move_to_closed(CloseCause::TransportFailed, Some(&e))),
        }
    }

    /// Acts on the machine's timers that are due at `at` (D3).
    pub(super) fn act_on_timers(&mut self, at: Now) {
        // A possible HTTP line held past the message time goes to the
        // machine, which answers it as any other first bytes (D3).
        let held = self.first_line.expire(at.instant);
        self.take_in(&held, at);
        let idle = self.conn.is_idle();
        self.conn.handle_timeout(at);
        if self.answers.is_empty() {
            // A record is a hundred bytes: a quiet connection keeps none.
            // The machine's give-back deadline (a quiet connection's
            // buffers) brings this turn; a busy one reuses the queue for
            // its next exchange.
            self.answers = VecDeque::new();
        }
        if idle && self.conn.is_closed() {
            // D3: an idle connection closes without a response.
            self.move_to_closing(CloseCause::IdleTimeout);
        }
    }

    /// Bytes received, for the machine: now, or at the next dispatch.
    pub(super) fn take_in(&mut self, bytes: &[u8], at: Now) {
        match &mut self.intake {
            _ if bytes.is_empty() => {}
            Intake::Direct => self.conn.receive_data(bytes, at),
            Intake::Deferred(inbox) => inbox.extend_from_slice(bytes),
        }
    }

    /// Tells the machine what the transport says the peer acknowledged,
    /// where the transport can tell. Only when it matters: a write the
    /// transport took whole says the peer keeps up, so the count is read
    /// when a write falls short or blocks (the peer may be slow or gone)
    /// and when a timer is due (the stall timer decides by it, and has the
    /// machine ask again often enough to see when the peer took bytes).
    pub(super) fn report_acknowledged<T: Transport + ?Sized>(&mut self, io: &T, at: Now) {
        if let Some(told) = io.acknowledged() {
            self.conn.transport_acknowledged(told, at);
        }
    }

    /// The nearest deadline: the machine's timers, and a possible HTTP
    /// line held, which is a message begun (D3).
    fn deadline(&self) -> Option<Instant> {
        match (self.conn.poll_timeout(), self.first_line.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// When the runtime must step again at the latest: the machine's
    /// nearest timer, or the end of a shutdown's drain.
    pub(super) fn wake_at(&self, machine: Option<Instant>) -> Option<Instant> {
        match (&self.phase, machine) {
            (Phase::Draining { until, .. }, machine) => {
                let drain = self.first_request_by().unwrap_or(*until);
                Some(machine.map_or(drain, |t| t.min(drain)))
            }
            (_, machine) => machine,
        }
    }

    /// Whether received bytes or the end of stream wait for `dispatch`.
    pub(super) fn intake_due(&self) -> bool {
        let bytes = matches!(&self.intake, Intake::Deferred(inbox) if !inbox.is_empty());
        bytes || self.input == PeerInput::EndRead
    }

    /// Whether the machine wants more of the peer's input now.
    pub(super) fn wants_input(&self) -> bool {
        matches!(self.input, PeerInput::Open | PeerInput::Ending) && self.conn.wants_read()
    }

    /// The time after a transport call made at `at`: a call that may block
    /// takes time worth a new reading of the clock; a non-blocking one
    /// does not.
    #[inline]
    pub(super) fn after_io(&self, at: Now) -> Now {
        if self.mode.is_blocking() { self.now() } else { at }
    }

    /// Whether a shutting-down connection may close now: nothing half
    /// received and nothing left to write, or only the full request of a
    /// handshake awaited (which may take 300 s, D3).
    /// A connection that has received nothing yet waits a moment for its
    /// first request ([`FIRST_REQUEST_GRACE`](super::phase::FIRST_REQUEST_GRACE)).
    pub(super) fn may_stop(&self) -> bool {
        if !matches!(self.phase, Phase::Draining { .. }) {
            return false;
        }
        if let Some(by) = self.first_request_by() {
            let now = self.turn.clock.map_or_else(|| self.now().instant, |c| c.instant);
            if now < by {
                return false;
            }
        }
        let received = !self.intake_due();
        received && (self.conn.is_idle() || self.conn.awaits_full_request())
    }

    /// Blocking transports: bounds the next call by the nearest deadline,
    /// and by [`BLOCKING_SLICE`] so that a shutdown is noticed.
    pub(super) fn bound<T: Transport + ?Sized>(
        &mut self,
        io: &mut T,
        deadline: Option<Instant>,
        at: Instant,
    ) -> std::io::Result<()> {
        if !self.mode.is_blocking() {
            return Ok(());
        }
        let until = deadline.map_or(BLOCKING_SLICE, |d| d.saturating_duration_since(at));
        // At most BLOCKING_SLICE: whole milliseconds fit in 32 bits.
        let limit = socket_timeout(until.min(BLOCKING_SLICE));
        let set = self
            .timeout_ms
            .map(|ms| Some(Duration::from_millis(u64::from(ms))));
        if retime(set, Some(limit)) {
            io.set_timeout(Some(limit))?;
            self.timeout_ms = Some(u32::try_from(limit.as_millis()).unwrap_or(u32::MAX));
        }
        Ok(())
    }

    pub(super) fn end_turn(&mut self, step: Step) -> Step {
        self.turn = Turn::default();
        step
    }
}

/// Offers the pending output to the transport, in one vectored write
/// when it is in several pieces (a large prepared body between a head and
/// a tail), or from an adapter's copy of a prepared body when the
/// transport can send from it; returns the write's result and how many
/// bytes were offered.
pub(super) fn write_pending<W: Transport + ?Sized>(
    conn: &ServerConnection,
    io: &mut W,
) -> (std::io::Result<usize>, usize) {
    if let Some(pending) = conn.pending_output_copy()
        && let Some(sent) = io.send_copy(pending)
    {
        return (sent, pending.len);
    }
    let mut slices = [std::io::IoSlice::new(&[]); 4];
    match conn.pending_output_vectored(&mut slices) {
        n if conn.pending_output_copy_follows() => (
            io.write_before_copy(&slices[..n]),
            slices[..n].iter().map(|slice| slice.len()).sum(),
        ),
        0 | 1 => (io.write(&slices[0]), slices[0].len()),
        n => (
            io.write_vectored(&slices[..n]),
            slices[..n].iter().map(|slice| slice.len()).sum(),
        ),
    }
}
