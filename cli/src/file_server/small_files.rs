//! Small files kept in memory, each checked against the file system on
//! every use (Linux).
//!
//! A hit costs one `stat` of the resource's path beneath the root instead
//! of opening, measuring, reading and closing the file. The entry is used
//! only when the path still names the very same version of the file: the
//! same device and inode (a file renamed over it, as `PUT` does, is
//! another inode), the same size, and the same modification and change
//! times (the change time moves on every write, even one that restores
//! the old modification time).
//!
//! The `stat` follows symlinks without the confinement `openat2` gives
//! (D7), which is safe here: a path that now leads outside the root leads
//! to another inode, a miss, and the miss goes through the confined open;
//! a path that leads to the cached inode by another way leads to the very
//! file that was served from inside the root.
//!
//! An entry also keeps the content as written in each encoding asked for
//! (escaped text for identity, base64 of gzip, deflate or br), prepared
//! once per version of the file, not once per request
//! ([`Body::prepared`]): an answer sends that form from where it lies,
//! without a copy. A form that takes long to make is made on a builder
//! thread ([`SmallFiles::build_form`], [`super::builders`]) while answers
//! stream the content.
//! A large form is also kept in a sealed in-memory file
//! ([`Body::add_sendfile_copy`]), which a plain TCP connection sends with
//! `sendfile`, so that the kernel copies nothing into the socket either.
//! Of larger files, which stream (D19), whether they are UTF-8 text is
//! kept: reading a file through to find out costs as much as sending it.
//! A larger text file of at most [`SmallFiles::MAX_ESCAPED`] sent as
//! `identity` also keeps its escaped form ([`Body::prepared_text`]): read
//! and escaped piece by piece into sealed in-memory files, its content
//! and its escaped text once each, never whole in the heap, so that
//! escaping is done once per version of the file and each answer after
//! the first goes out with `sendfile` as nginx sends a file. The form is
//! made on a builder thread too ([`SmallFiles::build_escaped`]):
//! reading and escaping 64 MiB takes longer than a tenth of a second,
//! which no worker's other connections should wait. One build runs per
//! path at a time, and [`SmallFiles::MAX_BUILDS`] in all; the request
//! that starts it, those that come before it ends, and those that find
//! no room stream the file, as one for a file not kept does. A form its
//! version of the file can never keep is not made again. Its other
//! encodings still stream from the file, compressed as the transfer goes.
//!
//! Memory is bounded: files of at most [`SmallFiles::MAX_FILE`] whole,
//! escaped forms of at most [`SmallFiles::MAX_ESCAPED`], and a total the
//! server sets, content, written forms and their sealed files included;
//! past it, entries are dropped in no particular order. The sealed files
//! of small forms share huge pages ([`CopyArena`]), which a form dropped
//! may leave partly used: at most a quarter of the total more.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::builders::Builders;
use jsontp_protocol::io_adapters::CopyArena;
use jsontp_protocol::message::negotiate::ContentKind;
use jsontp_protocol::message::{Body, Date, Encoding, MediaType};

/// One version of one regular file, as `stat` describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    size: i64,
    modified: (i64, u64),
    changed: (i64, u64),
}

impl Stamp {
    // The nanosecond fields are signed on some targets, unsigned on others.
    #[allow(clippy::unnecessary_cast)]
    fn of(stat: &rustix::fs::Stat) -> Option<Stamp> {
        let regular = rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::RegularFile;
        regular.then_some(Stamp {
            dev: stat.st_dev,
            ino: stat.st_ino,
            size: stat.st_size,
            modified: (stat.st_mtime, stat.st_mtime_nsec as u64),
            changed: (stat.st_ctime, stat.st_ctime_nsec as u64),
        })
    }

    /// The open file's stamp; `None` unless it is a regular file.
    pub(super) fn of_file(file: &fs::File) -> Option<Stamp> {
        Stamp::of(&rustix::fs::fstat(file).ok()?)
    }

    /// The stamp of what `rel` names beneath `root` now, symlinks
    /// followed; `None` unless it is a regular file.
    pub(super) fn of_path(root: impl AsFd, rel: &Path) -> Option<Stamp> {
        Stamp::of(&rustix::fs::statat(root, rel, rustix::fs::AtFlags::empty()).ok()?)
    }
}

