//! The client role: requests out (with the 100-continue handshake of D10
//! when asked for), responses in, matched to their requests in order, the
//! echoed resource checked (D13).

use std::collections::VecDeque;
use std::time::Instant;

use super::connection::Connection;
use super::responses::refusal;
use super::state::{Exchange, ExchangeState, Input};
use super::{Event, Now, PeerError, RequestId, Role};
use crate::message::framing::Frame;
use crate::message::{Body, Rejection, Request, StatusCode, parse_response_framed};

/// The client's half of a connection.
#[derive(Debug, Default)]
pub(super) struct ClientSide {
    /// Requests on the wire, in order, each owed a final response.
    sent: VecDeque<Sent>,
    /// Requests queued while a handshake runs: the server reads the next
    /// request as the full one, so nothing else may go out before it.
    held: VecDeque<(RequestId, Request)>,
    /// The full request of the handshake under way, until `100` or the
    /// wait runs out.
    full_request: Option<(RequestId, Request)>,
    /// When the wait for `100` ends.
    pub(super) continue_deadline: Option<Instant>,
}

/// A request on the wire.
#[derive(Debug)]
struct Sent {
    /// `None` for a full request the server will answer as an exchange of
    /// its own, after it rejected the handshake we stopped waiting on: its
    /// response is read and dropped.
    id: Option<RequestId>,
    exchange: Exchange,
    resource: String,
}

impl ClientSide {
    /// Whether requests are still owed a response or waiting to go out.
    fn outstanding(&self) -> bool {
        self.sent.iter().any(|sent| sent.id.is_some()) || !self.held.is_empty() || self.full_request.is_some()
    }
}

impl Connection {
    /// The client is finished once its input ended (end of stream or an
    /// error it cannot read past).
    pub(super) fn client_finished(&self) -> bool {
        self.input_stopped
    }

    pub(super) fn client_send_request(&mut self, id: RequestId, request: Request, now: Now) {
        if self.client.full_request.is_some() {
            self.client.held.push_back((id, request));
        } else {
            self.client_write_request(id, request, now);
        }
    }

    /// Puts a request on the wire, or the first request of its handshake.
    fn client_write_request(&mut self, id: RequestId, request: Request, now: Now) {
        let mut exchange = Exchange::new();
        let resource = request.resource.as_str().to_owned();
        if request.headers.expect_continue() {
            let _ = exchange.apply(Role::Client, Input::RequestExpectingContinue);
            // D10: the first request carries the headers as given and an
            // empty body; the full one follows without `expect`.
            let first = Request {
                version: request.version,
                resource: request.resource.clone(),
                method: request.method,
                headers: request.headers.clone(),
                body: Body::empty(),
            };
            self.queue_output(|out| first.write_to(out));
            let mut full = request;
            full.headers = full.headers.with_expect_continue(false);
            self.client.full_request = Some((id, full));
            // A wait too long to represent never ends.
            self.client.continue_deadline = now.instant.checked_add(self.config.continue_wait);
        } else {
            let _ = exchange.apply(Role::Client, Input::Request);
            self.queue_output(|out| request.write_to(out));
        }
        self.client.sent.push_back(Sent {
            id: Some(id),
            exchange,
            resource,
        });
    }

    /// Sends the held full request of the handshake, then whatever was
    /// queued behind it.
    fn client_send_full_request(&mut self, now: Now) {
        self.client.continue_deadline = None;
        if let Some((id, full)) = self.client.full_request.take() {
            if let Some(sent) = self.client.sent.iter_mut().find(|s| s.id == Some(id)) {
                let _ = sent.exchange.apply(Role::Client, Input::Request);
            }
            self.queue_output(|out| full.write_to(out));
        }
        self.client_release_held(now);
    }

    /// The handshake ended without its full request (a final answer).
    fn client_drop_full_request(&mut self, now: Now) {
        self.client.continue_deadline = None;
        self.client.full_request = None;
        self.client_release_held(now);
    }

    fn client_release_held(&mut self, now: Now) {
        while self.client.full_request.is_none() {
            let Some((id, request)) = self.client.held.pop_front() else {
                return;
            };
            self.client_write_request(id, request, now);
        }
    }

    /// The wait for `100` ran out: send the full request anyway (D10).
    pub(super) fn client_continue_timeout(&mut self, now: Now) {
        let Some((id, _)) = &self.client.full_request else {
            self.client.continue_deadline = None;
            return;
        };
        let id = *id;
        if let Some(sent) = self.client.sent.iter_mut().find(|s| s.id == Some(id)) {
            let _ = sent.exchange.apply(Role::Client, Input::ContinueWaitExpired);
        }
        self.client_send_full_request(now);
    }

    /// A response began but did not end in time (D3).
    pub(super) fn client_message_timeout(&mut self) {
        self.input_stopped = true;
        let id = self.client.sent.front().and_then(|sent| sent.id);
        self.events
            .push_back(Event::PeerError(PeerError::TimedOut { id }));
    }

