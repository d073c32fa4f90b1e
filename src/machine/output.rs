//! What a connection holds for its peer: the bytes it wrote, and shared
//! text spliced between them without a copy.
//!
//! A response is written into one growing buffer, except for text the
//! caller already holds in its final form (a cached file's content as
//! written, [`Body::prepared`](crate::message::Body::prepared)): that is
//! kept as a reference and handed to the transport from where it lies, so
//! a large cached file costs no copy between the cache and the socket. The
//! transport sees the pieces in order, one at a time
//! ([`Output::pending`]) or together for a vectored write
//! ([`Output::pending_vectored`]).
//!
//! Text that an adapter keeps a copy of as well (`Body::add_sendfile_copy`:
//! a sealed file) is a piece of its own: a vectored write stops before it,
//! so that a transport that sends from such copies
//! ([`Output::pending_copy`]) takes it from there, with no copy from
//! memory into the socket.

use std::any::Any;
use std::collections::VecDeque;
use std::io::IoSlice;

use crate::message::buffer::Buffer;
use crate::message::{TransportCopy, Written, WrittenText};

/// What a buffer starts with after idle: a small response's head and
/// content, and within the allocator's per-thread cache.
const FRESH_OUTPUT: usize = 1024;

/// Shared text shorter than this is copied into the buffer instead: a
/// separate piece would cost more in the vectored write than the copy.
const SPLICE_AT_LEAST: usize = 16 * 1024;

/// Whether shared text of `len` bytes is spliced rather than copied.
pub(crate) fn splices(len: usize) -> bool {
    len >= SPLICE_AT_LEAST
}

/// Bytes queued for the peer, in order: the buffer's bytes with shared
/// text spliced in at recorded offsets.
#[derive(Debug, Default)]
pub(super) struct Output {
    /// The bytes written into the output, with its consumed prefix.
    owned: Buffer,
    /// Shared text, in order, each at its offset in the whole output;
    /// boxed, since most connections never splice and an idle one keeps
    /// the pointer only.
    #[allow(
        clippy::box_collection,
        reason = "one word, not four, in every idle connection"
    )]
    splices: Option<Box<VecDeque<Splice>>>,
    /// Bytes ever queued, buffer and splices together.
    queued: u64,
    /// Bytes ever consumed (written to the transport).
    written: u64,
}

/// Pending output that an adapter keeps a copy of as well
/// (`Body::add_sendfile_copy`, Linux: a sealed file): a transport that can
/// send from that copy (`sendfile`) sends these bytes from there, with no
/// copy from memory into the socket, and reports what it sent as any
/// write
/// ([`ServerConnection::consume_output`](super::ServerConnection::consume_output)).
/// The machine does not know what the copy is; the adapter that made it
/// recognises it (`OutputCopy::file`).
#[derive(Clone, Copy)]
pub struct OutputCopy<'a> {
    copy: &'a (dyn Any + Send + Sync),
    /// Where in the copy the pending bytes start.
    pub offset: u64,
    /// How many bytes are pending from there.
    pub len: usize,
}

impl<'a> OutputCopy<'a> {
    /// The copy, as the adapter that made it gave it.
    pub fn copy(&self) -> &'a (dyn Any + Send + Sync) {
        self.copy
    }
}

impl std::fmt::Debug for OutputCopy<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputCopy")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// Shared text placed in the output.
#[derive(Debug)]
struct Splice {
    /// The offset of its first byte in the whole output.
    at: u64,
    text: WrittenText,
    /// An adapter's copy of the same bytes, if there is one.
    copy: Option<TransportCopy>,
}

impl Output {
    /// Bytes queued and not yet consumed.
    pub(super) fn len(&self) -> usize {
        (self.queued - self.written) as usize
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queued == self.written
    }

    /// Bytes ever queued.
    pub(super) fn queued(&self) -> u64 {
        self.queued
    }

    /// Bytes ever consumed.
    pub(super) fn written(&self) -> u64 {
        self.written
    }

    /// Appends what `write` writes; returns how many bytes it wrote.
    pub(super) fn append(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> usize {
        if self.owned.is_empty() {
            self.owned.compact();
        }
        if self.owned.bytes.capacity() == 0 {
            // A connection coming back from idle holds no buffer: one
            // allocation fits a typical response, instead of doubling up
            // to it from a few bytes.
            self.owned.bytes.reserve(FRESH_OUTPUT);
        }
        let before = self.owned.bytes.len();
        write(&mut self.owned.bytes);
        let added = self.owned.bytes.len() - before;
        self.queued += added as u64;
        added
    }

    /// Appends `written` as it is: referenced when it is large, copied
    /// when it is small. Returns its length.
    pub(super) fn splice(&mut self, written: &Written) -> usize {
        let text = &written.text;
        if !splices(text.len()) {
            return self.append(|out| out.extend_from_slice(text.as_bytes()));
        }
        self.splices.get_or_insert_default().push_back(Splice {
            at: self.queued,
            text: text.clone(),
            copy: written.copy.clone(),
        });
        self.queued += text.len() as u64;
        text.len()
    }

    /// When the first pending piece is text an adapter keeps a copy of as
    /// well: the copy, where in it the pending bytes start, and how many
    /// there are.
    pub(super) fn pending_copy(&self) -> Option<OutputCopy<'_>> {
        let splice = self.front_splice().filter(|splice| splice.at <= self.written)?;
        let copy = splice.copy.as_deref()?;
        let offset = self.written - splice.at;
        Some(OutputCopy {
            copy,
            offset,
            len: splice.text.len() - offset as usize,
        })
    }

