//! The blocking client: one TCP connection, requests in, responses out.
//!
//! A [`Client`] drives a [`ClientConnection`] over a socket. It
//! moves bytes and time only: the machine writes the requests, runs the
//! 100-continue handshake (D10), frames and validates the responses (D1,
//! D13) and checks the echoed `resource`.
//!
//! ```no_run
//! use jsontp::io_adapters::std_client::{Client, ClientOptions};
//! use jsontp::message::{Method, Request};
//!
//! let mut client = Client::connect("127.0.0.1:8080", ClientOptions::default())?;
//! let request = Request::new(Method::Get, "/hello.txt".parse()?);
//! let exchange = client.send(request)?;
//! println!("{}", exchange.response.body.as_text().unwrap_or(""));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The calls block, but the socket underneath is non-blocking and waits on
//! `mio`'s poll for "readable or writable": std alone can only block on one
//! direction at a time, and a client that pipelines many requests must keep
//! reading responses while it is still writing, or both sides stop with full
//! buffers.

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token};

use super::drive::now;
use crate::machine::{
    ClientConfig, ClientConnection, ClientEvent, Limits, Now, PeerError, RequestId, UsageError,
};
use crate::message::{Forgiven, Rejection, Request, Response, Validation};

/// The default limit on the size of one response on the wire: 32 MiB (see
/// [`ClientConfig::MAX_RESPONSE_BYTES`], the machine's default).
pub const RESPONSE_WIRE_LIMIT: usize = ClientConfig::MAX_RESPONSE_BYTES;

/// How a client connects, waits and validates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// Strict or lenient response validation (D13). Strict by default.
    pub validation: Validation,
    /// How long to wait for `100` before sending the full request anyway
    /// (D10).
    pub continue_wait: Duration,
    /// Limits on the responses (D3).
    pub limits: Limits,
    /// Longest wait for the TCP connection. `None`: the system's own.
    pub connect_timeout: Option<Duration>,
    /// Longest silence while a response is owed. `None`: no limit.
    pub read_timeout: Option<Duration>,
    /// Longest time from sending a request (or a pipelined batch) to its
    /// last response. `None`: no limit.
    pub exchange_timeout: Option<Duration>,
}

impl Default for ClientOptions {
    /// Strict; 10 s to connect, 30 s of silence, 60 s per exchange; the
    /// machine's default limits and 100-continue wait, except the size of
    /// one response on the wire (see [`RESPONSE_WIRE_LIMIT`]).
    fn default() -> Self {
        let config = ClientConfig::default();
        ClientOptions {
            validation: Validation::Strict,
            continue_wait: config.continue_wait,
            limits: config.limits,
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(30)),
            exchange_timeout: Some(Duration::from_secs(60)),
        }
    }
}

impl ClientOptions {
    /// Lenient validation (builder style): forgives what the published
    /// reference crate leaves out, and reports it (D13).
    pub fn lenient(mut self) -> Self {
        self.validation = Validation::Lenient;
        self
    }

    /// The machine's configuration for a client connection.
    pub(crate) fn machine_config(&self) -> ClientConfig {
        ClientConfig {
            limits: self.limits,
            validation: self.validation,
            continue_wait: self.continue_wait,
        }
    }
}

/// One finished exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// The final response.
    pub response: Response,
    /// What lenient validation forgave in it (D13); empty when strict.
    pub forgiven: Vec<Forgiven>,
    /// Whether the server acknowledged a 100-continue handshake with `100`
    /// before this response (D10).
    pub continued: bool,
}

/// Which clock ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timeout {
    /// [`ClientOptions::connect_timeout`].
    Connect,
    /// [`ClientOptions::read_timeout`]: the server stayed silent.
    Read,
    /// [`ClientOptions::exchange_timeout`].
    Exchange,
    /// The machine's own timer (D3): a response started and did not finish
    /// in time.
    Message,
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Timeout::Connect => "connecting took too long",
            Timeout::Read => "the server sent nothing for too long",
            Timeout::Exchange => "the exchange took too long",
            Timeout::Message => "a response started but did not finish in time",
        })
    }
}

