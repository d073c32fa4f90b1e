//! Framing (D1): finds where each top-level JSON object ends on a stream,
//! incrementally, never rescanning a byte.
//!
//! The scanner classifies each byte once, in a small state machine that
//! survives between calls: when more bytes arrive it resumes in the middle
//! of a string, a comment or a UTF-8 line separator. It knows exactly as
//! much JSON5 as framing needs, and agrees with the JSON5 grammar (the
//! `json5` crate's `json5.pest`) on every byte of it:
//!
//! - strings are `"…"` or `'…'`; a backslash escapes the next byte (which
//!   also covers line continuations, `\` + CR LF, and `\u` escapes);
//! - `// …` comments end at LF, CR, U+2028 or U+2029 (UTF-8 `E2 80 A8` /
//!   `E2 80 A9`); `/* … */` comments end at the first `*/` after the `/*`
//!   (so `/*/` does not close);
//! - depth counts `{ }` and `[ ]` outside strings and comments; a closing
//!   bracket that does not match its opener cannot be framed and is an
//!   error, as is a `/` that starts no comment;
//! - between messages only space, tab, CR and LF; a UTF-8 BOM only at the
//!   very start of the stream; a message must start with `{` (D5 level 1).
//!
//! With a size limit ([`Scanner::with_limit`]) the scanner stops at the
//! first byte past the limit and answers [`Scan::TooLarge`] without waiting
//! for the message's end (D3).

use memchr::{memchr, memchr2, memchr3};
use smallvec::SmallVec;

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
    /// The message passed the size limit before it ended (D3: `413` and
    /// close). Reported at the first byte past the limit.
    TooLarge {
        /// Offset of the message's first byte (`{`).
        start: usize,
    },
}

/// Where the scanner stands: the byte it reads next is interpreted in this
/// state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between messages: whitespace, or the `{` that starts one.
    Between,
    /// At the stream's start, after `EF` of a BOM.
    Bom1,
    /// After `EF BB` of a BOM.
    Bom2,
    /// Inside the message, outside strings and comments.
    Object,
    /// Inside a string opened by `quote`.
    Str { quote: u8 },
    /// After a backslash inside a string: the next byte is taken as is.
    StrEscape { quote: u8 },
    /// After a `/` outside strings: a comment must start.
    Slash,
    /// Inside a `//` comment.
    LineComment,
    /// Inside a `//` comment, after `E2` (maybe U+2028/U+2029).
    LineCommentE2,
    /// After `E2 80`.
    LineCommentE280,
    /// Inside a `/* */` comment.
    BlockComment,
    /// Inside a `/* */` comment, after a `*`.
    BlockCommentStar,
    /// Sticky: an error or the size limit was reported.
    Failed(Scan),
}

/// Bytes that matter inside a message outside strings and comments.
const STRUCTURAL: [bool; 256] = {
    let mut table = [false; 256];
    table[b'{' as usize] = true;
    table[b'}' as usize] = true;
    table[b'[' as usize] = true;
    table[b']' as usize] = true;
    table[b'"' as usize] = true;
    table[b'\'' as usize] = true;
    table[b'/' as usize] = true;
    table
};

/// An incremental scanner for one message at a time.
///
/// Feed it the same growing buffer (every byte received since the last
/// complete message) until it answers something other than
/// [`Scan::Partial`]. After [`Scan::Complete`] it is ready for the next
/// message: hand it the bytes after `end`. Bytes before the message's start
/// may be dropped at any time with [`drop_prefix`](Self::drop_prefix), so
/// that whitespace between messages is never kept.
#[derive(Debug, Clone)]
pub struct Scanner {
    /// The next byte to classify, as an offset into the caller's buffer.
    pos: usize,
    /// Where the current message's `{` is, once seen.
    start: Option<usize>,
    state: State,
    depth: usize,
    max_depth: usize,
    /// One bit per open level, 1 for `[`: closers must match (bounded by
    /// the message size, one bit per byte at most).
    brackets: SmallVec<[u64; 2]>,
    /// A BOM may still be skipped (nothing scanned on this stream yet).
    at_stream_start: bool,
    max_message_bytes: usize,
}

impl Default for Scanner {
    fn default() -> Self {
        Scanner::new()
    }
}

impl Scanner {
    /// A scanner at the start of a connection (a BOM may follow, D1), with
    /// no size limit.
    pub fn new() -> Scanner {
        Scanner::with_limit(usize::MAX)
    }

