//! Both clients against scripted servers over loopback: each test's
//! server is a thread that reads the client's requests line by line (our
//! clients write compact JSON plus `\n`, D1) and answers with canned bytes,
//! so every reaction of the clients is pinned down without depending on our
//! own server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine;
use jsontp_protocol::io_adapters::client::{ClientError, ClientOptions, Direction, Progress, Sent, Timeout};
use jsontp_protocol::message::{Body, Encoding, Forgiven, Headers, Method, Request, StatusCode};
use serde_json::{Value, json};

use crate::support::{AnyClient, each_client, get, quick};

const DATE: &str = "2024-05-01T12:00:00Z+0000";

/// A response as the wire carries it, compact plus `\n`.
fn response(resource: &str, code: u16, reason: &str, content: &str) -> String {
    let mut text = json!({
        "jsontp": "1.0",
        "type": "response",
        "status": {"code": code, "formal-message": reason, "human-message": reason},
        "resource": resource,
        "headers": {"date": DATE, "language": "en-US"},
        "body": {"content": content, "encoding": "identity"},
    })
    .to_string();
    text.push('\n');
    text
}

fn ok(resource: &str, content: &str) -> String {
    response(resource, 200, "OK", content)
}

/// One accepted connection, handed to `script`; the listener's address.
fn scripted<F>(script: F) -> (String, thread::JoinHandle<()>)
where
    F: FnOnce(Peer) + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let addr = listener.local_addr().expect("local address").to_string();
    let handle = thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept the client");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        script(Peer::new(stream));
    });
    (addr, handle)
}

/// The server side of a scripted connection.
struct Peer {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Peer {
    fn new(stream: TcpStream) -> Peer {
        let writer = stream.try_clone().expect("clone the socket");
        Peer {
            reader: BufReader::new(stream),
            writer,
        }
    }

    /// The next request, parsed as plain JSON; checks it is one line.
    fn request(&mut self) -> Value {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).expect("read a request");
        assert!(n > 0, "the client closed instead of sending a request");
        assert!(
            line.ends_with('\n'),
            "a request ends with a newline (D1): {line:?}"
        );
        serde_json::from_str(line.trim_end()).expect("the request is strict JSON")
    }

    fn send(&mut self, text: &str) {
        self.writer
            .write_all(text.as_bytes())
            .expect("write the response");
    }

    /// Whether the client writes nothing more for `wait`.
    fn stays_silent(&mut self, wait: Duration) -> bool {
        self.reader
            .get_ref()
            .set_read_timeout(Some(wait))
            .expect("timeout");
        let mut byte = [0u8; 1];
        match self.reader.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        }
    }
}

#[test]
fn a_get_sends_the_envelope_and_returns_the_content() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            let request = peer.request();
            assert_eq!(request["jsontp"], "1.0");
            assert_eq!(request["type"], "request");
            assert_eq!(request["method"], "GET");
            assert_eq!(request["resource"], "/hello.txt");
            assert_eq!(request["headers"], json!({}));
            assert_eq!(request["body"]["encoding"], "identity");
            peer.send(&ok("/hello.txt", "Hello, world!"));
        });
        let mut client = AnyClient::connect(kind, &addr, quick()).expect("connect");
        let exchange = client.send(get("/hello.txt")).expect("an answer");
        assert_eq!(exchange.response.status.code, StatusCode::OK);
        assert_eq!(exchange.response.body.as_text(), Some("Hello, world!"));
        assert!(exchange.forgiven.is_empty());
        assert!(!exchange.continued);
        server.join().expect("server script");
    });
}

