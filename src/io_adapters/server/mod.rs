//! The servers: one application interface ([`Handler`]), one drive step
//! ([`Driver`]), three runtimes.
//!
//! | runtime | module | threads | connections at once |
//! |---|---|---|---|
//! | std | [`blocking`] | one per open connection (a warm pool of `workers`, more on demand) | `max_connections` |
//! | mio (feature `mio`, default) | `mio` | `workers` event loops | `max_connections` |
//! | io_uring (feature `uring`, Linux) | `uring` | `workers` event loops, one ring each | `max_connections` |
//! | tokio (feature `tokio`) | `tokio` | the runtime's | `max_connections` |
//!
//! Each runtime only performs the I/O [`Driver::step`] asks for; the
//! decisions (read? write? wait until when? linger? close?) are taken once,
//! there. Any [`Transport`](crate::io_adapters::Transport) can be served:
//! [`blocking::serve_connection`] takes a blocking one (a Unix socket, a
//! TLS stream), `tokio::serve_connection` any `AsyncRead + AsyncWrite`.
//!
//! Every TCP server binds with [`listen`] (a backlog of
//! [`LISTEN_BACKLOG`]; the mio and io_uring servers one socket per worker with
//! [`listen_group`], which the kernel balances), keeps at most [`ServerOptions::max_connections`]
//! open (at the cap, the connection idle longest is closed to admit a new
//! client; with none idle, new clients wait in the kernel's backlog, D3),
//! backs off and retries when it runs out of descriptors, and on shutdown
//! closes its listening socket at once, so that new clients are refused
//! rather than left waiting (the mio and io_uring servers' `hand_over` instead leaves
//! its sockets to the process that took them over). Every server runs at most [`ServerOptions::max_handlers`]
//! handler calls at once, and returns once
//! [`ServerOptions::shutdown_timeout`] has passed, whatever its handlers
//! still do.
//!
//! Every server counts what an operator watches (connections by state and
//! by why they closed, responses by status, their durations, bytes, the
//! content held) when given a [`ServerMetrics`] with
//! [`ServerOptions::with_metrics`]; off by default. See [`ServerMetrics`]
//! for the list and its Prometheus text.

use std::io;
use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::time::Duration;

use crate::io_adapters::Clock;
use crate::io_adapters::proxy_protocol::ProxiedPeer;
use crate::machine::ServerConfig;
use crate::message::{Method, Request, Response, StatusCode};

mod accepted;
pub mod blocking;
mod drive;
mod http_line;
mod metrics;
#[cfg(feature = "mio")]
pub mod mio;
mod places;
mod reply;
mod spool;
#[cfg(feature = "tokio")]
pub mod tokio;
#[cfg(all(feature = "uring", target_os = "linux"))]
pub mod uring;
#[cfg(any(feature = "mio", feature = "tokio"))]
mod watch;

pub use accepted::Accepted;
pub use drive::{ConnectionSettings, Driver, Step};
pub use metrics::{CloseCause, ConnectionState, MetricsSnapshot, ServerMetrics};

/// How long a graceful shutdown waits, by default, for the exchanges under
/// way before it closes what is still open
/// ([`ServerOptions::shutdown_timeout`]).
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);
pub use places::DEFAULT_MAX_HANDLERS;
#[cfg(any(feature = "mio", feature = "tokio"))]
pub(crate) use places::Enrolled;
#[cfg(feature = "mio")]
pub(crate) use places::Wake;
pub(crate) use places::{Bounded, Member, OpenSockets, Places, Roster, Told};
#[cfg(feature = "tower")]
pub(crate) use places::{Handing, Reached};
pub use reply::{Handled, Reply, ReplyFuture};
pub use spool::{SpoolOptions, Upload};

/// The backlog [`listen`] asks for: a burst of a thousand connects fits
/// (std's own is 128). The kernel may cap it (`somaxconn` on Linux).
pub const LISTEN_BACKLOG: i32 = 1024;

/// How long a server waits before accepting again after an accept failed
/// for lack of descriptors or memory: the open connections go on being
/// served meanwhile, and nothing spins.
pub(crate) const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// How often a server holding a client at the connection cap looks again
/// for an idle connection to close for it (D3), when none was idle or the
/// one asked declined: a connection closing ends the wait at once.
pub(crate) const ADMISSION_RETRY: Duration = Duration::from_millis(100);

