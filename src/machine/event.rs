//! What the machine tells its caller, and the errors it can report.

use std::fmt;

use crate::message::{Forgiven, Rejection, Request, Response};

/// Identifies one exchange on a connection, in order: the first request is
/// 0, the next 1, …
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub(crate) u64);

impl RequestId {
    /// The exchange's number on its connection, from 0.
    pub fn index(self) -> u64 {
        self.0
    }

    /// The id of exchange number `index`, for tests that name an exchange
    /// before its event comes; not part of the API (an application answers
    /// the ids its events gave it, and a machine answers any other with
    /// [`UsageError::UnknownRequest`]).
    #[doc(hidden)]
    pub fn from_index(index: u64) -> RequestId {
        RequestId(index)
    }
}

/// Something that happened on a [`ServerConnection`](super::ServerConnection).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerEvent {
    /// A complete, valid request to answer with
    /// [`ServerConnection::send_response`](super::ServerConnection::send_response).
    Request {
        /// Which exchange.
        id: RequestId,
        /// The request, boxed: it is a few hundred bytes, and the event
        /// moves through the queue and the caller's match.
        request: Box<Request>,
    },
    /// With [`ContinuePolicy::Ask`](super::ContinuePolicy::Ask): the first
    /// request of a 100-continue handshake. Answer with
    /// [`ServerConnection::accept_continue`](super::ServerConnection::accept_continue)
    /// or a final response via `send_response`.
    ContinueRequested {
        /// Which exchange.
        id: RequestId,
        /// The preliminary request; its body is empty (D10).
        request: Box<Request>,
    },
    /// With [`ServerConfig::stream_content`](super::ServerConfig::stream_content):
    /// the request whose content is about to be handed out in pieces, as
    /// the rest of the message says (D19), read by the same parser, in the
    /// same context, as the whole message will be. Streaming senders write
    /// `body` last and `content` last in it, so the bytes before the
    /// content string, closed as if the content were `""`, are the head,
    /// and it comes as the content starts. When they do not make a request
    /// (a field written after the content, or `content` before
    /// `encoding`), the content is held within the message limit (`413`
    /// past it) and the head comes once the message has ended, read from
    /// the whole message, before any piece is handed out.
    ///
    /// The head comes at most once per exchange, before its first
    /// [`ServerEvent::Content`] piece (the content may turn out empty and
    /// have none), and only for a request that passes D5 levels 1 to 4
    /// and has content: not for the first request of a 100-continue
    /// handshake, whose body is ignored (D10). Content that no one takes
    /// (the head does not read, or is such a first request, or a full
    /// request naming another method or resource than its handshake's)
    /// is decoded and checked as D5 requires, and dropped: no piece of it
    /// is handed out. The full request of a
    /// handshake has one, under the handshake's id, when
    /// [`ContinuePolicy::AutoAccept`] acknowledged it (the application has
    /// not met the exchange yet), and when it names the handshake's method
    /// and resource; with [`ContinuePolicy::Ask`] the application decided
    /// at [`ServerEvent::ContinueRequested`], and is not asked twice.
    ///
    /// [`ContinuePolicy::AutoAccept`]: super::ContinuePolicy::AutoAccept
    /// [`ContinuePolicy::Ask`]: super::ContinuePolicy::Ask
    ///
    /// It is advisory: an application may decide from it what does not
    /// depend on the content (`401`, `405`, `404`: D5 level 6) and drop the
    /// pieces instead of storing them, but the exchange still ends with
    /// [`ServerEvent::Request`] under the same id, the one to answer, or
    /// with a rejection ([`PeerError::Rejected`]) for what came after the
    /// head (D5's order is that of the whole message). That request equals
    /// the head except for its content and any `body` keys written after
    /// the content.
    ContentHead {
        /// Which exchange.
        id: RequestId,
        /// The request as far as its envelope goes; its content is empty.
        head: Box<Request>,
    },
    /// With [`ServerConfig::stream_content`](super::ServerConfig::stream_content):
    /// the next piece of a request's decoded `body.content`, in order, as
    /// it arrives (D19). The request itself follows as
    /// [`ServerEvent::Request`] (with empty content) once the whole message
    /// is read and valid; if it is refused instead
    /// ([`PeerError::Rejected`] with this id), discard the pieces.
    Content {
        /// Which exchange.
        id: RequestId,
        /// Decoded content bytes.
        data: Vec<u8>,
    },
    /// Exchange `id`'s final response has wholly left: the caller's
    /// [`consume_output`](crate::machine::ServerConnection::consume_output)
    /// passed its last byte. Responses leave in request
    /// order (D2), and so do these events, one per final response,
    /// the machine's own refusals included. `bytes` is the output from the
    /// end of the response before it: the response and the interim `100`
    /// that preceded it, if any. A response the connection closed on
    /// before it wholly left gets none. An access log records an exchange
    /// here; an application may free what it kept for the response.
    ResponseSent {
        /// The exchange answered.
        id: RequestId,
        /// Output bytes the response took.
        bytes: u64,
    },
    /// Drop every [`ServerEvent::Content`] piece received for `id` so far;
    /// the exchange goes on. They were the content of the first request of
    /// a 100-continue handshake, which is ignored (D10); the full request
    /// streams its own content under the same id. The machine drops such
    /// content itself when the request's head, read before any piece,
    /// shows the handshake, as it does for content written as streaming
    /// senders write it and for content held to the message's end (D19):
    /// this comes only for pieces handed out before that was known.
    ContentDiscarded {
        /// Which exchange.
        id: RequestId,
    },
    /// The peer did something wrong. Every error response the server
    /// writes on its own is reported as [`PeerError::Rejected`], carrying
    /// what it wrote.
    PeerError(PeerError),
    /// The connection is finished: write out what is pending, then close.
    Closed,
}

