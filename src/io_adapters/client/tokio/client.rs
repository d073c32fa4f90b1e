//! [`Client`]: one connection, over TCP, TLS or any `AsyncRead +
//! AsyncWrite` stream, its calls stepped by the drive step polled
//! through the stream; and how a connection is made (TCP, then TLS).

use std::fmt;
use std::future::poll_fn;
use std::net::ToSocketAddrs;
use std::task::Poll;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

#[cfg(feature = "tls")]
use crate::io_adapters::client::Timeout;
use crate::io_adapters::client::drive::{READ_CHUNK, READ_PIECE, Staged};
use crate::io_adapters::client::{
    Answer, Call, ClientError, ClientOptions, Direction, Driver, Step, Streams, connect, only,
};
use crate::io_adapters::transport::{IoMode, PolledIo, park};
use crate::message::Request;

/// An async client on one connection, over TCP or any
/// `AsyncRead + AsyncWrite` stream.
pub struct Client<S = TcpStream> {
    pub(super) stream: S,
    pub(super) driver: Driver,
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
pub(super) async fn tcp(addr: String, timeout: Option<Duration>) -> Result<TcpStream, ClientError> {
    let connected = tokio::task::spawn_blocking(move || connect(addr.as_str(), timeout))
        .await
        .map_err(|e| ClientError::Io(std::io::Error::other(e)))??;
    connected.set_nonblocking(true).map_err(ClientError::Io)?;
    TcpStream::from_std(connected).map_err(ClientError::Io)
}

/// A TLS session (D20) over a connected `stream` to `shown`, the handshake
/// done, bounded by `limit`.
#[cfg(feature = "tls")]
pub(super) async fn tls_over(
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
                        send_copy: crate::io_adapters::transport::no_copy,
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
