//! The origin of time for the sans-I/O core's own unit tests.
//!
//! The core never reads a clock: every moment reaches it as data. Its
//! tests still need one `Instant` to count from, and `Instant` has no
//! constant; it is read here, outside the core's files, once per test.

use std::time::Instant;

/// A moment for a test to count its time from; every later moment is
/// this one plus a duration the test chooses.
#[allow(
    clippy::disallowed_methods,
    reason = "the origin of a test's time; every moment after is data"
)]
pub(crate) fn origin() -> Instant {
    Instant::now()
}
