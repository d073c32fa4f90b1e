//! Where the serving layer reads the time: the system's clocks, or a clock
//! the caller moves (a simulation, a test).
//!
//! The machine takes the time as data ([`Now`]); the drive step is the one
//! place that reads it. Reading it through a [`Clock`] keeps that true one
//! layer up: a whole server connection, timers, lingering and shutdown
//! deadlines included, can run on simulated time and repeat exactly.

use std::fmt;
use std::sync::Arc;

use crate::machine::Now;

/// A source of [`Now`]: [`Clock::system`] (the default) or a function the
/// caller provides.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use jsontp_protocol::io_adapters::{Clock, now};
///
/// // A clock that stands still until the test moves it.
/// let time = Arc::new(Mutex::new(now()));
/// let held = Arc::clone(&time);
/// let clock = Clock::from_fn(move || *held.lock().unwrap());
/// let before = clock.now();
/// time.lock().unwrap().instant += std::time::Duration::from_secs(30);
/// assert_eq!(clock.now().instant - before.instant, std::time::Duration::from_secs(30));
/// ```
#[derive(Clone, Default)]
pub struct Clock {
    /// `None`: the system's clocks ([`now`](super::now)).
    source: Option<Arc<dyn Fn() -> Now + Send + Sync>>,
}

impl Clock {
    /// The system's clocks: a monotonic instant and the wall clock.
    pub fn system() -> Clock {
        Clock { source: None }
    }

    /// A clock that reads `source`. It must not go backwards.
    pub fn from_fn(source: impl Fn() -> Now + Send + Sync + 'static) -> Clock {
        Clock {
            source: Some(Arc::new(source)),
        }
    }

    /// The time now.
    #[inline]
    pub fn now(&self) -> Now {
        match &self.source {
            None => super::now(),
            Some(source) => source(),
        }
    }

    /// Whether this is the system's clock, where waiting takes real time.
    pub fn is_system(&self) -> bool {
        self.source.is_none()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_system() {
            "Clock::system"
        } else {
            "Clock::from_fn"
        })
    }
}

/// Two clocks are equal when they read the same source.
impl PartialEq for Clock {
    fn eq(&self, other: &Clock) -> bool {
        match (&self.source, &other.source) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Eq for Clock {}
