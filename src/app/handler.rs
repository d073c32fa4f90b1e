//! Functions as route handlers: any function or closure whose arguments
//! are extractors and whose result is an answer, synchronous or `async`.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use super::extract::{Call, FromRequest, FromRequestParts, Parts};
use super::respond::IntoReply;
use crate::io_adapters::server::{HeadCheck, Reply};

/// A future of a reply, as an `async` handler gives it.
pub(crate) type ReplyFuture = Pin<Box<dyn Future<Output = Reply> + Send>>;

/// What calling a route's handler gave: the reply, or a future of it.
// Made and taken apart once per request: boxing would cost more.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Answer {
    Ready(Reply),
    Later(ReplyFuture),
}

/// How a handler runs.
#[cfg_attr(not(feature = "tower"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runs {
    /// A plain function: it may block (a database, a file), so an async
    /// server runs it on its blocking pool.
    Blocking,
    /// An `async` function: its extraction is quick, its future is awaited.
    Awaited,
}

/// A route's handler for a router with state `S`, its argument types
/// forgotten.
pub(crate) trait Erased<S>: Send + Sync + 'static {
    /// Draws the arguments from `call` and calls the handler.
    fn call(&self, call: Call, state: &S) -> Answer;
    /// Runs the extractors that need no content against a request's head:
    /// refused, or whether the handler reads the content.
    fn check_head(&self, parts: &Parts<'_>, state: &S) -> HeadCheck;
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    fn runs(&self) -> Runs;
}

pub(crate) type Shared<S> = Arc<dyn Erased<S>>;

/// A handler of a router with state `S` given that state: a handler of a
/// router with any other (it ignores that one).
struct Given<S> {
    handler: Shared<S>,
    state: S,
}

impl<S: Send + Sync + 'static, S2> Erased<S2> for Given<S> {
    fn call(&self, call: Call, _: &S2) -> Answer {
        self.handler.call(call, &self.state)
    }

    fn check_head(&self, parts: &Parts<'_>, _: &S2) -> HeadCheck {
        self.handler.check_head(parts, &self.state)
    }

    fn runs(&self) -> Runs {
        self.handler.runs()
    }
}

/// `handler` with its state given, for a router of state `S2`.
pub(crate) fn give<S: Send + Sync + 'static, S2>(handler: Shared<S>, state: S) -> Shared<S2> {
    Arc::new(Given { handler, state })
}

/// Marks a synchronous handler's implementation of [`RouteHandler`].
#[derive(Debug)]
pub enum Blocking {}

/// Marks an `async` handler's implementation of [`RouteHandler`].
#[derive(Debug)]
pub enum Awaited {}

/// A function the router can call for a route of a router with state `S`:
/// up to eight arguments, each drawn from the request's head
/// ([`FromRequestParts`]) but the last, which may consume the request
/// ([`FromRequest`]), returning anything that converts into a reply
/// ([`IntoReply`]) — or, for an `async fn` or a closure returning a
/// future, a future of such a thing. `M` tells the kinds apart; it is
/// inferred, never written.
///
/// A synchronous handler may block (it runs on a blocking pool under an
/// async server); an `async` one must not.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a handler of a router with state `{S}`",
    label = "not a handler",
    note = "a handler is a `Fn` (or `async fn`), `Send + Sync + 'static`, of at most eight \
            arguments, returning a type that implements `IntoReply` (or a `Send` future of one)",
    note = "every argument but the last implements `FromRequestParts<{S}>`; the last may \
            instead consume the request (`FromRequest<{S}>`: Keys, Text, Content, Request), so \
            only one argument may take the content",
    note = "`State<T>` needs the router's state to give a `T` (`T: FromRef<{S}>`): give it \
            with `Router::with_state` after the routes that take it",
    note = "to see which argument or result is at fault, call \
            `jsontp_protocol::app::check_handler::<{S}, _, _>(the_handler)`"
)]
pub trait RouteHandler<M, S>: Send + Sync + 'static {
    #[doc(hidden)]
    fn into_shared(self) -> SharedHandler<S>;
}

