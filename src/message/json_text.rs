//! The text of a JSON string as this crate writes it: what must be escaped
//! is escaped exactly as `serde_json` escapes it (`\"`, `\\`, the five
//! short forms `\b \t \n \f \r`, and `\u00XX` in lower-case hex for the
//! other control characters); every other character is copied as it is,
//! non-ASCII included (D4: the text is UTF-8 on the wire).
//!
//! Whole messages and streamed content (D19) both go through here, so a
//! large text's transfer runs at this pass's speed. Text is mostly plain,
//! with an escape every line or so. Where the processor has AVX-512, long
//! text is escaped sixty-four bytes at a time with no branch on its
//! escapes: the bytes are spread over the slots of their escaped text, a
//! half-block in one instruction. Elsewhere sixteen bytes at a time are compared with
//! every byte to escape at once (SSE2 on x86-64, byte by byte elsewhere),
//! each sixteen go to the output whole, and each escape is written over
//! what follows it there: no call to copy a short run, no branch per byte.
//! Fewer than thirty-two bytes (a key, a header value, a tail) are
//! checked a word at a time; the search for the next escape, which the
//! readers also use to find a string's end, reads sixteen bytes at a time
//! while that many are left.

use crate::message::words;

/// Appends `s`, escaped, to `out` (without the surrounding quotes).
pub(crate) fn escape(s: &str, out: &mut Vec<u8>) {
    escape_utf8(s.as_bytes(), out);
}

/// How many bytes the search reads at a time.
const CHUNK: usize = 16;

/// The most one chunk's escaping writes past where it starts: each of its
/// sixteen bytes escaped in six, and the sixteen bytes written after the
/// last escape.
const CHUNK_ROOM: usize = CHUNK * 6 + CHUNK;

/// [`escape`] for bytes the caller knows to be UTF-8: every byte that is
/// not escaped is copied as it is, so UTF-8 in is UTF-8 out.
// Out of line: every string a message writes calls it, and the writers
// around it stay small enough to be inlined themselves.
#[inline(never)]
pub(crate) fn escape_utf8(bytes: &[u8], out: &mut Vec<u8>) {
    if bytes.len() < 2 * CHUNK {
        // A key, a header value, a status message: most strings.
        escape_short(bytes, out);
    } else {
        escape_long(bytes, out);
    }
}

/// [`escape_utf8`] for thirty-two bytes or more: content, mostly.
#[inline(never)]
fn escape_long(bytes: &[u8], out: &mut Vec<u8>) {
    let mut rest = bytes;
    if rest.len() >= BLOCK {
        rest = words::wide(
            #[inline(always)]
            |lanes| escape_blocks(rest, out, lanes),
        );
    }
    escape_chunked(rest, out);
}

/// [`escape_utf8`] without AVX-512: sixteen bytes at a time, then a word
/// at a time.
fn escape_chunked(bytes: &[u8], out: &mut Vec<u8>) {
    let mut rest = bytes;
    while rest.len() >= 2 * CHUNK {
        // Room for the rest written plainly, an eighth more for its
        // escapes, and the most a chunk writes; more, later, if escapes
        // are denser.
        out.reserve(rest.len() + rest.len() / 8 + CHUNK_ROOM);
        rest = escape_chunks(rest, out);
    }
    escape_short(rest, out);
}

/// How many bytes [`escape_blocks`] reads at once.
const BLOCK: usize = 64;

/// Escapes the front of `bytes` onto `out` a block at a time where `lanes`
/// has AVX-512 (else nothing): what is left, fewer than [`BLOCK`] bytes
/// or nothing.
#[inline(always)]
fn escape_blocks<'a>(bytes: &'a [u8], out: &mut Vec<u8>, lanes: words::Lanes) -> &'a [u8] {
    #[cfg(target_arch = "x86_64")]
    if lanes.avx512() {
        // Room for the text written plainly and an eighth more for its
        // escapes; `escape_avx512` makes more if they are denser.
        out.reserve(bytes.len() + bytes.len() / 8 + BLOCK);
        // SAFETY: only `wide` makes a `Lanes` that says AVX-512, having
        // found the processor has it.
        #[allow(unsafe_code)]
        return unsafe { escape_avx512(bytes, out) };
    }
    let _ = (lanes, &out);
    bytes
}

