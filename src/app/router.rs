//! The router: resource patterns, handlers per method, and the answers
//! D11 asks of a server (`404`, `405` with `allowed-methods`, `OPTIONS`).

use std::fmt;
use std::sync::Arc;

use super::RouteHandler;
use super::extract::{Call, States};
use super::handler::{Answer, Shared};
use super::respond::Refusal;
use crate::io_adapters::server::{AccessRecord, Handled, Handler, HeadCheck, Incoming, Reply, RequestInfo};
use crate::message::{Body, Method, Request, Response, StatusCode};

/// The handlers of one resource pattern, by method. Made with [`get`],
/// [`post`], [`put`], [`delete`] or [`on`], and added to with the methods
/// of the same names.
///
/// `OPTIONS` needs no handler: the router answers it from the methods
/// listed here (D11), unless one is given for it.
#[derive(Clone, Default)]
pub struct MethodRoutes {
    handlers: Vec<(Method, Shared)>,
}

impl fmt::Debug for MethodRoutes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.handlers.iter().map(|(m, _)| m))
            .finish()
    }
}

/// `handler` for `GET`.
pub fn get<M, H: RouteHandler<M>>(handler: H) -> MethodRoutes {
    MethodRoutes::default().get(handler)
}

/// `handler` for `POST`.
pub fn post<M, H: RouteHandler<M>>(handler: H) -> MethodRoutes {
    MethodRoutes::default().post(handler)
}

/// `handler` for `PUT`.
pub fn put<M, H: RouteHandler<M>>(handler: H) -> MethodRoutes {
    MethodRoutes::default().put(handler)
}

/// `handler` for `DELETE`.
pub fn delete<M, H: RouteHandler<M>>(handler: H) -> MethodRoutes {
    MethodRoutes::default().delete(handler)
}

/// `handler` for each of `methods`: `on(&[Method::Get, Method::Post], h)`.
pub fn on<M, H: RouteHandler<M>>(methods: &[Method], handler: H) -> MethodRoutes {
    MethodRoutes::default().on(methods, handler)
}

impl MethodRoutes {
    /// Adds `handler` for `GET` (builder style).
    pub fn get<M, H: RouteHandler<M>>(self, handler: H) -> Self {
        self.on(&[Method::Get], handler)
    }

    /// Adds `handler` for `POST` (builder style).
    pub fn post<M, H: RouteHandler<M>>(self, handler: H) -> Self {
        self.on(&[Method::Post], handler)
    }

    /// Adds `handler` for `PUT` (builder style).
    pub fn put<M, H: RouteHandler<M>>(self, handler: H) -> Self {
        self.on(&[Method::Put], handler)
    }

    /// Adds `handler` for `DELETE` (builder style).
    pub fn delete<M, H: RouteHandler<M>>(self, handler: H) -> Self {
        self.on(&[Method::Delete], handler)
    }

    /// Adds `handler` for each of `methods` (builder style); a method
    /// given before gets the new handler.
    pub fn on<M, H: RouteHandler<M>>(mut self, methods: &[Method], handler: H) -> Self {
        let shared = handler.into_shared().0;
        for &method in methods {
            self.handlers.retain(|(m, _)| *m != method);
            self.handlers.push((method, Arc::clone(&shared)));
        }
        self
    }

    fn find(&self, method: Method) -> Option<&Shared> {
        self.handlers.iter().find(|(m, _)| *m == method).map(|(_, h)| h)
    }

    /// The methods served, `OPTIONS` always among them, in the protocol's
    /// order.
    fn allowed(&self) -> Vec<Method> {
        Method::ALL
            .into_iter()
            .filter(|m| *m == Method::Options || self.find(*m).is_some())
            .collect()
    }
}

/// One segment of a resource pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    /// Matches itself.
    Literal(String),
    /// `{name}`: any one non-empty segment.
    Param(String),
    /// `{*name}`: the rest of the path, one segment or more; last only.
    Rest(String),
}

/// A parsed resource pattern such as `/groups/{group}/posts/{id}`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern {
    segments: Vec<Segment>,
}

