//! Writing messages: compact JSON followed by `\n` (D1, D12).
//!
//! Written straight into the output buffer, field by field, in a fixed
//! order (requests `jsontp, type, resource, method, headers, body`;
//! responses `jsontp, type, status, resource, headers, body`; in the body
//! `encoding`, the other keys, then `content`, D19), headers in
//! [`HeaderName::ALL`] order. Strings go through serde_json's string writer,
//! which escapes them correctly; no intermediate `Value` is built.

use std::fmt::Display;
use std::io::Write;

use crate::message::{
    Body, Cookies, Date, Encoding, HeaderName, Headers, MediaType, Request, Response, Version, codec,
};

impl Request {
    /// The request as compact JSON plus `\n`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_to(&mut out);
        out
    }

    /// Appends the request, compact JSON plus `\n`, to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        self.write_whole(out);
    }
}

impl WholeMessage for Request {
    fn body(&self) -> &Body {
        &self.body
    }

    fn write_envelope(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"jsontp\":");
        version_string(out, self.version);
        out.extend_from_slice(b",\"type\":\"request\",\"resource\":");
        string(out, self.resource.as_str());
        out.extend_from_slice(b",\"method\":");
        quoted(out, self.method.as_str());
        out.extend_from_slice(b",\"headers\":");
        write_headers(out, &self.headers);
        out.extend_from_slice(b",\"body\":");
    }
}

impl Response {
    /// The response as compact JSON plus `\n`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_to(&mut out);
        out
    }

    /// Appends the response, compact JSON plus `\n`, to `out`. Writes
    /// whatever headers are set: the connection fills in `date` and
    /// `language` before it gets here.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        self.write_whole(out);
    }
}

impl WholeMessage for Response {
    fn body(&self) -> &Body {
        &self.body
    }

    fn write_envelope(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"jsontp\":");
        version_string(out, self.version);
        out.extend_from_slice(b",\"type\":\"response\",\"status\":{\"code\":");
        status_code(out, self.status.code.as_u16());
        out.extend_from_slice(b",\"formal-message\":");
        quoted(out, self.status.formal_message());
        out.extend_from_slice(b",\"human-message\":");
        string(out, &self.status.human_message);
        out.extend_from_slice(b"},\"resource\":");
        string(out, &self.resource);
        out.extend_from_slice(b",\"headers\":");
        write_headers(out, &self.headers);
        out.extend_from_slice(b",\"body\":");
    }
}

/// A message as the connection writes it: whole, or its head alone (up
/// to its content's opening quote) when the content follows in pieces
/// (D19) or is a prepared body's text placed in the output without a
/// copy ([`Body::prepared`]).
pub(crate) trait WholeMessage {
    /// The body.
    fn body(&self) -> &Body;

    /// Appends everything before the body's object.
    fn write_envelope(&self, out: &mut Vec<u8>);

    /// Appends the whole message, compact JSON plus `\n`.
    fn write_whole(&self, out: &mut Vec<u8>) {
        self.write_envelope(out);
        write_body(out, self.body());
        out.extend_from_slice(b"}\n");
    }

    /// Appends the message up to the opening quote of its `body.content`
    /// (written last, D19): the content's text follows, then
    /// [`STREAMED_TAIL`]. The body's own content is not written.
    fn write_head(&self, out: &mut Vec<u8>) {
        self.write_envelope(out);
        write_body_head(out, self.body());
    }
}

/// What ends a message whose content was streamed after its head: the
/// content string's closing quote, the body's brace, the message's, and
/// the line break (D1).
pub(crate) const STREAMED_TAIL: &[u8] = b"\"}}\n";

/// A JSON string, escaped as serde_json escapes it.
fn string(out: &mut Vec<u8>, s: &str) {
    utf8_string(out, s.as_bytes());
}

/// [`string`] of bytes known to be UTF-8.
fn utf8_string(out: &mut Vec<u8>, text: &[u8]) {
    out.reserve(text.len() + 2);
    out.push(b'"');
    crate::message::json_text::escape_utf8(text, out);
    out.push(b'"');
}

/// Text that never needs escaping (a method, an encoding, a status's
/// formal message, a language tag, a media type's essence: printable ASCII
/// without `"` or `\` by construction), quoted as it is.
fn quoted(out: &mut Vec<u8>, name: impl AsRef<[u8]>) {
    let name = name.as_ref();
    debug_assert_eq!(crate::message::json_text::next_to_escape(name, 0), name.len());
    out.reserve(name.len() + 2);
    out.push(b'"');
    out.extend_from_slice(name);
    out.push(b'"');
}

/// A value whose `Display` form never needs escaping (digits, letters,
/// `-`, `:`, `+`, `.`), written without an intermediate `String`.
fn plain_string(out: &mut Vec<u8>, value: &impl Display) {
    let _ = write!(out, "\"{value}\"");
}

