//! What both roles share: the input buffer and the framing scanner, the
//! output buffer, the event queue, the exchange numbers, the timers' inputs
//! and the connection's lifecycle. The roles own a `Core` and change it
//! only through the methods here, so every field has one writer.

use std::collections::VecDeque;
use std::ops::Range;
use std::time::{Duration, Instant};

use super::event::RoleEvent;
use super::table::{Exchange, ExchangeState, Input, Role, TransitionError};
use super::{Limits, Now, PeerError, RequestId, UsageError};
use crate::message::codec::DecodeError;
use crate::message::framing::{self, ContentRun, Fault, Scan, Scanner, leading_whitespace};
use crate::message::{
    ContentDecoder, ContentEncoder, EncodeError, Encoding, MessageLimits, STREAMED_TAIL, ValueError,
    named_encoding,
};

/// Capacity an empty input or output buffer may keep for the next message;
/// more is given back (see [`Buffer::release`]).
const RETAINED_CAPACITY: usize = 16 * 1024;

/// What an output buffer starts with after idle: a small response's head
/// and content, and within the allocator's per-thread cache.
const FRESH_OUTPUT: usize = 1024;

/// How long a quiet server connection keeps its emptied buffers before
/// giving them back. A busy keep-alive peer's next request comes sooner
/// and reuses them, instead of paying an allocation and a free for each
/// buffer per request; a connection that stays quiet costs its fixed state
/// only once this has passed.
pub(super) const KEEP_BUFFERS: Duration = Duration::from_millis(10);

/// The written (or read) prefix of a buffer is given back once it is at
/// least this large and at least half the buffer: every byte is moved at
/// most once per time it is written, so compaction costs O(1) per byte.
const COMPACT_AT: usize = 64 * 1024;

/// The most decoded content one [`Scanned::Content`] piece carries (D19):
/// what a decompression bomb can make the machine hold at once.
pub(super) const PIECE_BYTES: usize = 64 * 1024;

/// Received bytes the input may hold, unread by the machine, while the
/// caller has events to take: beyond it the machine wants no more input,
/// so that a caller slow to take content pieces slows the peer instead of
/// buffering it (D19).
const READ_AHEAD: usize = 64 * 1024;

/// Output a streaming message of ours may have queued and untaken before
/// it takes more content (D19): enough to keep the socket busy, small
/// enough that memory does not grow with the content.
const CONTENT_WINDOW: usize = 128 * 1024;

/// How many times the decoded content limit its text may take on the wire
/// (D19): a `\u00XX` escape writes one byte in six. Past it, `413`.
const TEXT_PER_CONTENT_BYTE: u64 = 6;

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

/// What [`Core::frame`] found in the input.
#[derive(Debug)]
pub(super) enum Scanned {
    /// No complete message (yet), or input is no longer handled.
    Partial,
    /// A complete message; its bytes are [`Core::message`].
    Message(Framed),
    /// The stream ended after the last complete message; `cut_short` when
    /// it ended inside one (D1). Input is now stopped.
    End {
        /// A message had begun.
        cut_short: bool,
    },
    /// A byte that cannot be framed (D1); `first` when it stands where a
    /// message must start. Input is now stopped.
    Invalid {
        /// The byte, if the scanner pointed at one.
        byte: Option<u8>,
        /// What is wrong with it.
        fault: Fault,
    },
    /// The message passed the size limit (D3). Input is now stopped.
    TooLarge,
    /// The message, not ended yet, opened a level past the depth limit
    /// (D3). The rest of it is read and dropped, and the connection goes
    /// on with the next message; if it cannot end cleanly,
    /// [`Scanned::Abandoned`] follows.
    TooDeep,
    /// The message refused by [`Scanned::TooDeep`] cannot end cleanly: a
    /// framing fault, the size limit or the end of stream inside it. It
    /// had its one answer; the stream cannot be resynchronised (D1), so
    /// nothing more is answered. Input is now stopped.
    Abandoned,
    /// The content of the message being received starts streaming, and the
    /// encoding was named before it (D19): `envelope` is the message's
    /// bytes up to the content string, closed as if the content were
    /// `""`. Its pieces follow as [`Scanned::Content`].
    ContentHead {
        /// `{` … `"content":""}}`, as a whole message.
        envelope: Vec<u8>,
    },
    /// The next piece of the decoded content of the message being received
    /// (D19); never empty.
    Content(Vec<u8>),
    /// The content of the message being received passed the content limit
    /// (D19). Input is now stopped.
    ContentTooLarge {
        /// The limit, in decoded bytes.
        limit: usize,
    },
}

