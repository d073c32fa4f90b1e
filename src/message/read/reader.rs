//! The reader of a message's text (D4): JSON5, of which strict JSON is a
//! part, read in one pass into the serde seeds of [`crate::message::read::syntax`].
//!
//! One grammar, one reader: a message in strict JSON and one that uses
//! JSON5's forms (comments, trailing commas, single quotes, unquoted keys,
//! JSON5's numbers and escapes) go through the same code, and every string,
//! key or value, is read by the one string reader ([`crate::message::string`]).
//!
//! - Numbers JSON has are read as serde_json reads them (an integer that
//!   fits is `u64` or `i64`, `-0` and every other number a correctly
//!   rounded `f64`), so a strict JSON message means what any RFC 8259
//!   reader makes of it; JSON5's other forms (`0x1F`, `+1`, `.5`, `5.`,
//!   `Infinity`, `NaN`) as the json5 crate reads them.
//! - JSON5's character classes (its whitespace beyond ASCII, the letters
//!   an unquoted key may hold) are the json5 crate's Unicode tables.
//! - Strings without escapes are borrowed from the input.
//!
//! The text was framed by the lexer first ([`crate::message::framing`]), so it
//! nests no deeper than the configured limit; the reader still refuses to
//! recurse past [`MAX_NESTING`] levels on its own, whatever it is given.
//!
//! Its differential check (`oracles.rs`): on any text, the reader makes
//! exactly the calls serde_json makes where serde_json reads the text, the
//! calls the json5 crate makes where only it reads it, and refuses what
//! both refuse.

use std::borrow::Cow;
use std::fmt;

use serde::de::value::{BorrowedStrDeserializer, StringDeserializer};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::message::json_text::next_to_escape;
use crate::message::read::framing;
use crate::message::string;

/// The deepest nesting the reader recurses into: serde_json's own limit,
/// far past any configured message depth (D3).
pub(crate) const MAX_NESTING: usize = 128;

/// Why a text is not JSON or JSON5, and where.
#[derive(Debug)]
pub(crate) struct ReadError {
    /// The byte offset of the fault, when the reader knows it.
    at: Option<usize>,
    what: Cow<'static, str>,
}

impl ReadError {
    /// The fault in words, with its line and column in `text` (both from
    /// 1; lines end as JSON5's do, columns count characters).
    pub(crate) fn describe(&self, text: &str) -> String {
        let Some(at) = self.at else {
            return self.what.clone().into_owned();
        };
        let before = &text[..at.min(text.len())];
        let mut line = 1;
        let mut line_start = 0;
        let mut chars = before.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            let ends = match c {
                '\r' => {
                    if chars.peek().is_some_and(|&(_, next)| next == '\n') {
                        chars.next();
                        line_start = i + 2;
                    } else {
                        line_start = i + 1;
                    }
                    true
                }
                '\n' | '\u{2028}' | '\u{2029}' => {
                    line_start = i + c.len_utf8();
                    true
                }
                _ => false,
            };
            line += usize::from(ends);
        }
        let column = before[line_start.min(before.len())..].chars().count() + 1;
        format!("{} at line {line} column {column}", self.what)
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at {
            Some(at) => write!(f, "{} at byte {at}", self.what),
            None => f.write_str(&self.what),
        }
    }
}

impl std::error::Error for ReadError {}

impl de::Error for ReadError {
    fn custom<T: fmt::Display>(what: T) -> Self {
        ReadError {
            at: None,
            what: what.to_string().into(),
        }
    }
}

type Result<T> = std::result::Result<T, ReadError>;

/// Reads one value from `text`, which must hold nothing else but
/// whitespace and comments.
pub(crate) struct TextReader<'de> {
    text: &'de str,
    pos: usize,
    depth: usize,
}

impl<'de> TextReader<'de> {
    pub(crate) fn new(text: &'de str) -> Self {
        TextReader {
            text,
            pos: 0,
            depth: 0,
        }
    }

