//! What handlers answer with: anything that converts into a [`Reply`].

use serde::Serialize;
use serde_json::Value;

use crate::io_adapters::server::Reply;
use crate::message::{Body, Cookies, Headers, Response, Status, StatusCode};

/// A handler's result, converted into the reply the server sends.
///
/// Implemented for whole answers ([`Response`], [`Reply`]), for a status
/// alone or with its `human-message`, for text, for body keys
/// ([`Keys`](super::Keys)), for [`Refusal`] and for `Result`s of these,
/// so that a handler can use `?`.
///
/// ```
/// use jsontp_protocol::app::{IntoReply, Refusal};
/// use jsontp_protocol::message::StatusCode;
///
/// fn check(name: &str) -> Result<&'static str, Refusal> {
///     if name.is_empty() {
///         return Err(Refusal::bad_request("body key `name` is empty"));
///     }
///     Ok("hello")
/// }
/// let reply = check("").into_reply();
/// assert_eq!(reply.response().status.code, StatusCode::BAD_REQUEST);
/// assert_eq!(check("ada").into_reply().response().body.as_text(), Some("hello"));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a handler's answer",
    label = "not an answer",
    note = "a handler returns what implements `IntoReply`: Response, Reply, StatusCode, \
            (StatusCode, &str or String), &'static str, String, Keys<T: Serialize>, \
            (StatusCode, Keys<T>), (SetCookies, T), (Headers, T), Refusal, or a Result of these",
    note = "wrap body keys in `Keys(…)`, or implement `IntoReply` for your type"
)]
pub trait IntoReply {
    /// The reply.
    fn into_reply(self) -> Reply;
}

impl IntoReply for std::convert::Infallible {
    /// Never called: the rejection of extractors that never refuse.
    fn into_reply(self) -> Reply {
        match self {}
    }
}

impl IntoReply for Reply {
    fn into_reply(self) -> Reply {
        self
    }
}

impl IntoReply for Response {
    fn into_reply(self) -> Reply {
        self.into()
    }
}

impl IntoReply for Status {
    fn into_reply(self) -> Reply {
        Response::new(self).into()
    }
}

impl IntoReply for StatusCode {
    /// This status, its reason phrase as the `human-message`.
    fn into_reply(self) -> Reply {
        Response::from_code(self, self.reason()).into()
    }
}

impl IntoReply for (StatusCode, &'static str) {
    fn into_reply(self) -> Reply {
        Response::from_code(self.0, self.1).into()
    }
}

impl IntoReply for (StatusCode, String) {
    fn into_reply(self) -> Reply {
        Response::from_code(self.0, self.1).into()
    }
}

impl IntoReply for &'static str {
    /// `200` with this text as the content.
    fn into_reply(self) -> Reply {
        Response::ok("ok").with_body(Body::from_static(self)).into()
    }
}

impl IntoReply for String {
    /// `200` with this text as the content.
    fn into_reply(self) -> Reply {
        Response::ok("ok").with_body(Body::text(self)).into()
    }
}

impl<T: IntoReply, E: IntoReply> IntoReply for Result<T, E> {
    fn into_reply(self) -> Reply {
        match self {
            Ok(answer) => answer.into_reply(),
            Err(refusal) => refusal.into_reply(),
        }
    }
}

/// Cookies for the client to set (`set-cookies`, D15), added to the reply
/// of the value beside them: `(SetCookies(cookies), answer)`.
///
/// ```
/// use jsontp_protocol::app::{IntoReply, SetCookies};
/// use jsontp_protocol::message::Cookies;
///
/// let mut cookies = Cookies::new();
/// cookies.set("session", "4f2a");
/// let reply = (SetCookies(cookies), "welcome").into_reply();
/// let set = reply.response().headers.set_cookies().unwrap();
/// assert_eq!(set.get("session"), Some("4f2a"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SetCookies(pub Cookies);

impl<T: IntoReply> IntoReply for (SetCookies, T) {
    fn into_reply(self) -> Reply {
        let (SetCookies(cookies), answer) = self;
        let (mut response, reader) = answer.into_reply().into_parts();
        let headers = std::mem::take(&mut response.headers);
        response.headers = headers.with_set_cookies(cookies);
        rebuild(response, reader)
    }
}

impl<T: Serialize> IntoReply for (StatusCode, Keys<T>) {
    /// Body keys with this status (`201` for something created, say), its
    /// reason phrase as the `human-message`.
    fn into_reply(self) -> Reply {
        let (code, Keys(keys)) = self;
        match keys_body(&keys) {
            Ok(body) => Response::from_code(code, code.reason()).with_body(body).into(),
            Err(refusal) => refusal.into_reply(),
        }
    }
}

impl<T: IntoReply> IntoReply for (Headers, T) {
    /// `T`'s reply with these headers instead of its own.
    fn into_reply(self) -> Reply {
        let (headers, answer) = self;
        let (mut response, reader) = answer.into_reply().into_parts();
        response.headers = headers;
        rebuild(response, reader)
    }
}

fn rebuild(response: Response, reader: Option<Box<dyn std::io::Read + Send>>) -> Reply {
    match reader {
        None => response.into(),
        Some(reader) => Reply::streamed(response, reader),
    }
}

