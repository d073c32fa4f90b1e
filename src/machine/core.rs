//! What both roles share: the message layer's reader of the peer's stream
//! ([`Decoder`]), the output buffer, the event queue, the exchange numbers,
//! the timers' inputs and the connection's lifecycle. The roles own a `Core` and change it
//! only through the methods here, so every field has one writer.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::event::RoleEvent;
use super::output::{self, Output};
use super::table::{Exchange, ExchangeState, Input, Role, TransitionError};
use super::{Limits, Now, PeerError, RequestId, UsageError};
pub(super) use crate::message::decoder::{ContentOutcome, Decoded};
use crate::message::decoder::{Decoder, Grammar};
use crate::message::{ContentEncoder, Drain, EncodeError, Encoding, STREAMED_TAIL, WholeMessage};

/// How long a quiet server connection keeps its emptied buffers before
/// giving them back. A busy keep-alive peer's next request comes sooner
/// and reuses them, instead of paying an allocation and a free for each
/// buffer per request; a connection that stays quiet costs its fixed state
/// only once this has passed. A tenth of a second covers a peer among
/// many that each wait their turn on a loaded worker (a few milliseconds
/// would not, and each of its requests would pay for its buffers again),
/// and is still far shorter than any idle keep-alive connection lives.
pub(super) const KEEP_BUFFERS: Duration = Duration::from_millis(100);

/// Received bytes the input may hold, unread by the machine, while the
/// caller has events to take: beyond it the machine wants no more input,
/// so that a caller slow to take content pieces slows the peer instead of
/// buffering it (D19).
const READ_AHEAD: usize = 64 * 1024;

/// Output a streaming message of ours may have queued and untaken before
/// it takes more content (D19): enough to keep the socket busy, small
/// enough that memory does not grow with the content.
const CONTENT_WINDOW: usize = 128 * 1024;

/// Where a connection stands, as a whole. It only moves forward.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Lifecycle {
    /// Reading and writing.
    Open,
    /// The peer ended its stream; the complete messages it sent before are
    /// still handled (D1).
    PeerEnded,
    /// No more input is handled: the stream ended after the last message,
    /// or an error closes the connection. What is owed still goes out.
    InputStopped,
    /// Finished, and reported with the role's `Closed` event: nothing more
    /// is queued; the caller writes out what is pending, then closes.
    Closed,
}

/// A message of ours whose content goes out in pieces after its head
/// (D19), encoded as it goes.
#[derive(Debug)]
pub(super) struct Outbound {
    encoder: ContentEncoder,
    /// The head is in the output: content may follow.
    pub(super) head_queued: bool,
    /// The application ended the content (it may not be written yet).
    pub(super) ended: bool,
}

impl Outbound {
    /// A message whose content is written in `encoding`.
    pub(super) fn new(encoding: Encoding) -> Outbound {
        Outbound {
            encoder: ContentEncoder::new(encoding),
            head_queued: false,
            ended: false,
        }
    }

    /// Whether content may be given now.
    pub(super) fn takes_content(&self) -> bool {
        self.head_queued && !self.ended
    }
}

/// How often, at least, the transport is asked what the peer has
/// acknowledged while the stall timer runs (D3): this many times in one
/// stall timeout. A count that grew says only that the peer took bytes
/// since the last asking, not when: asked this often, the timer restarts
/// within a sixty-fourth of the timeout of the peer's last byte taken,
/// and a peer that stopped taking is closed at most that much after the
/// timeout.
const STALL_CHECKS: u32 = 64;

/// What a transport tells of the bytes written to it, for the stall
/// timer (D3). It is counted where the bytes leave for the network (a TCP
/// socket's acknowledged bytes), in that layer's units: under TLS,
/// ciphertext, which the machine never compares with the plaintext it
/// wrote, only with the transport's own earlier count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acknowledged {
    /// Bytes the peer has acknowledged since the transport opened; the
    /// count only grows.
    pub bytes: u64,
    /// Whether the transport still holds bytes the peer has not
    /// acknowledged (unsent, in flight, or in a layer above the socket).
    pub holds_more: bool,
}

