//! Requests, responses and bodies.

use std::fmt;
use std::sync::{Arc, LazyLock};

use serde_json::{Map, Value};

use super::{Encoding, Headers, Method, Resource, Status, ValueError, Version};

/// Limits on one message (D3). Every one is configurable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageLimits {
    /// Size of one message on the wire, in bytes (`413`). At most 4 GiB
    /// less a byte: a larger limit is taken as that.
    pub max_message_bytes: usize,
    /// Size of the decoded body content, in bytes (`413`).
    pub max_decoded_body: usize,
    /// Nesting depth of objects and arrays inside a message; the envelope
    /// object itself is depth 1 (`400`). Keep it in the hundreds at most:
    /// a message within the limit that is not strict JSON goes to the JSON5
    /// parser, which recurses once per level.
    pub max_depth: usize,
    /// Number of headers (`431`).
    pub max_headers: usize,
}

impl Default for MessageLimits {
    /// The D3 defaults: 1 MiB, 8 MiB, 64, 100.
    fn default() -> Self {
        MessageLimits {
            max_message_bytes: 1 << 20,
            max_decoded_body: 8 << 20,
            max_depth: 64,
            max_headers: 100,
        }
    }
}

/// The `body` of a message (D9): the decoded content, the encoding it
/// travels in, and any other keys.
///
/// The content is held decoded. On the wire it is written in `encoding`
/// (base64 of the compressed bytes for gzip, deflate and br). `identity`
/// content must be UTF-8 text, so a `Body` never holds invalid identity
/// content.
#[derive(Clone)]
pub struct Body {
    content: Content,
    encoding: Encoding,
    /// The other keys (D9), boxed when there are any: nearly every body has
    /// none, and an empty map still costs a walk to drop.
    extra: Option<Box<Map<String, Value>>>,
    /// The content's text as it goes on the wire, between the quotes of
    /// `content`, when it was written before ([`Body::prepared`]): how
    /// fast the body is written, not what it is, so equality and `Debug`
    /// leave it out. Shared: a cache clones the body for every answer.
    written: Option<Arc<Written>>,
}

/// A prepared body's text as it goes on the wire, and maybe an adapter's
/// copy of the very same bytes, which its transport sends without copying
/// them again (`Body::add_sendfile_copy`, Linux: a sealed file).
#[derive(Clone)]
pub(crate) struct Written {
    pub(crate) text: WrittenText,
    pub(crate) copy: Option<TransportCopy>,
}

/// Where a prepared body's text lives: in the program's memory, or held
/// by an adapter (`Body::prepared_text`, Linux: a sealed file mapped
/// read-only), which vouches for it as UTF-8 text escaped as
/// [`Body::prepared`] escapes it. The core only reads the bytes.
#[derive(Clone)]
pub(crate) enum WrittenText {
    Shared(Arc<str>),
    // Made by the Linux adapters only.
    #[cfg_attr(not(all(feature = "adapters", target_os = "linux")), allow(dead_code))]
    Held(HeldBytes),
}

impl WrittenText {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match self {
            WrittenText::Shared(text) => text.as_bytes(),
            WrittenText::Held(bytes) => (**bytes).as_ref(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.as_bytes().len()
    }
}

impl From<Arc<str>> for WrittenText {
    fn from(text: Arc<str>) -> WrittenText {
        WrittenText::Shared(text)
    }
}

impl fmt::Debug for WrittenText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WrittenText").field("len", &self.len()).finish()
    }
}

/// Bytes an adapter holds in a form of its own, which the core reads and
/// never looks behind (`Body::prepared_text`, Linux: a sealed file mapped
/// read-only): the core stays free of I/O and of what the bytes live in.
pub(crate) type HeldBytes = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// What an adapter keeps beside a prepared body's text: the same bytes in
/// a form its transport sends from. The core never looks inside; it only
/// carries it to the output, where the adapter finds it again.
pub(crate) type TransportCopy = Arc<dyn std::any::Any + Send + Sync>;

