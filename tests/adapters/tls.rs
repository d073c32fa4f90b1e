//! TLS (D20) on every server runtime with both clients: round trips,
//! mutual TLS, and the wrong protocol on either side. Certificates are
//! made here with rcgen; loopback only.
#![cfg(feature = "tls")]

use std::net::SocketAddr;

use jsontp_protocol::io_adapters::client::{Answer, ClientError};
use jsontp_protocol::io_adapters::server::ServerOptions;
use jsontp_protocol::io_adapters::tls::{ClientTls, ServerTls, TlsStream};
use jsontp_protocol::machine::ServerConfig;
use jsontp_protocol::message::{Method, Request};

use crate::pki::Pki;
use crate::support::{
    AnyClient, CLIENTS, ClientKind, Echo, RUNTIMES, Runtime, api_request, get, options, quick, start,
};

/// A TLS client of either kind.
enum TlsClient {
    Blocking(jsontp_protocol::io_adapters::client::blocking::Client<TlsStream<std::net::TcpStream>>),
    #[cfg(feature = "tokio")]
    Tokio(
        tokio::runtime::Runtime,
        jsontp_protocol::io_adapters::client::tokio::Client<
            jsontp_protocol::io_adapters::tls::TokioTlsStream<tokio::net::TcpStream>,
        >,
    ),
}

impl TlsClient {
    fn connect(kind: ClientKind, addr: SocketAddr, tls: &ClientTls) -> Result<TlsClient, ClientError> {
        match kind {
            ClientKind::Blocking => jsontp_protocol::io_adapters::client::blocking::Client::connect_tls(
                addr,
                "localhost",
                tls,
                quick(),
            )
            .map(TlsClient::Blocking),
            #[cfg(feature = "tokio")]
            ClientKind::Tokio => {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                let client = runtime.block_on(async {
                    jsontp_protocol::io_adapters::client::tokio::Client::connect_tls(
                        addr,
                        "localhost",
                        tls,
                        quick(),
                    )
                    .await
                })?;
                Ok(TlsClient::Tokio(runtime, client))
            }
        }
    }

    fn send_all(&mut self, requests: Vec<Request>) -> Vec<Result<Answer, ClientError>> {
        match self {
            TlsClient::Blocking(client) => client.send_all(requests),
            #[cfg(feature = "tokio")]
            TlsClient::Tokio(runtime, client) => runtime.block_on(async {
                tokio::time::timeout(crate::support::LIMIT * 3, client.send_all(requests))
                    .await
                    .expect("the async client finishes in time")
            }),
        }
    }

    fn alpn(&self) -> Option<Vec<u8>> {
        match self {
            TlsClient::Blocking(client) => client.get_ref().session().alpn_protocol().map(<[u8]>::to_vec),
            #[cfg(feature = "tokio")]
            TlsClient::Tokio(_, client) => client
                .get_ref()
                .get_ref()
                .get_ref()
                .1
                .alpn_protocol()
                .map(<[u8]>::to_vec),
        }
    }
}

fn tls_options(tls: ServerTls) -> ServerOptions {
    options(ServerConfig::default(), 2).with_tls(tls)
}

/// Whether a plain client still gets answered by the server at `addr`
/// over TLS: the server kept serving.
fn still_serves(kind: ClientKind, addr: SocketAddr, tls: &ClientTls, what: &str) {
    let mut client = TlsClient::connect(kind, addr, tls).unwrap_or_else(|e| panic!("{what}: {e}"));
    let answer = client.send_all(vec![get("/after")]).remove(0);
    let answer = answer.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(answer.response.body.as_text(), Some("echo /after "), "{what}");
}

