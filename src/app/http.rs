//! jsontp requests and answers as `http::Request`/`http::Response`
//! (feature `tower`), so that tower-http's protocol-neutral layers (trace,
//! request id, timeouts, authorization, concurrency) wrap a
//! [`Router`](crate::app::Router) as they are.
//!
//! [`layer`] puts a stack of http-typed layers in front of any service of
//! [`Incoming`] requests answering [`Reply`]s (a router), and gives back
//! such a service, to serve with
//! [`serve_service`](crate::io_adapters::server::tokio::serve_service):
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use std::time::Duration;
//! use jsontp_protocol::app::{Router, get, http};
//! use jsontp_protocol::io_adapters::server::{ServerOptions, listen};
//! use jsontp_protocol::io_adapters::server::tokio::serve_service;
//! use tower::{Layer, ServiceBuilder};
//! use tower_http::timeout::TimeoutLayer;
//! use tower_http::trace::TraceLayer;
//!
//! async fn hello() -> &'static str {
//!     "hello"
//! }
//!
//! let router = Router::new().route("/hello", get(hello));
//! let service = http::layer(
//!     ServiceBuilder::new()
//!         .layer(TraceLayer::new_for_http())
//!         .layer(TimeoutLayer::with_status_code(
//!             ::http::StatusCode::REQUEST_TIMEOUT,
//!             Duration::from_secs(5),
//!         )),
//! )
//! .layer(router.clone());
//! let listener = listen("127.0.0.1:8080")?;
//! listener.set_nonblocking(true)?;
//! let listener = tokio::net::TcpListener::from_std(listener)?;
//! // The router's own checks before content, and its access record.
//! serve_service(listener, service, router, ServerOptions::default(), async {
//!     let _ = tokio::signal::ctrl_c().await;
//! })
//! .await
//! # }
//! ```
//!
//! What the layers see, and what comes back of it:
//!
//! - the request's method, its resource as the URI, and its headers whose
//!   jsontp value is a string (`content-type`, `authorization`,
//!   `if-modified-since`, `if-unmodified-since`, `expect`, `date`,
//!   `language`, and names outside the protocol's list) as http headers,
//!   when http can hold them (visible ASCII). The jsontp request itself,
//!   its content or [`Upload`](crate::io_adapters::server::Upload), and
//!   the peer travel in the extensions, moved, never copied: the
//!   application gets back exactly what the server read, with the headers
//!   a layer added, changed or removed (a request id) applied to it.
//!   Method and URI are only a view: the router routes on the jsontp
//!   request. The peer's
//!   [`RequestInfo`](crate::io_adapters::server::RequestInfo) is in the
//!   extensions too, for a layer of your own that needs it;
//! - the answer's status and its string headers (`content-type`, `date`,
//!   `language`). A layer's change to those reaches the jsontp answer;
//!   names outside the protocol's list do not, since a client refuses an
//!   answer that carries one (D8). The content stays with the answer, a
//!   stream still a stream (D19);
//! - an answer a layer made itself, without the application's (a
//!   timeout's `408`, an authorization layer's `401`), becomes a jsontp
//!   answer of that status, except a timeout: see [`reply`].
//!
//! The http body of both is [`Body`], which holds no bytes: a layer that
//! reads or rewrites body bytes (compression, body limits) has nothing to
//! apply to, since a jsontp message's content is a key of its JSON body,
//! encoded as the message says (D9).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue};
use http_body::{Frame, SizeHint};

use super::respond::Refusal;
use crate::io_adapters::server::{Handing, Incoming, Reached, Reply};
use crate::message::{HeaderName, Headers, Method, Resource, Response, StatusCode};

/// The http body of a jsontp message: empty to http. A jsontp message's
/// content is not a byte stream of its own but a key of its JSON body,
/// encoded as the body says (D9): it travels, moved, with the message in
/// the request's or response's extensions, and the server writes it as
/// jsontp does, a stream still a stream (D19). `Default`, so that a layer
/// can make an answer of its own (tower-http's `TimeoutLayer`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Body {
    _empty: (),
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        true
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(0)
    }
}

/// A value taken once by whoever gets it first, as an extension, which
/// http requires to be `Clone + Send + Sync`: clones share the one value
/// behind a lock, so nothing is copied.
struct Carried<T>(Arc<Mutex<Option<T>>>);

impl<T> Clone for Carried<T> {
    fn clone(&self) -> Self {
        Carried(Arc::clone(&self.0))
    }
}