/// Binds a TCP listener on the first address of `addr` that can be bound,
/// with a backlog of [`LISTEN_BACKLOG`] (and `SO_REUSEADDR` on Unix, so that
/// a restarted server can bind again at once).
pub fn listen(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no address to listen on");
    for addr in addr.to_socket_addrs()? {
        let bound = (|| {
            let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
            #[cfg(unix)]
            socket.set_reuse_address(true)?;
            socket.bind(&addr.into())?;
            socket.listen(LISTEN_BACKLOG)?;
            Ok::<TcpListener, io::Error>(socket.into())
        })();
        match bound {
            Ok(listener) => return Ok(listener),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Binds `count` TCP listeners on the same address of `addr`, each with
/// `SO_REUSEPORT`, so that the kernel spreads new connections across them
/// (Linux hashes each connection's addresses and ports to one of the
/// group): one per worker, as nginx's `reuseport` does, instead of one
/// socket whose waiting workers race for every connection. Port 0 is
/// resolved by the first bind and the others join it. Linux only, where
/// the group balances; elsewhere (and for a count of 1) it is one
/// [`listen`] socket.
///
/// A socket of a group that closes takes the connections waiting in its
/// own queue with it: close the group only as a whole (a shutdown does),
/// or hand its sockets over to a process that keeps them open.
pub fn listen_group(addr: impl ToSocketAddrs, count: usize) -> io::Result<Vec<TcpListener>> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if count > 1 {
        let mut last = io::Error::new(io::ErrorKind::InvalidInput, "no address to listen on");
        for addr in addr.to_socket_addrs()? {
            match bind_reuse_port(addr).and_then(|first| {
                let addr = first.local_addr()?;
                let mut group = vec![first];
                for _ in 1..count {
                    group.push(bind_reuse_port(addr)?);
                }
                Ok(group)
            }) {
                Ok(group) => return Ok(group),
                Err(e) => last = e,
            }
        }
        return Err(last);
    }
    let _ = count;
    Ok(vec![listen(addr)?])
}

/// One socket of a [`listen_group`].
#[cfg(any(target_os = "linux", target_os = "android"))]
fn bind_reuse_port(addr: SocketAddr) -> io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    socket.listen(LISTEN_BACKLOG)?;
    Ok(socket.into())
}

/// Stops `listener` listening at once, even while other handles to the
/// same socket (a worker's clone, a thread blocked in `accept`) are still
/// open: on Linux, shutting down a listening socket refuses new clients and
/// wakes `accept`. Elsewhere the servers also drop every handle promptly.
pub(crate) fn stop_listening(listener: &TcpListener) {
    let _ = socket2::SockRef::from(listener).shutdown(std::net::Shutdown::Both);
}

/// Whether an accept error leaves the listener usable: the client gave up
/// before we took it. Anything else (no descriptors, no memory) calls for
/// [`ACCEPT_BACKOFF`].
pub(crate) fn client_gave_up(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted
    )
}

/// Accept failures for lack of descriptors or memory come in bursts (each
/// retry fails until a connection closes): warned once when a burst starts,
/// and once when it ends, with its count, rather than once per retry.
#[derive(Debug, Default)]
pub(crate) struct AcceptFaults {
    failed: u64,
}

impl AcceptFaults {
    /// An accept failed for lack of resources: the server backs off.
    pub(crate) fn failed(&mut self, error: &io::Error) {
        if self.failed == 0 {
            tracing::warn!(
                %error,
                "cannot accept connections (out of descriptors or memory?): backing off, new clients wait in the backlog"
            );
        }
        self.failed += 1;
    }

    /// An accept succeeded: a burst of failures, if any, is over.
    pub(crate) fn accepted(&mut self) {
        if self.failed > 0 {
            tracing::warn!(failed_accepts = self.failed, "accepting connections again");
            self.failed = 0;
        }
    }
}

/// The peer a connection is served as, given how reading its PROXY header
/// went (D21): the client the header names, the socket's `peer` when it
/// names none (a proxy's own health check), `None` when the connection is
/// to be closed without a response (no valid header, or none in time).
pub(crate) fn proxied_peer(header: io::Result<ProxiedPeer>, peer: SocketAddr) -> Option<SocketAddr> {
    match header {
        Ok(ProxiedPeer::Client(client)) => Some(client),
        Ok(ProxiedPeer::Unknown) => Some(peer),
        Err(error) => {
            tracing::debug!(%peer, %error, "no valid PROXY header: closed without a response");
            None
        }
    }
}

