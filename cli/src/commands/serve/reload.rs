//! What `jsontp serve` checks before it serves, and its reload on SIGHUP:
//! the settings are read again whole (the file, the environment, the
//! command line, the token file, the TLS files) and applied only when all
//! of them are valid; a bad one is logged and everything stays as it was.
//! The file server's settings change for the requests that follow, the
//! TLS settings for the connections accepted from then on; the others
//! need a new process, which a warning says.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use arc_swap::ArcSwap;
use jsontp_cli::file_server::{CacheGauge, FileServer};
use jsontp_protocol::app::Router;
use jsontp_protocol::io_adapters::tls::ServerTls;

use super::super::log::{self, LogFormat};
use super::args::ServeArgs;
use super::config::{self, Settings, Source, TokenSource};

/// The options a running server applies on a reload; every other one
/// waits for the next process.
const LIVE: [&str; 12] = [
    "log-level",
    "writable",
    "token",
    "token-file",
    "list",
    "language",
    "max-file",
    "cache-bytes",
    "quiet",
    "tls-cert",
    "tls-key",
    "tls-client-ca",
];

/// The options of TLS: applied live only while the server serves TLS
/// before and after, since the listener's scheme is set at start.
const TLS: [&str; 3] = ["tls-cert", "tls-key", "tls-client-ca"];

/// What the handler reads once per request.
pub struct Live {
    /// The file server, with this generation's settings.
    pub router: Router,
    /// No access log.
    pub quiet: bool,
    /// What its cache of small files holds, for the admin listener.
    pub cache: CacheGauge,
}

impl Live {
    /// Serves `files`, with the access log unless `quiet`.
    pub fn new(files: FileServer, quiet: bool) -> Live {
        Live {
            cache: files.cache_gauge(),
            router: files.into_router(),
            quiet,
        }
    }
}

/// The cell the handler reads [`Live`] from, and a reload replaces.
pub type Current = Arc<ArcSwap<Live>>;

/// Settings checked ready to serve.
pub struct Ready {
    /// The file server, configured.
    pub files: FileServer,
    /// TLS, when serving TLS (D20).
    pub tls: Option<ServerTls>,
    /// The token that opens writes (D14), read.
    pub token: Option<String>,
    /// PUT and DELETE are served.
    pub writable: bool,
    /// Who may write, in words, for the start line.
    pub mode: &'static str,
}

/// Checks everything starting would check but binding: the root is a
/// folder, the token file reads, the TLS files load. The error is one line.
pub fn prepare(settings: &Settings) -> Result<Ready, String> {
    let args = &settings.args;
    let token = match &settings.token {
        TokenSource::None => None,
        TokenSource::Given(token) => Some(token.clone()),
        TokenSource::File(file) => Some(
            read_token_file(file)
                .map_err(|why| format!("cannot read the token from {}: {why}", file.display()))?,
        ),
    };
    let files =
        FileServer::new(&args.root).map_err(|e| format!("cannot serve {}: {e}", args.root.display()))?;
    let tls = match (&args.tls_cert, &args.tls_key, &args.tls_client_ca) {
        (Some(cert), Some(key), ca) => Some(
            ServerTls::from_pem_files(cert, key, ca.as_deref())
                .map_err(|e| format!("cannot set up TLS: {e}"))?,
        ),
        (None, None, None) => None,
        (Some(_), None, _) => return Err("--tls-cert needs --tls-key, the certificate's private key".into()),
        (None, _, _) => return Err("--tls-key and --tls-client-ca need --tls-cert, the certificate".into()),
    };
    // A token opens writes to its holders (D14: the others get 401).
    let mode = match (&token, args.writable) {
        (Some(_), _) => "writable with the token",
        (None, true) => "writable by anyone",
        (None, false) => "read-only",
    };
    let writable = args.writable || token.is_some();
    Ok(Ready {
        files: configure(files, args, token.clone(), writable),
        tls,
        token,
        writable,
        mode,
    })
}

