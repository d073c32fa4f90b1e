//! The tokio server (feature `tokio`).
//!
//! [`serve`] accepts from a tokio listener and runs [`serve_connection`]
//! for each client; [`serve_connection`] runs one connection over any
//! `AsyncRead + AsyncWrite` stream (TCP, a Unix socket, a TLS stream). The
//! connection is the same [`Driver`] as on the std and mio servers, polled
//! through the stream: tokio's `Pending` is the driver's `WouldBlock`.
//!
//! A [`Handler`] is synchronous (`fn handle(&self, …) -> Response`) and
//! may block (the file server reads files), so it runs on tokio's blocking
//! pool with `spawn_blocking`, never on a runtime worker, in one of the
//! server's handler places ([`ServerOptions::max_handlers`]). With the feature
//! `tower`, [`serve_service`] serves any `tower::Service` of
//! [`Incoming`] requests instead (a
//! [`Router`](crate::app::Router) with `async` handlers, wrapped in tower's
//! layers), whose futures are awaited on the runtime, beside the hooks a
//! handler would have (the check of a request's head before its content,
//! the access log). The requests of one connection are answered one after
//! the other, which keeps the responses in request order (D2) without
//! buffering them.
//!
//! # Shutdown and blocking work
//!
//! [`serve`] and [`serve_service`] return once
//! [`ServerOptions::shutdown_timeout`] has passed, whatever the handlers
//! still do: an answer still awaited then is dropped with its connection.
//! A blocking handler cannot be stopped, so it runs on to its end on the
//! blocking pool (its answer discarded), and a tokio `Runtime` dropped
//! after `serve` returns waits for it, as `#[tokio::main]` does. A program
//! that must exit at the deadline ends its runtime without that wait:
//!
//! ```no_run
//! # fn demo(serve: impl std::future::Future<Output = std::io::Result<()>>) -> std::io::Result<()> {
//! let runtime = tokio::runtime::Runtime::new()?;
//! let served = runtime.block_on(serve);
//! // Handlers still running are the application's business (their work
//! // may or may not be kept); the process does not wait for them.
//! runtime.shutdown_background();
//! served
//! # }
//! ```

use std::future::{Future, poll_fn};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::sync::{Notify, Semaphore};
use tokio::task::JoinSet;

use super::{
    ACCEPT_BACKOFF, ADMISSION_RETRY, AcceptFaults, CloseCause, Driver, Enrolled, Handler, Roster,
    ServerOptions, Step, Told, client_gave_up,
};
#[cfg(feature = "tower")]
use super::{Incoming, Reply};
use crate::io_adapters::proxy_protocol::{ProxiedPeer, ProxyHeaderReader};
use crate::io_adapters::transport::{IoMode, PolledIo, PolledSendCopy, no_copy, park};

mod app;
mod watched;

#[cfg(feature = "tower")]
pub use app::AcceptAll;
use app::{App, Dispatch, Dispatched, Trips};
use watched::{KernelWrites, Watched};

const READ_CHUNK: usize = 16 * 1024;

/// Serves `handler` on every connection `listener` accepts, until `shutdown`
/// completes.
///
/// `options.config` configures every connection (limits and timeouts, D3;
/// the 100-continue policy, D10: [`Handler::check_head`] is asked about a
/// handshake only with
/// [`ContinuePolicy::Ask`](crate::machine::ContinuePolicy::Ask)); at
/// most `options.max_connections` are open at once: at the cap the one
/// idle longest is closed to admit a new client, and with none idle the
/// rest wait in the backlog
/// ([`ServerOptions::max_connections`](super::ServerOptions::max_connections)).
/// `options.workers` is not used: the runtime's threads serve.
/// Bind the listener with [`listen`](super::listen) for a larger backlog.
///
/// Each trip of a connection to the blocking pool (parsing and its
/// handler) takes one of `options.max_handlers` places, shared by the
/// server's connections, and keeps it until the handler has returned.
///
/// At shutdown the listener is closed at once (new clients are refused);
/// idle connections and those awaiting the full request of a handshake
/// close; a connection with an exchange under way finishes it, writes the
/// response and closes, bounded by the machine's timers (D3) and by
/// `options.shutdown_timeout`, handlers included (see the
/// [module](self#shutdown-and-blocking-work)). Returns once all are gone.
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// use jsontp_protocol::io_adapters::server::{ServerOptions, listen};
/// use jsontp_protocol::io_adapters::server::tokio::serve;
/// use jsontp_protocol::message::{Body, Request, Response, Status, StatusCode};
///
/// let listener = listen("127.0.0.1:8080")?;
/// listener.set_nonblocking(true)?;
/// let listener = tokio::net::TcpListener::from_std(listener)?;
/// let hello = |request: &Request| {
///     Response::new(Status::new(StatusCode::OK, "here it is"))
///         .with_body(Body::text("hello"))
/// };
/// serve(listener, hello, ServerOptions::default(), async {
///     let _ = tokio::signal::ctrl_c().await;
/// })
/// .await
/// # }
/// ```
pub async fn serve<H, S>(
    listener: TcpListener,
    handler: H,
    options: ServerOptions,
    shutdown: S,
) -> io::Result<()>
where
    H: Handler,
    S: Future<Output = ()>,
{
    let app = App {
        handler: Arc::new(handler),
        places: places(&options),
        trips: Trips::InPlace,
    };
    accept_loop(listener, app, options, shutdown).await
}

