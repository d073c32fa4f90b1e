//! Byte searches eight bytes at a time, in a machine word: faster than a
//! byte loop on the short strings of a message, and with no set-up, unlike
//! a vectorised search.
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