/// What an adapter knows about a request besides the message itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestInfo {
    /// The peer's address.
    pub peer: SocketAddr,
}

impl RequestInfo {
    /// Information about a request from `peer`.
    pub fn new(peer: SocketAddr) -> Self {
        RequestInfo { peer }
    }
}

/// A complete, valid request as a server hands it to an application
/// served as a service ([`jsontp_protocol::app::Router`](crate::app::Router), or any
/// `tower::Service` on the tokio server): the request, its content when it
/// was too large to hold in memory (then the body's own content is empty,
/// D19), and what the server knows about it.
#[derive(Debug)]
#[non_exhaustive]
pub struct Incoming {
    /// The request (boxed: it moves from the connection to the handler
    /// without a copy).
    pub request: Box<Request>,
    /// The request's content, spooled to a temporary file, when it was
    /// larger than [`SpoolOptions::memory_limit`], or arrived while the
    /// server's memory for content was in use ([`SpoolOptions::max_memory`]).
    pub upload: Option<Upload>,
    /// Who asked.
    pub info: RequestInfo,
    /// How far the request got into the application, and the server's
    /// places for blocking handlers: a router takes a place before it runs
    /// one, and the server's answer to a service's error says whether a
    /// handler may have begun (D13).
    #[cfg(feature = "tower")]
    pub(crate) handing: Handing,
}

impl Incoming {
    /// `request`, its content in its body, from the peer `info` names.
    pub fn new(request: impl Into<Box<Request>>, info: RequestInfo) -> Incoming {
        Incoming {
            request: request.into(),
            upload: None,
            info,
            #[cfg(feature = "tower")]
            handing: Handing::default(),
        }
    }

    /// Sets the spooled content (builder style).
    pub fn with_upload(mut self, upload: Option<Upload>) -> Incoming {
        self.upload = upload;
        self
    }

    /// The request with its whole content in its body, for an application
    /// that takes requests whole. Content spooled because it was large is
    /// refused with `413`, the answer to give (a
    /// [`Router`](crate::app::Router) gives such content to its handlers
    /// as a stream instead). Content within the memory limit is spooled
    /// only when the server's memory for content was in use
    /// ([`SpoolOptions::max_memory`]): it is read back into the request
    /// (the server's handler places bound that memory,
    /// [`ServerOptions::max_handlers`]); failing that, the answer is `500`.
    // The refusal is the rare way out; boxing it would cost every request.
    #[allow(clippy::result_large_err)]
    pub fn into_request(self) -> Result<Box<Request>, Response> {
        let Incoming {
            mut request, upload, ..
        } = self;
        match upload {
            None => Ok(request),
            Some(upload) if upload.is_small() => match read_back(&mut request, &upload) {
                Ok(()) => Ok(request),
                Err(error) => {
                    tracing::error!(%error, "cannot read back the request's spooled content; answering 500");
                    Err(Response::new(crate::message::Status::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("the server could not read the request's content back: {error}"),
                    )))
                }
            },
            Some(upload) => {
                // Said to the operator: the client only learns it was too much.
                tracing::warn!(
                    bytes = upload.len(),
                    "large content reached a handler that takes requests whole (413): take the \
                     Incoming's upload, or serve a jsontp_protocol::app::Router, whose handlers take it as Content"
                );
                Err(Response::new(crate::message::Status::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!(
                        "the content ({} bytes) is more than this server takes in memory",
                        upload.len()
                    ),
                )))
            }
        }
    }
}

