//! The blocking clients: std only. [`Pool`], connections kept and reused
//! across calls and threads, for an application calling a service; and
//! [`Client`], one connection, requests in, answers out.
//!
//! ```no_run
//! use jsontp_protocol::io_adapters::client::PoolOptions;
//! use jsontp_protocol::io_adapters::client::blocking::Pool;
//!
//! let pool = Pool::new(PoolOptions::default());
//! let answer = pool.get("jsontp://127.0.0.1:8080/hello.txt").send()?;
//! println!("{}", answer.response.body.as_text().unwrap_or(""));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ```no_run
//! use jsontp_protocol::io_adapters::client::ClientOptions;
//! use jsontp_protocol::io_adapters::client::blocking::Client;
//! use jsontp_protocol::message::{Method, Request};
//!
//! let mut client = Client::connect("127.0.0.1:8080", ClientOptions::default())?;
//! let request = Request::new(Method::Get, "/hello.txt".parse()?);
//! let answer = client.send(request)?;
//! println!("{}", answer.response.body.as_text().unwrap_or(""));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The socket stays blocking, every call bounded by a timeout: a request
//! being written goes out in slices of at most 20 ms, and when the server
//! stops taking it the client reads what the server sent meanwhile, then
//! writes again. So a client pipelining many requests keeps reading
//! responses while it writes (otherwise both sides could stop with full
//! buffers), without a thread or a poller of its own; with nothing to
//! write it blocks in one read until the nearest deadline, so an answer is
//! taken the moment it arrives.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Condvar};
use std::time::Duration;

use super::drive::READ_CHUNK;
use super::pool::{Checkout, Deadline, Lease, Pooled, Reaper, Resend, Shared, may_retry, socket_spoke};
use super::{Answer, ClientError, ClientOptions, Direction, Origin, PoolOptions, RequestBuilder, Scheme};
use super::{Call, Driver, Step, Streams, connect, only};
use crate::io_adapters::transport::{IoMode, Transport};
use crate::message::{Method, Request};

/// A blocking client on one connection (keep-alive: every request on it
/// until one side closes), over TCP or any blocking [`Transport`].
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
    /// tried bounded by [`ClientOptions::connect_timeout`].
    pub fn connect(
        addr: impl ToSocketAddrs + fmt::Display,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let stream = connect(addr, options.connect_timeout)?;
        Ok(Client::from_stream(stream, options))
    }
}

#[cfg(feature = "tls")]
impl Client<crate::io_adapters::tls::TlsStream<TcpStream>> {
    /// Connects to `addr` over TLS (D20), checking the server's certificate
    /// against `server_name` (a DNS name or an IP address) as `tls` says.
    /// The handshake is done here, bounded by
    /// [`ClientOptions::connect_timeout`]: a failure is
    /// [`ClientError::Tls`].
    pub fn connect_tls(
        addr: impl ToSocketAddrs + fmt::Display,
        server_name: &str,
        tls: &crate::io_adapters::tls::ClientTls,
        options: ClientOptions,
    ) -> Result<Self, ClientError> {
        let shown = addr.to_string();
        let stream = connect(addr, options.connect_timeout)?;
        let stream = tls_over(stream, &shown, server_name, tls, options.connect_timeout)?;
        Ok(Client::from_stream(stream, options))
    }
}

/// A TLS session (D20) over a connected `stream` to `shown`, the handshake
/// done, bounded by `limit`.
#[cfg(feature = "tls")]
fn tls_over(
    stream: TcpStream,
    shown: &str,
    server_name: &str,
    tls: &crate::io_adapters::tls::ClientTls,
    limit: Option<Duration>,
) -> Result<crate::io_adapters::tls::TlsStream<TcpStream>, ClientError> {
    let failed = |source| ClientError::Tls {
        addr: shown.to_owned(),
        source,
    };
    let mut stream = tls.connect(server_name, stream).map_err(failed)?;
    stream.handshake(limit).map_err(|e| {
        if crate::io_adapters::transport::would_block(&e) {
            ClientError::TimedOut(super::Timeout::Connect)
        } else {
            failed(e)
        }
    })?;
    Ok(stream)
}

