//! The server's drive step: every decision the runtimes share, once.
//!
//! See [`Driver`]. This is the one module of the server side that calls
//! the machine.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::spool::{Spool, Spooled};
use super::{AccessRecord, Handler, Reply, RequestInfo, ServerOptions, SpoolOptions, Upload};
use crate::io_adapters::linger::{Linger, Lingering};
use crate::io_adapters::now;
use crate::io_adapters::transport::{IoMode, Transport, would_block};
use crate::machine::{Now, PeerError, RequestId, ServerConnection, ServerEvent, UsageError};
use crate::message::{Method, Request, Resource, Response, Status, StatusCode};

/// Longest one blocking read or write may take: how soon a blocking
/// connection notices a shutdown when its timers are far off.
pub(crate) const BLOCKING_SLICE: Duration = Duration::from_millis(200);

/// Bytes one connection may read and write in one turn before the others
/// get theirs. Parsing costs about as much per byte whatever the message,
/// so this bounds the work of a turn: with 8 connections streaming 900 KB
/// JSON5 messages, a small request waits for a round of 8 × 32 KiB of
/// their parsing, not for everything they sent.
const TURN_BYTES: usize = 32 * 1024;

/// The most a streamed reply's reader is asked for at once (D19): the one
/// buffer a streaming connection holds besides the machine's.
const READ_PIECE: usize = 64 * 1024;

/// What the runtime does next with a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Step {
    /// Requests or other events arrived, or a response has left (or the
    /// connection ended) and its access record is due: run
    /// [`Driver::dispatch`] with the handler (where handlers may run:
    /// inline, or a blocking pool), then step again.
    Dispatch,
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
        /// When to step again anyway (a timer of the machine, D3, or the
        /// end of the graceful close).
        deadline: Option<Instant>,
    },
    /// The connection used its share of this turn: step again after the
    /// other connections of the event loop had theirs.
    Yield,
    /// The connection is over: drop the transport (which closes it).
    Close,
}