    /// A scanner at the start of a connection that answers
    /// [`Scan::TooLarge`] once a message passes `max_message_bytes` (D3).
    pub fn with_limit(max_message_bytes: usize) -> Scanner {
        Scanner {
            pos: 0,
            start: None,
            state: State::Between,
            depth: 0,
            max_depth: 0,
            brackets: SmallVec::new(),
            at_stream_start: true,
            max_message_bytes,
        }
    }

    /// Whether part of a message has been seen (its `{` and maybe more).
    pub fn in_message(&self) -> bool {
        self.start.is_some()
    }

    /// How many bytes at the front of the buffer hold no part of a message
    /// (whitespace, a BOM) and may be dropped.
    pub fn idle_prefix(&self) -> usize {
        match self.state {
            State::Failed(_) => 0,
            _ => self.start.unwrap_or(self.pos),
        }
    }

    /// Tells the scanner that the caller removed `n` bytes from the front of
    /// its buffer; `n` is at most [`idle_prefix`](Self::idle_prefix) (more
    /// is clamped to it).
    pub fn drop_prefix(&mut self, n: usize) {
        let n = n.min(self.idle_prefix());
        self.pos -= n;
        if let Some(start) = &mut self.start {
            *start -= n;
        }
    }

    /// Scans `buf` (every byte received since the last complete message,
    /// less any dropped prefix), resuming where the last call stopped.
    pub fn scan(&mut self, buf: &[u8]) -> Scan {
        if let State::Failed(found) = self.state {
            return found;
        }
        let found = self.run(buf);
        match found {
            Scan::Partial => {}
            Scan::Complete { .. } => self.next_message(),
            Scan::Error { .. } | Scan::TooLarge { .. } => self.state = State::Failed(found),
        }
        found
    }

    /// Ready for the message after the one just completed.
    fn next_message(&mut self) {
        self.pos = 0;
        self.start = None;
        self.state = State::Between;
        self.depth = 0;
        self.max_depth = 0;
        self.brackets.clear();
    }

    /// The end of the bytes this message may still use before passing the
    /// limit, clamped to the buffer.
    fn scan_end(&self, buf: &[u8]) -> usize {
        match self.start {
            Some(start) => start.saturating_add(self.max_message_bytes).min(buf.len()),
            None => buf.len(),
        }
    }

    fn run(&mut self, buf: &[u8]) -> Scan {
        loop {
            let end = self.scan_end(buf);
            if self.pos >= end {
                return match self.start {
                    Some(start) if buf.len() > end => Scan::TooLarge { start },
                    _ => Scan::Partial,
                };
            }
            let at = self.pos;
            let byte = buf[at];
            match self.state {
                State::Between => {
                    self.at_stream_start &= at == 0 && byte == 0xEF;
                    match byte {
                        b' ' | b'\t' | b'\r' | b'\n' => self.pos += 1,
                        0xEF if self.at_stream_start => {
                            self.pos += 1;
                            self.state = State::Bom1;
                        }
                        b'{' => {
                            self.start = Some(at);
                            self.pos += 1;
                            self.open(false);
                            self.state = State::Object;
                        }
                        _ => return Scan::Error { at },
                    }
                }
                State::Bom1 | State::Bom2 => {
                    let wanted = if self.state == State::Bom1 { 0xBB } else { 0xBF };
                    if byte != wanted {
                        return Scan::Error { at };
                    }
                    self.pos += 1;
                    self.state = if self.state == State::Bom1 {
                        State::Bom2
                    } else {
                        State::Between
                    };
                }
                State::Object => {
                    // Skip to the next byte that matters.
                    let Some(offset) = buf[at..end].iter().position(|&b| STRUCTURAL[b as usize]) else {
                        self.pos = end;
                        continue;
                    };
                    let at = at + offset;
                    self.pos = at + 1;
                    match buf[at] {
                        b'{' => self.open(false),
                        b'[' => self.open(true),
                        closer @ (b'}' | b']') => {
                            if !self.close(closer == b']') {
                                return Scan::Error { at };
                            }
                            if self.depth == 0 {
                                let start = self.start.unwrap_or(0);
                                return Scan::Complete {
                                    start,
                                    end: at + 1,
                                    max_depth: self.max_depth,
                                };
                            }
                        }
                        quote @ (b'"' | b'\'') => self.state = State::Str { quote },
                        _ => self.state = State::Slash,
                    }
                }
                State::Str { quote } => match find_string_end(quote, &buf[at..end]) {
                    None => self.pos = end,
                    Some(offset) => {
                        let hit = at + offset;
                        self.pos = hit + 1;
                        self.state = if buf[hit] == quote {
                            State::Object
                        } else {
                            State::StrEscape { quote }
                        };
                    }
                },
                State::StrEscape { quote } => {
                    // Any byte: `\"`, `\\`, `\u`, and the first byte of a
                    // line continuation all leave the string open.
                    self.pos += 1;
                    self.state = State::Str { quote };
                }
                State::Slash => {
                    self.state = match byte {
                        b'/' => State::LineComment,
                        b'*' => State::BlockComment,
                        _ => return Scan::Error { at: at - 1 },
                    };
                    self.pos += 1;
                }
                State::LineComment => match memchr3(b'\n', b'\r', 0xE2, &buf[at..end]) {
                    None => self.pos = end,
                    Some(offset) => {
                        let hit = at + offset;
                        self.pos = hit + 1;
                        self.state = if buf[hit] == 0xE2 {
                            State::LineCommentE2
                        } else {
                            State::Object
                        };
                    }
                },
                State::LineCommentE2 => {
                    if byte == 0x80 {
                        self.pos += 1;
                        self.state = State::LineCommentE280;
                    } else {
                        // Not a separator; look at this byte again (it may
                        // itself be a line end or another E2).
                        self.state = State::LineComment;
                    }
                }
                State::LineCommentE280 => {
                    if byte == 0xA8 || byte == 0xA9 {
                        self.pos += 1;
                        self.state = State::Object;
                    } else {
                        self.state = State::LineComment;
                    }
                }
                State::BlockComment => match memchr(b'*', &buf[at..end]) {
                    None => self.pos = end,
                    Some(offset) => {
                        self.pos = at + offset + 1;
                        self.state = State::BlockCommentStar;
                    }
                },
                State::BlockCommentStar => {
                    self.state = match byte {
                        b'/' => State::Object,
                        b'*' => State::BlockCommentStar,
                        _ => State::BlockComment,
                    };
                    self.pos += 1;
                }
                State::Failed(found) => return found,
            }
        }
    }

