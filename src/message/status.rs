//! Status codes, their registered reason phrases, and the `status` object.

use std::borrow::Cow;
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

            /// Every constant with its name, for the test that the list is
            /// complete.
            #[cfg(test)]
            const ALL_CONSTANTS: &[(StatusCode, &str)] = &[$((StatusCode::$name, stringify!($name))),*];
        }
    };
}

codes! {
    CONTINUE = 100,
    SWITCHING_PROTOCOLS = 101,
    PROCESSING = 102,
    EARLY_HINTS = 103,
    OK = 200,
    CREATED = 201,
    ACCEPTED = 202,
    NON_AUTHORITATIVE_INFORMATION = 203,
    NO_CONTENT = 204,
    RESET_CONTENT = 205,
    PARTIAL_CONTENT = 206,
    MULTI_STATUS = 207,
    ALREADY_REPORTED = 208,
    IM_USED = 226,
    MULTIPLE_CHOICES = 300,
    MOVED_PERMANENTLY = 301,
    FOUND = 302,
    SEE_OTHER = 303,
    NOT_MODIFIED = 304,
    USE_PROXY = 305,
    TEMPORARY_REDIRECT = 307,
    PERMANENT_REDIRECT = 308,
    BAD_REQUEST = 400,
    UNAUTHORIZED = 401,
    PAYMENT_REQUIRED = 402,
    FORBIDDEN = 403,
    NOT_FOUND = 404,
    METHOD_NOT_ALLOWED = 405,
    NOT_ACCEPTABLE = 406,
    PROXY_AUTHENTICATION_REQUIRED = 407,
    REQUEST_TIMEOUT = 408,
    CONFLICT = 409,
    GONE = 410,
    LENGTH_REQUIRED = 411,
    PRECONDITION_FAILED = 412,
    PAYLOAD_TOO_LARGE = 413,
    URI_TOO_LONG = 414,
    UNSUPPORTED_MEDIA_TYPE = 415,
    RANGE_NOT_SATISFIABLE = 416,
    EXPECTATION_FAILED = 417,
    IM_A_TEAPOT = 418,
    MISDIRECTED_REQUEST = 421,
    UNPROCESSABLE_ENTITY = 422,
    LOCKED = 423,
    FAILED_DEPENDENCY = 424,
    TOO_EARLY = 425,
    UPGRADE_REQUIRED = 426,
    PRECONDITION_REQUIRED = 428,
    TOO_MANY_REQUESTS = 429,
    REQUEST_HEADER_FIELDS_TOO_LARGE = 431,
    UNAVAILABLE_FOR_LEGAL_REASONS = 451,
    INTERNAL_SERVER_ERROR = 500,
    NOT_IMPLEMENTED = 501,
    BAD_GATEWAY = 502,
    SERVICE_UNAVAILABLE = 503,
    GATEWAY_TIMEOUT = 504,
    VERSION_NOT_SUPPORTED = 505,
    VARIANT_ALSO_NEGOTIATES = 506,
    INSUFFICIENT_STORAGE = 507,
    LOOP_DETECTED = 508,
    NOT_EXTENDED = 510,
    NETWORK_AUTHENTICATION_REQUIRED = 511,
}

impl StatusCode {
    /// The code, if it is a registered HTTP status code (one with a reason
    /// phrase); `None` for any other number.
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
            203 => &["Non-Authoritative Information"],
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

    /// `2xx`.
    pub const fn is_success(self) -> bool {
        self.0 >= 200 && self.0 < 300
    }

    /// `4xx` or `5xx`.
    pub const fn is_error(self) -> bool {
        self.0 >= 400
    }
}

impl From<http::StatusCode> for StatusCode {
    /// The same code when it is registered. An unregistered one becomes the
    /// `x00` code of its class, as HTTP tells a recipient to read a code it
    /// does not recognise (RFC 9110 §15): `299` is `200`, `499` is `400`.
    /// `http` admits codes up to `999`, which have no class: `500`.
    fn from(code: http::StatusCode) -> Self {
        StatusCode::from_u16(code.as_u16()).unwrap_or(match code.as_u16() / 100 {
            1 => StatusCode::CONTINUE,
            2 => StatusCode::OK,
            3 => StatusCode::MULTIPLE_CHOICES,
            4 => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        })
    }
}