/// Where a body's decoded bytes live: its own, or shared with the program
/// or a cache, or held by an adapter, so that answering with them copies
/// nothing.
#[derive(Clone)]
pub(crate) enum Content {
    Owned(Vec<u8>),
    Shared(Arc<[u8]>),
    Static(&'static [u8]),
    // Made by the Linux adapters only.
    #[cfg_attr(not(all(feature = "adapters", target_os = "linux")), allow(dead_code))]
    Held(HeldBytes),
}

impl Content {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Content::Owned(bytes) => bytes,
            Content::Shared(bytes) => bytes,
            Content::Static(bytes) => bytes,
            Content::Held(bytes) => (**bytes).as_ref(),
        }
    }

    fn into_vec(self) -> Vec<u8> {
        match self {
            Content::Owned(bytes) => bytes,
            Content::Shared(bytes) => bytes.to_vec(),
            Content::Static(bytes) => bytes.to_vec(),
            Content::Held(bytes) => (*bytes).as_ref().to_vec(),
        }
    }
}

/// The empty map of other body keys, for bodies that hold none.
pub(crate) fn no_keys() -> &'static Map<String, Value> {
    static NONE: LazyLock<Map<String, Value>> = LazyLock::new(Map::new);
    &NONE
}

impl PartialEq for Body {
    fn eq(&self, other: &Body) -> bool {
        self.content() == other.content() && self.encoding == other.encoding && self.extra() == other.extra()
    }
}

impl Eq for Body {}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Body")
            .field("content", &self.content())
            .field("encoding", &self.encoding)
            .field("extra", self.extra())
            .finish()
    }
}

impl Default for Body {
    fn default() -> Self {
        Body::empty()
    }
}

impl Body {
    /// Empty `identity` content.
    pub fn empty() -> Body {
        Body {
            content: Content::Static(&[]),
            encoding: Encoding::Identity,
            extra: None,
            written: None,
        }
    }

    /// Text content sent as `identity`.
    pub fn text(text: impl Into<String>) -> Body {
        Body::identity(Content::Owned(text.into().into_bytes()))
    }

    /// Text content sent as `identity`, borrowed for the life of the
    /// program: a fixed answer is written without being copied or
    /// allocated for each response.
    pub fn from_static(text: &'static str) -> Body {
        Body::identity(Content::Static(text.as_bytes()))
    }

    fn identity(content: Content) -> Body {
        Body {
            content,
            encoding: Encoding::Identity,
            extra: None,
            written: None,
        }
    }

    /// Content in the given encoding. `identity` requires UTF-8.
    pub fn new(content: Vec<u8>, encoding: Encoding) -> Result<Body, ValueError> {
        Body::checked(Content::Owned(content), encoding)
    }

    /// [`Body::new`] with content shared with others (a cache): the body
    /// holds no copy of it. Writing it still escapes or compresses it for
    /// every message; [`Body::prepared`] does that once.
    pub fn shared(content: Arc<[u8]>, encoding: Encoding) -> Result<Body, ValueError> {
        Body::checked(Content::Shared(content), encoding)
    }

    /// Content in `encoding`; `identity` requires UTF-8.
    pub(crate) fn checked(content: Content, encoding: Encoding) -> Result<Body, ValueError> {
        if encoding == Encoding::Identity && std::str::from_utf8(content.as_slice()).is_err() {
            return Err(ValueError::new(
                "is not UTF-8 text, so it cannot be sent as identity",
            ));
        }
        Ok(Body {
            content,
            encoding,
            extra: None,
            written: None,
        })
    }

