//! The JSON syntax layer (D4, D9): the values a message carries, and the
//! serde seeds the reader fills them through.
//!
//! [`parse`] runs on the text of one message that the lexer
//! ([`crate::message::framing`]) has already framed: it starts with `{`, ends with
//! the matching `}`, nests no deeper than the limit and escapes no lone
//! surrogate. The one reader ([`crate::message::read::reader`]) reads it, JSON and JSON5
//! alike; what it refuses, it refuses with the fault and its place.
//!
//! The seeds see every key and every value of the message, at every
//! level, including values nobody reads later. While reading they note, without stopping, the problems that are
//! not syntax: a key written twice in one object (D4; keys compare as
//! decoded, so `"a"` and `"\u0061"` are the same key) and a JSON5 number JSON
//! cannot carry (`Infinity`, `NaN`, D9). Reading on lets the caller still
//! echo the request's `resource` in its answer (D12).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Value};
use smallvec::SmallVec;

use crate::message::json_text::next_to_escape;
use crate::message::read::reader::TextReader;

// ---------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------

/// The JSON type of a value, for messages such as `must be a string, not an
/// array`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Null,
    Boolean,
    Number,
    String,
    Array,
    Object,
}

impl Kind {
    /// With its article: `a string`, `an array`, `null`.
    pub(crate) fn described(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Boolean => "a boolean",
            Kind::Number => "a number",
            Kind::String => "a string",
            Kind::Array => "an array",
            Kind::Object => "an object",
        }
    }
}

/// A JSON number as the parser handed it over.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Number {
    Unsigned(u64),
    Signed(i64),
    Float(f64),
}

/// A string, or the kind of the value that stood where one was wanted.
pub(crate) type StrOr<'a> = Result<Cow<'a, str>, Kind>;

/// A value whose type is kept but whose insides are only kept where some
/// field could need them: strings, arrays of strings, objects of strings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Loose<'a> {
    Null,
    Bool(bool),
    Number(Number),
    Str(Cow<'a, str>),
    /// Each element, `Err` with its kind when it was not a string.
    Array(Items<'a>),
    /// Each entry in order, the value `Err` when it was not a string.
    Object(Vec<(Cow<'a, str>, StrOr<'a>)>),
}

/// The elements of an array value.
#[derive(Debug, Clone)]
pub(crate) enum Items<'a> {
    /// Each element as the text reader read it.
    Read(Vec<StrOr<'a>>),
    /// The text between the brackets of an array whose elements are all
    /// strings with no byte to escape (no escape, no control character),
    /// as the one-pass reader (`quick.rs`) took it: each element is the
    /// text between two quotes, found when the array is walked, so taking
    /// the array allocates nothing.
    Plain(&'a str),
}

impl<'a> Items<'a> {
    /// Calls `each` on every element in order, with its index: the
    /// string, or the kind of the value that stood there; stops at the
    /// first error.
    #[inline]
    pub(crate) fn try_for_each<'s, E>(
        &'s self,
        mut each: impl FnMut(usize, Result<&'s str, Kind>) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            Items::Read(items) => items
                .iter()
                .enumerate()
                .try_for_each(|(i, item)| each(i, item.as_deref().map_err(|kind| *kind))),
            Items::Plain(text) => {
                // Quotes only open and close elements: none has an escape.
                let quote = |from: usize| {
                    let rest = text.as_bytes().get(from..)?;
                    rest.iter().position(|&b| b == b'"').map(|at| from + at)
                };
                let mut from = 0;
                let mut index = 0;
                while let Some(open) = quote(from) {
                    // No element holds a byte to escape: the first one
                    // after the opening quote is the closing quote.
                    let end = next_to_escape(text.as_bytes(), open + 1);
                    // Both ends are ASCII quotes: character boundaries.
                    each(index, Ok(text.get(open + 1..end).unwrap_or_default()))?;
                    index += 1;
                    from = end + 1;
                }
                Ok(())
            }
        }
    }

    /// The elements in order, as [`try_for_each`](Self::try_for_each)
    /// hands them over.
    fn to_vec(&self) -> Vec<Result<&str, Kind>> {
        let mut all = Vec::new();
        let _ = self.try_for_each(|_, item| {
            all.push(item);
            Ok::<(), ()>(())
        });
        all
    }
}

impl PartialEq for Items<'_> {
    /// Element by element, however each side holds them.
    fn eq(&self, other: &Self) -> bool {
        self.to_vec() == other.to_vec()
    }
}

