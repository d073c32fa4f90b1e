//! `jsontp get|post|put|delete|options URL`: one request, used like curl.
//!
//! The decoded content goes to stdout (bytes as they are), to `-o FILE` or
//! `-O`; body keys of the answer go to stdout as JSON when there is no
//! content; `-i` puts the answer's envelope before the content, `-I` alone;
//! `-v` shows the request's envelope (`>`) and the answer's (`<`) on
//! stderr before the content, `-vv` the raw messages. curl's `-X`, `-d`, `-T` name the method
//! as curl reads them; curl's flags that mean nothing here say why.
//! Exit status: 0 for 1xx–3xx, 1 for 4xx/5xx, 2 when no answer came (usage,
//! connection or protocol error, or content that could not be written),
//! each failure with one line on stderr.

use std::fs::File;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jsontp_protocol::io_adapters::Transport;
use jsontp_protocol::io_adapters::client::blocking::Client;
use jsontp_protocol::io_adapters::client::{ClientError, ClientOptions};
use jsontp_protocol::io_adapters::tls::{ClientTls, HandshakeError, NotPinned};
use jsontp_protocol::message::{Body, Encoding, Forgiven, Method, Request, Response, Validation};
use serde_json::Value;

use super::envelope::{print_head, print_request, write_envelope};
use super::output::{Destination, WriteOut, write_content};
use super::request::{Source, build_body, build_request};
use super::target::Target;
use super::transfer::{Counted, CountedSink, Progress, Sink, Upload};
use super::wire::{Head, Point, Wire};

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
    /// `jsontps://`: also require the server's public key to be one of
    /// these, as curl's --pinnedpubkey: `sha256//BASE64`, several joined
    /// with `;` (the base64 of the SHA-256 of the key's DER form).
    #[arg(long, value_name = "sha256//BASE64")]
    pub pinnedpubkey: Option<String>,
    /// `jsontps://`: accept any server certificate (no authentication;
    /// for tests).
    #[arg(short = 'k', long, conflicts_with = "cacert")]
    pub insecure: bool,
    /// A request header, `name=value` or `'name: value'` (repeatable). The
    /// value is sent as a string; `[…]` and `{…}` that parse as JSON are
    /// sent as JSON, and `ignore-invalid-headers=true|false` as a boolean.
    /// `accept-encoding` is `["br","gzip","deflate","identity"]` unless
    /// given here: a server that paces its compression (`jsontp serve`
    /// does, for large files) sends the bytes as they are, in base64, while
    /// they are taken as fast as they come, and compresses as the link backs
    /// up, so the default is never much slower than identity.
    #[arg(short = 'H', long = "header", value_name = "NAME=VALUE")]
    pub headers: Vec<String>,
    /// Accept responses without `date`/`language` or with an empty
    /// `encoding` (the published reference server sends such), and say so.
    #[arg(long)]
    pub lenient: bool,
    /// `-v`: the request's envelope (`>`) and the answer's (`<`) on
    /// stderr before the content, as curl shows them; `-vv`: also the raw
    /// messages.
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
    /// The method to send instead of the command's (curl's -X):
    /// `jsontp get URL -X DELETE`.
    #[arg(short = 'X', long = "request", value_name = "METHOD")]
    pub request: Option<String>,
    /// Give up after this many seconds (connecting, waiting, or in total).
    #[arg(
        short = 'm',
        long,
        visible_alias = "max-time",
        value_name = "SECONDS",
        default_value_t = 30.0
    )]
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
    /// Write the content to a file in the current folder named as the
    /// URL's last path segment (as curl's -O), on a 2xx answer only.
    #[arg(short = 'O', long = "remote-name", conflicts_with = "output")]
    pub remote_name: bool,
    /// Print a folder listing as the server sent it (JSON) even on a
    /// terminal, where it is otherwise shown as a table.
    #[arg(long)]
    pub json: bool,
    /// Print the answer's envelope (status, headers, body keys) on stdout
    /// before its content, as curl's -i.
    #[arg(short = 'i', long)]
    pub include: bool,
    /// Print only the answer's envelope (curl's -I). jsontp has no HEAD
    /// method: this is a GET whose content is read and left out.
    #[arg(short = 'I', long = "head", conflicts_with_all = ["include", "output", "remote_name"])]
    pub head: bool,
}

