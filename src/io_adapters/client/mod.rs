//! The clients: pooled ones for an application, one connection each
//! underneath, requests in, answers out.
//!
//! - [`blocking::Pool`] and `tokio::Pool` (feature `tokio`): what an
//!   application calling a service uses, as it would reqwest's `Client`.
//!   Connections reused across calls, threads and tasks, limited per
//!   origin ([`PoolOptions`]), closed after an idle time; `jsontp://` and
//!   `jsontps://` alike; a deadline per call; an idempotent request sent
//!   again once when a reused connection closes before any byte of its
//!   answer (D13); typed bodies both ways ([`RequestBuilder::keys`],
//!   [`Answer::keys`]).
//! - [`blocking::Client`]: std only, one connection over any blocking
//!   [`Transport`](super::Transport) (TCP by default), pipelining (D2).
//! - `tokio::Client` (feature `tokio`): the same over any
//!   `AsyncRead + AsyncWrite`.
//! - [`Driver`] itself, for an event loop of your own (and the
//!   simulation, which runs it on simulated bytes and time).
//!
//! Both clients drive the same client machine through one drive step
//! ([`Driver`], the only caller of the machine here) and share the
//! bookkeeping of a call (`outstanding.rs`); each only performs the I/O the
//! step asks for. The machine writes the requests, runs the 100-continue
//! handshake (D10), frames and validates the responses (D1, D13) and checks
//! the echoed `resource`. The options, outcomes ([`Answer`]) and errors
//! ([`ClientError`]) below are the same for every client.

use std::fmt;
use std::io;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::Clock;
use crate::machine::{ClientConfig, UsageError};
use crate::message::{Forgiven, Method, Rejection, Response, Validation};

pub mod blocking;
mod drive;
mod keys;
mod outstanding;
mod pool;
#[cfg(feature = "tokio")]
pub mod tokio;

pub use drive::{Call, Driver, Step, Streams};
pub use keys::{KeysError, Side, body_from_keys};
pub use pool::{DEFAULT_PORT, DEFAULT_TLS_PORT, Origin, PoolOptions, RequestBuilder, Scheme, split_url};

/// How a client connects, waits and validates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOptions {
    /// The connection machine's configuration: response limits (D3),
    /// strict or lenient validation (D13), the wait for `100` (D10).
    pub config: ClientConfig,
    /// Longest wait for the TCP connection. `None`: the system's own.
    pub connect_timeout: Option<Duration>,
    /// Longest silence while a response is owed. `None`: no limit.
    pub read_timeout: Option<Duration>,
    /// Longest time from sending a request (or a pipelined batch) to its
    /// last response. `None`: no limit.
    pub exchange_timeout: Option<Duration>,
    /// Where the client reads the time: the system's clocks by default; a
    /// simulation gives its own ([`Clock::from_fn`]).
    pub clock: Clock,
}

impl Default for ClientOptions {
    /// Strict; 10 s to connect, 30 s of silence, 60 s per exchange; the
    /// machine's default client limits (responses up to
    /// [`ClientConfig::MAX_RESPONSE_BYTES`] on the wire) and 100-continue
    /// wait.
    fn default() -> Self {
        ClientOptions {
            config: ClientConfig::default(),
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(30)),
            exchange_timeout: Some(Duration::from_secs(60)),
            clock: Clock::system(),
        }
    }
}

impl ClientOptions {
    /// Lenient validation (builder style): forgives what the published
    /// reference crate leaves out, and reports it (D13).
    pub fn lenient(mut self) -> Self {
        self.config.validation = Validation::Lenient;
        self
    }

    /// Sets where the client reads the time (builder style).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }
}

/// The answer to one request: its final response, and how it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The final response.
    pub response: Response,
    /// What lenient validation forgave in it (D13); empty when strict.
    pub forgiven: Vec<Forgiven>,
    /// Whether the server acknowledged a 100-continue handshake with `100`
    /// before this response (D10).
    pub continued: bool,
}

/// The outcome of a call that sent one request.
pub(crate) fn only(mut outcomes: Vec<Result<Answer, ClientError>>) -> Result<Answer, ClientError> {
    outcomes.pop().unwrap_or(Err(ClientError::ConnectionClosed))
}

