//! The client's drive step: every decision both clients share, once, and
//! the only calls into the machine on the client side. See [`Driver`].

use std::io;
use std::time::{Duration, Instant};

use super::outstanding::{Deadlines, Outstanding, Queued};
use super::{Answer, ClientError, ClientOptions, Direction, Timeout, Tracer};
use crate::io_adapters::transport::{IoMode, Transport, is_reset, retime, socket_timeout, would_block};
use crate::machine::table::ExchangeState;
use crate::machine::{ClientConnection, ClientEvent, Now, RequestId, UsageError};
use crate::message::Request;

/// The most content read from an upload's source at once (D19).
pub(crate) const READ_PIECE: usize = 64 * 1024;

/// How much one read of the server's stream takes: a large download
/// (D19) then costs a read per 64 KiB, not per 16.
pub(super) const READ_CHUNK: usize = 64 * 1024;

/// Blocking transports: the longest a write may block before the step
/// reads what the server sent meanwhile, and the longest that read blocks
/// before the step writes again.
const WRITE_SLICE: Duration = Duration::from_millis(20);

/// Where a call's streamed content comes from and goes to (D19): the
/// upload's reader, the download's writer. Without them, content is in
/// the request's body and the answer's.
#[derive(Default)]
pub struct Streams<'a> {
    source: Source<'a>,
    sink: Sink<'a>,
}