#[test]
fn round_trip_on_every_runtime_with_both_clients() {
    let pki = Pki::new();
    let tls = pki.server(false);
    for &runtime in RUNTIMES {
        let server = start(runtime, Echo, tls_options(tls.clone()));
        for &kind in CLIENTS {
            let what = format!("{runtime:?} {kind:?}");
            let mut client = TlsClient::connect(kind, server.addr, &pki.client())
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                client.alpn().as_deref(),
                Some(&b"jsontp"[..]),
                "{what}: ALPN (D20)"
            );
            // Keep-alive, a pipeline, and answers larger than the socket
            // buffers: TLS output held back by a full socket must still go.
            let mut requests = vec![api_request(Method::Put, "/a", "one")];
            requests.extend((0..10).map(|n| get(&format!("/p{n}"))));
            requests.extend((0..3).map(|_| get("/big/2000000")));
            let results = client.send_all(requests);
            assert_eq!(results.len(), 14, "{what}");
            for (n, result) in results.into_iter().enumerate() {
                let answer = result.unwrap_or_else(|e| panic!("{what}: request {n}: {e}"));
                let body = answer.response.body.as_text().unwrap_or_default().to_owned();
                match n {
                    0 => assert_eq!(body, "echo /a one", "{what}"),
                    1..=10 => assert_eq!(body, format!("echo /p{} ", n - 1), "{what}"),
                    _ => assert_eq!(body.len(), 2_000_000, "{what}"),
                }
            }
        }
        server.shutdown_and_join();
    }
}

#[test]
fn mutual_tls_accepts_a_known_client_and_refuses_one_without_a_certificate() {
    let pki = Pki::new();
    for &runtime in RUNTIMES {
        let server = start(runtime, Echo, tls_options(pki.server(true)));
        for &kind in CLIENTS {
            let what = format!("{runtime:?} {kind:?}");
            // Without a certificate: the handshake fails, or (TLS 1.3, where
            // the server judges the client after the client is done) the
            // first exchange does. Either way no answer.
            match TlsClient::connect(kind, server.addr, &pki.client()) {
                Err(ClientError::Tls { .. }) => {}
                Err(other) => panic!("{what}: a TLS error expected, got {other}"),
                Ok(mut client) => {
                    let result = client.send_all(vec![get("/secret")]).remove(0);
                    assert!(result.is_err(), "{what}: answered without a client certificate");
                }
            }
            still_serves(kind, server.addr, &pki.client_with_cert(), &what);
        }
        server.shutdown_and_join();
    }
}

#[test]
fn plaintext_client_on_the_tls_port_fails_and_the_server_goes_on() {
    let pki = Pki::new();
    for &runtime in RUNTIMES {
        let server = start(runtime, Echo, tls_options(pki.server(false)));
        for &kind in CLIENTS {
            let what = format!("{runtime:?} {kind:?}");
            let mut plain = AnyClient::connect(kind, server.addr, quick()).expect("TCP connects");
            let result = plain.send_all(vec![get("/plain")]).remove(0);
            assert!(
                result.is_err(),
                "{what}: a plaintext request was answered on the TLS port"
            );
            still_serves(kind, server.addr, &pki.client(), &what);
        }
        server.shutdown_and_join();
    }
}

#[test]
fn tls_client_on_a_plaintext_port_gets_a_clear_error() {
    let pki = Pki::new();
    for &runtime in RUNTIMES {
        let server = start(runtime, Echo, options(ServerConfig::default(), 2));
        for &kind in CLIENTS {
            let what = format!("{runtime:?} {kind:?}");
            match TlsClient::connect(kind, server.addr, &pki.client()) {
                Err(e @ ClientError::Tls { .. }) => {
                    let text = e.to_string();
                    assert!(text.contains("plaintext"), "{what}: {text}");
                }
                Err(other) => panic!("{what}: a TLS error expected, got {other}"),
                Ok(_) => panic!("{what}: a TLS session with a plaintext server"),
            }
            let mut plain = AnyClient::connect(kind, server.addr, quick()).expect("connect");
            let answer = plain.send_all(vec![get("/after")]).remove(0).expect("answered");
            assert_eq!(answer.response.body.as_text(), Some("echo /after "), "{what}");
        }
        server.shutdown_and_join();
    }
}

#[test]
fn a_client_that_does_not_trust_the_certificate_is_told_so() {
    let pki = Pki::new();
    let other = Pki::new();
    let server = start(Runtime::Std, Echo, tls_options(pki.server(false)));
    for &kind in CLIENTS {
        match TlsClient::connect(kind, server.addr, &other.client()) {
            Err(e @ ClientError::Tls { .. }) => {
                assert!(e.to_string().contains("certificate"), "{kind:?}: {e}")
            }
            Err(e) => panic!("{kind:?}: a TLS error expected, got {e}"),
            Ok(_) => panic!("{kind:?}: a certificate from another CA was trusted"),
        }
        let mut insecure =
            TlsClient::connect(kind, server.addr, &ClientTls::insecure()).expect("--insecure connects");
        assert!(insecure.send_all(vec![get("/x")]).remove(0).is_ok(), "{kind:?}");
    }
    server.shutdown_and_join();
}

