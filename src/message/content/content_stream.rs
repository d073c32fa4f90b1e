//! `body.content` piece by piece (D19): a [`ContentDecoder`] turns the text
//! of a `content` string, as it arrives, into the decoded bytes, and a
//! [`ContentEncoder`] turns bytes into that text, without ever holding the
//! whole content in either form.
//!
//! The text is the string's JSON form between its quotes, escapes as
//! written; pieces may split it anywhere, inside an escape, a UTF-8
//! sequence or a base64 quantum. Decoding gives the bytes
//! [`codec::decode`](crate::message::codec::decode) gives for the whole string, and
//! refuses what it refuses (the wording of a refusal may differ: a piece
//! knows less of the whole); encoding gives the text of
//! [`codec::encode`](crate::message::codec::encode), escaped as a JSON string.
//!
//! Decoding runs in stages, each holding at most a small fixed buffer:
//! the string's escapes, JSON5's included (`string.rs`), then (for `gzip`,
//! `deflate`, `br`) base64 in groups of
//! four, then the decompressor, whose output goes straight into the
//! caller's vector, never more than it asked for.

use std::fmt;
use std::io::Write;

use brotli::enc::StandardAlloc;
use brotli::{BrotliDecompressStream, BrotliResult, BrotliState};
use flate2::write::{GzEncoder, ZlibEncoder};
use flate2::{Crc, Decompress, FlushDecompress, Status};

use super::base64;
use super::encoding::Compressed;
use super::pace::{Drain, Pace};
use super::paced::Paced;
use super::stored::Stored;
use crate::message::Encoding;
use crate::message::ValueError;
use crate::message::codec::{CHUNK, DecodeError, Effort, VEC_WRITE, brotli_writer};
use crate::message::json_text::{escape, escape_utf8};
use crate::message::string::Unescape;

/// How much base64 text is turned into compressed bytes at a time: the
/// decompressor's input buffer.
const STAGE: usize = 16 * 1024;

/// Decodes the text of one `content` string as it arrives (D19).
pub struct ContentDecoder {
    encoding: Encoding,
    limit: usize,
    /// Text taken and not yet decoded, held for the next call.
    text: Vec<u8>,
    /// How far decoding has gone in the text it runs over: the text held,
    /// or within a call that found none held, the caller's piece.
    text_at: usize,
    /// Whether any text came at all: `""` is empty content in every
    /// encoding (D9).
    any_text: bool,
    unescape: Unescape,
    /// The unescaped text is UTF-8 across pieces (D4, D19).
    utf8: Utf8Check,
    base64: base64::Decoder,
    /// Compressed bytes not yet taken by the decompressor.
    compressed: Vec<u8>,
    compressed_at: usize,
    inflate: Option<Inflate>,
    /// The decompressor filled the room it had last time: it may hold
    /// more output.
    maybe_more: bool,
    /// The decompressor took none of the compressed bytes held and made
    /// nothing: it waits for more text, so nothing is pending until some
    /// comes (a caller looping on `has_pending` must not spin).
    stuck: bool,
    decoded: u64,
    /// What the decompressor writes into (compressed encodings only),
    /// zeroed once: zeroing the room in the output on every call would
    /// clear up to `max_out` bytes for a piece that makes a few.
    scratch: Vec<u8>,
}

impl fmt::Debug for ContentDecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContentDecoder")
            .field("encoding", &self.encoding)
            .field("limit", &self.limit)
            .field("decoded", &self.decoded)
            .finish_non_exhaustive()
    }
}

impl ContentDecoder {
    /// A decoder for content in `encoding` that refuses to produce more
    /// than `limit` decoded bytes (D19: `413`, decoding stops there).
    pub fn new(encoding: Encoding, limit: usize) -> ContentDecoder {
        let inflate = match encoding {
            Encoding::Identity => None,
            Encoding::Gzip => Some(Inflate::Gzip(Gzip::new())),
            Encoding::Deflate => Some(Inflate::Zlib(Box::new(Zlib::new()))),
            // `new_strict`: RFC 7932 windows only, as `codec::decode`.
            Encoding::Br => Some(Inflate::Brotli(
                Box::new(BrotliState::new_strict(
                    StandardAlloc::default(),
                    StandardAlloc::default(),
                    StandardAlloc::default(),
                )),
                false,
            )),
        };
        ContentDecoder {
            encoding,
            limit,
            text: Vec::new(),
            text_at: 0,
            any_text: false,
            unescape: Unescape::default(),
            utf8: Utf8Check::default(),
            base64: base64::Decoder::default(),
            compressed: Vec::new(),
            compressed_at: 0,
            maybe_more: false,
            stuck: false,
            decoded: 0,
            scratch: if inflate.is_some() {
                vec![0; CHUNK]
            } else {
                Vec::new()
            },
            inflate,
        }
    }

