//! The tokio server and client (cargo feature `tokio`).
//!
//! Both drive the same machine as the std and mio adapters and hold no
//! protocol logic: they move bytes between a tokio socket and the machine,
//! and time between tokio's clock and the machine's timers.
//!
//! - [`serve`] runs a [`Handler`] on every connection a listener accepts,
//!   until a shutdown future completes.
//! - [`Client`] is the async twin of the blocking
//!   [`std_client::Client`](super::std_client::Client), with the same
//!   options, outcomes and errors.
//!
//! Handlers are synchronous (`fn handle(&self, …) -> Response`) and may block
//! (the file server reads files), so the server runs them on tokio's
//! blocking pool with `spawn_blocking`, never on a runtime worker. The
//! requests of one connection are handled one after the other, which keeps
//! the responses in request order (D2) without buffering them. What happens
//! between the machine and the handler (access log, a panicking handler
//! answered `500`) is the same code as in the std and mio servers.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::drive::{Served, now};
use super::std_client::{
    ClientError, ClientOptions, Deadlines, Direction, Exchange, Outstanding, Timeout, Tracer, is_reset,
    queue_requests,
};
use super::{Handler, ServerOptions};
use crate::machine::{ClientConnection, ServerConfig};
use crate::message::Request;

const READ_CHUNK: usize = 16 * 1024;

/// After shutdown is asked, how long connections with an exchange under way
/// may take to finish it before they are dropped.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Serves `handler` on every connection `listener` accepts, until `shutdown`
/// completes.
///
/// `options.config` configures every connection (limits and timeouts, D3;
/// the 100-continue policy, D10: [`Handler::check_continue`] is asked only
/// with [`ContinuePolicy::Ask`](crate::machine::ContinuePolicy::Ask)).
/// `options.workers` is not used: the runtime's threads serve.
///
/// At shutdown it stops accepting; idle connections close at once, and a
/// connection with an exchange under way finishes it, writes the response
/// and closes. Connections still busy after [`SHUTDOWN_GRACE`] are dropped.
/// Returns once all are gone.
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// use jsontp::io_adapters::ServerOptions;
/// use jsontp::io_adapters::tokio_io::serve;
/// use jsontp::message::{Body, Request, Response, Status, StatusCode};
///
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
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
    let handler = Arc::new(handler);
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(serve_connection(
                        stream,
                        peer,
                        Arc::clone(&handler),
                        options.config.clone(),
                        stop_rx.clone(),
                    ));
                }
                // The peer gave up before we took it: nothing to do.
                Err(e) if is_reset(&e) => {}
                // Out of descriptors or similar: back off instead of
                // spinning, and keep serving the open connections.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
            // Reap finished connections so the set stays small.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    // Receivers only look for the change; a send error means none is left.
    let _ = stop_tx.send(true);
    let drain = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
        connections.shutdown().await;
    }
    Ok(())
}

/// One connection, from accept to close.
async fn serve_connection<H: Handler>(
    mut stream: TcpStream,
    peer: SocketAddr,
    handler: Arc<H>,
    config: ServerConfig,
    mut stop: watch::Receiver<bool>,
) {
    // Responses are written whole: Nagle would only delay them. A failure
    // here costs latency, not correctness.
    let _ = stream.set_nodelay(true);
    let mut served = Served::new(&config, peer, now());
    let mut buf = vec![0u8; READ_CHUNK];
    let mut eof = false;
    // Input reached the machine since the handler last looked.
    let mut fed = false;
    let mut stopping = *stop.borrow();
    loop {
        if fed {
            fed = false;
            // Handlers are synchronous and may block (the file server reads
            // files): they run on the blocking pool, the connection's state
            // travelling there and back.
            let handler = Arc::clone(&handler);
            match tokio::task::spawn_blocking(move || {
                served.dispatch(&*handler);
                served
            })
            .await
            {
                Ok(back) => served = back,
                // A hook panicked outside the handler's own guard: the
                // connection state is gone with it.
                Err(_) => return,
            }
        }
        let pending = !served.conn.pending_output().is_empty();
        if !pending && (served.conn.is_closed() || eof) {
            break;
        }
        if stopping && served.is_idle() {
            break;
        }
        let want_read = !eof && served.conn.wants_read();
        let timer = served.conn.poll_timeout().map(tokio::time::Instant::from_std);
        let (mut reader, mut writer) = stream.split();
        tokio::select! {
            written = writer.write(served.conn.pending_output()), if pending => match written {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    served.conn.consume_output(n, now());
                    // The peer caught up: requests held back by the limits
                    // on what is owed (D3) may be handed out now.
                    fed = true;
                }
            },
            read = reader.read(&mut buf), if want_read => {
                match read {
                    Ok(0) => {
                        eof = true;
                        served.conn.receive_eof(now());
                    }
                    Ok(n) => served.receive(&buf[..n], now()),
                    Err(_) => return,
                }
                fed = true;
            },
            () = sleep_until(timer), if timer.is_some() => {
                served.conn.handle_timeout(now());
                fed = true;
            },
            _ = stop.changed(), if !stopping => stopping = true,
            else => break,
        }
    }
    close_gracefully(stream).await;
}