/// The content sent.
#[derive(Debug, Default, clap::Args)]
pub struct ContentArgs {
    /// The content to send; `@FILE` sends a file's bytes, `@-` the standard
    /// input. On `get`, as in curl, it makes the request a POST.
    #[arg(
        short = 'd',
        long,
        visible_alias = "data-binary",
        alias = "data-raw",
        value_name = "TEXT",
        conflicts_with_all = ["file", "upload_file", "head"]
    )]
    pub data: Option<String>,
    /// Send the bytes of this file; `-` is the standard input.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["upload_file", "head"])]
    pub file: Option<PathBuf>,
    /// Send the bytes of this file (`-`: the standard input), as curl's -T.
    /// On `get`, as in curl, it makes the request a PUT.
    #[arg(
        short = 'T',
        long = "upload-file",
        value_name = "PATH",
        conflicts_with = "head"
    )]
    pub upload_file: Option<PathBuf>,
    /// A body key to send beside the content, `name=JSON` (repeatable):
    /// `--key 'nnntp={"type":"list"}'`, `--key n=3`. A value that is not
    /// JSON is sent as a string.
    #[arg(long = "key", value_name = "NAME=JSON")]
    pub keys: Vec<String>,
    /// How the content travels. By default `identity` for UTF-8 text and
    /// `gzip` for anything else (a binary file).
    #[arg(long, value_name = "ENCODING", value_parser = ["gzip", "deflate", "br", "identity"])]
    pub encoding: Option<String>,
    /// Ask first with `expect: 100-continue` and send the content once the
    /// server agrees (or stays silent for a second).
    #[arg(long = "continue")]
    pub expect_continue: bool,
}

/// curl's flags that mean nothing in jsontp: accepted by the parser, so
/// that the command can say why in one line instead of a parser's tip.
#[derive(Debug, Default, clap::Args)]
pub struct CurlArgs {
    /// Accepted for curl's habit; jsontp has no redirects.
    #[arg(short = 'L', long = "location", hide = true)]
    location: bool,
    /// Accepted for curl's habit; jsontp always asks for compression.
    #[arg(long, hide = true)]
    compressed: bool,
    /// What jsontp does already: exit 1 on an error status.
    #[arg(short = 'f', long = "fail", hide = true)]
    fail: bool,
    /// What jsontp does already: failures are printed even with -s.
    #[arg(short = 'S', long = "show-error", hide = true)]
    show_error: bool,
    #[arg(short = 'F', long = "form", hide = true)]
    form: Option<String>,
    #[arg(short = 'u', long = "user", hide = true)]
    user: Option<String>,
    #[arg(short = 'x', long = "proxy", hide = true)]
    proxy: Option<String>,
    #[arg(short = 'b', long = "cookie", hide = true)]
    cookie: Option<String>,
    #[arg(short = 'A', long = "user-agent", hide = true)]
    user_agent: Option<String>,
    #[arg(short = 'G', long = "get", hide = true)]
    get: bool,
    #[arg(short = 'r', long = "range", hide = true)]
    range: Option<String>,
    #[arg(short = 'C', long = "continue-at", hide = true)]
    continue_at: Option<String>,
    #[arg(short = 'c', long = "cookie-jar", hide = true)]
    cookie_jar: Option<String>,
    #[arg(short = 'e', long = "referer", hide = true)]
    referer: Option<String>,
    #[arg(long = "http1.1", hide = true)]
    http1: bool,
    #[arg(long = "http2", hide = true)]
    http2: bool,
}

