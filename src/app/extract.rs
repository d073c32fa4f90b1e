//! Extractors: what a handler takes as arguments. Most draw from the
//! request's head ([`FromRequestParts`]: any number, in any position);
//! at most one, the last, consumes the request ([`FromRequest`]: its
//! content, its body keys, the request itself).

use std::convert::Infallible;
use std::fmt;
use std::io::{self, Read};
use std::net::SocketAddr;

use serde::de::{self, DeserializeOwned, IntoDeserializer};

use super::respond::{IntoReply, Keys, Refusal};
use crate::io_adapters::server::{Incoming, Upload};
use crate::message::{Cookies, Headers, Method, Request, Resource};

/// What extractors of the request's head see: the request (borrowed, so
/// that neither the router nor an extractor copies it), the peer and the
/// path parameters the route matched.
///
/// The same parts are shown twice for a request with content: once when
/// its head arrives, before any of the content is stored
/// ([`Router::check_head_of`](super::Router::check_head_of), D10, D19),
/// the content not there yet, and again when the handler is called.
#[derive(Debug, Clone, Copy)]
pub struct Parts<'a> {
    head: &'a Request,
    peer: SocketAddr,
    params: &'a [(String, String)],
}

impl<'a> Parts<'a> {
    /// The parts of `head`, asked by `peer`, whose route matched `params`
    /// (name and value of each `{name}`, in the pattern's order): what a
    /// test of an extractor makes.
    pub fn new(head: &'a Request, peer: SocketAddr, params: &'a [(String, String)]) -> Parts<'a> {
        Parts { head, peer, params }
    }

    /// The request. Its body is not for extractors of parts: a
    /// 100-continue handshake's first request, whose head is checked, has
    /// its body ignored (D10), keys and all; the content is never there at
    /// the head's check, and not at the call when it was spooled (D19).
    pub fn request(&self) -> &'a Request {
        self.head
    }

    /// The method.
    pub fn method(&self) -> Method {
        self.head.method
    }

    /// The resource.
    pub fn resource(&self) -> &'a Resource {
        &self.head.resource
    }

    /// The headers.
    pub fn headers(&self) -> &'a Headers {
        &self.head.headers
    }

    /// Who asked.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// The value of the route's path parameter `name` (`/groups/{group}`
    /// matched by `/groups/rust` gives `rust` for `group`).
    pub fn param(&self, name: &str) -> Option<&'a str> {
        self.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every path parameter, name and value, in the pattern's order.
    pub fn params(&self) -> &'a [(String, String)] {
        self.params
    }
}

/// One request as the router hands it to a handler, owned: the request,
/// its content if it was spooled (D19), the peer and the path parameters.
/// The handler's last argument ([`FromRequest`]) consumes it; the others
/// see its [`parts`](Self::parts).
pub struct Call {
    request: Box<Request>,
    upload: Option<Upload>,
    peer: SocketAddr,
    params: Vec<(String, String)>,
}

impl fmt::Debug for Call {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call")
            .field("request", &self.request)
            .field("upload", &self.upload)
            .field("peer", &self.peer)
            .field("params", &self.params)
            .finish()
    }
}

impl Call {
    pub(crate) fn new(incoming: Incoming, params: Vec<(String, String)>) -> Call {
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
        }
    }

    /// Its parts, for extractors of the head.
    pub fn parts(&self) -> Parts<'_> {
        Parts::new(&self.request, self.peer, &self.params)
    }

    /// The request. When its content was too large to hold in memory, the
    /// body's content is empty and [`into_content`](Self::into_content)
    /// gives it.
    pub fn request(&self) -> &Request {
        &self.request
    }

    /// The request itself; its content is empty if it was spooled.
    pub fn into_request(self) -> Request {
        *self.request
    }

    /// The request's content: the spooled upload if there was one, the
    /// body's own bytes (moved, not copied) otherwise.
    pub fn into_content(mut self) -> Content {
        match self.upload.take() {
            Some(upload) => Content(Held::Spooled(upload)),
            None => Content(Held::Memory(self.request.body.replace_content(Vec::new()))),
        }
    }
}

