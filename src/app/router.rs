//! The router: resource patterns in a tree, handlers per method, and the
//! answers D11 asks of a server (`404`, `405` with `allowed-methods`,
//! `OPTIONS`).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::RouteHandler;
use super::extract::{Call, Parts};
use super::handler::{Answer, Shared, give};
use super::respond::whole;
use crate::io_adapters::server::{AccessRecord, Handled, Handler, HeadCheck, Incoming, RequestInfo};
use crate::message::{Method, Request, Response, StatusCode};

/// The handlers of one resource pattern, by method, for a router with
/// state `S`. Made with [`get`], [`post`], [`put`], [`delete`] or [`on`],
/// and added to with the methods of the same names.
///
/// `OPTIONS` needs no handler: the router answers it from the methods
/// listed here (D11), unless one is given for it.
pub struct MethodRoutes<S = ()> {
    handlers: Vec<(Method, Shared<S>)>,
}

impl<S> Clone for MethodRoutes<S> {
    fn clone(&self) -> Self {
        MethodRoutes {
            handlers: self.handlers.clone(),
        }
    }
}

impl<S> Default for MethodRoutes<S> {
    fn default() -> Self {
        MethodRoutes { handlers: Vec::new() }
    }
}

impl<S> fmt::Debug for MethodRoutes<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.handlers.iter().map(|(m, _)| m))
            .finish()
    }
}

/// `handler` for `GET`.
pub fn get<M, S, H: RouteHandler<M, S>>(handler: H) -> MethodRoutes<S> {
    MethodRoutes::default().get(handler)
}

/// `handler` for `POST`.
pub fn post<M, S, H: RouteHandler<M, S>>(handler: H) -> MethodRoutes<S> {
    MethodRoutes::default().post(handler)
}

/// `handler` for `PUT`.
pub fn put<M, S, H: RouteHandler<M, S>>(handler: H) -> MethodRoutes<S> {
    MethodRoutes::default().put(handler)
}

/// `handler` for `DELETE`.
pub fn delete<M, S, H: RouteHandler<M, S>>(handler: H) -> MethodRoutes<S> {
    MethodRoutes::default().delete(handler)
}

/// `handler` for each of `methods`: `on(&[Method::Get, Method::Post], h)`.
pub fn on<M, S, H: RouteHandler<M, S>>(methods: &[Method], handler: H) -> MethodRoutes<S> {
    MethodRoutes::default().on(methods, handler)
}

impl<S> MethodRoutes<S> {
    /// Adds `handler` for `GET` (builder style).
    pub fn get<M, H: RouteHandler<M, S>>(self, handler: H) -> Self {
        self.on(&[Method::Get], handler)
    }

    /// Adds `handler` for `POST` (builder style).
    pub fn post<M, H: RouteHandler<M, S>>(self, handler: H) -> Self {
        self.on(&[Method::Post], handler)
    }

    /// Adds `handler` for `PUT` (builder style).
    pub fn put<M, H: RouteHandler<M, S>>(self, handler: H) -> Self {
        self.on(&[Method::Put], handler)
    }

    /// Adds `handler` for `DELETE` (builder style).
    pub fn delete<M, H: RouteHandler<M, S>>(self, handler: H) -> Self {
        self.on(&[Method::Delete], handler)
    }

    /// Adds `handler` for each of `methods` (builder style); a method
    /// given before gets the new handler.
    pub fn on<M, H: RouteHandler<M, S>>(self, methods: &[Method], handler: H) -> Self {
        self.add(methods, handler.into_shared().0)
    }

    fn add(mut self, methods: &[Method], shared: Shared<S>) -> Self {
        for &method in methods {
            self.handlers.retain(|(m, _)| *m != method);
            self.handlers.push((method, Arc::clone(&shared)));
        }
        self
    }

    /// `other`'s methods added to these, `other`'s winning where both
    /// serve one.
    fn merge(&mut self, other: MethodRoutes<S>) {
        for (method, handler) in other.handlers {
            self.handlers.retain(|(m, _)| *m != method);
            self.handlers.push((method, handler));
        }
    }