/// Where an upload's content comes from.
#[derive(Default)]
enum Source<'a> {
    /// The request's body: nothing streams.
    #[default]
    Body,
    /// Read in the step, as the server takes it.
    Reader(&'a mut dyn io::Read),
    /// The async client's: a buffer it fills between steps
    /// ([`Step::Fill`]).
    #[cfg(feature = "tokio")]
    Staged(&'a mut Staged),
}

/// Where a download's content goes.
#[derive(Default)]
enum Sink<'a> {
    /// The answer's body.
    #[default]
    Answer,
    /// Written in the step, as it comes.
    Writer(&'a mut dyn io::Write),
    /// The async client's: a buffer it empties between steps
    /// ([`Step::Drain`]).
    #[cfg(feature = "tokio")]
    Staged(&'a mut Vec<u8>),
}

/// A piece read from an upload's source.
enum Piece {
    /// Bytes, at the front of the buffer.
    Bytes(usize),
    /// The source has ended.
    Ended,
    /// A staged source ran dry: [`Step::Fill`].
    #[cfg(feature = "tokio")]
    Dry,
    Failed(io::Error),
}

impl Source<'_> {
    fn read(&mut self, buffer: &mut [u8]) -> Piece {
        let reader = match self {
            Source::Body => return Piece::Ended,
            Source::Reader(reader) => reader,
            #[cfg(feature = "tokio")]
            Source::Staged(staged) => return staged.take(buffer),
        };
        loop {
            match reader.read(buffer) {
                Ok(0) => return Piece::Ended,
                Ok(n) => return Piece::Bytes(n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Piece::Failed(e),
            }
        }
    }
}

impl Sink<'_> {
    /// Whether content goes here rather than into the answer.
    fn streams(&self) -> bool {
        !matches!(self, Sink::Answer)
    }

    /// Takes `data`; `Some(step)` when the runtime must act before the
    /// step goes on.
    fn write(&mut self, data: &[u8]) -> io::Result<Option<Step>> {
        match self {
            Sink::Answer => Ok(None),
            Sink::Writer(writer) => writer.write_all(data).map(|()| None),
            #[cfg(feature = "tokio")]
            Sink::Staged(piece) => {
                piece.extend_from_slice(data);
                Ok(Some(Step::Drain))
            }
        }
    }
}

impl<'a> Streams<'a> {
    /// Content from `source` (an upload's, [`Driver::begin_upload`]) and
    /// into `sink` (a download's), each read and written in the step as
    /// the connection moves it; without one, content is in the request's
    /// body or the answer's.
    pub fn new(source: Option<&'a mut dyn io::Read>, sink: Option<&'a mut dyn io::Write>) -> Self {
        Streams {
            source: source.map_or(Source::Body, Source::Reader),
            sink: sink.map_or(Sink::Answer, Sink::Writer),
        }
    }

    /// Streams whose sink and source the caller moves between steps.
    #[cfg(feature = "tokio")]
    pub(crate) fn staged(source: Option<&'a mut Staged>, sink: Option<&'a mut Vec<u8>>) -> Self {
        Streams {
            source: source.map_or(Source::Body, Source::Staged),
            sink: sink.map_or(Sink::Answer, Sink::Staged),
        }
    }
}

/// An upload's source as the async client stages it: what it read from
/// the real source and the step has not taken yet, and what the real
/// source said last.
#[cfg(feature = "tokio")]
#[derive(Debug, Default)]
pub(crate) struct Staged {
    bytes: Vec<u8>,
    taken: usize,
    source: StagedSource,
}

/// What the real source behind a [`Staged`] buffer said last.
#[cfg(feature = "tokio")]
#[derive(Debug, Default)]
enum StagedSource {
    /// More may come: an empty buffer is [`Step::Fill`].
    #[default]
    Open,
    /// It ended: an empty buffer is the end of the content.
    Ended,
    /// It failed: the step's next read meets this error.
    Failed(io::Error),
}

#[cfg(feature = "tokio")]
impl Staged {
    /// The buffer to fill, emptied, `len` bytes long.
    pub(crate) fn fill_buffer(&mut self, len: usize) -> &mut [u8] {
        self.bytes.clear();
        self.bytes.resize(len, 0);
        self.taken = 0;
        &mut self.bytes
    }

    /// What the real source gave into [`fill_buffer`](Self::fill_buffer)'s buffer:
    /// `n` bytes, `Ok(0)` its end, or an error.
    pub(crate) fn filled(&mut self, read: io::Result<usize>) {
        match read {
            Ok(0) => {
                self.bytes.clear();
                self.source = StagedSource::Ended;
            }
            Ok(n) => self.bytes.truncate(n),
            Err(e) => {
                self.bytes.clear();
                self.source = StagedSource::Failed(e);
            }
        }
    }

    fn take(&mut self, buffer: &mut [u8]) -> Piece {
        if self.taken < self.bytes.len() {
            let n = buffer.len().min(self.bytes.len() - self.taken);
            buffer[..n].copy_from_slice(&self.bytes[self.taken..self.taken + n]);
            self.taken += n;
            return Piece::Bytes(n);
        }
        match std::mem::take(&mut self.source) {
            StagedSource::Open => Piece::Dry,
            StagedSource::Ended => {
                self.source = StagedSource::Ended;
                Piece::Ended
            }
            StagedSource::Failed(e) => Piece::Failed(e),
        }
    }
}

/// What the runtime does next in a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Nothing can move until the transport is ready or `deadline` passes;
    /// then step again. Every direction waited for answered `WouldBlock`
    /// in this step, as an edge-triggered poll requires. A blocking
    /// runtime has already waited inside the timed-out call, and steps
    /// again at once; only when it waits for neither direction does it
    /// sleep until the deadline.
    Wait {
        /// Waits for the transport to be readable.
        read: bool,
        /// Waits for the transport to be writable.
        write: bool,
        /// When to step again anyway (a clock of the call or a timer of
        /// the machine, D3, D10).
        deadline: Option<Instant>,
    },
    /// Every exchange of the call has its outcome: [`Driver::finish`].
    Done,
    /// Staged streams only (the async client's): a piece of content is in
    /// the sink buffer; write it out and empty the buffer, then step
    /// again.
    Drain,
    /// Staged streams only (the async client's): the upload's source
    /// buffer ran dry; fill it (or mark it ended), then step again.
    Fill,
}

/// One call under way ([`Driver::begin`]): its exchanges, their outcomes
/// so far, and its clocks.
pub struct Call {
    outstanding: Outstanding,
    deadlines: Deadlines,
    /// The exchange whose request content streams from the source (D19).
    upload: Option<RequestId>,
    /// Where the source's content is read into.
    piece: Vec<u8>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("upload", &self.upload)
            .finish_non_exhaustive()
    }
}

/// Where a client connection is in its life. Every move goes through
/// [`Driver::move_to`]:
///
/// ```text
///   Open ── write reset ──► Unwritable ── end of stream ──► Ended
///     └──── end of stream ──► InputEnded ── write reset ─────┘
///   any ── a failure, or a call that finds the connection over ──► Closed { why }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Bytes go both ways.
    Open,
    /// Writing met a reset: nothing more is written, but what the server
    /// sent before may still be readable, and the machine decides what it
    /// means.
    Unwritable,
    /// The server's stream ended (or was reset) and the machine knows;
    /// what is queued is still offered (the server may only have shut
    /// its sending side).
    InputEnded,
    /// Both: nothing moves any more; the call ends with what the machine
    /// made of it.
    Ended,
    /// No call may use the connection any more.
    Closed { why: CloseReason },
}

