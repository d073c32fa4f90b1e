//! The connection: one state machine for both roles.

use std::time::Instant;

use super::{Config, Event, Now, RequestId, Role, UsageError};
use crate::message::{Request, Response};

/// One jsontp connection, without I/O.
#[derive(Debug)]
pub struct Connection {
    role: Role,
    config: Config,
}

impl Connection {
    /// A connection in `role`; `now` starts the idle timer.
    pub fn new(role: Role, config: Config, now: Now) -> Connection {
        let _ = now;
        Connection { role, config }
    }

    /// The role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Bytes received from the peer.
    pub fn receive_data(&mut self, data: &[u8], now: Now) {
        let _ = (data, now);
        todo!("issue 3")
    }

    /// The peer closed its sending side.
    pub fn receive_eof(&mut self, now: Now) {
        let _ = now;
        todo!("issue 3")
    }

    /// The next event, if any.
    pub fn next_event(&mut self, now: Now) -> Option<Event> {
        let _ = now;
        todo!("issue 3")
    }

    /// Server: answers exchange `id`. Responses go out in request order
    /// (D2), whatever order they are given in.
    pub fn send_response(&mut self, id: RequestId, response: Response, now: Now) -> Result<(), UsageError> {
        let _ = (id, response, now);
        todo!("issue 3")
    }

    /// Server: accepts a 100-continue handshake (writes the `100`).
    pub fn accept_continue(&mut self, id: RequestId, now: Now) -> Result<(), UsageError> {
        let _ = (id, now);
        todo!("issue 3")
    }

    /// Client: queues a request; with `expect_continue` on its headers the
    /// handshake is run (D10).
    pub fn send_request(&mut self, request: Request, now: Now) -> Result<RequestId, UsageError> {
        let _ = (request, now);
        todo!("issue 3")
    }

    /// Bytes waiting to be written to the peer.
    pub fn pending_output(&self) -> &[u8] {
        todo!("issue 3")
    }

    /// Marks `n` bytes of [`pending_output`](Self::pending_output) as written.
    pub fn consume_output(&mut self, n: usize) {
        let _ = n;
        todo!("issue 3")
    }

    /// Whether the machine wants more input now (false while too many
    /// responses are owed, D3, or after the peer's end of stream).
    pub fn wants_read(&self) -> bool {
        todo!("issue 3")
    }

    /// When the next timer is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        todo!("issue 3")
    }

    /// Tells the machine that time has passed.
    pub fn handle_timeout(&mut self, now: Now) {
        let _ = now;
        todo!("issue 3")
    }

    /// Whether the connection is finished and, once the pending output is
    /// written, the socket should be closed.
    pub fn is_closed(&self) -> bool {
        todo!("issue 3")
    }
}
