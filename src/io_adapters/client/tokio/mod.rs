//! The async clients (feature `tokio`): [`Pool`], the twin of
//! [`blocking::Pool`](super::blocking::Pool), and [`Client`], the twin of
//! [`blocking::Client`](super::blocking::Client), with the same options,
//! outcomes and errors, and the same drive step, polled through the
//! stream (tokio's `Pending` is the step's `WouldBlock`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use jsontp_protocol::io_adapters::client::PoolOptions;
//! use jsontp_protocol::io_adapters::client::tokio::Pool;
//!
//! let pool = Pool::new(PoolOptions::default());
//! let answer = pool.get("jsontp://127.0.0.1:8080/hello.txt").send().await?;
//! println!("{}", answer.response.body.as_text().unwrap_or(""));
//! # Ok(())
//! # }
//! ```
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use jsontp_protocol::io_adapters::client::ClientOptions;
//! use jsontp_protocol::io_adapters::client::tokio::Client;
//! use jsontp_protocol::message::{Method, Request};
//!
//! let mut client = Client::connect("127.0.0.1:8080", ClientOptions::default()).await?;
//! let answer = client.send(Request::new(Method::Get, "/hello.txt".parse()?)).await?;
//! println!("{}", answer.response.body.as_text().unwrap_or(""));
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::net::ToSocketAddrs;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::drive::{READ_CHUNK, READ_PIECE, Staged};
use super::pool::{Checkout, Deadline, Lease, Pooled, Reaper, Resend, Shared, may_retry, socket_spoke};
use super::{Answer, Call, ClientError, ClientOptions, Direction, Driver, Step, Streams, connect, only};
use super::{Origin, PoolOptions, RequestBuilder, Scheme, Timeout};
use crate::io_adapters::transport::{IoMode, PolledIo, park};
use crate::message::{Method, Request};

/// An async client on one connection, over TCP or any
/// `AsyncRead + AsyncWrite` stream.
pub struct Client<S = TcpStream> {
    stream: S,
    driver: Driver,
    scratch: Box<[u8]>,
}

impl<S> fmt::Debug for Client<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("options", self.driver.options())
            .field("closed", &self.driver.is_closed())
            .finish_non_exhaustive()
    }
}

impl Client<TcpStream> {
    /// Connects to `addr` (`"host:port"` or a `SocketAddr`), each address
    /// tried bounded by [`ClientOptions::connect_timeout`]. Resolving and
    /// connecting run on tokio's blocking pool, with the blocking client's
    /// own routine.
    pub async fn connect(
        addr: impl ToSocketAddrs + fmt::Display,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let stream = tcp(addr.to_string(), options.connect_timeout).await?;
        Ok(Client::from_stream(stream, options))
    }
}

/// A TCP connection to `addr`, each address tried bounded by `timeout`:
/// the blocking client's routine on tokio's blocking pool.
async fn tcp(addr: String, timeout: Option<Duration>) -> Result<TcpStream, ClientError> {
    let connected = tokio::task::spawn_blocking(move || connect(addr.as_str(), timeout))
        .await
        .map_err(|e| ClientError::Io(std::io::Error::other(e)))??;
    connected.set_nonblocking(true).map_err(ClientError::Io)?;
    TcpStream::from_std(connected).map_err(ClientError::Io)
}

/// A TLS session (D20) over a connected `stream` to `shown`, the handshake
/// done, bounded by `limit`.
#[cfg(feature = "tls")]
async fn tls_over(
    stream: TcpStream,
    shown: &str,
    server_name: &str,
    tls: &crate::io_adapters::tls::ClientTls,
    limit: Option<Duration>,
) -> Result<crate::io_adapters::tls::TokioTlsStream<TcpStream>, ClientError> {
    let failed = |source| ClientError::Tls {
        addr: shown.to_owned(),
        source,
    };
    let name = crate::io_adapters::tls::server_name_of(server_name).map_err(failed)?;
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::clone(tls.config()));
    let handshake = connector.connect(name, stream);
    let stream = match limit {
        Some(limit) => tokio::time::timeout(limit, handshake)
            .await
            .map_err(|_| ClientError::TimedOut(Timeout::Connect))?,
        None => handshake.await,
    }
    .map_err(|e| failed(crate::io_adapters::tls::explain_handshake(e)))?;
    Ok(crate::io_adapters::tls::TokioTlsStream::new(stream.into()))
}

