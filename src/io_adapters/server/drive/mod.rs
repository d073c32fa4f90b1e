//! The server's drive step: every decision the runtimes share, once.
//!
//! See [`Driver`]. This is the one module of the server side that calls
//! the machine.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::http_line::{FirstLine, Look};
use super::{RequestInfo, ServerOptions, SpoolOptions};
use crate::io_adapters::Clock;
use crate::io_adapters::linger::{Linger, Lingering};
use crate::io_adapters::transport::{IoMode, Transport, retime, socket_timeout, would_block};
use crate::machine::{Now, ServerConfig, ServerConnection};

mod access;
mod dispatch;
mod receiving;
mod streamed;

use access::{Answer, Echoed};
#[allow(unused_imports, reason = "the path the async runtime names it by")]
pub(crate) use dispatch::Deferred;
use receiving::{Receiving, Taken};
use streamed::Streaming;

/// Longest one blocking read or write may take: how soon a blocking
/// connection notices a shutdown when its timers are far off.
pub(crate) const BLOCKING_SLICE: Duration = Duration::from_millis(200);

/// Bytes one connection may read and write in one turn before the others
/// get theirs. Parsing costs about as much per byte whatever the message,
/// so this bounds the work of a turn: with 8 connections streaming 900 KB
/// JSON5 messages, a small request waits for a round of 8 × 32 KiB of
/// their parsing, not for everything they sent.
const TURN_BYTES: usize = 32 * 1024;

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
/// and where the connection is in its life (serving, draining at
/// shutdown, lingering, closed). It reads the time through
/// [`ServerOptions::clock`], so a whole connection can run on simulated
/// time.
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
/// use jsontp_protocol::io_adapters::IoMode;
/// use jsontp_protocol::io_adapters::server::{Driver, ServerOptions, Step};
/// use jsontp_protocol::message::{Request, Response, Status, StatusCode};
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
    /// What the server's connections share: the time's source, the spool,
    /// the shutdown's timeout.
    settings: ConnectionSettings,
    info: RequestInfo,
    mode: IoMode,
    /// Where the connection is in its life.
    phase: Phase,
    /// The peer's side of the stream.
    input: PeerInput,
    /// Where received bytes are parsed.
    intake: Intake,
    /// Whether the first line is an HTTP request line (D1).
    first_line: FirstLine,
    /// What this turn has done so far.
    turn: Turn,
    /// Whether the pending output has been offered to the transport.
    offer: Offer,
    /// The timeout last given to a blocking transport, in whole
    /// milliseconds (it is at most [`BLOCKING_SLICE`]).
    timeout_ms: Option<u32>,
    /// Exchanges answered whose response has not wholly left, in response
    /// order (D2): each is told to the access log once its last byte is
    /// taken, or the connection ends first (then as cut short, like
    /// nginx's 499).
    answers: VecDeque<Answer>,
    /// The replies whose content is still read from their readers, and
    /// the buffer it is read into (D19); boxed, and `None` while no reply
    /// streams.
    streaming: Option<Box<Streaming>>,
    /// The content of the request being received (D19).
    receiving: Receiving,
    /// Output bytes of the responses logged as wholly sent: what was
    /// written beyond them belongs to the first one cut short.
    logged_bytes: u64,
    /// Why the connection ends, once known: told once, when it closes.
    why_closing: Option<CloseReason>,
    /// The connection's span, when a subscriber records it: every event of
    /// the connection carries the peer. Boxed, and `None` when nothing
    /// records it, as in a server that does not log at debug level.
    span: Option<Box<tracing::Span>>,
}

/// What every connection of a server shares, made once from its
/// [`ServerOptions`]: each [`Driver`] made with
/// [`Driver::with_settings`] holds a pointer to it rather than a copy, so
/// that an idle connection costs only its own state. Cloning it is cheap.
#[derive(Debug, Clone)]
pub struct ConnectionSettings(Arc<Settings>);

#[derive(Debug)]
struct Settings {
    /// The machine's configuration, with request content streamed (D19).
    config: Arc<ServerConfig>,
    /// Where the time comes from.
    clock: Clock,
    /// Where request content is spooled (D19).
    spool: SpoolOptions,
    /// How long a graceful shutdown lets the exchanges under way finish.
    shutdown_timeout: Duration,
}

