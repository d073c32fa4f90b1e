//! `jsontp serve`: the file server on the mio adapter. Read-only unless
//! `--writable` (or a token) says otherwise, on loopback unless `--addr`
//! says otherwise; every option also read from a `JSONTP_*` variable or a
//! configuration file (`config.rs`), and reloaded on SIGHUP (`reload.rs`).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use arc_swap::ArcSwap;
use clap::builder::{FalseyValueParser, NonEmptyStringValueParser};
use clap::error::ErrorKind;
use clap::{ArgMatches, FromArgMatches};
use jsontp_protocol::machine::{ContinuePolicy, ServerConfig};
use jsontp_protocol::message::{LanguageTag, Method, Request, Response, Status, StatusCode};

pub use self::adapter::Exchange;
use self::adapter::{
    Handled, Handler, HeadCheck, Incoming, RequestInfo, ServerMetrics, ServerTls, ShutdownHandle,
};
use super::admin::{Admin, Health, Serving};
use super::config::{self, Settings};
use super::log::{self, LogFormat};
use super::reload::{self, Live, Ready, Reloader};
use super::sockets::{self, Inherited, Keeper, Successor};
use super::target::DEFAULT_PORT;

/// The host a bare port listens on: loopback, so that nothing outside the
/// machine reaches a server started without thinking about it.
const DEFAULT_HOST: &str = "127.0.0.1";