#[test]
fn content_is_compressed_on_the_way_out_and_decoded_on_the_way_in() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            let request = peer.request();
            assert_eq!(request["body"]["encoding"], "gzip");
            let wire = request["body"]["content"].as_str().expect("content string");
            let compressed = base64::engine::general_purpose::STANDARD
                .decode(wire)
                .expect("base64 content (D9)");
            let mut text = String::new();
            flate2::read::GzDecoder::new(&compressed[..])
                .read_to_string(&mut text)
                .expect("a gzip stream");
            assert_eq!(text, "name=value");
            // Answer in deflate (zlib, D9).
            let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
            zlib.write_all(b"compressed answer").expect("compress");
            let content = base64::engine::general_purpose::STANDARD.encode(zlib.finish().expect("finish"));
            let mut answer: Value = serde_json::from_str(&ok("/form", "")).expect("json");
            answer["body"] = json!({"content": content, "encoding": "deflate"});
            peer.send(&format!("{answer}\n"));
        });
        let body = Body::text("name=value")
            .with_encoding(Encoding::Gzip)
            .expect("text can be gzipped");
        let request = Request::new(Method::Post, "/form".parse().expect("resource")).with_body(body);
        let mut client = AnyClient::connect(kind, &addr, quick()).expect("connect");
        let exchange = client.send(request).expect("an answer");
        assert_eq!(exchange.response.body.content(), b"compressed answer");
        assert_eq!(exchange.response.body.encoding(), Encoding::Deflate);
        server.join().expect("server script");
    });
}

#[test]
fn requests_share_one_connection_keep_alive() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            for path in ["/one", "/two", "/three"] {
                assert_eq!(peer.request()["resource"], path);
                peer.send(&ok(path, path));
            }
        });
        let mut client = AnyClient::connect(kind, &addr, quick()).expect("connect");
        for path in ["/one", "/two", "/three"] {
            let exchange = client.send(get(path)).expect("an answer");
            assert_eq!(exchange.response.body.as_text(), Some(path));
        }
        server.join().expect("one connection served all three");
    });
}

#[test]
fn pipelined_requests_all_go_out_before_the_first_answer() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            // All three are read before anything is answered: the client did
            // not wait (D2).
            let paths: Vec<Value> = (0..3).map(|_| peer.request()["resource"].clone()).collect();
            assert_eq!(paths, vec![json!("/a"), json!("/b"), json!("/c")]);
            let mut all = String::new();
            for path in ["/a", "/b", "/c"] {
                all.push_str(&ok(path, &format!("content of {path}")));
            }
            peer.send(&all);
        });
        let mut client = AnyClient::connect(kind, &addr, quick()).expect("connect");
        let results = client.send_all([get("/a"), get("/b"), get("/c")]);
        let contents: Vec<String> = results
            .into_iter()
            .map(|r| {
                r.expect("answered")
                    .response
                    .body
                    .as_text()
                    .unwrap_or("")
                    .to_owned()
            })
            .collect();
        assert_eq!(contents, ["content of /a", "content of /b", "content of /c"]);
        server.join().expect("server script");
    });
}

/// 128 requests of 64 KiB each way: the server answers each as it reads it
/// and blocks when its writes fill up, so a client that wrote everything
/// before reading anything would wait forever with the server.
#[test]
fn a_long_pipeline_keeps_reading_while_it_writes() {
    each_client(|kind| {
        const COUNT: usize = 128;
        let big = "x".repeat(64 * 1024);
        let answer = big.clone();
        let (addr, server) = scripted(move |mut peer| {
            for i in 0..COUNT {
                let request = peer.request();
                assert_eq!(request["resource"], format!("/item/{i}"));
                peer.send(&ok(&format!("/item/{i}"), &answer));
            }
        });
        let requests = (0..COUNT).map(|i| {
            Request::new(Method::Put, format!("/item/{i}").parse().expect("resource"))
                .with_body(Body::text(big.clone()))
        });
        let mut client = AnyClient::connect(kind, &addr, quick()).expect("connect");
        let started = Instant::now();
        let results = client.send_all(requests.collect::<Vec<_>>());
        assert_eq!(results.len(), COUNT);
        for result in results {
            assert_eq!(result.expect("answered").response.body.content().len(), 64 * 1024);
        }
        assert!(started.elapsed() < Duration::from_secs(20));
        server.join().expect("server script");
    });
}