#[cfg(feature = "tls")]
impl Client<crate::io_adapters::tls::TokioTlsStream<TcpStream>> {
    /// Connects to `addr` over TLS (D20) with tokio-rustls, checking the
    /// server's certificate against `server_name` (a DNS name or an IP
    /// address) as `tls` says. The handshake is done here, bounded by
    /// [`ClientOptions::connect_timeout`]: a failure is
    /// [`ClientError::Tls`].
    pub async fn connect_tls(
        addr: impl ToSocketAddrs + fmt::Display,
        server_name: &str,
        tls: &crate::io_adapters::tls::ClientTls,
        options: ClientOptions,
    ) -> Result<Self, ClientError> {
        let shown = addr.to_string();
        // The name is checked before connecting.
        crate::io_adapters::tls::server_name_of(server_name).map_err(|source| ClientError::Tls {
            addr: shown.clone(),
            source,
        })?;
        let stream = tcp(shown.clone(), options.connect_timeout).await?;
        let stream = tls_over(stream, &shown, server_name, tls, options.connect_timeout).await?;
        Ok(Client::from_stream(stream, options))
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> Client<S> {
    /// Runs a client over a connected stream (TCP, a Unix socket, a TLS
    /// stream). Set `TCP_NODELAY` on a TCP stream first: requests are
    /// written whole, and Nagle would only delay them.
    pub fn from_stream(stream: S, options: ClientOptions) -> Client<S> {
        Client {
            stream,
            driver: Driver::new(options, IoMode::NonBlocking),
            scratch: vec![0; READ_CHUNK].into_boxed_slice(),
        }
    }

    /// The stream underneath.
    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// The options in use.
    pub fn options(&self) -> &ClientOptions {
        self.driver.options()
    }

    /// Calls `tracer` with every byte written and read.
    pub fn set_tracer(&mut self, tracer: impl FnMut(Direction, &[u8]) + Send + 'static) {
        self.driver.set_tracer(Box::new(tracer));
    }

    /// Whether the connection can take no more requests.
    pub fn is_closed(&self) -> bool {
        self.driver.is_closed()
    }

    /// Sends one request and waits for its answer.
    pub async fn send(&mut self, request: Request) -> Result<Answer, ClientError> {
        only(self.send_all([request]).await)
    }

    /// Sends every request at once (pipelining, D2) and waits for all the
    /// answers: one outcome per request, in order.
    pub async fn send_all(
        &mut self,
        requests: impl IntoIterator<Item = Request>,
    ) -> Vec<Result<Answer, ClientError>> {
        let call = self.driver.begin(requests);
        self.run(call, None, None).await
    }

    /// Sends `request` and writes the response's content to `sink` as it
    /// arrives, a piece at a time, in constant memory whatever its size
    /// (D19); the answer's own body is then empty. Needs
    /// [`ClientConfig::stream_content`](crate::machine::ClientConfig::stream_content)
    /// on (else the content is held in memory, then written to `sink`). If
    /// the response is refused after content went to `sink`, the error
    /// says so and what `sink` holds is to be discarded.
    pub async fn download(
        &mut self,
        request: Request,
        sink: &mut (dyn AsyncWrite + Unpin + Send),
    ) -> Result<Answer, ClientError> {
        let call = self.driver.begin([request]);
        let outcome = only(self.run(call, None, Some(&mut *sink)).await);
        whole_content_to(outcome, sink).await
    }

    /// Sends `request` with the content `source` yields, read and sent as
    /// the server takes it (D19), encoded as `request.body`'s encoding says
    /// (its own content is ignored); the response's content goes to `sink`
    /// when given ([`download`](Self::download)), else into the answer.
    pub async fn upload(
        &mut self,
        request: Request,
        source: &mut (dyn AsyncRead + Unpin + Send),
        sink: Option<&mut (dyn AsyncWrite + Unpin + Send)>,
    ) -> Result<Answer, ClientError> {
        let call = self.driver.begin_upload(request);
        match sink {
            Some(sink) => {
                let outcome = only(self.run(call, Some(source), Some(&mut *sink)).await);
                whole_content_to(outcome, sink).await
            }
            None => only(self.run(call, Some(source), None).await),
        }
    }

    /// Steps `call` to its end: the drive step polled through the stream,
    /// and between steps the content moved to `sink` and from `source`
    /// (staged streams: the step never waits on them itself).
    async fn run(
        &mut self,
        mut call: Call,
        mut source: Option<&mut (dyn AsyncRead + Unpin + Send)>,
        mut sink: Option<&mut (dyn AsyncWrite + Unpin + Send)>,
    ) -> Vec<Result<Answer, ClientError>> {
        let mut staged = Staged::default();
        let mut piece = Vec::new();
        let mut timer = Box::pin(tokio::time::sleep(std::time::Duration::ZERO));
        loop {
            let (stream, driver, scratch) = (&mut self.stream, &mut self.driver, &mut self.scratch);
            let (staging, draining) = (source.is_some(), sink.is_some());
            let step = poll_fn(|cx| {
                // Made for each poll, not held across the await: the
                // streams are not `Send`, and the future must be (a
                // request sent from a spawned task, a tower service).
                let mut streams =
                    Streams::staged(staging.then_some(&mut staged), draining.then_some(&mut piece));
                loop {
                    let mut io = PolledIo {
                        io: &mut *stream,
                        cx,
                        acknowledged: |_| None,
                    };
                    match driver.step(&mut io, scratch, &mut call, &mut streams) {
                        Step::Wait { deadline, .. } => {
                            if park(cx, &mut timer, deadline) {
                                return Poll::Pending;
                            }
                        }
                        other => return Poll::Ready(other),
                    }
                }
            })
            .await;
            match step {
                Step::Drain => {
                    if let Some(sink) = sink.as_mut()
                        && let Err(e) = sink.write_all(&piece).await
                    {
                        self.driver.fail(&mut call, ClientError::Sink(e));
                        break;
                    }
                    piece.clear();
                }
                Step::Fill => {
                    if let Some(source) = source.as_mut() {
                        // An error is met by the step, which ends the
                        // upload as the blocking client's would.
                        let read = source.read(staged.fill_buffer(READ_PIECE)).await;
                        staged.filled(read);
                    }
                }
                _ => break,
            }
        }
        self.driver.finish(call)
    }
}

/// A download's answer: content that did not stream goes to the sink too
/// ([`Answer::take_whole_content`]), as the blocking client's does.
async fn whole_content_to(
    outcome: Result<Answer, ClientError>,
    sink: &mut (dyn AsyncWrite + Unpin + Send),
) -> Result<Answer, ClientError> {
    let mut answer = outcome?;
    sink.write_all(&answer.take_whole_content())
        .await
        .map_err(ClientError::Sink)?;
    Ok(answer)
}

/// A pooled connection's stream: plain TCP, or TLS over it.
pub(crate) enum PoolStream {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<crate::io_adapters::tls::TokioTlsStream<TcpStream>>),
}

impl PoolStream {
    /// The TCP socket underneath.
    fn socket(&self) -> &TcpStream {
        match self {
            PoolStream::Plain(stream) => stream,
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => stream.get_ref().get_ref().0,
        }
    }
}

impl AsyncRead for PoolStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PoolStream::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => Pin::new(&mut **stream).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PoolStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            PoolStream::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => Pin::new(&mut **stream).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PoolStream::Plain(stream) => Pin::new(stream).poll_flush(cx),
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => Pin::new(&mut **stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PoolStream::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => Pin::new(&mut **stream).poll_shutdown(cx),
        }
    }
}