/// A version as a JSON string: `"1.0"` copied, any other written out.
/// (`Display` through `write!` cost more than the rest of the envelope.)
fn version_string(out: &mut Vec<u8>, version: Version) {
    if version == Version::V1_0 {
        out.extend_from_slice(b"\"1.0\"");
        return;
    }
    out.push(b'"');
    decimal(out, version.major);
    out.push(b'.');
    decimal(out, version.minor);
    if let Some(rc) = version.rc {
        out.extend_from_slice(b"-rc");
        decimal(out, rc);
    }
    out.push(b'"');
}

/// A status code: registered codes have three digits, written without
/// the general loop.
fn status_code(out: &mut Vec<u8>, code: u16) {
    match u8::try_from(code / 100) {
        Ok(hundreds @ 1..=9) => {
            let rest = (code % 100) as u8;
            out.extend_from_slice(&[b'0' + hundreds, b'0' + rest / 10, b'0' + rest % 10]);
        }
        _ => decimal(out, u32::from(code)),
    }
}

/// `n` in decimal digits.
fn decimal(out: &mut Vec<u8>, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// A date as a JSON string (D16). Every response of a second carries the
/// same date: the text of the last one formatted is kept per thread and
/// copied, so a busy server formats the date once a second, not once a
/// response.
fn date_string(out: &mut Vec<u8>, date: Date) {
    use std::cell::RefCell;
    thread_local! {
        static LAST: RefCell<(i64, Vec<u8>)> = const { RefCell::new((i64::MIN, Vec::new())) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != date.unix_seconds() || last.1.is_empty() {
            last.1.clear();
            let _ = write!(last.1, "\"{date}\"");
            last.0 = date.unix_seconds();
        }
        out.extend_from_slice(&last.1);
    });
}

/// A value's `Display` form as a JSON string.
fn display_string(out: &mut Vec<u8>, value: &impl Display) {
    string(out, &value.to_string());
}

fn string_array<T: Display>(out: &mut Vec<u8>, items: &[T]) {
    out.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        display_string(out, item);
    }
    out.push(b']');
}

fn cookie_object(out: &mut Vec<u8>, cookies: &Cookies) {
    out.push(b'{');
    for (i, (name, value)) in cookies.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, name);
        out.push(b':');
        string(out, value);
    }
    out.push(b'}');
}

impl Headers {
    /// The headers as the JSON object a message carries (lists as arrays,
    /// cookies as objects, D8, D15), in the order they are written.
    pub fn to_json(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut text = Vec::new();
        write_headers(&mut text, self);
        match serde_json::from_slice(&text) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => unreachable!("the writer writes headers as a JSON object"),
        }
    }
}

/// The headers in [`HeaderName::ALL`] order (a test holds the two to the
/// same order); lists as arrays, cookies as objects (D8, D15).
fn write_headers(out: &mut Vec<u8>, h: &Headers) {
    out.push(b'{');
    let mut first = true;
    // Each header's name is written only when it is set: most responses
    // carry three or four of the thirteen. Each field is tested in turn
    // rather than through a loop over the names, which cost a dispatch
    // for every name, set or not.
    let mut key = |out: &mut Vec<u8>, name: HeaderName| {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
        // Header names are lower-case ASCII letters and hyphens.
        out.push(b'"');
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b"\":");
    };
    if let Some(v) = &h.content_type {
        key(out, HeaderName::ContentType);
        media_type_string(out, v);
    }
    if let Some(more) = h.more_if_any() {
        if let Some(v) = more.accept.as_deref() {
            key(out, HeaderName::Accept);
            string_array(out, v);
        }
        if let Some(v) = more.accept_encoding.as_deref() {
            key(out, HeaderName::AcceptEncoding);
            string_array(out, v);
        }
        if let Some(v) = more.accept_language.as_deref() {
            key(out, HeaderName::AcceptLanguage);
            string_array(out, v);
        }
        if let Some(v) = more.authorization.as_deref() {
            key(out, HeaderName::Authorization);
            string(out, v);
        }
        if let Some(v) = &more.cookies {
            key(out, HeaderName::Cookies);
            cookie_object(out, v);
        }
        if let Some(v) = more.if_modified_since {
            key(out, HeaderName::IfModifiedSince);
            plain_string(out, &v);
        }
        if let Some(v) = more.if_unmodified_since {
            key(out, HeaderName::IfUnmodifiedSince);
            plain_string(out, &v);
        }
    }
    if h.expect_continue {
        key(out, HeaderName::Expect);
        quoted(out, "100-continue");
    }
    if h.ignore_invalid_headers {
        key(out, HeaderName::IgnoreInvalidHeaders);
        out.extend_from_slice(b"true");
    }
    if let Some(v) = h.date {
        key(out, HeaderName::Date);
        date_string(out, v);
    }
    if let Some(v) = h.language {
        key(out, HeaderName::Language);
        quoted(out, v.as_bytes());
    }
    if let Some(more) = h.more_if_any() {
        if let Some(v) = &more.set_cookies {
            key(out, HeaderName::SetCookies);
            cookie_object(out, v);
        }
        for (name, value) in &more.unlisted {
            if !std::mem::take(&mut first) {
                out.push(b',');
            }
            string(out, name);
            out.push(b':');
            // A `Value` always serialises.
            let _ = serde_json::to_writer(&mut *out, value);
        }
    }
    out.push(b'}');
}