    /// Whether the pending bytes before the first splice are followed at
    /// once by text an adapter sends from its copy: what
    /// [`pending_vectored`](Self::pending_vectored) fills then stops there.
    pub(super) fn copy_follows(&self) -> bool {
        self.front_splice()
            .is_some_and(|splice| splice.copy.is_some() && splice.at > self.written)
    }

    /// The first piece of what is pending: a run of the buffer or of a
    /// splice (empty when nothing is).
    pub(super) fn pending(&self) -> &[u8] {
        match self.front_splice() {
            Some(splice) if splice.at <= self.written => {
                &splice.text.as_bytes()[(self.written - splice.at) as usize..]
            }
            Some(splice) => &self.owned.live()[..(splice.at - self.written) as usize],
            None => self.owned.live(),
        }
    }

    /// Fills `slices` with the pending pieces in order, as many as fit;
    /// returns how many it filled.
    pub(super) fn pending_vectored<'a>(&'a self, slices: &mut [IoSlice<'a>]) -> usize {
        if self.splices.is_none() {
            // All in the buffer: one piece, or none.
            let live = self.owned.live();
            let Some(first) = slices.first_mut().filter(|_| !live.is_empty()) else {
                return 0;
            };
            *first = IoSlice::new(live);
            return 1;
        }
        let mut filled = 0;
        let mut at = self.written;
        let mut owned = self.owned.live();
        let mut splices = self.splices.iter().flat_map(|splices| splices.iter()).peekable();
        while filled < slices.len() && at < self.queued {
            let piece: &[u8] = match splices.peek() {
                // Text an adapter keeps a copy of goes alone, from the
                // copy if the transport can.
                Some(splice) if splice.copy.is_some() && filled > 0 && splice.at <= at => break,
                Some(splice) if splice.at <= at => {
                    let text = &splice.text.as_bytes()[(at - splice.at) as usize..];
                    splices.next();
                    text
                }
                Some(splice) => {
                    let (run, rest) = owned.split_at((splice.at - at) as usize);
                    owned = rest;
                    run
                }
                None => std::mem::take(&mut owned),
            };
            slices[filled] = IoSlice::new(piece);
            filled += 1;
            at += piece.len() as u64;
        }
        filled
    }

    /// Marks up to `n` pending bytes as written; returns how many.
    pub(super) fn consume(&mut self, n: usize) -> usize {
        let n = n.min(self.len());
        if self.splices.is_none() {
            // All in the buffer.
            self.owned.start += n;
            self.written += n as u64;
            self.owned.compact();
            return n;
        }
        let mut left = n;
        while left > 0 {
            let run = self.pending().len().min(left);
            match self.front_splice() {
                Some(splice) if splice.at <= self.written => {
                    if (self.written - splice.at) as usize + run == splice.text.len()
                        && let Some(splices) = &mut self.splices
                    {
                        splices.pop_front();
                    }
                }
                _ => self.owned.start += run,
            }
            self.written += run as u64;
            left -= run;
        }
        self.owned.compact();
        n
    }

    /// Gives back what is beyond the buffer's retained capacity once
    /// nothing is pending.
    pub(super) fn release(&mut self) {
        self.owned.release();
        // Only an empty queue is dropped: assigning over `None` would cost
        // a call to drop it on every quiet turn.
        if self.splices.as_ref().is_some_and(|splices| splices.is_empty()) {
            self.splices = None;
        }
    }

    /// The first splice not wholly written.
    fn front_splice(&self) -> Option<&Splice> {
        self.splices.as_ref()?.front()
    }

    /// Drops everything pending, memory included; what was queued counts
    /// as never written.
    pub(super) fn discard(&mut self) {
        self.owned.discard();
        self.splices = None;
        self.queued = self.written;
    }