/// What the machine knows of how much of its output reached the peer, for
/// the stall timer (D3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// The caller never said what its transport tells: bytes it consumes
    /// count as taken by the peer.
    OnConsume,
    /// The caller says what its transport tells ([`Acknowledged`]): only a
    /// growing count of acknowledged bytes is the peer taking output.
    Reported {
        /// The transport's count of acknowledged bytes at its last report.
        acknowledged: u64,
        /// The transport holds bytes the peer has not acknowledged, by
        /// its last report or by a write since.
        holds: bool,
        /// How many checks (each a [`STALL_CHECKS`]th of the stall
        /// timeout) have passed since the stall timer last started: the
        /// next is due at the one after. A count rather than an instant
        /// keeps the connection's fixed state small.
        checks: u32,
    },
    /// The peer stalled (D3): the output was dropped, and nothing more is
    /// timed.
    GivenUp,
}

/// The deadlines of one moment; `None` for a timer that does not run.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Timers {
    /// The peer takes none of our output (D3), or, sooner, the transport
    /// is to be asked again what the peer took.
    pub(super) stall: Option<Instant>,
    /// A message began and has not ended (D3).
    pub(super) message: Option<Instant>,
    /// Server: nothing under way (D3).
    pub(super) idle: Option<Instant>,
    /// Server: the full request after `100`; client: the `100` (D3, D10).
    pub(super) continue_wait: Option<Instant>,
    /// Server: a quiet connection gives back the buffers it kept (see
    /// [`KEEP_BUFFERS`]); not a protocol timer, it closes nothing.
    pub(super) give_back: Option<Instant>,
}

impl Timers {
    /// The earliest deadline.
    pub(super) fn earliest(self) -> Option<Instant> {
        // Pairwise rather than an iterator over the five: this is asked
        // several times per request, and the iterator did not fold away
        // (the instruction budgets of `scripts/load-bench.sh` watch it).
        let sooner = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        sooner(
            sooner(self.stall, self.message),
            sooner(sooner(self.idle, self.continue_wait), self.give_back),
        )
    }
}

/// Whether `deadline` has passed at `now`.
pub(super) fn due(deadline: Option<Instant>, now: Now) -> bool {
    deadline.is_some_and(|t| t <= now.instant)
}

/// `since + timeout`; a timeout too long to represent never ends.
pub(super) fn deadline(since: Option<Instant>, timeout: Duration) -> Option<Instant> {
    since.and_then(|t| t.checked_add(timeout))
}

/// How the streamed content of a message keeps pace (D19), counted in
/// decoded bytes, the bytes the content decoder gives (for `identity`, the
/// text): wire bytes that decode to nothing (an empty compressed block)
/// buy no time.
///
/// The rate is a budget of time: each `min_content_rate` decoded bytes
/// buy one second, and the content may be paid for at most
/// `content_gap_timeout` ahead of the moment it came. The message fails
/// when the time paid for runs out, after its first `content_gap_timeout`
/// (the grace of D19). So at every moment after the first 30 s (the
/// defaults), the content decoded since the message began averages at
/// least 16 KiB/s, and over any later stretch it falls short of 16 KiB/s
/// by at most 30 s's worth: a burst buys 30 s, never hours, and a trickle
/// after it cannot hold the message open. No gap of more than 30 s without
/// a decoded byte follows, since no byte pays for more.
#[derive(Debug, Clone, Copy)]
struct Pace {
    /// When content last decoded (or the message began).
    last_content: Instant,
    /// Up to when the content decoded so far pays.
    paid_until: Instant,
}

/// Which of D19's rules a streamed message failed (its `408`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shortfall {
    /// No content decoded for this long.
    NoContent {
        /// The longest gap allowed.
        gap: Duration,
    },
    /// The content decoded came slower than `rate` bytes per second on
    /// average, by more than `behind`'s worth.
    BelowRate {
        /// The least average rate, in decoded bytes per second.
        rate: u64,
        /// How far behind it the content may fall.
        behind: Duration,
    },
}

