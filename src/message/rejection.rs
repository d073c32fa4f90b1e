//! Why a message was refused: the status D5 gives and a precise message.

use std::borrow::Cow;
use std::fmt;

use super::StatusCode;

/// What is wrong with one value, phrased to follow the value in a sentence:
/// `is not a language tag like en-US`. The caller names the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueError(Cow<'static, str>);

impl ValueError {
    /// A reason such as `"is not a media type like text/plain"`.
    pub fn new(reason: impl Into<Cow<'static, str>>) -> Self {
        ValueError(reason.into())
    }

    /// The reason, as given.
    pub fn reason(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ValueError {}

/// Why a message was refused, for a program to act on: the rule of D5 (or
/// D1, D3, D4, D9, D10) that refused it. The status code follows from it
/// (see [`Rejection::of`]); the `human-message` says the same for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectionKind {
    /// D1: bytes that leave the message's end in doubt, or that cannot
    /// start a message (`400`, and the connection closes).
    Framing,
    /// D1: the bytes end inside a message (`400`).
    Incomplete,
    /// D3: the message is larger than the limit (`413`).
    TooLarge,
    /// D3: the message took too long to arrive (`408`).
    TimedOut,
    /// D4: neither JSON nor JSON5, not UTF-8, or a lone surrogate escape
    /// (`400`).
    Syntax,
    /// D3: objects and arrays nest deeper than the limit (`400`).
    TooDeep,
    /// D5 level 1: the message is not a JSON object (`400`).
    NotAnObject,
    /// D4: a key appears twice in one object, at any level (`400`).
    DuplicateKey,
    /// D9: a JSON5 `Infinity` or `NaN` (or a number too large for a
    /// double), which JSON cannot carry (`400`).
    NotJsonNumber,
    /// D6: `jsontp` is missing, not a string, or not of the version form
    /// (`400`).
    Version,
    /// D6: a well-formed version of another major (`505`).
    UnsupportedVersion,
    /// D3: more headers than the limit (`431`).
    TooManyHeaders,
    /// D5 level 3: a field missing, unknown or of the wrong type; `type`,
    /// `method`, `resource`, a header, or a `body` field malformed (`400`).
    Envelope,
    /// D10: an `expect` other than `100-continue`, or a handshake the
    /// server does not take (`501`).
    Expectation,
    /// D9: `body.encoding` is not one of the four (`412`).
    Encoding,
    /// D9: `content` does not decode, or is missing where it is required
    /// (`400`).
    Content,
    /// D3: `content` decodes to more than the limit (`413`).
    ContentTooLarge,
    /// Made with [`Rejection::new`] by code that named no finer kind: a
    /// `400`, or a status none of the kinds above stands for.
    Other,
}

impl RejectionKind {
    /// The status D5 gives this kind (`400` for [`Other`](Self::Other)).
    fn status(self) -> StatusCode {
        match self {
            RejectionKind::TooLarge | RejectionKind::ContentTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            RejectionKind::TimedOut => StatusCode::REQUEST_TIMEOUT,
            RejectionKind::UnsupportedVersion => StatusCode::VERSION_NOT_SUPPORTED,
            RejectionKind::TooManyHeaders => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            RejectionKind::Expectation => StatusCode::NOT_IMPLEMENTED,
            RejectionKind::Encoding => StatusCode::PRECONDITION_FAILED,
            RejectionKind::Framing
            | RejectionKind::Incomplete
            | RejectionKind::Syntax
            | RejectionKind::TooDeep
            | RejectionKind::NotAnObject
            | RejectionKind::DuplicateKey
            | RejectionKind::NotJsonNumber
            | RejectionKind::Version
            | RejectionKind::Envelope
            | RejectionKind::Content
            | RejectionKind::Other => StatusCode::BAD_REQUEST,
        }
    }

