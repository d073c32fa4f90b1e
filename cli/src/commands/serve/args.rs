//! `jsontp serve`'s options, each also read from the environment variable
//! `--help` names and from the `--config` file under its long name, and
//! the parsers of their values.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::num::NonZeroUsize;
use std::path::PathBuf;

use clap::builder::{FalseyValueParser, NonEmptyStringValueParser};
use jsontp_protocol::message::LanguageTag;

use super::super::log::{self, LogFormat};
use super::super::target::DEFAULT_PORT;

/// The environment variable that holds the token (`--token`'s, listed
/// apart because it is a token source of its own: see
/// [`Settings`](super::config::Settings)).
pub const TOKEN_ENV: &str = "JSONTP_TOKEN";

/// The host a bare port listens on: loopback, so that nothing outside the
/// machine reaches a server started without thinking about it.
const DEFAULT_HOST: &str = "127.0.0.1";

/// The server runtime `--runtime` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Runtime {
    /// The mio event loops (epoll).
    Mio,
    /// One io_uring per event loop.
    Uring,
}

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
        env = TOKEN_ENV,
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
    /// What runs the event loops: mio (epoll), or io_uring (Linux 6.0 and
    /// later), which serves on mio instead, saying why, where the kernel
    /// refuses it.
    #[arg(long, env = "JSONTP_RUNTIME", value_enum, default_value_t = Runtime::Mio)]
    pub(super) runtime: Runtime,
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
    /// The most bytes the file cache keeps, as --max-upload writes sizes:
    /// files of up to 1 MiB whole, with the forms they were sent in, and
    /// the escaped form of a larger text file sent as identity (up to
    /// 64 MiB files, about twice the file each, in sealed in-memory files
    /// sent with sendfile). 0 keeps nothing: every request reads the file.
    /// Default: 16M (Linux; elsewhere there is no cache).
    #[arg(long, env = "JSONTP_CACHE_BYTES", value_name = "SIZE", value_parser = parse_size)]
    pub(super) cache_bytes: Option<u64>,
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

/// Where `jsontp serve` listens, as `--addr` gives it: resolved when the
/// server binds, so that a host name is looked up once, at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenAddr {
    pub(super) host: String,
    pub(super) port: u16,
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
