//! The router as a `tower::Service` (feature `tower`), and what a service's
//! error answers.

use std::convert::Infallible;
use std::error::Error;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use super::extract::Call;
use super::handler::{Answer, Runs};
use super::respond::Refusal;
use super::router::{Router, Target};
use crate::io_adapters::server::{Incoming, Reply};
use crate::message::StatusCode;

/// The future of a router's answer, as its `tower::Service` gives it.
pub type RouterFuture = Pin<Box<dyn Future<Output = Result<Reply, Infallible>> + Send>>;

impl tower::Service<Incoming> for Router {
    type Response = Reply;
    type Error = Infallible;
    type Future = RouterFuture;

    /// Always ready: a router holds no resource that runs out (put a
    /// concurrency limit in front of it for that).
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    /// Runs the route's handler: an `async` one is awaited; a synchronous
    /// one runs on tokio's blocking pool, since it may block. Must be
    /// called within a tokio runtime.
    fn call(&mut self, incoming: Incoming) -> RouterFuture {
        let path = incoming.request.resource.path().to_owned();
        let (handler, params) = match self.target(incoming.request.method, &path) {
            Target::Answer(response) => return Box::pin(std::future::ready(Ok(response.into()))),
            Target::Handler(handler, params) => (handler, params),
        };
        let call = Call::new(incoming, params, self.states());
        match handler.runs() {
            Runs::Awaited => match handler.call(call) {
                Answer::Ready(reply) => Box::pin(std::future::ready(Ok(reply))),
                Answer::Later(future) => Box::pin(async move { Ok(future.await) }),
            },
            Runs::Blocking => Box::pin(async move {
                let ran = tokio::task::spawn_blocking(move || match handler.call(call) {
                    Answer::Ready(reply) => reply,
                    // A synchronous handler answers at once.
                    Answer::Later(future) => super::handler::block_on(future),
                })
                .await;
                Ok(ran.unwrap_or_else(|_| {
                    tracing::error!("a handler panicked; answering 500");
                    Refusal::internal("the server failed while answering this request").into()
                }))
            }),
        }
    }
}

impl From<Refusal> for Reply {
    fn from(refusal: Refusal) -> Reply {
        refusal.into_response().into()
    }
}

/// The reply for an error a service gave instead of an answer, as the
/// tokio server sends it: `503` when a tower layer timed the application
/// out (`tower::timeout`) or shed the request (`tower::load_shed`), `500`
/// for anything else (the error itself goes to the log, not to the
/// client).
///
/// ```
/// use jsontp_protocol::app::error_reply;
/// use jsontp_protocol::message::StatusCode;
///
/// let elapsed = tower::timeout::error::Elapsed::new();
/// assert_eq!(error_reply(&elapsed).response().status.code, StatusCode::SERVICE_UNAVAILABLE);
/// let other = std::io::Error::other("disk on fire");
/// assert_eq!(error_reply(&other).response().status.code, StatusCode::INTERNAL_SERVER_ERROR);
/// ```
pub fn error_reply(error: &(dyn Error + 'static)) -> Reply {
    if error.is::<tower::timeout::error::Elapsed>() {
        tracing::warn!("the application did not answer in time; answering 503");
        return Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server did not answer in time; try again later",
        )
        .into();
    }
    if error.is::<tower::load_shed::error::Overloaded>() {
        tracing::warn!("the application is overloaded; answering 503");
        return Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is overloaded; try again later",
        )
        .into();
    }
    tracing::error!(%error, "the application failed; answering 500");
    Refusal::internal("the server failed while answering this request").into()
}
