//! Prepared text sent from a file (Linux): no copy from memory into the
//! socket.
//!
//! A cache answers a large file with its text prepared once
//! ([`Body::prepared`]); written from memory, each answer still costs the
//! kernel a copy of the whole text into the socket. nginx avoids that copy
//! with `sendfile`, which hands the socket the page cache's own pages. A
//! body given a sealed in-memory copy of its text
//! ([`Body::add_sendfile_copy`]) is sent the same way by a transport that
//! can send from it (plain TCP, [`Transport::send_copy`]); one that cannot
//! (TLS, which must encrypt the bytes) writes the text from memory as
//! before.
//!
//! The copy is a `memfd` whose bytes never change (sealed against every
//! change, or, in a huge page still being filled, never written again),
//! so the bytes in the file are the bytes the machine counts, for as long
//! as any answer holds it. The machine carries it without knowing what it
//! is ([`OutputCopy`]); [`OutputCopy::file`] finds the file again.
//!
//! A large text need not pass through the program's memory at all
//! ([`Body::prepared_text`]): read and escaped piece by piece into sealed
//! files, it is read back through read-only mappings of them, which the
//! core holds as bytes it does not look behind.
//!
//! Copies lie in huge pages where the kernel agrees (`MADV_COLLAPSE`,
//! Linux 6.1): each whole 2 MiB of a long one, and short ones packed
//! together ([`CopyArena`]). Shared memory otherwise holds a file in
//! pages of 4 KiB, and `sendfile` hands the socket each page on its own:
//! the sender looks every page up and the receiver copies it apart. On
//! loopback that made a 300 KiB answer cost the server about a fifth
//! more than from huge pages, and a reader of a 64 MiB copy spend twice
//! what a reader of nginx's file on ext4, in large pages, spends.
//!
//! [`Transport::send_copy`]: super::Transport::send_copy

use std::io::{self, Read, Write};
use std::os::fd::BorrowedFd;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex, Weak};

use rustix::fs::{MemfdFlags, SealFlags};

use crate::machine::OutputCopy;
use crate::message::{Body, ContentEncoder, Encoding, TransportCopy};

/// A body's text in a `memfd` whose bytes never change, from `at` on:
/// what [`Body::add_sendfile_copy`] gives the machine to carry. The file
/// is the body's own, or a huge page a [`CopyArena`] shares out.
struct SealedCopy {
    file: Arc<std::fs::File>,
    at: u64,
}

impl SealedCopy {
    fn whole(file: std::fs::File) -> SealedCopy {
        SealedCopy {
            file: Arc::new(file),
            at: 0,
        }
    }
}

/// How much of a text [`Body::prepared_text`] reads and escapes at a
/// time.
const PIECE: usize = 256 * 1024;

impl Body {
    /// Keeps the text of a [`prepared`](Body::prepared) body also in a
    /// sealed in-memory file (a Linux `memfd`), from which a server on
    /// plain TCP sends it with `sendfile`: the kernel then copies nothing
    /// from the program's memory into the socket. For a cache of large
    /// prepared bodies; the copy costs the text's size again, in shared
    /// memory rather than the heap, for as long as a clone of the body
    /// lives.
    ///
    /// Text shorter than the machine sends as a piece of its own (16 KiB)
    /// is copied into each response anyway: it gets no file. Nor does a
    /// body that was not prepared, or whose text is already in one
    /// ([`prepared_text`](Body::prepared_text)). On an error (no `memfd`
    /// here, no descriptor left) the body stays as it was, and is sent
    /// from memory.
    ///
    /// Each whole 2 MiB of the copy is moved into a huge page where the
    /// kernel agrees (Linux 6.1): `sendfile` then hands the socket one
    /// page where it would hand it 512. Shorter text shares huge pages
    /// with other bodies' through [`add_sendfile_copy_in`](Body::add_sendfile_copy_in).
    ///
    /// `sendfile` cannot ask the kernel not to raise `SIGPIPE` on a socket
    /// the peer closed; Rust programs ignore the signal unless they ask
    /// for it.
    pub fn add_sendfile_copy(&mut self) -> io::Result<()> {
        let Some(written) = self.written().filter(|written| written.copy.is_none()) else {
            return Ok(());
        };
        if !crate::machine::splices(written.text.len()) {
            return Ok(());
        }
        let mut file = memfd("jsontp-prepared")?;
        file.write_all(written.text.as_bytes())?;
        let file = sealed(file)?;
        mapping::into_huge_pages(&file);
        self.set_written_copy(Arc::new(SealedCopy::whole(file)));
        Ok(())
    }