impl Pooled for Client<PoolStream> {
    fn is_closed(&self) -> bool {
        Client::is_closed(self)
    }

    fn server_spoke(&self) -> bool {
        #[cfg(unix)]
        {
            use std::os::fd::AsFd;
            socket_spoke(self.stream.socket().as_fd())
        }
        #[cfg(not(unix))]
        socket_spoke(self.stream.socket())
    }
}

type PoolShared = Shared<Client<PoolStream>, Notify>;

/// What one pooled call sends, and where its content comes from and goes.
struct Work<'a> {
    method: Method,
    /// The request of each attempt.
    request: Resend,
    streams: WorkStreams<'a>,
}

enum WorkStreams<'a> {
    /// Content in the request and the answer.
    InMemory,
    /// The answer's content to a writer.
    Download(&'a mut (dyn AsyncWrite + Unpin + Send)),
    /// The request's content from a reader: never sent again.
    Upload(
        &'a mut (dyn AsyncRead + Unpin + Send),
        Option<&'a mut (dyn AsyncWrite + Unpin + Send)>,
    ),
}

impl Work<'_> {
    fn retryable(&self) -> bool {
        !matches!(self.streams, WorkStreams::Upload(..))
    }
}

/// A pooled, async client: reqwest's `Client` for jsontp, the twin of
/// [`blocking::Pool`](super::blocking::Pool), whose documentation says
/// how connections are reused, limited per origin, closed when idle, and
/// when a call is sent again (D13). Cheap to clone (the clones share the
/// connections); calls from any number of tasks at once, each future
/// `Send`. A call dropped before its answer (a timeout around it) closes
/// its connection with it.
///
/// Idle connections are closed in time by a task on the runtime of the
/// call that left one idle, which ends when none is.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use jsontp_protocol::io_adapters::client::PoolOptions;
/// use jsontp_protocol::io_adapters::client::tokio::Pool;
/// use serde::Deserialize;
///
/// #[derive(Deserialize)]
/// struct Groups { groups: Vec<String> }
///
/// let pool = Pool::new(PoolOptions::default());
/// let calls: Vec<_> = (0..8)
///     .map(|_| {
///         let pool = pool.clone();
///         tokio::spawn(async move { pool.get("jsontp://127.0.0.1:1119/groups").send().await })
///     })
///     .collect();
/// for call in calls {
///     let groups: Groups = call.await??.keys()?;
///     println!("{}", groups.groups.join(", "));
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Pool {
    shared: Arc<PoolShared>,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

impl Default for Pool {
    /// A pool with [`PoolOptions::default`].
    fn default() -> Self {
        Pool::new(PoolOptions::default())
    }
}

impl Pool {
    /// A pool with no connection yet.
    pub fn new(options: PoolOptions) -> Pool {
        Pool {
            shared: Arc::new(Shared::new(options)),
        }
    }

    /// The options in use.
    pub fn options(&self) -> &PoolOptions {
        &self.shared.options
    }

    /// A request with `method` to `url` (`jsontp://host:port/path`,
    /// `jsontps://…`), sent by [`RequestBuilder::send`].
    pub fn request(&self, method: Method, url: &str) -> RequestBuilder<Pool> {
        RequestBuilder::new(self.clone(), method, url)
    }

    /// A `GET` of `url`.
    pub fn get(&self, url: &str) -> RequestBuilder<Pool> {
        self.request(Method::Get, url)
    }

    /// A `POST` to `url`.
    pub fn post(&self, url: &str) -> RequestBuilder<Pool> {
        self.request(Method::Post, url)
    }

    /// A `PUT` to `url`.
    pub fn put(&self, url: &str) -> RequestBuilder<Pool> {
        self.request(Method::Put, url)
    }

    /// A `DELETE` of `url`.
    pub fn delete(&self, url: &str) -> RequestBuilder<Pool> {
        self.request(Method::Delete, url)
    }

    /// An `OPTIONS` of `url`.
    pub fn options_of(&self, url: &str) -> RequestBuilder<Pool> {
        self.request(Method::Options, url)
    }

    /// Sends `request` to `origin` on a pooled connection and waits for
    /// its answer, within the pool's deadline; sent again once where D13
    /// allows.
    pub async fn send(&self, origin: &Origin, request: Request) -> Result<Answer, ClientError> {
        self.call(origin, Work::new(request, WorkStreams::InMemory), None)
            .await
    }

    /// Sends `request` to `origin` and writes the answer's content to
    /// `sink` as it arrives (D19), as [`Client::download`] does; sent
    /// again once where D13 allows (nothing has reached `sink` then).
    pub async fn download(
        &self,
        origin: &Origin,
        request: Request,
        sink: &mut (dyn AsyncWrite + Unpin + Send),
    ) -> Result<Answer, ClientError> {
        self.call(origin, Work::new(request, WorkStreams::Download(sink)), None)
            .await
    }

    /// Sends `head` to `origin` with the content `source` yields, read as
    /// the server takes it (D19), as [`Client::upload`] does. Never sent
    /// again, whatever its method: the source has been read.
    pub async fn upload<'s>(
        &self,
        origin: &Origin,
        head: Request,
        source: &'s mut (dyn AsyncRead + Unpin + Send),
        sink: Option<&'s mut (dyn AsyncWrite + Unpin + Send)>,
    ) -> Result<Answer, ClientError> {
        self.call(origin, Work::new(head, WorkStreams::Upload(source, sink)), None)
            .await
    }

    /// The connections to `origin` open and waiting for a call.
    pub fn idle_connections(&self, origin: &Origin) -> usize {
        self.shared.idle_count(origin)
    }

    /// The connections to `origin` open, idle or in use.
    pub fn open_connections(&self, origin: &Origin) -> usize {
        self.shared.open_count(origin)
    }

    /// One call: a connection, the exchange, and the retry D13 allows.
    async fn call(
        &self,
        origin: &Origin,
        mut work: Work<'_>,
        limit: Option<Option<Duration>>,
    ) -> Result<Answer, ClientError> {
        let method = work.method;
        let limit = limit.unwrap_or(self.shared.options.call_timeout);
        let deadline = Deadline::after(self.shared.now(), limit);
        let mut lease = self.lease(origin, deadline).await?;
        let reused = lease.reused();
        let outcome = match self.attempt(&mut lease, deadline, &mut work).await {
            Err(error) if work.retryable() && may_retry(&error, method, reused) => {
                tracing::debug!(%origin, %method, %error, "sending again on a new connection (D13)");
                lease.reconnecting();
                self.connect_into(&mut lease, deadline).await?;
                self.attempt(&mut lease, deadline, &mut work).await
            }
            outcome => outcome,
        };
        if lease.finish() {
            start_reaper(&self.shared);
        }
        outcome
    }

    /// One exchange on the lease's connection, within the deadline.
    async fn attempt(
        &self,
        lease: &mut Lease<Client<PoolStream>, Notify>,
        deadline: Deadline,
        work: &mut Work<'_>,
    ) -> Result<Answer, ClientError> {
        let bounded = deadline.bound(self.shared.now(), self.shared.options.client.exchange_timeout)?;
        let reused = lease.reused();
        let client = lease.conn().ok_or(ClientError::ConnectionClosed)?;
        let retryable = work.retryable();
        let request = work.request.next(reused, retryable)?;
        client.driver.set_exchange_timeout(bounded.limit);
        let outcome = match &mut work.streams {
            WorkStreams::InMemory => client.send(request).await,
            WorkStreams::Download(sink) => client.download(request, &mut **sink).await,
            WorkStreams::Upload(source, sink) => {
                client
                    .upload(request, &mut **source, sink.as_mut().map(|sink| &mut **sink as _))
                    .await
            }
        };
        outcome.map_err(|e| bounded.blame(e))
    }

    /// A place among `origin`'s connections, with its connection: an idle
    /// one, or a new one; waits while every place is taken.
    async fn lease(
        &self,
        origin: &Origin,
        deadline: Deadline,
    ) -> Result<Lease<Client<PoolStream>, Notify>, ClientError> {
        loop {
            // Listening before looking: a change between the two wakes it.
            let changed = self.shared.signal.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            match self.shared.checkout(origin) {
                Checkout::Reuse(conn) => {
                    return Ok(Lease::new(Arc::clone(&self.shared), origin.clone(), Some(conn)));
                }
                Checkout::Connect => {
                    let mut lease = Lease::new(Arc::clone(&self.shared), origin.clone(), None);
                    self.connect_into(&mut lease, deadline).await?;
                    return Ok(lease);
                }
                Checkout::Full(_) => {}
            }
            match deadline.left(self.shared.now())? {
                None => changed.await,
                Some(left) => tokio::time::timeout(left, changed)
                    .await
                    .map_err(|_| ClientError::TimedOut(Timeout::Call))?,
            }
        }
    }

    /// Connects the lease's place to its origin, within the deadline.
    async fn connect_into(
        &self,
        lease: &mut Lease<Client<PoolStream>, Notify>,
        deadline: Deadline,
    ) -> Result<(), ClientError> {
        let options = &self.shared.options;
        let origin = lease.origin().clone();
        let bounded = deadline.bound(self.shared.now(), options.client.connect_timeout)?;
        let address = origin.address();
        let stream = tcp(address.clone(), bounded.limit)
            .await
            .map_err(|e| bounded.blame(e))?;
        let stream = match origin.scheme() {
            Scheme::Plain => PoolStream::Plain(stream),
            #[cfg(feature = "tls")]
            Scheme::Tls => {
                let tls = options.client_tls().map_err(|source| ClientError::Tls {
                    addr: address.clone(),
                    source,
                })?;
                let bounded = deadline.bound(self.shared.now(), options.client.connect_timeout)?;
                let stream = tls_over(stream, &address, origin.host(), &tls, bounded.limit)
                    .await
                    .map_err(|e| bounded.blame(e))?;
                PoolStream::Tls(Box::new(stream))
            }
            #[cfg(not(feature = "tls"))]
            Scheme::Tls => return Err(super::blocking::no_tls(&address)),
        };
        lease.connected(Client::from_stream(stream, options.client.clone()));
        Ok(())
    }
}