impl Pattern {
    /// Parses `text`.
    ///
    /// # Panics
    ///
    /// When `text` is not a pattern: not starting with `/`, a `{` or `}`
    /// not making a whole segment `{name}`, an empty or repeated name, or
    /// `{*name}` before the last segment. A wrong pattern is a mistake in
    /// the program, found the first time it runs.
    fn parse(text: &str) -> Pattern {
        let Some(rest) = text.strip_prefix('/') else {
            panic!("route pattern {text:?} must start with `/`");
        };
        let mut segments = Vec::new();
        if !rest.is_empty() {
            for part in rest.split('/') {
                segments.push(Self::segment(text, part));
            }
        }
        let mut names: Vec<&str> = Vec::new();
        for (i, segment) in segments.iter().enumerate() {
            match segment {
                Segment::Literal(_) => {}
                Segment::Param(name) | Segment::Rest(name) => {
                    assert!(
                        !names.contains(&name.as_str()),
                        "route pattern {text:?} names `{name}` twice"
                    );
                    names.push(name);
                }
            }
            if matches!(segment, Segment::Rest(_)) {
                assert!(
                    i + 1 == segments.len(),
                    "route pattern {text:?}: `{{*…}}` must be the last segment"
                );
            }
        }
        Pattern { segments }
    }

    fn segment(text: &str, part: &str) -> Segment {
        let braced = part.strip_prefix('{').and_then(|p| p.strip_suffix('}'));
        let segment = match braced {
            Some(inner) => match inner.strip_prefix('*') {
                Some(name) => Segment::Rest(name.to_owned()),
                None => Segment::Param(inner.to_owned()),
            },
            None => Segment::Literal(part.to_owned()),
        };
        let name_ok = |name: &str| !name.is_empty() && !name.contains(['{', '}', '*']);
        let ok = match &segment {
            Segment::Literal(lit) => !lit.contains(['{', '}']),
            Segment::Param(name) | Segment::Rest(name) => name_ok(name),
        };
        assert!(
            ok,
            "route pattern {text:?}: segment {part:?} is neither literal nor `{{name}}` nor `{{*name}}`"
        );
        segment
    }

    /// This pattern under `prefix`.
    fn under(&self, prefix: &Pattern) -> Pattern {
        let mut segments = prefix.segments.clone();
        segments.extend(self.segments.iter().cloned());
        Pattern { segments }
    }

    /// The parameters, when `path` matches.
    fn matches(&self, path: &str) -> Option<Vec<(String, String)>> {
        let mut rest = path.strip_prefix('/')?;
        let mut params = Vec::new();
        if self.segments.is_empty() {
            return rest.is_empty().then_some(params);
        }
        for (i, segment) in self.segments.iter().enumerate() {
            let last = i + 1 == self.segments.len();
            if let Segment::Rest(name) = segment {
                if rest.is_empty() {
                    return None;
                }
                params.push((name.clone(), rest.to_owned()));
                return Some(params);
            }
            let (part, after) = match rest.split_once('/') {
                Some((part, after)) if !last => (part, after),
                Some(_) => return None,
                None if last => (rest, ""),
                None => return None,
            };
            match segment {
                Segment::Literal(lit) if lit == part => {}
                Segment::Param(name) if !part.is_empty() => params.push((name.clone(), part.to_owned())),
                _ => return None,
            }
            rest = after;
        }
        Some(params)
    }

    /// Whether `path` is this pattern or below it (for a nested
    /// router's fallback).
    fn covers(&self, path: &str) -> bool {
        let mut parts = path.strip_prefix('/').unwrap_or(path).split('/');
        self.segments.iter().all(|segment| match (segment, parts.next()) {
            (Segment::Literal(lit), Some(part)) => lit == part,
            (Segment::Param(_) | Segment::Rest(_), Some(part)) => !part.is_empty(),
            (_, None) => false,
        })
    }

    /// Orders patterns that match the same path: literals before
    /// parameters before the rest, segment by segment.
    fn rank(&self) -> Vec<u8> {
        self.segments
            .iter()
            .map(|s| match s {
                Segment::Literal(_) => 0,
                Segment::Param(_) => 1,
                Segment::Rest(_) => 2,
            })
            .collect()
    }
}

#[derive(Clone)]
struct Route {
    pattern: Pattern,
    methods: MethodRoutes,
}