#[test]
fn openssl_s_client_sees_the_alpn() {
    let Ok(probe) = std::process::Command::new("openssl").arg("version").output() else {
        eprintln!("skipped: no `openssl` command on this machine");
        return;
    };
    assert!(probe.status.success(), "openssl version");
    let pki = Pki::new();
    let server = start(Runtime::Std, Echo, tls_options(pki.server(false)));
    let output = std::process::Command::new("timeout")
        .args([
            "10",
            "openssl",
            "s_client",
            "-alpn",
            "jsontp",
            "-servername",
            "localhost",
        ])
        .arg("-connect")
        .arg(server.addr.to_string())
        .arg("-CAfile")
        .arg(pki.path("ca.pem"))
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run openssl s_client");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.contains("ALPN protocol: jsontp"), "{text}");
    assert!(text.contains("Verify return code: 0 (ok)"), "{text}");
    server.shutdown_and_join();
}

#[test]
fn a_client_that_never_says_hello_does_not_hold_up_shutdown() {
    let pki = Pki::new();
    for &runtime in RUNTIMES {
        let server = start(runtime, Echo, tls_options(pki.server(false)));
        // Connected, silent: mid-handshake as far as the server knows.
        let silent = crate::support::connect(server.addr);
        still_serves(
            ClientKind::Blocking,
            server.addr,
            &pki.client(),
            &format!("{runtime:?}"),
        );
        let took = server.shutdown_and_join();
        assert!(
            took < std::time::Duration::from_secs(5),
            "{runtime:?}: shutdown took {took:?}"
        );
        drop(silent);
    }
}

#[test]
fn behind_a_proxy_the_header_comes_before_the_tls_session() {
    // D21 with D20: a TCP balancer sends the PROXY header on the socket,
    // then passes the client's TLS session through untouched.
    use std::io::{Read, Write};
    let pki = Pki::new();
    for &runtime in RUNTIMES {
        let server = start(
            runtime,
            Echo,
            tls_options(pki.server(false)).with_proxy_protocol(true),
        );
        let mut socket = crate::support::connect(server.addr);
        socket
            .write_all(b"PROXY TCP4 198.51.100.9 127.0.0.1 51000 443\r\n")
            .expect("header");
        let mut session = pki.client().connect("localhost", socket).expect("session");
        session
            .write_all(crate::support::request("GET", "/behind", "").as_bytes())
            .expect("request");
        session.flush().expect("flush");
        let mut answer = Vec::new();
        let mut chunk = [0; 4096];
        let response: serde_json::Value = loop {
            match serde_json::from_slice(&answer) {
                Ok(response) => break response,
                Err(e) if e.is_eof() => {}
                Err(e) => panic!("{runtime:?}: not JSON: {e}"),
            }
            let n = session.read(&mut chunk).expect("response");
            assert!(n > 0, "{runtime:?}: closed before answering");
            answer.extend_from_slice(&chunk[..n]);
        };
        assert_eq!(crate::support::content(&response), "echo /behind ", "{runtime:?}");
        server.shutdown_and_join();
    }
}

/// Over TLS, on every runtime: a reader that pauses gets the rest as soon
/// as it reads again. The session keeps records the socket would not
/// take, and sends them at its next call: the runtime must make that call
/// once there is room, even though the drive step wrote everything.
#[test]
fn a_reader_that_pauses_over_tls_is_sent_the_rest_when_it_reads_again() {
    use std::io::Write;

    use crate::hostile::small_window;
    use crate::stall::{PAUSED_ANSWER, patient, read_with_pauses};
    use crate::support::request;

    let pki = Pki::new();
    for &runtime in RUNTIMES {
        let server = start(runtime, Echo, options(patient(), 1).with_tls(pki.server(false)));
        let mut stream = pki.raw_session(small_window(server.addr, 4096));
        stream
            .write_all(request("GET", &format!("/big/{PAUSED_ANSWER}"), "").as_bytes())
            .expect("write");
        stream.flush().expect("flush");
        read_with_pauses(&mut stream, runtime);
        server.shutdown_and_join();
    }
}

