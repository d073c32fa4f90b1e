//! The envelope: a shallow, borrowed picture of one message, in which every
//! field is kept with whatever JSON type it had.
//!
//! Parsing happens in two steps. [`crate::message::read::syntax`] drives the seeds of this
//! file to fill an [`Envelope`]; no field is judged here (only duplicate
//! keys and numbers JSON cannot carry are noted on the way, D4, D9), so one
//! malformed field never hides a syntax error later in the text (D5 level 1
//! comes first). The second step, in `parse.rs`, judges the envelope in
//! D5's order.
//!
//! The envelope keeps what the judging needs and no more: the scalar
//! fields as [`Loose`] values, the `headers` in document order, the `body`'s
//! own fields and its other keys as JSON values, the `status` of a response.

use std::borrow::Cow;
use std::fmt;
use std::mem::ManuallyDrop;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use smallvec::SmallVec;

use crate::message::headers::HEADER_NAMES;
use crate::message::read::syntax::{
    AnySeed, Ctx, Document, Items, KeySeed, KeySet, Kind, Loose, LooseSeed, Notes, Path, ValueSeed,
};

/// The top-level fields of a request or a response, each as it was found,
/// in [`Fields`]: an envelope reads as its fields (`env.headers`).
#[derive(Debug, Default)]
pub(crate) struct Envelope<'a> {
    /// Dropped only when they may own memory: see `borrows_only`.
    fields: ManuallyDrop<Fields<'a>>,
    /// Every string in it is borrowed from the message and no value owns
    /// memory, as the one-pass reader (`quick.rs`) fills it: dropping it
    /// frees the header list's buffer if it has one, and walks nothing
    /// else.
    pub(crate) borrows_only: bool,
}

/// The fields of an [`Envelope`]. `None`: the field is missing.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Fields<'a> {
    pub(crate) jsontp: Option<Loose<'a>>,
    pub(crate) type_: Option<Loose<'a>>,
    pub(crate) resource: Option<Loose<'a>>,
    pub(crate) method: Option<Loose<'a>>,
    pub(crate) status: Option<Result<RawStatus<'a>, Kind>>,
    pub(crate) headers: Option<Result<RawHeaders<'a>, Kind>>,
    pub(crate) body: Option<Result<RawBody<'a>, Kind>>,
    /// The first top-level key outside the seven above, in document order.
    pub(crate) unknown: Option<String>,
    /// `resource` was written twice: no one can say which to echo.
    resource_twice: bool,
}

impl<'a> std::ops::Deref for Envelope<'a> {
    type Target = Fields<'a>;

    fn deref(&self) -> &Fields<'a> {
        &self.fields
    }
}

impl<'a> std::ops::DerefMut for Envelope<'a> {
    fn deref_mut(&mut self) -> &mut Fields<'a> {
        &mut self.fields
    }
}

impl PartialEq for Envelope<'_> {
    /// The message's fields; how the envelope holds them aside.
    fn eq(&self, other: &Self) -> bool {
        *self.fields == *other.fields
    }
}

impl Drop for Envelope<'_> {
    fn drop(&mut self) {
        if self.borrows_only {
            debug_assert!(self.owns_nothing(), "{self:?}");
            // Nothing to free but the header list's own buffer, when it
            // holds more headers than fit in place: the rest is left as it
            // is.
            if let Some(Ok(headers)) = &mut self.fields.headers
                && headers.entries.spilled()
            {
                drop(std::mem::take(&mut headers.entries));
            }
        } else {
            drop(std::mem::take(&mut *self.fields));
        }
    }
}

impl Fields<'_> {
    /// Whether no value in it owns memory, the header list's buffer
    /// aside: what [`Envelope::borrows_only`] promises.
    pub(crate) fn owns_nothing(&self) -> bool {
        fn loose(value: Option<&Loose<'_>>) -> bool {
            match value {
                None | Some(Loose::Null | Loose::Bool(_) | Loose::Number(_)) => true,
                Some(Loose::Str(s)) => matches!(s, Cow::Borrowed(_)),
                Some(Loose::Array(items)) => matches!(items, Items::Plain(_)),
                Some(Loose::Object(_)) => false,
            }
        }
        let headers = match &self.headers {
            Some(Ok(headers)) => headers
                .entries
                .iter()
                .all(|(name, _, value)| matches!(name, Cow::Borrowed(_)) && loose(Some(value))),
            _ => true,
        };
        let body = match &self.body {
            Some(Ok(body)) => {
                loose(body.content.as_ref())
                    && loose(body.encoding.as_ref())
                    && body.extra.is_none()
                    && body.null_key.is_none()
            }
            _ => true,
        };
        let status = match &self.status {
            Some(Ok(status)) => {
                loose(status.code.as_ref())
                    && loose(status.formal_message.as_ref())
                    && loose(status.human_message.as_ref())
                    && status.unknown.is_none()
            }
            _ => true,
        };
        [&self.jsontp, &self.type_, &self.resource, &self.method]
            .into_iter()
            .all(|value| loose(value.as_ref()))
            && headers
            && body
            && status
            && self.unknown.is_none()
    }

    /// The string to echo as `resource` (D12): the request's own string
    /// whenever it is a string, even an invalid one; `""` when it is
    /// missing, not a string, or written twice.
    pub(crate) fn resource_echo(&self) -> String {
        match &self.resource {
            Some(Loose::Str(s)) if !self.resource_twice => s.clone().into_owned(),
            _ => String::new(),
        }
    }
}

