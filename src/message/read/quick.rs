//! A one-pass reader for the messages nearly every peer sends: strict JSON
//! without escapes, the known top-level fields once each, `headers` whose
//! values are strings, booleans or arrays of strings, a `body` of
//! `content` and `encoding`, a `status` of a code and two messages.
//!
//! The general path reads a message twice: the lexer (`framing.rs`) finds
//! where it ends, then a parser fills the [`Envelope`]. This reader does
//! both in the same pass over the bytes, straight into the same
//! [`Envelope`], and the judging that follows (`parse.rs`) is the same.
//!
//! It is the crate's one shortcut, and not a judge. It gives up
//! (`None`) on anything else, and on anything the general path refuses
//! before it judges the envelope (D5 level 1: a duplicate key, a message
//! past the size limit, bytes that are not UTF-8); the caller then reads
//! the message from its first byte the general way, which says precisely
//! what is wrong. So whenever it reads a message, it fills the envelope the
//! general path would have filled, and every answer is the same.

use std::borrow::Cow;

use crate::message::MessageLimits;
use crate::message::headers::HEADER_NAMES;
use crate::message::json_text::next_to_escape;
use crate::message::read::envelope::{Envelope, RawBody, RawHeaders, RawStatus, listed_header};
use crate::message::read::syntax::{Items, Loose, Number};
use crate::message::words;

/// How deep the messages this reader takes nest: the message, `headers`,
/// an array in it.
pub(crate) const DEPTH: usize = 3;

/// The top-level fields, in the order requests are written.
const FIELDS: [&str; 7] = [
    "jsontp", "type", "resource", "method", "headers", "body", "status",
];

/// After each of [`FIELDS`], the one that usually follows it in a request
/// or a response (which puts `status` after `type`).
const FOLLOWS: [usize; 7] = [1, 2, 3, 4, 5, 7, 2];

/// The fields of `body`: senders put `content` last, so that it can
/// stream (D19).
const BODY_FIELDS: [&str; 2] = ["encoding", "content"];

/// How much of the input is checked for UTF-8 at first, when no line
/// break says where the message likely ends. A longer message is read
/// again with twice as much, so no message costs more than about twice its
/// own length.
const FIRST_WINDOW: usize = 1024;

/// The least first window: a pretty-printed message's first line is short.
const LEAST_WINDOW: usize = 64;

/// How far the first line break is looked for.
const LINE_SEARCH: usize = 4096;

/// Above this much buffered the first line break is looked for: below it
/// checking all of it costs less than the search.
const LINE_AFTER: usize = 256;

/// Reads the message at `start` of `bytes` (after the whitespace before
/// it) into `env`, a fresh envelope: the offset one past its closing `}`,
/// or `None`
/// to leave it to the general path (which also refuses it if `bytes`
/// holds only part of it).
///
/// `streams_content`: content is handed out in pieces as it arrives
/// (D19), so a message with content to hand out is left to the general
/// path; `"content": ""` in `identity` has none.
///
/// The text is checked for UTF-8 as far as the message likely reaches,
/// and again over twice as much (the envelope made afresh) while the
/// reader runs out of text.
pub(crate) fn read<'a>(
    bytes: &'a [u8],
    start: usize,
    limits: &MessageLimits,
    streams_content: bool,
    env: &mut Envelope<'a>,
) -> Option<usize> {
    // A message must begin here before any text is checked.
    if bytes.get(start) != Some(&b'{') || limits.max_depth < DEPTH {
        return None;
    }
    // Past the size limit the general path refuses the message (413): the
    // reader does not look further.
    let limit = start.saturating_add(limits.max_message_bytes).min(bytes.len());
    let mut window = start.saturating_add(FIRST_WINDOW);
    if start.saturating_add(LINE_AFTER) < limit {
        // More is buffered than most messages take: messages pipelined
        // behind this one, perhaps. Senders end a message with a line break
        // (D1) and a JSON string holds none raw, so the first one most
        // often ends the message: checking up to it spares the messages
        // behind.
        let search = &bytes[start..limit.min(start.saturating_add(LINE_SEARCH))];
        if let Some(at) = memchr::memchr(b'\n', search) {
            window = start + (at + 1).max(LEAST_WINDOW);
        }
    }
    let mut window = window.min(limit);
    loop {
        // The text up to the window, or up to the first byte that is not
        // UTF-8 (`invalid`) or a character the window cuts in two.
        let (text, invalid) = match ascii_text(&bytes[..window]) {
            Some(text) => (text, false),
            None => match std::str::from_utf8(&bytes[..window]) {
                Ok(text) => (text, false),
                Err(e) => (
                    std::str::from_utf8(&bytes[..e.valid_up_to()]).ok()?,
                    e.error_len().is_some(),
                ),
            },
        };
        // Everything the reader keeps is borrowed from `bytes` (D5's
        // judging reads it there), so the envelope frees nothing.
        env.borrows_only = true;
        let mut reader = Reader {
            text,
            bytes: text.as_bytes(),
            pos: start,
            ran_out: false,
        };
        if reader.envelope(streams_content, env).is_some() {
            return Some(reader.pos);
        }
        if !reader.ran_out || invalid || window == limit {
            return None;
        }
        // A window too short left the envelope half filled.
        *env = Envelope::default();
        window = window.saturating_mul(2).min(limit);
    }
}

