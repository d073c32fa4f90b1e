//! Where a streamed request's content goes while it arrives (D19): memory
//! up to a threshold, then an anonymous temporary file, each within a
//! budget that every connection of a server shares; deleted unless the
//! handler keeps it.
//!
//! The temporary file has no name while the content arrives, so that
//! nothing but its handle reaches it (`anonymous.rs` says how).

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use anonymous::{open_with, under_fresh_name};
pub(crate) use error::SpoolError;
pub(crate) use memory::MemoryHeld;
pub use options::SpoolOptions;
pub use upload::Upload;

mod anonymous;
mod error;
mod memory;
mod options;
mod upload;

/// What the clones of one [`SpoolOptions`] share.
#[derive(Debug, Default)]
struct Budget {
    /// Bytes the temporary files hold, or are about to.
    used: AtomicU64,
    /// Bytes of content held in memory ([`SpoolOptions::max_memory`]).
    memory: AtomicU64,
    /// The uploads being spooled to a file: what a newcomer may take room
    /// back from.
    spooling: Mutex<Vec<Arc<Entry>>>,
    /// Pieces stored so far, all uploads together: an upload's count at its
    /// last piece says how long ago its content last arrived, without a
    /// clock.
    pieces: AtomicU64,
}

/// Locks `mutex`; a holder that panicked left the state whole (every
/// change under these locks is one assignment), so it is used as it is.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One upload being spooled to a file, as the budget sees it.
#[derive(Debug)]
struct Entry {
    state: Mutex<Filling>,
}

/// Where an upload being spooled to a file stands.
#[derive(Debug)]
enum Filling {
    /// Its file, and the bytes of the budget it holds.
    Open {
        file: File,
        linkable: bool,
        bytes: u64,
        /// The budget's count of pieces when it last stored one.
        last_piece: u64,
    },
    /// Stopped to make room for another: its file is freed and its bytes
    /// given back.
    Evicted(Shortage),
    /// Finished, failed or dropped: the file went elsewhere or was freed,
    /// and the bytes with it.
    Closed,
}

/// The budget's state when it was too short for an upload: what its `503`
/// says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shortage {
    /// The budget ([`SpoolOptions::max_total`]).
    max_total: u64,
    /// The uploads being spooled at the time, the one refused included.
    uploads: usize,
    /// Each one's share then.
    share: u64,
    /// What the one refused held, or would have.
    held: u64,
    /// The memory budget ([`SpoolOptions::max_memory`]), when the content
    /// was within the memory limit and went to a file only because that
    /// budget was in use.
    memory: Option<u64>,
}

impl Budget {
    /// Takes `bytes` more for the upload `own` (`None`: one not yet
    /// registered, moving to its file) within `max_total`, shared fairly
    /// (see [`SpoolOptions::max_total`]): at once while there is room;
    /// else, if the upload stays within its share, by evicting uploads
    /// past theirs, the one that stored a piece longest ago first.
    fn take(&self, bytes: u64, max_total: u64, own: Option<&Arc<Entry>>) -> Result<(), Shortage> {
        if self.take_room(bytes, max_total) {
            return Ok(());
        }
        let spooling = lock(&self.spooling);
        loop {
            // Room may have been given back meanwhile.
            if self.take_room(bytes, max_total) {
                return Ok(());
            }
            // `None` for an upload evicted meanwhile: it takes nothing more.
            let mut own_bytes = if own.is_some() { None } else { Some(0) };
            let mut others = Vec::with_capacity(spooling.len());
            for entry in spooling.iter() {
                if let Filling::Open {
                    bytes, last_piece, ..
                } = *lock(&entry.state)
                {
                    if own.is_some_and(|own| Arc::ptr_eq(own, entry)) {
                        own_bytes = Some(bytes);
                    } else {
                        others.push((entry, bytes, last_piece));
                    }
                }
            }
            let uploads = others.len() + 1;
            let under_way = own_bytes.unwrap_or(0) + others.iter().map(|&(_, bytes, _)| bytes).sum::<u64>();
            // What the handlers hold (and the takes not yet stored) is not
            // shared out.
            let handed_on = self.used.load(Ordering::Acquire).saturating_sub(under_way);
            let share = max_total.saturating_sub(handed_on) / uploads as u64;
            let shortage = |held| Shortage {
                max_total,
                uploads,
                share,
                held,
                memory: None,
            };
            let Some(own_bytes) = own_bytes else {
                return Err(shortage(0));
            };
            let wanted = own_bytes.saturating_add(bytes);
            if wanted > share {
                return Err(shortage(wanted));
            }
            let victim = others
                .iter()
                .filter(|&&(_, held, _)| held > share)
                .min_by_key(|&&(_, _, last_piece)| last_piece);
            let Some(&(victim, held, _)) = victim else {
                return Err(shortage(wanted));
            };
            let mut state = lock(&victim.state);
            if let Filling::Open { bytes, .. } = *state {
                // Dropping the file frees it: it has no name.
                *state = Filling::Evicted(shortage(held));
                self.used.fetch_sub(bytes, Ordering::AcqRel);
            }
        }
    }

    /// Takes `bytes` if the total stays within `max_total`.
    fn take_room(&self, bytes: u64, max_total: u64) -> bool {
        take_within(&self.used, bytes, max_total)
    }

    /// Gives `bytes` back.
    fn give_back(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }

    /// The upload `entry` no longer spools: it leaves the list.
    fn leave(&self, entry: &Arc<Entry>) {
        let mut spooling = lock(&self.spooling);
        if let Some(at) = spooling.iter().position(|e| Arc::ptr_eq(e, entry)) {
            spooling.swap_remove(at);
        }
    }
}

/// Adds `bytes` to `count` if it stays within `max`.
fn take_within(count: &AtomicU64, bytes: u64, max: u64) -> bool {
    count
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
            now.checked_add(bytes).filter(|&total| total <= max)
        })
        .is_ok()
}

/// Bytes taken from a budget, given back when dropped.
#[derive(Debug)]
struct Reservation {
    budget: Arc<Budget>,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}

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

/// Takes `entry` out of `budget`'s list, and its file out of `entry`, with
/// the bytes it holds (given back when the reservation is dropped); why it
/// holds none: evicted (and the budget's state then), or closed already.
/// Only its spool closes it, once.
fn close(budget: &Arc<Budget>, entry: &Arc<Entry>) -> Result<(File, bool, Reservation), Option<Shortage>> {
    let state = std::mem::replace(&mut *lock(&entry.state), Filling::Closed);
    budget.leave(entry);
    match state {
        Filling::Open {
            file,
            linkable,
            bytes,
            ..
        } => Ok((
            file,
            linkable,
            Reservation {
                budget: Arc::clone(budget),
                bytes,
            },
        )),
        Filling::Evicted(short) => Err(Some(short)),
        Filling::Closed => Err(None),
    }
}

/// Writes `data`, whose bytes were taken from the budget, to the file of
/// `entry`, unless it was evicted meanwhile.
fn store(entry: &Entry, budget: &Budget, data: &[u8]) -> Result<(), SpoolError> {
    use std::io::Write;
    let mut state = lock(&entry.state);
    match &mut *state {
        Filling::Open {
            file,
            bytes,
            last_piece,
            ..
        } => {
            file.write_all(data).map_err(SpoolError::Io)?;
            *bytes += data.len() as u64;
            *last_piece = budget.pieces.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
        Filling::Evicted(short) => Err(SpoolError::Evicted(*short)),
        Filling::Closed => Err(SpoolError::Io(io::Error::other("the spooled file is closed"))),
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
