//! Base64 as D9 writes compressed content: standard and padded (RFC 4648
//! §4), strict: no whitespace, padding only at the end and only to
//! complete the last group, unused bits zero.
//!
//! Both directions run piece by piece (D19) and resume anywhere. The bulk
//! goes through `base64-simd`, which picks vector instructions at run
//! time (about four times the speed of a table-driven loop here); the
//! edges a stream cuts (a group split across two pieces, the padding, a
//! fault) are read here a character at a time, so that a refusal names
//! the offset of the character at fault.

use base64_simd::STANDARD;

/// Decodes base64 text piece by piece.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    group: [u8; 4],
    filled: usize,
    /// `=` seen: only `=` may follow, to complete the group.
    padding: usize,
    /// The text ended its last group with padding: nothing may follow.
    closed: bool,
    /// Characters read, for the offsets in refusals.
    offset: usize,
}

impl Decoder {
    /// Decodes `chars`, the next piece of the text, appending the bytes of
    /// every group it completes to `out`.
    pub(crate) fn decode(&mut self, chars: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
        // What cannot fault goes the plain way; from the first character
        // that may (padding, anything outside the alphabet), one at a time.
        let plain = self.decode_plain(chars, out);
        for &c in &chars[plain..] {
            self.push(c, out)?;
        }
        Ok(())
    }

    /// Decodes `chars` from the front for as long as they are characters
    /// of the alphabet, before any padding: they need no unescaping, and
    /// what cannot fault is taken without a check of its own. Says how
    /// many it took; a group left unfinished is held, as in
    /// [`decode`](Self::decode).
    pub(crate) fn decode_plain(&mut self, chars: &[u8], out: &mut Vec<u8>) -> usize {
        if self.padding != 0 || self.closed {
            return 0;
        }
        let of_alphabet = |chars: &[u8]| chars.iter().take_while(|&&c| sextet(c).is_some()).count();
        // A group begun before is finished first, then whole groups go in
        // bulk, then the start of the next group is held.
        let mut taken = of_alphabet(&chars[..chars.len().min((4 - self.filled) % 4)]);
        for &c in &chars[..taken] {
            self.push_plain(c, out);
        }
        if self.filled != 0 {
            return taken;
        }
        let rest = self.decode_whole_groups(&chars[taken..], out);
        taken = chars.len() - rest.len();
        let start = of_alphabet(&rest[..rest.len().min(3)]);
        for &c in &rest[..start] {
            self.push_plain(c, out);
        }
        taken + start
    }

    /// Takes one character of the alphabet, no padding seen.
    fn push_plain(&mut self, c: u8, out: &mut Vec<u8>) {
        // Cannot fault: a character of the alphabet before any padding.
        let pushed = self.push(c, out);
        debug_assert!(pushed.is_ok());
    }

    /// The text ended: it must not end inside a group.
    pub(crate) fn finish(&self) -> Result<(), String> {
        if self.filled == 0 {
            Ok(())
        } else {
            Err(format!(
                "is not valid base64 (it ends inside a group of four, at offset {})",
                self.offset
            ))
        }
    }

    /// Takes one character.
    fn push(&mut self, c: u8, out: &mut Vec<u8>) -> Result<(), String> {
        let at = self.offset;
        self.offset += 1;
        if self.closed {
            return Err(format!(
                "is not valid base64 (byte 0x{c:02X} at offset {at} follows the padding)"
            ));
        }
        if c == b'=' {
            if self.filled < 2 {
                return Err(format!("is not valid base64 (padding at offset {at})"));
            }
            self.padding += 1;
            self.group[self.filled] = 0;
            self.filled += 1;
        } else {
            if self.padding > 0 {
                return Err(format!(
                    "is not valid base64 (byte 0x{c:02X} at offset {at} follows the padding)"
                ));
            }
            let Some(value) = sextet(c) else {
                return Err(format!(
                    "is not valid base64 (invalid byte 0x{c:02X} at offset {at})"
                ));
            };
            self.group[self.filled] = value;
            self.filled += 1;
        }
        if self.filled == 4 {
            self.flush_group(out)?;
        }
        Ok(())
    }

    /// Decodes the whole groups of four at the front of `chars`, up to
    /// any padding, in bulk, and returns the rest. A fault leaves them to
    /// [`decode`](Self::decode), which finds it again one character at a
    /// time to say where it is.
    fn decode_whole_groups<'a>(&mut self, chars: &'a [u8], out: &mut Vec<u8>) -> &'a [u8] {
        let whole = chars.len() / 4 * 4;
        let whole = memchr::memchr(b'=', &chars[..whole]).map_or(whole, |at| at / 4 * 4);
        if whole == 0 {
            return chars;
        }
        let start = out.len();
        match STANDARD.decode_append(&chars[..whole], out) {
            Ok(()) => {
                self.offset += whole;
                &chars[whole..]
            }
            Err(_) => {
                out.truncate(start);
                chars
            }
        }
    }

    fn flush_group(&mut self, out: &mut Vec<u8>) -> Result<(), String> {
        let [a, b, c, d] = self.group;
        let bits = u32::from(a) << 18 | u32::from(b) << 12 | u32::from(c) << 6 | u32::from(d);
        let bytes = [(bits >> 16) as u8, (bits >> 8) as u8, bits as u8];
        let keep = 3 - self.padding;
        // Canonical: the bits padding leaves unused must be zero.
        let unused = match self.padding {
            1 => bits & 0xff,
            2 => bits & 0xffff,
            _ => 0,
        };
        if unused != 0 {
            return Err(format!(
                "is not valid base64 (the last group's unused bits are not zero, at offset {})",
                self.offset - 1
            ));
        }
        out.extend_from_slice(&bytes[..keep]);
        self.closed = self.padding > 0;
        self.filled = 0;
        Ok(())
    }
}