    /// The encoding being decoded.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Takes the next piece of the string's text (all of it: what cannot
    /// be decoded yet is kept) and appends at most `max_out` decoded bytes
    /// to `out`. While [`has_pending`](Self::has_pending), call again with
    /// an empty `text` for the rest before giving more.
    pub fn decode(&mut self, text: &[u8], out: &mut Vec<u8>, max_out: usize) -> Result<(), DecodeError> {
        if !text.is_empty() {
            self.any_text = true;
            self.stuck = false;
        }
        let before = (self.text_at, self.compressed_at, self.decoded, out.len());
        self.run_over(text, out, max_out, false)?;
        if text.is_empty() && before == (self.text_at, self.compressed_at, self.decoded, out.len()) {
            // Nothing moved: only more text can move it.
            self.stuck = true;
            self.maybe_more = false;
        }
        Ok(())
    }

    /// Whether text taken is not yet wholly decoded (the last call stopped
    /// at `max_out`).
    pub fn has_pending(&self) -> bool {
        !self.stuck
            && (self.text_at < self.text.len()
                || self.unescape.holds()
                || self.compressed_at < self.compressed.len()
                || self.maybe_more)
    }

    /// The string ended. Appends at most `max_out` more decoded bytes to
    /// `out`; `Ok(true)` once every byte is out and the content is complete
    /// (a whole base64 text, a finished compressed stream), `Ok(false)`
    /// when more remains: call again.
    pub fn finish(&mut self, out: &mut Vec<u8>, max_out: usize) -> Result<bool, DecodeError> {
        self.run_over(&[], out, max_out, true)
    }

    /// [`run`](Self::run) over the text held followed by `text`: straight
    /// over the caller's `text` when none is held, as in the steady state
    /// (no copy), and over the held text with `text` appended when some
    /// is. What it does not take is held for the next call.
    fn run_over(
        &mut self,
        text: &[u8],
        out: &mut Vec<u8>,
        max_out: usize,
        ending: bool,
    ) -> Result<bool, DecodeError> {
        if self.text_at == self.text.len() {
            self.text.clear();
            self.text_at = 0;
            let result = self.run(text, out, max_out, ending);
            self.text.extend_from_slice(&text[self.text_at..]);
            self.text_at = 0;
            return result;
        }
        self.text.extend_from_slice(text);
        let held = std::mem::take(&mut self.text);
        let result = self.run(&held, out, max_out, ending);
        self.text = held;
        result
    }

    /// Decoded bytes produced so far.
    pub fn decoded_bytes(&self) -> u64 {
        self.decoded
    }

    /// Decodes as much as `max_out` allows of `text` from `text_at` on;
    /// at the end (`ending`), checks that the content is complete.
    /// Returns whether it is all out.
    fn run(
        &mut self,
        text: &[u8],
        out: &mut Vec<u8>,
        max_out: usize,
        ending: bool,
    ) -> Result<bool, DecodeError> {
        let start = out.len();
        if self.inflate.is_none() {
            self.identity(text, out, max_out)?;
            if self.has_more_text(text) {
                return Ok(false);
            }
            if ending {
                self.unescape.finish().map_err(corrupt)?;
                self.utf8.finish().map_err(corrupt)?;
            }
            return Ok(ending);
        }
        loop {
            let room = max_out.saturating_sub(out.len() - start);
            if room == 0 {
                return Ok(false);
            }
            if self.compressed_at < self.compressed.len() || self.maybe_more {
                let (read, written, done) = self.inflate_some(out, room)?;
                if read > 0 || written > 0 {
                    continue;
                }
                if done && self.compressed_at < self.compressed.len() {
                    return Err(corrupt(format!(
                        "is not a valid {} stream ({} bytes follow the end of the stream)",
                        self.what(),
                        self.compressed.len() - self.compressed_at
                    )));
                }
                self.maybe_more = false;
                if self.compressed_at < self.compressed.len() {
                    // Input the decompressor cannot take yet: it wants
                    // more first (a gzip header cut in two).
                    self.refill(text)?;
                    if self.compressed_at < self.compressed.len() && !self.has_more_text(text) {
                        self.stuck = true;
                        break;
                    }
                    continue;
                }
            }
            if !self.has_more_text(text) {
                break;
            }
            self.refill(text)?;
        }
        if !ending {
            return Ok(false);
        }
        if !self.any_text {
            return Ok(true);
        }
        self.base64.finish().map_err(corrupt)?;
        self.unescape.finish().map_err(corrupt)?;
        self.utf8.finish().map_err(corrupt)?;
        let what = self.what();
        match &self.inflate {
            Some(inflate) if inflate.is_done() => {
                if self.compressed_at < self.compressed.len() {
                    return Err(corrupt(format!(
                        "is not a valid {what} stream ({} bytes follow the end of the stream)",
                        self.compressed.len() - self.compressed_at
                    )));
                }
                Ok(true)
            }
            _ => Err(corrupt(format!("is not a valid {what} stream (it ends early)"))),
        }
    }