impl Answer {
    /// Takes out content that did not stream (the client does not stream
    /// content, or the body's `content` was written in a way the lexer does
    /// not follow, such as a key with escapes), for a download to write to
    /// its sink as well: a download's answer always has an empty body.
    pub(crate) fn take_whole_content(&mut self) -> Vec<u8> {
        self.response.body.replace_content(Vec::new())
    }
}

/// How far an exchange got before its connection ended under it: what
/// decides whether it may be sent again on a new connection (D13).
///
/// The driver counts a byte as the answer's when it arrives while the
/// exchange is the oldest unanswered one, or in the read that ended the
/// answer before it: in a pipeline it may count an exchange as answered in
/// part when its answer had not begun, never the other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Progress {
    /// How much of the request the transport took.
    pub request: Sent,
    /// Whether any byte of the answer arrived (a `100` included).
    pub answer_began: bool,
}

/// How much of a request the transport took.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Sent {
    /// None of it: the server cannot have it.
    Nothing,
    /// Part of it (the rest was still queued, or its content was still
    /// being read from its source, D19).
    Part,
    /// All of it: the server may or may not have applied it.
    Whole,
}

impl Progress {
    /// Nothing written, nothing heard: a request the connection never
    /// carried.
    pub const UNSENT: Progress = Progress {
        request: Sent::Nothing,
        answer_began: false,
    };