impl Pace {
    /// A message that began `now`, nothing decoded yet.
    fn new(now: Now) -> Pace {
        Pace {
            last_content: now.instant,
            paid_until: now.instant,
        }
    }

    /// `bytes` of content decoded `now`: they pay for `bytes / rate`
    /// seconds more, up to `content_gap_timeout` from now.
    fn credit(&mut self, bytes: usize, limits: &Limits, now: Now) {
        let rate = u128::from(limits.min_content_rate.max(1));
        let nanos = (bytes as u128).saturating_mul(1_000_000_000) / rate;
        let bought = Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX));
        let paid = self.paid_until.checked_add(bought);
        let cap = now.instant.checked_add(limits.content_gap_timeout);
        self.paid_until = match (paid, cap) {
            (Some(paid), Some(cap)) => paid.min(cap),
            (paid, cap) => paid.or(cap).unwrap_or(self.paid_until),
        };
        self.last_content = now.instant;
    }

    /// When the message fails, if it began at `started`: once the time
    /// paid for has run out, never within the first `content_gap_timeout`.
    fn deadline(&self, started: Instant, limits: &Limits) -> Option<Instant> {
        let grace = started.checked_add(limits.content_gap_timeout)?;
        Some(self.paid_until.max(grace))
    }

    /// Which rule a message that began at `started` fails at `now`: no
    /// content for the gap's length, or too little of it.
    fn shortfall(&self, started: Instant, limits: &Limits, now: Now) -> Shortfall {
        let since = self.last_content.max(started);
        if now.instant.saturating_duration_since(since) >= limits.content_gap_timeout {
            Shortfall::NoContent {
                gap: limits.content_gap_timeout,
            }
        } else {
            Shortfall::BelowRate {
                rate: limits.min_content_rate,
                behind: limits.content_gap_timeout,
            }
        }
    }
}

/// The state both roles share; see the module documentation.
#[derive(Debug)]
pub(super) struct Core<E> {
    lifecycle: Lifecycle,

    /// The peer's stream, read.
    decoder: Decoder,
    /// When the first byte of the message being received was read.
    message_started: Option<Instant>,
    /// The decoder's count of messages ended, when last asked.
    messages_ended: u64,
    /// How the streamed content of the message being received keeps pace
    /// (D19).
    pace: Pace,
    /// When the connection last became idle: the end of the last message,
    /// or the moment the peer took the last response (D3).
    idle_since: Instant,

    /// Bytes queued for the peer, and the totals ever queued and ever
    /// taken, to know which responses it has taken (D3).
    output: Output,
    /// How much of what was written reached the peer (D3).
    delivery: Delivery,
    /// Since when the peer has taken none of our output; `None` while
    /// nothing is outstanding (pending, or held by the transport, D3).
    stalled_since: Option<Instant>,

    /// Events wait inline; a quiet connection gives the queue back with its
    /// buffers.
    events: VecDeque<E>,
    next_id: u64,
}

impl<E: RoleEvent> Core<E> {
    /// A connection at its start; `now` starts the idle timer.
    pub(super) fn new(limits: &Limits, stream_content: bool, now: Now) -> Core<E> {
        Core {
            lifecycle: Lifecycle::Open,
            decoder: Decoder::new(&limits.message, limits.max_content_bytes, stream_content),
            message_started: None,
            messages_ended: 0,
            pace: Pace::new(now),
            idle_since: now.instant,
            output: Output::default(),
            delivery: Delivery::OnConsume,
            stalled_since: None,
            events: VecDeque::new(),
            next_id: 0,
        }
    }

    // -- lifecycle ---------------------------------------------------------

    pub(super) fn lifecycle(&self) -> Lifecycle {
        self.lifecycle
    }

    /// Whether the peer's bytes are still handled.
    pub(super) fn reads_input(&self) -> bool {
        self.lifecycle <= Lifecycle::PeerEnded
    }

    /// Whether the connection is finished.
    pub(super) fn is_closed(&self) -> bool {
        self.lifecycle == Lifecycle::Closed
    }

