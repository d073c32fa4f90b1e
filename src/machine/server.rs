//! The server role: requests in, responses out, strictly in request order
//! (D2), with the 100-continue handshake (D10), the machine's own error
//! answers (D1, D3, D5) and the bounds on what it owes (D3).
//!
//! Every exchange holds a slot in `slots`, in request order. A slot is
//! written out when it reaches the front and its answer is there; an error
//! the machine answers itself is a slot like any other, so a rejection of
//! request 3 goes out after the responses to requests 1 and 2. Where a
//! slot stands is its [`Exchange`], moved only through the table: the
//! handshake the application decides is the last slot in
//! `AwaitingContinue`, the handshake whose full request is awaited the last
//! slot in `SendingFullRequest`.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use super::core::{ContentOutcome, Core, Decoded, KEEP_BUFFERS, Lifecycle, Outbound, Timers, deadline, due};
use super::responses::{self, refusal};
use super::table::{Exchange, ExchangeState, Input, Role, TransitionError};
use super::{Acknowledged, ContinuePolicy, Now, PeerError, RequestId, ServerConfig, ServerEvent, UsageError};
use crate::message::decoder::Requests;
use crate::message::{Method, Rejection, Request, RequestContext, Response, WholeMessage};

/// One jsontp connection in the server role, without I/O.
///
/// See the [module documentation](super) for its states and a worked
/// example.
#[derive(Debug)]
pub struct ServerConnection {
    /// Shared by every connection of a server: an idle connection carries
    /// a pointer, not a copy.
    config: Arc<ServerConfig>,
    core: Core<ServerEvent>,
    /// Exchanges not yet written, in request order (D2).
    slots: VecDeque<Slot>,
    /// For each final response queued but not yet taken by the peer: its
    /// exchange and the output offset where it ends (D3).
    untaken: VecDeque<(RequestId, u64)>,
    /// Where the last response the peer took ends: the next one's bytes
    /// start there ([`ServerEvent::ResponseSent`]).
    sent_to: u64,
    /// The responses taken and not yet reported, with their bytes: a queue
    /// apart from the input's events, so that reports waiting to be taken
    /// never hold up reading the next request.
    sent: VecDeque<(RequestId, u64)>,
    /// The message whose content is being received (D19), once its head
    /// or its first piece came.
    receiving: Option<Receiving>,
    /// Nothing has changed since the input was last processed and the
    /// answers written ([`settle`](Self::settle)): asking for an event
    /// again need not run the input loop.
    settled: bool,
    /// The last written answer's copy of the resource string, emptied: the
    /// next exchange copies its own into it rather than allocating one.
    spare_echo: String,
}

/// The content of the message being received (D19): its exchange, and
/// where its pieces go, as its head decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Receiving {
    /// To the application, as [`ServerEvent::Content`].
    HandedOut(RequestId),
    /// Nowhere: the message is refused whatever its content holds (its
    /// head does not read, D5 levels 1 to 4, or names another method or
    /// resource than its handshake's, D10), or its body is ignored (the
    /// first request of a handshake, D10). The pieces are still decoded
    /// and checked, for D5's order (content past the limit is `413`), and
    /// dropped here, so nothing of them is stored.
    Dropped(RequestId),
}

impl Receiving {
    fn id(self) -> RequestId {
        match self {
            Receiving::HandedOut(id) | Receiving::Dropped(id) => id,
        }
    }
}

/// What a streamed message's head (D19) tells the application.
enum HeadFate {
    /// The head, then the pieces.
    Told(Box<Request>),
    /// The pieces, without a head: the application decided about the
    /// exchange at its handshake (D10).
    Decided,
    /// Nothing: see [`Receiving::Dropped`].
    Dropped,
}

/// A spare echo string longer than this is not kept.
const SPARE_ECHO: usize = 256;

/// One exchange in response order.
#[derive(Debug)]
struct Slot {
    id: RequestId,
    exchange: Exchange,
    /// The request's method, when it could be read: the full request of a
    /// handshake must repeat it (D10).
    method: Option<Method>,
    /// The request's resource string: echoed by every answer (D7, D12),
    /// and repeated by the full request of a handshake (D10).
    resource: String,
    /// A `100` to write before the final answer.
    interim: Option<Box<Response>>,
    /// When the `100` went into the output: the continue timer runs from
    /// there (D3, D10).
    continue_sent: Option<Instant>,
    /// The final answer, once given (the head of a streamed one until it
    /// is queued). Boxed, like the `100`: a slot moves through a queue, and
    /// a small one is cheap to move and to give back when idle.
    response: Option<Box<Response>>,
    /// A streamed answer's content (D19). Boxed for the same reason: its
    /// encoder's state is most of a slot, and most answers stream nothing.
    outbound: Option<Box<Outbound>>,
    /// The connection closes after this answer (D1, D3, D10).
    closes: bool,
}

impl Slot {
    fn new(id: RequestId, method: Option<Method>, resource: String) -> Slot {
        Slot {
            id,
            exchange: Exchange::new(),
            method,
            resource,
            interim: None,
            continue_sent: None,
            response: None,
            outbound: None,
            closes: false,
        }
    }
}

