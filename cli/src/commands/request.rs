//! The request a client command sends: its headers from `-H`, its content
//! from `--data` or `--file`, and the encoding that content travels in.

use std::io::Read;
use std::path::{Path, PathBuf};

use jsontp_protocol::message::{
    Body, Encoding, HeaderName, MessageLimits, Method, Request, RequestContext, parse_request,
};
use serde_json::{Map, Value};

/// Sent unless `-H accept-encoding=…` says otherwise: the client decodes all
/// four, so it accepts all four, most compact first (what `curl
/// --compressed` and browsers do). Without it a server has to guess, and a
/// server that reads an absent header as "identity only" cannot send a
/// binary file at all. `br` first costs no time against a server that
/// paces its compression by the link, as `jsontp serve` does for streamed
/// files: stored while the link keeps up, compressed as it backs up.
pub const DEFAULT_ACCEPT_ENCODING: [&str; 4] = ["br", "gzip", "deflate", "identity"];

/// Where the content comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--data TEXT`.
    Text(String),
    /// `--file PATH` or `--data @PATH`.
    File(PathBuf),
    /// `--file -` or `--data @-`.
    Stdin,
}

impl Source {
    /// Reads `--data` and `--file` as curl does: `--data @PATH` is the
    /// file's content and `-` names stdin. The two never come together
    /// (the argument parser refuses that).
    pub fn from_args(data: Option<&str>, file: Option<&Path>) -> Option<Source> {
        match (data, file) {
            (Some(text), _) => Some(match text.strip_prefix('@') {
                Some("-") => Source::Stdin,
                Some(path) => Source::File(PathBuf::from(path)),
                None => Source::Text(text.to_owned()),
            }),
            (None, Some(path)) if path == Path::new("-") => Some(Source::Stdin),
            (None, Some(path)) => Some(Source::File(path.to_path_buf())),
            (None, None) => None,
        }
    }

    /// The bytes, exactly as they are (no newline is stripped).
    pub fn read(&self) -> Result<Vec<u8>, String> {
        match self {
            Source::Text(text) => Ok(text.clone().into_bytes()),
            Source::File(path) => {
                std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
            }
            Source::Stdin => {
                let mut bytes = Vec::new();
                std::io::stdin()
                    .lock()
                    .read_to_end(&mut bytes)
                    .map_err(|e| format!("cannot read the standard input: {e}"))?;
                Ok(bytes)
            }
        }
    }
}

/// The encoding the content travels in: the one asked for, else `identity`
/// for UTF-8 text and `gzip` for anything else, since `identity` can carry
/// only text (D9).
pub fn choose_encoding(content: &[u8], asked: Option<Encoding>) -> Encoding {
    match asked {
        Some(encoding) => encoding,
        None if std::str::from_utf8(content).is_ok() => Encoding::Identity,
        None => Encoding::Gzip,
    }
}

/// The body: the content in its encoding.
pub fn build_body(content: Vec<u8>, asked: Option<Encoding>) -> Result<Body, String> {
    let encoding = choose_encoding(&content, asked);
    Body::new(content, encoding)
        .map_err(|e| format!("the content {e}; leave out --encoding identity, or give gzip, deflate or br"))
}

/// One `-H` argument: `name=value` or, as curl writes it, `name: value`.
/// The name ends at the first `=` or `:`, since a header name holds
/// neither; the value keeps every later one (`cookies=a=b`, a date's
/// `12:00:00`). Names are lower-cased (D8).
pub fn parse_header(arg: &str) -> Result<(String, Value), String> {
    let Some(at) = arg.find(['=', ':']) else {
        return Err(format!(
            "-H {arg:?}: write a header as name=value or 'name: value'"
        ));
    };
    let name = arg[..at].trim().to_ascii_lowercase();
    let raw = &arg[at + 1..];
    // `name: value` puts a space after the colon; `name=value` means the
    // value exactly.
    let value = if arg[at..].starts_with(':') {
        raw.trim()
    } else {
        raw
    };
    if name.is_empty() {
        return Err(format!("-H {arg:?}: the header has no name"));
    }
    Ok((name.clone(), header_value(&name, value)))
}

