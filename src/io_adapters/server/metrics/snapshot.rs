//! A [`ServerMetrics`](super::ServerMetrics)' counts at one moment, and
//! how they are written in Prometheus' text format.

use std::fmt::Write as _;
use std::time::Duration;

use super::{BUCKETS, CloseCause, ConnectionState, FIRST_CODE};

/// The counts of a [`ServerMetrics`](super::ServerMetrics) at one moment, all workers summed
/// ([`ServerMetrics::snapshot`](super::ServerMetrics::snapshot)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsSnapshot {
    pub(super) accepted: Vec<u64>,
    pub(super) open: [i64; ConnectionState::ALL.len()],
    pub(super) closed: [u64; CloseCause::ALL.len()],
    pub(super) requests: Vec<u64>,
    pub(super) incomplete: u64,
    pub(super) durations: [u64; BUCKETS.len() + 1],
    pub(super) duration_nanos: u64,
    pub(super) received: u64,
    pub(super) sent: u64,
    pub(super) content: Option<Content>,
}

/// The gauges of content and limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Content {
    pub(super) memory: u64,
    pub(super) memory_limit: u64,
    pub(super) spool: u64,
    pub(super) spool_limit: u64,
    pub(super) max_connections: u64,
}

impl MetricsSnapshot {
    /// Connections worker `worker` took from the listener (the std and
    /// tokio servers count all as worker 0).
    pub fn accepted(&self, worker: usize) -> u64 {
        self.accepted.get(worker).copied().unwrap_or(0)
    }

    /// Connections taken from the listener, all workers together.
    pub fn accepted_total(&self) -> u64 {
        self.accepted.iter().sum()
    }

    /// How many workers count: the mio server's, as they started; one for
    /// the std and tokio servers.
    pub fn workers(&self) -> usize {
        self.accepted.len()
    }

    /// Connections open now in `state`.
    pub fn connections(&self, state: ConnectionState) -> u64 {
        u64::try_from(self.open[state as usize]).unwrap_or(0)
    }

    /// Connections open now, whatever their state.
    pub fn open_connections(&self) -> u64 {
        ConnectionState::ALL.iter().map(|&s| self.connections(s)).sum()
    }

    /// Connections that ended for `cause`.
    pub fn closed(&self, cause: CloseCause) -> u64 {
        self.closed[cause as usize]
    }

    /// Connections that ended, whatever the cause.
    pub fn closed_total(&self) -> u64 {
        self.closed.iter().sum()
    }

    /// Responses with status code `code` (`0` for a number that is not a
    /// status code).
    pub fn requests(&self, code: u16) -> u64 {
        usize::from(code)
            .checked_sub(usize::from(FIRST_CODE))
            .and_then(|at| self.requests.get(at))
            .copied()
            .unwrap_or(0)
    }

    /// Responses, whatever their status.
    pub fn requests_total(&self) -> u64 {
        self.requests.iter().sum()
    }

    /// Responses whose connection ended before the peer took them whole.
    pub fn responses_incomplete(&self) -> u64 {
        self.incomplete
    }

    /// Durations counted in the histogram (its `_count`): one per response.
    pub fn duration_count(&self) -> u64 {
        self.durations.iter().sum()
    }

    /// The durations added up (the histogram's `_sum`).
    pub fn duration_sum(&self) -> Duration {
        Duration::from_nanos(self.duration_nanos)
    }

    /// The histogram's buckets: each upper bound in seconds (the last is
    /// infinite) with the durations at most that long (cumulative, as
    /// Prometheus' `_bucket{le}`).
    pub fn duration_buckets(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        let bounds = BUCKETS
            .iter()
            .map(|&(_, nanos)| nanos as f64 / 1e9)
            .chain(std::iter::once(f64::INFINITY));
        bounds.zip(self.durations.iter().scan(0, |total, count| {
            *total += count;
            Some(*total)
        }))
    }

    /// Bytes the connections read.
    pub fn received_bytes(&self) -> u64 {
        self.received
    }

    /// Bytes the connections wrote.
    pub fn sent_bytes(&self) -> u64 {
        self.sent
    }

    /// Request content held in memory now, and its bound
    /// ([`SpoolOptions::max_memory`](crate::io_adapters::server::SpoolOptions::max_memory)); `None` before a server started.
    pub fn content_memory(&self) -> Option<(u64, u64)> {
        self.content.map(|c| (c.memory, c.memory_limit))
    }

