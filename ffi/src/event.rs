//! `jsontp_event` and `jsontp_error`: what a connection tells its caller,
//! and what the peer did wrong, with the status and `human-message` the
//! protocol gave it.

use std::ffi::c_char;

use jsontp_protocol::machine::{ClientEvent, PeerError, RequestId, ServerEvent};

use crate::message::{jsontp_request, jsontp_response};
use crate::{Fail, borrow, free, guard, jsontp_result, out, put, put_text};

/// What an event is. A server gives the first eight, a client
/// `JSONTP_EVENT_RESPONSE`, `JSONTP_EVENT_RESPONSE_HEAD`,
/// `JSONTP_EVENT_CONTINUE`, `JSONTP_EVENT_CONTENT`,
/// `JSONTP_EVENT_PEER_ERROR` and `JSONTP_EVENT_CLOSED`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum jsontp_event_kind {
    /// Server: a complete, valid request to answer (`jsontp_event_request`).
    JSONTP_EVENT_REQUEST = 0,
    /// Server, with `JSONTP_CONTINUE_ASK`: the first request of a
    /// 100-continue handshake (D10), its content empty. Accept it with
    /// `jsontp_server_accept_continue`, or answer it with a final response
    /// to refuse the content unseen.
    JSONTP_EVENT_CONTINUE_REQUESTED = 1,
    /// Server, with streamed content: the request whose content is about
    /// to come in pieces (D19). Advisory: the exchange ends with
    /// `JSONTP_EVENT_REQUEST` (content empty), the one to answer, or with
    /// a `JSONTP_EVENT_PEER_ERROR` for it.
    JSONTP_EVENT_CONTENT_HEAD = 2,
    /// Either role, with streamed content: the next piece of a message's
    /// decoded content, in order (`jsontp_event_content`).
    JSONTP_EVENT_CONTENT = 3,
    /// Server: the exchange's response has wholly left
    /// (`jsontp_event_bytes` is what it took).
    JSONTP_EVENT_RESPONSE_SENT = 4,
    /// Server: drop the content pieces of the exchange received so far;
    /// they belonged to the first request of a handshake (D10).
    JSONTP_EVENT_CONTENT_DISCARDED = 5,
    /// Either role: the peer broke the protocol or went missing
    /// (`jsontp_event_error`).
    JSONTP_EVENT_PEER_ERROR = 6,
    /// Either role: the connection is finished; write out what is
    /// pending, then close the socket (`jsontp_event_reason` says why).
    JSONTP_EVENT_CLOSED = 7,
    /// Client: the final response to a request (`jsontp_event_response`).
    JSONTP_EVENT_RESPONSE = 8,
    /// Client: the server acknowledged with `100`; the full request is on
    /// its way (D10).
    JSONTP_EVENT_CONTINUE = 9,
    /// Client, with `stream_content`: the response whose content follows
    /// in `JSONTP_EVENT_CONTENT` pieces, read as far as its envelope goes
    /// (D19), so that a download knows its status first
    /// (`jsontp_event_response`; its content is empty). It is advisory:
    /// the exchange still ends with `JSONTP_EVENT_RESPONSE`, or with a
    /// `JSONTP_EVENT_PEER_ERROR`.
    JSONTP_EVENT_RESPONSE_HEAD = 10,
}

/// What the peer did wrong.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum jsontp_error_kind {
    /// A message was refused with the status the protocol gives (D5).
    /// Server: every error response it wrote on its own (timeouts and a
    /// stream cut short included). Client: a response it cannot read.
    JSONTP_ERROR_REJECTED = 0,
    /// Client: the response echoed another resource (D13); it answered
    /// the exchange (`jsontp_error_response`).
    JSONTP_ERROR_RESOURCE_MISMATCH = 1,
    /// Client: a timer ran out (D3).
    JSONTP_ERROR_TIMED_OUT = 2,
    /// The stream ended too early (D1).
    JSONTP_ERROR_UNEXPECTED_EOF = 3,
    /// The peer took none of our output for too long (D3).
    JSONTP_ERROR_OUTPUT_STALLED = 4,
}

/// A peer's error, borrowed from its `JSONTP_EVENT_PEER_ERROR` event.
pub struct jsontp_error {
    kind: jsontp_error_kind,
    status: Option<u16>,
    message: String,
    id: Option<u64>,
    closes: bool,
    text: String,
    response: Option<jsontp_response>,
}

