//! The access log's accounting: each answered exchange is kept as an
//! [`Answer`] until its response has wholly left, then told to the
//! handler's [`log_exchange`](super::super::Handler::log_exchange) once;
//! when the connection ends first, as cut short (like nginx's 499), with
//! what of it was written.

use std::time::Instant;

use super::super::{AccessRecord, Handler};
use super::Driver;
use crate::machine::RequestId;
use crate::message::{Method, Rejection, StatusCode};

/// An answered exchange waiting for its response to leave.
#[derive(Debug)]
pub(super) struct Answer {
    /// The exchange, when it was read far enough to have one.
    pub(super) id: Option<RequestId>,
    pub(super) method: Option<Method>,
    /// The resource as the response echoes it (D12): the request's own
    /// string, or as a rejection wrote it (`""` when it could not be read).
    pub(super) resource: String,
    pub(super) status: StatusCode,
    pub(super) content_bytes: u64,
    /// When the request was handed over (or refused): the record's
    /// duration runs from here to the response's last byte taken.
    pub(super) started: Instant,
}

impl Driver {
    /// Keeps a response the machine wrote on its own (framing, limits,
    /// timeouts, a stream cut short, D1, D3, D5) until it has left, like
    /// an answer. A refusal of an exchange already answered writes
    /// nothing: the answer given is the one logged.
    pub(super) fn keep_rejection(&mut self, id: Option<RequestId>, rejection: Rejection, started: Instant) {
        if self.answers.iter().any(|a| id.is_some() && a.id == id) {
            return;
        }
        self.answers.push_back(Answer {
            id,
            method: None,
            status: rejection.status(),
            resource: rejection.resource,
            // The connection's error responses carry no content.
            content_bytes: 0,
            started,
        });
    }

    /// `n` more bytes of exchange `id`'s streamed content were read from
    /// its reader (D19): the record counts them.
    pub(super) fn count_content(&mut self, id: RequestId, n: usize) {
        if let Some(answer) = self.answers.iter_mut().find(|a| a.id == Some(id)) {
            answer.content_bytes += n as u64;
        }
    }

    /// Tells the access log that exchange `id`'s response has wholly left,
    /// `bytes` of output. `now`: the drive step's latest reading of the
    /// clock, which ends the record's duration.
    pub(super) fn log_sent<H: Handler + ?Sized>(
        &mut self,
        handler: &H,
        id: RequestId,
        bytes: u64,
        now: Instant,
    ) {
        self.logged_bytes += bytes;
        // Responses leave in request order (D2): the front one is taken
        // without a search.
        let done = if self.answers.front().is_some_and(|a| a.id == Some(id)) {
            self.answers.pop_front()
        } else {
            let at = self.answers.iter().position(|a| a.id == Some(id));
            at.and_then(|at| self.answers.remove(at))
        };
        if let Some(done) = done {
            let echo = self.log(handler, done, bytes, true, now);
            self.recycle_echo(echo);
        }
    }

    /// Once the connection is closed: tells the access log about every
    /// response that did not wholly leave. What left of them belongs to
    /// the first; the others sent nothing.
    pub(super) fn log_cut_short<H: Handler + ?Sized>(&mut self, handler: &H, now: Instant) {
        let mut left = self.conn.output_written().saturating_sub(self.logged_bytes);
        while let Some(done) = self.answers.pop_front() {
            tracing::debug!(
                status = done.status.as_u16(),
                bytes_written = left,
                "response cut short: the connection ended before it left"
            );
            let echo = self.log(handler, done, left, false, now);
            self.recycle_echo(echo);
            left = 0;
        }
    }

    /// Tells the access log about `done`; gives back its echo's string.
    fn log<H: Handler + ?Sized>(
        &self,
        handler: &H,
        done: Answer,
        bytes_written: u64,
        complete: bool,
        now: Instant,
    ) -> String {
        let elapsed = now.saturating_duration_since(done.started);
        if let Some(metrics) = self.settings.metrics() {
            metrics.answered(done.status, elapsed, complete);
        }
        handler.log_exchange(&AccessRecord {
            peer: self.info.peer,
            method: done.method,
            resource: &done.resource,
            status: done.status,
            content_bytes: done.content_bytes,
            elapsed,
            bytes_written,
            complete,
        });
        done.resource
    }

    /// A copy of a request's resource string for its record (D12), in a
    /// string an earlier record gave back: the handler owns the request,
    /// and a copy per request would otherwise cost an allocation.
    pub(super) fn echo_of(&mut self, resource: &str) -> String {
        let mut echo = self
            .spare_echoes
            .as_mut()
            .and_then(|spare| spare.0.pop())
            .unwrap_or_default();
        echo.push_str(resource);
        echo
    }

    /// Keeps `echo` for a later request's record, unless it grew large or
    /// enough are kept for a full pipeline.
    fn recycle_echo(&mut self, mut echo: String) {
        if echo.capacity() > SPARE_ECHO {
            return;
        }
        let spare = &mut self.spare_echoes.get_or_insert_default().0;
        if spare.len() < SPARE_ECHOES {
            echo.clear();
            spare.push(echo);
        }
    }
}

/// Emptied echo strings, kept for later records.
#[derive(Debug, Default)]
pub(super) struct SpareEchoes(Vec<String>);

/// The largest echo string a connection keeps for a later record: a
/// typical resource fits, and an idle connection stays small (D3).
const SPARE_ECHO: usize = 128;

/// The most echo strings a connection keeps: one for each request of a
/// pipeline 16 deep in flight at once. With [`SPARE_ECHO`], a connection
/// that pipelined so deep keeps at most about 2.5 KB for them; one that
/// never pipelined, one short string.
const SPARE_ECHOES: usize = 16;
