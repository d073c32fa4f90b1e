//! What answers a connection's requests on tokio: the drive step's
//! dispatch on the blocking pool, an answer that comes later awaited on
//! the runtime, and a tower service served as a handler, with the answers
//! the server gives for its errors (D13).

use std::future::{Future, poll_fn};
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Semaphore;

#[cfg(feature = "tower")]
use super::super::reply::failed;
use super::super::reply::poll_caught;
use super::super::{Driver, Handler, Reply, ReplyFuture};
#[cfg(feature = "tower")]
use super::super::{Handing, Reached};
#[cfg(feature = "tower")]
use super::super::{Handled, Incoming};
#[cfg(feature = "tower")]
use super::BoxError;
use super::watched::Watched;
#[cfg(feature = "tower")]
use crate::message::Request;
use crate::message::{Response, StatusCode};

/// What answers a connection's requests: the drive step's dispatch, on
/// the blocking pool in one of the server's handler places, and an answer
/// that comes later ([`Handled::Later`]) awaited on the runtime with the
/// peer watched. One implementation, [`App`]; a trait so that the
/// connection's loop names what it needs of it.
pub(super) trait Dispatch: Send + 'static {
    /// `io` is the connection's stream, watched while an answer is awaited.
    fn dispatch<S: AsyncRead + AsyncWrite + Unpin + Send>(
        &mut self,
        driver: Driver,
        io: &mut Watched<S>,
    ) -> impl Future<Output = Dispatched> + Send;
}

/// How a dispatch ended.
// The driver moves through it once per dispatch, as it moves to the
// blocking pool and back: boxing would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub(super) enum Dispatched {
    /// The driver, back to be stepped.
    Back(Driver),
    /// A hook panicked outside the handler's own guard: the connection's
    /// state is gone with it.
    Lost,
}

/// A handler, and the server's places for its calls.
pub(super) struct App<H: ?Sized> {
    pub(super) handler: Arc<H>,
    pub(super) places: Arc<Semaphore>,
    pub(super) trips: Trips,
}

/// Whether a trip to the blocking pool takes a handler place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Trips {
    /// The handler answers on the trip and may block there.
    InPlace,
    /// The trip only parses and asks the hooks: the answer is a service's
    /// future, whose blocking handlers take their own places.
    #[cfg(feature = "tower")]
    Free,
}

impl<H: ?Sized> Clone for App<H> {
    fn clone(&self) -> Self {
        App {
            handler: Arc::clone(&self.handler),
            places: Arc::clone(&self.places),
            trips: self.trips,
        }
    }
}

#[cfg(feature = "tower")]
impl App<dyn Handler> {
    /// `service` as the handler, with `hooks` asked about heads and told
    /// the access records.
    pub(super) fn serving<T, H>(service: T, hooks: Arc<H>, places: Arc<Semaphore>) -> App<dyn Handler>
    where
        T: Answers,
        H: Handler,
    {
        let handler: Arc<dyn Handler> = Arc::new(Serviced {
            service: std::sync::Mutex::new(service),
            hooks,
            places: Arc::clone(&places),
        });
        App {
            handler,
            places,
            trips: Trips::Free,
        }
    }
}

impl<H: Handler + ?Sized> Dispatch for App<H> {
    async fn dispatch<S: AsyncRead + AsyncWrite + Unpin + Send>(
        &mut self,
        mut driver: Driver,
        io: &mut Watched<S>,
    ) -> Dispatched {
        // Dropped while it waits (a shutdown's deadline), no handler runs.
        let place = match self.trips {
            Trips::InPlace => match Arc::clone(&self.places).acquire_owned().await {
                Ok(place) => Some(place),
                Err(_) => return Dispatched::Lost,
            },
            #[cfg(feature = "tower")]
            Trips::Free => None,
        };
        // The connection's state travels to the blocking pool and back;
        // the place stays taken until the handler has really returned,
        // even if nobody awaits it any more.
        let handler = Arc::clone(&self.handler);
        let back = tokio::task::spawn_blocking(move || {
            let _place = place;
            let deferred = driver.dispatch_handing_out(&*handler);
            (driver, deferred)
        })
        .await;
        let Ok((mut driver, deferred)) = back else {
            return Dispatched::Lost;
        };
        let Some(deferred) = deferred else {
            return Dispatched::Back(driver);
        };
        // An `async` answer takes no place: dropping it cancels it.
        let (future, pending) = deferred.into_future();
        match io.watching(caught(future), &mut driver).await {
            Some(reply) => driver.answer_later(pending, reply),
            None => driver.answer_abandoned(pending),
        }
        Dispatched::Back(driver)
    }
}

