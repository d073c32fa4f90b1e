//! The tokio client as a tower service: tower's timeout around it, and
//! tower's balancing across two servers.

use std::time::Duration;

use jsontp_protocol::app::{Router, get};
use jsontp_protocol::io_adapters::client::ClientOptions;
use jsontp_protocol::io_adapters::client::tokio::ClientService;
use jsontp_protocol::io_adapters::server::ServerOptions;
use jsontp_protocol::message::{Method, Request, StatusCode};
use tower::{Service, ServiceBuilder, ServiceExt};

use crate::support::start_service;

fn named(name: &'static str) -> Router {
    Router::new()
        .route("/name", get(move || async move { name }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(2)).await;
                "late"
            }),
        )
}

fn get_request(path: &str) -> Request {
    Request::new(Method::Get, path.parse().expect("resource"))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn a_timeout_layer_around_the_client_gives_up_and_the_next_call_is_answered() {
    let server = start_service(named("a"), ServerOptions::default());
    let addr = server.addr.to_string();
    runtime().block_on(async move {
        let client = ClientService::new(addr, ClientOptions::default());
        let mut service = ServiceBuilder::new()
            .timeout(Duration::from_millis(300))
            .service(client.clone());

        let answer = service
            .ready()
            .await
            .expect("ready")
            .call(get_request("/name"))
            .await;
        assert_eq!(answer.expect("answer").response.body.as_text(), Some("a"));
        // The connection is kept for the next call.
        assert_eq!(client.idle_connections(), 1);

        let started = std::time::Instant::now();
        let late = service
            .ready()
            .await
            .expect("ready")
            .call(get_request("/slow"))
            .await;
        let error = late.expect_err("the layer gave up");
        assert!(error.is::<tower::timeout::error::Elapsed>(), "{error}");
        assert!(started.elapsed() < Duration::from_secs(2));
        // The abandoned connection went with its call; the next call has
        // the kept one, or a new one.
        let answer = service
            .ready()
            .await
            .expect("ready")
            .call(get_request("/name"))
            .await;
        assert_eq!(answer.expect("answer").response.status.code, StatusCode::OK);
    });
}

#[test]
fn tower_balances_calls_across_two_servers() {
    use tower::balance::p2c::Balance;
    use tower::discover::ServiceList;
    use tower::load::{CompleteOnResponse, PendingRequests};

    let (a, b) = (
        start_service(named("a"), ServerOptions::default()),
        start_service(named("b"), ServerOptions::default()),
    );
    let addrs = [a.addr.to_string(), b.addr.to_string()];
    runtime().block_on(async move {
        let backends = addrs.map(|addr| {
            PendingRequests::new(
                ClientService::new(addr, ClientOptions::default()),
                CompleteOnResponse::default(),
            )
        });
        let mut balanced = Balance::new(ServiceList::new(backends));
        let (mut from_a, mut from_b) = (0, 0);
        // Calls in flight at once, as a balancer sees them.
        let mut calls = Vec::new();
        for _ in 0..40 {
            let ready = balanced.ready().await.expect("ready");
            calls.push(tokio::spawn(ready.call(get_request("/name"))));
        }
        for call in calls {
            let answer = call.await.expect("task").expect("answer");
            match answer.response.body.as_text() {
                Some("a") => from_a += 1,
                Some("b") => from_b += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(from_a + from_b, 40);
        assert!(from_a > 0 && from_b > 0, "a {from_a}, b {from_b}");
    });
}