impl CurlArgs {
    /// The first curl flag given that jsontp cannot honour, said with what
    /// to do instead.
    fn refusal(&self) -> Option<&'static str> {
        let refusals = [
            (
                self.form.is_some(),
                "-F/--form: jsontp has no multipart forms; send form data with -d 'k=v&k=v' or a file with -T FILE",
            ),
            (
                self.user.is_some(),
                "-u/--user: jsontp has no user:password login; send a token with -H 'authorization: TOKEN'",
            ),
            (
                self.proxy.is_some(),
                "-x/--proxy: jsontp speaks TCP (or TLS) straight to the server; there is no proxy to name",
            ),
            (
                self.cookie.is_some(),
                "-b/--cookie: send cookies as a header: -H 'cookies: name=value; other=value'",
            ),
            (
                self.user_agent.is_some(),
                "-A/--user-agent: jsontp has no user-agent header",
            ),
            (
                self.get,
                "-G/--get: write the query in the URL (host/path?k=v); -d makes a POST",
            ),
            (
                self.range.is_some() || self.continue_at.is_some(),
                "-r/-C: jsontp has no ranges; a download is whole, and -o writes it only when complete",
            ),
            (
                self.cookie_jar.is_some(),
                "-c/--cookie-jar: jsontp keeps no cookie jar; -i or -v shows the answer's set-cookies",
            ),
            (
                self.referer.is_some(),
                "-e/--referer: jsontp has no referer header",
            ),
            (
                self.http1 || self.http2,
                "--http1.1/--http2: jsontp is not HTTP; it has one version, sent as \"1.0\"",
            ),
        ];
        refusals.into_iter().find_map(|(given, why)| given.then_some(why))
    }

    /// Notes for curl flags that change nothing here.
    fn notes(&self) -> impl Iterator<Item = &'static str> {
        [
            (self.location, "-L: jsontp has no redirects, nothing to follow"),
            (
                self.compressed,
                "--compressed: jsontp asks for compressed content by default",
            ),
        ]
        .into_iter()
        .filter_map(|(given, note)| given.then_some(note))
    }
}

/// A client command's arguments.
#[derive(Debug, clap::Args)]
pub struct RequestArgs {
    #[command(flatten)]
    content: ContentArgs,
    #[command(flatten)]
    output: OutputArgs,
    #[command(flatten)]
    common: CommonArgs,
    #[command(flatten)]
    curl: CurlArgs,
}

impl RequestArgs {
    /// Runs the command of `method` (`-X`, `-d` and `-T` may change it).
    pub fn run(self, method: Method) -> ExitCode {
        if let Some(why) = self.curl.refusal() {
            return fail(why);
        }
        if !self.common.silent {
            for note in self.curl.notes() {
                eprintln!("jsontp: note: {note}");
            }
        }
        let method = match request_method(method, &self.common, &self.content) {
            Ok(method) => method,
            Err(why) => return fail(&why),
        };
        run(method, &self.common, &self.output, &self.content)
    }
}

/// The method sent: `-X` when given; else, on `get`, a POST with `-d` and
/// a PUT with `-T`, as curl reads them; else the command's own.
fn request_method(command: Method, common: &CommonArgs, content: &ContentArgs) -> Result<Method, String> {
    if let Some(name) = &common.request {
        let upper = name.to_ascii_uppercase();
        return Method::ALL
            .into_iter()
            .find(|m| m.as_str() == upper)
            .ok_or_else(|| format!("-X {name}: jsontp has the methods GET, POST, PUT, DELETE and OPTIONS"));
    }
    Ok(match command {
        Method::Get if content.upload_file.is_some() => Method::Put,
        Method::Get if content.data.is_some() || content.file.is_some() => Method::Post,
        other => other,
    })
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
        if let Some(pins) = &common.pinnedpubkey {
            parse_pins(pins)?;
        }
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
        let file = content.upload_file.as_deref().or(content.file.as_deref());
        let (body, upload) = match Source::from_args(content.data.as_deref(), file) {
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
        let body = with_keys(body, &content.keys)?;
        let destination = destination(output, &target)?;
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
            destination,
            write_out,
        })
    }
}