    fn has_more_text(&self, text: &[u8]) -> bool {
        self.text_at < text.len() || self.unescape.holds()
    }

    fn what(&self) -> &'static str {
        match self.encoding {
            Encoding::Deflate => "deflate (zlib)",
            other => other.as_str(),
        }
    }

    /// Identity: the unescaped text is the content.
    fn identity(&mut self, text: &[u8], out: &mut Vec<u8>, max_out: usize) -> Result<(), DecodeError> {
        let room = max_out.min(self.limit.saturating_sub(self.decoded as usize).saturating_add(1));
        let before = out.len();
        // Whatever fails, the caller gets nothing of this call: never a
        // byte past the limit, never a byte of text that is not UTF-8.
        let result = self
            .unescape
            .run(&text[self.text_at..], out, room)
            .map_err(corrupt)
            .and_then(|taken| {
                self.text_at += taken;
                let written = (out.len() - before) as u64;
                if self.decoded + written > self.limit as u64 {
                    return Err(DecodeError::TooLarge { limit: self.limit });
                }
                self.utf8.check(&out[before..]).map_err(corrupt)?;
                self.decoded += written;
                Ok(())
            });
        if result.is_err() {
            out.truncate(before);
        }
        result
    }

    /// Turns up to [`STAGE`] characters of base64 text into compressed
    /// bytes for the decompressor.
    fn refill(&mut self, text: &[u8]) -> Result<(), DecodeError> {
        if self.compressed_at == self.compressed.len() {
            self.compressed.clear();
            self.compressed_at = 0;
        } else if self.compressed_at > 0 {
            self.compressed.drain(..self.compressed_at);
            self.compressed_at = 0;
        }
        // Base64 written plainly, as writers do, is decoded straight from
        // the text: characters of its alphabet need no unescaping and are
        // ASCII. Anything else (an escape, a fault) goes the long way.
        let raw = &text[self.text_at..];
        let raw = &raw[..raw.len().min(STAGE)];
        if self.unescape.is_at_rest() && self.utf8.is_between_chars() {
            let taken = self.base64.decode_plain(raw, &mut self.compressed);
            if taken > 0 {
                self.text_at += taken;
                self.utf8.pass_ascii(taken);
                return Ok(());
            }
        }
        let mut chars = Vec::with_capacity(STAGE.min(text.len() - self.text_at) + 4);
        let taken = self
            .unescape
            .run(&text[self.text_at..], &mut chars, STAGE)
            .map_err(corrupt)?;
        self.text_at += taken;
        self.utf8.check(&chars).map_err(corrupt)?;
        self.base64.decode(&chars, &mut self.compressed).map_err(corrupt)
    }

    /// Runs the decompressor on the compressed bytes held, writing at most
    /// `room` bytes to `out`; returns (bytes read, bytes written, stream
    /// done).
    fn inflate_some(&mut self, out: &mut Vec<u8>, room: usize) -> Result<(usize, usize, bool), DecodeError> {
        let room = room
            .min(self.scratch.len())
            .min(self.limit.saturating_sub(self.decoded as usize).saturating_add(1));
        let before = out.len();
        let input = &self.compressed[self.compressed_at..];
        let what = self.what();
        let result = match &mut self.inflate {
            Some(inflate) => inflate.run(input, &mut self.scratch[..room]),
            None => Ok((0, 0)),
        };
        let (read, written) = match result {
            Ok(moved) => moved,
            Err(why) => return Err(corrupt(format!("is not a valid {what} stream ({why})"))),
        };
        out.extend_from_slice(&self.scratch[..written]);
        self.compressed_at += read;
        self.decoded += written as u64;
        self.maybe_more = written == room;
        if self.decoded > self.limit as u64 {
            out.truncate(before);
            return Err(DecodeError::TooLarge { limit: self.limit });
        }
        let done = self.inflate.as_ref().is_some_and(Inflate::is_done);
        Ok((read, written, done))
    }
}

fn corrupt(reason: String) -> DecodeError {
    DecodeError::Corrupt(ValueError::new(reason))
}

/// UTF-8 validity across pieces: a sequence cut at a piece's end waits
/// for the next.
#[derive(Debug, Default)]
struct Utf8Check {
    carry: [u8; 4],
    carried: usize,
    /// Bytes checked, for the offsets in refusals.
    seen: u64,
}

impl Utf8Check {
    /// Whether the bytes checked so far end a character.
    fn is_between_chars(&self) -> bool {
        self.carried == 0
    }

    /// Counts `n` bytes of ASCII that followed whole characters: they
    /// need no check.
    fn pass_ascii(&mut self, n: usize) {
        debug_assert!(self.is_between_chars());
        self.seen += n as u64;
    }

