//! Body encodings (D9): `identity` text, or base64 of gzip (RFC 1952),
//! deflate (zlib, RFC 1950) or br (RFC 7932). Decoding stops at the decoded
//! size limit (D3) and never allocates past it.

use std::fmt;
use std::io::{self, Read, Write};

use brotli::enc::StandardAlloc;
use brotli::{BrotliDecompressStream, BrotliResult, BrotliState};
use flate2::bufread::GzDecoder;
use flate2::write::{GzEncoder, ZlibEncoder};
use flate2::{Compression, Decompress, FlushDecompress, Status};

use super::encoding::Compressed;
use super::stored::Stored;
use crate::message::{Encoding, ValueError};

/// Why `content` could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Not valid base64, or not a valid compressed stream (`400`, D5 level 4).
    Corrupt(ValueError),
    /// The decoded bytes would pass the limit (`413`, D3).
    TooLarge {
        /// The limit that was reached, in bytes.
        limit: usize,
    },
}

impl fmt::Display for DecodeError {
    /// `is not valid base64 (…)`, `decodes to more than the limit of N
    /// bytes`: phrased to follow the field's name, as [`ValueError`] is.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Corrupt(why) => why.fmt(f),
            DecodeError::TooLarge { limit } => write!(f, "decodes to more than the limit of {limit} bytes"),
        }
    }
}

impl std::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DecodeError::Corrupt(why) => Some(why),
            DecodeError::TooLarge { .. } => None,
        }
    }
}

/// Decodes a `content` string written in `encoding` into bytes, refusing to
/// produce more than `limit` bytes.
///
/// - `identity`: the text's UTF-8 bytes, also held to `limit`.
/// - `gzip`, `deflate`, `br`: standard padded base64 (RFC 4648 §4) of the
///   compressed bytes. Whitespace and line breaks inside the base64 are
///   refused, as RFC 4648 §3.3 asks unless a protocol says otherwise, and D9
///   does not: a JSON string needs no line wrapping. The base64 decodes to at
///   most 3/4 of `content`, which the message size limit (D3) already bounds.
/// - The empty string is the empty body in every encoding: D9 makes a missing
///   `content` mean `""` whatever the encoding says.
/// - `gzip` may hold several members one after the other (RFC 1952 §2.2);
///   anything else after the stream, and any truncated or corrupt stream, is
///   [`DecodeError::Corrupt`].
///
/// Decompression stops as soon as the output would pass `limit`, and the
/// output buffer never grows past `limit` bytes (D3), so a small "bomb"
/// costs at most `limit` bytes of memory and the time to inflate that much.
pub fn decode(content: &str, encoding: Encoding, limit: usize) -> Result<Vec<u8>, DecodeError> {
    if content.is_empty() {
        return Ok(Vec::new());
    }
    let decompress = match encoding {
        Encoding::Identity if content.len() > limit => return Err(DecodeError::TooLarge { limit }),
        Encoding::Identity => return Ok(content.as_bytes().to_vec()),
        Encoding::Gzip => inflate_gzip,
        Encoding::Deflate => inflate_zlib,
        Encoding::Br => decompress_brotli,
    };
    let compressed = super::base64::decode(content.as_bytes()).map_err(corrupt)?;
    let mut output = BoundedOutput::new(limit);
    decompress(&compressed, &mut output)?;
    Ok(output.bytes)
}

