//! The JSON syntax layer (D4): strict serde_json fast path, JSON5 fallback,
//! duplicate keys, UTF-8 and the depth limit checked before any recursive
//! parser runs.
//!
//! Parsing happens in two steps. This module does the first: it turns the
//! text into an [`Envelope`], a shallow, borrowed picture of the message in
//! which every field is kept with whatever JSON type it had. No field is
//! judged here except for duplicate keys (D4), so one malformed field never
//! hides a syntax error later in the text (D5 level 1 comes first). The
//! second step, in `parse.rs`, judges the envelope in D5's order.
//!
//! The same serde visitors run under serde_json (strict JSON, strings
//! borrowed from the input when they hold no escapes) and under the json5
//! crate (lenient; it always hands over owned strings).

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use memchr::{memchr2, memchr3, memmem};
use serde::de::{Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use smallvec::SmallVec;

use super::headers::HEADER_NAMES;

// ---------------------------------------------------------------------------
// The pre-scan: depth (D3) and lone surrogates (D4), without recursion.
// ---------------------------------------------------------------------------

/// What the pre-scan refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PrescanError {
    /// Objects and arrays nest deeper than the limit.
    TooDeep { limit: usize },
    /// A `\uD800`-`\uDFFF` escape that is not half of a surrogate pair.
    LoneSurrogate { at: usize },
}

impl fmt::Display for PrescanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrescanError::TooDeep { limit } => write!(
                f,
                "message nests objects and arrays deeper than the limit of {limit} levels"
            ),
            PrescanError::LoneSurrogate { at } => write!(
                f,
                "message holds a lone surrogate escape at byte {at}, which is not a character"
            ),
        }
    }
}

