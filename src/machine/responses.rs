//! The responses a server machine writes on its own: the `100`
//! acknowledgement (D10) and its protocol errors (D1, D3, D5), and the
//! defaults it fills into the application's responses (D12).

use crate::message::{Body, LanguageTag, Rejection, Response, Status, StatusCode};

use super::Now;

/// Fills `date` (from the caller's wall clock, D16) and `language` when the
/// response leaves them out: both are always sent (D8, D12).
pub(super) fn fill_defaults(response: &mut Response, now: Now, language: LanguageTag) {
    // Set in place: the builders would move the whole header set twice.
    response.headers.date.get_or_insert(now.wall);
    response.headers.language.get_or_insert(language);
}

/// The acknowledgement of D10: `100 Continue`, empty identity body, the
/// echoed resource.
pub(super) fn continue_ack(resource: &str, now: Now, language: LanguageTag) -> Response {
    let status = Status::new(StatusCode::CONTINUE, "send the full request");
    let mut response = Response::new(status)
        .with_resource(resource)
        .with_body(Body::empty());
    fill_defaults(&mut response, now, language);
    response
}

/// The response to a refused message.
pub(super) fn rejection(rejection: &Rejection, now: Now, language: LanguageTag) -> Response {
    let status = Status::new(rejection.status(), rejection.message.clone());
    let mut response = Response::new(status).with_resource(rejection.resource.clone());
    fill_defaults(&mut response, now, language);
    response
}

/// Why the machine refuses a message on its own, before or instead of
/// parsing it. The resource could not be read in any of these, so the echo
/// is `""` (D12).
pub(super) mod refusal {
    use crate::message::framing::Fault;
    use crate::message::{Rejection, RejectionKind, StatusCode};

    /// D1: a byte that cannot be framed, and what the lexer found wrong
    /// with it.
    pub(in super::super) fn framing(byte: Option<u8>, fault: Fault) -> Rejection {
        let message = match (byte, fault) {
            (Some(b'['), Fault::NotAMessageStart) => {
                "the message is a JSON array; a message must be one JSON object".to_owned()
            }
            (Some(byte), Fault::NotAMessageStart) => format!(
                "the stream holds byte 0x{byte:02X} where a message must start; only \
                 whitespace may come between messages, and a message starts with '{{'"
            ),
            (Some(byte), fault) => {
                format!("the message cannot be framed: byte 0x{byte:02X} is {fault}")
            }
            (None, fault) => format!("the message cannot be framed: {fault}"),
        };
        Rejection::of(RejectionKind::Framing, message, "")
    }

    /// D3: over the size limit (`413`, then close).
    pub(in super::super) fn too_large(limit: usize) -> Rejection {
        Rejection::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the message is larger than the limit of {limit} bytes"),
            "",
        )
    }

    /// D19: streamed content past the content limit (`413`, then close).
    pub(in super::super) fn content_too_large(limit: usize) -> Rejection {
        Rejection::of(
            RejectionKind::ContentTooLarge,
            format!("field \"body.content\" decodes to more than the limit of {limit} bytes"),
            "",
        )
    }

    /// D5 level 4: streamed content that does not decode (D19).
    pub(in super::super) fn content_corrupt(
        encoding: crate::message::Encoding,
        why: &crate::message::ValueError,
        resource: &str,
    ) -> Rejection {
        Rejection::of(
            RejectionKind::Content,
            format!("field \"body.content\" does not decode as {encoding}: it {why}"),
            resource,
        )
    }

    /// D19: a streamed message's content, counted as it decodes, stopped
    /// too long or came too slowly (`408`, then close).
    pub(in super::super) fn content_too_slow(shortfall: super::super::core::Shortfall) -> Rejection {
        use super::super::core::Shortfall;
        let message = match shortfall {
            Shortfall::NoContent { gap } => format!(
                "field \"body.content\" decoded to nothing for {} s, the longest pause allowed: \
                 bytes that decode to no content (an empty compressed block) do not count",
                gap.as_secs()
            ),
            Shortfall::BelowRate { rate, behind } => format!(
                "field \"body.content\" came too slowly: its decoded content fell more than {} s \
                 behind the least average rate of {rate} bytes/s (a burst pays for {} s at most)",
                behind.as_secs(),
                behind.as_secs()
            ),
        };
        Rejection::new(StatusCode::REQUEST_TIMEOUT, message, "")
    }

    /// D3: a message still arriving already nests deeper than the limit.
    pub(in super::super) fn too_deep(limit: usize) -> Rejection {
        Rejection::of(
            RejectionKind::TooDeep,
            format!("the message nests objects and arrays deeper than the limit of {limit} levels"),
            "",
        )
    }

    /// D1: the stream ended inside a message.
    pub(in super::super) fn incomplete() -> Rejection {
        Rejection::of(
            RejectionKind::Incomplete,
            "incomplete message: the stream ended before the message's closing '}'",
            "",
        )
    }

    /// D3: a message (or the full request after `100`) took too long.
    pub(in super::super) fn timed_out(what: &str, secs: u64, resource: &str) -> Rejection {
        Rejection::new(
            StatusCode::REQUEST_TIMEOUT,
            format!("{what} did not arrive within {secs} s"),
            resource,
        )
    }

    /// Client: a well-formed response that fits no request (D10, D12).
    pub(in super::super) fn unexpected_response(
        code: StatusCode,
        id: Option<super::super::RequestId>,
    ) -> Rejection {
        let message = match id {
            None => format!("a {} response arrived when no request was waiting", code.as_u16()),
            Some(id) if code == StatusCode::CONTINUE => format!(
                "a 100 Continue arrived for request {}, which did not ask for one",
                id.index()
            ),
            Some(id) => format!(
                "a {} response arrived for request {}; only the 100 acknowledgement may be 1xx",
                code.as_u16(),
                id.index()
            ),
        };
        Rejection::new(StatusCode::BAD_REQUEST, message, "")
    }

    /// D10: the full request after `100` names another method or resource
    /// than the handshake's first request; the exchange ends with this.
    pub(in super::super) fn full_request_mismatch(resource: &str) -> Rejection {
        Rejection::of(
            RejectionKind::Envelope,
            "the full request must name the same method and resource as the handshake",
            resource,
        )
    }

    /// D10: a server configured without 100-continue.
    pub(in super::super) fn continue_refused(resource: &str) -> Rejection {
        Rejection::new(
            StatusCode::NOT_IMPLEMENTED,
            "header expect: 100-continue is not supported by this server",
            resource,
        )
    }
}
