//! Where a streamed request's content goes while it arrives (D19): memory
//! up to a threshold, then an anonymous temporary file, each within a
//! budget that every connection of a server shares; deleted unless the
//! handler keeps it.
//!
//! Here is the [`Spool`] of one exchange, which takes the content piece
//! by piece and gives it back whole ([`Spooled`]) or says why it cannot
//! ([`SpoolError`]). The rest is in files by concern:
//!
//! - `options.rs`: [`SpoolOptions`], the settings, whose clones share the
//!   budgets;
//! - `budget.rs`: the budget on disk, shared fairly among the uploads
//!   being spooled, and the eviction of one past its share;
//! - `memory.rs`: [`MemoryHeld`], content counted against the memory
//!   budget;
//! - `anonymous.rs`: the temporary files, without a name while the content
//!   arrives, so that nothing but their handle reaches them;
//! - `upload.rs`: [`Upload`], the finished file as a handler reads and
//!   keeps it;
//! - `error.rs`: why content is refused, and the answer each reason gets;
//! - `tests.rs`: the tests of them all.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use anonymous::open_with;
use budget::{Entry, Filling, close, lock, store};
use error::Shortage;
pub(crate) use error::SpoolError;
pub(crate) use memory::MemoryHeld;
pub use options::SpoolOptions;
pub use upload::Upload;

mod anonymous;
mod budget;
mod error;
mod memory;
mod options;
mod upload;

/// Content being spooled for one exchange.
#[derive(Debug)]
pub(crate) struct Spool {
    options: SpoolOptions,
    kept: Kept,
    /// Every byte given, kept or not.
    len: u64,
}

/// Where a spool's content is.
#[derive(Debug)]
enum Kept {
    /// In memory, within the memory limit, and counted against the memory
    /// budget.
    Memory(Vec<u8>, MemoryHeld),
    /// In a file, registered with the budget.
    File(Arc<Entry>),
    /// Nowhere: why it cannot be kept; the rest is counted only.
    Failed(SpoolError),
}

impl Spool {
    /// A spool that keeps content as `options` say, within their shared
    /// budget.
    pub(crate) fn start(options: &SpoolOptions) -> Spool {
        Spool {
            options: options.clone(),
            kept: Kept::Memory(Vec::new(), MemoryHeld::none(&options.budget)),
            len: 0,
        }
    }

    /// Takes the next piece: in memory up to the limit while the memory
    /// budget has room ([`SpoolOptions::max_memory`]), then into an
    /// anonymous file (the memory so far moved there first, and given
    /// back), each byte of it taken from the shared budget, fairly (see
    /// [`SpoolOptions::max_total`]). Past its share of a short budget,
    /// once evicted, or after a failed write, the content is dropped (the
    /// budgets given back) and the rest only counted;
    /// [`finish`](Self::finish) says why.
    pub(crate) fn push(&mut self, data: &[u8]) {
        self.len += data.len() as u64;
        let options = &self.options;
        let budget = &options.budget;
        let failed = match &mut self.kept {
            Kept::Failed(_) => return,
            Kept::Memory(memory, held) => {
                let within = memory.len() + data.len() <= options.memory_limit;
                if within && held.grow(data.len() as u64, options.max_memory) {
                    memory.extend_from_slice(data);
                    return;
                }
                // Said in a 503: the memory budget was short too.
                let memory_short = within.then_some(options.max_memory);
                let bytes = (memory.len() + data.len()) as u64;
                match budget.take(bytes, options.max_total, None) {
                    Err(short) => SpoolError::Full(Shortage {
                        memory: memory_short,
                        ..short
                    }),
                    Ok(()) => match open_with(&options.folder(), memory, data) {
                        Ok((file, linkable)) => {
                            let entry = Arc::new(Entry {
                                state: Mutex::new(Filling::Open {
                                    file,
                                    linkable,
                                    bytes,
                                    last_piece: budget.pieces.fetch_add(1, Ordering::Relaxed),
                                }),
                            });
                            lock(&budget.spooling).push(Arc::clone(&entry));
                            // The memory's count goes with it.
                            self.kept = Kept::File(entry);
                            return;
                        }
                        Err(error) => {
                            budget.give_back(bytes);
                            SpoolError::Io(error)
                        }
                    },
                }
            }
            Kept::File(entry) => {
                let bytes = data.len() as u64;
                match budget.take(bytes, options.max_total, Some(entry)) {
                    Err(short) => SpoolError::Full(short),
                    Ok(()) => match store(entry, budget, data) {
                        Ok(()) => return,
                        Err(why) => {
                            budget.give_back(bytes);
                            why
                        }
                    },
                }
            }
        };
        self.fail(failed);
    }

    /// Drops what is kept, giving its share of the budget back at once.
    fn fail(&mut self, why: SpoolError) {
        let kept = std::mem::replace(&mut self.kept, Kept::Failed(why));
        if let Kept::File(entry) = kept
            && let Err(Some(short)) = close(&self.options.budget, &entry)
        {
            // Evicted before it failed on its own account: that is why.
            self.kept = Kept::Failed(SpoolError::Evicted(short));
        }
    }

    /// The content, whole: in memory (empty when discarded) with its count
    /// against the memory budget, or as an upload in its file; why it
    /// could not be kept otherwise.
    pub(crate) fn finish(mut self) -> Result<Spooled, SpoolError> {
        let none = Kept::Memory(Vec::new(), MemoryHeld::none(&self.options.budget));
        match std::mem::replace(&mut self.kept, none) {
            Kept::Memory(memory, held) => Ok(Spooled::Memory(memory, held)),
            Kept::Failed(why) => Err(why),
            Kept::File(entry) => match close(&self.options.budget, &entry) {
                Ok((file, linkable, reserved)) => Ok(Spooled::File(Upload {
                    file,
                    len: self.len,
                    linkable,
                    small: self.len <= self.options.memory_limit as u64,
                    _reserved: reserved,
                })),
                Err(Some(short)) => Err(SpoolError::Evicted(short)),
                Err(None) => Err(SpoolError::Io(io::Error::other(
                    "the spooled file was closed twice",
                ))),
            },
        }
    }
}

impl Drop for Spool {
    /// A spool dropped unfinished frees its file and gives its bytes back.
    fn drop(&mut self) {
        if let Kept::File(entry) = &self.kept {
            let _ = close(&self.options.budget, entry);
        }
    }
}
/// What a spool holds once the content is complete.
#[derive(Debug)]
pub(crate) enum Spooled {
    /// Counted against the memory budget until the count is dropped.
    Memory(Vec<u8>, MemoryHeld),
    File(Upload),
}

#[cfg(test)]
mod tests;