fn sextet(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// The whole of a base64 text, decoded.
pub(crate) fn decode(text: &[u8]) -> Result<Vec<u8>, String> {
    let mut decoder = Decoder::default();
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    decoder.decode(text, &mut out)?;
    decoder.finish()?;
    Ok(out)
}

/// Encodes bytes as base64 piece by piece: whole groups of three as they
/// come, the last group padded at the end.
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    /// The bytes of an unfinished group.
    carry: [u8; 3],
    carried: usize,
}

impl Encoder {
    /// Appends the text of the groups `bytes` completes to `out`.
    pub(crate) fn encode(&mut self, mut bytes: &[u8], out: &mut Vec<u8>) {
        if self.carried > 0 {
            let n = (3 - self.carried).min(bytes.len());
            self.carry[self.carried..self.carried + n].copy_from_slice(&bytes[..n]);
            self.carried += n;
            bytes = &bytes[n..];
            if self.carried < 3 {
                return;
            }
            STANDARD.encode_append(self.carry, out);
            self.carried = 0;
        }
        let whole = bytes.len() / 3 * 3;
        STANDARD.encode_append(&bytes[..whole], out);
        let rest = &bytes[whole..];
        self.carry[..rest.len()].copy_from_slice(rest);
        self.carried = rest.len();
    }

    /// The bytes ended: appends the last group, padded.
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) {
        STANDARD.encode_append(&self.carry[..self.carried], out);
        self.carried = 0;
    }
}

/// The whole of `bytes` as base64.
pub(crate) fn encode(bytes: &[u8]) -> String {
    STANDARD.encode_to_string(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ::base64::Engine as _;
    use ::base64::engine::general_purpose::STANDARD as REFERENCE;
    use proptest::prelude::*;

    proptest! {
        /// Encoded in pieces cut anywhere, the text is the reference
        /// crate's for the whole; decoded in pieces, it is the bytes.
        #[test]
        fn pieces_agree_with_the_reference(bytes in proptest::collection::vec(any::<u8>(), 0..300), cuts in proptest::collection::vec(0usize..300, 0..6)) {
            let pieces = split(&bytes, &cuts);
            let mut encoder = Encoder::default();
            let mut text = Vec::new();
            for piece in &pieces {
                encoder.encode(piece, &mut text);
            }
            encoder.finish(&mut text);
            let reference = REFERENCE.encode(&bytes);
            prop_assert_eq!(&text, reference.as_bytes());
            prop_assert_eq!(encode(&bytes), reference);

            let mut decoder = Decoder::default();
            let mut decoded = Vec::new();
            for piece in split(&text, &cuts) {
                decoder.decode(piece, &mut decoded).expect("valid");
            }
            decoder.finish().expect("whole");
            prop_assert_eq!(decoded, bytes);
        }

        /// Any text: accepted exactly when the reference accepts it, to
        /// the same bytes, whole or in pieces.
        #[test]
        fn acceptance_agrees_with_the_reference(text in "[A-Za-z0-9+/=\\\\ a-]{0,40}", cuts in proptest::collection::vec(0usize..40, 0..4)) {
            let reference = REFERENCE.decode(text.as_bytes()).ok();
            prop_assert_eq!(decode(text.as_bytes()).ok(), reference.clone());
            let mut decoder = Decoder::default();
            let mut decoded = Vec::new();
            let pieces = split(text.as_bytes(), &cuts);
            let whole = pieces.iter().try_for_each(|piece| decoder.decode(piece, &mut decoded))
                .and_then(|()| decoder.finish());
            prop_assert_eq!(whole.ok().map(|()| decoded), reference);
        }
    }

    fn split<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
        let mut cuts: Vec<usize> = cuts.iter().map(|&c| c.min(bytes.len())).collect();
        cuts.sort_unstable();
        let mut pieces = Vec::new();
        let mut from = 0;
        for cut in cuts {
            pieces.push(&bytes[from..cut]);
            from = cut;
        }
        pieces.push(&bytes[from..]);
        pieces
    }

    #[test]
    fn refusals_name_the_offset() {
        let refusal = decode(b"aGVs bG8=").expect_err("a space");
        assert_eq!(refusal, "is not valid base64 (invalid byte 0x20 at offset 4)");
        let refusal = decode(b"aGVsbG8").expect_err("cut short");
        assert_eq!(
            refusal,
            "is not valid base64 (it ends inside a group of four, at offset 7)"
        );
        let refusal = decode(b"aGVsbG9=").expect_err("unused bits");
        assert!(refusal.contains("unused bits are not zero"), "{refusal}");
        let refusal = decode(b"aGVsbG8=aGVs").expect_err("after the padding");
        assert!(refusal.contains("follows the padding"), "{refusal}");
    }
}