impl<T> Carried<T> {
    fn new(value: T) -> Self {
        Carried(Arc::new(Mutex::new(Some(value))))
    }

    fn take(&self) -> Option<T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    fn is_taken(&self) -> bool {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).is_none()
    }
}

/// `incoming` as an http request: method, URI and string headers for the
/// layers; the jsontp request, its upload and its peer in the extensions,
/// for [`incoming`] to take back.
pub fn request(incoming: Incoming) -> http::Request<Body> {
    let mut request = http::Request::new(Body::default());
    *request.method_mut() = http_method(incoming.request.method);
    *request.uri_mut() = uri(&incoming.request.resource);
    *request.headers_mut() = to_http(&incoming.request.headers, Direction::Request);
    request.extensions_mut().insert(incoming.info);
    request.extensions_mut().insert(Carried::new(incoming));
    request
}

/// The jsontp request an http request made by [`request`] carries, with
/// the changes layers made to its string headers since; `None` for an
/// http request made otherwise, or whose jsontp request was taken already.
pub fn incoming<B>(request: http::Request<B>) -> Option<Incoming> {
    let (parts, _body) = request.into_parts();
    let mut incoming = parts.extensions.get::<Carried<Incoming>>()?.take()?;
    apply(&mut incoming.request.headers, &parts.headers, Direction::Request);
    Some(incoming)
}

/// `reply` as an http response: its status and string headers for the
/// layers; the jsontp answer, content and all, in the extensions, for
/// [`reply`] to take back.
pub fn response(reply: Reply) -> http::Response<Body> {
    let mut response = http::Response::new(Body::default());
    let head = reply.response();
    *response.status_mut() = http::StatusCode::from_u16(head.status.code.as_u16())
        .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    *response.headers_mut() = to_http(&head.headers, Direction::Response);
    response.extensions_mut().insert(Carried::new(reply));
    response
}

/// The jsontp answer of an http response: the one [`response`] made, with
/// the changes layers made to its string headers since, or, for an answer
/// a layer made itself, a jsontp answer of its status. A status a layer
/// set on the application's answer is not carried: the answer's
/// `human-message` speaks of its own status (D12).
///
/// A layer's timeout (`408`, as tower-http's `TimeoutLayer` answers by
/// default, or `504`) is `504`: jsontp has no `408` for an application too
/// slow, and the request may or may not have been applied (D13). Served
/// through [`layer`], it is `503` instead when the request had not reached
/// a handler yet (D13: never handed to the application, try again later).
pub fn reply<B>(response: http::Response<B>) -> Reply {
    answer(response, Reached::Handler)
}

/// The jsontp answer of `response`, given how far its request got.
fn answer<B>(response: http::Response<B>, reached: Reached) -> Reply {
    let (parts, _body) = response.into_parts();
    let carried = parts.extensions.get::<Carried<Reply>>().and_then(Carried::take);
    let Some(reply) = carried else {
        return layer_answer(parts.status, reached);
    };
    let (mut head, content) = reply.into_parts();
    apply(&mut head.headers, &parts.headers, Direction::Response);
    match content {
        Some(reader) => Reply::streamed(head, reader),
        None => head.into(),
    }
}

/// The jsontp answer to an answer a layer made without the application.
fn layer_answer(status: http::StatusCode, reached: Reached) -> Reply {
    let timeout = matches!(
        status,
        http::StatusCode::REQUEST_TIMEOUT | http::StatusCode::GATEWAY_TIMEOUT
    );
    let answer = |code, message: &str| Response::from_code(code, message.to_owned()).into();
    if timeout {
        // The same answers the tokio server gives tower's own timeout (D13).
        return reached.timed_out().into();
    }
    match StatusCode::from_u16(status.as_u16()).filter(|code| !code.is_informational()) {
        Some(code) => answer(
            code,
            &format!(
                "{}: answered by a layer in front of the application, which never saw the request",
                code.reason()
            ),
        ),
        None => {
            tracing::error!(%status, "a layer answered with a status jsontp cannot send; answering 500");
            answer(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the server failed while answering this request",
            )
        }
    }
}

fn http_method(method: Method) -> http::Method {
    match method {
        Method::Get => http::Method::GET,
        Method::Post => http::Method::POST,
        Method::Put => http::Method::PUT,
        Method::Delete => http::Method::DELETE,
        Method::Options => http::Method::OPTIONS,
    }
}