/// Serves `service` on every connection `listener` accepts, until
/// `shutdown` completes (feature `tower`): as [`serve`] does a handler,
/// with the same options, limits and shutdown.
///
/// `hooks` is asked what a server asks a handler besides its answers:
/// [`Handler::check_head`], whenever a request's head is known before its
/// content (a 100-continue handshake under
/// [`ContinuePolicy::Ask`](crate::machine::ContinuePolicy::Ask), D10; a
/// request whose content streams in, D19), and [`Handler::log_exchange`],
/// once each response has left. Its `handle` and `respond` are never
/// called: the service answers. Serving a
/// [`Router`](crate::app::Router) behind layers, give the router itself
/// (a clone shares its routes): it then refuses what it would refuse
/// whatever the content (`404`, `405`) before the content is sent or
/// stored, as on the std and mio servers. A service with nothing to check
/// before its content gives [`AcceptAll`].
///
/// Each connection gets a clone of `service`, and calls it once per
/// request, in order (D2): it waits for [`poll_ready`], then awaits the
/// answer on the runtime's own threads, so the service's futures must not
/// block (a [`Router`](crate::app::Router) runs its synchronous handlers on
/// the blocking pool itself, each in one of `options.max_handlers`
/// places). Parsing stays on the blocking pool.
///
/// While it awaits the answer, the connection is read: what the peer
/// sends meanwhile (its next requests) is kept for later, and a peer that
/// resets the connection, or closes it, is gone: the answer's future is
/// dropped, which cancels an `async` handler (a blocking one runs on to
/// its end, in its place), and the access record shows the request
/// unanswered (`503`, not complete). An end of stream may also be a
/// half-close, whose peer still gets its answers (D1): to tell them apart,
/// the server writes a newline now and then (whitespace between messages,
/// D1), which fails once a peer that left has reset the connection. The
/// same holds for a handler's `async` answer on [`serve`].
///
/// An error from the service, or a future that panics, is answered
/// without the application (D13); the connection goes on:
///
/// | what happened | answer |
/// |---|---|
/// | tower's load shedding (`Overloaded`) | `503`, try again later |
/// | tower's timeout while a router's request waited for a handler place | `503`, try again later: no handler had it |
/// | tower's timeout once a handler, or a service of your own, had it | `504`: the server stopped waiting; the request may or may not have been applied |
/// | any other error, a panic | `500` (the error goes to the log) |
///
/// So tower's layers apply unchanged:
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// use std::time::Duration;
/// use jsontp_protocol::app::{Router, get};
/// use jsontp_protocol::io_adapters::server::{ServerOptions, listen};
/// use jsontp_protocol::io_adapters::server::tokio::serve_service;
///
/// async fn hello() -> &'static str {
///     "hello"
/// }
///
/// let router = Router::new().route("/hello", get(hello));
/// let service = tower::ServiceBuilder::new()
///     .timeout(Duration::from_secs(5))
///     .service(router.clone());
/// let listener = listen("127.0.0.1:8080")?;
/// listener.set_nonblocking(true)?;
/// let listener = tokio::net::TcpListener::from_std(listener)?;
/// // The router's own checks and log, around the layers' calls.
/// serve_service(listener, service, router, ServerOptions::default(), async {
///     let _ = tokio::signal::ctrl_c().await;
/// })
/// .await
/// # }
/// ```
///
/// [`poll_ready`]: tower::Service::poll_ready
#[cfg(feature = "tower")]
pub async fn serve_service<T, H, S>(
    listener: TcpListener,
    service: T,
    hooks: H,
    options: ServerOptions,
    shutdown: S,
) -> io::Result<()>
where
    T: tower::Service<Incoming> + Clone + Send + 'static,
    T::Response: Into<Reply>,
    T::Error: Into<BoxError>,
    T::Future: Send,
    H: Handler,
    S: Future<Output = ()>,
{
    let app = App::serving(service, Arc::new(hooks), places(&options));
    accept_loop(listener, app, options, shutdown).await
}