/// Arguments of `jsontp serve`, each also read from the environment
/// variable `--help` names and from the `--config` file under its long
/// name (the command line wins over both, the variable over the file).
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Read the settings from this TOML file too, keyed by the long
    /// option names (`max-upload = "2G"`); the environment and the command
    /// line win over it. SIGHUP reads it again.
    #[arg(long, env = "JSONTP_CONFIG", value_name = "FILE")]
    pub(super) config: Option<PathBuf>,
    /// Check the settings (the file, the values, the root, the token file,
    /// the TLS files) as a start would, short of listening; say whether
    /// they are valid and exit 0 or 1.
    #[arg(long)]
    pub(super) check_config: bool,
    /// The folder to serve.
    #[arg(long, env = "JSONTP_ROOT", default_value = ".")]
    pub(super) root: PathBuf,
    /// Where to listen: HOST:PORT, HOST (port 8080), PORT (on 127.0.0.1)
    /// or [IPV6]:PORT; port 0 picks a free port (the start line says which).
    #[arg(
        long,
        env = "JSONTP_ADDR",
        default_value = "127.0.0.1:8080",
        value_parser = ListenAddr::parse
    )]
    pub(super) addr: ListenAddr,
    /// Serve PUT and DELETE (without it they answer 405: the server is
    /// read-only).
    #[arg(long, env = "JSONTP_WRITABLE", value_parser = FalseyValueParser::new())]
    pub(super) writable: bool,
    /// Serve PUT and DELETE to requests whose `authorization` equals TOKEN
    /// (others get 401). Visible to every user in `ps`: prefer
    /// JSONTP_TOKEN or --token-file.
    #[arg(
        long,
        env = config::TOKEN_ENV,
        hide_env_values = true,
        value_parser = NonEmptyStringValueParser::new()
    )]
    pub(super) token: Option<String>,
    /// Read the token from the first line of FILE (as --token does).
    #[arg(long, env = "JSONTP_TOKEN_FILE", value_name = "FILE")]
    pub(super) token_file: Option<PathBuf>,
    /// Answer GET of a folder without index.html with a JSON listing of
    /// its entries (without it: 404).
    #[arg(long, env = "JSONTP_LIST", value_parser = FalseyValueParser::new())]
    pub(super) list: bool,
    /// The languages offered, comma-separated, the first being the default.
    #[arg(long, env = "JSONTP_LANGUAGE", value_delimiter = ',', default_value = "en-US")]
    pub(super) language: Vec<LanguageTag>,
    /// Refuse `expect: 100-continue`: answer 501 and close the connection.
    #[arg(long, env = "JSONTP_NO_CONTINUE", value_parser = FalseyValueParser::new())]
    pub(super) no_continue: bool,
    /// Event-loop threads (default: one per core).
    #[arg(long, env = "JSONTP_WORKERS", default_value_t = 0, hide_default_value = true)]
    pub(super) workers: usize,
    /// The most connections open at once; more wait in the listen queue.
    #[arg(
        long,
        env = "JSONTP_MAX_CONNECTIONS",
        value_name = "N",
        default_value = "10000",
        value_parser = parse_max_connections
    )]
    pub(super) max_connections: NonZeroUsize,
    /// No access log (the server's warnings and errors still show).
    #[arg(long, env = "JSONTP_QUIET", value_parser = FalseyValueParser::new())]
    pub(super) quiet: bool,
    /// How log lines on stderr are written: text, or one JSON object per
    /// line.
    #[arg(long, env = "JSONTP_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub(super) log_format: LogFormat,
    /// What is logged, as RUST_LOG writes it: `debug` shows every
    /// connection; the access log's target is jsontp::access. Default:
    /// RUST_LOG, else `warn,jsontp::access=info`.
    #[arg(long, env = "JSONTP_LOG_LEVEL", value_name = "FILTER", value_parser = log::parse_filter)]
    pub(super) log_level: Option<String>,
    // D20. The pairs are checked when the settings are prepared, not by
    // clap: the file may give one of a pair and the command line the other.
    /// Serve TLS: the certificate chain, PEM, leaf first. Needs
    /// --tls-key.
    #[arg(long, env = "JSONTP_TLS_CERT", value_name = "FILE")]
    pub(super) tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert, PEM.
    #[arg(long, env = "JSONTP_TLS_KEY", value_name = "FILE")]
    pub(super) tls_key: Option<PathBuf>,
    /// Mutual TLS: only clients with a certificate issued by a CA of this
    /// PEM file are served.
    #[arg(long, env = "JSONTP_TLS_CLIENT_CA", value_name = "FILE")]
    pub(super) tls_client_ca: Option<PathBuf>,
    // D21.
    /// Behind a load balancer (HAProxy `send-proxy-v2`, nginx, Envoy):
    /// every connection starts with a PROXY protocol header (v1 or v2),
    /// whose client address is the one served and logged. Connections
    /// without one are closed unanswered.
    #[arg(long, env = "JSONTP_PROXY_PROTOCOL", value_parser = FalseyValueParser::new())]
    pub(super) proxy_protocol: bool,
    // D19.
    /// The largest upload taken, decoded: bytes, or with a K, M or G
    /// suffix (2G, 512K). Larger ones are answered 413 and the connection
    /// closes.
    #[arg(
        long,
        env = "JSONTP_MAX_UPLOAD",
        value_name = "SIZE",
        default_value = "1G",
        value_parser = parse_size
    )]
    pub(super) max_upload: u64,
    /// The most bytes the uploads under way may hold on disk at once, all
    /// clients together, as --max-upload writes sizes. One upload alone
    /// may take all of it; when it is short, each upload is entitled to an
    /// even share, one within its share takes room back from one past its
    /// share, and an upload refused or stopped is answered 503 (try again
    /// later). Default: 4 times --max-upload.
    #[arg(long, env = "JSONTP_MAX_SPOOL", value_name = "SIZE", value_parser = parse_size)]
    pub(super) max_spool: Option<u64>,
    /// The most bytes of request content held in memory at once, all
    /// clients together, as --max-upload writes sizes. Content of up to
    /// 1 MiB is held in memory while it arrives and while its request is
    /// answered; past this budget it goes to disk as a larger upload does,
    /// within --max-spool (503, try again later, when that is short too).
    #[arg(
        long,
        env = "JSONTP_MAX_CONTENT_MEMORY",
        value_name = "SIZE",
        default_value = "64M",
        value_parser = parse_size
    )]
    pub(super) max_content_memory: u64,
    /// How many seconds a graceful stop (SIGTERM, ctrl-c) lets the
    /// exchanges under way finish; connections still busy then are closed,
    /// whatever their peers do or a handler still does, and the server
    /// exits.
    #[arg(
        long,
        env = "JSONTP_SHUTDOWN_TIMEOUT",
        value_name = "SECONDS",
        default_value = "30",
        value_parser = parse_seconds
    )]
    pub(super) shutdown_timeout: std::time::Duration,
    /// The largest file served (GET), as --max-upload writes sizes;
    /// larger ones are answered 500. Default: no limit (files stream).
    #[arg(long, env = "JSONTP_MAX_FILE", value_name = "SIZE", value_parser = parse_size)]
    pub(super) max_file: Option<u64>,
    /// How many seconds a stop (SIGTERM) goes on accepting and serving
    /// after /ready and the health check (`OPTIONS *`) begin to answer
    /// 503, so that a balancer takes the server out before it stops
    /// accepting; then it drains within --shutdown-timeout.
    #[arg(
        long,
        env = "JSONTP_DRAIN_GRACE",
        value_name = "SECONDS",
        default_value = "0",
        value_parser = parse_seconds
    )]
    pub(super) drain_grace: std::time::Duration,
    /// Answer operators' tools on HOST:PORT, in plain HTTP/1.1: /metrics
    /// (Prometheus' text format), /live and /ready (503 while draining).
    /// Off by default; keep it on loopback or a private network.
    #[arg(long, env = "JSONTP_ADMIN", value_name = "HOST:PORT", value_parser = ListenAddr::parse)]
    pub(super) admin: Option<ListenAddr>,
}