    fn check(&mut self, bytes: &[u8]) -> Result<(), String> {
        let mut bytes = bytes;
        if self.carried > 0 {
            let want = utf8_length(self.carry[0]);
            let n = (want - self.carried).min(bytes.len());
            self.carry[self.carried..self.carried + n].copy_from_slice(&bytes[..n]);
            self.carried += n;
            bytes = &bytes[n..];
            if self.carried < want {
                return Ok(());
            }
            if std::str::from_utf8(&self.carry[..want]).is_err() {
                return Err(self.invalid(0));
            }
            self.seen += want as u64;
            self.carried = 0;
        }
        // Most text is ASCII, which this says at twice the speed.
        if bytes.is_ascii() {
            self.seen += bytes.len() as u64;
            return Ok(());
        }
        match std::str::from_utf8(bytes) {
            Ok(_) => self.seen += bytes.len() as u64,
            Err(e) if e.error_len().is_none() => {
                let rest = &bytes[e.valid_up_to()..];
                self.seen += e.valid_up_to() as u64;
                self.carry[..rest.len()].copy_from_slice(rest);
                self.carried = rest.len();
            }
            Err(e) => return Err(self.invalid(e.valid_up_to())),
        }
        Ok(())
    }

    fn invalid(&self, at: usize) -> String {
        format!(
            "is not valid UTF-8 (at byte {} of the text, D4)",
            self.seen + at as u64
        )
    }

    fn finish(&self) -> Result<(), String> {
        if self.carried == 0 {
            Ok(())
        } else {
            Err(self.invalid(0))
        }
    }
}

/// The decompressors, each resumable.
enum Inflate {
    Gzip(Box<Gzip>),
    Zlib(Box<Zlib>),
    /// The state, and whether the stream has ended.
    Brotli(
        Box<BrotliState<StandardAlloc, StandardAlloc, StandardAlloc>>,
        bool,
    ),
}

impl Inflate {
    /// Decompresses from `input` into `out`; returns (read, written).
    fn run(&mut self, input: &[u8], out: &mut [u8]) -> Result<(usize, usize), String> {
        match self {
            Inflate::Gzip(gzip) => gzip.run(input, out),
            Inflate::Zlib(zlib) => zlib.run(input, out),
            Inflate::Brotli(_, true) => Ok((0, 0)),
            Inflate::Brotli(state, ended) => {
                let (mut available_in, mut input_offset) = (input.len(), 0usize);
                let (mut available_out, mut written, mut total) = (out.len(), 0usize, 0usize);
                let result = BrotliDecompressStream(
                    &mut available_in,
                    &mut input_offset,
                    input,
                    &mut available_out,
                    &mut written,
                    out,
                    &mut total,
                    state,
                );
                match result {
                    BrotliResult::ResultFailure => Err("it is corrupt".to_owned()),
                    BrotliResult::ResultSuccess => {
                        *ended = true;
                        Ok((input_offset, written))
                    }
                    _ => Ok((input_offset, written)),
                }
            }
        }
    }

    fn is_done(&self) -> bool {
        match self {
            Inflate::Gzip(gzip) => gzip.is_done(),
            Inflate::Zlib(zlib) => zlib.ended,
            Inflate::Brotli(_, ended) => *ended,
        }
    }
}

/// A zlib stream (RFC 1950), and whether it has ended.
struct Zlib {
    inner: Decompress,
    ended: bool,
}

impl Zlib {
    fn new() -> Zlib {
        Zlib {
            inner: Decompress::new(true),
            ended: false,
        }
    }

    fn run(&mut self, input: &[u8], out: &mut [u8]) -> Result<(usize, usize), String> {
        if self.ended {
            return Ok((0, 0));
        }
        let (read, written, ended) = inflate(&mut self.inner, input, out)?;
        self.ended = ended;
        Ok((read, written))
    }
}

/// One call of an inflater; returns (read, written, ended).
fn inflate(inflater: &mut Decompress, input: &[u8], out: &mut [u8]) -> Result<(usize, usize, bool), String> {
    let (in_before, out_before) = (inflater.total_in(), inflater.total_out());
    let status = inflater
        .decompress(input, out, FlushDecompress::None)
        .map_err(|e| e.to_string())?;
    // Both deltas are bounded by the slices passed in.
    let read = (inflater.total_in() - in_before) as usize;
    let written = (inflater.total_out() - out_before) as usize;
    Ok((read, written, status == Status::StreamEnd))
}

/// gzip (RFC 1952): one or more members, each a header, a raw deflate
/// stream and a trailer (CRC-32 and size), checked as flate2 checks them.
struct Gzip {
    part: GzipPart,
    /// Header or trailer bytes gathered so far (headers may be cut
    /// anywhere by the pieces).
    gathered: Vec<u8>,
    inflater: Decompress,
    crc: Crc,
    /// Members finished.
    members: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GzipPart {
    Header,
    Body,
    Trailer,
    /// A member ended; another may start.
    Between,
}

/// The header's flag bits (RFC 1952 §2.3.1).
const FHCRC: u8 = 0x02;
const FEXTRA: u8 = 0x04;
const FNAME: u8 = 0x08;
const FCOMMENT: u8 = 0x10;
const FRESERVED: u8 = 0xe0;

impl Gzip {
    fn new() -> Box<Gzip> {
        Box::new(Gzip {
            part: GzipPart::Header,
            gathered: Vec::new(),
            inflater: Decompress::new(false),
            crc: Crc::new(),
            members: 0,
        })
    }

