//! Applications on jsontp: a [`Router`] that sends each request to a
//! handler by resource pattern and method, extractors that draw a
//! handler's arguments from the request ([`FromRequestParts`],
//! [`FromRequest`]), and answers made from the handler's result
//! ([`IntoReply`]).
//!
//! A handler is a plain function or closure (it may block: a database, a
//! file) or an `async` one, whose arguments are extractors. Those drawn
//! from the request's head ([`FromRequestParts`]) may be many, in any
//! order; one that consumes the request ([`FromRequest`]: its content, its
//! body keys) must be the last, so the content is taken at most once:
//!
//! | argument | kind | what it is | when it fails |
//! |---|---|---|---|
//! | [`Path<T>`] | parts | the route's `{name}` segments, deserialised | `400` naming the parameter |
//! | [`Query<T>`] | parts | the query's `k=v` pairs, deserialised | `400` naming the key |
//! | [`Authorization`] | parts | the `authorization` header (D14) | `401` |
//! | [`Cookies`](crate::message::Cookies), [`Headers`](crate::message::Headers), [`Method`](crate::message::Method), [`Resource`](crate::message::Resource) | parts | the head's fields (D15) | never |
//! | [`Peer`] | parts | the client's address | never |
//! | [`State<T>`] | parts | the router's state, or the part of it `T` names ([`FromRef`]) | never: a router not given it does not compile |
//! | [`Keys<T>`] | last | the body keys, deserialised | `400` naming the key and the problem |
//! | [`Content`] | last | the content, in memory or spooled (D19), as a stream | never |
//! | [`Text`] | last | the content as UTF-8 text | `400` |
//! | `Vec<u8>` | last | the content's bytes, in memory | `500` if its spooled file cannot be read |
//! | [`Request`](crate::message::Request) | last | the request itself, moved | never |
//! | `Option<E>` | as `E` | `E`, or `None` where it would fail | never |
//!
//! Before a request's content is stored (and before a client waiting for
//! `100 continue` sends it, D10), the router runs the handler's extractors
//! of parts against the head ([`Router::check_head_of`]): one that
//! refuses refuses the request there, and a handler that reads no content
//! (none of [`Content`], [`Text`], `Vec<u8>`, [`Request`](crate::message::Request))
//! has it dropped unstored (D19). Extractors of parts thus run twice for such a request and must
//! be free of side effects.
//!
//! Its result is a [`Response`](crate::message::Response), a
//! [`Reply`](crate::io_adapters::server::Reply) (streamed content), a
//! [`StatusCode`](crate::message::StatusCode) with or without a message,
//! text, [`Keys<T>`] (body keys from a serde value), [`SetCookies`] beside
//! an answer, a [`Refusal`], or a `Result` of these.
//!
//! A handler that is not one does not compile, and the error names the
//! argument or the result at fault (an argument no extractor gives, the
//! content taken before the last argument, a state the router is not
//! given, a result that is no answer).
//!
//! The same router serves on every server as a
//! [`Handler`](crate::io_adapters::server::Handler) (std, mio, tokio: a
//! synchronous handler runs where it may block, an `async` one is awaited
//! on tokio, mio and io_uring, or run to its end on std), and, with the feature
//! `tower`, as a `tower::Service` on the tokio server, where tower's layers (timeouts, concurrency limits, load
//! shedding) wrap it unchanged, and tower-http's http-typed ones (trace,
//! request id, timeouts, authorization) through `app::http::layer`. Only
//! a router that needs no state (`Router<()>`, after
//! [`Router::with_state`]) is served.
//! `docs/writing-an-application.md` walks through a whole application.
//! With the feature `files`, [`files`] holds the rules of a file server
//! (negotiation, conditions, listings), which `jsontp serve` applies.
//!
//! ```
//! use jsontp_protocol::app::{Keys, Router, get};
//! use jsontp_protocol::io_adapters::server::RequestInfo;
//! use jsontp_protocol::message::{Method, Request};
//! use serde::Serialize;
//!
//! #[derive(Serialize)]
//! struct Hello { greeting: &'static str }
//!
//! let router: Router = Router::new().route("/hello", get(|| Keys(Hello { greeting: "hi" })));
//! let request = Request::new(Method::Get, "/hello".parse().unwrap());
//! let response = router.handle(request, &RequestInfo::new("127.0.0.1:1".parse().unwrap()));
//! assert_eq!(response.body.extra()["greeting"], "hi");
//! ```

mod extract;
#[cfg(feature = "files")]
pub mod files;
mod handler;
#[cfg(feature = "tower")]
pub mod http;
mod respond;
mod router;
#[cfg(feature = "tower")]
mod service;

pub use extract::{
    Authorization, Call, Content, FromRef, FromRequest, FromRequestParts, Parts, Path, Peer, Query, State,
    Text, ViaParts, ViaRequest,
};
#[doc(hidden)]
pub use handler::SharedHandler;
pub use handler::{Awaited, Blocking, RouteHandler};
pub use respond::{IntoReply, Keys, Refusal, SetCookies};
pub use router::{MethodRoutes, Router, delete, get, on, post, put};
#[cfg(feature = "tower")]
pub use service::RouterFuture;