/// Shuts down our sending side, then reads and drops what the client still
/// sends for a moment: closing a socket with unread input makes the kernel
/// reset the connection, and the client could lose our last response.
async fn close_gracefully(mut stream: TcpStream) {
    const DRAIN_TIME: Duration = Duration::from_millis(500);
    const DRAIN_BYTES: usize = 1 << 20;
    if stream.shutdown().await.is_err() {
        return;
    }
    let mut buf = [0u8; 4096];
    let mut drained = 0;
    let drain = async {
        while drained < DRAIN_BYTES {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    };
    // Either way the socket is closed when it is dropped.
    let _ = tokio::time::timeout(DRAIN_TIME, drain).await;
}

fn sleep_until(deadline: Option<tokio::time::Instant>) -> tokio::time::Sleep {
    // Only polled when `deadline` is set; the fallback is never reached.
    tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now))
}

/// An async client on one connection: the twin of
/// [`std_client::Client`](super::std_client::Client).
pub struct Client {
    stream: TcpStream,
    connection: ClientConnection,
    options: ClientOptions,
    peer: SocketAddr,
    read_buf: Box<[u8]>,
    eof: bool,
    write_closed: bool,
    broken: bool,
    tracer: Option<Tracer>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("peer", &self.peer)
            .field("options", &self.options)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Connects to `addr` (`"host:port"` or a `SocketAddr`).
    pub async fn connect(
        addr: impl ToSocketAddrs + std::fmt::Display,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let shown = addr.to_string();
        let refused = |source| ClientError::Refused {
            addr: shown.clone(),
            source,
        };
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(addr).await.map_err(refused)?.collect();
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the name resolved to no address");
        for a in addrs {
            let attempt = match options.connect_timeout {
                Some(t) => match tokio::time::timeout(t, TcpStream::connect(a)).await {
                    Ok(result) => result,
                    Err(_) => Err(io::ErrorKind::TimedOut.into()),
                },
                None => TcpStream::connect(a).await,
            };
            match attempt {
                Ok(stream) => return Client::from_stream(stream, options),
                Err(e) => last = e,
            }
        }
        if last.kind() == io::ErrorKind::TimedOut {
            return Err(ClientError::TimedOut(Timeout::Connect));
        }
        Err(refused(last))
    }

    /// Runs a client over a connected socket.
    pub fn from_stream(stream: TcpStream, options: ClientOptions) -> Result<Client, ClientError> {
        let peer = stream.peer_addr().map_err(ClientError::Io)?;
        stream.set_nodelay(true).map_err(ClientError::Io)?;
        let connection = ClientConnection::new(options.machine_config(), now());
        Ok(Client {
            stream,
            connection,
            options,
            peer,
            read_buf: vec![0; READ_CHUNK].into_boxed_slice(),
            eof: false,
            write_closed: false,
            broken: false,
            tracer: None,
        })
    }

    /// The server's address.
    pub fn peer_addr(&self) -> SocketAddr {
        self.peer
    }