    fn is_done(&self) -> bool {
        self.part == GzipPart::Between
    }

    fn run(&mut self, input: &[u8], out: &mut [u8]) -> Result<(usize, usize), String> {
        let mut read = 0;
        loop {
            let rest = &input[read..];
            match self.part {
                GzipPart::Between => {
                    if rest.is_empty() {
                        return Ok((read, 0));
                    }
                    // Another member must start with the magic bytes.
                    if rest[0] != 0x1f {
                        return Ok((read, 0));
                    }
                    self.part = GzipPart::Header;
                    self.inflater.reset(false);
                    self.crc.reset();
                }
                GzipPart::Header => {
                    if rest.is_empty() {
                        return Ok((read, 0));
                    }
                    // Gather byte by byte until the header is complete:
                    // its length depends on its flags.
                    self.gathered.push(rest[0]);
                    read += 1;
                    match header_length(&self.gathered)? {
                        Some(len) if len == self.gathered.len() => {
                            self.gathered.clear();
                            self.part = GzipPart::Body;
                        }
                        _ => {}
                    }
                }
                GzipPart::Body => {
                    let (n, written, ended) = inflate(&mut self.inflater, rest, out)?;
                    self.crc.update(&out[..written]);
                    read += n;
                    if ended {
                        self.part = GzipPart::Trailer;
                    }
                    if written > 0 || !ended {
                        return Ok((read, written));
                    }
                }
                GzipPart::Trailer => {
                    let need = 8 - self.gathered.len();
                    let n = need.min(rest.len());
                    self.gathered.extend_from_slice(&rest[..n]);
                    read += n;
                    if self.gathered.len() < 8 {
                        return Ok((read, 0));
                    }
                    let crc = u32::from_le_bytes([
                        self.gathered[0],
                        self.gathered[1],
                        self.gathered[2],
                        self.gathered[3],
                    ]);
                    let size = u32::from_le_bytes([
                        self.gathered[4],
                        self.gathered[5],
                        self.gathered[6],
                        self.gathered[7],
                    ]);
                    self.gathered.clear();
                    if crc != self.crc.sum() {
                        return Err("its CRC-32 does not match".to_owned());
                    }
                    if size != self.crc.amount() {
                        return Err("its size does not match".to_owned());
                    }
                    self.members += 1;
                    self.part = GzipPart::Between;
                }
            }
        }
    }
}

/// The length of a gzip header whose first bytes are `bytes`, once it can
/// be told; an error for a header that is not gzip's.
fn header_length(bytes: &[u8]) -> Result<Option<usize>, String> {
    if bytes.first().is_some_and(|&b| b != 0x1f) || bytes.len() >= 2 && bytes[1] != 0x8b {
        return Err("invalid gzip header".to_owned());
    }
    if bytes.len() >= 3 && bytes[2] != 8 {
        return Err("invalid gzip header (not deflate)".to_owned());
    }
    if bytes.len() < 10 {
        return Ok(None);
    }
    let flags = bytes[3];
    if flags & FRESERVED != 0 {
        return Err("invalid gzip header (reserved flags)".to_owned());
    }
    let mut at = 10;
    if flags & FEXTRA != 0 {
        if bytes.len() < at + 2 {
            return Ok(None);
        }
        at += 2 + usize::from(u16::from_le_bytes([bytes[at], bytes[at + 1]]));
        if bytes.len() < at {
            return Ok(None);
        }
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            match bytes[at.min(bytes.len())..].iter().position(|&b| b == 0) {
                Some(end) => at += end + 1,
                None => return Ok(None),
            }
        }
    }
    if flags & FHCRC != 0 {
        at += 2;
    }
    Ok(Some(at).filter(|&len| bytes.len() >= len).or(None))
}

/// Content that cannot be written in the encoding asked for: `identity`
/// content that is not UTF-8 text (D9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeError {
    /// Content bytes taken before the first one that is not UTF-8.
    pub valid_up_to: u64,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the content is not UTF-8 text after byte {}, so it cannot be sent as identity",
            self.valid_up_to
        )
    }
}

impl std::error::Error for EncodeError {}

/// Encodes content as the text of a `content` string, piece by piece (D19).
pub struct ContentEncoder {
    encoding: Encoding,
    stage: Stage,
    /// Content bytes taken.
    taken: u64,
    /// How hard a compressed encoding works on the next piece, once the
    /// caller tells how the output drains ([`drained`](Self::drained));
    /// `None` until then: the effort is the content's alone.
    pace: Option<Box<Pace>>,
}

