//! Counters an operator can watch: [`ServerMetrics`] (whose
//! documentation lists them), read as a [`MetricsSnapshot`] or written in
//! Prometheus' text format.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use super::{ServerOptions, SpoolOptions};
use crate::message::StatusCode;

use snapshot::Content;
pub use snapshot::MetricsSnapshot;

mod snapshot;

/// The counters of a server, shared by the handles cloned from one
/// [`ServerMetrics::new`]: give one clone to the server
/// ([`ServerOptions::with_metrics`](super::ServerOptions::with_metrics)),
/// keep another to read ([`snapshot`](Self::snapshot),
/// [`encode`](Self::encode)). Cloning is cheap (a pointer); two handles
/// are equal when they share their counters.
///
/// Off (the default), a server pays one `Option` check where it would
/// count. On, each mio worker counts in a shard of its own (relaxed atomics
/// on cache lines no other worker writes), so counting puts no contended
/// line on the path of a request; the std and tokio servers count in one
/// shard. A snapshot sums the shards.
///
/// # The metrics
///
/// | name | type | labels | meaning |
/// |---|---|---|---|
/// | `jsontp_connections_accepted_total` | counter | `worker` | connections taken from the listener, by mio worker (its index); `0` for std and tokio |
/// | `jsontp_connections` | gauge | `state` | connections open now, by where they are in their life: `serving`, `draining` (a graceful shutdown lets the exchange under way finish), `lingering` (our side shut, the peer's input drained for a moment) |
/// | `jsontp_connections_closed_total` | counter | `reason` | connections ended, by why ([`CloseCause::label`]): `peer_closed`, `idle_timeout`, `made_room`, `stalled`, `rejected`, `shutdown`, `drain_deadline`, `transport_failed`, `peer_left`, `no_proxy_header`, `dropped` |
/// | `jsontp_requests_total` | counter | `code` | responses, by status code, the connection's own error responses (D1, D3, D5) included, each counted once its access record is made ([`AccessRecord`](super::AccessRecord)) |
/// | `jsontp_responses_incomplete_total` | counter | | responses whose connection ended before the peer took them whole ([`AccessRecord::complete`](super::AccessRecord::complete) `false`) |
/// | `jsontp_request_duration_seconds` | histogram | `le` | from the request complete (or refused) to its response's last byte taken ([`AccessRecord::elapsed`](super::AccessRecord::elapsed)); buckets from 0.5 ms to 10 s |
/// | `jsontp_received_bytes_total` | counter | | bytes of messages the connections read (plaintext under TLS; neither a PROXY header nor what is drained and dropped while lingering) |
/// | `jsontp_sent_bytes_total` | counter | | bytes of messages the connections wrote (plaintext under TLS) |
/// | `jsontp_content_memory_bytes` | gauge | | request content held in memory now ([`SpoolOptions::held_bytes`]) |
/// | `jsontp_content_memory_limit_bytes` | gauge | | its bound ([`SpoolOptions::max_memory`]) |
/// | `jsontp_spool_bytes` | gauge | | request content in temporary files now ([`SpoolOptions::spooled_bytes`]) |
/// | `jsontp_spool_limit_bytes` | gauge | | its bound ([`SpoolOptions::max_total`]) |
/// | `jsontp_connections_limit` | gauge | | connections open at once, at most ([`ServerOptions::max_connections`](super::ServerOptions::max_connections)) |
///
/// The gauges of content and the limits appear once a server has started
/// with the metrics. A `jsontp_requests_total` series appears once its code
/// has been counted; every other series is always written.
///
/// Every connection counted accepted is counted closed once, with one
/// reason, when it ends: once a server is idle, the accepted connections
/// are those closed and those open. A client the std or tokio server
/// accepted at the connection cap and dropped unserved at shutdown counts
/// as closed by `shutdown`; one the mio server held so is not counted
/// accepted. Between, a connection is counted open in one state at a time,
/// from when its server made its drive step. A connection handed to
/// `serve_connection` (std or tokio) with these options is counted from
/// its drive step on: open, closed, its requests, not accepted.
///
/// One `ServerMetrics` serves one server: given to two, it adds their
/// counts together, and its content gauges are those of the first to start.
///
/// ```
/// use jsontp_protocol::io_adapters::server::{ServerMetrics, ServerOptions};
///
/// let metrics = ServerMetrics::new();
/// let options = ServerOptions::default().with_metrics(metrics.clone());
/// // … start a server with `options`; then, from an admin listener:
/// let mut text = String::new();
/// metrics.encode(&mut text);
/// assert!(text.contains("# TYPE jsontp_requests_total counter"));
/// assert_eq!(metrics.snapshot().requests(200), 0);
/// # drop(options);
/// ```
#[derive(Clone)]
pub struct ServerMetrics(Arc<Registry>);