    /// Request content in temporary files now, and its bound
    /// ([`SpoolOptions::max_total`](crate::io_adapters::server::SpoolOptions::max_total)); `None` before a server started.
    pub fn spooled(&self) -> Option<(u64, u64)> {
        self.content.map(|c| (c.spool, c.spool_limit))
    }

    /// Appends these counts to `out` in Prometheus' text exposition format
    /// (version 0.0.4).
    pub fn encode(&self, out: &mut String) {
        family(
            out,
            "jsontp_connections_accepted_total",
            "counter",
            "Connections taken from the listener, by worker.",
        );
        for (worker, count) in self.accepted.iter().enumerate() {
            sample(
                out,
                "jsontp_connections_accepted_total",
                &[("worker", &worker.to_string())],
                *count,
            );
        }
        family(
            out,
            "jsontp_connections",
            "gauge",
            "Connections open now, by state.",
        );
        for state in ConnectionState::ALL {
            sample(
                out,
                "jsontp_connections",
                &[("state", state.label())],
                self.connections(state),
            );
        }
        family(
            out,
            "jsontp_connections_closed_total",
            "counter",
            "Connections ended, by reason.",
        );
        for cause in CloseCause::ALL {
            sample(
                out,
                "jsontp_connections_closed_total",
                &[("reason", cause.label())],
                self.closed(cause),
            );
        }
        family(
            out,
            "jsontp_requests_total",
            "counter",
            "Responses, by status code.",
        );
        for (at, count) in self.requests.iter().enumerate() {
            if *count > 0 {
                let code = (at + usize::from(FIRST_CODE)).to_string();
                sample(out, "jsontp_requests_total", &[("code", &code)], *count);
            }
        }
        family(
            out,
            "jsontp_responses_incomplete_total",
            "counter",
            "Responses whose connection ended before the peer took them whole.",
        );
        sample(out, "jsontp_responses_incomplete_total", &[], self.incomplete);
        family(
            out,
            "jsontp_request_duration_seconds",
            "histogram",
            "From the request complete to its response's last byte taken, in seconds.",
        );
        let les = BUCKETS.iter().map(|&(le, _)| le).chain(std::iter::once("+Inf"));
        for (le, (_, count)) in les.zip(self.duration_buckets()) {
            sample(
                out,
                "jsontp_request_duration_seconds_bucket",
                &[("le", le)],
                count,
            );
        }
        let sum = self.duration_nanos as f64 / 1e9;
        let _ = writeln!(out, "jsontp_request_duration_seconds_sum {sum}");
        sample(
            out,
            "jsontp_request_duration_seconds_count",
            &[],
            self.duration_count(),
        );
        family(
            out,
            "jsontp_received_bytes_total",
            "counter",
            "Bytes the connections read.",
        );
        sample(out, "jsontp_received_bytes_total", &[], self.received);
        family(
            out,
            "jsontp_sent_bytes_total",
            "counter",
            "Bytes the connections wrote.",
        );
        sample(out, "jsontp_sent_bytes_total", &[], self.sent);
        let Some(content) = self.content else {
            return;
        };
        let gauges = [
            (
                "jsontp_content_memory_bytes",
                "Request content held in memory now, in bytes.",
                content.memory,
            ),
            (
                "jsontp_content_memory_limit_bytes",
                "The most request content held in memory at once, in bytes.",
                content.memory_limit,
            ),
            (
                "jsontp_spool_bytes",
                "Request content in temporary files now, in bytes.",
                content.spool,
            ),
            (
                "jsontp_spool_limit_bytes",
                "The most request content in temporary files at once, in bytes.",
                content.spool_limit,
            ),
            (
                "jsontp_connections_limit",
                "The most connections open at once.",
                content.max_connections,
            ),
        ];
        for (name, help, value) in gauges {
            family(out, name, "gauge", help);
            sample(out, name, &[], value);
        }
    }
}

/// Writes a family's `# HELP` and `# TYPE` lines.
pub(super) fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    out.push_str("# HELP ");
    out.push_str(name);
    out.push(' ');
    // In HELP text, only the backslash and the line feed are escaped.
    for c in help.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    let _ = writeln!(out, "\n# TYPE {name} {kind}");
}

/// Writes one sample line.
pub(super) fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (n, (label, value)) in labels.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            out.push_str(label);
            out.push_str("=\"");
            escape_label(value, out);
            out.push('"');
        }
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// A label value as the text format quotes it: backslash, double quote and
/// line feed escaped.
fn escape_label(value: &str, out: &mut String) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}
