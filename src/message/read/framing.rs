//! The one lexer (D1, D3, D4): where each message ends on a stream, how deep
//! it nests, and whether it escapes a lone surrogate; incrementally, never
//! rescanning a byte.
//!
//! Every reader in this crate runs behind it: the connection machine frames
//! the stream with a [`Scanner`], and [`parse_request`] /
//! [`parse_response`] scan a whole buffer with it before the text is read.
//! So one table of rules decides where strings, comments and brackets are,
//! and the depth limit is checked before any reading recurses.
//!
//! The scanner classifies each byte once, in a small state machine that
//! survives between calls: when more bytes arrive it resumes in the middle
//! of a string, an escape, a comment or a UTF-8 line separator. It knows
//! exactly as much JSON5 as framing needs, and agrees with the JSON5 grammar
//! and the reader of message text (`reader.rs`) on every byte of it:
//!
//! - strings are `"…"` or `'…'`; a backslash escapes the next byte (which
//!   also covers line continuations, `\` + CR LF); a `\uXXXX` escape in the
//!   range D800-DFFF must be half of a surrogate pair, `\uD8xx\uDCxx`, or the
//!   message holds a lone surrogate (D4), which [`Frame::lone_surrogate`]
//!   reports without ending the scan;
//! - `// …` comments end at LF, CR, U+2028 or U+2029 (UTF-8 `E2 80 A8` /
//!   `E2 80 A9`), as in JSON5; `/* … */` comments end at the first `*/`
//!   after the `/*` (so `/*/` does not close);
//! - depth counts `{ }` and `[ ]` outside strings and comments, past any
//!   limit ([`Frame::max_depth`], D3);
//! - between messages only space, tab, CR and LF; a UTF-8 BOM only at the
//!   very start of the stream; a message must start with `{` (D5 level 1).
//!
//! Whatever would leave the end of a message in doubt is a [`Fault`] (D1:
//! `400` and close): a closing bracket that does not match its opener, a
//! `/` that starts no comment, and `*/` outside a comment. A reader that
//! disagreed with us about any of them could read one message as two.
//!
//! With a size limit ([`Scanner::with_limit`]) the scanner stops at the
//! first byte past the limit and answers [`Scan::TooLarge`] without waiting
//! for the message's end (D3).
//!
//! [`parse_request`]: crate::message::parse_request
//! [`parse_response`]: crate::message::parse_response

use std::fmt;
use std::ops::Range;

use memchr::{memchr, memchr2, memchr3};
use smallvec::SmallVec;

use crate::message::words::{self, Lanes};

/// What a scan of the buffered bytes found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// No complete message yet.
    Partial,
    /// A complete message.
    Complete(Frame),
    /// A byte that leaves the message's end in doubt, or that cannot start
    /// a message (D1: `400` and close).
    Error {
        /// Where the offending byte is (for `*/`, the `*`).
        at: usize,
        /// What is wrong there.
        fault: Fault,
    },
    /// The message passed the size limit before it ended (D3: `413` and
    /// close). Reported at the first byte past the limit.
    TooLarge {
        /// Offset of the message's first byte (`{`).
        start: usize,
    },
    /// With [`Scanner::with_depth_limit`]: the message, not ended yet, has
    /// just opened a level past the limit (D3), at `at`. Reported once per
    /// message, at the same byte however the input is split; the scan goes
    /// on to the message's end, so that the stream stays framed.
    TooDeep {
        /// Where the `{` or `[` that passed the limit is.
        at: usize,
    },
    /// With [`Scanner::with_content_runs`]: a run of the text of the
    /// message's `body.content` string (D19). These bytes do not count
    /// against the size limit; the caller takes them out of its buffer
    /// (`buf[run.start()..run.end()]`) before it scans again, and the scan
    /// then goes on at `run.start()`.
    Content(ContentRun),
}

/// A run of `body.content` text (D19): the string's bytes between its
/// quotes, escapes as written, already checked as any string is (UTF-8,
/// escapes; a lone surrogate is still reported on the [`Frame`]). Offsets
/// are into the buffer the scanner was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentRun {
    pub(crate) start: usize,
    pub(crate) end: usize,
    pub(crate) encoding: Option<crate::message::Encoding>,
    pub(crate) first: bool,
    pub(crate) last: bool,
}

impl ContentRun {
    /// Offset of the run's first byte.
    pub fn start(&self) -> usize {
        self.start
    }

    /// Offset one past the run's last byte.
    pub fn end(&self) -> usize {
        self.end
    }

    /// `start..end`.
    pub fn range(&self) -> Range<usize> {
        self.start..self.end
    }

    /// The `body.encoding` named before the content, which the text is
    /// written in; `None` when none was named before it (or it named none
    /// of the four): the message names it after the content, and the
    /// receiver learns it at the message's end (D19).
    pub fn encoding(&self) -> Option<crate::message::Encoding> {
        self.encoding
    }

    /// The run is the first of its string (the opening quote was just
    /// before it).
    pub fn is_first(&self) -> bool {
        self.first
    }

    /// The string's closing quote follows the run: the content is all
    /// there.
    pub fn is_last(&self) -> bool {
        self.last
    }
}

/// One complete message as the scanner saw it. Offsets are into the buffer
/// the scanner was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    start: usize,
    end: usize,
    max_depth: usize,
    lone_surrogate: Option<usize>,
}

impl Frame {
    /// Offset of the message's first byte (`{`), after any whitespace
    /// before it.
    pub fn start(&self) -> usize {
        self.start
    }

    /// Offset one past the message's last byte (`}`).
    pub fn end(&self) -> usize {
        self.end
    }

    /// `start..end`: the message's bytes.
    pub fn range(&self) -> Range<usize> {
        self.start..self.end
    }

    /// The deepest nesting of objects and arrays (the message object
    /// itself is 1), measured past any limit (D3).
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// Where the first lone surrogate escape is (the offset of its
    /// backslash), if the message holds one: a `\uD800`-`\uDFFF` escape
    /// that is not half of a pair, in a string or an unquoted key (D4:
    /// `400`; it is not a character, and parsers differ on what to make of
    /// it). It does not leave the message's end in doubt, so it does not
    /// stop the scan.
    pub fn lone_surrogate(&self) -> Option<usize> {
        self.lone_surrogate
    }
}

/// What leaves a message's end in doubt (D1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// A byte where a message must start that is neither whitespace nor
    /// `{` (a comment, an array, a BOM after the stream's start, …).
    NotAMessageStart,
    /// A closing bracket that does not match the open one.
    MismatchedBracket,
    /// A `/` that starts no comment.
    StraySlash,
    /// `*/` outside a comment.
    StrayCommentEnd,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fault::NotAMessageStart => "a byte where a message must start that is neither whitespace nor {",
            Fault::MismatchedBracket => "a closing bracket that does not match the open one",
            Fault::StraySlash => "a / that starts no comment",
            Fault::StrayCommentEnd => "*/ outside a comment",
        })
    }
}