    /// Checks that only whitespace and comments follow the value.
    pub(crate) fn end(&mut self) -> Result<()> {
        match self.peek()? {
            None => Ok(()),
            Some(_) => Err(self.error(self.pos, "text after the end of the message")),
        }
    }

    fn error(&self, at: usize, what: impl Into<Cow<'static, str>>) -> ReadError {
        ReadError {
            at: Some(at),
            what: what.into(),
        }
    }

    /// The next byte that is not whitespace or in a comment, not taken.
    #[inline]
    fn peek(&mut self) -> Result<Option<u8>> {
        let bytes = self.text.as_bytes();
        while let Some(&b) = bytes.get(self.pos) {
            match b {
                b' ' | b'\n' | b'\t' | b'\r' | 0x0b | 0x0c => self.pos += 1,
                b'/' => self.comment()?,
                0x80.. => {
                    let c = self.char_here();
                    if !json5::char::is_json5_whitespace(c) {
                        return Ok(Some(b));
                    }
                    self.pos += c.len_utf8();
                }
                _ => return Ok(Some(b)),
            }
        }
        Ok(None)
    }

    /// The character at the position, which is not the end.
    fn char_here(&self) -> char {
        self.text[self.pos..].chars().next().unwrap_or_default()
    }

    /// Skips the comment whose `/` is at the position.
    fn comment(&mut self) -> Result<()> {
        let start = self.pos;
        let body = self.text.get(start + 2..).unwrap_or_default();
        match self.text.as_bytes().get(start + 1) {
            // The line end itself is whitespace.
            Some(b'/') => {
                self.pos = body
                    .find(['\n', '\r', '\u{2028}', '\u{2029}'])
                    .map_or(self.text.len(), |i| start + 2 + i);
            }
            Some(b'*') => match body.find("*/") {
                Some(i) => self.pos = start + 2 + i + 2,
                None => return Err(self.error(start, "a comment that does not end")),
            },
            _ => return Err(self.error(start, "a '/' that starts no comment")),
        }
        Ok(())
    }