/// The handler places of a server (or of one connection served alone).
fn places(options: &ServerOptions) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(
        options.max_handlers.clamp(1, Semaphore::MAX_PERMITS),
    ))
}

/// The error of a service, as tower boxes it.
#[cfg(feature = "tower")]
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Accepts and serves connections with `app`, until `shutdown`.
async fn accept_loop<A, S>(
    listener: TcpListener,
    app: A,
    options: ServerOptions,
    shutdown: S,
) -> io::Result<()>
where
    A: Dispatch + Clone,
    S: Future<Output = ()>,
{
    let max = options.max_connections.max(1);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut accept_faults = AcceptFaults::default();
    if let Some(metrics) = &options.metrics {
        metrics.watch(&options);
    }
    let roster: Arc<Roster<Notify>> = Arc::default();
    // The client accepted last, until there is room for it: at the cap it
    // is held while the connection idle longest, `asked`, closes (D3).
    let mut held: Option<(tokio::net::TcpStream, SocketAddr)> = None;
    let mut asked = None;
    loop {
        if connections.len() < max
            && let Some((stream, peer)) = held.take()
        {
            let (app, stop) = (app.clone(), stop_rx.clone());
            let member = roster.enroll(Notify::new());
            connections.spawn(serve_accepted(stream, peer, app, options.clone(), stop, member));
        }
        if held.is_some() {
            // Looked at again when a connection ends, or after a while.
            roster.make_room(&mut asked);
        }
        tokio::select! {
            () = &mut shutdown => break,
            // At the cap, a client is taken and held until there is room.
            accepted = listener.accept(), if held.is_none() => match accepted {
                Ok((stream, peer)) => {
                    accept_faults.accepted();
                    if let Some(metrics) = &options.metrics {
                        metrics.count_accepted();
                    }
                    // Responses are written whole: Nagle would only delay
                    // them. A failure costs latency, not correctness.
                    let _ = stream.set_nodelay(true);
                    held = Some((stream, peer));
                }
                Err(e) if client_gave_up(&e) => {}
                // Out of descriptors or similar: back off instead of
                // spinning, and keep serving the open connections.
                Err(e) => {
                    accept_faults.failed(&e);
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            // Reap finished connections: the set counts the open ones.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            () = tokio::time::sleep(ADMISSION_RETRY), if held.is_some() => {}
        }
    }
    // New clients are refused from here on.
    drop(listener);
    if held.is_some()
        && let Some(metrics) = &options.metrics
    {
        metrics.count_unserved(CloseCause::Shutdown);
    }
    // Receivers only look for the change; a send error means none is left.
    let _ = stop_tx.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Serves one connection over `stream` until it closes. `options.config`
/// configures it; handlers run on the blocking pool, within
/// `options.max_handlers` places of this connection's own (a server's
/// connections share theirs: [`serve`]).
pub fn serve_connection<S, H>(
    stream: S,
    peer: SocketAddr,
    handler: Arc<H>,
    options: &ServerOptions,
) -> impl Future<Output = ()> + Send + 'static
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Handler,
{
    let app = App {
        handler,
        places: places(options),
        trips: Trips::InPlace,
    };
    run_alone(stream, peer, app, options.clone())
}

/// Serves one connection over `stream` with `service`, and `hooks` for
/// what is decided around its calls, until it closes (feature `tower`);
/// see [`serve_service`]. The connection has `options.max_handlers`
/// places of its own.
#[cfg(feature = "tower")]
pub fn serve_service_connection<S, T, H>(
    stream: S,
    peer: SocketAddr,
    service: T,
    hooks: Arc<H>,
    options: &ServerOptions,
) -> impl Future<Output = ()> + Send + 'static
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    T: tower::Service<Incoming> + Clone + Send + 'static,
    T::Response: Into<Reply>,
    T::Error: Into<BoxError>,
    T::Future: Send,
    H: Handler,
{
    let app = App::serving(service, hooks, places(options));
    run_alone(stream, peer, app, options.clone())
}

/// Serves an accepted connection: reads its PROXY header first when the
/// options ask for one (D21), then TLS or plain TCP.
async fn serve_accepted<A: Dispatch>(
    mut stream: tokio::net::TcpStream,
    mut peer: SocketAddr,
    app: A,
    options: ServerOptions,
    mut stop: watch::Receiver<bool>,
    member: Enrolled<Notify>,
) {
    if options.proxy_protocol {
        let limit = options.config.limits.message_timeout;
        let header = tokio::select! {
            read = tokio::time::timeout(limit, read_proxy_header(&mut stream)) => {
                read.unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
            }
            // A header still awaited does not delay a shutdown.
            _ = stop.wait_for(|stopping| *stopping) => Err(io::ErrorKind::Interrupted.into()),
        };
        match super::proxied_peer(header, peer) {
            Some(client) => peer = client,
            None => {
                if let Some(metrics) = &options.metrics {
                    metrics.count_unserved(CloseCause::NoProxyHeader);
                }
                return;
            }
        }
    }
    #[cfg(feature = "tls")]
    if let Some(tls) = options.tls.clone() {
        return run_tls(tls, stream, peer, app, options, stop, member).await;
    }
    run(
        KernelWrites(stream),
        peer,
        app,
        options,
        Some(stop),
        Some(&member),
        (KernelWrites::acknowledged, KernelWrites::send_copy),
    )
    .await;
}

/// Reads a PROXY header from `stream`, never past it.
async fn read_proxy_header(stream: &mut tokio::net::TcpStream) -> io::Result<ProxiedPeer> {
    use tokio::io::AsyncReadExt;
    let mut reader = ProxyHeaderReader::new();
    let mut chunk = [0; 128];
    loop {
        let want = reader.wanted().min(chunk.len());
        let n = stream.read(&mut chunk[..want]).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if let Some(peer) = reader.feed(&chunk[..n])? {
            return Ok(peer);
        }
    }
}

/// Runs the TLS handshake (D20), then the connection over the TLS stream.
/// The handshake is bounded by the idle timeout (D3), as the first request
/// would be, and ends at shutdown like an idle connection; one that fails
/// or times out closes this connection only.
#[cfg(feature = "tls")]
async fn run_tls<A: Dispatch>(
    tls: crate::io_adapters::tls::ServerTls,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    app: A,
    options: ServerOptions,
    mut stop: watch::Receiver<bool>,
    member: Enrolled<Notify>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config());
    let limit = options.config.idle_timeout;
    // The session's records go out through the same kernel-asking writes
    // as plain TCP: a slow, steady reader is not a stalled one (D3).
    let handshake = tokio::time::timeout(limit, acceptor.accept(KernelWrites(stream)));
    let shaken = tokio::select! {
        shaken = handshake => Ok(shaken),
        _ = stop.wait_for(|stopping| *stopping) => Err(CloseCause::Shutdown),
    };
    // Counted as the drive step counts the same ends of a handshake run
    // inside it (the std and mio servers).
    let shaken = shaken.and_then(|timed| timed.map_err(|_| CloseCause::IdleTimeout));
    let shaken = shaken.and_then(|done| done.map_err(|_| CloseCause::TransportFailed));
    if let (Err(cause), Some(metrics)) = (&shaken, &options.metrics) {
        metrics.count_unserved(*cause);
    }
    if let Ok(stream) = shaken {
        use crate::io_adapters::tls::TokioTlsStream;
        let stream = TokioTlsStream::new(stream.into());
        // The socket's count, in ciphertext; records the session still
        // keeps are held too.
        let acknowledged = |tls: &TokioTlsStream<KernelWrites>| {
            let (socket, session) = tls.get_ref().get_ref();
            let told = socket.acknowledged()?;
            Some(crate::machine::Acknowledged {
                holds_more: told.holds_more || session.wants_write(),
                ..told
            })
        };
        run(
            stream,
            peer,
            app,
            options,
            Some(stop),
            Some(&member),
            // Records are encrypted from memory: no copy to send from.
            (acknowledged, no_copy),
        )
        .await;
    }
}

enum Turn {
    Step(Step),
    Stop,
    /// The connection cap asked the connection to close (D3): the next
    /// step answers.
    Asked,
}

/// What a connection asks of its stream's concrete type, for
/// [`PolledIo`]: what the peer acknowledged, and a send from an adapter's
/// copy.
type StreamCalls<S> = (fn(&S) -> Option<crate::machine::Acknowledged>, PolledSendCopy<S>);

/// [`run`] for a connection the program hands over itself: no server
/// stop to watch, no place in a roster, nothing asked of the kernel about
/// the stream.
async fn run_alone<S, A>(stream: S, peer: SocketAddr, app: A, options: ServerOptions)
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
    A: Dispatch,
{
    run(stream, peer, app, options, None, None, (|_| None, no_copy)).await
}

/// Performs what the drive step asks, from accept to close.
async fn run<S, A>(
    stream: S,
    peer: SocketAddr,
    mut app: A,
    options: ServerOptions,
    mut stop: Option<watch::Receiver<bool>>,
    member: Option<&Enrolled<Notify>>,
    (acknowledged, send_copy): StreamCalls<S>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send,
    A: Dispatch,
{
    let mut stream = Watched::new(stream, acknowledged, send_copy);
    // Parsing runs with the handler on the blocking pool: the runtime's
    // threads only move bytes, and stay quick to notice new clients.
    let mut driver = Driver::new(peer, &options, IoMode::NonBlocking).parse_in_dispatch();
    let mut scratch = vec![0u8; READ_CHUNK];
    let mut timer = Box::pin(tokio::time::sleep(std::time::Duration::ZERO));
    // When a graceful shutdown must be over, once one has begun.
    let mut drain_until = None;
    if stop.as_ref().is_some_and(|stop| *stop.borrow()) {
        drain_until = Some(tokio::time::Instant::now() + options.shutdown_timeout);
        driver.shut_down();
    }
    loop {
        let step = poll_fn(|cx| {
            loop {
                let mut io = PolledIo {
                    io: &mut stream,
                    cx,
                    acknowledged: Watched::<S>::acknowledged,
                    send_copy: Watched::<S>::send_copy,
                };
                match driver.step(&mut io, &mut scratch) {
                    Step::Wait { deadline, .. } => {
                        // Idle or not, for the connection cap (D3); closed
                        // if it asked and the connection is idle.
                        if let Some(member) = member
                            && member.tell(driver.is_idle()) == Told::Close
                        {
                            let closing = driver.close_idle();
                            member.answer(closing);
                            if closing {
                                continue;
                            }
                        }
                        if park(cx, &mut timer, deadline) {
                            return Poll::Pending;
                        }
                    }
                    other => return Poll::Ready(other),
                }
            }
        });
        let asked = async {
            match member {
                Some(member) => member.wake.notified().await,
                None => std::future::pending().await,
            }
        };
        let turn = match stop.as_mut() {
            Some(stop) if drain_until.is_none() => tokio::select! {
                step = step => Turn::Step(step),
                _ = stop.changed() => Turn::Stop,
                () = asked => Turn::Asked,
            },
            _ => tokio::select! {
                step = step => Turn::Step(step),
                () = asked => Turn::Asked,
            },
        };
        match turn {
            Turn::Stop => {
                drain_until = Some(tokio::time::Instant::now() + options.shutdown_timeout);
                driver.shut_down();
            }
            Turn::Step(Step::Dispatch) => {
                // The drain deadline holds for the application too: an
                // answer still awaited when it passes is dropped (an
                // `async` handler cancelled; a blocking one runs on to its
                // end on the pool, in its place, its answer discarded),
                // and the connection closed. A shutdown that begins
                // meanwhile is noticed here.
                let mut answered = std::pin::pin!(app.dispatch(driver, &mut stream));
                let back = loop {
                    match (drain_until, stop.as_mut()) {
                        (None, Some(stop)) => tokio::select! {
                            back = &mut answered => break back,
                            began = async { stop.wait_for(|stopping| *stopping).await.is_ok() } => {
                                if !began {
                                    break answered.await;
                                }
                                drain_until = Some(tokio::time::Instant::now() + options.shutdown_timeout);
                            }
                        },
                        (Some(until), _) => tokio::select! {
                            back = &mut answered => break back,
                            () = tokio::time::sleep_until(until) => {
                                tracing::debug!(
                                    peer = %peer,
                                    reason = "shutdown deadline passed while the application was answering",
                                    "connection closed"
                                );
                                return;
                            }
                        },
                        (None, None) => break answered.await,
                    }
                };
                match back {
                    Dispatched::Back(back) => {
                        driver = back;
                        if drain_until.is_some() {
                            driver.shut_down();
                        }
                    }
                    Dispatched::Lost => {
                        tracing::error!(peer = %peer, "a server hook panicked; the connection is dropped");
                        return;
                    }
                }
            }
            Turn::Step(Step::Yield) => tokio::task::yield_now().await,
            // The next step answers.
            Turn::Asked => {}
            Turn::Step(Step::Close) => return,
            Turn::Step(Step::Wait { .. }) => {}
        }
    }
}