/// A JSON value as the header reader sees it: the insides kept where a
/// header could need them, as the parser keeps them.
pub(crate) fn loose_of(value: &serde_json::Value) -> Loose<'_> {
    use serde_json::Value;
    let kind = |value: &Value| match value {
        Value::Null => Kind::Null,
        Value::Bool(_) => Kind::Boolean,
        Value::Number(_) => Kind::Number,
        Value::String(_) => Kind::String,
        Value::Array(_) => Kind::Array,
        Value::Object(_) => Kind::Object,
    };
    fn string(value: &Value, kind: impl Fn(&Value) -> Kind) -> StrOr<'_> {
        match value {
            Value::String(s) => Ok(Cow::Borrowed(s.as_str())),
            other => Err(kind(other)),
        }
    }
    match value {
        Value::Null => Loose::Null,
        Value::Bool(b) => Loose::Bool(*b),
        Value::Number(n) => Loose::Number(match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Number::Unsigned(u),
            (None, Some(i)) => Number::Signed(i),
            _ => Number::Float(n.as_f64().unwrap_or(f64::NAN)),
        }),
        Value::String(s) => Loose::Str(Cow::Borrowed(s)),
        Value::Array(items) => Loose::Array(Items::Read(items.iter().map(|v| string(v, kind)).collect())),
        Value::Object(map) => Loose::Object(
            map.iter()
                .map(|(k, v)| (Cow::Borrowed(k.as_str()), string(v, kind)))
                .collect(),
        ),
    }
}

impl Loose<'_> {
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Loose::Null => Kind::Null,
            Loose::Bool(_) => Kind::Boolean,
            Loose::Number(_) => Kind::Number,
            Loose::Str(_) => Kind::String,
            Loose::Array(_) => Kind::Array,
            Loose::Object(_) => Kind::Object,
        }
    }
}

// ---------------------------------------------------------------------------
// Where a value is, and what was noted on the way
// ---------------------------------------------------------------------------

/// The place of a value in the message, built on the stack as the seeds
/// descend (no allocation) and written out only for a note.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Path<'p> {
    /// The message object itself.
    Root,
    /// A key of the object at the parent path.
    Key(&'p Path<'p>, &'p str),
    /// An element of the array at the parent path.
    Index(&'p Path<'p>, usize),
}

impl fmt::Display for Path<'_> {
    /// `the message`, `headers`, `body.meta.list[2]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Root => f.write_str("the message"),
            Path::Key(Path::Root, key) => f.write_str(key),
            Path::Key(parent, key) => write!(f, "{parent}.{key}"),
            Path::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

/// A problem found while reading, which does not stop the reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Note {
    /// A key written twice in one object (D4).
    Duplicate { place: String, key: String },
    /// `Infinity` or `NaN` (D9).
    NotJsonNumber { field: String },
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::Duplicate { place, key } => write!(
                f,
                "{place} has the key {} twice (D4)",
                serde_json::to_string(key).unwrap_or_default()
            ),
            Note::NotJsonNumber { field } => write!(
                f,
                "field \"{field}\" is Infinity or NaN (or too large for a double), which JSON cannot carry (D9)"
            ),
        }
    }
}

/// The first [`Note`] of a read, in document order.
#[derive(Debug, Default)]
pub(crate) struct Notes(RefCell<Option<Note>>);

impl Notes {
    fn note(&self, make: impl FnOnce() -> Note) {
        let mut first = self.0.borrow_mut();
        if first.is_none() {
            *first = Some(make());
        }
    }