/// Where the content goes: `-o FILE`, `-O` (the URL's last segment, in
/// the current folder), or stdout.
fn destination(output: &OutputArgs, target: &Target) -> Result<Destination, String> {
    if !output.remote_name {
        return Ok(Destination::from_arg(output.output.as_deref()));
    }
    let path = target.resource.split(['?', '#']).next().unwrap_or_default();
    match path.rsplit('/').next() {
        Some(name) if !matches!(name, "" | "." | "..") => Ok(Destination::File(PathBuf::from(name))),
        _ => Err(format!(
            "-O: {} names no file to save as (it ends in /); give -o FILE",
            target.resource
        )),
    }
}

/// `--key name=JSON`, each a body key beside the content (D9): JSON
/// values, or a string when the text is not JSON.
fn with_keys(mut body: Body, keys: &[String]) -> Result<Body, String> {
    for arg in keys {
        let Some((name, text)) = arg.split_once('=') else {
            return Err(format!("--key {arg:?}: write a body key as name=JSON"));
        };
        if name.is_empty() {
            return Err(format!("--key {arg:?}: the key has no name"));
        }
        if body.extra().contains_key(name) {
            return Err(format!("--key {name} is given twice"));
        }
        let value = serde_json::from_str::<Value>(text).unwrap_or_else(|_| Value::String(text.to_owned()));
        body = body
            .with_extra(name, value)
            .map_err(|e| format!("--key {name}: {e}"))?;
    }
    Ok(body)
}

fn validation(common: &CommonArgs) -> Validation {
    if common.lenient {
        Validation::Lenient
    } else {
        Validation::Strict
    }
}

/// What came back: the response, what lenient mode forgave in it,
/// whether a `100` came first, and how many bytes of content went out.
struct Answer {
    response: Response,
    forgiven: Vec<Forgiven>,
    continued: bool,
    content_bytes: u64,
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
    let envelope = if output.head {
        Envelope::Only
    } else if output.include {
        Envelope::Before
    } else {
        Envelope::Hidden
    };
    let sink = if method == Method::Options || envelope == Envelope::Only {
        Ok(Sink::Discard)
    } else if envelope == Envelope::Before && !matches!(destination, Destination::File(_)) {
        // The envelope comes last on the wire (content streams after it
        // is read), so the content waits until it is printed.
        Sink::held(&destination)
    } else {
        Sink::new(&destination, output.json || common.silent)
    };
    let sink = match sink {
        Ok(sink) => sink,
        Err(message) => return fail(&message),
    };
    let transfer = Transfer {
        upload,
        sink,
        envelope,
    };
    match exchange(&target, request, transfer, options, common) {
        Ok(answer) => report(
            method,
            common,
            &target,
            envelope,
            &destination,
            write_out.as_ref(),
            &answer,
        ),
        Err(Failure(message)) => fail(&message),
    }
}

/// One line on stderr and exit status 2.
fn fail(message: &str) -> ExitCode {
    eprintln!("jsontp: {}", own_words(message));
    ExitCode::from(2)
}

/// The content moved by one command: the upload's source, if any, where
/// the downloaded content goes, and whether the answer's envelope goes
/// before it.
struct Transfer {
    upload: Option<Upload>,
    sink: Sink,
    envelope: Envelope,
}

/// `-i` and `-I`: the answer's envelope on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Envelope {
    /// Only the content (the default).
    Hidden,
    /// The envelope, a blank line, then the content (`-i`).
    Before,
    /// The envelope alone (`-I`).
    Only,
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
            .map_err(|e| Failure(tls_failure(&e, common, target).unwrap_or_else(|| e.to_string())))?;
        return talk(client, request, transfer, common, target);
    }
    let client = Client::connect(target.address.as_str(), options).map_err(|e| Failure(e.to_string()))?;
    talk(client, request, transfer, common, target)
}