/// A media type as a JSON string: one without parameters is its essence,
/// copied; one with them goes through its canonical `Display` form.
fn media_type_string(out: &mut Vec<u8>, media: &MediaType) {
    if media.params().is_empty() {
        quoted(out, media.essence());
    } else {
        display_string(out, media);
    }
}

/// `encoding`, the other keys, then `content` last (the text for
/// identity, base64 of the compressed bytes otherwise, D9), so that a
/// receiver can stream it (D19).
fn write_body(out: &mut Vec<u8>, body: &Body) {
    write_body_keys(out, body);
    out.extend_from_slice(b"\"content\":");
    match (body.written(), body.encoding()) {
        // Already in its final form: copied between the quotes as it is.
        (Some(written), _) => {
            let written = &written.text;
            out.reserve(written.len() + 2);
            out.push(b'"');
            out.extend_from_slice(written.as_bytes());
            out.push(b'"');
        }
        // A Body holds only UTF-8 identity content: `Body::new` checks it,
        // and the parser's bodies are decoded JSON strings.
        (None, Encoding::Identity) => {
            debug_assert!(
                std::str::from_utf8(body.content()).is_ok(),
                "identity content is UTF-8"
            );
            utf8_string(out, body.content());
        }
        (None, other) => string(out, &codec::encode(body.content(), other)),
    }
    out.push(b'}');
}

/// The body of a streamed message up to its content's opening quote.
fn write_body_head(out: &mut Vec<u8>, body: &Body) {
    write_body_keys(out, body);
    out.extend_from_slice(b"\"content\":\"");
}

/// `{"encoding":…,` and every other key, each followed by a comma.
fn write_body_keys(out: &mut Vec<u8>, body: &Body) {
    out.extend_from_slice(b"{\"encoding\":");
    quoted(out, body.encoding().as_str());
    out.push(b',');
    for (key, value) in body.extra() {
        string(out, key);
        out.push(b':');
        let _ = serde_json::to_writer(&mut *out, value);
        out.push(b',');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{LanguageTag, MediaRange, Method};

    #[test]
    fn every_header_is_written_in_the_order_of_all_names() {
        let mut cookies = Cookies::new();
        cookies.set("a", "b");
        let headers = Headers::new()
            .with_content_type("text/plain".parse::<MediaType>().expect("a media type"))
            .with_accept(vec!["*/*".parse::<MediaRange>().expect("a range")])
            .with_accept_encoding(vec![Encoding::Identity])
            .with_accept_language(vec![
                "en-US".parse::<crate::message::LanguageRange>().expect("a range"),
            ])
            .with_authorization("s3cret".to_owned())
            .with_cookies(cookies.clone())
            .with_if_modified_since(Date::from_unix_seconds(1_600_000_000))
            .with_if_unmodified_since(Date::from_unix_seconds(1_600_000_001))
            .with_expect_continue(true)
            .with_ignore_invalid_headers(true)
            .with_date(Date::from_unix_seconds(1_600_000_002))
            .with_language(LanguageTag::EN_US)
            .with_set_cookies(cookies);
        let request = Request::new(Method::Get, "/".parse().expect("a resource")).with_headers(headers);
        let text = String::from_utf8(request.to_bytes()).expect("UTF-8");
        let mut written: Vec<(usize, &str)> = HeaderName::ALL
            .iter()
            .map(|name| {
                (
                    text.find(&format!("\"{}\":", name.as_str()))
                        .expect("every header written"),
                    name.as_str(),
                )
            })
            .collect();
        written.sort();
        let order: Vec<&str> = written.into_iter().map(|(_, name)| name).collect();
        let all: Vec<&str> = HeaderName::ALL.iter().map(|name| name.as_str()).collect();
        assert_eq!(order, all);
    }

    #[test]
    fn versions_and_codes_are_written_as_display_writes_them() {
        for version in [
            Version::V1_0,
            Version {
                major: 1,
                minor: 12,
                rc: None,
            },
            Version {
                major: 0,
                minor: 0,
                rc: Some(3),
            },
            Version {
                major: u32::MAX,
                minor: 10,
                rc: Some(u32::MAX),
            },
        ] {
            let mut out = Vec::new();
            version_string(&mut out, version);
            assert_eq!(out, format!("\"{version}\"").into_bytes());
        }
        for n in [0, 7, 10, 99, 100, 404, 65_535, u32::MAX] {
            let mut out = Vec::new();
            decimal(&mut out, n);
            assert_eq!(out, n.to_string().into_bytes());
        }
        for code in [0, 7, 99, 100, 200, 404, 599, 999, 1000, 9999, 25_600, u16::MAX] {
            let mut out = Vec::new();
            status_code(&mut out, code);
            assert_eq!(out, code.to_string().into_bytes());
        }
    }
}