impl<'a> Work<'a> {
    fn new(request: Request, streams: WorkStreams<'a>) -> Self {
        Work {
            method: request.method,
            request: Resend::new(request),
            streams,
        }
    }
}

/// Starts the task that closes the pool's idle connections in time, on
/// the current runtime; it holds the pool only while it looks, and ends
/// when none is idle or the pool is gone. Without a runtime, or when the
/// runtime stops first, idle connections are closed when a call next
/// looks.
fn start_reaper(shared: &Arc<PoolShared>) {
    /// Marks the reaper stopped if its task ends early (its runtime shut
    /// down), so that the next connection to come back starts another.
    struct Stopping(std::sync::Weak<PoolShared>);
    impl Drop for Stopping {
        fn drop(&mut self) {
            if let Some(shared) = self.0.upgrade() {
                shared.hosts().reaper = Reaper::Stopped;
            }
        }
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        shared.hosts().reaper = Reaper::Stopped;
        return;
    };
    let weak = Arc::downgrade(shared);
    runtime.spawn(async move {
        let stopping = Stopping(weak.clone());
        loop {
            let Some(shared) = weak.upgrade() else {
                break;
            };
            let next = shared.reap();
            let now = shared.now();
            drop(shared);
            match next {
                Some(at) => tokio::time::sleep(at.saturating_duration_since(now)).await,
                // `reap` marked it stopped, under the lock.
                None => {
                    std::mem::forget(stopping);
                    return;
                }
            }
        }
        drop(stopping);
    });
}