    fn find(&self, method: Method) -> Option<&Shared<S>> {
        self.handlers.iter().find(|(m, _)| *m == method).map(|(_, h)| h)
    }

    /// Where `method` goes among these, with the path's `params`: its
    /// handler, else `OPTIONS` listing the methods or `405` (D11).
    fn target(&self, method: Method, params: Vec<(String, String)>) -> Target<S> {
        match (self.find(method), method) {
            (Some(handler), _) => Target::Handler(Arc::clone(handler), params),
            (None, Method::Options) => Target::Answer(Response::allowed_methods(&self.allowed())),
            (None, method) => Target::Answer(Response::method_not_allowed(method, &self.allowed())),
        }
    }

    /// The methods served, `OPTIONS` always among them, in the protocol's
    /// order.
    fn allowed(&self) -> Vec<Method> {
        Method::ALL
            .into_iter()
            .filter(|m| *m == Method::Options || self.find(*m).is_some())
            .collect()
    }

    fn with_state<S2>(self, state: &S) -> MethodRoutes<S2>
    where
        S: Clone + Send + Sync + 'static,
    {
        MethodRoutes {
            handlers: self
                .handlers
                .into_iter()
                .map(|(method, handler)| (method, give(handler, state.clone())))
                .collect(),
        }
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
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.segments.is_empty() {
            return f.write_str("/");
        }
        for segment in &self.segments {
            match segment {
                Segment::Literal(lit) => write!(f, "/{lit}")?,
                Segment::Param(name) => write!(f, "/{{{name}}}")?,
                Segment::Rest(name) => write!(f, "/{{*{name}}}")?,
            }
        }
        Ok(())
    }
}

/// The routes whose pattern ends at a node of the tree.
struct Endpoint<S> {
    pattern: Pattern,
    methods: MethodRoutes<S>,
}

impl<S> Clone for Endpoint<S> {
    fn clone(&self) -> Self {
        Endpoint {
            pattern: self.pattern.clone(),
            methods: self.methods.clone(),
        }
    }
}

/// A `{name}` or `{*name}` child of a node: its name, and the first pattern
/// that made it (named when another pattern conflicts with it).
struct Capture<T> {
    name: String,
    first: Pattern,
    then: T,
}

impl<T: Clone> Clone for Capture<T> {
    fn clone(&self) -> Self {
        Capture {
            name: self.name.clone(),
            first: self.first.clone(),
            then: self.then.clone(),
        }
    }
}

/// One segment position of the routes: what ends here, then the children
/// by precedence (D11's routing is the most specific pattern: a literal
/// segment before `{name}`, `{name}` before `{*name}`).
struct Node<S> {
    endpoint: Option<Endpoint<S>>,
    literals: BTreeMap<String, Node<S>>,
    param: Option<Box<Capture<Node<S>>>>,
    rest: Option<Capture<Endpoint<S>>>,
}

impl<S> Default for Node<S> {
    fn default() -> Self {
        Node {
            endpoint: None,
            literals: BTreeMap::new(),
            param: None,
            rest: None,
        }
    }
}

impl<S> Clone for Node<S> {
    fn clone(&self) -> Self {
        Node {
            endpoint: self.endpoint.clone(),
            literals: self.literals.clone(),
            param: self.param.clone(),
            rest: self.rest.clone(),
        }
    }
}

/// Two patterns that cannot both be routes.
fn conflict(first: &Pattern, second: &Pattern, why: &str) -> ! {
    panic!("route patterns `{first}` and `{second}` conflict: {why}; use the same name in both")
}

