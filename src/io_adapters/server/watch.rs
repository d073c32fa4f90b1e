//! How a server watches a peer while the peer's answer is awaited (mio,
//! io_uring, tokio): once the peer's stream has ended, a newline now and
//! then (the whitespace D1 allows between messages) tells a peer that
//! half-closed, which still gets its answer, from one that left, whose
//! system answers the newline with a reset.

use std::io;
use std::time::Duration;

/// How soon after the first newline the second goes, and the most time
/// between two later (each wait doubles the last).
pub(crate) const PROBE_FIRST: Duration = Duration::from_millis(20);
pub(crate) const PROBE_LAST: Duration = Duration::from_secs(1);

/// Whether a write failed because the peer is gone.
pub(crate) fn peer_gone(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
    )
}
