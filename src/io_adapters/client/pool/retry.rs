//! A call's second chance and its time: which failed exchange may be sent
//! again (D13) and the copy kept for it, and the call's deadline over each
//! step's own limit.

use std::time::{Duration, Instant};

use crate::io_adapters::client::{ClientError, Progress, Timeout};
use crate::message::{Method, Request};

/// Whether a call that failed with `error` may be sent again, once, on a
/// new connection (D13): its connection was reused (a new one that closes
/// at once is the server's answer, not a stale connection), it closed
/// before any byte of the answer arrived, and the method is idempotent
/// (`GET`, `OPTIONS`, `PUT`, `DELETE`; never a `POST`).
pub(crate) fn may_retry(error: &ClientError, method: Method, reused: bool) -> bool {
    reused && error.progress().is_some_and(|p| p.may_send_again(method))
}

/// A call's request, and the copy kept for the one retry D13 allows,
/// made only when the request goes out on a reused connection with a
/// method that may be sent again.
pub(crate) struct Resend {
    first: Option<Request>,
    spare: Option<Request>,
}

impl Resend {
    pub(crate) fn new(request: Request) -> Resend {
        Resend {
            first: Some(request),
            spare: None,
        }
    }

    /// The request for this attempt: the call's own the first time
    /// (copied when `reused` and the call `may_retry`), its copy after.
    pub(crate) fn next(&mut self, reused: bool, may_retry: bool) -> Result<Request, ClientError> {
        match self.first.take() {
            Some(request) => {
                if reused && may_retry && Progress::UNSENT.may_send_again(request.method) {
                    self.spare = Some(request.clone());
                }
                Ok(request)
            }
            None => self.spare.take().ok_or(ClientError::ConnectionClosed),
        }
    }
}

/// A call's deadline ([`PoolOptions::call_timeout`](super::PoolOptions::call_timeout)).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(Option<Instant>);

/// One step's time limit under a call's deadline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounded {
    /// The step's own limit or what is left of the deadline, the earlier.
    pub(crate) limit: Option<Duration>,
    /// Whether that is the deadline's: a timeout of the step is then the
    /// call's.
    by_call: bool,
}

impl Bounded {
    /// `error`, with a step's timeout that the deadline set said as the
    /// call's.
    pub(crate) fn blame(self, error: ClientError) -> ClientError {
        match error {
            ClientError::TimedOut(Timeout::Connect | Timeout::Exchange) if self.by_call => {
                ClientError::TimedOut(Timeout::Call)
            }
            other => other,
        }
    }
}

impl Deadline {
    pub(crate) fn after(now: Instant, limit: Option<Duration>) -> Deadline {
        Deadline(limit.map(|limit| now + limit))
    }

    /// What is left of it, or the call's timeout when it has passed.
    pub(crate) fn left(self, now: Instant) -> Result<Option<Duration>, ClientError> {
        match self.0 {
            None => Ok(None),
            Some(at) if now >= at => Err(ClientError::TimedOut(Timeout::Call)),
            Some(at) => Ok(Some(at - now)),
        }
    }

    /// A step's limit `own` under the deadline.
    pub(crate) fn bound(self, now: Instant, own: Option<Duration>) -> Result<Bounded, ClientError> {
        Ok(match (self.left(now)?, own) {
            (Some(left), Some(own)) if own < left => Bounded {
                limit: Some(own),
                by_call: false,
            },
            (Some(left), _) => Bounded {
                limit: Some(left),
                by_call: true,
            },
            (None, own) => Bounded {
                limit: own,
                by_call: false,
            },
        })
    }
}