/// Encodes `bytes` as the `content` string of `encoding`. `Identity`
/// requires UTF-8: the caller checks; as a last resort, invalid sequences
/// are replaced here by U+FFFD rather than failing. The compressed encodings
/// work as hard as the bytes repay, judged from the first 4 KiB: bytes as
/// evenly spread as random ones (already compressed) go out stored, other
/// binary at a fast level, text at a balance of speed and size.
pub fn encode(bytes: &[u8], encoding: Encoding) -> String {
    let Some(compressed) = Compressed::of(encoding) else {
        return String::from_utf8_lossy(bytes).into_owned();
    };
    let effort = Effort::judge(bytes);
    if let Some(mut stored) = effort.stored(compressed) {
        let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 8192 + 32);
        stored.write(bytes, &mut out);
        stored.finish(&mut out);
        return super::base64::encode(&out);
    }
    let compressed = match compressed {
        Compressed::Gzip => {
            let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 2 + 64), effort.flate_level());
            write_to_vec(&mut encoder, bytes);
            encoder.finish().expect(VEC_WRITE)
        }
        Compressed::Deflate => {
            let mut encoder =
                ZlibEncoder::new(Vec::with_capacity(bytes.len() / 2 + 64), effort.flate_level());
            write_to_vec(&mut encoder, bytes);
            encoder.finish().expect(VEC_WRITE)
        }
        Compressed::Br => {
            let mut encoder = brotli_writer(
                Vec::with_capacity(bytes.len() / 2 + 64),
                Some(bytes.len()),
                effort,
            );
            write_to_vec(&mut encoder, bytes);
            encoder.into_inner()
        }
    };
    super::base64::encode(&compressed)
}

/// How hard a compressor works on a content, judged from its first bytes.
///
/// Binary content must travel compressed (D9), however little compression
/// gains: images, archives and video already are, and compressing them
/// again spends most of a transfer's time for nothing (zlib's default level
/// runs at ~40 MB/s on such bytes, a stored stream at ~300).
///
/// Ordered from the least work to the most: a streamed content's pace
/// ([`Pace`](super::pace::Pace)) moves between them, up to what the
/// content is judged worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Effort {
    /// The bytes look random (already compressed or encrypted): the
    /// cheapest valid stream, the bytes as they are in the encoding's
    /// framing (deflate's stored blocks, Brotli's uncompressed
    /// meta-blocks), with no compressor.
    Store,
    /// Binary that may compress: a fast level.
    Fast,
    /// Text: the balance of speed and size below.
    Balanced,
}

impl Effort {
    /// What a sample of at least this many bytes is needed to tell; less
    /// is compressed as text would be.
    pub(super) const MIN_SAMPLE: usize = 512;
    /// The most of the content looked at.
    const MAX_SAMPLE: usize = 4096;

    /// Judges a content by its first bytes. Bytes that neither count nor
    /// repeat better than random ones are stored; other bytes that are not
    /// UTF-8 text get a fast level.
    ///
    /// Counting: the chance that two bytes drawn from the sample are equal
    /// is 1/256 for random bytes and many times that for text or machine
    /// code; up to 1.5/256 (an entropy of about 7.4 bits a byte, where JPEG
    /// and deflate output sit) counts as random. Repeating: a pattern of
    /// evenly spread bytes (a table, a repeated block) counts as random but
    /// compresses to almost nothing; the places where four bytes repeat
    /// four bytes seen before, found as a fast compressor finds them (a
    /// hash of each four), tell it apart. Random bytes have almost none.
    pub(super) fn judge(content: &[u8]) -> Effort {
        if content.len() < Self::MIN_SAMPLE {
            return Effort::Balanced;
        }
        let sample = &content[..content.len().min(Self::MAX_SAMPLE)];
        if spread_evenly(sample) && !repeats(sample) {
            return Effort::Store;
        }
        match std::str::from_utf8(sample) {
            Ok(_) => Effort::Balanced,
            // A sequence cut at the end of the sample is still text.
            Err(e) if e.error_len().is_none() => Effort::Balanced,
            Err(_) => Effort::Fast,
        }
    }

    /// The stream that carries the content as it is, in the framing of
    /// `compressed`, for bytes judged not to compress; `None` for others.
    pub(super) fn stored(self, compressed: Compressed) -> Option<Stored> {
        (self == Effort::Store).then(|| Stored::new(compressed))
    }

    /// One step more work, never past `ceiling`.
    pub(super) fn raised(self, ceiling: Effort) -> Effort {
        let next = match self {
            Effort::Store => Effort::Fast,
            Effort::Fast | Effort::Balanced => Effort::Balanced,
        };
        next.min(ceiling)
    }

    /// One step less work.
    pub(super) fn lowered(self) -> Effort {
        match self {
            Effort::Store | Effort::Fast => Effort::Store,
            Effort::Balanced => Effort::Fast,
        }
    }