/// How the streamed content of a framed message went (D19).
#[derive(Debug)]
pub(super) enum ContentOutcome {
    /// Decoded whole; every piece went out as [`Scanned::Content`].
    Decoded,
    /// It did not decode: the rest was read and dropped. The message is
    /// refused at its end, in D5's order (level 4).
    Corrupt {
        /// The encoding it claimed.
        encoding: Encoding,
        /// What was wrong.
        why: ValueError,
    },
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

/// The content of the message being received, arriving in runs (D19).
#[derive(Debug)]
struct Inbound {
    /// `None` once the content failed to decode.
    decoder: Option<ContentDecoder>,
    encoding: Encoding,
    /// The content came before its encoding (D19): nothing can be decoded
    /// until the message names one, so its text is held here, and the
    /// message is bounded by the message limit as if it were held whole
    /// (`413`, D3): only content written last streams past it.
    unnamed: Option<Vec<u8>>,
    /// That held text passed the message limit.
    past_message_limit: bool,
    /// The closing quote has been seen; the decoder is being finished.
    ended: bool,
    /// The decoder is finished: every piece is out.
    finished: bool,
    /// Content text taken so far, and how much it may be (D19).
    text_bytes: u64,
    max_text_bytes: u64,
    /// Why the content failed to decode, once it has.
    fault: Option<ValueError>,
    /// The content passed the limit (D19).
    too_large: bool,
    /// Decoded bytes not yet handed out.
    ready: Vec<u8>,
}

impl Inbound {
    /// Content in `encoding`, within `limit` decoded bytes.
    fn new(encoding: Encoding, limit: usize) -> Inbound {
        Inbound {
            decoder: Some(ContentDecoder::new(encoding, limit)),
            encoding,
            unnamed: None,
            past_message_limit: false,
            ended: false,
            finished: false,
            text_bytes: 0,
            // Past it, `413` without decoding on.
            max_text_bytes: (limit as u64)
                .saturating_mul(TEXT_PER_CONTENT_BYTE)
                .saturating_add(PIECE_BYTES as u64),
            fault: None,
            too_large: false,
            ready: Vec::new(),
        }
    }

    /// Takes in `text`, the next of the content's text (`last`: the
    /// closing quote follows it): decoded at once, up to a piece's worth,
    /// the rest kept by the decoder; past the bound on text, too large.
    fn feed(&mut self, text: &[u8], last: bool) {
        self.text_bytes += text.len() as u64;
        if self.text_bytes > self.max_text_bytes {
            self.too_large = true;
        } else if let Some(decoder) = &mut self.decoder {
            let result = decoder.decode(text, &mut self.ready, PIECE_BYTES);
            self.settle(result.map(|()| false));
        }
        self.ended = last;
    }

    /// How the content went, at the message's end.
    fn outcome(self) -> ContentOutcome {
        match self.fault {
            Some(why) => ContentOutcome::Corrupt {
                encoding: self.encoding,
                why,
            },
            None => ContentOutcome::Decoded,
        }
    }

    /// Takes in what a call of the decoder said: `Ok(true)` when it is
    /// finished.
    fn settle(&mut self, result: Result<bool, DecodeError>) {
        match result {
            Ok(finished) => self.finished |= finished,
            Err(DecodeError::TooLarge { .. }) => self.too_large = true,
            Err(DecodeError::Corrupt(why)) => {
                // The rest of the content is read and dropped; the message
                // is refused at its end (D5 level 4).
                self.fault = Some(why);
                self.decoder = None;
                self.ready.clear();
            }
        }
    }
}

/// What becomes of the bytes of the message being received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Intake {
    /// They are framed and handed to the role.
    Framing,
    /// The message was refused before its end (too deep, D3) and answered
    /// then: the rest of it is read and dropped, and nothing in it is
    /// answered again (D1, D5: one answer per message).
    Discarding,
}

/// What the machine knows of how much of its output reached the peer, for
/// the stall timer (D3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// The caller never said what its transport holds: bytes it consumes
    /// count as taken by the peer.
    OnConsume,
    /// The caller says what its transport holds: `unsent` of the bytes it
    /// consumed have not been acknowledged by the peer.
    Reported {
        /// Bytes consumed and not yet acknowledged.
        unsent: u64,
    },
    /// The peer stalled (D3): the output was dropped, and nothing more is
    /// timed.
    GivenUp,
}