impl<S: Transport> Client<S> {
    /// Runs a client over a connected, blocking stream (TCP, a Unix
    /// socket, a TLS stream). Set `TCP_NODELAY` on a TCP stream first:
    /// requests are written whole, and Nagle would only delay them.
    pub fn from_stream(stream: S, options: ClientOptions) -> Client<S> {
        Client {
            stream,
            driver: Driver::new(options, IoMode::Blocking),
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

    /// Calls `tracer` with every byte written and read (for `-vv`).
    pub fn set_tracer(&mut self, tracer: impl FnMut(Direction, &[u8]) + Send + 'static) {
        self.driver.set_tracer(Box::new(tracer));
    }

    /// Whether the connection can take no more requests.
    pub fn is_closed(&self) -> bool {
        self.driver.is_closed()
    }

    /// Sends one request and waits for its answer.
    pub fn send(&mut self, request: Request) -> Result<Answer, ClientError> {
        only(self.send_all([request]))
    }

    /// Sends every request at once (pipelining, D2) and waits for all the
    /// answers. One outcome per request, in order; an error that ends the
    /// connection is the outcome of every request still unanswered.
    pub fn send_all(
        &mut self,
        requests: impl IntoIterator<Item = Request>,
    ) -> Vec<Result<Answer, ClientError>> {
        let call = self.driver.begin(requests);
        self.run(call, Streams::default())
    }

    /// Sends `request` and writes the response's content to `sink` as it
    /// arrives, in constant memory whatever its size (D19); the answer's
    /// own body is then empty. Needs
    /// [`ClientConfig::stream_content`](crate::machine::ClientConfig::stream_content)
    /// on (else the content is held in memory and returned in the answer,
    /// as [`send`](Self::send) does). If the response is refused after
    /// content went to `sink`, the error says so and what `sink` holds is
    /// to be discarded.
    pub fn download(
        &mut self,
        request: Request,
        sink: &mut dyn std::io::Write,
    ) -> Result<Answer, ClientError> {
        let call = self.driver.begin([request]);
        let outcome = only(self.run(call, Streams::new(None, Some(&mut *sink))));
        whole_content_to(outcome, sink)
    }

    /// Sends `request` with the content `source` yields, read and sent as
    /// the server takes it (D19), encoded as `request.body`'s encoding says
    /// (its own content is ignored); the response's content goes to `sink`
    /// when given, else into the answer.
    pub fn upload<'s>(
        &mut self,
        request: Request,
        source: &'s mut dyn std::io::Read,
        sink: Option<&'s mut dyn std::io::Write>,
    ) -> Result<Answer, ClientError> {
        let call = self.driver.begin_upload(request);
        match sink {
            Some(sink) => {
                let outcome = only(self.run(call, Streams::new(Some(source), Some(&mut *sink))));
                whole_content_to(outcome, sink)
            }
            None => only(self.run(call, Streams::new(Some(source), None))),
        }
    }

    /// Steps `call` to its end.
    fn run(&mut self, mut call: Call, mut streams: Streams<'_>) -> Vec<Result<Answer, ClientError>> {
        loop {
            match self
                .driver
                .step(&mut self.stream, &mut self.scratch, &mut call, &mut streams)
            {
                Step::Done => break,
                // Waiting for neither direction: only a timer can move.
                Step::Wait {
                    read: false,
                    write: false,
                    deadline,
                } => {
                    let now = self.driver.now().instant;
                    if let Some(left) = deadline.map(|d| d.saturating_duration_since(now)) {
                        std::thread::sleep(left);
                    }
                }
                // The timed-out read or write was the wait. Drain and Fill
                // are only for staged streams, which this client does not
                // use: its sink and source are written and read in the
                // step.
                Step::Wait { .. } | Step::Drain | Step::Fill => {}
            }
        }
        self.driver.finish(call)
    }
}

/// A download's answer: content that did not stream goes to the sink too
/// ([`Answer::take_whole_content`]).
fn whole_content_to(
    outcome: Result<Answer, ClientError>,
    sink: &mut dyn std::io::Write,
) -> Result<Answer, ClientError> {
    let mut answer = outcome?;
    sink.write_all(&answer.take_whole_content())
        .map_err(ClientError::Sink)?;
    Ok(answer)
}

/// A pooled connection's stream: plain TCP, or TLS over it.
pub(crate) enum PoolStream {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<crate::io_adapters::tls::TlsStream<TcpStream>>),
}

