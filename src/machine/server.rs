//! The server role: requests in, responses out, strictly in request order
//! (D2), with the 100-continue handshake (D10) and the machine's own error
//! answers (D1, D3, D5).
//!
//! Every exchange holds a slot in `slots`, in request order. A slot is
//! written out when it reaches the front and its answer is there; an error
//! the machine answers itself is a slot like any other, so a rejection of
//! request 3 goes out after the responses to requests 1 and 2.

use std::collections::VecDeque;
use std::time::Instant;

use super::connection::Connection;
use super::responses::{self, refusal};
use super::state::{Exchange, ExchangeState, Input};
use super::{ContinuePolicy, Event, Now, PeerError, RequestId, Role, UsageError};
use crate::message::framing::Frame;
use crate::message::{Rejection, RequestContext, Response, parse_request_framed};

/// The server's half of a connection.
#[derive(Debug, Default)]
pub(super) struct ServerSide {
    /// Exchanges not yet written, in request order.
    slots: VecDeque<Slot>,
    /// For each final response written to the output buffer but not yet
    /// taken by the peer: the output offset where it ends (D3).
    untaken: VecDeque<u64>,
    /// The handshake whose decision the application owes (`Ask`).
    deciding: Option<RequestId>,
    /// The handshake whose full request is awaited, and since when its
    /// `100` is in the output: the continue timer (D3, D10) runs from
    /// there. `None` while the `100` waits behind responses owed before it
    /// (D2): the client cannot send the full request before it sees the
    /// `100`, so that delay is ours.
    awaiting_full: Option<(RequestId, Option<Instant>)>,
}

impl ServerSide {
    /// Whether a handshake's full request is awaited, and if so since when
    /// its `100` went out (see `awaiting_full`).
    pub(super) fn awaiting_full_since(&self) -> Option<Option<Instant>> {
        self.awaiting_full.map(|(_, since)| since)
    }

    /// Responses owed and not yet taken by the peer (D3).
    fn owed(&self) -> usize {
        self.slots.len() + self.untaken.len()
    }

    fn slot_mut(&mut self, id: RequestId) -> Option<&mut Slot> {
        self.slots.iter_mut().find(|slot| slot.id == id)
    }
}

/// One exchange in response order.
#[derive(Debug)]
struct Slot {
    id: RequestId,
    exchange: Exchange,
    /// The request's resource, for the `100` (D10).
    resource: String,
    /// A `100` to write before the final answer.
    interim: Option<Response>,
    /// The final answer, once given.
    response: Option<Response>,
    /// The connection closes after this answer (D1, D3, D10).
    closes: bool,
    /// The peer left before sending the full request: nothing to answer.
    abandoned: bool,
}

impl Slot {
    fn new(id: RequestId, resource: String) -> Slot {
        Slot {
            id,
            exchange: Exchange::new(),
            resource,
            interim: None,
            response: None,
            closes: false,
            abandoned: false,
        }
    }
}

impl Connection {
    /// Whether the next message may be read now: not while the
    /// application decides a handshake, nor while too many responses are
    /// owed (D3) unless the message is the full request of a handshake,
    /// which owes nothing new.
    pub(super) fn server_ready_for_message(&self) -> bool {
        self.server.deciding.is_none()
            && (self.server.awaiting_full.is_some() || self.server.owed() < self.config.limits.max_pipelined)
    }

    pub(super) fn server_wants_read(&self) -> bool {
        self.server_ready_for_message()
    }

    /// Nothing under way and nothing owed: the idle timer runs (D3).
    pub(super) fn server_idle(&self) -> bool {
        self.server.owed() == 0
            && self.server.deciding.is_none()
            && self.server.awaiting_full.is_none()
            && !self.scanner.in_message()
    }

    /// The peer has ended and every answer is written.
    pub(super) fn server_finished(&self) -> bool {
        self.peer_eof && self.input_stopped && self.server.slots.is_empty()
    }

