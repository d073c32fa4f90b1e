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

/// A message that was refused, with the response it must get (D5, D12).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The status code D5 gives for the first problem found, in its order.
    pub status: StatusCode,
    /// The `human-message`: names the field and what is wrong with it.
    pub message: String,
    /// The `resource` to echo: the request's own string, or `""` when it
    /// could not be read (D12).
    pub resource: String,
}

impl Rejection {
    /// A rejection with the given code and message, echoing `resource`.
    pub fn new(status: StatusCode, message: impl Into<String>, resource: impl Into<String>) -> Self {
        Rejection {
            status,
            message: message.into(),
            resource: resource.into(),
        }
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
