//! `jsontp get|post|put|delete|options URL`: one request, used like curl.
//!
//! The decoded content goes to stdout (bytes as they are); `-v` adds the
//! status line and headers on stderr, `-vv` the raw messages. Exit status:
//! 0 for 1xx–3xx, 1 for 4xx/5xx, 2 when no valid response came (usage,
//! transport or protocol error), each failure with one line on stderr.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jsontp::io_adapters::client::blocking::Client;
use jsontp::io_adapters::client::{Answer, ClientOptions, Direction};
use jsontp::message::{
    Body, Encoding, Forgiven, MessageLimits, Method, Request, RequestContext, Response, Validation,
    parse_request,
};
use serde_json::{Map, Value};

/// The port when the URL gives none.
const DEFAULT_PORT: u16 = 8080;

/// Arguments of the client commands.
#[derive(Debug, clap::Args)]
pub struct ClientArgs {
    /// Where to send the request: `jsontp://host:port/path`,
    /// `host:port/path` or `host/path` (port 8080 when absent).
    pub url: String,
    /// A request header, `name=value` (repeatable). The value is sent as a
    /// string; `[…]` and `{…}` that parse as JSON are sent as JSON, and
    /// `ignore-invalid-headers=true|false` as a boolean.
    #[arg(short = 'H', long = "header", value_name = "NAME=VALUE")]
    pub headers: Vec<String>,
    /// The content to send.
    #[arg(long, value_name = "TEXT", conflicts_with = "file")]
    pub data: Option<String>,
    /// Send the content of this file.
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// Compress the content on the way out.
    #[arg(long, value_name = "ENCODING", value_parser = ["gzip", "deflate", "br", "identity"])]
    pub encoding: Option<String>,
    /// Ask first with `expect: 100-continue` and send the content once the
    /// server agrees (or stays silent for a second).
    #[arg(long = "continue")]
    pub expect_continue: bool,
    /// Accept responses without `date`/`language` or with an empty
    /// `encoding` (the published reference crate sends such), and say so.
    #[arg(long)]
    pub lenient: bool,
    /// `-v`: the status line and headers on stderr; `-vv`: the raw messages.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Give up after this many seconds (connecting, waiting, or in total).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub timeout: f64,
}

/// Why the command stops before a response: exit status 2.
struct Failure(String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(e.to_string())
    }
}

/// Runs one client command.
pub fn run(method: Method, args: ClientArgs) -> ExitCode {
    match exchange(method, &args) {
        Ok(exchange) => report(method, &args, &exchange),
        Err(Failure(message)) => {
            eprintln!("jsontp: {message}");
            ExitCode::from(2)
        }
    }
}

/// Builds the request, sends it and waits for the response.
fn exchange(method: Method, args: &ClientArgs) -> Result<Answer, Failure> {
    let target = Target::parse(&args.url).map_err(Failure)?;
    let request = build_request(method, &target.resource, args)?;
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        return Err(Failure("--timeout must be a positive number of seconds".into()));
    }
    let timeout = Duration::from_secs_f64(args.timeout);
    let options = ClientOptions {
        validation: if args.lenient {
            Validation::Lenient
        } else {
            Validation::Strict
        },
        connect_timeout: Some(timeout),
        read_timeout: Some(timeout),
        exchange_timeout: Some(timeout),
        ..ClientOptions::default()
    };
    let mut client = Client::connect(target.address.as_str(), options)?;
    let echo = Arc::new(Mutex::new(RawEcho::default()));
    if args.verbose >= 2 {
        let echo = Arc::clone(&echo);
        client.set_tracer(move |direction, bytes| {
            if let Ok(mut echo) = echo.lock() {
                echo.show(direction, bytes);
            }
        });
    }
    let outcome = client.send(request);
    if let Ok(mut echo) = echo.lock() {
        echo.finish();
    }
    Ok(outcome?)
}