impl PoolStream {
    /// The TCP socket underneath.
    fn socket(&self) -> &TcpStream {
        match self {
            PoolStream::Plain(stream) => stream,
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => stream.get_ref(),
        }
    }
}

impl Read for PoolStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            PoolStream::Plain(stream) => stream.read(buf),
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => stream.read(buf),
        }
    }
}

impl Write for PoolStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            PoolStream::Plain(stream) => stream.write(buf),
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => stream.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            PoolStream::Plain(stream) => stream.flush(),
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => stream.flush(),
        }
    }
}

impl Transport for PoolStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        match self {
            PoolStream::Plain(stream) => stream.shutdown_write(),
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => stream.shutdown_write(),
        }
    }

    fn set_timeout(&mut self, limit: Option<Duration>) -> io::Result<()> {
        match self {
            PoolStream::Plain(stream) => stream.set_timeout(limit),
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => stream.set_timeout(limit),
        }
    }

    fn acknowledged(&self) -> Option<crate::machine::Acknowledged> {
        match self {
            PoolStream::Plain(stream) => stream.acknowledged(),
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => stream.acknowledged(),
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

type PoolShared = Shared<Client<PoolStream>, Condvar>;

/// A pooled, blocking client: reqwest's blocking `Client` for jsontp.
/// Cheap to clone (the clones share the connections); `Send` and `Sync`,
/// for any number of threads at once.
///
/// - **Reuse.** A call takes an idle connection to its [`Origin`] or makes
///   one, and gives it back when the answer is whole: one exchange per
///   connection at a time (no pipelining across calls), so calls in
///   flight at once each have their own. At most
///   [`max_connections_per_host`](PoolOptions::max_connections_per_host)
///   per origin: a call that finds them all in use waits for one.
/// - **Idle connections** are closed after
///   [`idle_timeout`](PoolOptions::idle_timeout) (by a thread that sleeps
///   until the next one is due and ends when none is idle), and one the
///   server closed meanwhile, or that holds bytes nobody asked for, is
///   never used: it is closed when a call would take it.
/// - **Retries** (D13): when a *reused* connection closes before any byte
///   of the answer arrives (the server closed it as the request went out:
///   its idle limit, a restart behind a balancer), a `GET`, `OPTIONS`,
///   `PUT` or `DELETE` is sent again, once, on a new connection. A `POST`
///   never is: its error ([`ClientError::ClosedEarly`]) says whether it
///   may or may not have been applied. Nor is anything after part of the
///   answer arrived, nor a streamed [`upload`](Self::upload), whose
///   source has been read: send content held in memory to have a `PUT`
///   retried.
/// - **Deadline**: [`call_timeout`](PoolOptions::call_timeout) or
///   [`RequestBuilder::timeout`] bounds the whole call (waiting,
///   connecting, the exchange, the retry), besides each step's own
///   timeouts ([`ClientOptions`]); its expiry is
///   [`Timeout::Call`](super::Timeout::Call).
/// - **TLS**: `jsontps://` origins over TLS (D20, feature `tls`), as
///   [`PoolOptions::tls`] says; `jsontp://` plain.
///
/// ```no_run
/// use jsontp_protocol::io_adapters::client::{Origin, PoolOptions};
/// use jsontp_protocol::io_adapters::client::blocking::Pool;
/// use jsontp_protocol::message::{Method, Request};
///
/// let pool = Pool::new(PoolOptions::default().with_max_connections_per_host(4));
/// let news: Origin = "jsontp://127.0.0.1:1119".parse()?;
/// std::thread::scope(|threads| {
///     for _ in 0..8 {
///         threads.spawn(|| {
///             let request = Request::new(Method::Get, "/list".parse().expect("a resource"));
///             pool.send(&news, request).map(|answer| answer.response.status.code)
///         });
///     }
/// });
/// assert!(pool.open_connections(&news) <= 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
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
    /// allows (see [`Pool`]).
    pub fn send(&self, origin: &Origin, request: Request) -> Result<Answer, ClientError> {
        self.send_within(origin, request, None)
    }

    /// [`send`](Self::send), with the call's own deadline when `limit` is
    /// given.
    pub(crate) fn send_within(
        &self,
        origin: &Origin,
        request: Request,
        limit: Option<Option<Duration>>,
    ) -> Result<Answer, ClientError> {
        let method = request.method;
        let mut resend = Resend::new(request);
        self.call(origin, method, true, limit, |client, reused| {
            client.send(resend.next(reused, true)?)
        })
    }

    /// Sends `request` to `origin` and writes the answer's content to
    /// `sink` as it arrives (D19), as [`Client::download`] does; sent
    /// again once where D13 allows (nothing has reached `sink` then).
    pub fn download(
        &self,
        origin: &Origin,
        request: Request,
        sink: &mut dyn Write,
    ) -> Result<Answer, ClientError> {
        let method = request.method;
        let mut resend = Resend::new(request);
        self.call(origin, method, true, None, |client, reused| {
            client.download(resend.next(reused, true)?, &mut *sink)
        })
    }

    /// Sends `head` to `origin` with the content `source` yields, read as
    /// the server takes it (D19), as [`Client::upload`] does. Never sent
    /// again, whatever its method: the source has been read.
    pub fn upload<'s>(
        &self,
        origin: &Origin,
        head: Request,
        source: &'s mut dyn Read,
        sink: Option<&'s mut dyn Write>,
    ) -> Result<Answer, ClientError> {
        let method = head.method;
        // Called once: an upload is never sent again.
        let mut parts = Some((head, source, sink));
        self.call(origin, method, false, None, |client, _| {
            let (head, source, sink) = parts.take().ok_or(ClientError::ConnectionClosed)?;
            client.upload(head, source, sink)
        })
    }

    /// The connections to `origin` open and waiting for a call.
    pub fn idle_connections(&self, origin: &Origin) -> usize {
        self.shared.idle_count(origin)
    }

    /// The connections to `origin` open, idle or in use.
    pub fn open_connections(&self, origin: &Origin) -> usize {
        self.shared.open_count(origin)
    }

    /// One call: a connection, the exchange, and the retry D13 allows
    /// when `retryable`.
    fn call(
        &self,
        origin: &Origin,
        method: Method,
        retryable: bool,
        limit: Option<Option<Duration>>,
        mut exchange: impl FnMut(&mut Client<PoolStream>, bool) -> Result<Answer, ClientError>,
    ) -> Result<Answer, ClientError> {
        let limit = limit.unwrap_or(self.shared.options.call_timeout);
        let deadline = Deadline::after(self.shared.now(), limit);
        let mut lease = self.lease(origin, deadline)?;
        let reused = lease.reused();
        let outcome = match self.attempt(&mut lease, deadline, &mut exchange) {
            Err(error) if retryable && may_retry(&error, method, reused) => {
                tracing::debug!(%origin, %method, %error, "sending again on a new connection (D13)");
                lease.reconnecting();
                self.connect_into(&mut lease, deadline)?;
                self.attempt(&mut lease, deadline, &mut exchange)
            }
            outcome => outcome,
        };
        if lease.finish() {
            start_reaper(&self.shared);
        }
        outcome
    }

    /// One exchange on the lease's connection, within the deadline.
    fn attempt(
        &self,
        lease: &mut Lease<Client<PoolStream>, Condvar>,
        deadline: Deadline,
        exchange: &mut impl FnMut(&mut Client<PoolStream>, bool) -> Result<Answer, ClientError>,
    ) -> Result<Answer, ClientError> {
        let bounded = deadline.bound(self.shared.now(), self.shared.options.client.exchange_timeout)?;
        let reused = lease.reused();
        let client = lease.conn().ok_or(ClientError::ConnectionClosed)?;
        client.driver.set_exchange_timeout(bounded.limit);
        exchange(client, reused).map_err(|e| bounded.blame(e))
    }

    /// A place among `origin`'s connections, with its connection: an idle
    /// one, or a new one; waits while every place is taken.
    fn lease(
        &self,
        origin: &Origin,
        deadline: Deadline,
    ) -> Result<Lease<Client<PoolStream>, Condvar>, ClientError> {
        loop {
            let seen = match self.shared.checkout(origin) {
                Checkout::Reuse(conn) => {
                    return Ok(Lease::new(Arc::clone(&self.shared), origin.clone(), Some(conn)));
                }
                Checkout::Connect => {
                    let mut lease = Lease::new(Arc::clone(&self.shared), origin.clone(), None);
                    self.connect_into(&mut lease, deadline)?;
                    return Ok(lease);
                }
                Checkout::Full(seen) => seen,
            };
            let mut hosts = self.shared.hosts();
            while hosts.changes == seen {
                // Again after every wake: a spurious one moves nothing.
                let left = deadline.left(self.shared.now())?;
                hosts = match left {
                    None => self
                        .shared
                        .signal
                        .wait(hosts)
                        .unwrap_or_else(|poisoned| poisoned.into_inner()),
                    Some(left) => {
                        let (hosts, waited) = self
                            .shared
                            .signal
                            .wait_timeout(hosts, left)
                            .unwrap_or_else(|poisoned| poisoned.into_inner());
                        if waited.timed_out() {
                            return Err(ClientError::TimedOut(super::Timeout::Call));
                        }
                        hosts
                    }
                };
            }
        }
    }

    /// Connects the lease's place to its origin, within the deadline.
    fn connect_into(
        &self,
        lease: &mut Lease<Client<PoolStream>, Condvar>,
        deadline: Deadline,
    ) -> Result<(), ClientError> {
        let options = &self.shared.options;
        let origin = lease.origin().clone();
        let bounded = deadline.bound(self.shared.now(), options.client.connect_timeout)?;
        let address = origin.address();
        let stream = connect(address.as_str(), bounded.limit).map_err(|e| bounded.blame(e))?;
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
                    .map_err(|e| bounded.blame(e))?;
                PoolStream::Tls(Box::new(stream))
            }
            #[cfg(not(feature = "tls"))]
            Scheme::Tls => return Err(no_tls(&address)),
        };
        lease.connected(Client::from_stream(stream, options.client.clone()));
        Ok(())
    }
}