/// Where a backslash stands: inside a string opened by a quote, or in an
/// unquoted JSON5 key (where only `\uXXXX` is an escape).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Within {
    Str(u8),
    Key,
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
    /// After a `*` outside strings and comments: `/` must not follow.
    Star,
    /// Inside a string opened by the quote.
    Str(u8),
    /// After a backslash.
    Escape(Within),
    /// Inside `\uXXXX`, after `digits` hex digits worth `value`.
    Hex { within: Within, digits: u8, value: u16 },
    /// After the high half of a surrogate pair: its low half's `\` must
    /// follow.
    LowBackslash(Within),
    /// After that `\`: `u` must follow.
    LowU(Within),
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
    /// Sticky: an error (`fault`) or the size limit (no fault; `at` is the
    /// message's start) was reported.
    Failed { at: usize, fault: Option<Fault> },
    /// Inside the text of `body.content`, reported in runs (D19).
    Content,
}

/// Bytes that matter inside a message outside strings and comments.
const STRUCTURAL: [bool; 256] = {
    let mut table = [false; 256];
    let special = b"{}[]\"'/*\\";
    let mut k = 0;
    while k < special.len() {
        table[special[k] as usize] = true;
        k += 1;
    }
    table
};

/// An incremental scanner for one message at a time.
///
/// Feed it the same growing buffer (every byte received since the last
/// complete message) until it answers something other than
/// [`Scan::Partial`]. After [`Scan::Complete`] it is ready for the next
/// message: hand it the bytes after [`Frame::end`]. Bytes before the
/// message's start may be dropped at any time with
/// [`drop_prefix`](Self::drop_prefix), so that whitespace between messages
/// is never kept.
#[derive(Debug, Clone)]
pub struct Scanner {
    /// The next byte to classify, as an offset into the caller's buffer.
    pos: usize,
    /// Where the current message's `{` is, once seen.
    start: Option<usize>,
    state: State,
    depth: u32,
    max_depth: u32,
    /// One bit per open level, 1 for `[`: closers must match (bounded by
    /// the message size, one bit per byte at most).
    brackets: SmallVec<[u64; 2]>,
    /// The backslash of the `\u` escape being read.
    escape_at: Mark,
    /// The backslash of a high surrogate escape whose low half is awaited.
    high_at: Option<Mark>,
    /// The first lone surrogate escape of this message (D4).
    lone_surrogate: Option<Mark>,
    /// A BOM may still be skipped (nothing scanned on this stream yet).
    at_stream_start: bool,
    max_message_bytes: u32,
    /// `body.content` is reported in runs (D19); `None`: it is not.
    content: Option<ContentTrack>,
    /// Levels past which [`Scan::TooDeep`] is reported (D3), and whether it
    /// was for this message.
    depth_limit: u32,
    deep_reported: bool,
}

/// An offset into the message being scanned, counted from its `{`. The
/// size limit bounds it (content runs, which do not count, leave the
/// caller's buffer), so 32 bits hold it: an idle connection stays small.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Mark(u32);

impl Mark {
    /// The mark of buffer offset `at` in a message starting at `base`.
    fn of(at: usize, base: usize) -> Mark {
        Mark(clamp_u32(at.saturating_sub(base)))
    }

    /// The buffer offset of the mark in a message starting at `base`.
    fn at(self, base: usize) -> usize {
        base + self.0 as usize
    }
}

/// `n`, or `u32::MAX` if it is larger.
fn clamp_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// What the scanner follows of a message to find its `body.content`
/// (D19): the last plain string at levels 1 and 2, whether the level-2
/// object is the message's `body`, and what its `encoding` said.
#[derive(Debug, Clone, Default)]
struct ContentTrack {
    /// The last double-quoted string without escapes that ended at level 1,
    /// or at level 2 inside `body`: its level and where its text starts and
    /// ends (the closing quote is at the end).
    last: Option<(u32, Mark, Mark)>,
    /// The level-2 object being scanned is the value of the message's
    /// `body`.
    in_body: bool,
    /// A `body` object was seen: a second one (a duplicate, `400`) is not
    /// followed.
    body_seen: bool,
    /// What `body.encoding` named, once it has.
    encoding: Option<crate::message::Encoding>,
    /// The content's text is being reported; `first` until the first run
    /// has gone out.
    first: bool,
    /// The content string of this message has been reported.
    done: bool,
    /// Where the string being scanned started, and whether it has had no
    /// escape so far.
    string_start: Mark,
    string_plain: bool,
}

impl Default for Scanner {
    fn default() -> Self {
        Scanner::new()
    }
}

impl Scanner {
    /// A scanner at the start of a connection (a BOM may follow, D1), with
    /// the largest size limit it keeps: 4 GiB less a byte.
    pub fn new() -> Scanner {
        Scanner::with_limit(usize::MAX)
    }

    /// A scanner at the start of a connection that answers
    /// [`Scan::TooLarge`] once a message passes `max_message_bytes` (D3).
    /// A limit past 4 GiB less a byte is taken as that: the scanner's
    /// offsets within a message are 32 bits wide.
    pub fn with_limit(max_message_bytes: usize) -> Scanner {
        Scanner {
            pos: 0,
            start: None,
            state: State::Between,
            depth: 0,
            max_depth: 0,
            brackets: SmallVec::new(),
            escape_at: Mark::default(),
            high_at: None,
            lone_surrogate: None,
            at_stream_start: true,
            max_message_bytes: clamp_u32(max_message_bytes),
            content: None,
            depth_limit: u32::MAX,
            deep_reported: false,
        }
    }

    /// Reports [`Scan::TooDeep`] as soon as a message opens a level past
    /// `levels` (the message object itself is level 1), before it ends
    /// (D3).
    pub fn with_depth_limit(mut self, levels: usize) -> Scanner {
        self.depth_limit = clamp_u32(levels);
        self
    }

    /// Whether part of a message has been seen (its `{` and maybe more).
    pub fn in_message(&self) -> bool {
        self.start.is_some()
    }

    /// Where the current message's `{` is in the buffer, once seen.
    pub(crate) fn message_start(&self) -> Option<usize> {
        self.start
    }

    /// Whether nothing of the next message has been scanned, so the caller
    /// may read it another way and say so with
    /// [`message_read_elsewhere`](Self::message_read_elsewhere).
    pub(crate) fn at_boundary(&self) -> bool {
        self.pos == 0 && matches!(self.state, State::Between)
    }