/// Something that happened on a [`ClientConnection`](super::ClientConnection).
// A response is the common event, moved once from the queue to the caller:
// boxing it would cost an allocation each for nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientEvent {
    /// The server acknowledged with `100`; the full request has been
    /// queued for sending (D10).
    Continue {
        /// Which exchange.
        id: RequestId,
    },
    /// The final response to a request.
    Response {
        /// Which exchange.
        id: RequestId,
        /// The response.
        response: Response,
        /// What lenient validation forgave (D13); empty when strict.
        forgiven: Vec<Forgiven>,
    },
    /// With [`ClientConfig::stream_content`](super::ClientConfig::stream_content):
    /// the response whose content is about to come in pieces, read as far
    /// as its envelope goes (D19: streaming senders write `body` last and
    /// `content` last in it), by the grammar the whole will be read by,
    /// so that a download knows its status and headers before its first
    /// byte. Its content is empty. It is advisory: the exchange still
    /// ends with [`ClientEvent::Response`], or with the error the whole
    /// message reads as. It comes at most once per response, before its
    /// first [`ClientEvent::Content`] piece, and only when the fields
    /// before the content make a response.
    ContentHead {
        /// Which exchange.
        id: RequestId,
        /// The response but its content.
        head: Box<Response>,
    },
    /// With [`ClientConfig::stream_content`](super::ClientConfig::stream_content):
    /// the next piece of a response's decoded `body.content`, in order, as
    /// it arrives (D19). The response follows as [`ClientEvent::Response`]
    /// (with empty content) once the whole message is read and valid; if
    /// it is refused instead (a [`PeerError`]), discard the pieces.
    Content {
        /// Which exchange.
        id: RequestId,
        /// Decoded content bytes.
        data: Vec<u8>,
    },
    /// The server did something wrong, or went missing.
    PeerError(PeerError),
    /// The connection is finished: write out what is pending, then close.
    Closed,
}

/// What the peer did wrong.
///
/// Which role reports what:
///
/// - A **server** reports every error response it writes on its own as
///   [`Rejected`](PeerError::Rejected), whose rejection is exactly what it
///   wrote (status, message, echoed resource), whatever the cause: framing,
///   syntax, validation, limits, a refused handshake, a full request that
///   does not match its handshake (D10), a message or continue timeout
///   (`408`, D3), the end of stream in the middle of a message (`400`
///   "incomplete message", D1). An adapter can log each one like any other
///   answer. Besides, nothing written: [`UnexpectedEof`](PeerError::UnexpectedEof)
///   when the peer leaves after a `100` without sending the full request,
///   and [`OutputStalled`](PeerError::OutputStalled). A server's idle
///   timeout closes silently, with no event but `Closed`.
/// - A **client** reports what it received wrong as
///   [`Rejected`](PeerError::Rejected) and
///   [`ResourceMismatch`](PeerError::ResourceMismatch), and what went
///   missing as [`TimedOut`](PeerError::TimedOut),
///   [`UnexpectedEof`](PeerError::UnexpectedEof) and
///   [`OutputStalled`](PeerError::OutputStalled).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerError {
    /// A message was refused; the rejection carries the status D5 gives.
    /// Server: every error response the machine writes itself, timeouts
    /// and a stream cut short included (see [`PeerError`]). Client: a
    /// response that cannot be read, or a well-formed response that fits
    /// no request: a `100` to a request that did not ask for one, another
    /// `1xx` (D12), or a response when none is owed.
    Rejected {
        /// The refused exchange, if it had an id.
        id: Option<RequestId>,
        /// Why.
        rejection: Rejection,
        /// Whether the connection closes after the error response. A
        /// message refused before its end (nested too deep, D3) is
        /// reported with `false`; if it then cannot end cleanly (a framing
        /// fault, the size limit, the end of stream or the message timer
        /// inside it), the connection closes after all, with no second
        /// response (D1).
        closes: bool,
    },
    /// Client: the response echoed another resource than the request's
    /// (D13). It answered the exchange, which is over.
    ResourceMismatch {
        /// Which exchange.
        id: RequestId,
        /// What we sent.
        sent: String,
        /// What came back: its `resource` is not `sent`; its status may
        /// still say what the server made of the request.
        response: Box<Response>,
    },
    /// Client: a timer ran out (D3). A server reports its timeouts as the
    /// `408` it writes ([`PeerError::Rejected`]).
    TimedOut {
        /// Which exchange was under way, if any.
        id: Option<RequestId>,
    },
    /// Client: the stream ended in the middle of a response (D1) or before
    /// a response that was owed. Server: the peer ended its stream after a
    /// `100` without sending the full request (nothing is written); a
    /// request cut short is reported as the `400` written instead
    /// ([`PeerError::Rejected`]).
    UnexpectedEof,
    /// The peer took none of our output for
    /// [`Limits::stall_timeout`](super::Limits::stall_timeout) (D3): the
    /// connection is closed and what was pending is dropped, unwritten.
    OutputStalled,
}