/// `-H` values: strings, except JSON arrays/objects and the boolean header.
fn header_value(name: &str, value: &str) -> Value {
    if name == "ignore-invalid-headers" {
        match value {
            "true" => return Value::Bool(true),
            "false" => return Value::Bool(false),
            _ => {}
        }
    }
    if value.starts_with(['[', '{'])
        && let Ok(json) = serde_json::from_str::<Value>(value)
    {
        return json;
    }
    Value::String(value.to_owned())
}

/// The request, checked by the message layer before anything is sent: the
/// headers are read through `parse_request`, so a bad value is refused here
/// with the same message a server would give.
pub fn build_request(
    method: Method,
    resource: &str,
    header_args: &[String],
    expect_continue: bool,
    body: Body,
) -> Result<Request, String> {
    let mut headers = Map::new();
    let mut unlisted = Vec::new();
    for arg in header_args {
        let (name, value) = parse_header(arg)?;
        if headers.contains_key(&name) || unlisted.iter().any(|(n, _)| *n == name) {
            return Err(format!("header {name} is given twice"));
        }
        if HeaderName::from_name(&name).is_some() {
            headers.insert(name, value);
        } else {
            unlisted.push((name, value));
        }
    }
    // D8: a name outside the protocol's list is sent as the user wrote it
    // only beside `ignore-invalid-headers: true`, which tells the server to
    // drop it rather than refuse the request.
    let ignoring = headers.get("ignore-invalid-headers") == Some(&Value::Bool(true));
    if let Some((name, _)) = unlisted.first()
        && !ignoring
    {
        return Err(format!(
            "header {name} is not one of the protocol's, so a server answers 400; to send it \
             anyway, add -H 'ignore-invalid-headers: true' (the server then ignores it)"
        ));
    }
    if !headers.contains_key("accept-encoding") {
        headers.insert(
            "accept-encoding".into(),
            DEFAULT_ACCEPT_ENCODING.iter().map(|&e| Value::from(e)).collect(),
        );
    }
    if expect_continue && !headers.contains_key("expect") {
        headers.insert("expect".into(), Value::String("100-continue".into()));
    }
    let envelope = serde_json::json!({
        "jsontp": "1.0",
        "type": "request",
        "resource": resource,
        "method": method.as_str(),
        "headers": headers,
        "body": {"content": "", "encoding": "identity"},
    });
    let bytes = serde_json::to_vec(&envelope).map_err(|e| e.to_string())?;
    let mut request = parse_request(&bytes, RequestContext::Fresh, &MessageLimits::default())
        .map_err(|rejection| format!("cannot send this request: {}", rejection.message))?;
    for (name, value) in unlisted {
        request.headers = request.headers.with_unlisted(name, value);
    }
    Ok(request.with_body(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn header_values_are_strings_unless_json_or_the_boolean() {
        assert_eq!(
            header_value("accept", "text/plain"),
            Value::String("text/plain".into())
        );
        assert_eq!(header_value("accept", "[\"text/plain\"]"), json!(["text/plain"]));
        assert_eq!(header_value("cookies", "{\"a\":\"b\"}"), json!({"a": "b"}));
        assert_eq!(
            header_value("cookies", "{not json"),
            Value::String("{not json".into())
        );
        assert_eq!(header_value("ignore-invalid-headers", "true"), Value::Bool(true));
        assert_eq!(
            header_value("authorization", "true"),
            Value::String("true".into())
        );
    }

    #[test]
    fn headers_are_written_with_equals_or_as_curl_writes_them() {
        let parsed = |arg| parse_header(arg).map_err(|_| ());
        assert_eq!(
            parsed("Accept=text/plain"),
            Ok(("accept".into(), json!("text/plain")))
        );
        assert_eq!(
            parsed("Accept: text/plain"),
            Ok(("accept".into(), json!("text/plain")))
        );
        assert_eq!(
            parsed("accept:text/plain "),
            Ok(("accept".into(), json!("text/plain")))
        );
        // The first separator ends the name; the value keeps the rest.
        assert_eq!(parsed("cookies=a=b"), Ok(("cookies".into(), json!("a=b"))));
        assert_eq!(
            parsed("if-modified-since: 2026-11-22T01:58:36Z+00:00"),
            Ok(("if-modified-since".into(), json!("2026-11-22T01:58:36Z+00:00")))
        );
        assert_eq!(
            parsed("cookies: a=b; c=d"),
            Ok(("cookies".into(), json!("a=b; c=d")))
        );
        assert_eq!(
            parsed("accept-encoding: [\"gzip\"]"),
            Ok(("accept-encoding".into(), json!(["gzip"])))
        );
        assert_eq!(
            parsed("authorization= two spaces "),
            Ok(("authorization".into(), json!(" two spaces ")))
        );
        assert!(parse_header("novalue").unwrap_err().contains("name=value"));
        assert!(parse_header(": x").unwrap_err().contains("no name"));
    }

    #[test]
    fn the_encoding_is_identity_for_text_and_gzip_otherwise() {
        assert_eq!(choose_encoding(b"hello", None), Encoding::Identity);
        assert_eq!(choose_encoding("héllo".as_bytes(), None), Encoding::Identity);
        assert_eq!(choose_encoding(b"", None), Encoding::Identity);
        assert_eq!(choose_encoding(&[0x89, b'P', b'N', b'G'], None), Encoding::Gzip);
        assert_eq!(choose_encoding(&[0xff], Some(Encoding::Br)), Encoding::Br);
        assert_eq!(
            choose_encoding(b"text", Some(Encoding::Deflate)),
            Encoding::Deflate
        );
        // Asked for identity, binary content is refused with a way out.
        let refused = build_body(vec![0xff, 0], Some(Encoding::Identity)).unwrap_err();
        assert!(refused.contains("leave out --encoding identity"), "{refused}");
        let body = build_body(vec![0xff, 0], None).expect("gzip carries anything");
        assert_eq!(body.encoding(), Encoding::Gzip);
        assert_eq!(body.content(), [0xff, 0]);
    }

    #[test]
    fn data_at_a_path_reads_the_file_and_dash_is_stdin() {
        let from = |data: Option<&str>, file: Option<&str>| Source::from_args(data, file.map(Path::new));
        assert_eq!(from(None, None), None);
        assert_eq!(from(Some("a=1"), None), Some(Source::Text("a=1".into())));
        assert_eq!(
            from(Some("@notes.txt"), None),
            Some(Source::File("notes.txt".into()))
        );
        assert_eq!(from(Some("@-"), None), Some(Source::Stdin));
        assert_eq!(from(None, Some("-")), Some(Source::Stdin));
        assert_eq!(
            from(None, Some("logo.png")),
            Some(Source::File("logo.png".into()))
        );
    }

    #[test]
    fn accept_encoding_defaults_to_everything_the_client_decodes() {
        let written = |headers: &[&str]| {
            let headers: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
            let request =
                build_request(Method::Get, "/x", &headers, false, Body::empty()).expect("a valid request");
            let wire: Value = serde_json::from_slice(&request.to_bytes()).expect("JSON");
            wire["headers"]["accept-encoding"].clone()
        };
        assert_eq!(written(&[]), json!(["br", "gzip", "deflate", "identity"]));
        // Overridden by -H, in either spelling of the name.
        assert_eq!(written(&["Accept-Encoding=identity"]), json!(["identity"]));
        assert_eq!(written(&["accept-encoding: gzip"]), json!(["gzip"]));
    }
}