    /// The caller read a whole message from the front of its buffer
    /// without the scanner and removed it: the scan goes on with the next
    /// message, which is not the stream's first (no BOM is skipped).
    pub(crate) fn message_read_elsewhere(&mut self) {
        self.at_stream_start = false;
    }

    /// How many bytes at the front of the buffer hold no part of a message
    /// (whitespace, a BOM) and may be dropped.
    pub fn idle_prefix(&self) -> usize {
        match self.state {
            State::Failed { .. } => 0,
            _ => self.start.unwrap_or(self.pos),
        }
    }

    /// Tells the scanner that the caller removed `n` bytes from the front of
    /// its buffer; `n` is at most [`idle_prefix`](Self::idle_prefix) (more
    /// is clamped to it).
    pub fn drop_prefix(&mut self, n: usize) {
        let n = n.min(self.idle_prefix());
        if n == 0 {
            return;
        }
        self.pos -= n;
        // The message starts at or after the idle prefix; every other
        // offset is a mark counted from that start.
        if let Some(start) = &mut self.start {
            *start -= n;
        }
    }

    /// Where the message being scanned starts: what marks count from.
    fn base(&self) -> usize {
        self.start.unwrap_or(0)
    }

    /// The mark of `at`, a byte of the message being scanned.
    fn mark(&self, at: usize) -> Mark {
        Mark::of(at, self.base())
    }

    /// Scans `buf` (every byte received since the last complete message,
    /// less any dropped prefix), resuming where the last call stopped.
    pub fn scan(&mut self, buf: &[u8]) -> Scan {
        if let State::Failed { at, fault } = self.state {
            return failed(at, fault);
        }
        let found = self.run(buf);
        match found {
            Scan::Partial => {}
            Scan::Complete(_) => self.next_message(),
            Scan::Error { at, fault } => {
                self.state = State::Failed {
                    at,
                    fault: Some(fault),
                }
            }
            Scan::TooLarge { start } => {
                self.state = State::Failed {
                    at: start,
                    fault: None,
                }
            }
            Scan::Content(_) | Scan::TooDeep { .. } => {}
        }
        found
    }

    /// Reports the text of `body.content` as [`Scan::Content`] runs
    /// instead of counting it as part of the message (D19), when the
    /// string is a double-quoted value of the key `content`, written
    /// without escapes, in the object under the message's own key `body`,
    /// whether that object's `encoding` came before it or not (D19: any
    /// order; [`ContentRun::encoding`] says). Anything else (a key spelled
    /// with escapes, a single-quoted string) stays part of the message,
    /// bounded by the size limit as usual; at most one string per message
    /// is reported.
    pub fn with_content_runs(mut self) -> Scanner {
        self.content = Some(ContentTrack::default());
        self
    }

    /// Ready for the message after the one just completed.
    fn next_message(&mut self) {
        self.pos = 0;
        self.start = None;
        self.state = State::Between;
        self.depth = 0;
        self.max_depth = 0;
        self.brackets.clear();
        self.high_at = None;
        self.lone_surrogate = None;
        self.deep_reported = false;
        if let Some(track) = &mut self.content {
            *track = ContentTrack::default();
        }
    }

    /// The end of the bytes this message may still use before passing the
    /// limit, clamped to the buffer.
    fn scan_end(&self, buf: &[u8]) -> usize {
        match self.start {
            Some(start) => start
                .saturating_add(self.max_message_bytes as usize)
                .min(buf.len()),
            None => buf.len(),
        }
    }