impl ServerConnection {
    /// A server connection; `now` starts the idle timer.
    pub fn new(config: ServerConfig, now: Now) -> ServerConnection {
        ServerConnection::with_shared_config(Arc::new(config), now)
    }

    /// A server connection whose configuration is shared with others, as
    /// a server's connections share one: each holds the `Arc`, not a copy.
    /// `now` starts the idle timer.
    pub fn with_shared_config(config: Arc<ServerConfig>, now: Now) -> ServerConnection {
        let core = Core::new(&config.limits, config.stream_content, now);
        ServerConnection {
            config,
            core,
            slots: VecDeque::new(),
            untaken: VecDeque::new(),
            sent_to: 0,
            sent: VecDeque::new(),
            receiving: None,
            settled: false,
            spare_echo: String::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Bytes received from the peer. Requests are handled one event at a
    /// time: the next complete message is read once the events of the last
    /// are taken ([`next_event`](Self::next_event)), as far as the limits on
    /// what is owed allow (D3); the outcome does not depend on how the bytes
    /// were split.
    ///
    /// Bytes after the peer's end of stream or after an error that closes
    /// the connection are ignored.
    pub fn receive_data(&mut self, data: &[u8], now: Now) {
        if self.core.receive(data) {
            self.settle(now);
        }
    }

    /// The peer closed its sending side. Complete messages already received
    /// are still answered (D1, D2); a message cut short is answered `400`,
    /// then the connection closes.
    pub fn receive_eof(&mut self, now: Now) {
        self.core.receive_eof();
        self.settle(now);
    }

    /// The next event, if any; reads the next buffered message when every
    /// event before it has been taken.
    pub fn next_event(&mut self, now: Now) -> Option<ServerEvent> {
        if let Some((id, bytes)) = self.sent.pop_front() {
            return Some(ServerEvent::ResponseSent { id, bytes });
        }
        if !self.has_event(now) {
            return None;
        }
        // Taking an event may let the next buffered message be read.
        self.settled = false;
        self.core.pop_event()
    }

    /// Whether [`next_event`](Self::next_event) has an event to give now,
    /// reading the next buffered message first as it would. The drive step
    /// asks this rather than holding the event itself.
    pub(crate) fn has_event(&mut self, now: Now) -> bool {
        if self.core.has_events() || !self.sent.is_empty() {
            return true;
        }
        if self.settled {
            #[cfg(debug_assertions)]
            self.check_settled(now);
            return false;
        }
        self.settle(now);
        self.core.has_events()
    }

    /// Answers exchange `id`. Responses go out in request order (D2),
    /// whatever order they are given in. The machine fills in `date` (from
    /// `now.wall`) and `language` (from the configuration) when the
    /// response leaves them out, and echoes the request's own `resource`
    /// string whatever the response carries (D7, D12).
    ///
    /// Answering an exchange whose handshake is being decided
    /// ([`ServerEvent::ContinueRequested`]) rejects the handshake: the
    /// response should be a `4xx`/`5xx` and the connection stays open (D10).
    pub fn send_response(&mut self, id: RequestId, response: Response, now: Now) -> Result<(), UsageError> {
        let result = self.answer(id, response, Input::FinalResponse, now).map(|_| ());
        self.settle(now);
        result
    }

    /// Accepts a 100-continue handshake the application was asked about
    /// ([`ServerEvent::ContinueRequested`]): the `100` goes out in turn
    /// (D2, D10).
    pub fn accept_continue(&mut self, id: RequestId, now: Now) -> Result<(), UsageError> {
        let result = self.accept(id, now);
        self.settle(now);
        result
    }

    /// Answers exchange `id` with a response whose content follows in
    /// pieces (D19): `response` is the head (status, headers, the body's
    /// encoding and other keys; its content is ignored). It goes out in turn (D2) like any
    /// answer, written with `body` last and `content` last in it; then give
    /// the content with [`send_content`](Self::send_content) as
    /// [`content_room`](Self::content_room) allows, and end it with
    /// [`end_content`](Self::end_content). The responses after it wait
    /// until it ends.
    pub fn send_response_head(
        &mut self,
        id: RequestId,
        response: Response,
        now: Now,
    ) -> Result<(), UsageError> {
        let encoding = response.body.encoding();
        let result = self.answer(id, response, Input::ResponseHead, now).map(|slot| {
            if let Some(slot) = slot {
                slot.outbound = Some(Box::new(Outbound::new(encoding)));
            }
        });
        self.settle(now);
        result
    }

    /// How many content bytes exchange `id` takes now
    /// ([`send_content`](Self::send_content)): none until its head is being
    /// written, then as many as keep the output owed within bounds (D3).
    /// Zero for an exchange that is not streaming.
    pub fn content_room(&self, id: RequestId) -> usize {
        match self.slots.front() {
            Some(front)
                if front.id == id
                    && front
                        .outbound
                        .as_ref()
                        .is_some_and(|outbound| outbound.takes_content()) =>
            {
                self.core.content_room()
            }
            _ => 0,
        }
    }

    /// The next piece of exchange `id`'s content, encoded as its head's
    /// `body.encoding` says, incrementally (base64 and compression for
    /// `gzip`, `deflate`, `br`). Only once [`content_room`](Self::content_room)
    /// has been above zero ([`UsageError::OutOfTurn`] before); more than it
    /// is taken but grows the output owed. Identity content that is not
    /// UTF-8 is [`UsageError::NotText`], and the connection closes: the
    /// message cannot be finished.
    pub fn send_content(&mut self, id: RequestId, data: &[u8], now: Now) -> Result<(), UsageError> {
        let Some(front) = self.slots.front_mut().filter(|slot| slot.id == id) else {
            return Err(self.not_streaming(id));
        };
        let Some(outbound) = front.outbound.as_mut() else {
            return Err(UsageError::NotStreaming(id));
        };
        let result = self.core.queue_content(id, outbound, data, now);
        self.settled = false;
        if result == Err(UsageError::NotText(id)) {
            self.abort_content(id, now);
        }
        result
    }

    /// Ends exchange `id`'s content: the response is complete, and the
    /// responses after it may go out.
    pub fn end_content(&mut self, id: RequestId, now: Now) -> Result<(), UsageError> {
        let Some(slot) = self.slots.iter_mut().find(|slot| slot.id == id) else {
            return Err(self.not_streaming(id));
        };
        match &mut slot.outbound {
            Some(outbound) if !outbound.ended => outbound.ended = true,
            _ => return Err(UsageError::NotStreaming(id)),
        }
        self.settle(now);
        Ok(())
    }

    /// The content of exchange `id` cannot be finished (its source failed):
    /// what is queued still goes out, then the connection closes, so that
    /// the peer sees a message cut short rather than a wrong one (D1).
    pub fn abort_content(&mut self, id: RequestId, now: Now) {
        if !self
            .slots
            .iter()
            .any(|slot| slot.id == id && slot.outbound.is_some())
        {
            return;
        }
        // Nothing more can follow the message cut short.
        self.slots.clear();
        self.core.close();
        self.settle(now);
    }

    /// The error for an exchange with no slot.
    fn not_streaming(&self, id: RequestId) -> UsageError {
        if self.core.is_closed() {
            UsageError::Closed
        } else {
            UsageError::NotStreaming(id)
        }
    }

    /// The first piece of the bytes waiting to be written to the peer
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

    /// Whether what [`pending_output_vectored`](Self::pending_output_vectored)
    /// gives is followed at once by a prepared body that an adapter sends
    /// from its copy ([`pending_output_copy`](Self::pending_output_copy)
    /// then gives it): a transport can hold those bytes back to leave
    /// with it (`MSG_MORE` on a TCP socket) rather than as a small packet
    /// of their own.
    pub fn pending_output_copy_follows(&self) -> bool {
        self.core.output_copy_follows()
    }

    /// When the pending output starts with a large prepared body that an
    /// adapter keeps a copy of as well (`Body::add_sendfile_copy`, Linux:
    /// a sealed file): the copy, and where those bytes lie in it. A
    /// transport that can send from the copy sends them from there; any
    /// other writes [`pending_output_vectored`](Self::pending_output_vectored),
    /// which gives the same bytes from memory. Either way, mark what went
    /// with [`consume_output`](Self::consume_output).
    pub fn pending_output_copy(&self) -> Option<crate::machine::OutputCopy<'_>> {
        self.core.pending_output_copy()
    }

    /// Marks `n` bytes of [`pending_output`](Self::pending_output) as written
    /// (more than are pending is clamped). Unless the caller reports what
    /// its transport tells ([`transport_acknowledged`](Self::transport_acknowledged)),
    /// any byte written counts as taken by the peer and restarts the stall
    /// timer (D3). Responses written no longer count against the limits on
    /// what is owed (D3), so reading may resume.
    pub fn consume_output(&mut self, n: usize, now: Now) {
        if self.core.consume_output(n, now) == 0 {
            return;
        }
        let written = self.core.written();
        while let Some(&(id, end)) = self.untaken.front().filter(|&&(_, end)| end <= written) {
            self.untaken.pop_front();
            self.sent.push_back((id, end - self.sent_to));
            self.sent_to = end;
        }
        if self.is_quiet() {
            self.core.set_idle_since(now);
        }
        self.settle(now);
    }

    /// Tells the machine what the transport says of the bytes written to
    /// it ([`consume_output`](Self::consume_output)): how many the peer has
    /// acknowledged, in the transport's own units (a TLS session's
    /// ciphertext), and whether it holds more. A buffer that takes a write
    /// is not the peer reading (D3: "no byte of it read"), so from the
    /// first call on the stall timer restarts only when the acknowledged
    /// count grows, and runs while output is pending or the transport
    /// holds some. While it runs, [`poll_timeout`](Self::poll_timeout)
    /// also gives the moments to ask the transport again (a sixty-fourth
    /// of the stall timeout apart): call this before
    /// [`handle_timeout`](Self::handle_timeout), so that what the peer took
    /// meanwhile counts from then, not from the timeout. When the timer
    /// runs out with only the transport's bytes left, the connection
    /// closes as stalled all the same ([`PeerError::OutputStalled`]). Call
    /// it after writes that fall short or block and at every due timer; a
    /// caller that never calls it keeps the rule of `consume_output`.
    pub fn transport_acknowledged(&mut self, told: Acknowledged, now: Now) {
        self.core.transport_acknowledged(told, now);
    }

    /// Bytes of output the peer has taken since the connection opened (the
    /// sum of every [`consume_output`](Self::consume_output)).
    pub fn output_written(&self) -> u64 {
        self.core.written()
    }

    /// Bytes of memory the connection's input and output buffers hold
    /// (capacity, not content). An idle connection (nothing received
    /// unhandled, nothing left to write) keeps what a small message needs
    /// for a few milliseconds, for a busy peer's next request, and then
    /// holds none, whatever it carried before: that moment is one of the
    /// deadlines [`poll_timeout`](Self::poll_timeout) gives. The written
    /// part of the output is given back as it grows.
    pub fn buffered_capacity(&self) -> usize {
        self.core.buffered_capacity()
    }

    /// Whether the machine wants more input now: false while
    /// `max_pipelined` responses are owed or more than `max_output_owed`
    /// bytes are queued beyond the response being written (D3), while the
    /// application decides a handshake, after the peer's end of stream, and
    /// once the connection is closing.
    pub fn wants_read(&self) -> bool {
        self.core.lifecycle() == Lifecycle::Open && self.ready_for_message() && !self.core.backlogged()
    }

    /// When the next timer is due, if one runs.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers().earliest()
    }