    /// The options in use.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// Calls `tracer` with every byte written and read.
    pub fn set_tracer(&mut self, tracer: impl FnMut(Direction, &[u8]) + Send + 'static) {
        self.tracer = Some(Box::new(tracer));
    }

    /// Whether the connection can take no more requests.
    pub fn is_closed(&self) -> bool {
        self.broken || self.connection.is_closed()
    }

    /// Sends one request and waits for its response.
    pub async fn send(&mut self, request: Request) -> Result<Exchange, ClientError> {
        self.send_all([request])
            .await
            .pop()
            .unwrap_or(Err(ClientError::ClosedEarly))
    }

    /// Sends every request at once (pipelining, D2) and waits for all the
    /// responses: one outcome per request, in order.
    pub async fn send_all(
        &mut self,
        requests: impl IntoIterator<Item = Request>,
    ) -> Vec<Result<Exchange, ClientError>> {
        let start = now();
        let mut outstanding = queue_requests(&mut self.connection, self.broken, requests, start);
        if let Err(error) = self.drive(&mut outstanding, start.instant).await {
            self.broken = true;
            outstanding.fail_rest(&error);
        }
        if outstanding.broke_connection() {
            self.broken = true;
        }
        outstanding.into_results()
    }

    /// Moves bytes and time until every outstanding exchange has an outcome.
    async fn drive(
        &mut self,
        outstanding: &mut Outstanding,
        start: std::time::Instant,
    ) -> Result<(), ClientError> {
        let mut deadlines = Deadlines::start(&self.options, start);
        loop {
            let at = now();
            while let Some(event) = self.connection.next_event(at) {
                outstanding.on_event(event);
            }
            if outstanding.is_done() {
                // What is still queued goes out with the next call.
                return Ok(());
            }
            if self.connection.poll_timeout().is_some_and(|t| t <= at.instant) {
                self.connection.handle_timeout(at);
                continue;
            }
            let pending = !self.write_closed && !self.connection.pending_output().is_empty();
            if (self.connection.is_closed() || self.eof) && !pending {
                // The stream has ended or the machine has finished, and it
                // has said all it will about it.
                outstanding.fail_rest(&ClientError::ClosedEarly);
                return Ok(());
            }
            if let Some(timeout) = deadlines.expired(at.instant) {
                return Err(ClientError::TimedOut(timeout));
            }
            let wake = deadlines
                .next(self.connection.poll_timeout())
                .map(tokio::time::Instant::from_std);
            let want_read = !self.eof && self.connection.wants_read();
            let (mut reader, mut writer) = self.stream.split();
            tokio::select! {
                written = writer.write(self.connection.pending_output()), if pending => match written {
                    Ok(0) => return Err(ClientError::Io(io::ErrorKind::WriteZero.into())),
                    Ok(n) => {
                        if let Some(tracer) = self.tracer.as_mut() {
                            tracer(Direction::Sent, &self.connection.pending_output()[..n]);
                        }
                        self.connection.consume_output(n, now());
                    }
                    // The server went away; what it sent may still be read.
                    Err(e) if is_reset(&e) && want_read => self.write_closed = true,
                    Err(e) => return Err(ClientError::Io(e)),
                },
                read = reader.read(&mut self.read_buf), if want_read => match read {
                    Ok(0) => {
                        self.eof = true;
                        self.connection.receive_eof(now());
                    }
                    Ok(n) => {
                        let data = &self.read_buf[..n];
                        if let Some(tracer) = self.tracer.as_mut() {
                            tracer(Direction::Received, data);
                        }
                        let at = now();
                        self.connection.receive_data(data, at);
                        deadlines.on_read(at.instant);
                    }
                    Err(e) if is_reset(&e) => {
                        self.eof = true;
                        self.connection.receive_eof(now());
                    }
                    Err(e) => return Err(ClientError::Io(e)),
                },
                () = sleep_until(wake), if wake.is_some() => {}
                else => {
                    outstanding.fail_rest(&ClientError::ClosedEarly);
                    return Ok(());
                }
            }
        }
    }
}