    /// No more input is handled; what was buffered is dropped.
    pub(super) fn stop_input(&mut self) {
        self.lifecycle = self.lifecycle.max(Lifecycle::InputStopped);
        self.decoder.stop();
        self.message_started = None;
    }

    /// Finishes the connection (once): nothing more is read or queued, and
    /// the role's `Closed` is reported. Pending output stays, to be
    /// written.
    pub(super) fn close(&mut self) {
        if self.lifecycle == Lifecycle::Closed {
            return;
        }
        self.stop_input();
        self.lifecycle = Lifecycle::Closed;
        self.events.push_back(E::closed());
    }

    /// D3: the peer left our output untaken for too long. Nothing more is
    /// written; the pending output is dropped and its memory freed.
    pub(super) fn close_stalled(&mut self) {
        self.output.discard();
        self.delivery = Delivery::GivenUp;
        self.stalled_since = None;
        self.events.push_back(E::peer_error(PeerError::OutputStalled));
        self.close();
    }

    /// A move the machine makes on its own was refused by the table: its
    /// bookkeeping is wrong. Debug builds (the tests, the fuzzers) stop
    /// here so that the bug is found; a release build closes the
    /// connection rather than go on from a state it cannot trust.
    fn internal_error(&mut self, error: TransitionError) {
        debug_assert!(false, "the machine made a move its table refuses: {error}");
        self.close();
    }

    /// Moves `exchange` by a move the machine makes on its own, which its
    /// logic makes legal; `None` (and the connection closed, see
    /// [`internal_error`](Self::internal_error)) if the table refuses it.
    pub(super) fn advance(
        &mut self,
        exchange: &mut Exchange,
        sender: Role,
        input: Input,
    ) -> Option<ExchangeState> {
        match exchange.apply(sender, input) {
            Ok(state) => Some(state),
            Err(error) => {
                self.internal_error(error);
                None
            }
        }
    }

    // -- input -------------------------------------------------------------

    /// Bytes from the peer; ignored after its end of stream or once input
    /// is no longer handled. Returns whether they were taken.
    pub(super) fn receive(&mut self, data: &[u8]) -> bool {
        if data.is_empty() || self.lifecycle != Lifecycle::Open {
            return false;
        }
        self.decoder.receive(data);
        true
    }

    /// Whether the caller should hold off reading: events wait to be taken
    /// and the input already holds more than [`READ_AHEAD`] unread bytes
    /// (D19: a slow sink slows the peer, not memory).
    pub(super) fn backlogged(&self) -> bool {
        self.has_events() && self.decoder.buffered() >= READ_AHEAD
    }

    /// The deadline of a streamed message (D19), from the content it
    /// decoded so far ([`Pace`]). `None` unless the message being received
    /// streams its content.
    pub(super) fn streamed_deadline(&self, limits: &Limits) -> Option<Instant> {
        if !self.decoder.is_streaming() {
            return None;
        }
        self.pace.deadline(self.message_started?, limits)
    }

    /// Which of D19's two rules the streamed message being received fails
    /// at `now`: what its `408` says.
    pub(super) fn streamed_shortfall(&self, limits: &Limits, now: Now) -> Shortfall {
        let started = self.message_started.unwrap_or(now.instant);
        self.pace.shortfall(started, limits, now)
    }

    /// Whether the message being received streams its content (D19).
    pub(super) fn is_streaming(&self) -> bool {
        self.decoder.is_streaming()
    }

    /// The peer ended its stream.
    pub(super) fn receive_eof(&mut self) {
        self.lifecycle = self.lifecycle.max(Lifecycle::PeerEnded);
    }