/// One response, as an access log sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AccessRecord<'a> {
    /// Who asked.
    pub peer: SocketAddr,
    /// The request's method; `None` when the connection refused the message
    /// before it was a valid request (D5 levels 1–4).
    pub method: Option<Method>,
    /// The `resource` string as the response echoes it (`""` when it could
    /// not be read, D12).
    pub resource: &'a str,
    /// The status of the response.
    pub status: StatusCode,
    /// Size of the response's decoded content, in bytes (for a streamed
    /// reply, what its reader gave, D19).
    pub content_bytes: u64,
    /// From the moment the request was complete (or refused) to the
    /// response's last byte taken by the peer, or to the connection's end
    /// when it ended first: the handler's time and the transfer's, as
    /// nginx's `$request_time` counts.
    pub elapsed: Duration,
    /// Bytes of the response the peer took: the whole JSON message (and the
    /// interim `100` before it, if any) when [`complete`](Self::complete).
    pub bytes_written: u64,
    /// Whether the peer took the whole response. `false` when the
    /// connection ended first (the peer left mid-download, a reset, a
    /// stall): a transfer cut short, not a success, whatever the status.
    /// A request whose peer left while its answer was awaited (an `async`
    /// answer on tokio, cancelled then) is recorded `503`, not complete,
    /// nothing written: it was never answered.
    pub complete: bool,
}

/// What becomes of a request's content, decided from its head before any
/// of the content is stored ([`Handler::check_head`], D10, D19).
///
/// Whatever the decision, the content is still read to the message's end
/// and checked as the protocol requires, within the same content limit
/// (D5: a corrupt stream is still `400`, content past the limit still
/// `413`); the decision only says where it goes.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HeadCheck {
    /// The answer may depend on the content: it is kept (in the request,
    /// or spooled as an [`Upload`] when large) and handed to
    /// [`Handler::respond`] with the request.
    Wanted,
    /// The answer does not depend on the content (a file server's `GET`):
    /// each piece is dropped once checked, nothing is stored, and
    /// [`Handler::respond`] gets the request with empty content.
    Unwanted,
    /// The request is refused whatever its content (`401`, `404`, `405`,
    /// …): the first request of a handshake gets this answer at once; any
    /// other gets it once its message has ended, its content dropped piece
    /// by piece as it is checked. [`Handler::respond`] is not asked.
    Refused(Box<Response>),
}

impl HeadCheck {
    /// The answer of a refusal; `None` when the request goes on.
    pub fn refusal(self) -> Option<Response> {
        match self {
            HeadCheck::Refused(answer) => Some(*answer),
            HeadCheck::Wanted | HeadCheck::Unwanted => None,
        }
    }
}

/// The application: answers requests. The one seam between every server
/// (std, mio, tokio, a tower service's hooks) and what it serves.
///
/// Any `Fn(&Request) -> Response + Send + Sync` is a handler. A
/// [`Router`](crate::app::Router) is one, whatever its handlers are
/// (synchronous or `async`, whole or streamed answers). Implement the
/// trait to own each request, to answer later (`async`), to decide from a
/// request's head what becomes of its content
/// ([`check_head`](Self::check_head), D10, D19), or to keep an access log.
pub trait Handler: Send + Sync + 'static {
    /// Answers a complete, valid request, which it owns: its content is in
    /// `incoming.request.body`, or, when it was too large to hold in memory
    /// ([`SpoolOptions::memory_limit`]), spooled to a temporary file in
    /// `incoming.upload` (D19). Protocol errors never get here: the
    /// connection answers them itself (D5 levels 1–4).
    ///
    /// Called where it may block (a std connection's thread, a mio or
    /// io_uring worker, tokio's blocking pool, in one of the server's
    /// handler places, [`ServerOptions::max_handlers`]), though on a mio
    /// or io_uring worker it holds the worker's other connections until it
    /// returns. An `async` answer is [`Handled::Later`]: it takes no place
    /// and holds no thread while it waits.
    fn respond(&self, incoming: Incoming) -> Handled;

    /// Decides, from a request's head (every field but its content), what
    /// becomes of the content: [`HeadCheck::Wanted`] (the default),
    /// [`HeadCheck::Unwanted`], or [`HeadCheck::Refused`] with the answer.
    ///
    /// The one rule: every server (std, mio, tokio, a tower service's
    /// hooks) asks it at most once per exchange, about each request with
    /// content, before any of the content is stored:
    /// - the first request of a 100-continue handshake, with
    ///   [`ContinuePolicy::Ask`](crate::machine::ContinuePolicy::Ask)
    ///   (D10): refused, it gets the answer at once and the client never
    ///   sends its content; otherwise it is acknowledged with `100`, and
    ///   the full request's content is kept or dropped as decided here.
    ///   The full request is not asked about again: it names the same
    ///   method and resource (or is `400`, D10), and headers it adds or
    ///   changes reach [`respond`](Self::respond) with it, without
    ///   reopening the decision;
    /// - any other request with content (D19): asked when the content
    ///   starts if `body` is written last and `content` last in it, as
    ///   streaming senders write it; otherwise, the content held within
    ///   the message limit, when the message has ended. Either way before
    ///   any of the content is stored. This includes the full request of
    ///   a handshake that
    ///   [`ContinuePolicy::AutoAccept`](crate::machine::ContinuePolicy::AutoAccept)
    ///   acknowledged without asking: refused here, its content is
    ///   dropped and the refusal answers it, though the `100` went out.
    ///
    /// A request without content, or whose head the server refuses itself
    /// (D5 levels 1 to 4), is not asked about. Only what does not need the
    /// content may decide here (D5 levels 5 and 6), since the content is
    /// still read and checked (a corrupt one is `400`, one past the limit
    /// `413`, whatever was decided) and a refusal answers once the message
    /// has ended. A refused request never reaches
    /// [`respond`](Self::respond).
    fn check_head(&self, head: &Request, info: &RequestInfo) -> HeadCheck {
        let _ = (head, info);
        HeadCheck::Wanted
    }

    /// Told about every response once its last byte has been taken by the
    /// peer, or once the connection ended before it could be
    /// ([`AccessRecord::complete`] is then `false`), the connection's own
    /// error responses included: the hook for an access log. Does nothing by
    /// default.
    fn log_exchange(&self, record: &AccessRecord<'_>) {
        let _ = record;
    }
}