impl ConnectionSettings {
    /// The settings of the connections `options` configure.
    pub fn new(options: &ServerOptions) -> ConnectionSettings {
        // The adapters stream request content (D19): small content is
        // gathered in memory and handed to the handler in the request as
        // usual; only large content reaches it as an upload.
        let mut config = options.config.clone();
        config.stream_content = true;
        ConnectionSettings(Arc::new(Settings {
            config: Arc::new(config),
            clock: options.clock.clone(),
            spool: options.spool.clone(),
            shutdown_timeout: options.shutdown_timeout,
        }))
    }
}

/// Where a connection is in its life. Every move is one of:
///
/// ```text
///   Serving ── shut_down ──► Draining { until }
///      │                        │  nothing under way        │ `until` passes
///      │ the machine closed,    ▼                            ▼
///      │ its output written ─► Lingering { why } ─► Closed ◄── (cut short)
///      └── the transport failed, or the peer vanished ──────► Closed
/// ```
///
/// An idle `Serving` connection also moves to `Lingering` when the
/// connection cap closes it to admit a new one (`close_idle`, D3).
#[derive(Debug)]
enum Phase {
    /// Exchanges are read, answered and written.
    Serving,
    /// A graceful shutdown began: what is under way may finish until
    /// `until`; the connection then closes whatever its peer does.
    Draining { until: Instant },
    /// Closing gracefully: our side shut, the peer's input drained for a
    /// moment so that our last response is not lost to a reset. Boxed:
    /// every connection holds a `Phase`, a closing one only holds this.
    Lingering { linger: Box<Linger>, why: CloseReason },
    /// Over. The access log may still be owed the exchanges cut short:
    /// [`Step::Dispatch`] until it has them, then [`Step::Close`].
    Closed,
}

/// The peer's side of the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PeerInput {
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
enum Intake {
    /// In `step`, as they are read.
    Direct,
    /// In `dispatch` ([`Driver::parse_in_dispatch`]): they wait here;
    /// boxed, as only the async runtime asks for it.
    Deferred(Box<Vec<u8>>),
}

/// What the current turn has done: bytes moved, the clock as read, and
/// whether an edge-triggered socket is known to be drained.
#[derive(Debug, Default)]
struct Turn {
    /// Bytes read and written (a turn ends soon past [`TURN_BYTES`]).
    moved: u32,
    /// The clock as read in this turn, without blocking: the turn is
    /// microseconds of work and the machine's timers count seconds, so
    /// `step` and a `dispatch` that only logs share one reading. A
    /// dispatch that did work drops it (the next step reads the clock
    /// again), and a blocking transport reads it after every call instead
    /// (see `after_io`).
    clock: Option<Now>,
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
enum Readiness {
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
enum Offer {
    Untried,
    Offered,
}

/// Why a connection ended, as the debug log says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CloseReason {
    PeerClosed,
    IdleTimeout,
    /// Idle at the connection cap: closed to admit a new connection (D3).
    MadeRoom,
    /// The peer took none of the output for the stall timeout (D3).
    Stalled,
    /// An error response that closes the connection (D1, D3, D5).
    Rejected,
    Shutdown,
    /// The shutdown's drain deadline passed with an exchange under way.
    DrainDeadline,
    /// A read or write failed, or the peer vanished mid-write.
    TransportFailed,
}

impl CloseReason {
    fn as_str(self) -> &'static str {
        match self {
            CloseReason::PeerClosed => "peer closed",
            CloseReason::IdleTimeout => "idle timeout",
            CloseReason::MadeRoom => "idle at the connection limit: closed to admit a new connection",
            CloseReason::Stalled => "output stalled",
            CloseReason::Rejected => "closing error response",
            CloseReason::Shutdown => "shutdown",
            CloseReason::DrainDeadline => "shutdown deadline passed with an exchange under way",
            CloseReason::TransportFailed => "transport failed",
        }
    }
}

impl Driver {
    /// A new connection with `peer`, configured by `options.config`, over a
    /// transport that behaves as `mode` says. A server makes its
    /// [`ConnectionSettings`] once and uses [`with_settings`](Self::with_settings)
    /// instead: its connections then share them.
    pub fn new(peer: SocketAddr, options: &ServerOptions, mode: IoMode) -> Driver {
        Driver::with_settings(peer, &ConnectionSettings::new(options), mode)
    }

