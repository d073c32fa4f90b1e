//! Dispatch: the machine's events handed to the application. A request
//! goes to the [`Handler`] with its content (or the answer its head's
//! check decided), a handshake's head to its check (D10), and every
//! answer back to the machine, kept for the access log until it leaves.
//! An answer that comes later is awaited here (std, mio) or handed out
//! to the runtime that awaits it (tokio).

use std::ops::ControlFlow;
use std::time::Instant;

use super::super::reply::failed;
use super::super::spool::{MemoryHeld, SpoolError};
use super::super::{Handled, Handler, HeadCheck, Incoming, Reply};
use super::streamed::Streamed;
use super::{Answer, CloseCause, Driver, Intake, PeerInput, Phase, Receiving, Taken};
use crate::machine::{Now, PeerError, RequestId, ServerEvent, UsageError};
use crate::message::{Method, Rejection, Request, Response, Status, StatusCode};

/// Whether `dispatch` answers requests itself or hands them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answering {
    /// Here: an answer that comes later is awaited on this thread (std,
    /// mio).
    Here,
    /// An answer that comes later is handed out to the runtime, which
    /// awaits it (tokio).
    HandOut,
}

/// A request whose answer comes later ([`Handled::Later`]), handed out by
/// [`Driver::dispatch_handing_out`] to the runtime that awaits it.
#[cfg_attr(not(any(feature = "tokio", feature = "mio")), allow(dead_code))]
pub(crate) struct Deferred {
    /// What the answer's record needs; the request itself is the handler's.
    exchange: Exchange,
    /// The content's count against the memory budget, until answered.
    _held: Option<MemoryHeld>,
    /// The answer.
    future: super::super::ReplyFuture,
}

#[cfg_attr(not(any(feature = "tokio", feature = "mio")), allow(dead_code))]
impl Deferred {
    /// The answer's future, for the runtime to await, and what the driver
    /// takes back with the answer ([`Driver::answer_later`]).
    pub(crate) fn into_future(self) -> (super::super::ReplyFuture, Pending) {
        let Deferred {
            exchange,
            _held,
            future,
        } = self;
        (future, Pending { exchange, _held })
    }
}

/// A request handed out whose answer the runtime awaits.
pub(crate) struct Pending {
    exchange: Exchange,
    /// The content's count against the memory budget, until answered.
    _held: Option<MemoryHeld>,
}

/// What the driver keeps of a request once its handler owns it.
struct Exchange {
    id: RequestId,
    method: Method,
    /// The resource, as the response echoes it (D12).
    resource: String,
    started: Instant,
}

impl Driver {
    /// Answers every pending event with `handler`, and reports each
    /// response to its access-log hook once it has wholly left, or once the
    /// connection ended before it could.
    ///
    /// An answer that comes later ([`Handled::Later`]) is awaited here, on
    /// this thread: a runtime that can await it instead (tokio) hands it
    /// out.
    pub fn dispatch<H: Handler + ?Sized>(&mut self, handler: &H) {
        let handed_out = self.dispatch_events(handler, Answering::Here);
        debug_assert!(handed_out.is_none(), "requests are answered here");
    }

    /// As [`dispatch`](Self::dispatch), but the first answer that comes
    /// later is handed out, for the runtime to await: give it with
    /// [`answer_later`](Self::answer_later) before stepping again. The
    /// events after it wait in the machine.
    #[cfg_attr(not(any(feature = "tokio", feature = "mio")), allow(dead_code))]
    pub(crate) fn dispatch_handing_out<H: Handler + ?Sized>(&mut self, handler: &H) -> Option<Deferred> {
        self.dispatch_events(handler, Answering::HandOut)
    }

    /// Sends the answer of a request
    /// [`dispatch_handing_out`](Self::dispatch_handing_out) handed out.
    #[cfg_attr(not(any(feature = "tokio", feature = "mio")), allow(dead_code))]
    pub(crate) fn answer_later(&mut self, pending: Pending, reply: Reply) {
        let span = self.span();
        let _entered = span.enter();
        let at = self.now();
        self.respond(pending.exchange, reply, at);
        self.send_content(at);
        self.turn.clock = None;
    }

