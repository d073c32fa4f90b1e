//! Byte searches eight bytes at a time, in a machine word: faster than a
//! byte loop on the short strings of a message, and with no set-up, unlike
//! a vectorised search. Content, where runs between the bytes searched for
//! are long or many, is flagged sixteen bytes at a time ([`flags16`]),
//! with SSE2 where the build has it, or a block of sixty-four at once
//! ([`flags64`]), in one comparison where the processor has AVX-512 and
//! the loop runs under [`wide`].
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

/// Flags the bytes of `word` that are not ASCII (`0x80` and above).
#[inline]
pub(crate) fn high(word: u64) -> u64 {
    word & HIGHS
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

/// The backslashes of a block of up to 64 bytes that start an escape,
/// from the flags of all its `backslashes`, the block starting between
/// escapes: in a run of them, the first, the third and so on (the others
/// are escaped by the one before). Adding a run's first flag to the run
/// carries out of it, which tells the runs that start on an even byte from
/// the others.
#[inline]
fn escape_starts(backslashes: u64) -> u64 {
    const EVEN: u64 = 0x5555_5555_5555_5555;
    let runs_start = backslashes & !(backslashes << 1);
    let from_even = backslashes & !backslashes.wrapping_add(runs_start & EVEN);
    (from_even & EVEN) | (backslashes & !from_even & !EVEN)
}

/// The backslashes of a block that start an escape, and the bytes they
/// escape, from the flags of its `backslashes`, when its first byte is
/// escaped by a backslash that ended the block before (`odd`).
#[inline]
pub(crate) fn escapes(backslashes: u64, odd: bool) -> (u64, u64) {
    let first = u64::from(odd);
    // A backslash that is escaped starts no run.
    let starts = escape_starts(backslashes & !first);
    (starts, starts << 1 | first)
}

/// Whether a block of 64 bytes ends in a backslash that starts an escape
/// (the next block's first byte is escaped), from the flags of its
/// `backslashes`, when its own first byte is escaped (`odd`). Only the
/// length of the run of backslashes at its end counts, and `odd` only when
/// the whole block is one run: a block after it waits on two steps of
/// this one, not on [`escape_starts`].
#[inline]
pub(crate) fn odd_at_end(backslashes: u64, odd: bool) -> bool {
    let run_at_end = (!backslashes).leading_zeros();
    if run_at_end == 64 {
        odd
    } else {
        run_at_end % 2 == 1
    }
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

/// A bit for each byte of `chunk` equal to one of `targets`, the first
/// byte's lowest: one comparison of the block with each target where
/// `lanes` has AVX-512, else [`flags16`] over its four quarters. Text with
/// a stop every few dozen bytes is read a block at a time, every stop in
/// it taken from one mask, not a search from each stop to the next.
#[inline(always)]
pub(crate) fn flags64<const N: usize>(chunk: &[u8; 64], targets: [u8; N], lanes: Lanes) -> u64 {
    #[cfg(target_arch = "x86_64")]
    if lanes.avx512() {
        // SAFETY: only `wide` makes a `Lanes` that says AVX-512, having
        // found the processor has it.
        #[allow(unsafe_code)]
        return unsafe { flags64_avx512(chunk, targets) };
    }
    let _ = lanes;
    let (quarters, _) = chunk.as_chunks::<16>();
    quarters.iter().enumerate().fold(0, |flags, (at, quarter)| {
        flags | u64::from(flags16(quarter, targets)) << (16 * at)
    })
}

/// [`flags64`] in one comparison of all sixty-four bytes with each target.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
fn flags64_avx512<const N: usize>(chunk: &[u8; 64], targets: [u8; N]) -> u64 {
    use std::arch::x86_64::{_mm512_cmpeq_epi8_mask, _mm512_set1_epi8};
    let bytes = load64(chunk);
    targets.iter().fold(0, |flags, &target| {
        flags | _mm512_cmpeq_epi8_mask(bytes, _mm512_set1_epi8(target as i8))
    })
}

/// The sixty-four bytes of `chunk` in one vector register.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn load64(chunk: &[u8; 64]) -> std::arch::x86_64::__m512i {
    // SAFETY: `chunk` is sixty-four bytes, all read; the load asks for no
    // alignment.
    #[allow(unsafe_code)]
    unsafe {
        std::arch::x86_64::_mm512_loadu_si512(chunk.as_ptr().cast())
    }
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

/// The vector instructions a block loop run by [`wide`] may use. Only
/// `wide` makes one, after asking the processor, so holding one that says
/// AVX-512 is the proof that the instructions are there.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lanes {
    avx512: bool,
}

impl Lanes {
    /// Whether AVX-512 (F, BW, VBMI and VBMI2, with BMI2 and POPCNT) is
    /// there: sixty-four bytes compared at once, bytes compressed out of a
    /// register or spread over it.
    #[inline(always)]
    pub(crate) fn avx512(self) -> bool {
        self.avx512
    }
}

/// Runs `f` compiled for the widest vectors the processor has (asked once,
/// the answer kept by the standard library): AVX-512, where a block of
/// sixty-four bytes is compared with a byte in one instruction; else AVX2,
/// where the sixteen-byte comparisons take the three-operand form, with no
/// copies of the bytes they keep, and the copies of a block take half as
/// many moves. Only what is inlined into it is compiled so: the closure
/// and the loop it runs are marked `#[inline(always)]`; `f` learns from
/// its [`Lanes`] which code it may take.
#[inline(always)]
pub(crate) fn wide<R>(f: impl FnOnce(Lanes) -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512vbmi")
            && std::arch::is_x86_feature_detected!("avx512vbmi2")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("bmi2")
            && std::arch::is_x86_feature_detected!("lzcnt")
            && std::arch::is_x86_feature_detected!("popcnt")
        {
            // SAFETY: the processor has the features `avx512_run` enables.
            #[allow(unsafe_code)]
            return unsafe { avx512_run(f) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has AVX2, the one feature `avx2_run`
            // enables.
            #[allow(unsafe_code)]
            return unsafe { avx2_run(f) };
        }
    }
    f(Lanes { avx512: false })
}

/// [`wide`] where the processor has AVX-512.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vbmi,avx512vbmi2,bmi1,bmi2,lzcnt,popcnt")]
fn avx512_run<R>(f: impl FnOnce(Lanes) -> R) -> R {
    f(Lanes { avx512: true })
}

/// [`wide`] where the processor has AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn avx2_run<R>(f: impl FnOnce(Lanes) -> R) -> R {
    f(Lanes { avx512: false })
}

