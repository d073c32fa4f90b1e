//! The sorted names of large folders, kept between the pages of their
//! listings, so that a page costs about one page and not a read of the
//! whole folder.
//!
//! A folder longer than one page is read through once and its names
//! (those a listing may show, sorted) are kept; each page is then a
//! binary search for `after` and the page's own `stat`s. The kept names
//! are used only while the folder is the very same version: the same
//! device, inode, modification and change times, taken before it was read
//! (adding, removing or renaming an entry moves the folder's modification
//! time, so a change during the read leaves the names older than the
//! folder). A folder changed shortly before it was read may change again
//! within the same tick of the file system's clock without its times
//! moving: such names are kept only for [`RECENT_AGE`].
//!
//! Memory is bounded: a total the server sets, the least recently used
//! folder dropped first. A folder too large for it is read through for
//! every page keeping only that page's names, in bounded memory.
//! Folders of one page or less are not kept: reading them costs a page.

// The file server owns the clock: how recent a folder's change was, and
// how long its names are trusted, are read here.
#![allow(clippy::disallowed_methods)]

use std::collections::{BinaryHeap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// How long names read from a folder changed within [`RECENT_CHANGE`] are
/// kept: its times may not move on a change in the same tick.
pub(super) const RECENT_AGE: Duration = Duration::from_secs(1);

/// How close to a read a folder's modification counts as recent: coarser
/// than the clocks of file systems that keep whole seconds or two.
const RECENT_CHANGE: Duration = Duration::from_secs(3);

/// What the bytes of a kept name cost beside its text: its end offset and
/// whether it is a symlink.
const PER_NAME: usize = size_of::<u32>() + size_of::<bool>();

/// One version of a folder, as `stat` describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    #[cfg(unix)]
    id: (u64, u64),
    modified: Option<SystemTime>,
    #[cfg(unix)]
    changed: (i64, i64),
}

impl Stamp {
    fn of(metadata: &fs::Metadata) -> Stamp {
        #[cfg(unix)]
        use std::os::unix::fs::MetadataExt;
        Stamp {
            #[cfg(unix)]
            id: (metadata.dev(), metadata.ino()),
            modified: metadata.modified().ok(),
            #[cfg(unix)]
            changed: (metadata.ctime(), metadata.ctime_nsec()),
        }
    }
}

/// A folder's names, sorted by bytes, in one text.
#[derive(Debug)]
struct Names {
    stamp: Stamp,
    /// When these names stop being trusted, if they were read soon after
    /// a change; `None`: while the stamp holds.
    until: Option<Instant>,
    /// Every name, one after the other.
    text: String,
    /// Where each name ends in `text`.
    ends: Vec<u32>,
    /// Whether each name is a symlink (then followed, D7, when listed).
    links: Vec<bool>,
    /// The use count when last used, for dropping the least recent.
    used: AtomicU64,
}

impl Names {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn name(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }

    fn bytes(&self) -> usize {
        self.text.len() + self.len() * PER_NAME
    }

    /// The first `count` names after `after` (all when `None`), and
    /// whether more follow them.
    fn page(&self, after: Option<&str>, count: usize) -> (Vec<(String, bool)>, bool) {
        let start = match after {
            None => 0,
            Some(after) => {
                // The first name greater than `after`.
                let (mut low, mut high) = (0, self.len());
                while low < high {
                    let middle = low + (high - low) / 2;
                    if self.name(middle) <= after {
                        low = middle + 1;
                    } else {
                        high = middle;
                    }
                }
                low
            }
        };
        let end = self.len().min(start.saturating_add(count));
        let chosen = (start..end)
            .map(|i| (self.name(i).to_owned(), self.links[i]))
            .collect();
        (chosen, end < self.len())
    }
}

/// The folders kept, and their cost.
#[derive(Debug, Default)]
struct Held {
    folders: HashMap<PathBuf, Arc<Names>>,
    bytes: usize,
    /// Counts uses, to order them.
    uses: u64,
}

/// The names of a folder read through, while they fit what may be kept;
/// past that, only those of the page asked for.
enum Gathered {
    /// Every name so far, and what keeping them would cost.
    All(Vec<(String, bool)>, usize),
    /// Only the page's names.
    Page(Smallest),
}

/// The names of one page: the smallest after `after`, the largest on
/// top, and whether more follow them.
struct Smallest {
    heap: BinaryHeap<(String, bool)>,
    more: bool,
}

/// Sorted names of large folders, shared by every worker.
#[derive(Debug)]
pub(super) struct Listings {
    held: Mutex<Held>,
    max_bytes: usize,
    /// How many times a folder was read through.
    reads: AtomicU64,
}

impl Listings {
    /// Keeps at most `max_bytes` of names.
    pub(super) fn new(max_bytes: usize) -> Listings {
        Listings {
            held: Mutex::new(Held::default()),
            // Offsets into the kept text are u32.
            max_bytes: max_bytes.min(u32::MAX as usize),
            reads: AtomicU64::new(0),
        }
    }