impl Phase {
    fn writes(self) -> bool {
        matches!(self, Phase::Open | Phase::InputEnded)
    }

    fn reads(self) -> bool {
        matches!(self, Phase::Open | Phase::Unwritable)
    }
}

/// Why a client connection closed, as the debug log says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CloseReason {
    /// The server ended it: its end of stream, a reset, or a response
    /// that closes the connection.
    ServerClosed,
    /// A clock of the call or the machine ran out.
    TimedOut(Timeout),
    /// A read or write failed.
    TransportFailed,
    /// The upload's source or the download's sink failed (D19).
    StreamFailed,
    /// The answer's content was larger than is held in memory: the rest
    /// of it was not read.
    ContentTooLarge,
}

impl CloseReason {
    /// Why an error that breaks the connection does.
    fn of(error: &ClientError) -> CloseReason {
        match error {
            ClientError::TimedOut(t) => CloseReason::TimedOut(*t),
            ClientError::Io(_) | ClientError::Refused { .. } | ClientError::Tls { .. } => {
                CloseReason::TransportFailed
            }
            ClientError::Source(_) | ClientError::Sink(_) => CloseReason::StreamFailed,
            ClientError::ContentTooLarge { .. } => CloseReason::ContentTooLarge,
            _ => CloseReason::ServerClosed,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            CloseReason::ServerClosed => "the server closed it",
            CloseReason::TimedOut(Timeout::Connect) => "timed out connecting",
            CloseReason::TimedOut(Timeout::Read) => "read timeout",
            CloseReason::TimedOut(Timeout::Exchange) => "exchange timeout",
            CloseReason::TimedOut(Timeout::Message) => "message timeout",
            CloseReason::TimedOut(Timeout::Call) => "call deadline",
            CloseReason::TransportFailed => "transport failed",
            CloseReason::StreamFailed => "upload source or download sink failed",
            CloseReason::ContentTooLarge => "content too large to hold",
        }
    }
}