    /// [`add_sendfile_copy`](Body::add_sendfile_copy), with a text shorter
    /// than a huge page (2 MiB) placed in one that `arena` shares among
    /// many bodies' copies, while it has room: sent from a huge page, the
    /// kernel looks up one page for the whole text instead of one per
    /// 4 KiB (see [`CopyArena`]). Longer text, or text the arena has no
    /// room for, gets a file of its own, as `add_sendfile_copy` gives it.
    pub fn add_sendfile_copy_in(&mut self, arena: &CopyArena) -> io::Result<()> {
        let Some(written) = self.written().filter(|written| written.copy.is_none()) else {
            return Ok(());
        };
        if !crate::machine::splices(written.text.len()) {
            return Ok(());
        }
        match arena.place(written.text.as_bytes()) {
            Some(copy) => {
                self.set_written_copy(Arc::new(copy?));
                Ok(())
            }
            None => self.add_sendfile_copy(),
        }
    }

    /// Whether the body's text is also kept in a file
    /// ([`add_sendfile_copy`](Body::add_sendfile_copy)): what keeping it
    /// costs a cache besides the text.
    pub fn has_sendfile_copy(&self) -> bool {
        self.written().is_some_and(|written| written.copy.is_some())
    }

    /// [`Body::prepared`] in `identity` for the UTF-8 text `source` reads
    /// to its end, made without ever holding the text in the program's
    /// memory: read 256 KiB at a time, checked as UTF-8 across the pieces
    /// and escaped as `prepared` escapes it, the content and its escaped
    /// form each go into a sealed in-memory file (Linux `memfd`), which
    /// the body reads through a read-only mapping. The escaped one is also
    /// its copy for `sendfile` ([`add_sendfile_copy`](Body::add_sendfile_copy)),
    /// which holds its descriptor for as long as a clone of the body
    /// lives (the content's is closed once mapped).
    ///
    /// For a cache of large text files: the body costs the content and
    /// its escaped text once each, in shared memory, and the process's
    /// resident memory only where something reads them: a transport that
    /// cannot send from the file (TLS) reads the text, and
    /// [`content`](Body::content) the content. Plain TCP sends it with
    /// `sendfile` and reads none of it.
    ///
    /// Errors: `source`'s own; `InvalidData` for content that is not UTF-8
    /// text (saying after which byte); those of making the files (no
    /// `memfd` here, no descriptor left).
    pub fn prepared_text(mut source: impl Read) -> io::Result<Body> {
        let (mut content, mut text) = (memfd("jsontp-content")?, memfd("jsontp-prepared")?);
        let mut encoder = ContentEncoder::new(Encoding::Identity);
        let not_text = |e| io::Error::new(io::ErrorKind::InvalidData, e);
        let mut piece = vec![0; PIECE];
        let mut escaped = Vec::with_capacity(PIECE + PIECE / 8);
        loop {
            let n = match source.read(&mut piece) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            encoder.encode(&piece[..n], &mut escaped).map_err(not_text)?;
            content.write_all(&piece[..n])?;
            text.write_all(&escaped)?;
            escaped.clear();
        }
        encoder.finish(&mut escaped).map_err(not_text)?;
        text.write_all(&escaped)?;
        let content = mapping::Mapped::of(&sealed(content)?)?;
        let text = sealed(text)?;
        mapping::into_huge_pages(&text);
        let mapped = mapping::Mapped::of(&text)?;
        let copy = crate::machine::splices(mapped.as_ref().len())
            .then(|| Arc::new(SealedCopy::whole(text)) as TransportCopy);
        Ok(Body::held_text(Arc::new(content), Arc::new(mapped), copy))
    }
}