/// Checks, in one pass and without recursion, that objects and arrays nest
/// no deeper than `max_depth` (the message object is depth 1, D3) and that
/// every `\u` escape in the D800-DFFF range is a proper surrogate pair (D4).
///
/// It reads the text the way the D1 framing scanner and JSON5 do: `"…"` and
/// `'…'` strings with backslash escapes, `// …` comments ended by LF, CR,
/// U+2028 or U+2029, and `/* … */` comments. It must agree with the parsers
/// on where strings are, or brackets hidden in a "string" could reach the
/// json5 crate, which has no depth limit of its own and overflows the stack.
/// Whatever it does not understand it leaves for the parser to refuse.
///
/// serde_json skips escapes without checking them in values it ignores, and
/// json5 hides the check behind a recursive parse, so the surrogate check
/// lives here, where it covers both.
pub(crate) fn prescan(bytes: &[u8], max_depth: usize) -> Result<(), PrescanError> {
    let n = bytes.len();
    let mut depth = 0usize;
    let mut i = 0usize;
    // Every index below is checked against `n` before use.
    while i < n {
        let b = bytes[i];
        if !STRUCTURAL[b as usize] {
            i += 1;
            continue;
        }
        match b {
            b'{' | b'[' => {
                depth += 1;
                if depth > max_depth {
                    return Err(PrescanError::TooDeep { limit: max_depth });
                }
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'"' | b'\'' => i = skip_string(bytes, i + 1, b)?,
            b'/' => {
                i = match bytes.get(i + 1) {
                    Some(b'/') => skip_line_comment(bytes, i + 2),
                    Some(b'*') => match memmem::find(&bytes[i + 2..], b"*/") {
                        Some(end) => i + 2 + end + 2,
                        None => n,
                    },
                    _ => i + 1,
                }
            }
            // A backslash outside a string can only be a `\u` escape in a
            // JSON5 unquoted key; it must not smuggle a surrogate either.
            _ => i = skip_escape(bytes, i)?,
        }
    }
    Ok(())
}

/// The bytes the pre-scan stops at outside strings.
static STRUCTURAL: [bool; 256] = {
    let mut table = [false; 256];
    let special = b"{}[]\"'/\\";
    let mut k = 0;
    while k < special.len() {
        table[special[k] as usize] = true;
        k += 1;
    }
    table
};

/// From just after an opening quote, returns the index just after the
/// closing one (or the end of the text).
#[inline]
fn skip_string(bytes: &[u8], mut i: usize, quote: u8) -> Result<usize, PrescanError> {
    let n = bytes.len();
    // Most strings of an envelope are short: a plain loop over the first
    // bytes beats the set-up of a vectorised search.
    let short_end = n.min(i + 32);
    while i < short_end {
        let b = bytes[i];
        if b == quote {
            return Ok(i + 1);
        }
        if b == b'\\' {
            i = skip_escape(bytes, i)?;
        } else {
            i += 1;
        }
    }
    loop {
        let rest = bytes.get(i..).unwrap_or_default();
        match memchr2(quote, b'\\', rest) {
            None => return Ok(n),
            Some(off) if rest[off] == quote => return Ok(i + off + 1),
            Some(off) => i = skip_escape(bytes, i + off)?,
        }
    }
}

/// `bytes[at]` is a backslash: returns the index after its escape, checking
/// `\u` surrogates. A multi-byte character after the backslash (a line
/// continuation) is skipped by its first byte; the rest cannot be a quote.
fn skip_escape(bytes: &[u8], at: usize) -> Result<usize, PrescanError> {
    if bytes.get(at + 1) != Some(&b'u') {
        return Ok(at + 2);
    }
    match hex4(bytes, at + 2) {
        Some(0xDC00..=0xDFFF) => Err(PrescanError::LoneSurrogate { at }),
        Some(0xD800..=0xDBFF) => {
            let low = if bytes.get(at + 6..at + 8) == Some(b"\\u") {
                hex4(bytes, at + 8)
            } else {
                None
            };
            match low {
                Some(0xDC00..=0xDFFF) => Ok(at + 12),
                _ => Err(PrescanError::LoneSurrogate { at }),
            }
        }
        // Not four hex digits: the parser refuses it.
        _ => Ok(at + 2),
    }
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    digits.iter().try_fold(0u32, |acc, &d| {
        let v = (d as char).to_digit(16)?;
        Some(acc * 16 + v)
    })
}

/// Returns the index of the line end that closes a `//` comment (the end
/// itself is ordinary whitespace to the caller).
fn skip_line_comment(bytes: &[u8], mut i: usize) -> usize {
    loop {
        let rest = bytes.get(i..).unwrap_or_default();
        match memchr3(b'\n', b'\r', 0xE2, rest) {
            None => return bytes.len(),
            Some(off) if rest[off] != 0xE2 => return i + off,
            Some(off) => {
                // U+2028 and U+2029 are E2 80 A8 and E2 80 A9.
                if matches!(rest.get(off + 1..off + 3), Some([0x80, 0xA8 | 0xA9])) {
                    return i + off;
                }
                i += off + 1;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The shallow picture of a message.
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
    Array(Vec<StrOr<'a>>),
    /// Each entry in order, the value `Err` when it was not a string.
    Object(Vec<(Cow<'a, str>, StrOr<'a>)>),
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

/// A string, borrowed from the input when the parser can (no escapes).
pub(crate) struct Text<'a>(pub(crate) Cow<'a, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(TextVisitor).map(Text)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
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

/// Implements the scalar `visit_*` methods of a visitor whose value is
/// built from a `Loose` scalar by `$wrap`.
macro_rules! scalar_visits {
    ($wrap:expr) => {
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($wrap(Loose::Null))
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok($wrap(Loose::Null))
        }
        fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
            Ok($wrap(Loose::Bool(v)))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
            Ok($wrap(Loose::Number(Number::Unsigned(v))))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
            Ok($wrap(Loose::Number(Number::Signed(v))))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
            Ok($wrap(Loose::Number(Number::Float(v))))
        }
        fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok($wrap(Loose::Str(Cow::Borrowed(v))))
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok($wrap(Loose::Str(Cow::Owned(v.to_owned()))))
        }
        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok($wrap(Loose::Str(Cow::Owned(v))))
        }
    };
}

/// A value the caller does not look into, read only for its nesting depth
/// (a scalar is 0, `[]` is 1). Unlike serde's `IgnoredAny` it makes
/// serde_json decode every string, so lone surrogates are refused there
/// too (D4).
struct Depth(usize);

impl<'de> Deserialize<'de> for Depth {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DepthVisitor)
    }
}

struct DepthVisitor;

