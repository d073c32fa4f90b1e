//! `jsontp serve`: the file server on the mio adapter. Read-only unless
//! `--writable` (or a token) says otherwise, on loopback unless `--addr`
//! says otherwise; every option also read from a `JSONTP_*` variable or a
//! configuration file, and reloaded on SIGHUP.
//!
//! In files by concern: `args.rs` (the options and their parsers),
//! `config.rs` (the configuration file), `reload.rs` (checking settings
//! and applying them again on SIGHUP), `sockets.rs` (sockets passed in by
//! systemd and on to an upgrade's new process), `admin.rs` (the admin
//! listener); here, the start, the signals and the handler.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use arc_swap::ArcSwap;
use clap::error::ErrorKind;
use clap::{ArgMatches, FromArgMatches};
use jsontp_protocol::machine::{ContinuePolicy, ServerConfig};
use jsontp_protocol::message::{LanguageTag, Method, Request, Response, Status, StatusCode};

pub use self::adapter::Exchange;
use self::adapter::{
    Handled, Handler, HeadCheck, Incoming, RequestInfo, ServerMetrics, ServerTls, ShutdownHandle,
};
use self::admin::{Admin, Health, Serving};
pub use self::args::ServeArgs;
use self::args::{ListenAddr, Runtime};
use self::config::Settings;
use self::reload::{Live, Ready, Reloader};
use self::sockets::{Inherited, Keeper, Successor};
use super::log::{self, LogFormat};

mod admin;
mod args;
mod config;
mod reload;
mod sockets;

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
            runtime: args.runtime,
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
            socket.try_clone().and_then(|socket| {
                Admin::spawn(
                    socket,
                    Arc::clone(&health),
                    scrape(metrics.clone(), Arc::clone(&live)),
                )
            })
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
    /// What runs the event loops.
    runtime: Runtime,
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
    pub use jsontp_protocol::io_adapters::server::ServerMetrics;
    use jsontp_protocol::io_adapters::server::mio::MioServer;
    pub use jsontp_protocol::io_adapters::server::mio::ShutdownHandle;
    #[cfg(target_os = "linux")]
    use jsontp_protocol::io_adapters::server::uring::{self, UringServer};
    pub use jsontp_protocol::io_adapters::server::{
        AccessRecord as Exchange, Handled, Handler, HeadCheck, Incoming, RequestInfo,
    };
    use jsontp_protocol::io_adapters::server::{ServerOptions, SpoolOptions};
    pub use jsontp_protocol::io_adapters::tls::ServerTls;
    use jsontp_protocol::machine::ServerConfig;

    pub use jsontp_protocol::io_adapters::server::listen;

    use super::{Limits, Listening, Runtime};

    /// The server on the runtime chosen.
    pub enum Server<H> {
        Mio(MioServer<H>),
        #[cfg(target_os = "linux")]
        Uring(UringServer<H>),
    }

    impl<H: Handler> Server<H> {
        pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
            match self {
                Server::Mio(server) => server.local_addr(),
                #[cfg(target_os = "linux")]
                Server::Uring(server) => server.local_addr(),
            }
        }

        pub fn listeners(&self) -> &[std::net::TcpListener] {
            match self {
                Server::Mio(server) => server.listeners(),
                #[cfg(target_os = "linux")]
                Server::Uring(server) => server.listeners(),
            }
        }

        pub fn shutdown_handle(&self) -> ShutdownHandle {
            match self {
                Server::Mio(server) => server.shutdown_handle(),
                #[cfg(target_os = "linux")]
                Server::Uring(server) => server.shutdown_handle(),
            }
        }

        pub fn run(self) -> std::io::Result<()> {
            match self {
                Server::Mio(server) => server.run(),
                #[cfg(target_os = "linux")]
                Server::Uring(server) => server.run(),
            }
        }
    }

    /// Whether the io_uring runtime can serve here; if not, says why on
    /// one line, and that mio serves instead.
    fn uring_serves() -> bool {
        #[cfg(target_os = "linux")]
        let refused = uring::available().err().map(|e| e.to_string());
        #[cfg(not(target_os = "linux"))]
        let refused = Some("io_uring is Linux's".to_owned());
        if let Some(why) = &refused {
            tracing::warn!("--runtime uring: {why}; serving on mio instead");
        }
        refused.is_none()
    }

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
        let listeners = match listening {
            Listening::Bind(addr) => jsontp_protocol::io_adapters::server::listen_group(
                (addr.host.as_str(), addr.port),
                options.worker_count(),
            )?,
            Listening::Given(sockets) => sockets,
        };
        if limits.runtime == Runtime::Uring && uring_serves() {
            #[cfg(target_os = "linux")]
            return UringServer::from_listeners(listeners, handler, options).map(Server::Uring);
        }
        MioServer::from_listeners(listeners, handler, options).map(Server::Mio)
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
    /// The line is written first: with no exchange under way, the hand
    /// over ends the server's run, and the process, at once.
    fn hand_over(&self, pid: u32) {
        log::announce(
            self.format,
            &format!("jsontp serve: upgraded: process {pid} serves now; this one finishes its exchanges"),
            "upgraded, finishing the exchanges under way",
            &[("successor", pid.to_string())],
        );
        if let Some(admin) = &self.admin {
            admin.stop();
        }
        self.health.drain();
        self.handle.hand_over();
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
    /// not (this process then serves on as before, unless a stop was
    /// asked for).
    /// `stop_asked` is asked while it waits: `true` gives the upgrade up.
    fn start(&self, stop_asked: &mut dyn FnMut() -> bool) -> Result<u32, String> {
        self.successor.start(
            &self.serve,
            self.admin.as_ref(),
            self.keeper,
            sockets::UPGRADE_WAIT,
            stop_asked,
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
        loop {
            let batch: Vec<i32> = signals.wait().collect();
            for signal in batch {
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
                        // A stop asked for meanwhile gives the upgrade up
                        // at once, rather than after the new process's wait.
                        let mut stop_asked = false;
                        let outcome = upgrade.start(&mut || {
                            for signal in signals.pending() {
                                if signal == SIGHUP || signal == SIGUSR2 {
                                    tracing::warn!("ignored: an upgrade is under way");
                                } else {
                                    stop_asked = true;
                                }
                            }
                            stop_asked
                        });
                        match outcome {
                            Ok(pid) => {
                                stop.hand_over(pid);
                                Signalled::HandedOver
                            }
                            Err(why) if stop_asked => {
                                tracing::warn!("upgrade given up for the stop asked for: {why}");
                                stop.begin();
                                Signalled::Stopping
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
                 jsontp_file_cache_files {}\n\
                 # HELP jsontp_file_cache_shared_page_bytes Bytes of the shared huge pages the kept forms' sendfile copies lie in.\n\
                 # TYPE jsontp_file_cache_shared_page_bytes gauge\n\
                 jsontp_file_cache_shared_page_bytes {}\n",
                cache.bytes, cache.limit, cache.files, cache.shared_page_bytes
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