impl fmt::Debug for ContentEncoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContentEncoder")
            .field("encoding", &self.encoding)
            .field("taken", &self.taken)
            .finish_non_exhaustive()
    }
}

/// Where an encoder is.
enum Stage {
    /// Identity: escaping text; the start of a UTF-8 sequence the next
    /// piece completes.
    Text { carry: Vec<u8> },
    /// A compressed encoding before enough of its first bytes to choose
    /// how hard the compressor works: those that came, held (fewer than
    /// [`Effort::MIN_SAMPLE`]).
    Unstarted(Compressed, Vec<u8>),
    /// Compressing, into a `Vec` drained after every piece, and writing
    /// the compressed bytes as base64.
    Compressing {
        compress: Compress,
        base64: base64::Encoder,
    },
    /// Compressing with the effort of the pace, up to `ceiling`, what the
    /// content's first bytes are judged worth.
    Paced {
        paced: Box<Paced>,
        ceiling: Effort,
        base64: base64::Encoder,
        /// The compressed bytes of a piece, before base64.
        scratch: Vec<u8>,
    },
    /// The content ended and its text is out.
    Finished,
}

/// The compressors.
enum Compress {
    /// gzip or zlib framing around stored blocks: bytes that do not
    /// compress.
    Stored(Stored),
    Gzip(GzEncoder<Vec<u8>>),
    Zlib(ZlibEncoder<Vec<u8>>),
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
}

impl ContentEncoder {
    /// An encoder for `encoding`.
    pub fn new(encoding: Encoding) -> ContentEncoder {
        ContentEncoder {
            encoding,
            stage: match Compressed::of(encoding) {
                None => Stage::Text { carry: Vec::new() },
                Some(compressed) => Stage::Unstarted(compressed, Vec::new()),
            },
            taken: 0,
            pace: None,
        }
    }

    /// Tells how the output drains before the next piece (D19): from the
    /// first call on, a compressed encoding works as hard as the pace
    /// allows ([`Drain`]; the bytes as they are while the transport waits
    /// on the compressor, more as the output waits on the transport), never
    /// harder than the content is worth. Without it the effort is the
    /// content's alone, as [`codec::encode`](crate::message::codec::encode)
    /// chooses it. Call it before the first piece for the whole content
    /// to be paced; the encoded text is one valid stream either way.
    pub fn drained(&mut self, drain: Drain) {
        let ceiling = match &self.stage {
            Stage::Paced { ceiling, .. } => *ceiling,
            Stage::Unstarted(..) => Effort::Balanced,
            // Identity does no work to pace; a stream already compressing
            // at a fixed effort keeps it.
            Stage::Text { .. } | Stage::Compressing { .. } | Stage::Finished => return,
        };
        match &mut self.pace {
            Some(pace) => pace.observe(drain, ceiling),
            None => self.pace = Some(Box::new(Pace::new(drain))),
        }
    }

    /// The encoding written.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Encodes the next piece of content and appends the string text it
    /// makes (JSON-escaped, without quotes) to `out`. The first bytes of a
    /// compressed encoding (half a KiB at least, held until they come) set
    /// how hard it works ([`codec::encode`](crate::message::codec::encode)
    /// says how); once paced ([`drained`](Self::drained)), that is the most
    /// it works, and the pace chooses each piece's effort below it.
    pub fn encode(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let before = out.len();
        let result = match &mut self.stage {
            Stage::Text { carry } => text(carry, self.taken, bytes, out),
            Stage::Finished => Ok(()),
            Stage::Compressing { compress, base64 } => {
                base64.encode(&compress.write(bytes), out);
                Ok(())
            }
            Stage::Paced {
                paced,
                ceiling,
                base64,
                scratch,
            } => {
                let effort = self.pace.as_ref().map_or(*ceiling, |pace| pace.effort(*ceiling));
                paced.write(bytes, effort, scratch);
                base64.encode(scratch, out);
                scratch.clear();
                Ok(())
            }
            Stage::Unstarted(compressed, held) if held.is_empty() && bytes.len() >= Effort::MIN_SAMPLE => {
                let compressed = *compressed;
                self.start(compressed, bytes, out);
                Ok(())
            }
            Stage::Unstarted(compressed, held) => {
                held.extend_from_slice(bytes);
                if held.len() >= Effort::MIN_SAMPLE {
                    let (compressed, held) = (*compressed, std::mem::take(held));
                    self.start(compressed, &held, out);
                }
                Ok(())
            }
        };
        if let Some(pace) = &mut self.pace {
            pace.produced(out.len() - before);
        }
        self.taken += bytes.len() as u64;
        result
    }

