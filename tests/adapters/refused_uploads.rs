//! A request refused whatever its content stores none of it (D19): the
//! serving layer asks the handler's check of the head
//! (`Handler::check_head`) when the content starts and, on a refusal or
//! when the content is not wanted, reads and checks the content without
//! writing it anywhere. D5's order still holds: a corrupt stream is `400`
//! and content past the limit `413`, not the refusal. The same for a
//! `Router` on every server, as a handler and as a tower service; for the
//! full request of a handshake the server acknowledged without asking;
//! for content written before its head, held until the message ends; and
//! for content no one takes (a request refused for its envelope, the
//! ignored body of a handshake's first request).

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use jsontp_protocol::app::{Content, Router, put};
use jsontp_protocol::io_adapters::server::{ServerOptions, SpoolOptions};
use jsontp_protocol::machine::{ContinuePolicy, ServerConfig};
use serde_json::Value;

use crate::support::{Echo, RUNTIMES, Reader, Runtime, code, connect, each_runtime, options, start};

/// A PUT written as streaming senders write it (D19): `body` last,
/// `content` last in it; the content's text is `content`, sent separately
/// from the envelope and the message's end.
fn put_parts(resource: &str, encoding: &str) -> (String, &'static str) {
    parts("PUT", resource, encoding, "{}")
}

/// A request of `method` written as streaming senders write it, with these
/// `headers`: the envelope up to the content's text, and the message's end.
fn parts(method: &str, resource: &str, encoding: &str, headers: &str) -> (String, &'static str) {
    let envelope = format!(
        r#"{{"jsontp":"1.0","type":"request","resource":"{resource}","method":"{method}","headers":{headers},"body":{{"encoding":"{encoding}","content":""#
    );
    (envelope, "\"}}\n")
}

/// Sends the envelope and half of 2 MiB of content, looks at what the
/// spool holds while the upload is under way, sends the rest, and gives
/// the bytes spooled mid-upload and the answer's status.
fn upload(runtime: crate::support::Runtime, resource: &str) -> (u64, u64) {
    let spool = SpoolOptions::default().with_memory_limit(4096);
    let server = start(
        runtime,
        Echo,
        options(ServerConfig::default(), 1).with_spool(spool.clone()),
    );
    let mut stream = connect(server.addr);
    let (envelope, end) = put_parts(resource, "identity");
    let half = "x".repeat(1 << 20);
    stream.write_all(envelope.as_bytes()).expect("envelope");
    stream.write_all(half.as_bytes()).expect("first half");
    // The server takes what was sent; the spool shows whether it kept it.
    let until = Instant::now() + Duration::from_secs(5);
    let mut spooled = spool.spooled_bytes();
    while spooled == 0 && Instant::now() < until && resource != "/refuse" {
        std::thread::sleep(Duration::from_millis(10));
        spooled = spool.spooled_bytes();
    }
    if resource == "/refuse" {
        // Long enough for the first half to reach the server and be read.
        std::thread::sleep(Duration::from_millis(300));
        spooled = spool.spooled_bytes();
    }
    stream.write_all(half.as_bytes()).expect("second half");
    stream.write_all(end.as_bytes()).expect("end");
    let mut reader = Reader::new(stream);
    let answer = reader.next().expect("an answer");
    assert_eq!(
        spool.spooled_bytes(),
        0,
        "{runtime:?}: the spool is empty once answered"
    );
    server.shutdown_and_join();
    (spooled, code(&answer))
}

#[test]
fn an_upload_refused_from_its_envelope_is_never_stored() {
    each_runtime(|runtime| {
        let (spooled, status) = upload(runtime, "/refuse");
        assert_eq!(status, 401, "{runtime:?}");
        assert_eq!(spooled, 0, "{runtime:?}: bytes of a refused upload were stored");
    });
}