impl<'de> Document<'de> for Envelope<'de> {
    fn read<D: Deserializer<'de>>(&mut self, d: D, notes: &Notes) -> Result<(), D::Error> {
        d.deserialize_map(TopSeed { env: self, notes })
    }
}

/// Reads the top level of a message into an [`Envelope`] in place (the
/// envelope is a few hundred bytes: filling it where it lives, rather than
/// returning it through serde's layers, saves copying it around).
struct TopSeed<'e, 'n, 'a> {
    env: &'e mut Envelope<'a>,
    notes: &'n Notes,
}

impl<'de> Visitor<'de> for TopSeed<'_, '_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let env = self.env;
        let ctx = Ctx {
            notes: self.notes,
            path: &Path::Root,
        };
        let mut others = KeySet::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let path = Path::Key(ctx.path, &key);
            let at = ctx.at(&path);
            let loose = |slot: &mut Option<Loose<'de>>, map: &mut A| -> Result<bool, A::Error> {
                let value = map.next_value_seed(LooseSeed { ctx: at })?;
                Ok(slot.replace(value).is_some())
            };
            let duplicate = match &*key {
                "jsontp" => loose(&mut env.jsontp, &mut map)?,
                "type" => loose(&mut env.type_, &mut map)?,
                "resource" => {
                    let twice = loose(&mut env.resource, &mut map)?;
                    env.resource_twice |= twice;
                    twice
                }
                "method" => loose(&mut env.method, &mut map)?,
                "status" => map.next_value_seed(ObjectSeed {
                    slot: &mut env.status,
                    ctx: at,
                })?,
                "headers" => map.next_value_seed(ObjectSeed {
                    slot: &mut env.headers,
                    ctx: at,
                })?,
                "body" => map.next_value_seed(ObjectSeed {
                    slot: &mut env.body,
                    ctx: at,
                })?,
                _ => {
                    map.next_value_seed(AnySeed { ctx: at })?;
                    if env.unknown.is_none() {
                        env.unknown = Some(key.clone().into_owned());
                    }
                    others.insert(key.clone()).is_err()
                }
            };
            if duplicate {
                ctx.notes.duplicate(ctx.path, &key);
            }
        }
        Ok(())
    }
}

/// One of the three nested objects (`headers`, `body`, `status`), read
/// from a map; [`ObjectSeed`] handles a value that is not an object.
pub(crate) trait FromMap<'de>: Sized + Default {
    /// Reads the entries of the map into `self`, a fresh default value;
    /// `ctx` is where the object is.
    fn fill<A: MapAccess<'de>>(&mut self, map: A, ctx: Ctx<'_>) -> Result<(), A::Error>;
}

/// Reads an object of type `T` into its slot in the envelope, in place, or
/// the kind of the value that stood there. The value says whether the slot
/// was already filled (a duplicate key, D4).
struct ObjectSeed<'s, 'c, T> {
    slot: &'s mut Option<Result<T, Kind>>,
    ctx: Ctx<'c>,
}

impl<T> ObjectSeed<'_, '_, T> {
    fn other(self, kind: Kind) -> bool {
        self.slot.replace(Err(kind)).is_some()
    }
}