#[test]
fn strict_mode_refuses_a_response_without_date_and_language() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            peer.request();
            let mut answer: Value = serde_json::from_str(&ok("/", "hi")).expect("json");
            answer["headers"] = json!({});
            answer["jsontp"] = json!("1.0-rc1");
            peer.send(&format!("{answer}\n"));
        });
        let mut client = AnyClient::connect(kind, &addr, quick()).expect("connect");
        match client.send(get("/")) {
            Err(ClientError::InvalidResponse(rejection)) => {
                assert!(
                    rejection.message.contains("date") || rejection.message.contains("language"),
                    "the rejection names the missing header: {}",
                    rejection.message
                );
            }
            other => panic!("expected an invalid response, got {other:?}"),
        }
        server.join().expect("server script");
    });
}

#[test]
fn lenient_mode_forgives_and_reports_what_it_forgave() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            peer.request();
            let mut answer: Value = serde_json::from_str(&ok("/", "")).expect("json");
            answer["headers"] = json!({});
            answer["body"]["encoding"] = json!("");
            peer.send(&format!("{answer}\n"));
        });
        let mut client = AnyClient::connect(kind, &addr, quick().lenient()).expect("connect");
        let exchange = client.send(get("/")).expect("forgiven");
        for expected in [
            Forgiven::MissingDate,
            Forgiven::MissingLanguage,
            Forgiven::EmptyEncoding,
        ] {
            assert!(
                exchange.forgiven.contains(&expected),
                "{expected:?} in {:?}",
                exchange.forgiven
            );
        }
        assert_eq!(exchange.response.body.encoding(), Encoding::Identity);
        server.join().expect("server script");
    });
}

#[test]
fn a_response_for_another_resource_is_an_error() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            peer.request();
            peer.send(&ok("/somewhere-else", "not yours"));
        });
        let mut client = AnyClient::connect(kind, &addr, quick()).expect("connect");
        match client.send(get("/mine")) {
            Err(ClientError::ResourceMismatch { sent, received, .. }) => {
                assert_eq!(sent, "/mine");
                assert_eq!(received, "/somewhere-else");
            }
            other => panic!("expected a resource mismatch (D13), got {other:?}"),
        }
        server.join().expect("server script");
    });
}

#[test]
fn a_server_that_closes_without_answering_is_closed_early() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            peer.request();
            // Dropping the peer closes the connection.
        });
        let mut client = AnyClient::connect(kind, &addr, quick()).expect("connect");
        let result = client.send(get("/"));
        // The server read it whole: it may have been applied (D13), and a
        // GET may be sent again, as no byte of its answer came.
        let Err(ClientError::ClosedEarly { progress }) = result else {
            panic!("{result:?}");
        };
        assert_eq!(
            progress,
            Progress {
                request: Sent::Whole,
                answer_began: false
            }
        );
        assert!(progress.may_send_again(Method::Get));
        assert!(!progress.may_send_again(Method::Post), "never a POST (D13)");
        let said = ClientError::ClosedEarly { progress }.to_string();
        assert!(said.contains("may or may not have been applied"), "{said}");
        assert!(client.is_closed());
        server.join().expect("server script");
    });
}

#[test]
fn a_server_that_closes_in_the_middle_of_its_answer_is_not_asked_again() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            peer.request();
            let answer = ok("/", "cut short");
            peer.writer
                .write_all(&answer.as_bytes()[..answer.len() / 2])
                .expect("half an answer");
            // Dropping the peer closes the connection.
        });
        let mut client = AnyClient::connect(kind, &addr, quick()).expect("connect");
        let result = client.send(get("/"));
        let Err(ClientError::ClosedEarly { progress }) = result else {
            panic!("{result:?}");
        };
        assert!(progress.answer_began, "{progress:?}");
        assert!(
            !progress.may_send_again(Method::Get),
            "never after part of the answer (D13)"
        );
        assert_eq!(
            ClientError::ClosedEarly { progress }.to_string(),
            "the server closed the connection in the middle of its answer"
        );
        server.join().expect("server script");
    });
}

