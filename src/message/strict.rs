//! A fast reader for the common case: a message written in strict JSON
//! (RFC 8259), read in one pass into the same serde seeds the general
//! parsers drive (D4).
//!
//! It is a shortcut, not a judge. It accepts a subset of what serde_json
//! accepts and hands the seeds exactly the calls serde_json would make
//! (the same `visit_*` method with the same value, in the same order);
//! whenever it meets anything it does not handle it gives up with
//! [`NotRead`], and [`super::syntax::parse`] starts again from the first
//! byte with serde_json and then JSON5, which say precisely what is wrong.
//! So every error message, and every JSON5 reading, is theirs.
//!
//! What it leaves to serde_json: numbers with a fraction or an exponent and
//! integers past `u64` (their rounding is serde_json's own), nesting deeper
//! than serde_json allows, and every malformed text. Strings without
//! escapes are borrowed from the input.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::json_text::next_to_escape;
use super::syntax::PARSER_MAX_DEPTH;

/// The fast reader gave up; the caller reads the text again with the
/// general parsers.
#[derive(Debug)]
pub(crate) struct NotRead;

impl fmt::Display for NotRead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not read by the strict JSON shortcut")
    }
}

impl std::error::Error for NotRead {}

impl de::Error for NotRead {
    fn custom<T: fmt::Display>(_: T) -> Self {
        NotRead
    }
}

type Result<T> = std::result::Result<T, NotRead>;

/// Reads one JSON value from `text`, which must hold nothing else but
/// whitespace.
pub(crate) struct StrictReader<'de> {
    text: &'de str,
    pos: usize,
    depth: usize,
}

impl<'de> StrictReader<'de> {
    pub(crate) fn new(text: &'de str) -> Self {
        StrictReader {
            text,
            pos: 0,
            depth: 0,
        }
    }

    /// Checks that only whitespace follows the value.
    pub(crate) fn end(&mut self) -> Result<()> {
        match self.peek() {
            None => Ok(()),
            Some(_) => Err(NotRead),
        }
    }

    /// The next byte after whitespace, not taken.
    #[inline]
    fn peek(&mut self) -> Option<u8> {
        let bytes = self.text.as_bytes();
        while let Some(&b) = bytes.get(self.pos) {
            match b {
                b' ' | b'\n' | b'\t' | b'\r' => self.pos += 1,
                _ => return Some(b),
            }
        }
        None
    }

    /// Takes `byte` after whitespace.
    #[inline]
    fn expect(&mut self, byte: u8) -> Result<()> {
        if self.peek() == Some(byte) {
            self.pos += 1;
            Ok(())
        } else {
            Err(NotRead)
        }
    }

    /// Takes the literal `word` (`true`, `false`, `null`) at the position.
    fn literal(&mut self, word: &[u8]) -> Result<()> {
        if self.text.as_bytes()[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(NotRead)
        }
    }

