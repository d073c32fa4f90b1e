//! The async client (feature `tokio`): the twin of
//! [`blocking::Client`](super::blocking::Client), with the same options,
//! outcomes and errors, and the same drive step, polled through the
//! stream (tokio's `Pending` is the step's `WouldBlock`).
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
use std::net::ToSocketAddrs;
use std::task::Poll;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::drive::{READ_CHUNK, READ_PIECE, Staged};
use super::{Answer, Call, ClientError, ClientOptions, Direction, Driver, Step, Streams, connect, only};
use crate::io_adapters::transport::{IoMode, PolledIo, park};
use crate::message::Request;

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
        let shown = addr.to_string();
        let timeout = options.connect_timeout;
        let connected = tokio::task::spawn_blocking(move || connect(shown.as_str(), timeout))
            .await
            .map_err(|e| ClientError::Io(std::io::Error::other(e)))??;
        connected.set_nonblocking(true).map_err(ClientError::Io)?;
        let stream = TcpStream::from_std(connected).map_err(ClientError::Io)?;
        Ok(Client::from_stream(stream, options))
    }
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
        let failed = |source| ClientError::Tls {
            addr: shown.clone(),
            source,
        };
        let name = crate::io_adapters::tls::server_name_of(server_name).map_err(failed)?;
        let Client { stream, .. } = Client::connect(addr, options.clone()).await?;
        let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::clone(tls.config()));
        let handshake = connector.connect(name, stream);
        let stream = match options.connect_timeout {
            Some(limit) => tokio::time::timeout(limit, handshake)
                .await
                .map_err(|_| ClientError::TimedOut(super::Timeout::Connect))?,
            None => handshake.await,
        }
        .map_err(|e| failed(crate::io_adapters::tls::explain_handshake(e)))?;
        let stream = crate::io_adapters::tls::TokioTlsStream::new(stream.into());
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
                        let read = source.read(staged.to_fill(READ_PIECE)).await;
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

/// The client as a `tower::Service` of requests to one server (feature
/// `tower`): tower's layers (timeouts, retries, rate limits) and its
/// balancing across several servers apply to it unchanged.
///
/// Each call takes a connection kept open from an earlier call, or
/// connects a new one, sends its request and waits for the answer; a
/// connection still usable afterwards is kept for the next call (at most
/// [`max_idle`](Self::with_max_idle) of them). Calls in flight at once
/// each have their own connection, so the answers never wait for each
/// other; bound them with a concurrency limit in front. A call dropped
/// before its answer (a timeout) drops its connection with it.
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
    addr: std::sync::Arc<str>,
    options: ClientOptions,
    max_idle: usize,
    idle: std::sync::Arc<std::sync::Mutex<Vec<Client>>>,
}

#[cfg(feature = "tower")]
impl ClientService {
    /// Calls to `addr` (`"host:port"`), each connection made with `options`.
    pub fn new(addr: impl Into<String>, options: ClientOptions) -> ClientService {
        ClientService {
            addr: addr.into().into(),
            options,
            max_idle: 8,
            idle: std::sync::Arc::default(),
        }
    }

    /// Keeps at most `max` connections open between calls (builder style;
    /// 8 by default, 0 to close each after its answer).
    pub fn with_max_idle(mut self, max: usize) -> ClientService {
        self.max_idle = max;
        self
    }

    /// The connections open and waiting for a call.
    pub fn idle_connections(&self) -> usize {
        self.idle.lock().map_or(0, |idle| idle.len())
    }
}

#[cfg(feature = "tower")]
impl tower::Service<Request> for ClientService {
    type Response = Answer;
    type Error = ClientError;
    type Future = std::pin::Pin<Box<dyn std::future::Future<Output = Result<Answer, ClientError>> + Send>>;

    /// Always ready: a call that finds no open connection makes one.
    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> Poll<Result<(), ClientError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let kept = this.idle.lock().ok().and_then(|mut idle| idle.pop());
            let mut client = match kept {
                Some(client) => client,
                None => Client::connect(&*this.addr, this.options.clone()).await?,
            };
            let answer = client.send(request).await;
            if answer.is_ok()
                && !client.is_closed()
                && let Ok(mut idle) = this.idle.lock()
                && idle.len() < this.max_idle
            {
                idle.push(client);
            }
            answer
        })
    }
}