/// What went wrong with an exchange.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// The connection could not be made (refused, unreachable, name not
    /// resolved).
    Refused {
        /// The address as given.
        addr: String,
        /// Why.
        source: io::Error,
    },
    /// The server closed the connection before answering.
    ClosedEarly,
    /// The response echoed another `resource` than the request's (D13).
    ResourceMismatch {
        /// What we sent.
        sent: String,
        /// What came back.
        received: String,
    },
    /// A clock ran out.
    TimedOut(Timeout),
    /// The response broke the protocol, or fits no request of ours (a
    /// `1xx` other than the `100` of a handshake we asked for, D10, D12);
    /// the rejection says how.
    InvalidResponse(Rejection),
    /// The connection was already closed (by the server after an earlier
    /// exchange, or after an error): connect again.
    ConnectionClosed,
    /// A call the connection could not take.
    Usage(UsageError),
    /// The socket failed.
    Io(io::Error),
}

impl ClientError {
    /// A copy, for the other exchanges of a pipeline that the same failure
    /// ends (`io::Error` is not `Clone`).
    fn duplicate(&self) -> ClientError {
        match self {
            ClientError::Refused { addr, source } => ClientError::Refused {
                addr: addr.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
            ClientError::ClosedEarly => ClientError::ClosedEarly,
            ClientError::ResourceMismatch { sent, received } => ClientError::ResourceMismatch {
                sent: sent.clone(),
                received: received.clone(),
            },
            ClientError::TimedOut(t) => ClientError::TimedOut(*t),
            ClientError::InvalidResponse(r) => ClientError::InvalidResponse(r.clone()),
            ClientError::ConnectionClosed => ClientError::ConnectionClosed,
            ClientError::Usage(u) => ClientError::Usage(u.clone()),
            ClientError::Io(e) => ClientError::Io(io::Error::new(e.kind(), e.to_string())),
        }
    }

    /// Whether the connection is unusable after this error.
    fn breaks_connection(&self) -> bool {
        !matches!(
            self,
            ClientError::ResourceMismatch { .. } | ClientError::InvalidResponse(_) | ClientError::Usage(_)
        )
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Refused { addr, source } => write!(f, "could not connect to {addr}: {source}"),
            ClientError::ClosedEarly => f.write_str("the server closed the connection before answering"),
            ClientError::ResourceMismatch { sent, received } => write!(
                f,
                "the response is for resource {received:?}, not {sent:?} as requested (D13)"
            ),
            ClientError::TimedOut(t) => write!(f, "timed out: {t}"),
            ClientError::InvalidResponse(r) => write!(f, "invalid response: {}", r.message),
            ClientError::ConnectionClosed => f.write_str("the connection is closed; connect again"),
            ClientError::Usage(u) => write!(f, "{u}"),
            ClientError::Io(e) => write!(f, "I/O error: {e}"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Refused { source, .. } | ClientError::Io(source) => Some(source),
            ClientError::InvalidResponse(r) => Some(r),
            ClientError::Usage(u) => Some(u),
            _ => None,
        }
    }
}

/// Which way bytes went, for a [`Client::set_tracer`] callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Written to the server.
    Sent,
    /// Read from the server.
    Received,
}

/// A callback that sees every byte written and read.
pub type Tracer = Box<dyn FnMut(Direction, &[u8]) + Send>;

/// The exchanges a call waits for, and their outcomes as the machine's
/// events arrive. Shared by the blocking and the async client; pure
/// bookkeeping, no protocol logic.
pub(crate) struct Outstanding {
    slots: VecDeque<Slot>,
}

struct Slot {
    /// `None` for a request the machine did not take.
    id: Option<RequestId>,
    continued: bool,
    result: Option<Result<Exchange, ClientError>>,
}

impl Outstanding {
    pub(crate) fn new() -> Self {
        Outstanding {
            slots: VecDeque::new(),
        }
    }

    /// Waits for exchange `id` too.
    pub(crate) fn push(&mut self, id: RequestId) {
        self.slots.push_back(Slot {
            id: Some(id),
            continued: false,
            result: None,
        });
    }

    /// Records an outcome for a request that could not even be queued.
    pub(crate) fn push_failed(&mut self, error: ClientError) {
        self.slots.push_back(Slot {
            id: None,
            continued: false,
            result: Some(Err(error)),
        });
    }

    /// Whether every exchange has an outcome.
    pub(crate) fn is_done(&self) -> bool {
        self.slots.iter().all(|s| s.result.is_some())
    }

