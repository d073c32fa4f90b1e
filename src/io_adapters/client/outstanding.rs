//! The bookkeeping of one call of a client (`send`, `send_all`): which
//! exchanges it waits for, their outcomes, how far each got (D13), and its
//! clocks. Shared by both clients.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{Answer, ClientError, ClientOptions, Progress, Sent, Timeout};
use crate::machine::{ClientEvent, PeerError, RequestId};

/// The exchanges a call waits for, and their outcomes as the machine's
/// events arrive. Pure bookkeeping, no protocol logic.
pub(crate) struct Outstanding {
    slots: VecDeque<Slot>,
    /// The most streamed content gathered for one response in memory.
    content_limit: usize,
    /// Bytes of output the transport has taken on this connection, as of
    /// the last [`track`](Self::track).
    written: u64,
    /// Slots before this one need no more tracking of their requests:
    /// written whole, answered, or never queued.
    tracked: usize,
    /// Where the bytes last read belong.
    heard: Heard,
}

/// Where the bytes last read belong (D13: whether an answer began).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Heard {
    /// To the exchanges already marked.
    Placed,
    /// Perhaps also to each exchange that becomes the oldest while the
    /// machine gives their events: the read may have ended one answer and
    /// begun the next.
    Unplaced,
}

/// What the machine has of a request, as [`Outstanding::track`] asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Queued {
    /// None of it yet.
    Nothing,
    /// Part of it (a handshake waiting for its `100`, content still
    /// streaming).
    Part,
    /// All of it (or the exchange is over).
    All,
}

struct Slot {
    /// `None` for a request the machine did not take.
    id: Option<RequestId>,
    continued: bool,
    result: Option<Result<Answer, ClientError>>,
    /// Streamed content gathered for the response (D19).
    content: Vec<u8>,
    /// How far it got: `request` is [`Sent::Whole`] once known, else
    /// [`Sent::Nothing`] and told from `from` when it fails.
    progress: Progress,
    /// Where the request's first byte is in the output, at the least.
    from: u64,
}

impl Slot {
    /// How far it got, with `written` bytes of output taken.
    fn progress(&self, written: u64) -> Progress {
        let request = match self.progress.request {
            Sent::Whole => Sent::Whole,
            _ if written <= self.from => Sent::Nothing,
            _ => Sent::Part,
        };
        Progress {
            request,
            ..self.progress
        }
    }
}

impl Outstanding {
    /// Responses whose content streams are gathered up to `content_limit`
    /// bytes each; the transport has taken `written` bytes of output so
    /// far.
    pub(crate) fn new(content_limit: usize, written: u64) -> Self {
        Outstanding {
            slots: VecDeque::new(),
            content_limit,
            written,
            tracked: 0,
            heard: Heard::Placed,
        }
    }

    /// Waits for exchange `id` too, whose request starts at output byte
    /// `from` or later.
    pub(crate) fn push(&mut self, id: RequestId, from: u64) {
        self.slots.push_back(Slot {
            id: Some(id),
            continued: false,
            result: None,
            content: Vec::new(),
            progress: Progress::UNSENT,
            from,
        });
    }

    /// Records an outcome for a request that could not even be queued.
    pub(crate) fn push_failed(&mut self, error: ClientError) {
        self.slots.push_back(Slot {
            id: None,
            continued: false,
            result: Some(Err(error)),
            content: Vec::new(),
            progress: Progress::UNSENT,
            from: 0,
        });
    }

    /// Notes how far each request has been written: `written` bytes of
    /// output taken, `queued_from` the least position of a request not yet
    /// queued, `drained` whether nothing is left to write, and `queued`
    /// what the machine has of each request. Requests go out in order: the
    /// ones written whole are at the front, the ones not queued at all at
    /// the back, so each walk stops at the first that is neither.
    pub(crate) fn track(
        &mut self,
        written: u64,
        queued_from: u64,
        drained: bool,
        mut queued: impl FnMut(RequestId) -> Queued,
    ) {
        self.written = written;
        let open = |slot: &Slot| slot.id.filter(|_| slot.result.is_none());
        while drained && let Some(slot) = self.slots.get_mut(self.tracked) {
            if let Some(id) = open(slot) {
                if queued(id) != Queued::All {
                    break;
                }
                slot.progress.request = Sent::Whole;
            }
            self.tracked += 1;
        }
        for slot in self.slots.range_mut(self.tracked..).rev() {
            let Some(id) = open(slot) else {
                continue;
            };
            if queued(id) != Queued::Nothing {
                break;
            }
            // Nothing of it is queued: it starts after all that is.
            slot.from = queued_from;
        }
    }

