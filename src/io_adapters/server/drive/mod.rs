//! The server's drive step: every decision the runtimes share, once.
//!
//! See [`Driver`]. This is the one module of the server side that calls
//! the machine. Here: the [`Driver`], its settings and what the runtimes
//! call between steps (shutdown, the connection cap's idle close). The
//! rest, by concern:
//!
//! - `step`: [`Driver::step`], bytes and time between the transport and
//!   the machine, and what the runtime does next;
//! - `dispatch`: [`Driver::dispatch`], the machine's events handed to the
//!   application and its answers back;
//! - `receiving`: request content as it arrives, spooled or dropped (D19);
//! - `streamed`: replies whose content a reader gives (D19);
//! - `access`: the access log's records, each told once;
//! - `phase`: where the connection is in its life and why it closes,
//!   changed only by its `move_to_*` methods.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::http_line::FirstLine;
use super::metrics::Shard;
use super::{CloseCause, RequestInfo, ServerOptions, SpoolOptions};
use crate::io_adapters::Clock;
use crate::io_adapters::transport::IoMode;
use crate::machine::{Now, ServerConfig, ServerConnection};

mod access;
mod dispatch;
mod phase;
mod receiving;
mod step;
mod streamed;

use access::{Answer, SpareEchoes};
#[allow(unused_imports, reason = "the path the async runtime names it by")]
pub(crate) use dispatch::Deferred;
#[cfg(feature = "mio")]
pub(crate) use dispatch::Pending;
use phase::Phase;
use receiving::{Receiving, Taken};
use step::{Intake, Offer, PeerInput, Turn};
use streamed::Streaming;

/// Longest one blocking read or write may take: how soon a blocking
/// connection notices a shutdown when its timers are far off.
pub(crate) const BLOCKING_SLICE: Duration = Duration::from_millis(200);

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
/// A `Driver` owns one connection's machine, the glue to the [`Handler`](super::Handler)
/// and where the connection is in its life (serving, draining at
/// shutdown, lingering, closed). It reads the time through
/// [`ServerOptions::clock`], so a whole connection can run on simulated
/// time.
/// [`Driver::step`] moves bytes between a [`Transport`](crate::io_adapters::Transport) and the
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
    /// Where the connection is in its life, and why it closes once
    /// known: changed only by the `move_to_*` methods (phase.rs).
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
    /// The strings of records logged, emptied, for later requests'
    /// copies of their resources (D12); boxed, so that an idle connection
    /// stays small.
    spare_echoes: Option<Box<SpareEchoes>>,
    /// Output bytes of the responses logged as wholly sent: what was
    /// written beyond them belongs to the first one cut short.
    logged_bytes: u64,
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

#[derive(Debug, Clone)]
struct Settings {
    /// The machine's configuration, with request content streamed (D19).
    config: Arc<ServerConfig>,
    /// Where the time comes from.
    clock: Clock,
    /// Where request content is spooled (D19).
    spool: SpoolOptions,
    /// How long a graceful shutdown lets the exchanges under way finish.
    shutdown_timeout: Duration,
    /// Where these connections count, when the server keeps metrics: one
    /// worker's shard.
    metrics: Option<Arc<Shard>>,
}

impl ConnectionSettings {
    /// The settings of the connections `options` configure.
    pub fn new(options: &ServerOptions) -> ConnectionSettings {
        // The adapters stream request content (D19): small content is
        // gathered in memory and handed to the handler in the request as
        // usual; only large content reaches it as an upload.
        let mut config = options.config.clone();
        config.stream_content = true;
        let metrics = options.metrics.as_ref().map(|metrics| {
            metrics.watch(options);
            metrics.shard(0)
        });
        ConnectionSettings(Arc::new(Settings {
            config: Arc::new(config),
            clock: options.clock.clone(),
            spool: options.spool.clone(),
            shutdown_timeout: options.shutdown_timeout,
            metrics,
        }))
    }

    /// These settings for the connections of worker `worker` of an event
    /// loop server: they count in that worker's shard of the metrics, if
    /// the server keeps them.
    #[cfg(feature = "mio")]
    pub(crate) fn for_worker(&self, worker: usize, options: &ServerOptions) -> ConnectionSettings {
        match &options.metrics {
            Some(metrics) => ConnectionSettings(Arc::new(Settings {
                metrics: Some(metrics.shard(worker)),
                ..Settings::clone(&self.0)
            })),
            None => self.clone(),
        }
    }

    /// Counts a connection taken from the listener, if the server keeps
    /// metrics.
    #[inline]
    #[cfg(feature = "mio")]
    pub(crate) fn count_accepted(&self) {
        if let Some(metrics) = &self.0.metrics {
            metrics.accepted();
        }
    }

    /// Counts a connection closed before it had a drive step, if the
    /// server keeps metrics.
    #[cfg(feature = "mio")]
    pub(crate) fn count_unserved(&self, cause: CloseCause) {
        if let Some(metrics) = &self.0.metrics {
            metrics.closed(cause);
        }
    }

    /// Where these connections count, if the server keeps metrics.
    #[inline]
    fn metrics(&self) -> Option<&Shard> {
        self.0.metrics.as_deref()
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
        if let Some(metrics) = settings.metrics() {
            metrics.moved(None, Phase::new().state());
        }
        Driver {
            conn: ServerConnection::with_shared_config(Arc::clone(&settings.0.config), now),
            settings: settings.clone(),
            info: RequestInfo::new(peer),
            mode,
            phase: Phase::new(),
            input: PeerInput::Open,
            intake: Intake::Direct,
            first_line: FirstLine::default(),
            turn: Turn::default(),
            offer: Offer::Untried,
            timeout_ms: None,
            answers: VecDeque::new(),
            streaming: None,
            receiving: Receiving::Nothing,
            spare_echoes: None,
            logged_bytes: 0,
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

    /// No valid PROXY header arrived in time (D21): the connection is over
    /// before its first step, without a response.
    #[cfg(feature = "mio")]
    pub(crate) fn refuse_proxy_header(&mut self) {
        let _ = self.move_to_closed(CloseCause::NoProxyHeader, None);
    }

    /// Starts the graceful shutdown of this connection: it closes as soon
    /// as nothing is under way (at once when idle, or when it waits for
    /// the full request of a handshake), after finishing the exchange in
    /// progress otherwise, and at the latest when
    /// [`ServerOptions::shutdown_timeout`] has passed, whatever the peer
    /// does. Step again after calling it.
    pub fn shut_down(&mut self) {
        let _entered = self.span().entered();
        self.move_to_draining();
    }

    /// Whether the connection is between messages with nothing under way:
    /// no part of a message received (nor held as a possible HTTP line),
    /// no exchange open, nothing owed to the peer or to the access log,
    /// and not closing. At the connection cap, such a connection may be
    /// closed to admit a new one ([`close_idle`](Self::close_idle), D3).
    pub(crate) fn is_idle(&self) -> bool {
        matches!(self.phase, Phase::Serving { .. })
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
        self.move_to_lingering(CloseCause::MadeRoom, self.now().instant);
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
}

/// A connection its server drops before the drive step closed it (its
/// thread held by a handler past the shutdown's deadline) leaves the count
/// of open connections all the same.
impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(metrics) = self.settings.metrics()
            && let Some(state) = self.phase.state()
        {
            metrics.moved(Some(state), None);
            metrics.closed(CloseCause::Dropped);
        }
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