    /// The object at `place` has `key` twice.
    pub(crate) fn duplicate(&self, place: &Path<'_>, key: &str) {
        self.note(|| Note::Duplicate {
            place: place.to_string(),
            key: key.to_owned(),
        });
    }

    fn not_json_number(&self, at: &Path<'_>) {
        self.note(|| Note::NotJsonNumber {
            field: at.to_string(),
        });
    }

    /// The first note, if any.
    pub(crate) fn into_first(self) -> Option<Note> {
        self.0.into_inner()
    }
}

/// What every seed carries: where its value is, and where to note.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx<'c> {
    pub(crate) notes: &'c Notes,
    pub(crate) path: &'c Path<'c>,
}

impl<'c> Ctx<'c> {
    /// The same notes, at `path` (a child of this one).
    pub(crate) fn at<'d>(self, path: &'d Path<'d>) -> Ctx<'d>
    where
        'c: 'd,
    {
        Ctx {
            notes: self.notes,
            path,
        }
    }
}

/// The keys of one object, to find one written twice (D4). A linear search
/// while the object is small, a hash set past that: no quadratic cost on a
/// huge object.
#[derive(Debug, Default)]
pub(crate) struct KeySet<'a> {
    small: SmallVec<[Cow<'a, str>; KeySet::SMALL]>,
    large: Option<HashSet<Cow<'a, str>>>,
}

impl<'a> KeySet<'a> {
    const SMALL: usize = 8;

    /// Adds `key`, or gives it back when it is there already.
    pub(crate) fn insert(&mut self, key: Cow<'a, str>) -> Result<(), Cow<'a, str>> {
        if self.contains(&key) {
            return Err(key);
        }
        match &mut self.large {
            Some(large) => {
                large.insert(key);
            }
            None if self.small.len() < Self::SMALL => self.small.push(key),
            None => {
                let mut large: HashSet<_> = self.small.drain(..).collect();
                large.insert(key);
                self.large = Some(large);
            }
        }
        Ok(())
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        match &self.large {
            Some(large) => large.contains(key),
            None => self.small.iter().any(|k| k == key),
        }
    }
}

// ---------------------------------------------------------------------------
// Seeds
// ---------------------------------------------------------------------------

/// A key: a string, borrowed from the input when the parser can (no
/// escapes).
pub(crate) struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// Implements `DeserializeSeed` (as `deserialize_any`) and the scalar
/// `visit_*` methods of a seed with a `ctx` field and a
/// `fn scalar(self, Loose<'de>) -> Self::Value`.
macro_rules! seed_with_scalars {
    ($seed:ident, $value:ty) => {
        impl<'de> DeserializeSeed<'de> for $seed<'_> {
            type Value = $value;

            fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                d.deserialize_any(self)
            }
        }

        impl<'de> $seed<'_> {
            fn visit_loose<E>(self, value: Loose<'de>) -> Result<$value, E> {
                Ok(self.scalar(value))
            }
        }
    };
}

/// The scalar `visit_*` methods, for inside a `Visitor` impl of a seed made
/// with [`seed_with_scalars`].
macro_rules! scalar_visits {
    () => {
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            self.visit_loose(Loose::Null)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            self.visit_loose(Loose::Null)
        }
        fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
            self.visit_loose(Loose::Bool(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
            self.visit_loose(Loose::Number(Number::Unsigned(v)))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
            self.visit_loose(Loose::Number(Number::Signed(v)))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
            // Only JSON5 has these (D9); serde_json refuses them as syntax.
            if !v.is_finite() {
                self.ctx.notes.not_json_number(self.ctx.path);
            }
            self.visit_loose(Loose::Number(Number::Float(v)))
        }
        fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
            self.visit_loose(Loose::Str(Cow::Borrowed(v)))
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            self.visit_loose(Loose::Str(Cow::Owned(v.to_owned())))
        }
        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            self.visit_loose(Loose::Str(Cow::Owned(v)))
        }
    };
}