impl<S> Node<S> {
    /// Adds `methods` at `pattern`; its `segments` are what is left of it
    /// below this node. The same pattern again adds to its methods.
    fn insert(&mut self, pattern: Pattern, segments: &[Segment], methods: MethodRoutes<S>) {
        let Some((segment, below)) = segments.split_first() else {
            match &mut self.endpoint {
                Some(endpoint) => endpoint.methods.merge(methods),
                None => self.endpoint = Some(Endpoint { pattern, methods }),
            }
            return;
        };
        match segment {
            Segment::Literal(lit) => self
                .literals
                .entry(lit.clone())
                .or_default()
                .insert(pattern, below, methods),
            Segment::Param(name) => {
                let capture = self.param.get_or_insert_with(|| {
                    Box::new(Capture {
                        name: name.clone(),
                        first: pattern.clone(),
                        then: Node::default(),
                    })
                });
                if capture.name != *name {
                    conflict(
                        &capture.first,
                        &pattern,
                        &format!(
                            "they name the same segment `{{{}}}` and `{{{name}}}`",
                            capture.name
                        ),
                    );
                }
                capture.then.insert(pattern, below, methods);
            }
            Segment::Rest(name) => match &mut self.rest {
                Some(capture) if capture.name == *name => capture.then.methods.merge(methods),
                Some(capture) => conflict(
                    &capture.first,
                    &pattern,
                    &format!(
                        "they name the rest of the path `{{*{}}}` and `{{*{name}}}`",
                        capture.name
                    ),
                ),
                None => {
                    self.rest = Some(Capture {
                        name: name.clone(),
                        first: pattern.clone(),
                        then: Endpoint { pattern, methods },
                    })
                }
            },
        }
    }

    /// The routes matching `rest` (what is left of the path below this
    /// node: `None` once every segment is used), the captures pushed onto
    /// `params`. Tries the literal child, then `{name}`, then `{*name}`,
    /// going back when a branch matches nothing further down.
    fn find<'n>(
        &'n self,
        rest: Option<&str>,
        params: &mut Vec<(String, String)>,
    ) -> Option<&'n MethodRoutes<S>> {
        let Some(text) = rest else {
            return self.endpoint.as_ref().map(|e| &e.methods);
        };
        // Only a node with children by segment splits the path.
        if !self.literals.is_empty() || self.param.is_some() {
            let (part, after) = match text.split_once('/') {
                Some((part, after)) => (part, Some(after)),
                None => (text, None),
            };
            if let Some(child) = self.literals.get(part)
                && let Some(found) = child.find(after, params)
            {
                return Some(found);
            }
            if let Some(capture) = &self.param
                && !part.is_empty()
            {
                params.push((capture.name.clone(), part.to_owned()));
                if let Some(found) = capture.then.find(after, params) {
                    return Some(found);
                }
                params.pop();
            }
        }
        match &self.rest {
            Some(capture) if !text.is_empty() => {
                params.push((capture.name.clone(), text.to_owned()));
                Some(&capture.then.methods)
            }
            _ => None,
        }
    }

    /// Calls `f` with every route below this node.
    fn each(&self, f: &mut impl FnMut(&Endpoint<S>)) {
        self.endpoint.iter().for_each(&mut *f);
        for child in self.literals.values() {
            child.each(f);
        }
        if let Some(capture) = &self.param {
            capture.then.each(f);
        }
        if let Some(capture) = &self.rest {
            f(&capture.then);
        }
    }

    /// Every route below this node.
    fn into_routes(self, out: &mut Vec<Endpoint<S>>) {
        out.extend(self.endpoint);
        for (_, child) in self.literals {
            child.into_routes(out);
        }
        if let Some(capture) = self.param {
            capture.then.into_routes(out);
        }
        out.extend(self.rest.map(|capture| capture.then));
    }
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
/// its [`fallback`](Self::fallback), or serves it as a route with
/// [`fallback_methods`](Self::fallback_methods)); for a method a route does not serve,
/// `405` with `allowed-methods` (D11); `OPTIONS` is answered from the
/// routes (`200` and `allowed-methods`, never `404`: a path no route
/// matches allows `OPTIONS` alone, a fallback's included). A capture
/// (`{name}`, `{*name}`) never holds a backslash, which some systems read
/// as a folder separator (D7: a path may not leave the root): such a path
/// is `400`, naming the capture, whatever the method.
///
/// `S` is the state its handlers take ([`State<T>`](super::State) where
/// `T: FromRef<S>`, [`FromRequestParts<S>`](super::FromRequestParts)):
/// routes are added to a `Router<S>`, and [`with_state`](Self::with_state)
/// gives it that state, making a `Router<()>`, which needs none. Only a
/// `Router<()>` is served: a handler asking for a state the router is not
/// given does not compile.
///
/// Patterns that would capture the same segment under two names
/// (`/a/{x}` and `/a/{y}/b`), or the rest of a path under two names, are
/// refused when the router is built: [`route`](Self::route) and
/// [`nest`](Self::nest) panic naming both.
///
/// A router is a [`Handler`] for the std, mio and io_uring servers (an
/// `async` handler's future is awaited by the worker on mio and io_uring,
/// run to its end on the connection's thread on std; either way it must
/// need no runtime of its own), and, with the feature `tower`, a
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
/// let router: Router = Router::new()
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
pub struct Router<S = ()> {
    /// Shared by the clones a server makes for its connections.
    inner: Arc<Routes<S>>,
}