    /// The Brotli quality of the compressing efforts (see
    /// [`brotli_writer`]); `Store` has no compressor.
    pub(super) fn brotli_quality(self) -> u32 {
        match self {
            Effort::Store | Effort::Fast => 2,
            Effort::Balanced => 5,
        }
    }

    /// The gzip and deflate level: none (stored blocks, which `Stored`
    /// writes without a compressor), zlib's fastest, or its default.
    pub(super) fn flate_level(self) -> Compression {
        match self {
            Effort::Store => Compression::none(),
            Effort::Fast => Compression::fast(),
            Effort::Balanced => Compression::default(),
        }
    }
}

/// Whether the byte values of `sample` are about as evenly spread as
/// random bytes' ([`Effort::judge`]).
fn spread_evenly(sample: &[u8]) -> bool {
    let mut counts = [0u32; 256];
    for &byte in sample {
        counts[usize::from(byte)] += 1;
    }
    let n = sample.len() as u64;
    // Pairs of equal bytes, the pair of a byte with itself included: about
    // n + n²/256 for random bytes.
    let pairs: u64 = counts.iter().map(|&c| u64::from(c) * u64::from(c)).sum();
    pairs * 256 * 2 <= 3 * n * n + 2 * 256 * n
}

/// Whether one place in sixteen or more of `sample` starts four bytes that
/// came before ([`Effort::judge`]): each four is hashed into a table of
/// where it was last seen, as a fast compressor looks for matches.
fn repeats(sample: &[u8]) -> bool {
    const BITS: u32 = 12;
    let mut last = [0u16; 1 << BITS];
    let mut found = 0usize;
    for (at, four) in sample.windows(4).enumerate() {
        let word = u32::from_le_bytes([four[0], four[1], four[2], four[3]]);
        let slot = (word.wrapping_mul(0x9E37_79B1) >> (32 - BITS)) as usize;
        // Positions are kept plus one, so that zero means none.
        let before = usize::from(last[slot]);
        if before > 0 && sample[before - 1..before + 3] == *four {
            found += 1;
        }
        last[slot] = (at + 1) as u16;
    }
    found * 16 >= sample.len()
}

/// The Brotli encoder of every `br` content this crate writes, whole or
/// streamed, into `sink`; `len`, when the whole content is known, may lower
/// the quality and narrows the window.
///
/// Text gets quality 5, a balance of speed and size. Under 1 KiB, quality
/// 5 sets up hash tables that cost ~55 µs before the first byte, more than
/// a whole small exchange, to save a few dozen bytes; quality 3 is about
/// three times faster there (`benches/message.rs`) and as quick to decode.
/// Not quality 1 or 0: their small streams make the decoder set up its
/// whole window, ten times slower for the peer than the encoding saved.
/// Binary that may compress gets quality 2, three times faster than 5 and
/// still a real compressor (bytes that look random get no compressor at
/// all: [`Effort::Store`]).
///
/// The window is what both sides hold, and zero, for the life of a body. A
/// known length gets the smallest window that holds all of it (no loss:
/// nothing lies farther back), from 1 KiB at quality 3 and 128 KiB at
/// quality 5, up to 4 MiB. A stream gets 512 KiB, as
/// nginx's default: a 4 MiB window compresses large text about a tenth
/// better but makes every streamed body, however short, cost 4 MiB on each
/// side, and a server streams many at once.
pub(super) fn brotli_writer(
    sink: Vec<u8>,
    len: Option<usize>,
    effort: Effort,
) -> brotli::CompressorWriter<Vec<u8>> {
    const SMALL_CONTENT: usize = 1024;
    const MAX_WINDOW_BITS: u32 = 22;
    // Quality 5 with a window under 128 KiB (17) switches to a hasher whose
    // tables take milliseconds to set up.
    const MIN_WINDOW_BITS_AT_5: u32 = 17;
    let quality = effort.brotli_quality();
    let (quality, window_bits) = match len {
        Some(len) if len < SMALL_CONTENT => (3, 10),
        Some(len) => {
            // RFC 7932 section 9.1: a window of `bits` holds 2^bits − 16
            // bytes.
            let bits = (MIN_WINDOW_BITS_AT_5..MAX_WINDOW_BITS)
                .find(|&bits| (1usize << bits) - 16 >= len)
                .unwrap_or(MAX_WINDOW_BITS);
            (quality, bits)
        }
        None => (quality, STREAM_WINDOW_BITS),
    };
    brotli::CompressorWriter::new(sink, 4096, quality, window_bits)
}
/// The Brotli window of a streamed content: see [`brotli_writer`].
pub(super) const STREAM_WINDOW_BITS: u32 = 19;