/// `jsontp serve` as parsed: its settings, and where they came from, to
/// read them again on SIGHUP. The flags are first parsed without the
/// configuration file, which names the file; with one, the whole is read
/// again with the file's values below the environment and the flags.
#[derive(Debug)]
pub struct Serve {
    settings: Settings,
    source: config::Source,
}

impl FromArgMatches for Serve {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let settings = Settings::from_matches(matches)?;
        let source = config::Source::of_process(settings.args.config.clone());
        // `--check-config` reads it in `run`, to say its verdict there.
        if source.file().is_none() || settings.args.check_config {
            return Ok(Serve { settings, source });
        }
        let settings = config::read(&source).map_err(|why| {
            let mut serve =
                <ServeArgs as clap::Args>::augment_args(clap::Command::new("serve").bin_name("jsontp serve"));
            clap::Error::raw(ErrorKind::InvalidValue, why).format(&mut serve)
        })?;
        Ok(Serve { settings, source })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Serve::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Args for Serve {
    fn augment_args(command: clap::Command) -> clap::Command {
        ServeArgs::augment_args(command)
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        ServeArgs::augment_args_for_update(command)
    }
}

/// Where `jsontp serve` listens, as `--addr` gives it: resolved when the
/// server binds, so that a host name is looked up once, at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenAddr {
    host: String,
    port: u16,
}

impl ListenAddr {
    /// `HOST:PORT`, `HOST` (port 8080), `PORT` (on 127.0.0.1), `[IPV6]` or
    /// `[IPV6]:PORT`; HOST an IPv4 address or a host name. The error says
    /// what is wrong and which forms are meant.
    pub fn parse(text: &str) -> Result<ListenAddr, String> {
        ListenAddr::parse_forms(text).map_err(|why| {
            format!(
                "{why}; write HOST:PORT, HOST (port {DEFAULT_PORT}), PORT (on {DEFAULT_HOST}) or [IPV6]:PORT"
            )
        })
    }

    fn parse_forms(text: &str) -> Result<ListenAddr, &'static str> {
        if text.contains('/') {
            return Err("an address has no scheme and no path");
        }
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            return Ok(ListenAddr {
                host: DEFAULT_HOST.to_owned(),
                port: parse_port(text)?,
            });
        }
        let (host, port) = if let Some(bracketed) = text.strip_prefix('[') {
            let (host, after) = bracketed.split_once(']').ok_or("the [ is not closed")?;
            host.parse::<Ipv6Addr>()
                .map_err(|_| "what stands in brackets is not an IPv6 address")?;
            let port = match after {
                "" => None,
                _ => Some(after.strip_prefix(':').ok_or("text follows the ]")?),
            };
            (host, port)
        } else {
            let (host, port) = match text.split_once(':') {
                Some((_, port)) if port.contains(':') => {
                    return Err("an IPv6 address goes in brackets, as [::1]:8080");
                }
                Some((host, port)) => (host, Some(port)),
                None => (text, None),
            };
            check_host(host)?;
            (host, port)
        };
        Ok(ListenAddr {
            host: host.to_owned(),
            port: port.map_or(Ok(DEFAULT_PORT), parse_port)?,
        })
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// A port, 0 included (a free one).
fn parse_port(text: &str) -> Result<u16, &'static str> {
    match text.parse::<u16>() {
        Ok(port) if text.bytes().all(|b| b.is_ascii_digit()) => Ok(port),
        _ => Err("the port is not a number from 0 to 65535"),
    }
}