    /// Reads the string whose opening quote is at the position.
    fn string<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        let bytes = self.text.as_bytes();
        let start = self.pos + 1;
        let stop = next_to_escape(bytes, start);
        match bytes.get(stop) {
            Some(b'"') => {
                self.pos = stop + 1;
                visitor.visit_borrowed_str(&self.text[start..stop])
            }
            Some(b'\\') => {
                let mut owned = String::with_capacity(stop - start + 16);
                owned.push_str(&self.text[start..stop]);
                self.pos = stop;
                self.escaped_rest(&mut owned)?;
                visitor.visit_string(owned)
            }
            // A control character, or the end of the text.
            _ => Err(NotRead),
        }
    }

    /// Decodes from a backslash at the position to the closing quote.
    fn escaped_rest(&mut self, owned: &mut String) -> Result<()> {
        let bytes = self.text.as_bytes();
        loop {
            match bytes.get(self.pos) {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') => {
                    let escaped = *bytes.get(self.pos + 1).ok_or(NotRead)?;
                    self.pos += 2;
                    let c = match escaped {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return Err(NotRead),
                    };
                    owned.push(c);
                }
                Some(_) => {
                    let stop = next_to_escape(bytes, self.pos);
                    if stop == self.pos {
                        // A control character.
                        return Err(NotRead);
                    }
                    owned.push_str(&self.text[self.pos..stop]);
                    self.pos = stop;
                }
                None => return Err(NotRead),
            }
        }
    }

    /// The character of a `\uXXXX` escape whose `u` was just taken: a
    /// scalar value, or a surrogate pair written as two escapes.
    fn unicode_escape(&mut self) -> Result<char> {
        let first = self.hex4()?;
        match first {
            0xD800..=0xDBFF => {
                if self.text.as_bytes().get(self.pos..self.pos + 2) != Some(b"\\u") {
                    return Err(NotRead);
                }
                self.pos += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(NotRead);
                }
                let scalar = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                char::from_u32(scalar).ok_or(NotRead)
            }
            _ => char::from_u32(first).ok_or(NotRead),
        }
    }

    fn hex4(&mut self) -> Result<u32> {
        let digits = self.text.as_bytes().get(self.pos..self.pos + 4).ok_or(NotRead)?;
        let mut value = 0;
        for &d in digits {
            let digit = (d as char).to_digit(16).ok_or(NotRead)?;
            value = value * 16 + digit;
        }
        self.pos += 4;
        Ok(value)
    }

    /// Reads the number starting at the position: integers here, as
    /// serde_json reads them; anything with a fraction, an exponent or too
    /// many digits through serde_json itself.
    fn number<V: Visitor<'de>>(&mut self, visitor: V) -> Result<V::Value> {
        let bytes = self.text.as_bytes();
        let start = self.pos;
        let negative = bytes[start] == b'-';
        let digits_start = start + usize::from(negative);
        let mut at = digits_start;
        let mut significand: u64 = 0;
        let mut fits = true;
        while let Some(&d @ b'0'..=b'9') = bytes.get(at) {
            match significand
                .checked_mul(10)
                .and_then(|s| s.checked_add(u64::from(d - b'0')))
            {
                Some(s) => significand = s,
                None => fits = false,
            }
            at += 1;
        }
        let digits = at - digits_start;
        if digits == 0 || (digits > 1 && bytes[digits_start] == b'0') {
            return Err(NotRead);
        }
        let plain = fits && !matches!(bytes.get(at), Some(b'.' | b'e' | b'E'));
        if plain {
            self.pos = at;
            return if !negative {
                visitor.visit_u64(significand)
            } else {
                let neg = (significand as i64).wrapping_neg();
                // As serde_json: `-0` and integers below i64's range are
                // doubles.
                if neg >= 0 {
                    visitor.visit_f64(-(significand as f64))
                } else {
                    visitor.visit_i64(neg)
                }
            };
        }
        while let Some(b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') = bytes.get(at) {
            at += 1;
        }
        self.pos = at;
        let mut alone = serde_json::Deserializer::from_str(&self.text[start..at]);
        let value = alone.deserialize_any(visitor).map_err(|_| NotRead)?;
        alone.end().map_err(|_| NotRead)?;
        Ok(value)
    }

    /// Reads the object or array whose bracket is at the position, its
    /// entries handed to `visit`; the closing bracket must have been taken.
    fn nested<T>(&mut self, visit: impl FnOnce(&mut Entries<'_, 'de>) -> Result<T>) -> Result<T> {
        // serde_json refuses the 128th level; so does this reader.
        self.depth += 1;
        if self.depth >= PARSER_MAX_DEPTH {
            return Err(NotRead);
        }
        self.pos += 1;
        let mut entries = Entries {
            reader: &mut *self,
            first: true,
            ended: false,
        };
        let value = visit(&mut entries)?;
        let ended = entries.ended;
        self.depth -= 1;
        if ended { Ok(value) } else { Err(NotRead) }
    }
}

