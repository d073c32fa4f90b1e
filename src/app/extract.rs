//! Extractors: what a handler takes as arguments, each drawn from the
//! request by [`Extract`].

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read};
use std::net::SocketAddr;
use std::sync::Arc;

use serde::de::{self, DeserializeOwned, IntoDeserializer};
use serde_json::Value;

use super::respond::{Keys, Refusal};
use crate::io_adapters::server::{Incoming, Upload};
use crate::message::{Cookies, Headers, Method, Request, Resource};

/// One request as the router hands it to a handler: the request, its
/// large content if it was spooled (D19), the peer, the path parameters
/// the route matched and the router's shared state. Extractors
/// ([`Extract`]) draw a handler's arguments from it.
pub struct Call {
    request: Request,
    upload: Option<Upload>,
    peer: SocketAddr,
    params: Vec<(String, String)>,
    states: Arc<States>,
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("request", &self.request)
            .field("upload", &self.upload)
            .field("peer", &self.peer)
            .field("params", &self.params)
            .finish_non_exhaustive()
    }
}

impl Call {
    pub(crate) fn new(incoming: Incoming, params: Vec<(String, String)>, states: Arc<States>) -> Call {
        let Incoming {
            request,
            upload,
            info,
            ..
        } = incoming;
        Call {
            request,
            upload,
            peer: info.peer,
            params,
            states,
        }
    }

    /// The request. When its content was too large to hold in memory, the
    /// body's content is empty and [`Content`] gives it.
    pub fn request(&self) -> &Request {
        &self.request
    }

    /// Who asked.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The value of the route's path parameter `name`
    /// (`/groups/{group}` matched by `/groups/rust` gives `rust` for
    /// `group`), percent-decoded.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The router's shared value of type `T` ([`Router::with_state`](super::Router::with_state)).
    pub fn state<T: Clone + Send + Sync + 'static>(&self) -> Option<T> {
        self.states.get::<T>().cloned()
    }

    /// The request's content: the spooled upload if there was one (taken:
    /// a later call gives the body's own content, which is then empty),
    /// a copy of the body's bytes otherwise.
    pub fn take_content(&mut self) -> Content {
        match self.upload.take() {
            Some(upload) => Content(Held::Spooled(upload)),
            None => Content(Held::Memory(self.request.body.content().to_vec())),
        }
    }
}

/// The shared values of a router, one per type.
#[derive(Default, Clone)]
pub(crate) struct States(HashMap<TypeId, Arc<dyn Any + Send + Sync>>);

impl States {
    pub(crate) fn insert<T: Send + Sync + 'static>(&mut self, value: T) {
        self.0.insert(TypeId::of::<T>(), Arc::new(value));
    }

    fn get<T: 'static>(&self) -> Option<&T> {
        self.0.get(&TypeId::of::<T>())?.downcast_ref()
    }

    pub(crate) fn merge(&mut self, other: &States) {
        for (id, value) in &other.0 {
            self.0.entry(*id).or_insert_with(|| Arc::clone(value));
        }
    }
}

/// A handler's argument, drawn from the request.
///
/// When extraction fails the handler is not called: the router answers
/// with the [`Refusal`] instead (a `400` naming the key and what is wrong
/// with it, for most). Implement it for an application's own types, such
/// as an authenticated user:
///
/// ```
/// use jsontp_protocol::app::{Call, Extract, Refusal};
///
/// struct Admin;
///
/// impl Extract for Admin {
///     fn extract(call: &mut Call) -> Result<Self, Refusal> {
///         match call.request().headers.authorization() {
///             Some("s3cret") => Ok(Admin),
///             Some(_) => Err(Refusal::unauthorized("wrong credentials")),
///             None => Err(Refusal::unauthorized("the `authorization` header is missing")),
///         }
///     }
/// }
/// ```
pub trait Extract: Sized {
    /// Draws the value from `call`, or refuses the request.
    fn extract(call: &mut Call) -> Result<Self, Refusal>;
}

impl<T: Extract> Extract for Option<T> {
    /// `None` where `T` would refuse the request.
    fn extract(call: &mut Call) -> Result<Self, Refusal> {
        Ok(T::extract(call).ok())
    }
}