impl jsontp_error {
    pub(crate) fn of(error: &PeerError) -> jsontp_error {
        let closes = closes_connection(error);
        let text = error.to_string();
        let (kind, status, message, id, response) = match error {
            PeerError::Rejected { id, rejection, .. } => (
                jsontp_error_kind::JSONTP_ERROR_REJECTED,
                Some(rejection.status().as_u16()),
                rejection.message.clone(),
                id.map(RequestId::index),
                None,
            ),
            PeerError::ResourceMismatch { id, response, .. } => (
                jsontp_error_kind::JSONTP_ERROR_RESOURCE_MISMATCH,
                Some(response.status.code.as_u16()),
                text.clone(),
                Some(id.index()),
                Some(jsontp_response::of((**response).clone())),
            ),
            PeerError::TimedOut { id } => (
                jsontp_error_kind::JSONTP_ERROR_TIMED_OUT,
                None,
                text.clone(),
                id.map(RequestId::index),
                None,
            ),
            PeerError::OutputStalled => (
                jsontp_error_kind::JSONTP_ERROR_OUTPUT_STALLED,
                None,
                text.clone(),
                None,
                None,
            ),
            // `UnexpectedEof`, and whatever a later core adds: the stream
            // ended on the caller, which is what it can act on.
            _ => (
                jsontp_error_kind::JSONTP_ERROR_UNEXPECTED_EOF,
                None,
                text.clone(),
                None,
                None,
            ),
        };
        jsontp_error {
            kind,
            status,
            message,
            id,
            closes,
            text,
            response,
        }
    }

    pub(crate) fn closes(&self) -> bool {
        self.closes
    }

    pub(crate) fn text(&self) -> &str {
        &self.text
    }
}

/// Whether a peer error ends the connection.
fn closes_connection(error: &PeerError) -> bool {
    match error {
        PeerError::Rejected { closes, .. } => *closes,
        PeerError::ResourceMismatch { .. } => false,
        _ => true,
    }
}

/// One event, made by `jsontp_server_next_event` or
/// `jsontp_client_next_event`.
pub struct jsontp_event {
    inner: Event,
}

enum Event {
    Request { id: u64, request: jsontp_request },
    ContinueRequested { id: u64, request: jsontp_request },
    ContentHead { id: u64, request: jsontp_request },
    Content { id: u64, data: Vec<u8> },
    ResponseSent { id: u64, bytes: u64 },
    ContentDiscarded { id: u64 },
    PeerError(jsontp_error),
    Closed { reason: String },
    Response { id: u64, response: jsontp_response },
    ResponseHead { id: u64, response: jsontp_response },
    Continue { id: u64 },
}

impl jsontp_event {
    /// A server's event; `None` for one this binding does not know (the
    /// core's events are non-exhaustive).
    pub(crate) fn of_server(
        event: ServerEvent,
        closed_reason: impl FnOnce() -> String,
    ) -> Option<jsontp_event> {
        let inner = match event {
            ServerEvent::Request { id, request } => Event::Request {
                id: id.index(),
                request: jsontp_request::of(*request),
            },
            ServerEvent::ContinueRequested { id, request } => Event::ContinueRequested {
                id: id.index(),
                request: jsontp_request::of(*request),
            },
            ServerEvent::ContentHead { id, head } => Event::ContentHead {
                id: id.index(),
                request: jsontp_request::of(*head),
            },
            ServerEvent::Content { id, data } => Event::Content { id: id.index(), data },
            ServerEvent::ResponseSent { id, bytes } => Event::ResponseSent {
                id: id.index(),
                bytes,
            },
            ServerEvent::ContentDiscarded { id } => Event::ContentDiscarded { id: id.index() },
            ServerEvent::PeerError(error) => Event::PeerError(jsontp_error::of(&error)),
            ServerEvent::Closed => Event::Closed {
                reason: closed_reason(),
            },
            _ => return None,
        };
        Some(jsontp_event { inner })
    }

    /// A client's event; `None` for one this binding does not know.
    pub(crate) fn of_client(
        event: ClientEvent,
        closed_reason: impl FnOnce() -> String,
    ) -> Option<jsontp_event> {
        let inner = match event {
            ClientEvent::Response { id, response, .. } => Event::Response {
                id: id.index(),
                response: jsontp_response::of(response),
            },
            ClientEvent::Continue { id } => Event::Continue { id: id.index() },
            ClientEvent::ContentHead { id, head } => Event::ResponseHead {
                id: id.index(),
                response: jsontp_response::of(*head),
            },
            ClientEvent::Content { id, data } => Event::Content { id: id.index(), data },
            ClientEvent::PeerError(error) => Event::PeerError(jsontp_error::of(&error)),
            ClientEvent::Closed => Event::Closed {
                reason: closed_reason(),
            },
            _ => return None,
        };
        Some(jsontp_event { inner })
    }