    pub(super) fn client_framing_error(&mut self, byte: Option<u8>, first: bool) {
        self.client_fatal(refusal::framing(byte, first));
    }

    pub(super) fn client_too_large(&mut self) {
        let limit = self.config.limits.message.max_message_bytes;
        self.client_fatal(refusal::too_large(limit));
    }

    fn client_fatal(&mut self, rejection: Rejection) {
        self.input_stopped = true;
        let id = self.client.sent.front().and_then(|sent| sent.id);
        self.events.push_back(Event::PeerError(PeerError::Rejected {
            id,
            rejection,
            closes: true,
        }));
    }

    /// End of stream: fine after complete responses when nothing is owed
    /// (the reference server closes after each response, D2).
    pub(super) fn client_eof(&mut self, cut_short: bool) {
        if cut_short || self.client.outstanding() {
            self.events.push_back(Event::PeerError(PeerError::UnexpectedEof));
        }
    }

    /// Handles one framed response.
    pub(super) fn client_message(&mut self, bytes: &[u8], frame: &Frame, now: Now) {
        let limits = self.config.limits.message;
        // D3: depth as the scanner measured it (see `server_message`).
        let parsed = parse_response_framed(bytes, frame, self.config.validation, &limits);
        let front = self.client.sent.front().map(|s| (s.id, s.exchange.state()));
        let parsed = match parsed {
            Ok(parsed) => parsed,
            Err(rejection) => {
                // Unreadable: it still answered the front request.
                let id = front.and_then(|(id, _)| id);
                self.client_finish_front(now);
                self.events.push_back(Event::PeerError(PeerError::Rejected {
                    id,
                    rejection,
                    closes: false,
                }));
                return;
            }
        };
        let code = parsed.message.status.code;
        let Some((id, state)) = front else {
            let rejection = refusal::unexpected_response(code, None);
            self.events.push_back(Event::PeerError(PeerError::Rejected {
                id: None,
                rejection,
                closes: false,
            }));
            return;
        };
        let sent_resource = self
            .client
            .sent
            .front()
            .map(|s| s.resource.clone())
            .unwrap_or_default();
        if let Some(id) = id.filter(|_| parsed.message.resource != sent_resource) {
            // D13: a mismatch is an error, not a response.
            self.client_finish_front(now);
            self.events
                .push_back(Event::PeerError(PeerError::ResourceMismatch {
                    id,
                    sent: sent_resource,
                    received: parsed.message.resource,
                }));
            return;
        }
        if code.is_informational() {
            self.client_informational(id, state, code, now);
            return;
        }
        let orphan_follows = state == ExchangeState::AwaitingResponseUnacknowledged;
        self.client_finish_front(now);
        if orphan_follows {
            // We sent the full request without a `100` and the server
            // answered the first one: it reads the full request as a new
            // exchange and will answer it too.
            let mut exchange = Exchange::new();
            let _ = exchange.apply(Role::Client, Input::Request);
            self.client.sent.push_front(Sent {
                id: None,
                exchange,
                resource: sent_resource,
            });
        }
        if let Some(id) = id {
            self.events.push_back(Event::Response {
                id,
                response: parsed.message,
                forgiven: parsed.forgiven,
            });
        }
    }

    /// A `1xx`: only `100`, and only to a handshake (D10, D12).
    fn client_informational(
        &mut self,
        id: Option<RequestId>,
        state: ExchangeState,
        code: StatusCode,
        now: Now,
    ) {
        let moved = match self.client.sent.front_mut() {
            Some(front) if code == StatusCode::CONTINUE => {
                front.exchange.apply(Role::Server, Input::Continue).ok()
            }
            _ => None,
        };
        match moved {
            Some(ExchangeState::SendingFullRequest) => {
                self.client_send_full_request(now);
                if let Some(id) = id {
                    self.events.push_back(Event::Continue { id });
                }
            }
            // A late `100` to the full request we already sent.
            Some(_) if state == ExchangeState::AwaitingResponseUnacknowledged => {}
            _ => {
                let rejection = refusal::unexpected_response(code, id);
                self.events.push_back(Event::PeerError(PeerError::Rejected {
                    id,
                    rejection,
                    closes: false,
                }));
            }
        }
    }

    /// The front request got its final answer (or an error in its place).
    fn client_finish_front(&mut self, now: Now) {
        let Some(mut sent) = self.client.sent.pop_front() else {
            return;
        };
        let before = sent.exchange.state();
        let _ = sent.exchange.apply(Role::Server, Input::FinalResponse);
        let handshake_open = matches!(
            before,
            ExchangeState::AwaitingContinue | ExchangeState::ContinueWaitExpired
        );
        let is_handshake = self
            .client
            .full_request
            .as_ref()
            .is_some_and(|(held, _)| Some(*held) == sent.id);
        if handshake_open || is_handshake {
            self.client_drop_full_request(now);
        }
    }
}