impl<'a> OutputCopy<'a> {
    /// The file that holds these bytes and where in it they start, when
    /// the copy is one [`Body::add_sendfile_copy`] made: send `len` bytes
    /// from there with `sendfile`, say.
    pub fn file(&self) -> Option<(&'a std::fs::File, u64)> {
        let copy = self.copy().downcast_ref::<SealedCopy>()?;
        Some((&copy.file, copy.at + self.offset))
    }
}

/// Huge pages shared out among the `sendfile` copies of many bodies'
/// short texts ([`Body::add_sendfile_copy_in`]), for a cache of small
/// files (Linux 6.1 and later).
///
/// Sent from a file in shared memory's usual 4 KiB pages, a text of
/// 300 KiB costs the kernel 75 page lookups an answer, as much as the
/// rest of the answer's work; from a huge page, one. A huge page is
/// 2 MiB, too much for one short text, so the arena fills one with
/// text after text, and starts another when the next does not fit.
///
/// Memory: a huge page stays while any copy in it does, and the one
/// being filled for as long as the arena lives. The arena holds
/// at most the number of huge pages its bound allows; past that, or
/// where the kernel will not make huge pages of shared memory, a copy
/// gets a file of its own in small pages.
///
/// The bytes of a copy never change: the arena only writes past the
/// last copy it placed, and seals a huge page against writes once it
/// is full.
#[derive(Debug)]
pub struct CopyArena {
    /// How many huge pages may be held at once.
    max_pages: usize,
    state: Mutex<Arena>,
}

#[derive(Debug, Default)]
struct Arena {
    /// The huge page being filled, and how much of it is.
    open: Option<(Arc<std::fs::File>, usize)>,
    /// Every huge page made, while a copy holds it.
    made: Vec<Weak<std::fs::File>>,
}

impl CopyArena {
    /// An arena that holds at most `max_bytes` of huge pages (none below
    /// 2 MiB).
    pub fn new(max_bytes: usize) -> CopyArena {
        CopyArena {
            max_pages: max_bytes / mapping::HUGE_PAGE,
            state: Mutex::new(Arena::default()),
        }
    }

    /// Bytes of huge pages held now: those a copy still lies in, the
    /// partly filled one included. A cache counts its copies' own bytes;
    /// this is what the pages cost past them, at most `max_bytes`.
    pub fn held_bytes(&self) -> usize {
        let mut arena = self.state.lock().unwrap_or_else(|p| p.into_inner());
        arena.made.retain(|page| page.strong_count() > 0);
        arena.made.len() * mapping::HUGE_PAGE
    }

    /// `text` written into a huge page with room for it: `None` when it
    /// has none and may not make another, or the kernel makes none now.
    fn place(&self, text: &[u8]) -> Option<io::Result<SealedCopy>> {
        if text.len() > mapping::HUGE_PAGE {
            return None;
        }
        let mut arena = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (page, used) = match arena.open.take() {
            Some((page, used)) if used + text.len() <= mapping::HUGE_PAGE => (page, used),
            full => {
                if let Some((page, _)) = full {
                    // Nothing more is written into it.
                    let _ = rustix::fs::fcntl_add_seals(&*page, SealFlags::WRITE | SealFlags::SEAL);
                }
                arena.made.retain(|page| page.strong_count() > 0);
                if arena.made.len() >= self.max_pages {
                    return None;
                }
                match huge_page() {
                    Ok(Some(page)) => (Arc::new(page), 0),
                    // Asked again for the next copy: memory may have
                    // freed up by then.
                    Ok(None) => return None,
                    Err(e) => return Some(Err(e)),
                }
            }
        };
        if let Err(e) = page.write_all_at(text, used as u64) {
            return Some(Err(e));
        }
        if used == 0 {
            arena.made.push(Arc::downgrade(&page));
        }
        arena.open = Some((Arc::clone(&page), used + text.len()));
        Some(Ok(SealedCopy {
            file: page,
            at: used as u64,
        }))
    }
}

