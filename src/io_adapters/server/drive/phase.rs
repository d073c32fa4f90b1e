//! Where a connection is in its life ([`Phase`]) and why it ends
//! ([`CloseReason`]).

use std::time::Instant;

use super::{Driver, Receiving, Step};
use crate::io_adapters::linger::Linger;

/// Where a connection is in its life. Every move is one of:
///
/// ```text
///   Serving ── shut_down ──► Draining { until }
///      │                        │  nothing under way        │ `until` passes
///      │ the machine closed,    ▼                            ▼
///      │ its output written ─► Lingering { why } ─► Closed ◄── (cut short)
///      └── the transport failed, or the peer vanished ──────► Closed
/// ```
///
/// An idle `Serving` connection also moves to `Lingering` when the
/// connection cap closes it to admit a new one (`close_idle`, D3).
#[derive(Debug)]
pub(super) enum Phase {
    /// Exchanges are read, answered and written.
    Serving,
    /// A graceful shutdown began: what is under way may finish until
    /// `until`; the connection then closes whatever its peer does.
    Draining { until: Instant },
    /// Closing gracefully: our side shut, the peer's input drained for a
    /// moment so that our last response is not lost to a reset. Boxed:
    /// every connection holds a `Phase`, a closing one only holds this.
    Lingering { linger: Box<Linger>, why: CloseReason },
    /// Over. The access log may still be owed the exchanges cut short:
    /// [`Step::Dispatch`] until it has them, then [`Step::Close`].
    Closed,
}

/// Why a connection ended, as the debug log says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CloseReason {
    PeerClosed,
    IdleTimeout,
    /// Idle at the connection cap: closed to admit a new connection (D3).
    MadeRoom,
    /// The peer took none of the output for the stall timeout (D3).
    Stalled,
    /// An error response that closes the connection (D1, D3, D5).
    Rejected,
    Shutdown,
    /// The shutdown's drain deadline passed with an exchange under way.
    DrainDeadline,
    /// A read or write failed, or the peer vanished mid-write.
    TransportFailed,
}

impl CloseReason {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            CloseReason::PeerClosed => "peer closed",
            CloseReason::IdleTimeout => "idle timeout",
            CloseReason::MadeRoom => "idle at the connection limit: closed to admit a new connection",
            CloseReason::Stalled => "output stalled",
            CloseReason::Rejected => "closing error response",
            CloseReason::Shutdown => "shutdown",
            CloseReason::DrainDeadline => "shutdown deadline passed with an exchange under way",
            CloseReason::TransportFailed => "transport failed",
        }
    }
}

impl Driver {
    /// Closes without lingering (the transport failed, the peer is gone,
    /// or the drain deadline passed) or after it; says why. What is left
    /// to log goes to `dispatch` first.
    pub(super) fn abort(&mut self, why: CloseReason, error: Option<&std::io::Error>) -> Step {
        self.phase = Phase::Closed;
        // Nothing more is read or sent: the readers (files) are closed and
        // a spooled upload deleted at once.
        self.streaming = None;
        self.receiving = Receiving::Nothing;
        let why = self.why_closing.unwrap_or(why);
        match error {
            // An operator must hear of a certificate clients refuse.
            #[cfg(feature = "tls")]
            Some(error) if crate::io_adapters::tls::refused_certificate(error) => {
                tracing::warn!(reason = why.as_str(), %error, "connection closed");
            }
            Some(error) => tracing::debug!(reason = why.as_str(), %error, "connection closed"),
            None => tracing::debug!(reason = why.as_str(), "connection closed"),
        }
        if self.answers.is_empty() {
            Step::Close
        } else {
            Step::Dispatch
        }
    }
}
