//! The serialized form of representative messages (D1 compact JSON plus
//! `\n`, D12 field order and reason phrases), as snapshots: any change of
//! wire output is seen in review.

use jsontp_protocol::message::{
    Body, Cookies, Date, Encoding, Headers, LanguageRange, LanguageTag, MediaRange, MediaType, Method,
    Request, Response, Status, StatusCode,
};
use serde_json::json;

fn headers() -> Headers {
    Headers::new()
        .with_date(Date::from_unix_seconds(1_700_000_000))
        .with_language(LanguageTag::EN_US)
}

fn response(code: StatusCode, human: &str, body: Body) -> Response {
    Response::new(Status::new(code, human.to_owned()))
        .with_resource("/hello.txt")
        .with_headers(headers())
        .with_body(body)
}

fn text(r: &Response) -> String {
    String::from_utf8(r.to_bytes()).expect("UTF-8")
}

fn plain() -> MediaType {
    "text/plain".parse().expect("a media type")
}

#[test]
fn ok_200_text() {
    let r = response(StatusCode::OK, "here it is", Body::text("Hello, \"world\"!\n"))
        .with_headers(headers().with_content_type(plain()));
    insta::assert_snapshot!(text(&r));
}

#[test]
fn created_201() {
    insta::assert_snapshot!(text(&response(StatusCode::CREATED, "stored", Body::empty())));
}

#[test]
fn no_content_204() {
    insta::assert_snapshot!(text(&response(StatusCode::NO_CONTENT, "", Body::empty())));
}

#[test]
fn not_modified_304() {
    insta::assert_snapshot!(text(&response(
        StatusCode::NOT_MODIFIED,
        "not modified since 2021-06-01T00:00:00Z+0000",
        Body::empty()
    )));
}

#[test]
fn continue_100() {
    insta::assert_snapshot!(text(&response(
        StatusCode::CONTINUE,
        "send the body",
        Body::empty()
    )));
}

#[test]
fn method_not_allowed_405() {
    let body = Body::empty()
        .with_extra("allowed-methods", json!(["GET", "OPTIONS"]))
        .expect("a body key");
    insta::assert_snapshot!(text(&response(
        StatusCode::METHOD_NOT_ALLOWED,
        "PUT is not allowed on /hello.txt",
        body
    )));
}

#[test]
fn gzip_body() {
    let body = Body::new(b"Hello, world!".to_vec(), Encoding::Gzip).expect("a body");
    insta::assert_snapshot!(text(&response(StatusCode::OK, "compressed", body)));
}

#[test]
fn set_cookies() {
    let mut cookies = Cookies::new();
    cookies.set("session", "abc");
    cookies.set("theme", "dark; \"quoted\"");
    let r = response(StatusCode::OK, "cookies set", Body::text("ok"))
        .with_headers(headers().with_set_cookies(cookies));
    insta::assert_snapshot!(text(&r));
}

#[test]
fn request_with_every_header() {
    let mut cookies = Cookies::new();
    cookies.set("a", "b");
    let headers = Headers::new()
        .with_content_type(plain())
        .with_accept(vec![
            "text/*".parse::<MediaRange>().expect("range"),
            "*/*".parse::<MediaRange>().expect("range"),
        ])
        .with_accept_encoding(vec![Encoding::Br, Encoding::Identity])
        .with_accept_language(vec![
            "en-US".parse::<LanguageRange>().expect("range"),
            "*".parse::<LanguageRange>().expect("range"),
        ])
        .with_authorization("s3cret".to_owned())
        .with_cookies(cookies)
        .with_if_modified_since(Date::from_unix_seconds(1_600_000_000))
        .with_if_unmodified_since(Date::from_unix_seconds(1_600_000_001))
        .with_expect_continue(true)
        .with_ignore_invalid_headers(true);
    let request = Request::new(Method::Put, "/up.txt".parse().expect("a resource"))
        .with_headers(headers)
        .with_body(Body::text("new content"));
    insta::assert_snapshot!(String::from_utf8(request.to_bytes()).expect("UTF-8"));
}