/// The resource as a URI, for the layers to show: its text without the
/// fragment (http has none), what http does not take percent-encoded.
fn uri(resource: &Resource) -> http::Uri {
    let text = resource.as_str();
    let text = text.split_once('#').map_or(text, |(before, _)| before);
    if let Ok(uri) = http::Uri::try_from(text) {
        return uri;
    }
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_graphic() && !b"\"<>\\^`{|}".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    http::Uri::try_from(encoded).unwrap_or_else(|_| http::Uri::from_static("/"))
}

/// Which names a message's http headers carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Names outside the list too: they reach the handler, never the wire.
    Request,
    /// Listed names only: a client refuses an answer with another (D8).
    Response,
}

/// The protocol's headers whose value is a string (D8).
const STRING_HEADERS: [HeaderName; 7] = [
    HeaderName::ContentType,
    HeaderName::Authorization,
    HeaderName::IfModifiedSince,
    HeaderName::IfUnmodifiedSince,
    HeaderName::Expect,
    HeaderName::Date,
    HeaderName::Language,
];

/// The string value of a listed header, when it is set.
fn string_value(headers: &Headers, name: HeaderName) -> Option<String> {
    match name {
        HeaderName::ContentType => headers.content_type.as_ref().map(ToString::to_string),
        HeaderName::Authorization => headers.authorization().map(str::to_owned),
        HeaderName::IfModifiedSince => headers.if_modified_since().map(|date| date.to_string()),
        HeaderName::IfUnmodifiedSince => headers.if_unmodified_since().map(|date| date.to_string()),
        HeaderName::Expect => headers.expect_continue.then(|| "100-continue".to_owned()),
        HeaderName::Date => headers.date.map(|date| date.to_string()),
        HeaderName::Language => headers.language.map(|tag| tag.as_str().to_owned()),
        _ => None,
    }
}

/// The headers of `headers` that http holds as they are: strings of
/// visible ASCII, under names http takes.
fn to_http(headers: &Headers, direction: Direction) -> HeaderMap {
    // http takes bytes past ASCII too, but gives them back only as bytes.
    let text = |value: &str| HeaderValue::from_str(value).ok().filter(|v| v.to_str().is_ok());
    let mut map = HeaderMap::new();
    for name in STRING_HEADERS {
        if let Some(value) = string_value(headers, name)
            && let Some(value) = text(&value)
        {
            map.insert(http::HeaderName::from_static(name.as_str()), value);
        }
    }
    if direction == Direction::Request {
        for (name, value) in headers.unlisted() {
            if let serde_json::Value::String(value) = value
                && let Ok(name) = http::HeaderName::try_from(name.as_str())
                && let Some(value) = text(value)
            {
                map.insert(name, value);
            }
        }
    }
    map
}

/// Applies to `headers` what layers changed in `now`, the http headers
/// [`to_http`] made of them: names added or changed with one string value
/// that the protocol's type takes are set, names taken away are removed.
/// Anything else is left as it was (several values, a value that is not a
/// string or not of the header's type, a name the direction does not
/// carry): that would not be lossless.
fn apply(headers: &mut Headers, now: &HeaderMap, direction: Direction) {
    let before = to_http(headers, direction);
    for name in now.keys() {
        if now.get_all(name).iter().eq(before.get_all(name).iter()) {
            continue;
        }
        let mut values = now.get_all(name).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            tracing::debug!(header = %name, "a layer set several values: left out of the jsontp message");
            continue;
        };
        let Ok(value) = value.to_str() else {
            tracing::debug!(header = %name, "a layer set a value that is not text: left out of the jsontp message");
            continue;
        };
        if !set(headers, name.as_str(), value, direction) {
            tracing::debug!(header = %name, value, "a layer set a header jsontp cannot carry here: left out");
        }
    }
    for name in before.keys() {
        if !now.contains_key(name) {
            remove(headers, name.as_str());
        }
    }
}