/// One server connection: the drive step every server runtime shares.
///
/// A `Driver` owns one connection's machine, the glue to the [`Handler`]
/// and where the connection is in its life (serving, lingering, closed).
/// [`Driver::step`] moves bytes between a [`Transport`] and the
/// machine, runs the timers, and says what the runtime does next: run the
/// handler, wait, let other connections go first, or drop the transport.
/// The std, mio and tokio servers only perform what it says; none holds a
/// loop of its own.
///
/// ```text
///   step ─► Dispatch ─► dispatch(handler) ─► step
///        ─► Wait { read, write, deadline } ─► (ready or deadline) ─► step
///        ─► Yield ─► (other connections' turns) ─► step
///        ─► Close ─► drop the transport
/// ```
///
/// # Embedding in an event loop
///
/// The seam for an event loop (a mio `Poll`, or any other) is the driver
/// itself over a non-blocking transport:
///
/// ```no_run
/// # #[cfg(feature = "mio")]
/// # fn demo(mut stream: mio::net::TcpStream, peer: std::net::SocketAddr) {
/// use jsontp::io_adapters::IoMode;
/// use jsontp::io_adapters::server::{Driver, ServerOptions, Step};
/// use jsontp::message::{Request, Response, Status, StatusCode};
///
/// let handler = |_: &Request| Response::new(Status::new(StatusCode::OK, "fine"));
/// let mut driver = Driver::new(peer, &ServerOptions::default(), IoMode::EdgeTriggered);
/// let mut scratch = vec![0; 64 * 1024]; // one per event loop is enough
/// // Register `stream` for readable and writable (edge-triggered), then on
/// // every event for it, and when its deadline passes:
/// loop {
///     match driver.step(&mut stream, &mut scratch) {
///         Step::Dispatch => driver.dispatch(&handler),
///         Step::Wait { deadline: _, .. } => break, // arm a timer for `deadline`
///         Step::Yield => break,                 // step again after the others
///         Step::Close => break,                 // deregister and drop `stream`
///         _ => break,
///     }
/// }
/// # }
/// ```
///
/// With a level-triggered poll, register the interest [`Step::Wait`] names
/// (`read`, `write`) instead of both.
#[derive(Debug)]
pub struct Driver {
    /// The machine.
    conn: ServerConnection,
    info: RequestInfo,
    mode: IoMode,
    /// Received bytes go to the machine in `dispatch`, not in `step`
    /// ([`Driver::parse_in_dispatch`]).
    deferred: bool,
    /// Bytes read and not yet given to the machine (when `deferred`).
    inbox: Vec<u8>,
    /// The end of stream, not yet given to the machine (when `deferred`).
    inbox_eof: bool,
    /// The peer ended its stream.
    eof: bool,
    /// The server is shutting down: close once nothing is under way.
    stopping: bool,
    /// A short read drained the socket this turn ([`IoMode::EdgeTriggered`]).
    drained: bool,
    /// The runtime saw the peer's end of stream: a short read no longer
    /// proves the socket drained, since the end may follow the data with no
    /// new readiness event; read until the read answers 0.
    read_closed: bool,
    /// Bytes moved this turn.
    turn: usize,
    /// The clock as read in this turn, without blocking: the turn is
    /// microseconds of work and the machine's timers count seconds, so
    /// `step` and a `dispatch` that only logs share one reading. A
    /// dispatch that did work drops it (the next step reads the clock
    /// again), and a blocking transport reads it after every call instead
    /// (see `after_io`).
    clock: Option<Now>,
    /// The pending output has been offered to the transport since it
    /// became pending.
    offered: bool,
    /// The timeout last given to a blocking transport.
    timeout: Option<Duration>,
    linger: Option<Linger>,
    closed: bool,
    /// Exchanges answered whose response has not wholly left: each is
    /// told to the access log once its last byte is taken, or the
    /// connection ends first (then as cut short, like nginx's 499).
    unlogged: VecDeque<Unlogged>,
    /// Ends of queued responses not yet matched with an exchange
    /// (responses go out in exchange order, D2, so front matches front).
    ends: VecDeque<u64>,
    /// The latest response end seen from the machine.
    ends_seen: u64,
    /// Where the next logged response's bytes start: the end of the one
    /// logged before it (an interim `100` counts with its exchange).
    logged_to: u64,
    /// Why the connection ends, once known: told once, when it closes.
    why_closing: Option<CloseReason>,
    /// The connection's span: every event of the connection carries the
    /// peer.
    span: tracing::Span,
    /// Where request content is spooled (D19).
    spool_options: SpoolOptions,
    /// The content of the request being received, and its exchange.
    spool: Option<(RequestId, Spool)>,
    /// The streamed reply being sent, if any.
    outgoing: Option<Outgoing>,
}

/// A reply whose content a reader streams (D19).
struct Outgoing {
    id: RequestId,
    reader: Box<dyn std::io::Read + Send>,
    buffer: Vec<u8>,
}

impl std::fmt::Debug for Outgoing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outgoing")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// An answered exchange waiting for its response to leave.
#[derive(Debug)]
struct Unlogged {
    /// The exchange, while its content may still be streaming.
    id: Option<RequestId>,
    method: Option<Method>,
    resource: Echoed,
    status: StatusCode,
    content_bytes: u64,
    /// When the request was handed over (or refused): the record's
    /// duration runs from here to the response's last byte taken.
    started: Instant,
    /// Where its bytes end in the output, once the machine has queued it;
    /// never, when the connection closed before it could be.
    end: Option<u64>,
}

/// The resource an exchange's response echoes (D12).
#[derive(Debug)]
enum Echoed {
    Request(Resource),
    /// As the rejection wrote it (`""` when it could not be read).
    Rejection(String),
}

impl Echoed {
    fn as_str(&self) -> &str {
        match self {
            Echoed::Request(resource) => resource.as_str(),
            Echoed::Rejection(text) => text,
        }
    }
}