    /// The next thing the peer's stream has to say (D1, D19), read as
    /// `grammar` says; bookkeeping for the message timer and the idle
    /// timer on the way (D3). After an item that ends input, input is
    /// stopped.
    /// Decoded content counts towards the message's pace (D19, `limits`).
    #[inline]
    pub(super) fn next_message<G: Grammar>(
        &mut self,
        grammar: &G,
        limits: &Limits,
        now: Now,
    ) -> Decoded<G::Read> {
        if !self.reads_input() {
            return Decoded::Partial;
        }
        let decoded = self.decoder.next(grammar, self.lifecycle == Lifecycle::PeerEnded);
        if decoded.ends_input() {
            self.stop_input();
            return decoded;
        }
        let ended = self.decoder.messages_ended();
        if ended != self.messages_ended {
            self.messages_ended = ended;
            self.message_started = None;
            self.idle_since = now.instant;
        }
        if !self.decoder.in_message() {
            self.message_started = None;
        } else if self.message_started.is_none() {
            // The message timer starts, and its pace is counted from here
            // (D3, D19).
            self.message_started = Some(now.instant);
            self.pace = Pace::new(now);
        }
        if let Decoded::Content(piece) = &decoded {
            self.pace.credit(piece.len(), limits, now);
        }
        decoded
    }

    /// Whether the message being received was refused before its end and
    /// is being read to its end and dropped.
    pub(super) fn is_discarding(&self) -> bool {
        self.decoder.is_discarding()
    }

    /// Whether part of a message has been received (read or not).
    pub(super) fn holds_input(&self) -> bool {
        self.decoder.holds_input()
    }

    /// When the message being received began, if one has.
    pub(super) fn message_started(&self) -> Option<Instant> {
        self.message_started
    }

    /// Since when the connection is idle (see the field).
    pub(super) fn idle_since(&self) -> Instant {
        self.idle_since
    }

    /// The connection became idle now (D3).
    pub(super) fn set_idle_since(&mut self, now: Now) {
        self.idle_since = now.instant;
    }

    // -- output ------------------------------------------------------------

    /// Appends bytes for the peer; returns the total ever queued after
    /// them. Nothing is queued once the connection is closed.
    pub(super) fn queue_output(&mut self, now: Now, write: impl FnOnce(&mut Vec<u8>)) -> u64 {
        if self.is_closed() {
            return self.output.queued();
        }
        let added = self.output.append(write);
        self.output_added(added, now)
    }

    /// Queues a whole message; returns the total ever queued after it. A
    /// prepared body's text ([`Body::prepared`](crate::message::Body::prepared))
    /// goes in as it is, without a copy when it is large
    /// ([`Output::splice`]).
    pub(super) fn queue_message(&mut self, now: Now, message: &impl WholeMessage) -> u64 {
        let Some(written) = message
            .body()
            .written()
            .filter(|written| output::splices(written.text.len()))
        else {
            // Written whole, a prepared text copied as it is.
            return self.queue_output(now, |out| message.write_whole(out));
        };
        if self.is_closed() {
            return self.output.queued();
        }
        let mut added = self.output.append(|out| message.write_head(out));
        added += self.output.splice(written);
        added += self.output.append(|out| out.extend_from_slice(STREAMED_TAIL));
        self.output_added(added, now)
    }

    fn output_added(&mut self, added: usize, now: Now) -> u64 {
        if added > 0 {
            // The stall timer runs from the moment output is pending.
            self.track_stall(false, now);
        }
        self.output.queued()
    }

    /// Queues the head of a streamed message (`write` writes it up to its
    /// content's opening quote).
    pub(super) fn queue_head(&mut self, outbound: &mut Outbound, now: Now, write: impl FnOnce(&mut Vec<u8>)) {
        self.queue_output(now, write);
        outbound.head_queued = true;
    }

    /// Encodes and queues a piece of exchange `id`'s streamed content
    /// (D19): `OutOfTurn` before its head is queued, `NotStreaming` once it
    /// has ended, `NotText` for identity content that is not UTF-8 (the
    /// caller then aborts the message).
    pub(super) fn queue_content(
        &mut self,
        id: RequestId,
        outbound: &mut Outbound,
        data: &[u8],
        now: Now,
    ) -> Result<(), UsageError> {
        if !outbound.takes_content() {
            return Err(if outbound.ended {
                UsageError::NotStreaming(id)
            } else {
                UsageError::OutOfTurn(id)
            });
        }
        // The output still queued paces the compression (`Drain`).
        outbound.encoder.drained(Drain {
            at: now.instant,
            pending: self.output.len(),
        });
        let mut result = Ok(());
        self.queue_output(now, |out| result = outbound.encoder.encode(data, out));
        self.trim_buffers();
        result.map_err(|_| UsageError::NotText(id))
    }