    /// Tells the machine that time has passed: acts on the timers due at
    /// `now` (D3).
    pub fn handle_timeout(&mut self, now: Now) {
        let timers = self.timers();
        if due(timers.give_back, now) {
            self.give_back_memory();
        }
        if due(timers.stall, now) && self.core.stall_timed_out(self.config.limits.stall_timeout, now) {
            // Nothing more can be written: nothing is owed any more.
            self.slots.clear();
            self.untaken.clear();
            self.core.close_stalled();
        } else if due(timers.continue_wait, now) {
            self.continue_timeout(now);
        } else if due(timers.message, now) && self.core.is_discarding() {
            // The message was answered when it was refused (D3); its end
            // did not come in time. No second answer (D1, D5).
            self.core.stop_input();
        } else if due(timers.message, now) {
            let limits = &self.config.limits;
            let rejection = if self.core.is_streaming() {
                refusal::content_too_slow(self.core.streamed_shortfall(limits, now))
            } else {
                refusal::timed_out("the message", limits.message_timeout.as_secs(), "")
            };
            let target = self.message_target();
            self.reject(target, rejection, true, now);
        } else if due(timers.idle, now) {
            // D3: close without a response.
            self.core.close();
        }
        self.settle(now);
    }

    /// Whether the connection is finished: write out
    /// [`pending_output`](Self::pending_output), then close the socket.
    pub fn is_closed(&self) -> bool {
        self.core.is_closed()
    }