impl<S> Clone for Router<S> {
    fn clone(&self) -> Self {
        Router {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<S> fmt::Debug for Router<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        self.inner.root.each(&mut |e| {
            map.entry(&format_args!("{}", e.pattern), &e.methods);
        });
        map.finish()
    }
}

struct Routes<S> {
    root: Node<S>,
    /// Nested routers' fallbacks, by the prefix they serve, the deepest
    /// first.
    nested_fallbacks: Vec<(Pattern, Fallback<S>)>,
    fallback: Option<Fallback<S>>,
}

/// What answers the paths no route matches.
enum Fallback<S> {
    /// One handler for every method; `OPTIONS` lists `OPTIONS` alone
    /// (D11) ([`Router::fallback`]).
    Any(Shared<S>),
    /// Handlers by method, served as a route's are
    /// ([`Router::fallback_methods`]).
    Methods(MethodRoutes<S>),
}

impl<S> Clone for Fallback<S> {
    fn clone(&self) -> Self {
        match self {
            Fallback::Any(handler) => Fallback::Any(Arc::clone(handler)),
            Fallback::Methods(methods) => Fallback::Methods(methods.clone()),
        }
    }
}

impl<S> Fallback<S> {
    fn with_state<S2>(self, state: &S) -> Fallback<S2>
    where
        S: Clone + Send + Sync + 'static,
    {
        match self {
            Fallback::Any(handler) => Fallback::Any(give(handler, state.clone())),
            Fallback::Methods(methods) => Fallback::Methods(methods.with_state(state)),
        }
    }
}

impl<S> Clone for Routes<S> {
    fn clone(&self) -> Self {
        Routes {
            root: self.root.clone(),
            nested_fallbacks: self.nested_fallbacks.clone(),
            fallback: self.fallback.clone(),
        }
    }
}

impl<S> Routes<S> {
    fn add(&mut self, pattern: Pattern, methods: MethodRoutes<S>) {
        let segments = pattern.segments.clone();
        self.root.insert(pattern, &segments, methods);
    }
}

/// Where a request goes.
// Made and taken apart once per request: boxing would cost more.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Target<S> {
    /// A handler, with the path parameters it matched.
    Handler(Shared<S>, Vec<(String, String)>),
    /// An answer the router gives itself.
    Answer(Response),
}

impl<S> Default for Router<S> {
    fn default() -> Self {
        Router {
            inner: Arc::new(Routes {
                root: Node::default(),
                nested_fallbacks: Vec::new(),
                fallback: None,
            }),
        }
    }
}