    /// Chooses the compressor by the content's first bytes, `first`, and
    /// compresses them.
    fn start(&mut self, compressed: Compressed, first: &[u8], out: &mut Vec<u8>) {
        let ceiling = Effort::judge(first);
        let mut base64 = base64::Encoder::default();
        if let Some(pace) = &self.pace {
            let mut paced = Box::new(Paced::new(compressed));
            let mut scratch = Vec::new();
            paced.write(first, pace.effort(ceiling), &mut scratch);
            base64.encode(&scratch, out);
            scratch.clear();
            self.stage = Stage::Paced {
                paced,
                ceiling,
                base64,
                scratch,
            };
            return;
        }
        let mut compress = Compress::new(compressed, ceiling);
        base64.encode(&compress.write(first), out);
        self.stage = Stage::Compressing { compress, base64 };
    }

    /// The content ended: appends the rest of the text to `out`.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if let Stage::Unstarted(compressed, held) = &mut self.stage {
            // Less than a sample came: chosen by what there is.
            let (compressed, held) = (*compressed, std::mem::take(held));
            self.start(compressed, &held, out);
        }
        match std::mem::replace(&mut self.stage, Stage::Finished) {
            Stage::Text { carry } if !carry.is_empty() => {
                let valid_up_to = self.taken - carry.len() as u64;
                self.stage = Stage::Text { carry };
                Err(EncodeError { valid_up_to })
            }
            Stage::Text { .. } | Stage::Unstarted(..) | Stage::Finished => Ok(()),
            Stage::Compressing { compress, mut base64 } => {
                base64.encode(&compress.finish(), out);
                base64.finish(out);
                Ok(())
            }
            Stage::Paced {
                paced,
                mut base64,
                mut scratch,
                ..
            } => {
                paced.finish(&mut scratch);
                base64.encode(&scratch, out);
                base64.finish(out);
                Ok(())
            }
        }
    }
}

/// Identity: escapes the UTF-8 text of `piece`, which follows `taken`
/// content bytes, holding an unfinished sequence at the end in `carry`
/// for the next piece.
fn text(carry: &mut Vec<u8>, taken: u64, piece: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let mut bytes = piece;
    if !carry.is_empty() {
        // Complete the held sequence from the front of this piece.
        let need = utf8_length(carry[0]).saturating_sub(carry.len());
        let n = need.min(bytes.len());
        carry.extend_from_slice(&bytes[..n]);
        bytes = &bytes[n..];
        if carry.len() < utf8_length(carry[0]) {
            return Ok(());
        }
        match std::str::from_utf8(carry) {
            Ok(s) => escape(s, out),
            Err(_) => return Err(EncodeError { valid_up_to: taken }),
        }
        carry.clear();
    }
    // Content bytes of this piece before `bytes`.
    let offset = taken + (piece.len() - bytes.len()) as u64;
    // Most text is ASCII, which this says at twice the speed.
    if bytes.is_ascii() {
        escape_utf8(bytes, out);
        return Ok(());
    }
    match std::str::from_utf8(bytes) {
        Ok(s) => escape(s, out),
        Err(e) => {
            let (valid, rest) = bytes.split_at(e.valid_up_to());
            // Only a cut-off sequence at the very end may wait for the
            // next piece.
            escape(std::str::from_utf8(valid).unwrap_or_default(), out);
            if e.error_len().is_some() {
                return Err(EncodeError {
                    valid_up_to: offset + valid.len() as u64,
                });
            }
            carry.extend_from_slice(rest);
        }
    }
    Ok(())
}

impl Compress {
    fn new(compressed: Compressed, effort: Effort) -> Compress {
        if let Some(stored) = effort.stored(compressed) {
            return Compress::Stored(stored);
        }
        match compressed {
            Compressed::Gzip => Compress::Gzip(GzEncoder::new(Vec::new(), effort.flate_level())),
            Compressed::Deflate => Compress::Zlib(ZlibEncoder::new(Vec::new(), effort.flate_level())),
            // Streamed content's length is not known ahead.
            Compressed::Br => Compress::Brotli(Box::new(brotli_writer(Vec::new(), None, effort))),
        }
    }

    fn write(&mut self, bytes: &[u8]) -> Vec<u8> {
        match self {
            Compress::Stored(s) => {
                let mut out = Vec::new();
                s.write(bytes, &mut out);
                out
            }
            Compress::Gzip(e) => {
                e.write_all(bytes).expect(VEC_WRITE);
                std::mem::take(e.get_mut())
            }
            Compress::Zlib(e) => {
                e.write_all(bytes).expect(VEC_WRITE);
                std::mem::take(e.get_mut())
            }
            Compress::Brotli(e) => {
                e.write_all(bytes).expect(VEC_WRITE);
                std::mem::take(e.get_mut())
            }
        }
    }

    fn finish(self) -> Vec<u8> {
        match self {
            Compress::Stored(s) => {
                let mut out = Vec::new();
                s.finish(&mut out);
                out
            }
            Compress::Gzip(e) => e.finish().expect(VEC_WRITE),
            Compress::Zlib(e) => e.finish().expect(VEC_WRITE),
            Compress::Brotli(e) => e.into_inner(),
        }
    }
}