    /// Whether the connection only waits for the full request of an
    /// accepted handshake (D10): the `100` is queued or written and no byte
    /// of the full request has arrived. That wait may last the continue
    /// timeout (300 s by default, D3), so a server shutting down may close
    /// such a connection rather than wait.
    pub fn awaits_full_request(&self) -> bool {
        self.awaited().is_some() && !self.core.holds_input()
    }

    /// Where exchange `id` stands in the [transition table](super::table),
    /// as h11 tells a connection's states: `AwaitingResponse` once its
    /// request is read, `AwaitingContinue` or `SendingFullRequest` during a
    /// handshake (D10), `SendingResponseContent` while a streamed answer
    /// goes out (D19), `Done` for an answer given and waiting its turn
    /// (D2). `None` once its final response is wholly queued, and for an
    /// id this connection never gave.
    pub fn exchange_state(&self, id: RequestId) -> Option<ExchangeState> {
        self.slots
            .iter()
            .find(|slot| slot.id == id)
            .map(|slot| slot.exchange.state())
    }

    /// Whether nothing is under way: no part of a request received, no
    /// exchange open (read, decided or answered but not written), no event
    /// waiting to be taken and no output pending. A server shutting down
    /// gracefully may close such a connection without cutting an exchange
    /// short.
    pub fn is_idle(&self) -> bool {
        self.slots.is_empty()
            && self.core.pending_output().is_empty()
            && !self.core.holds_input()
            && !self.core.has_events()
            && self.sent.is_empty()
    }

    // -- reading -----------------------------------------------------------

    /// Whether the next message may be read now: not while the application
    /// decides a handshake, nor while too much is owed (D3) unless the
    /// message is the full request of a handshake, which owes nothing new.
    fn ready_for_message(&self) -> bool {
        match self.slots.back().map(|slot| slot.exchange.state()) {
            Some(ExchangeState::AwaitingContinue) => false,
            Some(ExchangeState::SendingFullRequest) => true,
            _ => {
                self.slots.len() + self.untaken.len() < self.config.max_pipelined
                    && self.output_beyond_front() <= self.config.max_output_owed
            }
        }
    }

    /// Bytes queued after the end of the response being written (D3).
    fn output_beyond_front(&self) -> usize {
        let beyond = self
            .untaken
            .front()
            .map_or(0, |&(_, end)| self.core.queued().saturating_sub(end));
        usize::try_from(beyond).unwrap_or(usize::MAX)
    }

    /// The handshake whose full request is awaited: the last slot, after
    /// its `100` (D10).
    fn awaited(&self) -> Option<&Slot> {
        self.slots
            .back()
            .filter(|slot| slot.exchange.state() == ExchangeState::SendingFullRequest)
    }