/// One client connection: the drive step both clients share.
///
/// A `Driver` owns one connection's machine, the call's clocks and where
/// the connection is in its life. It reads the time through
/// [`ClientOptions::clock`], so a whole client connection can run on
/// simulated time. A call queues its requests ([`begin`](Self::begin),
/// [`begin_upload`](Self::begin_upload)), then [`step`](Self::step)s
/// until [`Step::Done`], performing the waits the step asks for, and
/// collects the outcomes ([`finish`](Self::finish)): one per request, in
/// order. The blocking and tokio clients only perform what it says.
///
/// ```text
///   begin ─► step ─► Wait { read, write, deadline } ─► (ready or deadline) ─► step
///                 ─► Done ─► finish ─► outcomes
/// ```
///
/// Over a blocking transport a pending request goes out first, bounded by
/// a short slice, and reading takes over when the server stops taking it
/// (it may be waiting for us to read its responses: a long pipeline must
/// keep reading while it writes, or both sides stop with full buffers).
///
/// ```no_run
/// # fn demo(mut stream: std::net::TcpStream) {
/// use jsontp_protocol::io_adapters::IoMode;
/// use jsontp_protocol::io_adapters::client::{ClientOptions, Driver, Step, Streams};
/// use jsontp_protocol::message::{Method, Request};
///
/// stream.set_nonblocking(true).unwrap();
/// let mut driver = Driver::new(ClientOptions::default(), IoMode::NonBlocking);
/// let mut scratch = vec![0; 64 * 1024];
/// let mut call = driver.begin([Request::new(Method::Get, "/hello.txt".parse().unwrap())]);
/// loop {
///     match driver.step(&mut stream, &mut scratch, &mut call, &mut Streams::default()) {
///         Step::Done => break,
///         // Poll `stream` for what is named, with `deadline` as the timeout.
///         Step::Wait { read: _, write: _, deadline: _ } => {}
///         _ => {}
///     }
/// }
/// for outcome in driver.finish(call) {
///     println!("{:?}", outcome.map(|answer| answer.response.status));
/// }
/// # }
/// ```
pub struct Driver {
    conn: ClientConnection,
    options: ClientOptions,
    mode: IoMode,
    /// Where the connection is in its life.
    phase: Phase,
    /// Bytes of output the transport has taken: where each request's
    /// bytes are, for how far an exchange got (D13).
    written: u64,
    tracer: Option<Tracer>,
    /// The timeout last given to a blocking transport.
    timeout: Option<Option<Duration>>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("phase", &self.phase)
            .field("mode", &self.mode)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl Driver {
    /// A client connection configured by `options`, over a transport that
    /// behaves as `mode` says.
    pub fn new(options: ClientOptions, mode: IoMode) -> Driver {
        let now = options.clock.now();
        Driver {
            conn: ClientConnection::new(options.config.clone(), now),
            options,
            mode,
            phase: Phase::Open,
            written: 0,
            tracer: None,
            timeout: None,
        }
    }

    /// The options in use.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// Sets [`ClientOptions::exchange_timeout`] for the calls begun after
    /// this: a pool gives each call what is left of its own deadline.
    pub(crate) fn set_exchange_timeout(&mut self, limit: Option<Duration>) {
        self.options.exchange_timeout = limit;
    }

    /// The time, as [`ClientOptions::clock`] reads it.
    pub(crate) fn now(&self) -> Now {
        self.options.clock.now()
    }

    pub(crate) fn set_tracer(&mut self, tracer: Tracer) {
        self.tracer = Some(tracer);
    }

    /// Whether the connection can take no more requests.
    pub fn is_closed(&self) -> bool {
        matches!(self.phase, Phase::Closed { .. }) || self.conn.is_closed()
    }

    /// The one place the phase changes. A closed connection stays closed,
    /// with its first reason.
    fn move_to(&mut self, next: Phase) {
        if let Phase::Closed { .. } = self.phase {
            return;
        }
        debug_assert!(
            matches!(
                (self.phase, next),
                (Phase::Open, Phase::Unwritable | Phase::InputEnded)
                    | (Phase::Unwritable | Phase::InputEnded, Phase::Ended)
                    | (
                        Phase::Open | Phase::Unwritable | Phase::InputEnded | Phase::Ended,
                        Phase::Closed { .. }
                    )
            ),
            "the client connection moves from {:?} to {next:?}",
            self.phase
        );
        if let Phase::Closed { why } = next {
            tracing::debug!(why = why.as_str(), "client connection closed");
        }
        self.phase = next;
    }

    /// Writing met a reset.
    fn output_reset(&mut self) {
        match self.phase {
            Phase::Open => self.move_to(Phase::Unwritable),
            Phase::InputEnded => self.move_to(Phase::Ended),
            _ => {}
        }
    }

    /// The server's stream ended (a read answered 0 or a reset): the
    /// machine is told.
    fn input_ended(&mut self) {
        self.conn.receive_eof(self.now());
        match self.phase {
            Phase::Open => self.move_to(Phase::InputEnded),
            Phase::Unwritable => self.move_to(Phase::Ended),
            _ => {}
        }
    }

    /// Where the next request queued starts in the output, at the least.
    fn queued_from(&self) -> u64 {
        self.written + self.conn.pending_output().len() as u64
    }

    /// Queues `requests` on the machine, in order, each with its slot among
    /// the outcomes; a request the connection cannot take fails at once.
    pub fn begin(&mut self, requests: impl IntoIterator<Item = Request>) -> Call {
        let start = self.now();
        let mut call = self.call(start);
        for request in requests {
            if let Phase::Closed { .. } = self.phase {
                call.outstanding.push_failed(ClientError::ConnectionClosed);
                continue;
            }
            let from = self.queued_from();
            match self.conn.send_request(request, start) {
                Ok(id) => call.outstanding.push(id, from),
                Err(UsageError::Closed) => call.outstanding.push_failed(ClientError::ConnectionClosed),
                Err(e) => call.outstanding.push_failed(ClientError::Usage(e)),
            }
        }
        call
    }

    /// Queues one request whose content the source of the
    /// [`Streams`] given to [`step`](Self::step) yields (D19): `request`
    /// is the head (its body's encoding and other keys; its content is
    /// ignored).
    pub fn begin_upload(&mut self, request: Request) -> Call {
        let start = self.now();
        let mut call = self.call(start);
        if let Phase::Closed { .. } = self.phase {
            call.outstanding.push_failed(ClientError::ConnectionClosed);
            return call;
        }
        let from = self.queued_from();
        match self.conn.send_request_head(request, start) {
            Ok(id) => {
                call.outstanding.push(id, from);
                call.upload = Some(id);
            }
            Err(UsageError::Closed) => call.outstanding.push_failed(ClientError::ConnectionClosed),
            Err(e) => call.outstanding.push_failed(ClientError::Usage(e)),
        }
        call
    }

    fn call(&self, start: Now) -> Call {
        Call {
            outstanding: Outstanding::new(self.options.config.limits.message.max_decoded_body, self.written),
            deadlines: Deadlines::start(&self.options, start.instant),
            upload: None,
            piece: Vec::new(),
        }
    }

    /// The outcomes of a finished call, in request order. A connection
    /// the call found over, or an outcome that leaves it unusable, closes
    /// it for the calls after.
    pub fn finish(&mut self, call: Call) -> Vec<Result<Answer, ClientError>> {
        if let Some(error) = call.outstanding.breaking_error() {
            let why = CloseReason::of(error);
            self.move_to(Phase::Closed { why });
        } else if self.phase != Phase::Open || self.conn.is_closed() {
            self.move_to(Phase::Closed {
                why: CloseReason::ServerClosed,
            });
        }
        call.outstanding.into_results()
    }

    /// Notes how far each request of `call` has been written (D13).
    fn track(&self, call: &mut Call) {
        let conn = &self.conn;
        call.outstanding.track(
            self.written,
            self.queued_from(),
            conn.pending_output().is_empty(),
            |id| match conn.exchange_state(id) {
                Some(ExchangeState::Idle) => Queued::Nothing,
                Some(ExchangeState::AwaitingResponse | ExchangeState::AwaitingResponseUnacknowledged)
                | None => Queued::All,
                Some(_) => Queued::Part,
            },
        );
    }

    /// Moves bytes and time until the call is done or must wait. What is
    /// still queued when the call is done (a full request after `100` that
    /// the server answered early) goes out with the next call.
    pub fn step<T: Transport + ?Sized>(
        &mut self,
        io: &mut T,
        scratch: &mut [u8],
        call: &mut Call,
        streams: &mut Streams<'_>,
    ) -> Step {
        // Within one call: a direction that answered WouldBlock is not
        // tried again (a blocking call has already waited).
        let mut write_blocked = false;
        let mut read_blocked = false;
        loop {
            let at = self.now();
            self.track(call);
            while let Some(event) = self.conn.next_event(at) {
                match event {
                    // Downloaded content goes to the sink as it comes.
                    ClientEvent::Content { data, .. } if streams.sink.streams() => {
                        match streams.sink.write(&data) {
                            Ok(None) => {}
                            Ok(Some(step)) => return step,
                            Err(e) => return self.fail(call, ClientError::Sink(e)),
                        }
                    }
                    event => call.outstanding.on_event(event),
                }
            }
            call.outstanding.events_taken();
            if call.outstanding.is_done() {
                return Step::Done;
            }
            if self.conn.poll_timeout().is_some_and(|t| t <= at.instant) {
                self.conn.handle_timeout(at);
                continue;
            }
            let pending = self.phase.writes() && !self.conn.pending_output().is_empty();
            if (self.conn.is_closed() || !self.phase.reads()) && !pending {
                // The stream has ended or the machine has finished, and it
                // has said all it will about it: nothing more can come.
                call.outstanding.close_rest();
                return Step::Done;
            }
            if let Some(timeout) = call.deadlines.expired(at.instant) {
                return self.fail(call, ClientError::TimedOut(timeout));
            }
            let deadline = call.deadlines.next(self.conn.poll_timeout());
            let mut moved = false;

            if let Some(id) = call.upload {
                let room = self.conn.content_room(id).min(READ_PIECE);
                if room > 0 {
                    if call.piece.len() < room {
                        call.piece.resize(room, 0);
                    }
                    moved = true;
                    match streams.source.read(&mut call.piece[..room]) {
                        Piece::Ended => {
                            call.upload = None;
                            let _ = self.conn.end_content(id, self.now());
                        }
                        Piece::Bytes(n) => {
                            if let Err(e) = self.conn.send_content(id, &call.piece[..n], self.now()) {
                                return self.fail(call, ClientError::Usage(e));
                            }
                        }
                        #[cfg(feature = "tokio")]
                        Piece::Dry => return Step::Fill,
                        Piece::Failed(e) => {
                            // The server sees the request cut short (D1).
                            self.conn.abort_content(id, self.now());
                            return self.fail(call, ClientError::Source(e));
                        }
                    }
                }
            }

            if pending && !write_blocked {
                if let Err(e) = self.bound(io, deadline, at.instant, true) {
                    return self.fail(call, ClientError::Io(e));
                }
                let out = self.conn.pending_output();
                match io.write(out) {
                    Ok(0) => return self.fail(call, ClientError::Io(io::ErrorKind::WriteZero.into())),
                    Ok(n) => {
                        if let Some(tracer) = self.tracer.as_mut() {
                            tracer(Direction::Sent, &out[..n]);
                        }
                        self.written += n as u64;
                        self.conn.consume_output(n, self.now());
                        moved = true;
                    }
                    Err(e) if would_block(&e) => write_blocked = true,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => moved = true,
                    Err(e) if is_reset(&e) => {
                        self.output_reset();
                        moved = true;
                    }
                    Err(e) => return self.fail(call, ClientError::Io(e)),
                }
            }

            let writes = self.phase.writes();
            let want_read = self.phase.reads() && self.conn.wants_read();
            // Content still to read from the source counts as output: a
            // blocking read would hold it back (D19).
            let pending = writes
                && (!self.conn.pending_output().is_empty()
                    || call.upload.is_some_and(|id| self.conn.content_room(id) > 0));
            let read_turn = !self.mode.is_blocking() || !pending || write_blocked;
            if want_read && read_turn && !read_blocked {
                if let Err(e) = self.bound(io, deadline, at.instant, pending) {
                    return self.fail(call, ClientError::Io(e));
                }
                match io.read(scratch) {
                    Ok(0) => {
                        self.input_ended();
                        moved = true;
                    }
                    Ok(n) => {
                        let data = &scratch[..n];
                        if let Some(tracer) = self.tracer.as_mut() {
                            tracer(Direction::Received, data);
                        }
                        // Whitespace between messages is no one's answer (D1).
                        if !data.iter().all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
                            call.outstanding.on_heard();
                        }
                        let at = self.now();
                        self.conn.receive_data(data, at);
                        call.deadlines.on_read(at.instant);
                        moved = true;
                    }
                    Err(e) if would_block(&e) => read_blocked = true,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => moved = true,
                    // A reset is an abrupt end of stream.
                    Err(e) if is_reset(&e) => {
                        self.input_ended();
                        moved = true;
                    }
                    Err(e) => return self.fail(call, ClientError::Io(e)),
                }
            }
            if moved {
                continue;
            }
            return Step::Wait {
                read: want_read,
                write: pending,
                deadline,
            };
        }
    }

    /// Ends the call with `error` for every exchange still unanswered; the
    /// connection is unusable after it.
    pub(crate) fn fail(&mut self, call: &mut Call, error: ClientError) -> Step {
        self.move_to(Phase::Closed {
            why: CloseReason::of(&error),
        });
        call.outstanding.fail_rest(&error);
        Step::Done
    }

    /// Blocking transports: a write, and a read while a write is pending,
    /// are bounded by [`WRITE_SLICE`]; a read with nothing to write waits
    /// until the nearest deadline.
    fn bound<T: Transport + ?Sized>(
        &mut self,
        io: &mut T,
        deadline: Option<Instant>,
        at: Instant,
        sliced: bool,
    ) -> io::Result<()> {
        if !self.mode.is_blocking() {
            return Ok(());
        }
        let until = deadline.map(|d| d.saturating_duration_since(at));
        let limit = match (until, sliced) {
            (Some(until), true) => Some(until.min(WRITE_SLICE)),
            (None, true) => Some(WRITE_SLICE),
            (until, false) => until,
        };
        let limit = limit.map(socket_timeout);
        if retime(self.timeout, limit) {
            io.set_timeout(limit)?;
            self.timeout = Some(limit);
        }
        Ok(())
    }
}
