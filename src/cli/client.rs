//! `jsontp get|post|put|delete|options URL`: one request, used like curl.
//!
//! The decoded content goes to stdout (bytes as they are) or to `-o FILE`;
//! `-v` adds the status line and headers on stderr, `-vv` the raw messages.
//! Exit status: 0 for 1xx–3xx, 1 for 4xx/5xx, 2 when no answer came (usage,
//! connection or protocol error, or content that could not be written),
//! each failure with one line on stderr.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jsontp::io_adapters::Transport;
use jsontp::io_adapters::client::blocking::Client;
use jsontp::io_adapters::client::{ClientError, ClientOptions};
use jsontp::io_adapters::tls::{ClientTls, HandshakeError};
use jsontp::message::{Body, Encoding, Forgiven, Method, Request, Response, Validation};
use serde_json::Value;

use super::output::{Destination, WriteOut, write_content};
use super::request::{Source, build_body, build_request};
use super::target::Target;
use super::transfer::{Counted, CountedSink, Progress, Sink, Upload};
use super::wire::Wire;

/// What every client command takes.
#[derive(Debug, clap::Args)]
pub struct CommonArgs {
    /// Where to send the request: `jsontp://host:port/path`,
    /// `host:port/path` or `host/path` (port 8080 when absent), or
    /// `jsontps://host:port/path` for TLS (port 8443 when absent).
    pub url: String,
    /// `jsontps://`: trust only the CA certificates of this PEM file
    /// instead of the system's.
    #[arg(long, value_name = "FILE", env = "JSONTP_CACERT")]
    pub cacert: Option<PathBuf>,
    /// `jsontps://`: accept any server certificate (no authentication;
    /// for tests).
    #[arg(short = 'k', long, conflicts_with = "cacert")]
    pub insecure: bool,
    /// A request header, `name=value` or `'name: value'` (repeatable). The
    /// value is sent as a string; `[…]` and `{…}` that parse as JSON are
    /// sent as JSON, and `ignore-invalid-headers=true|false` as a boolean.
    /// `accept-encoding` is `["br","gzip","deflate","identity"]` unless
    /// given here.
    #[arg(short = 'H', long = "header", value_name = "NAME=VALUE")]
    pub headers: Vec<String>,
    /// Accept responses without `date`/`language` or with an empty
    /// `encoding` (the published reference server sends such), and say so.
    #[arg(long)]
    pub lenient: bool,
    /// `-v`: the status line and headers on stderr; `-vv`: the raw messages.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Nothing on stderr for an error status or a lenient note (the exit
    /// status still says it); failures that exit 2 still print their line.
    #[arg(short, long, conflicts_with = "verbose")]
    pub silent: bool,
    /// After the content, print FORMAT to stdout with %{code},
    /// %{formal_message}, %{human_message} and %{resource} filled in
    /// (`-w '%{code}\n'` for scripts; `\n`, `\t` and `%%` are escapes).
    #[arg(short = 'w', long = "write-out", value_name = "FORMAT")]
    pub write_out: Option<String>,
    /// Give up after this many seconds (connecting, waiting, or in total).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub timeout: f64,
}