/// A [`Lanes`] without AVX-512, for tests of the narrower code on any
/// processor.
#[cfg(test)]
pub(crate) const NARROW: Lanes = Lanes { avx512: false };

/// How many bytes a search sixteen bytes at a time goes before it hands
/// over to one with wider vectors: a run still going past them is long,
/// and such a search (with its set-up) serves it better.
pub(crate) const SHORT16: usize = 64;

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The vector flags are the bytes a byte loop finds, at every
        /// offset (the bytes drawn mostly from the targets and their
        /// neighbours, where a comparison could go wrong).
        #[test]
        fn the_flags_are_the_targets_a_byte_loop_finds(
            bytes in proptest::collection::vec(
                prop_oneof![Just(b'"'), Just(b'\\'), Just(b'\n'), Just(b'\r'), Just(b'!'), Just(0x80u8), Just(0xDCu8), any::<u8>()],
                64..100,
            ),
        ) {
            let targets = [b'\\', b'\n', b'\r'];
            for start in 0..=bytes.len() - 64 {
                let block = bytes[start..].first_chunk::<64>().expect("64 bytes");
                let expected = block
                    .iter()
                    .enumerate()
                    .fold(0u64, |flags, (at, b)| flags | u64::from(targets.contains(b)) << at);
                prop_assert_eq!(flags64(block, targets, NARROW), expected);
                prop_assert_eq!(wide(|lanes| flags64(block, targets, lanes)), expected);
                let chunk = block.first_chunk::<16>().expect("16 bytes");
                prop_assert_eq!(flags16(chunk, targets), flags16_bytewise(chunk, targets));
            }
        }
    }
}