/// Size of the scratch buffer decompressors write into before the output
/// takes the bytes.
pub(super) const CHUNK: usize = 16 * 1024;
pub(super) const VEC_WRITE: &str = "writing into a Vec<u8> cannot fail";

/// Feeds an encoder whose sink is a `Vec`; only the encoder's own bug could
/// make this fail.
fn write_to_vec(encoder: &mut impl Write, bytes: &[u8]) {
    encoder.write_all(bytes).expect(VEC_WRITE);
}

fn corrupt(reason: String) -> DecodeError {
    DecodeError::Corrupt(ValueError::new(reason))
}

/// The decoded bytes, never more than `limit` of them, in a `Vec` whose
/// capacity doubles as it fills but is capped at `limit`.
struct BoundedOutput {
    bytes: Vec<u8>,
    limit: usize,
}

impl BoundedOutput {
    fn new(limit: usize) -> Self {
        BoundedOutput {
            bytes: Vec::new(),
            limit,
        }
    }

    /// Appends `chunk`, or fails with `TooLarge` before it would pass the
    /// limit (nothing is allocated for the refused chunk).
    fn push(&mut self, chunk: &[u8]) -> Result<(), DecodeError> {
        let len = self.bytes.len();
        if chunk.len() > self.limit - len {
            return Err(DecodeError::TooLarge { limit: self.limit });
        }
        if chunk.len() > self.bytes.capacity() - len {
            let target = (self.bytes.capacity() * 2)
                .max(len + chunk.len())
                .max(CHUNK)
                .min(self.limit);
            self.bytes.reserve_exact(target - len);
        }
        self.bytes.extend_from_slice(chunk);
        Ok(())
    }

    /// Drains `reader` into the output, chunk by chunk.
    fn read_from(&mut self, reader: &mut impl Read, what: &str) -> Result<(), DecodeError> {
        let mut chunk = [0u8; CHUNK];
        loop {
            match reader.read(&mut chunk) {
                Ok(0) => return Ok(()),
                Ok(n) => self.push(&chunk[..n])?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(corrupt(format!("is not a valid {what} stream ({e})"))),
            }
        }
    }
}

/// gzip (RFC 1952): one or more members, CRC-32 and size checked by flate2.
fn inflate_gzip(mut input: &[u8], output: &mut BoundedOutput) -> Result<(), DecodeError> {
    loop {
        let mut member = GzDecoder::new(input);
        output.read_from(&mut member, "gzip")?;
        input = member.into_inner();
        if input.is_empty() {
            return Ok(());
        }
        // Another member must start with the gzip magic bytes; anything else
        // is garbage after the stream.
        if !input.starts_with(&[0x1f, 0x8b]) {
            return Err(corrupt(format!(
                "is not a valid gzip stream ({} bytes follow the end of the stream)",
                input.len()
            )));
        }
    }
}