/// The letter of each control character JSON writes as a backslash and a
/// letter (`\b \t \n \f \r`), zero for the others, indexed by the byte:
/// read off [`ESCAPED`], which says how each is written.
const LETTERS: [u8; 64] = {
    let mut letters = [0u8; 64];
    let mut b = 0;
    while b < 0x20 {
        if ESCAPED[b][7] == 2 {
            letters[b] = ESCAPED[b][1];
        }
        b += 1;
    }
    letters
};

/// [`escape_blocks`] with AVX-512, with no branch on the escapes: a block
/// of sixty-four bytes classified at once, each byte to escape given a
/// backslash before it by spreading the bytes out over the slots of their
/// escaped text (where the backslashes go is worked out from the bits of
/// the escapes, `pdep` then `pext`), and a control character turned into
/// its letter; each half of the block is spread and written whole (its
/// escaped text fits one vector). A block with a control character that
/// takes `\u00XX` goes the short way.
///
/// # Safety
/// The processor must have AVX-512 F, BW, VBMI and VBMI2, BMI2 and
/// POPCNT.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,avx512vbmi2,bmi2,popcnt")]
#[inline]
#[allow(unsafe_code)]
unsafe fn escape_avx512<'a>(bytes: &'a [u8], out: &mut Vec<u8>) -> &'a [u8] {
    use std::arch::x86_64::{
        __m512i, _mm512_cmpeq_epi8_mask, _mm512_cmple_epu8_mask, _mm512_mask_blend_epi8,
        _mm512_mask_expand_epi8, _mm512_permutexvar_epi8, _mm512_set1_epi8, _mm512_shuffle_i64x2,
        _mm512_storeu_si512, _pdep_u64, _pext_u64,
    };
    const EVEN: u64 = 0x5555_5555_5555_5555;
    // The escaped text of the 32 bytes at the front of `text`, whose
    // escapes are the low bits of `escapes`: (the text, its length).
    let spread = |text: __m512i, escapes: u64| {
        // A bit for each slot of the escaped text: two for a byte to
        // escape (its backslash, then itself), one for any other.
        let slots = _pdep_u64(escapes, EVEN);
        let backslashes = _pext_u64(slots, slots | !EVEN);
        let escaped = _mm512_mask_expand_epi8(_mm512_set1_epi8(b'\\' as i8), !backslashes, text);
        (escaped, BLOCK / 2 + escapes.count_ones() as usize)
    };
    let letters = words::load64(&LETTERS);
    let mut at = 0;
    // The escaped text's end in `out`, whose length is set once a run of
    // blocks is written: the vector's own length is not reloaded after
    // every store.
    let mut len = out.len();
    while let Some(block) = bytes.get(at..at + BLOCK) {
        let block = block.first_chunk::<BLOCK>().expect("a block");
        let v = words::load64(block);
        let controls = _mm512_cmple_epu8_mask(v, _mm512_set1_epi8(0x1f));
        let escapes = controls
            | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8))
            | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8));
        let letter = _mm512_permutexvar_epi8(v, letters);
        if controls & _mm512_cmpeq_epi8_mask(letter, _mm512_set1_epi8(0)) != 0 {
            // SAFETY: the bytes up to `len` are written (below).
            unsafe { out.set_len(len) };
            escape_short(block, out);
            len = out.len();
            at += BLOCK;
            continue;
        }
        let text = _mm512_mask_blend_epi8(controls, v, letter);
        let (low, low_len) = spread(text, escapes & 0xffff_ffff);
        let (high, high_len) = spread(_mm512_shuffle_i64x2::<0b11_10_11_10>(text, text), escapes >> 32);
        if out.capacity() - len < 2 * BLOCK {
            // SAFETY: the bytes up to `len` are written (below).
            unsafe { out.set_len(len) };
            out.reserve(bytes.len() - at + 2 * BLOCK);
        }
        // SAFETY: there is room for 128 bytes past `len` (above), the
        // first `low_len` written by the first store and the next
        // `high_len` by the second; the stores ask for no alignment.
        unsafe {
            _mm512_storeu_si512(out.as_mut_ptr().add(len).cast(), low);
            _mm512_storeu_si512(out.as_mut_ptr().add(len + low_len).cast(), high);
        }
        len += low_len + high_len;
        at += BLOCK;
    }
    // SAFETY: as above.
    unsafe { out.set_len(len) };
    &bytes[at..]
}

