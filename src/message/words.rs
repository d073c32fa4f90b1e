//! Byte searches eight bytes at a time, in a machine word: faster than a
//! byte loop on the short strings of a message, and with no set-up, unlike
//! a vectorised search. Content, where runs between the bytes searched for
//! are long or many, is searched sixteen bytes at a time ([`flags16`]),
//! with SSE2 where the build has it.
//!
//! A flag is the high bit of a byte. The lowest flagged byte of a word is
//! always a true match; higher ones may be false (a borrow runs upwards),
//! so callers take the lowest, or look closer from the word's start.

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Flags the bytes of `word` equal to `byte`.
#[inline]
pub(crate) fn equal(word: u64, byte: u8) -> u64 {
    let x = word ^ (ONES * u64::from(byte));
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// Flags the bytes of `word` below `bound` (at most `0x80`).
#[inline]
pub(crate) fn below(word: u64, bound: u8) -> u64 {
    word.wrapping_sub(ONES * u64::from(bound)) & !word & HIGHS
}

/// Reads `bytes` a word at a time from `from` until `flags` flags one:
/// where that word starts and its flags, or where fewer than eight bytes
/// are left and `0`.
#[inline]
pub(crate) fn first_flagged(bytes: &[u8], from: usize, flags: impl Fn(u64) -> u64) -> (usize, u64) {
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let found = flags(u64::from_le_bytes(word));
        if found != 0 {
            return (at, found);
        }
        at += 8;
    }
    (at, 0)
}

/// The index, within its word, of the lowest flagged byte.
#[inline]
pub(crate) fn lowest(found: u64) -> usize {
    (found.trailing_zeros() / 8) as usize
}

/// How many bytes [`find`] searches a word at a time before it hands over
/// to a vectorised search: most runs it is asked to end (a key, a header
/// value, text between two escapes) end within them, before a vectorised
/// search would have started.
const SHORT: usize = 32;

/// The first byte of `bytes` that `flags` flags: a word at a time within
/// the first [`SHORT`] bytes, then `long` (a vectorised search for the
/// same bytes) over the rest.
#[inline]
pub(crate) fn find(
    bytes: &[u8],
    flags: impl Fn(u64) -> u64,
    long: impl FnOnce(&[u8]) -> Option<usize>,
) -> Option<usize> {
    let short = &bytes[..bytes.len().min(SHORT)];
    let (at, found) = first_flagged(short, 0, &flags);
    if found != 0 {
        return Some(at + lowest(found));
    }
    if at >= SHORT {
        return long(&bytes[at..]).map(|offset| offset + at);
    }
    // Fewer than eight bytes left: zeros above them in the word cannot
    // flag a byte below (a borrow runs upwards), and flags of the zeros
    // themselves are cut off.
    let tail = &bytes[at..];
    if tail.is_empty() {
        return None;
    }
    let mut word = [0u8; 8];
    word[..tail.len()].copy_from_slice(tail);
    let found = flags(u64::from_le_bytes(word)) & (HIGHS >> (8 * (8 - tail.len())));
    (found != 0).then(|| at + lowest(found))
}

/// A bit for each byte of `chunk` equal to one of `targets`, the first
/// byte's lowest (every bit a true match).
#[inline]
pub(crate) fn flags16<const N: usize>(chunk: &[u8; 16], targets: [u8; N]) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        // SAFETY: the build targets SSE2 (every x86-64 processor has it),
        // the one feature `flags16_sse2` asks for.
        #[allow(unsafe_code)]
        unsafe {
            flags16_sse2(chunk, targets)
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    flags16_bytewise(chunk, targets)
}

/// [`flags16`] in one comparison of all sixteen bytes with each target.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn flags16_sse2<const N: usize>(chunk: &[u8; 16], targets: [u8; N]) -> u32 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_movemask_epi8, _mm_or_si128, _mm_set1_epi8, _mm_setzero_si128,
    };
    let bytes = load16(chunk);
    let mut found = _mm_setzero_si128();
    for target in targets {
        found = _mm_or_si128(found, _mm_cmpeq_epi8(bytes, _mm_set1_epi8(target as i8)));
    }
    _mm_movemask_epi8(found) as u32
}

/// The sixteen bytes of `chunk` in a vector register, read without a
/// pointer (the two halves become one unaligned load).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
#[inline]
pub(crate) fn load16(chunk: &[u8; 16]) -> std::arch::x86_64::__m128i {
    let [low, high] = [&chunk[..8], &chunk[8..]].map(|half| {
        let mut word = [0u8; 8];
        word.copy_from_slice(half);
        i64::from_le_bytes(word)
    });
    std::arch::x86_64::_mm_set_epi64x(high, low)
}

/// [`flags16`] byte by byte, with no vector instructions.
#[cfg(any(test, not(all(target_arch = "x86_64", target_feature = "sse2"))))]
fn flags16_bytewise<const N: usize>(chunk: &[u8; 16], targets: [u8; N]) -> u32 {
    chunk
        .iter()
        .enumerate()
        .fold(0, |flags, (at, b)| flags | u32::from(targets.contains(b)) << at)
}

/// How many bytes [`find16`] searches sixteen at a time before it hands
/// over to a search with wider vectors: a run still going past them is
/// long, and such a search (with its set-up) serves it better.
pub(crate) const SHORT16: usize = 64;

/// The first byte of `bytes` equal to one of `targets`: sixteen bytes at a
/// time within the first [`SHORT16`], then `long` (a vectorised search for
/// the same bytes) over the rest; a word at a time over the last fifteen
/// of shorter text.
#[inline]
pub(crate) fn find16<const N: usize>(
    bytes: &[u8],
    targets: [u8; N],
    long: impl FnOnce(&[u8]) -> Option<usize>,
) -> Option<usize> {
    let mut at = 0;
    while let Some(chunk) = bytes.get(at..at + 16) {
        if at == SHORT16 {
            return long(&bytes[at..]).map(|offset| offset + at);
        }
        let found = flags16(chunk.try_into().expect("sixteen bytes"), targets);
        if found != 0 {
            return Some(at + found.trailing_zeros() as usize);
        }
        at += 16;
    }
    let flags = |word| {
        targets
            .iter()
            .fold(0, |flags, &target| flags | equal(word, target))
    };
    find(&bytes[at..], flags, |_| None).map(|offset| at + offset)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The vector search finds what a byte loop finds, at every offset
        /// of every length (the bytes drawn mostly from the targets and
        /// their neighbours, where a comparison could go wrong).
        #[test]
        fn find16_finds_the_first_target_as_a_byte_loop_does(
            bytes in proptest::collection::vec(
                prop_oneof![Just(b'"'), Just(b'\\'), Just(b'\n'), Just(b'\r'), Just(b'!'), Just(0x80u8), Just(0xDCu8), any::<u8>()],
                0..160,
            ),
        ) {
            let targets = [b'\\', b'\n', b'\r'];
            for start in 0..bytes.len().min(20) {
                let rest = &bytes[start..];
                let expected = rest.iter().position(|b| targets.contains(b));
                let long = |bytes: &[u8]| memchr::memchr3(b'\\', b'\n', b'\r', bytes);
                prop_assert_eq!(find16(rest, targets, long), expected);
                let quote = rest.iter().position(|&b| b == b'"');
                prop_assert_eq!(find16(rest, [b'"'], |bytes| memchr::memchr(b'"', bytes)), quote);
                if let Some(chunk) = rest.first_chunk::<16>() {
                    prop_assert_eq!(flags16(chunk, targets), flags16_bytewise(chunk, targets));
                }
            }
        }
    }
}
