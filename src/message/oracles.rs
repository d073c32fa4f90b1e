//! The differential checks: each shortcut and reader held to a reference
//! on any input, by the tests and by the `parse_message` fuzz target. They
//! are built where they run (tests, debug builds, fuzzing builds), never
//! in a release build, and are not part of the API.

use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use super::MessageLimits;
use super::framing::{Scan, Scanner, leading_whitespace};
use super::read::envelope::Envelope;
use super::read::quick;
use super::read::reader::{MAX_NESTING, TextReader};
use super::read::syntax::{self, Notes};

/// Whether the reader of message text reads `text` exactly as serde_json
/// does where serde_json reads it, as the json5 crate does where only it
/// does, and refuses what both refuse.
pub fn text_reader_agrees(text: &str) -> bool {
    agrees_with_references(text)
}

/// Whether the one-pass reader of whole messages agrees with the lexer and
/// the text reader on `bytes` (with the default limits).
pub fn quick_reader_agrees(bytes: &[u8]) -> bool {
    quick_agrees_with_general(bytes, &MessageLimits::default())
}

/// Whether the one-pass reader reads a whole message at the start of
/// `bytes` (with the default limits), rather than leave it to the lexer:
/// for the tests that check it takes the common messages.
pub fn quick_reader_reads(bytes: &[u8]) -> bool {
    let mut env = Envelope::default();
    quick::read(
        bytes,
        leading_whitespace(bytes),
        &MessageLimits::default(),
        false,
        &mut env,
    )
    .is_some()
}

/// Whether the one-pass reader agrees with the general path on `bytes`:
/// whenever it reads a message, the lexer frames the same message there
/// and the text reader fills the same envelope from it.
pub(crate) fn quick_agrees_with_general(bytes: &[u8], limits: &MessageLimits) -> bool {
    [false, true].into_iter().all(|streams_content| {
        let mut quick = Envelope::default();
        let Some(end) = quick::read(
            bytes,
            leading_whitespace(bytes),
            limits,
            streams_content,
            &mut quick,
        ) else {
            return true;
        };
        let Scan::Complete(frame) = Scanner::with_limit(limits.max_message_bytes).scan(bytes) else {
            return false;
        };
        let Ok(text) = std::str::from_utf8(&bytes[frame.range()]) else {
            return false;
        };
        let mut general = Envelope::default();
        let mut notes = Notes::default();
        let read = syntax::parse(text, &mut general, &mut notes);
        frame.end() == end
            && frame.max_depth() <= quick::DEPTH
            && frame.lone_surrogate().is_none()
            && read.is_ok()
            && notes.into_first().is_none()
            && general == quick
    })
}

/// Whether the reader, on `text`, makes exactly the calls serde_json makes
/// when serde_json reads it (every value, key and nesting in order, each
/// number with its type and bits, each string with whether it was
/// borrowed); else exactly the values the json5 crate reads when it reads
/// it; else refuses it too.
pub(crate) fn agrees_with_references(text: &str) -> bool {
    let ours = trace(Exact::Yes, |t| {
        let mut reader = TextReader::new(text);
        t.deserialize(&mut reader).and_then(|()| reader.end()).is_ok()
    });
    if let Some(strict) = trace(Exact::Yes, |t| {
        let mut reader = serde_json::Deserializer::from_str(text);
        t.deserialize(&mut reader).and_then(|()| reader.end()).is_ok()
    }) {
        return ours == Some(strict);
    }
    // The json5 crate recurses once per level without a limit.
    if text.bytes().filter(|b| matches!(b, b'[' | b'{')).count() >= MAX_NESTING {
        return true;
    }
    let ours = trace(Exact::No, |t| {
        let mut reader = TextReader::new(text);
        t.deserialize(&mut reader).and_then(|()| reader.end()).is_ok()
    });
    let lenient = trace(Exact::No, |t| {
        let mut reader = json5::Deserializer::from_str(text);
        t.deserialize(&mut reader).is_ok() && json5::from_str::<serde::de::IgnoredAny>(text).is_ok()
    });
    ours == lenient
}

/// Whether a trace keeps each number's type and bits and each string's
/// borrowing (serde_json's reading must be matched exactly), or only the
/// values (the json5 crate's, whose `-0` is an integer and whose strings
/// borrow by other rules).
#[derive(Clone, Copy, PartialEq)]
enum Exact {
    Yes,
    No,
}

/// The calls a deserializer makes as `read` drives a [`Trace`]; `None`
/// when it refuses the text.
fn trace(exact: Exact, read: impl FnOnce(Trace<'_>) -> bool) -> Option<Vec<String>> {
    let mut calls = Vec::new();
    read(Trace(&mut calls, exact)).then_some(calls)
}

/// Writes down every call a deserializer makes.
struct Trace<'t>(&'t mut Vec<String>, Exact);

impl<'de> DeserializeSeed<'de> for Trace<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Trace<'_> {
    fn number(self, exact: String, value: f64) {
        let call = match self.1 {
            Exact::Yes => exact,
            // `-0` and `0` are one value; NaN keeps its sign.
            Exact::No if value == 0.0 => "number 0".to_owned(),
            Exact::No => format!("number {value:?}"),
        };
        self.0.push(call);
    }

    fn string(self, borrowed: bool, v: &str) {
        let call = match (self.1, borrowed) {
            (Exact::Yes, true) => format!("borrowed {v:?}"),
            (Exact::Yes, false) => format!("owned {v:?}"),
            (Exact::No, _) => format!("string {v:?}"),
        };
        self.0.push(call);
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
        self.number(format!("u64 {v}"), v as f64);
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> std::result::Result<(), E> {
        self.number(format!("i64 {v}"), v as f64);
        Ok(())
    }
    fn visit_f64<E>(self, v: f64) -> std::result::Result<(), E> {
        self.number(format!("f64 {:#x}", v.to_bits()), v);
        Ok(())
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> std::result::Result<(), E> {
        self.string(true, v);
        Ok(())
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<(), E> {
        self.string(false, v);
        Ok(())
    }
    fn visit_string<E>(self, v: String) -> std::result::Result<(), E> {
        self.string(false, &v);
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        self.0.push("[".into());
        while seq.next_element_seed(Trace(&mut *self.0, self.1))?.is_some() {}
        self.0.push("]".into());
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        self.0.push("{".into());
        while map.next_key_seed(Key(&mut *self.0, self.1))?.is_some() {
            map.next_value_seed(Trace(&mut *self.0, self.1))?;
        }
        self.0.push("}".into());
        Ok(())
    }
}

/// A key, read as the seeds read keys (`deserialize_str`).
struct Key<'t>(&'t mut Vec<String>, Exact);

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_str(Trace(self.0, self.1))
    }
}