/// A handler ready for the router (opaque).
#[doc(hidden)]
pub struct SharedHandler<S>(pub(crate) Shared<S>);

struct Sync_<F, M> {
    f: F,
    _args: PhantomData<fn() -> M>,
}

struct Async_<F, M> {
    f: F,
    _args: PhantomData<fn() -> M>,
}

/// Draws `$ty` from `$parts`, or returns the refusal from the enclosing
/// function as `$wrap(reply)`.
macro_rules! draw {
    ($ty:ident, $parts:expr, $state:expr, $refused:expr) => {
        match <$ty as FromRequestParts<S>>::from_request_parts($parts, $state) {
            Ok(value) => value,
            Err(rejection) => return $refused(rejection.into_reply()),
        }
    };
}

fn refused_head(reply: Reply) -> HeadCheck {
    HeadCheck::Refused(Box::new(super::router::whole(reply)))
}

fn wanted(takes_content: bool) -> HeadCheck {
    if takes_content {
        HeadCheck::Wanted
    } else {
        HeadCheck::Unwanted
    }
}

macro_rules! handlers {
    ($($ty:ident),*; $last:ident) => {
        impl<F, R, S, M, $($ty,)* $last> RouteHandler<(Blocking, M, $($ty,)* $last,), S> for F
        where
            F: Fn($($ty,)* $last) -> R + Send + Sync + 'static,
            R: IntoReply + 'static,
            S: Send + Sync + 'static,
            M: 'static,
            $($ty: FromRequestParts<S> + 'static,)*
            $last: FromRequest<S, M> + 'static,
        {
            fn into_shared(self) -> SharedHandler<S> {
                SharedHandler(Arc::new(Sync_::<F, (M, $($ty,)* $last,)> { f: self, _args: PhantomData }))
            }
        }

        impl<F, R, S, M, $($ty,)* $last> Erased<S> for Sync_<F, (M, $($ty,)* $last,)>
        where
            F: Fn($($ty,)* $last) -> R + Send + Sync + 'static,
            R: IntoReply + 'static,
            S: Send + Sync + 'static,
            M: 'static,
            $($ty: FromRequestParts<S> + 'static,)*
            $last: FromRequest<S, M> + 'static,
        {
            #[allow(non_snake_case)]
            fn call(&self, call: Call, state: &S) -> Answer {
                $(let $ty = draw!($ty, &call.parts(), state, Answer::Ready);)*
                let $last = match <$last as FromRequest<S, M>>::from_request(call, state) {
                    Ok(value) => value,
                    Err(rejection) => return Answer::Ready(rejection.into_reply()),
                };
                Answer::Ready((self.f)($($ty,)* $last).into_reply())
            }

            fn check_head(&self, parts: &Parts<'_>, state: &S) -> HeadCheck {
                $(draw!($ty, parts, state, refused_head);)*
                match <$last as FromRequest<S, M>>::check_head(parts, state) {
                    Ok(()) => wanted(<$last as FromRequest<S, M>>::TAKES_CONTENT),
                    Err(rejection) => refused_head(rejection.into_reply()),
                }
            }

            fn runs(&self) -> Runs {
                Runs::Blocking
            }
        }

        impl<F, Fut, S, M, $($ty,)* $last> RouteHandler<(Awaited, M, $($ty,)* $last,), S> for F
        where
            F: Fn($($ty,)* $last) -> Fut + Send + Sync + 'static,
            Fut: Future + Send + 'static,
            Fut::Output: IntoReply,
            S: Send + Sync + 'static,
            M: 'static,
            $($ty: FromRequestParts<S> + 'static,)*
            $last: FromRequest<S, M> + 'static,
        {
            fn into_shared(self) -> SharedHandler<S> {
                SharedHandler(Arc::new(Async_::<F, (M, $($ty,)* $last,)> { f: self, _args: PhantomData }))
            }
        }

        impl<F, Fut, S, M, $($ty,)* $last> Erased<S> for Async_<F, (M, $($ty,)* $last,)>
        where
            F: Fn($($ty,)* $last) -> Fut + Send + Sync + 'static,
            Fut: Future + Send + 'static,
            Fut::Output: IntoReply,
            S: Send + Sync + 'static,
            M: 'static,
            $($ty: FromRequestParts<S> + 'static,)*
            $last: FromRequest<S, M> + 'static,
        {
            #[allow(non_snake_case)]
            fn call(&self, call: Call, state: &S) -> Answer {
                $(let $ty = draw!($ty, &call.parts(), state, Answer::Ready);)*
                let $last = match <$last as FromRequest<S, M>>::from_request(call, state) {
                    Ok(value) => value,
                    Err(rejection) => return Answer::Ready(rejection.into_reply()),
                };
                let future = (self.f)($($ty,)* $last);
                Answer::Later(Box::pin(async move { future.await.into_reply() }))
            }

            fn check_head(&self, parts: &Parts<'_>, state: &S) -> HeadCheck {
                $(draw!($ty, parts, state, refused_head);)*
                match <$last as FromRequest<S, M>>::check_head(parts, state) {
                    Ok(()) => wanted(<$last as FromRequest<S, M>>::TAKES_CONTENT),
                    Err(rejection) => refused_head(rejection.into_reply()),
                }
            }

            fn runs(&self) -> Runs {
                Runs::Awaited
            }
        }
    };
}

impl<F, R, S> RouteHandler<(Blocking,), S> for F
where
    F: Fn() -> R + Send + Sync + 'static,
    R: IntoReply + 'static,
    S: Send + Sync + 'static,
{
    fn into_shared(self) -> SharedHandler<S> {
        SharedHandler(Arc::new(Sync_::<F, ()> {
            f: self,
            _args: PhantomData,
        }))
    }
}

impl<F, R, S> Erased<S> for Sync_<F, ()>
where
    F: Fn() -> R + Send + Sync + 'static,
    R: IntoReply + 'static,
    S: Send + Sync + 'static,
{
    fn call(&self, _call: Call, _state: &S) -> Answer {
        Answer::Ready((self.f)().into_reply())
    }

    fn check_head(&self, _parts: &Parts<'_>, _state: &S) -> HeadCheck {
        HeadCheck::Unwanted
    }

    fn runs(&self) -> Runs {
        Runs::Blocking
    }
}

impl<F, Fut, S> RouteHandler<(Awaited,), S> for F
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: IntoReply,
    S: Send + Sync + 'static,
{
    fn into_shared(self) -> SharedHandler<S> {
        SharedHandler(Arc::new(Async_::<F, ()> {
            f: self,
            _args: PhantomData,
        }))
    }
}

impl<F, Fut, S> Erased<S> for Async_<F, ()>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: IntoReply,
    S: Send + Sync + 'static,
{
    fn call(&self, _call: Call, _state: &S) -> Answer {
        let future = (self.f)();
        Answer::Later(Box::pin(async move { future.await.into_reply() }))
    }

    fn check_head(&self, _parts: &Parts<'_>, _state: &S) -> HeadCheck {
        HeadCheck::Unwanted
    }

    fn runs(&self) -> Runs {
        Runs::Awaited
    }
}

handlers!(; T1);
handlers!(T1; T2);
handlers!(T1, T2; T3);
handlers!(T1, T2, T3; T4);
handlers!(T1, T2, T3, T4; T5);
handlers!(T1, T2, T3, T4, T5; T6);
handlers!(T1, T2, T3, T4, T5, T6; T7);
handlers!(T1, T2, T3, T4, T5, T6, T7; T8);

/// Checks at compile time that `handler` is a handler of a router with
/// state `S`, and names what is wrong when it is not: an argument that is
/// not an extractor, a result that is no answer. A wrong handler given to
/// [`get`](super::get) and the like is refused as a whole; this one's
/// error points at the argument or the result at fault.
///
/// ```
/// use jsontp_protocol::app::{Path, check_handler};
///
/// check_handler::<(), _, _>(|Path(id): Path<u32>| format!("post {id}"));
/// ```
pub fn check_handler<S, M, H: RouteHandler<M, S>>(handler: H) -> H {
    handler
}