    /// [`Body::shared`] prepared to be sent many times: the content is
    /// written in `encoding` once, now (escaped text for `identity`, base64
    /// of the compressed bytes otherwise), and every message that carries
    /// this body or a clone of it sends that form as it is. A large one
    /// goes to the transport from where it lies, without a copy. Made for
    /// a cache: keep the `Body`, clone it for each answer.
    pub fn prepared(content: Arc<[u8]>, encoding: Encoding) -> Result<Body, ValueError> {
        let mut body = Body::shared(content, encoding)?;
        let written = match encoding {
            Encoding::Identity => {
                let mut escaped = Vec::with_capacity(body.content().len() + body.content().len() / 16);
                super::json_text::escape_utf8(body.content(), &mut escaped);
                // Escaping keeps UTF-8 as it is and adds ASCII only.
                String::from_utf8(escaped).expect("escaped UTF-8 is UTF-8")
            }
            other => super::codec::encode(body.content(), other),
        };
        body.written = Some(Arc::new(Written {
            text: WrittenText::Shared(Arc::from(written)),
            copy: None,
        }));
        Ok(body)
    }

    /// A [`prepared`](Self::prepared) `identity` body whose content and
    /// written text an adapter holds (`Body::prepared_text`), with the
    /// copy its transport sends from, if any. The adapter vouches that
    /// `content` is UTF-8 and `text` its escaped form, byte for byte what
    /// `prepared` writes.
    #[cfg(all(feature = "adapters", target_os = "linux"))]
    pub(crate) fn held_text(content: HeldBytes, text: HeldBytes, copy: Option<TransportCopy>) -> Body {
        Body {
            content: Content::Held(content),
            encoding: Encoding::Identity,
            extra: None,
            written: Some(Arc::new(Written {
                text: WrittenText::Held(text),
                copy,
            })),
        }
    }

    /// The content's text as it goes between the quotes of `content`, if
    /// the body was [`prepared`](Self::prepared).
    pub(crate) fn written(&self) -> Option<&Written> {
        self.written.as_deref()
    }

    /// Gives the prepared text an adapter's copy of the same bytes; the
    /// adapter vouches for it (`Body::add_sendfile_copy` makes one).
    #[cfg(all(feature = "adapters", target_os = "linux"))]
    pub(crate) fn set_written_copy(&mut self, copy: TransportCopy) {
        if let Some(written) = &mut self.written {
            Arc::make_mut(written).copy = Some(copy);
        }
    }

    /// The length of the content as written on the wire, if the body was
    /// [`prepared`](Self::prepared): what keeping it costs a cache.
    pub fn written_len(&self) -> Option<usize> {
        self.written.as_ref().map(|written| written.text.len())
    }

    /// The same content in another encoding (fails for non-UTF-8 content
    /// and `identity`).
    pub fn with_encoding(self, encoding: Encoding) -> Result<Body, ValueError> {
        let extra = self.extra;
        let mut body = Body::checked(self.content, encoding)?;
        body.extra = extra;
        Ok(body)
    }

    /// Adds another key (D9). `content` and `encoding` are refused, as is a
    /// `null` value.
    pub fn with_extra(mut self, key: impl Into<String>, value: Value) -> Result<Body, ValueError> {
        let key = key.into();
        if key == "content" || key == "encoding" {
            return Err(ValueError::new("is a reserved body key"));
        }
        if value.is_null() {
            return Err(ValueError::new("is null, which a body key may not be"));
        }
        self.extra.get_or_insert_default().insert(key, value);
        Ok(self)
    }

    /// The decoded content, as bytes.
    pub fn content(&self) -> &[u8] {
        self.content.as_slice()
    }

    /// The decoded content as text, when it is UTF-8 (D9).
    pub fn as_text(&self) -> Option<&str> {
        std::str::from_utf8(self.content()).ok()
    }

    /// Takes the content out (a copy, when it was shared).
    pub fn into_content(self) -> Vec<u8> {
        self.content.into_vec()
    }