/// An IPv4 address or a host name (RFC 1123 labels: letters, digits and
/// inner hyphens; the last label not all digits, which would be a mistyped
/// IPv4 address).
fn check_host(host: &str) -> Result<(), &'static str> {
    if host.is_empty() {
        return Err("no host is named");
    }
    if host.parse::<Ipv4Addr>().is_ok() {
        return Ok(());
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if host.len() > 253 || !host.split('.').all(label_ok) {
        return Err("the host is not an IP address or a host name");
    }
    if host
        .rsplit('.')
        .next()
        .is_some_and(|last| last.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err("the host is not an IPv4 address");
    }
    Ok(())
}

/// `--max-connections`: a count from 1 up.
fn parse_max_connections(text: &str) -> Result<NonZeroUsize, String> {
    text.parse::<NonZeroUsize>()
        .map_err(|_| "expected a number of connections from 1 up".to_owned())
}

/// A number of seconds, whole or with a fraction (`30`, `0.5`).
fn parse_seconds(text: &str) -> Result<std::time::Duration, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .and_then(|seconds| std::time::Duration::try_from_secs_f64(seconds).ok())
        .ok_or_else(|| format!("expected a number of seconds (30, 0.5), not {text:?}"))
}

/// A size: bytes, or a number with a `K`, `M` or `G` suffix (powers of
/// 1024, either case; `KiB`-style spellings too).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let trimmed = text.trim();
    let lower = trimmed.to_ascii_lowercase();
    let digits_end = lower.find(|c: char| !c.is_ascii_digit()).unwrap_or(lower.len());
    let (number, unit) = lower.split_at(digits_end);
    let scale: u64 = match unit.trim() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => {
            return Err(format!(
                "expected a size such as 1048576, 512K, 64M or 2G, not {trimmed:?}"
            ));
        }
    };
    let number: u64 = number
        .parse()
        .map_err(|_| format!("expected a size such as 1048576, 512K, 64M or 2G, not {trimmed:?}"))?;
    number
        .checked_mul(scale)
        .ok_or_else(|| format!("the size {trimmed:?} is too large"))
}