impl<T: DeserializeOwned> Extract for Keys<T> {
    fn extract(call: &mut Call) -> Result<Self, Refusal> {
        let keys = Value::Object(call.request.body.extra().clone());
        serde_path_to_error::deserialize(keys).map(Keys).map_err(|error| {
            let path = error.path().to_string();
            let what = error.inner();
            if path == "." {
                Refusal::bad_request(format!("body keys: {what}"))
            } else {
                Refusal::bad_request(format!("body key `{path}`: {what}"))
            }
        })
    }
}

/// The route's path parameters deserialised into `T`: a struct or map by
/// name, a tuple in order, or a single value for a route with one.
///
/// A value of the wrong type answers `400`, naming the parameter:
///
/// ```
/// use jsontp_protocol::app::{Path, Router, get};
/// use jsontp_protocol::io_adapters::server::RequestInfo;
/// use jsontp_protocol::message::{Method, Request, Resource, StatusCode};
///
/// let router = Router::new().route(
///     "/posts/{id}",
///     get(|Path(id): Path<u64>| format!("post {id}")),
/// );
/// let peer = "127.0.0.1:1".parse().unwrap();
/// let ask = |path: &str| {
///     let request = Request::new(Method::Get, path.parse::<Resource>().unwrap());
///     router.handle(request, &RequestInfo::new(peer))
/// };
/// assert_eq!(ask("/posts/7").body.as_text(), Some("post 7"));
/// let refused = ask("/posts/seven");
/// assert_eq!(refused.status.code, StatusCode::BAD_REQUEST);
/// assert!(refused.status.human_message.contains("`id`"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Path<T>(pub T);

impl<T: DeserializeOwned> Extract for Path<T> {
    fn extract(call: &mut Call) -> Result<Self, Refusal> {
        from_pairs(&call.params, "path parameter")
            .map(Path)
            .map_err(|e| Refusal::bad_request(e.to_string()))
    }
}

/// The resource's query (`?page=2&q=rust`, percent-decoded, `+` as a
/// space) deserialised into `T`, usually a struct; a missing or mistyped
/// key answers `400` naming it. No query is the empty one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query<T>(pub T);

impl<T: DeserializeOwned> Extract for Query<T> {
    fn extract(call: &mut Call) -> Result<Self, Refusal> {
        let query = call.request.resource.query().unwrap_or("");
        let pairs = crate::message::form::parse_form(query)
            .ok_or_else(|| Refusal::bad_request("the query is not of the form key=value&key=value"))?;
        from_pairs(&pairs, "query key")
            .map(Query)
            .map_err(|e| Refusal::bad_request(e.to_string()))
    }
}

/// The request's content, in memory or spooled to a temporary file when
/// it was larger than the server holds in memory
/// ([`SpoolOptions::memory_limit`](crate::io_adapters::server::SpoolOptions::memory_limit),
/// D19): read it as a stream with [`reader`](Self::reader), whatever its
/// size.
pub struct Content(Held);

enum Held {
    Memory(Vec<u8>),
    Spooled(Upload),
}

impl fmt::Debug for Content {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Content")
            .field("len", &self.len())
            .field("spooled", &self.is_spooled())
            .finish()
    }
}

impl Content {
    /// Its size in bytes.
    pub fn len(&self) -> u64 {
        match &self.0 {
            Held::Memory(bytes) => bytes.len() as u64,
            Held::Spooled(upload) => upload.len(),
        }
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether it was spooled to a temporary file.
    pub fn is_spooled(&self) -> bool {
        matches!(self.0, Held::Spooled(_))
    }

    /// Reads it from the start.
    pub fn reader(&self) -> io::Result<Box<dyn Read + Send + '_>> {
        match &self.0 {
            Held::Memory(bytes) => Ok(Box::new(bytes.as_slice())),
            Held::Spooled(upload) => upload.reader().map(|r| r as Box<dyn Read + Send>),
        }
    }