/// A `memfd` of one huge page, sealed against growing and shrinking;
/// `None` when the kernel keeps it in small pages.
fn huge_page() -> io::Result<Option<std::fs::File>> {
    let file = memfd("jsontp-prepared")?;
    file.set_len(mapping::HUGE_PAGE as u64)?;
    rustix::fs::fcntl_add_seals(&file, SealFlags::SHRINK | SealFlags::GROW)?;
    // The kernel collapses pages, not holes: one page written is enough.
    file.write_all_at(&[0], 0)?;
    Ok((mapping::into_huge_pages(&file) == mapping::HUGE_PAGE).then_some(file))
}

/// An empty `memfd` that can be sealed.
fn memfd(name: &str) -> io::Result<std::fs::File> {
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    Ok(std::fs::File::from(fd))
}

/// `file`, a `memfd`, sealed: it can no longer be written, shrunk, grown,
/// or unsealed.
fn sealed(file: std::fs::File) -> io::Result<std::fs::File> {
    rustix::fs::fcntl_add_seals(
        &file,
        SealFlags::WRITE | SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL,
    )?;
    Ok(file)
}

/// Sealed files read through memory: the one place here that needs
/// `unsafe`.
#[allow(unsafe_code)]
mod mapping {
    use std::io;
    use std::ptr::NonNull;

    use rustix::fs::SealFlags;
    use rustix::mm::{MapFlags, ProtFlags};

    pub(super) use crate::io_adapters::HUGE_PAGE;

    /// `MADV_COLLAPSE` (Linux 6.1), which not every `libc` binding names:
    /// move a range's memory into huge pages now, whatever the system's
    /// huge page settings for shared memory (unless they say `deny`).
    const MADV_COLLAPSE: libc::c_int = 25;

    /// A sealed file mapped whole, read-only: its bytes, as long as it
    /// lives. The mapping keeps the file's memory alive; its descriptor
    /// may be closed.
    pub(super) struct Mapped {
        at: NonNull<u8>,
        /// Zero for an empty file, which is not mapped.
        len: usize,
    }

    // SAFETY: the mapped bytes never change (`of`) and `Mapped` only reads
    // them, as a `&[u8]` may be read from any thread.
    unsafe impl Send for Mapped {}
    // SAFETY: as for `Send`.
    unsafe impl Sync for Mapped {}

    impl Mapped {
        /// Maps `file`, which must be sealed against writes and against
        /// shrinking: the kernel then refuses every change to its bytes
        /// and every cut that would leave a mapped page without a file
        /// behind it (`SIGBUS`). The mapping starts on a huge page's
        /// boundary, so that the file's huge pages
        /// ([`into_huge_pages`]) are mapped whole when read.
        pub(super) fn of(file: &std::fs::File) -> io::Result<Mapped> {
            let needed = SealFlags::WRITE | SealFlags::SHRINK;
            if !rustix::fs::fcntl_get_seals(file)?.contains(needed) {
                return Err(io::Error::other("the file to map is not sealed against changes"));
            }
            let len = usize::try_from(file.metadata()?.len()).map_err(io::Error::other)?;
            if len == 0 {
                return Ok(Mapped {
                    at: NonNull::dangling(),
                    len,
                });
            }
            let room = Reserved::new(len)?;
            let at = room.map(file, 0, len)?;
            room.keep(len);
            Ok(Mapped { at, len })
        }
    }

    impl AsRef<[u8]> for Mapped {
        fn as_ref(&self) -> &[u8] {
            if self.len == 0 {
                return &[];
            }
            // SAFETY: `len` readable bytes at `at`, mapped until `self`
            // drops, which the returned borrow outlives not; sealed and
            // mapped read-only, nothing writes them meanwhile.
            unsafe { std::slice::from_raw_parts(self.at.as_ptr(), self.len) }
        }
    }

    impl Drop for Mapped {
        fn drop(&mut self) {
            if self.len > 0 {
                // SAFETY: the mapping `of` made, unmapped once; no borrow
                // of it outlives `self`.
                let _ = unsafe { rustix::mm::munmap(self.at.as_ptr().cast(), self.len) };
            }
        }
    }