/// Prints the outcome and picks the exit status.
fn report(method: Method, args: &ClientArgs, exchange: &Answer) -> ExitCode {
    let response = &exchange.response;
    if args.verbose >= 1 {
        print_head(response, exchange.continued);
    }
    if !exchange.forgiven.is_empty() {
        let forgiven: Vec<&str> = exchange.forgiven.iter().map(|f| describe(*f)).collect();
        eprintln!("jsontp: note: lenient mode forgave {}", forgiven.join(", "));
    }
    if let Err(e) = print_content(method, response) {
        // A reader that went away (`| head`) is not our failure.
        if e.kind() != io::ErrorKind::BrokenPipe {
            eprintln!("jsontp: cannot write the content: {e}");
            return ExitCode::from(2);
        }
    }
    let code = response.status.code;
    if code.is_error() {
        eprintln!(
            "jsontp: {} {}: {}",
            code.as_u16(),
            code.reason(),
            response.status.human_message
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn describe(forgiven: Forgiven) -> &'static str {
    match forgiven {
        Forgiven::MissingDate => "a missing date header",
        Forgiven::MissingLanguage => "a missing language header",
        Forgiven::EmptyEncoding => "an empty body encoding (read as identity)",
        Forgiven::UnknownHeader => "header names outside the protocol's list (dropped)",
    }
}

/// The decoded content, bytes as they are; for `options`, the allowed
/// methods, one line.
fn print_content(method: Method, response: &Response) -> io::Result<()> {
    let mut out = io::stdout().lock();
    let allowed = response
        .body
        .extra()
        .get("allowed-methods")
        .and_then(Value::as_array);
    match allowed {
        Some(methods) if method == Method::Options && response.body.content().is_empty() => {
            let names: Vec<&str> = methods.iter().filter_map(Value::as_str).collect();
            writeln!(out, "{}", names.join(", "))?;
        }
        _ => out.write_all(response.body.content())?,
    }
    out.flush()
}

/// `-v`: the status line, the headers and the other body keys, on stderr.
fn print_head(response: &Response, continued: bool) {
    let mut err = io::stderr().lock();
    // Lines on stderr are best effort: nothing to do if it is closed.
    if continued {
        let _ = writeln!(err, "< (the server answered 100 Continue)");
    }
    let status = &response.status;
    let _ = writeln!(
        err,
        "< jsontp {} {} {} ({})",
        response.version,
        status.code.as_u16(),
        status.formal_message(),
        status.human_message
    );
    // The typed headers, written as the wire writes them.
    let written: Value = serde_json::from_slice(&response.to_bytes()).unwrap_or(Value::Null);
    if let Some(headers) = written.get("headers").and_then(Value::as_object) {
        for (name, value) in headers {
            let _ = writeln!(err, "< {name}: {}", header_text(value));
        }
    }
    let _ = writeln!(err, "< (body encoding {})", response.body.encoding());
    for (key, value) in response.body.extra() {
        let _ = writeln!(err, "< (body {key}: {value})");
    }
}

fn header_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `-vv`: every byte sent (`> `) and received (`< `), line by line.
struct RawEcho {
    last: Option<Direction>,
    at_line_start: bool,
}

impl Default for RawEcho {
    fn default() -> Self {
        RawEcho {
            last: None,
            at_line_start: true,
        }
    }
}

impl RawEcho {
    fn show(&mut self, direction: Direction, bytes: &[u8]) {
        let mut err = io::stderr().lock();
        if self.last != Some(direction) {
            if self.last.is_some() && !self.at_line_start {
                let _ = writeln!(err);
            }
            self.last = Some(direction);
            self.at_line_start = true;
        }
        let prefix = match direction {
            Direction::Sent => "> ",
            Direction::Received => "< ",
        };
        let text = String::from_utf8_lossy(bytes);
        for piece in text.split_inclusive('\n') {
            if self.at_line_start {
                let _ = err.write_all(prefix.as_bytes());
            }
            let _ = err.write_all(piece.as_bytes());
            self.at_line_start = piece.ends_with('\n');
        }
    }

    /// Ends the last line: the published reference writes no newline
    /// after its responses.
    fn finish(&mut self) {
        if !self.at_line_start {
            eprintln!();
            self.at_line_start = true;
        }
    }
}

/// Where the URL points: the address to connect to and the `resource` to
/// send.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    /// `host:port`, or `[v6]:port`.
    address: String,
    /// The path with its query and fragment, from `/`.
    resource: String,
}

impl Target {
    /// Parses `jsontp://host:port/path`, `host:port/path` or `host/path`.
    fn parse(url: &str) -> Result<Target, String> {
        let rest = match url.strip_prefix("jsontp://") {
            Some(rest) => rest,
            None if url.contains("://") => {
                return Err(format!("{url:?} is not a jsontp:// URL"));
            }
            None => url,
        };
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        let resource = match path.chars().next() {
            Some('/') => path.to_owned(),
            _ => format!("/{path}"),
        };
        let (host, port) = split_host_port(authority).map_err(|why| format!("the URL {url:?} {why}"))?;
        let address = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        Ok(Target { address, resource })
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`.
fn split_host_port(authority: &str) -> Result<(&str, u16), &'static str> {
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']').ok_or("has an unclosed [")?;
        match after {
            "" => (host, None),
            _ => (host, Some(after.strip_prefix(':').ok_or("has text after ]")?)),
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("names no host");
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(port) => match port.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err("has a port that is not a number from 1 to 65535"),
        },
    };
    Ok((host, port))
}

/// The request, checked by the message layer before anything is sent: the
/// headers are read through `parse_request`, so a bad value is refused here
/// with the same message a server would give.
fn build_request(method: Method, resource: &str, args: &ClientArgs) -> Result<Request, Failure> {
    let mut headers = Map::new();
    for header in &args.headers {
        let (name, value) = header
            .split_once('=')
            .ok_or_else(|| Failure(format!("-H {header:?}: write a header as name=value")))?;
        let name = name.trim().to_ascii_lowercase();
        if headers.insert(name.clone(), header_value(&name, value)).is_some() {
            return Err(Failure(format!("header {name} is given twice")));
        }
    }
    if args.expect_continue && !headers.contains_key("expect") {
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
    let bytes = serde_json::to_vec(&envelope)?;
    let request = parse_request(&bytes, RequestContext::Fresh, &MessageLimits::default())
        .map_err(|rejection| Failure(format!("cannot send this request: {}", rejection.message)))?;
    Ok(request.with_body(build_body(args)?))
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

/// The content from `--data` or `--file`, in the `--encoding` asked for.
fn build_body(args: &ClientArgs) -> Result<Body, Failure> {
    let content = match (&args.data, &args.file) {
        (Some(text), _) => text.clone().into_bytes(),
        (None, Some(path)) => {
            std::fs::read(path).map_err(|e| Failure(format!("cannot read {}: {e}", path.display())))?
        }
        (None, None) => Vec::new(),
    };
    let encoding = match &args.encoding {
        Some(name) => name.parse::<Encoding>()?,
        None => Encoding::Identity,
    };
    Body::new(content, encoding).map_err(|e| {
        Failure(format!(
            "the content {e}; send it with --encoding gzip, deflate or br"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Result<(String, String), String> {
        Target::parse(url).map(|t| (t.address, t.resource))
    }

    fn pair(address: &str, resource: &str) -> Result<(String, String), String> {
        Ok((address.to_owned(), resource.to_owned()))
    }

    #[test]
    fn url_forms_with_a_host() {
        assert_eq!(
            target("jsontp://example.com:9000/a/b?x=1"),
            pair("example.com:9000", "/a/b?x=1")
        );
        assert_eq!(target("jsontp://example.com/a"), pair("example.com:8080", "/a"));
        assert_eq!(
            target("localhost:9000/index.html"),
            pair("localhost:9000", "/index.html")
        );
        assert_eq!(
            target("localhost/index.html"),
            pair("localhost:8080", "/index.html")
        );
        assert_eq!(target("127.0.0.1:1"), pair("127.0.0.1:1", "/"));
        assert_eq!(target("host?q#f"), pair("host:8080", "/?q#f"));
        assert_eq!(target("[::1]:9000/x"), pair("[::1]:9000", "/x"));
        assert_eq!(target("jsontp://[::1]/x"), pair("[::1]:8080", "/x"));
    }

    #[test]
    fn bad_urls_say_why() {
        assert!(
            target("http://example.com/")
                .unwrap_err()
                .contains("not a jsontp:// URL")
        );
        assert!(target("/path").unwrap_err().contains("names no host"));
        assert!(target("jsontp:///path").unwrap_err().contains("names no host"));
        assert!(target("host:0/").unwrap_err().contains("port"));
        assert!(target("host:70000/").unwrap_err().contains("port"));
        assert!(target("host:x/").unwrap_err().contains("port"));
        assert!(target("[::1/").unwrap_err().contains("unclosed"));
    }

    #[test]
    fn header_values_are_strings_unless_json_or_the_boolean() {
        assert_eq!(
            header_value("accept", "text/plain"),
            Value::String("text/plain".into())
        );
        assert_eq!(
            header_value("accept", "[\"text/plain\"]"),
            serde_json::json!(["text/plain"])
        );
        assert_eq!(
            header_value("cookies", "{\"a\":\"b\"}"),
            serde_json::json!({"a": "b"})
        );
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
}