    /// All of it in memory (read from its file if it was spooled).
    pub fn into_bytes(self) -> io::Result<Vec<u8>> {
        match self.0 {
            Held::Memory(bytes) => Ok(bytes),
            Held::Spooled(upload) => {
                let mut bytes = Vec::with_capacity(usize::try_from(upload.len()).unwrap_or(0));
                upload.reader()?.read_to_end(&mut bytes)?;
                Ok(bytes)
            }
        }
    }

    /// The spooled file, to keep it ([`Upload::persist`]) without a copy;
    /// `None` when the content is in memory.
    pub fn into_upload(self) -> Option<Upload> {
        match self.0 {
            Held::Spooled(upload) => Some(upload),
            Held::Memory(_) => None,
        }
    }
}

impl Extract for Content {
    fn extract(call: &mut Call) -> Result<Self, Refusal> {
        Ok(call.take_content())
    }
}

/// The content as UTF-8 text (read into memory if it was spooled); other
/// content answers `400`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Text(pub String);

impl Extract for Text {
    fn extract(call: &mut Call) -> Result<Self, Refusal> {
        let bytes = call.take_content().into_bytes()?;
        String::from_utf8(bytes)
            .map(Text)
            .map_err(|_| Refusal::bad_request("the content is not UTF-8 text"))
    }
}

/// The `authorization` header's value (D14). Missing, it answers `401`.
///
/// ```
/// use jsontp_protocol::app::Authorization;
///
/// assert_eq!(Authorization("Bearer s3cret".into()).token(), "s3cret");
/// assert_eq!(Authorization("bearer s3cret".into()).token(), "s3cret");
/// assert_eq!(Authorization("s3cret".into()).token(), "s3cret");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization(pub String);

impl Authorization {
    /// The credentials without the `Bearer ` scheme, if the value has it:
    /// D14 accepts a token alone or after the scheme (case-insensitive,
    /// one space).
    pub fn token(&self) -> &str {
        match self.0.split_at_checked(7) {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer ") => token,
            _ => &self.0,
        }
    }
}

impl Extract for Authorization {
    fn extract(call: &mut Call) -> Result<Self, Refusal> {
        match call.request.headers.authorization() {
            Some(value) => Ok(Authorization(value.to_owned())),
            None => Err(Refusal::unauthorized("the `authorization` header is missing")),
        }
    }
}

/// Who asked: the peer's address (the client's, behind a PROXY-protocol
/// balancer, D21).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub SocketAddr);

impl Extract for Peer {
    fn extract(call: &mut Call) -> Result<Self, Refusal> {
        Ok(Peer(call.peer))
    }
}

/// The router's shared value of type `T`, set with
/// [`Router::with_state`](super::Router::with_state): a database handle, a
/// configuration. A router without one answers `500` (the application is
/// wrong, not the request).
#[derive(Debug, Clone, Default)]
pub struct State<T>(pub T);

impl<T: Clone + Send + Sync + 'static> Extract for State<T> {
    fn extract(call: &mut Call) -> Result<Self, Refusal> {
        call.state::<T>().map(State).ok_or_else(|| {
            tracing::error!(
                state = std::any::type_name::<T>(),
                "a handler asks for state the router was not given"
            );
            Refusal::internal("the server is misconfigured")
        })
    }
}

impl Extract for Cookies {
    /// The request's cookies (D15); none is the empty set.
    fn extract(call: &mut Call) -> Result<Self, Refusal> {
        Ok(call.request.headers.cookies().cloned().unwrap_or_default())
    }
}

impl Extract for Headers {
    /// The request's headers, typed.
    fn extract(call: &mut Call) -> Result<Self, Refusal> {
        Ok(call.request.headers.clone())
    }
}

impl Extract for Method {
    fn extract(call: &mut Call) -> Result<Self, Refusal> {
        Ok(call.request.method)
    }
}

impl Extract for Resource {
    fn extract(call: &mut Call) -> Result<Self, Refusal> {
        Ok(call.request.resource.clone())
    }
}

impl Extract for Request {
    /// The whole request (a copy; its content empty if it was spooled).
    fn extract(call: &mut Call) -> Result<Self, Refusal> {
        Ok(call.request.clone())
    }
}

/// The forwarding of every single-value request of a deserializer to its
/// one value (`Pairs::only`).
macro_rules! single {
    ($($method:ident),*) => {
        $(
            fn $method<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
                de::Deserializer::$method(self.only()?, visitor)
            }
        )*
    };
}