    /// Address space reserved (mapped with no access) for `len` bytes
    /// that start on a huge page's boundary; given back on drop, all but
    /// what [`keep`](Reserved::keep) keeps.
    struct Reserved {
        base: *mut u8,
        size: usize,
        aligned: *mut u8,
        kept: usize,
    }

    impl Reserved {
        fn new(len: usize) -> io::Result<Reserved> {
            let size = len
                .checked_add(HUGE_PAGE)
                .ok_or_else(|| io::Error::other("too large to map"))?;
            // SAFETY: a new private mapping with no access at an address
            // the kernel chooses: it overlaps nothing.
            let base = unsafe {
                rustix::mm::mmap_anonymous(std::ptr::null_mut(), size, ProtFlags::empty(), MapFlags::PRIVATE)
            }?
            .cast::<u8>();
            let aligned = base.wrapping_add(base.align_offset(HUGE_PAGE));
            Ok(Reserved {
                base,
                size,
                aligned,
                kept: 0,
            })
        }

        /// Maps `len` bytes of `file` from `offset`, read-only, at the
        /// aligned start, over whatever was mapped there before.
        ///
        /// `file` must be sealed against shrinking and hold those bytes:
        /// no read of the mapping can then find a page without a file
        /// behind it (`SIGBUS`).
        fn map(&self, file: &std::fs::File, offset: u64, len: usize) -> io::Result<NonNull<u8>> {
            debug_assert!(len <= self.size - HUGE_PAGE);
            // SAFETY: a shared, read-only mapping over address space this
            // reservation holds (`size` is `len` and the alignment's
            // slack at most), which no memory Rust knows of overlaps.
            let at = unsafe {
                rustix::mm::mmap(
                    self.aligned.cast(),
                    len,
                    ProtFlags::READ,
                    MapFlags::SHARED | MapFlags::FIXED,
                    file,
                    offset,
                )
            }?;
            NonNull::new(at.cast::<u8>()).ok_or_else(|| io::Error::other("mapped at null"))
        }

        /// The first `len` bytes from the aligned start now belong to a
        /// mapping of their own; only the rest is given back.
        fn keep(mut self, len: usize) {
            self.kept = len.next_multiple_of(rustix::param::page_size());
        }
    }

    impl Drop for Reserved {
        fn drop(&mut self) {
            let head = self.aligned as usize - self.base as usize;
            let tail_at = self.aligned.wrapping_add(self.kept);
            let tail = self.size - head - self.kept;
            // SAFETY: the parts of the reservation no mapping was put over
            // and kept ([`Reserved::keep`]), each unmapped once.
            unsafe {
                if head > 0 {
                    let _ = rustix::mm::munmap(self.base.cast(), head);
                }
                if tail > 0 {
                    let _ = rustix::mm::munmap(tail_at.cast(), tail);
                }
            }
        }
    }

    /// Moves each whole huge page's worth of sealed `file` into a huge
    /// page, as far as the kernel agrees (Linux 6.1 and later, huge pages
    /// not denied): returns how many bytes it moved. Only a hint: where
    /// the kernel refuses, the file stays in small pages, as it was.
    ///
    /// The kernel collapses what a mapping shows, so each stretch is
    /// mapped in turn into one aligned window: the process never holds
    /// more than one huge page of the file resident.
    pub(super) fn into_huge_pages(file: &std::fs::File) -> usize {
        let Ok(len) = file.metadata().map(|meta| meta.len()) else {
            return 0;
        };
        let whole = usize::try_from(len).unwrap_or(0) / HUGE_PAGE * HUGE_PAGE;
        if whole == 0 {
            return 0;
        }
        let Ok(window) = Reserved::new(HUGE_PAGE) else {
            return 0;
        };
        let mut moved = 0;
        while moved < whole {
            // Each stretch replaces the one before in the window.
            let Ok(stretch) = window.map(file, moved as u64, HUGE_PAGE) else {
                break;
            };
            // SAFETY: advice on the stretch mapped just above; it changes
            // where the file's bytes lie, never what they are.
            if unsafe { libc::madvise(stretch.as_ptr().cast(), HUGE_PAGE, MADV_COLLAPSE) } != 0 {
                break;
            }
            moved += HUGE_PAGE;
        }
        // The window, whatever is mapped over it, goes with the rest of
        // the reservation.
        drop(window);
        moved
    }
}