#[test]
fn an_accepted_upload_is_stored_as_it_arrives() {
    // The other side of the test above: the same upload, not refused,
    // does reach the spool mid-way, so a zero there means something.
    each_runtime(|runtime| {
        let (spooled, status) = upload(runtime, "/kept");
        // Echo takes no uploads: the handler's default answer to one.
        assert_eq!(status, 413, "{runtime:?}");
        assert!(spooled > 0, "{runtime:?}: nothing spooled mid-upload");
    });
}

#[test]
fn a_refused_upload_whose_stream_is_corrupt_is_still_400() {
    // D5: a content that does not decode (level 4) wins over the
    // application's refusal (level 6), even when nothing is stored.
    each_runtime(|runtime| {
        let server = start(runtime, Echo, options(ServerConfig::default(), 1));
        let mut stream = connect(server.addr);
        let (envelope, end) = put_parts("/refuse", "gzip");
        stream.write_all(envelope.as_bytes()).expect("envelope");
        // Valid base64, not a gzip stream.
        stream
            .write_all("QUJD".repeat(50_000).as_bytes())
            .expect("content");
        stream.write_all(end.as_bytes()).expect("end");
        let mut reader = Reader::new(stream);
        let answer = reader.next().expect("an answer");
        assert_eq!(code(&answer), 400, "{runtime:?}: {answer}");
        server.shutdown_and_join();
    });
}

/// Where a router is served: as a handler on each runtime, or as a tower
/// service on tokio with the router as its hooks.
#[derive(Debug, Clone, Copy)]
enum Served {
    Handler(Runtime),
    #[cfg(feature = "tower")]
    Service,
}

/// Every way this build can serve a router.
fn every_way() -> Vec<Served> {
    let mut ways: Vec<Served> = RUNTIMES.iter().map(|&r| Served::Handler(r)).collect();
    #[cfg(feature = "tower")]
    ways.push(Served::Service);
    ways
}

/// A router serving one route: `PUT /kept` takes its content and says how
/// much it got.
fn kept_router() -> Router {
    Router::new().route(
        "/kept",
        put(|content: Content| format!("kept {} bytes", content.len())),
    )
}

/// A running server, whichever way it serves.
enum Server {
    Handler(crate::support::Running),
    #[cfg(feature = "tower")]
    Service(crate::on_tokio::OnTokio),
}

impl Server {
    fn start(way: Served, router: Router, options: ServerOptions) -> Server {
        match way {
            Served::Handler(runtime) => Server::Handler(start(runtime, router, options)),
            #[cfg(feature = "tower")]
            Served::Service => Server::Service(crate::on_tokio::on_tokio(move |listener, shutdown| {
                use jsontp_protocol::io_adapters::server::tokio::serve_service;
                // Behind a layer, as applications serve it.
                let service = tower::ServiceBuilder::new()
                    .timeout(Duration::from_secs(10))
                    .service(router.clone());
                serve_service(listener, service, router, options, shutdown)
            })),
        }
    }

    fn addr(&self) -> std::net::SocketAddr {
        match self {
            Server::Handler(running) => running.addr,
            #[cfg(feature = "tower")]
            Server::Service(on_tokio) => on_tokio.addr,
        }
    }

    fn shutdown(self) {
        match self {
            Server::Handler(running) => {
                running.shutdown_and_join();
            }
            #[cfg(feature = "tower")]
            Server::Service(on_tokio) => {
                (on_tokio.stop)();
                on_tokio
                    .thread
                    .join()
                    .expect("server thread")
                    .expect("server run");
            }
        }
    }
}

/// A spool in a folder of its own, whose content past 4 KiB goes to a
/// file; the folder is removed when the guard drops.
fn spool_in_folder() -> (SpoolOptions, tempfile::TempDir) {
    let folder = tempfile::tempdir().expect("spool folder");
    let spool = SpoolOptions::default()
        .with_memory_limit(4096)
        .with_folder(folder.path());
    (spool, folder)
}

