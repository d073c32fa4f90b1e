//! The one-pass reader of whole messages (`src/message/quick.rs`) against
//! the general path, on every message the conformance suite sends: it
//! reads the common ones, and whatever it reads it frames and reads as the
//! lexer and the parsers do (D1).

use jsontp_protocol::message::oracles::{quick_reader_agrees, quick_reader_reads};
use serde_json::Value;

#[test]
fn agrees_on_the_conformance_suites_messages() {
    let cases = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance/cases");
    let Ok(files) = std::fs::read_dir(&cases) else {
        // The suite sits beside the repository on the team's machines and
        // in CI, which runs it; a clone on its own has nothing to compare.
        eprintln!("no conformance suite at {}: nothing compared", cases.display());
        return;
    };
    let (mut sent, mut read) = (0, 0);
    for file in files {
        let text = std::fs::read_to_string(file.expect("a case file").path()).expect("readable");
        let cases: Value = serde_json::from_str(&text).expect("the cases are JSON");
        let mut messages = Vec::new();
        collect_messages(&cases, &mut messages);
        for message in messages.iter().filter(|m| m.trim_start().starts_with('{')) {
            assert!(quick_reader_agrees(message.as_bytes()), "{message}");
            sent += 1;
            read += usize::from(quick_reader_reads(message.as_bytes()));
        }
    }
    assert!(read > 50 && read * 2 > sent, "read {read} of {sent} messages");
}

/// Every message a case sends: objects written out compactly and pretty,
/// and the raw strings.
fn collect_messages(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect_messages(v, out)),
        Value::Object(map) => {
            for (key, v) in map {
                if key == "send" && v.is_object() {
                    out.push(v.to_string());
                    out.push(serde_json::to_string_pretty(v).expect("serialisable"));
                } else {
                    collect_messages(v, out);
                }
            }
        }
        _ => {}
    }
}