/// Why a connection ended, as the debug log says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CloseReason {
    PeerClosed,
    IdleTimeout,
    /// The peer took none of the output for the stall timeout (D3).
    Stalled,
    /// An error response that closes the connection (D1, D3, D5).
    Rejected,
    Shutdown,
    /// A read or write failed, or the peer vanished mid-write.
    TransportFailed,
}

impl CloseReason {
    fn as_str(self) -> &'static str {
        match self {
            CloseReason::PeerClosed => "peer closed",
            CloseReason::IdleTimeout => "idle timeout",
            CloseReason::Stalled => "output stalled",
            CloseReason::Rejected => "closing error response",
            CloseReason::Shutdown => "shutdown",
            CloseReason::TransportFailed => "transport failed",
        }
    }
}

impl Driver {
    /// A new connection with `peer`, configured by `options.config`, over a
    /// transport that behaves as `mode` says.
    pub fn new(peer: SocketAddr, options: &ServerOptions, mode: IoMode) -> Driver {
        // The adapters stream request content (D19): small content is
        // gathered in memory and handed to the handler in the request as
        // usual; only large content reaches it as an upload.
        let mut config = options.config.clone();
        config.stream_content = true;
        Driver {
            conn: ServerConnection::new(config, now()),
            info: RequestInfo::new(peer),
            mode,
            deferred: false,
            inbox: Vec::new(),
            inbox_eof: false,
            eof: false,
            stopping: false,
            drained: false,
            read_closed: false,
            turn: 0,
            clock: None,
            offered: false,
            timeout: None,
            linger: None,
            closed: false,
            unlogged: VecDeque::new(),
            ends: VecDeque::new(),
            ends_seen: 0,
            logged_to: 0,
            why_closing: None,
            span: opened(peer),
            spool_options: options.spool.clone(),
            spool: None,
            outgoing: None,
        }
    }

    /// Hands received bytes to the machine in [`dispatch`](Self::dispatch)
    /// rather than in [`step`](Self::step) (builder style). Parsing a large
    /// message is work for the CPU: an async runtime, which runs `dispatch`
    /// on its blocking pool, keeps it off the threads that poll every
    /// connection's I/O.
    pub fn parse_in_dispatch(mut self) -> Driver {
        self.deferred = true;
        self
    }

    /// The peer, as the handler sees it.
    pub fn peer(&self) -> SocketAddr {
        self.info.peer
    }

    /// The connection's PROXY header named the client (D21): it is the
    /// peer handlers and access records see from here on. Before the first
    /// step only.
    #[cfg(feature = "mio")]
    pub(crate) fn set_peer(&mut self, peer: SocketAddr) {
        self.info.peer = peer;
        self.span = tracing::debug_span!("connection", %peer);
    }

    /// Starts the graceful shutdown of this connection: it closes as soon
    /// as nothing is under way (at once when idle, or when it waits for
    /// the full request of a handshake), after finishing the exchange in
    /// progress otherwise. Step again after calling it.
    pub fn shut_down(&mut self) {
        self.stopping = true;
    }

    /// Edge-triggered runtimes: the poll reported the peer's end of stream
    /// (EPOLLRDHUP). The end can arrive with the last data in one readiness
    /// event, so the driver reads on past a short read until it sees it.
    pub fn peer_closed_reading(&mut self) {
        self.read_closed = true;
    }