    /// The peer left while the answer of a request handed out was
    /// awaited: the answer is dropped (an `async` handler cancelled), the
    /// request recorded as never answered (`503`, nothing written, not
    /// complete), and the connection closed.
    #[cfg_attr(not(any(feature = "tokio", feature = "mio")), allow(dead_code))]
    pub(crate) fn answer_abandoned(&mut self, pending: Pending) {
        self.end_unanswered(pending, StatusCode::SERVICE_UNAVAILABLE, CloseCause::PeerLeft);
    }

    /// The shutdown's drain deadline passed while the answer of a request
    /// handed out was awaited: the answer is dropped, the request recorded
    /// as `504` (the application had it and may still finish, D13;
    /// nothing written, not complete), and the connection closed.
    #[cfg(feature = "mio")]
    pub(crate) fn answer_cut_short(&mut self, pending: Pending) {
        self.end_unanswered(pending, StatusCode::GATEWAY_TIMEOUT, CloseCause::DrainDeadline);
    }

    #[cfg_attr(not(any(feature = "tokio", feature = "mio")), allow(dead_code))]
    fn end_unanswered(&mut self, pending: Pending, status: StatusCode, why: CloseCause) {
        let span = self.span();
        let _entered = span.enter();
        let Exchange {
            id,
            method,
            resource,
            started,
        } = pending.exchange;
        self.answers.push_back(Answer {
            id: Some(id),
            method: Some(method),
            status,
            resource,
            content_bytes: 0,
            started,
        });
        let _ = self.move_to_closed(why, None);
    }

    /// When a draining connection must be over; `None` when no shutdown
    /// began.
    #[cfg(feature = "mio")]
    pub(crate) fn drain_deadline(&self) -> Option<Instant> {
        match self.phase {
            Phase::Draining { until, .. } => Some(until),
            _ => None,
        }
    }

    /// Whether the peer's stream ended, or a readiness event said it is
    /// ending (EPOLLRDHUP).
    #[cfg(feature = "mio")]
    pub(crate) fn peer_input_ended(&self) -> bool {
        self.input != PeerInput::Open
    }

    /// Whether nothing of a response is on its way out: a byte written to
    /// the peer now falls between messages.
    #[cfg_attr(not(any(feature = "tokio", feature = "mio")), allow(dead_code))]
    pub(crate) fn between_messages(&self) -> bool {
        self.conn.pending_output().is_empty() && self.streaming.is_none()
    }

    /// [`dispatch`](Self::dispatch)'s work, each event of the machine in
    /// turn; with `Answering::HandOut`, stops at the first answer that
    /// comes later and returns it.
    fn dispatch_events<H: Handler + ?Sized>(
        &mut self,
        handler: &H,
        answering: Answering,
    ) -> Option<Deferred> {
        let span = self.span();
        let _entered = span.enter();
        if let Phase::Closed = self.phase {
            self.log_what_is_left(handler);
            return None;
        }
        // The turn's reading of the clock, and a new one after each
        // handler call: the machine's timers count seconds, and the date
        // header shows them.
        let mut at = self.turn.clock.unwrap_or_else(|| self.now());
        // A dispatch that only logs leaves the turn's reading to the next
        // step; one that did work (a handler, writing its answer out, a
        // spool) may have taken long enough for the stall timer to see it,
        // so the next step goes on from a reading taken after that work:
        // the one after the last handler (`fresh`) when nothing slow came
        // after it, or a new one.
        let mut busy = self.intake_due() || self.streams();
        let mut fresh = None;
        if let Intake::Deferred(inbox) = &mut self.intake
            && !inbox.is_empty()
        {
            self.conn.receive_data(inbox, at);
            inbox.clear();
        }
        if self.input == PeerInput::EndRead {
            self.input = PeerInput::Ended;
            self.conn.receive_eof(at);
        }
        let mut handed_out = None;
        while let Some(event) = self.conn.next_event(at) {
            if let ServerEvent::ResponseSent { id, bytes } = event {
                self.log_sent(handler, id, bytes, at.instant);
                continue;
            }
            busy = true;
            match event {
                ServerEvent::ContentHead { id, head } => {
                    // Decided before anything is stored (D19): content that
                    // is refused or unwanted whatever it holds is checked
                    // and dropped, never stored. The full request of a
                    // handshake the policy acknowledged comes here too
                    // (D10): no one was asked at its handshake.
                    if let Some(decided) = Receiving::decided(id, handler.check_head(&head, &self.info)) {
                        self.receiving = decided;
                    }
                    at = self.now();
                    fresh = Some(at);
                }
                ServerEvent::Content { id, data } => {
                    self.spool(id, &data);
                    fresh = None;
                }
                ServerEvent::ContentDiscarded { id } => {
                    self.drop_spool(id);
                    fresh = None;
                }
                ServerEvent::Request { id, request } => {
                    match self.answer_request(handler, id, request, answering, at) {
                        ControlFlow::Continue(answered) => {
                            at = answered;
                            fresh = self.answered_quickly().then_some(answered);
                        }
                        ControlFlow::Break(deferred) => {
                            handed_out = Some(deferred);
                            break;
                        }
                    }
                }
                ServerEvent::ContinueRequested { id, request } => {
                    at = self.check_handshake(handler, id, *request, at);
                    fresh = self.answered_quickly().then_some(at);
                }
                ServerEvent::PeerError(PeerError::Rejected {
                    id,
                    rejection,
                    closes,
                }) => self.note_rejection(id, rejection, closes, at),
                // The peer takes nothing: the machine dropped the output.
                ServerEvent::PeerError(PeerError::OutputStalled) => {
                    self.move_to_closing(CloseCause::Stalled);
                }
                // The peer left after a `100` without the full request:
                // nothing was written, so nothing to log. Closed: `step`
                // sees it.
                _ => {}
            }
        }
        if self.streams() {
            // Reading a streamed reply's content may take a while.
            self.send_content(at);
            fresh = None;
        }
        if busy {
            self.turn.clock = fresh;
        }
        handed_out
    }

