//! `jsontp serve` (issue 4): the file server on the mio adapter.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use jsontp::file_server::FileServer;
use jsontp::io_adapters::server::mio::{MioServer, ShutdownHandle};
use jsontp::io_adapters::server::{AccessRecord, Handler, RequestInfo, ServerOptions};
use jsontp::machine::{Config, ContinuePolicy};
use jsontp::message::{LanguageTag, Request, Response};

/// Arguments of `jsontp serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// The folder to serve.
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Where to listen; port 0 picks a free port (the start line says which).
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: SocketAddr,
    /// Require `authorization` equal to this token on PUT and DELETE.
    #[arg(long)]
    token: Option<String>,
    /// The languages offered, comma-separated, the first being the default.
    #[arg(long, value_delimiter = ',', default_value = "en-US")]
    language: Vec<LanguageTag>,
    /// Answer `expect: 100-continue` with 501 and close (D10).
    #[arg(long)]
    no_continue: bool,
    /// Event-loop threads (default: one per core).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// No access log.
    #[arg(long)]
    quiet: bool,
}

/// Runs the file server until the process is stopped.
pub fn run(args: ServeArgs) -> ExitCode {
    let files = match FileServer::new(&args.root) {
        Ok(files) => files,
        Err(e) => {
            eprintln!("jsontp serve: cannot serve {}: {e}", args.root.display());
            return ExitCode::FAILURE;
        }
    };
    let root = files.root().to_path_buf();
    let files = files.with_token(args.token).with_languages(args.language);
    let config = Config {
        continue_policy: if args.no_continue {
            ContinuePolicy::Refuse
        } else {
            ContinuePolicy::Ask
        },
        language: files.languages().first().copied().unwrap_or(LanguageTag::EN_US),
        ..Config::default()
    };
    let handler = AccessLog {
        inner: files,
        quiet: args.quiet,
    };
    let options = ServerOptions::default()
        .with_config(config)
        .with_workers(args.workers);
    let server = match MioServer::bind(args.addr, handler, options) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("jsontp serve: cannot listen on {}: {e}", args.addr);
            return ExitCode::FAILURE;
        }
    };
    let bound = server.local_addr().unwrap_or(args.addr);
    if let Err(e) = stop_on_signals(server.shutdown_handle()) {
        eprintln!("jsontp serve: cannot handle signals: {e}");
        return ExitCode::FAILURE;
    }
    eprintln!("jsontp serve: serving {} on jsontp://{bound}", root.display());
    match server.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jsontp serve: {e}");
            ExitCode::FAILURE
        }
    }
}

/// SIGTERM or ctrl-c shuts the server down gracefully: it stops accepting
/// and finishes the exchanges under way. A second signal exits at once.
fn stop_on_signals(stop: ShutdownHandle) -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])?;
    // The binary owns its threads; the sans-I/O core is what may not.
    #[allow(clippy::disallowed_methods)]
    std::thread::spawn(move || {
        let mut seen = signals.forever();
        if seen.next().is_some() {
            eprintln!("jsontp serve: stopping (finishing the exchanges under way)");
            stop.shutdown();
        }
        if seen.next().is_some() {
            std::process::exit(130);
        }
    });
    Ok(())
}

/// The file server with one access-log line per response on stderr.
struct AccessLog {
    inner: FileServer,
    quiet: bool,
}

impl Handler for AccessLog {
    fn handle(&self, request: &Request, info: &RequestInfo) -> Response {
        self.inner.handle(request, info)
    }

    #[allow(clippy::result_large_err)] // the trait's signature
    fn check_continue(&self, request: &Request, info: &RequestInfo) -> Result<(), Response> {
        self.inner.check_continue(request, info)
    }

    fn log_exchange(&self, exchange: &AccessRecord<'_>) {
        if self.quiet {
            return;
        }
        let method = exchange.method.map_or("-", |m| m.as_str());
        // One write per line, so lines from several workers do not mix.
        let line = format!(
            "{} {method} {:?} {} {}B {:.1}ms\n",
            exchange.peer,
            exchange.resource,
            exchange.status.as_u16(),
            exchange.content_bytes,
            exchange.elapsed.as_secs_f64() * 1000.0,
        );
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}