    /// Whether the connection is over ([`Step::Close`] was returned).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Moves bytes and time until the runtime has something to do; see
    /// [`Step`]. `scratch` is the read buffer (it may be shared by every
    /// connection of a thread: nothing is kept in it between calls).
    pub fn step<T: Transport + ?Sized>(&mut self, io: &mut T, scratch: &mut [u8]) -> Step {
        // Within one call: a direction that answered WouldBlock is not
        // tried again (a blocking call has already waited).
        let span = self.span.clone();
        let _entered = span.enter();
        let mut write_blocked = false;
        let mut read_blocked = self.drained;
        loop {
            if self.closed {
                // What was not wholly written is logged as cut short first.
                return if self.unlogged.is_empty() {
                    Step::Close
                } else {
                    Step::Dispatch
                };
            }
            if let Some(linger) = &mut self.linger {
                return match linger.step(io, scratch, self.mode) {
                    Lingering::Wait {
                        read,
                        write,
                        deadline,
                    } => self.end_turn(Step::Wait {
                        read,
                        write,
                        deadline: Some(deadline),
                    }),
                    Lingering::Done => {
                        let why = self.why_closing.unwrap_or(CloseReason::PeerClosed);
                        self.abort(why, None)
                    }
                };
            }
            let at = if self.mode.is_blocking() {
                now()
            } else {
                *self.clock.get_or_insert_with(now)
            };
            // Input, a timer, or output taken (which lets held requests
            // through, D3) may each have produced events.
            if self.conn.has_event(at)
                || !self.inbox.is_empty()
                || self.inbox_eof
                || self.log_due()
                || self.content_due()
            {
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
                self.offered = false;
            }
            let output_untried = pending
                && !write_blocked
                && self.turn < TURN_BYTES
                && !(self.mode.is_blocking() && self.offered);
            let deadline = self.conn.poll_timeout();
            if !output_untried && deadline.is_some_and(|t| t <= at.instant) {
                self.note_ends();
                let idle = self.conn.is_idle();
                self.conn.handle_timeout(at);
                if self.unlogged.is_empty() {
                    // A record is a hundred bytes: a quiet connection keeps
                    // none. The machine's give-back deadline (a quiet
                    // connection's buffers) brings this turn; a busy one
                    // reuses the queue for its next exchange.
                    self.unlogged = VecDeque::new();
                }
                if idle && self.conn.is_closed() {
                    // D3: an idle connection closes without a response.
                    tracing::debug!("idle timeout");
                    self.why_closing.get_or_insert(CloseReason::IdleTimeout);
                }
                continue;
            }
            if self.conn.pending_output().is_empty()
                && (self.conn.is_closed() || (self.stopping && self.may_stop()))
            {
                if self.conn.is_closed() {
                    self.why_closing.get_or_insert(CloseReason::PeerClosed);
                } else {
                    self.why_closing.get_or_insert(CloseReason::Shutdown);
                }
                self.linger = Some(Linger::new(at.instant));
                continue;
            }
            let over_budget = self.turn >= TURN_BYTES;
            let mut moved = false;

            if !self.conn.pending_output().is_empty() && !write_blocked && !over_budget {
                if let Err(e) = self.bound(io, deadline, at.instant) {
                    return self.abort(CloseReason::TransportFailed, Some(&e));
                }
                self.offered = true;
                match io.write(self.conn.pending_output()) {
                    // The peer is gone: nothing more can be sent.
                    Ok(0) => return self.abort(CloseReason::TransportFailed, None),
                    Ok(n) => {
                        // The ends must be seen before taking output lets
                        // the machine forget them.
                        self.note_ends();
                        self.conn.consume_output(n, self.after_io(at));
                        self.turn += n;
                        moved = true;
                    }
                    Err(e) if would_block(&e) => write_blocked = true,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => moved = true,
                    Err(e) => return self.abort(CloseReason::TransportFailed, Some(&e)),
                }
            }

            let pending = !self.conn.pending_output().is_empty();
            let want_read = !self.eof && self.conn.wants_read();
            // A blocking read would hold a pending write back: read only
            // once the write is done, or has timed out.
            let read_turn = !self.mode.is_blocking() || !pending || write_blocked;
            let room = scratch.len().min(TURN_BYTES.saturating_sub(self.turn));
            if want_read && read_turn && !read_blocked && room > 0 {
                if let Err(e) = self.bound(io, deadline, at.instant) {
                    return self.abort(CloseReason::TransportFailed, Some(&e));
                }
                match io.read(&mut scratch[..room]) {
                    Ok(0) => {
                        self.eof = true;
                        if self.deferred {
                            self.inbox_eof = true;
                        } else {
                            self.conn.receive_eof(self.after_io(at));
                        }
                        moved = true;
                    }
                    Ok(n) => {
                        let at = self.after_io(at);
                        self.receive(&scratch[..n], at);
                        self.turn += n;
                        moved = true;
                        if self.mode == IoMode::EdgeTriggered && n < room && !self.read_closed {
                            self.drained = true;
                            read_blocked = true;
                        }
                    }
                    Err(e) if would_block(&e) => read_blocked = true,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => moved = true,
                    // Reset by the peer: nothing can be sent.
                    Err(e) => return self.abort(CloseReason::TransportFailed, Some(&e)),
                }
            }
            if moved || deadline.is_some_and(|t| t <= at.instant) {
                continue;
            }
            let budget_stopped = (want_read && !read_blocked) || (pending && !write_blocked);
            if over_budget && budget_stopped {
                return self.end_turn(Step::Yield);
            }
            return self.end_turn(Step::Wait {
                read: want_read,
                write: pending,
                deadline,
            });
        }
    }