/// Gives a router's state, or the part of it a handler asks for: a
/// handler's [`State<T>`] is drawn from the router's state `S` when
/// `T: FromRef<S>`. Every `Clone` type gives itself; implement it to hand
/// out one field of an application's state:
///
/// ```
/// use jsontp_protocol::app::{FromRef, Router, State, get};
///
/// #[derive(Clone)]
/// struct App { greeting: Greeting, visits: std::sync::Arc<std::sync::atomic::AtomicU64> }
/// #[derive(Clone)]
/// struct Greeting(&'static str);
///
/// impl FromRef<App> for Greeting {
///     fn from_ref(app: &App) -> Greeting {
///         app.greeting.clone()
///     }
/// }
///
/// let app = App { greeting: Greeting("hi"), visits: Default::default() };
/// let router: Router = Router::new()
///     .route("/hello", get(|State(Greeting(text)): State<Greeting>| text))
///     .with_state(app);
/// ```
#[diagnostic::on_unimplemented(
    message = "a router with state `{T}` cannot give a handler `State<{Self}>`",
    label = "the router's state does not give this",
    note = "give the router the state with `Router::with_state(…)` after the routes that take it, \
            or implement `FromRef<{T}>` for `{Self}` to draw it from the router's state"
)]
pub trait FromRef<T> {
    /// The value drawn from `input`.
    fn from_ref(input: &T) -> Self;
}

impl<T: Clone> FromRef<T> for T {
    fn from_ref(input: &T) -> T {
        input.clone()
    }
}

mod guard {
    /// A state no router has: its implementation of [`FromRef`] for every
    /// type keeps `T: FromRef<S>` from choosing the router's state `S`
    /// from a handler's `State<T>` alone, so that a handler asking for a
    /// state its router lacks is refused as such (`T: FromRef<S>` not
    /// satisfied), not as routes of another router's type.
    #[derive(Debug)]
    pub enum NoState {}
}

#[doc(hidden)]
impl<T> FromRef<guard::NoState> for T {
    fn from_ref(input: &guard::NoState) -> T {
        match *input {}
    }
}

/// A handler's argument drawn from the request's head: method, resource,
/// path parameters, query, headers, peer, the router's state. A handler
/// takes any number of them, in any position.
///
/// They run twice for a request with content: when its head arrives,
/// before the content is stored (one that refuses refuses the request
/// there, and the client of a 100-continue handshake never sends the
/// content, D10), and again when the handler is called. So they must be
/// free of side effects: check and draw, never count or change.
///
/// Implement it for an application's own types, such as a user who must
/// be authorised:
///
/// ```
/// use jsontp_protocol::app::{FromRequestParts, Parts, Refusal};
///
/// struct Admin;
///
/// impl<S> FromRequestParts<S> for Admin {
///     type Rejection = Refusal;
///
///     fn from_request_parts(parts: &Parts<'_>, _state: &S) -> Result<Self, Refusal> {
///         match parts.headers().authorization() {
///             Some("s3cret") => Ok(Admin),
///             Some(_) => Err(Refusal::unauthorized("wrong credentials")),
///             None => Err(Refusal::unauthorized("the `authorization` header is missing")),
///         }
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a handler's argument here",
    label = "not an extractor of the request's head",
    note = "every argument but the last is drawn from the request's head, by \
            `FromRequestParts`: Path, Query, Authorization, Peer, Headers, Cookies, Method, \
            Resource, State<T>, Option of these",
    note = "only the last argument may consume the request (Keys, Text, Content, Request): the \
            content can be taken once",
    note = "for a type of your own, implement `FromRequestParts`, or `FromRequest` and take it \
            last"
)]
pub trait FromRequestParts<S>: Sized {
    /// What the request gets when the value cannot be drawn.
    type Rejection: IntoReply;

    /// Draws the value from `parts`, or refuses the request.
    fn from_request_parts(parts: &Parts<'_>, state: &S) -> Result<Self, Self::Rejection>;
}

/// Marks [`FromRequest`]'s implementation for every [`FromRequestParts`]:
/// an extractor of parts may be the last argument too.
#[derive(Debug)]
pub enum ViaParts {}

/// Marks the implementations of [`FromRequest`] that consume the request.
#[derive(Debug)]
pub enum ViaRequest {}

/// A handler's last argument, which may consume the request: its content
/// ([`Content`], [`Text`]), its body keys ([`Keys`]), the
/// [`Request`] itself. A handler takes at most one, last; every
/// [`FromRequestParts`] is one as well (`M` tells the two apart; it is
/// inferred, never written).
///
/// [`TAKES_CONTENT`](Self::TAKES_CONTENT) says whether the request's
/// content is kept for it; [`check_head`](Self::check_head) may refuse a
/// request from its head, before the content arrives.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a handler's argument",
    label = "not an extractor",
    note = "a handler's last argument implements `FromRequest` (Keys, Text, Content, Request) or \
            `FromRequestParts` (Path, Query, Authorization, Peer, Headers, Cookies, State<T>, …): \
            implement one of them for it"
)]
pub trait FromRequest<S, M = ViaRequest>: Sized {
    /// What the request gets when the value cannot be drawn.
    type Rejection: IntoReply;

