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
//! The copy is a `memfd` sealed against every change, so the bytes in the
//! file are the bytes the machine counts, for as long as any answer holds
//! it. The machine carries it without knowing what it is
//! ([`OutputCopy`]); [`OutputCopy::file`] finds the file again.
//!
//! [`Transport::send_copy`]: super::Transport::send_copy

use std::io::{self, Write};
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use rustix::fs::{MemfdFlags, SealFlags};

use crate::machine::OutputCopy;
use crate::message::{Body, TransportCopy};

/// A body's text in a sealed `memfd`: what [`Body::add_sendfile_copy`]
/// gives the machine to carry.
struct SealedCopy(std::fs::File);

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
    /// body that was not prepared. On an error (no `memfd` here, no
    /// descriptor left) the body stays as it was, and is sent from memory.
    ///
    /// `sendfile` cannot ask the kernel not to raise `SIGPIPE` on a socket
    /// the peer closed; Rust programs ignore the signal unless they ask
    /// for it.
    pub fn add_sendfile_copy(&mut self) -> io::Result<()> {
        let Some(written) = self.written() else {
            return Ok(());
        };
        if !crate::machine::splices(written.text.len()) {
            return Ok(());
        }
        let copy: TransportCopy = Arc::new(SealedCopy(sealed_copy(written.text.as_bytes())?));
        self.set_written_copy(copy);
        Ok(())
    }

    /// Whether the body's text is also kept in a file
    /// ([`add_sendfile_copy`](Body::add_sendfile_copy)): what keeping it
    /// costs a cache besides the text.
    pub fn has_sendfile_copy(&self) -> bool {
        self.written().is_some_and(|written| written.copy.is_some())
    }
}

impl<'a> OutputCopy<'a> {
    /// The sealed file that holds these bytes, when the copy is one
    /// [`Body::add_sendfile_copy`] made: send `len` bytes from `offset`
    /// with `sendfile`, say.
    pub fn file(&self) -> Option<&'a std::fs::File> {
        self.copy().downcast_ref::<SealedCopy>().map(|copy| &copy.0)
    }
}

/// A `memfd` holding `bytes`, sealed: it can no longer be written,
/// shrunk, grown, or unsealed.
fn sealed_copy(bytes: &[u8]) -> io::Result<std::fs::File> {
    let fd = rustix::fs::memfd_create("jsontp-prepared", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    rustix::fs::fcntl_add_seals(
        &file,
        SealFlags::WRITE | SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL,
    )?;
    Ok(file)
}

/// Sends `pending` from its file into `socket`: how many bytes went, or
/// `None` when the copy is not a file. A full non-blocking socket answers
/// `WouldBlock`, as a write does.
pub(crate) fn send(socket: BorrowedFd<'_>, pending: OutputCopy<'_>) -> Option<io::Result<usize>> {
    let file = pending.file()?;
    let mut offset = pending.offset;
    Some(rustix::fs::sendfile(socket, file, Some(&mut offset), pending.len).map_err(io::Error::from))
}

#[cfg(test)]
mod tests {
    use std::io::Seek;
    use std::os::unix::fs::FileExt;

    use super::*;
    use crate::message::Encoding;

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
        let mut file = &copy.downcast_ref::<SealedCopy>().expect("a sealed file").0;
        let mut copied = vec![0; written.text.len() + 1];
        let n = file.read_at(&mut copied, 0).expect("readable");
        assert!(copied[..n] == *written.text.as_bytes(), "the same bytes, no more");
        file.rewind().expect("seekable");
        assert!(file.write_all(b"x").is_err(), "sealed against writes");
        assert!(file.set_len(1).is_err(), "sealed against shrinking");
    }

    #[test]
    fn short_text_and_unprepared_bodies_get_no_copy() {
        assert!(!with_copy(prepared(100)).has_sendfile_copy());
        assert!(!with_copy(Body::text("x".repeat(100_000))).has_sendfile_copy());
    }
}
