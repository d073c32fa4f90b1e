//! The router as a `tower::Service` (feature `tower`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::extract::Call;
use super::handler::{Answer, Runs};
use super::respond::Refusal;
use super::router::{Router, Target};
use crate::io_adapters::server::{Handled, Incoming, Reply};

/// The future of a router's answer, as its `tower::Service` gives it.
pub type RouterFuture = Pin<Box<dyn Future<Output = Result<Reply, Infallible>> + Send>>;

/// Only a router that needs no state is a service: give it its state
/// first ([`Router::with_state`]).
impl tower::Service<Incoming> for Router {
    type Response = Reply;
    type Error = Infallible;
    type Future = RouterFuture;

    /// Always ready: a router holds no resource that runs out (put a
    /// concurrency limit in front of it for that).
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    /// Runs the route's handler. An `async` one is awaited: dropping
    /// the future (a timeout, a peer gone, a shutdown's deadline) cancels
    /// it. A synchronous one may block, so it runs on tokio's blocking
    /// pool once one of the server's handler places is free
    /// ([`ServerOptions::max_handlers`](crate::io_adapters::server::ServerOptions::max_handlers)):
    /// dropped while it waits, it never runs; once it runs it cannot be
    /// stopped, and keeps its place until it ends. The request carries how
    /// far it got, so that the server answers a timeout `503` only when no
    /// handler had it (D13). Must be called within a tokio runtime.
    fn call(&mut self, incoming: Incoming) -> RouterFuture {
        let path = incoming.request.resource.path().to_owned();
        let (handler, params) = match self.target(incoming.request.method, &path) {
            Target::Answer(response) => return Box::pin(std::future::ready(Ok(response.into()))),
            Target::Handler(handler, params) => (handler, params),
        };
        let handing = incoming.handing.clone();
        let call = Call::new(incoming, params);
        match handler.runs() {
            Runs::Awaited => {
                handing.to_handler();
                match handler.call(call, &()) {
                    Answer::Ready(reply) => Box::pin(std::future::ready(Ok(reply))),
                    Answer::Later(future) => Box::pin(async move { Ok(future.await) }),
                }
            }
            Runs::Blocking => {
                // Marked now, not at the first poll: a future dropped
                // unpolled never reached a handler either.
                handing.queued();
                Box::pin(async move {
                    let ran = handing
                        .run_blocking(move || match handler.call(call, &()) {
                            Answer::Ready(reply) => reply,
                            // A synchronous handler answers at once.
                            Answer::Later(future) => Handled::Later(future).wait(),
                        })
                        .await;
                    Ok(ran.unwrap_or_else(|_| {
                        tracing::error!("a handler panicked; answering 500");
                        Refusal::internal("the server failed while answering this request").into()
                    }))
                })
            }
        }
    }
}

impl From<Refusal> for Reply {
    fn from(refusal: Refusal) -> Reply {
        refusal.into_response().into()
    }
}
