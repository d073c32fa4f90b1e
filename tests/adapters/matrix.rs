//! Every server runtime with every client: the same exchanges, whatever
//! carries them.

use std::time::Duration;

use jsontp_protocol::io_adapters::client::ClientError;
use jsontp_protocol::machine::{ContinuePolicy, ServerConfig};
use jsontp_protocol::message::{Headers, Method, StatusCode};

use crate::support::{AnyClient, Echo, api_request, each_pair, get, options, quick, start, with_policy};

#[test]
fn keep_alive_then_a_pipeline_on_one_connection() {
    each_pair(|runtime, kind| {
        let server = start(runtime, Echo, options(ServerConfig::default(), 2));
        let mut client = AnyClient::connect(kind, server.addr, quick()).expect("connect");
        let first = client
            .send(api_request(Method::Put, "/a", "one"))
            .expect("answered");
        assert_eq!(
            first.response.body.as_text(),
            Some("echo /a one"),
            "{runtime:?} {kind:?}"
        );
        assert!(first.forgiven.is_empty(), "our server needs no leniency");
        // D2: several requests before the first answer, answered in order.
        let paths: Vec<String> = (0..20).map(|n| format!("/p{n}")).collect();
        let results = client.send_all(paths.iter().map(|p| get(p)));
        for (path, result) in paths.iter().zip(results) {
            let answer = result.unwrap_or_else(|e| panic!("{runtime:?} {kind:?}: {path}: {e}"));
            assert_eq!(answer.response.resource, *path, "{runtime:?} {kind:?}");
            assert_eq!(
                answer.response.body.as_text(),
                Some(format!("echo {path} ").as_str())
            );
        }
        drop(client);
        server.shutdown_and_join();
    });
}

#[test]
fn large_answers_pipelined_both_ways() {
    // Each answer is larger than the socket buffers on either side: the
    // server must write while the client reads, for every pair.
    each_pair(|runtime, kind| {
        let server = start(runtime, Echo, options(ServerConfig::default(), 2));
        let mut client = AnyClient::connect(kind, server.addr, quick()).expect("connect");
        let results = client.send_all((0..4).map(|_| get("/big/3000000")));
        for result in results {
            let answer = result.expect("answered");
            assert_eq!(
                answer.response.body.content().len(),
                3_000_000,
                "{runtime:?} {kind:?}"
            );
        }
        drop(client);
        server.shutdown_and_join();
    });
}

#[test]
fn the_continue_handshake_accepted_and_refused() {
    // D10: the handler accepts `/open` (100, then the full request) and
    // refuses `/refuse` with a final 401; the connection stays open.
    each_pair(|runtime, kind| {
        let server = start(runtime, Echo, options(with_policy(ContinuePolicy::Ask), 2));
        let mut client = AnyClient::connect(kind, server.addr, quick()).expect("connect");
        let upload = |path: &str| {
            api_request(Method::Put, path, "payload").with_headers(Headers::new().with_expect_continue(true))
        };
        let accepted = client.send(upload("/open")).expect("answered");
        assert!(accepted.continued, "{runtime:?} {kind:?}: acknowledged with 100");
        assert_eq!(accepted.response.body.as_text(), Some("echo /open payload"));
        let refused = client.send(upload("/refuse")).expect("answered");
        assert!(!refused.continued);
        assert_eq!(
            refused.response.status.code,
            StatusCode::UNAUTHORIZED,
            "{runtime:?} {kind:?}"
        );
        let after = client.send(get("/after")).expect("the connection goes on");
        assert_eq!(after.response.status.code, StatusCode::OK);
        drop(client);
        server.shutdown_and_join();
    });
}

#[test]
fn auto_accepted_handshakes_are_acknowledged_then_the_full_requests_head_is_checked() {
    // D10 AutoAccept: every handshake is acknowledged without asking the
    // handler, `/refuse` too. The handler meets the exchange at the full
    // request's head, before its content (D19): `/open` is answered,
    // `/refuse` gets the handler's refusal after its `100`, and the
    // connection goes on.
    each_pair(|runtime, kind| {
        let server = start(runtime, Echo, options(with_policy(ContinuePolicy::AutoAccept), 2));
        let mut client = AnyClient::connect(kind, server.addr, quick()).expect("connect");
        let upload = |path: &str| {
            api_request(Method::Put, path, "payload").with_headers(Headers::new().with_expect_continue(true))
        };
        let accepted = client.send(upload("/open")).expect("answered");
        assert!(accepted.continued, "{runtime:?} {kind:?}");
        assert_eq!(accepted.response.body.as_text(), Some("echo /open payload"));
        let refused = client.send(upload("/refuse")).expect("answered");
        assert!(
            refused.continued,
            "{runtime:?} {kind:?}: acknowledged without asking"
        );
        assert_eq!(
            refused.response.status.code,
            StatusCode::UNAUTHORIZED,
            "{runtime:?} {kind:?}: refused at the full request's head"
        );
        let after = client.send(get("/after")).expect("the connection goes on");
        assert_eq!(after.response.status.code, StatusCode::OK);
        drop(client);
        server.shutdown_and_join();
    });
}

#[test]
fn a_panicking_handler_gets_a_500_and_the_connection_goes_on() {
    each_pair(|runtime, kind| {
        let server = start(runtime, Echo, options(ServerConfig::default(), 2));
        let mut client = AnyClient::connect(kind, server.addr, quick()).expect("connect");
        let failed = client.send(get("/panic")).expect("answered");
        assert_eq!(
            failed.response.status.code,
            StatusCode::INTERNAL_SERVER_ERROR,
            "{runtime:?} {kind:?}"
        );
        let next = client.send(get("/after")).expect("answered");
        assert_eq!(next.response.status.code, StatusCode::OK);
        drop(client);
        server.shutdown_and_join();
    });
}

#[test]
fn shutdown_closes_an_idle_connection_and_the_client_sees_it() {
    each_pair(|runtime, kind| {
        let server = start(runtime, Echo, options(ServerConfig::default(), 2));
        let mut client = AnyClient::connect(kind, server.addr, quick()).expect("connect");
        client.send(get("/x")).expect("answered");
        let addr = server.addr;
        assert!(server.shutdown_and_join() < Duration::from_secs(3), "{runtime:?}");
        let after = client.send(get("/y"));
        assert!(
            matches!(
                after,
                Err(ClientError::ClosedEarly { .. } | ClientError::ConnectionClosed)
            ),
            "{runtime:?} {kind:?}: {after:?}"
        );
        let refused = AnyClient::connect(kind, addr, quick());
        assert!(
            matches!(refused, Err(ClientError::Refused { .. })),
            "{runtime:?} {kind:?}: no longer listening"
        );
    });
}