/// Routes requests to handlers by resource path and method.
///
/// Patterns are literal segments, named segments `{name}` (one segment,
/// not empty) and a last `{*name}` (the rest of the path); where several
/// match, literal segments win over named ones, and those over the rest.
/// The path is matched as the request's [`Resource::path`](crate::message::Resource::path)
/// gives it: percent-decoded and normalised; the query is not part of it.
///
/// For a path that no route matches, the router answers `404` (or calls
/// its [`fallback`](Self::fallback)); for a method a route does not serve,
/// `405` with `allowed-methods` (D11); `OPTIONS` is answered from the
/// routes (`200` and `allowed-methods`, never `404`: a path no route
/// matches allows `OPTIONS` alone, a fallback's included). A capture
/// (`{name}`, `{*name}`) never holds a backslash, which some systems read
/// as a folder separator (D7: a path may not leave the root): such a path
/// is `400`, naming the capture, whatever the method.
///
/// A router is a [`Handler`] for the std and mio servers (an `async`
/// handler is then run to its end on the server's thread, which suits
/// futures that need no runtime), and, with the feature `tower`, a
/// `tower::Service` for the tokio server, where synchronous handlers run on
/// the blocking pool and `async` ones are awaited.
///
/// ```
/// use jsontp_protocol::app::{Keys, Path, Refusal, Router, State, get, post};
/// use jsontp_protocol::io_adapters::server::RequestInfo;
/// use jsontp_protocol::message::{Method, Request, Resource, StatusCode};
/// use serde::Deserialize;
/// use std::sync::{Arc, Mutex};
///
/// #[derive(Deserialize)]
/// struct NewPost { subject: String }
///
/// type Board = Arc<Mutex<Vec<String>>>;
///
/// let router = Router::new()
///     .route("/posts", post(|State(board): State<Board>, Keys(new): Keys<NewPost>| {
///         board.lock().unwrap().push(new.subject);
///         StatusCode::CREATED
///     }))
///     .route("/posts/{id}", get(|State(board): State<Board>, Path(id): Path<usize>| {
///         board.lock().unwrap().get(id).cloned().ok_or(Refusal::not_found("no such post"))
///     }))
///     .with_state(Board::default());
///
/// let peer = RequestInfo::new("127.0.0.1:1".parse().unwrap());
/// let ask = |method, path: &str, keys: serde_json::Value| {
///     let mut request = Request::new(method, path.parse::<Resource>().unwrap());
///     for (key, value) in keys.as_object().unwrap() {
///         request.body = request.body.with_extra(key, value.clone()).unwrap();
///     }
///     router.handle(request, &peer)
/// };
/// let created = ask(Method::Post, "/posts", serde_json::json!({"subject": "hello"}));
/// assert_eq!(created.status.code, StatusCode::CREATED);
/// assert_eq!(ask(Method::Get, "/posts/0", serde_json::json!({})).body.as_text(), Some("hello"));
/// assert_eq!(ask(Method::Get, "/posts/1", serde_json::json!({})).status.code, StatusCode::NOT_FOUND);
///
/// // A key missing: 400, naming it.
/// let refused = ask(Method::Post, "/posts", serde_json::json!({}));
/// assert_eq!(refused.status.code, StatusCode::BAD_REQUEST);
/// assert!(refused.status.human_message.contains("subject"));
///
/// // A method not served: 405 with allowed-methods; OPTIONS lists them.
/// let wrong = ask(Method::Delete, "/posts", serde_json::json!({}));
/// assert_eq!(wrong.status.code, StatusCode::METHOD_NOT_ALLOWED);
/// assert_eq!(wrong.body.extra()["allowed-methods"], serde_json::json!(["POST", "OPTIONS"]));
/// ```
#[derive(Clone)]
pub struct Router {
    /// Shared by the clones a server makes for its connections.
    inner: Arc<Routes>,
}

#[derive(Clone)]
struct Routes {
    routes: Vec<Route>,
    /// Nested routers' fallbacks, by the prefix they serve.
    nested_fallbacks: Vec<(Pattern, Shared)>,
    fallback: Option<Shared>,
    states: Arc<States>,
}

impl Default for Router {
    fn default() -> Self {
        Router::new()
    }
}

impl fmt::Debug for Router {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_map();
        for route in &self.inner.routes {
            list.entry(&route.pattern, &route.methods);
        }
        list.finish()
    }
}

impl Routes {
    fn add(&mut self, pattern: Pattern, methods: MethodRoutes) {
        match self.routes.iter_mut().find(|r| r.pattern == pattern) {
            Some(route) => {
                for (method, handler) in methods.handlers {
                    route.methods.handlers.retain(|(m, _)| *m != method);
                    route.methods.handlers.push((method, handler));
                }
            }
            None => self.routes.push(Route { pattern, methods }),
        }
        // The most specific first, as matching picks the first.
        self.routes.sort_by_key(|route| route.pattern.rank());
    }
}