impl Serve {
    /// Runs the file server until the process is stopped.
    pub fn run(self) -> ExitCode {
        let Serve { settings, source } = self;
        let args = &settings.args;
        if args.check_config {
            return reload::check(&source);
        }
        // Before any thread starts: it clears the variables that passed
        // the sockets in.
        let inherited = match sockets::inherited() {
            Ok(inherited) => inherited,
            Err(why) => {
                eprintln!("jsontp serve: {why}");
                return ExitCode::FAILURE;
            }
        };
        let successor = match Successor::of_this_process() {
            Ok(successor) => successor,
            Err(e) => {
                eprintln!(
                    "jsontp serve: cannot find this program's path, which an upgrade starts again: {e}"
                );
                return ExitCode::FAILURE;
            }
        };
        log::install(args.log_format, args.log_level.as_deref());
        let Ready {
            files,
            tls,
            writable,
            mode,
            ..
        } = match reload::prepare(&settings) {
            Ok(ready) => ready,
            Err(why) => {
                eprintln!("jsontp serve: {why}");
                return ExitCode::FAILURE;
            }
        };
        let root = files.root().to_path_buf();
        // D19: uploads are spooled on the root's file system, so that they
        // are linked into place without a copy; in the root itself, since
        // the files have no name there. A read-only server writes nothing
        // under its root: what it is sent goes to the system's temporary
        // folder until it is refused.
        let spool = writable.then(|| root.clone());
        let leftovers = if writable { clear_old_spool(&root) } else { 0 };
        let config = ServerConfig {
            continue_policy: if args.no_continue {
                ContinuePolicy::Refuse
            } else {
                ContinuePolicy::Ask
            },
            language: files.languages().first().copied().unwrap_or(LanguageTag::EN_US),
            ..ServerConfig::default()
        };
        let mut config = config;
        config.limits.max_content_bytes = usize::try_from(args.max_upload).unwrap_or(usize::MAX);
        let live: reload::Current = Arc::new(ArcSwap::from_pointee(Live::new(files, args.quiet)));
        let health = Arc::new(Health::default());
        let handler = AccessLog {
            live: Arc::clone(&live),
            health: Arc::clone(&health),
        };
        let scheme = if tls.is_some() { "jsontps" } else { "jsontp" };
        let mut limits = Limits {
            workers: args.workers,
            max_connections: args.max_connections,
            tls: tls.clone(),
            proxy_protocol: args.proxy_protocol,
            spool,
            // Four of the largest uploads at once, or many more smaller
            // ones: the disk a server may fill stays a known multiple of
            // what one client may send.
            max_spool: args.max_spool.unwrap_or(args.max_upload.saturating_mul(4)),
            max_content_memory: args.max_content_memory,
            shutdown_timeout: args.shutdown_timeout,
            metrics: None,
        };
        let (keeper, admin_socket, listening) = match inherited {
            Some(Inherited { serve, admin, keeper }) => (keeper, admin, Listening::Given(serve)),
            None => (Keeper::Nobody, None, Listening::Bind(&args.addr)),
        };
        let admin_socket = match (admin_socket, &args.admin) {
            (Some(socket), _) => Some(socket),
            (None, Some(addr)) => match adapter::listen((addr.host.as_str(), addr.port)) {
                Ok(socket) => Some(socket),
                Err(e) => {
                    eprintln!("jsontp serve: cannot listen on {addr} for --admin: {e}");
                    return ExitCode::FAILURE;
                }
            },
            (None, None) => None,
        };
        // Counted only for an admin listener to show.
        let metrics = admin_socket.as_ref().map(|_| ServerMetrics::new());
        limits.metrics = metrics.clone();
        let server = match adapter::serve(listening, handler, config, limits) {
            Ok(server) => server,
            Err(e) => {
                eprintln!("jsontp serve: cannot listen on {}: {e}", args.addr);
                return ExitCode::FAILURE;
            }
        };
        let admin_addr = admin_socket.as_ref().and_then(|socket| socket.local_addr().ok());
        let admin = match admin_socket.as_ref().map(|socket| {
            socket
                .try_clone()
                .and_then(|socket| Admin::spawn(socket, Arc::clone(&health), scrape(metrics.clone(), Arc::clone(&live))))
        }) {
            None => None,
            Some(Ok(admin)) => Some(admin),
            Some(Err(e)) => {
                eprintln!("jsontp serve: cannot start the admin listener: {e}");
                return ExitCode::FAILURE;
            }
        };
        let bound = match server.local_addr() {
            Ok(bound) => bound.to_string(),
            Err(_) => args.addr.to_string(),
        };
        let format = args.log_format;
        let grace = args.drain_grace;
        let reloader = Reloader::new(source, settings, root.clone(), live, tls, format);
        let upgrade = Upgrade {
            successor,
            serve: server
                .listeners()
                .iter()
                .filter_map(|s| s.try_clone().ok())
                .collect(),
            admin: admin_socket,
            keeper,
        };
        let stop = Stop {
            handle: server.shutdown_handle(),
            keeper,
            health,
            admin,
            grace,
            format,
        };
        if let Err(e) = on_signals(stop, reloader, upgrade) {
            eprintln!("jsontp serve: cannot handle signals: {e}");
            return ExitCode::FAILURE;
        }
        let url = format!("{scheme}://{bound}");
        log::announce(
            format,
            &format!("jsontp serve: serving {} ({mode}) on {url}", root.display()),
            "serving",
            &[
                ("root", root.display().to_string()),
                ("mode", mode.to_owned()),
                ("url", url.clone()),
            ],
        );
        if let Some(addr) = admin_addr {
            let url = format!("http://{addr}");
            log::announce(
                format,
                &format!("jsontp serve: admin (/metrics, /live, /ready) on {url}"),
                "admin listening",
                &[("url", url.clone())],
            );
        }
        sockets::tell_ready();
        // Told after the start line, which scripts wait for.
        if leftovers > 0 {
            tracing::warn!(
                removed = leftovers,
                folder = %root.join(jsontp_cli::file_server::SPOOL_FOLDER).display(),
                "removed uploads left unfinished by an earlier version"
            );
        }
        match server.run() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("jsontp serve: {e}");
                ExitCode::FAILURE
            }
        }
    }
}

/// The server's capacity, as the options give it.
struct Limits {
    workers: usize,
    max_connections: NonZeroUsize,
    /// TLS settings, when serving TLS (D20).
    tls: Option<ServerTls>,
    /// Expect a PROXY protocol header on every connection (D21).
    proxy_protocol: bool,
    /// Where uploads are spooled (D19); `None`: the system's temporary
    /// folder.
    spool: Option<PathBuf>,
    /// The most bytes all spooled uploads hold at once (D19).
    max_spool: u64,
    /// The most bytes of request content held in memory at once.
    max_content_memory: u64,
    /// How long a graceful stop waits for the exchanges under way.
    shutdown_timeout: std::time::Duration,
    /// Where the connections count what they do, for the admin listener.
    metrics: Option<ServerMetrics>,
}