/// Escapes `bytes` sixteen at a time onto `out`, while thirty-two are left
/// (what follows an escape is written from the bytes themselves, sixteen
/// at once, which may reach into the next chunk) and `out`'s spare room
/// holds [`CHUNK_ROOM`] (so that no chunk grows it): what is left of
/// `bytes`.
///
/// Each chunk is read at a fixed place, and its flags say where all its
/// escapes are: no read waits for the last chunk's escapes to be found.
/// The chunk goes to `out` whole; at each escape, `out` is cut back to
/// the plain bytes before it, the escape written, and the sixteen bytes
/// after it written again; at the end `out` is cut back to the chunk's
/// own bytes.
fn escape_chunks<'a>(bytes: &'a [u8], out: &mut Vec<u8>) -> &'a [u8] {
    let mut at = 0;
    while out.capacity() - out.len() >= CHUNK_ROOM
        && let Some(ahead) = bytes.get(at..at + 2 * CHUNK)
    {
        let (chunk, _) = ahead.split_first_chunk::<CHUNK>().expect("thirty-two bytes");
        at += CHUNK;
        out.extend_from_slice(chunk);
        let mut flags = flags(chunk);
        if flags == 0 {
            continue;
        }
        // Where the chunk's bytes from `from` on stand in `out`.
        let mut from = 0;
        let mut written_at = out.len() - CHUNK;
        while flags != 0 {
            let escape_at = flags.trailing_zeros() as usize;
            flags &= flags - 1;
            let escaped = &ESCAPED[usize::from(chunk[escape_at] & 0x7f)];
            out.truncate(written_at + (escape_at - from));
            out.extend_from_slice(escaped);
            out.truncate(out.len() - escaped.len() + usize::from(escaped[7]));
            from = escape_at + 1;
            written_at = out.len();
            out.extend_from_slice(&ahead[from..from + CHUNK]);
        }
        out.truncate(written_at + (CHUNK - from));
    }
    &bytes[at..]
}

/// How each byte a JSON string must escape is written, as [`escape_short`]
/// writes it: the escape's bytes, padded to seven, then its length. Bytes
/// that need no escape have no entry that is read.
const ESCAPED: [[u8; 8]; 0x80] = {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut table = [[0u8; 8]; 0x80];
    let mut b = 0;
    while b < 0x20 {
        table[b] = [b'\\', b'u', b'0', b'0', HEX[b >> 4], HEX[b & 0xf], 0, 6];
        b += 1;
    }
    table[0x08] = [b'\\', b'b', 0, 0, 0, 0, 0, 2];
    table[0x09] = [b'\\', b't', 0, 0, 0, 0, 0, 2];
    table[0x0a] = [b'\\', b'n', 0, 0, 0, 0, 0, 2];
    table[0x0c] = [b'\\', b'f', 0, 0, 0, 0, 0, 2];
    table[0x0d] = [b'\\', b'r', 0, 0, 0, 0, 0, 2];
    table[b'"' as usize] = [b'\\', b'"', 0, 0, 0, 0, 0, 2];
    table[b'\\' as usize] = [b'\\', b'\\', 0, 0, 0, 0, 0, 2];
    table
};