/// A cached file: its content, last modification (D17), media type
/// (known from its name, which the entry's key is) and whether it is
/// UTF-8 text (known once per version, not found again per request).
#[derive(Debug, Clone)]
pub(super) struct Cached {
    pub(super) content: Arc<[u8]>,
    pub(super) modified: Option<Date>,
    pub(super) media: MediaType,
    pub(super) kind: ContentKind,
}

/// Where an entry is kept: the path beneath the root, and the version of
/// the file it holds.
#[derive(Debug, Clone)]
pub(super) struct Slot {
    pub(super) rel: PathBuf,
    pub(super) stamp: Stamp,
    /// The written forms the entry held when it was looked up: an answer
    /// finds its form here without taking the cache's lock again.
    pub(super) forms: Arc<[Body]>,
}

impl Slot {
    /// The slot of `rel` at version `stamp`, with no written form yet.
    pub(super) fn new(rel: PathBuf, stamp: Stamp) -> Slot {
        Slot {
            rel,
            stamp,
            forms: Arc::new([]),
        }
    }

    /// The content prepared in `encoding`, if the entry held it.
    pub(super) fn form(&self, encoding: Encoding) -> Option<&Body> {
        self.forms.iter().find(|form| form.encoding() == encoding)
    }
}

/// The cache of one file server.
#[derive(Debug)]
pub(super) struct SmallFiles {
    entries: Mutex<Entries>,
    max_bytes: usize,
    /// The huge pages the sendfile copies of small forms share.
    arena: CopyArena,
    /// Whether each version of a large file is UTF-8 text.
    texts: Mutex<HashMap<OsString, (Stamp, bool)>>,
    /// The paths a form of which is being made.
    building: Mutex<HashSet<OsString>>,
    /// The forms made apart that their version of the file can never keep
    /// ([`Keeping::Never`]): not made again for it
    /// ([`MAX_TEXTS`](Self::MAX_TEXTS) at most).
    unkeepable: Mutex<HashSet<(OsString, Stamp, Encoding)>>,
    /// The threads that make forms apart from the workers.
    builders: Builders,
}

/// What became of a form given to the cache to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keeping {
    /// Kept.
    Kept,
    /// Never, for this version of the file: the form does not fit the
    /// bound beside what the entry keeps, or there is no form of the
    /// content in that encoding.
    Never,
    /// Not now: the cache no longer holds that version of the file.
    Stale,
}

/// The right to make a form of one path ([`SmallFiles::build`]), given
/// back when it drops.
pub(super) struct Building {
    cache: Arc<SmallFiles>,
    rel: OsString,
}

impl Drop for Building {
    fn drop(&mut self) {
        let mut building = self.cache.building.lock().unwrap_or_else(|p| p.into_inner());
        building.remove(&self.rel);
    }
}

#[derive(Debug, Default)]
struct Entries {
    /// Keyed by the relative path's bytes: a `Path` hashes and compares
    /// component by component, several times slower for every request.
    map: HashMap<OsString, Entry>,
    /// Content and encoded forms kept, in all.
    bytes: usize,
    /// Encoded forms kept with a sendfile copy: each holds a descriptor.
    copies: usize,
}

#[derive(Debug)]
struct Entry {
    stamp: Stamp,
    kept: Kept,
}

/// What an entry keeps of its version of the file.
#[derive(Debug)]
enum Kept {
    /// A small file: its content, from which any form is made, and the
    /// content prepared in each encoding asked for so far, shared with
    /// the answers that looked the entry up.
    Whole { cached: Cached, encoded: Arc<[Body]> },
    /// A larger text file: its escaped form alone (`identity`, made by
    /// [`Body::prepared_text`]: the content and the escaped text, each in
    /// a sealed file). Other encodings stream.
    Escaped(Body),
}

/// The bytes a prepared body keeps besides its content: its written form,
/// and the sealed copy it is sent from, if it has one.
fn written_bytes(body: &Body) -> usize {
    let copies = if body.has_sendfile_copy() { 2 } else { 1 };
    body.written_len().unwrap_or(0) * copies
}

/// The bytes an escaped form ([`Body::prepared_text`]) keeps: its content
/// and its escaped text, each once, in sealed files (the text's is also
/// its copy for `sendfile`).
fn escaped_bytes(body: &Body) -> usize {
    body.content().len() + body.written_len().unwrap_or(0)
}