    /// Once the connection is closed, nothing more is served: only the
    /// log is told what left and what was cut short.
    fn log_what_is_left<H: Handler + ?Sized>(&mut self, handler: &H) {
        let now = self.now();
        while let Some(event) = self.conn.next_event(now) {
            if let ServerEvent::ResponseSent { id, bytes } = event {
                self.log_sent(handler, id, bytes, now.instant);
            }
        }
        self.log_cut_short(handler, now.instant);
    }

    /// Hands complete request `id` to `handler` with its content (or
    /// answers it as its head's check or the spool decided), and sends the
    /// answer; the clock's reading after it. An answer that comes later
    /// is awaited here, or handed out (`Break`) when `answering` says so.
    fn answer_request<H: Handler + ?Sized>(
        &mut self,
        handler: &H,
        id: RequestId,
        mut request: Box<Request>,
        answering: Answering,
        at: Now,
    ) -> ControlFlow<Deferred, Now> {
        let exchange = Exchange {
            id,
            method: request.method,
            // Kept for the access record: the request itself is the
            // handler's.
            resource: self.echo_of(request.resource.as_str()),
            started: at.instant,
        };
        let reply = match self.take_upload(id, &mut request) {
            Ok(Taken::Refused(answer)) => (*answer).into(),
            Ok(Taken::Content(upload, held)) => {
                let incoming = Incoming::new(request, self.info).with_upload(upload);
                match answer(handler, incoming, &exchange) {
                    Handled::Now(reply) => reply,
                    Handled::Later(future) if answering == Answering::HandOut => {
                        return ControlFlow::Break(Deferred {
                            exchange,
                            _held: held,
                            future,
                        });
                    }
                    later => later.wait(),
                }
            }
            Err(error) => {
                match &error {
                    SpoolError::Full(_) | SpoolError::Evicted(_) => tracing::warn!(
                        reason = %error,
                        "the uploads spooled fill the server's budget; answering 503"
                    ),
                    SpoolError::Io(e) => {
                        tracing::error!(error = %e, "cannot spool the request's content; answering 500")
                    }
                }
                error.response().into()
            }
        };
        let at = self.now();
        self.respond(exchange, reply, at);
        ControlFlow::Continue(at)
    }