/// The prefix of the names earlier versions gave spooled uploads.
const OLD_UPLOAD_PREFIX: &str = ".jsontp-upload-";

/// Removes what earlier versions left in `ROOT/.jsontp-spool`: uploads
/// spooled under names there outlived a crash, for good. The folder goes
/// too once empty; anything else in it is left alone. Spooled files have
/// no name now, so nothing of this server's is there. Says how many went.
fn clear_old_spool(root: &Path) -> u64 {
    let folder = root.join(jsontp_cli::file_server::SPOOL_FOLDER);
    // A folder of its own only: a symlink there is not followed.
    if !std::fs::symlink_metadata(&folder).is_ok_and(|m| m.is_dir()) {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(&folder) else {
        return 0;
    };
    let mut removed = 0u64;
    for entry in entries.flatten() {
        let old = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.starts_with(OLD_UPLOAD_PREFIX));
        if old && entry.file_type().is_ok_and(|t| t.is_file()) && std::fs::remove_file(entry.path()).is_ok() {
            removed += 1;
        }
    }
    let _ = std::fs::remove_dir(&folder);
    removed
}

/// Every use of the I/O adapters' names in one place, since they move
/// with the adapters' layout: the server type, its options, its shutdown
/// handle and the handler trait.
mod adapter {
    pub use jsontp_protocol::io_adapters::server::mio::{MioServer as Server, ShutdownHandle};
    pub use jsontp_protocol::io_adapters::server::{
        AccessRecord as Exchange, Handled, Handler, HeadCheck, Incoming, RequestInfo,
    };
    use jsontp_protocol::io_adapters::server::{ServerOptions, SpoolOptions};
    pub use jsontp_protocol::io_adapters::server::ServerMetrics;
    pub use jsontp_protocol::io_adapters::tls::ServerTls;
    use jsontp_protocol::machine::ServerConfig;

    pub use jsontp_protocol::io_adapters::server::listen;

    use super::{Limits, Listening};

    /// Serves `handler` on the sockets `listening` names or gives.
    pub fn serve<H: Handler>(
        listening: Listening<'_>,
        handler: H,
        config: ServerConfig,
        limits: Limits,
    ) -> std::io::Result<Server<H>> {
        let mut options = ServerOptions::default()
            .with_config(config)
            .with_workers(limits.workers)
            .with_max_connections(limits.max_connections.get())
            .with_proxy_protocol(limits.proxy_protocol)
            .with_shutdown_timeout(limits.shutdown_timeout);
        let mut spool = SpoolOptions::default()
            .with_max_total(limits.max_spool)
            .with_max_memory(limits.max_content_memory);
        if let Some(folder) = limits.spool {
            spool = spool.with_folder(folder);
        }
        options = options.with_spool(spool);
        if let Some(tls) = limits.tls {
            options = options.with_tls(tls);
        }
        if let Some(metrics) = limits.metrics {
            options = options.with_metrics(metrics);
        }
        match listening {
            Listening::Bind(addr) => Server::bind((addr.host.as_str(), addr.port), handler, options),
            Listening::Given(sockets) => Server::from_listeners(sockets, handler, options),
        }
    }
}

/// Where the server listens.
enum Listening<'a> {
    /// Sockets it binds itself, one per worker: `--addr` (a host name is
    /// looked up here).
    Bind(&'a ListenAddr),
    /// Sockets passed in (systemd, or the process it takes over from).
    Given(Vec<std::net::TcpListener>),
}

/// What the signal thread has been told so far.
enum Signalled {
    Serving,
    /// A graceful stop is under way (after its grace period, if any);
    /// another stop signal exits at once.
    Stopping,
    /// An upgrade's new process serves on the sockets; this one finishes
    /// its exchanges and exits.
    HandedOver,
}

/// What a stop needs: the server's handle, who else keeps its sockets,
/// and what reports its health.
struct Stop {
    handle: ShutdownHandle,
    keeper: Keeper,
    health: Arc<Health>,
    admin: Option<Admin>,
    grace: std::time::Duration,
    format: LogFormat,
}