/// Any value nobody looks into: read only for its notes.
#[derive(Clone, Copy)]
pub(crate) struct AnySeed<'c> {
    pub(crate) ctx: Ctx<'c>,
}

seed_with_scalars!(AnySeed, ());

impl AnySeed<'_> {
    fn scalar(self, _: Loose<'_>) {}
}

impl<'de> Visitor<'de> for AnySeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalar_visits!();

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        for i in 0.. {
            let path = Path::Index(self.ctx.path, i);
            if seq
                .next_element_seed(AnySeed {
                    ctx: self.ctx.at(&path),
                })?
                .is_none()
            {
                break;
            }
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys = KeySet::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let path = Path::Key(self.ctx.path, &key);
            map.next_value_seed(AnySeed {
                ctx: self.ctx.at(&path),
            })?;
            if let Err(key) = keys.insert(key) {
                self.ctx.notes.duplicate(self.ctx.path, &key);
            }
        }
        Ok(())
    }
}

/// A string, or the kind of whatever else stood there.
#[derive(Clone, Copy)]
struct StrOrKindSeed<'c> {
    ctx: Ctx<'c>,
}

seed_with_scalars!(StrOrKindSeed, StrOr<'de>);

impl<'de> StrOrKindSeed<'_> {
    fn scalar(self, value: Loose<'de>) -> StrOr<'de> {
        match value {
            Loose::Str(s) => Ok(s),
            other => Err(other.kind()),
        }
    }
}

impl<'de> Visitor<'de> for StrOrKindSeed<'_> {
    type Value = StrOr<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalar_visits!();

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        AnySeed { ctx: self.ctx }.visit_seq(seq)?;
        Ok(Err(Kind::Array))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        AnySeed { ctx: self.ctx }.visit_map(map)?;
        Ok(Err(Kind::Object))
    }
}

/// A [`Loose`] value.
#[derive(Clone, Copy)]
pub(crate) struct LooseSeed<'c> {
    pub(crate) ctx: Ctx<'c>,
}

seed_with_scalars!(LooseSeed, Loose<'de>);

impl<'de> LooseSeed<'_> {
    fn scalar(self, value: Loose<'de>) -> Loose<'de> {
        value
    }
}

impl<'de> Visitor<'de> for LooseSeed<'_> {
    type Value = Loose<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalar_visits!();

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let path = Path::Index(self.ctx.path, items.len());
            match seq.next_element_seed(StrOrKindSeed {
                ctx: self.ctx.at(&path),
            })? {
                Some(item) => items.push(item),
                None => return Ok(Loose::Array(Items::Read(items))),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::new();
        let mut keys = KeySet::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let path = Path::Key(self.ctx.path, &key);
            let value = map.next_value_seed(StrOrKindSeed {
                ctx: self.ctx.at(&path),
            })?;
            if let Err(again) = keys.insert(key.clone()) {
                self.ctx.notes.duplicate(self.ctx.path, &again);
            }
            entries.push((key, value));
        }
        Ok(Loose::Object(entries))
    }
}

/// A whole JSON value, as the application gets it (a body key, D9).
#[derive(Clone, Copy)]
pub(crate) struct ValueSeed<'c> {
    pub(crate) ctx: Ctx<'c>,
}

seed_with_scalars!(ValueSeed, Value);

impl ValueSeed<'_> {
    fn scalar(self, value: Loose<'_>) -> Value {
        match value {
            Loose::Bool(b) => Value::Bool(b),
            Loose::Number(Number::Unsigned(n)) => Value::from(n),
            Loose::Number(Number::Signed(n)) => Value::from(n),
            // A number JSON cannot carry was noted: the message is refused.
            Loose::Number(Number::Float(n)) => {
                serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
            }
            Loose::Str(s) => Value::String(s.into_owned()),
            Loose::Null | Loose::Array(_) | Loose::Object(_) => Value::Null,
        }
    }
}