/// A bit for each byte of `chunk` a JSON string must escape, the first
/// byte's lowest.
#[inline]
fn flags(chunk: &[u8; CHUNK]) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        // SAFETY: the build targets SSE2 (every x86-64 processor has it),
        // the one feature `flags_sse2` asks for.
        #[allow(unsafe_code)]
        unsafe {
            flags_sse2(chunk)
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    flags_bytewise(chunk)
}

/// [`flags`] in one comparison of all sixteen bytes with each of `"`, `\`
/// and "at most 0x1f" (SSE2 compares bytes as signed, so that one is an
/// unsigned minimum that leaves a control byte as it was).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn flags_sse2(chunk: &[u8; CHUNK]) -> u32 {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8};
    let bytes = words::load16(chunk);
    let control = _mm_cmpeq_epi8(_mm_min_epu8(bytes, _mm_set1_epi8(0x1f)), bytes);
    let quote = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(b'"' as i8));
    let backslash = _mm_cmpeq_epi8(bytes, _mm_set1_epi8(b'\\' as i8));
    _mm_movemask_epi8(_mm_or_si128(control, _mm_or_si128(quote, backslash))) as u32
}

/// [`flags`] with no vector instructions, byte by byte (which compilers
/// vectorise where they can).
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
fn flags_bytewise(chunk: &[u8; CHUNK]) -> u32 {
    chunk
        .iter()
        .enumerate()
        .fold(0, |flags, (at, &b)| flags | u32::from(must_escape(b)) << at)
}

/// Flags the bytes of `word` a JSON string must escape. Only the lowest
/// flag is sure to be one (see [`words`]).
fn word_flags(word: u64) -> u64 {
    words::below(word, 0x20) | words::equal(word, b'"') | words::equal(word, b'\\')
}

/// [`escape_utf8`] a word at a time, for text shorter than a chunk: each
/// run between escapes copied whole, each escape as [`ESCAPED`] has it.
fn escape_short(bytes: &[u8], out: &mut Vec<u8>) {
    // Most short strings (a resource, a status message, a header value)
    // have nothing to escape: a few words say so, where a search would
    // read their last bytes one by one.
    if all_plain(bytes) {
        out.extend_from_slice(bytes);
        return;
    }
    let mut from = 0;
    loop {
        let at = next_to_escape(bytes, from);
        out.extend_from_slice(&bytes[from..at]);
        let Some(&b) = bytes.get(at) else {
            return;
        };
        let escaped = &ESCAPED[usize::from(b & 0x7f)];
        out.extend_from_slice(&escaped[..usize::from(escaped[7])]);
        from = at + 1;
    }
}

/// Whether `bytes`, of four or more, hold no byte to escape; `false` for
/// fewer. They are read as words, the last two overlapping the others:
/// a word flags something exactly when one of its bytes must be escaped.
fn all_plain(bytes: &[u8]) -> bool {
    let n = bytes.len();
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"));
    let half = |at: usize| {
        u64::from(u32::from_le_bytes(
            bytes[at..at + 4].try_into().expect("four bytes"),
        ))
    };
    let flags = if n >= 8 {
        let (at, found) = words::first_flagged(bytes, 0, word_flags);
        if at < n {
            found | word_flags(word(n - 8))
        } else {
            found
        }
    } else if n >= 4 {
        word_flags(half(0) | half(n - 4) << 32)
    } else {
        return false;
    };
    flags == 0
}