/// Nothing left of any upload: no byte of the budget taken, no file open
/// or listed in the spool folder.
#[track_caller]
fn assert_nothing_kept(spool: &SpoolOptions, folder: &Path, what: &str) {
    assert_eq!((spool.spooled_bytes(), files_in(folder).len()), (0, 0), "{what}");
}

/// The files of `folder` this process holds open, named or not (a spooled
/// upload has no name on Linux), and those listed in it.
fn files_in(folder: &Path) -> Vec<String> {
    let folder = folder.canonicalize().expect("folder");
    let mut found: Vec<String> = std::fs::read_dir(&folder)
        .expect("list")
        .flatten()
        .map(|e| e.path().display().to_string())
        .collect();
    #[cfg(target_os = "linux")]
    found.extend(
        std::fs::read_dir("/proc/self/fd")
            .expect("descriptors")
            .flatten()
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .filter(|target| target.starts_with(&folder))
            .map(|target| target.display().to_string()),
    );
    found
}

/// What a server kept of a streamed request while it arrived.
struct Watched {
    /// The most the spool held at any look.
    most_spooled: u64,
    /// Files the spool had at any look.
    files: Vec<String>,
    answer: Value,
}

/// Sends `envelope`, then `content` (the content's text) in 256 KiB
/// pieces, looking at the spool and its folder after each; halfway, gives
/// the server up to 300 ms to have spooled something. Then the message's
/// end, and the answer.
fn watch_upload(
    addr: std::net::SocketAddr,
    message: (String, &str),
    content: &[u8],
    spool: &SpoolOptions,
    folder: &Path,
) -> Watched {
    watch_upload_on(Reader::new(connect(addr)), message, content, spool, folder)
}

/// [`watch_upload`] on a connection already open (after a handshake).
fn watch_upload_on(
    reader: Reader,
    (envelope, end): (String, &str),
    content: &[u8],
    spool: &SpoolOptions,
    folder: &Path,
) -> Watched {
    // Besides the looks between pieces, one every millisecond from
    // another thread, which sees what is spooled after the message's end
    // and deleted before the answer.
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            let mut most = 0;
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                most = spool.spooled_bytes().max(most);
                std::thread::sleep(Duration::from_millis(1));
            }
            most
        });
        let mut watched = watch_between_pieces(reader, (envelope, end), content, spool, folder);
        done.store(true, std::sync::atomic::Ordering::Release);
        let sampled = sampler.join().expect("sampler");
        watched.most_spooled = watched.most_spooled.max(sampled);
        watched
    })
}

/// What [`watch_upload_on`] sees from its own thread.
fn watch_between_pieces(
    reader: Reader,
    (envelope, end): (String, &str),
    content: &[u8],
    spool: &SpoolOptions,
    folder: &Path,
) -> Watched {
    let mut reader = reader;
    let stream = &mut reader.stream;
    stream.write_all(envelope.as_bytes()).expect("envelope");
    let (mut most_spooled, mut files) = (0, Vec::new());
    let look = |most: &mut u64, files: &mut Vec<String>| {
        *most = (*most).max(spool.spooled_bytes());
        files.extend(files_in(folder));
    };
    let half = content.len() / 2;
    let mut sent = 0;
    for piece in content.chunks(256 << 10) {
        stream.write_all(piece).expect("content");
        let before = sent;
        sent += piece.len();
        look(&mut most_spooled, &mut files);
        if before < half && sent >= half {
            let until = Instant::now() + Duration::from_millis(300);
            while most_spooled == 0 && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
                look(&mut most_spooled, &mut files);
            }
        }
    }
    stream.write_all(end.as_bytes()).expect("end");
    let answer = reader.next().expect("an answer");
    look(&mut most_spooled, &mut files);
    Watched {
        most_spooled,
        files,
        answer,
    }
}