impl Entry {
    fn bytes(&self) -> usize {
        match &self.kept {
            Kept::Whole { cached, encoded } => {
                cached.content.len() + encoded.iter().map(written_bytes).sum::<usize>()
            }
            Kept::Escaped(body) => escaped_bytes(body),
        }
    }

    fn copies(&self) -> usize {
        match &self.kept {
            Kept::Whole { encoded, .. } => encoded.iter().filter(|form| form.has_sendfile_copy()).count(),
            Kept::Escaped(body) => usize::from(body.has_sendfile_copy()),
        }
    }
}

impl Entries {
    /// Takes a removed entry out of the totals.
    fn forget(&mut self, old: &Entry) {
        self.bytes -= old.bytes();
        self.copies -= old.copies();
    }

    /// Drops entries other than `keep` until `more` bytes fit in `max`.
    fn make_room(&mut self, more: usize, max: usize, keep: &Path) {
        while self.bytes + more > max {
            let Some(victim) = self.map.keys().find(|rel| *rel != keep.as_os_str()).cloned() else {
                break;
            };
            if let Some(old) = self.map.remove(&victim) {
                self.forget(&old);
            }
        }
    }
}

impl SmallFiles {
    /// The largest file kept: one that large is sent whole from the cache
    /// instead of streamed, so that every request after the first costs
    /// no read, no escaping and no copy.
    pub(super) const MAX_FILE: usize = 1024 * 1024;

    /// The largest text file whose escaped form is kept: written once and
    /// sent with `sendfile`, it goes out at the kernel's speed where
    /// escaping each time would bound it. It costs about twice the file
    /// against the bound (the content and the escaped text, each in a
    /// sealed file; none of it in the heap).
    pub(super) const MAX_ESCAPED: usize = 64 * 1024 * 1024;

    /// How many forms are made at once, all paths together, and so how
    /// many builder threads there are: an escaped form's build reads a
    /// file through and holds a few hundred KiB while it runs.
    pub(super) const MAX_BUILDS: usize = 2;

    /// How many verdicts on files are kept, of each kind: whether a large
    /// file is text, and which forms of a version can never be kept (a
    /// path and a few words each).
    pub(super) const MAX_TEXTS: usize = 4096;

    /// How many kept forms may hold a sendfile copy, and so a descriptor:
    /// few enough beside the connections' under the usual limit of 1024
    /// open files.
    pub(super) const MAX_COPIES: usize = 64;

    /// A cache holding at most `max_bytes` of content.
    pub(super) fn new(max_bytes: usize) -> SmallFiles {
        SmallFiles {
            entries: Mutex::new(Entries::default()),
            max_bytes,
            arena: CopyArena::new(max_bytes / 4),
            texts: Mutex::new(HashMap::new()),
            building: Mutex::new(HashSet::new()),
            unkeepable: Mutex::new(HashSet::new()),
            builders: Builders::new(Self::MAX_BUILDS, "jsontp-cache-build"),
        }
    }

    /// What it holds now.
    pub(super) fn usage(&self) -> super::CacheUse {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        super::CacheUse {
            bytes: entries.bytes as u64,
            files: entries.map.len() as u64,
            limit: self.max_bytes as u64,
            shared_page_bytes: self.arena.held_bytes() as u64,
        }
    }