impl Stop {
    /// A stop asked for: `/ready` and the health check answer 503 at once;
    /// the server accepts on through the grace period, then drains. The
    /// sockets are shut unless a supervisor keeps them for the next start.
    fn begin(&self) {
        self.health.drain();
        let text = if self.grace.is_zero() {
            "jsontp serve: stopping (finishing the exchanges under way)".to_owned()
        } else {
            format!(
                "jsontp serve: stopping: still accepting for {:.1} s while balancers take this server out, then finishing the exchanges under way",
                self.grace.as_secs_f64()
            )
        };
        log::announce(
            self.format,
            &text,
            "stopping, finishing the exchanges under way",
            &[],
        );
        let (handle, keeper, grace) = (self.handle.clone(), self.keeper, self.grace);
        // The binary owns its threads; the sans-I/O core is what may not.
        #[allow(clippy::disallowed_methods)]
        std::thread::spawn(move || {
            std::thread::sleep(grace);
            match keeper {
                Keeper::Nobody => handle.shutdown(),
                Keeper::Supervisor => handle.hand_over(),
            }
        });
    }

    /// The new process serves: this one stops accepting at once, leaving
    /// the sockets (the admin listener's too) to it, and drains.
    fn hand_over(&self, pid: u32) {
        if let Some(admin) = &self.admin {
            admin.stop();
        }
        self.health.drain();
        self.handle.hand_over();
        log::announce(
            self.format,
            &format!("jsontp serve: upgraded: process {pid} serves now; this one finishes its exchanges"),
            "upgraded, finishing the exchanges under way",
            &[("successor", pid.to_string())],
        );
    }
}

/// What an upgrade in place needs: how to start the new process, and the
/// sockets it takes over.
struct Upgrade {
    successor: Successor,
    serve: Vec<std::net::TcpListener>,
    admin: Option<std::net::TcpListener>,
    keeper: Keeper,
}

impl Upgrade {
    /// Starts the new process and waits until it serves: its pid, or why
    /// not (this process then serves on as before).
    fn start(&self) -> Result<u32, String> {
        self.successor.start(
            &self.serve,
            self.admin.as_ref(),
            self.keeper,
            sockets::UPGRADE_WAIT,
        )
    }
}

/// One thread takes the signals, one at a time:
/// - SIGTERM or ctrl-c stops the server gracefully ([`Stop::begin`]); a
///   second one exits at once;
/// - SIGHUP reloads the settings;
/// - SIGUSR2 upgrades in place: the program at this one's path starts
///   with the same arguments on the same sockets, and once it serves this
///   one hands over and drains.
fn on_signals(stop: Stop, reloader: Reloader, upgrade: Upgrade) -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR2};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP, SIGUSR2])?;
    // The binary owns its threads; the sans-I/O core is what may not.
    #[allow(clippy::disallowed_methods)]
    std::thread::spawn(move || {
        let mut state = Signalled::Serving;
        for signal in signals.forever() {
            state = match (signal, state) {
                (SIGHUP, Signalled::Serving) => {
                    reloader.reload();
                    Signalled::Serving
                }
                (SIGUSR2, Signalled::Serving) => {
                    log::announce(
                        stop.format,
                        "jsontp serve: upgrading: starting the new process on the same sockets",
                        "upgrading",
                        &[],
                    );
                    match upgrade.start() {
                        Ok(pid) => {
                            stop.hand_over(pid);
                            Signalled::HandedOver
                        }
                        Err(why) => {
                            tracing::error!("upgrade failed, this process serves on: {why}");
                            Signalled::Serving
                        }
                    }
                }
                (SIGHUP | SIGUSR2, state) => {
                    tracing::warn!("ignored: this process is stopping; signal the one that serves");
                    state
                }
                (_, Signalled::Serving) => {
                    stop.begin();
                    Signalled::Stopping
                }
                (_, Signalled::HandedOver) => Signalled::Stopping,
                (_, Signalled::Stopping) => std::process::exit(130),
            };
        }
    });
    Ok(())
}

/// The file server's router with one access-log event per response: it
/// forwards the router's answers and checks of heads, and keeps the log
/// in this binary's own format. Both are read from `live` once per call,
/// so that a reload applies to the requests that follow it.
struct AccessLog {
    live: reload::Current,
    health: Arc<Health>,
}

impl Handler for AccessLog {
    fn respond(&self, incoming: Incoming) -> Handled {
        if is_health_check(&incoming.request) && self.health.get() == Serving::Draining {
            return draining().into();
        }
        self.live.load().router.respond(incoming)
    }

    fn check_head(&self, head: &Request, info: &RequestInfo) -> HeadCheck {
        self.live.load().router.check_head(head, info)
    }

    fn log_exchange(&self, exchange: &Exchange<'_>) {
        if !self.live.load().quiet {
            log::access(exchange);
        }
    }
}

