//! Where a connection is in its life ([`Phase`]) and why it ends
//! ([`CloseCause`]).

use std::time::{Duration, Instant};

use super::{Driver, Receiving, Step};
use crate::io_adapters::linger::Linger;
use crate::io_adapters::server::{CloseCause, ConnectionState};

/// Where a connection is in its life, and why it closes once that is
/// known. It changes only through the `move_to_*` methods below, each of
/// which logs the change once:
///
/// ```text
///   Serving ── move_to_draining (shut_down) ──► Draining { until }
///      │                        │  nothing under way        │ `until` passes
///      │ the machine closed,    ▼                            ▼
///      │ its output written ─► Lingering { why } ─► Closed ◄── (cut short)
///      └── the transport failed, or the peer vanished ──────► Closed
/// ```
///
/// An idle `Serving` connection also moves to `Lingering` when the
/// connection cap closes it to admit a new one (`close_idle`, D3).
/// [`move_to_lingering`](Driver::move_to_lingering) makes every move to
/// `Lingering`, [`move_to_closed`](Driver::move_to_closed) every move to
/// `Closed`.
///
/// The machine may close for a reason of its own (a closing rejection, a
/// stall, the idle timeout) while its last output still leaves:
/// [`move_to_closing`](Driver::move_to_closing) records that reason in
/// `Serving` or `Draining`, and it is the reason the connection lingers
/// and closes with. The first reason known is the one kept.
#[derive(Debug)]
pub(super) enum Phase {
    /// Exchanges are read, answered and written. `closing`: why the
    /// machine closed, when it did for a reason of its own.
    Serving { closing: Option<CloseCause> },
    /// A graceful shutdown began: what is under way may finish until
    /// `until`; the connection then closes whatever its peer does.
    /// `closing`: as in `Serving`. A connection that has received
    /// nothing waits a moment for its first request
    /// ([`FIRST_REQUEST_GRACE`]).
    Draining {
        until: Instant,
        closing: Option<CloseCause>,
    },
    /// Closing gracefully: our side shut, the peer's input drained for a
    /// moment so that our last response is not lost to a reset. Boxed:
    /// every connection holds a `Phase`, a closing one only holds this.
    Lingering { linger: Box<Linger>, why: CloseCause },
    /// Over. The access log may still be owed the exchanges cut short:
    /// [`Step::Dispatch`] until it has them, then [`Step::Close`].
    Closed,
}

impl Phase {
    /// A new connection's.
    pub(super) const fn new() -> Phase {
        Phase::Serving { closing: None }
    }

    /// The state the metrics count it in; `None` once closed.
    pub(super) fn state(&self) -> Option<ConnectionState> {
        match self {
            Phase::Serving { .. } => Some(ConnectionState::Serving),
            Phase::Draining { .. } => Some(ConnectionState::Draining),
            Phase::Lingering { .. } => Some(ConnectionState::Lingering),
            Phase::Closed => None,
        }
    }

    /// Why the connection closes, when known: the machine's reason, or the
    /// one it lingers with.
    fn reason(&self) -> Option<CloseCause> {
        match self {
            Phase::Serving { closing } | Phase::Draining { closing, .. } => *closing,
            Phase::Lingering { why, .. } => Some(*why),
            Phase::Closed => None,
        }
    }
}

/// How long a draining connection that has received nothing waits for its
/// first request. A client the server accepted just before its shutdown
/// (or an upgrade's hand-over) began cannot know of it: its request is
/// on its way, and closing the connection under it would lose a request
/// the new process would have served. A connection opened and left
/// silent only holds the drain this long.
pub(super) const FIRST_REQUEST_GRACE: Duration = Duration::from_secs(1);

impl Driver {
    /// Moves to `next`, out of the metrics' count of the phase it leaves
    /// and into that of `next`: the one place `phase` changes after the
    /// connection opened.
    fn enter(&mut self, next: Phase) {
        if let Some(metrics) = self.settings.metrics() {
            metrics.moved(self.phase.state(), next.state());
        }
        self.phase = next;
    }

    /// A graceful shutdown begins ([`Driver::shut_down`]): what is under
    /// way may finish until the shutdown's timeout. Only from `Serving`.
    pub(super) fn move_to_draining(&mut self) {
        if let Phase::Serving { closing } = self.phase {
            let until = self.now().instant + self.settings.0.shutdown_timeout;
            tracing::debug!("draining: the server shuts down");
            self.enter(Phase::Draining { until, closing });
        }
    }

    /// Until when a draining connection that has received nothing waits
    /// for its first request: [`FIRST_REQUEST_GRACE`] from the drain's
    /// start, within the drain. `None` for any other connection.
    pub(super) fn first_request_by(&self) -> Option<Instant> {
        let Phase::Draining { until, .. } = self.phase else {
            return None;
        };
        if !self.first_line.is_watching() {
            return None;
        }
        let began = until.checked_sub(self.settings.0.shutdown_timeout)?;
        Some((began + FIRST_REQUEST_GRACE).min(until))
    }

    /// The machine closed for `why` (or closes once its last output has
    /// left): kept as the reason the connection lingers and closes with,
    /// unless one is already known.
    pub(super) fn move_to_closing(&mut self, why: CloseCause) {
        if let Phase::Serving { closing } | Phase::Draining { closing, .. } = &mut self.phase
            && closing.is_none()
        {
            tracing::debug!(
                reason = why.description(),
                "closing once the last output has left"
            );
            *closing = Some(why);
        }
    }

    /// Closes gracefully from `at`: our side shut, the peer's input
    /// drained for a moment. The reason is the one already known, or else
    /// `why`. Only from `Serving` or `Draining`.
    pub(super) fn move_to_lingering(&mut self, why: CloseCause, at: Instant) {
        if matches!(self.phase, Phase::Lingering { .. } | Phase::Closed) {
            return;
        }
        let why = self.phase.reason().unwrap_or(why);
        tracing::debug!(reason = why.description(), "lingering: our side shut");
        self.enter(Phase::Lingering {
            linger: Box::new(Linger::new(at)),
            why,
        });
    }

    /// Closes without lingering (the transport failed, the peer is gone,
    /// or the drain deadline passed) or after it; says why: the reason
    /// already known, or else `why`. Nothing more is read or sent. What is
    /// left to log goes to `dispatch` first.
    pub(super) fn move_to_closed(&mut self, why: CloseCause, error: Option<&std::io::Error>) -> Step {
        let why = self.phase.reason().unwrap_or(why);
        if let Some(metrics) = self.settings.metrics()
            && !matches!(self.phase, Phase::Closed)
        {
            metrics.closed(why);
        }
        self.enter(Phase::Closed);
        // The readers (files) are closed and a spooled upload deleted at
        // once.
        self.streaming = None;
        self.receiving = Receiving::Nothing;
        match error {
            // An operator must hear of a certificate clients refuse.
            #[cfg(feature = "tls")]
            Some(error) if crate::io_adapters::tls::refused_certificate(error) => {
                tracing::warn!(reason = why.description(), %error, "connection closed");
            }
            Some(error) => tracing::debug!(reason = why.description(), %error, "connection closed"),
            None => tracing::debug!(reason = why.description(), "connection closed"),
        }
        if self.answers.is_empty() {
            Step::Close
        } else {
            Step::Dispatch
        }
    }
}