    /// Ends a streamed message: the rest of its encoded content and what
    /// closes it. Returns the total ever queued after it.
    pub(super) fn queue_content_end(
        &mut self,
        outbound: &mut Outbound,
        now: Now,
    ) -> Result<u64, EncodeError> {
        let mut result = Ok(());
        let end = self.queue_output(now, |out| {
            result = outbound.encoder.finish(out);
            if result.is_ok() {
                out.extend_from_slice(STREAMED_TAIL);
            }
        });
        result.map(|()| end)
    }

    /// How many bytes of content a streaming message may give now (D19):
    /// what keeps the output owed within [`CONTENT_WINDOW`].
    pub(super) fn content_room(&self) -> usize {
        if self.is_closed() {
            return 0;
        }
        CONTENT_WINDOW.saturating_sub(self.output.len())
    }

    /// Bytes waiting to be written to the peer.
    pub(super) fn pending_output(&self) -> &[u8] {
        self.output.pending()
    }

    /// When the first pending piece is text an adapter keeps a copy of as
    /// well: the copy, where in it the pending bytes start, and how many
    /// there are.
    pub(super) fn pending_output_copy(&self) -> Option<output::OutputCopy<'_>> {
        self.output.pending_copy()
    }

    /// Whether the pending pieces are followed at once by text sent from
    /// an adapter's copy.
    pub(super) fn output_copy_follows(&self) -> bool {
        self.output.copy_follows()
    }

    /// The pending pieces, as many as fit in `slices`; returns how many.
    pub(super) fn pending_output_vectored<'a>(&'a self, slices: &mut [std::io::IoSlice<'a>]) -> usize {
        self.output.pending_vectored(slices)
    }

    /// The caller wrote `n` bytes to its transport (more than are pending
    /// is clamped); returns how many. The written prefix is given back as
    /// it grows. Unless the caller reports what its transport tells
    /// ([`transport_acknowledged`](Self::transport_acknowledged)), the
    /// bytes count as taken by the peer, which restarts the stall timer
    /// (D3).
    pub(super) fn consume_output(&mut self, n: usize, now: Now) -> usize {
        let n = self.output.consume(n);
        if n == 0 {
            return 0;
        }
        let delivered = match &mut self.delivery {
            Delivery::OnConsume => true,
            // In the transport now, not yet at the peer.
            Delivery::Reported { holds, .. } => {
                *holds = true;
                false
            }
            Delivery::GivenUp => false,
        };
        self.track_stall(delivered, now);
        n
    }

    /// What the caller's transport tells of the bytes written to it. From
    /// the first report on, only the peer's acknowledged count growing is
    /// output taken: it restarts the stall timer, which runs while output
    /// is pending or the transport holds any (D3). A kernel or a TLS
    /// session that takes one more write into its buffer is not the peer
    /// reading.
    pub(super) fn transport_acknowledged(&mut self, told: Acknowledged, now: Now) {
        let (delivered, checks) = match self.delivery {
            Delivery::OnConsume => (false, 0),
            Delivery::Reported {
                acknowledged, checks, ..
            } => (told.bytes > acknowledged, checks),
            Delivery::GivenUp => return,
        };
        self.delivery = Delivery::Reported {
            acknowledged: told.bytes,
            holds: told.holds_more,
            checks,
        };
        self.track_stall(delivered, now);
    }

    /// The one rule of the stall timer (D3): it runs while any of our
    /// output has not reached the peer (pending, or held by the
    /// transport), from when that began or the peer last took a byte
    /// (`delivered`: it just did, or was seen to since the transport was
    /// last asked).
    fn track_stall(&mut self, delivered: bool, now: Now) {
        let held = matches!(self.delivery, Delivery::Reported { holds: true, .. });
        let since = if self.output.is_empty() && !held {
            None
        } else if delivered {
            Some(now.instant)
        } else {
            self.stalled_since.or(Some(now.instant))
        };
        if since != self.stalled_since
            && let Delivery::Reported { checks, .. } = &mut self.delivery
        {
            // A timer that starts is first checked a check's time after
            // its start: a fast peer's answers cost no asking each.
            *checks = 0;
        }
        self.stalled_since = since;
    }

    /// Total bytes ever queued.
    pub(super) fn queued(&self) -> u64 {
        self.output.queued()
    }

    /// Total bytes ever taken by the peer.
    pub(super) fn written(&self) -> u64 {
        self.output.written()
    }

    /// The stall timer's next moment, if it runs (D3): when it runs out,
    /// or sooner, when the transport is to be asked again what the peer
    /// took (see [`STALL_CHECKS`]).
    pub(super) fn stall_deadline(&self, timeout: Duration) -> Option<Instant> {
        let since = self.stalled_since?;
        let end = since.checked_add(timeout);
        let Delivery::Reported { checks, .. } = self.delivery else {
            return end;
        };
        let check = (timeout / STALL_CHECKS)
            .checked_mul(checks.saturating_add(1))
            .and_then(|after| since.checked_add(after));
        end.map(|end| check.map_or(end, |check| end.min(check)))
    }

    /// The stall timer's moment has come (the caller asked its transport
    /// first, if it can): whether the peer has now left our output
    /// untaken for `timeout`. A check the caller did not answer passes,
    /// with nothing taken.
    pub(super) fn stall_timed_out(&mut self, timeout: Duration, now: Now) -> bool {
        let Some(since) = self.stalled_since else {
            return false;
        };
        if due(since.checked_add(timeout), now) {
            return true;
        }
        if let Delivery::Reported { checks, .. } = &mut self.delivery {
            // Every check up to now has passed.
            let interval = (timeout / STALL_CHECKS).as_nanos().max(1);
            let passed = now.instant.saturating_duration_since(since).as_nanos() / interval;
            *checks = u32::try_from(passed).unwrap_or(u32::MAX);
        }
        false
    }

    // -- events and ids ----------------------------------------------------

    pub(super) fn push_event(&mut self, event: E) {
        self.events.push_back(event);
    }

    pub(super) fn pop_event(&mut self) -> Option<E> {
        self.events.pop_front()
    }

    /// Whether events wait to be taken.
    pub(super) fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// The next exchange number.
    pub(super) fn fresh_id(&mut self) -> RequestId {
        let id = RequestId(self.next_id);
        self.next_id += 1;
        id
    }

    // -- memory ------------------------------------------------------------

    /// Gives back buffer space no longer needed. With nothing received,
    /// nothing to send and no event waiting, a connection keeps no buffer
    /// and no queue at all: thousands of idle keep-alive connections cost
    /// their fixed state only. The client
    /// does this after every call; the server once it has been quiet for
    /// [`KEEP_BUFFERS`].
    pub(super) fn release_buffers(&mut self) {
        if self.events.is_empty() {
            self.events = VecDeque::new();
        }
        if self.decoder.buffered() == 0 && self.output.is_empty() {
            self.decoder.release(true);
            self.output.discard();
            return;
        }
        self.trim_buffers();
    }

    /// Gives back what is beyond [`RETAINED_CAPACITY`] in an empty buffer,
    /// but keeps the rest for the next message (the server, between the
    /// requests of a busy connection; see [`KEEP_BUFFERS`]).
    pub(super) fn trim_buffers(&mut self) {
        self.decoder.release(false);
        self.output.release();
    }

    /// Whether the event queue, or both buffers, are empty and still hold
    /// memory: what [`release_buffers`](Self::release_buffers) would give
    /// back.
    pub(super) fn holds_spare_buffers(&self) -> bool {
        (self.events.is_empty() && self.events.capacity() > 0)
            || (self.decoder.buffered() == 0 && self.output.is_empty() && self.buffered_capacity() > 0)
    }

    /// Bytes of memory the input and output buffers hold (capacity, not
    /// content).
    pub(super) fn buffered_capacity(&self) -> usize {
        self.decoder.capacity() + self.output.capacity()
    }
}