impl RequestBuilder<Pool> {
    /// Sends the request on the pool ([`Pool::send`]) and waits for its
    /// answer; the errors of building it come out here.
    pub async fn send(self) -> Result<Answer, ClientError> {
        let (origin, request) = self.parts?;
        self.pool
            .call(&origin, Work::new(request, WorkStreams::InMemory), self.timeout)
            .await
    }
}

/// A pool's calls to one origin as a `tower::Service` (feature `tower`):
/// tower's layers (timeouts, retries, rate limits) and its balancing
/// across several servers apply to it unchanged.
///
/// Each call takes a connection kept open from an earlier call, or
/// connects a new one, sends its request and waits for the answer; the
/// connection is kept for the next call when it is still usable. Calls in
/// flight at once each have their own connection, so the answers never
/// wait for each other; bound them with a concurrency limit in front, or
/// give a pool with a per-host limit ([`from_pool`](Self::from_pool)). A
/// call dropped before its answer (a timeout) drops its connection with
/// it. As on the [`Pool`], an idempotent request is sent again once when a
/// reused connection closes before any byte of its answer (D13).
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use std::time::Duration;
/// use jsontp_protocol::io_adapters::client::ClientOptions;
/// use jsontp_protocol::io_adapters::client::tokio::ClientService;
/// use jsontp_protocol::message::{Method, Request};
/// use tower::{Service, ServiceBuilder, ServiceExt};
///
/// let mut news = ServiceBuilder::new()
///     .timeout(Duration::from_secs(2))
///     .service(ClientService::new("news.example.org:1119", ClientOptions::default()));
/// let request = Request::new(Method::Get, "/list".parse()?);
/// let answer = news.ready().await?.call(request).await?;
/// println!("{}", answer.response.status.human_message);
/// # Ok(())
/// # }
/// ```
#[cfg(feature = "tower")]
#[derive(Debug, Clone)]
pub struct ClientService {
    pool: Pool,
    /// The origin, or why `new` could not read it (every call's error).
    origin: Result<Origin, Arc<ClientError>>,
}

