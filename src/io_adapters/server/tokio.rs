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
//! pool with `spawn_blocking`, never on a runtime worker. With the feature
//! `tower`, [`serve_service`] serves any `tower::Service` of
//! [`Incoming`] requests instead (a
//! [`Router`](crate::app::Router) with `async` handlers, wrapped in tower's
//! layers), whose futures are awaited on the runtime. The requests of one
//! connection are answered one after the other, which keeps the responses
//! in request order (D2) without buffering them.

use std::future::{Future, poll_fn};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::Poll;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{ACCEPT_BACKOFF, AcceptFaults, Driver, Handler, ServerOptions, Step, client_gave_up};
#[cfg(feature = "tower")]
use super::{Incoming, Reply};
use crate::io_adapters::proxy_protocol::{ProxiedPeer, ProxyHeaderReader};
use crate::io_adapters::transport::{IoMode, PolledIo, park};
#[cfg(feature = "tower")]
use crate::message::{Request, Response, StatusCode};

const READ_CHUNK: usize = 16 * 1024;

/// Serves `handler` on every connection `listener` accepts, until `shutdown`
/// completes.
///
/// `options.config` configures every connection (limits and timeouts, D3;
/// the 100-continue policy, D10: [`Handler::check_continue`] is asked only
/// with [`ContinuePolicy::Ask`](crate::machine::ContinuePolicy::Ask)); at
/// most `options.max_connections` are open at once, the rest waiting in
/// the backlog. `options.workers` is not used: the runtime's threads serve.
/// Bind the listener with [`listen`](super::listen) for a larger backlog.
///
/// At shutdown the listener is closed at once (new clients are refused);
/// idle connections and those awaiting the full request of a handshake
/// close; a connection with an exchange under way finishes it, writes the
/// response and closes, bounded by the machine's timers (D3). Returns once
/// all are gone.
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
    accept_loop(listener, InPool(Arc::new(handler)), options, shutdown).await
}

/// Serves `service` on every connection `listener` accepts, until
/// `shutdown` completes (feature `tower`): as [`serve`] does a handler,
/// with the same options, limits and shutdown.
///
/// Each connection gets a clone of `service`, and calls it once per
/// request, in order (D2): it waits for [`poll_ready`], then awaits the
/// answer on the runtime's own threads, so the service's futures must not
/// block (a [`Router`](crate::app::Router) runs its synchronous handlers on
/// the blocking pool itself). Parsing stays on the blocking pool. An
/// error from the service, or a future that panics, is answered as
/// [`error_reply`](crate::app::error_reply) says (`503` for a tower
/// timeout or load shedding, `500` otherwise); the connection goes on.
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
///     .service(router);
/// let listener = listen("127.0.0.1:8080")?;
/// listener.set_nonblocking(true)?;
/// let listener = tokio::net::TcpListener::from_std(listener)?;
/// serve_service(listener, service, ServerOptions::default(), async {
///     let _ = tokio::signal::ctrl_c().await;
/// })
/// .await
/// # }
/// ```
///
/// [`poll_ready`]: tower::Service::poll_ready
#[cfg(feature = "tower")]
pub async fn serve_service<T, S>(
    listener: TcpListener,
    service: T,
    options: ServerOptions,
    shutdown: S,
) -> io::Result<()>
where
    T: tower::Service<Incoming> + Clone + Send + 'static,
    T::Response: Into<Reply>,
    T::Error: Into<BoxError>,
    T::Future: Send,
    S: Future<Output = ()>,
{
    accept_loop(listener, Serviced(service), options, shutdown).await
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
    A: Application + Clone,
    S: Future<Output = ()>,
{
    let max = options.max_connections.max(1);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut accept_faults = AcceptFaults::default();
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            // At the cap the clients wait in the backlog (D3).
            accepted = listener.accept(), if connections.len() < max => match accepted {
                Ok((stream, peer)) => {
                    accept_faults.accepted();
                    // Responses are written whole: Nagle would only delay
                    // them. A failure costs latency, not correctness.
                    let _ = stream.set_nodelay(true);
                    let (app, stop) = (app.clone(), stop_rx.clone());
                    connections.spawn(serve_accepted(stream, peer, app, options.clone(), stop));
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
        }
    }
    // New clients are refused from here on.
    drop(listener);
    // Receivers only look for the change; a send error means none is left.
    let _ = stop_tx.send(true);
    while connections.join_next().await.is_some() {}
    Ok(())
}

/// Serves one connection over `stream` until it closes. `options.config`
/// configures it; handlers run on the blocking pool.
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
    run(stream, peer, InPool(handler), options.clone(), None, |_| None)
}