    /// The whole state machine: one arm per state, each reading the byte at
    /// `self.pos` (or skipping to the next byte that matters) and moving on.
    /// An arm that leaves `pos` where it was hands the same byte to the next
    /// state.
    fn run(&mut self, buf: &[u8]) -> Scan {
        loop {
            if matches!(self.state, State::Content) {
                // Content does not count against the size limit (D19).
                return self.content_run(buf);
            }
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
                        _ => return fail(at, Fault::NotAMessageStart),
                    }
                }
                State::Bom1 | State::Bom2 => {
                    let wanted = if matches!(self.state, State::Bom1) {
                        0xBB
                    } else {
                        0xBF
                    };
                    if byte != wanted {
                        return fail(at, Fault::NotAMessageStart);
                    }
                    self.pos += 1;
                    self.state = if matches!(self.state, State::Bom1) {
                        State::Bom2
                    } else {
                        State::Between
                    };
                }
                State::Object => {
                    if let Some(found) = self.object(buf, at, end) {
                        return found;
                    }
                }
                State::Star => match byte {
                    b'/' => return fail(at - 1, Fault::StrayCommentEnd),
                    b'*' => self.pos += 1,
                    _ => self.state = State::Object,
                },
                State::Str(quote) => self.string_body(buf, quote, at, end),
                State::Escape(within) => {
                    if starts_hex_escape(byte) {
                        self.pos += 1;
                        self.state = State::Hex {
                            within,
                            digits: 0,
                            value: 0,
                        };
                    } else {
                        self.after_escape(within);
                    }
                }
                State::Hex {
                    within,
                    digits,
                    value,
                } => match hex_digit(byte) {
                    Some(digit) => {
                        self.pos += 1;
                        let value = value << 4 | digit;
                        if digits < 3 {
                            self.state = State::Hex {
                                within,
                                digits: digits + 1,
                                value,
                            };
                        } else {
                            self.code_unit(within, value);
                        }
                    }
                    // Not an escape the parsers take: they refuse it. The
                    // byte is read again as part of the string or key.
                    None => {
                        self.high_at = None;
                        self.state = within.state();
                    }
                },
                State::LowBackslash(within) => {
                    if byte == b'\\' {
                        self.pos += 1;
                        self.escape_at = self.mark(at);
                        self.state = State::LowU(within);
                    } else {
                        self.lone_high();
                        self.state = within.state();
                    }
                }
                State::LowU(within) => {
                    if starts_hex_escape(byte) {
                        self.pos += 1;
                        self.state = State::Hex {
                            within,
                            digits: 0,
                            value: 0,
                        };
                    } else {
                        self.lone_high();
                        self.after_escape(within);
                    }
                }
                State::Slash => {
                    self.state = match byte {
                        b'/' => State::LineComment,
                        b'*' => State::BlockComment,
                        _ => return fail(at - 1, Fault::StraySlash),
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
                State::Failed { at, fault } => return failed(at, fault),
                State::Content => {}
            }
        }
    }

    /// Inside the message, outside strings and comments, from `buf[i]`:
    /// brackets and whole strings are passed over without leaving this
    /// loop (the common case, and the fast one); anything else (an escape,
    /// a comment, a string the buffer cuts) is handed to the state machine
    /// with `pos` and `state` set. Returns the scan's answer when the
    /// message ends or cannot be framed.
    #[inline]
    fn object(&mut self, buf: &[u8], mut i: usize, end: usize) -> Option<Scan> {
        loop {
            let Some(offset) = buf[i..end].iter().position(|&b| STRUCTURAL[b as usize]) else {
                self.pos = end;
                return None;
            };
            let at = i + offset;
            i = at + 1;
            match buf[at] {
                opener @ (b'{' | b'[') => {
                    if self.depth == 1 && opener == b'{' {
                        self.body_opens(buf, at);
                    }
                    self.open(opener == b'[');
                    if self.depth > self.depth_limit && !self.deep_reported {
                        self.deep_reported = true;
                        self.pos = i;
                        return Some(Scan::TooDeep { at });
                    }
                }
                closer @ (b'}' | b']') => {
                    if !self.close(closer == b']') {
                        return Some(fail(at, Fault::MismatchedBracket));
                    }
                    if self.depth == 1
                        && let Some(track) = &mut self.content
                    {
                        track.in_body = false;
                    }
                    if self.depth == 0 {
                        return Some(Scan::Complete(Frame {
                            start: self.start.unwrap_or(0),
                            end: i,
                            max_depth: self.max_depth as usize,
                            lone_surrogate: self.lone_surrogate.map(|mark| mark.at(self.base())),
                        }));
                    }
                }
                quote @ (b'"' | b'\'') => {
                    if quote == b'"' && self.content_starts(buf, at) {
                        self.pos = i;
                        self.state = State::Content;
                        return Some(self.content_run(buf));
                    }
                    match find_string_end(quote, &buf[i..end]) {
                        Some(offset) if buf[i + offset] == quote => {
                            self.string_ended(buf, quote, Some(i), i + offset);
                            i += offset + 1;
                        }
                        Some(offset) => {
                            self.escape_at = self.mark(i + offset);
                            self.pos = i + offset + 1;
                            self.state = State::Escape(Within::Str(quote));
                            self.string_begins(i, false);
                            return None;
                        }
                        None => {
                            self.pos = end;
                            self.state = State::Str(quote);
                            self.string_begins(i, true);
                            return None;
                        }
                    }
                }
                other => {
                    self.pos = i;
                    self.state = match other {
                        b'/' => State::Slash,
                        b'*' => State::Star,
                        // `\` outside a string: a JSON5 key's `\uXXXX`.
                        _ => {
                            self.escape_at = self.mark(at);
                            State::Escape(Within::Key)
                        }
                    };
                    return None;
                }
            }
        }
    }

    // -- body.content (D19) ------------------------------------------------

    /// Whether `body.content` is followed at the current level.
    fn tracks(&self) -> Option<&ContentTrack> {
        self.content
            .as_ref()
            .filter(|track| !track.done && (self.depth == 1 || (self.depth == 2 && track.in_body)))
    }

    /// A string was cut by the buffer (or has an escape, `plain` false):
    /// where it began, so that its end can be judged.
    fn string_begins(&mut self, start: usize, plain: bool) {
        let start = self.mark(start);
        if let Some(track) = &mut self.content {
            track.string_start = start;
            track.string_plain = plain;
        }
    }

    /// A string whose text began at `start` (`None`: where
    /// [`string_begins`](Self::string_begins) said, if it stayed plain)
    /// ended at `end`: it may be a key, or `body.encoding`'s value.
    fn string_ended(&mut self, buf: &[u8], quote: u8, start: Option<usize>, end: usize) {
        if self.tracks().is_none() {
            return;
        }
        let (depth, base) = (self.depth, self.base());
        let Some(track) = &mut self.content else {
            return;
        };
        let start = match start {
            Some(start) => Some(start),
            None => track.string_plain.then_some(track.string_start.at(base)),
        };
        let Some(start) = start.filter(|_| quote == b'"') else {
            track.last = None;
            return;
        };
        if depth == 2
            && let Some((2, key_start, key_end)) = track.last
            && &buf[key_start.at(base)..key_end.at(base)] == b"encoding"
            && is_key_gap(&buf[key_end.at(base) + 1..start - 1])
        {
            track.encoding = std::str::from_utf8(&buf[start..end])
                .ok()
                .and_then(|name| name.parse().ok());
        }
        track.last = Some((depth, Mark::of(start, base), Mark::of(end, base)));
    }

    /// A `{` at level 1: is it the value of the message's `body`?
    fn body_opens(&mut self, buf: &[u8], at: usize) {
        if self.tracks().is_none() {
            return;
        }
        let base = self.base();
        let Some(track) = &mut self.content else {
            return;
        };
        if !track.body_seen
            && let Some((1, start, end)) = track.last
            && &buf[start.at(base)..end.at(base)] == b"body"
            && is_key_gap(&buf[end.at(base) + 1..at])
        {
            track.in_body = true;
            track.body_seen = true;
            track.encoding = None;
        }
        track.last = None;
    }

    /// A `"` at `at`: does the text of `body.content` start after it?
    fn content_starts(&mut self, buf: &[u8], at: usize) -> bool {
        if self.depth != 2 || self.tracks().is_none() {
            return false;
        }
        let base = self.base();
        let Some(track) = &mut self.content else {
            return false;
        };
        let starts = matches!(track.last, Some((2, start, end))
                if &buf[start.at(base)..end.at(base)] == b"content"
                    && is_key_gap(&buf[end.at(base) + 1..at]));
        if starts {
            track.first = true;
            track.last = None;
        }
        starts
    }

    /// Reports the content text from `pos` to the closing quote or as far
    /// as the buffer goes (never ending a run just after a backslash,
    /// whose escape the next bytes complete).
    #[inline(never)]
    fn content_run(&mut self, buf: &[u8]) -> Scan {
        let start = self.pos;
        let (i, last) = match words::wide(
            #[inline(always)]
            |lanes| string_end(&buf[start..], b'"', Stops::Closing, lanes),
        ) {
            Ok(quote) => (start + quote, true),
            // An escape the next bytes complete is kept for then.
            Err(odd) => (buf.len() - usize::from(odd), false),
        };
        let Some(track) = &mut self.content else {
            return Scan::Partial;
        };
        let first = std::mem::take(&mut track.first);
        if !first && !last && i == start {
            return Scan::Partial;
        }
        let encoding = track.encoding;
        if last {
            // The caller removes the run: the closing quote is then at
            // `start`, read as the end of an ordinary string.
            track.done = true;
            track.string_plain = false;
            self.state = State::Str(b'"');
        }
        Scan::Content(ContentRun {
            start,
            end: i,
            encoding,
            first,
            last,
        })
    }

    /// Reads a string's text from `at` to its closing quote, or to `end`.
    /// An escape whose second byte is already here and does not start
    /// `\u` is stepped over in place, and the rest of the string, once 64
    /// bytes or more are buffered after it, is read a block at a time
    /// ([`string_blocks`](Self::string_blocks)): text with many escapes
    /// (lines of a file, each ending in `\n`) costs neither a turn of the
    /// state machine nor a search per escape.
    fn string_body(&mut self, buf: &[u8], quote: u8, at: usize, end: usize) {
        let mut from = at;
        loop {
            let Some(offset) = find_string_end(quote, &buf[from..end]) else {
                self.pos = end;
                return;
            };
            let hit = from + offset;
            self.pos = hit + 1;
            if buf[hit] == quote {
                self.state = State::Object;
                self.string_ended(buf, quote, None, hit);
                return;
            }
            if let Some(track) = &mut self.content {
                track.string_plain = false;
            }
            self.escape_at = self.mark(hit);
            match buf[..end].get(hit + 1) {
                Some(&next) if !starts_hex_escape(next) => from = hit + 2,
                _ => {
                    self.state = State::Escape(Within::Str(quote));
                    return;
                }
            }
            if end - from >= 64 {
                return self.string_blocks(buf, quote, from, end);
            }
        }
    }

    /// The rest of a string that has escapes, from `from` (between
    /// escapes), a block at a time: to its closing quote, to the next `\u`
    /// escape, which the state machine reads, or to `end`. A search from
    /// one escape to the next would cost a call per line of a text file.
    #[inline(never)]
    fn string_blocks(&mut self, buf: &[u8], quote: u8, from: usize, end: usize) {
        let found = words::wide(
            #[inline(always)]
            |lanes| string_end(&buf[from..end], quote, Stops::Unicode, lanes),
        );
        match found {
            Ok(offset) if buf[from + offset] == quote => {
                let hit = from + offset;
                self.pos = hit + 1;
                self.state = State::Object;
                self.string_ended(buf, quote, None, hit);
            }
            Ok(offset) => {
                // The `u` of a `\u` escape; its backslash is the byte before.
                let u = from + offset;
                self.escape_at = self.mark(u - 1);
                self.pos = u + 1;
                self.state = State::Hex {
                    within: Within::Str(quote),
                    digits: 0,
                    value: 0,
                };
            }
            Err(odd) => {
                self.pos = end;
                if odd {
                    self.escape_at = self.mark(end - 1);
                    self.state = State::Escape(Within::Str(quote));
                }
            }
        }
    }

    /// A backslash followed by anything but `u`. In a string any byte is
    /// escaped (`\"`, `\\`, the first byte of a line continuation): it is
    /// taken as is. In a key only `\u` is an escape, which the parsers
    /// refuse: the byte is read again as part of the key.
    fn after_escape(&mut self, within: Within) {
        if let Within::Str(_) = within {
            self.pos += 1;
        }
        self.state = within.state();
    }

    /// The four hex digits of a `\u` escape are read: checks the surrogate
    /// halves (D4).
    fn code_unit(&mut self, within: Within, value: u16) {
        let awaited_low = self.high_at.take();
        let is_low = (0xDC00..=0xDFFF).contains(&value);
        if let Some(high) = awaited_low {
            if is_low {
                self.state = within.state();
                return;
            }
            self.lone(high);
        }
        if is_low {
            self.lone(self.escape_at);
            self.state = within.state();
        } else if (0xD800..=0xDBFF).contains(&value) {
            self.high_at = Some(self.escape_at);
            self.state = State::LowBackslash(within);
        } else {
            self.state = within.state();
        }
    }

    /// The awaited low half did not come.
    fn lone_high(&mut self) {
        if let Some(high) = self.high_at.take() {
            self.lone(high);
        }
    }

    fn lone(&mut self, at: Mark) {
        self.lone_surrogate.get_or_insert(at);
    }

    /// Enters one level; `array` for `[`.
    fn open(&mut self, array: bool) {
        let level = self.depth as usize;
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
        let (word, bit) = (level as usize / 64, level % 64);
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

impl Within {
    /// The state a finished escape returns to.
    fn state(self) -> State {
        match self {
            Within::Str(quote) => State::Str(quote),
            Within::Key => State::Object,
        }
    }
}

/// Whether the bytes between a key's closing quote and its value are
/// whitespace around one `:`.
fn is_key_gap(bytes: &[u8]) -> bool {
    let mut colons = 0;
    for &b in bytes {
        match b {
            b':' => colons += 1,
            b' ' | b'\t' | b'\r' | b'\n' => {}
            _ => return false,
        }
    }
    colons == 1
}

fn fail(at: usize, fault: Fault) -> Scan {
    Scan::Error { at, fault }
}

/// The sticky answer of [`State::Failed`].
fn failed(at: usize, fault: Option<Fault>) -> Scan {
    match fault {
        Some(fault) => Scan::Error { at, fault },
        None => Scan::TooLarge { start: at },
    }
}

/// Whether the byte after a backslash starts a `\u` escape, whose four hex
/// digits are read and checked (D4); any other byte is the whole escape.
fn starts_hex_escape(byte: u8) -> bool {
    byte == b'u'
}

fn hex_digit(byte: u8) -> Option<u16> {
    (byte as char).to_digit(16).map(|d| d as u16)
}

/// Where the quote that closes a string is in `text` (the bytes after its
/// opening `quote`), if the string ends there: a block at a time, as the
/// scanner finds the end of content (see [`string_end`]).
pub(crate) fn closing_quote(text: &[u8], quote: u8) -> Option<usize> {
    words::wide(
        #[inline(always)]
        |lanes| string_end(text, quote, Stops::Closing, lanes),
    )
    .ok()
}

/// What a search through a string's text stops at besides its closing
/// quote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stops {
    /// Nothing else: the search finds where the text ends.
    Closing,
    /// Also the `u` of each `\u` escape, whose code unit the scanner reads
    /// to find lone surrogates (D4).
    Unicode,
}