    /// Frames and handles messages while the server may read. One event at
    /// a time: the next message is read once the caller has taken the
    /// events of the last, so that its answer is queued first and the
    /// bound on output owed holds (D3) however many requests one read
    /// brought.
    fn process_input(&mut self, now: Now) {
        loop {
            // Answers given are queued first: they count against the
            // bound on output owed (D3).
            self.flush(now);
            if self.core.has_events() || !self.ready_for_message() {
                return;
            }
            let awaited = self.awaited().map(|slot| slot.id);
            let requests = Requests {
                context: self.context(),
                limits: &self.config.limits.message,
            };
            match self.core.next_message(&requests, &self.config.limits, now) {
                Decoded::Partial => return,
                Decoded::Message { read, content } => self.on_message(read, content.as_ref(), now),
                Decoded::ContentHead { head } => {
                    let fate = self.content_head(head);
                    let id = awaited.unwrap_or_else(|| self.core.fresh_id());
                    self.receiving = Some(match fate {
                        HeadFate::Dropped => Receiving::Dropped(id),
                        HeadFate::Told(head) => {
                            self.core.push_event(ServerEvent::ContentHead { id, head });
                            Receiving::HandedOut(id)
                        }
                        HeadFate::Decided => Receiving::HandedOut(id),
                    });
                }
                Decoded::Content(data) => match self.receiving_of_piece(awaited) {
                    Receiving::HandedOut(id) => self.core.push_event(ServerEvent::Content { id, data }),
                    // Checked by the decoder; no one takes it (D19).
                    Receiving::Dropped(_) => {}
                },
                Decoded::ContentTooLarge { limit } => {
                    let target = self.message_target();
                    self.reject(target, refusal::content_too_large(limit), true, now);
                }
                Decoded::End { cut_short: true } => {
                    // D1: `400` if the peer can still read, then the close.
                    let target = self.message_target();
                    self.reject(target, refusal::incomplete(), true, now);
                }
                Decoded::End { cut_short: false } => {
                    if awaited.is_some() {
                        // The peer left after the `100` without the full
                        // request: nothing to answer, nothing written.
                        self.slots.pop_back();
                        self.core
                            .push_event(ServerEvent::PeerError(PeerError::UnexpectedEof));
                    }
                }
                Decoded::Invalid { byte, fault } => {
                    let target = self.message_target();
                    self.reject(target, refusal::framing(byte, fault), true, now);
                }
                Decoded::TooDeep => {
                    // D3: answered at once; the rest of the message is
                    // dropped and the connection goes on.
                    let limit = self.config.limits.message.max_depth;
                    let target = self.message_target();
                    self.reject(target, refusal::too_deep(limit), false, now);
                }
                // The refused message cannot end cleanly: it had its one
                // answer (D1, D5); the connection closes once that is out.
                Decoded::Abandoned => {}
                Decoded::TooLarge => {
                    let limit = self.config.limits.message.max_message_bytes;
                    let target = self.message_target();
                    self.reject(target, refusal::too_large(limit), true, now);
                }
            }
        }
    }

    /// The content a piece belongs to (D19): as its head decided, or, for
    /// a piece with no head before it, handed out under the awaited
    /// handshake's exchange or a fresh one.
    fn receiving_of_piece(&mut self, awaited: Option<RequestId>) -> Receiving {
        match self.receiving {
            Some(receiving) => receiving,
            None => {
                let id = awaited.unwrap_or_else(|| self.core.fresh_id());
                let receiving = Receiving::HandedOut(id);
                self.receiving = Some(receiving);
                receiving
            }
        }
    }

    /// What the head of a streamed message (D19), read by the decoder in
    /// the message's context as the whole message will be, tells the
    /// application: the head, when the whole message would be handed to
    /// it; nothing, and its content dropped, when the message is refused
    /// whatever its content (a fault, D5 levels 1 to 4; a full request
    /// naming another method or resource than its handshake's, D10) or
    /// its body ignored (the first request of a handshake, D10).
    ///
    /// The full request of a handshake has a head only when the policy
    /// acknowledged the handshake without asking (`AutoAccept`): the
    /// application then meets the exchange here first, as any streamed
    /// request. Under `Ask` it decided from the first request
    /// ([`ServerEvent::ContinueRequested`]), and is not asked twice: the
    /// full request's own headers reach it with the request (D10).
    fn content_head(&self, head: Result<Box<Request>, Rejection>) -> HeadFate {
        let Ok(head) = head else {
            return HeadFate::Dropped;
        };
        let Some(awaited) = self.awaited() else {
            return if head.headers.expect_continue() {
                HeadFate::Dropped
            } else {
                HeadFate::Told(head)
            };
        };
        let repeats = awaited.method == Some(head.method) && awaited.resource == head.resource.as_str();
        match self.config.continue_policy {
            _ if !repeats => HeadFate::Dropped,
            ContinuePolicy::AutoAccept => HeadFate::Told(head),
            // Only `Ask` acknowledges after asking; `Refuse` never does.
            ContinuePolicy::Ask | ContinuePolicy::Refuse => HeadFate::Decided,
        }
    }