    /// Handles one framed message.
    pub(super) fn server_message(&mut self, bytes: &[u8], frame: &Frame, now: Now) {
        let limits = self.config.limits.message;
        let full_of = self.server.awaiting_full.take().map(|(id, _)| id);
        let context = match full_of {
            Some(_) => RequestContext::AfterContinue,
            None => RequestContext::Fresh,
        };
        // D3: the scanner measured the depth; a deep message is refused
        // from that count before any recursive parser runs.
        let parsed = parse_request_framed(bytes, frame, context, &limits);
        let request = match parsed {
            Ok(request) => request,
            Err(rejection) => {
                self.server_reject(full_of, rejection, false, now);
                return;
            }
        };
        if let Some(id) = full_of {
            // The full request of a handshake: a normal request (D10).
            if let Some(slot) = self.server.slot_mut(id) {
                let _ = slot.exchange.apply(Role::Client, Input::Request);
            }
            self.events.push_back(Event::Request { id, request });
            return;
        }
        let id = self.fresh_id();
        let mut slot = Slot::new(id, request.resource.as_str().to_owned());
        if !request.headers.expect_continue() {
            let _ = slot.exchange.apply(Role::Client, Input::Request);
            self.server.slots.push_back(slot);
            self.events.push_back(Event::Request { id, request });
            return;
        }
        let _ = slot.exchange.apply(Role::Client, Input::RequestExpectingContinue);
        match self.config.continue_policy {
            ContinuePolicy::AutoAccept => {
                let _ = slot.exchange.apply(Role::Server, Input::Continue);
                slot.interim = Some(responses::continue_ack(&slot.resource, now, self.config.language));
                // The continue timer starts when the 100 is written out.
                self.server.awaiting_full = Some((id, None));
                self.server.slots.push_back(slot);
            }
            ContinuePolicy::Ask => {
                self.server.deciding = Some(id);
                self.server.slots.push_back(slot);
                self.events.push_back(Event::ContinueRequested { id, request });
            }
            ContinuePolicy::Refuse => {
                let rejection = refusal::continue_refused(&slot.resource);
                self.server.slots.push_back(slot);
                self.server_reject(Some(id), rejection, true, now);
            }
        }
    }

    /// Answers a refused message: the exchange `target` (whose request the
    /// peer sent, or began), or a new one. `closes` stops reading. Every
    /// response the machine writes on its own goes through here, and is
    /// reported as [`PeerError::Rejected`] with the status and echo it
    /// carries, so that adapters can log it without knowing the protocol.
    fn server_reject(&mut self, target: Option<RequestId>, rejection: Rejection, closes: bool, now: Now) {
        let id = match target {
            Some(id) => id,
            None => {
                let id = self.fresh_id();
                self.server.slots.push_back(Slot::new(id, String::new()));
                id
            }
        };
        let response = responses::rejection(&rejection, now, self.config.language);
        if let Some(slot) = self.server.slot_mut(id) {
            // The message was received (a bad one); the error is its answer.
            if matches!(
                slot.exchange.state(),
                ExchangeState::Idle | ExchangeState::SendingFullRequest
            ) {
                let _ = slot.exchange.apply(Role::Client, Input::Request);
            }
            let _ = slot.exchange.apply(Role::Server, Input::FinalResponse);
            slot.response = Some(response);
            slot.closes = closes;
        }
        if closes {
            self.input_stopped = true;
        }
        self.events.push_back(Event::PeerError(PeerError::Rejected {
            id: Some(id),
            rejection,
            closes,
        }));
    }

    pub(super) fn server_framing_error(&mut self, byte: Option<u8>, first: bool, now: Now) {
        let target = self.server.awaiting_full.take().map(|(id, _)| id);
        self.server_reject(target, refusal::framing(byte, first), true, now);
    }

    pub(super) fn server_too_large(&mut self, now: Now) {
        let target = self.server.awaiting_full.take().map(|(id, _)| id);
        let limit = self.config.limits.message.max_message_bytes;
        self.server_reject(target, refusal::too_large(limit), true, now);
    }

    /// End of stream, after every complete message was handled.
    pub(super) fn server_eof(&mut self, cut_short: bool, now: Now) {
        let full_of = self.server.awaiting_full.take().map(|(id, _)| id);
        if cut_short {
            // D1: `400` if the peer can still read, then the close. Reported
            // as the rejection written, so the caller can log it.
            self.server_reject(full_of, refusal::incomplete(), true, now);
        } else if let Some(id) = full_of {
            // The full request never came: nothing left to answer, nothing
            // written.
            if let Some(slot) = self.server.slot_mut(id) {
                slot.abandoned = true;
            }
            self.events.push_back(Event::PeerError(PeerError::UnexpectedEof));
        }
    }