/// Where the quote that closes a string is in `text`, text that starts
/// between escapes (or, with [`Stops::Unicode`], the `u` of a `\u` escape
/// before it); or, when neither is there, whether `text` ends inside an
/// escape (after an odd run of backslashes).
///
/// A quote closes the string unless a backslash escapes it: unless the
/// backslashes right before it are odd in number (each pair an escaped
/// backslash). Quotes and backslashes are flagged a block of sixty-four
/// bytes at a time, and the escaped bytes of a block that has quotes
/// worked out from the flags at once: content has an escaped quote every
/// few lines, and none of them stops the search or costs a branch. The
/// next block needs only the length of the run of backslashes at the
/// block's end.
#[inline(always)]
fn string_end(text: &[u8], quote: u8, stops: Stops, lanes: Lanes) -> Result<usize, bool> {
    let (blocks, rest) = text.as_chunks::<64>();
    // Whether the backslashes that run up to the block's start are odd.
    let mut odd = false;
    let (steps, left) = blocks.as_chunks::<QUOTE_FREE_STEP>();
    for (n, step) in steps.iter().enumerate() {
        // Loops, not closures over arrays: those are not always inlined
        // into the vector code, and each mask then costs a call.
        let (mut backslashes, mut candidates) = ([0; QUOTE_FREE_STEP], [0; QUOTE_FREE_STEP]);
        for (k, block) in step.iter().enumerate() {
            backslashes[k] = words::flags64(block, [b'\\'], lanes);
            candidates[k] = words::flags64(block, [quote], lanes);
            if stops == Stops::Unicode {
                // A `u` the block's first byte could be is counted too.
                candidates[k] |= words::flags64(block, [b'u'], lanes) & (backslashes[k] << 1 | 1);
            }
        }
        // Most blocks of text have no quote (and no backslash before a
        // `u`): then which of their bytes are escaped does not matter, only
        // the parity of the backslashes the step ends with.
        if candidates == [0; QUOTE_FREE_STEP] {
            for found in backslashes {
                odd = words::odd_at_end(found, odd);
            }
            continue;
        }
        for (k, block) in step.iter().enumerate() {
            match stop_in_block(block, backslashes[k], quote, stops, odd, lanes) {
                Ok(at) => return Ok(64 * (QUOTE_FREE_STEP * n + k) + at),
                Err(ends_odd) => odd = ends_odd,
            }
        }
    }
    for (k, block) in left.iter().enumerate() {
        let backslashes = words::flags64(block, [b'\\'], lanes);
        match stop_in_block(block, backslashes, quote, stops, odd, lanes) {
            Ok(at) => return Ok(64 * (QUOTE_FREE_STEP * steps.len() + k) + at),
            Err(ends_odd) => odd = ends_odd,
        }
    }
    // Zeros are neither quotes, backslashes nor `u`.
    let mut last = [0u8; 64];
    last[..rest.len()].copy_from_slice(rest);
    let backslashes = words::flags64(&last, [b'\\'], lanes);
    if let Ok(at) = stop_in_block(&last, backslashes, quote, stops, odd, lanes) {
        return Ok(64 * blocks.len() + at);
    }
    // The byte after the text, were there one, would be escaped.
    let (_, escaped) = words::escapes(backslashes, odd);
    Err(escaped >> rest.len() & 1 == 1)
}