    fn slot(&mut self, id: Option<RequestId>) -> Option<&mut Slot> {
        match id {
            Some(id) => self
                .slots
                .iter_mut()
                .find(|s| s.id == Some(id) && s.result.is_none()),
            // No id: the failure belongs to the oldest unanswered exchange,
            // since responses come in request order (D2).
            None => self.slots.iter_mut().find(|s| s.result.is_none()),
        }
    }

    fn settle(&mut self, id: Option<RequestId>, result: Result<Exchange, ClientError>) {
        if let Some(slot) = self.slot(id) {
            slot.result = Some(result);
        }
    }

    /// Takes one event from the machine. Events of exchanges this call does
    /// not wait for are dropped.
    pub(crate) fn on_event(&mut self, event: ClientEvent) {
        match event {
            ClientEvent::Continue { id } => {
                if let Some(slot) = self.slot(Some(id)) {
                    slot.continued = true;
                }
            }
            ClientEvent::Response {
                id,
                response,
                forgiven,
            } => {
                if let Some(slot) = self.slot(Some(id)) {
                    let continued = slot.continued;
                    slot.result = Some(Ok(Exchange {
                        response,
                        forgiven,
                        continued,
                    }));
                }
            }
            ClientEvent::PeerError(PeerError::ResourceMismatch { id, sent, response }) => {
                let received = response.resource;
                self.settle(Some(id), Err(ClientError::ResourceMismatch { sent, received }));
            }
            ClientEvent::PeerError(PeerError::Rejected { id, rejection, .. }) => {
                self.settle(id, Err(ClientError::InvalidResponse(rejection)));
            }
            ClientEvent::PeerError(PeerError::TimedOut { id }) => {
                self.settle(id, Err(ClientError::TimedOut(Timeout::Message)));
            }
            ClientEvent::PeerError(PeerError::UnexpectedEof) => {
                self.settle(None, Err(ClientError::ClosedEarly));
            }
            // The server took none of our requests for too long; the
            // connection is closed and `Closed` follows.
            ClientEvent::PeerError(PeerError::OutputStalled) => {}
            ClientEvent::Closed => self.fail_rest(&ClientError::ClosedEarly),
        }
    }

    /// Gives every exchange without an outcome this error.
    pub(crate) fn fail_rest(&mut self, error: &ClientError) {
        for slot in self.slots.iter_mut().filter(|s| s.result.is_none()) {
            slot.result = Some(Err(error.duplicate()));
        }
    }

    /// Whether any outcome leaves the connection unusable.
    pub(crate) fn broke_connection(&self) -> bool {
        self.slots
            .iter()
            .any(|s| matches!(&s.result, Some(Err(e)) if e.breaks_connection()))
    }

    /// The outcomes, in request order.
    pub(crate) fn into_results(self) -> Vec<Result<Exchange, ClientError>> {
        self.slots
            .into_iter()
            .map(|s| s.result.unwrap_or(Err(ClientError::ClosedEarly)))
            .collect()
    }
}

/// Clocks of one call: the exchange deadline and the read silence.
pub(crate) struct Deadlines {
    exchange: Option<Instant>,
    read_timeout: Option<Duration>,
    last_read: Instant,
}

impl Deadlines {
    pub(crate) fn start(options: &ClientOptions, now: Instant) -> Self {
        Deadlines {
            exchange: options.exchange_timeout.map(|t| now + t),
            read_timeout: options.read_timeout,
            last_read: now,
        }
    }

    /// Bytes arrived: the silence starts again.
    pub(crate) fn on_read(&mut self, now: Instant) {
        self.last_read = now;
    }

    /// The clock that has run out, if any.
    pub(crate) fn expired(&self, now: Instant) -> Option<Timeout> {
        if self.exchange.is_some_and(|d| now >= d) {
            return Some(Timeout::Exchange);
        }
        if self.read_timeout.is_some_and(|t| now >= self.last_read + t) {
            return Some(Timeout::Read);
        }
        None
    }

    /// The earliest of our clocks and the machine's timer.
    pub(crate) fn next(&self, machine: Option<Instant>) -> Option<Instant> {
        let read = self.read_timeout.map(|t| self.last_read + t);
        [self.exchange, read, machine].into_iter().flatten().min()
    }
}