/// `bytes` as text if every byte of it is ASCII, as nearly every
/// message's are: read sixty-four bytes at a time, eight words folded into
/// one, where the general UTF-8 check takes several instructions a byte.
/// `None`: some byte is not ASCII, and the general check is the one to say
/// what the bytes are.
#[inline]
fn ascii_text(bytes: &[u8]) -> Option<&str> {
    const BLOCK: usize = 64;
    let word = |chunk: &[u8; 8]| u64::from_le_bytes(*chunk);
    let folded = |block: &[u8; BLOCK]| {
        let (chunks, _) = block.as_chunks::<8>();
        chunks.iter().fold(0, |high, w| high | word(w))
    };
    let (blocks, rest) = bytes.as_chunks::<BLOCK>();
    for block in blocks {
        if words::high(folded(block)) != 0 {
            return None;
        }
    }
    // The bytes after the whole blocks are among the last sixty-four,
    // read again as a block: no loop over words, no copy of a tail.
    let high = match (rest.is_empty(), bytes.last_chunk::<BLOCK>()) {
        (true, _) => 0,
        (false, Some(last)) => folded(last),
        // Shorter than a block: a word at a time.
        (false, None) => {
            let (chunks, tail) = rest.as_chunks::<8>();
            let mut last = [0u8; 8];
            last[..tail.len()].copy_from_slice(tail);
            chunks.iter().fold(word(&last), |high, w| high | word(w))
        }
    };
    if words::high(high) != 0 {
        return None;
    }
    // SAFETY: every byte is below 0x80, and ASCII text is UTF-8.
    #[allow(unsafe_code)]
    Some(unsafe { std::str::from_utf8_unchecked(bytes) })
}

/// Reads JSON text without escapes, one piece at a time; each method takes
/// its piece, or gives up (`None`) leaving the position undefined.
struct Reader<'a> {
    text: &'a str,
    /// `text`'s bytes.
    bytes: &'a [u8],
    pos: usize,
    /// The reader stopped at the end of `text`: more text may read.
    ran_out: bool,
}

impl<'a> Reader<'a> {
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    /// The next byte after whitespace, not taken.
    fn peek(&mut self) -> Option<u8> {
        // Compact JSON, the usual kind, has no whitespace to skip.
        if let Some(&next) = self.bytes.get(self.pos)
            && next > b' '
        {
            return Some(next);
        }
        self.skip_whitespace();
        let next = self.bytes.get(self.pos).copied();
        self.ran_out |= next.is_none();
        next
    }