    /// Takes the literal `word` at the position.
    fn literal(&mut self, word: &str) -> Result<()> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.error(self.pos, "expected a value"))
        }
    }

    /// Reads the string whose opening quote is at the position.
    fn string(&mut self, quote: u8) -> Result<Cow<'de, str>> {
        let bytes = self.text.as_bytes();
        let open = self.pos;
        let start = open + 1;
        // Where the search for the closing quote starts: no quote or
        // backslash stands before the first byte a JSON string must
        // escape, so the text up to it is not read twice.
        let mut from = start;
        if quote == b'"' {
            from = next_to_escape(bytes, start);
            if bytes.get(from) == Some(&b'"') {
                self.pos = from + 1;
                return Ok(Cow::Borrowed(&self.text[start..from]));
            }
        }
        // The closing quote: the first one no backslash stands before.
        let Some(close) = framing::closing_quote(&bytes[from..], quote).map(|at| from + at) else {
            return Err(self.error(open, "a string that does not end"));
        };
        self.pos = close + 1;
        let raw = &self.text[start..close];
        if !raw.contains(['\\', '\n', '\r']) {
            return Ok(Cow::Borrowed(raw));
        }
        let unescaped =
            string::unescape(raw.as_bytes()).map_err(|why| self.error(open, format!("the string {why}")))?;
        String::from_utf8(unescaped)
            .map(Cow::Owned)
            .map_err(|_| self.error(open, "the string is not UTF-8"))
    }

    /// Reads the unquoted key at the position: a JSON5 identifier, whose
    /// characters may be written as `\uXXXX`.
    fn identifier(&mut self) -> Result<Cow<'de, str>> {
        let start = self.pos;
        let mut owned: Option<String> = None;
        while self.pos < self.text.len() {
            let here = self.pos;
            let (c, len, escaped) = if self.text.as_bytes()[here] == b'\\' {
                let (c, len) = self.identifier_escape()?;
                (c, len, true)
            } else {
                let c = self.char_here();
                (c, c.len_utf8(), false)
            };
            let fits = if here == start {
                json5::char::is_json5_identifier_start(c)
            } else {
                json5::char::is_json5_identifier(c)
            };
            if !fits {
                if escaped || here == start {
                    return Err(self.error(here, "expected a key"));
                }
                break;
            }
            if escaped {
                owned
                    .get_or_insert_with(|| self.text[start..here].to_owned())
                    .push(c);
            } else if let Some(owned) = &mut owned {
                owned.push(c);
            }
            self.pos = here + len;
        }
        Ok(match owned {
            Some(owned) => Cow::Owned(owned),
            None => Cow::Borrowed(&self.text[start..self.pos]),
        })
    }

    /// The `\uXXXX` escape (or surrogate pair of two) at the position in
    /// an unquoted key: the character and the bytes it took.
    fn identifier_escape(&self) -> Result<(char, usize)> {
        let at = self.pos;
        let unit = |from: usize| -> Option<u32> {
            let digits = self.text.get(from..from + 6)?.strip_prefix("\\u")?;
            u32::from_str_radix(digits, 16)
                .ok()
                .filter(|_| digits.bytes().all(|b| b.is_ascii_hexdigit()))
        };
        let bad = || self.error(at, "an escape in a key that is not \\uXXXX of a character");
        let first = unit(at).ok_or_else(bad)?;
        if let Some(c) = char::from_u32(first) {
            return Ok((c, 6));
        }
        let second = unit(at + 6).ok_or_else(bad)?;
        let pair = [first, second].map(|u| u16::try_from(u).unwrap_or_default());
        match char::decode_utf16(pair).collect::<Vec<_>>().as_slice() {
            [Ok(c)] => Ok((*c, 12)),
            _ => Err(bad()),
        }
    }

    /// Reads the number at the position.
    fn number<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        let bytes = self.text.as_bytes();
        let start = self.pos;
        let negative = bytes[start] == b'-';
        let mut at = start + usize::from(matches!(bytes[start], b'-' | b'+'));
        let rest = &self.text[at..];
        let sign = if negative { -1.0 } else { 1.0 };
        if rest.starts_with("Infinity") {
            self.pos = at + "Infinity".len();
            return visitor.visit_f64(sign * f64::INFINITY);
        }
        if rest.starts_with("NaN") {
            self.pos = at + "NaN".len();
            return visitor.visit_f64(if negative { -f64::NAN } else { f64::NAN });
        }
        if rest.starts_with("0x") || rest.starts_with("0X") {
            return self.hex_number(at + 2, negative, visitor);
        }
        let digits = |at: &mut usize| {
            let from = *at;
            while bytes.get(*at).is_some_and(u8::is_ascii_digit) {
                *at += 1;
            }
            *at - from
        };
        let int_start = at;
        let int_digits = digits(&mut at);
        if int_digits > 1 && bytes[int_start] == b'0' {
            return Err(self.error(start, "a number with a leading zero"));
        }
        let mut whole = true;
        let mut frac_digits = 0;
        if bytes.get(at) == Some(&b'.') {
            at += 1;
            whole = false;
            frac_digits = digits(&mut at);
        }
        if int_digits == 0 && frac_digits == 0 {
            return Err(self.error(start, "expected a value"));
        }
        if matches!(bytes.get(at), Some(b'e' | b'E')) {
            at += 1;
            whole = false;
            if matches!(bytes.get(at), Some(b'+' | b'-')) {
                at += 1;
            }
            if digits(&mut at) == 0 {
                return Err(self.error(start, "a number whose exponent has no digits"));
            }
        }
        self.pos = at;
        let text = &self.text[start..at];
        if whole {
            let magnitude = &self.text[int_start..at];
            if let Ok(n) = magnitude.parse::<u64>() {
                if !negative {
                    return visitor.visit_u64(n);
                }
                // As serde_json: `-0` is a double.
                if n != 0 && n <= i64::MIN.unsigned_abs() {
                    return visitor.visit_i64((n as i64).wrapping_neg());
                }
            }
        }
        // Correctly rounded, as serde_json's float_roundtrip reads it.
        let value: f64 = text
            .trim_start_matches('+')
            .parse()
            .map_err(|_| self.error(start, "a number that cannot be read"))?;
        visitor.visit_f64(value)
    }

    /// Reads the hex digits of a `0x` number from `at`.
    fn hex_number<V: Visitor<'de>>(&mut self, at: usize, negative: bool, visitor: V) -> Result<V::Value> {
        let bytes = self.text.as_bytes();
        let start = self.pos;
        let mut end = at;
        let mut value: u128 = 0;
        while let Some(digit) = bytes.get(end).and_then(|&b| char::from(b).to_digit(16)) {
            value = value
                .checked_mul(16)
                .and_then(|v| v.checked_add(u128::from(digit)))
                .ok_or_else(|| self.error(start, "a hexadecimal number too large to read"))?;
            end += 1;
        }
        if end == at {
            return Err(self.error(start, "a hexadecimal number without digits"));
        }
        self.pos = end;
        // As the json5 crate: what does not fit a 64-bit integer is a
        // double.
        if !negative {
            return match u64::try_from(value) {
                Ok(n) => visitor.visit_u64(n),
                Err(_) => visitor.visit_f64(value as f64),
            };
        }
        match i64::try_from(value) {
            Ok(n) => visitor.visit_i64(-n),
            Err(_) if value == 1 << 63 => visitor.visit_i64(i64::MIN),
            Err(_) => visitor.visit_f64(-(value as f64)),
        }
    }

    /// Reads the object or array whose bracket is at the position, its
    /// entries handed to `visit`.
    fn nested<T>(&mut self, visit: impl FnOnce(&mut Entries<'_, 'de>) -> Result<T>) -> Result<T> {
        self.depth += 1;
        if self.depth >= MAX_NESTING {
            return Err(self.error(
                self.pos,
                format!("nesting deeper than {} levels", MAX_NESTING - 1),
            ));
        }
        let open = self.pos;
        self.pos += 1;
        let mut entries = Entries {
            reader: &mut *self,
            first: true,
            ended: false,
        };
        let value = visit(&mut entries)?;
        let ended = entries.ended;
        self.depth -= 1;
        if ended {
            Ok(value)
        } else {
            Err(self.error(open, "an object or array not read to its end"))
        }
    }
}