    pub(crate) fn error(&self) -> Option<&jsontp_error> {
        match &self.inner {
            Event::PeerError(error) => Some(error),
            _ => None,
        }
    }
}

/// Frees an event. NULL is ignored. What was borrowed from it (its
/// request, response, content, error) is gone with it. Thread-safety: no
/// other thread may use the event.
///
/// # Safety
/// `event` is NULL or an event from a `_next_event` call, not used again.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_event_free(event: *mut jsontp_event) {
    // SAFETY: as the caller promises.
    unsafe { free(event) }
}

/// What the event is, in `*out_kind`. Thread-safety: reading an event from
/// several threads at once is safe.
///
/// # Safety
/// `event` is NULL or a live event; `out_kind` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_event_get_kind(
    event: *const jsontp_event,
    out_kind: *mut jsontp_event_kind,
) -> jsontp_result {
    guard("jsontp_event_get_kind", || {
        // SAFETY: as the caller promises.
        let event = unsafe { borrow(event, "event") }?;
        let out_kind = out(out_kind, "out_kind")?;
        let kind = match &event.inner {
            Event::Request { .. } => jsontp_event_kind::JSONTP_EVENT_REQUEST,
            Event::ContinueRequested { .. } => jsontp_event_kind::JSONTP_EVENT_CONTINUE_REQUESTED,
            Event::ContentHead { .. } => jsontp_event_kind::JSONTP_EVENT_CONTENT_HEAD,
            Event::Content { .. } => jsontp_event_kind::JSONTP_EVENT_CONTENT,
            Event::ResponseSent { .. } => jsontp_event_kind::JSONTP_EVENT_RESPONSE_SENT,
            Event::ContentDiscarded { .. } => jsontp_event_kind::JSONTP_EVENT_CONTENT_DISCARDED,
            Event::PeerError(_) => jsontp_event_kind::JSONTP_EVENT_PEER_ERROR,
            Event::Closed { .. } => jsontp_event_kind::JSONTP_EVENT_CLOSED,
            Event::Response { .. } => jsontp_event_kind::JSONTP_EVENT_RESPONSE,
            Event::ResponseHead { .. } => jsontp_event_kind::JSONTP_EVENT_RESPONSE_HEAD,
            Event::Continue { .. } => jsontp_event_kind::JSONTP_EVENT_CONTINUE,
        };
        // SAFETY: checked non-NULL.
        unsafe { put(out_kind, kind) };
        Ok(())
    })
}

/// The exchange the event belongs to (0 for the first request on the
/// connection, then 1, …), in `*out_id`; `JSONTP_NOT_APPLICABLE` for
/// `JSONTP_EVENT_CLOSED` and for a peer error that names no exchange.
/// Thread-safety as `jsontp_event_get_kind`.
///
/// # Safety
/// `event` is NULL or a live event; `out_id` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_event_id(event: *const jsontp_event, out_id: *mut u64) -> jsontp_result {
    guard("jsontp_event_id", || {
        // SAFETY: as the caller promises.
        let event = unsafe { borrow(event, "event") }?;
        let out_id = out(out_id, "out_id")?;
        let id = match &event.inner {
            Event::Request { id, .. }
            | Event::ContinueRequested { id, .. }
            | Event::ContentHead { id, .. }
            | Event::Content { id, .. }
            | Event::ResponseSent { id, .. }
            | Event::ContentDiscarded { id }
            | Event::Response { id, .. }
            | Event::ResponseHead { id, .. }
            | Event::Continue { id } => Some(*id),
            Event::PeerError(error) => error.id,
            Event::Closed { .. } => None,
        };
        let id = id.ok_or_else(|| Fail::not_applicable("this event names no exchange"))?;
        // SAFETY: checked non-NULL.
        unsafe { put(out_id, id) };
        Ok(())
    })
}

/// The request of a `JSONTP_EVENT_REQUEST`, `JSONTP_EVENT_CONTINUE_REQUESTED`
/// or `JSONTP_EVENT_CONTENT_HEAD`, in `*out_request`;
/// `JSONTP_NOT_APPLICABLE` for other events.
///
/// Ownership: borrowed from the event, valid until the event is freed;
/// never free it. Thread-safety as `jsontp_event_get_kind`.
///
/// # Safety
/// `event` is NULL or a live event; `out_request` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_event_request(
    event: *const jsontp_event,
    out_request: *mut *const jsontp_request,
) -> jsontp_result {
    guard("jsontp_event_request", || {
        // SAFETY: as the caller promises.
        let event = unsafe { borrow(event, "event") }?;
        let out_request = out(out_request, "out_request")?;
        let request = match &event.inner {
            Event::Request { request, .. }
            | Event::ContinueRequested { request, .. }
            | Event::ContentHead { request, .. } => request,
            _ => return Err(Fail::not_applicable("this event carries no request")),
        };
        // SAFETY: checked non-NULL.
        unsafe { put(out_request, request as *const jsontp_request) };
        Ok(())
    })
}

