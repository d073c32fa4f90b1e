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
// Made and taken apart once per request: boxing would cost more. `pub`
// in a private module: the sealed `HandlerResult` names it.
#[allow(clippy::large_enum_variant)]
#[doc(hidden)]
pub enum Answer {
    Ready(Reply),
    Later(ReplyFuture),
}

/// How a handler runs.
#[cfg_attr(not(feature = "tower"), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// `pub` in a private module: the sealed `HandlerResult` names it.
#[doc(hidden)]
pub enum Runs {
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

/// Marks a synchronous handler's result ([`RouteHandler`]'s `M`).
#[derive(Debug)]
pub enum Blocking {}

/// Marks an `async` handler's result ([`RouteHandler`]'s `M`).
#[derive(Debug)]
pub enum Awaited {}

/// A function the router can call for a route of a router with state `S`:
/// up to eight arguments, each drawn from the request's head
/// ([`FromRequestParts`]) but the last, which may consume the request
/// ([`FromRequest`]), returning anything that converts into a reply
/// ([`IntoReply`]) — or, for an `async fn` or a closure returning a
/// future, a future of such a thing. `M` records the arguments' types and
/// kinds; it is inferred, never written.
///
/// A synchronous handler may block (it runs on a blocking pool under an
/// async server); an `async` one must not.
///
/// A handler that is not one is refused naming the argument or the result
/// at fault: a type that is no extractor, an extractor of the content
/// before the last argument, a `State<T>` the router's state cannot give,
/// a result that is no answer.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a handler of a router with state `{S}`",
    label = "not a handler",
    note = "a handler is a `Fn` (or `async fn`), `Send + Sync + 'static`, of at most eight \
            arguments, each an extractor, returning a type that implements `IntoReply` (or a \
            `Send` future of one)"
)]
pub trait RouteHandler<M, S>: Send + Sync + 'static {
    #[doc(hidden)]
    fn into_shared(self) -> SharedHandler<S>;
}

/// A handler ready for the router (opaque).
#[doc(hidden)]
pub struct SharedHandler<S>(pub(crate) Shared<S>);

/// The parts of a handler, each its own bound so that the compiler's error
/// for a wrong handler names the part at fault: the function and its
/// arguments' types ([`HandlerFn`](parts::HandlerFn), one implementation
/// per arity, chosen by the function's own), the arguments as extractors
/// ([`HandlerArgs`](parts::HandlerArgs), one per tuple), and the result
/// ([`HandlerResult`](parts::HandlerResult)).
mod parts {
    use super::*;