#[test]
fn a_router_stores_nothing_of_an_upload_to_a_route_it_refuses_on_every_server() {
    // D19: a path no route serves (404) and a method the route does not
    // serve (405) are refused whatever the content: none of it reaches
    // the spool, on any server. A route that takes the upload shows the
    // same look sees one stored.
    for way in every_way() {
        let (spool, folder) = spool_in_folder();
        let server = Server::start(
            way,
            kept_router(),
            options(ServerConfig::default(), 1).with_spool(spool.clone()),
        );
        let content = vec![b'x'; 4 << 20];
        for (method, resource, status) in [("PUT", "/nowhere", 404), ("POST", "/kept", 405)] {
            let message = parts(method, resource, "identity", "{}");
            let got = watch_upload(server.addr(), message, &content, &spool, folder.path());
            assert_eq!(
                code(&got.answer),
                status,
                "{way:?} {method} {resource}: {}",
                got.answer
            );
            assert_eq!(
                got.most_spooled, 0,
                "{way:?} {method} {resource}: bytes were spooled"
            );
            assert_eq!(got.files, Vec::<String>::new(), "{way:?} {method} {resource}");
        }
        let message = parts("PUT", "/kept", "identity", "{}");
        let got = watch_upload(server.addr(), message, &content, &spool, folder.path());
        assert_eq!(code(&got.answer), 200, "{way:?}: {}", got.answer);
        assert_eq!(got.answer["body"]["content"], format!("kept {} bytes", 4 << 20));
        assert!(
            got.most_spooled > 0,
            "{way:?}: the upload taken was never seen spooled"
        );
        assert!(!got.files.is_empty(), "{way:?}: the upload taken had no file");
        assert_eq!(spool.spooled_bytes(), 0, "{way:?}: given back once answered");
        server.shutdown();
    }
}

#[test]
fn content_the_router_answers_without_is_checked_and_dropped() {
    // OPTIONS is answered from the routes whatever the content (D11): the
    // content is not wanted, streamed or after a handshake the router was
    // asked about (D10), and the answer is the one a whole message gets.
    let config = ServerConfig {
        continue_policy: ContinuePolicy::Ask,
        ..ServerConfig::default()
    };
    for way in every_way() {
        let (spool, folder) = spool_in_folder();
        let server = Server::start(
            way,
            kept_router(),
            options(config.clone(), 1).with_spool(spool.clone()),
        );
        let message = parts("OPTIONS", "/kept", "identity", "{}");
        let got = watch_upload(server.addr(), message, &[b'x'; 2 << 20], &spool, folder.path());
        assert_eq!(code(&got.answer), 200, "{way:?}: {}", got.answer);
        assert_eq!(
            got.answer["body"]["allowed-methods"],
            serde_json::json!(["PUT", "OPTIONS"])
        );
        assert_eq!((got.most_spooled, got.files.len()), (0, 0), "{way:?}: stored");

        // The same after a handshake: acknowledged, its content dropped.
        let mut reader = Reader::new(connect(server.addr()));
        reader.send(&crate::support::continue_request("OPTIONS", "/kept"));
        assert_eq!(code(&reader.expect()), 100, "{way:?}");
        let (envelope, end) = parts("OPTIONS", "/kept", "identity", "{}");
        reader.send(&envelope);
        let piece = "x".repeat(256 << 10);
        for _ in 0..8 {
            reader.send(&piece);
            assert_eq!(
                spool.spooled_bytes(),
                0,
                "{way:?}: the full request's content was stored"
            );
        }
        reader.send(end);
        let answer = reader.expect();
        assert_eq!(code(&answer), 200, "{way:?}: {answer}");
        assert_nothing_kept(&spool, folder.path(), &format!("{way:?}"));
        server.shutdown();
    }
}

/// Bytes that do not compress: each from the one before, by a step of
/// xorshift.
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// `bytes` compressed with gzip, as base64 (D9).
fn gzip_base64(bytes: &[u8]) -> String {
    use base64::Engine;
    use flate2::{Compression, write::GzEncoder};
    let mut gzip = GzEncoder::new(Vec::new(), Compression::fast());
    gzip.write_all(bytes).expect("compress");
    base64::engine::general_purpose::STANDARD.encode(gzip.finish().expect("finish"))
}

