//! A router's access record, on every runtime and behind tower's layers:
//! one `jsontp::access` event per exchange once its answer has left,
//! refusals of a handshake's head included (D10).

use std::sync::{Mutex, OnceLock};

use jsontp_protocol::app::{Content, Router, get, put};
use jsontp_protocol::io_adapters::client::ClientOptions;
use jsontp_protocol::io_adapters::client::blocking::Client;
use jsontp_protocol::io_adapters::server::ServerOptions;
use jsontp_protocol::machine::{ContinuePolicy, ServerConfig};
use jsontp_protocol::message::{Body, Headers, Method, Request, StatusCode};

use crate::support::{RUNTIMES, Running, start};

/// Every access event of the test process: (resource, status, complete).
fn records() -> &'static Mutex<Vec<(String, u64, bool)>> {
    static RECORDS: OnceLock<Mutex<Vec<(String, u64, bool)>>> = OnceLock::new();
    RECORDS.get_or_init(|| {
        let _ = tracing::subscriber::set_global_default(AccessEvents);
        Mutex::default()
    })
}

/// A subscriber that keeps the fields of `jsontp::access` events.
struct AccessEvents;

#[derive(Default)]
struct Fields {
    resource: String,
    status: u64,
    complete: bool,
}

impl tracing::field::Visit for Fields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "resource" {
            value.clone_into(&mut self.resource);
        }
    }
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        if field.name() == "status" {
            self.status = value;
        }
    }
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        if field.name() == "complete" {
            self.complete = value;
        }
    }
    fn record_debug(&mut self, _field: &tracing::field::Field, _value: &dyn std::fmt::Debug) {}
}

impl tracing::Subscriber for AccessEvents {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        metadata.target() == "jsontp::access"
    }
    fn new_span(&self, _span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _span: &tracing::span::Id, _values: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _span: &tracing::span::Id, _follows: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        records()
            .lock()
            .expect("records")
            .push((fields.resource, fields.status, fields.complete));
    }
    fn enter(&self, _span: &tracing::span::Id) {}
    fn exit(&self, _span: &tracing::span::Id) {}
}

fn uploads() -> Router {
    Router::new()
        .route(
            "/files/{name}",
            put(|content: Content| format!("{} bytes", content.len())),
        )
        .route("/hello", get(|| "hello"))
}

#[test]
fn a_router_keeps_one_access_record_per_exchange_on_every_runtime_and_behind_layers() {
    records();
    let options = || {
        ServerOptions::default().with_config(ServerConfig {
            continue_policy: ContinuePolicy::Ask,
            ..ServerConfig::default()
        })
    };
    let mut servers: Vec<(String, Running)> = RUNTIMES
        .iter()
        .map(|&runtime| (format!("{runtime:?}"), start(runtime, uploads(), options())))
        .collect();
    // On tokio as a handler, as the std and mio servers take it.
    #[cfg(feature = "tower")]
    servers.push((
        "tokio-handler".to_owned(),
        crate::support::start_on_tokio(uploads(), options()),
    ));
    #[cfg(feature = "tower")]
    servers.push((
        "tokio-layers".to_owned(),
        crate::support::start_hooked(
            tower::ServiceBuilder::new()
                .timeout(std::time::Duration::from_secs(10))
                .service(uploads()),
            uploads(),
            options(),
        ),
    ));
    for (served, server) in &servers {
        let mut client = Client::connect(server.addr, ClientOptions::default()).expect("connect");
        let hello = format!("/hello?on={served}");
        let answer = client
            .send(Request::new(Method::Get, hello.parse().unwrap()))
            .expect("answer");
        assert_eq!(answer.response.status.code, StatusCode::OK, "{served}");
        // A handshake for a method the route does not serve: refused from
        // its head, and recorded all the same.
        let refused_at = format!("/hello?refused={served}");
        let refused = client
            .send(
                Request::new(Method::Put, refused_at.parse().unwrap())
                    .with_headers(Headers::new().with_expect_continue(true))
                    .with_body(Body::text("x".repeat(1000))),
            )
            .expect("answer");
        assert_eq!(
            refused.response.status.code,
            StatusCode::METHOD_NOT_ALLOWED,
            "{served}"
        );
        assert!(!refused.continued, "{served}");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let seen = |resource: &str| {
            records()
                .lock()
                .expect("records")
                .iter()
                .filter(|(r, ..)| r == resource)
                .cloned()
                .collect::<Vec<_>>()
        };
        while seen(&refused_at).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(seen(&hello), [(hello.clone(), 200, true)], "{served}");
        assert_eq!(seen(&refused_at), [(refused_at.clone(), 405, true)], "{served}");
    }
}
