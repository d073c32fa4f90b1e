//! Functions as route handlers: any function or closure whose arguments
//! are extractors and whose result is an answer, synchronous or `async`.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;

use super::extract::{Call, Extract};
use super::respond::IntoReply;
use crate::io_adapters::server::Reply;

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

/// A route's handler, its argument types forgotten.
pub(crate) trait Erased: Send + Sync + 'static {
    fn call(&self, call: Call) -> Answer;
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    fn runs(&self) -> Runs;
}

pub(crate) type Shared = Arc<dyn Erased>;

/// Marks a synchronous handler's implementation of [`RouteHandler`].
#[derive(Debug)]
pub enum Blocking {}

/// Marks an `async` handler's implementation of [`RouteHandler`].
#[derive(Debug)]
pub enum Awaited {}

/// A function the router can call for a route: up to eight arguments,
/// each an extractor ([`Extract`]), returning anything that converts
/// into a reply ([`IntoReply`]) — or, for an `async fn` or a closure
/// returning a future, a future of such a thing. `M` tells the two kinds
/// apart; it is inferred, never written.
///
/// A synchronous handler may block (it runs on a blocking pool under an
/// async server); an `async` one must not.
pub trait RouteHandler<M>: Send + Sync + 'static {
    #[doc(hidden)]
    fn into_shared(self) -> SharedHandler;
}

/// A handler ready for the router (opaque).
#[doc(hidden)]
pub struct SharedHandler(pub(crate) Shared);

struct Sync_<F, M> {
    f: F,
    _args: PhantomData<fn() -> M>,
}

struct Async_<F, M> {
    f: F,
    _args: PhantomData<fn() -> M>,
}

macro_rules! handlers {
    ($($arg:ident),*) => {
        impl<F, R, $($arg,)*> RouteHandler<(Blocking, $($arg,)*)> for F
        where
            F: Fn($($arg),*) -> R + Send + Sync + 'static,
            R: IntoReply + 'static,
            $($arg: Extract + 'static,)*
        {
            fn into_shared(self) -> SharedHandler {
                SharedHandler(Arc::new(Sync_::<F, ($($arg,)*)> { f: self, _args: PhantomData }))
            }
        }

        impl<F, R, $($arg,)*> Erased for Sync_<F, ($($arg,)*)>
        where
            F: Fn($($arg),*) -> R + Send + Sync + 'static,
            R: IntoReply + 'static,
            $($arg: Extract + 'static,)*
        {
            #[allow(non_snake_case, unused_mut, unused_variables)]
            fn call(&self, mut call: Call) -> Answer {
                $(
                    let $arg = match $arg::extract(&mut call) {
                        Ok(value) => value,
                        Err(refusal) => return Answer::Ready(refusal.into_reply()),
                    };
                )*
                Answer::Ready((self.f)($($arg),*).into_reply())
            }

            fn runs(&self) -> Runs {
                Runs::Blocking
            }
        }

        impl<F, Fut, $($arg,)*> RouteHandler<(Awaited, $($arg,)*)> for F
        where
            F: Fn($($arg),*) -> Fut + Send + Sync + 'static,
            Fut: Future + Send + 'static,
            Fut::Output: IntoReply,
            $($arg: Extract + 'static,)*
        {
            fn into_shared(self) -> SharedHandler {
                SharedHandler(Arc::new(Async_::<F, ($($arg,)*)> { f: self, _args: PhantomData }))
            }
        }

        impl<F, Fut, $($arg,)*> Erased for Async_<F, ($($arg,)*)>
        where
            F: Fn($($arg),*) -> Fut + Send + Sync + 'static,
            Fut: Future + Send + 'static,
            Fut::Output: IntoReply,
            $($arg: Extract + 'static,)*
        {
            #[allow(non_snake_case, unused_mut, unused_variables)]
            fn call(&self, mut call: Call) -> Answer {
                $(
                    let $arg = match $arg::extract(&mut call) {
                        Ok(value) => value,
                        Err(refusal) => return Answer::Ready(refusal.into_reply()),
                    };
                )*
                let future = (self.f)($($arg),*);
                Answer::Later(Box::pin(async move { future.await.into_reply() }))
            }

            fn runs(&self) -> Runs {
                Runs::Awaited
            }
        }
    };
}

handlers!();
handlers!(T1);
handlers!(T1, T2);
handlers!(T1, T2, T3);
handlers!(T1, T2, T3, T4);
handlers!(T1, T2, T3, T4, T5);
handlers!(T1, T2, T3, T4, T5, T6);
handlers!(T1, T2, T3, T4, T5, T6, T7);
handlers!(T1, T2, T3, T4, T5, T6, T7, T8);