    /// Whether a request with `method` that got this far may be sent again,
    /// once, on a new connection (D13): only before any byte of its answer
    /// arrived, and only for `GET`, `OPTIONS`, `PUT` and `DELETE`; never a
    /// `POST`.
    pub fn may_send_again(&self, method: Method) -> bool {
        !self.answer_began
            && matches!(
                method,
                Method::Get | Method::Options | Method::Put | Method::Delete
            )
    }
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
    /// A pooled call's own deadline ([`PoolOptions::call_timeout`],
    /// [`RequestBuilder::timeout`]): waiting for a connection, connecting,
    /// sending and the answer, all together.
    Call,
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Timeout::Connect => "connecting took too long",
            Timeout::Read => "the server sent nothing for too long",
            Timeout::Exchange => "the exchange took too long",
            Timeout::Message => "a response started but did not finish in time",
            Timeout::Call => "the call took longer than its deadline",
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
    /// The TLS session with the server could not be set up (D20): the
    /// handshake failed (a plaintext port, a certificate not trusted, no
    /// common protocol) or timed out.
    Tls {
        /// The address as given.
        addr: String,
        /// Why, as rustls says it.
        source: io::Error,
    },
    /// The server closed (or reset) the connection before the answer was
    /// whole; `progress` says how far the exchange had got, which decides
    /// whether it may be sent again ([`Progress::may_send_again`], D13).
    ClosedEarly {
        /// How far the exchange got.
        progress: Progress,
    },
    /// The response echoed another `resource` than the request's (D13):
    /// it is not taken as the answer. (A response echoing `""`, the
    /// server's error about a resource it could not read, D12, is an
    /// answer, not a mismatch.)
    ResourceMismatch {
        /// What we sent.
        sent: String,
        /// What came back.
        received: String,
        /// The response itself, when the connection reports it: its status
        /// may still say what the server made of the request.
        response: Option<Box<Response>>,
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
    /// Reading the content to upload failed (D19): the request was cut
    /// short and the connection closed.
    Source(io::Error),
    /// Writing the downloaded content failed (D19): the rest was not
    /// taken and the connection closed.
    Sink(io::Error),
    /// A response's content is larger than the client holds in memory
    /// ([`MessageLimits::max_decoded_body`](crate::message::MessageLimits::max_decoded_body)):
    /// stream it to a writer instead ([`blocking::Client::download`]).
    ContentTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// Body keys that do not fit ([`Answer::keys`],
    /// [`RequestBuilder::keys`]): the key at fault, and why.
    Keys(KeysError),
    /// A URL or an origin a pool cannot use ([`split_url`]): nothing was
    /// sent.
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl ClientError {
    /// A copy, for the other exchanges of a pipeline that the same failure
    /// ends (`io::Error` is not `Clone`).
    pub(crate) fn duplicate(&self) -> ClientError {
        match self {
            ClientError::Refused { addr, source } => ClientError::Refused {
                addr: addr.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
            ClientError::Tls { addr, source } => ClientError::Tls {
                addr: addr.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
            ClientError::ClosedEarly { progress } => ClientError::ClosedEarly { progress: *progress },
            ClientError::ResourceMismatch {
                sent,
                received,
                response,
            } => ClientError::ResourceMismatch {
                sent: sent.clone(),
                received: received.clone(),
                response: response.clone(),
            },
            ClientError::TimedOut(t) => ClientError::TimedOut(*t),
            ClientError::InvalidResponse(r) => ClientError::InvalidResponse(r.clone()),
            ClientError::ConnectionClosed => ClientError::ConnectionClosed,
            ClientError::Usage(u) => ClientError::Usage(u.clone()),
            ClientError::Io(e) => ClientError::Io(io::Error::new(e.kind(), e.to_string())),
            ClientError::Source(e) => ClientError::Source(io::Error::new(e.kind(), e.to_string())),
            ClientError::Sink(e) => ClientError::Sink(io::Error::new(e.kind(), e.to_string())),
            ClientError::ContentTooLarge { limit } => ClientError::ContentTooLarge { limit: *limit },
            ClientError::Keys(k) => ClientError::Keys(k.clone()),
            ClientError::BadUrl { url, reason } => ClientError::BadUrl {
                url: url.clone(),
                reason: reason.clone(),
            },
        }
    }

    /// How far the exchange got when its connection ended under it, for
    /// the errors where it did: [`ClosedEarly`](Self::ClosedEarly), and
    /// [`ConnectionClosed`](Self::ConnectionClosed) (nothing sent). `None`
    /// for the others, where the connection did not close first (a timeout,
    /// a refused response) or the call never had one.
    pub fn progress(&self) -> Option<Progress> {
        match self {
            ClientError::ClosedEarly { progress } => Some(*progress),
            ClientError::ConnectionClosed => Some(Progress::UNSENT),
            _ => None,
        }
    }

    /// Whether the connection is unusable after this error.
    pub(crate) fn breaks_connection(&self) -> bool {
        !matches!(
            self,
            ClientError::ResourceMismatch { .. }
                | ClientError::InvalidResponse(_)
                | ClientError::Usage(_)
                | ClientError::Keys(_)
                | ClientError::BadUrl { .. }
        )
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Refused { addr, source } => write!(f, "could not connect to {addr}: {source}"),
            ClientError::Tls { addr, source } => write!(f, "no TLS session with {addr}: {source}"),
            ClientError::ClosedEarly { progress } => f.write_str(match progress {
                Progress {
                    answer_began: true, ..
                } => "the server closed the connection in the middle of its answer",
                Progress {
                    request: Sent::Nothing,
                    ..
                } => "the server closed the connection before answering; the request was not sent, so it was not applied",
                Progress {
                    request: Sent::Part,
                    ..
                } => "the server closed the connection before answering, while the request was being sent",
                Progress {
                    request: Sent::Whole,
                    ..
                } => "the server closed the connection before answering; the request was sent and may or may not have been applied",
            }),
            ClientError::ResourceMismatch {
                sent,
                received,
                response: Some(response),
            } => write!(
                f,
                "the response ({} {}) is for resource {received:?}, not {sent:?} as requested (D13)",
                response.status.code.as_u16(),
                response.status.formal_message()
            ),
            ClientError::ResourceMismatch {
                sent,
                received,
                response: None,
            } => write!(
                f,
                "the response is for resource {received:?}, not {sent:?} as requested (D13)"
            ),
            ClientError::TimedOut(t) => write!(f, "timed out: {t}"),
            ClientError::InvalidResponse(r) => write!(f, "invalid response: {}", r.message),
            ClientError::ConnectionClosed => f.write_str("the connection is closed; connect again"),
            ClientError::Usage(u) => write!(f, "{u}"),
            ClientError::Io(e) => write!(f, "I/O error: {e}"),
            ClientError::Source(e) => write!(f, "cannot read the content to send: {e}"),
            ClientError::Sink(e) => write!(f, "cannot write the content received: {e}"),
            ClientError::ContentTooLarge { limit } => write!(
                f,
                "the response's content is larger than the {limit} bytes held in memory; download it to a file"
            ),
            ClientError::Keys(k) => write!(f, "{k}"),
            ClientError::BadUrl { url, reason } => write!(f, "the URL {url:?} {reason}"),
        }
    }
}

impl std::error::Error for ClientError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClientError::Refused { source, .. }
            | ClientError::Tls { source, .. }
            | ClientError::Io(source)
            | ClientError::Source(source)
            | ClientError::Sink(source) => Some(source),
            ClientError::InvalidResponse(r) => Some(r),
            ClientError::Usage(u) => Some(u),
            ClientError::Keys(k) => Some(k),
            _ => None,
        }
    }
}