/// Which server certificates a `jsontps://` client trusts (D20): the
/// system's roots unless `--cacert` or `--insecure` says otherwise.
fn client_tls(common: &CommonArgs) -> io::Result<ClientTls> {
    let tls = if common.insecure {
        ClientTls::insecure()
    } else if let Some(file) = &common.cacert {
        ClientTls::from_ca_file(file)?
    } else {
        ClientTls::system_roots()?
    };
    match &common.pinnedpubkey {
        Some(pins) => tls.with_pinned_keys(parse_pins(pins).map_err(io::Error::other)?),
        None => Ok(tls),
    }
}

/// `--pinnedpubkey sha256//BASE64;sha256//BASE64`, as curl writes it.
fn parse_pins(text: &str) -> Result<Vec<[u8; 32]>, String> {
    use base64::Engine;
    text.split(';')
        .map(|pin| {
            pin.trim()
                .strip_prefix("sha256//")
                .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
                .and_then(|digest| <[u8; 32]>::try_from(digest).ok())
                .ok_or_else(|| {
                    format!(
                        "--pinnedpubkey {pin:?}: write sha256//BASE64, the base64 of the key's SHA-256 \
                         (openssl x509 -in cert.pem -pubkey -noout | openssl pkey -pubin -outform der \
                         | openssl dgst -sha256 -binary | base64)"
                    )
                })
        })
        .collect()
}

/// A TLS failure (D20) in words and the next step to take with this
/// command, when the error is one: never rustls' names for it.
fn tls_failure(error: &ClientError, common: &CommonArgs, target: &Target) -> Option<String> {
    let source = match error {
        ClientError::Tls { source, .. } | ClientError::Io(source) => source,
        _ => return None,
    };
    let address = &target.address;
    match source
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<HandshakeError>())
    {
        Some(handshake) => Some(format!(
            "no TLS session with {address}: {handshake}; {}",
            next_step(handshake, common, target)
        )),
        // A read's error reaches us as a copy, its type lost: the server's
        // refusal of our certificate after the handshake keeps its kind.
        None if target.tls
            && matches!(error, ClientError::Io(_))
            && source.kind() == io::ErrorKind::PermissionDenied =>
        {
            Some(format!(
                "no TLS session with {address}: {source}; {NO_CLIENT_CERTIFICATE}"
            ))
        }
        None => None,
    }
}

/// What to do when a server wants a client certificate (mutual TLS).
const NO_CLIENT_CERTIFICATE: &str = "this command cannot show a client certificate: ask the \
                                     server's operator for access, or call the server from a \
                                     program that has one";

/// What to do about a failed handshake.
fn next_step(handshake: &HandshakeError, common: &CommonArgs, target: &Target) -> String {
    use rustls::AlertDescription as A;
    use rustls::CertificateError as C;
    use rustls::Error as E;
    match &handshake.error {
        E::InvalidMessage(_) | E::InappropriateHandshakeMessage { .. } | E::InappropriateMessage { .. } => {
            format!(
                "if it serves plain jsontp, use jsontp://{}{}",
                target.address, target.resource
            )
        }
        E::InvalidCertificate(C::Other(other)) if other.0.downcast_ref::<NotPinned>().is_some() => {
            "check --pinnedpubkey against the server's key".into()
        }
        E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => {
            "connect by a name the certificate is for (or -k to skip the check)".into()
        }
        E::InvalidCertificate(C::Expired | C::ExpiredContext { .. }) => {
            "its operator must renew it (-k skips the check, for a test server)".into()
        }
        E::InvalidCertificate(C::NotValidYet | C::NotValidYetContext { .. }) => {
            "check this machine's clock (-k skips the check)".into()
        }
        E::InvalidCertificate(_) => match &common.cacert {
            None => "to trust a self-signed server, give its certificate with --cacert FILE, or for \
                     a private CA the CA's certificate (or -k to skip the check)"
                .into(),
            Some(file) => format!(
                "the server's certificate is neither in {} nor signed by one of its certificates; \
                 give the server's own certificate or its CA's with --cacert (-k skips the check)",
                file.display()
            ),
        },
        E::AlertReceived(A::NoApplicationProtocol) => {
            "check the host and port: this is a TLS server of another protocol (HTTPS?)".into()
        }
        E::AlertReceived(
            A::CertificateRequired
            | A::BadCertificate
            | A::UnsupportedCertificate
            | A::CertificateRevoked
            | A::CertificateExpired
            | A::CertificateUnknown
            | A::UnknownCA
            | A::AccessDenied,
        ) => NO_CLIENT_CERTIFICATE.into(),
        _ => "check that the host and port are a jsontps:// server's".into(),
    }
}