/// The error for a `jsontps://` origin in a build without TLS.
#[cfg(not(feature = "tls"))]
pub(crate) fn no_tls(address: &str) -> ClientError {
    ClientError::Tls {
        addr: address.to_owned(),
        source: io::Error::new(
            io::ErrorKind::Unsupported,
            "this build has no TLS (the crate's feature `tls`)",
        ),
    }
}

/// Starts the thread that closes the pool's idle connections in time; it
/// holds the pool only while it looks, and ends when none is idle or the
/// pool is gone.
fn start_reaper(shared: &Arc<PoolShared>) {
    let weak = Arc::downgrade(shared);
    let started = std::thread::Builder::new()
        .name("jsontp-pool-idle".into())
        .spawn(move || {
            loop {
                let Some(shared) = weak.upgrade() else {
                    return;
                };
                let next = shared.reap();
                let now = shared.now();
                drop(shared);
                match next {
                    Some(at) => std::thread::sleep(at.saturating_duration_since(now)),
                    None => return,
                }
            }
        });
    if started.is_err() {
        // No thread: idle connections are closed when a call next looks.
        shared.hosts().reaper = Reaper::Stopped;
    }
}

impl RequestBuilder<Pool> {
    /// Sends the request on the pool ([`Pool::send`]) and waits for its
    /// answer; the errors of building it come out here.
    pub fn send(self) -> Result<Answer, ClientError> {
        let (origin, request) = self.parts?;
        self.pool.send_within(&origin, request, self.timeout)
    }
}