    /// Bytes of memory the output holds for itself (the buffer's capacity;
    /// spliced text is shared with whoever made it).
    pub(super) fn capacity(&self) -> usize {
        self.owned.bytes.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn drain(output: &mut Output, step: usize) -> Vec<u8> {
        let mut got = Vec::new();
        while !output.is_empty() {
            let piece = output.pending();
            let n = piece.len().min(step);
            got.extend_from_slice(&piece[..n]);
            output.consume(n);
        }
        got
    }

    /// Text to splice, with a copy if `copied`: the machine does not look
    /// inside it.
    fn written(text: &str, copied: bool) -> Written {
        Written {
            text: Arc::<str>::from(text).into(),
            copy: copied.then(|| Arc::new(()) as TransportCopy),
        }
    }

    fn build() -> (Output, Vec<u8>) {
        let big = "x".repeat(SPLICE_AT_LEAST + 3);
        let other = "y".repeat(SPLICE_AT_LEAST);
        let mut output = Output::default();
        let mut expected = Vec::new();
        output.append(|out| out.extend_from_slice(b"head"));
        output.splice(&written(&big, false));
        output.splice(&written(&other, false));
        output.append(|out| out.extend_from_slice(b"tail"));
        output.splice(&written("small", false));
        for part in ["head", &big, &other, "tail", "small"] {
            expected.extend_from_slice(part.as_bytes());
        }
        (output, expected)
    }

    #[test]
    fn pieces_come_out_in_order_whatever_the_writes() {
        for step in [1, 3, 4, 1000, SPLICE_AT_LEAST, usize::MAX] {
            let (mut output, expected) = build();
            assert_eq!(output.len(), expected.len());
            assert_eq!(drain(&mut output, step), expected, "step {step}");
            assert_eq!(output.written(), expected.len() as u64);
        }
    }

    #[test]
    fn a_vectored_view_is_the_same_bytes() {
        let (mut output, expected) = build();
        output.consume(2);
        let mut slices = [IoSlice::new(&[]); 8];
        let n = output.pending_vectored(&mut slices);
        let joined: Vec<u8> = slices[..n].iter().flat_map(|s| s.iter().copied()).collect();
        assert_eq!(joined, expected[2..]);
        // Fewer slices than pieces: a prefix.
        let mut two = [IoSlice::new(&[]); 2];
        let n = output.pending_vectored(&mut two);
        assert_eq!(n, 2);
        assert_eq!(&*two[0], b"ad");
        assert_eq!(two[1].len(), SPLICE_AT_LEAST + 3);
    }

    #[test]
    fn the_bytes_before_a_copied_text_are_told_to_be_followed_by_it() {
        let big = "x".repeat(SPLICE_AT_LEAST);
        let mut output = Output::default();
        output.append(|out| out.extend_from_slice(b"head"));
        output.splice(&written(&big, true));
        output.append(|out| out.extend_from_slice(b"tail"));
        // The head: a vectored write stops before the copied text.
        assert!(output.copy_follows());
        let mut slices = [IoSlice::new(&[]); 4];
        assert_eq!(output.pending_vectored(&mut slices), 1);
        assert_eq!(&*slices[0], b"head");
        output.consume(3);
        assert!(output.copy_follows(), "part of the head is still before it");
        output.consume(1);
        // The copied text itself, then the tail: nothing copied follows.
        assert!(!output.copy_follows());
        assert!(output.pending_copy().is_some());
        output.consume(big.len());
        assert!(!output.copy_follows());
        assert_eq!(output.pending(), b"tail");
        // Text without a copy is written from memory with the rest.
        let (output, _) = build();
        assert!(!output.copy_follows());
    }

    #[test]
    fn small_text_is_copied_and_discard_empties() {
        let mut output = Output::default();
        output.splice(&written("small", false));
        assert!(output.splices.is_none());
        let (mut output, _) = build();
        output.consume(10);
        output.discard();
        assert!(output.is_empty());
        assert_eq!(output.pending(), b"");
        assert_eq!(output.capacity(), 0);
    }

    #[test]
    fn copied_text_is_a_piece_of_its_own_and_says_where_it_lies() {
        let text = "z".repeat(SPLICE_AT_LEAST + 5);
        let mut output = Output::default();
        output.append(|out| out.extend_from_slice(b"head"));
        output.splice(&written(&text, true));
        output.append(|out| out.extend_from_slice(b"tail"));
        // The head goes alone: a vectored write stops before the copied text.
        assert!(output.pending_copy().is_none());
        let mut slices = [IoSlice::new(&[]); 4];
        assert_eq!(output.pending_vectored(&mut slices), 1);
        assert_eq!(&*slices[0], b"head");
        output.consume(4);
        let mut slices = [IoSlice::new(&[]); 4];
        let at_start = output.pending_copy().expect("the text has a copy");
        assert_eq!((at_start.offset, at_start.len), (0, text.len()));
        // Part of it went: the rest starts further in.
        output.consume(1000);
        let further = output.pending_copy().expect("still in the copy");
        assert_eq!((further.offset, further.len), (1000, text.len() - 1000));
        // A transport that cannot send from the copy writes it from memory,
        // with what follows.
        let n = output.pending_vectored(&mut slices);
        let joined: Vec<u8> = slices[..n].iter().flat_map(|s| s.iter().copied()).collect();
        assert_eq!(joined, [&text.as_bytes()[1000..], b"tail"].concat());
        output.consume(text.len() - 1000);
        assert!(output.pending_copy().is_none());
        assert_eq!(output.pending(), b"tail");
    }
}