/// Where a request goes.
// Made and taken apart once per request: boxing would cost more.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Target {
    /// A handler, with the path parameters it matched.
    Handler(Shared, Vec<(String, String)>),
    /// An answer the router gives itself.
    Answer(Response),
}

impl Router {
    /// A router with no routes: it answers `404` to everything but
    /// `OPTIONS`.
    pub fn new() -> Router {
        Router {
            inner: Arc::new(Routes {
                routes: Vec::new(),
                nested_fallbacks: Vec::new(),
                fallback: None,
                states: Arc::default(),
            }),
        }
    }

    /// Serves `methods` on resources that match `pattern` (builder style).
    /// Routing the same pattern again adds to its methods.
    ///
    /// # Panics
    ///
    /// When `pattern` is not a pattern (see [`Router`]): a mistake in the
    /// program, not in a request.
    pub fn route(mut self, pattern: &str, methods: MethodRoutes) -> Router {
        let pattern = Pattern::parse(pattern);
        Arc::make_mut(&mut self.inner).add(pattern, methods);
        self
    }

    /// Serves `router`'s routes under `prefix` (builder style):
    /// `nest("/api", Router::new().route("/posts", …))` serves `/api/posts`.
    /// Its state joins this router's (this router's wins for a type both
    /// hold), and its fallback answers the paths under `prefix` that none
    /// of its routes match.
    ///
    /// # Panics
    ///
    /// When `prefix` is not a pattern, or ends with `{*name}`.
    pub fn nest(mut self, prefix: &str, router: Router) -> Router {
        let prefix = Pattern::parse(prefix);
        let router = Arc::unwrap_or_clone(router.inner);
        let this = Arc::make_mut(&mut self.inner);
        assert!(
            !matches!(prefix.segments.last(), Some(Segment::Rest(_))),
            "a nesting prefix cannot end with `{{*name}}`"
        );
        for route in router.routes {
            this.add(route.pattern.under(&prefix), route.methods);
        }
        for (inner, fallback) in router.nested_fallbacks {
            this.nested_fallbacks.push((inner.under(&prefix), fallback));
        }
        if let Some(fallback) = router.fallback {
            this.nested_fallbacks.push((prefix, fallback));
        }
        // The deepest prefix first.
        this.nested_fallbacks
            .sort_by_key(|(p, _)| std::cmp::Reverse(p.segments.len()));
        Arc::make_mut(&mut this.states).merge(&router.states);
        self
    }

    /// Answers the requests no route matches, whatever their method but
    /// `OPTIONS` (builder style), instead of `404`. `OPTIONS` of such a
    /// path is `200` listing `OPTIONS` alone, as D11 asks.
    pub fn fallback<M, H: RouteHandler<M>>(mut self, handler: H) -> Router {
        Arc::make_mut(&mut self.inner).fallback = Some(handler.into_shared().0);
        self
    }