    /// The content kept for `rel`, if it was kept for this very version,
    /// and the written forms kept of it so far.
    pub(super) fn get(&self, rel: &Path, stamp: Stamp) -> Option<(Cached, Arc<[Body]>)> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let entry = entries
            .map
            .get(rel.as_os_str())
            .filter(|entry| entry.stamp == stamp)?;
        match &entry.kept {
            Kept::Whole { cached, encoded } => Some((cached.clone(), Arc::clone(encoded))),
            Kept::Escaped(_) => None,
        }
    }

    /// Whether the escaped form of a text file of `len` bytes, too large
    /// to be kept whole, would be kept: at most
    /// [`MAX_ESCAPED`](Self::MAX_ESCAPED), and within the bound with room
    /// for its escapes (the content, and the text an eighth longer, an
    /// escape every eight bytes; text denser in escapes is sent, and not
    /// kept).
    pub(super) fn would_keep_escaped(&self, len: u64) -> bool {
        let Ok(len) = usize::try_from(len) else {
            return false;
        };
        let cost = len.saturating_add(len.saturating_add(len / 8));
        len > Self::MAX_FILE && len <= Self::MAX_ESCAPED && cost <= self.max_bytes
    }

    /// The escaped form kept of the file at `slot`, if it was kept for
    /// this very version.
    pub(super) fn escaped(&self, slot: &Slot) -> Option<Body> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match entries.map.get(slot.rel.as_os_str()) {
            Some(Entry {
                stamp,
                kept: Kept::Escaped(body),
            }) if *stamp == slot.stamp => Some(body.clone()),
            _ => None,
        }
    }

    /// The right to make a form of the file at `slot` now: `None` while
    /// another is made for it, or while [`MAX_BUILDS`](Self::MAX_BUILDS)
    /// are under way.
    pub(super) fn build(self: &Arc<Self>, slot: &Slot) -> Option<Building> {
        let mut building = self.building.lock().unwrap_or_else(|p| p.into_inner());
        let rel = slot.rel.as_os_str();
        if building.len() >= Self::MAX_BUILDS || building.contains(rel) {
            return None;
        }
        building.insert(rel.to_owned());
        Some(Building {
            cache: Arc::clone(self),
            rel: rel.to_owned(),
        })
    }

    /// Starts making the escaped form of the text file at `slot`, which
    /// the reader `open` gives reads from its start
    /// ([`Body::prepared_text`]), on a builder thread, and keeps it once
    /// made; whether it started. It does not while the path's form is
    /// being made, while [`MAX_BUILDS`](Self::MAX_BUILDS) are, or when no
    /// more forms may hold a sendfile copy ([`may_copy`](Self::may_copy));
    /// `open` is called only when it does. A file that changes meanwhile
    /// leaves nothing kept: the next request starts again.
    pub(super) fn build_escaped<R: Read + Send + 'static>(
        self: &Arc<Self>,
        slot: &Slot,
        open: impl FnOnce() -> io::Result<R>,
    ) -> bool {
        if !self.may_copy() {
            return false;
        }
        self.build_apart(
            slot,
            Encoding::Identity,
            || open().ok(),
            move |cache, slot, mut file| match Body::prepared_text(&mut file) {
                Ok(body) => cache.put_escaped(slot, &body),
                Err(e) => {
                    if !super::steady::is_change(&e) {
                        tracing::warn!(
                            file = %slot.rel.display(),
                            error = %e,
                            "cannot keep the escaped form of a large text file; it goes on streaming"
                        );
                    }
                    Keeping::Stale
                }
            },
        )
    }

    /// Starts preparing `content`, the file at `slot`, in `encoding`
    /// ([`Body::prepared`], with a sendfile copy as
    /// [`add_copy`](Self::add_copy) gives one) on a builder thread, and
    /// keeps the form once made; whether it started. As
    /// [`build_escaped`](Self::build_escaped), one build runs per path.
    pub(super) fn build_form(self: &Arc<Self>, slot: &Slot, content: Arc<[u8]>, encoding: Encoding) -> bool {
        self.build_apart(
            slot,
            encoding,
            || Some(content),
            move |cache, slot, content| {
                match Body::prepared(content, encoding) {
                    Ok(mut body) => {
                        cache.add_copy(&mut body);
                        cache.put_encoded(slot, &body)
                    }
                    // Content that is not what the encoding may carry (D8)
                    // has no form to keep: its answers say so.
                    Err(_) => Keeping::Never,
                }
            },
        )
    }

    /// Runs `make` for the path at `slot` on a builder thread, with what
    /// `input` gives once the build may start, holding the right to build
    /// it ([`build`](Self::build)) until it returns; whether it started
    /// (not when `input` gives nothing). A form in `encoding` that this
    /// version of the file could not keep before is not made again: each
    /// build would be thrown away.
    fn build_apart<T: Send + 'static>(
        self: &Arc<Self>,
        slot: &Slot,
        encoding: Encoding,
        input: impl FnOnce() -> Option<T>,
        make: impl FnOnce(&SmallFiles, &Slot, T) -> Keeping + Send + 'static,
    ) -> bool {
        let key = (slot.rel.as_os_str().to_owned(), slot.stamp, encoding);
        if self
            .unkeepable
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&key)
        {
            return false;
        }
        let Some(building) = self.build(slot) else {
            return false;
        };
        let Some(input) = input() else {
            return false;
        };
        let slot = slot.clone();
        self.builders.run(move || {
            let cache = &building.cache;
            if make(cache, &slot, input) == Keeping::Never {
                let mut unkeepable = cache.unkeepable.lock().unwrap_or_else(|p| p.into_inner());
                if unkeepable.len() >= Self::MAX_TEXTS {
                    let victim = unkeepable.iter().next().cloned();
                    if let Some(victim) = victim {
                        unkeepable.remove(&victim);
                    }
                }
                unkeepable.insert(key);
            }
        })
    }

    /// Keeps `body`, the escaped form of the version `slot` of a larger
    /// text file ([`Body::prepared_text`]), in place of what the entry
    /// held; other entries make room for it.
    pub(super) fn put_escaped(&self, slot: &Slot, body: &Body) -> Keeping {
        let more = escaped_bytes(body);
        if more > self.max_bytes || body.content().len() > Self::MAX_ESCAPED {
            return Keeping::Never;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = entries.map.remove(slot.rel.as_os_str()) {
            entries.forget(&old);
        }
        entries.make_room(more, self.max_bytes, &slot.rel);
        entries.bytes += more;
        entries.copies += usize::from(body.has_sendfile_copy());
        let entry = Entry {
            stamp: slot.stamp,
            kept: Kept::Escaped(body.clone()),
        };
        entries.map.insert(slot.rel.as_os_str().to_owned(), entry);
        Keeping::Kept
    }

    /// Whether the file at `slot` is UTF-8 text, if that was kept for this
    /// very version.
    pub(super) fn is_text(&self, slot: &Slot) -> Option<bool> {
        let texts = self.texts.lock().unwrap_or_else(|p| p.into_inner());
        match texts.get(slot.rel.as_os_str()) {
            Some((stamp, text)) if *stamp == slot.stamp => Some(*text),
            _ => None,
        }
    }

    /// Keeps whether the file at `slot` is UTF-8 text; past
    /// [`MAX_TEXTS`](Self::MAX_TEXTS) files, others are forgotten.
    pub(super) fn put_is_text(&self, slot: &Slot, text: bool) {
        let mut texts = self.texts.lock().unwrap_or_else(|p| p.into_inner());
        if texts.len() >= Self::MAX_TEXTS && !texts.contains_key(slot.rel.as_os_str()) {
            let victim = texts.keys().next().cloned();
            if let Some(victim) = victim {
                texts.remove(&victim);
            }
        }
        texts.insert(slot.rel.as_os_str().to_owned(), (slot.stamp, text));
    }

    /// Whether a form prepared now may have a sendfile copy
    /// ([`Body::add_sendfile_copy`]): each may hold a descriptor for as
    /// long as the form is kept, so at most
    /// [`MAX_COPIES`](Self::MAX_COPIES) do (a few more while forms being
    /// kept race).
    pub(super) fn may_copy(&self) -> bool {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).copies < Self::MAX_COPIES
    }

    /// Gives `body`, a form prepared now, a sendfile copy
    /// ([`Body::add_sendfile_copy_in`], in the huge pages small forms
    /// share) if [`may_copy`](Self::may_copy). Without one (past the
    /// count, or on an error) the form goes out from memory, which costs
    /// the kernel a copy per answer.
    pub(super) fn add_copy(&self, body: &mut Body) {
        if self.may_copy() {
            let _ = body.add_sendfile_copy_in(&self.arena);
        }
    }

    /// Whether a file of `len` bytes would be kept.
    pub(super) fn would_keep(&self, len: u64) -> bool {
        len <= Self::MAX_FILE as u64 && len <= self.max_bytes as u64
    }

    /// Keeps `body`, the content at `slot` prepared in its encoding, while
    /// the entry holds that version; other entries make room for it.
    pub(super) fn put_encoded(&self, slot: &Slot, body: &Body) -> Keeping {
        let more = written_bytes(body);
        if more > self.max_bytes {
            return Keeping::Never;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = entries.map.get(slot.rel.as_os_str()) else {
            return Keeping::Stale;
        };
        if entry.stamp != slot.stamp || !matches!(entry.kept, Kept::Whole { .. }) {
            return Keeping::Stale;
        }
        if entry.bytes() + more > self.max_bytes {
            return Keeping::Never;
        }
        entries.make_room(more, self.max_bytes, &slot.rel);
        let Some(Entry {
            kept: Kept::Whole { encoded, .. },
            ..
        }) = entries.map.get_mut(slot.rel.as_os_str())
        else {
            return Keeping::Stale;
        };
        if encoded.iter().any(|kept| kept.encoding() == body.encoding()) {
            return Keeping::Kept;
        }
        *encoded = encoded.iter().chain([body]).cloned().collect();
        entries.bytes += more;
        entries.copies += usize::from(body.has_sendfile_copy());
        Keeping::Kept
    }

    /// Keeps `cached`, read from the version `stamp` of `rel`, dropping
    /// other entries as needed to stay within the bound.
    pub(super) fn put(&self, rel: &Path, stamp: Stamp, cached: Cached) {
        let len = cached.content.len();
        if len > Self::MAX_FILE || len > self.max_bytes {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = entries.map.remove(rel.as_os_str()) {
            entries.forget(&old);
        }
        entries.make_room(len, self.max_bytes, rel);
        entries.bytes += len;
        let entry = Entry {
            stamp,
            kept: Kept::Whole {
                cached,
                encoded: Arc::new([]),
            },
        };
        entries.map.insert(rel.as_os_str().to_owned(), entry);
    }

    /// Bytes of content kept.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(ino: u64) -> Stamp {
        Stamp {
            dev: 1,
            ino,
            size: 1,
            modified: (0, 0),
            changed: (0, 0),
        }
    }

    /// `content` as the server keeps it: plain text, no date.
    fn cached(content: &[u8]) -> Cached {
        Cached {
            content: Arc::from(content),
            modified: None,
            media: "text/plain".parse().expect("a media type"),
            kind: ContentKind::of(content),
        }
    }

    #[test]
    fn an_entry_serves_only_its_own_version() {
        let cache = SmallFiles::new(1024);
        cache.put(Path::new("a"), stamp(1), cached(b"one"));
        assert_eq!(
            &*cache.get(Path::new("a"), stamp(1)).expect("kept").0.content,
            b"one"
        );
        assert!(cache.get(Path::new("a"), stamp(2)).is_none(), "another inode");
        assert!(cache.get(Path::new("b"), stamp(1)).is_none(), "another path");
        cache.put(Path::new("a"), stamp(2), cached(b"two!"));
        assert_eq!(cache.bytes(), 4, "the old version's bytes are given back");
    }

    #[test]
    fn the_bound_holds() {
        let cache = SmallFiles::new(10);
        for (n, name) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
            cache.put(Path::new(name), stamp(n as u64), cached(b"1234"));
            assert!(cache.bytes() <= 10);
        }
        cache.put(Path::new("big"), stamp(9), cached(&[0u8; 11]));
        assert!(
            cache.get(Path::new("big"), stamp(9)).is_none(),
            "larger than the cache"
        );
        assert!(cache.bytes() <= 10);
    }

    fn slot(rel: &str, ino: u64) -> Slot {
        Slot::new(PathBuf::from(rel), stamp(ino))
    }

    /// The form a lookup of `slot`'s version finds kept in `encoding`.
    fn encoded(cache: &SmallFiles, slot: &Slot, encoding: Encoding) -> Option<Body> {
        let (_, forms) = cache.get(&slot.rel, slot.stamp)?;
        Slot {
            forms,
            ..slot.clone()
        }
        .form(encoding)
        .cloned()
    }

    fn prepared(content: &[u8], encoding: Encoding) -> Body {
        Body::prepared(Arc::from(content), encoding).expect("prepared")
    }

    #[test]
    fn encoded_forms_belong_to_their_version_and_count_against_the_bound() {
        let cache = SmallFiles::new(100);
        cache.put(Path::new("a"), stamp(1), cached(b"0123456789"));
        // "0123456789" as identity is written as it is: ten bytes.
        let identity = prepared(b"0123456789", Encoding::Identity);
        cache.put_encoded(&slot("a", 1), &identity);
        assert_eq!(
            encoded(&cache, &slot("a", 1), Encoding::Identity),
            Some(identity.clone())
        );
        assert!(
            encoded(&cache, &slot("a", 1), Encoding::Br).is_none(),
            "another encoding"
        );
        assert!(
            encoded(&cache, &slot("a", 2), Encoding::Identity).is_none(),
            "another version"
        );
        assert_eq!(cache.bytes(), 20);
        // Not kept for a version the cache does not hold.
        cache.put_encoded(&slot("a", 2), &prepared(b"01234", Encoding::Br));
        assert_eq!(cache.bytes(), 20);
        // A new version drops the old one's forms.
        cache.put(Path::new("a"), stamp(2), cached(b"01234"));
        assert!(encoded(&cache, &slot("a", 2), Encoding::Identity).is_none());
        assert_eq!(cache.bytes(), 5);
        // Other entries make room for a form, within the bound.
        cache.put(Path::new("b"), stamp(3), cached(&[7u8; 60]));
        let long = prepared("x".repeat(50).as_bytes(), Encoding::Identity);
        cache.put_encoded(&slot("a", 2), &long);
        assert!(cache.bytes() <= 100, "{}", cache.bytes());
        assert_eq!(encoded(&cache, &slot("a", 2), Encoding::Identity), Some(long));
        assert!(cache.get(Path::new("b"), stamp(3)).is_none(), "dropped for room");
    }

    #[test]
    fn sendfile_copies_are_counted_and_bounded() {
        let cache = SmallFiles::new(1 << 30);
        let text = "a line of text\n".repeat(2000);
        let copied = |cache: &SmallFiles, n: u64| {
            let name = n.to_string();
            cache.put(Path::new(&name), stamp(n), cached(text.as_bytes()));
            let mut body = prepared(text.as_bytes(), Encoding::Identity);
            body.add_sendfile_copy().expect("a memfd");
            cache.put_encoded(&slot(&name, n), &body);
        };
        for n in 0..SmallFiles::MAX_COPIES as u64 {
            assert!(cache.may_copy(), "{n} copies kept");
            copied(&cache, n);
        }
        assert!(!cache.may_copy(), "as many copies as may be kept");
        // A new version of a file drops its old forms, copies included.
        cache.put(Path::new("0"), stamp(1000), cached(b"new"));
        assert!(cache.may_copy());
        // So does an entry dropped for room.
        copied(&cache, 2000);
        assert!(!cache.may_copy());
        let small = SmallFiles::new(text.len() * 4);
        copied(&small, 1);
        copied(&small, 2);
        assert_eq!(
            small.entries.lock().expect("entries").copies,
            1,
            "one entry made room"
        );
    }

    #[test]
    fn escaped_forms_belong_to_their_version_are_bounded_and_never_taken_for_whole_files() {
        let text = "a \"line\"\n".repeat(SmallFiles::MAX_FILE / 8);
        let len = text.len();
        let cache = SmallFiles::new(len * 3);
        assert!(cache.would_keep_escaped(len as u64));
        assert!(
            !cache.would_keep_escaped(SmallFiles::MAX_FILE as u64),
            "kept whole"
        );
        assert!(
            !SmallFiles::new(len * 2).would_keep_escaped(len as u64),
            "over the bound: the content and the text an eighth longer"
        );
        assert!(!SmallFiles::new(usize::MAX).would_keep_escaped(SmallFiles::MAX_ESCAPED as u64 + 1));
        let body = Body::prepared_text(text.as_bytes()).expect("text");
        cache.put_escaped(&slot("big", 1), &body);
        assert!(cache.escaped(&slot("big", 1)) == Some(body.clone()));
        assert!(cache.escaped(&slot("big", 2)).is_none(), "another version");
        assert!(
            cache.get(Path::new("big"), stamp(1)).is_none(),
            "not a whole file"
        );
        // The content and the escaped text once each: the text's sealed
        // file is its copy for sendfile too.
        assert_eq!(cache.bytes(), len + body.written_len().expect("prepared"));
        assert_eq!(cache.entries.lock().expect("entries").copies, 1);
        // A small file's entry makes room; the escaped form goes with its
        // copy.
        cache.put(
            Path::new("small"),
            stamp(3),
            cached(&vec![b'x'; SmallFiles::MAX_FILE]),
        );
        assert!(cache.escaped(&slot("big", 1)).is_none(), "dropped for room");
        assert_eq!(cache.entries.lock().expect("entries").copies, 0);
        assert!(cache.bytes() <= len * 3);
    }

    #[test]
    fn one_build_runs_per_path_and_few_in_all() {
        let cache = Arc::new(SmallFiles::new(1 << 30));
        let first = cache.build(&slot("a", 1)).expect("the first build of a");
        assert!(cache.build(&slot("a", 1)).is_none(), "a is being built");
        assert!(cache.build(&slot("a", 2)).is_none(), "whatever the version");
        let others: Vec<_> = (1..SmallFiles::MAX_BUILDS)
            .map(|n| {
                cache
                    .build(&slot(&n.to_string(), 1))
                    .expect("room for another path")
            })
            .collect();
        assert!(cache.build(&slot("b", 1)).is_none(), "as many as may run at once");
        drop(first);
        assert!(cache.build(&slot("b", 1)).is_some(), "room given back");
        let again = cache.build(&slot("a", 1));
        assert!(again.is_some(), "a may be built again once b's build ended");
        drop(others);
    }

    /// Waits until no build holds the path at `slot`: at most 30 s.
    fn build_ended(cache: &Arc<SmallFiles>, slot: &Slot) {
        super::super::tests::eventually("the build ends", || cache.build(slot).is_some());
    }

    #[test]
    fn a_form_made_apart_that_can_never_be_kept_is_not_made_again() {
        let text = "a line of text\n".repeat(2000);
        // Room for the content, not for its escaped text beside it.
        let cache = Arc::new(SmallFiles::new(text.len() * 3 / 2));
        cache.put(Path::new("a"), stamp(1), cached(text.as_bytes()));
        let content: Arc<[u8]> = Arc::from(text.as_bytes());
        // Builds version `ino` of "a" in `encoding`: whether the build
        // started, and whether the form is kept once no build runs.
        let build = |ino, encoding| {
            let at = slot("a", ino);
            let started = cache.build_form(&at, Arc::clone(&content), encoding);
            build_ended(&cache, &at);
            (started, encoded(&cache, &at, encoding).is_some())
        };
        assert_eq!(build(1, Encoding::Identity), (true, false), "started, not kept");
        assert!(!build(1, Encoding::Identity).0, "nor made again for that version");
        assert_eq!(build(1, Encoding::Gzip), (true, true), "another encoding fits");
        // A version the cache does not hold is no verdict on the form.
        assert_eq!(build(2, Encoding::Gzip), (true, false), "started, not held");
        cache.put(Path::new("a"), stamp(2), cached(text.as_bytes()));
        assert_eq!(
            build(2, Encoding::Gzip),
            (true, true),
            "started again once held, and kept"
        );
    }

    #[test]
    fn text_verdicts_belong_to_their_version_and_are_bounded() {
        let cache = SmallFiles::new(0);
        cache.put_is_text(&slot("big", 1), true);
        assert_eq!(cache.is_text(&slot("big", 1)), Some(true));
        assert_eq!(cache.is_text(&slot("big", 2)), None, "another version");
        cache.put_is_text(&slot("big", 2), false);
        assert_eq!(cache.is_text(&slot("big", 2)), Some(false));
        assert_eq!(cache.is_text(&slot("big", 1)), None, "the old version is gone");
        for n in 0..SmallFiles::MAX_TEXTS as u64 + 10 {
            cache.put_is_text(&slot(&n.to_string(), n), true);
        }
        assert!(cache.texts.lock().unwrap().len() <= SmallFiles::MAX_TEXTS);
    }

    #[test]
    fn stamps_follow_the_file_system() {
        let folder = tempfile::tempdir().expect("folder");
        let root = fs::File::open(folder.path()).expect("root");
        let path = folder.path().join("f.txt");
        fs::write(&path, "hello").expect("write");
        let first = Stamp::of_path(&root, Path::new("f.txt")).expect("a regular file");
        assert_eq!(Stamp::of_file(&fs::File::open(&path).expect("open")), Some(first));
        assert_eq!(Stamp::of_path(&root, Path::new(".")), None, "a folder");
        assert_eq!(Stamp::of_path(&root, Path::new("missing")), None);
        // Replaced the way PUT replaces it: another inode.
        let next = folder.path().join("next");
        fs::write(&next, "hello").expect("write");
        fs::rename(&next, &path).expect("rename");
        assert_ne!(Stamp::of_path(&root, Path::new("f.txt")), Some(first));
    }
}