/// Sets header `name` (lower-case, as http names are) to `value`; whether
/// it could be.
fn set(headers: &mut Headers, name: &str, value: &str, direction: Direction) -> bool {
    match HeaderName::from_lowercase(name) {
        Some(HeaderName::ContentType) => value.parse().map(|v| headers.content_type = Some(v)).is_ok(),
        Some(HeaderName::Authorization) => {
            headers.more_mut().authorization = Some(value.to_owned());
            true
        }
        Some(HeaderName::IfModifiedSince) => value
            .parse()
            .map(|v| headers.more_mut().if_modified_since = Some(v))
            .is_ok(),
        Some(HeaderName::IfUnmodifiedSince) => value
            .parse()
            .map(|v| headers.more_mut().if_unmodified_since = Some(v))
            .is_ok(),
        // The one value the protocol takes (D10).
        Some(HeaderName::Expect) if value.eq_ignore_ascii_case("100-continue") => {
            headers.expect_continue = true;
            true
        }
        Some(HeaderName::Date) => value.parse().map(|v| headers.date = Some(v)).is_ok(),
        Some(HeaderName::Language) => value.parse().map(|v| headers.language = Some(v)).is_ok(),
        // Listed names whose value is not a string (D8).
        Some(_) => false,
        None if direction == Direction::Request => {
            let value = serde_json::Value::String(value.to_owned());
            let unlisted = &mut headers.more_mut().unlisted;
            match unlisted.iter_mut().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
                Some(entry) => entry.1 = value,
                None => unlisted.push((name.to_owned(), value)),
            }
            true
        }
        None => false,
    }
}

/// Removes header `name`, one [`to_http`] carried.
fn remove(headers: &mut Headers, name: &str) {
    match HeaderName::from_lowercase(name) {
        Some(HeaderName::ContentType) => headers.content_type = None,
        Some(HeaderName::Authorization) => headers.more_mut().authorization = None,
        Some(HeaderName::IfModifiedSince) => headers.more_mut().if_modified_since = None,
        Some(HeaderName::IfUnmodifiedSince) => headers.more_mut().if_unmodified_since = None,
        Some(HeaderName::Expect) => headers.expect_continue = false,
        Some(HeaderName::Date) => headers.date = None,
        Some(HeaderName::Language) => headers.language = None,
        Some(_) => {}
        None => headers
            .more_mut()
            .unlisted
            .retain(|(n, _)| !n.eq_ignore_ascii_case(name)),
    }
}

/// http-typed layers in front of a service of [`Incoming`] requests, as a
/// `tower::Layer`: see [`layer`].
#[derive(Debug, Clone)]
pub struct HttpLayer<L> {
    layers: L,
}

/// Puts `layers`, a `tower::Layer` (or a `ServiceBuilder` of several) of
/// services of `http::Request<Body>` answering `http::Response<_>`, in
/// front of a service of [`Incoming`] answering [`Reply`] (a
/// [`Router`](crate::app::Router)): the result is such a service again,
/// for [`serve_service`](crate::io_adapters::server::tokio::serve_service).
/// See the [module's documentation](self).
pub fn layer<L>(layers: L) -> HttpLayer<L> {
    HttpLayer { layers }
}

impl<L, S> tower::Layer<S> for HttpLayer<L>
where
    L: tower::Layer<Jsontp<S>>,
{
    type Service = Layered<L::Service>;

    fn layer(&self, inner: S) -> Self::Service {
        Layered {
            inner: self.layers.layer(Jsontp { inner }),
        }
    }
}

/// A service of jsontp requests seen as http, innermost of an
/// [`HttpLayer`]'s layers: takes an `http::Request` made by [`request`]
/// and calls its service with the jsontp request it carries, answering
/// the jsontp answer as an http response ([`response`]).
#[derive(Debug, Clone)]
pub struct Jsontp<S> {
    inner: S,
}

/// The future of a [`Jsontp`] or [`Layered`] service's answer.
pub type HttpFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B> tower::Service<http::Request<B>> for Jsontp<S>
where
    S: tower::Service<Incoming, Response = Reply>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = S::Error;
    type Future = HttpFuture<http::Response<Body>, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let Some(incoming) = incoming(request) else {
            tracing::error!(
                "an http request without its jsontp request reached the application: \
                 make it with app::http::request; answering 500"
            );
            let failed = Refusal::internal("the server failed while answering this request");
            return Box::pin(std::future::ready(Ok(response(failed.into()))));
        };
        let answer = self.inner.call(incoming);
        Box::pin(async move { answer.await.map(response) })
    }
}

/// A stack of http-typed layers served as a service of [`Incoming`]
/// requests answering [`Reply`]s: made by [`HttpLayer`].
#[derive(Debug, Clone)]
pub struct Layered<T> {
    inner: T,
}