    /// Answers every pending event with `handler`, and reports each
    /// response to its access-log hook once it has wholly left, or once the
    /// connection ended before it could.
    pub fn dispatch<H: Handler + ?Sized>(&mut self, handler: &H) {
        let span = self.span.clone();
        let _entered = span.enter();
        if self.closed {
            // Nothing more is served: only the log is told what was cut short.
            self.log_sent(handler, Instant::now());
            return;
        }
        // The turn's reading of the clock, and a new one after each
        // handler call: the machine's timers count seconds, and the date
        // header shows them.
        let mut at = self.clock.unwrap_or_else(now);
        // A dispatch that only logs leaves the turn's reading to the next
        // step; one that did work (a handler, writing its answer out, a
        // spool) may have taken long enough for the stall timer to see it,
        // so the next step reads the clock again.
        let mut busy = !self.inbox.is_empty() || self.inbox_eof || self.outgoing.is_some();
        if !self.inbox.is_empty() {
            self.conn.receive_data(&self.inbox, at);
            self.inbox.clear();
        }
        if std::mem::take(&mut self.inbox_eof) {
            self.conn.receive_eof(at);
        }
        while let Some(event) = self.conn.next_event(at) {
            busy = true;
            match event {
                ServerEvent::Content { id, data } => {
                    let spool = match &mut self.spool {
                        Some((held, spool)) if *held == id => spool,
                        _ => &mut self.spool.insert((id, Spool::new())).1,
                    };
                    spool.write(&data, &self.spool_options);
                }
                ServerEvent::ContentDiscarded { id } => self.drop_spool(id),
                ServerEvent::Request { id, mut request } => {
                    let started = at.instant;
                    let reply = match self.take_upload(id, &mut request) {
                        Ok(upload) => answer(handler, &request, upload, &self.info),
                        Err(error) => {
                            tracing::error!(%error, "cannot spool the request's content; answering 500");
                            Response::new(Status::new(
                                StatusCode::INTERNAL_SERVER_ERROR,
                                format!("the server could not store the request's content: {error}"),
                            ))
                            .into()
                        }
                    };
                    at = now();
                    self.respond(id, request, reply, started, at);
                }
                ServerEvent::ContinueRequested { id, request } => {
                    let started = at.instant;
                    let decision = handler.check_continue(&request, &self.info);
                    at = now();
                    match decision {
                        Ok(()) => {
                            // The full request is now awaited (D10).
                            let _ = self.conn.accept_continue(id, at);
                        }
                        Err(response) => {
                            self.respond(id, request, response.into(), started, at);
                        }
                    }
                }
                // Every response the machine writes on its own (framing,
                // limits, timeouts, a stream cut short) comes as a rejection
                // carrying what it wrote: log it like an answer.
                ServerEvent::PeerError(PeerError::Rejected {
                    id,
                    rejection,
                    closes,
                }) => {
                    if let Some(id) = id {
                        // What it streamed is discarded (D19).
                        self.drop_spool(id);
                    }
                    tracing::debug!(
                        status = rejection.status.as_u16(),
                        closes,
                        reason = %rejection.message,
                        "request rejected"
                    );
                    if closes {
                        self.why_closing.get_or_insert(CloseReason::Rejected);
                    }
                    self.unlogged.push_back(Unlogged {
                        id: None,
                        method: None,
                        resource: Echoed::Rejection(rejection.resource),
                        status: rejection.status,
                        // The connection's error responses carry no content.
                        content_bytes: 0,
                        started: at.instant,
                        end: None,
                    });
                }
                ServerEvent::PeerError(PeerError::OutputStalled) => {
                    tracing::debug!("output stalled: the peer takes nothing");
                    self.why_closing.get_or_insert(CloseReason::Stalled);
                }
                // The peer left after a `100` without the full request:
                // nothing was written, so nothing to log. Closed: `step`
                // sees it.
                _ => {}
            }
        }
        self.send_content();
        // Once for everything answered: the machine forgets an end only
        // when output is taken, which `step` does, not this.
        self.note_ends();
        self.log_sent(handler, at.instant);
        if busy {
            self.clock = None;
        }
    }