impl<'de> Visitor<'de> for DepthVisitor {
    type Value = Depth;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalar_visits!(|_| Depth(0));

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        drain_seq(seq).map(Depth)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        drain_map(map).map(Depth)
    }
}

/// Drains a sequence the caller does not look into; returns its depth.
fn drain_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<usize, A::Error> {
    let mut inner = 0;
    while let Some(Depth(d)) = seq.next_element()? {
        inner = inner.max(d);
    }
    Ok(inner + 1)
}

/// Drains a map the caller does not look into; returns its depth.
fn drain_map<'de, A: MapAccess<'de>>(mut map: A) -> Result<usize, A::Error> {
    let mut inner = 0;
    while let Some((Depth(_), Depth(d))) = map.next_entry()? {
        inner = inner.max(d);
    }
    Ok(inner + 1)
}

/// The depth of a JSON value (a scalar is 0). Recursive, but only ever
/// called on values a parser has built within its own depth limit.
fn value_depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(value_depth).max().unwrap_or(0),
        Value::Object(map) => 1 + map.values().map(value_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// A string, or the kind of whatever else it was (insides drained), and
/// its depth.
struct StrOrKind<'a>(StrOr<'a>, usize);

impl<'de> Deserialize<'de> for StrOrKind<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrOrKindVisitor)
    }
}

struct StrOrKindVisitor;

impl<'de> Visitor<'de> for StrOrKindVisitor {
    type Value = StrOrKind<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalar_visits!(|l: Loose<'de>| StrOrKind(
        match l {
            Loose::Str(s) => Ok(s),
            other => Err(other.kind()),
        },
        0
    ));

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Ok(StrOrKind(Err(Kind::Array), drain_seq(seq)?))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Ok(StrOrKind(Err(Kind::Object), drain_map(map)?))
    }
}

/// A [`Loose`] value and its depth.
struct Measured<'a>(Loose<'a>, usize);

impl<'de> Deserialize<'de> for Measured<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LooseVisitor)
    }
}

struct LooseVisitor;

impl<'de> Visitor<'de> for LooseVisitor {
    type Value = Measured<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    scalar_visits!(|l| Measured(l, 0));

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        let mut inner = 0;
        while let Some(StrOrKind(item, d)) = seq.next_element()? {
            items.push(item);
            inner = inner.max(d);
        }
        Ok(Measured(Loose::Array(items), inner + 1))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut entries = Vec::new();
        let mut inner = 0;
        while let Some(Text(key)) = map.next_key()? {
            let StrOrKind(value, d) = map.next_value()?;
            entries.push((key, value));
            inner = inner.max(d);
        }
        Ok(Measured(Loose::Object(entries), inner + 1))
    }
}

/// Records the first duplicate key of one object (D4).
fn note_duplicate(first: &mut Option<String>, place: &str, key: &str) {
    if first.is_none() {
        *first = Some(format!(
            "{place} has the key {} twice",
            serde_json::to_string(key).unwrap_or_default()
        ));
    }
}

/// Keeps names outside a fixed list, to find duplicates among them. The set
/// is only allocated once such a name appears.
#[derive(Debug, Default)]
struct OtherNames(Option<HashSet<String>>);

impl OtherNames {
    /// Whether `name` was new.
    fn insert(&mut self, name: String) -> bool {
        self.0.get_or_insert_with(HashSet::new).insert(name)
    }
}

// ---------------------------------------------------------------------------
// headers
// ---------------------------------------------------------------------------

/// One header: the name as written, the index in [`HEADER_NAMES`] of the
/// listed name it matches case-insensitively (D8), and the value.
pub(crate) type HeaderEntry<'a> = (Cow<'a, str>, Option<usize>, Loose<'a>);

/// The index in [`HEADER_NAMES`] of the listed name `name` matches
/// case-insensitively (D8). Names are nearly always written lower-case:
/// an exact match (a jump on the length, then one comparison) comes first.
#[inline]
fn listed_header(name: &str) -> Option<usize> {
    let exact = match name {
        "content-type" => Some(0),
        "accept" => Some(1),
        "accept-encoding" => Some(2),
        "accept-language" => Some(3),
        "authorization" => Some(4),
        "cookies" => Some(5),
        "if-modified-since" => Some(6),
        "if-unmodified-since" => Some(7),
        "expect" => Some(8),
        "ignore-invalid-headers" => Some(9),
        "date" => Some(10),
        "language" => Some(11),
        "set-cookies" => Some(12),
        _ => None,
    };
    exact.or_else(|| {
        HEADER_NAMES
            .iter()
            .position(|known| known.eq_ignore_ascii_case(name))
    })
}

