//! The message layer's speed: parsing and validating a typical
//! small request must cost no more than `serde_json::from_slice::<Value>`
//! of the same bytes; the cost of writing a typical response; and of
//! encoding small and larger content in each encoding.
//!
//! `cargo bench --bench message -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use jsontp_protocol::message::{
    Body, ContentDecoder, ContentEncoder, Date, Encoding, Headers, LanguageTag, MediaType, MessageLimits,
    RequestContext, Response, Status, StatusCode, Validation, codec, parse_request, parse_response,
};

/// Requests of the kinds a file server receives: small GETs, GETs with
/// headers, a PUT with content.
const REQUESTS: &[(&str, &str)] = &[
    (
        "minimal GET",
        r#"{"jsontp":"1.0","type":"request","resource":"/hello.txt","method":"GET","headers":{},"body":{"content":"","encoding":"identity"}}"#,
    ),
    (
        "GET with headers",
        r#"{"jsontp":"1.0","type":"request","resource":"/hello.txt","method":"GET","headers":{"accept-encoding":["gzip","identity"],"accept-language":"en-US","if-modified-since":"2021-06-01T00:00:00Z+0000"},"body":{"content":"","encoding":"identity"}}"#,
    ),
    (
        "PUT with content",
        r#"{"jsontp":"1.0","type":"request","resource":"/cont-put.txt","method":"PUT","headers":{"content-type":"text/plain","authorization":"s3cret"},"body":{"content":"sent after continue","encoding":"identity"}}"#,
    ),
];

fn parse(c: &mut Criterion) {
    let limits = MessageLimits::default();
    for (name, text) in REQUESTS {
        let bytes = text.as_bytes();
        assert!(parse_request(bytes, RequestContext::Fresh, &limits).is_ok());
        let mut group = c.benchmark_group(*name);
        group.bench_function("parse_request", |b: &mut criterion::Bencher| {
            b.iter(|| parse_request(black_box(bytes), RequestContext::Fresh, &limits))
        });
        group.bench_function("serde_json Value", |b: &mut criterion::Bencher| {
            b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(bytes)))
        });
        group.finish();
    }
}

/// The two measured in alternating blocks of 64 calls (which goes first
/// alternates too), so that the load of a shared machine falls on both alike: criterion reports the time of
/// `parse_request`, and the ratio of the two totals is printed at the end.
// A bench owns the clock: it times the two itself.
#[allow(clippy::disallowed_methods)]
fn parse_interleaved(c: &mut Criterion) {
    let limits = MessageLimits::default();
    let mut group = c.benchmark_group("interleaved");
    for (name, text) in REQUESTS {
        let bytes = text.as_bytes();
        let (mut ours, mut value) = (Duration::ZERO, Duration::ZERO);
        group.bench_function(*name, |b: &mut criterion::Bencher| {
            b.iter_custom(|iters| {
                let ours_block = |n: u64| {
                    let start = Instant::now();
                    for _ in 0..n {
                        black_box(parse_request(black_box(bytes), RequestContext::Fresh, &limits).is_ok());
                    }
                    start.elapsed()
                };
                let value_block = |n: u64| {
                    let start = Instant::now();
                    for _ in 0..n {
                        black_box(serde_json::from_slice::<serde_json::Value>(black_box(bytes)).is_ok());
                    }
                    start.elapsed()
                };
                let mut mine = Duration::ZERO;
                let mut done = 0;
                let mut ours_first = true;
                while done < iters {
                    let block = (iters - done).min(64);
                    // Which one runs first alternates, so neither always
                    // finds the caches and the allocator as the other left them.
                    if ours_first {
                        mine += ours_block(block);
                        value += value_block(block);
                    } else {
                        value += value_block(block);
                        mine += ours_block(block);
                    }
                    ours_first = !ours_first;
                    done += block;
                }
                ours += mine;
                mine
            })
        });
        println!(
            "{name}: parse_request / serde_json::from_slice::<Value> = {:.2}",
            ours.as_secs_f64() / value.as_secs_f64()
        );
    }
    group.finish();
}

fn serialize(c: &mut Criterion) {
    let response = Response::new(Status::new(StatusCode::OK, "here it is"))
        .with_resource("/hello.txt")
        .with_headers(
            Headers::new()
                .with_content_type("text/plain".parse::<MediaType>().expect("a media type"))
                .with_date(Date::from_unix_seconds(1_700_000_000))
                .with_language(LanguageTag::EN_US),
        )
        .with_body(Body::text("Hello, world!"));
    let mut out = Vec::with_capacity(512);
    c.bench_function("serialize 200 text response", |b| {
        b.iter(|| {
            out.clear();
            black_box(&response).write_to(&mut out);
            out.len()
        })
    });
}

/// Encoding content of a small answer (100 bytes), just under the size
/// where Brotli switches to its slower quality (1000), and past it (4 KiB);
/// and decoding what was written, which is the peer's cost.
fn encode(c: &mut Criterion) {
    let text = include_str!("../docs/protocol-rules.md").as_bytes();
    let limit = MessageLimits::default().max_decoded_body;
    let mut group = c.benchmark_group("encode");
    for size in [100, 1000, 4096] {
        for encoding in [Encoding::Gzip, Encoding::Br] {
            group.bench_function(format!("{encoding} {size} bytes"), |b| {
                b.iter(|| codec::encode(black_box(&text[..size]), encoding).len())
            });
            let written = codec::encode(&text[..size], encoding);
            group.bench_function(format!("decode {encoding} {size} bytes"), |b| {
                b.iter(|| codec::decode(black_box(&written), encoding, limit).map(|d| d.len()))
            });
        }
    }
    group.finish();
}