/// deflate as HTTP means it: a zlib stream (RFC 1950), Adler-32 checked.
/// Driven by hand so that a truncated stream and trailing bytes are caught.
fn inflate_zlib(input: &[u8], output: &mut BoundedOutput) -> Result<(), DecodeError> {
    let mut zlib = Decompress::new(true);
    let mut chunk = [0u8; CHUNK];
    let mut consumed = 0usize;
    loop {
        let (in_before, out_before) = (zlib.total_in(), zlib.total_out());
        let status = zlib
            .decompress(&input[consumed..], &mut chunk, FlushDecompress::None)
            .map_err(|e| corrupt(format!("is not a valid deflate (zlib) stream ({e})")))?;
        // Both deltas are bounded by the slices just passed in.
        let read = (zlib.total_in() - in_before) as usize;
        let written = (zlib.total_out() - out_before) as usize;
        consumed += read;
        output.push(&chunk[..written])?;
        match status {
            Status::StreamEnd if consumed == input.len() => return Ok(()),
            Status::StreamEnd => {
                return Err(corrupt(format!(
                    "is not a valid deflate (zlib) stream ({} bytes follow the end of the stream)",
                    input.len() - consumed
                )));
            }
            Status::Ok | Status::BufError if read == 0 && written == 0 => {
                return Err(corrupt(
                    "is not a valid deflate (zlib) stream (it ends early)".to_owned(),
                ));
            }
            Status::Ok | Status::BufError => {}
        }
    }
}