/// The file server's settings that may change while it runs.
fn configure(files: FileServer, args: &ServeArgs, token: Option<String>, writable: bool) -> FileServer {
    // Each generation has a cache of its own (the folder is reopened), so
    // a new size takes effect as the other file server settings do.
    let files = match args.cache_bytes {
        Some(bytes) => files.with_cache_bytes(usize::try_from(bytes).unwrap_or(usize::MAX)),
        None => files,
    };
    files
        .with_writes(writable)
        .with_token(token)
        .with_listing(args.list)
        .with_languages(args.language.clone())
        .with_max_file_bytes(args.max_file.unwrap_or(u64::MAX))
}

/// The token's file: its first line, without the line ending.
fn read_token_file(file: &Path) -> Result<String, String> {
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
    match text.lines().next() {
        Some(token) if !token.is_empty() => Ok(token.to_owned()),
        _ => Err("its first line is empty".to_owned()),
    }
}

/// `--check-config`: reads and checks the settings as a start would, short
/// of binding, and says so in one line: 0 when valid, 1 when not.
pub fn check(source: &Source) -> ExitCode {
    let what = source
        .file()
        .map_or("the settings".to_owned(), |file| format!("{}", file.display()));
    match config::read(source).and_then(|settings| prepare(&settings)) {
        Ok(_) => {
            println!("jsontp serve: {what}: valid");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("jsontp serve: {what}: not valid: {why}");
            ExitCode::FAILURE
        }
    }
}

/// Applies new settings to a running server.
pub struct Reloader {
    source: Source,
    /// The settings the process started with: those that cannot change
    /// live are compared with them.
    started: Settings,
    /// The root served, canonical; a new one waits for the next process.
    root: PathBuf,
    live: Current,
    tls: Option<ServerTls>,
    format: LogFormat,
}

impl Reloader {
    /// Reloads into `live` and `tls`, the cells the server reads.
    pub fn new(
        source: Source,
        started: Settings,
        root: PathBuf,
        live: Current,
        tls: Option<ServerTls>,
        format: LogFormat,
    ) -> Reloader {
        Reloader {
            source,
            started,
            root,
            live,
            tls,
            format,
        }
    }

    /// Reads the settings again and applies them, or logs why not and
    /// keeps the current ones.
    pub fn reload(&self) {
        let ready = config::read(&self.source).and_then(|next| {
            let ready = prepare(&next)?;
            // The root may have changed: this process keeps serving its
            // own (reopened, with the new settings).
            let files = FileServer::new(&self.root)
                .map_err(|e| format!("cannot serve {}: {e}", self.root.display()))?;
            Ok((next, ready, files))
        });
        let (next, ready, files) = match ready {
            Ok(ready) => ready,
            Err(why) => {
                tracing::error!("reload refused, the settings stay as they were: {why}");
                return;
            }
        };
        let tls_stays = self.tls.is_some() == ready.tls.is_some();
        if let (Some(current), Some(next)) = (&self.tls, &ready.tls) {
            current.replace(next);
        }
        log::set_filter(next.args.log_level.as_deref());
        self.live.store(Arc::new(Live::new(
            configure(files, &next.args, ready.token, ready.writable),
            next.args.quiet,
        )));
        let waiting: Vec<String> = self
            .started
            .changed(&next)
            .into_iter()
            .filter(|key| !LIVE.contains(&key.as_str()) || (!tls_stays && TLS.contains(&key.as_str())))
            .collect();
        if !waiting.is_empty() {
            tracing::warn!(
                "changed settings take effect at the next restart or upgrade (SIGUSR2): {}",
                waiting.join(", ")
            );
        }
        let from = self
            .source
            .file()
            .map_or("the command line and the environment".to_owned(), |file| {
                file.display().to_string()
            });
        log::announce(
            self.format,
            &format!("jsontp serve: reloaded the settings from {from}"),
            "reloaded the settings",
            &[("from", from.clone())],
        );
    }
}
