//! The one reader of string text (D4): what stands between a string's
//! quotes, escapes as written, turned into the text it means.
//!
//! Every string of a message is read here, `body.content` streamed piece
//! by piece (D19) as much as a key or a header value read whole, so the
//! JSON5 forms mean the same wherever they appear:
//!
//! - JSON's escapes `\" \\ \/ \b \f \n \r \t \uXXXX` (surrogate pairs
//!   joined, a lone half refused);
//! - JSON5's `\'`, `\v`, `\0` (not followed by a digit), `\xHH`, a
//!   backslash before any other character (that character), and a
//!   backslash before a line end (LF, CR, CR LF, U+2028, U+2029), which
//!   continues the line and means nothing;
//! - a raw LF or CR is refused (JSON5 has no multi-line strings); other
//!   characters stand for themselves, U+2028 and U+2029 included.
//!
//! `\1` to `\9` are refused, as JSON5 (ECMAScript 5 without octal) does.
//! The quote that closed the string never reaches here: the lexer ends the
//! string at it.
//!
//! The reader resumes at any byte, inside an escape or a UTF-8 sequence,
//! and writes no more than the room it is given; what an escape made past
//! the room waits for the next call.

use crate::message::words::{self, Lanes};

/// The decoding of one string's text, resumable at any byte.
#[derive(Debug, Default)]
pub(crate) struct Unescape {
    state: State,
    /// A high surrogate waiting for its low half.
    high: Option<u16>,
    /// What the last escape made and the room did not take yet.
    held: [u8; 4],
    held_from: u8,
    held_to: u8,
    /// Where text read a block at a time is decoded before it is
    /// appended: made once and kept, not zeroed for every run of text
    /// between two escapes the blocks do not take.
    stage: Vec<u8>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum State {
    #[default]
    Plain,
    /// After a backslash.
    Backslash,
    /// Inside `\xHH` (`hex == 2`) or `\uXXXX` (`hex == 4`): the digits
    /// read so far and their value.
    Hex { hex: u8, digits: u8, value: u16 },
    /// After `\0`: a decimal digit must not follow.
    AfterZero,
    /// After a backslash and a CR: an LF that follows belongs to the same
    /// line end.
    AfterCr,
    /// After a backslash and `E2`, or `E2 80`: U+2028 or U+2029 (a line
    /// continuation) if `A8` or `A9` completes it, another character
    /// (itself) if not.
    AfterE2 { seen: u8 },
}

impl Unescape {
    /// Unescapes `text` into `out`, writing at most `room` bytes. Returns
    /// how many text bytes were taken; what an escape made beyond the room
    /// is held for the next call.
    pub(crate) fn run(&mut self, text: &[u8], out: &mut Vec<u8>, room: usize) -> Result<usize, String> {
        let limit = out.len().saturating_add(room);
        if !self.flush(out, limit) {
            return Ok(0);
        }
        let mut i = 0;
        while i < text.len() {
            let byte = text[i];
            match self.state {
                State::Plain => {
                    if self.high.is_some() && byte != b'\\' {
                        return Err(lone_surrogate());
                    }
                    if self.high.is_none() {
                        i += plain_text(&text[i..], out, limit, &mut self.stage);
                        if i == text.len() {
                            return Ok(i);
                        }
                    }
                    let rest = &text[i..];
                    let plain = plain_run(rest);
                    let n = plain.min(limit.saturating_sub(out.len()));
                    out.extend_from_slice(&rest[..n]);
                    i += n;
                    if n < plain || i == text.len() {
                        return Ok(i);
                    }
                    if text[i] != b'\\' {
                        return Err(
                            "holds a line end that is not escaped (write it as \\n or \\r)".to_owned()
                        );
                    }
                    self.state = State::Backslash;
                    i += 1;
                }
                State::Backslash => {
                    i += 1;
                    if self.high.is_some() && byte != b'u' {
                        return Err(lone_surrogate());
                    }
                    self.state = State::Plain;
                    let made = match (one_byte_escape(byte), byte) {
                        (Some(made), _) => made,
                        (None, b'0') => {
                            self.state = State::AfterZero;
                            0
                        }
                        (None, b'x' | b'u') => {
                            let hex = if byte == b'x' { 2 } else { 4 };
                            self.state = State::Hex {
                                hex,
                                digits: 0,
                                value: 0,
                            };
                            continue;
                        }
                        (None, b'\n') => continue,
                        (None, b'\r') => {
                            self.state = State::AfterCr;
                            continue;
                        }
                        (None, 0xE2) => {
                            self.state = State::AfterE2 { seen: 1 };
                            continue;
                        }
                        (None, b'1'..=b'9') => {
                            return Err(format!(
                                "holds the escape \\{}, which neither JSON nor JSON5 has",
                                char::from(byte)
                            ));
                        }
                        // Any other character stands for itself: the
                        // backslash goes, the character is read as text.
                        (None, _) => {
                            i -= 1;
                            continue;
                        }
                    };
                    self.hold(&[made]);
                    if !self.flush(out, limit) {
                        return Ok(i);
                    }
                }
                State::Hex { hex, digits, value } => {
                    let Some(digit) = hex_digit(byte) else {
                        return Err(format!(
                            "holds a \\{} escape without {} hex digits",
                            if hex == 2 { 'x' } else { 'u' },
                            if hex == 2 { "two" } else { "four" },
                        ));
                    };
                    i += 1;
                    let value = value << 4 | u16::from(digit);
                    if digits + 1 < hex {
                        self.state = State::Hex {
                            hex,
                            digits: digits + 1,
                            value,
                        };
                        continue;
                    }
                    self.state = State::Plain;
                    self.push_unit(value)?;
                    if !self.flush(out, limit) {
                        return Ok(i);
                    }
                }
                State::AfterZero => {
                    if byte.is_ascii_digit() {
                        return Err(
                            "holds \\0 followed by a digit, an octal escape JSON5 does not have".to_owned(),
                        );
                    }
                    self.state = State::Plain;
                }
                State::AfterCr => {
                    if byte == b'\n' {
                        i += 1;
                    }
                    self.state = State::Plain;
                }
                State::AfterE2 { seen: 1 } if byte == 0x80 => {
                    i += 1;
                    self.state = State::AfterE2 { seen: 2 };
                }
                State::AfterE2 { seen: 2 } if byte == 0xA8 || byte == 0xA9 => {
                    i += 1;
                    self.state = State::Plain;
                }
                // Another character after the backslash: itself.
                State::AfterE2 { seen } => {
                    self.state = State::Plain;
                    self.hold(&[0xE2, 0x80][..usize::from(seen)]);
                    if !self.flush(out, limit) {
                        return Ok(i);
                    }
                }
            }
        }
        Ok(i)
    }