#[test]
fn a_server_that_closes_after_its_answer_leaves_a_closed_connection() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            peer.request();
            peer.send(&ok("/", "once"));
        });
        let mut client = AnyClient::connect(kind, &addr, quick()).expect("connect");
        let exchange = client.send(get("/")).expect("answered");
        assert_eq!(exchange.response.body.as_text(), Some("once"));
        server.join().expect("server script");
        let second = client.send(get("/"));
        assert!(
            matches!(
                second,
                Err(ClientError::ConnectionClosed | ClientError::ClosedEarly { .. })
            ),
            "{second:?}"
        );
        // Whether or not the client wrote it before it saw the close, no
        // byte of an answer came: a GET may go again on a new connection.
        let progress = second.as_ref().err().and_then(ClientError::progress);
        assert!(
            progress.is_some_and(|p| p.may_send_again(Method::Get)),
            "{second:?}"
        );
    });
}

#[test]
fn a_silent_server_times_out_on_read() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            peer.request();
            assert!(
                peer.stays_silent(Duration::from_secs(2)),
                "the client closes, sends nothing"
            );
        });
        let options = ClientOptions {
            read_timeout: Some(Duration::from_millis(300)),
            ..quick()
        };
        let mut client = AnyClient::connect(kind, &addr, options).expect("connect");
        let started = Instant::now();
        let result = client.send(get("/"));
        assert!(
            matches!(result, Err(ClientError::TimedOut(Timeout::Read))),
            "{result:?}"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(client.is_closed(), "a timed-out connection is not reused");
        drop(client);
        server.join().expect("server script");
    });
}

#[test]
fn a_trickling_server_hits_the_exchange_timeout() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            peer.request();
            // A byte of whitespace every 100 ms keeps the read clock happy
            // (whitespace between messages is allowed, D1).
            for _ in 0..30 {
                if peer.writer.write_all(b" ").is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(100));
            }
        });
        let options = ClientOptions {
            read_timeout: Some(Duration::from_millis(500)),
            exchange_timeout: Some(Duration::from_millis(800)),
            ..quick()
        };
        let mut client = AnyClient::connect(kind, &addr, options).expect("connect");
        let result = client.send(get("/"));
        assert!(
            matches!(result, Err(ClientError::TimedOut(Timeout::Exchange))),
            "{result:?}"
        );
        drop(client);
        server.join().expect("server script");
    });
}

#[test]
fn connecting_to_a_closed_port_is_refused() {
    each_client(|kind| {
        let port = {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("addr").port()
        };
        let result = AnyClient::connect(kind, format!("127.0.0.1:{port}"), quick());
        match result {
            Err(e @ ClientError::Refused { .. }) => {
                assert!(e.to_string().contains(&format!("127.0.0.1:{port}")), "{e}");
            }
            other => panic!("expected refused, got {other:?}"),
        }
    });
}

#[test]
fn continue_handshake_sends_the_full_request_after_100() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            let first = peer.request();
            assert_eq!(first["headers"]["expect"], "100-continue");
            assert!(
                first["body"]["content"].as_str().unwrap_or("").is_empty(),
                "the preliminary request does not carry the content (D10)"
            );
            let mut ack: Value =
                serde_json::from_str(&response("/upload", 100, "CONTINUE", "")).expect("json");
            ack["status"]["formal-message"] = json!("CONTINUE");
            peer.send(&format!("{ack}\n"));
            let full = peer.request();
            assert_eq!(full["body"]["content"], "the payload");
            peer.send(&response("/upload", 201, "Created", ""));
        });
        let request = Request::new(Method::Put, "/upload".parse().expect("resource"))
            .with_headers(Headers::new().with_expect_continue(true))
            .with_body(Body::text("the payload"));
        let mut client = AnyClient::connect(kind, &addr, quick()).expect("connect");
        let exchange = client.send(request).expect("answered");
        assert!(exchange.continued);
        assert_eq!(exchange.response.status.code, StatusCode::CREATED);
        server.join().expect("server script");
    });
}