/// The response of a `JSONTP_EVENT_RESPONSE` or the head of a
/// `JSONTP_EVENT_RESPONSE_HEAD`, in `*out_response`;
/// `JSONTP_NOT_APPLICABLE` for other events.
///
/// Ownership: borrowed from the event, valid until the event is freed;
/// never free it. Thread-safety as `jsontp_event_get_kind`.
///
/// # Safety
/// `event` is NULL or a live event; `out_response` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_event_response(
    event: *const jsontp_event,
    out_response: *mut *const jsontp_response,
) -> jsontp_result {
    guard("jsontp_event_response", || {
        // SAFETY: as the caller promises.
        let event = unsafe { borrow(event, "event") }?;
        let out_response = out(out_response, "out_response")?;
        let (Event::Response { response, .. } | Event::ResponseHead { response, .. }) = &event.inner else {
            return Err(Fail::not_applicable("this event carries no response"));
        };
        // SAFETY: checked non-NULL.
        unsafe { put(out_response, response as *const jsontp_response) };
        Ok(())
    })
}

/// The decoded bytes of a `JSONTP_EVENT_CONTENT`: `*out_data`, `*out_len`;
/// `JSONTP_NOT_APPLICABLE` for other events.
///
/// Ownership: borrowed from the event, valid until the event is freed.
/// Thread-safety as `jsontp_event_get_kind`.
///
/// # Safety
/// `event` is NULL or a live event; the outputs are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_event_content(
    event: *const jsontp_event,
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_event_content", || {
        // SAFETY: as the caller promises.
        let event = unsafe { borrow(event, "event") }?;
        let out_data = out(out_data, "out_data")?;
        let out_len = out(out_len, "out_len")?;
        let Event::Content { data, .. } = &event.inner else {
            return Err(Fail::not_applicable("this event carries no content"));
        };
        // SAFETY: both checked non-NULL.
        unsafe {
            put(out_data, data.as_ptr());
            put(out_len, data.len());
        }
        Ok(())
    })
}

/// The output bytes a response took, for `JSONTP_EVENT_RESPONSE_SENT`
/// (the interim `100` included); `JSONTP_NOT_APPLICABLE` for other events.
/// Thread-safety as `jsontp_event_get_kind`.
///
/// # Safety
/// `event` is NULL or a live event; `out_bytes` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_event_bytes(
    event: *const jsontp_event,
    out_bytes: *mut u64,
) -> jsontp_result {
    guard("jsontp_event_bytes", || {
        // SAFETY: as the caller promises.
        let event = unsafe { borrow(event, "event") }?;
        let out_bytes = out(out_bytes, "out_bytes")?;
        let Event::ResponseSent { bytes, .. } = &event.inner else {
            return Err(Fail::not_applicable("this event is not a response sent"));
        };
        // SAFETY: checked non-NULL.
        unsafe { put(out_bytes, *bytes) };
        Ok(())
    })
}

/// The error of a `JSONTP_EVENT_PEER_ERROR`, in `*out_error`;
/// `JSONTP_NOT_APPLICABLE` for other events.
///
/// Ownership: borrowed from the event, valid until the event is freed;
/// never free it. Thread-safety as `jsontp_event_get_kind`.
///
/// # Safety
/// `event` is NULL or a live event; `out_error` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_event_error(
    event: *const jsontp_event,
    out_error: *mut *const jsontp_error,
) -> jsontp_result {
    guard("jsontp_event_error", || {
        // SAFETY: as the caller promises.
        let event = unsafe { borrow(event, "event") }?;
        let out_error = out(out_error, "out_error")?;
        let error = event
            .error()
            .ok_or_else(|| Fail::not_applicable("this event is not a peer error"))?;
        // SAFETY: checked non-NULL.
        unsafe { put(out_error, error as *const jsontp_error) };
        Ok(())
    })
}