/// The `headers` object, entries in document order (a request carries a
/// few: they are kept without an allocation of their own).
#[derive(Debug, Default)]
pub(crate) struct RawHeaders<'a> {
    pub(crate) entries: SmallVec<[HeaderEntry<'a>; 4]>,
    pub(crate) duplicate: Option<String>,
    depth: usize,
}

/// Builds one of the three nested objects (`headers`, `body`, `status`)
/// from a map; [`ObjectSeed`] handles a value that is not an object.
pub(crate) trait FromMap<'de>: Sized + Default {
    /// Reads the entries of the map into `self`, a fresh default value.
    fn fill<A: MapAccess<'de>>(&mut self, map: A) -> Result<(), A::Error>;
    /// Its nesting depth (the object itself is 1).
    fn depth(&self) -> usize;
}

impl<'de> FromMap<'de> for RawHeaders<'de> {
    fn fill<A: MapAccess<'de>>(&mut self, mut map: A) -> Result<(), A::Error> {
        let headers = self;
        let mut seen = 0u16;
        let mut others = OtherNames::default();
        while let Some(Text(name)) = map.next_key()? {
            let Measured(value, depth) = map.next_value()?;
            headers.depth = headers.depth.max(depth);
            let listed = listed_header(&name);
            let new = match listed {
                Some(i) => {
                    let bit = 1u16 << i;
                    let new = seen & bit == 0;
                    seen |= bit;
                    new
                }
                None => others.insert(name.to_ascii_lowercase()),
            };
            if !new {
                note_duplicate(&mut headers.duplicate, "headers", &name.to_ascii_lowercase());
            }
            headers.entries.push((name, listed, value));
        }
        headers.depth += 1;
        Ok(())
    }

    fn depth(&self) -> usize {
        self.depth
    }
}

// ---------------------------------------------------------------------------
// body
// ---------------------------------------------------------------------------

/// The `body` object.
#[derive(Debug, Default)]
pub(crate) struct RawBody<'a> {
    pub(crate) content: Option<Loose<'a>>,
    pub(crate) encoding: Option<Loose<'a>>,
    /// The other keys (D9), except those whose value is `null`.
    pub(crate) extra: Map<String, Value>,
    /// The first other key whose value is `null` (D9: `400`).
    pub(crate) null_key: Option<String>,
    pub(crate) duplicate: Option<String>,
    depth: usize,
}

impl<'de> FromMap<'de> for RawBody<'de> {
    fn fill<A: MapAccess<'de>>(&mut self, mut map: A) -> Result<(), A::Error> {
        let body = self;
        let mut null_seen = OtherNames::default();
        while let Some(Text(key)) = map.next_key()? {
            let slot = match &*key {
                "content" => Some(&mut body.content),
                "encoding" => Some(&mut body.encoding),
                _ => None,
            };
            let duplicate = match slot {
                Some(slot) => {
                    let Measured(value, depth) = map.next_value()?;
                    body.depth = body.depth.max(depth);
                    slot.replace(value).is_some()
                }
                None => {
                    let value: Value = map.next_value()?;
                    body.depth = body.depth.max(value_depth(&value));
                    if value.is_null() {
                        if body.null_key.is_none() {
                            body.null_key = Some(key.clone().into_owned());
                        }
                        !null_seen.insert(key.clone().into_owned()) || body.extra.contains_key(&*key)
                    } else {
                        body.extra.insert(key.clone().into_owned(), value).is_some()
                            || null_seen.0.as_ref().is_some_and(|s| s.contains(&*key))
                    }
                }
            };
            if duplicate {
                note_duplicate(&mut body.duplicate, "body", &key);
            }
        }
        body.depth += 1;
        Ok(())
    }

    fn depth(&self) -> usize {
        self.depth
    }
}

// ---------------------------------------------------------------------------
// status (responses)
// ---------------------------------------------------------------------------

