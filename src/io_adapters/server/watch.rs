//! How a server watches a peer while the peer's answer is awaited (mio,
//! io_uring, tokio): once the peer's stream has ended, a newline now and
//! then (the whitespace D1 allows between messages) tells a peer that
//! half-closed, which still gets its answer, from one that left, whose
//! system answers the newline with a reset.

use std::io;
use std::time::Duration;

/// How soon after the first newline the second goes.
pub(crate) const PROBE_FIRST: Duration = Duration::from_millis(20);
/// The most time between two later newlines.
const PROBE_LAST: Duration = Duration::from_secs(1);

/// The wait after the next newline, given the wait before it: each
/// doubles the last, up to [`PROBE_LAST`].
pub(crate) fn next_probe_wait(wait: Duration) -> Duration {
    (wait * 2).min(PROBE_LAST)
}

/// Whether a write failed because the peer is gone.
pub(crate) fn peer_gone(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
    )
}