/// A function of the whole request ([`Incoming::into_request`]).
impl<F> Handler for F
where
    F: Fn(&Request) -> Response + Send + Sync + 'static,
{
    fn respond(&self, incoming: Incoming) -> Handled {
        match incoming.into_request() {
            Ok(request) => self(&request).into(),
            Err(refused) => refused.into(),
        }
    }
}

/// Puts the content of `upload`, which it was spooled from, back into `request`.
fn read_back(request: &mut Request, upload: &Upload) -> io::Result<()> {
    let mut content = Vec::with_capacity(usize::try_from(upload.len()).unwrap_or(0));
    io::Read::read_to_end(&mut upload.reader()?, &mut content)?;
    request.body.replace_content(content);
    Ok(())
}

/// How a server runs: the connection configuration, its threads, and how
/// many connections it keeps open at once.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerOptions {
    /// Serve TLS (D20) with these settings instead of plain TCP: every
    /// runtime wraps each accepted connection ([`Accepted`]). A failed
    /// handshake closes that connection only.
    #[cfg(feature = "tls")]
    pub tls: Option<crate::io_adapters::tls::ServerTls>,
    /// The configuration of every connection (limits, timeouts, 100-continue
    /// policy, default language).
    pub config: ServerConfig,
    /// Worker threads; `0` means one per core
    /// ([`std::thread::available_parallelism`]). The mio server runs this
    /// many event loops; the std server keeps this many threads ready and
    /// starts more when every one is busy. Tokio uses its runtime's.
    pub workers: usize,
    /// Connections open at once, at most (D3: 10,000 by default).
    ///
    /// At the cap, a new client is taken from the backlog and held,
    /// unserved, while the connection idle longest (between messages,
    /// nothing under way, nothing owed to its peer) is closed as its idle
    /// timeout would close it: without a response, our side shut and its
    /// input drained for a moment. The new client is served once it is
    /// gone, as nginx reuses idle keep-alive connections when it runs out.
    /// A connection with an exchange under way is never closed for
    /// another: with none idle, the new client waits (and the others in
    /// the kernel's backlog) until a connection closes or becomes idle. So
    /// idle connections, however many a peer keeps, never keep a new
    /// client out. Each acceptor (a mio worker; the std and tokio
    /// servers' one) holds at most one client so.
    ///
    /// There is no share per address: behind a load balancer without the
    /// PROXY protocol, and in a benchmark from one host, every peer is one
    /// address, and such a share would cap the whole server.
    pub max_connections: usize,
    /// Expect the PROXY protocol header (version 1 or 2) at the start of
    /// every connection, as a TCP load balancer sends it, and take the
    /// client's address from it ([`RequestInfo::peer`], access records). A
    /// connection without a valid header, or whose header does not arrive
    /// within the message timeout (D3), is closed without a response (D21).
    /// Off by default: a header is then bytes where a message must start
    /// (`400` and close, D1).
    pub proxy_protocol: bool,
    /// Where request content is spooled while it arrives (D19).
    pub spool: SpoolOptions,
    /// How long a graceful shutdown lets the exchanges under way finish:
    /// past it, the connections still open are closed, whatever their
    /// peers do or their handlers still do, and the server returns. 30 s
    /// by default.
    ///
    /// A handler still running then runs on to its end on its thread (a
    /// blocking call cannot be stopped from outside), but nothing it
    /// answers is sent: its connection is closed. Whether its work is
    /// kept is the application's business, as after a crash; a process
    /// that exits once the server returns ends it there.
    pub shutdown_timeout: Duration,
    /// Handler calls running at once, at most, per server
    /// ([`DEFAULT_MAX_HANDLERS`] by default); a request waits for a place
    /// before its handler is called. A handler that cannot be stopped (any
    /// synchronous one) keeps its place until its work has really ended,
    /// whatever timeout gave up on it meanwhile, so the bound holds.
    ///
    /// - std: the connection's thread waits for a place.
    /// - mio: each worker runs one handler at a time, so the bound is the
    ///   smaller of this and [`workers`](Self::workers).
    /// - tokio, `serve`: each trip of a connection to the
    ///   blocking pool (parsing and its handler) takes a place.
    /// - tokio, `serve_service`: a [`Router`](crate::app::Router) takes a
    ///   place for each synchronous handler it runs on the blocking pool;
    ///   `async` handlers take none (they are cancelled when dropped: bound
    ///   them with tower's `concurrency_limit`).
    ///
    /// A request still waiting for a place when a shutdown's drain
    /// deadline passes is never handed to its handler; under tower, a
    /// timeout or a peer gone while it waits drops it unhandled too, and
    /// its answer is `503` (D13).
    pub max_handlers: usize,
    /// Where the connections read the time: the system's clocks by
    /// default; a simulation gives its own ([`Clock::from_fn`]).
    pub clock: Clock,
    /// Where the server counts what an operator watches (see
    /// [`ServerMetrics`]); `None`, the default, counts nothing. Options
    /// compare equal when they share the same counters.
    pub metrics: Option<ServerMetrics>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            config: ServerConfig::default(),
            #[cfg(feature = "tls")]
            tls: None,
            workers: 0,
            max_connections: 10_000,
            proxy_protocol: false,
            spool: SpoolOptions::default(),
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            max_handlers: DEFAULT_MAX_HANDLERS,
            clock: Clock::system(),
            metrics: None,
        }
    }
}