impl<T, B> tower::Service<Incoming> for Layered<T>
where
    T: tower::Service<http::Request<Body>, Response = http::Response<B>>,
    T::Future: Send + 'static,
    T::Error: Send + 'static,
{
    type Response = Reply;
    type Error = T::Error;
    type Future = HttpFuture<Reply, T::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), T::Error>> {
        self.inner.poll_ready(cx)
    }

    /// Calls the layers with `incoming` as an http request, and makes
    /// their answer a jsontp one. An answer a layer made itself for a
    /// timeout is `503` if the request never reached a handler, `504` if
    /// it did (D13).
    fn call(&mut self, mut incoming: Incoming) -> Self::Future {
        let handing: Handing = incoming.handing.watch();
        let request = request(incoming);
        let carried = request.extensions().get::<Carried<Incoming>>().cloned();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await?;
            let reached = match carried {
                // Still carried: no service of the application took it.
                Some(carried) if !carried.is_taken() => Reached::Queue,
                _ => handing.reached(),
            };
            Ok(self::answer(response, reached))
        })
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;
    use crate::io_adapters::server::RequestInfo;
    use crate::message::{Body as JsonBody, Request};

    fn info() -> RequestInfo {
        RequestInfo::new("127.0.0.1:4000".parse().unwrap())
    }

    fn sent() -> Request {
        let headers = Headers::new()
            .with_authorization("Bearer s3cret".to_owned())
            .with_content_type(
                "text/plain; charset=utf-8"
                    .parse::<crate::message::MediaType>()
                    .unwrap(),
            )
            .with_if_modified_since(
                "2024-05-01T10:00:00Z+0000"
                    .parse::<crate::message::Date>()
                    .unwrap(),
            )
            .with_expect_continue(true)
            .with_unlisted("x-trace", serde_json::json!("abc"))
            .with_unlisted("x-count", serde_json::json!(3));
        Request::new(Method::Post, "/news/post?group=rust#top".parse().unwrap())
            .with_headers(headers)
            .with_body(
                JsonBody::text("hello there")
                    .with_extra("subject", "hi".into())
                    .unwrap(),
            )
    }

    #[test]
    fn a_request_goes_out_as_http_and_comes_back_as_it_went_without_a_copy() {
        let request = sent();
        let sent = request.clone();
        let content = sent.body.content().as_ptr();
        let http = self::request(Incoming::new(sent, info()));

        assert_eq!(http.method(), http::Method::POST);
        assert_eq!(http.uri(), "/news/post?group=rust");
        let header = |name: &str| http.headers().get(name).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(header("authorization").as_deref(), Some("Bearer s3cret"));
        assert_eq!(
            header("content-type").as_deref(),
            Some("text/plain; charset=utf-8")
        );
        assert_eq!(
            header("if-modified-since").as_deref(),
            Some("2024-05-01T10:00:00Z+0000")
        );
        assert_eq!(header("expect").as_deref(), Some("100-continue"));
        assert_eq!(header("x-trace").as_deref(), Some("abc"));
        // A number is not an http header: it stays in the jsontp request.
        assert_eq!(header("x-count"), None);
        assert_eq!(http.extensions().get::<RequestInfo>(), Some(&info()));

        let back = incoming(http).expect("carried");
        assert_eq!(*back.request, request);
        assert_eq!(back.info, info());
        assert!(back.upload.is_none());
        assert_eq!(back.request.body.content().as_ptr(), content, "moved, not copied");
    }

    #[test]
    fn what_http_cannot_hold_stays_in_the_jsontp_request_untouched() {
        let mut request = sent();
        request.headers = Headers::new().with_authorization("Bearer clé".to_owned());
        request.resource = "/a`b?q=ü".parse().unwrap();
        let http = self::request(Incoming::new(request.clone(), info()));
        assert!(http.headers().get("authorization").is_none());
        assert_eq!(http.uri(), "/a%60b?q=%C3%BC");
        assert_eq!(*incoming(http).expect("carried").request, request);
    }

    #[test]
    fn a_layers_changes_to_the_request_headers_reach_the_jsontp_request() {
        let mut http = self::request(Incoming::new(sent(), info()));
        let headers = http.headers_mut();
        headers.insert("x-request-id", HeaderValue::from_static("req-7"));
        headers.insert("authorization", HeaderValue::from_static("Bearer other"));
        headers.insert("x-trace", HeaderValue::from_static("def"));
        headers.remove("content-type");
        // Not lossless: left as they were.
        headers.insert(
            "if-modified-since",
            HeaderValue::from_static("Wed, 01 May 2024 10:00:00 GMT"),
        );
        headers.insert("accept", HeaderValue::from_static("text/plain"));
        headers.insert("expect", HeaderValue::from_static("something-else"));
        headers.append("x-twice", HeaderValue::from_static("1"));
        headers.append("x-twice", HeaderValue::from_static("2"));

        let got = incoming(http).expect("carried").request.headers;
        assert_eq!(got.authorization(), Some("Bearer other"));
        assert_eq!(got.content_type(), None);
        assert_eq!(got.if_modified_since(), sent().headers.if_modified_since());
        assert_eq!(got.accept(), None);
        assert!(got.expect_continue());
        assert_eq!(
            got.unlisted(),
            &[
                ("x-trace".to_owned(), serde_json::json!("def")),
                ("x-count".to_owned(), serde_json::json!(3)),
                ("x-request-id".to_owned(), serde_json::json!("req-7")),
            ]
        );
    }

    #[test]
    fn an_http_request_made_otherwise_or_taken_already_carries_no_jsontp_request() {
        assert!(incoming(http::Request::new(())).is_none());
        let http = self::request(Incoming::new(sent(), info()));
        let carried = http.extensions().get::<Carried<Incoming>>().cloned().unwrap();
        assert!(incoming(http).is_some());
        assert!(carried.is_taken());
        assert!(carried.take().is_none());
    }

    fn answered() -> Response {
        Response::from_code(StatusCode::CREATED, "posted").with_headers(
            Headers::new()
                .with_content_type("application/json".parse::<crate::message::MediaType>().unwrap())
                .with_language("en-GB".parse::<crate::message::LanguageTag>().unwrap()),
        )
    }

    #[test]
    fn an_answer_goes_out_as_http_and_comes_back_with_a_layers_listed_headers() {
        let whole = answered().with_body(JsonBody::text("article 12"));
        let sent = whole.clone();
        let content = sent.body.content().as_ptr();
        let mut http = response(sent.into());
        assert_eq!(http.status(), http::StatusCode::CREATED);
        assert_eq!(http.headers()["content-type"], "application/json");
        assert_eq!(http.headers()["language"], "en-GB");
        assert!(http_body::Body::is_end_stream(http.body()));

        http.headers_mut()
            .insert("x-request-id", HeaderValue::from_static("req-7"));
        http.headers_mut()
            .insert("language", HeaderValue::from_static("fr-FR"));
        let (back, streamed) = reply(http).into_parts();
        assert!(streamed.is_none());
        assert_eq!(back.body.content().as_ptr(), content, "moved, not copied");
        // An unlisted name would make a client refuse the answer (D8).
        assert!(back.headers.unlisted().is_empty());
        assert_eq!(
            back.headers
                .language()
                .map(|tag| tag.as_str().to_owned())
                .as_deref(),
            Some("fr-FR")
        );
        assert_eq!(back, whole.with_headers(back.headers.clone()));
    }

    #[test]
    fn a_streamed_answer_stays_a_stream() {
        let http = response(Reply::streamed(answered(), &b"streamed content"[..]));
        let (head, reader) = reply(http).into_parts();
        assert_eq!(head, answered());
        let mut content = String::new();
        reader
            .expect("still streamed")
            .read_to_string(&mut content)
            .unwrap();
        assert_eq!(content, "streamed content");
    }

    fn layer_made(status: http::StatusCode) -> http::Response<Body> {
        let mut made = http::Response::new(Body::default());
        *made.status_mut() = status;
        made
    }

    #[test]
    fn a_layers_timeout_is_504_once_a_handler_had_the_request_and_503_before() {
        for status in [
            http::StatusCode::REQUEST_TIMEOUT,
            http::StatusCode::GATEWAY_TIMEOUT,
        ] {
            let (late, _) = reply(layer_made(status)).into_parts();
            assert_eq!(late.status.code, StatusCode::GATEWAY_TIMEOUT);
            assert!(
                late.status
                    .human_message
                    .contains("may or may not have been applied")
            );
            let (queued, _) = answer(layer_made(status), Reached::Queue).into_parts();
            assert_eq!(queued.status.code, StatusCode::SERVICE_UNAVAILABLE);
            assert!(queued.status.human_message.contains("never did; try again later"));
        }
    }

    #[test]
    fn another_answer_a_layer_made_keeps_its_status_and_says_who_answered() {
        let (refused, _) = reply(layer_made(http::StatusCode::UNAUTHORIZED)).into_parts();
        assert_eq!(refused.status.code, StatusCode::UNAUTHORIZED);
        assert_eq!(
            refused.status.human_message,
            "Unauthorized: answered by a layer in front of the application, which never saw the request"
        );
        let (odd, _) = reply(layer_made(http::StatusCode::CONTINUE)).into_parts();
        assert_eq!(odd.status.code, StatusCode::INTERNAL_SERVER_ERROR);
    }
}