    /// One `\uXXXX` code unit or `\xHH` value: a character, or half of a
    /// surrogate pair.
    fn push_unit(&mut self, unit: u16) -> Result<(), String> {
        let c = match (self.high.take(), unit) {
            (None, 0xD800..=0xDBFF) => {
                self.high = Some(unit);
                return Ok(());
            }
            (Some(high), 0xDC00..=0xDFFF) => {
                let c = 0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                char::from_u32(c).ok_or_else(lone_surrogate)?
            }
            (Some(_), _) | (None, 0xDC00..=0xDFFF) => return Err(lone_surrogate()),
            (None, unit) => char::from_u32(u32::from(unit)).ok_or_else(lone_surrogate)?,
        };
        let mut buf = [0u8; 4];
        self.hold(c.encode_utf8(&mut buf).as_bytes());
        Ok(())
    }

    fn hold(&mut self, bytes: &[u8]) {
        self.held[..bytes.len()].copy_from_slice(bytes);
        self.held_from = 0;
        self.held_to = bytes.len() as u8;
    }

    /// Writes what is held, as far as `limit` allows; whether all of it
    /// went.
    fn flush(&mut self, out: &mut Vec<u8>, limit: usize) -> bool {
        let held = &self.held[usize::from(self.held_from)..usize::from(self.held_to)];
        let n = held.len().min(limit.saturating_sub(out.len()));
        out.extend_from_slice(&held[..n]);
        self.held_from += n as u8;
        self.held_from == self.held_to
    }

    /// Whether bytes an escape made wait to be written.
    pub(crate) fn holds(&self) -> bool {
        self.held_from < self.held_to
    }

    /// Whether the text so far ends between characters: not inside an
    /// escape, nothing held, no surrogate half waiting. Text that follows
    /// with no backslash and no line end then stands for itself.
    pub(crate) fn is_at_rest(&self) -> bool {
        self.state == State::Plain && self.high.is_none() && !self.holds()
    }

