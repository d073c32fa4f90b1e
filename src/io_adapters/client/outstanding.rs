//! The bookkeeping of one call of a client (`send`, `send_all`): which
//! exchanges it waits for, their outcomes, and its clocks. Shared by both
//! clients.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{Answer, ClientError, ClientOptions, Timeout};
use crate::machine::{ClientEvent, PeerError, RequestId};

/// The exchanges a call waits for, and their outcomes as the machine's
/// events arrive. Pure bookkeeping, no protocol logic.
pub(crate) struct Outstanding {
    slots: VecDeque<Slot>,
    /// The most streamed content gathered for one response in memory.
    content_limit: usize,
}

struct Slot {
    /// `None` for a request the machine did not take.
    id: Option<RequestId>,
    continued: bool,
    result: Option<Result<Answer, ClientError>>,
    /// Streamed content gathered for the response (D19).
    content: Vec<u8>,
}

impl Outstanding {
    /// Responses whose content streams are gathered up to `content_limit`
    /// bytes each.
    pub(crate) fn new(content_limit: usize) -> Self {
        Outstanding {
            slots: VecDeque::new(),
            content_limit,
        }
    }

    /// Waits for exchange `id` too.
    pub(crate) fn push(&mut self, id: RequestId) {
        self.slots.push_back(Slot {
            id: Some(id),
            continued: false,
            result: None,
            content: Vec::new(),
        });
    }

    /// Records an outcome for a request that could not even be queued.
    pub(crate) fn push_failed(&mut self, error: ClientError) {
        self.slots.push_back(Slot {
            id: None,
            continued: false,
            result: Some(Err(error)),
            content: Vec::new(),
        });
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
                self.settle(None, Err(ClientError::ClosedEarly));
            }
            // The server took none of our requests for the stall limit (D3).
            ClientEvent::PeerError(PeerError::OutputStalled) => {
                self.settle(None, Err(ClientError::TimedOut(Timeout::Exchange)));
            }
            ClientEvent::Closed => self.fail_rest(&ClientError::ClosedEarly),
        }
    }

    /// Gives every exchange without an outcome this error.
    pub(crate) fn fail_rest(&mut self, error: &ClientError) {
        for slot in self.slots.iter_mut().filter(|s| s.result.is_none()) {
            slot.result = Some(Err(error.duplicate()));
        }
    }

    /// Whether any outcome leaves the connection unusable.
    pub(crate) fn broke_connection(&self) -> bool {
        self.slots
            .iter()
            .any(|s| matches!(&s.result, Some(Err(e)) if e.breaks_connection()))
    }

    /// The outcomes, in request order.
    pub(crate) fn into_results(self) -> Vec<Result<Answer, ClientError>> {
        self.slots
            .into_iter()
            .map(|s| s.result.unwrap_or(Err(ClientError::ClosedEarly)))
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
        let mut o = Outstanding::new(1 << 20);
        o.push(RequestId(0));
        o.push(RequestId(1));
        o.push(RequestId(2));
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
        assert!(o.broke_connection());
        let results = o.into_results();
        let first = results[0].as_ref().expect("first answered");
        assert!(first.continued);
        assert!(matches!(&results[1], Err(ClientError::InvalidResponse(r)) if r.message.contains("date")));
        assert!(matches!(results[2], Err(ClientError::ClosedEarly)));
    }

    #[test]
    fn events_of_other_exchanges_are_ignored() {
        let mut o = Outstanding::new(1 << 20);
        o.push(RequestId(5));
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
            !o.broke_connection(),
            "a mismatch ends the exchange, not the connection"
        );
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
