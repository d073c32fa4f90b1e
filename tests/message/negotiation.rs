//! The negotiation helpers on parsed requests (D5 level 5, D8, D17, D18).

use jsontp_protocol::message::negotiate::{self, ContentKind};
use jsontp_protocol::message::{Date, Encoding, LanguageTag, MediaType, Method};
use serde_json::json;

use crate::sample_request::{header, ok, with};

fn encoding(value: serde_json::Value, kind: ContentKind) -> Result<Encoding, u16> {
    let request = ok(&header("accept-encoding", value));
    negotiate::choose_encoding(request.headers.accept_encoding(), &Encoding::ALL, kind)
        .map_err(|s| s.code.as_u16())
}

#[test]
fn d8_accept_encoding_weights_choose() {
    assert_eq!(
        encoding(json!("gzip;q=0.5, br"), ContentKind::Text),
        Ok(Encoding::Br)
    );
    assert_eq!(encoding(json!("gzip;q=1"), ContentKind::Text), Ok(Encoding::Gzip));
    assert_eq!(
        encoding(json!(["identity;q=0", "*"]), ContentKind::Text),
        Ok(Encoding::Gzip)
    );
    assert_eq!(
        encoding(json!("compress, deflate"), ContentKind::Text),
        Ok(Encoding::Deflate)
    );
    assert_eq!(encoding(json!("compress"), ContentKind::Text), Err(412));
    assert_eq!(encoding(json!("gzip;q=0"), ContentKind::Text), Err(412));
}

#[test]
fn d8_absent_accept_encoding_accepts_every_encoding() {
    let none = |kind| {
        let request = ok(&with(|_| {}));
        negotiate::choose_encoding(request.headers.accept_encoding(), &Encoding::ALL, kind)
    };
    assert_eq!(none(ContentKind::Text), Ok(Encoding::Identity));
    assert_eq!(none(ContentKind::of(&[0xff, 0])), Ok(Encoding::Gzip));
    // An empty header is the same (D8).
    assert_eq!(encoding(json!(""), ContentKind::Binary), Ok(Encoding::Gzip));
    assert_eq!(encoding(json!([]), ContentKind::Text), Ok(Encoding::Identity));
    // Listed, and only identity: 412 for bytes, never 406.
    assert_eq!(encoding(json!("identity"), ContentKind::Binary), Err(412));
    assert_eq!(
        encoding(json!("identity, br;q=0.1"), ContentKind::Binary),
        Ok(Encoding::Br)
    );
    assert_eq!(ContentKind::of("héllo".as_bytes()), ContentKind::Text);
}

#[test]
fn d18_accept_language_weights_choose() {
    let offered: [LanguageTag; 2] = [LanguageTag::EN_US, "fr-FR".parse().expect("tag")];
    let choose = |value| {
        let request = ok(&header("accept-language", value));
        negotiate::choose_language(request.headers.accept_language(), &offered)
            .map(|t| t.to_string())
            .map_err(|s| s.code.as_u16())
    };
    assert_eq!(choose(json!("en-US;q=0.8, fr-FR")), Ok("fr-FR".into()));
    assert_eq!(choose(json!("fr-FR;q=0.1, en-US;q=0.1")), Ok("fr-FR".into()));
    assert_eq!(choose(json!("de-DE, *;q=0.5")), Ok("en-US".into()));
    assert_eq!(choose(json!("en-US;q=0, *")), Ok("fr-FR".into()));
    assert_eq!(choose(json!("de-DE")), Err(406));
    assert_eq!(choose(json!("*;q=0")), Err(406));
    assert_eq!(choose(json!("")), Ok("en-US".into()));
}

#[test]
fn d18_accept_weights_and_specificity() {
    let plain: MediaType = "text/plain".parse().expect("type");
    let check = |value| {
        let request = ok(&header("accept", value));
        negotiate::check_accept(request.headers.accept(), &plain).map_err(|s| s.code.as_u16())
    };
    assert_eq!(check(json!("text/*;q=0.5")), Ok(()));
    assert_eq!(check(json!("text/plain;q=0, */*")), Err(415));
    assert_eq!(check(json!("text/*;q=0, text/plain;q=0.1")), Ok(()));
    assert_eq!(check(json!([])), Ok(()));
    assert_eq!(check(json!("image/*")), Err(415));
}

#[test]
fn d17_conditions_by_method_on_parsed_requests() {
    let d = Date::from_unix_seconds;
    let check = |method: &str, headers: serde_json::Value, modified: Option<Date>| {
        let request = ok(&with(|m| {
            m["method"] = json!(method);
            m["headers"] = headers;
            if method == "PUT" || method == "POST" {
                m["body"]["content"] = json!("x");
            }
        }));
        negotiate::check_conditions(request.method, &request.headers, modified).map_err(|s| s.code.as_u16())
    };
    let ims = json!({"if-modified-since": "2021-06-01T00:00:00Z+0000"});
    let ius = json!({"if-unmodified-since": "2021-06-01T00:00:00Z+0000"});
    let old = Some(d(1_577_836_800));
    let new = Some(d(1_700_000_000));
    assert_eq!(check("GET", ims.clone(), old), Err(304));
    assert_eq!(check("POST", ims.clone(), None), Err(412));
    assert_eq!(check("PUT", ims.clone(), old), Ok(()));
    assert_eq!(check("DELETE", ims.clone(), None), Ok(()));
    assert_eq!(check("DELETE", ius.clone(), None), Err(412));
    assert_eq!(check("PUT", ius.clone(), new), Err(412));
    assert_eq!(check("PUT", ius.clone(), old), Ok(()));
    assert_eq!(check("OPTIONS", ius, None), Ok(()));
    let both = json!({
        "if-modified-since": "2100-01-01T00:00:00Z+0000",
        "if-unmodified-since": "2021-06-01T00:00:00Z+02:00",
    });
    assert_eq!(check("GET", both.clone(), new), Err(412));
    assert_eq!(check("GET", both, old), Err(304));
    assert_eq!(Method::ALL.len(), 5);
}
