//! Framing (D1): finds where each top-level JSON object ends on a stream,
//! incrementally, never rescanning a byte.

/// What a scan of the buffered bytes found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// No complete message yet.
    Partial,
    /// A complete message: `start..end` of the bytes given (after any
    /// whitespace before it).
    Complete {
        /// Offset of the message's first byte (`{`).
        start: usize,
        /// Offset one past its last byte (`}`).
        end: usize,
        /// The deepest nesting seen (the message object itself is 1).
        max_depth: usize,
    },
    /// A byte that cannot be part of a message (D1: `400` and close).
    Error {
        /// Where the offending byte is.
        at: usize,
    },
}

/// An incremental scanner for one message at a time.
#[derive(Debug, Clone, Default)]
pub struct Scanner {}

impl Scanner {
    /// A scanner at the start of a connection (a BOM may follow, D1).
    pub fn new() -> Scanner {
        Scanner {}
    }

    /// Scans `buf` (every byte received since the last complete message),
    /// resuming where the last call stopped.
    pub fn scan(&mut self, buf: &[u8]) -> Scan {
        let _ = buf;
        todo!("issue 3: scanner")
    }
}

/// Scans a whole buffer at once, httparse-style.
pub fn scan(buf: &[u8]) -> Scan {
    Scanner::new().scan(buf)
}
