//! The access log's accounting: each answered exchange is kept as an
//! [`Answer`] until its response has wholly left, then told to the
//! handler's [`log_exchange`](super::super::Handler::log_exchange) once;
//! when the connection ends first, as cut short (like nginx's 499), with
//! what of it was written.

use std::time::Instant;

use super::super::{AccessRecord, Handler};
use super::Driver;
use crate::machine::RequestId;
use crate::message::{Method, Rejection, Resource, StatusCode};

/// An answered exchange waiting for its response to leave.
#[derive(Debug)]
pub(super) struct Answer {
    /// The exchange, when it was read far enough to have one.
    pub(super) id: Option<RequestId>,
    pub(super) method: Option<Method>,
    pub(super) resource: Echoed,
    pub(super) status: StatusCode,
    pub(super) content_bytes: u64,
    /// When the request was handed over (or refused): the record's
    /// duration runs from here to the response's last byte taken.
    pub(super) started: Instant,
}

/// The resource an exchange's response echoes (D12).
#[derive(Debug)]
pub(super) enum Echoed {
    Request(Resource),
    /// As the rejection wrote it (`""` when it could not be read).
    Rejection(String),
}

impl Echoed {
    fn as_str(&self) -> &str {
        match self {
            Echoed::Request(resource) => resource.as_str(),
            Echoed::Rejection(text) => text,
        }
    }
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
            resource: Echoed::Rejection(rejection.resource),
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
        // Responses leave in request order (D2): it is the front one.
        if let Some(at) = self.answers.iter().position(|a| a.id == Some(id))
            && let Some(done) = self.answers.remove(at)
        {
            self.log(handler, done, bytes, true, now);
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
            self.log(handler, done, left, false, now);
            left = 0;
        }
    }

    /// Tells the access log about `done`.
    fn log<H: Handler + ?Sized>(
        &self,
        handler: &H,
        done: Answer,
        bytes_written: u64,
        complete: bool,
        now: Instant,
    ) {
        handler.log_exchange(&AccessRecord {
            peer: self.info.peer,
            method: done.method,
            resource: done.resource.as_str(),
            status: done.status,
            content_bytes: done.content_bytes,
            elapsed: now.saturating_duration_since(done.started),
            bytes_written,
            complete,
        });
    }
}
