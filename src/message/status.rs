//! Status codes, their registered reason phrases, and the `status` object.

use std::fmt;

/// An HTTP status code as jsontp uses it (reference: Errors).
///
/// Only registered codes can be built, so that every code has a reason
/// phrase to write as `formal-message` (D12). The phrase table is the `http`
/// crate's, which tracks the IANA registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StatusCode(u16);

macro_rules! codes {
    ($($name:ident = $n:literal),* $(,)?) => {
        impl StatusCode {
            $(
                #[doc = concat!("`", stringify!($n), "`")]
                pub const $name: StatusCode = StatusCode($n);
            )*
        }
    };
}

codes! {
    CONTINUE = 100,
    OK = 200,
    CREATED = 201,
    NO_CONTENT = 204,
    NOT_MODIFIED = 304,
    BAD_REQUEST = 400,
    UNAUTHORIZED = 401,
    NOT_FOUND = 404,
    METHOD_NOT_ALLOWED = 405,
    NOT_ACCEPTABLE = 406,
    REQUEST_TIMEOUT = 408,
    PRECONDITION_FAILED = 412,
    PAYLOAD_TOO_LARGE = 413,
    UNSUPPORTED_MEDIA_TYPE = 415,
    REQUEST_HEADER_FIELDS_TOO_LARGE = 431,
    INTERNAL_SERVER_ERROR = 500,
    NOT_IMPLEMENTED = 501,
    VERSION_NOT_SUPPORTED = 505,
}

impl StatusCode {
    /// The code, if it is a registered HTTP status code.
    pub fn from_u16(code: u16) -> Option<StatusCode> {
        let known = http::StatusCode::from_u16(code).ok()?;
        known.canonical_reason().map(|_| StatusCode(code))
    }

    /// The number.
    pub const fn as_u16(self) -> u16 {
        self.0
    }

    /// The registered reason phrase, written as `formal-message`.
    pub fn reason(self) -> &'static str {
        http::StatusCode::from_u16(self.0)
            .ok()
            .and_then(|c| c.canonical_reason())
            .unwrap_or("Unknown")
    }

    /// Whether `phrase` is this code's reason phrase, compared
    /// case-insensitively (D10, D13). The older phrases of 413 and 505's
    /// protocol-named form are accepted too.
    pub fn reason_matches(self, phrase: &str) -> bool {
        let also: &[&str] = match self.0 {
            413 => &["Request Entity Too Large", "Content Too Large"],
            414 => &["Request-URI Too Long"],
            416 => &["Requested Range Not Satisfiable"],
            422 => &["Unprocessable Content"],
            505 => &["jsontp Version Not Supported"],
            _ => &[],
        };
        std::iter::once(self.reason())
            .chain(also.iter().copied())
            .any(|p| p.eq_ignore_ascii_case(phrase))
    }

    /// `1xx`: only the 100-continue acknowledgement carries one (D12).
    pub const fn is_informational(self) -> bool {
        self.0 >= 100 && self.0 < 200
    }

    /// `4xx` or `5xx`.
    pub const fn is_error(self) -> bool {
        self.0 >= 400
    }
}

impl fmt::Display for StatusCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.0, self.reason())
    }
}

/// The `status` object of a response: a code and the `human-message`. The
/// `formal-message` is always the code's reason phrase, so it is not stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The status code.
    pub code: StatusCode,
    /// Free text for people; never empty (D12).
    pub human_message: String,
}

impl Status {
    /// A status with a human message. An empty message is replaced by the
    /// reason phrase, so that the field is never empty (D12).
    pub fn new(code: StatusCode, human_message: impl Into<String>) -> Self {
        let mut human_message = human_message.into();
        if human_message.is_empty() {
            human_message = code.reason().to_owned();
        }
        Status { code, human_message }
    }

    /// The `formal-message`: the registered reason phrase.
    pub fn formal_message(&self) -> &'static str {
        self.code.reason()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_codes_only() {
        assert!(StatusCode::from_u16(200).is_some());
        assert!(StatusCode::from_u16(299).is_none());
        assert!(StatusCode::from_u16(99).is_none());
        assert!(StatusCode::from_u16(1000).is_none());
    }

    #[test]
    fn reasons_are_registered_phrases() {
        assert_eq!(StatusCode::CONTINUE.reason(), "Continue");
        assert_eq!(
            StatusCode::VERSION_NOT_SUPPORTED.reason(),
            "HTTP Version Not Supported"
        );
        assert_eq!(StatusCode::NOT_MODIFIED.reason(), "Not Modified");
        assert!(StatusCode::CONTINUE.reason_matches("CONTINUE"));
        assert!(StatusCode::PAYLOAD_TOO_LARGE.reason_matches("request entity too large"));
        assert!(!StatusCode::OK.reason_matches("Okay"));
    }

    #[test]
    fn human_message_is_never_empty() {
        assert_eq!(Status::new(StatusCode::OK, "").human_message, "OK");
    }
}