    /// Enters one level; `array` for `[`.
    fn open(&mut self, array: bool) {
        let level = self.depth;
        let (word, bit) = (level / 64, level % 64);
        if word >= self.brackets.len() {
            self.brackets.push(0);
        }
        if array {
            self.brackets[word] |= 1 << bit;
        } else {
            self.brackets[word] &= !(1 << bit);
        }
        self.depth += 1;
        self.max_depth = self.max_depth.max(self.depth);
    }

    /// Leaves one level; false when the closer does not match its opener.
    fn close(&mut self, array: bool) -> bool {
        let Some(level) = self.depth.checked_sub(1) else {
            return false;
        };
        let (word, bit) = (level / 64, level % 64);
        let opened_array = self.brackets.get(word).is_some_and(|w| w & (1 << bit) != 0);
        if opened_array != array {
            return false;
        }
        self.depth = level;
        if bit == 0 && word + 1 == self.brackets.len() {
            self.brackets.pop();
        }
        true
    }
}

/// The first quote or backslash in a string body. Most strings in a
/// message are short (keys, header values): a plain loop finds their end
/// before a vectorised search would have started; long ones go to memchr.
fn find_string_end(quote: u8, bytes: &[u8]) -> Option<usize> {
    const SHORT: usize = 16;
    let head = &bytes[..bytes.len().min(SHORT)];
    if let Some(offset) = head.iter().position(|&b| b == quote || b == b'\\') {
        return Some(offset);
    }
    if bytes.len() <= SHORT {
        return None;
    }
    memchr2(quote, b'\\', &bytes[SHORT..]).map(|offset| offset + SHORT)
}