    /// The exchange the message being received belongs to, if it has one
    /// yet: the awaited handshake's, or the one its first content piece
    /// was numbered with (D19).
    fn message_target(&mut self) -> Option<RequestId> {
        self.receiving
            .take()
            .map(Receiving::id)
            .or_else(|| self.awaited().map(|slot| slot.id))
    }

    /// What the next message is to its exchange: the full request of the
    /// awaited handshake, or a fresh one.
    fn context(&self) -> RequestContext {
        match self.awaited() {
            Some(_) => RequestContext::AfterContinue,
            None => RequestContext::Fresh,
        }
    }

    /// Handles one message, parsed: the full request of the awaited
    /// handshake, or a new exchange. `content`: how its streamed content
    /// ended, if it streamed (D19).
    fn on_message(
        &mut self,
        parsed: Result<Box<Request>, Rejection>,
        content: Option<&ContentOutcome>,
        now: Now,
    ) {
        let awaited = self.awaited().map(|slot| slot.id);
        let receiving = self.receiving.take();
        let streamed = receiving.map(Receiving::id);
        let request = match parsed {
            Ok(request) => request,
            Err(rejection) => {
                self.reject(awaited.or(streamed), rejection, false, now);
                return;
            }
        };
        // D5 level 4, after everything the envelope could be refused for:
        // streamed content that did not decode (D19).
        if let Some(ContentOutcome::Corrupt { encoding, why, .. }) = content {
            let rejection = refusal::content_corrupt(*encoding, why, request.resource.as_str());
            self.reject(awaited.or(streamed), rejection, false, now);
            return;
        }
        let input = if request.headers.expect_continue() {
            Input::RequestExpectingContinue
        } else {
            Input::Request
        };
        if let Some(id) = awaited {
            let mismatch = self
                .awaited()
                .filter(|slot| {
                    slot.method != Some(request.method) || slot.resource != request.resource.as_str()
                })
                .map(|slot| refusal::full_request_mismatch(&slot.resource));
            if let Some(rejection) = mismatch {
                // D10: the exchange ends; the connection stays open.
                self.reject(Some(id), rejection, false, now);
                return;
            }
            // The full request: its `expect` is ignored (D10).
            if let Some(slot) = self.slots.back_mut()
                && self
                    .core
                    .advance(&mut slot.exchange, Role::Client, input)
                    .is_some()
            {
                self.core.push_event(ServerEvent::Request { id, request });
            }
            return;
        }
        let id = streamed.unwrap_or_else(|| self.core.fresh_id());
        let mut echo = std::mem::take(&mut self.spare_echo);
        echo.push_str(request.resource.as_str());
        let mut slot = Slot::new(id, Some(request.method), echo);
        match self.core.advance(&mut slot.exchange, Role::Client, input) {
            Some(ExchangeState::AwaitingContinue) => {
                if let Some(Receiving::HandedOut(_)) = receiving {
                    // D10: the first request's body is ignored; the full
                    // request streams its own (D19).
                    self.core.push_event(ServerEvent::ContentDiscarded { id });
                }
            }
            Some(_) => {
                self.slots.push_back(slot);
                self.core.push_event(ServerEvent::Request { id, request });
                return;
            }
            None => return,
        }
        match self.config.continue_policy {
            ContinuePolicy::AutoAccept => {
                if self
                    .core
                    .advance(&mut slot.exchange, Role::Server, Input::Continue)
                    .is_some()
                {
                    slot.interim = Some(Box::new(responses::continue_ack(
                        &slot.resource,
                        now,
                        self.config.language,
                    )));
                    self.slots.push_back(slot);
                }
            }
            ContinuePolicy::Ask => {
                self.slots.push_back(slot);
                self.core
                    .push_event(ServerEvent::ContinueRequested { id, request });
            }
            ContinuePolicy::Refuse => {
                let rejection = refusal::continue_refused(&slot.resource);
                self.slots.push_back(slot);
                self.reject(Some(id), rejection, true, now);
            }
        }
    }

    /// Answers a refused message: the exchange `target` (whose request the
    /// peer sent, or began), or a new one. `closes` stops reading. Every
    /// response the machine writes on its own goes through here, and is
    /// reported as [`PeerError::Rejected`] with the status and echo it
    /// carries, so that adapters can log it without knowing the protocol.
    fn reject(&mut self, target: Option<RequestId>, rejection: Rejection, closes: bool, now: Now) {
        let id = target.unwrap_or_else(|| self.core.fresh_id());
        if !self.slots.iter().any(|slot| slot.id == id) {
            self.slots.push_back(Slot::new(id, None, String::new()));
        }
        let response = responses::rejection(&rejection, now, self.config.language);
        if let Some(slot) = self.slots.iter_mut().find(|slot| slot.id == id) {
            // The refused message is the exchange's request (a bad one),
            // unless the exchange has its request already.
            let received = match slot.exchange.state() {
                ExchangeState::Idle | ExchangeState::SendingFullRequest => self
                    .core
                    .advance(&mut slot.exchange, Role::Client, Input::Request)
                    .is_some(),
                _ => true,
            };
            if received
                && self
                    .core
                    .advance(&mut slot.exchange, Role::Server, Input::FinalResponse)
                    .is_some()
            {
                slot.response = Some(Box::new(response));
                slot.closes = closes;
            }
        }
        if closes {
            self.core.stop_input();
        }
        self.core.push_event(ServerEvent::PeerError(PeerError::Rejected {
            id: Some(id),
            rejection,
            closes,
        }));
    }