    /// Bytes of the server's arrived (not only whitespace between
    /// messages): they are the oldest unanswered exchange's answer, and
    /// perhaps, once an event ends it, the next one's too, until
    /// [`events_taken`](Self::events_taken).
    pub(crate) fn on_heard(&mut self) {
        self.mark_oldest();
        self.heard = Heard::Unplaced;
    }

    /// The machine has given every event of what was read: the bytes are
    /// placed.
    pub(crate) fn events_taken(&mut self) {
        self.heard = Heard::Placed;
    }

    fn mark_oldest(&mut self) {
        if let Some(slot) = self.slot(None) {
            slot.progress.answer_began = true;
        }
    }

    /// Whether every exchange has an outcome.
    pub(crate) fn is_done(&self) -> bool {
        self.slots.iter().all(|s| s.result.is_some())
    }

    fn slot(&mut self, id: Option<RequestId>) -> Option<&mut Slot> {
        match id {
            Some(id) => self
                .slots
                .iter_mut()
                .find(|s| s.id == Some(id) && s.result.is_none()),
            // No id: the failure belongs to the oldest unanswered exchange,
            // since responses come in request order (D2).
            None => self.slots.iter_mut().find(|s| s.result.is_none()),
        }
    }

    fn settle(&mut self, id: Option<RequestId>, result: Result<Answer, ClientError>) {
        if let Some(slot) = self.slot(id) {
            slot.result = Some(result);
        }
    }

    /// Takes one event from the machine. Events of exchanges this call does
    /// not wait for are dropped.
    pub(crate) fn on_event(&mut self, event: ClientEvent) {
        // An answer read whole (or refused as read): the read may have
        // ended it and begun the next, which may fail in the very next
        // event (the end of stream right after).
        let answered = matches!(
            event,
            ClientEvent::Response { .. }
                | ClientEvent::PeerError(PeerError::ResourceMismatch { .. } | PeerError::Rejected { .. })
        );
        self.take(event);
        if answered && self.heard == Heard::Unplaced {
            self.mark_oldest();
        }
    }

    fn take(&mut self, event: ClientEvent) {
        match event {
            ClientEvent::Content { id, data } => {
                let limit = self.content_limit;
                if let Some(slot) = self.slot(Some(id)) {
                    if slot.content.len() + data.len() > limit {
                        slot.content = Vec::new();
                        slot.result = Some(Err(ClientError::ContentTooLarge { limit }));
                    } else {
                        slot.content.extend_from_slice(&data);
                    }
                }
            }
            ClientEvent::Continue { id } => {
                if let Some(slot) = self.slot(Some(id)) {
                    slot.continued = true;
                }
            }
            // The outcome is the whole response, which follows.
            ClientEvent::ContentHead { .. } => {}
            ClientEvent::Response {
                id,
                response,
                forgiven,
            } => {
                if let Some(slot) = self.slot(Some(id)) {
                    let continued = slot.continued;
                    let mut response = response;
                    if !slot.content.is_empty() {
                        // The pieces, put back into the body (D19).
                        response.body.replace_content(std::mem::take(&mut slot.content));
                    }
                    slot.result = Some(Ok(Answer {
                        response,
                        forgiven,
                        continued,
                    }));
                }
            }
            ClientEvent::PeerError(PeerError::ResourceMismatch { id, sent, response }) => {
                let mismatch = ClientError::ResourceMismatch {
                    sent,
                    received: response.resource.clone(),
                    response: Some(response),
                };
                self.settle(Some(id), Err(mismatch));
            }
            ClientEvent::PeerError(PeerError::Rejected { id, rejection, .. }) => {
                self.settle(id, Err(ClientError::InvalidResponse(rejection)));
            }
            ClientEvent::PeerError(PeerError::TimedOut { id }) => {
                self.settle(id, Err(ClientError::TimedOut(Timeout::Message)));
            }
            ClientEvent::PeerError(PeerError::UnexpectedEof) => {
                let written = self.written;
                if let Some(slot) = self.slot(None) {
                    let progress = slot.progress(written);
                    slot.result = Some(Err(ClientError::ClosedEarly { progress }));
                }
            }
            // The server took none of our requests for the stall limit (D3).
            ClientEvent::PeerError(PeerError::OutputStalled) => {
                self.settle(None, Err(ClientError::TimedOut(Timeout::Exchange)));
            }
            ClientEvent::Closed => self.close_rest(),
        }
    }