/// Sends the request on a connected client and waits for the answer.
fn talk<S: Transport>(
    mut client: Client<S>,
    request: Request,
    transfer: Transfer,
    common: &CommonArgs,
    target: &Target,
) -> Result<Answer, Failure> {
    let config = &client.options().config;
    let wire = Arc::new(Mutex::new(Wire::new(
        common.verbose >= 2,
        common.verbose >= 1,
        config.validation,
        config.limits.message,
    )));
    let traced = Arc::clone(&wire);
    client.set_tracer(move |direction, bytes| {
        if let Ok(mut wire) = traced.lock() {
            wire.on_bytes(direction, bytes);
        }
    });
    let Transfer {
        upload,
        mut sink,
        envelope,
    } = transfer;
    if common.verbose >= 1 {
        print_request(&request);
    }
    let mut received = Progress::new(None, common.silent);
    let (outcome, held) = {
        let mut counted = CountedSink {
            inner: &mut sink,
            progress: &mut received,
        };
        let mut gated = HeadFirst {
            inner: &mut counted,
            wire: &wire,
            gate: if common.verbose >= 1 {
                Gate::Waiting
            } else {
                Gate::Open
            },
        };
        let outcome = match upload {
            Some(upload) => {
                let mut sent = Progress::new(upload.len, common.silent);
                let mut reader = Counted {
                    inner: upload.reader,
                    progress: &mut sent,
                };
                let outcome = client.upload(request, &mut reader, Some(&mut gated));
                sent.finish();
                outcome
            }
            None => client.download(request, &mut gated),
        };
        (outcome, gated.into_held())
    };
    received.finish();
    drop(client);
    // The file is kept only for a complete 2xx answer.
    let keep = matches!(&outcome, Ok(answer) if answer.response.status.code.is_success());
    let Ok(mut wire) = wire.lock() else {
        return Err(Failure("the connection's trace was lost".into()));
    };
    wire.finish();
    let held_bytes = held
        .as_ref()
        .and_then(|file| file.metadata().ok())
        .map_or(0, |meta| meta.len());
    let answer = match outcome {
        Ok(exchange) => Ok(Answer {
            content_bytes: received.done() + held_bytes + exchange.response.body.content().len() as u64,
            response: exchange.response,
            forgiven: exchange.forgiven,
            continued: exchange.continued,
        }),
        Err(error) => answer_in_error(error, &wire, common, target).map(|response| Answer {
            content_bytes: response.body.content().len() as u64,
            response,
            forgiven: Vec::new(),
            continued: false,
        }),
    };
    // -v: the head before the content, here when it could not be read
    // as the bytes came; then the content it held back.
    if let Ok(answer) = &answer {
        let shown_continue = match wire.head() {
            Head::Off | Head::Shown => None,
            Head::Reading { at, .. } => Some(*at != Point::First),
            Head::Unknown { continued } => Some(*continued),
        };
        if let Some(shown_continue) = shown_continue {
            print_head(&answer.response, answer.continued && !shown_continue);
        }
    }
    if let Some(mut file) = held {
        use std::io::Seek;
        file.seek(io::SeekFrom::Start(0))
            .and_then(|_| io::copy(&mut file, &mut sink))
            .map_err(|e| Failure(format!("cannot write the content: {e}")))?;
    }
    if envelope != Envelope::Hidden
        && let Ok(answer) = &answer
    {
        let mut out = io::stdout().lock();
        // A reader that went away (`| head`) is not our failure.
        let _ = write_envelope(&mut out, "", &answer.response, answer.continued)
            .and_then(|()| {
                if envelope == Envelope::Before {
                    writeln!(out)
                } else {
                    Ok(())
                }
            })
            .and_then(|()| out.flush());
    }
    sink.finish(keep).map_err(Failure)?;
    answer
}