/// Whether a JSON string must escape `b`: a control character, `"` or `\`.
fn must_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Where the first byte to escape at or after `from` stands, or the end:
/// sixteen bytes at a time while that many are left (one comparison finds
/// the end of most strings of a message), then a word at a time, then
/// byte by byte.
pub(crate) fn next_to_escape(bytes: &[u8], from: usize) -> usize {
    let mut at = from;
    while let Some(chunk) = bytes.get(at..).and_then(<[u8]>::first_chunk::<CHUNK>) {
        let found = flags(chunk);
        if found != 0 {
            return at + found.trailing_zeros() as usize;
        }
        at += CHUNK;
    }
    let (mut at, found) = words::first_flagged(bytes, at, word_flags);
    if found != 0 {
        return at + words::lowest(found);
    }
    while at < bytes.len() && !must_escape(bytes[at]) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(s: &str) -> String {
        let mut out = Vec::new();
        escape(s, &mut out);
        String::from_utf8(out).expect("UTF-8 in, UTF-8 out")
    }

    fn serde(s: &str) -> String {
        let quoted = serde_json::to_string(s).expect("a string");
        quoted[1..quoted.len() - 1].to_string()
    }

    #[test]
    fn every_ascii_character_at_every_position_of_a_word_is_written_as_serde_json_writes_it() {
        for b in 0u8..0x80 {
            let c = char::from(b);
            for before in 0..17 {
                let text = format!("{}{c}{}", "a".repeat(before), "é".repeat(before % 3));
                assert_eq!(escaped(&text), serde(&text), "{b:#04x} after {before}");
            }
        }
    }

    #[test]
    fn mixed_text_is_written_as_serde_json_writes_it() {
        let samples = [
            "",
            "plain text, no escapes at all, long enough for several words",
            "line one\nline two\r\n\ttabbed \"quoted\" back\\slash \u{7f} \u{1} \u{1f}",
            "ünïcödé → 日本語 \u{2028}\u{2029} 🎉 \"",
            "\"\"\"\"\"\"\"\"\"\\\\\\\\\\\\\\\\",
            "\u{0}\u{1}\u{2}\u{3}\u{4}\u{5}\u{6}\u{7}\u{8}\u{9}\u{a}\u{b}\u{c}\u{d}\u{e}\u{f}",
        ];
        for text in samples {
            assert_eq!(escaped(text), serde(text), "{text:?}");
        }
    }

    #[test]
    fn long_text_is_written_as_serde_json_writes_it_however_dense_its_escapes() {
        // Escapes from none to every byte (each control character grows
        // sixfold).
        let pieces = ["plain words ", "\"", "\n", "\u{1}", "é", "\\", "🎉"];
        for every in 1..=pieces.len() {
            for len in [256, 257, 1000, 4099] {
                let text: String = (0..len).map(|n| pieces[n % every]).collect();
                assert_eq!(escaped(&text), serde(&text), "{every} {len}");
            }
        }
    }

    /// The escaper written as plainly as it can be: byte by byte, each
    /// escape as serde_json writes it. The oracle for the fast one.
    fn reference(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for &b in bytes {
            match b {
                b'"' => out.extend_from_slice(b"\\\""),
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0x08 => out.extend_from_slice(b"\\b"),
                0x0c => out.extend_from_slice(b"\\f"),
                0..0x20 => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
                _ => out.push(b),
            }
        }
        out
    }

    /// `bytes` escaped, appended to what `out` held (and taken off again).
    fn escaped_bytes(bytes: &[u8], out: &mut Vec<u8>) -> Vec<u8> {
        let start = out.len();
        escape_utf8(bytes, out);
        out.split_off(start)
    }

    #[test]
    fn every_byte_value_at_every_position_of_every_length_below_a_hundred_is_escaped_as_the_reference_does() {
        // Plain text around the byte, ASCII and not, so that the byte is
        // the only one to escape.
        let plain: Vec<u8> = "plain é text → ".bytes().cycle().take(100 + 16).collect();
        // Aligned every way: the text starts at each offset of a buffer.
        let mut buffer = [0u8; 100 + 16];
        let mut out = Vec::new();
        for b in 0..=u8::MAX {
            for len in 0..100 {
                for at in 0..len {
                    let align = (usize::from(b) + len + at) % 16;
                    let text = &mut buffer[align..align + len];
                    text.copy_from_slice(&plain[..len]);
                    text[at] = b;
                    assert_eq!(
                        escaped_bytes(text, &mut out),
                        reference(text),
                        "{b:#04x} at {at} of {len} from {align}"
                    );
                }
            }
        }
    }

    #[test]
    fn escapes_at_every_alignment_and_length_below_a_hundred_are_escaped_as_the_reference_does() {
        // Every length from every offset of a buffer, and in each a run of
        // escapes, of each kind, that starts at each place of a chunk:
        // escapes on both sides of a chunk's end, and one after another.
        let pieces: [&[u8]; 4] = [b"\"", b"\\", b"\n", b"\x01"];
        let mut buffer = [b'x'; 100 + 16];
        let mut out = Vec::new();
        for align in 0..16 {
            for len in 0..100 {
                for run in 0..4 {
                    for first in 0..=len.min(34) {
                        let text = &mut buffer[align..align + len];
                        text.fill(b'x');
                        for (n, byte) in text.iter_mut().skip(first).take(run * 3).enumerate() {
                            *byte = pieces[(n + first) % 4][0];
                        }
                        assert_eq!(
                            escaped_bytes(text, &mut out),
                            reference(text),
                            "{len} from {align}, {run} at {first}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_vector_search_flags_what_the_byte_search_flags() {
        for b in 0..=u8::MAX {
            for at in 0..CHUNK {
                let mut chunk = [b'a'; CHUNK];
                chunk[at] = b;
                // A second byte to escape, after it.
                if at + 3 < CHUNK {
                    chunk[at + 3] = b'"';
                }
                assert_eq!(flags(&chunk), flags_bytewise(&chunk), "{b:#04x} at {at}");
            }
        }
    }

    #[test]
    fn text_escaped_into_a_full_buffer_is_appended_whole() {
        // The room runs out mid-text: the escaper takes more and goes on.
        let text: Vec<u8> = b"\x01\"\\".iter().copied().cycle().take(1000).collect();
        let mut out = b"before".to_vec();
        out.shrink_to_fit();
        escape_utf8(&text, &mut out);
        let mut expected = b"before".to_vec();
        expected.extend_from_slice(&reference(&text));
        assert_eq!(out, expected);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_from_any_offset_are_escaped_as_the_reference_does(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            align in 0usize..16,
        ) {
            let mut buffer = vec![0u8; align];
            buffer.extend_from_slice(&bytes);
            let mut out = Vec::new();
            proptest::prop_assert_eq!(escaped_bytes(&buffer[align..], &mut out), reference(&bytes));
        }

        /// Processors without AVX-512 take the sixteen-byte chunks all the
        /// way: the same text.
        #[test]
        fn without_avx512_any_bytes_are_escaped_as_the_reference_does(
            bytes in proptest::collection::vec(
                proptest::sample::select(b"ab\"\\\n\x00\x1f\x7f\xc3\xa9 plain text".to_vec()),
                0..700,
            ),
        ) {
            let mut out = b"before".to_vec();
            escape_chunked(&bytes, &mut out);
            proptest::prop_assert_eq!(&out[..6], b"before");
            proptest::prop_assert_eq!(&out[6..], &reference(&bytes)[..]);
        }

        #[test]
        fn dense_escapes_are_escaped_as_the_reference_does(
            bytes in proptest::collection::vec(proptest::sample::select(b"ab\"\\\n\x00\x1f\x7f\xc3\xa9".to_vec()), 0..300),
        ) {
            let mut out = Vec::new();
            proptest::prop_assert_eq!(escaped_bytes(&bytes, &mut out), reference(&bytes));
        }

        #[test]
        fn any_text_is_written_as_serde_json_writes_it(text in "\\PC*|[\\x00-\\x7f]*") {
            proptest::prop_assert_eq!(escaped(&text), serde(&text));
        }

        #[test]
        fn any_long_text_is_written_as_serde_json_writes_it(text in "(\\PC|[\\x00-\\x1f\"\\\\]){200,700}") {
            proptest::prop_assert_eq!(escaped(&text), serde(&text));
        }
    }
}
