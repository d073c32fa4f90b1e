//! The tokio clients with applications: the client as a tower service
//! (tower's timeout around it, tower's balancing across two servers,
//! several services on one pool), and the pool's typed calls through a
//! `Router`.

use std::time::Duration;

use jsontp_protocol::app::{Keys, Router, get, post};
use jsontp_protocol::io_adapters::client::tokio::{ClientService, Pool};
use jsontp_protocol::io_adapters::client::{ClientError, ClientOptions, Origin, PoolOptions, split_url};
use jsontp_protocol::io_adapters::server::ServerOptions;
use jsontp_protocol::message::{Method, Request, StatusCode};
use serde::{Deserialize, Serialize};
use tower::{Service, ServiceBuilder, ServiceExt};

use crate::support::{Runtime, start, start_service};

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

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Order {
    item: String,
    quantity: u32,
    gift: Option<Gift>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Gift {
    note: String,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct Placed {
    number: u64,
    order: Order,
}

fn shop() -> Router {
    Router::new().route(
        "/orders",
        post(|Keys(order): Keys<Order>| async move { Keys(Placed { number: 42, order }) }),
    )
}

#[test]
fn the_async_pool_round_trips_typed_keys_through_a_router_from_many_tasks() {
    let server = start(Runtime::Tokio, shop(), ServerOptions::default());
    let url = format!("jsontp://{}/orders", server.addr);
    runtime().block_on(async move {
        let pool = Pool::new(PoolOptions::default().with_max_connections_per_host(2));
        let order = Order {
            item: "tea".into(),
            quantity: 3,
            gift: Some(Gift {
                note: "enjoy".into(),
            }),
        };
        let calls: Vec<_> = (0..6)
            .map(|_| {
                let (pool, url, order) = (pool.clone(), url.clone(), order.clone());
                tokio::spawn(async move { pool.post(&url).keys(&order).send().await })
            })
            .collect();
        for call in calls {
            let answer = call.await.expect("task").expect("answered");
            let placed: Placed = answer.keys().expect("the answer fits");
            assert_eq!(
                placed,
                Placed {
                    number: 42,
                    order: order.clone()
                }
            );
        }
        let (origin, _) = split_url(&url).expect("a URL");
        assert!(pool.open_connections(&origin) <= 2);

        // Read into a type the answer does not fit: the key is named.
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct Misread {
            number: u64,
            order: MisreadOrder,
        }
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct MisreadOrder {
            quantity: bool,
        }
        let answer = pool.post(&url).keys(&order).send().await.expect("answered");
        let error = answer.keys::<Misread>().expect_err("a number is not a boolean");
        let ClientError::Keys(keys) = &error else {
            panic!("{error:?}")
        };
        assert_eq!(keys.key.as_deref(), Some("order.quantity"), "{error}");
        assert_eq!(
            error.to_string(),
            "the answer's body key `order.quantity` does not fit: invalid type: integer `3`, expected a boolean"
        );
    });
}

#[test]
fn client_services_on_one_pool_share_its_connections_and_its_limit() {
    let server = start_service(named("a"), ServerOptions::default());
    let origin = Origin::from(server.addr);
    runtime().block_on(async move {
        let pool = Pool::new(PoolOptions::default().with_max_connections_per_host(1));
        let service = ClientService::from_pool(pool.clone(), origin.clone());
        let calls: Vec<_> = (0..4)
            .map(|_| {
                let mut service = service.clone();
                tokio::spawn(async move { service.ready().await?.call(get_request("/name")).await })
            })
            .collect();
        for call in calls {
            let answer = call.await.expect("task").expect("answered");
            assert_eq!(answer.response.body.as_text(), Some("a"));
        }
        assert_eq!(pool.open_connections(&origin), 1, "one connection for all four");
        assert_eq!(service.idle_connections(), 1);
    });
}
