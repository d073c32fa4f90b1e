//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/*`) through the
//! same harness the fuzz targets run, so that every input that once found a
//! bug, and every seed, is checked by an ordinary `cargo test`.

#[path = "../fuzz/harness.rs"]
mod harness;
// Each includes `fuzz/pair.rs`, as each fuzz target builds alone.
#[allow(clippy::duplicate_mod)]
#[path = "../fuzz/simulation.rs"]
mod simulation;

use std::fs;
use std::path::Path;

fn replay(target: &str, run: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut entries: Vec<_> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a readable corpus entry").path())
        .collect();
    entries.sort();
    assert!(!entries.is_empty(), "the corpus of {target} is empty");
    for path in entries {
        let data = fs::read(&path).expect("a readable corpus file");
        let outcome = std::panic::catch_unwind(|| run(&data));
        assert!(outcome.is_ok(), "{target} failed on {}", path.display());
    }
}

#[test]
fn parse_message_corpus() {
    replay("parse_message", harness::parse_message);
}

#[test]
fn scanner_corpus() {
    replay("scanner", harness::scanner);
}

#[test]
fn server_connection_corpus() {
    replay("server_connection", harness::server_connection);
}

#[test]
fn client_connection_corpus() {
    replay("client_connection", harness::client_connection);
}

#[test]
fn body_decode_corpus() {
    replay("body_decode", harness::body_decode);
}

#[test]
fn content_pieces_corpus() {
    replay("content_pieces", harness::content_pieces);
}

#[test]
fn scan_differential_corpus() {
    replay("scan_differential", harness::scan_differential);
}

#[test]
fn pair_corpus() {
    replay("pair", harness::pair);
}

#[test]
fn serving_corpus() {
    replay("serving", simulation::serving);
}

#[test]
fn calling_corpus() {
    replay("calling", simulation::client::calling);
}