impl<'de> Deserializer<'de> for &mut TextReader<'de> {
    type Error = ReadError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        let Some(byte) = self.peek()? else {
            return Err(self.error(self.pos, "the text ends where a value should be"));
        };
        match byte {
            b'{' => self.nested(|entries| visitor.visit_map(entries)),
            b'[' => self.nested(|entries| visitor.visit_seq(entries)),
            b'"' | b'\'' => match self.string(byte)? {
                Cow::Borrowed(s) => visitor.visit_borrowed_str(s),
                Cow::Owned(s) => visitor.visit_string(s),
            },
            b't' => {
                self.literal("true")?;
                visitor.visit_bool(true)
            }
            b'f' => {
                self.literal("false")?;
                visitor.visit_bool(false)
            }
            b'n' => {
                self.literal("null")?;
                visitor.visit_unit()
            }
            b'-' | b'+' | b'.' | b'0'..=b'9' | b'I' | b'N' => self.number(visitor),
            _ => Err(self.error(self.pos, "expected a value")),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// The entries of one object or array; `ended` once its closing bracket
/// is taken.
struct Entries<'r, 'de> {
    reader: &'r mut TextReader<'de>,
    first: bool,
    ended: bool,
}

impl Entries<'_, '_> {
    /// Before an entry: `true` when `closer` ends the container instead
    /// (after the last entry's comma too: JSON5's trailing comma).
    fn at_end(&mut self, closer: u8) -> Result<bool> {
        if self.ended {
            return Ok(true);
        }
        let reader = &mut *self.reader;
        match reader.peek()? {
            Some(b) if b == closer => {
                reader.pos += 1;
                self.ended = true;
                Ok(true)
            }
            Some(b',') if !self.first => {
                reader.pos += 1;
                if reader.peek()? == Some(closer) {
                    reader.pos += 1;
                    self.ended = true;
                    return Ok(true);
                }
                Ok(false)
            }
            Some(_) if self.first => {
                self.first = false;
                Ok(false)
            }
            Some(_) => Err(reader.error(
                reader.pos,
                if closer == b'}' {
                    "expected ',' or '}' after an entry"
                } else {
                    "expected ',' or ']' after an element"
                },
            )),
            None => Err(reader.error(reader.pos, "the text ends inside an object or array")),
        }
    }
}

impl<'de> MapAccess<'de> for Entries<'_, 'de> {
    type Error = ReadError;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if self.at_end(b'}')? {
            return Ok(None);
        }
        let key = match self.reader.peek()? {
            Some(quote @ (b'"' | b'\'')) => self.reader.string(quote)?,
            _ => self.reader.identifier()?,
        };
        match key {
            Cow::Borrowed(key) => seed.deserialize(BorrowedStrDeserializer::new(key)),
            Cow::Owned(key) => seed.deserialize(StringDeserializer::new(key)),
        }
        .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        let reader = &mut *self.reader;
        if reader.peek()? != Some(b':') {
            return Err(reader.error(reader.pos, "expected ':' after a key"));
        }
        reader.pos += 1;
        seed.deserialize(&mut *reader)
    }
}

