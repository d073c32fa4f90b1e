//! The client role: requests out (with the 100-continue handshake of D10
//! when asked for), responses in, matched to their requests in order, the
//! echoed resource checked (D12, D13).
//!
//! Every exchange not yet answered is in `exchanges`, in request order.
//! Where each stands is its [`Exchange`], moved only through the table: the
//! requests on the wire come first; a handshake waiting for its `100` is in
//! `AwaitingContinue`, and the requests queued behind it wait in `Idle`,
//! since the server reads the next request as the full one.

use std::collections::VecDeque;
use std::time::Instant;

use super::core::{ContentOutcome, Core, Decoded, Lifecycle, Outbound, Timers, deadline, due};
use super::responses::refusal;
use super::table::{Exchange, ExchangeState, Input, Role, TransitionError};
use super::{Acknowledged, ClientConfig, ClientEvent, Now, PeerError, RequestId, UsageError};
use crate::message::decoder::Responses;
use crate::message::{Body, Parsed, Rejection, Request, Response, StatusCode, WholeMessage};

/// One jsontp connection in the client role, without I/O.
///
/// See the [module documentation](super) for its states.
#[derive(Debug)]
pub struct ClientConnection {
    config: ClientConfig,
    core: Core<ClientEvent>,
    /// Every exchange not yet answered, in request order.
    exchanges: VecDeque<Outgoing>,
}

/// One exchange of ours.
#[derive(Debug)]
struct Outgoing {
    /// `None` for a full request the server will answer as an exchange of
    /// its own, after it rejected the handshake we stopped waiting on: its
    /// response is read and dropped.
    id: Option<RequestId>,
    exchange: Exchange,
    /// What we sent as `resource`: the echo must be the same (D13).
    resource: String,
    /// What is still to be written: the whole request (in `Idle`), or the
    /// full request of a handshake until its `100` comes or the wait for it
    /// runs out (D10).
    unsent: Option<Request>,
    /// When the wait for `100` ends.
    continue_deadline: Option<Instant>,
    /// A streamed request's content (D19), until it ends.
    outbound: Option<Outbound>,
}

impl Outgoing {
    /// Nothing of it has been written yet.
    fn unwritten(&self) -> bool {
        self.exchange.state() == ExchangeState::Idle && self.unsent.is_some()
    }
}