impl From<StatusCode> for http::StatusCode {
    fn from(code: StatusCode) -> Self {
        // Every StatusCode is a registered code, which `http` knows.
        http::StatusCode::from_u16(code.0).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl From<StatusCode> for u16 {
    fn from(code: StatusCode) -> Self {
        code.0
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
    /// Free text for people; never empty (D12). A message fixed in the
    /// program (`&'static str`) is borrowed, so that answering with it
    /// allocates nothing.
    pub human_message: Cow<'static, str>,
}

impl Status {
    /// A status with a human message: a `&'static str` (borrowed) or a
    /// `String`. An empty message is replaced by the reason phrase, so
    /// that the field is never empty (D12).
    pub fn new(code: StatusCode, human_message: impl Into<Cow<'static, str>>) -> Self {
        let mut human_message = human_message.into();
        if human_message.is_empty() {
            human_message = Cow::Borrowed(code.reason());
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
    fn a_fixed_message_is_borrowed_and_an_empty_one_is_the_reason_phrase() {
        let fixed = Status::new(StatusCode::OK, "hello");
        assert!(matches!(fixed.human_message, Cow::Borrowed("hello")));
        let empty = Status::new(StatusCode::NOT_FOUND, String::new());
        assert!(matches!(empty.human_message, Cow::Borrowed("Not Found")));
        let made = Status::new(StatusCode::OK, format!("{} files", 3));
        assert_eq!(made.human_message, "3 files");
    }

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

    /// Every number `http` gives a reason phrase has its constant here, and
    /// every constant is such a number, named as `http` names it (505
    /// aside, named for jsontp's versions).
    #[test]
    fn every_registered_code_has_a_constant() {
        let constants = StatusCode::ALL_CONSTANTS;
        for n in 0..=1000u16 {
            let registered = StatusCode::from_u16(n);
            let constant = constants.iter().find(|(c, _)| c.as_u16() == n);
            assert_eq!(registered.is_some(), constant.is_some(), "{n}");
            if let (Some(code), Some((_, name))) = (registered, constant) {
                assert!(!code.reason().is_empty() && code.reason() != "Unknown", "{n}");
                if n != 505 {
                    let from_phrase = code.reason().to_ascii_uppercase().replace([' ', '-', '\''], "_");
                    let from_phrase = from_phrase.replace("I_M_", "IM_");
                    assert_eq!(*name, from_phrase, "{n}");
                }
            }
        }
        assert_eq!(StatusCode::CONFLICT.reason(), "Conflict");
        assert_eq!(StatusCode::FORBIDDEN.reason(), "Forbidden");
        assert_eq!(StatusCode::TOO_MANY_REQUESTS.reason(), "Too Many Requests");
        assert_eq!(StatusCode::SERVICE_UNAVAILABLE.reason(), "Service Unavailable");
    }

    #[test]
    fn from_http_keeps_registered_codes_and_reads_others_by_class() {
        let from = |n: u16| StatusCode::from(http::StatusCode::from_u16(n).unwrap()).as_u16();
        assert_eq!(from(409), 409);
        assert_eq!(from(503), 503);
        assert_eq!(from(199), 100);
        assert_eq!(from(299), 200);
        assert_eq!(from(399), 300);
        assert_eq!(from(499), 400);
        assert_eq!(from(599), 500);
        assert_eq!(from(999), 500);
        assert_eq!(
            http::StatusCode::from(StatusCode::CONFLICT),
            http::StatusCode::CONFLICT
        );
        assert_eq!(u16::from(StatusCode::OK), 200);
    }

    #[test]
    fn human_message_is_never_empty() {
        assert_eq!(Status::new(StatusCode::OK, "").human_message, "OK");
    }
}
