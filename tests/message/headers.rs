//! Header values (D8): weights, empty lists, response-only names, null,
//! the names themselves, and where their 400 stands (D5).

use jsontp_protocol::message::{
    Encoding, EncodingRange, HeaderName, Headers, LanguageRange, LanguageTag, Weight, Weighted,
};
use serde_json::{Value, json};

use crate::sample_request::{code, header, ok, refused, with};

/// The entries of a list header as written back, weights included.
fn entries<T: std::fmt::Display>(list: Option<&[T]>) -> Option<Vec<String>> {
    list.map(|l| l.iter().map(ToString::to_string).collect())
}

const LISTS: [&str; 3] = ["accept", "accept-encoding", "accept-language"];

#[test]
fn d8_weights_are_accepted_in_the_three_lists() {
    // Both forms alike; `q` in either case; spaces around the `;`.
    let r = ok(&header("accept-language", json!("en-US;q=0.8")));
    assert_eq!(
        entries(r.headers.accept_language()),
        Some(vec!["en-US;q=0.8".into()])
    );
    let r = ok(&header(
        "accept-language",
        json!(["fr-FR", "en-US ; Q=0.5", "*;q=0"]),
    ));
    assert_eq!(
        entries(r.headers.accept_language()),
        Some(vec!["fr-FR".into(), "en-US;q=0.5".into(), "*;q=0".into()])
    );
    // gzip;q=1 is gzip, not an unknown encoding.
    let r = ok(&header("accept-encoding", json!("gzip;q=1, br;q=0.5, *;q=0.001")));
    let list = r.headers.accept_encoding().expect("listed");
    assert_eq!(list[0], Weighted::from(Encoding::Gzip));
    assert_eq!(list[1].weight, Weight::from_thousandths(500).expect("0.5"));
    assert_eq!(list[2].value, EncodingRange::Any);
    let r = ok(&header("accept", json!("text/html;level=1;q=0.7, */*;q=0.1")));
    assert_eq!(
        entries(r.headers.accept()),
        Some(vec!["text/html; level=1;q=0.7".into(), "*/*;q=0.1".into()])
    );
}

#[test]
fn d8_a_malformed_weight_is_400() {
    for name in LISTS {
        let entry = match name {
            "accept" => "text/plain",
            "accept-encoding" => "gzip",
            _ => "en-US",
        };
        for weight in [
            "q=2", "q=1.5", "q=0.1234", "q=", "q=abc", "q =1", "level=1", "", "q=-0", "q=.5",
        ] {
            if name == "accept" && matches!(weight, "level=1" | "") {
                // A media parameter, and an empty one, belong to the range.
                continue;
            }
            for value in [
                json!(format!("{entry};{weight}")),
                json!([format!("{entry};{weight}")]),
            ] {
                let e = refused(&header(name, value.clone()));
                assert_eq!(e.status().as_u16(), 400, "{name}: {value}");
                assert!(
                    e.message.starts_with(&format!("header \"{name}\"")),
                    "{}",
                    e.message
                );
            }
        }
    }
    assert_eq!(
        refused(&header("accept-encoding", json!("gzip;q=2"))).message,
        "header \"accept-encoding\": \"gzip;q=2\" has a weight that is not ;q= and a number \
         from 0 to 1 with at most three decimals"
    );
    // An unknown encoding is skipped, but its weight is still checked.
    assert_eq!(code(&header("accept-encoding", json!("compress;q=9, gzip"))), 400);
    let r = ok(&header("accept-encoding", json!("compress;q=0.9, gzip")));
    assert_eq!(entries(r.headers.accept_encoding()), Some(vec!["gzip".into()]));
}

#[test]
fn d8_an_empty_list_is_the_header_absent() {
    for name in LISTS {
        for empty in [json!(""), json!([]), json!(" , ,"), json!([""]), json!(["", " "])] {
            let r = ok(&header(name, empty.clone()));
            assert!(r.headers.is_empty(), "{name}: {empty}");
            assert!(!r.headers.contains(HeaderName::from_name(name).expect("listed")));
        }
    }
    // Only unknown encodings is not empty: nothing known is acceptable.
    let r = ok(&header("accept-encoding", json!(["compress", "x-zip"])));
    assert_eq!(entries(r.headers.accept_encoding()), Some(vec!["*;q=0".into()]));
}

#[test]
fn d8_response_only_names_in_a_request_are_ignored_whatever_their_type() {
    for name in ["date", "language", "set-cookies"] {
        for value in [
            json!("not a date"),
            json!(5),
            json!(true),
            json!([1, "x"]),
            json!({"a": {"b": null}}),
            json!(""),
        ] {
            let r = ok(&header(name, value.clone()));
            assert!(r.headers.is_empty(), "{name}: {value}");
        }
        // Except null, which no header may be.
        let e = refused(&header(name, Value::Null));
        assert_eq!(
            (e.status().as_u16(), e.message.as_str()),
            (
                400,
                &*format!("header \"{name}\" is null, which no header may be")
            )
        );
    }
}

#[test]
fn d8_null_is_400_in_every_listed_header() {
    for name in HeaderName::ALL {
        assert_eq!(code(&header(name.as_str(), Value::Null)), 400, "{name}");
        let upper = name.as_str().to_ascii_uppercase();
        assert_eq!(code(&header(&upper, Value::Null)), 400, "{upper}");
    }
}