#[test]
fn a_corrupt_upload_to_a_route_the_router_refuses_is_still_400() {
    // D5: content that does not decode (level 4) wins over the router's
    // 404 (level 6), though nothing of it is stored. The stream decodes
    // for megabytes before it is found cut short.
    let mut content = gzip_base64(&noise(3 << 20));
    content.truncate(content.len() - 400);
    for way in every_way() {
        let (spool, folder) = spool_in_folder();
        let server = Server::start(
            way,
            kept_router(),
            options(ServerConfig::default(), 1).with_spool(spool.clone()),
        );
        let message = parts("PUT", "/nowhere", "gzip", "{}");
        let got = watch_upload(server.addr(), message, content.as_bytes(), &spool, folder.path());
        assert_eq!(code(&got.answer), 400, "{way:?}: {}", got.answer);
        let why = got.answer["status"]["human-message"].as_str().unwrap_or_default();
        assert!(why.contains("gzip"), "{way:?}: {why}");
        assert_eq!(got.most_spooled, 0, "{way:?}: bytes were spooled");
        assert_eq!(got.files, Vec::<String>::new(), "{way:?}");
        // The same stream whole, to the route that takes it: 400 too.
        let message = parts("PUT", "/kept", "gzip", "{}");
        let got = watch_upload(server.addr(), message, content.as_bytes(), &spool, folder.path());
        assert_eq!(code(&got.answer), 400, "{way:?}: {}", got.answer);
        assert!(
            got.most_spooled > 0,
            "{way:?}: the content taken was never seen spooled"
        );
        assert_nothing_kept(&spool, folder.path(), &format!("{way:?}"));
        server.shutdown();
    }
}

#[test]
fn a_compression_bomb_to_a_refused_route_stops_at_the_content_limit() {
    // D19, D5 level 1: refused content is decoded within the same content
    // limit as any, and past it the answer is 413 and the close, not the
    // router's 404: decoding stops there, and nothing is stored on the way.
    let bomb = gzip_base64(&vec![0u8; 64 << 20]);
    assert!(bomb.len() < 1 << 20, "{} bytes on the wire", bomb.len());
    let limit = 4 << 20;
    // A start of it that decodes to less than the limit, but megabytes:
    // what the server holds while the message goes on.
    let start = {
        use base64::Engine;
        let mut start = bomb.len() / 64 / 4 * 4;
        let decoded = |text: &str| {
            let compressed = base64::engine::general_purpose::STANDARD
                .decode(text)
                .expect("base64");
            let mut out = Vec::new();
            let mut gunzip = flate2::write::GzDecoder::new(&mut out);
            let _ = gunzip.write_all(&compressed);
            let _ = gunzip.flush();
            drop(gunzip);
            out.len()
        };
        while decoded(&bomb[..start]) >= limit / 2 {
            start = start / 2 / 4 * 4;
        }
        assert!(decoded(&bomb[..start]) > 256 << 10, "{start}");
        start
    };
    let mut config = ServerConfig::default();
    config.limits.max_content_bytes = limit;
    for way in every_way() {
        let (spool, folder) = spool_in_folder();
        let server = Server::start(
            way,
            kept_router(),
            options(config.clone(), 1).with_spool(spool.clone()),
        );
        let (envelope, end) = parts("PUT", "/nowhere", "gzip", "{}");
        let mut reader = Reader::new(connect(server.addr()));
        reader.send(&envelope);
        reader.send(&bomb[..start]);
        // Long enough for a server that stored the start to show it.
        let until = Instant::now() + Duration::from_millis(300);
        while spool.spooled_bytes() == 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(spool.spooled_bytes(), 0, "{way:?}: the start was stored");
        assert_eq!(files_in(folder.path()), Vec::<String>::new(), "{way:?}");
        let started = Instant::now();
        // The server may close before it has read all of it.
        let _ = reader.stream.write_all(&bomb.as_bytes()[start..]);
        let _ = reader.stream.write_all(end.as_bytes());
        let answer = reader.expect();
        assert_eq!(code(&answer), 413, "{way:?}: {answer}");
        assert!(reader.closed(), "{way:?}: 413 past the content limit closes");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{way:?}: {:?}",
            started.elapsed()
        );
        assert_nothing_kept(&spool, folder.path(), &format!("{way:?}"));
        server.shutdown();
    }
}