    /// Shares `state` with every handler (builder style): a handler takes it
    /// as an argument [`State<T>`](super::State). One value per type;
    /// wrap what is not cheap to clone in an `Arc`.
    pub fn with_state<T: Clone + Send + Sync + 'static>(mut self, state: T) -> Router {
        Arc::make_mut(&mut Arc::make_mut(&mut self.inner).states).insert(state);
        self
    }

    /// Decides where a request goes.
    pub(crate) fn target(&self, method: Method, path: &str) -> Target {
        let inner = &*self.inner;
        let found = inner
            .routes
            .iter()
            .find_map(|route| route.pattern.matches(path).map(|params| (route, params)));
        // D7: the path may not leave the root; a capture is what a handler
        // may join to a folder, where a backslash can be a separator
        // (`..\..\x` climbs on Windows). Refused for every method, as the
        // resource itself is.
        if let Some((_, params)) = &found
            && let Some((name, _)) = params.iter().find(|(_, value)| value.contains('\\'))
        {
            return Target::Answer(Response::from_code(
                StatusCode::BAD_REQUEST,
                format!(
                    "the resource's path holds a backslash (\\) in its part `{name}`; some systems \
                     read a backslash as a folder separator, so this server refuses it: write the \
                     path with / only"
                ),
            ));
        }
        match found {
            Some((route, params)) => match (route.methods.find(method), method) {
                (Some(handler), _) => Target::Handler(Arc::clone(handler), params),
                (None, Method::Options) => {
                    Target::Answer(Response::allowed_methods(&route.methods.allowed()))
                }
                (None, method) => {
                    Target::Answer(Response::method_not_allowed(method, &route.methods.allowed()))
                }
            },
            None => {
                let fallback = inner
                    .nested_fallbacks
                    .iter()
                    .find(|(prefix, _)| prefix.covers(path))
                    .map(|(_, f)| f)
                    .or(inner.fallback.as_ref());
                match (fallback, method) {
                    // D11: OPTIONS is 200 with `allowed-methods`, never a
                    // fallback's 404; what no route serves allows OPTIONS
                    // alone.
                    (_, Method::Options) => Target::Answer(Response::allowed_methods(&[Method::Options])),
                    (Some(fallback), _) => Target::Handler(Arc::clone(fallback), Vec::new()),
                    (None, _) => Target::Answer(Response::not_found(format!("nothing is served at {path}"))),
                }
            }
        }
    }

    /// The router's state, shared with every call.
    pub(crate) fn states(&self) -> Arc<States> {
        Arc::clone(&self.inner.states)
    }

    /// Answers `request` from `info`'s peer on this thread, whole: a
    /// streamed reply is read into memory and an `async` handler run to
    /// its end here. For tests and tools; a server calls
    /// [`Handler::respond`].
    pub fn handle(&self, request: Request, info: &RequestInfo) -> Response {
        whole(self.answer(Incoming::new(request, *info)).wait())
    }

    /// Answers `incoming`: a synchronous handler's reply, here; an
    /// `async` handler's future, for the server to await.
    pub fn answer(&self, incoming: Incoming) -> Handled {
        let target = self.target(incoming.request.method, incoming.request.resource.path());
        match target {
            Target::Answer(response) => response.into(),
            Target::Handler(handler, params) => {
                let call = Call::new(incoming, params, self.states());
                match handler.call(call) {
                    Answer::Ready(reply) => Handled::Now(reply),
                    Answer::Later(future) => Handled::Later(future),
                }
            }
        }
    }
}

impl Handler for Router {
    /// Answers with the router: large content reaches the handler as a
    /// stream ([`Content`](super::Content)), and a streamed reply streams.
    /// A synchronous handler runs here; an `async` one is the server's to
    /// await.
    fn respond(&self, incoming: Incoming) -> Handled {
        self.answer(incoming)
    }

    /// Decides from the head what the router answers whatever the
    /// content: `404` and `405` refuse it (the client of a 100-continue
    /// handshake does not send it, D10; streamed content is checked and
    /// dropped, never stored, D19), and `OPTIONS` answered from the routes
    /// does not want it. Content for a handler is wanted: the handler may
    /// read it.
    fn check_head(&self, head: &Request, _info: &RequestInfo) -> HeadCheck {
        match self.target(head.method, head.resource.path()) {
            Target::Answer(response) if response.status.code.is_error() => {
                HeadCheck::Refused(Box::new(response))
            }
            Target::Answer(_) => HeadCheck::Unwanted,
            Target::Handler(..) => HeadCheck::Wanted,
        }
    }

    /// The access record, as a `debug` event of `tracing` (target
    /// `jsontp::access`), the same on every server and behind tower's
    /// layers. For a log of your own, serve a handler (or, on tokio,
    /// hooks) that forwards [`check_head`](Handler::check_head) to the
    /// router and keeps its own `log_exchange`.
    fn log_exchange(&self, record: &AccessRecord<'_>) {
        tracing::debug!(
            target: "jsontp::access",
            peer = %record.peer,
            method = record.method.map_or("-", Method::as_str),
            resource = record.resource,
            status = record.status.as_u16(),
            content_bytes = record.content_bytes,
            bytes_written = record.bytes_written,
            elapsed_us = u64::try_from(record.elapsed.as_micros()).unwrap_or(u64::MAX),
            complete = record.complete,
            "exchange"
        );
    }
}

