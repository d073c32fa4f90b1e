//! Why spooled content cannot be given to the handler ([`SpoolError`]),
//! and the answer each reason gets: `503` with what the budgets held when
//! they were short, `500` when the temporary file failed.

use std::io;

use crate::message::{Response, Status, StatusCode};

/// Why spooled content cannot be given to the handler.
#[derive(Debug)]
pub(crate) enum SpoolError {
    /// Storing it would pass its share of the budget shared by the
    /// server's spools ([`SpoolOptions::max_total`]) while that budget is
    /// short: what arrived was counted, not kept. A passing condition:
    /// answered `503`.
    ///
    /// [`SpoolOptions::max_total`]: super::SpoolOptions::max_total
    Full(Shortage),
    /// It was stopped to make room for an upload within its share, holding
    /// more than its own: what it stored is freed. Answered `503`.
    Evicted(Shortage),
    /// The temporary file could not be made or written: `500`.
    Io(io::Error),
}

/// `bytes` as a person reads a size: `64 MiB`, `12.8 MiB`, `900 bytes`.
pub(super) fn size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if bytes >= unit {
            let tenths = ((u128::from(bytes) * 10 + u128::from(unit / 2)) / u128::from(unit)) as u64;
            return match tenths % 10 {
                0 => format!("{} {name}", tenths / 10),
                rest => format!("{}.{rest} {name}", tenths / 10),
            };
        }
    }
    format!("{bytes} bytes")
}

impl SpoolError {
    /// The status to answer: `503` for a budget too short, `500` for a
    /// failure.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            SpoolError::Full(_) | SpoolError::Evicted(_) => StatusCode::SERVICE_UNAVAILABLE,
            SpoolError::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The human message to answer with.
    pub(crate) fn message(&self) -> String {
        match self {
            SpoolError::Full(short) => format!(
                "{}the server's storage for uploads is full: its budget of {} for all uploads at \
                 once is shared by the {} under way, {} each, and this content needs {}; try again \
                 later",
                short.memory.map_or_else(String::new, |memory| format!(
                    "the server's memory for request content is in use (its budget of {} for all \
                     requests at once), and ",
                    size(memory)
                )),
                size(short.max_total),
                short.uploads,
                size(short.share),
                size(short.held),
            ),
            SpoolError::Evicted(short) => format!(
                "the server's storage for uploads is full, and this upload was stopped to make \
                 room for another: it held {}, more than its share ({}) of the budget of {} for \
                 all uploads at once, shared by the {} under way; try again later",
                size(short.held),
                size(short.share),
                size(short.max_total),
                short.uploads,
            ),
            SpoolError::Io(error) => format!("the server could not store the request's content: {error}"),
        }
    }

    /// The response to answer with: [`status`](Self::status) and
    /// [`message`](Self::message).
    pub(crate) fn response(&self) -> Response {
        Response::new(Status::new(self.status(), self.message()))
    }
}

impl std::fmt::Display for SpoolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpoolError::Full(_) => f.write_str("the server's storage for uploads is full"),
            SpoolError::Evicted(_) => {
                f.write_str("the upload was stopped to make room for another within its share")
            }
            SpoolError::Io(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for SpoolError {}

impl From<SpoolError> for io::Error {
    fn from(error: SpoolError) -> io::Error {
        match error {
            SpoolError::Full(_) | SpoolError::Evicted(_) => {
                io::Error::new(io::ErrorKind::StorageFull, error.to_string())
            }
            SpoolError::Io(error) => error,
        }
    }
}

/// The budget's state when it was too short for an upload: what its `503`
/// says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shortage {
    /// The budget ([`SpoolOptions::max_total`]).
    ///
    /// [`SpoolOptions::max_total`]: super::SpoolOptions::max_total
    pub(super) max_total: u64,
    /// The uploads being spooled at the time, the one refused included.
    pub(super) uploads: usize,
    /// Each one's share then.
    pub(super) share: u64,
    /// What the one refused held, or would have.
    pub(super) held: u64,
    /// The memory budget ([`SpoolOptions::max_memory`]), when the content
    /// was within the memory limit and went to a file only because that
    /// budget was in use.
    ///
    /// [`SpoolOptions::max_memory`]: super::SpoolOptions::max_memory
    pub(super) memory: Option<u64>,
}