/// The `status` object of a response.
#[derive(Debug, Default)]
pub(crate) struct RawStatus<'a> {
    pub(crate) code: Option<Loose<'a>>,
    pub(crate) formal_message: Option<Loose<'a>>,
    pub(crate) human_message: Option<Loose<'a>>,
    /// The first key that is none of the three.
    pub(crate) unknown: Option<String>,
    pub(crate) duplicate: Option<String>,
    depth: usize,
}

impl<'de> FromMap<'de> for RawStatus<'de> {
    fn fill<A: MapAccess<'de>>(&mut self, mut map: A) -> Result<(), A::Error> {
        let status = self;
        let mut others = OtherNames::default();
        while let Some(Text(key)) = map.next_key()? {
            let slot = match &*key {
                "code" => Some(&mut status.code),
                "formal-message" => Some(&mut status.formal_message),
                "human-message" => Some(&mut status.human_message),
                _ => None,
            };
            let duplicate = match slot {
                Some(slot) => {
                    let Measured(value, depth) = map.next_value()?;
                    status.depth = status.depth.max(depth);
                    slot.replace(value).is_some()
                }
                None => {
                    let Depth(depth) = map.next_value()?;
                    status.depth = status.depth.max(depth);
                    if status.unknown.is_none() {
                        status.unknown = Some(key.clone().into_owned());
                    }
                    !others.insert(key.clone().into_owned())
                }
            };
            if duplicate {
                note_duplicate(&mut status.duplicate, "status", &key);
            }
        }
        status.depth += 1;
        Ok(())
    }

    fn depth(&self) -> usize {
        self.depth
    }
}

/// Reads an object of type `T` into its slot in the envelope, in place (a
/// `RawBody` is some 150 bytes: returned through serde's layers it would be
/// copied several times), or the kind of the value that stood there. The
/// value says whether the slot was already filled (a duplicate key, D4) and
/// how deep the value nests.
pub(crate) struct ObjectSeed<'s, T>(&'s mut Option<Result<T, Kind>>);

impl<'s, T> ObjectSeed<'s, T> {
    fn other(self, kind: Kind, depth: usize) -> (bool, usize) {
        let duplicate = self.0.replace(Err(kind)).is_some();
        (duplicate, depth)
    }
}

impl<'de, T: FromMap<'de>> DeserializeSeed<'de> for ObjectSeed<'_, T> {
    type Value = (bool, usize);

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: FromMap<'de>> Visitor<'de> for ObjectSeed<'_, T> {
    type Value = (bool, usize);

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(self.other(Kind::Null, 0))
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(self.other(Kind::Null, 0))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(self.other(Kind::Boolean, 0))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(self.other(Kind::Number, 0))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(self.other(Kind::Number, 0))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(self.other(Kind::Number, 0))
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(self.other(Kind::String, 0))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        let depth = drain_seq(seq)?;
        Ok(self.other(Kind::Array, depth))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let duplicate = self.0.is_some();
        let object = self.0.insert(Ok(T::default()));
        // Just put there.
        let Ok(object) = object else {
            return Ok((duplicate, 0));
        };
        object.fill(map)?;
        Ok((duplicate, object.depth()))
    }
}

// ---------------------------------------------------------------------------
// The envelope
// ---------------------------------------------------------------------------

/// The top-level fields of a request or a response, each as it was found.
/// `None`: the field is missing.
#[derive(Debug, Default)]
pub(crate) struct Envelope<'a> {
    pub(crate) jsontp: Option<Loose<'a>>,
    pub(crate) type_: Option<Loose<'a>>,
    pub(crate) resource: Option<Loose<'a>>,
    pub(crate) method: Option<Loose<'a>>,
    pub(crate) status: Option<Result<RawStatus<'a>, Kind>>,
    pub(crate) headers: Option<Result<RawHeaders<'a>, Kind>>,
    pub(crate) body: Option<Result<RawBody<'a>, Kind>>,
    /// Top-level keys outside the seven above, in document order (only the
    /// first is reported, but all are kept to find duplicates).
    pub(crate) unknown: Option<String>,
    pub(crate) duplicate: Option<String>,
    resource_twice: bool,
    /// The nesting depth of the whole message (the envelope is 1, D3).
    pub(crate) depth: usize,
}