/// Serves one connection over `stream` with `service` until it closes
/// (feature `tower`); see [`serve_service`].
#[cfg(feature = "tower")]
pub fn serve_service_connection<S, T>(
    stream: S,
    peer: SocketAddr,
    service: T,
    options: &ServerOptions,
) -> impl Future<Output = ()> + Send + 'static
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    T: tower::Service<Incoming> + Send + 'static,
    T::Response: Into<Reply>,
    T::Error: Into<BoxError>,
    T::Future: Send,
{
    run(stream, peer, Serviced(service), options.clone(), None, |_| None)
}

/// What answers a connection's requests: runs [`Driver::dispatch`] or its
/// async counterpart, and gives the driver back, or `None` when a hook
/// panicked and the connection's state is gone with it.
trait Application: Send + 'static {
    fn dispatch(&mut self, driver: Driver) -> impl Future<Output = Option<Driver>> + Send;
}

/// A [`Handler`]: synchronous, possibly blocking, so the whole dispatch
/// runs on the blocking pool.
struct InPool<H>(Arc<H>);

impl<H> Clone for InPool<H> {
    fn clone(&self) -> Self {
        InPool(Arc::clone(&self.0))
    }
}

impl<H: Handler> Application for InPool<H> {
    async fn dispatch(&mut self, mut driver: Driver) -> Option<Driver> {
        // The connection's state travels to the blocking pool and back.
        let handler = Arc::clone(&self.0);
        tokio::task::spawn_blocking(move || {
            driver.dispatch(&*handler);
            driver
        })
        .await
        .ok()
    }
}

/// A tower service: parsing on the blocking pool, the service's future
/// awaited here.
#[cfg(feature = "tower")]
#[derive(Clone)]
struct Serviced<T>(T);

#[cfg(feature = "tower")]
impl<T> Application for Serviced<T>
where
    T: tower::Service<Incoming> + Send + 'static,
    T::Response: Into<Reply>,
    T::Error: Into<BoxError>,
    T::Future: Send,
{
    async fn dispatch(&mut self, mut driver: Driver) -> Option<Driver> {
        let (mut driver, pending) = tokio::task::spawn_blocking(move || {
            let pending = driver.dispatch_until_request(&ServiceHooks);
            (driver, pending)
        })
        .await
        .ok()?;
        let Some(mut pending) = pending else {
            return Some(driver);
        };
        let incoming = pending.incoming(super::RequestInfo::new(driver.peer()));
        let reply = call_service(&mut self.0, incoming).await;
        driver.answer_later(pending, reply);
        Some(driver)
    }
}

/// Asks `service` for the answer to `incoming`; an error or a panic
/// becomes the reply [`error_reply`](crate::app::error_reply) gives.
#[cfg(feature = "tower")]
async fn call_service<T>(service: &mut T, incoming: Incoming) -> Reply
where
    T: tower::Service<Incoming>,
    T::Response: Into<Reply>,
    T::Error: Into<BoxError>,
{
    use std::panic::{AssertUnwindSafe, catch_unwind};
    let failed = |error: T::Error| crate::app::error_reply(&*error.into());
    if let Err(error) = poll_fn(|cx| service.poll_ready(cx)).await {
        return failed(error);
    }
    let mut answer = std::pin::pin!(service.call(incoming));
    let caught = poll_fn(
        |cx| match catch_unwind(AssertUnwindSafe(|| answer.as_mut().poll(cx))) {
            Ok(poll) => poll.map(Ok),
            Err(panic) => Poll::Ready(Err(panic)),
        },
    )
    .await;
    match caught {
        Ok(Ok(reply)) => reply.into(),
        Ok(Err(error)) => failed(error),
        Err(_) => {
            tracing::error!("the service panicked; answering 500");
            crate::app::Refusal::internal("the server failed while answering this request").into()
        }
    }
}

/// The hooks of a connection served by a service: every 100-continue
/// handshake accepted (D10), no access log.
#[cfg(feature = "tower")]
struct ServiceHooks;

#[cfg(feature = "tower")]
impl Handler for ServiceHooks {
    /// Never asked: a connection served by a service hands its requests
    /// to the service ([`Driver::dispatch_until_request`]).
    fn handle(&self, _request: &Request, _info: &super::RequestInfo) -> Response {
        Response::from_code(StatusCode::INTERNAL_SERVER_ERROR, "the server has no handler")
    }
}

/// What ended one poll of a connection.
/// Serves an accepted connection: reads its PROXY header first when the
/// options ask for one (D21), then TLS or plain TCP.
async fn serve_accepted<A: Application>(
    mut stream: tokio::net::TcpStream,
    mut peer: SocketAddr,
    app: A,
    options: ServerOptions,
    mut stop: watch::Receiver<bool>,
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
            None => return,
        }
    }
    #[cfg(feature = "tls")]
    if let Some(tls) = options.tls.clone() {
        return run_tls(tls, stream, peer, app, options, stop).await;
    }
    run(
        KernelWrites(stream),
        peer,
        app,
        options,
        Some(stop),
        KernelWrites::acknowledged,
    )
    .await;
}