impl fmt::Display for PeerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let exchange = |id: &Option<RequestId>| match id {
            Some(id) => format!("request {}", id.0),
            None => "the connection".to_owned(),
        };
        match self {
            PeerError::Rejected {
                id,
                rejection,
                closes,
            } => {
                write!(
                    f,
                    "{} refused with {}: {}",
                    exchange(id),
                    rejection.status().as_u16(),
                    rejection.message
                )?;
                if *closes {
                    f.write_str("; the connection closes")?;
                }
                Ok(())
            }
            PeerError::ResourceMismatch { id, sent, response } => write!(
                f,
                "the response to request {} ({}) is for resource {:?}, not {sent:?} as requested",
                id.0,
                response.status.code.as_u16(),
                response.resource
            ),
            PeerError::TimedOut { id } => write!(f, "{} timed out", exchange(id)),
            PeerError::UnexpectedEof => f.write_str("the peer ended the stream too early"),
            PeerError::OutputStalled => {
                f.write_str("the peer took none of our output for too long; the connection is closed")
            }
        }
    }
}

impl std::error::Error for PeerError {}

/// What the local application did wrong: a bug in the caller, not the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UsageError {
    /// This exchange was already answered, or never existed.
    UnknownRequest(RequestId),
    /// A `1xx` other than the acknowledgement of D10.
    InformationalResponse,
    /// The connection is closed or closing.
    Closed,
    /// A 100-continue call for an exchange that is not awaiting one.
    NotAwaitingContinue(RequestId),
    /// The exchange cannot take this now: e.g. a final response while the
    /// full request of a handshake is still awaited (D10).
    OutOfTurn(RequestId),
    /// Content for an exchange whose message was not begun as streamed,
    /// or has already ended (D19).
    NotStreaming(RequestId),
    /// `identity` content that is not UTF-8 text (D9): the message cannot
    /// be finished; the connection closes.
    NotText(RequestId),
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsageError::UnknownRequest(id) => {
                write!(f, "request {} was already answered or does not exist", id.0)
            }
            UsageError::InformationalResponse => {
                f.write_str("a 1xx response other than the 100-continue acknowledgement")
            }
            UsageError::Closed => f.write_str("the connection is closed"),
            UsageError::NotAwaitingContinue(id) => {
                write!(f, "request {} is not awaiting a 100-continue answer", id.0)
            }
            UsageError::OutOfTurn(id) => {
                write!(
                    f,
                    "request {} cannot take that now (its full request is awaited)",
                    id.0
                )
            }
            UsageError::NotStreaming(id) => {
                write!(f, "request {} has no streamed message under way", id.0)
            }
            UsageError::NotText(id) => write!(
                f,
                "the content of exchange {} is not UTF-8 text, so it cannot be sent as identity",
                id.0
            ),
        }
    }
}

impl std::error::Error for UsageError {}

/// What the shared core reports in either role's own event type.
pub(super) trait RoleEvent {
    /// The role's `Closed` event.
    fn closed() -> Self;
    /// The role's `PeerError` event.
    fn peer_error(error: PeerError) -> Self;
}

impl RoleEvent for ServerEvent {
    fn closed() -> Self {
        ServerEvent::Closed
    }

    fn peer_error(error: PeerError) -> Self {
        ServerEvent::PeerError(error)
    }
}

impl RoleEvent for ClientEvent {
    fn closed() -> Self {
        ClientEvent::Closed
    }

    fn peer_error(error: PeerError) -> Self {
        ClientEvent::PeerError(error)
    }
}