/// Scans a whole buffer at once, httparse-style: where the first message in
/// `buf` ends, if it does.
pub fn scan(buf: &[u8]) -> Scan {
    Scanner::new().scan(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` one byte at a time and returns the first non-partial
    /// answer.
    fn bytewise(input: &[u8]) -> Scan {
        let mut scanner = Scanner::new();
        for n in 1..=input.len() {
            let found = scanner.scan(&input[..n]);
            if found != Scan::Partial {
                return found;
            }
        }
        Scan::Partial
    }

    fn complete(start: usize, end: usize, max_depth: usize) -> Scan {
        Scan::Complete {
            start,
            end,
            max_depth,
        }
    }

    #[track_caller]
    fn check(input: &str, expected: Scan) {
        assert_eq!(scan(input.as_bytes()), expected, "whole: {input:?}");
        assert_eq!(bytewise(input.as_bytes()), expected, "bytewise: {input:?}");
    }

    #[test]
    fn finds_the_end_of_simple_objects() {
        check("{}", complete(0, 2, 1));
        check("  \r\n\t{}\n{}", complete(5, 7, 1));
        check(r#"{"a":{"b":[1,{"c":[]}]}}"#, complete(0, 24, 5));
        check("{", Scan::Partial);
        check("", Scan::Partial);
        check("   ", Scan::Partial);
    }

    #[test]
    fn braces_inside_strings_do_not_count() {
        check(r#"{"a":"}"}"#, complete(0, 9, 1));
        check(r#"{'a':'}"'}"#, complete(0, 10, 1));
        check(r#"{"a":"\"}"}"#, complete(0, 11, 1));
        check(r#"{"a":"\\"}"#, complete(0, 10, 1));
        check(r#"{"a":'\'}'}"#, complete(0, 11, 1));
        // A line continuation (D4, JSON5): `\` CR LF stays in the string.
        check("{'a':'x\\\r\n}'}", complete(0, 13, 1));
    }

    #[test]
    fn comments_are_skipped_as_json5_does() {
        check("{// }\n}", complete(0, 7, 1));
        check("{// }\r}", complete(0, 7, 1));
        check("{// }\u{2028}}", complete(0, 9, 1));
        check("{// }\u{2029}}", complete(0, 9, 1));
        // Other characters starting with E2 do not end the comment.
        check("{// \u{2027}}\n}", complete(0, 10, 1));
        check("{/* } */}", complete(0, 9, 1));
        check("{/*/ } */}", complete(0, 10, 1));
        check("{/** } **/}", complete(0, 11, 1));
        check("{\"a\":1 // \"\n}", complete(0, 13, 1));
    }

    #[test]
    fn bad_bytes_where_a_message_starts_are_errors() {
        check("hello {}", Scan::Error { at: 0 });
        check("  x", Scan::Error { at: 2 });
        // D5 level 1: an array is not an object.
        check("[1,2]", Scan::Error { at: 0 });
        // A comment between messages is not whitespace (D1).
        check("// hi\n{}", Scan::Error { at: 0 });
        check("\u{0B}{}", Scan::Error { at: 0 });
    }

    #[test]
    fn unframeable_bytes_inside_a_message_are_errors() {
        check("{]", Scan::Error { at: 1 });
        check("{[}", Scan::Error { at: 2 });
        check("{\"a\":1/}", Scan::Error { at: 6 });
    }

    #[test]
    fn bom_only_at_the_very_start() {
        check("\u{FEFF}{}", complete(3, 5, 1));
        check("\u{FEFF}  {}", complete(5, 7, 1));
        check(" \u{FEFF}{}", Scan::Error { at: 1 });
        let mut scanner = Scanner::new();
        assert_eq!(scanner.scan(b"{}"), complete(0, 2, 1));
        assert_eq!(scanner.scan("\u{FEFF}{}".as_bytes()), Scan::Error { at: 0 });
        assert_eq!(scan(b"\xEF\xBB{}"), Scan::Error { at: 2 });
        assert_eq!(scan(b"\xEF\xBB"), Scan::Partial);
    }

    #[test]
    fn depth_is_measured_past_any_limit() {
        let deep = format!("{}{}", "{\"a\":[".repeat(100), "]}".repeat(100));
        check(&deep, complete(0, deep.len(), 200));
    }

    #[test]
    fn the_size_limit_is_reported_at_the_first_byte_past_it() {
        let mut scanner = Scanner::with_limit(4);
        assert_eq!(scanner.scan(b"  {  "), Scan::Partial);
        assert_eq!(scanner.scan(b"  {  }"), complete(2, 6, 1));
        let mut scanner = Scanner::with_limit(4);
        assert_eq!(scanner.scan(b"\n{\"abc"), Scan::TooLarge { start: 1 });
        // Sticky.
        assert_eq!(scanner.scan(b"\n{\"abc\"}"), Scan::TooLarge { start: 1 });
        let mut scanner = Scanner::with_limit(4);
        for n in 1..=6 {
            let found = scanner.scan(&b"\n{\"abc"[..n]);
            assert_eq!(found == Scan::Partial, n < 6, "{n}");
        }
    }

    #[test]
    fn whitespace_between_messages_can_be_dropped() {
        let mut scanner = Scanner::new();
        assert_eq!(scanner.scan(b"\n\n  "), Scan::Partial);
        assert_eq!(scanner.idle_prefix(), 4);
        scanner.drop_prefix(4);
        assert_eq!(scanner.scan(b" {\"a\""), Scan::Partial);
        assert_eq!(scanner.idle_prefix(), 1);
        scanner.drop_prefix(1);
        assert_eq!(scanner.scan(b"{\"a\":1}"), complete(0, 7, 1));
        // The next message is scanned from the buffer's start again.
        assert_eq!(scanner.scan(b"{}"), complete(0, 2, 1));
    }
}