    /// Whether the extractor reads the request's content: when `false`,
    /// the server drops the content of a request for this handler as it
    /// checks it, storing none of it (D19).
    const TAKES_CONTENT: bool = true;

    /// Draws the value, consuming the request, or refuses it.
    fn from_request(call: Call, state: &S) -> Result<Self, Self::Rejection>;

    /// Refuses the request from its head alone, before its content is
    /// stored or (D10) sent; accepts by default. Like
    /// [`FromRequestParts`], it must be free of side effects, and must not
    /// read the body (ignored at a handshake, D10).
    fn check_head(parts: &Parts<'_>, state: &S) -> Result<(), Self::Rejection> {
        let _ = (parts, state);
        Ok(())
    }
}

impl<S, T: FromRequestParts<S>> FromRequest<S, ViaParts> for T {
    type Rejection = T::Rejection;
    const TAKES_CONTENT: bool = false;

    fn from_request(call: Call, state: &S) -> Result<Self, Self::Rejection> {
        T::from_request_parts(&call.parts(), state)
    }

    fn check_head(parts: &Parts<'_>, state: &S) -> Result<(), Self::Rejection> {
        T::from_request_parts(parts, state).map(drop)
    }
}

impl<S, T: FromRequestParts<S>> FromRequestParts<S> for Option<T> {
    type Rejection = Infallible;

    /// `None` where `T` would refuse the request.
    fn from_request_parts(parts: &Parts<'_>, state: &S) -> Result<Self, Infallible> {
        Ok(T::from_request_parts(parts, state).ok())
    }
}

impl<S, T: FromRequest<S, ViaRequest>> FromRequest<S, ViaRequest> for Option<T> {
    type Rejection = Infallible;
    const TAKES_CONTENT: bool = T::TAKES_CONTENT;

    /// `None` where `T` would refuse the request.
    fn from_request(call: Call, state: &S) -> Result<Self, Infallible> {
        Ok(T::from_request(call, state).ok())
    }
}

/// The body keys deserialised into `T`, without a copy of them.
fn body_keys<T: DeserializeOwned>(request: &Request) -> Result<T, Refusal> {
    serde_path_to_error::deserialize(request.body.extra()).map_err(|error| {
        let path = error.path().to_string();
        let what = error.inner();
        if path == "." {
            Refusal::bad_request(format!("body keys: {what}"))
        } else {
            Refusal::bad_request(format!("body key `{path}`: {what}"))
        }
    })
}

// Not checked at the head: the body of a 100-continue handshake's first
// request is ignored (D10), its keys come with the full request.
impl<S, T: DeserializeOwned> FromRequest<S, ViaRequest> for Keys<T> {
    type Rejection = Refusal;
    // Body keys are not the content: a request for this handler keeps none.
    const TAKES_CONTENT: bool = false;