/// Where the content received goes.
#[derive(Debug, Default, clap::Args)]
pub struct OutputArgs {
    /// Write the content to FILE instead of stdout, on a 2xx answer only
    /// (otherwise FILE is left as it was). `-o -` is stdout, binary or not:
    /// without it, binary content is not written to a terminal.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// The content sent.
#[derive(Debug, Default, clap::Args)]
pub struct ContentArgs {
    /// The content to send; `@FILE` sends a file's bytes, `@-` the standard
    /// input.
    #[arg(short = 'd', long, value_name = "TEXT", conflicts_with = "file")]
    pub data: Option<String>,
    /// Send the bytes of this file; `-` is the standard input.
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// How the content travels. By default `identity` for UTF-8 text and
    /// `gzip` for anything else (a binary file).
    #[arg(long, value_name = "ENCODING", value_parser = ["gzip", "deflate", "br", "identity"])]
    pub encoding: Option<String>,
    /// Ask first with `expect: 100-continue` and send the content once the
    /// server agrees (or stays silent for a second).
    #[arg(long = "continue")]
    pub expect_continue: bool,
}

/// `get` and `delete`: no content sent.
#[derive(Debug, clap::Args)]
pub struct PlainArgs {
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    common: CommonArgs,
}

/// `post` and `put`: content sent.
#[derive(Debug, clap::Args)]
pub struct SendArgs {
    #[command(flatten)]
    content: ContentArgs,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    common: CommonArgs,
}

/// `options`: the allowed methods, one line.
#[derive(Debug, clap::Args)]
pub struct OptionsArgs {
    #[command(flatten)]
    common: CommonArgs,
}

impl PlainArgs {
    /// Runs `get` or `delete`.
    pub fn run(self, method: Method) -> ExitCode {
        run(method, &self.common, &self.output, &ContentArgs::default())
    }
}

impl SendArgs {
    /// Runs `post` or `put`.
    pub fn run(self, method: Method) -> ExitCode {
        run(method, &self.common, &self.output, &self.content)
    }
}

impl OptionsArgs {
    /// Runs `options`.
    pub fn run(self) -> ExitCode {
        run(
            Method::Options,
            &self.common,
            &OutputArgs::default(),
            &ContentArgs::default(),
        )
    }
}

/// Why the command stops before an answer: exit status 2.
struct Failure(String);

/// Everything read from the arguments before connecting, so that a usage
/// error never costs a connection.
struct Plan {
    target: Target,
    request: Request,
    /// A file or stdin, streamed as the request's content (D19).
    upload: Option<Upload>,
    options: ClientOptions,
    destination: Destination,
    write_out: Option<WriteOut>,
}

impl Plan {
    fn new(
        method: Method,
        common: &CommonArgs,
        output: &OutputArgs,
        content: &ContentArgs,
    ) -> Result<Plan, String> {
        let target = Target::parse(&common.url)?;
        let write_out = common.write_out.as_deref().map(WriteOut::parse).transpose()?;
        if !(common.timeout.is_finite() && common.timeout > 0.0) {
            return Err("--timeout must be a positive number of seconds".into());
        }
        let timeout = Duration::from_secs_f64(common.timeout);
        let asked = match &content.encoding {
            Some(name) => Some(name.parse::<Encoding>().map_err(|e| e.to_string())?),
            None => None,
        };
        // Text given on the command line goes whole; a file or stdin
        // streams, whatever its size (D19).
        let (body, upload) = match Source::from_args(content.data.as_deref(), content.file.as_deref()) {
            Some(source @ Source::Text(_)) => (build_body(source.read()?, asked)?, None),
            Some(source) => {
                let upload = Upload::open(&source, asked)?;
                let head = Body::empty()
                    .with_encoding(upload.encoding)
                    .map_err(|e| e.to_string())?;
                (head, Some(upload))
            }
            None => (build_body(Vec::new(), asked)?, None),
        };
        let request = build_request(
            method,
            &target.resource,
            &common.headers,
            content.expect_continue,
            body,
        )?;
        let mut options = ClientOptions {
            connect_timeout: Some(timeout),
            read_timeout: Some(timeout),
            exchange_timeout: Some(timeout),
            ..ClientOptions::default()
        };
        options.config.validation = validation(common);
        // Content of any size streams to its destination in constant
        // memory (D19): no limit but the disk's.
        options.config.stream_content = true;
        options.config.limits.max_content_bytes = usize::MAX;
        Ok(Plan {
            target,
            request,
            upload,
            options,
            destination: Destination::from_arg(output.output.as_deref()),
            write_out,
        })
    }
}

fn validation(common: &CommonArgs) -> Validation {
    if common.lenient {
        Validation::Lenient
    } else {
        Validation::Strict
    }
}

/// What came back: the response, what lenient mode forgave in it, and
/// whether a `100` came first.
struct Answer {
    response: Response,
    forgiven: Vec<Forgiven>,
    continued: bool,
}

/// Runs one client command.
fn run(method: Method, common: &CommonArgs, output: &OutputArgs, content: &ContentArgs) -> ExitCode {
    let plan = match Plan::new(method, common, output, content) {
        Ok(plan) => plan,
        Err(message) => return fail(&message),
    };
    let Plan {
        target,
        request,
        upload,
        options,
        destination,
        write_out,
    } = plan;
    let sink = if method == Method::Options {
        Ok(Sink::Discard)
    } else {
        Sink::new(&destination)
    };
    let sink = match sink {
        Ok(sink) => sink,
        Err(message) => return fail(&message),
    };
    let transfer = Transfer { upload, sink };
    match exchange(&target, request, transfer, options, common) {
        Ok(answer) => report(method, common, &destination, write_out.as_ref(), &answer),
        Err(Failure(message)) => fail(&message),
    }
}

/// One line on stderr and exit status 2.
fn fail(message: &str) -> ExitCode {
    eprintln!("jsontp: {}", own_words(message));
    ExitCode::from(2)
}

/// The content moved by one command: the upload's source, if any, and
/// where the downloaded content goes.
struct Transfer {
    upload: Option<Upload>,
    sink: Sink,
}

/// Sends the request and waits for the answer.
fn exchange(
    target: &Target,
    request: Request,
    transfer: Transfer,
    options: ClientOptions,
    common: &CommonArgs,
) -> Result<Answer, Failure> {
    if target.tls {
        let tls = client_tls(common).map_err(|source| ClientError::Tls {
            addr: target.address.clone(),
            source,
        });
        let client = tls
            .and_then(|tls| Client::connect_tls(target.address.as_str(), &target.host, &tls, options))
            .map_err(|e| Failure(with_tls_advice(&e, common)))?;
        return talk(client, request, transfer, common);
    }
    let client = Client::connect(target.address.as_str(), options).map_err(|e| Failure(e.to_string()))?;
    talk(client, request, transfer, common)
}

/// Which server certificates a `jsontps://` client trusts (D20): the
/// system's roots unless `--cacert` or `--insecure` says otherwise.
fn client_tls(common: &CommonArgs) -> io::Result<ClientTls> {
    if common.insecure {
        Ok(ClientTls::insecure())
    } else if let Some(file) = &common.cacert {
        ClientTls::from_ca_file(file)
    } else {
        ClientTls::system_roots()
    }
}

/// A connection error, and for a server certificate this client does not
/// trust, the flag that helps.
fn with_tls_advice(error: &ClientError, common: &CommonArgs) -> String {
    let handshake = match error {
        ClientError::Tls { source, .. } => source
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<HandshakeError>()),
        _ => None,
    };
    let Some(handshake) = handshake.filter(|h| h.certificate_refused()) else {
        return error.to_string();
    };
    let wrong_name = matches!(
        handshake.error,
        rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. }
        )
    );
    match &common.cacert {
        _ if wrong_name => {
            format!("{error}; connect by a name the certificate holds (or -k to skip the check)")
        }
        None => format!(
            "{error}; to trust a self-signed server, give its certificate with --cacert FILE \
             (or -k to skip the check)"
        ),
        Some(file) => format!(
            "{error}; the server's certificate is neither in {} nor signed by one of its \
             certificates (-k skips the check)",
            file.display()
        ),
    }
}