    /// The string ended: not inside an escape, no surrogate half waiting.
    pub(crate) fn finish(&self) -> Result<(), String> {
        if self.high.is_some() {
            return Err(lone_surrogate());
        }
        match self.state {
            State::Plain | State::AfterZero | State::AfterCr => Ok(()),
            _ => Err("ends inside an escape".to_owned()),
        }
    }
}

/// The text of a whole string, unescaped.
pub(crate) fn unescape(text: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut reader = Unescape::default();
    let taken = reader.run(text, &mut out, usize::MAX - text.len())?;
    debug_assert_eq!(taken, text.len());
    reader.finish()?;
    Ok(out)
}

/// The byte a backslash and `next` stand for, when the two are the whole
/// escape: JSON's `\" \\ \/ \b \f \n \r \t` and JSON5's `\' \v`.
fn one_byte_escape(next: u8) -> Option<u8> {
    // No escape of one byte makes a zero (`\0` is one of its own).
    Some(ONE_BYTE_ESCAPES[usize::from(next)]).filter(|&made| made != 0)
}

/// What each byte after a backslash makes as an escape of one byte, zero
/// where it is not one. A table, not a `match`: text has an escape every
/// few dozen bytes, and a jump table's indirect branch mispredicts on
/// them; the blocks look up a whole block's escapes in its first half.
const ONE_BYTE_ESCAPES: [u8; 256] = {
    let mut made = [0u8; 256];
    made[b'"' as usize] = b'"';
    made[b'\'' as usize] = b'\'';
    made[b'\\' as usize] = b'\\';
    made[b'/' as usize] = b'/';
    made[b'b' as usize] = 0x08;
    made[b'f' as usize] = 0x0c;
    made[b'n' as usize] = b'\n';
    made[b'r' as usize] = b'\r';
    made[b't' as usize] = b'\t';
    made[b'v' as usize] = 0x0b;
    made
};

/// Where text stops standing for itself: a backslash or a raw line end.
const STOPS: [u8; 3] = [b'\\', b'\n', b'\r'];

/// Flags the bytes of `word` that are [`STOPS`].
fn stops(word: u64) -> u64 {
    words::equal(word, b'\\') | words::equal(word, b'\n') | words::equal(word, b'\r')
}

/// How many bytes at the front of `text` stand for themselves.
fn plain_run(text: &[u8]) -> usize {
    words::find(text, stops, |rest| memchr::memchr3(b'\\', b'\n', b'\r', rest)).unwrap_or(text.len())
}

/// Decodes the front of `text` that needs no state, text standing for
/// itself and the one-byte escapes in it, into `out` within `limit`;
/// returns how many text bytes it took. It stops where the state machine
/// must take over: another escape, a raw line end, the end of the text or
/// of the room.
fn plain_text(text: &[u8], out: &mut Vec<u8>, limit: usize, stage: &mut Vec<u8>) -> usize {
    // Decoding never makes more bytes than it takes.
    let room = limit.saturating_sub(out.len()).min(text.len());
    let mut taken = 0;
    if text.len() >= WINDOW && room > BLOCK {
        let stopped;
        (taken, stopped) = words::wide(
            #[inline(always)]
            |lanes| plain_blocks(text, room, out, stage, lanes),
        );
        if stopped {
            return taken;
        }
    }
    // What is left is shorter than a window of text or a block of room.
    // It is written as a slice: pushes onto the vector would reload its
    // length after every store, which may alias it.
    let text = &text[taken..];
    let start = out.len();
    out.resize(start + limit.saturating_sub(start).min(text.len()), 0);
    let (tail, written) = plain_into(text, &mut out[start..]);
    out.truncate(start + written);
    taken + tail
}

/// How many text bytes [`plain_blocks`] reads at once: their stops are
/// flagged in one mask, and every one-byte escape among them is resolved
/// from it.
const BLOCK: usize = 64;

/// How many bytes [`plain_blocks`] decodes before it appends them: a few
/// blocks' worth, so that appending costs little a byte.
const STAGE: usize = 2048;

/// How much text [`plain_blocks`] reads from a block's start: the block,
/// and the block after an escape in its last two bytes, copied whole.
const WINDOW: usize = 2 * BLOCK + 2;

/// [`plain_text`] a block at a time, while a [`WINDOW`] is left in the
/// text and a block and a byte in the `room` (no more than the text):
/// (text bytes taken, whether it stopped where the state machine must
/// take over).
///
/// A block is copied whole, and after each escape in it the block's text
/// that follows the escape, whole again, over what came after the byte
/// the escape made: a fixed number of vector moves per escape, with no
/// branch on the length of the run between escapes. What a block makes is
/// written to the `stage` and appended to `out` a stage at a time: room in
/// `out` written slice-wise would have to be zeroed first.
#[inline(always)]
fn plain_blocks(
    text: &[u8],
    room: usize,
    out: &mut Vec<u8>,
    stage: &mut Vec<u8>,
    lanes: Lanes,
) -> (usize, bool) {
    // Room for all it may make, at once: growing as stages come would
    // copy what came before each time.
    out.reserve(room);
    stage.resize(STAGE, 0);
    let stage = &mut stage[..STAGE];
    let (mut i, mut o) = (0, 0);
    // Whether the last block ended in a backslash that starts an escape,
    // dropped there, whose escaped byte opens this block.
    let mut pending = false;
    let stopped = loop {
        let (Some(window), true) = (text.get(i..i + WINDOW), i + BLOCK < room) else {
            break false;
        };
        if o + 2 * BLOCK + 1 > stage.len() {
            out.extend_from_slice(&stage[..o]);
            o = 0;
        }
        let block = window.first_chunk::<BLOCK>().expect("a block");
        #[cfg(target_arch = "x86_64")]
        if lanes.avx512() {
            let slot = (&mut stage[o..o + BLOCK]).try_into().expect("a block of room");
            // SAFETY: only `wide` makes a `Lanes` that says AVX-512, having
            // found the processor has it.
            #[allow(unsafe_code)]
            if let Some((made, ends_in_escape)) = unsafe { block_avx512(block, pending, slot) } {
                i += BLOCK;
                o += made;
                pending = ends_in_escape;
                continue;
            }
            if pending {
                // The narrower way reads the escape from its backslash.
                i -= 1;
                pending = false;
                continue;
            }
        }
        let mut stops = words::flags64(block, STOPS, lanes);
        stage[o..o + BLOCK].copy_from_slice(block);
        // Where the text not yet decoded starts, and where it goes.
        let mut from = 0;
        while stops != 0 {
            let at = stops.trailing_zeros() as usize;
            o += at - from;
            let made = match block[at] {
                b'\\' => one_byte_escape(window[at + 1]),
                _ => None,
            };
            let Some(made) = made else {
                out.extend_from_slice(&stage[..o]);
                return (i + at, true);
            };
            stage[o] = made;
            o += 1;
            from = at + 2;
            stage[o..o + BLOCK].copy_from_slice(&window[from..from + BLOCK]);
            // The escape's second byte, a backslash too in `\\`, is
            // not a stop.
            stops &= !(3 << at);
        }
        o += BLOCK.saturating_sub(from);
        i += from.max(BLOCK);
    };
    out.extend_from_slice(&stage[..o]);
    // An escape begun at the last block's end is the state machine's.
    (i - usize::from(pending), stopped)
}

/// One block of [`plain_blocks`] with AVX-512, with no branch on its
/// escapes: each escaped byte is replaced by what it makes, looked up for
/// the whole block at once, and the backslashes that start the escapes
/// are compressed out; the block is written whole to `slot`. `pending`:
/// the block's first byte is escaped, by a backslash the block before
/// ended with. Returns the bytes made, and whether the block ends in a
/// backslash that starts an escape (dropped here: the next block's first
/// byte is what it escapes); `None` when the block holds what only the
/// state machine reads (a raw line end, an escape of more than one byte
/// or a refused one), which the caller then reads as the other widths do.
///
/// The next block is read whatever this one holds, and waits only on
/// whether it ends in an escape, which takes two steps: blocks overlap.
///
/// # Safety
/// The processor must have AVX-512 F, BW, VBMI and VBMI2, and POPCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,popcnt")]
#[inline]
#[allow(unsafe_code)]
unsafe fn block_avx512(block: &[u8; BLOCK], pending: bool, slot: &mut [u8; BLOCK]) -> Option<(usize, bool)> {
    use std::arch::x86_64::{
        _mm512_cmpeq_epi8_mask, _mm512_mask_blend_epi8, _mm512_maskz_compress_epi8, _mm512_movepi8_mask,
        _mm512_permutex2var_epi8, _mm512_set1_epi8, _mm512_setzero_si512, _mm512_storeu_si512,
    };
    let bytes = words::load64(block);
    let is = |byte: u8| _mm512_cmpeq_epi8_mask(bytes, _mm512_set1_epi8(byte as i8));
    if is(b'\n') | is(b'\r') != 0 {
        return None;
    }
    let backslashes = is(b'\\');
    let (starts, escaped) = words::escapes(backslashes, pending);
    let (low, high) = ONE_BYTE_ESCAPES.split_first_chunk::<64>().expect("256 entries");
    let high = high.first_chunk::<64>().expect("256 entries");
    // The index's high bit is not read: an escaped byte of 0x80 or more
    // is refused with the bytes that make nothing.
    let made = _mm512_permutex2var_epi8(words::load64(low), bytes, words::load64(high));
    let refused = _mm512_cmpeq_epi8_mask(made, _mm512_setzero_si512()) | _mm512_movepi8_mask(bytes);
    if escaped & refused != 0 {
        return None;
    }
    let kept = !starts;
    let decoded = _mm512_maskz_compress_epi8(kept, _mm512_mask_blend_epi8(escaped, bytes, made));
    // SAFETY: `slot` is sixty-four bytes, all written; the store asks for
    // no alignment.
    unsafe { _mm512_storeu_si512(slot.as_mut_ptr().cast(), decoded) };
    Some((
        kept.count_ones() as usize,
        words::odd_at_end(backslashes, pending),
    ))
}

/// [`plain_text`] into `room`: (text bytes taken, bytes written).
///
/// Sixteen bytes at a time: each chunk is written whole and the count cut
/// back to its first stop, so that a run between escapes costs a chunk or
/// two, not a call to search and another to copy. A run still going after
/// a few clean chunks is long (base64, text without escapes): a vectorised
/// search and copy serve it better, as they do the last fifteen bytes of
/// the text or the room.
fn plain_into(text: &[u8], room: &mut [u8]) -> (usize, usize) {
    let (mut i, mut o) = (0, 0);
    loop {
        // The run to the next stop, when it lies in a chunk with room for
        // all of it; `None` once it is long or fewer than sixteen bytes
        // are left.
        let mut clean = 0;
        let stop = loop {
            let (Some(chunk), Some(slot)) = (text.get(i..i + 16), room.get_mut(o..o + 16)) else {
                break None;
            };
            if clean == words::SHORT16 / 16 {
                break None;
            }
            slot.copy_from_slice(chunk);
            let found = words::flags16(chunk.try_into().expect("sixteen bytes"), STOPS);
            if found != 0 {
                break Some(found.trailing_zeros() as usize);
            }
            i += 16;
            o += 16;
            clean += 1;
        };
        match stop {
            // Inside the chunk just written: there is room for the byte.
            Some(at) => {
                i += at;
                o += at;
            }
            None => {
                let run = plain_run(&text[i..]).min(room.len() - o);
                room[o..o + run].copy_from_slice(&text[i..i + run]);
                i += run;
                o += run;
                if o == room.len() {
                    return (i, o);
                }
            }
        }
        let Some(made) = escaped_byte(text, i) else {
            return (i, o);
        };
        room[o] = made;
        i += 2;
        o += 1;
    }
}

/// The byte of the one-byte escape at `at` in `text`, if one is there
/// whole.
fn escaped_byte(text: &[u8], at: usize) -> Option<u8> {
    match text.get(at..at + 2) {
        Some(&[b'\\', next]) => one_byte_escape(next),
        _ => None,
    }
}

fn hex_digit(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

fn lone_surrogate() -> String {
    "holds a lone surrogate escape, which is not a character".to_owned()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn read(text: &str) -> Result<String, String> {
        unescape(text.as_bytes()).map(|bytes| String::from_utf8(bytes).expect("UTF-8 in, UTF-8 out"))
    }

    #[test]
    fn json_escapes() {
        assert_eq!(
            read(r#"a\"b\\c\/d\b\f\n\r\t"#).unwrap(),
            "a\"b\\c/d\u{8}\u{c}\n\r\t"
        );
        assert_eq!(read(r"\u00e9\uD83D\uDE00").unwrap(), "é😀");
    }

    #[test]
    fn json5_escapes() {
        assert_eq!(read(r"\x41\v\'\0").unwrap(), "A\u{b}'\0");
        assert_eq!(read(r"\xe9").unwrap(), "é");
        assert_eq!(read(r"\a\q\ \é").unwrap(), "aq é");
        assert_eq!(read("\\0x").unwrap(), "\0x");
    }

    #[test]
    fn line_continuations() {
        assert_eq!(read("Hello, \\\nworld").unwrap(), "Hello, world");
        assert_eq!(read("a\\\r\nb").unwrap(), "ab");
        assert_eq!(read("a\\\rb").unwrap(), "ab");
        assert_eq!(read("a\\\u{2028}b\\\u{2029}c").unwrap(), "abc");
        // U+2022 starts like U+2028: after a backslash it is itself.
        assert_eq!(read("\\\u{2022}\\\u{20AC}").unwrap(), "\u{2022}\u{20AC}");
        // Raw separators are text.
        assert_eq!(read("a\u{2028}b").unwrap(), "a\u{2028}b");
    }

    #[test]
    fn refusals() {
        for (text, why) in [
            ("a\nb", "line end"),
            ("a\rb", "line end"),
            (r"\1", "\\1"),
            (r"\01", "octal"),
            (r"\x4", "inside an escape"),
            (r"\x4z", "two hex digits"),
            (r"\xg0", "two hex digits"),
            (r"\u12", "inside an escape"),
            (r"\u12z", "four hex digits"),
            (r"\ud800", "lone surrogate"),
            (r"\ud800x", "lone surrogate"),
            (r"\ud800\n", "lone surrogate"),
            (r"\ud800\x41", "lone surrogate"),
            (r"\udc00", "lone surrogate"),
            ("a\\", "inside an escape"),
        ] {
            let error = read(text).expect_err(text);
            assert!(error.contains(why), "{text:?}: {error}");
        }
    }

    /// The json5 crate's reading of the string, when it takes it.
    fn json5_reads(text: &str) -> Option<String> {
        json5::from_str::<String>(&format!("\"{text}\"")).ok()
    }

    /// The string's bytes read by one reader in pieces that end at `cuts`,
    /// each call given at most `room`: what came out, or the refusal.
    fn read_in_pieces(bytes: &[u8], cuts: &[usize], room: usize) -> Result<Vec<u8>, String> {
        let mut reader = Unescape::default();
        let mut out = Vec::new();
        let mut at = 0;
        let mut ends: Vec<usize> = cuts.iter().map(|&c| c.min(bytes.len())).collect();
        ends.push(bytes.len());
        ends.sort_unstable();
        for end in ends {
            while at < end || reader.holds() {
                at += reader.run(&bytes[at..end], &mut out, room)?;
            }
        }
        reader.finish()?;
        Ok(out)
    }

    /// A piece of text for the block readers: plain runs, escapes of every
    /// kind (runs of backslashes among them), and what only the state
    /// machine reads or refuses.
    fn block_text_part() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => "[a-z \"'\u{e9}]{0,70}",
            4 => Just(r"\\".to_owned()),
            4 => Just(r"\\\\".to_owned()),
            4 => Just(r"\\\\\\".to_owned()),
            // Runs of escaped backslashes a block long and longer, which
            // a block must carry whole into the next.
            2 => r"(\\\\){30,70}",
            4 => Just(r#"\""#.to_owned()),
            4 => Just(r"\n".to_owned()),
            2 => Just(r"\t".to_owned()),
            2 => Just(r"\v".to_owned()),
            2 => Just(r"\q".to_owned()),
            2 => Just(r"\0".to_owned()),
            2 => Just(r"\x41".to_owned()),
            2 => "\\\\u00[0-9a-f][0-9a-f]",
            2 => Just("\\\n".to_owned()),
            2 => Just("\\\u{e9}".to_owned()),
            // Refused: a raw line end, an escape JSON5 lacks.
            1 => Just("\n".to_owned()),
            1 => Just(r"\1".to_owned()),
        ]
    }

    proptest! {
        /// However the text is cut, and however small the room, the same
        /// bytes come out, or the same refusal.
        #[test]
        fn split_invariant(text in r#"([a-z\\"'0-9xuvnr]|\\u[0-9a-fA-F]{4}|\\x[0-9a-f]{2}|\n|\u{2028}|é){0,24}"#,
                           cuts in proptest::collection::vec(0usize..40, 0..6),
                           room in 1usize..6) {
            let bytes = text.as_bytes();
            let whole = unescape(bytes);
            let result = read_in_pieces(bytes, &cuts, room);
            match (whole, result) {
                (Ok(expected), Ok(out)) => prop_assert_eq!(out, expected),
                (Err(a), Err(b)) => prop_assert_eq!(a, b),
                (a, b) => prop_assert!(false, "whole {:?}, in pieces {:?}", a, b),
            }
        }

        /// Long text, read sixteen bytes at a time where text and room
        /// allow, cut anywhere and into any room, comes out as the json5
        /// crate reads it.
        #[test]
        fn long_text_in_any_pieces_agrees_with_json5(
            text in r#"([a-z ]{0,20}|\\[nrt"\\/]|\\u00[0-7][0-9a-f]|\u{e9}|\u{1F600}|\n|\r){0,40}"#,
            cuts in proptest::collection::vec(0usize..400, 0..4),
            room in prop_oneof![1usize..20, 15usize..40, Just(usize::MAX)],
        ) {
            let ours = read_in_pieces(text.as_bytes(), &cuts, room)
                .ok()
                .map(|out| String::from_utf8(out).expect("UTF-8"));
            prop_assert_eq!(ours, json5_reads(&text));
        }

        /// Text long enough to be read a block at a time, with escapes of
        /// every kind at every offset of a block (runs of backslashes of
        /// every length among them), cut anywhere and into any room, reads
        /// as a byte at a time into a byte of room reads it, or is refused
        /// alike.
        #[test]
        fn blocks_read_as_a_byte_at_a_time(
            lead in 0usize..140,
            parts in proptest::collection::vec(block_text_part(), 0..40),
            cuts in proptest::collection::vec(0usize..1200, 0..4),
            room in prop_oneof![1usize..20, 60usize..200, Just(usize::MAX)],
        ) {
            let text = "a".repeat(lead) + &parts.concat();
            let bytes = text.as_bytes();
            let every: Vec<usize> = (1..bytes.len()).collect();
            let expected = read_in_pieces(bytes, &every, 1);
            prop_assert_eq!(&unescape(bytes), &expected);
            prop_assert_eq!(read_in_pieces(bytes, &cuts, room), expected);
        }

        /// The blocks decode alike at every width the processor has (AVX-512
        /// compresses a block's escapes out; the narrower code walks them):
        /// the same bytes made, taken, and the same stop.
        #[test]
        fn blocks_decode_alike_at_every_width(
            parts in proptest::collection::vec(block_text_part(), 0..60),
            room in prop_oneof![130usize..400, Just(usize::MAX)],
        ) {
            let text = parts.concat();
            let bytes = text.as_bytes();
            let room = room.min(bytes.len());
            let decode = |lanes| {
                let (mut out, mut stage) = (Vec::new(), Vec::new());
                let (taken, stopped) = plain_blocks(bytes, room, &mut out, &mut stage, lanes);
                (out, taken, stopped)
            };
            let (wide, narrow) = (words::wide(decode), decode(words::NARROW));
            // Each ends between escapes (the widths may end a byte or two
            // apart around an escape cut by a block's end), having made
            // what its text means.
            for (out, taken, _) in [&wide, &narrow] {
                prop_assert_eq!(Ok(out.clone()), unescape(&bytes[..*taken]));
            }
            // A stop is where the state machine must take over: the same
            // for both, unless one ended before reaching it.
            match (wide.2, narrow.2) {
                (true, true) => prop_assert_eq!(wide.1, narrow.1),
                (true, false) => prop_assert!(narrow.1 <= wide.1),
                (false, true) => prop_assert!(wide.1 <= narrow.1),
                (false, false) => {}
            }
        }

        /// The reader takes what the json5 crate takes, with the same
        /// meaning, and refuses what it refuses.
        #[test]
        fn agrees_with_json5(text in r#"([a-z'0-9xuv]|\\[a-z0-9'"\\/]|\\u[0-9a-fA-F]{4}|\\x[0-9a-f]{2}|\\\n|\\\r\n|\t|\u{2028}|é){0,16}"#) {
            let ours = unescape(text.as_bytes()).ok().map(|b| String::from_utf8(b).unwrap());
            prop_assert_eq!(ours, json5_reads(&text), "text {:?}", text);
        }
    }
}