/// Deserialises name/value pairs of text into `T`: a value is parsed as
/// what `T` asks for there (a number, a flag, text).
fn from_pairs<T: DeserializeOwned>(
    pairs: &[(String, String)],
    what: &'static str,
) -> Result<T, de::value::Error> {
    T::deserialize(Pairs { pairs, what })
}

struct Pairs<'a> {
    pairs: &'a [(String, String)],
    what: &'static str,
}

impl<'a> Pairs<'a> {
    fn values(&self) -> impl Iterator<Item = One<'a>> + use<'a> {
        let what = self.what;
        self.pairs
            .iter()
            .map(move |(key, value)| One { key, value, what })
    }

    fn only(self) -> Result<One<'a>, de::value::Error> {
        match self.pairs {
            [(key, value)] => Ok(One {
                key,
                value,
                what: self.what,
            }),
            _ => Err(de::Error::custom(format!(
                "expected one {}, found {}",
                self.what,
                self.pairs.len()
            ))),
        }
    }
}

impl<'de> de::Deserializer<'de> for Pairs<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_map<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        let entries = self
            .pairs
            .iter()
            .zip(self.values())
            .map(|((k, _), v)| (k.as_str(), v));
        visitor.visit_map(de::value::MapDeserializer::new(entries))
    }

    fn deserialize_struct<V: de::Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_seq<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_seq(de::value::SeqDeserializer::new(self.values()))
    }

    fn deserialize_tuple<V: de::Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: de::Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_newtype_struct<V: de::Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_option<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        if self.pairs.is_empty() {
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    // One value alone: the route's single parameter.
    single!(
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_unit,
        deserialize_identifier,
        deserialize_ignored_any
    );

    fn deserialize_unit_struct<V: de::Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.only()?.deserialize_unit_struct(name, visitor)
    }

    fn deserialize_enum<V: de::Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.only()?.deserialize_enum(name, variants, visitor)
    }
}

/// One value of text, parsed as what the visitor asks for; its errors name
/// the key.
struct One<'a> {
    key: &'a str,
    value: &'a str,
    what: &'static str,
}

impl One<'_> {
    fn parse<T: std::str::FromStr>(&self, kind: &str) -> Result<T, de::value::Error> {
        self.value.parse().map_err(|_| {
            de::Error::custom(format!(
                "{} `{}` is `{}`, which is not {kind}",
                self.what, self.key, self.value
            ))
        })
    }
}

impl<'de> IntoDeserializer<'de, de::value::Error> for One<'_> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

macro_rules! parsed {
    ($($method:ident => $visit:ident: $ty:ty, $kind:literal;)*) => {
        $(
            fn $method<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
                visitor.$visit(self.parse::<$ty>($kind)?)
            }
        )*
    };
}

impl<'de> de::Deserializer<'de> for One<'_> {
    type Error = de::value::Error;

    fn deserialize_any<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_str(self.value)
    }

    parsed! {
        deserialize_bool => visit_bool: bool, "true or false";
        deserialize_i8 => visit_i8: i8, "a whole number from -128 to 127";
        deserialize_i16 => visit_i16: i16, "a whole number from -32768 to 32767";
        deserialize_i32 => visit_i32: i32, "a 32-bit whole number";
        deserialize_i64 => visit_i64: i64, "a 64-bit whole number";
        deserialize_u8 => visit_u8: u8, "a whole number from 0 to 255";
        deserialize_u16 => visit_u16: u16, "a whole number from 0 to 65535";
        deserialize_u32 => visit_u32: u32, "a whole number from 0 to 4294967295";
        deserialize_u64 => visit_u64: u64, "a whole number from 0 up";
        deserialize_f32 => visit_f32: f32, "a number";
        deserialize_f64 => visit_f64: f64, "a number";
        deserialize_char => visit_char: char, "one character";
    }

    fn deserialize_option<V: de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: de::Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: de::Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_enum(self.value.into_deserializer())
    }

    serde::forward_to_deserialize_any! {
        i128 u128 str string bytes byte_buf unit unit_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}