#[cfg(feature = "tower")]
impl ClientService {
    /// Calls to `addr` (`"host:port"`, or `jsontp://…`), each connection
    /// made with `options`, on a pool of its own: no limit of connections
    /// and at most 8 kept idle.
    pub fn new(addr: impl Into<String>, options: ClientOptions) -> ClientService {
        let addr = addr.into();
        let pool = Pool::new(
            PoolOptions::default()
                .with_client(options)
                .with_max_connections_per_host(usize::MAX)
                .with_max_idle_per_host(8),
        );
        ClientService {
            pool,
            origin: Origin::parse(&addr).map_err(Arc::new),
        }
    }

    /// Calls to `origin` on `pool`, with its limits, shared with the
    /// pool's other calls.
    pub fn from_pool(pool: Pool, origin: Origin) -> ClientService {
        ClientService {
            pool,
            origin: Ok(origin),
        }
    }

    /// Keeps at most `max` connections open between calls (builder style;
    /// 8 by default, 0 to close each after its answer). A pool of its own
    /// with these options, no longer shared with clones made before.
    pub fn with_max_idle(self, max: usize) -> ClientService {
        let options = self.pool.options().clone().with_max_idle_per_host(max);
        ClientService {
            pool: Pool::new(options),
            origin: self.origin,
        }
    }

    /// The connections open and waiting for a call.
    pub fn idle_connections(&self) -> usize {
        self.origin
            .as_ref()
            .map_or(0, |origin| self.pool.idle_connections(origin))
    }
}

#[cfg(feature = "tower")]
impl tower::Service<Request> for ClientService {
    type Response = Answer;
    type Error = ClientError;
    type Future = Pin<Box<dyn std::future::Future<Output = Result<Answer, ClientError>> + Send>>;

    /// Always ready: a call that finds no open connection makes one (or
    /// waits for one, under a pool's per-host limit).
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), ClientError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            match &this.origin {
                Ok(origin) => this.pool.send(origin, request).await,
                Err(error) => Err(error.duplicate()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_calls_can_run_on_any_task() {
        fn is_send<T: Send>(_: &T) {}
        fn is_shared<T: Send + Sync>() {}
        is_shared::<Pool>();
        let pool = Pool::default();
        let origin = Origin::parse("127.0.0.1:1").expect("origin");
        let request = Request::new(Method::Get, "/".parse().expect("resource"));
        is_send(&pool.send(&origin, request));
        is_send(&pool.get("jsontp://127.0.0.1:1/").send());
    }
}
