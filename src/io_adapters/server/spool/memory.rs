//! [`MemoryHeld`]: the count of a content's bytes held in memory against
//! the memory budget the server's connections share
//! ([`SpoolOptions::max_memory`]), given back when it is dropped.
//!
//! [`SpoolOptions::max_memory`]: super::SpoolOptions::max_memory

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::budget::{Budget, take_within};

/// Bytes of content held in memory, counted against the shared memory
/// budget ([`SpoolOptions::max_memory`]) until dropped: by a spool while
/// the content arrives, then by the server until the request's handler has
/// returned.
///
/// [`SpoolOptions::max_memory`]: super::SpoolOptions::max_memory
#[derive(Debug)]
pub(crate) struct MemoryHeld {
    budget: Arc<Budget>,
    bytes: u64,
}

impl MemoryHeld {
    pub(super) fn none(budget: &Arc<Budget>) -> MemoryHeld {
        MemoryHeld {
            budget: Arc::clone(budget),
            bytes: 0,
        }
    }

    /// Counts `bytes` more, if the budget has room for them within `max`.
    pub(super) fn grow(&mut self, bytes: u64, max: u64) -> bool {
        let taken = take_within(&self.budget.memory, bytes, max);
        if taken {
            self.bytes += bytes;
        }
        taken
    }
}

impl Drop for MemoryHeld {
    fn drop(&mut self) {
        self.budget.memory.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}