/// Why the connection ended, for people, for `JSONTP_EVENT_CLOSED`;
/// `JSONTP_NOT_APPLICABLE` for other events. Ownership: borrowed from the
/// event (not NUL-terminated). Thread-safety as `jsontp_event_get_kind`.
///
/// # Safety
/// `event` is NULL or a live event; the outputs are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_event_reason(
    event: *const jsontp_event,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_event_reason", || {
        // SAFETY: as the caller promises.
        let event = unsafe { borrow(event, "event") }?;
        let Event::Closed { reason } = &event.inner else {
            return Err(Fail::not_applicable("this event is not the close"));
        };
        // SAFETY: as the caller promises.
        unsafe { put_text(reason, out_text, out_len) }
    })
}

/// What the peer did wrong, in `*out_kind`. Thread-safety: reading an
/// error from several threads at once is safe.
///
/// # Safety
/// `error` is NULL or a live error; `out_kind` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_error_get_kind(
    error: *const jsontp_error,
    out_kind: *mut jsontp_error_kind,
) -> jsontp_result {
    guard("jsontp_error_get_kind", || {
        // SAFETY: as the caller promises.
        let error = unsafe { borrow(error, "error") }?;
        let out_kind = out(out_kind, "out_kind")?;
        // SAFETY: checked non-NULL.
        unsafe { put(out_kind, error.kind) };
        Ok(())
    })
}

/// The status the protocol gives the error (a server's rejection: the
/// status it wrote, such as `400` or `408`), in `*out_status`;
/// `JSONTP_NOT_APPLICABLE` when it has none (a timeout seen by a client).
/// Thread-safety as `jsontp_error_get_kind`.
///
/// # Safety
/// `error` is NULL or a live error; `out_status` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_error_status(
    error: *const jsontp_error,
    out_status: *mut u16,
) -> jsontp_result {
    guard("jsontp_error_status", || {
        // SAFETY: as the caller promises.
        let error = unsafe { borrow(error, "error") }?;
        let out_status = out(out_status, "out_status")?;
        let status = error
            .status
            .ok_or_else(|| Fail::not_applicable("this error has no status"))?;
        // SAFETY: checked non-NULL.
        unsafe { put(out_status, status) };
        Ok(())
    })
}

/// The error's `human-message`: for a rejection, exactly what the
/// response said (D12); else the error in words. Ownership: borrowed from
/// the error (not NUL-terminated). Thread-safety as `jsontp_error_get_kind`.
///
/// # Safety
/// `error` is NULL or a live error; the outputs are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_error_message(
    error: *const jsontp_error,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_error_message", || {
        // SAFETY: as the caller promises.
        let error = unsafe { borrow(error, "error") }?;
        // SAFETY: as the caller promises.
        unsafe { put_text(&error.message, out_text, out_len) }
    })
}

/// The whole error in one sentence, for a log. Ownership, thread-safety
/// and safety as `jsontp_error_message`.
///
/// # Safety
/// As `jsontp_error_message`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_error_text(
    error: *const jsontp_error,
    out_text: *mut *const c_char,
    out_len: *mut usize,
) -> jsontp_result {
    guard("jsontp_error_text", || {
        // SAFETY: as the caller promises.
        let error = unsafe { borrow(error, "error") }?;
        // SAFETY: as the caller promises.
        unsafe { put_text(&error.text, out_text, out_len) }
    })
}

/// Whether the connection closes after this error, in `*out_closes`.
/// Thread-safety as `jsontp_error_get_kind`.
///
/// # Safety
/// `error` is NULL or a live error; `out_closes` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_error_closes(
    error: *const jsontp_error,
    out_closes: *mut bool,
) -> jsontp_result {
    guard("jsontp_error_closes", || {
        // SAFETY: as the caller promises.
        let error = unsafe { borrow(error, "error") }?;
        let out_closes = out(out_closes, "out_closes")?;
        // SAFETY: checked non-NULL.
        unsafe { put(out_closes, error.closes) };
        Ok(())
    })
}

/// For `JSONTP_ERROR_RESOURCE_MISMATCH`: the response that came back, in
/// `*out_response`; `JSONTP_NOT_APPLICABLE` for other errors. Ownership:
/// borrowed from the error; never free it. Thread-safety as
/// `jsontp_error_kind`.
///
/// # Safety
/// `error` is NULL or a live error; `out_response` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn jsontp_error_response(
    error: *const jsontp_error,
    out_response: *mut *const jsontp_response,
) -> jsontp_result {
    guard("jsontp_error_response", || {
        // SAFETY: as the caller promises.
        let error = unsafe { borrow(error, "error") }?;
        let out_response = out(out_response, "out_response")?;
        let response = error
            .response
            .as_ref()
            .ok_or_else(|| Fail::not_applicable("only a resource mismatch carries a response"))?;
        // SAFETY: checked non-NULL.
        unsafe { put(out_response, response as *const jsontp_response) };
        Ok(())
    })
}