#[test]
fn an_auto_accepted_handshake_to_a_route_the_router_refuses_stores_nothing() {
    // D10 AutoAccept: the `100` goes out without asking the router, which
    // then meets the exchange at the full request's head, before its
    // content (D19). A path no route serves (404) and a method the route
    // does not serve (405) stay refused after the `100`: a small gzip
    // stream that decodes to megabytes, or one that does not compress, is
    // checked and dropped, never spooled, and the answer is the router's.
    // The same handshake to the route that takes content shows the same
    // look sees one stored.
    let bomb = gzip_base64(&vec![0u8; 64 << 20]);
    assert!(bomb.len() < 1 << 20, "{} bytes on the wire", bomb.len());
    let noisy = gzip_base64(&noise(4 << 20));
    let config = ServerConfig {
        continue_policy: ContinuePolicy::AutoAccept,
        ..ServerConfig::default()
    };
    let handshake = |addr, method: &str, resource: &str, way: Served| {
        let mut reader = Reader::new(connect(addr));
        reader.send(&crate::support::continue_request(method, resource));
        let ack = reader.expect();
        assert_eq!(code(&ack), 100, "{way:?} {method} {resource}: {ack}");
        reader
    };
    for way in every_way() {
        let (spool, folder) = spool_in_folder();
        let server = Server::start(
            way,
            kept_router(),
            options(config.clone(), 1).with_spool(spool.clone()),
        );
        for (method, resource, status) in [("PUT", "/nowhere", 404), ("POST", "/kept", 405)] {
            for content in [&bomb, &noisy] {
                let reader = handshake(server.addr(), method, resource, way);
                let message = parts(method, resource, "gzip", "{}");
                let got = watch_upload_on(reader, message, content.as_bytes(), &spool, folder.path());
                let what = format!("{way:?} {method} {resource}, {} bytes sent", content.len());
                assert_eq!(code(&got.answer), status, "{what}: {}", got.answer);
                assert_eq!(got.most_spooled, 0, "{what}: bytes were spooled");
                assert_eq!(got.files, Vec::<String>::new(), "{what}");
            }
        }
        let reader = handshake(server.addr(), "PUT", "/kept", way);
        let message = parts("PUT", "/kept", "gzip", "{}");
        let got = watch_upload_on(reader, message, noisy.as_bytes(), &spool, folder.path());
        assert_eq!(code(&got.answer), 200, "{way:?}: {}", got.answer);
        assert_eq!(got.answer["body"]["content"], format!("kept {} bytes", 4 << 20));
        assert!(
            got.most_spooled > 0,
            "{way:?}: the upload taken was never seen spooled"
        );
        assert!(!got.files.is_empty(), "{way:?}: the upload taken had no file");
        assert_nothing_kept(
            &spool,
            folder.path(),
            &format!("{way:?}: given back once answered"),
        );
        server.shutdown();
    }
}