    /// How many times a folder was read through.
    pub(super) fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The first `count` names of `folder` after `after` that `keep`
    /// accepts (it is given each name and whether it is a symlink; it
    /// leaves out what a listing never shows), sorted, and whether more
    /// follow. `metadata` is the folder's, taken before this call.
    pub(super) fn page(
        &self,
        folder: &Path,
        metadata: &fs::Metadata,
        after: Option<&str>,
        count: usize,
        keep: impl Fn(&str, &fs::FileType) -> bool,
    ) -> std::io::Result<(Vec<(String, bool)>, bool)> {
        let stamp = Stamp::of(metadata);
        if let Some(names) = self.kept(folder, stamp) {
            return Ok(names.page(after, count));
        }
        let started = SystemTime::now();
        self.reads.fetch_add(1, Ordering::Relaxed);
        let mut gathered = Gathered::All(Vec::new(), 0);
        for entry in fs::read_dir(folder)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let kind = entry.file_type()?;
            if !keep(&name, &kind) {
                continue;
            }
            gathered = match gathered {
                Gathered::All(mut names, bytes) => {
                    let bytes = bytes + name.len() + PER_NAME;
                    names.push((name, kind.is_symlink()));
                    if bytes <= self.max_bytes {
                        Gathered::All(names, bytes)
                    } else {
                        // Too many to keep: on with this page's only.
                        let mut page = Smallest {
                            heap: BinaryHeap::new(),
                            more: false,
                        };
                        for (name, link) in names {
                            page.offer(name, link, after, count);
                        }
                        Gathered::Page(page)
                    }
                }
                Gathered::Page(mut page) => {
                    page.offer(name, kind.is_symlink(), after, count);
                    Gathered::Page(page)
                }
            };
        }
        match gathered {
            Gathered::Page(page) => Ok((page.heap.into_sorted_vec(), page.more)),
            Gathered::All(mut all, _) => {
                all.sort_unstable();
                let recent = stamp.modified.is_none_or(|modified| {
                    modified
                        .checked_add(RECENT_CHANGE)
                        .is_none_or(|soon_after| soon_after >= started)
                });
                let names = Names::from_sorted(all, stamp, recent.then(|| Instant::now() + RECENT_AGE));
                let page = names.page(after, count);
                if names.len() > count {
                    self.keep(folder, names);
                }
                Ok(page)
            }
        }
    }

    /// The names kept of this version of `folder`.
    fn kept(&self, folder: &Path, stamp: Stamp) -> Option<Arc<Names>> {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let names = held.folders.get(folder)?;
        if names.stamp != stamp || names.until.is_some_and(|until| Instant::now() >= until) {
            let stale = held.folders.remove(folder)?;
            held.bytes -= stale.bytes();
            return None;
        }
        let names = Arc::clone(names);
        held.uses += 1;
        names.used.store(held.uses, Ordering::Relaxed);
        Some(names)
    }

    /// Keeps `names` for `folder`, dropping the least recently used
    /// folders as needed.
    fn keep(&self, folder: &Path, names: Names) {
        let bytes = names.bytes();
        if bytes > self.max_bytes {
            return;
        }
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(old) = held.folders.remove(folder) {
            held.bytes -= old.bytes();
        }
        while held.bytes + bytes > self.max_bytes {
            let Some(oldest) = held
                .folders
                .iter()
                .min_by_key(|(_, names)| names.used.load(Ordering::Relaxed))
                .map(|(path, _)| path.clone())
            else {
                break;
            };
            if let Some(dropped) = held.folders.remove(&oldest) {
                held.bytes -= dropped.bytes();
            }
        }
        held.uses += 1;
        names.used.store(held.uses, Ordering::Relaxed);
        held.bytes += bytes;
        held.folders.insert(folder.to_path_buf(), Arc::new(names));
    }
}

impl Names {
    fn from_sorted(all: Vec<(String, bool)>, stamp: Stamp, until: Option<Instant>) -> Names {
        let mut text = String::with_capacity(all.iter().map(|(name, _)| name.len()).sum());
        let mut ends = Vec::with_capacity(all.len());
        let mut links = Vec::with_capacity(all.len());
        for (name, link) in all {
            text.push_str(&name);
            // Within u32: no more than `max_bytes` is gathered.
            ends.push(u32::try_from(text.len()).unwrap_or(u32::MAX));
            links.push(link);
        }
        Names {
            stamp,
            until,
            text,
            ends,
            links,
            used: AtomicU64::new(0),
        }
    }
}