impl ServerOptions {
    /// Sets the connection configuration (builder style).
    pub fn with_config(mut self, config: ServerConfig) -> Self {
        self.config = config;
        self
    }

    /// Serves TLS with `tls` (builder style, D20).
    #[cfg(feature = "tls")]
    pub fn with_tls(mut self, tls: crate::io_adapters::tls::ServerTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Sets the number of workers (builder style); `0` means one per core.
    pub fn with_workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// Sets the most connections open at once (builder style); at least 1.
    pub fn with_max_connections(mut self, max: usize) -> Self {
        self.max_connections = max.max(1);
        self
    }

    /// Expects a PROXY protocol header on every connection (builder style,
    /// D21); see [`proxy_protocol`](Self::proxy_protocol).
    pub fn with_proxy_protocol(mut self, on: bool) -> Self {
        self.proxy_protocol = on;
        self
    }

    /// Sets the drain deadline of a graceful shutdown (builder style).
    pub fn with_shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// Sets the most handler calls running at once (builder style); at
    /// least 1. See [`max_handlers`](Self::max_handlers).
    pub fn with_max_handlers(mut self, max: usize) -> Self {
        self.max_handlers = max.max(1);
        self
    }

    /// Sets where the connections read the time (builder style).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Sets where request content is spooled (builder style, D19).
    pub fn with_spool(mut self, spool: SpoolOptions) -> Self {
        self.spool = spool;
        self
    }

    /// Counts into `metrics` (builder style); keep a clone of it to read
    /// ([`ServerMetrics::snapshot`], [`ServerMetrics::encode`]).
    pub fn with_metrics(mut self, metrics: ServerMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The number of workers to start: `workers`, or the number of cores.
    pub fn worker_count(&self) -> usize {
        if self.workers > 0 {
            self.workers
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}