    /// D3, D10: the full request did not come in time after the `100`.
    fn continue_timeout(&mut self, now: Now) {
        let Some(slot) = self
            .slots
            .back_mut()
            .filter(|slot| slot.exchange.state() == ExchangeState::SendingFullRequest)
        else {
            return;
        };
        let id = slot.id;
        let secs = self.config.continue_timeout.as_secs();
        let rejection = refusal::timed_out("the full request after 100 Continue", secs, &slot.resource);
        if self
            .core
            .advance(&mut slot.exchange, Role::Server, Input::FullRequestWaitExpired)
            .is_some()
        {
            self.reject(Some(id), rejection, true, now);
        }
    }

    // -- answering ---------------------------------------------------------

    /// Gives exchange `id` its answer, whole (`FinalResponse`) or the head
    /// of a streamed one (`ResponseHead`, D19): its slot keeps it until it
    /// reaches the front, or `None` when a whole answer was at the front
    /// and went straight into the output.
    fn answer(
        &mut self,
        id: RequestId,
        mut response: Response,
        input: Input,
        now: Now,
    ) -> Result<Option<&mut Slot>, UsageError> {
        if response.status.code.is_informational() {
            // D12: only the acknowledgement, through `accept_continue`.
            return Err(UsageError::InformationalResponse);
        }
        let closed = self.core.is_closed();
        let Some(at) = self.slots.iter().position(|slot| slot.id == id) else {
            return Err(if closed {
                UsageError::Closed
            } else {
                UsageError::UnknownRequest(id)
            });
        };
        let slot = &mut self.slots[at];
        match slot.exchange.apply(Role::Server, input) {
            Ok(_) => {}
            Err(TransitionError::NotNow {
                state: ExchangeState::Done,
                ..
            }) => return Err(UsageError::UnknownRequest(id)),
            Err(_) => return Err(UsageError::OutOfTurn(id)),
        }
        responses::fill_defaults(&mut response, now, self.config.language);
        if at == 0 && input == Input::FinalResponse && slot.interim.is_none() {
            // Nothing is owed before it (D2): written now, where `flush`
            // would write it next, without a stay in the slot, which gives
            // up its copy of the resource string for the echo (D7, D12).
            response.resource = std::mem::take(&mut slot.resource);
            let closes = slot.closes;
            self.slots.pop_front();
            self.write_final(id, &response, closes, now);
            if response.resource.capacity() <= SPARE_ECHO {
                response.resource.clear();
                self.spare_echo = response.resource;
            }
            return Ok(None);
        }
        // D7, D12: the echo is the request's own string, whatever the
        // application put there.
        response.resource.clone_from(&slot.resource);
        let slot = &mut self.slots[at];
        slot.response = Some(Box::new(response));
        Ok(Some(slot))
    }

    fn accept(&mut self, id: RequestId, now: Now) -> Result<(), UsageError> {
        let closed = self.core.is_closed();
        let Some(slot) = self.slots.iter_mut().find(|slot| slot.id == id) else {
            return Err(if closed {
                UsageError::Closed
            } else {
                UsageError::NotAwaitingContinue(id)
            });
        };
        slot.exchange
            .apply(Role::Server, Input::Continue)
            .map_err(|_| UsageError::NotAwaitingContinue(id))?;
        slot.interim = Some(Box::new(responses::continue_ack(
            &slot.resource,
            now,
            self.config.language,
        )));
        Ok(())
    }

    /// Runs the input loop and the bookkeeping after it: every public call
    /// that changes the connection ends here, so what it made possible
    /// (a message read, an answer written, memory given back) happens
    /// before it returns.
    fn settle(&mut self, now: Now) {
        self.process_input(now);
        self.after_call(now);
        self.settled = true;
    }

    /// Test builds check the claim `settled` makes: running the input loop
    /// again changes nothing a caller can see. A call that changed the
    /// connection without settling it would fail here rather than leave a
    /// message unread (a connection that hangs).
    #[cfg(debug_assertions)]
    fn check_settled(&mut self, now: Now) {
        let seen = |conn: &ServerConnection| {
            (
                conn.core.has_events(),
                conn.core.pending_output().len(),
                conn.core.queued(),
                conn.slots.len(),
                conn.wants_read(),
                conn.core.is_closed(),
                conn.poll_timeout(),
            )
        };
        let before = seen(self);
        self.settle(now);
        debug_assert_eq!(before, seen(self), "a change to the connection was not settled");
    }

    // -- writing -----------------------------------------------------------

    /// Bookkeeping after every call: write out what has reached the front,
    /// finish once input has stopped and nothing is owed, give back memory.
    fn after_call(&mut self, now: Now) {
        self.flush(now);
        if self.core.lifecycle() == Lifecycle::InputStopped && self.slots.is_empty() {
            self.core.close();
        }
        // What is kept goes once the connection has been quiet a while
        // (the give-back timer).
        self.core.trim_buffers();
    }

