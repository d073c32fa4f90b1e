//! The budget on disk that the clones of one [`SpoolOptions`] share
//! ([`SpoolOptions::max_total`]), and how it is shared fairly: the uploads
//! being spooled to a file, each as an [`Entry`] whose [`Filling`] says
//! where it stands; the bytes they take and give back; and the eviction
//! of an upload past its share to make room for one within its own.
//!
//! [`SpoolOptions`]: super::SpoolOptions
//! [`SpoolOptions::max_total`]: super::SpoolOptions::max_total

use std::fs::File;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::error::{Shortage, SpoolError};

/// What the clones of one [`SpoolOptions`] share.
///
/// [`SpoolOptions`]: super::SpoolOptions
#[derive(Debug, Default)]
pub(super) struct Budget {
    /// Bytes the temporary files hold, or are about to.
    pub(super) used: AtomicU64,
    /// Bytes of content held in memory ([`SpoolOptions::max_memory`]).
    ///
    /// [`SpoolOptions::max_memory`]: super::SpoolOptions::max_memory
    pub(super) memory: AtomicU64,
    /// The uploads being spooled to a file: what a newcomer may take room
    /// back from.
    pub(super) spooling: Mutex<Vec<Arc<Entry>>>,
    /// Pieces stored so far, all uploads together: an upload's count at its
    /// last piece says how long ago its content last arrived, without a
    /// clock.
    pub(super) pieces: AtomicU64,
}

/// Locks `mutex`; a holder that panicked left the state whole (every
/// change under these locks is one assignment), so it is used as it is.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One upload being spooled to a file, as the budget sees it.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) state: Mutex<Filling>,
}

/// Where an upload being spooled to a file stands.
#[derive(Debug)]
pub(super) enum Filling {
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

impl Budget {
    /// Takes `bytes` more for the upload `own` (`None`: one not yet
    /// registered, moving to its file) within `max_total`, shared fairly
    /// (see [`SpoolOptions::max_total`]): at once while there is room;
    /// else, if the upload stays within its share, by evicting uploads
    /// past theirs, the one that stored a piece longest ago first.
    ///
    /// [`SpoolOptions::max_total`]: super::SpoolOptions::max_total
    pub(super) fn take(&self, bytes: u64, max_total: u64, own: Option<&Arc<Entry>>) -> Result<(), Shortage> {
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
    pub(super) fn give_back(&self, bytes: u64) {
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
pub(super) fn take_within(count: &AtomicU64, bytes: u64, max: u64) -> bool {
    count
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
            now.checked_add(bytes).filter(|&total| total <= max)
        })
        .is_ok()
}

/// Bytes taken from a budget, given back when dropped.
#[derive(Debug)]
pub(super) struct Reservation {
    budget: Arc<Budget>,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}

/// Takes `entry` out of `budget`'s list, and its file out of `entry`, with
/// the bytes it holds (given back when the reservation is dropped); why it
/// holds none: evicted (and the budget's state then), or closed already.
/// Only its spool closes it, once.
pub(super) fn close(
    budget: &Arc<Budget>,
    entry: &Arc<Entry>,
) -> Result<(File, bool, Reservation), Option<Shortage>> {
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
pub(super) fn store(entry: &Entry, budget: &Budget, data: &[u8]) -> Result<(), SpoolError> {
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