    /// Takes `byte`, after whitespace.
    fn take(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.pos += 1)
    }

    /// After an entry of an object or an array: `true` at a comma (another
    /// entry follows), `false` at `close`.
    fn more(&mut self, close: u8) -> Option<bool> {
        match self.peek()? {
            b',' => {
                self.pos += 1;
                Some(true)
            }
            b if b == close => {
                self.pos += 1;
                Some(false)
            }
            _ => None,
        }
    }

    /// Takes `open`; `false` if `close` follows at once (the object or
    /// array is empty).
    fn open(&mut self, open: u8, close: u8) -> Option<bool> {
        self.take(open)?;
        if self.peek()? == close {
            self.pos += 1;
            return Some(false);
        }
        Some(true)
    }

    /// A string without escapes, borrowed.
    #[inline(always)]
    fn string(&mut self) -> Option<&'a str> {
        self.take(b'"')?;
        let start = self.pos;
        // The first quote, backslash or control character: only a quote
        // ends a string this reader takes.
        let end = next_to_escape(self.bytes, start);
        if self.bytes.get(end) != Some(&b'"') {
            self.ran_out |= end == self.bytes.len();
            return None;
        }
        self.pos = end + 1;
        // Both ends are ASCII quotes: character boundaries.
        self.text.get(start..end)
    }

    /// `""`, and nothing else.
    fn empty_string(&mut self) -> Option<&'a str> {
        self.take_quoted("", None).then_some("")
    }

    /// A key and its colon.
    #[inline]
    fn key(&mut self) -> Option<&'a str> {
        let key = self.string()?;
        self.take(b':')?;
        Some(key)
    }

    /// The next key and its colon, when the key is one of `names`: its
    /// index there. `likely`, the index of the key that usually comes
    /// next (peers write the fields in the order the protocol lists them),
    /// is compared in place first, as compact JSON writes it (`"name":`):
    /// cheaper than looking for the closing quote and then matching the
    /// string. Anything else is read by [`key`](Self::key), which gives
    /// the same answer. Inlined, and the likely name chosen by a `match`,
    /// so that each comparison is with a constant of a known length (a
    /// few word comparisons rather than a call to `memcmp`).
    #[inline(always)]
    fn field(&mut self, names: &[&str], likely: usize) -> Option<usize> {
        macro_rules! likely_at {
            ($($index:literal)*) => {
                match likely {
                    $($index => names.get($index).is_some_and(|name| self.take_quoted(name, Some(b':'))),)*
                    _ => false,
                }
            };
        }
        if likely_at!(0 1 2 3 4 5 6) {
            return Some(likely);
        }
        // Written in another order: the other names, each a constant too.
        macro_rules! any_at {
            ($($index:literal)*) => {
                $(if $index != likely && names.get($index).is_some_and(|name| self.take_quoted(name, Some(b':'))) {
                    return Some($index);
                })*
            };
        }
        any_at!(0 1 2 3 4 5 6);
        let key = self.key()?;
        names.iter().position(|name| *name == key)
    }

    /// Takes `"text"`, and the byte `then` right after it if one is
    /// given, where they stand after whitespace, as compact JSON writes
    /// them; takes nothing if they are not there, or not written so.
    #[inline(always)]
    fn take_quoted(&mut self, text: &str, then: Option<u8>) -> bool {
        self.skip_whitespace();
        let len = text.len();
        let last = len + 1 + usize::from(then.is_some());
        // One bounds check for all of it, then comparisons within.
        let found = self.bytes.get(self.pos..=self.pos + last).is_some_and(|written| {
            written[last] == then.unwrap_or(b'"')
                && written[0] == b'"'
                && written[len + 1] == b'"'
                && written[1..=len] == *text.as_bytes()
        });
        if found {
            self.pos += last + 1;
        }
        found
    }

    #[inline(always)]
    fn loose_string(&mut self) -> Option<Loose<'a>> {
        Some(Loose::Str(Cow::Borrowed(self.string()?)))
    }

    /// [`loose_string`](Self::loose_string) for a field whose value is
    /// nearly always `likely` (the protocol's version, a message's type,
    /// a request's method, the `identity` encoding): compared in place
    /// first, as the field names are.
    #[inline(always)]
    fn loose_string_likely(&mut self, likely: &'static str) -> Option<Loose<'a>> {
        if self.take_quoted(likely, None) {
            return Some(Loose::Str(Cow::Borrowed(likely)));
        }
        self.loose_string()
    }

    /// `true` or `false`.
    fn boolean(&mut self) -> Option<bool> {
        let rest = &self.bytes[self.pos..];
        let (value, len) = if rest.starts_with(b"true") {
            (true, 4)
        } else if rest.starts_with(b"false") {
            (false, 5)
        } else {
            self.ran_out |= rest.len() < 5;
            return None;
        };
        self.pos += len;
        Some(value)
    }

    /// A non-negative integer as serde_json hands it over (`u64`); not
    /// zero-padded, and short enough not to overflow.
    fn unsigned(&mut self) -> Option<u64> {
        let rest = &self.bytes[self.pos..];
        let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        self.ran_out |= digits == rest.len();
        if digits == 0 || digits > 18 || (digits > 1 && rest[0] == b'0') {
            return None;
        }
        // A fraction or an exponent is serde_json's to round.
        if let Some(b'.' | b'e' | b'E') = rest.get(digits) {
            return None;
        }
        self.pos += digits;
        Some(rest[..digits].iter().fold(0, |n, d| n * 10 + u64::from(d - b'0')))
    }

    /// Fills `slot`, which must be empty: a key written twice is a
    /// duplicate (D4), for the general path to report.
    fn fill<T>(slot: &mut Option<T>, value: T) -> Option<()> {
        match slot {
            Some(_) => None,
            None => {
                *slot = Some(value);
                Some(())
            }
        }
    }

    fn envelope(&mut self, streams_content: bool, env: &mut Envelope<'a>) -> Option<()> {
        if !self.open(b'{', b'}')? {
            return Some(());
        }
        let mut likely = 0;
        loop {
            if let Some(field) = self.whole_field(likely, env) {
                likely = FOLLOWS[field];
                if !self.more(b'}')? {
                    return Some(());
                }
                continue;
            }
            let field = self.field(&FIELDS, likely)?;
            likely = FOLLOWS[field];
            match field {
                0 => Self::fill(&mut env.jsontp, self.loose_string_likely("1.0")?)?,
                1 => Self::fill(&mut env.type_, self.loose_string_likely("request")?)?,
                2 => Self::fill(&mut env.resource, self.loose_string()?)?,
                3 => Self::fill(&mut env.method, self.loose_string_likely("GET")?)?,
                // Filled where they stand: they are a few hundred bytes.
                4 if env.headers.is_none() => {
                    self.headers(env.headers.insert(Ok(RawHeaders::default())).as_mut().ok()?)?;
                }
                5 if env.body.is_none() => {
                    self.body(
                        streams_content,
                        env.body.insert(Ok(RawBody::default())).as_mut().ok()?,
                    )?;
                }
                6 if env.status.is_none() => {
                    self.status(env.status.insert(Ok(RawStatus::default())).as_mut().ok()?)?;
                }
                _ => return None,
            }
            if !self.more(b'}')? {
                return Some(());
            }
        }
    }

    /// The field that usually comes next (`likely`, an index in
    /// [`FIELDS`]) with the value nearly every message gives it, written
    /// as compact JSON writes them, compared whole: one comparison with
    /// a constant instead of a key, a colon and a value read one piece
    /// at a time. Fills the field's slot, which must be empty, and
    /// returns the field; `None` takes nothing, and the field is read
    /// piece by piece, which gives the same answer.
    #[inline(always)]
    fn whole_field(&mut self, likely: usize, env: &mut Envelope<'a>) -> Option<usize> {
        fn text(value: &'static str) -> Loose<'static> {
            Loose::Str(Cow::Borrowed(value))
        }
        macro_rules! whole {
            ($slot:expr, $written:literal, $value:expr) => {
                if $slot.is_none() && self.take_literal($written) {
                    $slot.get_or_insert($value);
                    return Some(likely);
                }
            };
        }
        match likely {
            0 => whole!(env.jsontp, br#""jsontp":"1.0""#, text("1.0")),
            1 => {
                whole!(env.type_, br#""type":"request""#, text("request"));
                whole!(env.type_, br#""type":"response""#, text("response"));
            }
            3 => whole!(env.method, br#""method":"GET""#, text("GET")),
            4 => whole!(env.headers, br#""headers":{}"#, Ok(RawHeaders::default())),
            // A request without content, as nearly every GET is sent.
            5 => whole!(
                env.body,
                br#""body":{"content":"","encoding":"identity"}"#,
                Ok(RawBody {
                    content: Some(text("")),
                    encoding: Some(text("identity")),
                    ..RawBody::default()
                })
            ),
            _ => {}
        }
        None
    }

    /// Takes `written` where it stands, with no whitespace before it.
    #[inline(always)]
    fn take_literal(&mut self, written: &[u8]) -> bool {
        let found = self.bytes[self.pos..].starts_with(written);
        if found {
            self.pos += written.len();
        }
        found
    }

    /// Listed names only (D8), each once: an unlisted name is compared
    /// lower-cased, and is refused or dropped, both the general path's.
    fn headers(&mut self, headers: &mut RawHeaders<'a>) -> Option<()> {
        if !self.open(b'{', b'}')? {
            return Some(());
        }
        let mut seen = 0u16;
        loop {
            let (name, listed) = match self.listed_name() {
                Some(found) => found,
                None => {
                    let name = self.key()?;
                    (name, listed_header(name)?)
                }
            };
            let bit = 1u16 << listed;
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
            let value = match self.peek()? {
                b'"' => self.loose_string()?,
                b'[' => Loose::Array(Items::Plain(self.strings()?)),
                _ => Loose::Bool(self.boolean()?),
            };
            headers.entries.push((Cow::Borrowed(name), Some(listed), value));
            if !self.more(b'}')? {
                return Some(());
            }
        }
    }

    /// A listed header name written lower-case, as senders write them,
    /// and its colon, compared in place with the names that begin with
    /// its first letter: each a constant of a known length, where reading
    /// the key and then matching it costs a search for its end and a call
    /// to `memcmp`. `None` takes nothing: [`key`](Self::key) and
    /// [`listed_header`] read it then, and give the same answer.
    #[inline(always)]
    fn listed_name(&mut self) -> Option<(&'a str, usize)> {
        self.skip_whitespace();
        let rest = &self.bytes[self.pos..];
        if rest.first() != Some(&b'"') {
            return None;
        }
        let at = |index: usize| {
            let name: &'static str = HEADER_NAMES[index];
            let len = name.len();
            // One bounds check for the name and the `":` after it.
            let written = rest.get(..len + 3)?;
            (written[1..=len] == *name.as_bytes() && written[len + 1..] == *b"\":").then_some((name, index))
        };
        let found = match rest.get(1)? {
            b'a' => at(2).or_else(|| at(3)).or_else(|| at(1)).or_else(|| at(4)),
            b'c' => at(0).or_else(|| at(5)),
            b'i' => at(6).or_else(|| at(7)).or_else(|| at(9)),
            b'e' => at(8),
            b'd' => at(10),
            b'l' => at(11),
            b's' => at(12),
            _ => None,
        }?;
        self.pos += found.0.len() + 3;
        Some(found)
    }

    /// An array of strings: the text between its brackets, for the
    /// judge to split (each string is checked here, so none holds an
    /// escape or a quote).
    fn strings(&mut self) -> Option<&'a str> {
        if !self.open(b'[', b']')? {
            return Some("");
        }
        let start = self.pos;
        loop {
            self.string()?;
            let end = self.pos;
            if !self.more(b']')? {
                // Both ends are ASCII quotes or brackets: character
                // boundaries.
                return self.text.get(start..end);
            }
        }
    }

    /// The `body` object: its `encoding` read by `encoding`, its
    /// `content`'s string handed to `content`, in either order. Content
    /// to stream (`streams_content`, D19) is left to the lexer: only `""`
    /// is taken, and no other is looked through.
    #[inline]
    fn body_object(
        &mut self,
        streams_content: bool,
        mut encoding: impl FnMut(&mut Self) -> Option<()>,
        mut content: impl FnMut(&'a str) -> Option<()>,
    ) -> Option<()> {
        if !self.open(b'{', b'}')? {
            return Some(());
        }
        let mut likely = 0;
        loop {
            let field = self.field(&BODY_FIELDS, likely)?;
            likely = 1 - field;
            match field {
                0 => encoding(self)?,
                _ if streams_content => content(self.empty_string()?)?,
                // A request without content (nearly every GET) writes `""`.
                _ if self.take_quoted("", None) => content("")?,
                _ => content(self.string()?)?,
            }
            if !self.more(b'}')? {
                return Some(());
            }
        }
    }

    fn body(&mut self, streams_content: bool, body: &mut RawBody<'a>) -> Option<()> {
        self.body_object(
            streams_content,
            |reader| Self::fill(&mut body.encoding, reader.loose_string_likely("identity")?),
            |text| Self::fill(&mut body.content, Loose::Str(Cow::Borrowed(text))),
        )?;
        if streams_content && body.content.is_some() {
            let identity = matches!(&body.encoding, Some(Loose::Str(name)) if name == "identity");
            if !identity {
                return None;
            }
        }
        Some(())
    }

    fn status(&mut self, status: &mut RawStatus<'a>) -> Option<()> {
        if !self.open(b'{', b'}')? {
            return Some(());
        }
        const FIELDS: [&str; 3] = ["code", "formal-message", "human-message"];
        let mut likely = 0;
        loop {
            let field = self.field(&FIELDS, likely)?;
            likely = field + 1;
            match field {
                0 => {
                    self.skip_whitespace();
                    let code = Loose::Number(Number::Unsigned(self.unsigned()?));
                    Self::fill(&mut status.code, code)?;
                }
                1 => Self::fill(&mut status.formal_message, self.loose_string()?)?,
                _ => Self::fill(&mut status.human_message, self.loose_string()?)?,
            }
            if !self.more(b'}')? {
                return Some(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::message::framing::leading_whitespace;
    use crate::message::oracles::quick_agrees_with_general as agrees_with_general;

    const GET: &str = r#"{"jsontp":"1.0","type":"request","resource":"/hello.txt","method":"GET","headers":{"accept-encoding":["gzip","identity"],"accept-language":"en-US","if-modified-since":"2021-06-01T00:00:00Z+0000"},"body":{"content":"","encoding":"identity"}}"#;

    fn reads(text: &str) -> Option<usize> {
        reads_with(text.as_bytes(), &MessageLimits::default(), false)
    }

    fn reads_with(bytes: &[u8], limits: &MessageLimits, streams_content: bool) -> Option<usize> {
        read(
            bytes,
            leading_whitespace(bytes),
            limits,
            streams_content,
            &mut Envelope::default(),
        )
    }

    #[test]
    fn reads_the_common_messages_and_frames_them() {
        assert_eq!(reads(GET), Some(GET.len()));
        // Whitespace anywhere JSON allows it; a pipelined message after.
        let loose = GET.replace(':', " : ").replace(',', ",\n  ");
        let spaced = format!(" \r\n\t{loose}\n{GET}");
        assert_eq!(reads(&spaced), Some(4 + loose.len()));
        let response = r#"{"jsontp":"1.0","type":"response","resource":"/a","status":{"code":200,"formal-message":"OK","human-message":"fine"},"headers":{"date":"2023-11-14T22:13:20Z+0000","language":"en-US","ignore-invalid-headers":true},"body":{"encoding":"identity","content":"héllo"}}"#;
        assert_eq!(reads(response), Some(response.len()));
        assert_eq!(reads("{}"), Some(2));
        for text in [GET, &spaced, response, "{}"] {
            assert!(
                agrees_with_general(text.as_bytes(), &MessageLimits::default()),
                "{text}"
            );
        }
    }

    #[test]
    fn fields_in_any_order_or_spacing_read_alike() {
        // The usual order is compared in place; any other order, or
        // whitespace before a colon, takes the general key reader.
        let limits = MessageLimits::default();
        let reordered = r#"{"body":{"content":"","encoding":"identity"},"headers":{},"method":"GET","resource":"/a","type":"request","jsontp":"1.0"}"#;
        let spaced = GET.replace("\":", "\" :");
        let response = r#"{"jsontp":"1.0","type":"response","status":{"human-message":"fine","code":200,"formal-message":"OK"},"resource":"/a","headers":{},"body":{"content":"","encoding":"identity"}}"#;
        for text in [reordered, spaced.as_str(), response] {
            assert_eq!(reads(text), Some(text.len()), "{text}");
            assert!(agrees_with_general(text.as_bytes(), &limits), "{text}");
        }
        let mut quick = Envelope::default();
        read(reordered.as_bytes(), 0, &limits, false, &mut quick).expect("read");
        assert_eq!(quick.resource, Some(Loose::Str(Cow::Borrowed("/a"))));
        // A key with an escape, a key written twice, an unknown key: the
        // general path's to judge.
        for text in [
            GET.replacen("\"jsontp\"", "\"json\\u0074p\"", 1),
            GET.replacen(
                "\"type\":\"request\"",
                "\"type\":\"request\",\"type\":\"request\"",
                1,
            ),
            GET.replacen("\"type\"", "\"kind\"", 1),
            GET.replacen("\"content\":\"\"", "\"content\":\"\",\"content\":\"\"", 1),
        ] {
            assert_ne!(text, GET);
            assert_eq!(reads(&text), None, "{text}");
        }
    }

    #[test]
    fn every_listed_header_name_reads_as_the_general_path_reads_it() {
        let limits = MessageLimits::default();
        for (index, name) in HEADER_NAMES.iter().enumerate() {
            let other = HEADER_NAMES[(index + 1) % HEADER_NAMES.len()];
            for written in [name.to_string(), name.to_ascii_uppercase(), format!("{name}x")] {
                for text in [
                    format!(r#"{{"headers":{{"{written}":true}}}}"#),
                    format!(r#"{{"headers":{{"{written}" : "a","{other}":["b"]}}}}"#),
                ] {
                    assert!(agrees_with_general(text.as_bytes(), &limits), "{text}");
                    let mut env = Envelope::default();
                    let read = read(text.as_bytes(), 0, &limits, false, &mut env);
                    if written.ends_with('x') {
                        assert_eq!(read, None, "{text}");
                        continue;
                    }
                    assert_eq!(read, Some(text.len()), "{text}");
                    let Some(Ok(headers)) = &env.headers else {
                        panic!("{text}")
                    };
                    assert_eq!(headers.entries[0].1, Some(index), "{text}");
                }
            }
        }
    }

    #[test]
    fn what_it_reads_is_borrowed_and_what_the_general_path_decodes_is_owned() {
        let limits = MessageLimits::default();
        let mut quick = Envelope::default();
        assert_eq!(
            read(GET.as_bytes(), 0, &limits, false, &mut quick),
            Some(GET.len())
        );
        assert!(quick.borrows_only && quick.owns_nothing());
        // More headers than the list holds in place: its buffer is freed.
        let many = GET.replacen(
            "\"headers\":{",
            r#""headers":{"accept":"*/*","authorization":"t","expect":"100-continue","cookies":"a=1","#,
            1,
        );
        let mut quick = Envelope::default();
        assert_eq!(
            read(many.as_bytes(), 0, &limits, false, &mut quick),
            Some(many.len())
        );
        let Some(Ok(headers)) = &quick.headers else {
            panic!("headers")
        };
        assert!(headers.entries.spilled() && quick.borrows_only && quick.owns_nothing());
        drop(quick);
        // An escape makes the general path decode a string into memory of
        // its own: that envelope is walked and freed when dropped.
        let escaped = GET.replacen("/hello.txt", "/hello\\u002etxt", 1);
        let mut general = Envelope::default();
        let mut notes = crate::message::read::syntax::Notes::default();
        crate::message::read::syntax::parse(&escaped, &mut general, &mut notes).expect("parses");
        assert!(!general.borrows_only && !general.owns_nothing());
    }

    #[test]
    fn reads_messages_longer_than_the_first_window() {
        let limits = MessageLimits::default();
        // Characters of one to four bytes, so that windows cut some in two.
        for filler in ["a", "\u{e9}", "\u{20ac}", "\u{1f600}"] {
            for len in [FIRST_WINDOW - 40, FIRST_WINDOW, 3 * FIRST_WINDOW + 1, 20_000] {
                let content = filler.repeat(len / filler.len());
                let text =
                    format!(r#"{{"method":"PUT","body":{{"content":"{content}","encoding":"identity"}}}}"#);
                assert_eq!(reads(&text), Some(text.len()), "{filler} {len}");
                assert!(agrees_with_general(text.as_bytes(), &limits));
                let cut = &text[..text.len() - 3];
                assert_eq!(reads(cut), None);
            }
        }
        // Not UTF-8 past the first window: the general path refuses it.
        let mut bytes = format!(r#"{{"resource":"{}"#, "a".repeat(3 * FIRST_WINDOW)).into_bytes();
        bytes.extend_from_slice(b"\xff\"}");
        assert_eq!(reads_with(&bytes, &limits, false), None);
    }

    #[test]
    fn reads_up_to_the_line_break_and_past_it_when_the_message_goes_on() {
        let limits = MessageLimits::default();
        // More buffered behind than the first window, not all of it UTF-8.
        let mut behind = format!("{{\"resource\":\"{}", "b".repeat(2 * FIRST_WINDOW)).into_bytes();
        behind.extend_from_slice(b"\xff\"}\n");
        let compact = br#"{"method":"GET","resource":"/a"}"#.to_vec();
        // Pretty-printed: line breaks inside, the first line shorter than
        // the least window, the whole longer than several windows.
        let pretty = format!(
            "{{\n  \"method\": \"PUT\",\n  \"body\": {{\n    \"encoding\": \"identity\",\n    \"content\": \"{}\"\n  }}\n}}",
            "a".repeat(8 * LEAST_WINDOW)
        )
        .into_bytes();
        // Less than the first window, more than the search threshold.
        let short = format!("{{\"resource\":\"{}\"}}\n", "c".repeat(LINE_AFTER)).into_bytes();
        for message in [compact, pretty] {
            for pipelined in [&[][..], &short, &behind] {
                let mut bytes = message.clone();
                bytes.push(b'\n');
                bytes.extend_from_slice(pipelined);
                assert_eq!(reads_with(&bytes, &limits, false), Some(message.len()));
                assert!(agrees_with_general(&bytes, &limits));
            }
        }
    }

    #[test]
    fn leaves_everything_else_to_the_general_path() {
        let limits = MessageLimits::default();
        let left = [
            // Part of a message.
            &GET[..GET.len() - 1],
            "",
            "  ",
            // Escapes, control characters, JSON5, other values and keys.
            r#"{"resource":"/a\"b"}"#,
            "{\"resource\":\"/a\tb\"}",
            "{resource:\"/a\"}",
            r#"{"resource":'/a'}"#,
            r#"{"resource":"/a",}"#,
            r#"{"resource":"/a"/**/}"#,
            r#"{"resource":null}"#,
            r#"{"x":"1"}"#,
            r#"{"headers":{"x-custom":"1"}}"#,
            r#"{"headers":{"accept":{"a":"1"}}}"#,
            r#"{"headers":{"accept":["a",1]}}"#,
            r#"{"headers":{"cookies":{"a":"1"}}}"#,
            r#"{"body":{"content":"","encoding":"identity","meta":1}}"#,
            r#"{"status":{"code":200.0}}"#,
            r#"{"status":{"code":2e2}}"#,
            r#"{"status":{"code":0200}}"#,
            r#"{"status":{"code":-200}}"#,
            r#"{"status":{"code":"200"}}"#,
            // Duplicates (D4), named in any case for headers (D8).
            r#"{"method":"GET","method":"GET"}"#,
            r#"{"headers":{"accept":"*/*","Accept":"*/*"}}"#,
            r#"{"body":{"encoding":"identity","encoding":"identity"}}"#,
            // A BOM, bytes that are not UTF-8.
            "\u{feff}{}",
        ];
        for text in left {
            assert_eq!(reads(text), None, "{text:?}");
        }
        assert_eq!(reads_with(b"{\"resource\":\"\xff\"}", &limits, false), None);
        // Past the size limit (413), or deeper than the depth limit allows.
        let small = MessageLimits {
            max_message_bytes: GET.len() - 1,
            ..limits
        };
        assert!(reads_with(GET.as_bytes(), &small, false).is_none());
        let small = MessageLimits {
            max_depth: 2,
            ..limits
        };
        assert!(reads_with(GET.as_bytes(), &small, false).is_none());
    }

    #[test]
    fn d19_content_to_stream_is_left_to_the_lexer() {
        let limits = MessageLimits::default();
        let with = |content: &str, encoding: &str| {
            format!(r#"{{"method":"PUT","body":{{"content":"{content}","encoding":"{encoding}"}}}}"#)
        };
        assert!(reads_with(with("", "identity").as_bytes(), &limits, true).is_some());
        assert!(reads_with(with("a", "identity").as_bytes(), &limits, true).is_none());
        assert!(reads_with(with("", "gzip").as_bytes(), &limits, true).is_none());
        assert!(reads_with(with("a", "gzip").as_bytes(), &limits, false).is_some());
        assert!(reads_with(br#"{"body":{"encoding":"br"}}"#, &limits, true).is_some());
    }

    #[test]
    fn ascii_text_is_the_utf8_check_on_ascii_and_gives_up_on_the_rest() {
        let bytes: Vec<u8> = (0..=127u8).cycle().take(300).collect();
        for start in 0..40 {
            for end in start..bytes.len() {
                let part = &bytes[start..end];
                assert_eq!(ascii_text(part), std::str::from_utf8(part).ok(), "{start}..{end}");
                // One byte past ASCII anywhere: every position of every word.
                for at in [0, part.len() / 2, part.len().saturating_sub(1)] {
                    if at < part.len() {
                        let mut high = part.to_vec();
                        high[at] = 0x80 | (at as u8);
                        assert_eq!(ascii_text(&high), None, "{start}..{end} at {at}");
                    }
                }
            }
        }
    }

    proptest! {
        #[test]
        fn ascii_text_agrees_with_the_utf8_check(bytes in prop::collection::vec(
            prop_oneof![4 => 0u8..0x80, 1 => any::<u8>()], 0..200,
        )) {
            let general = std::str::from_utf8(&bytes).ok().filter(|text| text.is_ascii());
            prop_assert_eq!(ascii_text(&bytes), general);
        }

        #[test]
        fn agrees_on_any_text_made_of_message_pieces(
            pieces in prop::collection::vec(
                prop_oneof![
                    prop::sample::select(vec![
                        "{", "}", "[", "]", ",", ":", " ", "\n", "\"", "\\", "\\u0041", "\\ud83d",
                        "true", "false", "null", "0", "200", "-1", "1.5", "2e2", "\u{e9}", "\t", "\u{1}",
                        "\"jsontp\"", "\"type\"", "\"resource\"", "\"method\"", "\"headers\"", "\"body\"",
                        "\"status\"", "\"content\"", "\"encoding\"", "\"code\"", "\"formal-message\"",
                        "\"human-message\"", "\"accept\"", "\"Accept\"", "\"expect\"", "\"x-a\"",
                        "\"ignore-invalid-headers\"", "\"1.0\"", "\"/a\"", "\"GET\"", "\"identity\"", "\"\"",
                        "\"gzip\"", "\"request\"", "\"response\"",
                    ]).prop_map(str::to_owned),
                    "[ -~]{0,3}",
                ],
                0..60,
            )
        ) {
            let text = pieces.concat();
            prop_assert!(agrees_with_general(text.as_bytes(), &MessageLimits::default()), "{:?}", text);
        }

        #[test]
        fn agrees_on_messages_shaped_like_requests(
            fields in prop::collection::vec(
                prop::sample::select(vec![
                    r#""jsontp":"1.0""#, r#""jsontp":"2.0""#, r#""type":"request""#,
                    r#""type":"response""#, r#""resource":"/a?b=c""#, r#""method":"PUT""#,
                    r#""method":"GET""#, r#""headers":{}"#,
                    r#""body":{"content":"","encoding":"identity"}"#,
                    r#""headers":{"accept":["text/plain","*/*;q=0.5"],"expect":"100-continue"}"#,
                    r#""headers":{"Content-Type":"text/plain","ignore-invalid-headers":false}"#,
                    r#""body":{"content":"aGk=","encoding":"gzip"}"#, r#""body":{}"#,
                    r#""status":{"code":404,"human-message":"gone"}"#, r#""x":1"#,
                ]),
                0..8,
            ),
            space in prop::sample::select(vec!["", " ", "\n", "\r\n\t"]),
        ) {
            let text = format!("{space}{{{}}}{space}", fields.join(&format!(",{space}")));
            prop_assert!(agrees_with_general(text.as_bytes(), &MessageLimits::default()), "{:?}", text);
        }
    }
}