/// Sends `pending` from its file into `socket`: how many bytes went, or
/// `None` when the copy is not a file. A full non-blocking socket answers
/// `WouldBlock`, as a write does.
pub(crate) fn send(socket: BorrowedFd<'_>, pending: OutputCopy<'_>) -> Option<io::Result<usize>> {
    let (file, mut offset) = pending.file()?;
    Some(rustix::fs::sendfile(socket, file, Some(&mut offset), pending.len).map_err(io::Error::from))
}

/// Writes `bufs` into `socket`, telling the kernel that more follows at
/// once (`MSG_MORE`): they wait to leave in one packet with the bytes sent
/// next from a copy.
pub(crate) fn write_more(socket: BorrowedFd<'_>, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    use rustix::net::{SendAncillaryBuffer, SendFlags};
    let flags = SendFlags::MORE | SendFlags::NOSIGNAL;
    Ok(rustix::net::sendmsg(
        socket,
        bufs,
        &mut SendAncillaryBuffer::default(),
        flags,
    )?)
}

#[cfg(test)]
mod tests {
    use std::io::Seek;
    use std::os::unix::fs::FileExt;

    use super::*;

    fn prepared(len: usize) -> Body {
        let text = "a \"quoted\" line\n".repeat(len / 16 + 1);
        Body::prepared(Arc::from(text.as_bytes()), Encoding::Identity).expect("text")
    }

    fn with_copy(mut body: Body) -> Body {
        body.add_sendfile_copy().expect("a memfd");
        body
    }

    #[test]
    fn the_copy_holds_the_written_text_and_cannot_change() {
        let body = with_copy(prepared(40_000));
        assert!(body.has_sendfile_copy());
        let written = body.written().expect("prepared");
        let copy = written.copy.as_deref().expect("a copy");
        let mut file: &std::fs::File = &copy.downcast_ref::<SealedCopy>().expect("a sealed file").file;
        let mut copied = vec![0; written.text.len() + 1];
        let n = file.read_at(&mut copied, 0).expect("readable");
        assert!(copied[..n] == *written.text.as_bytes(), "the same bytes, no more");
        file.rewind().expect("seekable");
        assert!(file.write_all(b"x").is_err(), "sealed against writes");
        assert!(file.set_len(1).is_err(), "sealed against shrinking");
    }