/// An answer that refuses a request: a status and a `human-message`
/// saying why. What an extractor answers when the request does not give
/// what the handler asks for, and the error type of handlers that use `?`.
///
/// Any error type converts into one as a `500` (its text goes to the log,
/// not to the client, which sees only that the server failed).
///
/// ```
/// use jsontp_protocol::app::Refusal;
/// use jsontp_protocol::message::StatusCode;
///
/// let refusal = Refusal::new(StatusCode::CONFLICT, "user already exists");
/// assert_eq!(refusal.status(), StatusCode::CONFLICT);
/// assert_eq!(refusal.message(), "user already exists");
///
/// fn parse(text: &str) -> Result<u64, Refusal> {
///     Ok(text.parse::<u64>()?) // a ParseIntError becomes a 500
/// }
/// assert_eq!(parse("x").unwrap_err().status(), StatusCode::INTERNAL_SERVER_ERROR);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    status: StatusCode,
    message: String,
    keys: Option<serde_json::Map<String, Value>>,
}

impl Refusal {
    /// A refusal with `status` and this `human-message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
            keys: None,
        }
    }

    /// `400 Bad Request`: the request is wrong (a key missing or mistyped).
    pub fn bad_request(message: impl Into<String>) -> Refusal {
        Refusal::new(StatusCode::BAD_REQUEST, message)
    }

    /// `401 Unauthorized`: no credentials, or wrong ones (D14).
    pub fn unauthorized(message: impl Into<String>) -> Refusal {
        Refusal::new(StatusCode::UNAUTHORIZED, message)
    }

    /// `403 Forbidden`: the credentials do not allow this.
    pub fn forbidden(message: impl Into<String>) -> Refusal {
        Refusal::new(StatusCode::FORBIDDEN, message)
    }

    /// `404 Not Found`.
    pub fn not_found(message: impl Into<String>) -> Refusal {
        Refusal::new(StatusCode::NOT_FOUND, message)
    }

    /// `500 Internal Server Error`, with this message for the client.
    pub fn internal(message: impl Into<String>) -> Refusal {
        Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// Adds a body key to the refusal (builder style), for clients that
    /// read a machine-readable reason; `content`, `encoding` and null
    /// values are not body keys and are left out.
    pub fn with_key(mut self, key: impl Into<String>, value: impl Into<Value>) -> Refusal {
        let (key, value) = (key.into(), value.into());
        if key != "content" && key != "encoding" && !value.is_null() {
            self.keys.get_or_insert_default().insert(key, value);
        }
        self
    }

    /// The status it answers with.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// Its `human-message`.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The response it answers with.
    pub fn into_response(self) -> Response {
        let mut body = Body::empty();
        for (key, value) in self.keys.into_iter().flatten() {
            // `with_key` kept out what a body may not hold.
            body = body.with_extra(key, value).unwrap_or_default();
        }
        Response::from_code(self.status, self.message).with_body(body)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for Refusal {
    /// A `500`; the error goes to the log (`tracing`), since its text may
    /// say more about the server than a client should learn.
    fn from(error: E) -> Refusal {
        tracing::error!(%error, "the application failed; answering 500");
        Refusal::internal("the server failed while answering this request")
    }
}

impl IntoReply for Refusal {
    fn into_reply(self) -> Reply {
        self.into_response().into()
    }
}

/// Body keys, both ways: as an extractor, the request's body keys (all
/// but `content` and `encoding`) deserialised into `T`; as an answer, `200`
/// with `T` serialised into body keys (`T` must serialise to an object).
///
/// A failed extraction answers `400` with a `human-message` naming the key
/// and what is wrong with it, such as
/// ``body key `nnntp.post`: missing field `subject` ``.
///
/// ```
/// use jsontp_protocol::app::{IntoReply, Keys};
/// use serde::Serialize;
///
/// #[derive(Serialize)]
/// struct Created { id: u64 }
///
/// let reply = Keys(Created { id: 7 }).into_reply();
/// assert_eq!(reply.response().body.extra()["id"], 7);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keys<T>(pub T);

impl<T: Serialize> IntoReply for Keys<T> {
    fn into_reply(self) -> Reply {
        match keys_body(&self.0) {
            Ok(body) => Response::ok("ok").with_body(body).into(),
            Err(refusal) => refusal.into_reply(),
        }
    }
}

/// A body whose keys are `value`'s fields.
fn keys_body<T: Serialize>(value: &T) -> Result<Body, Refusal> {
    let failed = |why: &str| {
        tracing::error!(
            why,
            "the application's answer is not a set of body keys; answering 500"
        );
        Refusal::internal("the server failed while answering this request")
    };
    let Value::Object(map) = serde_json::to_value(value).map_err(|e| failed(&e.to_string()))? else {
        return Err(failed("it does not serialise to an object"));
    };
    let mut body = Body::empty();
    for (key, value) in map {
        // A null field is an absent key (a body key may not be null).
        if value.is_null() {
            continue;
        }
        body = body
            .with_extra(key, value)
            .map_err(|e| failed(&format!("a key {e}")))?;
    }
    Ok(body)
}

/// `reply` as a whole response: a streamed content is read into memory
/// (for an answer that cannot stream: a refusal of a head,
/// [`Router::handle`](super::Router::handle)).
pub(crate) fn whole(reply: Reply) -> Response {
    let (mut response, reader) = reply.into_parts();
    let Some(mut reader) = reader else {
        return response;
    };
    let mut content = Vec::new();
    let body = std::io::Read::read_to_end(&mut reader, &mut content)
        .ok()
        .and_then(|_| {
            let mut body = Body::new(content, response.body.encoding()).ok()?;
            // The head's keys were a body's already: none is refused.
            for (key, value) in response.body.extra() {
                body = body.with_extra(key.clone(), value.clone()).ok()?;
            }
            Some(body)
        });
    match body {
        Some(body) => {
            response.body = body;
            response
        }
        None => Refusal::internal("the server failed while answering this request").into_response(),
    }
}