/// Sends the request on a connected client and waits for the answer.
fn talk<S: Transport>(
    mut client: Client<S>,
    request: Request,
    transfer: Transfer,
    common: &CommonArgs,
) -> Result<Answer, Failure> {
    let wire = Arc::new(Mutex::new(Wire::new(common.verbose >= 2)));
    let traced = Arc::clone(&wire);
    client.set_tracer(move |direction, bytes| {
        if let Ok(mut wire) = traced.lock() {
            wire.on_bytes(direction, bytes);
        }
    });
    let Transfer { upload, mut sink } = transfer;
    let mut received = Progress::new(None, common.silent);
    let outcome = {
        let mut counted = CountedSink {
            inner: &mut sink,
            progress: &mut received,
        };
        match upload {
            Some(upload) => {
                let mut sent = Progress::new(upload.len, common.silent);
                let mut reader = Counted {
                    inner: upload.reader,
                    progress: &mut sent,
                };
                let outcome = client.upload(request, &mut reader, Some(&mut counted));
                sent.finish();
                outcome
            }
            None => client.download(request, &mut counted),
        }
    };
    received.finish();
    drop(client);
    // The file is kept only for a complete 2xx answer.
    let keep = matches!(&outcome, Ok(answer) if answer.response.status.code.is_success());
    sink.finish(keep).map_err(Failure)?;
    let Ok(mut wire) = wire.lock() else {
        return Err(Failure("the connection's trace was lost".into()));
    };
    wire.finish();
    match outcome {
        Ok(exchange) => Ok(Answer {
            response: exchange.response,
            forgiven: exchange.forgiven,
            continued: exchange.continued,
        }),
        Err(error) => answer_in_error(error, &wire).map(|response| Answer {
            response,
            forgiven: Vec::new(),
            continued: false,
        }),
    }
}