    /// Gives every exchange without an outcome this error.
    pub(crate) fn fail_rest(&mut self, error: &ClientError) {
        for slot in self.slots.iter_mut().filter(|s| s.result.is_none()) {
            slot.result = Some(Err(error.duplicate()));
        }
    }

    /// The connection ended: every exchange without an outcome is
    /// [`ClientError::ClosedEarly`], with how far it got.
    pub(crate) fn close_rest(&mut self) {
        let written = self.written;
        for slot in self.slots.iter_mut().filter(|s| s.result.is_none()) {
            let progress = slot.progress(written);
            slot.result = Some(Err(ClientError::ClosedEarly { progress }));
        }
    }

    /// The first outcome that leaves the connection unusable.
    pub(crate) fn breaking_error(&self) -> Option<&ClientError> {
        self.slots.iter().find_map(|s| match &s.result {
            Some(Err(e)) if e.breaks_connection() => Some(e),
            _ => None,
        })
    }

    /// The outcomes, in request order.
    pub(crate) fn into_results(mut self) -> Vec<Result<Answer, ClientError>> {
        // Every call ends with an outcome for each exchange; this is only
        // a floor.
        self.close_rest();
        self.slots
            .into_iter()
            .map(|s| s.result.unwrap_or(Err(ClientError::ConnectionClosed)))
            .collect()
    }
}

/// Clocks of one call: the exchange deadline and the read silence.
pub(crate) struct Deadlines {
    exchange: Option<Instant>,
    read_timeout: Option<Duration>,
    last_read: Instant,
}

impl Deadlines {
    pub(crate) fn start(options: &ClientOptions, now: Instant) -> Self {
        Deadlines {
            exchange: options.exchange_timeout.map(|t| now + t),
            read_timeout: options.read_timeout,
            last_read: now,
        }
    }

    /// Bytes arrived: the silence starts again.
    pub(crate) fn on_read(&mut self, now: Instant) {
        self.last_read = now;
    }

    /// The clock that has run out, if any.
    pub(crate) fn expired(&self, now: Instant) -> Option<Timeout> {
        if self.exchange.is_some_and(|d| now >= d) {
            return Some(Timeout::Exchange);
        }
        if self.read_timeout.is_some_and(|t| now >= self.last_read + t) {
            return Some(Timeout::Read);
        }
        None
    }

    /// The earliest of our clocks and the machine's timer.
    pub(crate) fn next(&self, machine: Option<Instant>) -> Option<Instant> {
        let read = self.read_timeout.map(|t| self.last_read + t);
        [self.exchange, read, machine].into_iter().flatten().min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Rejection, Response, StatusCode};

    fn response(resource: &str) -> Response {
        Response::new(crate::message::Status::new(StatusCode::OK, "fine")).with_resource(resource)
    }

    #[test]
    fn outcomes_follow_request_order_and_errors_without_id_go_to_the_oldest() {
        let mut o = Outstanding::new(1 << 20, 0);
        o.push(RequestId(0), 0);
        o.push(RequestId(1), 0);
        o.push(RequestId(2), 0);
        o.on_event(ClientEvent::Continue { id: RequestId(0) });
        o.on_event(ClientEvent::Response {
            id: RequestId(0),
            response: response("/a"),
            forgiven: vec![],
        });
        assert!(!o.is_done());
        o.on_event(ClientEvent::PeerError(PeerError::Rejected {
            id: None,
            rejection: Rejection::new(StatusCode::BAD_REQUEST, "headers.date is missing", "/b"),
            closes: false,
        }));
        o.on_event(ClientEvent::Closed);
        assert!(o.is_done());
        assert!(matches!(
            o.breaking_error(),
            Some(ClientError::ClosedEarly { .. })
        ));
        let results = o.into_results();
        let first = results[0].as_ref().expect("first answered");
        assert!(first.continued);
        assert!(matches!(&results[1], Err(ClientError::InvalidResponse(r)) if r.message.contains("date")));
        assert!(matches!(results[2], Err(ClientError::ClosedEarly { .. })));
    }