/// Large content streamed through the codecs, as a download's server and
/// client run them, in 64 KiB pieces: what a byte costs each side, the
/// bound of a transfer that D9 makes travel as text (BENCHMARKS.md, "Large
/// transfers"). 4 MiB of random bytes as `gzip` (stored: they do not
/// compress) and of text as `identity`.
fn large(c: &mut Criterion) {
    const SIZE: usize = 4 << 20;
    const PIECE: usize = 64 * 1024;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let random: Vec<u8> = (0..SIZE)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let rules = include_str!("../docs/protocol-rules.md").as_bytes();
    let text = rules.repeat(SIZE / rules.len() + 1)[..SIZE].to_vec();
    // Text with an escape every eighteen bytes or so, as the transfer
    // bench's file (scripts/transfer-bench.sh).
    let line: &[u8] = b"the quick brown fox jumps over the lazy dog, 0123456789 \"quoted\" \\ back\n";
    let escaped_text = line.repeat(SIZE / line.len() + 1)[..SIZE].to_vec();
    let mut group = c.benchmark_group("large");
    group.throughput(criterion::Throughput::Bytes(SIZE as u64));
    group.sample_size(10);
    for (name, content, encoding) in [
        ("random bytes", &random, Encoding::Gzip),
        ("text", &text, Encoding::Identity),
        ("escaped text", &escaped_text, Encoding::Identity),
    ] {
        let encode = |content: &[u8]| {
            let mut encoder = ContentEncoder::new(encoding);
            let mut out = Vec::with_capacity(content.len() / 3 * 4 + 1024);
            for piece in content.chunks(PIECE) {
                encoder.encode(piece, &mut out).expect("encodes");
            }
            encoder.finish(&mut out).expect("ends");
            out
        };
        group.bench_function(format!("encode {name} ({encoding})"), |b| {
            b.iter(|| encode(black_box(content)).len())
        });
        let written = encode(content);
        // The client's whole read path: the framing scanner, the machine
        // and the decoder, as `jsontp get` runs them on a download.
        let response = streamed_response(&written, encoding);
        group.bench_function(format!("client receives {name} ({encoding})"), |b| {
            b.iter(|| client_receives(black_box(&response)))
        });
        if encoding == Encoding::Identity {
            // The same response read whole, as a client that does not
            // stream content reads it: the lexer, the reader and the
            // string's decoding.
            let limits = MessageLimits {
                max_message_bytes: 2 * response.len(),
                max_decoded_body: 2 * SIZE,
                ..MessageLimits::default()
            };
            group.bench_function(format!("parse whole {name} ({encoding})"), |b| {
                b.iter(|| {
                    let parsed =
                        parse_response(black_box(&response), Validation::Strict, &limits).expect("parses");
                    parsed.message.body.content().len()
                })
            });
        }
        group.bench_function(format!("decode {name} ({encoding})"), |b| {
            b.iter(|| {
                let mut decoder = ContentDecoder::new(encoding, usize::MAX);
                let mut out = Vec::with_capacity(SIZE);
                for piece in written.chunks(PIECE) {
                    decoder
                        .decode(black_box(piece), &mut out, usize::MAX)
                        .expect("decodes");
                }
                while !decoder.finish(&mut out, usize::MAX).expect("ends") {}
                assert_eq!(out.len(), SIZE);
                out.len()
            })
        });
    }
    group.finish();
}

/// A `200` whose content is `written`, the text of `encoding`, as a server
/// streams it: `body` last, `content` last in it (D19).
fn streamed_response(written: &[u8], encoding: Encoding) -> Vec<u8> {
    let mut message = format!(
        "{{\"jsontp\":\"1.0\",\"type\":\"response\",\"resource\":\"/big\",\"status\":{{\"code\":200,\
         \"formal-message\":\"OK\",\"human-message\":\"here is the file\"}},\"headers\":{{\
         \"date\":\"2026-11-26T12:00:00Z+0000\",\"language\":\"en-US\"}},\
         \"body\":{{\"encoding\":\"{encoding}\",\"content\":\""
    )
    .into_bytes();
    message.extend_from_slice(written);
    message.extend_from_slice(b"\"}}\n");
    message
}

/// Feeds `response` to a streaming client machine that asked for it, in
/// 64 KiB reads, and takes its content as it comes: how many bytes.
fn client_receives(response: &[u8]) -> usize {
    use jsontp_protocol::machine::{ClientConfig, ClientConnection, ClientEvent, Now};
    use jsontp_protocol::message::{Method, Request};
    // Benchmarks own the clock, like an adapter.
    #[allow(clippy::disallowed_methods)]
    let now = Now {
        instant: Instant::now(),
        wall: Date::from_unix_seconds(1_795_000_000),
    };
    let config = ClientConfig {
        stream_content: true,
        ..ClientConfig::default()
    };
    let mut client = ClientConnection::new(config, now);
    let get = Request::new(Method::Get, "/big".parse().expect("a resource"));
    client.send_request(get, now).expect("sent");
    let sent = client.pending_output().len();
    client.consume_output(sent, now);
    let mut content = 0;
    let mut answered = false;
    for read in response.chunks(64 * 1024) {
        client.receive_data(read, now);
        while let Some(event) = client.next_event(now) {
            match event {
                ClientEvent::Content { data, .. } => content += data.len(),
                ClientEvent::Response { .. } => answered = true,
                // The head before the pieces, advisory: the response follows.
                ClientEvent::ContentHead { .. } => {}
                other => panic!("{other:?}"),
            }
        }
    }
    assert!(answered, "the response came");
    content
}

criterion_group!(benches, parse, parse_interleaved, serialize, encode, large);
criterion_main!(benches);