    /// The encoding the content travels in.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// The other keys of `body` (e.g. `allowed-methods`).
    pub fn extra(&self) -> &Map<String, Value> {
        self.extra.as_deref().unwrap_or(no_keys())
    }

    /// Puts `content` in place of the content, in the same encoding and
    /// with the same other keys (content that streamed in, D19, or taken
    /// out); the content it held comes back. The caller vouches for it as
    /// the parser does: UTF-8 when the encoding is identity.
    #[cfg(feature = "adapters")]
    pub(crate) fn replace_content(&mut self, content: Vec<u8>) -> Vec<u8> {
        self.written = None;
        std::mem::replace(&mut self.content, Content::Owned(content)).into_vec()
    }

    /// Built by the parser, which has already checked every part.
    // Inlined into the judges, as the body's checks are: the body is
    // built where it is handed on, not returned through memory.
    #[inline(always)]
    pub(crate) fn from_parts(
        content: Vec<u8>,
        encoding: Encoding,
        extra: Option<&Map<String, Value>>,
    ) -> Body {
        Body {
            content: Content::Owned(content),
            encoding,
            extra: extra.map(|extra| Box::new(extra.clone())),
            written: None,
        }
    }
}

/// A validated jsontp request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The `jsontp` version (D6).
    pub version: Version,
    /// The `resource` (D7).
    pub resource: Resource,
    /// The `method`.
    pub method: Method,
    /// The `headers` (D8).
    pub headers: Headers,
    /// The `body` (D9). For the first request of a 100-continue handshake it
    /// is empty: that body is ignored (D10).
    pub body: Body,
}

impl Request {
    /// A request with version `1.0`, no headers and an empty body.
    pub fn new(method: Method, resource: Resource) -> Request {
        Request {
            version: Version::V1_0,
            resource,
            method,
            headers: Headers::new(),
            body: Body::empty(),
        }
    }

    /// Sets the headers (builder style).
    pub fn with_headers(mut self, headers: Headers) -> Request {
        self.headers = headers;
        self
    }

    /// Sets the body (builder style).
    pub fn with_body(mut self, body: Body) -> Request {
        self.body = body;
        self
    }

    /// The content of a `POST` read as `application/x-www-form-urlencoded`
    /// pairs (D11). `None` for other methods, and when the content is not
    /// form data: then the request goes on with the raw content.
    pub fn form(&self) -> Option<Vec<(String, String)>> {
        if self.method != Method::Post {
            return None;
        }
        super::form::parse_form(self.body.as_text()?)
    }
}

/// A jsontp response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The `jsontp` version (D6).
    pub version: Version,
    /// The `status` object.
    pub status: Status,
    /// The echoed `resource` string, byte for byte (D7, D12).
    pub resource: String,
    /// The `headers`; `date` and `language` are filled in when the
    /// connection writes the response, if the application left them out.
    pub headers: Headers,
    /// The `body`.
    pub body: Body,
}

impl Response {
    /// A response with a status, no headers and an empty body.
    ///
    /// A server never needs to set the echoed `resource`: the connection
    /// fills it from the request it answers (D7, D12), so a handler cannot
    /// get it wrong. Set it with [`with_resource`](Self::with_resource) when
    /// writing a response by other means (a test peer, a proxy).
    #[inline]
    pub fn new(status: Status) -> Response {
        Response {
            version: Version::V1_0,
            status,
            resource: String::new(),
            headers: Headers::new(),
            body: Body::empty(),
        }
    }

    /// Sets the echoed `resource` string (builder style).
    pub fn with_resource(mut self, resource: impl Into<String>) -> Response {
        self.resource = resource.into();
        self
    }

    /// Sets the headers (builder style).
    #[inline]
    pub fn with_headers(mut self, headers: Headers) -> Response {
        self.headers = headers;
        self
    }

    /// Sets the body (builder style).
    #[inline]
    pub fn with_body(mut self, body: Body) -> Response {
        self.body = body;
        self
    }
}