/// D3 over TLS: a reader taking 64 KiB of a 16 MiB answer every 100 ms,
/// for several stall times of 500 ms, is never closed as stalled. Under
/// TLS the answer waits in the session's buffer before the socket's, and
/// every runtime must still see the bytes the peer takes.
#[test]
fn a_slow_reader_that_keeps_taking_output_over_tls_is_not_closed() {
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    use jsontp_protocol::message::framing::{Scan, Scanner};

    use crate::hostile::{SLOW_ANSWER, Streamer, hostile_config, small_window};
    use crate::support::request;

    let pki = Pki::new();
    for &runtime in RUNTIMES {
        let mut config = hostile_config();
        config.limits.stall_timeout = Duration::from_millis(500);
        let server = start(runtime, Streamer, options(config, 2).with_tls(pki.server(false)));
        let mut stream = pki.raw_session(small_window(server.addr, 64 << 10));
        stream
            .write_all(request("GET", &format!("/stream/{SLOW_ANSWER}"), "").as_bytes())
            .expect("write");
        stream.flush().expect("flush");
        let started = Instant::now();
        let mut taken = Vec::new();
        let mut chunk = vec![0u8; 64 << 10];
        while started.elapsed() < Duration::from_secs(2) {
            // 64 KiB of plaintext each time: several records, each read
            // from the socket as the session needs it.
            stream.read_exact(&mut chunk).unwrap_or_else(|e| {
                panic!(
                    "{runtime:?}: closed after {} bytes, {:?}: {e}",
                    taken.len(),
                    started.elapsed()
                )
            });
            taken.extend_from_slice(&chunk);
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(taken.len() < SLOW_ANSWER / 4, "{runtime:?}: the reading was slow");
        // The rest, up to the end of the one message.
        let mut scanner = Scanner::new();
        let end = loop {
            if let Scan::Complete(frame) = scanner.scan(&taken) {
                break frame.end();
            }
            let n = stream.read(&mut chunk).unwrap_or_else(|e| {
                panic!(
                    "{runtime:?}: the rest of the answer, after {} bytes: {e}",
                    taken.len()
                )
            });
            assert!(n > 0, "{runtime:?}: closed after {} bytes", taken.len());
            taken.extend_from_slice(&chunk[..n]);
        };
        let answer: serde_json::Value =
            serde_json::from_slice(&taken[..end]).unwrap_or_else(|e| panic!("{runtime:?}: {e}"));
        assert_eq!(
            answer["body"]["content"].as_str().map(str::len),
            Some(SLOW_ANSWER),
            "{runtime:?}: the whole answer"
        );
        server.shutdown_and_join();
    }
}

/// `ServerTls::replace`: connections accepted after it get the new
/// certificate on every runtime, and a session already under way keeps
/// the one it began with.
#[test]
fn a_replaced_certificate_is_served_to_new_connections_and_old_ones_go_on() {
    let (old, new) = (Pki::new(), Pki::new());
    for &runtime in RUNTIMES {
        let tls = old.server(false);
        let server = start(runtime, Echo, tls_options(tls.clone()));
        let what = format!("{runtime:?}");
        let mut before = TlsClient::connect(ClientKind::Blocking, server.addr, &old.client())
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let answer = before.send_all(vec![get("/one")]).remove(0);
        assert!(answer.is_ok(), "{what}: {answer:?}");
        tls.replace(&new.server(false));
        // The old CA no longer vouches for what new connections are shown.
        let refused = match TlsClient::connect(ClientKind::Blocking, server.addr, &old.client()) {
            Err(_) => true,
            Ok(mut client) => client.send_all(vec![get("/x")]).remove(0).is_err(),
        };
        assert!(refused, "{what}: a new connection still got the old certificate");
        still_serves(ClientKind::Blocking, server.addr, &new.client(), &what);
        let answer = before.send_all(vec![get("/two")]).remove(0);
        let answer = answer.unwrap_or_else(|e| panic!("{what}: the old session: {e}"));
        assert_eq!(answer.response.body.as_text(), Some("echo /two "), "{what}");
        server.shutdown_and_join();
    }
}