impl<S: Clone + Send + Sync + 'static> Router<S> {
    /// A router with no routes: it answers `404` to everything but
    /// `OPTIONS`. Its state type `S` is inferred from the handlers' and
    /// from [`with_state`](Self::with_state); one that is served needs
    /// none (`Router<()>`).
    pub fn new() -> Router<S> {
        Router::default()
    }

    /// Serves `methods` on resources that match `pattern` (builder style).
    /// Routing the same pattern again adds to its methods.
    ///
    /// # Panics
    ///
    /// When `pattern` is not a pattern (see [`Router`]), or conflicts with
    /// one routed before (`/a/{x}` and `/a/{y}`): a mistake in the
    /// program, not in a request.
    pub fn route(mut self, pattern: &str, methods: MethodRoutes<S>) -> Router<S> {
        let pattern = Pattern::parse(pattern);
        Arc::make_mut(&mut self.inner).add(pattern, methods);
        self
    }

    /// Serves `router`'s routes under `prefix` (builder style):
    /// `nest("/api", Router::new().route("/posts", …))` serves `/api/posts`.
    /// Both take the same state; its fallback answers the paths under
    /// `prefix` that none of its routes match.
    ///
    /// # Panics
    ///
    /// When `prefix` is not a pattern, ends with `{*name}`, or one of
    /// `router`'s patterns under it conflicts with a route of this one.
    pub fn nest(mut self, prefix: &str, router: Router<S>) -> Router<S> {
        let prefix = Pattern::parse(prefix);
        assert!(
            !matches!(prefix.segments.last(), Some(Segment::Rest(_))),
            "a nesting prefix cannot end with `{{*name}}`"
        );
        let router = Arc::unwrap_or_clone(router.inner);
        let this = Arc::make_mut(&mut self.inner);
        let mut routes = Vec::new();
        router.root.into_routes(&mut routes);
        for endpoint in routes {
            this.add(endpoint.pattern.under(&prefix), endpoint.methods);
        }
        for (inner, fallback) in router.nested_fallbacks {
            this.nested_fallbacks.push((inner.under(&prefix), fallback));
        }
        if let Some(fallback) = router.fallback {
            this.nested_fallbacks.push((prefix, fallback));
        }
        this.nested_fallbacks
            .sort_by_key(|(p, _)| std::cmp::Reverse(p.segments.len()));
        self
    }

    /// Answers the requests no route matches, whatever their method but
    /// `OPTIONS` (builder style), instead of `404`. `OPTIONS` of such a
    /// path is `200` listing `OPTIONS` alone, as D11 asks.
    pub fn fallback<M, H: RouteHandler<M, S>>(mut self, handler: H) -> Router<S> {
        Arc::make_mut(&mut self.inner).fallback = Some(Fallback::Any(handler.into_shared().0));
        self
    }

    /// Serves `methods` on every path no route matches (builder style), as
    /// a route's are: each method's handler, `OPTIONS` from its handler if
    /// it has one (else `200` listing the methods, D11), `405` for a method
    /// without one. It replaces a [`fallback`](Self::fallback).
    ///
    /// For an application that answers every path itself, each method
    /// with its own extractors (a file server, whose `PUT` alone takes the
    /// content): unlike a route `/{*path}`, it captures nothing, so no
    /// path parameter is made per request (nor checked for a backslash:
    /// such an application checks the path itself, D7).
    pub fn fallback_methods(mut self, methods: MethodRoutes<S>) -> Router<S> {
        Arc::make_mut(&mut self.inner).fallback = Some(Fallback::Methods(methods));
        self
    }

    /// Gives every handler `state` (builder style): a handler takes it, or
    /// a part of it ([`FromRef`](super::FromRef)), as an argument
    /// [`State<T>`](super::State). The router returned needs no state of
    /// its own (it is usually a `Router<()>`, which can be served); wrap
    /// what is not cheap to clone in an `Arc`, as each route keeps a clone.
    pub fn with_state<S2>(self, state: S) -> Router<S2> {
        let routes = Arc::unwrap_or_clone(self.inner);
        let mut endpoints = Vec::new();
        routes.root.into_routes(&mut endpoints);
        let mut given = Routes {
            root: Node::default(),
            nested_fallbacks: routes
                .nested_fallbacks
                .into_iter()
                .map(|(prefix, fallback)| (prefix, fallback.with_state(&state)))
                .collect(),
            fallback: routes.fallback.map(|fallback| fallback.with_state(&state)),
        };
        for endpoint in endpoints {
            given.add(endpoint.pattern, endpoint.methods.with_state(&state));
        }
        Router {
            inner: Arc::new(given),
        }
    }

    /// Decides where a request goes.
    pub(crate) fn target(&self, method: Method, path: &str) -> Target<S> {
        let inner = &*self.inner;
        let mut params = Vec::new();
        let found = path.strip_prefix('/').and_then(|rest| {
            let rest = (!rest.is_empty()).then_some(rest);
            inner.root.find(rest, &mut params)
        });
        // D7: the path may not leave the root; a capture is what a handler
        // may join to a folder, where a backslash can be a separator
        // (`..\..\x` climbs on Windows). Refused for every method, as the
        // resource itself is.
        if found.is_some()
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
            Some(methods) => methods.target(method, params),
            None => {
                let fallback = inner
                    .nested_fallbacks
                    .iter()
                    .find(|(prefix, _)| prefix.covers(path))
                    .map(|(_, f)| f)
                    .or(inner.fallback.as_ref());
                match (fallback, method) {
                    (Some(Fallback::Methods(methods)), _) => methods.target(method, params),
                    // D11: OPTIONS is 200 with `allowed-methods`, never a
                    // fallback's 404; what no route serves allows OPTIONS
                    // alone.
                    (_, Method::Options) => Target::Answer(Response::allowed_methods(&[Method::Options])),
                    (Some(Fallback::Any(fallback)), _) => Target::Handler(Arc::clone(fallback), Vec::new()),
                    (None, _) => Target::Answer(Response::not_found(format!("nothing is served at {path}"))),
                }
            }
        }
    }
}