/// Blocks [`string_end`] takes a step while none of them holds a quote:
/// one test of their quotes and one branch for both. Over text, two a step
/// measured a fifth faster than one; four were slower than one.
const QUOTE_FREE_STEP: usize = 2;

/// [`string_end`] in one block whose `backslashes` are flagged: where its
/// first stop is, or else whether the backslashes it ends with are odd;
/// `odd`: whether those it starts after are.
#[inline(always)]
fn stop_in_block(
    block: &[u8; 64],
    backslashes: u64,
    quote: u8,
    stops: Stops,
    odd: bool,
    lanes: Lanes,
) -> Result<usize, bool> {
    let escaped = words::escapes(backslashes, odd).1;
    let mut found = words::flags64(block, [quote], lanes) & !escaped;
    if stops == Stops::Unicode {
        found |= words::flags64(block, [b'u'], lanes) & escaped;
    }
    if found != 0 {
        return Ok(found.trailing_zeros() as usize);
    }
    Err(words::odd_at_end(backslashes, odd))
}

/// The first quote or backslash in a string body: in a key or a header
/// value within a few words, in content at the next escape.
#[inline]
fn find_string_end(quote: u8, bytes: &[u8]) -> Option<usize> {
    words::find(
        bytes,
        |word| words::equal(word, quote) | words::equal(word, b'\\'),
        |rest| memchr2(quote, b'\\', rest),
    )
}

/// Scans a whole buffer at once, httparse-style: where the first message in
/// `buf` ends, if it does.
pub fn scan(buf: &[u8]) -> Scan {
    Scanner::new().scan(buf)
}