    #[test]
    fn events_of_other_exchanges_are_ignored() {
        let mut o = Outstanding::new(1 << 20, 0);
        o.push(RequestId(5), 0);
        o.on_event(ClientEvent::Response {
            id: RequestId(4),
            response: response("/old"),
            forgiven: vec![],
        });
        assert!(!o.is_done());
        o.on_event(ClientEvent::PeerError(PeerError::ResourceMismatch {
            id: RequestId(5),
            sent: "/a".into(),
            response: Box::new(response("/b")),
        }));
        assert!(o.is_done());
        assert!(
            o.breaking_error().is_none(),
            "a mismatch ends the exchange, not the connection"
        );
    }

    #[test]
    fn an_error_with_the_connection_says_how_far_each_exchange_got() {
        // Three requests queued at output bytes 0, 100 and 200 (ends 100,
        // 200, 300); the transport took 150 bytes, then all 300.
        let mut o = Outstanding::new(1 << 20, 0);
        for (id, from) in [(0, 0), (1, 100), (2, 200)] {
            o.push(RequestId(id), from);
        }
        let all = |_| Queued::All;
        o.track(150, 300, false, all);
        o.on_heard();
        o.events_taken();
        o.close_rest();
        let progress: Vec<_> = o
            .into_results()
            .iter()
            .map(|r| r.as_ref().err().and_then(ClientError::progress))
            .collect();
        assert_eq!(
            progress,
            [
                Some(Progress {
                    request: Sent::Part,
                    answer_began: true
                }),
                Some(Progress {
                    request: Sent::Part,
                    answer_began: false
                }),
                Some(Progress::UNSENT),
            ],
            "the first is not known whole while output is pending, the second was cut, the third unsent"
        );

        let mut o = Outstanding::new(1 << 20, 0);
        o.push(RequestId(0), 0);
        o.push(RequestId(1), 50);
        // The first is written whole; the second is still idle (behind a
        // handshake) and starts after everything queued so far.
        o.track(300, 300, true, |id| {
            if id == RequestId(0) {
                Queued::All
            } else {
                Queued::Nothing
            }
        });
        o.track(320, 300, false, |_| Queued::Part);
        o.on_event(ClientEvent::Response {
            id: RequestId(0),
            response: response("/a"),
            forgiven: vec![],
        });
        o.on_event(ClientEvent::PeerError(PeerError::UnexpectedEof));
        let results = o.into_results();
        assert!(results[0].is_ok());
        assert_eq!(
            results[1].as_ref().err().and_then(ClientError::progress),
            Some(Progress {
                request: Sent::Part,
                answer_began: false
            })
        );
    }

    #[test]
    fn bytes_that_end_one_answer_count_for_the_next_too() {
        // D13 errs on the side of not sending again: a read that completed
        // the first answer may have begun the second.
        let mut o = Outstanding::new(1 << 20, 0);
        o.push(RequestId(0), 0);
        o.push(RequestId(1), 10);
        o.push(RequestId(2), 20);
        o.track(30, 30, true, |_| Queued::All);
        o.on_heard();
        o.on_event(ClientEvent::Response {
            id: RequestId(0),
            response: response("/a"),
            forgiven: vec![],
        });
        // The end of stream in the same read: the second fails at once.
        o.on_event(ClientEvent::PeerError(PeerError::UnexpectedEof));
        o.events_taken();
        o.close_rest();
        let began: Vec<_> = o
            .into_results()
            .iter()
            .map(|r| {
                r.as_ref()
                    .err()
                    .and_then(ClientError::progress)
                    .map(|p| p.answer_began)
            })
            .collect();
        assert_eq!(began, [None, Some(true), Some(false)]);
    }

    #[test]
    fn deadlines_pick_the_earliest_clock() {
        let t0 = Instant::now();
        let options = ClientOptions {
            read_timeout: Some(Duration::from_secs(2)),
            exchange_timeout: Some(Duration::from_secs(5)),
            ..ClientOptions::default()
        };
        let mut d = Deadlines::start(&options, t0);
        assert_eq!(d.next(None), Some(t0 + Duration::from_secs(2)));
        assert_eq!(
            d.next(Some(t0 + Duration::from_secs(1))),
            Some(t0 + Duration::from_secs(1))
        );
        assert_eq!(d.expired(t0 + Duration::from_secs(2)), Some(Timeout::Read));
        d.on_read(t0 + Duration::from_secs(2));
        assert_eq!(d.expired(t0 + Duration::from_secs(3)), None);
        assert_eq!(d.expired(t0 + Duration::from_secs(5)), Some(Timeout::Exchange));
    }
}