impl Router<()> {
    /// Decides from a request's head (all but its content) what becomes of
    /// the content: `404` and `405` refuse it, and so does any extractor
    /// of the route's handler that refuses the head (an `authorization`
    /// missing, a path parameter of the wrong type):
    /// the client of a 100-continue handshake then never sends the content
    /// (D10), and streamed content is checked and dropped, never stored
    /// (D19). Otherwise the content is wanted when the handler's last
    /// argument reads it ([`FromRequest::TAKES_CONTENT`](super::FromRequest::TAKES_CONTENT)),
    /// unwanted when it does not, as for `OPTIONS` answered from the
    /// routes.
    ///
    /// The extractors run again when the handler is called: those of
    /// parts must be free of side effects.
    pub fn check_head_of(&self, head: &Request, info: &RequestInfo) -> HeadCheck {
        match self.target(head.method, head.resource.path()) {
            Target::Answer(response) if response.status.code.is_error() => {
                HeadCheck::Refused(Box::new(response))
            }
            Target::Answer(_) => HeadCheck::Unwanted,
            Target::Handler(handler, params) => {
                handler.check_head(&Parts::new(head, info.peer, &params), &())
            }
        }
    }

    /// Answers `request` from `info`'s peer on this thread, whole: a
    /// streamed reply is read into memory and an `async` handler run to
    /// its end here. For tests and tools; a server calls
    /// [`Handler::respond`].
    pub fn handle(&self, request: Request, info: &RequestInfo) -> Response {
        whole(self.answer(Incoming::new(request, *info)).wait())
    }

    /// Answers `incoming`: a synchronous handler's reply, here; an
    /// `async` handler's future, for the server to await. The request is
    /// moved to the handler, never copied.
    pub fn answer(&self, incoming: Incoming) -> Handled {
        let target = self.target(incoming.request.method, incoming.request.resource.path());
        match target {
            Target::Answer(response) => response.into(),
            Target::Handler(handler, params) => match handler.call(Call::new(incoming, params), &()) {
                Answer::Ready(reply) => Handled::Now(reply),
                Answer::Later(future) => Handled::Later(future),
            },
        }
    }
}