    fn from_request(call: Call, _state: &S) -> Result<Self, Refusal> {
        body_keys(&call.request).map(Keys)
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
/// let router: Router = Router::new().route(
///     "/posts/{id}",
///     get(|Path(id): Path<u64>| format!("post {id}")),
/// );
/// let peer = RequestInfo::new("127.0.0.1:1".parse().unwrap());
/// let ask = |path: &str| {
///     let request = Request::new(Method::Get, path.parse::<Resource>().unwrap());
///     router.handle(request, &peer)
/// };
/// assert_eq!(ask("/posts/7").body.as_text(), Some("post 7"));
/// let refused = ask("/posts/seven");
/// assert_eq!(refused.status.code, StatusCode::BAD_REQUEST);
/// assert!(refused.status.human_message.contains("`id`"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Path<T>(pub T);

impl<S, T: DeserializeOwned> FromRequestParts<S> for Path<T> {
    type Rejection = Refusal;

    fn from_request_parts(parts: &Parts<'_>, _state: &S) -> Result<Self, Refusal> {
        from_pairs(parts.params, "path parameter")
            .map(Path)
            .map_err(|e| Refusal::bad_request(e.to_string()))
    }
}

/// The resource's query (`?page=2&q=rust`, percent-decoded, `+` as a
/// space) deserialised into `T`, usually a struct; a missing or mistyped
/// key answers `400` naming it. No query is the empty one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query<T>(pub T);

impl<S, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = Refusal;

    fn from_request_parts(parts: &Parts<'_>, _state: &S) -> Result<Self, Refusal> {
        let query = parts.resource().query().unwrap_or("");
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

impl<S> FromRequest<S, ViaRequest> for Content {
    type Rejection = Infallible;

    fn from_request(call: Call, _state: &S) -> Result<Self, Infallible> {
        Ok(call.into_content())
    }
}

/// The content as UTF-8 text (read into memory if it was spooled); other
/// content answers `400`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Text(pub String);

impl<S> FromRequest<S, ViaRequest> for Text {
    type Rejection = Refusal;

    fn from_request(call: Call, _state: &S) -> Result<Self, Refusal> {
        let bytes = call.into_content().into_bytes()?;
        String::from_utf8(bytes)
            .map(Text)
            .map_err(|_| Refusal::bad_request("the content is not UTF-8 text"))
    }
}

impl<S> FromRequest<S, ViaRequest> for Vec<u8> {
    type Rejection = Refusal;

    /// The content's bytes, read into memory if it was spooled (moved,
    /// not copied, when it was not).
    fn from_request(call: Call, _state: &S) -> Result<Self, Refusal> {
        Ok(call.into_content().into_bytes()?)
    }
}

impl<S> FromRequest<S, ViaRequest> for Request {
    type Rejection = Infallible;

    /// The whole request, moved; its content is empty if it was spooled
    /// (take [`Content`] for that).
    fn from_request(call: Call, _state: &S) -> Result<Self, Infallible> {
        Ok(call.into_request())
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

impl<S> FromRequestParts<S> for Authorization {
    type Rejection = Refusal;

    fn from_request_parts(parts: &Parts<'_>, _state: &S) -> Result<Self, Refusal> {
        match parts.headers().authorization() {
            Some(value) => Ok(Authorization(value.to_owned())),
            None => Err(Refusal::unauthorized("the `authorization` header is missing")),
        }
    }
}

/// Who asked: the peer's address (the client's, behind a PROXY-protocol
/// balancer, D21).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub SocketAddr);

impl<S> FromRequestParts<S> for Peer {
    type Rejection = Infallible;

    fn from_request_parts(parts: &Parts<'_>, _state: &S) -> Result<Self, Infallible> {
        Ok(Peer(parts.peer))
    }
}

/// The router's state, or the part of it `T` names ([`FromRef`]), given
/// with [`Router::with_state`](super::Router::with_state): a database
/// handle, a configuration. A handler asking for a state its router is not
/// given does not compile.
#[derive(Debug, Clone, Default)]
pub struct State<T>(pub T);

impl<S, T: FromRef<S>> FromRequestParts<S> for State<T> {
    type Rejection = Infallible;

    fn from_request_parts(_parts: &Parts<'_>, state: &S) -> Result<Self, Infallible> {
        Ok(State(T::from_ref(state)))
    }
}

impl<S> FromRequestParts<S> for Cookies {
    type Rejection = Infallible;

    /// The request's cookies (D15); none is the empty set.
    fn from_request_parts(parts: &Parts<'_>, _state: &S) -> Result<Self, Infallible> {
        Ok(parts.headers().cookies().cloned().unwrap_or_default())
    }
}

impl<S> FromRequestParts<S> for Headers {
    type Rejection = Infallible;

    /// The request's headers, typed.
    fn from_request_parts(parts: &Parts<'_>, _state: &S) -> Result<Self, Infallible> {
        Ok(parts.headers().clone())
    }
}

impl<S> FromRequestParts<S> for Method {
    type Rejection = Infallible;

    fn from_request_parts(parts: &Parts<'_>, _state: &S) -> Result<Self, Infallible> {
        Ok(parts.method())
    }
}

impl<S> FromRequestParts<S> for Resource {
    type Rejection = Infallible;

    fn from_request_parts(parts: &Parts<'_>, _state: &S) -> Result<Self, Infallible> {
        Ok(parts.resource().clone())
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