/// Which way bytes went, for a tracer ([`blocking::Client::set_tracer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Written to the server.
    Sent,
    /// Read from the server.
    Received,
}

/// A callback that sees every byte written and read.
pub type Tracer = Box<dyn FnMut(Direction, &[u8]) + Send>;

/// Connects to the first address of `addr` that accepts, each try bounded
/// by `timeout`: the one connect routine of both clients (the async client
/// runs it on tokio's blocking pool, where tokio resolves names anyway).
/// Requests are written whole, so Nagle's delay is turned off.
pub(crate) fn connect(
    addr: impl ToSocketAddrs + fmt::Display,
    timeout: Option<Duration>,
) -> Result<TcpStream, ClientError> {
    let refused = |source| ClientError::Refused {
        addr: addr.to_string(),
        source,
    };
    let addrs: Vec<SocketAddr> = addr.to_socket_addrs().map_err(refused)?.collect();
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the name resolved to no address");
    for a in addrs {
        let attempt = match timeout {
            Some(t) => TcpStream::connect_timeout(&a, t),
            None => TcpStream::connect(a),
        };
        match attempt {
            Ok(stream) => {
                stream.set_nodelay(true).map_err(ClientError::Io)?;
                return Ok(stream);
            }
            Err(e) => last = e,
        }
    }
    if last.kind() == io::ErrorKind::TimedOut {
        return Err(ClientError::TimedOut(Timeout::Connect));
    }
    Err(refused(last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Status, StatusCode};

    #[test]
    fn clients_can_move_between_threads() {
        fn is_send<T: Send>() {}
        is_send::<blocking::Client>();
        is_send::<ClientError>();
        fn is_shared<T: Send + Sync>() {}
        is_shared::<blocking::Pool>();
    }

    #[test]
    fn errors_say_what_happened() {
        let e = ClientError::ResourceMismatch {
            sent: "/a".into(),
            received: "/b".into(),
            response: None,
        };
        assert!(e.to_string().contains("\"/b\""));
        let e = ClientError::ResourceMismatch {
            sent: "/a".into(),
            received: "/b".into(),
            response: Some(Box::new(Response::new(Status::new(
                StatusCode::NOT_FOUND,
                "gone",
            )))),
        };
        assert_eq!(
            e.to_string(),
            "the response (404 Not Found) is for resource \"/b\", not \"/a\" as requested (D13)"
        );
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

    #[test]
    fn a_connection_closed_under_an_exchange_says_how_far_it_got() {
        let closed = |request, answer_began| ClientError::ClosedEarly {
            progress: Progress {
                request,
                answer_began,
            },
        };
        // D13: the error for a request sent says it may or may not have
        // been applied.
        assert_eq!(
            closed(Sent::Whole, false).to_string(),
            "the server closed the connection before answering; the request was sent and may or may not have \
             been applied"
        );
        assert!(
            closed(Sent::Nothing, false)
                .to_string()
                .contains("was not applied")
        );
        assert!(
            closed(Sent::Part, false)
                .to_string()
                .contains("while the request was being sent")
        );
        assert_eq!(
            closed(Sent::Whole, true).to_string(),
            "the server closed the connection in the middle of its answer"
        );
        assert_eq!(ClientError::ConnectionClosed.progress(), Some(Progress::UNSENT));
        assert_eq!(ClientError::TimedOut(Timeout::Read).progress(), None);
    }

    #[test]
    fn only_idempotent_methods_go_again_and_never_after_part_of_the_answer() {
        let heard_nothing = Progress {
            request: Sent::Whole,
            answer_began: false,
        };
        let sent_again: Vec<Method> = Method::ALL
            .into_iter()
            .filter(|&m| heard_nothing.may_send_again(m))
            .collect();
        assert_eq!(
            sent_again,
            [Method::Get, Method::Put, Method::Delete, Method::Options],
            "D13: never a POST"
        );
        assert!(!Progress::UNSENT.may_send_again(Method::Post));
        let heard = Progress {
            answer_began: true,
            ..heard_nothing
        };
        assert!(Method::ALL.into_iter().all(|m| !heard.may_send_again(m)));
    }
}