impl std::fmt::Debug for ServerMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerMetrics")
            .field("shards", &self.shards().len())
            .finish_non_exhaustive()
    }
}

impl PartialEq for ServerMetrics {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for ServerMetrics {}

impl Default for ServerMetrics {
    fn default() -> Self {
        ServerMetrics::new()
    }
}

/// What the handles share: the shards, and what the gauges read.
struct Registry {
    /// Worker 0's shard (the std and tokio servers' only one), reached
    /// without the lock.
    first: Arc<Shard>,
    /// The shards of workers 1 and up, made as the workers start.
    more: Mutex<Vec<Arc<Shard>>>,
    /// The server's options the gauges read, once one has started.
    watched: OnceLock<Watched>,
}

/// What the gauges of content and limits read.
struct Watched {
    spool: SpoolOptions,
    max_connections: usize,
}

/// The upper bounds of the duration histogram's buckets, in seconds as
/// written in `le`, and in nanoseconds as compared.
const BUCKETS: [(&str, u64); 14] = [
    ("0.0005", 500_000),
    ("0.001", 1_000_000),
    ("0.0025", 2_500_000),
    ("0.005", 5_000_000),
    ("0.01", 10_000_000),
    ("0.025", 25_000_000),
    ("0.05", 50_000_000),
    ("0.1", 100_000_000),
    ("0.25", 250_000_000),
    ("0.5", 500_000_000),
    ("1", 1_000_000_000),
    ("2.5", 2_500_000_000),
    ("5", 5_000_000_000),
    ("10", 10_000_000_000),
];

/// Status codes are three digits: 100 to 599.
const FIRST_CODE: u16 = 100;
const CODES: usize = 500;

/// One worker's counters. Only its worker writes them; aligned so that no
/// other shard shares its cache lines.
#[repr(align(128))]
pub(crate) struct Shard {
    accepted: AtomicU64,
    /// Open connections by [`ConnectionState`]: signed, since a
    /// connection may enter a state in one shard's count before a
    /// snapshot and leave it after.
    open: [AtomicI64; ConnectionState::ALL.len()],
    closed: [AtomicU64; CloseCause::ALL.len()],
    requests: [AtomicU64; CODES],
    incomplete: AtomicU64,
    /// Counts per bucket, not cumulative; the last is `+Inf`.
    durations: [AtomicU64; BUCKETS.len() + 1],
    duration_nanos: AtomicU64,
    received: AtomicU64,
    sent: AtomicU64,
}

impl std::fmt::Debug for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard").finish_non_exhaustive()
    }
}

impl Shard {
    fn new() -> Shard {
        Shard {
            accepted: AtomicU64::new(0),
            open: [const { AtomicI64::new(0) }; ConnectionState::ALL.len()],
            closed: [const { AtomicU64::new(0) }; CloseCause::ALL.len()],
            requests: [const { AtomicU64::new(0) }; CODES],
            incomplete: AtomicU64::new(0),
            durations: [const { AtomicU64::new(0) }; BUCKETS.len() + 1],
            duration_nanos: AtomicU64::new(0),
            received: AtomicU64::new(0),
            sent: AtomicU64::new(0),
        }
    }