/// A failed exchange: either still an answer (a response that echoes
/// `""`), or one line that says what happened.
fn answer_in_error(
    error: ClientError,
    wire: &Wire,
    common: &CommonArgs,
    target: &Target,
) -> Result<Response, Failure> {
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
        // A server refusing our certificate after our side of the
        // handshake was done (mutual TLS, TLS 1.3).
        other => Err(Failure(
            tls_failure(&other, common, target).unwrap_or_else(|| other.to_string()),
        )),
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
#[allow(clippy::too_many_arguments)] // what one command's answer depends on
fn report(
    method: Method,
    common: &CommonArgs,
    target: &Target,
    envelope: Envelope,
    destination: &Destination,
    write_out: Option<&WriteOut>,
    answer: &Answer,
) -> ExitCode {
    let response = &answer.response;
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
    // Body keys beside the content (D9): on stdout, as JSON, when they are
    // the whole answer; else a line on stderr. -i and -I showed them.
    let mut keys = response.body.extra().clone();
    // A listing's next page (jsontp serve --list): how to ask for it.
    if let Some(Value::String(next)) = keys.remove("next-page")
        && !common.silent
    {
        let scheme = if target.tls { "jsontps" } else { "jsontp" };
        eprintln!(
            "jsontp: more entries follow; the next page: jsontp get '{scheme}://{}{next}'",
            target.address
        );
    }
    // An error's allowed methods are in its message.
    if response.status.code.is_error() {
        keys.remove("allowed-methods");
    }
    if method != Method::Options && !keys.is_empty() && envelope == Envelope::Hidden {
        let json = Value::Object(keys);
        if answer.content_bytes == 0 && !response.status.code.is_error() {
            let mut out = io::stdout().lock();
            let _ = writeln!(out, "{json}").and_then(|()| out.flush());
        } else if !common.silent {
            eprintln!("jsontp: body keys: {json}");
        }
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

/// `-v`: the content waits for the answer's head on stderr (curl's
/// order). The head is read as the bytes arrive ([`Wire`]) and is shown
/// before the first piece as a rule; when it could not be, the content is
/// held in an anonymous temporary file until the answer is whole and its
/// head shown.
struct HeadFirst<'a, W> {
    inner: W,
    wire: &'a Mutex<Wire>,
    gate: Gate,
}

/// Where [`HeadFirst`] sends the content.
enum Gate {
    /// No content yet.
    Waiting,
    /// The head is shown (or not asked for): the content goes on.
    Open,
    /// The head was not shown: the content is held.
    Holding(File),
}

impl<W> HeadFirst<'_, W> {
    /// The content held back, if any.
    fn into_held(self) -> Option<File> {
        match self.gate {
            Gate::Holding(file) => Some(file),
            Gate::Waiting | Gate::Open => None,
        }
    }
}

impl<W: Write> Write for HeadFirst<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match &mut self.gate {
                Gate::Open => return self.inner.write(buf),
                Gate::Holding(file) => return file.write(buf),
                Gate::Waiting => {
                    let shown = self
                        .wire
                        .lock()
                        .is_ok_and(|wire| matches!(wire.head(), Head::Shown | Head::Off));
                    self.gate = if shown {
                        Gate::Open
                    } else {
                        Gate::Holding(tempfile::tempfile()?)
                    };
                }
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.gate {
            Gate::Holding(file) => file.flush(),
            Gate::Waiting | Gate::Open => self.inner.flush(),
        }
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