/// Brotli (RFC 7932), driven by hand for the same reasons as zlib.
fn decompress_brotli(input: &[u8], output: &mut BoundedOutput) -> Result<(), DecodeError> {
    // `new_strict`: RFC 7932 windows only (at most 16 MiB). `new` would also
    // take the non-standard "large window" streams, whose ring buffer may be
    // 1 GiB: a bomb that needs no output to exhaust memory.
    let mut state = BrotliState::new_strict(
        StandardAlloc::default(),
        StandardAlloc::default(),
        StandardAlloc::default(),
    );
    let mut chunk = [0u8; CHUNK];
    let (mut available_in, mut input_offset, mut total_out) = (input.len(), 0usize, 0usize);
    loop {
        let (mut available_out, mut written) = (chunk.len(), 0usize);
        let result = BrotliDecompressStream(
            &mut available_in,
            &mut input_offset,
            input,
            &mut available_out,
            &mut written,
            &mut chunk,
            &mut total_out,
            &mut state,
        );
        output.push(&chunk[..written])?;
        match result {
            BrotliResult::NeedsMoreOutput => {}
            BrotliResult::ResultSuccess if available_in == 0 => return Ok(()),
            BrotliResult::ResultSuccess => {
                return Err(corrupt(format!(
                    "is not a valid br stream ({available_in} bytes follow the end of the stream)"
                )));
            }
            BrotliResult::NeedsMoreInput => {
                return Err(corrupt("is not a valid br stream (it ends early)".to_owned()));
            }
            BrotliResult::ResultFailure => {
                return Err(corrupt("is not a valid br stream".to_owned()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::base64::Engine as _;
    use ::base64::engine::general_purpose::STANDARD;

    const LIMIT: usize = 8 * 1024 * 1024;

    fn reason(e: DecodeError) -> String {
        match e {
            DecodeError::Corrupt(v) => v.reason().to_owned(),
            DecodeError::TooLarge { limit } => format!("too large ({limit})"),
        }
    }

    /// Bytes as random as compressed ones (xorshift).
    fn random(len: usize) -> Vec<u8> {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    #[test]
    fn effort_follows_what_the_bytes_are() {
        assert_eq!(Effort::judge(&random(64 * 1024)), Effort::Store);
        assert_eq!(Effort::judge(&random(Effort::MIN_SAMPLE)), Effort::Store);
        // Too little to judge: compressed as text is.
        assert_eq!(Effort::judge(&random(Effort::MIN_SAMPLE - 1)), Effort::Balanced);
        let text = "jsontp sends every message as one JSON object. ".repeat(200);
        assert_eq!(Effort::judge(text.as_bytes()), Effort::Balanced);
        // Text cut inside a UTF-8 sequence at the end of the sample.
        let accents = "é".repeat(Effort::MAX_SAMPLE);
        assert_eq!(Effort::judge(&accents.as_bytes()[1..]), Effort::Fast);
        assert_eq!(Effort::judge(accents.as_bytes()), Effort::Balanced);
        // Binary with structure: machine-code-like, many zeros.
        let binary: Vec<u8> = (0..8192u32)
            .map(|i| if i % 4 == 0 { (i / 4) as u8 } else { 0 })
            .collect();
        assert_eq!(Effort::judge(&binary), Effort::Fast);
        // Evenly spread but repeating (a table, a pattern): worth compressing.
        let pattern: Vec<u8> = (0..8192u32).map(|i| (i.wrapping_mul(31) ^ 7) as u8).collect();
        assert_eq!(Effort::judge(&pattern), Effort::Fast);
        let mut twice = random(2048);
        twice.extend_from_within(..);
        assert_eq!(Effort::judge(&twice), Effort::Fast);
        // Random bytes with a third of them zero are still worth compressing.
        let mut skewed = random(8192);
        skewed.iter_mut().step_by(3).for_each(|b| *b = 0);
        assert_eq!(Effort::judge(&skewed), Effort::Fast);
    }

    #[test]
    fn random_content_is_stored_and_still_decodes() {
        let content = random(256 * 1024);
        for encoding in [Encoding::Gzip, Encoding::Deflate, Encoding::Br] {
            let text = encode(&content, encoding);
            let compressed = STANDARD.decode(&text).expect("base64");
            // A stored stream: the bytes plus framing, a few bytes per block.
            assert!(
                compressed.len() <= content.len() + content.len() / 500 + 64,
                "{encoding:?}: {} bytes for {}",
                compressed.len(),
                content.len()
            );
            assert_eq!(
                decode(&text, encoding, LIMIT).expect("decodes"),
                content,
                "{encoding:?}"
            );
        }
    }

    fn sample() -> Vec<u8> {
        // Compressible text plus every byte value, 100 KB or so.
        let mut bytes: Vec<u8> = (0..=255u8).collect();
        for i in 0..3000 {
            bytes.extend_from_slice(format!("line {i:06}: the quick brown fox\n").as_bytes());
        }
        bytes
    }

    #[test]
    fn d9_round_trip_every_encoding() {
        let bytes = sample();
        for encoding in [Encoding::Gzip, Encoding::Deflate, Encoding::Br] {
            let content = encode(&bytes, encoding);
            assert!(content.len() < bytes.len(), "{encoding} compresses");
            assert_eq!(decode(&content, encoding, LIMIT), Ok(bytes.clone()), "{encoding}");
            // Exactly at the limit is fine, one byte under is too large.
            assert_eq!(decode(&content, encoding, bytes.len()), Ok(bytes.clone()));
            assert_eq!(
                decode(&content, encoding, bytes.len() - 1),
                Err(DecodeError::TooLarge {
                    limit: bytes.len() - 1
                })
            );
        }
        let text = "héllo, wörld";
        assert_eq!(encode(text.as_bytes(), Encoding::Identity), text);
        assert_eq!(
            decode(text, Encoding::Identity, LIMIT),
            Ok(text.as_bytes().to_vec())
        );
    }

    #[test]
    fn d9_known_vectors_from_other_implementations() {
        // `printf hello | gzip -n | base64`, `printf hello | pigz -z | base64`
        // (zlib), `printf hello | brotli | base64`.
        assert_eq!(
            decode("H4sIAAAAAAAAA8tIzcnJBwCGphA2BQAAAA==", Encoding::Gzip, LIMIT),
            Ok(b"hello".to_vec())
        );
        assert_eq!(
            decode("eJzLSM3JyQcABiwCFQ==", Encoding::Deflate, LIMIT),
            Ok(b"hello".to_vec())
        );
        assert_eq!(decode("CwKAaGVsbG8D", Encoding::Br, LIMIT), Ok(b"hello".to_vec()));
    }

    #[test]
    fn d9_empty_content_is_the_empty_body() {
        for encoding in Encoding::ALL {
            assert_eq!(decode("", encoding, LIMIT), Ok(Vec::new()));
            assert_eq!(decode("", encoding, 0), Ok(Vec::new()));
            let content = encode(b"", encoding);
            assert_eq!(decode(&content, encoding, 0), Ok(Vec::new()), "{encoding}");
        }
    }

    #[test]
    fn d3_identity_is_limited_too() {
        assert_eq!(decode("abcd", Encoding::Identity, 4), Ok(b"abcd".to_vec()));
        assert_eq!(
            decode("abcde", Encoding::Identity, 4),
            Err(DecodeError::TooLarge { limit: 4 })
        );
    }

    #[test]
    fn d5_bad_base64_is_corrupt() {
        for bad in ["not base64!", "aGVsbG8", "aGVs bG8=", "aGVs\nbG8=", "aGVsbG8=="] {
            for encoding in [Encoding::Gzip, Encoding::Deflate, Encoding::Br] {
                let r = reason(decode(bad, encoding, LIMIT).unwrap_err());
                assert!(r.starts_with("is not valid base64 ("), "{bad:?} {encoding}: {r}");
            }
        }
    }

    #[test]
    fn d5_corrupt_streams_are_corrupt_and_say_which() {
        let garbage = STANDARD.encode(b"this is not compressed at all");
        for (encoding, name) in [
            (Encoding::Gzip, "is not a valid gzip stream"),
            (Encoding::Deflate, "is not a valid deflate (zlib) stream"),
            (Encoding::Br, "is not a valid br stream"),
        ] {
            let r = reason(decode(&garbage, encoding, LIMIT).unwrap_err());
            assert!(r.starts_with(name), "{encoding}: {r}");
        }
        // Deflate is the zlib format: a raw deflate stream is refused.
        let mut raw = flate2::write::DeflateEncoder::new(Vec::new(), Compression::default());
        raw.write_all(b"hello hello hello").unwrap();
        let raw = STANDARD.encode(raw.finish().unwrap());
        assert!(
            reason(decode(&raw, Encoding::Deflate, LIMIT).unwrap_err()).starts_with("is not a valid deflate")
        );
    }

    #[test]
    fn d5_truncated_streams_are_corrupt() {
        let bytes = sample();
        for encoding in [Encoding::Gzip, Encoding::Deflate, Encoding::Br] {
            let compressed = STANDARD.decode(encode(&bytes, encoding)).unwrap();
            for cut in [1, 4, compressed.len() / 2, compressed.len() - 1] {
                let content = STANDARD.encode(&compressed[..cut]);
                let r = decode(&content, encoding, LIMIT);
                assert!(
                    matches!(r, Err(DecodeError::Corrupt(_))),
                    "{encoding} cut at {cut}: {r:?}"
                );
            }
        }
    }

    #[test]
    fn d5_corrupted_checksums_are_corrupt() {
        for encoding in [Encoding::Gzip, Encoding::Deflate] {
            let mut compressed = STANDARD.decode(encode(b"hello hello", encoding)).unwrap();
            // The last bytes are the CRC-32/size (gzip) or Adler-32 (zlib).
            let last = compressed.len() - 1;
            compressed[last] ^= 0xff;
            let r = decode(&STANDARD.encode(&compressed), encoding, LIMIT);
            assert!(matches!(r, Err(DecodeError::Corrupt(_))), "{encoding}: {r:?}");
        }
    }

    #[test]
    fn d5_trailing_garbage_is_corrupt() {
        for (encoding, name) in [
            (Encoding::Gzip, "gzip"),
            (Encoding::Deflate, "deflate (zlib)"),
            (Encoding::Br, "br"),
        ] {
            let mut compressed = STANDARD.decode(encode(b"hello", encoding)).unwrap();
            compressed.extend_from_slice(b"JUNK");
            let r = reason(decode(&STANDARD.encode(&compressed), encoding, LIMIT).unwrap_err());
            assert_eq!(
                r,
                format!("is not a valid {name} stream (4 bytes follow the end of the stream)")
            );
        }
    }

    #[test]
    fn rfc1952_several_gzip_members_are_one_body() {
        let mut compressed = STANDARD.decode(encode(b"hello, ", Encoding::Gzip)).unwrap();
        compressed.extend(STANDARD.decode(encode(b"world", Encoding::Gzip)).unwrap());
        assert_eq!(
            decode(&STANDARD.encode(&compressed), Encoding::Gzip, LIMIT),
            Ok(b"hello, world".to_vec())
        );
        // A second member that is only the magic bytes is a corrupt member.
        let mut compressed = STANDARD.decode(encode(b"hello", Encoding::Gzip)).unwrap();
        compressed.extend_from_slice(&[0x1f, 0x8b]);
        let r = decode(&STANDARD.encode(&compressed), Encoding::Gzip, LIMIT);
        assert!(matches!(r, Err(DecodeError::Corrupt(_))), "{r:?}");
    }

    /// The window a Brotli stream declares in its first bits (RFC 7932
    /// section 9.1), which is what its decoder sets up.
    fn declared_window_bits(stream: &[u8]) -> u32 {
        let bits = u32::from(stream[0]) | u32::from(stream[1]) << 8;
        if bits & 1 == 0 {
            return 16;
        }
        match (bits >> 1) & 7 {
            0 => match (bits >> 4) & 7 {
                0 => 17,
                m => 8 + m,
            },
            n => 17 + n,
        }
    }

    #[test]
    fn brotli_windows_fit_known_lengths_and_streams_get_512_kib() {
        let text = sample();
        let text = text.repeat((6 << 20) / text.len() + 1);
        for (len, bits) in [
            (0, 10),
            (100, 10),
            (1023, 10),
            (1024, 17),
            (131_056, 17),
            (131_057, 18),
            (6 << 20, 22),
        ] {
            let compressed = STANDARD.decode(encode(&text[..len], Encoding::Br)).unwrap();
            assert_eq!(declared_window_bits(&compressed), bits, "{len} bytes");
            let decoded = decode(&STANDARD.encode(&compressed), Encoding::Br, LIMIT).unwrap();
            assert_eq!(decoded, &text[..len]);
        }
        let mut streamed = brotli_writer(Vec::new(), None, Effort::Balanced);
        streamed.write_all(b"hello").unwrap();
        assert_eq!(declared_window_bits(&streamed.into_inner()), 19);
    }

    #[test]
    fn d9_large_window_brotli_is_not_rfc_7932() {
        let params = brotli::enc::BrotliEncoderParams {
            large_window: true,
            lgwin: 30,
            quality: 5,
            ..Default::default()
        };
        let mut compressed = Vec::new();
        brotli::BrotliCompress(&mut &b"hello hello hello"[..], &mut compressed, &params).unwrap();
        let r = decode(&STANDARD.encode(&compressed), Encoding::Br, LIMIT);
        assert!(matches!(r, Err(DecodeError::Corrupt(_))), "{r:?}");
    }

    #[test]
    fn bounded_output_never_allocates_past_the_limit() {
        let mut out = BoundedOutput::new(40_000);
        for _ in 0..4 {
            out.push(&[7u8; 10_000]).unwrap();
        }
        assert_eq!(out.bytes.len(), 40_000);
        assert!(out.bytes.capacity() <= 40_000);
        assert_eq!(out.push(&[7]), Err(DecodeError::TooLarge { limit: 40_000 }));
        assert_eq!(out.push(&[]), Ok(()));
    }

    #[test]
    fn decode_errors_display_as_a_phrase_and_are_errors() {
        let e = decode("!!", Encoding::Gzip, LIMIT).unwrap_err();
        assert!(e.to_string().starts_with("is not valid base64 ("), "{e}");
        assert!(std::error::Error::source(&e).is_some());
        let e = DecodeError::TooLarge { limit: 4 };
        assert_eq!(e.to_string(), "decodes to more than the limit of 4 bytes");
        let boxed: Box<dyn std::error::Error> = Box::new(e);
        assert!(boxed.source().is_none());
    }

    #[test]
    fn identity_encode_replaces_invalid_utf8_as_a_last_resort() {
        assert_eq!(encode(b"a\xffb", Encoding::Identity), "a\u{fffd}b");
    }

    #[test]
    fn d9_encoding_names_are_exact() {
        for e in Encoding::ALL {
            assert_eq!(e.as_str().parse::<Encoding>(), Ok(e));
        }
        assert!("GZIP".parse::<Encoding>().is_err());
        assert!("x-gzip".parse::<Encoding>().is_err());
    }
}