    /// The kind a status alone stands for, when only one kind has it.
    fn of_status(status: StatusCode) -> RejectionKind {
        match status {
            StatusCode::PAYLOAD_TOO_LARGE => RejectionKind::TooLarge,
            StatusCode::REQUEST_TIMEOUT => RejectionKind::TimedOut,
            StatusCode::VERSION_NOT_SUPPORTED => RejectionKind::UnsupportedVersion,
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => RejectionKind::TooManyHeaders,
            StatusCode::NOT_IMPLEMENTED => RejectionKind::Expectation,
            _ => RejectionKind::Other,
        }
    }
}

/// A message that was refused, with the response it must get (D5, D12).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// Set once, with `kind`: the two always agree.
    status: StatusCode,
    /// The `human-message`: names the field and what is wrong with it.
    pub message: String,
    /// The `resource` to echo: the request's own string, or `""` when it
    /// could not be read (D12).
    pub resource: String,
    kind: RejectionKind,
}

impl Rejection {
    /// A rejection of the given kind, with the status D5 gives it, echoing
    /// `resource`.
    pub fn of(kind: RejectionKind, message: impl Into<String>, resource: impl Into<String>) -> Self {
        Rejection {
            status: kind.status(),
            message: message.into(),
            resource: resource.into(),
            kind,
        }
    }

    /// A rejection with the given code and message, echoing `resource`. Its
    /// kind is the one the status stands for (`413` [`TooLarge`],
    /// `408` [`TimedOut`], `431` [`TooManyHeaders`], `501` [`Expectation`],
    /// `505` [`UnsupportedVersion`]), [`Other`] for any other status;
    /// [`Rejection::of`] names a finer one.
    ///
    /// [`TooLarge`]: RejectionKind::TooLarge
    /// [`TimedOut`]: RejectionKind::TimedOut
    /// [`TooManyHeaders`]: RejectionKind::TooManyHeaders
    /// [`Expectation`]: RejectionKind::Expectation
    /// [`UnsupportedVersion`]: RejectionKind::UnsupportedVersion
    /// [`Other`]: RejectionKind::Other
    pub fn new(status: StatusCode, message: impl Into<String>, resource: impl Into<String>) -> Self {
        Rejection {
            status,
            message: message.into(),
            resource: resource.into(),
            kind: RejectionKind::of_status(status),
        }
    }

    /// Which rule refused the message.
    pub fn kind(&self) -> RejectionKind {
        self.kind
    }

    /// The status code D5 gives for the first problem found, in its order:
    /// the kind's, or the one given to [`Rejection::new`].
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: {}",
            self.status.as_u16(),
            self.status.reason(),
            self.message
        )
    }
}

impl std::error::Error for Rejection {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_status_and_new_infers_the_unambiguous_ones() {
        for (kind, code) in [
            (RejectionKind::Framing, 400),
            (RejectionKind::TooLarge, 413),
            (RejectionKind::TimedOut, 408),
            (RejectionKind::UnsupportedVersion, 505),
            (RejectionKind::TooManyHeaders, 431),
            (RejectionKind::Expectation, 501),
            (RejectionKind::Encoding, 412),
            (RejectionKind::ContentTooLarge, 413),
            (RejectionKind::Other, 400),
        ] {
            let rejection = Rejection::of(kind, "m", "/r");
            assert_eq!((rejection.status.as_u16(), rejection.kind()), (code, kind));
        }
        for (code, kind) in [
            (StatusCode::PAYLOAD_TOO_LARGE, RejectionKind::TooLarge),
            (StatusCode::REQUEST_TIMEOUT, RejectionKind::TimedOut),
            (StatusCode::NOT_IMPLEMENTED, RejectionKind::Expectation),
            (StatusCode::BAD_REQUEST, RejectionKind::Other),
            (StatusCode::NOT_FOUND, RejectionKind::Other),
        ] {
            assert_eq!(Rejection::new(code, "m", "").kind(), kind);
        }
    }
}