    /// A connection was taken from the listener.
    pub(crate) fn accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection moved from one state to another; `None`: not open
    /// (before it opened, after it closed).
    pub(crate) fn moved(&self, from: Option<ConnectionState>, to: Option<ConnectionState>) {
        if from == to {
            return;
        }
        if let Some(from) = from {
            self.open[from as usize].fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(to) = to {
            self.open[to as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A connection ended.
    pub(crate) fn closed(&self, cause: CloseCause) {
        self.closed[cause as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A response's access record was made.
    pub(crate) fn answered(&self, status: StatusCode, elapsed: Duration, complete: bool) {
        if let Some(count) = usize::from(status.as_u16())
            .checked_sub(usize::from(FIRST_CODE))
            .and_then(|at| self.requests.get(at))
        {
            count.fetch_add(1, Ordering::Relaxed);
        }
        if !complete {
            self.incomplete.fetch_add(1, Ordering::Relaxed);
        }
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        let bucket = BUCKETS.partition_point(|&(_, bound)| bound < nanos);
        self.durations[bucket].fetch_add(1, Ordering::Relaxed);
        self.duration_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// A connection read `n` bytes.
    pub(crate) fn received(&self, n: usize) {
        self.received.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// A connection wrote `n` bytes.
    pub(crate) fn sent(&self, n: usize) {
        self.sent.fetch_add(n as u64, Ordering::Relaxed);
    }
}

impl ServerMetrics {
    /// New counters, all zero.
    pub fn new() -> ServerMetrics {
        ServerMetrics(Arc::new(Registry {
            first: Arc::new(Shard::new()),
            more: Mutex::new(Vec::new()),
            watched: OnceLock::new(),
        }))
    }

    /// The shard of worker `worker` (made on first use).
    pub(crate) fn shard(&self, worker: usize) -> Arc<Shard> {
        let Some(index) = worker.checked_sub(1) else {
            return Arc::clone(&self.0.first);
        };
        let mut more = self.0.more.lock().unwrap_or_else(PoisonError::into_inner);
        while more.len() <= index {
            more.push(Arc::new(Shard::new()));
        }
        Arc::clone(&more[index])
    }

    /// A std or tokio server took a connection from its listener (they
    /// count as worker 0).
    pub(crate) fn count_accepted(&self) {
        self.0.first.accepted();
    }

    /// A std or tokio server closed a connection it accepted without
    /// making its drive step (a PROXY header or TLS handshake that failed,
    /// a client held at the cap when a shutdown began).
    pub(crate) fn count_unserved(&self, cause: CloseCause) {
        self.0.first.closed(cause);
    }

    /// The server `options` configure starts: the gauges read its spool
    /// and limits (the first server's, if there are several).
    pub(crate) fn watch(&self, options: &ServerOptions) {
        if self.0.watched.get().is_none() {
            let _ = self.0.watched.set(Watched {
                spool: options.spool.clone(),
                max_connections: options.max_connections,
            });
        }
    }

    fn shards(&self) -> Vec<Arc<Shard>> {
        let more = self.0.more.lock().unwrap_or_else(PoisonError::into_inner);
        std::iter::once(Arc::clone(&self.0.first))
            .chain(more.iter().cloned())
            .collect()
    }

    /// The counts now, all shards summed. Each count is read once, without
    /// stopping the server: counts that move together (a request and its
    /// duration) may be one apart while requests are under way.
    pub fn snapshot(&self) -> MetricsSnapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let shards = self.shards();
        let mut snapshot = MetricsSnapshot {
            accepted: shards.iter().map(|s| load(&s.accepted)).collect(),
            open: [0; ConnectionState::ALL.len()],
            closed: [0; CloseCause::ALL.len()],
            requests: vec![0; CODES],
            incomplete: 0,
            durations: [0; BUCKETS.len() + 1],
            duration_nanos: 0,
            received: 0,
            sent: 0,
            content: self.0.watched.get().map(|w| Content {
                memory: w.spool.held_bytes(),
                memory_limit: w.spool.max_memory,
                spool: w.spool.spooled_bytes(),
                spool_limit: w.spool.max_total,
                max_connections: w.max_connections as u64,
            }),
        };
        for shard in &shards {
            for (sum, open) in snapshot.open.iter_mut().zip(&shard.open) {
                *sum += open.load(Ordering::Relaxed);
            }
            for (sum, count) in snapshot.closed.iter_mut().zip(&shard.closed) {
                *sum += load(count);
            }
            for (sum, count) in snapshot.requests.iter_mut().zip(&shard.requests) {
                *sum += load(count);
            }
            for (sum, count) in snapshot.durations.iter_mut().zip(&shard.durations) {
                *sum += load(count);
            }
            snapshot.incomplete += load(&shard.incomplete);
            snapshot.duration_nanos += load(&shard.duration_nanos);
            snapshot.received += load(&shard.received);
            snapshot.sent += load(&shard.sent);
        }
        snapshot
    }

    /// Appends the counts now to `out` in Prometheus' text exposition
    /// format (version 0.0.4): what an admin listener serves, as
    /// `text/plain; version=0.0.4`.
    pub fn encode(&self, out: &mut String) {
        self.snapshot().encode(out);
    }
}

/// Where an open connection is in its life, as
/// `jsontp_connections{state}` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConnectionState {
    /// Exchanges are read, answered and written.
    Serving,
    /// A graceful shutdown began: the exchange under way may finish.
    Draining,
    /// Closing: our side shut, the peer's input drained for a moment so
    /// that the last response is not lost to a reset.
    Lingering,
}

impl ConnectionState {
    /// Every state, in the order they are written.
    pub const ALL: [ConnectionState; 3] = [
        ConnectionState::Serving,
        ConnectionState::Draining,
        ConnectionState::Lingering,
    ];

    /// The label value: `serving`, `draining`, `lingering`.
    pub const fn label(self) -> &'static str {
        match self {
            ConnectionState::Serving => "serving",
            ConnectionState::Draining => "draining",
            ConnectionState::Lingering => "lingering",
        }
    }
}

/// Why a connection ended, as `jsontp_connections_closed_total{reason}`
/// counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CloseCause {
    /// The peer closed its side between exchanges.
    PeerClosed,
    /// No request began within the idle timeout (D3).
    IdleTimeout,
    /// Idle at the connection cap: closed to admit a new connection (D3).
    MadeRoom,
    /// The peer took none of the output for the stall timeout, or a
    /// message did not arrive within the message timeout (D3).
    Stalled,
    /// An error response that closes the connection (D1, D3, D5).
    Rejected,
    /// A graceful shutdown closed it between exchanges.
    Shutdown,
    /// The shutdown's drain deadline passed with an exchange under way.
    DrainDeadline,
    /// A read or write failed, or the peer vanished mid-write.
    TransportFailed,
    /// The peer went away while its request's answer was awaited.
    PeerLeft,
    /// No valid PROXY header arrived in time: closed without a response
    /// (D21).
    NoProxyHeader,
    /// Dropped by its server before the drive step closed it: a
    /// shutdown's deadline passed while a handler held its thread.
    Dropped,
}

impl CloseCause {
    /// Every cause, in the order they are written.
    pub const ALL: [CloseCause; 11] = [
        CloseCause::PeerClosed,
        CloseCause::IdleTimeout,
        CloseCause::MadeRoom,
        CloseCause::Stalled,
        CloseCause::Rejected,
        CloseCause::Shutdown,
        CloseCause::DrainDeadline,
        CloseCause::TransportFailed,
        CloseCause::PeerLeft,
        CloseCause::NoProxyHeader,
        CloseCause::Dropped,
    ];

    /// What the debug log says of it.
    pub const fn description(self) -> &'static str {
        match self {
            CloseCause::PeerClosed => "peer closed",
            CloseCause::IdleTimeout => "idle timeout",
            CloseCause::MadeRoom => "idle at the connection limit: closed to admit a new connection",
            CloseCause::Stalled => "output stalled",
            CloseCause::Rejected => "closing error response",
            CloseCause::Shutdown => "shutdown",
            CloseCause::DrainDeadline => "shutdown deadline passed with an exchange under way",
            CloseCause::TransportFailed => "transport failed",
            CloseCause::PeerLeft => "the peer left while its request was answered",
            CloseCause::NoProxyHeader => "no valid PROXY header",
            CloseCause::Dropped => "dropped by its server",
        }
    }

    /// The label value, snake_case and stable.
    pub const fn label(self) -> &'static str {
        match self {
            CloseCause::PeerClosed => "peer_closed",
            CloseCause::IdleTimeout => "idle_timeout",
            CloseCause::MadeRoom => "made_room",
            CloseCause::Stalled => "stalled",
            CloseCause::Rejected => "rejected",
            CloseCause::Shutdown => "shutdown",
            CloseCause::DrainDeadline => "drain_deadline",
            CloseCause::TransportFailed => "transport_failed",
            CloseCause::PeerLeft => "peer_left",
            CloseCause::NoProxyHeader => "no_proxy_header",
            CloseCause::Dropped => "dropped",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::snapshot::{family, sample};
    use super::*;

    #[test]
    fn label_values_and_help_are_escaped() {
        let mut out = String::new();
        sample(&mut out, "m", &[("a", "x\\y\"z\nw"), ("b", "plain")], 3);
        assert_eq!(out, "m{a=\"x\\\\y\\\"z\\nw\",b=\"plain\"} 3\n");
        let mut out = String::new();
        family(&mut out, "m", "counter", "one \\ two\n\"three\"");
        assert_eq!(out, "# HELP m one \\\\ two\\n\"three\"\n# TYPE m counter\n");
    }

    #[test]
    fn the_histogram_buckets_are_cumulative_and_bounds_inclusive() {
        let metrics = ServerMetrics::new();
        let shard = metrics.shard(0);
        let ok = StatusCode::OK;
        // On a bound: in that bucket (`le` is "at most").
        shard.answered(ok, Duration::from_micros(500), true);
        shard.answered(ok, Duration::from_micros(501), true);
        shard.answered(ok, Duration::from_millis(3), true);
        shard.answered(ok, Duration::from_secs(60), false);
        // Another worker's shard is summed in.
        metrics
            .shard(2)
            .answered(StatusCode::NOT_FOUND, Duration::ZERO, true);
        let snapshot = metrics.snapshot();
        let buckets: Vec<(f64, u64)> = snapshot.duration_buckets().collect();
        assert_eq!(buckets.len(), 15);
        assert_eq!(buckets[0], (0.0005, 2));
        assert_eq!(buckets[1], (0.001, 3));
        assert_eq!(buckets[2], (0.0025, 3));
        assert_eq!(buckets[3], (0.005, 4));
        assert_eq!(buckets[13], (10.0, 4));
        assert_eq!(buckets[14], (f64::INFINITY, 5));
        assert_eq!(snapshot.duration_count(), 5);
        assert_eq!(
            snapshot.duration_sum(),
            Duration::from_micros(500 + 501 + 3000) + Duration::from_secs(60)
        );
        assert_eq!((snapshot.requests(200), snapshot.requests(404)), (4, 1));
        assert_eq!(snapshot.responses_incomplete(), 1);
        assert_eq!(snapshot.workers(), 3);

        let mut text = String::new();
        snapshot.encode(&mut text);
        for line in [
            "jsontp_request_duration_seconds_bucket{le=\"0.0005\"} 2\n",
            "jsontp_request_duration_seconds_bucket{le=\"0.001\"} 3\n",
            "jsontp_request_duration_seconds_bucket{le=\"10\"} 4\n",
            "jsontp_request_duration_seconds_bucket{le=\"+Inf\"} 5\n",
            "jsontp_request_duration_seconds_sum 60.004001\n",
            "jsontp_request_duration_seconds_count 5\n",
            "jsontp_requests_total{code=\"200\"} 4\n",
            "jsontp_requests_total{code=\"404\"} 1\n",
            "jsontp_connections_accepted_total{worker=\"2\"} 0\n",
        ] {
            assert!(text.contains(line), "{line:?} not in\n{text}");
        }
        assert!(
            !text.contains("code=\"500\""),
            "codes never counted are not written"
        );
    }

    #[test]
    fn a_state_move_leaves_one_state_for_the_other() {
        let metrics = ServerMetrics::new();
        let shard = metrics.shard(0);
        shard.moved(None, Some(ConnectionState::Serving));
        shard.moved(None, Some(ConnectionState::Serving));
        shard.moved(Some(ConnectionState::Serving), Some(ConnectionState::Lingering));
        shard.moved(Some(ConnectionState::Lingering), None);
        shard.closed(CloseCause::IdleTimeout);
        let snapshot = metrics.snapshot();
        assert_eq!(snapshot.connections(ConnectionState::Serving), 1);
        assert_eq!(snapshot.connections(ConnectionState::Lingering), 0);
        assert_eq!(snapshot.open_connections(), 1);
        assert_eq!(snapshot.closed(CloseCause::IdleTimeout), 1);
        assert_eq!(snapshot.closed_total(), 1);
    }
}
