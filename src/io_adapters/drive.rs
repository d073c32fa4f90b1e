//! What every server adapter does between its socket and the machine: read
//! the clock, hand events to the [`Handler`], and remember whether a message
//! is half received (for graceful shutdown). No protocol logic: status codes
//! and JSON stay in the machine and the message layer.

use std::net::SocketAddr;
use std::time::{Instant, SystemTime};

use crate::machine::{Now, PeerError, RequestId, ServerConfig, ServerConnection, ServerEvent, UsageError};
use crate::message::{Date, Request, Response, Status, StatusCode};

use super::handler::{Exchange, Handler, RequestInfo};

/// Reads both clocks the machine needs (a monotonic instant for timers, the
/// wall clock for `date`) into a [`Now`]. The sans-I/O core never calls
/// this; whoever drives a [`ServerConnection`] by hand may.
pub fn now() -> Now {
    Now {
        instant: Instant::now(),
        wall: Date::from_system_time(SystemTime::now()),
    }
}

/// One server connection: the machine and the little an adapter tracks.
#[derive(Debug)]
pub(crate) struct Served {
    /// The machine; adapters write its `pending_output`, honour
    /// `wants_read`, `poll_timeout` and `is_closed`.
    pub(crate) conn: ServerConnection,
    info: RequestInfo,
    /// Bytes other than whitespace arrived, or a `100` was sent, since the
    /// last request was handed out: an exchange is under way.
    in_flight: bool,
}

impl Served {
    /// A new server connection with `peer`.
    pub(crate) fn new(config: &ServerConfig, peer: SocketAddr, now: Now) -> Served {
        Served {
            conn: ServerConnection::new(config.clone(), now),
            info: RequestInfo::new(peer),
            in_flight: false,
        }
    }

    /// Feeds bytes read from the socket.
    pub(crate) fn receive(&mut self, data: &[u8], now: Now) {
        // Whitespace between messages starts no exchange (D1).
        if !self.in_flight && data.iter().any(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n')) {
            self.in_flight = true;
        }
        self.conn.receive_data(data, now);
    }

    /// Nothing half received and nothing left to write: at shutdown the
    /// connection can be closed without cutting an exchange short.
    pub(crate) fn is_idle(&self) -> bool {
        !self.in_flight && self.conn.pending_output().is_empty()
    }

    /// Answers every pending event with `handler`, and reports each response
    /// to its access-log hook.
    pub(crate) fn dispatch<H: Handler + ?Sized>(&mut self, handler: &H) {
        while let Some(event) = self.conn.next_event(now()) {
            match event {
                ServerEvent::Request { id, request } => {
                    self.in_flight = false;
                    let started = Instant::now();
                    let response = answer(handler, &request, &self.info);
                    self.respond(handler, id, &request, response, started);
                }
                ServerEvent::ContinueRequested { id, request } => {
                    let started = Instant::now();
                    match handler.check_continue(&request, &self.info) {
                        Ok(()) => {
                            // The full request is now awaited (D10).
                            self.in_flight = true;
                            let _ = self.conn.accept_continue(id, now());
                        }
                        Err(response) => {
                            self.in_flight = false;
                            self.respond(handler, id, &request, response, started);
                        }
                    }
                }
                // Every response the machine writes on its own (framing,
                // limits, timeouts, a stream cut short) comes as a rejection
                // carrying what it wrote: log it like an answer.
                ServerEvent::PeerError(PeerError::Rejected { rejection, .. }) => {
                    self.in_flight = false;
                    handler.log_exchange(&Exchange {
                        peer: self.info.peer,
                        method: None,
                        resource: &rejection.resource,
                        status: rejection.status,
                        // The connection's error responses carry no content.
                        content_bytes: 0,
                        elapsed: std::time::Duration::ZERO,
                    });
                }
                // The peer left after a `100` without the full request, or
                // took none of our output: nothing was written, so nothing
                // to log.
                ServerEvent::PeerError(_) => self.in_flight = false,
                // Closed: adapters check `is_closed`.
                ServerEvent::Closed => {}
            }
        }
    }

    /// Sends the application's answer to exchange `id` and logs it. An
    /// answer the machine refuses as a misuse (a `1xx` other than the
    /// acknowledgement, D12) would leave the exchange unanswered and stall
    /// every pipelined response behind it, so it is replaced by a `500`.
    fn respond<H: Handler + ?Sized>(
        &mut self,
        handler: &H,
        id: RequestId,
        request: &Request,
        response: Response,
        started: Instant,
    ) {
        let (mut status, mut content_bytes) = (response.status.code, response.body.content().len());
        match self.conn.send_response(id, response, now()) {
            // Closed: the connection is going away; nobody is left to answer.
            Ok(()) | Err(UsageError::Closed) => {}
            Err(misuse) => {
                let fallback = Response::new(Status::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("the server's application gave an answer that cannot be sent: {misuse}"),
                ));
                (status, content_bytes) = (fallback.status.code, 0);
                let _ = self.conn.send_response(id, fallback, now());
            }
        }
        handler.log_exchange(&Exchange {
            peer: self.info.peer,
            method: Some(request.method),
            resource: request.resource.as_str(),
            status,
            content_bytes,
            elapsed: started.elapsed(),
        });
    }
}

/// Runs the handler; a handler that panics gets its request answered `500`
/// instead of taking down the worker and every connection on it.
fn answer<H: Handler + ?Sized>(handler: &H, request: &Request, info: &RequestInfo) -> Response {
    let run = std::panic::AssertUnwindSafe(|| handler.handle(request, info));
    std::panic::catch_unwind(run).unwrap_or_else(|_| {
        let status = Status::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the server failed while answering this request",
        );
        Response::new(status)
    })
}
