//! A request refused whatever its content stores none of it (D19): the
//! serving layer asks the handler's envelope check when the content starts
//! and, on a refusal, reads and checks the content without writing it
//! anywhere. D5's order still holds: a corrupt stream is `400`, not the
//! refusal.

use std::io::Write;
use std::time::{Duration, Instant};

use jsontp_protocol::io_adapters::server::SpoolOptions;
use jsontp_protocol::machine::ServerConfig;

use crate::support::{Echo, Reader, code, connect, each_runtime, options, start};

/// A PUT written as streaming senders write it (D19): `body` last,
/// `content` last in it; the content's text is `content`, sent separately
/// from the envelope and the message's end.
fn put_parts(resource: &str, encoding: &str) -> (String, &'static str) {
    let envelope = format!(
        r#"{{"jsontp":"1.0","type":"request","resource":"{resource}","method":"PUT","headers":{{}},"body":{{"encoding":"{encoding}","content":""#
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