/// `reply` as a whole response: a streamed content is read into memory.
fn whole(reply: Reply) -> Response {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pattern: &str, path: &str) -> Option<Vec<(String, String)>> {
        Pattern::parse(pattern).matches(path)
    }

    fn pair(name: &str, value: &str) -> (String, String) {
        (name.to_owned(), value.to_owned())
    }

    #[test]
    fn patterns_match_whole_segments() {
        assert_eq!(params("/", "/"), Some(vec![]));
        assert_eq!(params("/", "/a"), None);
        assert_eq!(params("/a", "/a"), Some(vec![]));
        // A trailing slash is another resource.
        assert_eq!(params("/a", "/a/"), None);
        assert_eq!(params("/a/", "/a/"), Some(vec![]));
        assert_eq!(params("/a/{x}", "/a/b"), Some(vec![pair("x", "b")]));
        assert_eq!(params("/a/{x}", "/a/"), None);
        assert_eq!(params("/a/{x}", "/a/b/c"), None);
        assert_eq!(
            params("/g/{group}/p/{id}", "/g/rust/p/7"),
            Some(vec![pair("group", "rust"), pair("id", "7")])
        );
        assert_eq!(params("/f/{*rest}", "/f/a/b/"), Some(vec![pair("rest", "a/b/")]));
        assert_eq!(params("/f/{*rest}", "/f/"), None);
        assert_eq!(params("/f/{*rest}", "/f"), None);
        assert_eq!(params("/{*all}", "/x"), Some(vec![pair("all", "x")]));
    }

    #[test]
    fn the_most_specific_pattern_wins_whatever_the_order_routes_were_added() {
        let router = Router::new()
            .route("/{*rest}", get(|| "rest"))
            .route("/a/{x}", get(|| "param"))
            .route("/a/b", get(|| "literal"));
        let which = |path: &str| match router.target(Method::Get, path) {
            Target::Handler(_, params) => params.len(),
            Target::Answer(response) => panic!("{response:?}"),
        };
        assert_eq!(which("/a/b"), 0);
        assert_eq!(which("/a/c"), 1);
        assert_eq!(which("/z"), 1);
    }

    #[test]
    fn a_nested_fallback_answers_only_beneath_its_prefix() {
        let router = Router::new().nest(
            "/api",
            Router::new().route("/x", get(|| "x")).fallback(|| "api fallback"),
        );
        let answered = |path: &str| matches!(router.target(Method::Get, path), Target::Handler(..));
        assert!(answered("/api/x"));
        assert!(answered("/api/y/z"));
        assert!(answered("/api"));
        assert!(!answered("/apiary"));
        assert!(!answered("/other"));
    }

    #[test]
    fn routing_a_pattern_again_adds_methods_and_a_method_again_replaces_it() {
        let router = Router::new()
            .route("/a", get(|| "first"))
            .route("/a", post(|| "post").get(|| "second"));
        let Target::Answer(options) = router.target(Method::Options, "/a") else {
            panic!("OPTIONS is answered by the router");
        };
        assert_eq!(
            options.body.extra()["allowed-methods"],
            serde_json::json!(["GET", "POST", "OPTIONS"])
        );
        let peer = RequestInfo::new("127.0.0.1:1".parse().unwrap());
        let request = Request::new(Method::Get, "/a".parse().unwrap());
        assert_eq!(router.handle(request, &peer).body.as_text(), Some("second"));
    }

    #[test]
    fn a_streamed_reply_is_read_whole_for_handle() {
        use crate::io_adapters::server::Reply;
        let router = Router::new().route(
            "/s",
            get(|| {
                let head =
                    Response::ok("streamed").with_body(Body::empty().with_extra("k", 1.into()).unwrap());
                Reply::streamed(head, std::io::Cursor::new(b"abc".to_vec()))
            }),
        );
        let peer = RequestInfo::new("127.0.0.1:1".parse().unwrap());
        let response = router.handle(Request::new(Method::Get, "/s".parse().unwrap()), &peer);
        assert_eq!(response.body.as_text(), Some("abc"));
        assert_eq!(response.body.extra()["k"], 1);
        assert_eq!(response.status.human_message, "streamed");
    }

    #[test]
    #[should_panic(expected = "names `x` twice")]
    fn a_name_given_twice_is_refused() {
        Pattern::parse("/{x}/{x}");
    }

    #[test]
    #[should_panic(expected = "must start with `/`")]
    fn a_pattern_starts_at_the_root() {
        Pattern::parse("a/b");
    }

    #[test]
    #[should_panic(expected = "neither literal")]
    fn braces_make_a_whole_segment() {
        Pattern::parse("/a{x}");
    }
}