/// A message that ended while the content it named the encoding of is
/// decoded: its bytes, copied out of the input, wait for the last piece.
#[derive(Debug)]
struct Held {
    bytes: Vec<u8>,
    frame: framing::Frame,
}

/// Where a complete message sits in the input buffer, until the next call
/// that changes it.
#[derive(Debug)]
pub(super) struct Framed {
    range: Range<usize>,
    /// The message's bytes when they are no longer in the input (a
    /// [`Held`] message).
    held: Option<Vec<u8>>,
    /// What the scanner measured on the way (depth, lone surrogates), for
    /// the parser (D3, D4).
    pub(super) frame: framing::Frame,
    /// How its content went, when it was streamed (D19): the message's
    /// own `body.content` then reads `""`.
    pub(super) content: Option<ContentOutcome>,
}

/// The deadlines of one moment; `None` for a timer that does not run.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Timers {
    /// The peer takes none of our output (D3).
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

/// Bytes with a consumed prefix: `bytes[start..]` is live.
#[derive(Debug, Default)]
struct Buffer {
    bytes: Vec<u8>,
    start: usize,
}

impl Buffer {
    fn live(&self) -> &[u8] {
        &self.bytes[self.start..]
    }

    fn len(&self) -> usize {
        self.bytes.len() - self.start
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Gives back the consumed prefix when nothing is live, or when it is
    /// large and at least half the buffer (amortised O(1) per byte); a
    /// buffer left far larger than its content is shrunk.
    fn compact(&mut self) {
        if self.is_empty() {
            self.bytes.clear();
            self.start = 0;
        } else if self.start >= COMPACT_AT && self.start >= self.bytes.len() / 2 {
            self.bytes.drain(..self.start);
            self.start = 0;
            let keep = (2 * self.bytes.len()).max(RETAINED_CAPACITY);
            if self.bytes.capacity() > 2 * keep {
                self.bytes.shrink_to(keep);
            }
        }
    }

    /// Once empty, keeps at most [`RETAINED_CAPACITY`], so that an idle
    /// connection costs little memory whatever it carried before.
    fn release(&mut self) {
        if self.is_empty() {
            self.bytes.clear();
            self.start = 0;
            if self.bytes.capacity() > RETAINED_CAPACITY {
                self.bytes = Vec::new();
            }
        }
    }

    /// Drops everything, memory included.
    fn discard(&mut self) {
        self.bytes = Vec::new();
        self.start = 0;
    }
}

/// The state both roles share; see the module documentation.
#[derive(Debug)]
pub(super) struct Core<E> {
    lifecycle: Lifecycle,

    /// Received bytes not yet framed.
    input: Buffer,
    scanner: Scanner,
    /// When the first byte of the message being received was scanned.
    message_started: Option<Instant>,
    /// Up to how many decoded bytes a message's streamed content may
    /// carry (D19).
    max_content_bytes: usize,
    /// The limits on a message (D3), to read the encoding of content that
    /// came before it.
    message_limits: MessageLimits,
    /// The content of the message being received, when it streams.
    inbound: Option<Inbound>,
    /// A message that ended while its content is decoded (D19).
    held: Option<Held>,
    /// Whether the message being received is still read for the role.
    intake: Intake,
    /// When the last byte arrived (D19: the longest gap).
    last_input: Instant,
    /// Bytes ever received, and the count when the message being received
    /// began (D19: its average rate).
    received: u64,
    message_base: u64,
    /// When the connection last became idle: the end of the last message,
    /// or the moment the peer took the last response (D3).
    idle_since: Instant,