impl Envelope<'_> {
    /// The first duplicate key anywhere in the envelope (D4), top level
    /// first, then `status`, `headers`, `body`.
    pub(crate) fn first_duplicate(&self) -> Option<&str> {
        self.duplicate
            .as_deref()
            .or_else(|| nested_dup(&self.status, |s| &s.duplicate))
            .or_else(|| nested_dup(&self.headers, |h| &h.duplicate))
            .or_else(|| nested_dup(&self.body, |b| &b.duplicate))
    }

    /// The string to echo as `resource` (D12): the request's own string
    /// whenever it is a string, even an invalid one; `""` when it is
    /// missing, not a string, or written twice (no one can say which).
    pub(crate) fn resource_echo(&self) -> String {
        match &self.resource {
            Some(Loose::Str(s)) if !self.resource_twice => s.clone().into_owned(),
            _ => String::new(),
        }
    }
}

fn nested_dup<T>(slot: &Option<Result<T, Kind>>, f: impl Fn(&T) -> &Option<String>) -> Option<&str> {
    match slot {
        Some(Ok(t)) => f(t).as_deref(),
        _ => None,
    }
}

/// Reads the top level of a message into an [`Envelope`] in place (the
/// envelope is a few hundred bytes: filling it where it lives, rather than
/// returning it through serde's layers, saves copying it around). The value
/// is `None` for an object, or the kind of whatever else the message was
/// (D5 level 1).
struct TopSeed<'e, 'a>(&'e mut Envelope<'a>);

impl<'de> DeserializeSeed<'de> for TopSeed<'_, 'de> {
    type Value = Option<Kind>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_, 'de> {
    type Value = Option<Kind>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    scalar_visits!(|l: Loose<'de>| Some(l.kind()));

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.depth = drain_seq(seq)?;
        Ok(Some(Kind::Array))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let env = self.0;
        let mut others = OtherNames::default();
        let mut inner = 0;
        while let Some(Text(key)) = map.next_key()? {
            let mut loose = |slot: &mut Option<Loose<'de>>, Measured(value, depth): Measured<'de>| {
                inner = inner.max(depth);
                slot.replace(value).is_some()
            };
            let duplicate = match &*key {
                "jsontp" => loose(&mut env.jsontp, map.next_value()?),
                "type" => loose(&mut env.type_, map.next_value()?),
                "resource" => {
                    let twice = loose(&mut env.resource, map.next_value()?);
                    env.resource_twice |= twice;
                    twice
                }
                "method" => loose(&mut env.method, map.next_value()?),
                "status" => {
                    let (twice, depth) = map.next_value_seed(ObjectSeed(&mut env.status))?;
                    inner = inner.max(depth);
                    twice
                }
                "headers" => {
                    let (twice, depth) = map.next_value_seed(ObjectSeed(&mut env.headers))?;
                    inner = inner.max(depth);
                    twice
                }
                "body" => {
                    let (twice, depth) = map.next_value_seed(ObjectSeed(&mut env.body))?;
                    inner = inner.max(depth);
                    twice
                }
                _ => {
                    let Depth(depth) = map.next_value()?;
                    inner = inner.max(depth);
                    if env.unknown.is_none() {
                        env.unknown = Some(key.clone().into_owned());
                    }
                    !others.insert(key.clone().into_owned())
                }
            };
            if duplicate {
                note_duplicate(&mut env.duplicate, "the message", &key);
            }
        }
        env.depth = inner + 1;
        Ok(None)
    }
}