    /// D3: a message began but did not end in time.
    pub(super) fn server_message_timeout(&mut self, now: Now) {
        let secs = self.config.limits.message_timeout.as_secs();
        let rejection = refusal::timed_out("the message", secs, "");
        self.server_reject(None, rejection, true, now);
    }

    /// D3, D10: the full request did not come in time after the `100`.
    pub(super) fn server_continue_timeout(&mut self, now: Now) {
        let Some((id, _)) = self.server.awaiting_full.take() else {
            return;
        };
        let secs = self.config.limits.continue_timeout.as_secs();
        let resource = self
            .server
            .slot_mut(id)
            .map(|slot| slot.resource.clone())
            .unwrap_or_default();
        let rejection = refusal::timed_out("the full request after 100 Continue", secs, &resource);
        self.server_reject(Some(id), rejection, true, now);
    }

    pub(super) fn server_send_response(
        &mut self,
        id: RequestId,
        mut response: Response,
        now: Now,
    ) -> Result<(), UsageError> {
        if response.status.code.is_informational() {
            // D12: only the acknowledgement, through `accept_continue`.
            return Err(UsageError::InformationalResponse);
        }
        let closing = self.must_close;
        let language = self.config.language;
        let Some(slot) = self.server.slot_mut(id) else {
            return Err(if closing {
                UsageError::Closed
            } else {
                UsageError::UnknownRequest(id)
            });
        };
        if slot.response.is_some() || slot.abandoned {
            return Err(UsageError::UnknownRequest(id));
        }
        slot.exchange
            .apply(Role::Server, Input::FinalResponse)
            .map_err(|_| UsageError::OutOfTurn(id))?;
        responses::fill_defaults(&mut response, now, language);
        // D7, D12: the echo is the request's own string, whatever the
        // application put there.
        response.resource.clone_from(&slot.resource);
        slot.response = Some(response);
        if self.server.deciding == Some(id) {
            // A rejected handshake ends the exchange; the connection stays
            // open and the next message is a new request (D10).
            self.server.deciding = None;
        }
        Ok(())
    }

    pub(super) fn server_accept_continue(&mut self, id: RequestId, now: Now) -> Result<(), UsageError> {
        if self.server.deciding != Some(id) {
            return Err(UsageError::NotAwaitingContinue(id));
        }
        let language = self.config.language;
        let stopped = self.input_stopped;
        let Some(slot) = self.server.slot_mut(id) else {
            return Err(UsageError::NotAwaitingContinue(id));
        };
        slot.exchange
            .apply(Role::Server, Input::Continue)
            .map_err(|_| UsageError::NotAwaitingContinue(id))?;
        slot.interim = Some(responses::continue_ack(&slot.resource, now, language));
        // The peer already left: the full request will not come.
        slot.abandoned = stopped;
        self.server.deciding = None;
        if !stopped {
            // The continue timer starts when the 100 is written out.
            self.server.awaiting_full = Some((id, None));
        }
        Ok(())
    }

    /// Writes out every answer that has reached the front, in order (D2).
    pub(super) fn server_flush(&mut self) {
        loop {
            let Some(front) = self.server.slots.front_mut() else {
                return;
            };
            if let Some(ack) = front.interim.take() {
                let id = front.id;
                self.queue_output(|out| ack.write_to(out));
                // D3, D10: the wait for the full request starts now that
                // the client can see the 100.
                let now = self.last_now.instant;
                if let Some((awaited, since)) = &mut self.server.awaiting_full
                    && *awaited == id
                {
                    since.get_or_insert(now);
                }
                continue;
            }
            if !front.abandoned && front.response.is_none() {
                return;
            }
            let Some(slot) = self.server.slots.pop_front() else {
                return;
            };
            if let Some(response) = slot.response {
                let end = self.queue_output(|out| response.write_to(out));
                self.server.untaken.push_back(end);
            }
            if slot.closes {
                // Nothing follows the error that closes (D1, D3, D10).
                self.must_close = true;
                self.input_stopped = true;
                self.server.slots.clear();
                return;
            }
        }
    }

    /// Some output was written: responses the peer has taken no longer
    /// count as owed (D3).
    pub(super) fn server_output_taken(&mut self) {
        let written = self.output_written;
        while self.server.untaken.front().is_some_and(|&end| end <= written) {
            self.server.untaken.pop_front();
        }
        if self.server_idle() {
            self.idle_since = self.last_now.instant;
        }
    }
}
