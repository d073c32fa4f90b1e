//! `jsontp serve`'s logs: the `tracing` subscriber it installs, and the
//! access log as events.
//!
//! The library emits spans and events and never prints (connections at
//! debug, faults at warn and error); the access log is one event per
//! exchange under the target [`ACCESS_TARGET`]. Both go to stderr as text
//! or as JSON lines, filtered as `RUST_LOG` filters.
//!
//! Writing: each event is formatted into a buffer and written to stderr
//! with one `write` per line, under stderr's lock. No thread and no queue
//! stand in between: a line is never lost or held back, memory stays
//! bounded, and lines from several workers never mix. The cost is one
//! system call per line on the worker that logs; a background writer would
//! only move a stalled reader's cost from waiting to dropping lines or
//! growing a queue, and an operator's log is worth its system call.

use std::io::IsTerminal;
use std::sync::OnceLock;

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

use jsontp_protocol::io_adapters::server::AccessRecord as Exchange;

/// The target of the access-log events: `RUST_LOG=jsontp::access=off`
/// silences them, `warn,jsontp::access=info` is the default.
pub const ACCESS_TARGET: &str = "jsontp::access";

/// What is logged when neither `--log-level` nor `RUST_LOG` says: the
/// access log, and the library's warnings and errors.
pub const DEFAULT_FILTER: &str = "warn,jsontp::access=info";

/// The variable read when `--log-level` is not given.
pub const RUST_LOG: &str = "RUST_LOG";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// `TIMESTAMP LEVEL TARGET: field=value …`, one line per event.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, and the
    /// event's fields.
    Json,
}

/// `--log-level`: a filter as `RUST_LOG` writes it (`info`,
/// `warn,jsontp::access=info`, `debug`…), checked at parse time.
pub fn parse_filter(text: &str) -> Result<String, String> {
    EnvFilter::try_new(text)
        .map(|_| text.to_owned())
        .map_err(|e| format!("not a log filter ({e}); write e.g. info, debug or warn,jsontp::access=info"))
}

/// The filter `--log-level` gives, else `RUST_LOG`, else
/// [`DEFAULT_FILTER`]; with why `RUST_LOG` was passed over, if it was.
fn filter_of(given: Option<&str>) -> (EnvFilter, Option<String>) {
    match given {
        Some(given) => (EnvFilter::new(given), None),
        None => match std::env::var(RUST_LOG) {
            Ok(text) if !text.trim().is_empty() => match EnvFilter::try_new(&text) {
                Ok(filter) => (filter, None),
                Err(e) => (EnvFilter::new(DEFAULT_FILTER), Some(format!("{text:?}: {e}"))),
            },
            _ => (EnvFilter::new(DEFAULT_FILTER), None),
        },
    }
}

/// Where the installed subscriber's filter is replaced ([`set_filter`]).
static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Installs the subscriber for the whole process: `filter` if given, else
/// `RUST_LOG`, else [`DEFAULT_FILTER`]. An unreadable `RUST_LOG` is said
/// once, and the default used.
pub fn install(format: LogFormat, filter: Option<&str>) {
    let (filter, bad_env) = filter_of(filter);
    let (filter, handle) = reload::Layer::new(filter);
    let ansi = std::io::stderr().is_terminal();
    let text = (format == LogFormat::Text).then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
    });
    let json = (format == LogFormat::Json).then(|| {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(ansi)
            .json()
            .flatten_event(true)
    });
    // Another subscriber already set (a test harness) keeps its place.
    if tracing_subscriber::registry()
        .with(filter)
        .with(text)
        .with(json)
        .try_init()
        .is_ok()
    {
        let _ = FILTER.set(handle);
    }
    if let Some(why) = bad_env {
        tracing::warn!("{RUST_LOG} is not a log filter ({why}); using {DEFAULT_FILTER}");
    }
}

/// Replaces the filter of the subscriber [`install`] set, as `install`
/// chooses it from `given` (a reload: the events from then on).
pub fn set_filter(given: Option<&str>) {
    let (filter, bad_env) = filter_of(given);
    if let Some(handle) = FILTER.get()
        && let Err(e) = handle.reload(filter)
    {
        tracing::warn!("cannot change the log filter: {e}");
    }
    if let Some(why) = bad_env {
        tracing::warn!("{RUST_LOG} is not a log filter ({why}); using {DEFAULT_FILTER}");
    }
}

/// One access-log event: who, what, the outcome, how much left and how
/// long the answer took; `aborted` when the peer did not take the whole
/// response (the connection ended first, like nginx's 499).
pub fn access(exchange: &Exchange<'_>) {
    let elapsed_ms = (exchange.elapsed.as_secs_f64() * 1_000_000.0).round() / 1000.0;
    tracing::info!(
        target: ACCESS_TARGET,
        peer = %exchange.peer,
        method = %exchange.method.map_or("-", |m| m.as_str()),
        resource = exchange.resource,
        status = exchange.status.as_u16(),
        bytes = exchange.bytes_written,
        content_bytes = exchange.content_bytes,
        duration_ms = elapsed_ms,
        aborted = !exchange.complete,
    );
}

/// A line about the server itself (it started, it is stopping): the text
/// line `text` as it always was, or under `--log-format json` one JSON
/// object shaped as the log's own (`timestamp`, `level`, `target`,
/// `message`, then `fields`), so that a log collector reads every line of
/// stderr the same way. Written whatever the filter says: these lines are
/// how an operator learns where the server listens.
pub fn announce(format: LogFormat, text: &str, message: &str, fields: &[(&str, String)]) {
    match format {
        LogFormat::Text => eprintln!("{text}"),
        LogFormat::Json => {
            let mut line = serde_json::Map::new();
            // The binary owns its clock; the sans-I/O core is what may not.
            #[allow(clippy::disallowed_methods)]
            let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
            line.insert("timestamp".into(), now.into());
            line.insert("level".into(), "INFO".into());
            line.insert("target".into(), "jsontp::serve".into());
            line.insert("message".into(), message.into());
            for (name, value) in fields {
                line.insert((*name).into(), value.clone().into());
            }
            eprintln!("{}", serde_json::Value::Object(line));
        }
    }
}