/// A tokio TCP stream whose writes ask the kernel when tokio's cached
/// readiness says the socket is full.
///
/// tokio learns that a socket takes output again from an edge-triggered
/// readiness event, which Linux gives only once a third of the send buffer
/// is free. A peer reading slowly but steadily frees less than that between
/// two stall checks, and would be closed as a peer that takes nothing
/// (D3). When the drive offers output and tokio answers `Pending`, one
/// non-blocking `send` asks the kernel itself; the waker is registered
/// either way.
struct KernelWrites(tokio::net::TcpStream);

impl KernelWrites {
    /// What the peer acknowledged of the socket's output: the stall limit
    /// counts the peer's progress by it (D3).
    fn acknowledged(&self) -> Option<crate::machine::Acknowledged> {
        crate::io_adapters::transport::tcp_acknowledged(std::os::fd::AsFd::as_fd(&self.0))
    }
}

impl AsyncRead for KernelWrites {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for KernelWrites {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match std::pin::Pin::new(&mut self.0).poll_write(cx, buf) {
            Poll::Pending => match rustix::net::send(&self.0, buf, rustix::net::SendFlags::NOSIGNAL) {
                Ok(n) => Poll::Ready(Ok(n)),
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e.into())),
            },
            ready => ready,
        }
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match std::pin::Pin::new(&mut self.0).poll_write_vectored(cx, bufs) {
            // As `poll_write`: the kernel may take it all the same.
            Poll::Pending => match rustix::net::sendmsg(
                &self.0,
                bufs,
                &mut rustix::net::SendAncillaryBuffer::default(),
                rustix::net::SendFlags::NOSIGNAL,
            ) {
                Ok(n) => Poll::Ready(Ok(n)),
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e.into())),
            },
            ready => ready,
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
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
async fn run_tls<A: Application>(
    tls: crate::io_adapters::tls::ServerTls,
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    app: A,
    options: ServerOptions,
    mut stop: watch::Receiver<bool>,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::clone(tls.config()));
    let limit = options.config.idle_timeout;
    // The session's records go out through the same kernel-asking writes
    // as plain TCP: a slow, steady reader is not a stalled one (D3).
    let handshake = tokio::time::timeout(limit, acceptor.accept(KernelWrites(stream)));
    let shaken = tokio::select! {
        shaken = handshake => shaken,
        _ = stop.wait_for(|stopping| *stopping) => return,
    };
    if let Ok(Ok(stream)) = shaken {
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
        run(stream, peer, app, options, Some(stop), acknowledged).await;
    }
}

enum Turn {
    Step(Step),
    Stop,
}

/// Performs what the drive step asks, from accept to close.
async fn run<S, A>(
    mut stream: S,
    peer: SocketAddr,
    mut app: A,
    options: ServerOptions,
    mut stop: Option<watch::Receiver<bool>>,
    acknowledged: fn(&S) -> Option<crate::machine::Acknowledged>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
    A: Application,
{
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
                    acknowledged,
                };
                match driver.step(&mut io, &mut scratch) {
                    Step::Wait { deadline, .. } => {
                        if park(cx, &mut timer, deadline) {
                            return Poll::Pending;
                        }
                    }
                    other => return Poll::Ready(other),
                }
            }
        });
        let turn = match stop.as_mut() {
            Some(stop) if drain_until.is_none() => tokio::select! {
                step = step => Turn::Step(step),
                _ = stop.changed() => Turn::Stop,
            },
            _ => Turn::Step(step.await),
        };
        match turn {
            Turn::Stop => {
                drain_until = Some(tokio::time::Instant::now() + options.shutdown_timeout);
                driver.shut_down();
            }
            Turn::Step(Step::Dispatch) => {
                // The drain deadline holds for the application too: an
                // answer still awaited when it passes is dropped, and the
                // connection with it (a blocking handler runs on to its
                // end on the pool, its answer discarded). A shutdown that
                // begins meanwhile is noticed here.
                let mut answered = std::pin::pin!(app.dispatch(driver));
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
                    Some(back) => {
                        driver = back;
                        if drain_until.is_some() {
                            driver.shut_down();
                        }
                    }
                    // A hook panicked outside the handler's own guard:
                    // the connection state is gone with it.
                    None => {
                        tracing::error!(peer = %peer, "a server hook panicked; the connection is dropped");
                        return;
                    }
                }
            }
            Turn::Step(Step::Yield) => tokio::task::yield_now().await,
            Turn::Step(Step::Close) => return,
            Turn::Step(Step::Wait { .. }) => {}
        }
    }
}
