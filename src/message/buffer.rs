//! A byte buffer with a consumed prefix: what the reader holds of the
//! peer's stream, and what the connection holds for it.

/// Capacity an empty buffer may keep for the next message; more is given
/// back (see [`Buffer::release`]).
pub(crate) const RETAINED_CAPACITY: usize = 16 * 1024;

/// The consumed prefix is given back once it is at least this large and
/// at least half the buffer: every byte is moved at most once per time it
/// is written, so compaction costs O(1) per byte.
const COMPACT_AT: usize = 64 * 1024;

/// Bytes with a consumed prefix: `bytes[start..]` is live.
#[derive(Debug, Default)]
pub(crate) struct Buffer {
    pub(crate) bytes: Vec<u8>,
    pub(crate) start: usize,
}

impl Buffer {
    pub(crate) fn live(&self) -> &[u8] {
        &self.bytes[self.start..]
    }

    pub(crate) fn len(&self) -> usize {
        self.bytes.len() - self.start
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Gives back the consumed prefix when nothing is live, or when it is
    /// large and at least half the buffer (amortised O(1) per byte); a
    /// buffer left far larger than its content is shrunk.
    pub(crate) fn compact(&mut self) {
        if self.is_empty() {
            self.bytes.clear();
            self.start = 0;
        } else if self.start >= COMPACT_AT && self.start >= self.bytes.len() / 2 {
            self.bytes.drain(..self.start);
            self.start = 0;
            let keep = (2 * self.bytes.len()).max(RETAINED_CAPACITY);
            if self.bytes.capacity() > 2 * keep {
                self.bytes.shrink_to(keep);
            }
        }
    }

    /// Once empty, keeps at most [`RETAINED_CAPACITY`], so that an idle
    /// connection costs little memory whatever it carried before.
    pub(crate) fn release(&mut self) {
        if self.is_empty() {
            self.bytes.clear();
            self.start = 0;
            if self.bytes.capacity() > RETAINED_CAPACITY {
                self.bytes = Vec::new();
            }
        }
    }

    /// Drops everything, memory included.
    pub(crate) fn discard(&mut self) {
        self.bytes = Vec::new();
        self.start = 0;
    }
}