    /// A new connection with `peer`, configured by `settings`, which it
    /// shares with the other connections made with them, over a transport
    /// that behaves as `mode` says.
    pub fn with_settings(peer: SocketAddr, settings: &ConnectionSettings, mode: IoMode) -> Driver {
        let now = settings.0.clock.now();
        Driver {
            conn: ServerConnection::with_shared_config(Arc::clone(&settings.0.config), now),
            settings: settings.clone(),
            info: RequestInfo::new(peer),
            mode,
            phase: Phase::Serving,
            input: PeerInput::Open,
            intake: Intake::Direct,
            first_line: FirstLine::default(),
            turn: Turn::default(),
            offer: Offer::Untried,
            timeout_ms: None,
            answers: VecDeque::new(),
            streaming: None,
            receiving: Receiving::Nothing,
            logged_bytes: 0,
            why_closing: None,
            span: recorded(opened(peer)),
        }
    }

    /// Hands received bytes to the machine in [`dispatch`](Self::dispatch)
    /// rather than in [`step`](Self::step) (builder style). Parsing a large
    /// message is work for the CPU: an async runtime, which runs `dispatch`
    /// on its blocking pool, keeps it off the threads that poll every
    /// connection's I/O.
    pub fn parse_in_dispatch(mut self) -> Driver {
        self.intake = Intake::Deferred(Box::default());
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
        self.span = recorded(tracing::debug_span!("connection", %peer));
    }

    /// Starts the graceful shutdown of this connection: it closes as soon
    /// as nothing is under way (at once when idle, or when it waits for
    /// the full request of a handshake), after finishing the exchange in
    /// progress otherwise, and at the latest when
    /// [`ServerOptions::shutdown_timeout`] has passed, whatever the peer
    /// does. Step again after calling it.
    pub fn shut_down(&mut self) {
        if let Phase::Serving = self.phase {
            let until = self.now().instant + self.settings.0.shutdown_timeout;
            self.phase = Phase::Draining { until };
        }
    }

    /// Whether the connection is between messages with nothing under way:
    /// no part of a message received (nor held as a possible HTTP line),
    /// no exchange open, nothing owed to the peer or to the access log,
    /// and not closing. At the connection cap, such a connection may be
    /// closed to admit a new one ([`close_idle`](Self::close_idle), D3).
    pub(crate) fn is_idle(&self) -> bool {
        matches!(self.phase, Phase::Serving)
            && self.conn.is_idle()
            && self.first_line.deadline().is_none()
            && !self.intake_due()
            && self.answers.is_empty()
            && self.streaming.is_none()
            && matches!(self.receiving, Receiving::Nothing)
    }

    /// Closes the connection if it is idle ([`is_idle`](Self::is_idle)),
    /// as its idle timeout would: no response (D2, D3), our side shut and
    /// the peer's input drained for a moment. The connection cap's way to
    /// admit a new client. Whether it closes; step again after calling it.
    pub(crate) fn close_idle(&mut self) -> bool {
        if !self.is_idle() {
            return false;
        }
        let _entered = self.span().entered();
        tracing::debug!("idle at the connection limit: closing to admit a new connection");
        let why = *self.why_closing.get_or_insert(CloseReason::MadeRoom);
        self.phase = Phase::Lingering {
            linger: Box::new(Linger::new(self.now().instant)),
            why,
        };
        true
    }

    /// Edge-triggered runtimes: the poll reported the peer's end of stream
    /// (EPOLLRDHUP). The end can arrive with the last data in one readiness
    /// event, so the driver reads on past a short read until it sees it.
    pub fn peer_closed_reading(&mut self) {
        if self.input == PeerInput::Open {
            self.input = PeerInput::Ending;
        }
    }