/// The length of the UTF-8 sequence `lead` starts (1 for a byte that
/// starts none: the validator then refuses it).
fn utf8_length(lead: u8) -> usize {
    match lead {
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf7 => 4,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// Text that compresses, with a period longer than every window.
    fn text(len: usize) -> Vec<u8> {
        super::super::periodic_text(len, |i, word| {
            format!("entry {i}: {word} brown foxes, {} lazy dogs\n", word % 89)
        })
    }

    /// How the output drains while one piece is encoded: two milliseconds
    /// pass, and output is still queued when the next piece is due, or
    /// not.
    #[derive(Clone, Copy)]
    enum Link {
        /// The transport takes everything at once.
        Fast,
        /// The transport's buffer is full three pieces of four: output
        /// waits on it.
        Slow,
    }

    /// Encodes `content` in 64 KiB pieces, each told how the output
    /// drained over the millisecond before it, `links` in turn for each
    /// eighth of the content; returns the text.
    fn paced(encoding: Encoding, content: &[u8], links: &[Link]) -> Vec<u8> {
        let mut encoder = ContentEncoder::new(encoding);
        let mut at = crate::test_origin::origin();
        let mut out = Vec::new();
        let pieces = content.chunks(64 * 1024).collect::<Vec<_>>();
        for (i, piece) in pieces.iter().enumerate() {
            // Under 50 MB/s: a link worth compressing for.
            at += Duration::from_millis(2);
            let pending = match links[i * links.len() / pieces.len()] {
                Link::Fast => 0,
                Link::Slow if i % 4 == 3 => 0,
                Link::Slow => 100_000,
            };
            encoder.drained(Drain { at, pending });
            encoder.encode(piece, &mut out).unwrap();
        }
        encoder.finish(&mut out).unwrap();
        out
    }

    fn decoded(encoding: Encoding, text: &[u8]) -> Vec<u8> {
        let mut decoder = ContentDecoder::new(encoding, 1 << 26);
        let mut out = Vec::new();
        for piece in text.chunks(10_000) {
            decoder.decode(piece, &mut out, usize::MAX).unwrap();
        }
        assert!(decoder.finish(&mut out, usize::MAX).unwrap());
        out
    }

    const COMPRESSED: [Encoding; 3] = [Encoding::Gzip, Encoding::Deflate, Encoding::Br];

    #[test]
    fn d19_a_fast_link_gets_the_bytes_as_they_are_a_slow_one_compressed() {
        let content = text(4 << 20);
        for encoding in COMPRESSED {
            let fast = paced(encoding, &content, &[Link::Fast]);
            let slow = paced(encoding, &content, &[Link::Slow]);
            // Base64 of stored blocks: four thirds of the content.
            assert!(
                fast.len() >= content.len() * 4 / 3,
                "{encoding}: {} fast",
                fast.len()
            );
            // The first stretches go stored, until the wait shows.
            assert!(slow.len() * 2 < fast.len(), "{encoding}: {} slow", slow.len());
            assert!(decoded(encoding, &fast) == content, "{encoding} fast");
            assert!(decoded(encoding, &slow) == content, "{encoding} slow");
        }
    }

    #[test]
    fn d19_a_stream_whose_effort_changes_midway_decodes_to_the_content() {
        use Link::{Fast, Slow};
        let content = text(6 << 20);
        for encoding in COMPRESSED {
            let text = paced(
                encoding,
                &content,
                &[Fast, Slow, Slow, Fast, Slow, Fast, Fast, Slow],
            );
            assert!(decoded(encoding, &text) == content, "{encoding}");
            assert!(
                crate::message::codec::decode(std::str::from_utf8(&text).unwrap(), encoding, 1 << 26)
                    == Ok(content.clone()),
                "{encoding}, decoded whole"
            );
            let (fast, slow) = (
                paced(encoding, &content, &[Fast]).len(),
                paced(encoding, &content, &[Slow]).len(),
            );
            assert!(
                slow < text.len() && text.len() < fast,
                "{encoding}: {slow} < {} < {fast}",
                text.len()
            );
        }
    }

    #[test]
    fn d19_random_bytes_stay_stored_and_identity_is_unpaced() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let random: Vec<u8> = (0..1 << 20)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        for encoding in COMPRESSED {
            let text = paced(encoding, &random, &[Link::Slow]);
            assert!(text.len() >= random.len() * 4 / 3, "{encoding}");
            assert!(decoded(encoding, &text) == random, "{encoding}");
        }
        let content = text(200_000);
        let text = paced(Encoding::Identity, &content, &[Link::Slow]);
        let mut unpaced = ContentEncoder::new(Encoding::Identity);
        let mut expected = Vec::new();
        unpaced.encode(&content, &mut expected).unwrap();
        assert!(text == expected, "identity is escaped text, paced or not");
    }
}