impl<'de, T: FromMap<'de>> DeserializeSeed<'de> for ObjectSeed<'_, '_, T> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, T: FromMap<'de>> Visitor<'de> for ObjectSeed<'_, '_, T> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(self.other(Kind::Null))
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(self.other(Kind::Null))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(self.other(Kind::Boolean))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(self.other(Kind::Number))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(self.other(Kind::Number))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        // Noted as a number JSON cannot carry, if it is one.
        AnySeed { ctx: self.ctx }.visit_f64::<E>(v)?;
        Ok(self.other(Kind::Number))
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(self.other(Kind::String))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        AnySeed { ctx: self.ctx }.visit_seq(seq)?;
        Ok(self.other(Kind::Array))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let duplicate = self.slot.is_some();
        let object = self.slot.insert(Ok(T::default()));
        if let Ok(object) = object {
            object.fill(map, self.ctx)?;
        }
        Ok(duplicate)
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
pub(crate) fn listed_header(name: &str) -> Option<usize> {
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
#[derive(Debug, Default, PartialEq)]
pub(crate) struct RawHeaders<'a> {
    pub(crate) entries: SmallVec<[HeaderEntry<'a>; 4]>,
}

impl<'de> FromMap<'de> for RawHeaders<'de> {
    fn fill<A: MapAccess<'de>>(&mut self, mut map: A, ctx: Ctx<'_>) -> Result<(), A::Error> {
        // Names compare case-insensitively (D4, D8): the listed ones by
        // their index, the others lower-cased.
        let mut listed_seen = 0u16;
        let mut others = KeySet::default();
        while let Some(name) = map.next_key_seed(KeySeed)? {
            let path = Path::Key(ctx.path, &name);
            let value = map.next_value_seed(LooseSeed { ctx: ctx.at(&path) })?;
            let listed = listed_header(&name);
            let new = match listed {
                Some(i) => {
                    let bit = 1u16 << i;
                    let new = listed_seen & bit == 0;
                    listed_seen |= bit;
                    new
                }
                None => others.insert(Cow::Owned(name.to_ascii_lowercase())).is_ok(),
            };
            if !new {
                ctx.notes.duplicate(ctx.path, &name.to_ascii_lowercase());
            }
            self.entries.push((name, listed, value));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// body
// ---------------------------------------------------------------------------

/// The `body` object.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct RawBody<'a> {
    pub(crate) content: Option<Loose<'a>>,
    pub(crate) encoding: Option<Loose<'a>>,
    /// The other keys (D9), except those whose value is `null`; boxed
    /// when there are any (an empty map still costs a walk to drop).
    pub(crate) extra: Option<Box<Map<String, Value>>>,
    /// The first other key whose value is `null` (D9: `400`).
    pub(crate) null_key: Option<String>,
}

impl<'de> FromMap<'de> for RawBody<'de> {
    fn fill<A: MapAccess<'de>>(&mut self, mut map: A, ctx: Ctx<'_>) -> Result<(), A::Error> {
        let mut null_keys = KeySet::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let path = Path::Key(ctx.path, &key);
            let at = ctx.at(&path);
            let slot = match &*key {
                "content" => Some(&mut self.content),
                "encoding" => Some(&mut self.encoding),
                _ => None,
            };
            let duplicate = match slot {
                Some(slot) => slot
                    .replace(map.next_value_seed(LooseSeed { ctx: at })?)
                    .is_some(),
                None => {
                    // D9: a `null` nested inside the value is JSON like any
                    // other; a `null` as the value is refused later.
                    let value = map.next_value_seed(ValueSeed { ctx: at })?;
                    if value.is_null() {
                        self.null_key.get_or_insert_with(|| key.clone().into_owned());
                        null_keys.insert(key.clone()).is_err()
                            || self.extra.as_ref().is_some_and(|extra| extra.contains_key(&*key))
                    } else {
                        self.extra
                            .get_or_insert_default()
                            .insert(key.clone().into_owned(), value)
                            .is_some()
                            || null_keys.contains(&key)
                    }
                }
            };
            if duplicate {
                ctx.notes.duplicate(ctx.path, &key);
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// status (responses)
// ---------------------------------------------------------------------------

/// The `status` object of a response.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct RawStatus<'a> {
    pub(crate) code: Option<Loose<'a>>,
    pub(crate) formal_message: Option<Loose<'a>>,
    pub(crate) human_message: Option<Loose<'a>>,
    /// The first key that is none of the three.
    pub(crate) unknown: Option<String>,
}

impl<'de> FromMap<'de> for RawStatus<'de> {
    fn fill<A: MapAccess<'de>>(&mut self, mut map: A, ctx: Ctx<'_>) -> Result<(), A::Error> {
        let mut others = KeySet::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let path = Path::Key(ctx.path, &key);
            let at = ctx.at(&path);
            let slot = match &*key {
                "code" => Some(&mut self.code),
                "formal-message" => Some(&mut self.formal_message),
                "human-message" => Some(&mut self.human_message),
                _ => None,
            };
            let duplicate = match slot {
                Some(slot) => slot
                    .replace(map.next_value_seed(LooseSeed { ctx: at })?)
                    .is_some(),
                None => {
                    map.next_value_seed(AnySeed { ctx: at })?;
                    self.unknown.get_or_insert_with(|| key.clone().into_owned());
                    others.insert(key.clone()).is_err()
                }
            };
            if duplicate {
                ctx.notes.duplicate(ctx.path, &key);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::syntax::{Note, parse};
    use super::*;

    fn read(text: &str) -> (Envelope<'_>, Option<Note>) {
        let mut env = Envelope::default();
        let mut notes = Notes::default();
        parse(text, &mut env, &mut notes).expect("parses");
        (env, notes.into_first())
    }

    fn duplicate(place: &str, key: &str) -> Option<Note> {
        Some(Note::Duplicate {
            place: place.into(),
            key: key.into(),
        })
    }

    #[test]
    fn strict_strings_are_borrowed_and_json5_parses() {
        let (env, _) = read(r#"{"resource":"/a","jsontp":"1.0"}"#);
        assert!(matches!(env.resource, Some(Loose::Str(Cow::Borrowed("/a")))));
        let (env, _) = read("{resource: '/a', // c\n jsontp: \"1.0\",}");
        assert_eq!(env.resource, Some(Loose::Str("/a".into())));
    }

    #[test]
    fn d4_duplicates_compare_decoded_keys_at_every_level() {
        let (_, note) = read(r#"{"method":"GET","\u006dethod":"PUT"}"#);
        assert_eq!(note, duplicate("the message", "method"));
        let (_, note) = read(r#"{"headers":{"Accept":"*/*","accept":"*/*"}}"#);
        assert_eq!(note, duplicate("headers", "accept"));
        let (_, note) = read(r#"{"headers":{"X-A":1,"x-a":1}}"#);
        assert_eq!(note, duplicate("headers", "x-a"));
        let (_, note) = read(r#"{"headers":{"cookies":{"a":"1","a":"2"}}}"#);
        assert_eq!(note, duplicate("headers.cookies", "a"));
        let (_, note) = read(r#"{"headers":{"accept":["a",{"q":1,"q":2}]}}"#);
        assert_eq!(note, duplicate("headers.accept[1]", "q"));
        let (_, note) = read(r#"{"body":{"m":null,"m":1}}"#);
        assert_eq!(note, duplicate("body", "m"));
        let (_, note) = read(r#"{"body":{"meta":{"a":1,"a":2}}}"#);
        assert_eq!(note, duplicate("body.meta", "a"));
        let (_, note) = read(r#"{"status":{"code":200,"code":200}}"#);
        assert_eq!(note, duplicate("status", "code"));
        let (_, note) = read(r#"{"status":{"x":{"y":1,"y":1}}}"#);
        assert_eq!(note, duplicate("status.x", "y"));
        let (_, note) = read(r#"{"x":{"y":1,"y":1}}"#);
        assert_eq!(note, duplicate("x", "y"));
        let (_, note) = read(r#"{"body":[{"y":1,"y":1}]}"#);
        assert_eq!(note, duplicate("body[0]", "y"));
    }

    #[test]
    fn fields_keep_their_types_and_resource_twice_is_not_echoed() {
        let (env, note) = read(r#"{"headers":[],"body":5,"status":null,"resource":"/a","resource":"/a"}"#);
        assert!(matches!(env.headers, Some(Err(Kind::Array))));
        assert!(matches!(env.body, Some(Err(Kind::Number))));
        assert!(matches!(env.status, Some(Err(Kind::Null))));
        assert_eq!(env.resource_echo(), "");
        assert_eq!(note, duplicate("the message", "resource"));
        let (env, _) = read(r#"{"resource":"/a","x":1,"y":2}"#);
        assert_eq!(
            (env.resource_echo().as_str(), env.unknown.as_deref()),
            ("/a", Some("x"))
        );
    }

    #[test]
    fn d9_body_keys_null_as_the_value_but_not_inside_it() {
        let (env, note) = read(r#"{"body":{"meta":{"a":null},"list":[null],"gone":null}}"#);
        let Some(Ok(body)) = &env.body else {
            panic!("a body")
        };
        assert_eq!(note, None);
        let extra = body.extra.as_ref().expect("other keys");
        assert_eq!(extra["meta"], serde_json::json!({"a": null}));
        assert_eq!(extra["list"], serde_json::json!([null]));
        assert_eq!(body.null_key.as_deref(), Some("gone"));
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
}