/// Queues `requests` on the machine, in order, each with its slot among the
/// outcomes; a request the connection cannot take fails at once. Shared by
/// the blocking and the async client.
pub(crate) fn queue_requests(
    connection: &mut ClientConnection,
    broken: bool,
    requests: impl IntoIterator<Item = Request>,
    now: Now,
) -> Outstanding {
    let mut outstanding = Outstanding::new();
    for request in requests {
        if broken {
            outstanding.push_failed(ClientError::ConnectionClosed);
            continue;
        }
        match connection.send_request(request, now) {
            Ok(id) => outstanding.push(id),
            Err(UsageError::Closed) => outstanding.push_failed(ClientError::ConnectionClosed),
            Err(e) => outstanding.push_failed(ClientError::Usage(e)),
        }
    }
    outstanding
}

const TOKEN: Token = Token(0);
const READ_CHUNK: usize = 16 * 1024;

/// A blocking client on one connection (keep-alive: every request on it
/// until one side closes).
pub struct Client {
    stream: mio::net::TcpStream,
    poll: Poll,
    events: Events,
    connection: ClientConnection,
    options: ClientOptions,
    peer: SocketAddr,
    read_buf: Box<[u8]>,
    readable: bool,
    writable: bool,
    eof: bool,
    write_closed: bool,
    broken: bool,
    tracer: Option<Tracer>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("peer", &self.peer)
            .field("options", &self.options)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

/// Connects to the first address of `addr` that accepts, each try bounded by
/// `timeout`.
pub(crate) fn connect_std(
    addr: &str,
    addrs: Vec<SocketAddr>,
    timeout: Option<Duration>,
) -> Result<TcpStream, ClientError> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name resolved to no address");
    for a in addrs {
        let attempt = match timeout {
            Some(t) => TcpStream::connect_timeout(&a, t),
            None => TcpStream::connect(a),
        };
        match attempt {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e,
        }
    }
    if last.kind() == io::ErrorKind::TimedOut {
        return Err(ClientError::TimedOut(Timeout::Connect));
    }
    Err(ClientError::Refused {
        addr: addr.to_owned(),
        source: last,
    })
}