/// How many bytes at the front of `bytes` are the whitespace JSON allows
/// between and around messages (space, tab, CR, LF; D1).
pub(crate) fn leading_whitespace(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .count()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

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
        Scan::Complete(Frame {
            start,
            end,
            max_depth,
            lone_surrogate: None,
        })
    }

    #[track_caller]
    fn check(input: &str, expected: Scan) {
        assert_eq!(scan(input.as_bytes()), expected, "whole: {input:?}");
        assert_eq!(bytewise(input.as_bytes()), expected, "bytewise: {input:?}");
    }

    #[test]
    fn d1_finds_the_end_of_simple_objects() {
        check("{}", complete(0, 2, 1));
        check("  \r\n\t{}\n{}", complete(5, 7, 1));
        check(r#"{"a":{"b":[1,{"c":[]}]}}"#, complete(0, 24, 5));
        check("{", Scan::Partial);
        check("", Scan::Partial);
        check("   ", Scan::Partial);
    }

    #[test]
    fn d1_braces_inside_strings_do_not_count() {
        check(r#"{"a":"}"}"#, complete(0, 9, 1));
        check(r#"{'a':'}"'}"#, complete(0, 10, 1));
        check(r#"{"a":"\"}"}"#, complete(0, 11, 1));
        check(r#"{"a":"\\"}"#, complete(0, 10, 1));
        check(r#"{"a":'\'}'}"#, complete(0, 11, 1));
        // A line continuation (D4, JSON5): `\` CR LF stays in the string.
        check("{'a':'x\\\r\n}'}", complete(0, 13, 1));
        // `*` and `/` inside strings are text.
        check(r#"{"a":"*/ /x"}"#, complete(0, 13, 1));
    }

    #[test]
    fn d1_comments_are_skipped_as_json5_does() {
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
        // A `*` outside a comment that no `/` follows is the parser's to
        // refuse; it leaves no doubt about the end.
        check("{\"a\":1 * }", complete(0, 10, 1));
    }

    #[test]
    fn d1_bad_bytes_where_a_message_starts_are_errors() {
        let at = |at| fail(at, Fault::NotAMessageStart);
        check("hello {}", at(0));
        check("  x", at(2));
        // D5 level 1: an array is not an object.
        check("[1,2]", at(0));
        // A comment between messages is not whitespace (D1).
        check("// hi\n{}", at(0));
        check("\u{0B}{}", at(0));
    }

    #[test]
    fn d1_a_closing_bracket_that_does_not_match_is_an_error() {
        check("{]", fail(1, Fault::MismatchedBracket));
        check("{[}", fail(2, Fault::MismatchedBracket));
        check("{\"a\":[{]}", fail(7, Fault::MismatchedBracket));
    }

    #[test]
    fn d1_a_slash_that_starts_no_comment_is_an_error() {
        check("{\"a\":1/}", fail(6, Fault::StraySlash));
        check("{\"a\":1 / 2}", fail(7, Fault::StraySlash));
        check("{/", Scan::Partial);
    }

    #[test]
    fn d1_a_comment_end_outside_a_comment_is_an_error() {
        check("{\"a\":1 */}", fail(7, Fault::StrayCommentEnd));
        check("{\"a\":1 **/}", fail(8, Fault::StrayCommentEnd));
        // `*//`: not the start of a line comment, `*/` comes first.
        check("{\"a\":1*//x\n}", fail(6, Fault::StrayCommentEnd));
        check("{/* a */ */}", fail(9, Fault::StrayCommentEnd));
        check("{*", Scan::Partial);
    }

    #[test]
    fn bom_only_at_the_very_start() {
        check("\u{FEFF}{}", complete(3, 5, 1));
        check("\u{FEFF}  {}", complete(5, 7, 1));
        check(" \u{FEFF}{}", fail(1, Fault::NotAMessageStart));
        let mut scanner = Scanner::new();
        assert_eq!(scanner.scan(b"{}"), complete(0, 2, 1));
        assert_eq!(
            scanner.scan("\u{FEFF}{}".as_bytes()),
            fail(0, Fault::NotAMessageStart)
        );
        assert_eq!(scan(b"\xEF\xBB{}"), fail(2, Fault::NotAMessageStart));
        assert_eq!(scan(b"\xEF\xBB"), Scan::Partial);
    }

    #[test]
    fn d3_depth_is_measured_past_any_limit() {
        let deep = format!("{}{}", "{\"a\":[".repeat(100), "]}".repeat(100));
        check(&deep, complete(0, deep.len(), 200));
        // Brackets in strings and comments do not count; after a comment
        // ended by U+2028 they do.
        check(
            "{\"a\":\"[[\", 'b':'{{\\'[[', \"c\\\"[[\":1 // [[\n /* [[ */ }",
            complete(0, 52, 1),
        );
        check("{ // x\u{2028}[] }", complete(0, 13, 2));
    }

    fn lone(input: &str) -> Option<usize> {
        let whole = match scan(input.as_bytes()) {
            Scan::Complete(frame) => frame.lone_surrogate(),
            other => panic!("{input:?}: {other:?}"),
        };
        let Scan::Complete(frame) = bytewise(input.as_bytes()) else {
            panic!("{input:?} bytewise");
        };
        assert_eq!(frame.lone_surrogate(), whole, "bytewise: {input:?}");
        whole
    }

    #[test]
    fn d4_lone_surrogates_are_found_in_strings_and_keys() {
        assert_eq!(lone(r#"{"a":"\ud800"}"#), Some(6));
        assert_eq!(lone(r#"{"a":"\uDC00"}"#), Some(6));
        assert_eq!(lone(r#"{"a":"\ud800\u0041"}"#), Some(6));
        assert_eq!(lone(r#"{"a":"\ud800x"}"#), Some(6));
        assert_eq!(lone(r#"{"a":"\ud800\n"}"#), Some(6));
        assert_eq!(lone(r#"{"a":"\ud800\ud800\udc00"}"#), Some(6));
        assert_eq!(lone(r#"{"a":"ok\ud83d\ude00","b":"\udfff"}"#), Some(27));
        assert_eq!(lone(r#"{'a':'x\ud800'}"#), Some(7));
        assert_eq!(lone(r#"{"\udc00":1}"#), Some(2));
        assert_eq!(lone(r#"{\ud800a:1}"#), Some(1));
        // Past the short loop of the string search.
        let pad = "x".repeat(40);
        assert_eq!(lone(&format!(r#"{{"a":"{pad}\ud800"}}"#)), Some(46));
        // Pairs, escaped backslashes and other escapes are not.
        assert_eq!(lone(r#"{"a":"\ud83d\ude00"}"#), None);
        assert_eq!(lone(r#"{"a":"\\ud800"}"#), None);
        assert_eq!(lone(r#"{"a":"\u00e9\u12"}"#), None);
        assert_eq!(lone(r#"{"a":"\ud83d\u12"}"#), None);
        // The string still ends where it ends.
        assert_eq!(lone(r#"{"a":"\ud800"}"#), Some(6));
        check(r#"{"a":"\u12"}"#, complete(0, 12, 1));
        let frame = Frame {
            start: 0,
            end: 17,
            max_depth: 1,
            lone_surrogate: Some(6),
        };
        check(r#"{"a":"\ud800\"}"}"#, Scan::Complete(frame));
    }

    #[test]
    fn string_ends_are_found_at_every_offset_and_length() {
        for len in 0..80 {
            for hit in 0..=len {
                for (byte, quote) in [(b'"', b'"'), (b'\\', b'"'), (b'\'', b'\''), (b'\\', b'\'')] {
                    let mut text = vec![b'a'; len];
                    // Bytes that are near the ones searched for, and the
                    // other quote, must not be taken for them.
                    for (i, b) in text.iter_mut().enumerate() {
                        *b = [b'a', b'#', b'[', b'\'' ^ b'"' ^ quote, 0x80 | b'"', 0xDC][i % 6];
                    }
                    let expected = (hit < len).then_some(hit);
                    if let Some(hit) = expected {
                        text[hit] = byte;
                    }
                    assert_eq!(find_string_end(quote, &text), expected, "{len} {hit} {byte}");
                }
            }
        }
    }

    #[test]
    fn d3_the_size_limit_is_reported_at_the_first_byte_past_it() {
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
        assert_eq!(scanner.scan(b" {\"a\":\"\\ud800"), Scan::Partial);
        assert_eq!(scanner.idle_prefix(), 1);
        scanner.drop_prefix(1);
        // Offsets inside the message moved with the buffer.
        let Scan::Complete(frame) = scanner.scan(b"{\"a\":\"\\ud800\"}") else {
            panic!("complete");
        };
        assert_eq!((frame.range(), frame.lone_surrogate()), (0..14, Some(6)));
        // The next message is scanned from the buffer's start again.
        assert_eq!(scanner.scan(b"{}"), complete(0, 2, 1));
    }

    #[test]
    fn the_body_s_keys_are_found_after_whitespace_before_them_is_dropped() {
        let mut scanner = Scanner::new().with_content_runs();
        let message = b"{\"body\":{\"encoding\":\"br\",\"content\":\"abc\"}}";
        let mut buffer = b"  \n".to_vec();
        buffer.extend_from_slice(&message[..12]);
        assert_eq!(scanner.scan(&buffer), Scan::Partial);
        assert_eq!(scanner.idle_prefix(), 3);
        scanner.drop_prefix(3);
        let Scan::Content(run) = scanner.scan(message) else {
            panic!("a content run");
        };
        assert_eq!(
            (&message[run.range()], run.encoding()),
            (&b"abc"[..], Some(crate::message::Encoding::Br))
        );
    }

    /// Where a byte loop finds the closing quote of `text`: `Err` and
    /// whether the text ends inside an escape when it has none.
    fn closing_quote_bytewise(text: &[u8]) -> Result<usize, bool> {
        string_end_bytewise(text, Stops::Closing)
    }

    /// [`string_end`] as a byte loop.
    fn string_end_bytewise(text: &[u8], stops: Stops) -> Result<usize, bool> {
        let mut at = 0;
        while at < text.len() {
            match text[at] {
                b'"' => return Ok(at),
                b'\\' if at + 1 == text.len() => return Err(true),
                b'\\' if stops == Stops::Unicode && text[at + 1] == b'u' => return Ok(at + 1),
                b'\\' => at += 2,
                _ => at += 1,
            }
        }
        Err(false)
    }

    /// Text of quotes after runs of backslashes of every length, so that
    /// runs and quotes fall on every offset of a block and across blocks.
    fn escape_heavy_text() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            (
                0usize..70,
                // Runs a block long or longer, now and then.
                prop_oneof![8 => 0usize..7, 1 => 60usize..140],
                prop_oneof![Just(b'"'), Just(b'a'), Just(b'\\'), Just(b'u')],
            ),
            0..12,
        )
        .prop_map(|parts| {
            let mut text = Vec::new();
            for (plain, backslashes, then) in parts {
                text.extend((0..plain).map(|i| [b'a', b'#', b'\'', b'\n', 0xE2, b'u'][i % 6]));
                text.extend(std::iter::repeat_n(b'\\', backslashes));
                text.push(then);
            }
            text
        })
    }

    proptest! {
        /// The quote found from the blocks' flags is the one a byte loop
        /// finds, from every start between escapes.
        #[test]
        fn the_closing_quote_is_the_one_a_byte_loop_finds(text in escape_heavy_text()) {
            let mut from = 0;
            while from <= text.len() {
                for stops in [Stops::Closing, Stops::Unicode] {
                    let expected = string_end_bytewise(&text[from..], stops);
                    prop_assert_eq!(
                        string_end(&text[from..], b'"', stops, words::NARROW),
                        expected,
                        "from {} {:?}",
                        from,
                        stops
                    );
                    prop_assert_eq!(
                        words::wide(|lanes| string_end(&text[from..], b'"', stops, lanes)),
                        expected,
                        "from {} {:?} (the widest vectors here)",
                        from,
                        stops
                    );
                }
                // The next start between escapes.
                from += if text.get(from) == Some(&b'\\') { 2 } else { 1 };
            }
        }

        /// A long string with escapes, read a block at a time when it
        /// comes whole, frames as it does a byte at a time and in any
        /// pieces: the same end, the same first lone surrogate (D4).
        #[test]
        fn long_strings_frame_the_same_whole_and_in_pieces(
            pieces in proptest::collection::vec(prop::sample::select(vec![
                "a", "u", "'", "\"", "é", "\\\\", "\\\"", "\\'", "\\n", "\\u0041", "\\uD83D", "\\uDE00",
                "\\uD83D\\uDE00", "\\\\u", "\\u12", "\\\\\\u00e9", "the quick brown fox jumps over the dog",
            ]), 0..40),
            single in any::<bool>(),
        ) {
            let quote = if single { '\'' } else { '"' };
            // The string's own quote is escaped, or it would end it early.
            let text: String = pieces
                .iter()
                .map(|piece| if piece.starts_with(quote) { format!("\\{quote}") } else { piece.to_string() })
                .collect();
            let message = format!("{{\"a\":{quote}x\\n{text}{quote},\"b\":[1]}}");
            let bytes = message.as_bytes();
            let whole = scan(bytes);
            prop_assert_eq!(bytewise(bytes), whole, "{}", message);
            for cut in 0..bytes.len() {
                let mut scanner = Scanner::new();
                let first = scanner.scan(&bytes[..cut]);
                let found = if first == Scan::Partial { scanner.scan(bytes) } else { first };
                prop_assert_eq!(found, whole, "cut at {} of {}", cut, message);
            }
            prop_assert!(matches!(whole, Scan::Complete(frame) if frame.end() == bytes.len()), "{:?}", whole);
        }

        /// Content text received in any pieces comes out in runs that are
        /// the whole text, each ending between escapes, the last at the
        /// closing quote.
        #[test]
        fn content_runs_in_any_pieces_are_the_text(
            text in escape_heavy_text(),
            cuts in proptest::collection::vec(0usize..900, 0..6),
        ) {
            // Text before its closing quote: the strategy's ends an escape
            // or closes it early.
            let content = match closing_quote_bytewise(&text) {
                Ok(quote) => &text[..quote],
                Err(odd) => &text[..text.len() - usize::from(odd)],
            };
            let mut message = b"{\"body\":{\"content\":\"".to_vec();
            message.extend_from_slice(content);
            message.extend_from_slice(b"\"}}");
            let mut ends: Vec<usize> = cuts.iter().map(|&cut| cut.min(message.len())).collect();
            ends.push(message.len());
            ends.sort_unstable();
            let mut scanner = Scanner::new().with_content_runs();
            let (mut buffer, mut fed, mut runs) = (Vec::new(), 0, Vec::new());
            let mut complete = false;
            for end in ends {
                buffer.extend_from_slice(&message[fed..end]);
                fed = end;
                loop {
                    match scanner.scan(&buffer) {
                        Scan::Content(run) => {
                            let piece = &buffer[run.range()];
                            prop_assert!(closing_quote_bytewise(piece) == Err(false), "{:?}", piece);
                            runs.extend_from_slice(piece);
                            buffer.drain(run.range());
                        }
                        Scan::Complete(_) => {
                            complete = true;
                            break;
                        }
                        Scan::Partial => break,
                        other => prop_assert!(false, "{:?}", other),
                    }
                }
            }
            prop_assert!(complete);
            prop_assert_eq!(runs, content);
        }
    }
}