impl Smallest {
    /// Offers one name to the page.
    fn offer(&mut self, name: String, link: bool, after: Option<&str>, count: usize) {
        if after.is_some_and(|after| name.as_str() <= after) {
            return;
        }
        if self.heap.len() == count {
            self.more = true;
            if self.heap.peek().is_some_and(|(top, _)| *top < name) {
                return;
            }
            self.heap.pop();
        }
        self.heap.push((name, link));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of `count` files named `f000`…, set an hour back unless
    /// `recent`, and what a listing of it accepts.
    fn folder(count: usize, recent: bool) -> tempfile::TempDir {
        let folder = tempfile::tempdir().expect("a folder");
        for i in 0..count {
            fs::write(folder.path().join(format!("f{i:03}")), "x").expect("a file");
        }
        fs::create_dir(folder.path().join("sub")).expect("a folder");
        if !recent {
            set_back(folder.path());
        }
        folder
    }

    fn set_back(path: &Path) {
        fs::File::open(path)
            .and_then(|f| f.set_modified(SystemTime::now() - Duration::from_secs(3600)))
            .expect("set the folder's time back");
    }

    fn every(_: &str, _: &fs::FileType) -> bool {
        true
    }

    /// Every page of `folder`, `count` names each, by `after`.
    fn walk(listings: &Listings, folder: &Path, count: usize) -> Vec<Vec<String>> {
        let mut pages = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let metadata = fs::metadata(folder).expect("stat");
            let (page, more) = listings
                .page(folder, &metadata, after.as_deref(), count, every)
                .expect("a page");
            let names: Vec<String> = page.into_iter().map(|(name, _)| name).collect();
            after = names.last().cloned();
            pages.push(names);
            if !more {
                return pages;
            }
        }
    }

    #[test]
    fn a_kept_folder_is_read_once_for_all_its_pages() {
        let folder = folder(35, false);
        let listings = Listings::new(1 << 20);
        let pages = walk(&listings, folder.path(), 10);
        assert_eq!(pages.len(), 4);
        assert_eq!(listings.reads(), 1, "one read for four pages");
        walk(&listings, folder.path(), 10);
        assert_eq!(listings.reads(), 1, "and none for the same pages again");
        // A new entry moves the folder's times: read again, and shown.
        fs::write(folder.path().join("f0100"), "x").expect("a file");
        set_back(folder.path());
        let pages = walk(&listings, folder.path(), 10);
        assert_eq!(listings.reads(), 2);
        assert!(pages.concat().contains(&"f0100".to_owned()));
    }

    #[test]
    fn kept_and_bounded_pages_agree() {
        let folder = folder(35, false);
        let kept = Listings::new(1 << 20);
        // Room for a few names: the rest of the read keeps a page only.
        let bounded = Listings::new(40);
        let all = walk(&kept, folder.path(), 10).concat();
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(all, sorted, "by name");
        assert_eq!(all.len(), 36);
        assert_eq!(walk(&kept, folder.path(), 10), walk(&bounded, folder.path(), 10));
        let metadata = fs::metadata(folder.path()).expect("stat");
        for after in [
            None,
            Some(""),
            Some("f0"),
            Some("f010"),
            Some("f0105"),
            Some("f034"),
            Some("z"),
        ] {
            for count in [1, 10, 36, 40] {
                let page = |listings: &Listings| {
                    listings
                        .page(folder.path(), &metadata, after, count, every)
                        .expect("a page")
                };
                assert_eq!(page(&kept), page(&bounded), "{after:?} {count}");
            }
        }
        assert!(bounded.held.lock().expect("held").folders.is_empty());
        let reads = bounded.reads();
        walk(&bounded, folder.path(), 10);
        assert_eq!(
            bounded.reads(),
            reads + 4,
            "a folder not kept is read for each page"
        );
    }

    #[test]
    fn a_folder_changed_just_before_it_was_read_is_kept_briefly() {
        let listings = Listings::new(1 << 20);
        let recent = folder(35, true);
        walk(&listings, recent.path(), 10);
        let older = folder(35, false);
        walk(&listings, older.path(), 10);
        let held = listings.held.lock().expect("held");
        let until = |folder: &tempfile::TempDir| held.folders[folder.path()].until;
        assert!(until(&recent).is_some_and(|until| until <= Instant::now() + RECENT_AGE));
        assert_eq!(until(&older), None);
    }

    #[test]
    fn the_least_recently_used_folder_is_dropped_first() {
        let (a, b, c) = (folder(35, false), folder(35, false), folder(35, false));
        let one = Listings::new(1 << 20);
        walk(&one, a.path(), 10);
        let each = one.held.lock().expect("held").bytes;
        // Room for two folders.
        let listings = Listings::new(each * 2 + each / 2);
        walk(&listings, a.path(), 10);
        walk(&listings, b.path(), 10);
        walk(&listings, a.path(), 10);
        walk(&listings, c.path(), 10);
        let held = listings.held.lock().expect("held");
        assert!(held.folders.contains_key(a.path()));
        assert!(!held.folders.contains_key(b.path()));
        assert!(held.folders.contains_key(c.path()));
        assert_eq!(held.bytes, each * 2);
        assert_eq!(listings.reads(), 3);
    }

    #[test]
    fn a_folder_of_one_page_is_not_kept() {
        let folder = folder(5, false);
        let listings = Listings::new(1 << 20);
        walk(&listings, folder.path(), 10);
        walk(&listings, folder.path(), 10);
        assert_eq!(listings.reads(), 2);
        assert!(listings.held.lock().expect("held").folders.is_empty());
    }
}