    /// Whether buffers or slots hold memory that a quiet connection gives
    /// back: only what [`give_back_memory`](Self::give_back_memory) does
    /// free, so that a give-back deadline, once acted on, is gone.
    fn holds_memory(&self) -> bool {
        self.core.holds_spare_buffers()
            || (self.slots.is_empty() && self.slots.capacity() > 0)
            || (self.untaken.is_empty() && self.untaken.capacity() > 0)
            || (self.sent.is_empty() && self.sent.capacity() > 0)
            || self.spare_echo.capacity() > 0
    }

    /// Gives back what a quiet connection kept for its next request:
    /// thousands of idle keep-alive connections cost their fixed state only.
    fn give_back_memory(&mut self) {
        self.core.release_buffers();
        self.spare_echo = String::new();
        if self.slots.is_empty() {
            // Slots are a few hundred bytes each: an idle connection keeps none.
            self.slots = VecDeque::new();
        }
        // Each of these two queues is an allocation of its own, a tenth of
        // the budget of an idle connection.
        if self.untaken.is_empty() {
            self.untaken = VecDeque::new();
        }
        if self.sent.is_empty() {
            self.sent = VecDeque::new();
        }
    }

    /// Writes out every answer that has reached the front, in order (D2).
    #[inline]
    fn flush(&mut self, now: Now) {
        // Most calls find nothing to write (no request, or its answer not
        // given yet): said here, without entering the writing below.
        let ready =
            |front: &Slot| front.interim.is_some() || front.response.is_some() || front.outbound.is_some();
        if self.slots.front().is_some_and(ready) {
            self.flush_front(now);
        }
    }

    /// [`flush`](Self::flush) once the front has something to write.
    fn flush_front(&mut self, now: Now) {
        while let Some(front) = self.slots.front_mut() {
            if let Some(ack) = front.interim.take() {
                self.core.queue_output(now, |out| ack.write_to(out));
                // D3, D10: the wait for the full request starts now that
                // the client can see the 100.
                front.continue_sent = Some(now.instant);
                continue;
            }
            if let Some(outbound) = &mut front.outbound {
                // D19: the head, the content as it is given, then the end;
                // what follows waits until then (D2).
                if let Some(head) = front.response.take() {
                    self.core.queue_head(outbound, now, |out| head.write_head(out));
                }
                if !outbound.ended {
                    return;
                }
                let Ok(end) = self.core.queue_content_end(outbound, now) else {
                    // Identity content ended inside a UTF-8 sequence: the
                    // message cannot be finished; the peer sees it cut
                    // short (D1).
                    self.slots.clear();
                    self.core.close();
                    return;
                };
                let (id, mut exchange) = (front.id, front.exchange);
                self.slots.pop_front();
                self.untaken.push_back((id, end));
                self.core
                    .advance(&mut exchange, Role::Server, Input::ResponseContentEnd);
                continue;
            }
            let Some(response) = front.response.take() else {
                return;
            };
            let (id, closes) = (front.id, front.closes);
            self.slots.pop_front();
            // One that closes empties the queue, which ends the loop.
            self.write_final(id, &response, closes, now);
        }
    }

    /// Writes the whole final answer of the exchange just taken from the
    /// front.
    fn write_final(&mut self, id: RequestId, response: &Response, closes: bool, now: Now) {
        let end = self.core.queue_message(now, response);
        self.untaken.push_back((id, end));
        if closes {
            // Nothing follows the error that closes (D1, D3, D10).
            self.slots.clear();
        }
    }

    // -- timers ------------------------------------------------------------

    /// Nothing under way and nothing owed: the idle timer runs (D3).
    fn is_quiet(&self) -> bool {
        self.slots.is_empty() && self.untaken.is_empty() && !self.core.holds_input()
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
        // Asked only where a message is under way: a quiet connection's
        // timers, asked at every step, skip it.
        let paused = || !self.ready_for_message() || self.core.backlogged();
        if self.core.is_streaming() {
            // D19: a streamed message, the full request of a handshake
            // too, is held to its gap and its average rate instead. While
            // reading is paused the delay is ours: no timer runs.
            if !paused() {
                timers.message = self.core.streamed_deadline(limits);
            }
        } else if let Some(slot) = self.awaited() {
            // D3, D10: the continue timer replaces the message timer for
            // the full request, and runs only once the 100 is out; before,
            // nothing runs (the delay is ours).
            timers.continue_wait = deadline(slot.continue_sent, self.config.continue_timeout);
        } else if let Some(started) = self.core.message_started() {
            // While reading is paused the delay is ours: no timer runs.
            if !paused() {
                timers.message = deadline(Some(started), limits.message_timeout);
            }
        } else if self.is_quiet() {
            let since = Some(self.core.idle_since());
            timers.idle = deadline(since, self.config.idle_timeout);
            if self.holds_memory() {
                timers.give_back = deadline(since, KEEP_BUFFERS);
            }
        }
        timers
    }
}

#[cfg(test)]
mod tests {
    /// A slot moves into and out of the queue once a request: what only a
    /// streamed or acknowledged answer uses is boxed, so that the move
    /// stays a few words.
    #[test]
    fn a_slot_is_small() {
        let size = std::mem::size_of::<super::Slot>();
        assert!(size <= 96, "a Slot is {size} bytes");
    }
}