impl Client {
    /// Connects to `addr` (`"host:port"` or a `SocketAddr`).
    pub fn connect(
        addr: impl ToSocketAddrs + fmt::Display,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let shown = addr.to_string();
        let addrs: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|source| ClientError::Refused {
                addr: shown.clone(),
                source,
            })?
            .collect();
        let stream = connect_std(&shown, addrs, options.connect_timeout)?;
        Client::from_stream(stream, options)
    }

    /// Runs a client over a connected socket.
    pub fn from_stream(stream: TcpStream, options: ClientOptions) -> Result<Client, ClientError> {
        let peer = stream.peer_addr().map_err(ClientError::Io)?;
        // Requests are written whole: Nagle would only delay them.
        stream.set_nodelay(true).map_err(ClientError::Io)?;
        stream.set_nonblocking(true).map_err(ClientError::Io)?;
        let mut stream = mio::net::TcpStream::from_std(stream);
        let poll = Poll::new().map_err(ClientError::Io)?;
        poll.registry()
            .register(&mut stream, TOKEN, Interest::READABLE | Interest::WRITABLE)
            .map_err(ClientError::Io)?;
        let connection = ClientConnection::new(options.machine_config(), now());
        Ok(Client {
            stream,
            poll,
            events: Events::with_capacity(4),
            connection,
            options,
            peer,
            read_buf: vec![0; READ_CHUNK].into_boxed_slice(),
            // Edge-triggered readiness: assume both until told otherwise.
            readable: true,
            writable: true,
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

    /// Calls `tracer` with every byte written and read (for `-vv`).
    pub fn set_tracer(&mut self, tracer: impl FnMut(Direction, &[u8]) + Send + 'static) {
        self.tracer = Some(Box::new(tracer));
    }

    /// Whether the connection can take no more requests.
    pub fn is_closed(&self) -> bool {
        self.broken || self.connection.is_closed()
    }

    /// Sends one request and waits for its response.
    pub fn send(&mut self, request: Request) -> Result<Exchange, ClientError> {
        self.send_all([request])
            .pop()
            .unwrap_or(Err(ClientError::ClosedEarly))
    }

    /// Sends every request at once (pipelining, D2) and waits for all the
    /// responses. One outcome per request, in order; an error that ends the
    /// connection is the outcome of every request still unanswered.
    pub fn send_all(
        &mut self,
        requests: impl IntoIterator<Item = Request>,
    ) -> Vec<Result<Exchange, ClientError>> {
        let start = now();
        let mut outstanding = queue_requests(&mut self.connection, self.broken, requests, start);
        if let Err(error) = self.drive(&mut outstanding, start.instant) {
            self.broken = true;
            outstanding.fail_rest(&error);
        }
        if outstanding.broke_connection() {
            self.broken = true;
        }
        outstanding.into_results()
    }

    /// Moves bytes and time until every outstanding exchange has an outcome.
    fn drive(&mut self, outstanding: &mut Outstanding, start: Instant) -> Result<(), ClientError> {
        let mut deadlines = Deadlines::start(&self.options, start);
        loop {
            let now = now();
            while let Some(event) = self.connection.next_event(now) {
                outstanding.on_event(event);
            }
            if outstanding.is_done() {
                // Whatever is still queued (a full request after `100`
                // that the server answered early) goes out with the next
                // call; nothing is owed now.
                return self.flush_nonblocking();
            }
            let mut progress = self.write_some()?;
            progress |= self.read_some(&mut deadlines, now)?;
            if progress {
                continue;
            }
            if self.connection.poll_timeout().is_some_and(|t| t <= now.instant) {
                self.connection.handle_timeout(now);
                continue;
            }
            let finished = self.connection.is_closed() || self.eof;
            if finished && (self.write_closed || self.connection.pending_output().is_empty()) {
                // The stream has ended or the machine has finished, and it
                // has said all it will about it: nothing more can come.
                outstanding.fail_rest(&ClientError::ClosedEarly);
                return Ok(());
            }
            if let Some(timeout) = deadlines.expired(now.instant) {
                return Err(ClientError::TimedOut(timeout));
            }
            let wait = deadlines
                .next(self.connection.poll_timeout())
                .map(|t| t.saturating_duration_since(now.instant));
            self.wait(wait)?;
        }
    }

    /// Writes what the machine has queued until the socket would block.
    fn write_some(&mut self) -> Result<bool, ClientError> {
        let mut progress = false;
        while self.writable && !self.write_closed && !self.connection.pending_output().is_empty() {
            let out = self.connection.pending_output();
            match self.stream.write(out) {
                Ok(0) => return Err(ClientError::Io(io::ErrorKind::WriteZero.into())),
                Ok(n) => {
                    if let Some(tracer) = self.tracer.as_mut() {
                        tracer(Direction::Sent, &out[..n]);
                    }
                    self.connection.consume_output(n, now());
                    progress = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.writable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_reset(&e) => {
                    // The server went away; what it sent before may still
                    // be readable, and the machine decides what it means.
                    self.write_closed = true;
                    return Ok(progress);
                }
                Err(e) => return Err(ClientError::Io(e)),
            }
        }
        Ok(progress)
    }

    /// Reads one chunk if the socket has one, and hands it to the machine.
    fn read_some(&mut self, deadlines: &mut Deadlines, now: Now) -> Result<bool, ClientError> {
        if !self.readable || self.eof || !self.connection.wants_read() {
            return Ok(false);
        }
        loop {
            match self.stream.read(&mut self.read_buf) {
                Ok(0) => {
                    self.eof = true;
                    self.connection.receive_eof(now);
                    return Ok(true);
                }
                Ok(n) => {
                    let data = &self.read_buf[..n];
                    if let Some(tracer) = self.tracer.as_mut() {
                        tracer(Direction::Received, data);
                    }
                    self.connection.receive_data(data, now);
                    deadlines.on_read(now.instant);
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.readable = false;
                    return Ok(false);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_reset(&e) => {
                    // A reset is an abrupt end of stream.
                    self.eof = true;
                    self.connection.receive_eof(now);
                    return Ok(true);
                }
                Err(e) => return Err(ClientError::Io(e)),
            }
        }
    }

    /// Writes what is queued without waiting.
    fn flush_nonblocking(&mut self) -> Result<(), ClientError> {
        self.write_some().map(|_| ())
    }

    /// Sleeps until the socket is ready or `timeout` passes.
    fn wait(&mut self, timeout: Option<Duration>) -> Result<(), ClientError> {
        match self.poll.poll(&mut self.events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(ClientError::Io(e)),
        }
        for event in self.events.iter() {
            if event.is_readable() || event.is_read_closed() || event.is_error() {
                self.readable = true;
            }
            if event.is_writable() || event.is_write_closed() || event.is_error() {
                self.writable = true;
            }
        }
        Ok(())
    }
}

/// A peer that closed with unread data resets the connection.
pub(crate) fn is_reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted | io::ErrorKind::BrokenPipe
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::StatusCode;

    fn response(resource: &str) -> Response {
        Response::new(crate::message::Status::new(StatusCode::OK, "fine")).with_resource(resource)
    }

    #[test]
    fn outcomes_follow_request_order_and_errors_without_id_go_to_the_oldest() {
        let mut o = Outstanding::new();
        o.push(RequestId(0));
        o.push(RequestId(1));
        o.push(RequestId(2));
        o.on_event(ClientEvent::Continue { id: RequestId(0) });
        o.on_event(ClientEvent::Response {
            id: RequestId(0),
            response: response("/a"),
            forgiven: vec![],
        });
        assert!(!o.is_done());
        o.on_event(ClientEvent::PeerError(PeerError::Rejected {
            id: None,
            rejection: Rejection::new(StatusCode::BAD_REQUEST, "headers.date is missing", "/b"),
            closes: false,
        }));
        o.on_event(ClientEvent::Closed);
        assert!(o.is_done());
        assert!(o.broke_connection());
        let results = o.into_results();
        let first = results[0].as_ref().expect("first answered");
        assert!(first.continued);
        assert!(matches!(&results[1], Err(ClientError::InvalidResponse(r)) if r.message.contains("date")));
        assert!(matches!(results[2], Err(ClientError::ClosedEarly)));
    }

    #[test]
    fn events_of_other_exchanges_are_ignored() {
        let mut o = Outstanding::new();
        o.push(RequestId(5));
        o.on_event(ClientEvent::Response {
            id: RequestId(4),
            response: response("/old"),
            forgiven: vec![],
        });
        assert!(!o.is_done());
        o.on_event(ClientEvent::PeerError(PeerError::ResourceMismatch {
            id: RequestId(5),
            sent: "/a".into(),
            response: Box::new(response("/b")),
        }));
        assert!(o.is_done());
        assert!(
            !o.broke_connection(),
            "a mismatch ends the exchange, not the connection"
        );
    }

    #[test]
    fn deadlines_pick_the_earliest_clock() {
        let t0 = Instant::now();
        let options = ClientOptions {
            read_timeout: Some(Duration::from_secs(2)),
            exchange_timeout: Some(Duration::from_secs(5)),
            ..ClientOptions::default()
        };
        let mut d = Deadlines::start(&options, t0);
        assert_eq!(d.next(None), Some(t0 + Duration::from_secs(2)));
        assert_eq!(
            d.next(Some(t0 + Duration::from_secs(1))),
            Some(t0 + Duration::from_secs(1))
        );
        assert_eq!(d.expired(t0 + Duration::from_secs(2)), Some(Timeout::Read));
        d.on_read(t0 + Duration::from_secs(2));
        assert_eq!(d.expired(t0 + Duration::from_secs(3)), None);
        assert_eq!(d.expired(t0 + Duration::from_secs(5)), Some(Timeout::Exchange));
    }

    #[test]
    fn clients_can_move_between_threads() {
        fn is_send<T: Send>() {}
        is_send::<Client>();
        is_send::<ClientError>();
    }

    #[test]
    fn errors_say_what_happened() {
        let e = ClientError::ResourceMismatch {
            sent: "/a".into(),
            received: "/b".into(),
        };
        assert!(e.to_string().contains("\"/b\""));
        assert_eq!(
            ClientError::TimedOut(Timeout::Read).to_string(),
            "timed out: the server sent nothing for too long"
        );
        let rejected = ClientError::InvalidResponse(Rejection::new(
            StatusCode::BAD_REQUEST,
            "headers.date is missing",
            "/",
        ));
        assert_eq!(rejected.to_string(), "invalid response: headers.date is missing");
    }
}