impl<'de> Visitor<'de> for ValueSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalar_visits!();

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let path = Path::Index(self.ctx.path, items.len());
            match seq.next_element_seed(ValueSeed {
                ctx: self.ctx.at(&path),
            })? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let path = Path::Key(self.ctx.path, &key);
            let value = map.next_value_seed(ValueSeed {
                ctx: self.ctx.at(&path),
            })?;
            match object.entry(key.into_owned()) {
                Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                Entry::Occupied(slot) => self.ctx.notes.duplicate(self.ctx.path, slot.key()),
            }
        }
        Ok(Value::Object(object))
    }
}

// ---------------------------------------------------------------------------
// The reader
// ---------------------------------------------------------------------------

/// What a message is read into.
pub(crate) trait Document<'de>: Default {
    /// Reads the whole message from `d`, noting problems in `notes`.
    fn read<D: Deserializer<'de>>(&mut self, d: D, notes: &Notes) -> Result<(), D::Error>;
}

/// Reads `text`, JSON or JSON5 (D4), into `doc`. The error is the
/// complaint to quote.
pub(crate) fn parse<'de, T: Document<'de>>(
    text: &'de str,
    doc: &mut T,
    notes: &mut Notes,
) -> Result<(), String> {
    let mut reader = TextReader::new(text);
    doc.read(&mut reader, notes)
        .and_then(|()| reader.end())
        .map_err(|fault| format!("message is not valid JSON or JSON5: {}", fault.describe(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_items_are_the_strings_between_quotes() {
        let read = Items::Read(vec![Ok("gzip".into()), Ok("".into()), Ok("a b".into())]);
        for text in [r#""gzip","","a b""#, " \"gzip\" ,\n\"\",\t\"a b\" "] {
            let plain = Items::Plain(text);
            assert_eq!(plain.to_vec(), vec![Ok("gzip"), Ok(""), Ok("a b")], "{text:?}");
            assert_eq!(plain, read);
        }
        assert!(Items::Plain("").to_vec().is_empty());
        assert_ne!(Items::Plain(r#""gzip""#), read);
        let mixed = Items::Read(vec![Ok("a".into()), Err(Kind::Number)]);
        assert_eq!(mixed.to_vec(), vec![Ok("a"), Err(Kind::Number)]);
    }

    /// A document that is any JSON value, read for its notes.
    #[derive(Default)]
    struct Anything;

    impl<'de> Document<'de> for Anything {
        fn read<D: Deserializer<'de>>(&mut self, d: D, notes: &Notes) -> Result<(), D::Error> {
            AnySeed {
                ctx: Ctx {
                    notes,
                    path: &Path::Root,
                },
            }
            .deserialize(d)
        }
    }

    fn notes_of(text: &str) -> Result<Option<Note>, String> {
        let mut notes = Notes::default();
        parse(text, &mut Anything, &mut notes)?;
        Ok(notes.into_first())
    }

    fn duplicate(place: &str, key: &str) -> Option<Note> {
        Some(Note::Duplicate {
            place: place.into(),
            key: key.into(),
        })
    }

    #[test]
    fn d4_duplicates_are_found_at_every_level_in_both_parsers() {
        assert_eq!(notes_of(r#"{"a":1,"a":2}"#), Ok(duplicate("the message", "a")));
        assert_eq!(
            notes_of(r#"{"a":1,"\u0061":2}"#),
            Ok(duplicate("the message", "a"))
        );
        assert_eq!(
            notes_of(r#"{"x":[1,{"b":{"c":1,"c":2}}]}"#),
            Ok(duplicate("x[1].b", "c"))
        );
        assert_eq!(
            notes_of("{x: [1, {b: {c: 1, 'c': 2,}}],}"),
            Ok(duplicate("x[1].b", "c"))
        );
        assert_eq!(notes_of(r#"{"a":{"b":1},"c":{"b":1}}"#), Ok(None));
        // The first in document order.
        assert_eq!(notes_of(r#"{"a":{"b":1,"b":1},"a":1}"#), Ok(duplicate("a", "b")));
    }

    #[test]
    fn d4_huge_objects_cost_no_quadratic_time() {
        let keys: Vec<String> = (0..100_000).map(|i| format!("\"k{i}\":{i}")).collect();
        let text = format!("{{{}}}", keys.join(","));
        assert_eq!(notes_of(&text), Ok(None));
        let text = format!("{{{},\"k99999\":0}}", keys.join(","));
        assert_eq!(notes_of(&text), Ok(duplicate("the message", "k99999")));
    }

    #[test]
    fn key_set_switches_to_hashing_past_a_few_keys() {
        let mut keys = KeySet::default();
        for i in 0..20 {
            assert_eq!(keys.insert(Cow::Owned(format!("k{i}"))), Ok(()));
        }
        assert!(keys.large.is_some());
        assert!(keys.contains("k3") && keys.contains("k19") && !keys.contains("k20"));
        assert_eq!(keys.insert(Cow::Borrowed("k5")), Err(Cow::Borrowed("k5")));
    }

    #[test]
    fn d9_infinity_and_nan_are_noted_wherever_they_are() {
        for (text, field) in [
            ("{a: Infinity}", "a"),
            ("{a: [1, -Infinity]}", "a[1]"),
            ("{a: {b: NaN}}", "a.b"),
            ("{a: 1e999}", "a"),
        ] {
            assert_eq!(
                notes_of(text),
                Ok(Some(Note::NotJsonNumber { field: field.into() })),
                "{text}"
            );
        }
        let message = Note::NotJsonNumber {
            field: "body.x".into(),
        }
        .to_string();
        assert!(message.contains("JSON cannot carry"), "{message}");
    }

    #[test]
    fn d4_a_complaint_says_what_is_wrong_and_where() {
        for (text, complaint) in [
            (
                r#"{"a":1 "b":2}"#,
                "expected ',' or '}' after an entry at line 1 column 8",
            ),
            ("{a: 1, b: tru}", "expected a value at line 1 column 11"),
            ("{'a': 1, 'b' 2}", "expected ':' after a key at line 1 column 14"),
            (
                "{\"a\": 1, // note\r\n \"b\" 2}",
                "expected ':' after a key at line 2 column 6",
            ),
            ("{\"a\": [1,,]}", "expected a value at line 1 column 10"),
            (
                "{\"a\": 'x\\1'}",
                "the string holds the escape \\1, which neither JSON nor JSON5 has at line 1 column 7",
            ),
            ("{\"é\": 01}", "a number with a leading zero at line 1 column 7"),
            ("{a: 1 /* open", "a comment that does not end at line 1 column 7"),
            ("{a: 1} x", "text after the end of the message at line 1 column 8"),
        ] {
            assert_eq!(
                notes_of(text),
                Err(format!("message is not valid JSON or JSON5: {complaint}")),
                "{text}"
            );
        }
    }

    #[test]
    fn d9_every_json5_number_form_is_a_json_value() {
        #[derive(Default)]
        struct One(Value);
        impl<'de> Document<'de> for One {
            fn read<D: Deserializer<'de>>(&mut self, d: D, notes: &Notes) -> Result<(), D::Error> {
                self.0 = ValueSeed {
                    ctx: Ctx {
                        notes,
                        path: &Path::Root,
                    },
                }
                .deserialize(d)?;
                Ok(())
            }
        }
        let mut doc = One::default();
        parse(
            "{a: 0xff, b: -0xff, c: .5, d: 5., e: +1, f: 0XA, g: -.5e1, h: [null]}",
            &mut doc,
            &mut Notes::default(),
        )
        .unwrap();
        assert_eq!(
            doc.0,
            serde_json::json!({"a": 255, "b": -255, "c": 0.5, "d": 5.0, "e": 1, "f": 10, "g": -5.0, "h": [null]})
        );
    }
}