    /// Whether the connection is over ([`Step::Close`] was returned).
    pub fn is_closed(&self) -> bool {
        matches!(self.phase, Phase::Closed)
    }

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
                        Lingering::Done => self.abort(why, None),
                    };
                }
                Phase::Draining { until } if *until <= at.instant => {
                    return self.abort(CloseReason::DrainDeadline, None);
                }
                Phase::Serving | Phase::Draining { .. } => {}
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
            // Bytes held as a possible HTTP line are a message begun (D3).
            let deadline = match (self.conn.poll_timeout(), self.first_line.deadline()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if !output_untried && deadline.is_some_and(|t| t <= at.instant) {
                // The stall timer is the peer's progress (D3): what the
                // transport says the peer acknowledged decides whether it
                // took any, so it is asked at every due timer.
                self.report_acknowledged(io, at);
                self.act_on_timers(at);
                continue;
            }
            if !pending && (self.conn.is_closed() || self.may_stop()) {
                let why = if self.conn.is_closed() {
                    CloseReason::PeerClosed
                } else {
                    CloseReason::Shutdown
                };
                let why = *self.why_closing.get_or_insert(why);
                self.phase = Phase::Lingering {
                    linger: Box::new(Linger::new(at.instant)),
                    why,
                };
                continue;
            }
            let over_budget = self.turn.moved() >= TURN_BYTES;
            let mut moved = false;

            if pending && !write_blocked && !over_budget {
                if let Err(e) = self.bound(io, self.wake_at(deadline), at.instant) {
                    return self.abort(CloseReason::TransportFailed, Some(&e));
                }
                self.offer = Offer::Offered;
                let (written, offered) = write_pending(&self.conn, io);
                match written {
                    // The peer is gone: nothing more can be sent.
                    Ok(0) => return self.abort(CloseReason::TransportFailed, None),
                    Ok(n) => {
                        let short = n < offered;
                        let after = self.after_io(at);
                        self.conn.consume_output(n, after);
                        if short {
                            self.report_acknowledged(io, after);
                        }
                        self.turn.add_moved(n);
                        moved = true;
                    }
                    Err(e) if would_block(&e) => {
                        self.report_acknowledged(io, self.after_io(at));
                        write_blocked = true;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => moved = true,
                    Err(e) => return self.abort(CloseReason::TransportFailed, Some(&e)),
                }
            }

            let pending = !self.conn.pending_output().is_empty();
            let want_read = self.wants_input();
            // A blocking read would hold a pending write back: read only
            // once the write is done, or has timed out.
            let read_turn = !self.mode.is_blocking() || !pending || write_blocked;
            let room = scratch.len().min(TURN_BYTES.saturating_sub(self.turn.moved()));
            if want_read && read_turn && !read_blocked && room > 0 {
                if let Err(e) = self.bound(io, self.wake_at(deadline), at.instant) {
                    return self.abort(CloseReason::TransportFailed, Some(&e));
                }
                match io.read(&mut scratch[..room]) {
                    Ok(0) => {
                        self.input = PeerInput::EndRead;
                        // What was held as a possible HTTP line goes first (D1).
                        let held = self.first_line.release();
                        self.take_in(&held, self.after_io(at));
                        if let Intake::Direct = self.intake {
                            self.input = PeerInput::Ended;
                            self.conn.receive_eof(self.after_io(at));
                        }
                        moved = true;
                    }
                    Ok(n) => {
                        let at = self.after_io(at);
                        let message_time = self.settings.0.config.limits.message_timeout;
                        let received = match self.first_line.look(&scratch[..n], at.instant, message_time) {
                            Look::Pass(bytes) => bytes,
                            Look::Hold => Cow::Borrowed(&[][..]),
                            Look::Http(answer) => {
                                // Best effort, a few hundred bytes on a fresh socket.
                                let _ = io.write(&answer);
                                self.why_closing = Some(CloseReason::Rejected);
                                let (linger, why) =
                                    (Box::new(Linger::new(at.instant)), CloseReason::Rejected);
                                self.phase = Phase::Lingering { linger, why };
                                continue;
                            }
                        };
                        self.take_in(&received, at);
                        self.turn.add_moved(n);
                        moved = true;
                        if self.mode == IoMode::EdgeTriggered && n < room && self.input == PeerInput::Open {
                            self.turn.readiness = Readiness::Drained;
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
            let deadline = self.wake_at(deadline);
            return self.end_turn(Step::Wait {
                read: want_read,
                write: pending,
                deadline,
            });
        }
    }

    /// Acts on the machine's timers that are due at `at` (D3).
    fn act_on_timers(&mut self, at: Now) {
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
            tracing::debug!("idle timeout");
            self.why_closing.get_or_insert(CloseReason::IdleTimeout);
        }
    }

    /// Bytes received, for the machine: now, or at the next dispatch.
    fn take_in(&mut self, bytes: &[u8], at: Now) {
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
    fn report_acknowledged<T: Transport + ?Sized>(&mut self, io: &T, at: Now) {
        if let Some(told) = io.acknowledged() {
            self.conn.transport_acknowledged(told, at);
        }
    }

    /// When the runtime must step again at the latest: the machine's
    /// nearest timer, or the end of a shutdown's drain.
    fn wake_at(&self, machine: Option<Instant>) -> Option<Instant> {
        match (&self.phase, machine) {
            (Phase::Draining { until }, Some(t)) => Some(t.min(*until)),
            (Phase::Draining { until }, None) => Some(*until),
            (_, machine) => machine,
        }
    }

    /// Whether received bytes or the end of stream wait for `dispatch`.
    fn intake_due(&self) -> bool {
        let bytes = matches!(&self.intake, Intake::Deferred(inbox) if !inbox.is_empty());
        bytes || self.input == PeerInput::EndRead
    }

    /// Whether the machine wants more of the peer's input now.
    fn wants_input(&self) -> bool {
        matches!(self.input, PeerInput::Open | PeerInput::Ending) && self.conn.wants_read()
    }

    /// The time after a transport call made at `at`: a call that may block
    /// takes time worth a new reading of the clock; a non-blocking one
    /// does not.
    #[inline]
    fn after_io(&self, at: Now) -> Now {
        if self.mode.is_blocking() { self.now() } else { at }
    }

    /// The connection's span, to enter.
    #[inline]
    fn span(&self) -> tracing::Span {
        self.span.as_deref().cloned().unwrap_or_else(tracing::Span::none)
    }

    /// The time, as the server's clock reads it.
    #[inline]
    fn now(&self) -> Now {
        self.settings.0.clock.now()
    }

    /// Whether a shutting-down connection may close now: nothing half
    /// received and nothing left to write, or only the full request of a
    /// handshake awaited (which may take 300 s, D3).
    fn may_stop(&self) -> bool {
        if !matches!(self.phase, Phase::Draining { .. }) {
            return false;
        }
        let received = !self.intake_due();
        received && (self.conn.is_idle() || self.conn.awaits_full_request())
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

    fn end_turn(&mut self, step: Step) -> Step {
        self.turn = Turn::default();
        step
    }

    /// Closes without lingering (the transport failed, the peer is gone,
    /// or the drain deadline passed) or after it; says why. What is left
    /// to log goes to `dispatch` first.
    fn abort(&mut self, why: CloseReason, error: Option<&std::io::Error>) -> Step {
        self.phase = Phase::Closed;
        // Nothing more is read or sent: the readers (files) are closed and
        // a spooled upload deleted at once.
        self.streaming = None;
        self.receiving = Receiving::Nothing;
        let why = self.why_closing.unwrap_or(why);
        match error {
            // An operator must hear of a certificate clients refuse.
            #[cfg(feature = "tls")]
            Some(error) if crate::io_adapters::tls::refused_certificate(error) => {
                tracing::warn!(reason = why.as_str(), %error, "connection closed");
            }
            Some(error) => tracing::debug!(reason = why.as_str(), %error, "connection closed"),
            None => tracing::debug!(reason = why.as_str(), "connection closed"),
        }
        if self.answers.is_empty() {
            Step::Close
        } else {
            Step::Dispatch
        }
    }
}

/// Offers the pending output to the transport, in one vectored write
/// when it is in several pieces (a large prepared body between a head and
/// a tail), or from an adapter's copy of a prepared body when the
/// transport can send from it; returns the write's result and how many
/// bytes were offered.
fn write_pending<W: Transport + ?Sized>(
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
        0 | 1 => (io.write(&slices[0]), slices[0].len()),
        n => (
            io.write_vectored(&slices[..n]),
            slices[..n].iter().map(|slice| slice.len()).sum(),
        ),
    }
}

/// The span, if a subscriber records it.
fn recorded(span: tracing::Span) -> Option<Box<tracing::Span>> {
    (!span.is_disabled()).then(|| Box::new(span))
}

/// The span of a connection, and its first event.
fn opened(peer: SocketAddr) -> tracing::Span {
    let span = tracing::debug_span!("connection", %peer);
    span.in_scope(|| tracing::debug!("connection opened"));
    span
}

#[cfg(test)]
mod tests;
