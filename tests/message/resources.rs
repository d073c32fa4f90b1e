//! The `resource` field (D7): shapes, scheme, fragment, percent-decoding.

use jsontp_protocol::message::Resource;
use serde_json::json;

use crate::sample_request::{ok, refused, with};

fn res(s: &str) -> Resource {
    s.parse().unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

fn reason(s: &str) -> String {
    match s.parse::<Resource>() {
        Ok(r) => panic!("{s:?} was accepted as {r:?}"),
        Err(e) => e.reason().to_owned(),
    }
}

#[test]
fn d7_the_scheme_is_case_insensitive() {
    for scheme in ["jsontp", "JSONTP", "JsonTP", "jSoNtP"] {
        let r = res(&format!("{scheme}://localhost:8080/hello.txt"));
        assert!(r.has_scheme(), "{scheme}");
        assert_eq!(
            (r.host(), r.port(), r.path()),
            (Some("localhost"), Some(8080), "/hello.txt")
        );
    }
    // And the string is echoed as written (D7, D12).
    let m = with(|m| m["resource"] = json!("JSONTP://localhost/hello.txt"));
    assert_eq!(ok(&m).resource.as_str(), "JSONTP://localhost/hello.txt");
}

#[test]
fn d7_a_fragment_is_allowed_on_every_shape_and_ignored_for_lookup() {
    for (resource, path) in [
        ("/hello.txt#top", "/hello.txt"),
        ("/hello.txt?q=1#top", "/hello.txt"),
        ("hello.txt#top", "/hello.txt"),
        ("localhost/hello.txt#top", "/hello.txt"),
        ("localhost:8080/hello.txt#top", "/hello.txt"),
        ("localhost:8080/hello.txt?q#top", "/hello.txt"),
        ("jsontp://localhost:8080/hello.txt#top", "/hello.txt"),
        ("jsontp://localhost:8080#top", "/"),
        ("jsontp://localhost#top", "/"),
        ("/#", "/"),
    ] {
        let r = res(resource);
        assert_eq!(r.path(), path, "{resource}");
        assert!(r.fragment().is_some(), "{resource}");
    }
    // `..` or `%00` in the fragment are not the path's.
    assert_eq!(res("/a#/../../x%00").path(), "/a");
}

#[test]
fn d7_scheme_without_a_path_is_the_root() {
    assert_eq!(res("jsontp://localhost:8080").path(), "/");
    assert_eq!(res("jsontp://localhost").path(), "/");
    assert_eq!(res("jsontp://127.0.0.1:1?q=1").path(), "/");
    assert_eq!(res("jsontp://[::1]:9").path(), "/");
}

#[test]
fn d7_percent_decoding_happens_once_before_lookup() {
    assert_eq!(res("/sub%2Fpage.txt").path(), "/sub/page.txt");
    assert_eq!(res("/sub%2fpage.txt").path(), "/sub/page.txt");
    assert_eq!(res("/%2E%2E%2E").path(), "/...");
    assert_eq!(res("/a/%2e/b").path(), "/a/b");
    assert_eq!(res("/a/b/%2E%2E/c").path(), "/a/c");
    // Once: `%2541` is `%41`, not `A`.
    assert_eq!(res("/%2541").path(), "/%41");
    assert_eq!(res("/%252F").path(), "/%2F");
    // The `..` rule applies after decoding.
    for climbs in [
        "/%2E%2E/x",
        "/a/%2e%2e/%2e%2e/x",
        "/..%2Fx",
        "/a%2F..%2F..%2Fx",
        "%2e%2e",
    ] {
        assert_eq!(reason(climbs), "climbs above the root with ..", "{climbs}");
    }
}

#[test]
fn d7_bad_escapes_nul_and_non_utf8_are_400() {
    for bad in ["/%", "/%4", "/%G1", "/a%2", "/%%41"] {
        assert_eq!(reason(bad), "has a % not followed by two hex digits", "{bad}");
    }
    assert_eq!(reason("/a%00"), "has a percent-encoded NUL (%00)");
    for bad in ["/%FF", "/%C3", "/%C3%28", "/%ED%A0%80"] {
        assert_eq!(reason(bad), "is not UTF-8 once percent-decoded", "{bad}");
    }
    let e = refused(&with(|m| m["resource"] = json!("/a%00b")));
    assert_eq!((e.status().as_u16(), e.resource.as_str()), (400, "/a%00b"));
    assert!(e.message.contains("%00"), "{}", e.message);
}

#[test]
fn d7_characters_outside_ascii_are_ordinary() {
    assert_eq!(res("/caf\u{e9}.txt").path(), "/caf\u{e9}.txt");
    assert_eq!(res("/a\u{a0}b").path(), "/a\u{a0}b");
    assert_eq!(res("/caf%C3%A9").path(), "/caf\u{e9}");
    assert_eq!(res("/%C2%A0").path(), "/\u{a0}");
    assert_eq!(res("\u{e9}t\u{e9}/x").path(), "/\u{e9}t\u{e9}/x");
    // C1 controls are controls, not ordinary characters.
    assert_eq!(reason("/a\u{85}"), "contains a control character or a space");
}

#[test]
fn d7_and_d20_other_schemes_are_400() {
    for other in [
        "jsontps://localhost/x",
        "JSONTPS://localhost:8443/x",
        "http://x/y",
        "file:///etc/passwd",
    ] {
        assert_eq!(reason(other), "uses another scheme than jsontp://", "{other}");
        let e = refused(&with(|m| m["resource"] = json!(other)));
        assert_eq!((e.status().as_u16(), e.resource.as_str()), (400, other));
    }
}

#[test]
fn d7_already_normal_paths_are_their_own_normal_form() {
    for normal in ["/", "/hello.txt", "/sub/page.txt", "/a/b/", "/caf\u{e9}"] {
        assert_eq!(res(normal).path(), normal);
    }
    assert_eq!(res("hello.txt").path(), "/hello.txt");
}