    /// Asks `handler` whether handshake `id` may send its content (D10):
    /// refused, it is answered now; otherwise the full request is awaited.
    /// The clock's reading after it.
    fn check_handshake<H: Handler + ?Sized>(
        &mut self,
        handler: &H,
        id: RequestId,
        request: Request,
        at: Now,
    ) -> Now {
        let started = at.instant;
        let decision = handler.check_head(&request, &self.info);
        let at = self.now();
        match decision {
            HeadCheck::Refused(response) => {
                let exchange = Exchange {
                    id,
                    method: request.method,
                    resource: self.echo_of(request.resource.as_str()),
                    started,
                };
                self.respond(exchange, (*response).into(), at);
            }
            wanted_or_not => {
                // The full request is now awaited (D10). It names the same
                // method and resource (or is 400), and is not asked about
                // again: its content goes as decided here, whatever headers
                // it changes; they reach the handler with the request.
                if let Some(decided) = Receiving::decided(id, wanted_or_not) {
                    self.receiving = decided;
                }
                let _ = self.conn.accept_continue(id, at);
            }
        }
        at
    }

    /// Every response the machine writes on its own (framing, limits,
    /// timeouts, a stream cut short) comes as a rejection carrying what it
    /// wrote: it is logged like an answer, and one that closes the
    /// connection says why it closes.
    fn note_rejection(&mut self, id: Option<RequestId>, rejection: Rejection, closes: bool, at: Now) {
        if let Some(id) = id {
            // What it streamed is discarded (D19).
            self.drop_spool(id);
        }
        tracing::debug!(
            status = rejection.status().as_u16(),
            closes,
            reason = %rejection.message,
            "request rejected"
        );
        if closes {
            self.move_to_closing(CloseCause::Rejected);
        }
        self.keep_rejection(id, rejection, at.instant);
    }

    /// Sends the application's answer to exchange `id`, and keeps it until
    /// it has left: its reader, if its content streams, and its record for
    /// the access log. An answer the machine refuses as a misuse (a `1xx`
    /// other than the acknowledgement, D12) would leave the exchange
    /// unanswered and stall every pipelined response behind it, so it is
    /// replaced by a `500`.
    fn respond(&mut self, exchange: Exchange, reply: Reply, at: Now) {
        let Exchange {
            id,
            method,
            resource,
            started,
        } = exchange;
        let (response, reader) = reply.into_parts();
        let (mut status, mut content_bytes) = (response.status.code, response.body.content().len() as u64);
        let sent = match reader {
            None => self.conn.send_response(id, response, at),
            Some(reader) => {
                content_bytes = 0;
                let sent = self.conn.send_response_head(id, response, at);
                if sent.is_ok() {
                    let streaming = self.streaming.get_or_insert_default();
                    streaming.replies.push_back(Streamed { id, reader });
                }
                sent
            }
        };
        match sent {
            // Closed: the connection is going away; nobody is left to answer.
            Ok(()) | Err(UsageError::Closed) => {}
            Err(misuse) => {
                let fallback = Response::new(Status::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("the server's application gave an answer that cannot be sent: {misuse}"),
                ));
                (status, content_bytes) = (fallback.status.code, 0);
                let _ = self.conn.send_response(id, fallback, at);
            }
        }
        self.answers.push_back(Answer {
            id: Some(id),
            method: Some(method),
            resource,
            status,
            content_bytes,
            started,
        });
    }

    /// Whether writing the last answer out was quick: a reading of the
    /// clock taken before it still stands after it (see
    /// `dispatch_events`). Escaping or compressing a large answer takes
    /// time of its own.
    fn answered_quickly(&self) -> bool {
        self.answers
            .back()
            .is_none_or(|answer| answer.content_bytes <= QUICK_ANSWER)
    }
}

/// The largest content whose writing out counts as no time: a few tens of
/// microseconds, against timers that count in hundreds of milliseconds.
const QUICK_ANSWER: u64 = 64 * 1024;

/// Hands `incoming` to the handler; a handler that panics gets its
/// request answered `500` instead of taking down the worker and every
/// connection on it. An answer that comes later is the runtime's to catch.
fn answer<H: Handler + ?Sized>(handler: &H, incoming: Incoming, exchange: &Exchange) -> Handled {
    let run = std::panic::AssertUnwindSafe(|| handler.respond(incoming));
    std::panic::catch_unwind(run).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(not a string)");
        tracing::error!(
            method = exchange.method.as_str(),
            resource = exchange.resource.as_str(),
            panic = why,
            "the handler panicked; answering 500"
        );
        failed().into()
    })
}