#[test]
fn d5_a_malformed_weight_is_level_3() {
    // Before expect (501) and body.encoding (412), both level 4.
    let mut m = header("accept-language", json!("en-US;q=x"));
    m["headers"]["expect"] = json!("200-ok");
    assert_eq!(code(&m), 400);
    let mut m = header("accept", json!("text/*;q=9"));
    m["body"]["encoding"] = json!("zip");
    assert_eq!(code(&m), 400);
    // After the version (505).
    let mut m = header("accept", json!("text/*;q=9"));
    m["jsontp"] = json!("3.0");
    assert_eq!(code(&m), 505);
}

#[test]
fn d8_header_names_as_an_enum() {
    let names: Vec<&str> = HeaderName::ALL.iter().map(|n| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "content-type",
            "accept",
            "accept-encoding",
            "accept-language",
            "authorization",
            "cookies",
            "if-modified-since",
            "if-unmodified-since",
            "expect",
            "ignore-invalid-headers",
            "date",
            "language",
            "set-cookies",
        ]
    );
    for name in HeaderName::ALL {
        assert_eq!(HeaderName::from_lowercase(name.as_str()), Some(name));
        assert_eq!(
            HeaderName::from_name(&name.as_str().to_ascii_uppercase()),
            Some(name)
        );
    }
    assert_eq!(HeaderName::from_lowercase("Accept"), None);
    assert_eq!(HeaderName::from_name("Accept"), Some(HeaderName::Accept));
    assert_eq!(HeaderName::from_name("x-custom"), None);
    assert!("x-custom".parse::<HeaderName>().is_err());
    // Every header a parsed request can hold is named by `names()`.
    let m = with(|m| {
        m["headers"] = json!({
            "accept": "*/*", "accept-encoding": "gzip", "accept-language": "en-US",
            "authorization": "t", "cookies": "a=1", "if-modified-since": "2024-01-01T00:00:00Z+0000",
            "content-type": "text/plain", "ignore-invalid-headers": true,
        })
    });
    let r = ok(&m);
    assert_eq!(r.headers.len(), 8);
    assert_eq!(r.headers.names().count(), 8);
    assert!(!r.headers.contains(HeaderName::Date));
}

#[test]
fn d8_builders_take_plain_or_weighted_entries() {
    let fr: LanguageTag = "fr-FR".parse().expect("tag");
    let h = Headers::new()
        .with_accept_encoding([Encoding::Br, Encoding::Gzip])
        .with_accept_language([
            Weighted::from(fr),
            Weighted::new(LanguageRange::Any).with_weight(Weight::ZERO),
        ]);
    assert_eq!(
        entries(h.accept_encoding()),
        Some(vec!["br".into(), "gzip".into()])
    );
    assert_eq!(
        entries(h.accept_language()),
        Some(vec!["fr-FR".into(), "*;q=0".into()])
    );
    // Written and read back with the same meaning.
    let request = jsontp_protocol::message::Request::new(
        jsontp_protocol::message::Method::Get,
        "/x".parse().expect("resource"),
    )
    .with_headers(h.clone());
    let text = String::from_utf8(request.to_bytes()).expect("UTF-8");
    assert!(text.contains(r#""accept-language":["fr-FR","*;q=0"]"#), "{text}");
    let back: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(ok(&back).headers, h);
}

/// Headers held as data read back as the wire reads them: each header a
/// request carries, set again from its JSON value, gives the same headers;
/// a value the reader refuses is refused here too, naming the header.
#[test]
fn headers_set_from_json_values_equal_the_headers_read_from_the_wire() {
    let wire = br#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{"accept":"text/html;q=0.5, application/json","accept-encoding":["br","gzip;q=0.2"],"accept-language":"fr-FR","authorization":"Bearer t","cookies":{"a":"1"},"if-modified-since":"2020-01-01T00:00:00Z+0000","content-type":"text/plain","expect":"100-continue"},"body":{"content":"","encoding":"identity"}}"#;
    let read = jsontp_protocol::message::parse_request(
        wire,
        jsontp_protocol::message::RequestContext::Fresh,
        &jsontp_protocol::message::MessageLimits::default(),
    )
    .expect("a valid request")
    .headers;
    let mut set = jsontp_protocol::message::Headers::new();
    for (name, value) in read.to_json() {
        set.insert_json(&name, &value)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    assert_eq!(set, read);
    let mut refused = jsontp_protocol::message::Headers::new();
    let error = refused
        .insert_json("accept-language", &serde_json::json!("english"))
        .expect_err("not a language range");
    assert!(error.reason().contains("accept-language"), "{error}");
    let error = refused
        .insert_json("expect", &serde_json::json!("200-ok"))
        .expect_err("not 100-continue");
    assert!(error.reason().contains("100-continue"), "{error}");
    // A name outside the list is kept as given, to send (D8 decides at the peer).
    refused.insert_json("x-trace", &serde_json::json!("abc")).unwrap();
    assert_eq!(
        refused.unlisted(),
        &[("x-trace".to_owned(), serde_json::json!("abc"))]
    );
}