impl<'de> SeqAccess<'de> for Entries<'_, 'de> {
    type Error = ReadError;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if self.at_end(b']')? {
            return Ok(None);
        }
        seed.deserialize(&mut *self.reader).map(Some)
    }
}

/// Whether `text` is one JSON or JSON5 value and nothing else.
pub(crate) fn is_one_value(text: &str) -> bool {
    let mut reader = TextReader::new(text);
    <de::IgnoredAny as de::Deserialize>::deserialize(&mut reader)
        .and_then(|_| reader.end())
        .is_ok()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::*;
    use crate::message::oracles::agrees_with_references;

    #[test]
    fn reads_what_serde_json_reads_the_same_way() {
        for text in [
            r#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"content":"","encoding":"identity"}}"#,
            r#" { "a" : [ 1 , -2 , 0 , -0 , true , false , null , "x" ] } "#,
            r#"{"n":[18446744073709551615,18446744073709551616,-9223372036854775808,-9223372036854775809]}"#,
            r#"{"f":[1.5,-0.0,1e3,2E-2,0.1,123456789012345678901234567890]}"#,
            r#"{"s":"tab\t\"quoted\" \\ \/ \b\f\n\r \u00e9 \ud83d\ude00 \u0000","é":"ü"}"#,
            r#"{"a":{"b":{"c":[[],{},[{}]]}}}"#,
            "{\"ws\":\t\r\n1}",
        ] {
            assert!(reads(text), "the reader should read {text}");
            assert!(agrees_with_references(text), "{text}");
        }
    }

    fn reads(text: &str) -> bool {
        is_one_value(text)
    }

    #[test]
    fn reads_json5_as_the_json5_crate_does() {
        for text in [
            "{a:1}",
            "{'a':1}",
            r#"{"a":1,}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":1.}"#,
            r#"{"a":.5}"#,
            r#"{"a":+1}"#,
            r#"{"a":0x1f,"b":-0X1F,"c":0xffffffffffffffffff}"#,
            r#"{"a":Infinity,"b":-Infinity,"c":NaN,"d":-NaN}"#,
            r#"{"a":1e999}"#,
            "{\"a\":1 // comment\n}",
            "{\"a\":1 // comment\u{2028}}",
            "/* before */{/**/a/* */:/***/1/**/}// after",
            "{\"a\":1\u{a0}\u{feff}\u{2003}}",
            r#"{"a":"\x41\v\'\0 \q"}"#,
            "{\"a\":\"line \\\ncontinued\"}",
            "{\"a\":\"raw\ttab\"}",
            "{$_é1: 1, \\u0061b: 2, a\\u0062: 3, ℵx\u{301}: 4}",
            "{'it''s': 'x'}".replace("''", "\\'").as_str(),
        ] {
            assert!(reads(text), "the reader should read {text}");
            assert!(agrees_with_references(text), "{text}");
        }
    }

    #[test]
    fn refuses_what_neither_json_nor_json5_has() {
        for text in [
            r#"{,"a":1}"#,
            r#"{"a":[,1]}"#,
            r#"{"a":[1,,]}"#,
            r#"{"a" 1}"#,
            r#"{"a":1 "b":2}"#,
            r#"{"a":01}"#,
            r#"{"a":-}"#,
            r#"{"a":.}"#,
            r#"{"a":1e}"#,
            r#"{"a":0x}"#,
            r#"{"a":tru}"#,
            r#"{"a":nul}"#,
            r#"{"a":Infinit}"#,
            "{\"a\":\"line\nbreak\"}",
            r#"{"a":"\1"}"#,
            r#"{"a":"\01"}"#,
            r#"{"a":"\x4"}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\udc00"}"#,
            r#"{"a":"\ud800\u0041"}"#,
            r#"{"a":"\u12"}"#,
            r#"{"a":"unterminated}"#,
            r#"{"a":1}}"#,
            r#"{"a":1} x"#,
            "{\"a\":1 / 2}",
            "{\"a\":1 /* open }",
            "{1a: 1}",
            "{a-b: 1}",
            "{\\u002d: 1}",
            "",
            "   ",
        ] {
            assert!(!reads(text), "the reader should refuse {text}");
            assert!(agrees_with_references(text), "{text}");
        }
    }

    #[test]
    fn refuses_to_nest_past_its_own_limit() {
        let deep = |n| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(reads(&deep(MAX_NESTING - 1)));
        assert!(!reads(&deep(MAX_NESTING)));
        assert!(serde_json::from_str::<serde_json::Value>(&deep(MAX_NESTING)).is_err());
    }

    /// Any JSON value, with numbers of every form.
    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<u64>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec(("\\PC{0,4}", inner), 0..6)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn reads_any_json_value_as_serde_json_does(value in value(), pretty in any::<bool>()) {
            let text = if pretty {
                serde_json::to_string_pretty(&value).unwrap()
            } else {
                serde_json::to_string(&value).unwrap()
            };
            prop_assert!(reads(&text), "{}", text);
            prop_assert!(agrees_with_references(&text), "{}", text);
        }

        #[test]
        fn agrees_on_any_text_made_of_json_and_json5_pieces(
            pieces in prop::collection::vec(
                prop_oneof![
                    prop::sample::select(vec![
                        "{", "}", "[", "]", ",", ":", " ", "\n", "\"", "\\", "\\u", "\\ud83d", "\\ude00",
                        "true", "false", "null", "-", "0", "1", "9", ".", "e", "E", "+",
                        "18446744073709551615", "99999999999999999999", "\"k\"", "\"v\"", "\u{e9}", "\t",
                        "'", "//", "/*", "*/", "\\x4", "\\\n", "Infinity", "NaN", "0x", "k", "\u{2028}", "\u{a0}",
                    ]).prop_map(str::to_owned),
                    "[ -~]{0,3}",
                ],
                0..40,
            )
        ) {
            let text = pieces.concat();
            prop_assert!(agrees_with_references(&text), "{:?}", text);
        }
    }
}