/// `future`'s reply, or `500` if it panics.
async fn caught(mut future: ReplyFuture) -> Reply {
    poll_fn(|cx| poll_caught(&mut future, cx)).await
}

/// What [`serve_service`](super::serve_service) serves: a tower service
/// of requests whose answers are replies, shared by cloning.
#[cfg(feature = "tower")]
pub(super) trait Answers:
    tower::Service<Incoming, Response: Into<Reply>, Error: Into<BoxError>, Future: Send> + Clone + Send + 'static
{
}

#[cfg(feature = "tower")]
impl<T> Answers for T where
    T: tower::Service<Incoming, Response: Into<Reply>, Error: Into<BoxError>, Future: Send>
        + Clone
        + Send
        + 'static
{
}

/// A tower service as a handler: each request goes to a clone of it, and
/// its future is the answer, awaited on the runtime; `hooks` decide the
/// rest.
#[cfg(feature = "tower")]
struct Serviced<T, H> {
    /// Cloned for each call, as tower's services are shared.
    service: std::sync::Mutex<T>,
    hooks: Arc<H>,
    /// The server's places, for a router's blocking handlers.
    places: Arc<Semaphore>,
}

#[cfg(feature = "tower")]
impl<T, H> Handler for Serviced<T, H>
where
    T: Answers,
    H: Handler,
{
    fn respond(&self, mut incoming: Incoming) -> Handled {
        incoming.handing = Handing::new(Arc::clone(&self.places));
        let service = self
            .service
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        Handled::later(call_service(service, incoming))
    }

    fn check_head(&self, head: &Request, info: &super::super::RequestInfo) -> super::super::HeadCheck {
        self.hooks.check_head(head, info)
    }

    fn log_exchange(&self, record: &super::super::AccessRecord<'_>) {
        self.hooks.log_exchange(record);
    }
}

/// Asks `service` for the answer to `incoming`; an error or a panic
/// becomes the reply [`error_reply`] gives.
#[cfg(feature = "tower")]
async fn call_service<T: Answers>(mut service: T, mut incoming: Incoming) -> Reply {
    if let Err(error) = poll_fn(|cx| service.poll_ready(cx)).await {
        // The service never took the request.
        return error_reply(&*error.into(), Reached::Queue);
    }
    let handing = incoming.handing.watch();
    // A panic is caught around the whole answer ([`caught`]).
    match service.call(incoming).await {
        Ok(reply) => reply.into(),
        Err(error) => error_reply(&*error.into(), handing.reached()),
    }
}

/// The reply to an error a service gave instead of an answer, given how
/// far the request got (D13):
///
/// - tower's load shedding (`Overloaded`): `503`, try again later; the
///   service never took the request;
/// - tower's timeout (`Elapsed`) while the request waited for a handler
///   place: `503`, try again later; no handler ever had it;
/// - tower's timeout once a handler (or a service of the application's
///   own) had it: `504`, the outcome unknown: the server stopped waiting,
///   and the work may still finish or may have been applied already;
/// - anything else: `500` (the error itself goes to the log, not to the
///   client).
#[cfg(feature = "tower")]
fn error_reply(error: &(dyn std::error::Error + 'static), reached: Reached) -> Reply {
    let answer = |code, message: &str| Response::from_code(code, message.to_owned()).into();
    if error.is::<tower::load_shed::error::Overloaded>() {
        tracing::warn!("the application is overloaded; answering 503");
        return answer(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is overloaded; try again later",
        );
    }
    if error.is::<tower::timeout::error::Elapsed>() {
        return reached.timed_out().into();
    }
    tracing::error!(%error, "the application failed; answering 500");
    failed()
}

/// The hooks of a service that decides everything when it is called
/// ([`serve_service`](super::serve_service)): every request's content wanted, every 100-continue
/// handshake accepted (D10), no access log. Only its hooks are asked;
/// served as a handler itself, it would answer every request `500`.
#[cfg(feature = "tower")]
#[derive(Debug, Clone, Copy, Default)]
pub struct AcceptAll;

#[cfg(feature = "tower")]
impl Handler for AcceptAll {
    /// Not asked by [`serve_service`](super::serve_service), which hands requests to its
    /// service; a server serving this as a handler has no application.
    fn respond(&self, _incoming: Incoming) -> Handled {
        Response::from_code(StatusCode::INTERNAL_SERVER_ERROR, "the server has no handler").into()
    }
}