    /// Hands out at most `.1` bytes a read.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.1.min(buf.len()).min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn prepared_text_is_what_prepared_writes_whatever_the_pieces() {
        // Every kind of escape, and UTF-8 sequences of every length, some
        // of them across the pieces' boundaries.
        let unit = "a \"q\" \\ \t\n\r\u{1}\u{1f}\u{7f} é € 𝄞 \u{2028}/ x";
        let base = unit.repeat(3 * PIECE / unit.len() + 2);
        let mut straddled = 0;
        for shift in 0..4 {
            let text = format!("{}{base}", "z".repeat(shift));
            straddled += (1..=3).filter(|n| !text.is_char_boundary(n * PIECE)).count();
            let prepared = Body::prepared(Arc::from(text.as_bytes()), Encoding::Identity).expect("text");
            for step in [usize::MAX, 100_003] {
                let body = Body::prepared_text(Trickle(text.as_bytes(), step)).expect("text");
                assert!(body.content() == text.as_bytes(), "{shift} {step}: the content");
                assert_eq!(body, prepared);
                let (held, own) = (body.written().expect("held"), prepared.written().expect("own"));
                assert!(
                    held.text.as_bytes() == own.text.as_bytes(),
                    "{shift} {step}: the text"
                );
                assert!(body.has_sendfile_copy());
                let copy = held.copy.as_deref().expect("a copy");
                let file = &copy.downcast_ref::<SealedCopy>().expect("a sealed file").file;
                let mut copied = vec![0; own.text.len() + 1];
                let mut n = 0;
                while let Ok(read @ 1..) = file.read_at(&mut copied[n..], n as u64) {
                    n += read;
                }
                assert!(copied[..n] == *own.text.as_bytes(), "{shift} {step}: the copy");
                let response = |body: &Body| {
                    crate::message::Response::ok("ok")
                        .with_body(body.clone())
                        .to_bytes()
                };
                assert!(
                    response(&body) == response(&prepared),
                    "{shift} {step}: on the wire"
                );
            }
        }
        assert!(straddled > 0, "some sequence straddles two pieces");
    }

    #[test]
    fn prepared_text_refuses_what_is_not_utf8_even_across_pieces() {
        let mut cut = vec![b'a'; PIECE - 1];
        // A sequence begun at the end of one piece, broken in the next.
        cut.extend_from_slice(&[0xc3, b'x']);
        // A sequence the text ends inside.
        let mut short = vec![b'a'; PIECE + 10];
        short.extend_from_slice(&[0xe2, 0x82]);
        for bytes in [cut, short] {
            let error = Body::prepared_text(&bytes[..]).expect_err("not UTF-8");
            assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");
            assert!(error.to_string().contains("not UTF-8"), "{error}");
        }
        let empty = Body::prepared_text(&b""[..]).expect("empty text");
        assert!(empty.content().is_empty() && !empty.has_sendfile_copy());
        assert_eq!(empty.written_len(), Some(0));
    }

    /// Whether this kernel moves shared memory into huge pages when asked
    /// (`MADV_COLLAPSE`: Linux 6.1, huge pages not denied).
    fn kernel_collapses() -> bool {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut numbers = release
            .split(|c: char| !c.is_ascii_digit())
            .map(|n| n.parse::<u32>().unwrap_or(0));
        let version = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
        let shmem = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
        version >= (6, 1) && shmem.is_ok_and(|setting| !setting.contains("[deny]"))
    }

    /// The kibibytes of `at`'s mapping that huge pages of shared memory
    /// map, as `/proc/self/smaps` says.
    fn huge_mapped_kib(at: usize) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ').filter(|(range, _)| range.contains('-')) {
                let (start, end) = range.split_once('-').expect("a range");
                let parse = |hex| usize::from_str_radix(hex, 16).unwrap_or(0);
                inside = (parse(start)..parse(end)).contains(&at);
            } else if let Some(kib) = line.strip_prefix("ShmemPmdMapped:").filter(|_| inside) {
                return kib.trim().trim_end_matches("kB").trim().parse().expect("a size");
            }
        }
        panic!("no mapping at {at:#x}");
    }

    #[test]
    fn a_long_text_lies_in_huge_pages_where_the_kernel_allows_and_reads_back_the_same() {
        // Two whole huge pages and a part.
        let text = "a \"quoted\" line\n".repeat((5 << 20) / 16);
        let body = Body::prepared_text(text.as_bytes()).expect("text");
        let prepared = Body::prepared(Arc::from(text.as_bytes()), Encoding::Identity).expect("text");
        let (held, own) = (body.written().expect("held"), prepared.written().expect("own"));
        let bytes = held.text.as_bytes();
        assert!(bytes == own.text.as_bytes(), "the text");
        let whole = bytes.len() / mapping::HUGE_PAGE * mapping::HUGE_PAGE;
        assert!(whole >= 2 * mapping::HUGE_PAGE, "{} bytes", bytes.len());
        assert_eq!(
            bytes.as_ptr() as usize % mapping::HUGE_PAGE,
            0,
            "mapped on a huge page's boundary"
        );
        let copy = held.copy.as_deref().expect("a copy");
        let file = &copy.downcast_ref::<SealedCopy>().expect("a sealed file").file;
        if kernel_collapses() {
            // Read whole above, so mapped: by huge pages, all but the part.
            assert_eq!(huge_mapped_kib(bytes.as_ptr() as usize), (whole / 1024) as u64);
            assert_eq!(mapping::into_huge_pages(file), whole, "asked again");
        }
        let mut copied = vec![0; bytes.len() + 1];
        let mut n = 0;
        while let Ok(read @ 1..) = file.read_at(&mut copied[n..], n as u64) {
            n += read;
        }
        assert!(copied[..n] == *bytes, "the copy");
    }

    /// The copy `body` was given.
    fn copy_of(body: &Body) -> &SealedCopy {
        let copy = body.written().and_then(|written| written.copy.as_deref());
        copy.and_then(|copy| copy.downcast_ref::<SealedCopy>())
            .expect("a copy")
    }

    #[test]
    fn short_copies_fill_huge_pages_in_turn_within_the_arenas_bound() {
        let arena = CopyArena::new(2 * mapping::HUGE_PAGE);
        let mut bodies = Vec::new();
        // About 350 KiB of text each, different in each.
        for n in 0.. {
            let text = format!("text {n}: \"quoted\"\n").repeat(300_000 / 17);
            let mut body = Body::prepared(Arc::from(text.as_bytes()), Encoding::Identity).expect("text");
            body.add_sendfile_copy_in(&arena).expect("a copy");
            let copy = copy_of(&body);
            // Each copy holds its own text, from where it starts.
            let written = body.written().expect("prepared").text.as_bytes();
            let mut read = vec![0; written.len()];
            copy.file.read_exact_at(&mut read, copy.at).expect("readable");
            assert!(read == written, "copy {n}");
            let in_arena = copy.file.metadata().expect("a file").len() == mapping::HUGE_PAGE as u64;
            bodies.push(body);
            if !in_arena || n == 20 {
                break;
            }
        }
        if !kernel_collapses() {
            return;
        }
        // Text after text in one huge page, then in the next: two, as many
        // as the bound holds; the copy after them has a file of its own.
        let placed: Vec<(&SealedCopy, u64)> = bodies
            .iter()
            .map(|body| (copy_of(body), body.written_len().expect("prepared") as u64))
            .collect();
        let ((own, _), shared) = placed.split_last().expect("copies");
        assert_eq!(own.at, 0);
        assert_eq!(arena.held_bytes(), 2 * mapping::HUGE_PAGE);
        for (n, pair) in shared.windows(2).enumerate() {
            let ((before, before_len), (copy, len)) = (pair[0], pair[1]);
            let end = before.at + before_len;
            if Arc::ptr_eq(&before.file, &copy.file) {
                assert_eq!(copy.at, end, "copy {}: right after the one before", n + 1);
                continue;
            }
            assert_eq!(copy.at, 0, "copy {}: a new page", n + 1);
            assert!(
                end + len > mapping::HUGE_PAGE as u64,
                "copy {}: it did not fit",
                n + 1
            );
            // The full page is sealed, and lies in a huge page.
            let seals = rustix::fs::fcntl_get_seals(&*before.file).expect("seals");
            assert!(seals.contains(SealFlags::WRITE), "copy {}: {seals:?}", n + 1);
            let mapped = mapping::Mapped::of(&before.file).expect("mapped");
            std::hint::black_box(
                mapped
                    .as_ref()
                    .iter()
                    .fold(0u8, |sum, byte| sum.wrapping_add(*byte)),
            );
            assert_eq!(huge_mapped_kib(mapped.as_ref().as_ptr() as usize), 2048);
        }
        let pages = shared
            .windows(2)
            .filter(|pair| !Arc::ptr_eq(&pair[0].0.file, &pair[1].0.file))
            .count()
            + 1;
        assert_eq!(pages, 2);
        drop(placed);
        // The pages go with the last copies in them; new copies make new
        // ones.
        bodies.clear();
        assert_eq!(arena.held_bytes(), 0);
        let mut body =
            Body::prepared(Arc::from(&b"more text\n".repeat(5000)[..]), Encoding::Identity).expect("text");
        body.add_sendfile_copy_in(&arena).expect("a copy");
        assert_eq!(arena.held_bytes(), mapping::HUGE_PAGE);
    }

    #[test]
    fn short_text_and_unprepared_bodies_get_no_copy() {
        assert!(!with_copy(prepared(100)).has_sendfile_copy());
        assert!(!with_copy(Body::text("x".repeat(100_000))).has_sendfile_copy());
    }
}