/// Parses the text of one message into `env`: strict JSON first, JSON5
/// when strict JSON fails (D4). Returns `None` for an object, or the kind
/// of the value the message was instead. The error says what is wrong: for
/// syntax, the strict parser's message, which says where.
///
/// The depth limit (D3) and lone surrogates (D4) are checked without a
/// separate pass on the strict path: serde_json stops at 128 levels on its
/// own, decodes (and checks) every string our visitors ask for, and the
/// visitors measure the depth. Only when strict parsing fails does the
/// [`prescan`] run, before the json5 crate, which has no depth limit, sees
/// the text.
pub(crate) fn parse_top<'a>(
    text: &'a str,
    env: &mut Envelope<'a>,
    max_depth: usize,
) -> Result<Option<Kind>, String> {
    let mut strict = serde_json::Deserializer::from_str(text);
    let strict_error = match TopSeed(env)
        .deserialize(&mut strict)
        .and_then(|kind| strict.end().map(|()| kind))
    {
        Ok(_) if env.depth > max_depth => {
            return Err(PrescanError::TooDeep { limit: max_depth }.to_string());
        }
        Ok(kind) => return Ok(kind),
        // Our visitors accept every JSON value, so a strict failure is a
        // syntax failure (or a lone surrogate, or past 128 levels): try the
        // lenient grammar, once the pre-scan has cleared the text.
        Err(e) => e,
    };
    prescan(text.as_bytes(), max_depth).map_err(|e| e.to_string())?;
    *env = Envelope::default();
    let lenient = json5::Deserializer::from_str(text).and_then(|mut de| TopSeed(env).deserialize(&mut de));
    lenient.map_err(|_| format!("message is not valid JSON or JSON5: {strict_error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nest(open: &str, n: usize) -> String {
        open.repeat(n)
    }

    #[test]
    fn d3_depth_counts_objects_and_arrays() {
        assert_eq!(prescan(b"{}", 1), Ok(()));
        assert_eq!(prescan(b"{\"a\":[]}", 1), Err(PrescanError::TooDeep { limit: 1 }));
        assert_eq!(prescan(b"{\"a\":[]}", 2), Ok(()));
        let deep = format!("{{\"a\":{}", nest("[", 64));
        assert_eq!(
            prescan(deep.as_bytes(), 64),
            Err(PrescanError::TooDeep { limit: 64 })
        );
        let ok = format!("{{\"a\":{}{}}}", nest("[", 63), nest("]", 63));
        assert_eq!(prescan(ok.as_bytes(), 64), Ok(()));
    }

    #[test]
    fn d3_brackets_in_strings_and_comments_do_not_count() {
        let text = br#"{"a":"[[[[", 'b':'{{{\'[[', "c\"[[":1 // [[[[
            /* [[[[ */ }"#;
        assert_eq!(prescan(text, 1), Ok(()));
        // A comment ends at U+2028, as in JSON5: the bracket after it counts.
        let text = "{ // x\u{2028}[] }".as_bytes();
        assert_eq!(prescan(text, 1), Err(PrescanError::TooDeep { limit: 1 }));
        let text = "{ // x\u{2027}[] }".as_bytes();
        assert_eq!(prescan(text, 1), Ok(()));
    }

    #[test]
    fn d3_long_strings_hide_brackets_past_the_short_loop() {
        for pad in [0, 10, 23, 24, 25, 40, 100] {
            let x = "x".repeat(pad);
            let text = format!(r#"{{"a":"{x}\"[[[[{x}[[\\","b":'{x}\'[[{x}'}}"#);
            assert_eq!(prescan(text.as_bytes(), 1), Ok(()), "{text}");
            // The string ends where it should: the array after it counts.
            let text = format!(r#"{{"a":"{x}\"{x}","b":[]}}"#);
            assert!(prescan(text.as_bytes(), 1).is_err(), "{text}");
            let text = format!(r#"{{"a":"{x}\ud800"}}"#);
            assert!(prescan(text.as_bytes(), 64).is_err(), "{text}");
        }
    }

    #[test]
    fn d4_lone_surrogates_are_found_everywhere() {
        assert!(prescan(br#"{"a":"\ud800"}"#, 64).is_err());
        assert!(prescan(br#"{"a":"\uDC00"}"#, 64).is_err());
        assert!(prescan(br#"{"a":"\ud800\u0041"}"#, 64).is_err());
        assert!(prescan(br#"{'a':'x\ud800'}"#, 64).is_err());
        assert!(prescan(br#"{\ud800a:1}"#, 64).is_err());
        assert_eq!(prescan(br#"{"a":"\ud83d\ude00"}"#, 64), Ok(()));
        assert_eq!(prescan(br#"{"a":"\\ud800"}"#, 64), Ok(()));
        assert_eq!(prescan(br#"{"a":"\u00e9"}"#, 64), Ok(()));
    }

    #[test]
    fn d4_what_the_parsers_do_with_lone_surrogates() {
        // serde_json refuses one in a string it decodes but skips it in a
        // value it ignores; json5 refuses it. Hence the pre-scan.
        assert!(serde_json::from_str::<String>(r#""\ud800""#).is_err());
        assert!(serde_json::from_str::<serde::de::IgnoredAny>(r#""\ud800""#).is_ok());
        assert!(json5::from_str::<String>(r#""\ud800""#).is_err());
    }

    #[test]
    fn d4_lone_surrogates_in_values_nobody_reads_are_refused() {
        for text in [
            r#"{"x":["\ud800"]}"#,
            r#"{"status":{"q":{"r":"\udc00"}}}"#,
            r#"{"headers":{"x":[1,{"\ud800":2}]}}"#,
            r#"{"body":{"x":{"y":"\ud800"}}}"#,
            "{x: ['\\ud800']}",
        ] {
            let err = parse_top(text, &mut Envelope::default(), 64).unwrap_err();
            assert!(err.contains("lone surrogate"), "{text}: {err}");
        }
    }

    #[test]
    fn d3_depth_is_measured_on_the_strict_path() {
        // 65 levels: serde_json parses it (its own limit is 128), the
        // visitors measure it.
        let text = format!("{{\"x\":{}{}}}", "[".repeat(64), "]".repeat(64));
        let mut env = Envelope::default();
        assert!(parse_top(&text, &mut env, 64).unwrap_err().contains("deeper"));
        assert_eq!(parse_top(&text, &mut Envelope::default(), 65), Ok(None));
        for field in ["status", "headers", "body", "resource"] {
            let text = format!("{{\"{field}\":{{\"x\":{}{}}}}}", "[".repeat(63), "]".repeat(63));
            assert!(parse_top(&text, &mut Envelope::default(), 64).is_err(), "{field}");
            assert_eq!(
                parse_top(&text, &mut Envelope::default(), 65),
                Ok(None),
                "{field}"
            );
        }
    }

    #[test]
    fn strict_strings_are_borrowed_and_json5_parses() {
        let text = r#"{"resource":"/a","jsontp":"1.0"}"#;
        let mut env = Envelope::default();
        assert_eq!(parse_top(text, &mut env, 64), Ok(None));
        assert!(matches!(env.resource, Some(Loose::Str(Cow::Borrowed("/a")))));
        let text = "{resource: '/a', // c\n jsontp: \"1.0\",}";
        let mut env = Envelope::default();
        assert_eq!(parse_top(text, &mut env, 64), Ok(None));
        assert_eq!(env.resource, Some(Loose::Str("/a".into())));
    }

    #[test]
    fn d4_duplicates_compare_decoded_keys() {
        let mut env = Envelope::default();
        assert_eq!(
            parse_top(r#"{"method":"GET","\u006dethod":"PUT"}"#, &mut env, 64),
            Ok(None)
        );
        assert_eq!(
            env.first_duplicate(),
            Some("the message has the key \"method\" twice")
        );
        let mut env = Envelope::default();
        assert_eq!(
            parse_top(r#"{"headers":{"Accept":"*/*","accept":"*/*"}}"#, &mut env, 64),
            Ok(None)
        );
        assert_eq!(
            env.first_duplicate(),
            Some("headers has the key \"accept\" twice")
        );
        let mut env = Envelope::default();
        assert_eq!(parse_top(r#"{"body":{"m":null,"m":1}}"#, &mut env, 64), Ok(None));
        assert!(env.first_duplicate().is_some());
    }

    #[test]
    fn d8_listed_header_names_match_in_any_case() {
        for (i, name) in HEADER_NAMES.iter().enumerate() {
            assert_eq!(listed_header(name), Some(i), "{name}");
            assert_eq!(listed_header(&name.to_ascii_uppercase()), Some(i), "{name}");
        }
        assert_eq!(listed_header("Content-Type"), Some(0));
        assert_eq!(listed_header("content-typ"), None);
        assert_eq!(listed_header("x-custom"), None);
        assert_eq!(listed_header(""), None);
    }

    #[test]
    fn syntax_errors_name_the_place() {
        let err = parse_top(r#"{"a":1 "b":2}"#, &mut Envelope::default(), 64).unwrap_err();
        assert!(err.starts_with("message is not valid JSON or JSON5: "), "{err}");
        assert!(err.contains("line 1 column"), "{err}");
    }
}