    /// Whether the streamed reply can give more content now (D19).
    fn content_due(&self) -> bool {
        self.outgoing
            .as_ref()
            .is_some_and(|out| self.conn.content_room(out.id) > 0)
    }

    /// Reads the streamed reply's content while the machine has room for
    /// it, up to a turn's worth; ends or aborts it when the reader does
    /// (D19).
    fn send_content(&mut self) {
        if self.outgoing.is_none() {
            return;
        }
        let at = now();
        let mut budget = 4 * READ_PIECE;
        while let Some(out) = &mut self.outgoing {
            let room = self.conn.content_room(out.id).min(READ_PIECE);
            if room == 0 || budget == 0 {
                return;
            }
            if out.buffer.len() < room {
                out.buffer.resize(room, 0);
            }
            let id = out.id;
            match out.reader.read(&mut out.buffer[..room]) {
                Ok(0) => {
                    self.outgoing = None;
                    let _ = self.conn.end_content(id, at);
                }
                Ok(n) => {
                    budget = budget.saturating_sub(n);
                    if let Some(record) = self.unlogged.iter_mut().find(|u| u.id == Some(id)) {
                        record.content_bytes += n as u64;
                    }
                    if let Err(error) = self.conn.send_content(id, &out.buffer[..n], at) {
                        tracing::error!(%error, "the streamed reply cannot be sent; closing");
                        self.outgoing = None;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => {
                    // The peer sees the message cut short, not a wrong one
                    // (D1).
                    tracing::error!(%error, "reading the streamed reply failed; closing");
                    self.outgoing = None;
                    self.conn.abort_content(id, at);
                }
            }
        }
    }

    /// Drops what was spooled for exchange `id` (a temporary file is
    /// deleted).
    fn drop_spool(&mut self, id: RequestId) {
        if self.spool.as_ref().is_some_and(|(held, _)| *held == id) {
            self.spool = None;
        }
    }

    /// The content spooled for exchange `id`, now that its request is
    /// complete and valid: put back into the request when it stayed in
    /// memory, an upload otherwise.
    fn take_upload(&mut self, id: RequestId, request: &mut Request) -> std::io::Result<Option<Upload>> {
        let Some((_, spool)) = self.spool.take_if(|(held, _)| *held == id) else {
            return Ok(None);
        };
        match spool.finish()? {
            Spooled::Memory(bytes) => {
                request.body.replace_content(bytes);
                Ok(None)
            }
            Spooled::File(upload) => Ok(Some(upload)),
        }
    }

    /// Takes the ends of the responses the machine queued since last
    /// time, and gives them, in order, to the exchanges waiting for one.
    fn note_ends(&mut self) {
        // Ends only grow, so the new ones are the newest few: with many
        // responses queued, a walk over all of them at every turn would
        // cost the depth of the pipeline each time. Most turns have none.
        let seen = self.ends_seen;
        let ends = || self.conn.response_ends();
        if ends().next_back().is_some_and(|last| last > seen) {
            let new = ends().rev().take_while(|&end| end > seen).count();
            for end in ends().skip(ends().len() - new) {
                self.ends.push_back(end);
                self.ends_seen = end;
            }
        }
        if self.ends.is_empty() {
            return;
        }
        // Ends are matched front first, so the records still waiting for
        // one are the newest few too.
        let waiting = self.unlogged.iter().rev().take_while(|u| u.end.is_none()).count();
        let matched = self.unlogged.len() - waiting;
        for waiting in self.unlogged.range_mut(matched..) {
            match self.ends.pop_front() {
                Some(end) => waiting.end = Some(end),
                None => break,
            }
        }
    }

    /// Whether `dispatch` has a record to give the access log: a response
    /// wholly taken by the peer.
    fn log_due(&self) -> bool {
        let written = self.conn.output_written();
        self.unlogged
            .front()
            .and_then(|u| u.end)
            .is_some_and(|end| end <= written)
    }

    /// Tells the access log about every response that has wholly left
    /// and, once the connection is closed, about those cut short.
    /// `now`: the drive step's latest reading of the clock, which ends
    /// each record's duration.
    fn log_sent<H: Handler + ?Sized>(&mut self, handler: &H, now: Instant) {
        let written = self.conn.output_written();
        while let Some(front) = self.unlogged.front() {
            let complete = front.end.is_some_and(|end| end <= written);
            if !complete && !self.closed {
                break;
            }
            let Some(done) = self.unlogged.pop_front() else {
                break;
            };
            // Responses leave in order (D2), so what left after the last
            // logged end belongs to this one, up to its own end: when that
            // is unknown (a streamed answer cut short before its content
            // ended), everything written so far. A response cut short may
            // end past what was written, and so may the ones queued after
            // it: each counts only its own bytes that left.
            let end = done.end.unwrap_or(written).max(self.logged_to);
            let bytes_written = written.min(end).saturating_sub(self.logged_to);
            self.logged_to = end;
            if !complete {
                tracing::debug!(
                    status = done.status.as_u16(),
                    bytes_written,
                    "response cut short: the connection ended before it left"
                );
            }
            handler.log_exchange(&AccessRecord {
                peer: self.info.peer,
                method: done.method,
                resource: done.resource.as_str(),
                status: done.status,
                content_bytes: done.content_bytes,
                elapsed: now.saturating_duration_since(done.started),
                bytes_written,
                complete,
            });
        }
    }

    /// Feeds bytes read from the transport.
    fn receive(&mut self, data: &[u8], at: Now) {
        if self.deferred {
            self.inbox.extend_from_slice(data);
        } else {
            self.conn.receive_data(data, at);
        }
    }

    /// The time after a transport call made at `at`: a call that may block
    /// takes time worth a new reading of the clock; a non-blocking one
    /// does not (a reading of it is nearly a hundred instructions, a
    /// hundredth of a small exchange).
    #[inline]
    fn after_io(&self, at: Now) -> Now {
        if self.mode.is_blocking() { now() } else { at }
    }

    /// Whether a shutting-down connection may close now: nothing half
    /// received and nothing left to write, or only the full request of a
    /// handshake awaited (which may take 300 s, D3).
    fn may_stop(&self) -> bool {
        let idle = self.inbox.is_empty() && !self.inbox_eof && self.conn.is_idle();
        idle || (self.inbox.is_empty() && self.conn.awaits_full_request())
    }

    /// Blocking transports: bounds the next call by the nearest deadline,
    /// and by [`BLOCKING_SLICE`] so that a shutdown is noticed.
    fn bound<T: Transport + ?Sized>(
        &mut self,
        io: &mut T,
        deadline: Option<Instant>,
        at: Instant,
    ) -> std::io::Result<()> {
        if !self.mode.is_blocking() {
            return Ok(());
        }
        let until = deadline.map_or(BLOCKING_SLICE, |d| d.saturating_duration_since(at));
        // In whole milliseconds, rounded up (zero would mean "for ever" to
        // the socket): a deadline that keeps its distance, as the machine's
        // give-back of buffers a few milliseconds after every exchange
        // does, then keeps the timeout already set, with no system call.
        let millis = until.min(BLOCKING_SLICE).as_nanos().div_ceil(1_000_000).max(1);
        let limit = Some(Duration::from_millis(millis as u64));
        if self.timeout != limit {
            io.set_timeout(limit)?;
            self.timeout = limit;
        }
        Ok(())
    }

    fn end_turn(&mut self, step: Step) -> Step {
        self.turn = 0;
        self.clock = None;
        self.drained = false;
        step
    }

    /// Closes without lingering (the transport failed or the peer is
    /// gone) or after it; says why. What is left to log goes to `dispatch`
    /// first.
    fn abort(&mut self, why: CloseReason, error: Option<&std::io::Error>) -> Step {
        self.closed = true;
        self.linger = None;
        // Nothing more is read or sent: the reader (a file) is closed and
        // a spooled upload deleted at once.
        self.outgoing = None;
        self.spool = None;
        let why = self.why_closing.unwrap_or(why);
        self.note_ends();
        match error {
            Some(error) => tracing::debug!(reason = why.as_str(), %error, "connection closed"),
            None => tracing::debug!(reason = why.as_str(), "connection closed"),
        }
        if self.unlogged.is_empty() {
            Step::Close
        } else {
            Step::Dispatch
        }
    }

    /// Sends the application's answer to exchange `id`, and keeps its
    /// record for the access log until it has left. An answer the machine
    /// refuses as a misuse (a `1xx` other than the acknowledgement, D12) would leave the exchange unanswered and stall
    /// every pipelined response behind it, so it is replaced by a `500`.
    fn respond(&mut self, id: RequestId, request: Box<Request>, reply: Reply, started: Instant, at: Now) {
        let (response, reader) = reply.into_parts();
        let (mut status, mut content_bytes) = (response.status.code, response.body.content().len() as u64);
        let sent = match reader {
            None => self.conn.send_response(id, response, at),
            Some(reader) => {
                content_bytes = 0;
                let sent = self.conn.send_response_head(id, response, at);
                if sent.is_ok() {
                    self.outgoing = Some(Outgoing {
                        id,
                        reader,
                        buffer: Vec::new(),
                    });
                }
                sent
            }
        };
        match sent {
            // Closed: the connection is going away; nobody is left to answer.
            Ok(()) | Err(UsageError::Closed) => {}
            Err(misuse) => {
                let fallback = Response::new(Status::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("the server's application gave an answer that cannot be sent: {misuse}"),
                ));
                (status, content_bytes) = (fallback.status.code, 0);
                let _ = self.conn.send_response(id, fallback, at);
            }
        }
        self.unlogged.push_back(Unlogged {
            id: Some(id),
            method: Some(request.method),
            // Moved, not copied: the request is done with.
            resource: Echoed::Request(request.resource),
            status,
            content_bytes,
            started,
            end: None,
        });
    }
}

/// The span of a connection, and its first event.
fn opened(peer: SocketAddr) -> tracing::Span {
    let span = tracing::debug_span!("connection", %peer);
    span.in_scope(|| tracing::debug!("connection opened"));
    span
}

/// Runs the handler; a handler that panics gets its request answered `500`
/// instead of taking down the worker and every connection on it.
fn answer<H: Handler + ?Sized>(
    handler: &H,
    request: &Request,
    upload: Option<Upload>,
    info: &RequestInfo,
) -> Reply {
    let run = std::panic::AssertUnwindSafe(|| handler.respond(request, upload, info));
    std::panic::catch_unwind(run).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(not a string)");
        tracing::error!(
            method = request.method.as_str(),
            resource = request.resource.as_str(),
            panic = why,
            "the handler panicked; answering 500"
        );
        let status = Status::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the server failed while answering this request",
        );
        Response::new(status).into()
    })
}
