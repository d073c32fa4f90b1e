//! Applications on jsontp: a [`Router`] that sends each request to a
//! handler by resource pattern and method, extractors that draw a
//! handler's arguments from the request ([`Extract`]), and answers made
//! from the handler's result ([`IntoReply`]).
//!
//! A handler is a plain function or closure (it may block: a database, a
//! file) or an `async` one, whose arguments are extractors:
//!
//! | argument | what it is | when it fails |
//! |---|---|---|
//! | [`Path<T>`] | the route's `{name}` segments, deserialised | `400` naming the parameter |
//! | [`Query<T>`] | the query's `k=v` pairs, deserialised | `400` naming the key |
//! | [`Keys<T>`] | the body keys, deserialised | `400` naming the key and the problem |
//! | [`Content`] | the content, in memory or spooled (D19), as a stream | never |
//! | [`Text`] | the content as UTF-8 text | `400` |
//! | [`Authorization`] | the `authorization` header (D14) | `401` |
//! | [`Cookies`](crate::message::Cookies), [`Headers`](crate::message::Headers) | typed headers (D15) | never |
//! | [`Peer`] | the client's address | never |
//! | [`State<T>`] | a value shared by the router ([`Router::with_state`]) | `500` if never given |
//! | `Option<E>` | `E`, or `None` where it would fail | never |
//!
//! Its result is a [`Response`](crate::message::Response), a
//! [`Reply`](crate::io_adapters::server::Reply) (streamed content), a
//! [`StatusCode`](crate::message::StatusCode) with or without a message,
//! text, [`Keys<T>`] (body keys from a serde value), [`SetCookies`] beside
//! an answer, a [`Refusal`], or a `Result` of these.
//!
//! The same router serves on every server: as a
//! [`Handler`](crate::io_adapters::server::Handler) on the std and mio
//! servers, and, with the feature `tower`, as a `tower::Service` on the
//! tokio server, where tower's layers (timeouts, concurrency limits, load
//! shedding) wrap it unchanged. `docs/writing-an-application.md` walks
//! through a whole application.
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
//! let router = Router::new().route("/hello", get(|| Keys(Hello { greeting: "hi" })));
//! let request = Request::new(Method::Get, "/hello".parse().unwrap());
//! let response = router.handle(request, &RequestInfo::new("127.0.0.1:1".parse().unwrap()));
//! assert_eq!(response.body.extra()["greeting"], "hi");
//! ```

mod extract;
mod handler;
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
pub use handler::{Awaited, Blocking, RouteHandler, check_handler};
pub use respond::{IntoReply, Keys, Refusal, SetCookies};
pub use router::{MethodRoutes, Router, delete, get, on, post, put};
#[cfg(feature = "tower")]
pub use service::RouterFuture;
