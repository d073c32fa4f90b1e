//! The text of a JSON string as this crate writes it: what must be escaped
//! is escaped exactly as `serde_json` escapes it (`\"`, `\\`, the five
//! short forms `\b \t \n \f \r`, and `\u00XX` in lower-case hex for the
//! other control characters); every other character is copied as it is.
//!
//! Whole messages and streamed content (D19) both go through here. Text is
//! mostly plain, so the search for the next byte to escape reads eight
//! bytes at a time, and plain runs are copied whole.

use crate::message::words;

/// Appends `s`, escaped, to `out` (without the surrounding quotes).
pub(crate) fn escape(s: &str, out: &mut Vec<u8>) {
    escape_utf8(s.as_bytes(), out);
}

/// [`escape`] for bytes the caller knows to be UTF-8: every byte that is
/// not escaped is copied as it is, so UTF-8 in is UTF-8 out.
pub(crate) fn escape_utf8(bytes: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut from = 0;
    loop {
        let at = next_to_escape(bytes, from);
        out.extend_from_slice(&bytes[from..at]);
        let Some(&b) = bytes.get(at) else {
            return;
        };
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ]),
        }
        from = at + 1;
    }
}

/// Whether a JSON string must escape `b`: a control character, `"` or `\`.
fn must_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Where the first byte to escape at or after `from` stands, or the end.
pub(crate) fn next_to_escape(bytes: &[u8], from: usize) -> usize {
    let (mut at, found) = words::first_flagged(bytes, from, |word| {
        words::below(word, 0x20) | words::equal(word, b'"') | words::equal(word, b'\\')
    });
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

    proptest::proptest! {
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