    /// Bytes queued for the peer.
    output: Buffer,
    /// Total bytes ever queued / ever taken by the peer, to know which
    /// responses it has taken (D3).
    queued: u64,
    written: u64,
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
        let scanner =
            Scanner::with_limit(limits.message.max_message_bytes).with_depth_limit(limits.message.max_depth);
        Core {
            lifecycle: Lifecycle::Open,
            input: Buffer::default(),
            scanner: if stream_content {
                scanner.with_content_runs()
            } else {
                scanner
            },
            message_started: None,
            max_content_bytes: limits.max_content_bytes,
            message_limits: limits.message,
            inbound: None,
            held: None,
            intake: Intake::Framing,
            last_input: now.instant,
            received: 0,
            message_base: 0,
            idle_since: now.instant,
            output: Buffer::default(),
            queued: 0,
            written: 0,
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
        self.input.discard();
        self.message_started = None;
        self.inbound = None;
        self.held = None;
        self.intake = Intake::Framing;
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
    pub(super) fn receive(&mut self, data: &[u8], now: Now) -> bool {
        if data.is_empty() || self.lifecycle != Lifecycle::Open {
            return false;
        }
        self.input.compact();
        self.input.bytes.extend_from_slice(data);
        self.received += data.len() as u64;
        self.last_input = now.instant;
        true
    }

    /// Whether the caller should hold off reading: events wait to be taken
    /// and the input already holds more than [`READ_AHEAD`] unread bytes
    /// (D19: a slow sink slows the peer, not memory).
    pub(super) fn backlogged(&self) -> bool {
        self.has_events() && self.input.len() >= READ_AHEAD
    }

    /// The deadline of a streamed message (D19): no gap longer than
    /// `content_gap_timeout`, and after that long from its start, an
    /// average of at least `min_content_rate`. `None` unless the message
    /// being received streams its content.
    pub(super) fn streamed_deadline(&self, limits: &Limits) -> Option<Instant> {
        self.inbound.as_ref()?;
        let started = self.message_started?;
        let gap = self.last_input.checked_add(limits.content_gap_timeout);
        let bytes = self.received.saturating_sub(self.message_base);
        // The moment the average falls below the rate: bytes / rate after
        // the start, and never before the first gap's length.
        let rate = limits.min_content_rate.max(1);
        let earned = Duration::from_secs_f64(bytes as f64 / rate as f64);
        let slow = started.checked_add(earned.max(limits.content_gap_timeout));
        match (gap, slow) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the message being received streams its content (D19).
    pub(super) fn is_streaming(&self) -> bool {
        self.inbound.is_some()
    }

    /// The peer ended its stream.
    pub(super) fn receive_eof(&mut self) {
        self.lifecycle = self.lifecycle.max(Lifecycle::PeerEnded);
    }

    /// Frames the next message, if the input holds one (D1); bookkeeping
    /// for the message timer and the idle timer on the way (D3).
    pub(super) fn frame(&mut self, now: Now) -> Scanned {
        loop {
            if !self.reads_input() {
                return Scanned::Partial;
            }
            if let Some(scanned) = self.next_piece() {
                return scanned;
            }
            if let Some(held) = self.held.take() {
                // Its content is all out: the message follows.
                return Scanned::Message(Framed {
                    range: 0..0,
                    held: Some(held.bytes),
                    frame: held.frame,
                    content: self.inbound.take().map(Inbound::outcome),
                });
            }
            if self.input.is_empty() && !self.scanner.in_message() && self.lifecycle != Lifecycle::PeerEnded {
                // Between messages with nothing to scan: the roles ask at
                // every turn.
                return Scanned::Partial;
            }
            let found = self.scanner.scan(self.input.live());
            if self.intake == Intake::Discarding {
                match found {
                    Scan::Content(run) => {
                        let start = self.input.start;
                        self.input.bytes.drain(start + run.start()..start + run.end());
                        continue;
                    }
                    Scan::Complete(frame) => {
                        // The end of the message refused before it ended.
                        self.intake = Intake::Framing;
                        self.input.start += frame.end();
                        self.message_started = None;
                        self.idle_since = now.instant;
                        continue;
                    }
                    // D1: its end is in doubt, or never comes; it had its
                    // one answer.
                    Scan::Error { .. } | Scan::TooLarge { .. } => return self.abandon(),
                    Scan::Partial if self.lifecycle == Lifecycle::PeerEnded => return self.abandon(),
                    // Reported once per message; never answered twice.
                    Scan::TooDeep { .. } => continue,
                    Scan::Partial => {}
                }
            }
            match found {
                Scan::Content(run) => {
                    // The envelope is still in the input: taken before
                    // the run is.
                    let envelope = self.content_envelope(&run);
                    self.take_run(run, now);
                    if let Some(envelope) = envelope {
                        return Scanned::ContentHead { envelope };
                    }
                }
                Scan::TooDeep { .. } => {
                    self.message_begins(now);
                    self.intake = Intake::Discarding;
                    self.inbound = None;
                    return Scanned::TooDeep;
                }
                found => return self.framed(found, now),
            }
        }
    }

    /// The message refused before its end cannot end cleanly: input stops,
    /// with nothing more to answer (D1).
    fn abandon(&mut self) -> Scanned {
        self.stop_input();
        Scanned::Abandoned
    }

    /// Whether the message being received was refused before its end and
    /// is being read to its end and dropped.
    pub(super) fn is_discarding(&self) -> bool {
        self.intake == Intake::Discarding
    }

    /// The message being received began (its first byte was scanned): the
    /// message timer starts, and its average rate is counted from here
    /// (D3, D19).
    fn message_begins(&mut self, now: Now) {
        if self.message_started.is_none() {
            self.message_started = Some(now.instant);
            self.message_base = self.received - self.input.len() as u64;
        }
    }

    /// At the first run of a content whose encoding was named before it
    /// (D19: the order streaming senders use), the message's bytes up to
    /// the content string closed as if the content were `""`: the whole
    /// envelope, when the sender wrote `body` last and `content` last in
    /// it. The content string is at level 2, in `body`, so a quote and two
    /// braces close it. Nothing of the message before the run has left the
    /// input yet: only runs are taken out of it, and the scanner drops
    /// nothing after the message's `{`.
    fn content_envelope(&self, run: &ContentRun) -> Option<Vec<u8>> {
        if !run.is_first() || run.encoding().is_none() {
            return None;
        }
        let start = self.scanner.message_start()?;
        let before = self.input.live().get(start..run.start())?;
        let mut envelope = Vec::with_capacity(before.len() + 3);
        envelope.extend_from_slice(before);
        envelope.extend_from_slice(b"\"}}");
        Some(envelope)
    }

    /// The unread input, when the next message starts at its front and
    /// nothing of it has been scanned or taken: what a role's one-pass
    /// reader may read whole (`message/quick.rs`), reporting it with
    /// [`message_read`](Self::message_read). `None`: frame it with
    /// [`frame`](Self::frame).
    pub(super) fn fresh_input(&self) -> Option<&[u8]> {
        let fresh = !self.input.is_empty()
            && self.reads_input()
            && self.inbound.is_none()
            && self.held.is_none()
            && self.intake == Intake::Framing
            && self.scanner.at_boundary();
        fresh.then(|| self.input.live())
    }

    /// The first `len` bytes of [`fresh_input`](Self::fresh_input) were
    /// one whole message, read: the bookkeeping of a framed message. The
    /// whitespace after it goes too, as the scanner would drop it (D1).
    pub(super) fn message_read(&mut self, len: usize, now: Now) {
        let after = self.input.live().get(len..).unwrap_or_default();
        self.input.start += len + leading_whitespace(after);
        self.scanner.message_read_elsewhere();
        self.message_started = None;
        self.idle_since = now.instant;
    }

    /// What a scan found, other than content.
    fn framed(&mut self, found: Scan, now: Now) -> Scanned {
        match found {
            Scan::Partial => {
                let idle = self.scanner.idle_prefix();
                self.scanner.drop_prefix(idle);
                self.input.start += idle;
                if self.scanner.in_message() {
                    self.message_begins(now);
                } else {
                    self.message_started = None;
                }
                if self.lifecycle == Lifecycle::PeerEnded {
                    let cut_short = self.scanner.in_message();
                    self.stop_input();
                    return Scanned::End { cut_short };
                }
                Scanned::Partial
            }
            Scan::Complete(frame) => {
                let (start, end) = (frame.start(), frame.end());
                let base = self.input.start;
                let range = base + start..base + end;
                // The bytes stay where they are until the next call that
                // receives or compacts: the role reads them first.
                self.input.start += end;
                self.message_started = None;
                self.idle_since = now.instant;
                if let Some(refused) = self.name_content(range.clone(), frame) {
                    return refused;
                }
                if self.held.is_some() {
                    // Its pieces come first; the call after them returns
                    // the held message, so this recurses once.
                    return self.frame(now);
                }
                Scanned::Message(Framed {
                    range,
                    held: None,
                    frame,
                    content: self.inbound.take().map(Inbound::outcome),
                })
            }
            Scan::Error { at, fault } => {
                let byte = self.input.live().get(at).copied();
                self.stop_input();
                Scanned::Invalid { byte, fault }
            }
            Scan::TooLarge { .. } => {
                self.stop_input();
                Scanned::TooLarge
            }
            // Taken by `frame` before it gets here.
            Scan::Content(_) | Scan::TooDeep { .. } => Scanned::Partial,
        }
    }

    /// The message at `range` ended. If its content came before its
    /// encoding (D19), the held text is decoded in the encoding the message
    /// names, and the message is [`Held`] until the last piece; `Some` when
    /// the message, text included, is past the message limit (D3).
    fn name_content(&mut self, range: Range<usize>, frame: framing::Frame) -> Option<Scanned> {
        let inbound = self.inbound.as_mut()?;
        let text = inbound.unnamed.take()?;
        let bytes = &self.input.bytes[range];
        if text.len() + bytes.len() > self.message_limits.max_message_bytes {
            self.stop_input();
            return Some(Scanned::TooLarge);
        }
        // Read as the role will read it; a message that does not read, or
        // names no encoding it knows, is refused on its own account.
        let named = named_encoding(bytes, &frame, &self.message_limits).unwrap_or(Encoding::Identity);
        self.held = Some(Held {
            bytes: bytes.to_vec(),
            frame,
        });
        *inbound = Inbound::new(named, self.max_content_bytes);
        inbound.feed(&text, true);
        None
    }

    /// Takes a run of content text out of the input into the decoder
    /// (D19); the scan goes on where the run began.
    fn take_run(&mut self, run: ContentRun, now: Now) {
        if run.is_first() {
            self.message_begins(now);
            let mut inbound = Inbound::new(
                run.encoding().unwrap_or(Encoding::Identity),
                self.max_content_bytes,
            );
            if run.encoding().is_none() {
                inbound.unnamed = Some(Vec::new());
            }
            self.inbound = Some(inbound);
        }
        let range = self.input.start + run.start()..self.input.start + run.end();
        if let Some(inbound) = &mut self.inbound {
            let text = &self.input.bytes[range.clone()];
            let limit = self.message_limits.max_message_bytes;
            match &mut inbound.unnamed {
                Some(held) if held.len() + text.len() <= limit => held.extend_from_slice(text),
                Some(_) => {
                    inbound.unnamed = None;
                    inbound.past_message_limit = true;
                }
                None => inbound.feed(text, run.is_last()),
            }
        }
        self.input.bytes.drain(range);
    }

    /// The next thing the streamed content has to say, if any: a decoded
    /// piece, or the limit passed (D19).
    fn next_piece(&mut self) -> Option<Scanned> {
        let inbound = self.inbound.as_mut()?;
        if inbound.past_message_limit {
            self.stop_input();
            return Some(Scanned::TooLarge);
        }
        if inbound.unnamed.is_some() {
            // Nothing is decoded until the encoding is named.
            return None;
        }
        loop {
            if inbound.too_large {
                let limit = self.max_content_bytes;
                self.stop_input();
                return Some(Scanned::ContentTooLarge { limit });
            }
            if !inbound.ready.is_empty() {
                return Some(Scanned::Content(std::mem::take(&mut inbound.ready)));
            }
            let Some(decoder) = &mut inbound.decoder else {
                return None;
            };
            if decoder.has_pending() {
                let result = decoder.decode(&[], &mut inbound.ready, PIECE_BYTES);
                inbound.settle(result.map(|()| false));
            } else if inbound.ended && !inbound.finished {
                let result = decoder.finish(&mut inbound.ready, PIECE_BYTES);
                inbound.settle(result);
            } else {
                return None;
            }
        }
    }

    /// The bytes of a message [`frame`](Self::frame) just found.
    pub(super) fn message<'a>(&'a self, framed: &'a Framed) -> &'a [u8] {
        match &framed.held {
            Some(bytes) => bytes,
            None => self.input.bytes.get(framed.range.clone()).unwrap_or_default(),
        }
    }

    /// Whether part of a message has been received (scanned or not): the
    /// input holds more than whitespace between messages.
    pub(super) fn holds_input(&self) -> bool {
        let live = self.input.live();
        self.scanner.in_message() || leading_whitespace(live) < live.len()
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
            return self.queued;
        }
        if self.output.is_empty() {
            self.output.compact();
        }
        if self.output.bytes.capacity() == 0 {
            // A connection coming back from idle holds no buffer: one
            // allocation fits a typical response, instead of doubling up
            // to it from a few bytes.
            self.output.bytes.reserve(FRESH_OUTPUT);
        }
        let before = self.output.bytes.len();
        write(&mut self.output.bytes);
        let added = self.output.bytes.len() - before;
        self.queued += added as u64;
        if added > 0 {
            // The stall timer runs from the moment output is pending.
            self.track_stall(false, now);
        }
        self.queued
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
        self.output.live()
    }

    /// The caller wrote `n` bytes to its transport (more than are pending
    /// is clamped); returns how many. The written prefix is given back as
    /// it grows. Unless the caller reports what its transport holds
    /// ([`transport_holds`](Self::transport_holds)), the bytes count as
    /// taken by the peer, which restarts the stall timer (D3).
    pub(super) fn consume_output(&mut self, n: usize, now: Now) -> usize {
        let n = n.min(self.output.len());
        if n == 0 {
            return 0;
        }
        self.output.start += n;
        self.written += n as u64;
        self.output.compact();
        let delivered = match &mut self.delivery {
            Delivery::OnConsume => true,
            // In the transport now, not yet at the peer.
            Delivery::Reported { unsent } => {
                *unsent += n as u64;
                false
            }
            Delivery::GivenUp => false,
        };
        self.track_stall(delivered, now);
        n
    }

    /// The caller's transport holds `unsent` of the bytes consumed so far,
    /// not yet acknowledged by the peer (more than were consumed is
    /// clamped). From the first call on, only bytes acknowledged count as
    /// taken: the stall timer restarts when `unsent` falls, and runs while
    /// output is pending or `unsent` is above zero (D3). A kernel that
    /// takes one more write into a growing send buffer is not the peer
    /// reading.
    pub(super) fn transport_holds(&mut self, unsent: usize, now: Now) {
        let unsent = (unsent as u64).min(self.written);
        let (unsent, delivered) = match self.delivery {
            Delivery::OnConsume => (unsent, false),
            // What reached the peer stays reached: the count only falls,
            // except by what is consumed.
            Delivery::Reported { unsent: before } => (unsent.min(before), unsent < before),
            Delivery::GivenUp => return,
        };
        self.delivery = Delivery::Reported { unsent };
        self.track_stall(delivered, now);
    }

    /// The one rule of the stall timer (D3): it runs while any of our
    /// output has not reached the peer (pending, or held by the
    /// transport), from when that began or the peer last took a byte
    /// (`delivered`: it just did).
    fn track_stall(&mut self, delivered: bool, now: Now) {
        let unsent = match self.delivery {
            Delivery::Reported { unsent } => unsent,
            Delivery::OnConsume | Delivery::GivenUp => 0,
        };
        self.stalled_since = if self.output.is_empty() && unsent == 0 {
            None
        } else if delivered {
            Some(now.instant)
        } else {
            self.stalled_since.or(Some(now.instant))
        };
    }

    /// Total bytes ever queued.
    pub(super) fn queued(&self) -> u64 {
        self.queued
    }

    /// Total bytes ever taken by the peer.
    pub(super) fn written(&self) -> u64 {
        self.written
    }

    /// When the stall timer runs out, if it runs (D3).
    pub(super) fn stall_deadline(&self, timeout: Duration) -> Option<Instant> {
        deadline(self.stalled_since, timeout)
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
        if self.input.is_empty() && self.output.is_empty() {
            self.input.discard();
            self.output.discard();
            return;
        }
        self.trim_buffers();
    }

    /// Gives back what is beyond [`RETAINED_CAPACITY`] in an empty buffer,
    /// but keeps the rest for the next message (the server, between the
    /// requests of a busy connection; see [`KEEP_BUFFERS`]).
    pub(super) fn trim_buffers(&mut self) {
        self.input.release();
        self.output.release();
    }

    /// Whether the event queue, or both buffers, are empty and still hold
    /// memory: what [`release_buffers`](Self::release_buffers) would give
    /// back.
    pub(super) fn holds_spare_buffers(&self) -> bool {
        (self.events.is_empty() && self.events.capacity() > 0)
            || (self.input.is_empty() && self.output.is_empty() && self.buffered_capacity() > 0)
    }

    /// Bytes of memory the input and output buffers hold (capacity, not
    /// content).
    pub(super) fn buffered_capacity(&self) -> usize {
        self.input.bytes.capacity() + self.output.bytes.capacity()
    }
}
