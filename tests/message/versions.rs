//! The `jsontp` field (D6) and where its answers stand among the others (D5).

use jsontp_protocol::message::Version;
use serde_json::json;

use crate::sample_request::{code, header, ok, refused, with};

fn version(text: &str) -> serde_json::Value {
    with(|m| m["jsontp"] = json!(text))
}

#[test]
fn d6_numbers_are_read_by_value_whatever_their_length() {
    // Too long for any machine integer, still well-formed: 505, not 400.
    assert_eq!(code(&version("99999999999999999999.0")), 505);
    assert_eq!(code(&version("18446744073709551616.0")), 505);
    // A long minor of major 1 is supported.
    let r = ok(&version("1.99999999999999999999"));
    assert_eq!((r.version.major, r.version.minor), (1, u32::MAX));
    assert!(ok(&version("1.0-rc99999999999999999999")).version.is_supported());
    // Leading zeros: `01.0` is major 1; `00.9` and `002.0` are not.
    assert_eq!(ok(&version("01.0")).version, Version::V1_0);
    assert_eq!(ok(&version("0001.0003")).version.minor, 3);
    assert_eq!(code(&version("00.9")), 505);
    assert_eq!(code(&version("002.0")), 505);
    assert_eq!(
        refused(&version("99999999999999999999.0")).message,
        "version \"99999999999999999999.0\" is not supported; this implementation speaks major version 1 (D6)"
    );
}

#[test]
fn d6_only_the_form_decides_400() {
    for bad in [
        "1", "1.0.0", "v1.0", "1.0-beta", "1.0-rc", "", " 1.0", "1.0 ", "1.-0", "+1.0", "1,0", "1.0-RC1",
        "１.0", "1e3.0",
    ] {
        let e = refused(&version(bad));
        assert_eq!(e.status().as_u16(), 400, "{bad:?}");
        assert!(
            e.message.starts_with("field \"jsontp\""),
            "{bad:?}: {}",
            e.message
        );
    }
    for good in ["1.0", "1.0-rc1", "1.0-rc2", "1.3", "1.10-rc10"] {
        assert_eq!(ok(&version(good)).version.to_string(), good);
    }
}

#[test]
fn d5_the_version_answers_before_the_envelope() {
    // Level 2 (505) before level 3 (a malformed weight, an unknown header,
    // a method outside the five: 400) and level 4 (expect: 501).
    let both = |edit: fn(&mut serde_json::Value)| {
        let mut m = header("accept-encoding", json!("gzip;q=2"));
        m["jsontp"] = json!("2.0");
        edit(&mut m);
        code(&m)
    };
    assert_eq!(both(|_| {}), 505);
    assert_eq!(both(|m| m["headers"]["x-custom"] = json!(1)), 505);
    assert_eq!(both(|m| m["method"] = json!("PATCH")), 505);
    assert_eq!(both(|m| m["headers"]["expect"] = json!("200-ok")), 505);
    // A malformed version (400) names the version, not the weight.
    let mut m = header("accept-language", json!("en-US;q=high"));
    m["jsontp"] = json!("1");
    assert!(refused(&m).message.starts_with("field \"jsontp\""));
    // Without the version problem the weight is the 400.
    let e = refused(&header("accept-encoding", json!("gzip;q=2")));
    assert_eq!(e.status().as_u16(), 400);
    assert!(e.message.contains("accept-encoding"), "{}", e.message);
}