/// A failed exchange: either still an answer (a response that echoes
/// `""`), or one line that says what happened.
fn answer_in_error(error: ClientError, wire: &Wire) -> Result<Response, Failure> {
    // Whatever the machine made of it, a peer that speaks another protocol
    // is the thing to say.
    if let Some(protocol) = wire.foreign_protocol() {
        return Err(Failure(protocol.into()));
    }
    match error {
        // D12: a response that echoes `""` is the server saying it could not
        // read the request (too large, not JSON, …): its status and message
        // are the answer, not a mismatch. The machine already hands error
        // responses over as answers; any other such response arrives here.
        ClientError::ResourceMismatch {
            received,
            response: Some(response),
            ..
        } if received.is_empty() => Ok(*response),
        // D13: a response for another resource is not an answer to ours.
        ClientError::ResourceMismatch { sent, received, .. } => Err(Failure(format!(
            "the server answered for resource {received:?}, not {sent:?} as requested"
        ))),
        other => Err(Failure(other.to_string())),
    }
}

/// Our own error text without the rule numbers (`(D13)`) the library adds
/// for its developers: a user has no use for them. The server's words are
/// never changed.
fn own_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" (D") {
        let after = &rest[at + 3..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && after[digits..].starts_with(')') {
            out.push_str(&rest[..at]);
            rest = &after[digits + 1..];
        } else {
            out.push_str(&rest[..at + 3]);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Prints the answer and picks the exit status.
fn report(
    method: Method,
    common: &CommonArgs,
    destination: &Destination,
    write_out: Option<&WriteOut>,
    answer: &Answer,
) -> ExitCode {
    let response = &answer.response;
    if common.verbose >= 1 {
        print_head(response, answer.continued);
    }
    if !answer.forgiven.is_empty() && !common.silent {
        let forgiven: Vec<&str> = answer.forgiven.iter().map(|f| describe(*f)).collect();
        eprintln!("jsontp: note: lenient mode forgave {}", forgiven.join(", "));
    }
    // The content went out as it came (D19); OPTIONS prints its methods.
    if let Some(line) = allowed_methods(method, response)
        && let Err(e) = write_content(destination, response, line.as_bytes())
    {
        eprintln!("jsontp: {e}");
        return ExitCode::from(2);
    }
    if let Some(format) = write_out {
        let mut out = io::stdout().lock();
        // A reader that went away (`| head`) is not our failure.
        let _ = out
            .write_all(format.render(response).as_bytes())
            .and_then(|()| out.flush());
    }
    let code = response.status.code;
    if code.is_error() {
        if !common.silent {
            eprintln!(
                "jsontp: {} {}: {}",
                code.as_u16(),
                code.reason(),
                response.status.human_message
            );
        }
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

/// For `options` without content: the `allowed-methods`, one line.
fn allowed_methods(method: Method, response: &Response) -> Option<String> {
    if method != Method::Options || !response.body.content().is_empty() {
        return None;
    }
    let methods = response.body.extra().get("allowed-methods")?.as_array()?;
    let names: Vec<&str> = methods.iter().filter_map(Value::as_str).collect();
    Some(format!("{}\n", names.join(", ")))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_numbers_are_left_out_of_our_own_words() {
        assert_eq!(
            own_words(r#"the response is for resource "/a", not "/b" as requested (D13)"#),
            r#"the response is for resource "/a", not "/b" as requested"#
        );
        assert_eq!(
            own_words("invalid response: message is 9 bytes, more than the limit of 8 (D3)"),
            "invalid response: message is 9 bytes, more than the limit of 8"
        );
        assert_eq!(own_words("a (D4) and (D12) twice"), "a and twice");
        // Not a rule number: kept.
        assert_eq!(own_words("see (Dx) and (D) and (D1"), "see (Dx) and (D) and (D1");
        assert_eq!(own_words("plain"), "plain");
    }
}