/// What `/metrics` writes: the server's counters, and what the file
/// server's cache of small files holds (the current one, after a reload).
fn scrape(metrics: Option<ServerMetrics>, live: reload::Current) -> impl Fn(&mut String) + Send + 'static {
    move |out: &mut String| {
        if let Some(metrics) = &metrics {
            metrics.encode(out);
        }
        if let Some(cache) = live.load().cache.read() {
            use std::fmt::Write;
            let _ = write!(
                out,
                "# HELP jsontp_file_cache_bytes Bytes of small files and their prepared forms kept in memory.\n\
                 # TYPE jsontp_file_cache_bytes gauge\n\
                 jsontp_file_cache_bytes {}\n\
                 # HELP jsontp_file_cache_limit_bytes The most bytes the cache of small files keeps.\n\
                 # TYPE jsontp_file_cache_limit_bytes gauge\n\
                 jsontp_file_cache_limit_bytes {}\n\
                 # HELP jsontp_file_cache_files Small files kept in memory.\n\
                 # TYPE jsontp_file_cache_files gauge\n\
                 jsontp_file_cache_files {}\n",
                cache.bytes, cache.limit, cache.files
            );
        }
    }
}

/// The request a balancer checks a server's health with (HAProxy's
/// `tcp-check`, deploy/haproxy.cfg): `OPTIONS *`, answered `200` while
/// the server takes new clients and `503` once it drains.
fn is_health_check(request: &Request) -> bool {
    request.method == Method::Options && request.resource.as_str() == "*"
}

/// The health check's answer while the server drains (D13: nothing was
/// handed to the application, so "try again" elsewhere is true).
fn draining() -> Response {
    Response::new(Status::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "draining: this server is stopping and takes no new clients; send them to another",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> Result<String, String> {
        ListenAddr::parse(text).map(|a| a.to_string())
    }

    #[test]
    fn listen_address_forms() {
        assert_eq!(addr("127.0.0.1:9000"), Ok("127.0.0.1:9000".into()));
        assert_eq!(addr("0.0.0.0:0"), Ok("0.0.0.0:0".into()));
        assert_eq!(addr("localhost"), Ok("localhost:8080".into()));
        assert_eq!(addr("localhost:9000"), Ok("localhost:9000".into()));
        assert_eq!(addr("example.com."), Ok("example.com.:8080".into()));
        assert_eq!(addr("9000"), Ok("127.0.0.1:9000".into()));
        assert_eq!(addr("0"), Ok("127.0.0.1:0".into()));
        assert_eq!(addr("[::1]:8080"), Ok("[::1]:8080".into()));
        assert_eq!(addr("[::]"), Ok("[::]:8080".into()));
    }

    #[test]
    fn listen_address_errors_say_why_and_how() {
        for (text, why) in [
            ("", "no host"),
            ("70000", "port"),
            ("localhost:", "port"),
            ("localhost:x", "port"),
            ("localhost:+80", "port"),
            (":8080", "no host"),
            ("::1", "brackets"),
            ("::1:8080", "brackets"),
            ("[::1", "not closed"),
            ("[::1]8080", "follows"),
            ("[localhost]:80", "IPv6"),
            ("jsontp://localhost:80", "no scheme"),
            ("localhost/x", "no path"),
            ("a_b", "host name"),
            ("a b", "host name"),
            ("-a.com", "host name"),
            ("999.1.1.1", "IPv4"),
        ] {
            let error = addr(text).expect_err(text);
            assert!(error.contains(why), "{text:?}: {error}");
            assert!(error.contains("write HOST:PORT"), "{text:?}: {error}");
        }
    }

    #[test]
    fn sizes_take_k_m_g_suffixes() {
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_seconds("30"), Ok(std::time::Duration::from_secs(30)));
        assert_eq!(parse_seconds(" 0.5 "), Ok(std::time::Duration::from_millis(500)));
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("soon").is_err());
        assert_eq!(parse_size("512K"), Ok(512 << 10));
        assert_eq!(parse_size("64m"), Ok(64 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("3GiB"), Ok(3 << 30));
        for bad in ["", "G", "1T", "1.5G", "-1", "99999999999999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn max_connections_is_at_least_one() {
        assert_eq!(parse_max_connections("10000").map(NonZeroUsize::get), Ok(10_000));
        assert!(parse_max_connections("0").is_err());
        assert!(parse_max_connections("-1").is_err());
        assert!(parse_max_connections("many").is_err());
    }
}