impl<'de> Deserializer<'de> for &mut StrictReader<'de> {
    type Error = NotRead;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek().ok_or(NotRead)? {
            b'{' => self.nested(|entries| visitor.visit_map(entries)),
            b'[' => self.nested(|entries| visitor.visit_seq(entries)),
            b'"' => self.string(visitor),
            b't' => {
                self.literal(b"true")?;
                visitor.visit_bool(true)
            }
            b'f' => {
                self.literal(b"false")?;
                visitor.visit_bool(false)
            }
            b'n' => {
                self.literal(b"null")?;
                visitor.visit_unit()
            }
            b'-' | b'0'..=b'9' => self.number(visitor),
            _ => Err(NotRead),
        }
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek() {
            Some(b'{') => self.deserialize_any(visitor),
            _ => Err(NotRead),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value> {
        match self.peek() {
            Some(b'"') => self.string(visitor),
            _ => Err(NotRead),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct struct enum identifier ignored_any
    }
}

/// The entries of one object or array; `ended` once its closing bracket
/// is taken.
struct Entries<'r, 'de> {
    reader: &'r mut StrictReader<'de>,
    first: bool,
    ended: bool,
}

impl Entries<'_, '_> {
    /// Before an entry: `true` when `closer` ends the container instead.
    fn at_end(&mut self, closer: u8) -> Result<bool> {
        if self.ended {
            return Ok(true);
        }
        match self.reader.peek() {
            Some(b) if b == closer => {
                self.reader.pos += 1;
                self.ended = true;
                Ok(true)
            }
            Some(b',') if !self.first => {
                self.reader.pos += 1;
                // `[1,]` is JSON5, not JSON.
                if self.reader.peek() == Some(closer) {
                    return Err(NotRead);
                }
                Ok(false)
            }
            Some(_) if self.first => {
                self.first = false;
                Ok(false)
            }
            _ => Err(NotRead),
        }
    }
}

impl<'de> MapAccess<'de> for Entries<'_, 'de> {
    type Error = NotRead;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if self.at_end(b'}')? {
            return Ok(None);
        }
        if self.reader.peek() != Some(b'"') {
            return Err(NotRead);
        }
        seed.deserialize(&mut *self.reader).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        self.reader.expect(b':')?;
        seed.deserialize(&mut *self.reader)
    }
}

impl<'de> SeqAccess<'de> for Entries<'_, 'de> {
    type Error = NotRead;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if self.at_end(b']')? {
            return Ok(None);
        }
        seed.deserialize(&mut *self.reader).map(Some)
    }
}

/// Whether the shortcut, on `text`, either gives up or makes exactly the
/// calls serde_json makes: the differential check that the fuzzer and the
/// tests run (every value, key and nesting in order, each number with its
/// type and bits, each string with whether it was borrowed).
pub(crate) fn agrees_with_serde_json(text: &str) -> bool {
    match shortcut_trace(text) {
        None => true,
        Some(fast) => serde_json_trace(text).is_some_and(|slow| slow == fast),
    }
}

/// The calls the shortcut makes on `text`; `None` when it gives up.
fn shortcut_trace(text: &str) -> Option<Vec<String>> {
    let mut trace = Vec::new();
    let mut reader = StrictReader::new(text);
    Trace(&mut trace)
        .deserialize(&mut reader)
        .and_then(|()| reader.end())
        .ok()?;
    Some(trace)
}

/// The calls serde_json makes on `text`; `None` when it refuses it.
fn serde_json_trace(text: &str) -> Option<Vec<String>> {
    let mut trace = Vec::new();
    let mut reader = serde_json::Deserializer::from_str(text);
    Trace(&mut trace)
        .deserialize(&mut reader)
        .and_then(|()| reader.end())
        .ok()?;
    Some(trace)
}

/// Writes down every call a deserializer makes.
struct Trace<'t>(&'t mut Vec<String>);