/// A request of `method` written with its content before its head: `body`
/// first, every other field after it (`body_first`), or `content` before
/// `encoding`. The envelope up to the content's text, and the rest.
fn content_before_head(method: &str, resource: &str, encoding: &str, body_first: bool) -> (String, String) {
    let fields = format!(
        r#""jsontp":"1.0","type":"request","resource":"{resource}","method":"{method}","headers":{{}}"#
    );
    if body_first {
        (
            format!(r#"{{"body":{{"encoding":"{encoding}","content":""#),
            format!("\"}},{fields}}}\n"),
        )
    } else {
        (
            format!(r#"{{{fields},"body":{{"content":""#),
            format!("\",\"encoding\":\"{encoding}\"}}}}\n"),
        )
    }
}

#[test]
fn content_written_before_its_head_to_a_route_the_router_refuses_stores_nothing() {
    // D19: content written before the fields that make the request's head
    // (`body` first), or before its encoding, is held within the message
    // limit until the message ends; the router is then asked about the
    // head before any of it is decoded, so a small gzip stream that
    // decodes to 64 MiB, sent to a path no route serves, is checked and
    // dropped: nothing reaches the spool, whose budget (8 MiB) it would
    // pass (503). The route that takes content shows both sides: a small
    // upload is kept, and the large one goes to the spool, past its
    // budget.
    let bomb = gzip_base64(&vec![0u8; 64 << 20]);
    assert!(bomb.len() < 1 << 20, "{} bytes on the wire", bomb.len());
    let small = gzip_base64(&noise(256 << 10));
    for way in every_way() {
        let (spool, folder) = spool_in_folder();
        let spool = spool.with_max_total(8 << 20);
        let server = Server::start(
            way,
            kept_router(),
            options(ServerConfig::default(), 1).with_spool(spool.clone()),
        );
        for body_first in [true, false] {
            let send = |resource: &str, content: &str| {
                let (envelope, end) = content_before_head("PUT", resource, "gzip", body_first);
                let message = (envelope, end.as_str());
                watch_upload(server.addr(), message, content.as_bytes(), &spool, folder.path())
            };
            let what = format!("{way:?} body first: {body_first}");
            let got = send("/nowhere", &bomb);
            assert_eq!(code(&got.answer), 404, "{what}: {}", got.answer);
            assert_eq!(got.most_spooled, 0, "{what}: bytes were spooled");
            assert_eq!(got.files, Vec::<String>::new(), "{what}");
            let got = send("/kept", &small);
            assert_eq!(code(&got.answer), 200, "{what}: {}", got.answer);
            assert_eq!(got.answer["body"]["content"], format!("kept {} bytes", 256 << 10));
            let got = send("/kept", &bomb);
            assert_eq!(code(&got.answer), 503, "{what}: {}", got.answer);
            assert_nothing_kept(
                &spool,
                folder.path(),
                &format!("{what}: given back once answered"),
            );
        }
        server.shutdown();
    }
}

#[test]
fn content_no_one_takes_is_checked_and_never_stored() {
    // The content of a request refused for its envelope (an unsupported
    // version, 505: D5 level 2), and the body of a handshake's first
    // request, which is ignored (D10), reach no one whatever they hold:
    // each is decoded and checked as D5 requires, and dropped, never
    // spooled (D19). A small gzip stream that decodes to 64 MiB, written
    // last as streaming senders write it.
    let bomb = gzip_base64(&vec![0u8; 64 << 20]);
    let fields = |version: &str, headers: &str| {
        format!(
            r#"{{"jsontp":"{version}","type":"request","resource":"/kept","method":"PUT","headers":{headers},"body":{{"encoding":"gzip","content":""#
        )
    };
    for way in every_way() {
        let (spool, folder) = spool_in_folder();
        let server = Server::start(
            way,
            kept_router(),
            options(ServerConfig::default(), 1).with_spool(spool.clone()),
        );
        for (envelope, status) in [
            (fields("9.0", "{}"), 505),
            (fields("1.0", r#"{"expect":"100-continue"}"#), 100),
        ] {
            let message = (envelope, "\"}}\n");
            let got = watch_upload(server.addr(), message, bomb.as_bytes(), &spool, folder.path());
            assert_eq!(code(&got.answer), status, "{way:?}: {}", got.answer);
            assert_eq!(got.most_spooled, 0, "{way:?} {status}: bytes were spooled");
            assert_eq!(got.files, Vec::<String>::new(), "{way:?} {status}");
        }
        server.shutdown();
    }
}
