//! Simulated time, and a client machine wired to a server machine in
//! memory: the one test clock and the one pair driver of every test crate
//! and fuzz target (`tests/machine`, `fuzz/harness.rs`,
//! `fuzz/simulation.rs`), each of which includes this file by path.
#![allow(dead_code, clippy::disallowed_methods)] // the clock owns a base instant

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jsontp_protocol::machine::Now;
use jsontp_protocol::message::Date;

/// 2025-11-22T00:00:00Z: the wall clock at simulated time zero.
pub const WALL_START: i64 = 1_763_769_600;

/// Simulated time: one real instant read once, plus an offset that every
/// clone shares, so that a clone handed to a simulated server or client
/// (`io_adapters::Clock::from_fn(move || clone.now())`) reads the time the
/// test moves. The wall clock moves with it, so `date` headers are
/// deterministic. It never goes back.
#[derive(Debug, Clone)]
pub struct SimClock {
    base: Instant,
    /// Nanoseconds since `base`.
    offset: Arc<AtomicU64>,
}

impl Default for SimClock {
    fn default() -> Self {
        SimClock::new()
    }
}

impl SimClock {
    /// Time zero.
    pub fn new() -> SimClock {
        SimClock {
            base: Instant::now(),
            offset: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The time now.
    pub fn now(&self) -> Now {
        let since = self.elapsed();
        Now {
            instant: self.base + since,
            wall: Date::from_unix_seconds(WALL_START + since.as_secs() as i64),
        }
    }

    /// Simulated time since time zero.
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.offset.load(Ordering::SeqCst))
    }

    /// Moves the clock on by `by`.
    pub fn advance(&mut self, by: Duration) {
        self.set(self.elapsed() + by);
    }

    /// Moves the clock to `at`, if that is later.
    pub fn advance_to(&mut self, at: Instant) {
        self.set(self.since_start(at));
    }

    /// Moves the clock to `since_start` after time zero, if that is later.
    pub fn set(&mut self, since_start: Duration) {
        let nanos = u64::try_from(since_start.as_nanos()).unwrap_or(u64::MAX);
        self.offset.fetch_max(nanos, Ordering::SeqCst);
    }

    /// How long after time zero `at` is (zero for an earlier instant).
    pub fn since_start(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.base)
    }

    /// Seconds since time zero, for rendering deadlines.
    pub fn secs_of(&self, at: Instant) -> f64 {
        self.since_start(at).as_secs_f64()
    }
}