impl<'de> DeserializeSeed<'de> for Trace<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Trace<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        self.0.push("null".into());
        Ok(())
    }
    fn visit_bool<E>(self, v: bool) -> std::result::Result<(), E> {
        self.0.push(format!("bool {v}"));
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> std::result::Result<(), E> {
        self.0.push(format!("u64 {v}"));
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> std::result::Result<(), E> {
        self.0.push(format!("i64 {v}"));
        Ok(())
    }
    fn visit_f64<E>(self, v: f64) -> std::result::Result<(), E> {
        self.0.push(format!("f64 {:#x}", v.to_bits()));
        Ok(())
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<(), E> {
        self.0.push(format!("borrowed {v:?}"));
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<(), E> {
        self.0.push(format!("owned {v:?}"));
        Ok(())
    }
    fn visit_string<E>(self, v: String) -> std::result::Result<(), E> {
        self.0.push(format!("owned {v:?}"));
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        self.0.push("[".into());
        while seq.next_element_seed(Trace(&mut *self.0))?.is_some() {}
        self.0.push("]".into());
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        self.0.push("{".into());
        while map.next_key_seed(Key(&mut *self.0))?.is_some() {
            map.next_value_seed(Trace(&mut *self.0))?;
        }
        self.0.push("}".into());
        Ok(())
    }
}

/// A key, read as the seeds read keys (`deserialize_str`).
struct Key<'t>(&'t mut Vec<String>);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_str(Trace(self.0))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::*;

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
            assert!(shortcut_trace(text).is_some(), "the shortcut should read {text}");
            assert!(agrees_with_serde_json(text), "{text}");
        }
    }

    #[test]
    fn gives_up_on_everything_that_is_not_strict_json() {
        for text in [
            "{a:1}",
            "{'a':1}",
            r#"{"a":1,}"#,
            r#"{"a":[1,]}"#,
            r#"{,"a":1}"#,
            r#"{"a":[,1]}"#,
            r#"{"a" 1}"#,
            r#"{"a":1 "b":2}"#,
            r#"{"a":01}"#,
            r#"{"a":-}"#,
            r#"{"a":1.}"#,
            r#"{"a":.5}"#,
            r#"{"a":+1}"#,
            r#"{"a":0x1f}"#,
            r#"{"a":1e999}"#,
            r#"{"a":Infinity}"#,
            r#"{"a":tru}"#,
            r#"{"a":nul}"#,
            "{\"a\":\"line\nbreak\"}",
            r#"{"a":"\x41"}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\udc00"}"#,
            r#"{"a":"\ud800\u0041"}"#,
            r#"{"a":"\u12"}"#,
            r#"{"a":"unterminated}"#,
            r#"{"a":1}}"#,
            r#"{"a":1} x"#,
            "{\"a\":1\u{a0}}",
            "{\"a\":1 // comment\n}",
        ] {
            assert_eq!(
                shortcut_trace(text),
                None,
                "the shortcut should give up on {text}"
            );
        }
    }

    #[test]
    fn gives_up_where_serde_json_refuses_to_nest() {
        let deep = |n| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(shortcut_trace(&deep(PARSER_MAX_DEPTH - 1)).is_some());
        assert!(shortcut_trace(&deep(PARSER_MAX_DEPTH)).is_none());
        assert!(serde_json::from_str::<serde_json::Value>(&deep(PARSER_MAX_DEPTH)).is_err());
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
            prop_assert!(shortcut_trace(&text).is_some(), "{}", text);
            prop_assert!(agrees_with_serde_json(&text), "{}", text);
        }

        #[test]
        fn agrees_on_any_text_made_of_json_pieces(
            pieces in prop::collection::vec(
                prop_oneof![
                    prop::sample::select(vec![
                        "{", "}", "[", "]", ",", ":", " ", "\n", "\"", "\\", "\\u", "\\ud83d", "\\ude00",
                        "true", "false", "null", "-", "0", "1", "9", ".", "e", "E", "+",
                        "18446744073709551615", "99999999999999999999", "\"k\"", "\"v\"", "\u{e9}", "\t",
                    ]).prop_map(str::to_owned),
                    "[ -~]{0,3}",
                ],
                0..40,
            )
        ) {
            let text = pieces.concat();
            prop_assert!(agrees_with_serde_json(&text), "{:?}", text);
        }
    }
}