// A thin forwarding to the inherent entry points.
impl Handler for Router {
    /// [`Router::answer`]: large content reaches the handler as a stream
    /// ([`Content`](super::Content)), and a streamed reply streams. A
    /// synchronous handler runs here; an `async` one is the server's to
    /// await.
    fn respond(&self, incoming: Incoming) -> Handled {
        self.answer(incoming)
    }

    /// [`Router::check_head_of`].
    fn check_head(&self, head: &Request, info: &RequestInfo) -> HeadCheck {
        self.check_head_of(head, info)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Body;

    /// The captures of `path` in a tree of `pattern` alone.
    fn params(pattern: &str, path: &str) -> Option<Vec<(String, String)>> {
        let router: Router = Router::new().route(pattern, get(|| "found"));
        match router.target(Method::Get, path) {
            Target::Handler(_, params) => Some(params),
            Target::Answer(_) => None,
        }
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
        let router: Router = Router::new()
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
        let router: Router = Router::new().nest(
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
        let router: Router = Router::new()
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
    fn a_streamed_reply_is_read_whole() {
        use crate::io_adapters::server::Reply;
        let router: Router = Router::new().route(
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
    fn a_fallback_by_method_is_served_as_a_route_without_captures() {
        use super::super::Content;
        let router: Router = Router::new().route("/a", get(|| "route")).fallback_methods(
            get(|| "fallback get")
                .put(|content: Content| format!("stored {}", content.len()))
                .on(&[Method::Options], || "fallback options"),
        );
        let peer = RequestInfo::new("127.0.0.1:1".parse().unwrap());
        let ask = |method, path: &str| {
            let request = Request::new(method, path.parse().unwrap()).with_body(Body::text("four"));
            whole(router.answer(Incoming::new(request, peer)).wait())
        };
        // A route still wins; every other path reaches the fallback's
        // handler for its method, with no path parameter made.
        assert_eq!(ask(Method::Get, "/a").body.as_text(), Some("route"));
        for path in ["/", "/b", "/b/c/", "/a/b"] {
            assert!(
                matches!(router.target(Method::Get, path), Target::Handler(_, ref p) if p.is_empty()),
                "{path}"
            );
            assert_eq!(
                ask(Method::Get, path).body.as_text(),
                Some("fallback get"),
                "{path}"
            );
            assert_eq!(ask(Method::Put, path).body.as_text(), Some("stored 4"), "{path}");
            // OPTIONS is its handler's, as a route's would be (D11).
            assert_eq!(
                ask(Method::Options, path).body.as_text(),
                Some("fallback options"),
                "{path}"
            );
            // A method it does not serve is 405, listing those it does.
            let refused = ask(Method::Delete, path);
            assert_eq!(refused.status.code, StatusCode::METHOD_NOT_ALLOWED, "{path}");
            assert_eq!(
                refused.body.extra()["allowed-methods"],
                serde_json::json!(["GET", "PUT", "OPTIONS"])
            );
        }
        // Only PUT's handler takes the content (D19).
        let head = |method| Request::new(method, "/b".parse().unwrap());
        assert!(matches!(
            router.check_head_of(&head(Method::Put), &peer),
            HeadCheck::Wanted
        ));
        assert!(matches!(
            router.check_head_of(&head(Method::Get), &peer),
            HeadCheck::Unwanted
        ));
        assert!(matches!(
            router.check_head_of(&head(Method::Delete), &peer),
            HeadCheck::Refused(_)
        ));
        // Without a handler for OPTIONS, it lists the methods.
        let listed: Router = Router::new().fallback_methods(get(|| "x"));
        let Target::Answer(options) = listed.target(Method::Options, "/any") else {
            panic!("OPTIONS is answered by the router");
        };
        assert_eq!(
            options.body.extra()["allowed-methods"],
            serde_json::json!(["GET", "OPTIONS"])
        );
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