    /// A function of the arguments `Args` (a tuple).
    pub trait HandlerFn<Args>: Send + Sync + 'static {
        type Output;
        fn invoke(&self, args: Args) -> Self::Output;
    }

    /// A handler's arguments, drawn from a request.
    pub trait HandlerArgs<S, M>: Sized + 'static {
        /// Draws each, or refuses the request with the first rejection.
        // Made and taken apart once per request: boxing would cost more.
        #[allow(clippy::result_large_err)]
        fn extract(call: Call, state: &S) -> Result<Self, Reply>;
        /// Runs those that need no content against a request's head.
        fn check_head(parts: &Parts<'_>, state: &S) -> HeadCheck;
    }

    /// A handler's result: an answer now, or a future of one.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be a handler's answer",
        label = "not an answer",
        note = "a handler returns what implements `IntoReply`: Response, Reply, StatusCode, \
                (StatusCode, &str or String), &'static str, String, Keys<T: Serialize>, \
                (StatusCode, Keys<T>), (SetCookies, T), (Headers, T), Refusal, or a Result of \
                these; an `async` one, a `Send + 'static` future of one",
        note = "wrap body keys in `Keys(…)`, or implement `IntoReply` for your type"
    )]
    pub trait HandlerResult<K>: Sized {
        const RUNS: Runs;
        fn answer(self) -> Answer;
    }

    impl<T: IntoReply> HandlerResult<Blocking> for T {
        const RUNS: Runs = Runs::Blocking;

        fn answer(self) -> Answer {
            Answer::Ready(self.into_reply())
        }
    }

    impl<F> HandlerResult<Awaited> for F
    where
        F: Future + Send + 'static,
        F::Output: IntoReply,
    {
        const RUNS: Runs = Runs::Awaited;

        fn answer(self) -> Answer {
            Answer::Later(Box::pin(async move { self.await.into_reply() }))
        }
    }

    macro_rules! functions {
        ($($ty:ident),*) => {
            impl<F, R, $($ty,)*> HandlerFn<($($ty,)*)> for F
            where
                F: Fn($($ty),*) -> R + Send + Sync + 'static,
            {
                type Output = R;

                #[allow(non_snake_case)]
                fn invoke(&self, ($($ty,)*): ($($ty,)*)) -> R {
                    self($($ty),*)
                }
            }
        };
    }

    functions!();
    functions!(T1);
    functions!(T1, T2);
    functions!(T1, T2, T3);
    functions!(T1, T2, T3, T4);
    functions!(T1, T2, T3, T4, T5);
    functions!(T1, T2, T3, T4, T5, T6);
    functions!(T1, T2, T3, T4, T5, T6, T7);
    functions!(T1, T2, T3, T4, T5, T6, T7, T8);

    /// Draws `$ty` from `$parts`, or returns `$refused` of the rejection's
    /// reply from the enclosing function.
    macro_rules! draw {
        ($ty:ident, $parts:expr, $state:expr, $refused:expr) => {
            match <$ty as FromRequestParts<S>>::from_request_parts($parts, $state) {
                Ok(value) => value,
                Err(rejection) => return $refused(rejection.into_reply()),
            }
        };
    }

    fn refused_head(reply: Reply) -> HeadCheck {
        HeadCheck::Refused(Box::new(crate::app::respond::whole(reply)))
    }

    impl<S> HandlerArgs<S, ()> for () {
        fn extract(_call: Call, _state: &S) -> Result<(), Reply> {
            Ok(())
        }

        fn check_head(_parts: &Parts<'_>, _state: &S) -> HeadCheck {
            HeadCheck::Unwanted
        }
    }

    macro_rules! arguments {
        ($($ty:ident),*; $last:ident) => {
            impl<S, M, $($ty,)* $last> HandlerArgs<S, M> for ($($ty,)* $last,)
            where
                M: 'static,
                $($ty: FromRequestParts<S> + 'static,)*
                $last: FromRequest<S, M> + 'static,
            {
                #[allow(non_snake_case)]
                fn extract(call: Call, state: &S) -> Result<Self, Reply> {
                    $(let $ty = draw!($ty, &call.parts(), state, Err);)*
                    match <$last as FromRequest<S, M>>::from_request(call, state) {
                        Ok(last) => Ok(($($ty,)* last,)),
                        Err(rejection) => Err(rejection.into_reply()),
                    }
                }

                fn check_head(parts: &Parts<'_>, state: &S) -> HeadCheck {
                    $(draw!($ty, parts, state, refused_head);)*
                    match <$last as FromRequest<S, M>>::check_head(parts, state) {
                        Ok(()) if <$last as FromRequest<S, M>>::TAKES_CONTENT => HeadCheck::Wanted,
                        Ok(()) => HeadCheck::Unwanted,
                        Err(rejection) => refused_head(rejection.into_reply()),
                    }
                }
            }
        };
    }

    arguments!(; T1);
    arguments!(T1; T2);
    arguments!(T1, T2; T3);
    arguments!(T1, T2, T3; T4);
    arguments!(T1, T2, T3, T4; T5);
    arguments!(T1, T2, T3, T4, T5; T6);
    arguments!(T1, T2, T3, T4, T5, T6; T7);
    arguments!(T1, T2, T3, T4, T5, T6, T7; T8);
}

use parts::{HandlerArgs, HandlerFn, HandlerResult};

/// A handler as the router keeps it, its arguments' types in `M`.
struct Function<F, M> {
    f: F,
    _args: PhantomData<fn() -> M>,
}

impl<F, Args, X, K, S> RouteHandler<(Args, X, K), S> for F
where
    F: HandlerFn<Args>,
    Args: HandlerArgs<S, X>,
    F::Output: HandlerResult<K>,
    X: 'static,
    K: 'static,
    S: Send + Sync + 'static,
{
    fn into_shared(self) -> SharedHandler<S> {
        SharedHandler(Arc::new(Function::<F, (Args, X, K)> {
            f: self,
            _args: PhantomData,
        }))
    }
}

impl<F, Args, X, K, S> Erased<S> for Function<F, (Args, X, K)>
where
    F: HandlerFn<Args>,
    Args: HandlerArgs<S, X>,
    F::Output: HandlerResult<K>,
    X: 'static,
    K: 'static,
    S: Send + Sync + 'static,
{
    fn call(&self, call: Call, state: &S) -> Answer {
        match Args::extract(call, state) {
            Ok(args) => self.f.invoke(args).answer(),
            Err(refusal) => Answer::Ready(refusal),
        }
    }

    fn check_head(&self, parts: &Parts<'_>, state: &S) -> HeadCheck {
        Args::check_head(parts, state)
    }

    fn runs(&self) -> Runs {
        <F::Output as HandlerResult<K>>::RUNS
    }
}