impl ClientConnection {
    /// A client connection.
    pub fn new(config: ClientConfig, now: Now) -> ClientConnection {
        let core = Core::new(&config.limits, config.stream_content, now);
        ClientConnection {
            config,
            core,
            exchanges: VecDeque::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Queues a request. With `expect_continue` on its headers the
    /// handshake is run (D10): the first request goes out with an empty
    /// body; the full request (with `expect` removed) follows on `100` or
    /// when [`ClientConfig::continue_wait`] has passed; a final response
    /// ends the exchange without it. Requests queued meanwhile wait for the
    /// handshake to end, since the server reads the next request as the
    /// full one.
    pub fn send_request(&mut self, request: Request, now: Now) -> Result<RequestId, UsageError> {
        self.queue(request, None, now)
    }

    /// Queues a request whose content follows in pieces (D19): `request`
    /// is the head (its body's encoding and other keys; its content must
    /// be empty, or [`UsageError::NotStreaming`]), written with `body` last
    /// and `content` last in it. Give the content with
    /// [`send_content`](Self::send_content) as
    /// [`content_room`](Self::content_room) allows, and end it with
    /// [`end_content`](Self::end_content); requests queued after it wait
    /// until it ends. With `expect_continue` the handshake runs first
    /// (D10): the content goes out with the full request.
    pub fn send_request_head(&mut self, request: Request, now: Now) -> Result<RequestId, UsageError> {
        let outbound = Outbound::new(request.body.encoding());
        self.queue(request, Some(outbound), now)
    }

    /// Queues a request, whole or (with `outbound`) streamed, as a new
    /// exchange, and writes what may go out.
    fn queue(
        &mut self,
        request: Request,
        outbound: Option<Outbound>,
        now: Now,
    ) -> Result<RequestId, UsageError> {
        if self.core.lifecycle() != Lifecycle::Open {
            return Err(UsageError::Closed);
        }
        let id = self.core.fresh_id();
        // Behind a request still unwritten, this one can only wait.
        let behind_unwritten = self.exchanges.back().is_some_and(Outgoing::unwritten);
        self.exchanges.push_back(Outgoing {
            id: Some(id),
            exchange: Exchange::new(),
            resource: request.resource.as_str().to_owned(),
            unsent: Some(request),
            continue_deadline: None,
            outbound,
        });
        if !behind_unwritten {
            self.write_ready(now);
        }
        self.after_call();
        Ok(id)
    }

    /// How many content bytes exchange `id` takes now: none until its head
    /// is being written (after the `100` of a handshake), then as many as
    /// keep the output small. Zero for an exchange that is not streaming.
    pub fn content_room(&self, id: RequestId) -> usize {
        match self.streaming(id) {
            Some(outbound) if outbound.takes_content() => self.core.content_room(),
            _ => 0,
        }
    }

    /// The next piece of exchange `id`'s content, encoded as its head's
    /// `body.encoding` says. Only once [`content_room`](Self::content_room)
    /// has been above zero ([`UsageError::OutOfTurn`] before). Identity
    /// content that is not UTF-8 is [`UsageError::NotText`], and the
    /// connection closes.
    pub fn send_content(&mut self, id: RequestId, data: &[u8], now: Now) -> Result<(), UsageError> {
        let closed = self.core.is_closed();
        let Some(outbound) = self
            .index_of(id)
            .and_then(|index| self.exchanges[index].outbound.as_mut())
        else {
            return Err(if closed {
                UsageError::Closed
            } else {
                UsageError::NotStreaming(id)
            });
        };
        let result = self.core.queue_content(id, outbound, data, now);
        if result == Err(UsageError::NotText(id)) {
            self.abort_content(id, now);
        }
        result
    }

    /// Ends exchange `id`'s content: the request is complete.
    pub fn end_content(&mut self, id: RequestId, now: Now) -> Result<(), UsageError> {
        let closed = self.core.is_closed();
        let Some(index) = self.index_of(id).filter(|&index| {
            self.exchanges[index]
                .outbound
                .as_ref()
                .is_some_and(|out| !out.ended)
        }) else {
            return Err(if closed {
                UsageError::Closed
            } else {
                UsageError::NotStreaming(id)
            });
        };
        if let Some(outbound) = &mut self.exchanges[index].outbound {
            outbound.ended = true;
        }
        if self.close_content(index, now) {
            self.write_ready(now);
        }
        self.after_call();
        Ok(())
    }

    /// The content of exchange `id` cannot be finished (its source failed):
    /// what is queued still goes out, then the connection closes (the
    /// server sees a message cut short, D1).
    pub fn abort_content(&mut self, id: RequestId, now: Now) {
        let _ = now;
        if self.streaming(id).is_some() {
            self.exchanges.clear();
            self.core.close();
            self.after_call();
        }
    }

    /// Exchange `id`'s streamed content, while it has one.
    fn streaming(&self, id: RequestId) -> Option<&Outbound> {
        self.index_of(id)
            .and_then(|index| self.exchanges[index].outbound.as_ref())
    }

    /// Where exchange `id` is in the queue. Searched from the back: the
    /// request a caller streams is the newest or close to it, however many
    /// older ones wait for their answers.
    fn index_of(&self, id: RequestId) -> Option<usize> {
        self.exchanges.iter().rposition(|o| o.id == Some(id))
    }

    /// Bytes received from the server. Every complete response in them is
    /// handled at once; the outcome does not depend on how the bytes were
    /// split. Bytes after the end of stream or after an error that closes
    /// the connection are ignored.
    pub fn receive_data(&mut self, data: &[u8], now: Now) {
        if self.core.receive(data) {
            self.process_input(now);
            self.after_call();
        }
    }

    /// The server closed its sending side: fine after complete responses
    /// when nothing is owed (the reference server closes after each, D2),
    /// [`PeerError::UnexpectedEof`] otherwise. The connection is finished.
    pub fn receive_eof(&mut self, now: Now) {
        self.core.receive_eof();
        self.process_input(now);
        self.after_call();
    }

    /// The next event, if any.
    pub fn next_event(&mut self, now: Now) -> Option<ClientEvent> {
        if !self.core.has_events() {
            self.process_input(now);
            self.after_call();
        }
        self.core.pop_event()
    }

    /// The first piece of the bytes waiting to be written to the server
    /// (empty when none are): write it, mark what was taken with
    /// [`consume_output`](Self::consume_output), and ask again. Usually it
    /// is all that waits; a large prepared body comes as a piece of its
    /// own ([`pending_output_vectored`](Self::pending_output_vectored)).
    pub fn pending_output(&self) -> &[u8] {
        self.core.pending_output()
    }

    /// The pending output as pieces in order, for a vectored write: fills
    /// `slices` with as many as fit and returns how many. Their bytes are
    /// [`pending_output`](Self::pending_output)'s and what follows it; a
    /// large prepared body ([`Body::prepared`](crate::message::Body::prepared))
    /// is a piece of its own, never copied. Mark what the write took with
    /// [`consume_output`](Self::consume_output).
    pub fn pending_output_vectored<'a>(&'a self, slices: &mut [std::io::IoSlice<'a>]) -> usize {
        self.core.pending_output_vectored(slices)
    }

    /// Marks `n` bytes of [`pending_output`](Self::pending_output) as written
    /// (more than are pending is clamped). Unless the caller reports what
    /// its transport tells ([`transport_acknowledged`](Self::transport_acknowledged)),
    /// any byte written counts as taken by the peer and restarts the stall
    /// timer (D3).
    pub fn consume_output(&mut self, n: usize, now: Now) {
        if self.core.consume_output(n, now) > 0 {
            self.after_call();
        }
    }

    /// Tells the machine what the transport says of the bytes written to
    /// it: the stall timer then counts only bytes the peer acknowledged, as
    /// [`ServerConnection::transport_acknowledged`](super::ServerConnection::transport_acknowledged)
    /// describes.
    pub fn transport_acknowledged(&mut self, told: Acknowledged, now: Now) {
        self.core.transport_acknowledged(told, now);
    }

    /// Bytes of memory the connection's input and output buffers hold
    /// (capacity, not content).
    pub fn buffered_capacity(&self) -> usize {
        self.core.buffered_capacity()
    }

    /// Whether the machine wants more input: until the server's end of
    /// stream or an error that ends the connection.
    pub fn wants_read(&self) -> bool {
        self.core.lifecycle() == Lifecycle::Open
    }

    /// When the next timer is due, if one runs.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers().earliest()
    }

    /// Tells the machine that time has passed: acts on every timer due at
    /// `now` (D3, D10).
    pub fn handle_timeout(&mut self, now: Now) {
        let timers = self.timers();
        if due(timers.stall, now) && self.core.stall_timed_out(self.config.limits.stall_timeout, now) {
            // Nothing more can be written or answered.
            self.exchanges.clear();
            self.core.close_stalled();
        } else {
            if due(timers.continue_wait, now) {
                self.continue_timeout(now);
            }
            if due(timers.message, now) {
                // A response began but did not end in time (D3).
                let id = self.front_id();
                self.core.stop_input();
                self.core
                    .push_event(ClientEvent::PeerError(PeerError::TimedOut { id }));
            }
        }
        self.process_input(now);
        self.after_call();
    }

    /// Whether the connection is finished: write out
    /// [`pending_output`](Self::pending_output), then close the socket.
    pub fn is_closed(&self) -> bool {
        self.core.is_closed()
    }

    /// Where exchange `id` stands in the [transition table](super::table),
    /// as h11 tells a connection's states: `AwaitingResponse` once the
    /// request is out, `AwaitingContinue` while a handshake waits for its
    /// `100` (D10), `SendingRequestContent` while streamed content goes out
    /// (D19). `None` once its final response is read, and for an id this
    /// connection never gave.
    pub fn exchange_state(&self, id: RequestId) -> Option<ExchangeState> {
        self.exchanges
            .iter()
            .find(|outgoing| outgoing.id == Some(id))
            .map(|outgoing| outgoing.exchange.state())
    }

    // -- writing -----------------------------------------------------------

    /// Writes every request that may go out now: those queued up to the
    /// first handshake still waiting for its `100` (D10).
    fn write_ready(&mut self, now: Now) {
        // Requests go out in order, so all behind the first unsent one are
        // unsent too. The walk starts at the last that is not: a request
        // already out, or the one holding the rest back. What waits for an
        // answer is not walked again on every call.
        let start = self.exchanges.iter().rposition(|o| !o.unwritten()).unwrap_or(0);
        for index in start..self.exchanges.len() {
            let outgoing = &mut self.exchanges[index];
            match outgoing.exchange.state() {
                // The server reads the next request as the full one; and
                // nothing may come between a streamed request's head and
                // its end (D19).
                ExchangeState::AwaitingContinue
                | ExchangeState::SendingRequestContent
                | ExchangeState::SendingRequestContentUnacknowledged => return,
                ExchangeState::Idle => {}
                _ => continue,
            }
            let Some(request) = outgoing.unsent.take() else {
                continue;
            };
            if let Some(outbound) = &mut outgoing.outbound
                && !request.headers.expect_continue()
            {
                if self
                    .core
                    .advance(&mut outgoing.exchange, Role::Client, Input::RequestHead)
                    .is_some()
                {
                    self.core.queue_head(outbound, now, |out| request.write_head(out));
                    // Ended already: what waits behind it goes next, in
                    // this loop, so no queue deepens the stack.
                    if self.close_content(index, now) {
                        continue;
                    }
                }
                return;
            }
            if !request.headers.expect_continue() {
                if self
                    .core
                    .advance(&mut outgoing.exchange, Role::Client, Input::Request)
                    .is_some()
                {
                    self.core.queue_message(now, &request);
                }
                continue;
            }
            if self
                .core
                .advance(
                    &mut outgoing.exchange,
                    Role::Client,
                    Input::RequestExpectingContinue,
                )
                .is_none()
            {
                return;
            }
            // D10: the first request carries the headers as given and an
            // empty body; the full one follows without `expect`.
            let first = Request {
                version: request.version,
                resource: request.resource.clone(),
                method: request.method,
                headers: request.headers.clone(),
                body: Body::empty(),
            };
            self.core.queue_output(now, |out| first.write_to(out));
            let mut full = request;
            full.headers = full.headers.with_expect_continue(false);
            outgoing.unsent = Some(full);
            // A wait too long to represent never ends.
            outgoing.continue_deadline = now.instant.checked_add(self.config.continue_wait);
            return;
        }
    }

    /// Writes the held full request of a handshake, now that its `100`
    /// came (the exchange is in `SendingFullRequest`) or the wait for it
    /// ran out (`ContinueWaitExpired`); then whatever was queued behind it.
    fn write_full_request(&mut self, index: usize, now: Now) {
        let Some(outgoing) = self.exchanges.get_mut(index) else {
            return;
        };
        outgoing.continue_deadline = None;
        if let Some(outbound) = &mut outgoing.outbound {
            // D19: the full request streams its content.
            if self
                .core
                .advance(&mut outgoing.exchange, Role::Client, Input::RequestHead)
                .is_some()
                && let Some(head) = outgoing.unsent.take()
            {
                self.core.queue_head(outbound, now, |out| head.write_head(out));
                if self.close_content(index, now) {
                    self.write_ready(now);
                }
            }
            return;
        }
        if self
            .core
            .advance(&mut outgoing.exchange, Role::Client, Input::Request)
            .is_none()
        {
            return;
        }
        if let Some(full) = outgoing.unsent.take() {
            self.core.queue_message(now, &full);
        }
        self.write_ready(now);
    }

    /// Ends the streamed request at `index` once its head is out and the
    /// application ended its content (D19). True when it ended: what waited
    /// behind it may go out, which is the caller's to do.
    fn close_content(&mut self, index: usize, now: Now) -> bool {
        let Some(outgoing) = self.exchanges.get_mut(index) else {
            return false;
        };
        let Some(outbound) = outgoing.outbound.as_mut().filter(|o| o.head_queued && o.ended) else {
            return false;
        };
        if self.core.queue_content_end(outbound, now).is_err() {
            // Identity content ended inside a UTF-8 sequence: the request
            // cannot be finished (D1: the server sees it cut short).
            self.exchanges.clear();
            self.core.close();
            return false;
        }
        outgoing.outbound = None;
        self.core
            .advance(&mut outgoing.exchange, Role::Client, Input::RequestContentEnd)
            .is_some()
    }

    /// The wait for `100` ran out: send the full request anyway (D10).
    fn continue_timeout(&mut self, now: Now) {
        let Some(index) = self
            .exchanges
            .iter()
            .position(|o| o.exchange.state() == ExchangeState::AwaitingContinue)
        else {
            return;
        };
        let outgoing = &mut self.exchanges[index];
        if self
            .core
            .advance(&mut outgoing.exchange, Role::Client, Input::ContinueWaitExpired)
            .is_some()
        {
            self.write_full_request(index, now);
        }
    }

    // -- reading -----------------------------------------------------------

    /// Frames and handles every complete response.
    fn process_input(&mut self, now: Now) {
        loop {
            let responses = Responses {
                validation: self.config.validation,
                limits: &self.config.limits.message,
            };
            match self.core.next_message(&responses, &self.config.limits, now) {
                Decoded::Partial => return,
                Decoded::Message { read, content } => self.on_message(read, content.as_ref(), now),
                Decoded::Content(data) => {
                    // A piece of the front exchange's response (D19); one
                    // event at a time, so that memory stays bounded. The
                    // response to a request we gave up on is dropped.
                    if let Some(id) = self.front_id() {
                        self.core.push_event(ClientEvent::Content { id, data });
                        return;
                    }
                }
                Decoded::ContentTooLarge { limit } => self.fatal(refusal::content_too_large(limit)),
                Decoded::TooDeep => {
                    // A response we cannot take: the connection ends.
                    self.core.stop_input();
                    let limit = self.config.limits.message.max_depth;
                    self.fatal(refusal::too_deep(limit));
                }
                // The head of a streamed response, before its pieces; a
                // head that does not read yet says nothing (the whole
                // message will). The response to a request we gave up on
                // is dropped.
                Decoded::ContentHead { head } => {
                    if let (Ok(parsed), Some(id)) = (head, self.front_id()) {
                        let head = Box::new(parsed.message);
                        self.core.push_event(ClientEvent::ContentHead { id, head });
                        return;
                    }
                }
                // A client never discards: it reads every response to its end.
                Decoded::Abandoned => {}
                Decoded::End { cut_short } => {
                    // Fine after complete responses when nothing is owed.
                    let owed = self.exchanges.iter().any(|o| o.id.is_some());
                    if cut_short || owed {
                        self.core
                            .push_event(ClientEvent::PeerError(PeerError::UnexpectedEof));
                    }
                }
                Decoded::Invalid { byte, fault } => self.fatal(refusal::framing(byte, fault)),
                Decoded::TooLarge => {
                    let limit = self.config.limits.message.max_message_bytes;
                    self.fatal(refusal::too_large(limit));
                }
            }
        }
    }

    /// An error in the stream we cannot read past (input has stopped).
    fn fatal(&mut self, rejection: Rejection) {
        let id = self.front_id();
        self.core.push_event(ClientEvent::PeerError(PeerError::Rejected {
            id,
            rejection,
            closes: true,
        }));
    }

    /// The exchange the next response answers.
    fn front_id(&self) -> Option<RequestId> {
        self.exchanges.front().and_then(|o| o.id)
    }

    /// Handles one response, parsed; `content`: how its streamed content
    /// ended, if it streamed (D19).
    fn on_message(
        &mut self,
        parsed: Result<Parsed<Response>, Rejection>,
        content: Option<&ContentOutcome>,
        now: Now,
    ) {
        let id = self.front_id();
        let parsed = match parsed {
            Ok(parsed) => parsed,
            Err(rejection) => {
                // Unreadable: it still answered the front request, if one
                // was owed.
                let id = self.finish_front(now).ok().and(id);
                self.core.push_event(ClientEvent::PeerError(PeerError::Rejected {
                    id,
                    rejection,
                    closes: false,
                }));
                return;
            }
        };
        if let Some(ContentOutcome::Corrupt { encoding, why, .. }) = content {
            // D5 level 4: streamed content that did not decode (D19).
            let rejection = refusal::content_corrupt(*encoding, why, &parsed.message.resource);
            let id = self.finish_front(now).ok().and(id);
            self.core.push_event(ClientEvent::PeerError(PeerError::Rejected {
                id,
                rejection,
                closes: false,
            }));
            return;
        }
        let response = parsed.message;
        let code = response.status.code;
        if let Some(front) = self.exchanges.front()
            && let Some(id) = front.id
            && response.resource != front.resource
            // D12: `""` when the server could not read our request's
            // resource; its error response answers the request all the same.
            && !(response.resource.is_empty() && code.as_u16() >= 400)
        {
            // D13: a mismatch is an error, not a response; it ended the
            // exchange all the same.
            let sent = front.resource.clone();
            let error = match self.finish_front(now) {
                Ok(_) => PeerError::ResourceMismatch {
                    id,
                    sent,
                    response: Box::new(response),
                },
                Err(_) => PeerError::Rejected {
                    id: Some(id),
                    rejection: refusal::unexpected_response(code, Some(id)),
                    closes: false,
                },
            };
            self.core.push_event(ClientEvent::PeerError(error));
            return;
        }
        if code.is_informational() {
            self.on_informational(id, code, now);
            return;
        }
        match self.finish_front(now) {
            Ok(before) => {
                if before == ExchangeState::AwaitingResponseUnacknowledged {
                    // We sent the full request without a `100` and the
                    // server answered the first one: it reads the full
                    // request as a new exchange and will answer it too.
                    self.push_orphan();
                }
                if let Some(id) = id {
                    self.core.push_event(ClientEvent::Response {
                        id,
                        response,
                        forgiven: parsed.forgiven,
                    });
                }
            }
            Err(_) => {
                let rejection = refusal::unexpected_response(code, id);
                self.core.push_event(ClientEvent::PeerError(PeerError::Rejected {
                    id,
                    rejection,
                    closes: false,
                }));
            }
        }
    }

    /// A `1xx`: only `100`, and only to a handshake (D10, D12).
    fn on_informational(&mut self, id: Option<RequestId>, code: StatusCode, now: Now) {
        let moved = match self.exchanges.front_mut() {
            Some(front) if code == StatusCode::CONTINUE => {
                front.exchange.apply(Role::Server, Input::Continue).ok()
            }
            _ => None,
        };
        match moved {
            Some(ExchangeState::SendingFullRequest) => {
                self.write_full_request(0, now);
                if let Some(id) = id {
                    self.core.push_event(ClientEvent::Continue { id });
                }
            }
            // A late `100` to the full request we already sent.
            Some(_) => {}
            None => {
                let rejection = refusal::unexpected_response(code, id);
                self.core.push_event(ClientEvent::PeerError(PeerError::Rejected {
                    id,
                    rejection,
                    closes: false,
                }));
            }
        }
    }

    /// A final response (or an error in its place) answered the front
    /// exchange, which is over: its full request, if a handshake ended
    /// without it, is never sent, and what waited behind it goes out.
    /// Returns where the exchange stood; refused when no exchange can take
    /// a final response (none is owed).
    fn finish_front(&mut self, now: Now) -> Result<ExchangeState, TransitionError> {
        let Some(front) = self.exchanges.front_mut() else {
            return Err(TransitionError::NotNow {
                state: ExchangeState::Idle,
                input: Input::FinalResponse,
            });
        };
        let before = front.exchange.state();
        front.exchange.apply(Role::Server, Input::FinalResponse)?;
        self.exchanges.pop_front();
        if matches!(
            before,
            ExchangeState::SendingRequestContent | ExchangeState::SendingRequestContentUnacknowledged
        ) {
            // Answered before our content ended (D19): the rest of the
            // request cannot follow, so nothing more can be read or sent
            // on this connection.
            self.exchanges.clear();
            self.core.stop_input();
            return Ok(before);
        }
        self.write_ready(now);
        Ok(before)
    }

    /// The server will answer the full request we sent without a `100` as
    /// an exchange of its own: expect that response first, and drop it.
    fn push_orphan(&mut self) {
        let mut exchange = Exchange::new();
        if self
            .core
            .advance(&mut exchange, Role::Client, Input::Request)
            .is_some()
        {
            self.exchanges.push_front(Outgoing {
                id: None,
                exchange,
                resource: String::new(),
                unsent: None,
                continue_deadline: None,
                outbound: None,
            });
        }
    }

    // -- bookkeeping -------------------------------------------------------

    /// After every call: a client is finished once its input has stopped
    /// (end of stream, or an error it cannot read past); memory no longer
    /// needed is given back.
    fn after_call(&mut self) {
        if self.core.lifecycle() == Lifecycle::InputStopped {
            self.core.close();
        }
        self.core.release_buffers();
    }

    /// The deadlines that run now.
    fn timers(&self) -> Timers {
        let limits = &self.config.limits;
        let mut timers = Timers {
            stall: self.core.stall_deadline(limits.stall_timeout),
            ..Timers::default()
        };
        if self.core.lifecycle() != Lifecycle::Open {
            return timers;
        }
        timers.continue_wait = self
            .exchanges
            .iter()
            .find(|o| o.exchange.state() == ExchangeState::AwaitingContinue)
            .and_then(|o| o.continue_deadline);
        timers.message = if self.core.is_streaming() {
            // D19: a streamed response is held to its gap and its rate.
            self.core.streamed_deadline(limits)
        } else {
            deadline(self.core.message_started(), limits.message_timeout)
        };
        timers
    }
}