#[test]
fn continue_refused_ends_the_exchange_without_the_content() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            let first = peer.request();
            assert_eq!(first["headers"]["expect"], "100-continue");
            peer.send(&response("/upload", 401, "Unauthorized", "no token"));
            assert!(
                peer.stays_silent(Duration::from_millis(600)),
                "the full request is not sent after a final answer (D10)"
            );
        });
        let request = Request::new(Method::Put, "/upload".parse().expect("resource"))
            .with_headers(Headers::new().with_expect_continue(true))
            .with_body(Body::text("the payload"));
        let mut options = quick();
        options.config.continue_wait = Duration::from_secs(5);
        let mut client = AnyClient::connect(kind, &addr, options).expect("connect");
        let exchange = client.send(request).expect("answered");
        assert!(!exchange.continued);
        assert_eq!(exchange.response.status.code, StatusCode::UNAUTHORIZED);
        server.join().expect("server script");
    });
}

#[test]
fn continue_goes_ahead_when_the_server_stays_silent() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            let first = peer.request();
            assert_eq!(first["headers"]["expect"], "100-continue");
            let waited = Instant::now();
            let full = peer.request();
            assert!(
                waited.elapsed() >= Duration::from_millis(150),
                "the client waited for 100"
            );
            assert_eq!(full["body"]["content"], "the payload");
            peer.send(&response("/upload", 201, "Created", ""));
        });
        let request = Request::new(Method::Put, "/upload".parse().expect("resource"))
            .with_headers(Headers::new().with_expect_continue(true))
            .with_body(Body::text("the payload"));
        let mut options = quick();
        options.config.continue_wait = Duration::from_millis(200);
        let mut client = AnyClient::connect(kind, &addr, options).expect("connect");
        let exchange = client.send(request).expect("answered");
        assert_eq!(exchange.response.status.code, StatusCode::CREATED);
        server.join().expect("server script");
    });
}

#[test]
fn garbage_from_the_server_is_an_invalid_response() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            peer.request();
            peer.send("HTTP/1.1 200 OK\r\n\r\n");
        });
        let mut client = AnyClient::connect(kind, &addr, quick()).expect("connect");
        let result = client.send(get("/"));
        assert!(
            matches!(result, Err(ClientError::InvalidResponse(_))),
            "{result:?}"
        );
        server.join().expect("server script");
    });
}

#[test]
fn the_tracer_sees_every_byte_both_ways() {
    each_client(|kind| {
        let answer = ok("/t", "traced");
        let sent_answer = answer.clone();
        let (addr, server) = scripted(move |mut peer| {
            peer.request();
            peer.send(&sent_answer);
        });
        let (tx, rx) = mpsc::channel();
        let mut client = AnyClient::connect(kind, &addr, quick()).expect("connect");
        client.set_tracer(move |direction, bytes| {
            let _ = tx.send((direction, bytes.to_vec()));
        });
        client.send(get("/t")).expect("answered");
        drop(client);
        let mut sent = Vec::new();
        let mut received = Vec::new();
        for (direction, bytes) in rx.iter() {
            match direction {
                Direction::Sent => sent.extend(bytes),
                Direction::Received => received.extend(bytes),
            }
        }
        assert_eq!(received, answer.as_bytes());
        assert_eq!(sent.last(), Some(&b'\n'));
        let request: Value = serde_json::from_slice(&sent).expect("one JSON request");
        assert_eq!(request["resource"], "/t");
        server.join().expect("server script");
    });
}

#[test]
fn a_100_nobody_asked_for_is_an_invalid_response() {
    each_client(|kind| {
        let (addr, server) = scripted(|mut peer| {
            peer.request();
            peer.send(&response("/", 100, "Continue", ""));
        });
        let mut client = AnyClient::connect(kind, &addr, quick()).expect("connect");
        let result = client.send(get("/"));
        match result {
            Err(ClientError::InvalidResponse(rejection)) => {
                assert!(!rejection.message.is_empty());
            }
            other => panic!("a 100 to a request without expect is refused (D10, D12), got {other:?}"),
        }
        server.join().expect("server script");
    });
}
