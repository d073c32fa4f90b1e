//! tower-http's layers in front of a router on the tokio server, through
//! `app::http`: traced, timed out with the answer D13 gives, and a request
//! id that reaches the handler.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use jsontp_protocol::app::http::{self as app_http, Body};
use jsontp_protocol::app::{Keys, Path, Router, get};
use jsontp_protocol::io_adapters::server::ServerOptions;
use jsontp_protocol::message::{Headers, Method, StatusCode};
use serde::Serialize;
use serde_json::json;
use tower::{Layer, ServiceBuilder};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

use crate::support::{client, request, start_hooked};

#[derive(Serialize)]
struct Waited {
    waited_ms: u64,
}

async fn sleep(Path(ms): Path<u64>) -> Keys<Waited> {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    Keys(Waited { waited_ms: ms })
}

fn router() -> Router {
    Router::new().route("/sleep/{ms}", get(sleep)).route(
        "/id",
        get(|headers: Headers| async move {
            let id = headers
                .unlisted()
                .iter()
                .find(|(name, _)| name == "x-request-id")
                .map(|(_, value)| value.clone());
            Keys(json!({ "request-id": id }))
        }),
    )
}

/// The statuses tower-http's trace layer saw go out, in order.
#[derive(Clone, Default)]
struct Traced(Arc<Mutex<Vec<u16>>>);

#[test]
fn trace_and_timeout_layers_wrap_a_router_and_a_timeout_is_504_once_a_handler_had_it() {
    let traced = Traced::default();
    let seen = traced.clone();
    let router = router();
    let service = app_http::layer(
        ServiceBuilder::new()
            .layer(TraceLayer::new_for_http().on_response(
                move |response: &http::Response<Body>, _: Duration, _: &tracing::Span| {
                    seen.0.lock().unwrap().push(response.status().as_u16());
                },
            ))
            .layer(TimeoutLayer::with_status_code(
                http::StatusCode::REQUEST_TIMEOUT,
                Duration::from_millis(300),
            )),
    )
    .layer(router.clone());
    let server = start_hooked(service, router, ServerOptions::default());
    let mut client = client(server.addr);

    let quick = client
        .send(request(Method::Get, "/sleep/5", json!({})))
        .expect("answer");
    assert_eq!(quick.response.status.code, StatusCode::OK);
    assert_eq!(quick.response.body.extra()["waited_ms"], 5);

    let started = Instant::now();
    let slow = client
        .send(request(Method::Get, "/sleep/5000", json!({})))
        .expect("answer");
    // The layer's 408 is no jsontp answer: the handler had the request,
    // so whether it was applied is unknown (D13).
    assert_eq!(slow.response.status.code, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        slow.response.status.human_message,
        "the server stopped waiting for its application, which may still finish: \
         the request may or may not have been applied"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    // The connection goes on (D2); a route the router lacks is its own 404.
    let missing = client
        .send(request(Method::Get, "/nowhere", json!({})))
        .expect("answer");
    assert_eq!(missing.response.status.code, StatusCode::NOT_FOUND);
    assert_eq!(*traced.0.lock().unwrap(), [200, 408, 404]);
}

/// Passes each request on once it holds one of `permits`: a queue in
/// front of the application, which the test opens and closes.
#[derive(Clone)]
struct Gate<S> {
    permits: Arc<tokio::sync::Semaphore>,
    inner: S,
}

impl<S, R> tower::Service<R> for Gate<S>
where
    S: tower::Service<R> + Clone + Send + 'static,
    S::Future: Send,
    R: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        let permits = Arc::clone(&self.permits);
        // The service made ready goes with the call; a clone stays.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let _permit = permits.acquire().await.expect("never closed");
            inner.call(request).await
        })
    }
}

#[test]
fn a_timeout_before_the_application_took_the_request_is_503() {
    let permits = Arc::new(tokio::sync::Semaphore::new(0));
    let gate = Arc::clone(&permits);
    let router = router();
    let service = app_http::layer(
        ServiceBuilder::new()
            .layer(TimeoutLayer::with_status_code(
                http::StatusCode::REQUEST_TIMEOUT,
                Duration::from_millis(300),
            ))
            .layer(tower::layer::layer_fn(move |inner| Gate {
                permits: Arc::clone(&gate),
                inner,
            })),
    )
    .layer(router.clone());
    let server = start_hooked(service, router, ServerOptions::default());
    let mut client = client(server.addr);

    let queued = client
        .send(request(Method::Get, "/sleep/1", json!({})))
        .expect("answer");
    // Never handed to the application: try again later (D13).
    assert_eq!(queued.response.status.code, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        queued.response.status.human_message,
        "the server was too busy to begin this request in time, and never did; try again later"
    );

    permits.add_permits(1);
    let again = client
        .send(request(Method::Get, "/sleep/1", json!({})))
        .expect("answer");
    assert_eq!(again.response.status.code, StatusCode::OK);
}

#[test]
fn a_request_id_layers_header_reaches_the_handler_and_not_the_wire() {
    let router = router();
    let service = app_http::layer(
        ServiceBuilder::new()
            .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
            .layer(PropagateRequestIdLayer::x_request_id()),
    )
    .layer(router.clone());
    let server = start_hooked(service, router, ServerOptions::default());
    let mut client = client(server.addr);
    let mut ids = Vec::new();
    for _ in 0..2 {
        // The client is strict: an answer naming `x-request-id`, a header
        // outside the protocol's list, would be an error here (D8).
        let answer = client
            .send(request(Method::Get, "/id", json!({})))
            .expect("a valid answer");
        assert_eq!(answer.response.status.code, StatusCode::OK);
        assert!(answer.response.headers.unlisted().is_empty());
        let id = answer.response.body.extra().get("request-id");
        let id = id
            .and_then(|id| id.as_str())
            .expect("the handler saw an id")
            .to_owned();
        assert_eq!(id.len(), 36, "a UUID: {id}");
        ids.push(id);
    }
    assert_ne!(ids[0], ids[1]);
}
