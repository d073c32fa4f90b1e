//! The content codecs (D9, D19): whole ([`codec`]) and streamed
//! ([`content_stream`]).

pub(crate) mod base64;
pub mod codec;
pub(crate) mod content_stream;
pub(crate) mod encoding;
pub(crate) mod pace;
mod paced;
mod stored;

/// Text that compresses, with a period longer than every window, for the
/// encoders' tests: `line(i, word)` for i = 1, 2, … (`word` a hash of `i`)
/// until there are `len` bytes, cut there.
#[cfg(test)]
pub(super) fn periodic_text(len: usize, line: impl Fn(u64, u64) -> String) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(len + 64);
    let mut i = 0u64;
    while bytes.len() < len {
        i += 1;
        let word = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52;
        bytes.extend_from_slice(line(i, word).as_bytes());
    }
    bytes.truncate(len);
    bytes
}
