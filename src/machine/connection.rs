//! The connection: one state machine for both roles.
//!
//! This file holds what both roles share: the input buffer and the scanner,
//! the output buffer, the event queue, the timers and the end of the
//! connection. What a server does with a message is in `server.rs`, what a
//! client does in `client.rs`; both move their exchanges through the one
//! table in `state.rs`.

use std::collections::VecDeque;
use std::time::Instant;

use super::client::ClientSide;
use super::server::ServerSide;
use super::{Config, Event, Now, RequestId, Role, UsageError};
use crate::message::framing::{Scan, Scanner};
use crate::message::{Request, Response};

/// Capacity an empty input or output buffer may keep for the next message;
/// more is released (see `release_drained_buffers`).
const RETAINED_CAPACITY: usize = 16 * 1024;

/// One jsontp connection, without I/O.
///
/// See the [module documentation](super) for the states of each role and a
/// worked example.
#[derive(Debug)]
pub struct Connection {
    pub(super) role: Role,
    pub(super) config: Config,
    /// The time of the last call that brought one, for calls that bring none
    /// (`consume_output`).
    pub(super) last_now: Now,

    /// Received bytes not yet framed; `input[input_pos..]` is live.
    pub(super) input: Vec<u8>,
    pub(super) input_pos: usize,
    pub(super) scanner: Scanner,
    /// When the first byte of the message being received was scanned.
    pub(super) message_started: Option<Instant>,
    /// When the connection last became idle (no message under way, nothing
    /// owed): the idle timer runs from here (D3).
    pub(super) idle_since: Instant,
    /// The peer closed its sending side.
    pub(super) peer_eof: bool,
    /// Input is no longer read (after an error that closes the connection).
    pub(super) input_stopped: bool,

    /// Bytes queued for the peer; `output[output_pos..]` is pending.
    pub(super) output: Vec<u8>,
    pub(super) output_pos: usize,
    /// Total bytes ever queued / ever written, to know which responses the
    /// peer has taken (D3).
    pub(super) output_queued: u64,
    pub(super) output_written: u64,

    pub(super) events: VecDeque<Event>,
    pub(super) next_id: u64,
    /// Nothing more will be sent once the pending output is written.
    pub(super) must_close: bool,
    pub(super) closed_reported: bool,

    pub(super) server: ServerSide,
    pub(super) client: ClientSide,
}

impl Connection {
    /// A connection in `role`; `now` starts the idle timer.
    pub fn new(role: Role, config: Config, now: Now) -> Connection {
        let scanner = Scanner::with_limit(config.limits.message.max_message_bytes);
        Connection {
            role,
            config,
            last_now: now,
            input: Vec::new(),
            input_pos: 0,
            scanner,
            message_started: None,
            idle_since: now.instant,
            peer_eof: false,
            input_stopped: false,
            output: Vec::new(),
            output_pos: 0,
            output_queued: 0,
            output_written: 0,
            events: VecDeque::new(),
            next_id: 0,
            must_close: false,
            closed_reported: false,
            server: ServerSide::default(),
            client: ClientSide::default(),
        }
    }

    /// The role.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Bytes received from the peer. Every complete message in them is
    /// handled at once (as far as the pipelining limit allows, D3); the
    /// outcome does not depend on how the bytes were split.
    ///
    /// Bytes after the peer's end of stream or after an error that closes
    /// the connection are ignored.
    pub fn receive_data(&mut self, data: &[u8], now: Now) {
        self.last_now = now;
        if data.is_empty() || self.peer_eof || self.input_stopped || self.is_closed() {
            return;
        }
        if self.input_pos > 0 {
            self.input.drain(..self.input_pos);
            self.input_pos = 0;
        }
        self.input.extend_from_slice(data);
        self.process_input(now);
        self.after_call();
    }

    /// The peer closed its sending side. Complete messages already received
    /// are still answered (D1, D2); a message cut short is answered `400`
    /// (server) or reported (client), then the connection closes.
    pub fn receive_eof(&mut self, now: Now) {
        self.last_now = now;
        self.peer_eof = true;
        self.process_input(now);
        self.after_call();
    }

    /// The next event, if any.
    pub fn next_event(&mut self, now: Now) -> Option<Event> {
        self.last_now = now;
        if self.events.is_empty() {
            self.process_input(now);
            self.after_call();
        }
        self.events.pop_front()
    }

    /// Server: answers exchange `id`. Responses go out in request order
    /// (D2), whatever order they are given in. The machine fills in `date`
    /// (from `now.wall`) and `language` (from the configuration) when the
    /// response leaves them out.
    ///
    /// Answering an exchange whose handshake is being decided
    /// ([`Event::ContinueRequested`]) rejects the handshake: the response
    /// should be a `4xx`/`5xx` and the connection stays open (D10).
    pub fn send_response(&mut self, id: RequestId, response: Response, now: Now) -> Result<(), UsageError> {
        self.last_now = now;
        if self.role != Role::Server {
            return Err(UsageError::WrongRole);
        }
        let result = self.server_send_response(id, response, now);
        self.process_input(now);
        self.after_call();
        result
    }

    /// Server: accepts a 100-continue handshake (writes the `100`, D10).
    pub fn accept_continue(&mut self, id: RequestId, now: Now) -> Result<(), UsageError> {
        self.last_now = now;
        if self.role != Role::Server {
            return Err(UsageError::WrongRole);
        }
        let result = self.server_accept_continue(id, now);
        self.process_input(now);
        self.after_call();
        result
    }

    /// Client: queues a request. With `expect_continue` on its headers the
    /// handshake is run (D10): the first request goes out with an empty
    /// body; the full request (with `expect` removed) follows on `100` or
    /// when [`Config::continue_wait`] has passed; a final response ends the
    /// exchange without it. Requests queued meanwhile wait for the handshake
    /// to end, since the server reads the next request as the full one.
    pub fn send_request(&mut self, request: Request, now: Now) -> Result<RequestId, UsageError> {
        self.last_now = now;
        if self.role != Role::Client {
            return Err(UsageError::WrongRole);
        }
        if self.must_close || self.peer_eof || self.is_closed() {
            return Err(UsageError::Closed);
        }
        let id = self.fresh_id();
        self.client_send_request(id, request, now);
        self.after_call();
        Ok(id)
    }

    /// Bytes waiting to be written to the peer.
    pub fn pending_output(&self) -> &[u8] {
        &self.output[self.output_pos..]
    }

    /// Marks `n` bytes of [`pending_output`](Self::pending_output) as written
    /// (more than are pending is clamped). Responses the peer has taken no
    /// longer count against the pipelining limit (D3).
    pub fn consume_output(&mut self, n: usize) {
        let n = n.min(self.output.len() - self.output_pos);
        self.output_pos += n;
        self.output_written += n as u64;
        if self.output_pos == self.output.len() {
            self.output.clear();
            self.output_pos = 0;
        }
        if n > 0 {
            self.server_output_taken();
            let now = self.last_now;
            self.process_input(now);
            self.after_call();
        }
    }

    /// Bytes of memory the connection's input and output buffers hold
    /// (capacity, not content). An idle connection keeps at most a few KiB,
    /// whatever it carried before.
    pub fn buffered_capacity(&self) -> usize {
        self.input.capacity() + self.output.capacity()
    }

    /// Whether the machine wants more input now: false while too many
    /// responses are owed (D3), while a handshake awaits the application's
    /// decision, after the peer's end of stream, and once the connection
    /// is closing.
    pub fn wants_read(&self) -> bool {
        if self.peer_eof || self.input_stopped || self.must_close || self.is_closed() {
            return false;
        }
        match self.role {
            Role::Server => self.server_wants_read(),
            Role::Client => true,
        }
    }

    /// When the next timer is due, if one runs.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_closed() || self.must_close {
            return None;
        }
        let timers = self.timers();
        [timers.message, timers.idle, timers.continue_wait]
            .into_iter()
            .flatten()
            .min()
    }

    /// Tells the machine that time has passed: acts on every timer due at
    /// `now` (D3).
    pub fn handle_timeout(&mut self, now: Now) {
        self.last_now = now;
        if self.is_closed() || self.must_close {
            return;
        }
        let timers = self.timers();
        let due = |t: Option<Instant>| t.is_some_and(|t| t <= now.instant);
        if due(timers.continue_wait) {
            match self.role {
                Role::Server => self.server_continue_timeout(now),
                Role::Client => self.client_continue_timeout(now),
            }
        } else if due(timers.message) {
            match self.role {
                Role::Server => self.server_message_timeout(now),
                Role::Client => self.client_message_timeout(),
            }
        } else if due(timers.idle) {
            // D3: close without a response.
            self.input_stopped = true;
            self.must_close = true;
        }
        self.process_input(now);
        self.after_call();
    }

    /// Whether the connection is finished: write out
    /// [`pending_output`](Self::pending_output), then close the socket.
    pub fn is_closed(&self) -> bool {
        if self.must_close {
            return true;
        }
        match self.role {
            Role::Server => self.server_finished(),
            Role::Client => self.client_finished(),
        }
    }

    /// The next exchange number.
    pub(super) fn fresh_id(&mut self) -> RequestId {
        let id = RequestId(self.next_id);
        self.next_id += 1;
        id
    }

    /// Appends bytes for the peer; returns the total queued after them.
    pub(super) fn queue_output(&mut self, write: impl FnOnce(&mut Vec<u8>)) -> u64 {
        let before = self.output.len();
        write(&mut self.output);
        self.output_queued += (self.output.len() - before) as u64;
        self.output_queued
    }

    /// The live input.
    fn live_input(&self) -> &[u8] {
        &self.input[self.input_pos..]
    }

    /// Frames and handles every complete message the roles allow now.
    pub(super) fn process_input(&mut self, now: Now) {
        loop {
            if self.input_stopped || self.must_close {
                self.input.clear();
                self.input_pos = 0;
                return;
            }
            let ready = match self.role {
                Role::Server => self.server_ready_for_message(),
                Role::Client => true,
            };
            if !ready {
                return;
            }
            let found = self.scanner.scan(&self.input[self.input_pos..]);
            match found {
                Scan::Partial => {
                    let idle = self.scanner.idle_prefix();
                    self.scanner.drop_prefix(idle);
                    self.input_pos += idle;
                    if self.scanner.in_message() {
                        self.message_started.get_or_insert(now.instant);
                    } else {
                        self.message_started = None;
                    }
                    if self.peer_eof {
                        let cut_short = self.scanner.in_message();
                        self.input_stopped = true;
                        match self.role {
                            Role::Server => self.server_eof(cut_short, now),
                            Role::Client => self.client_eof(cut_short),
                        }
                    }
                    return;
                }
                Scan::Complete(frame) => {
                    let (start, end) = (frame.start(), frame.end());
                    let base = self.input_pos;
                    self.input_pos += end;
                    self.message_started = None;
                    self.idle_since = now.instant;
                    // Borrow the message out of the buffer without copying:
                    // the handlers only append to other fields.
                    let input = std::mem::take(&mut self.input);
                    let message = &input[base + start..base + end];
                    match self.role {
                        Role::Server => self.server_message(message, &frame, now),
                        Role::Client => self.client_message(message, &frame, now),
                    }
                    self.input = input;
                }
                Scan::Error { at, .. } => {
                    let byte = self.live_input().get(at).copied();
                    let first = !self.scanner.in_message();
                    self.input_stopped = true;
                    match self.role {
                        Role::Server => self.server_framing_error(byte, first, now),
                        Role::Client => self.client_framing_error(byte, first),
                    }
                }
                Scan::TooLarge { .. } => {
                    self.input_stopped = true;
                    match self.role {
                        Role::Server => self.server_too_large(now),
                        Role::Client => self.client_too_large(),
                    }
                }
            }
        }
    }

    /// Bookkeeping after every public call: report the close once.
    fn after_call(&mut self) {
        if self.role == Role::Server {
            self.server_flush();
        }
        self.release_drained_buffers();
        if self.is_closed() && !self.closed_reported {
            self.closed_reported = true;
            self.events.push_back(Event::Closed);
        }
    }

    /// Gives back a buffer that once held a large message as soon as it is
    /// empty, so that an idle connection costs little memory whatever it
    /// carried before (thousands of idle connections per worker, issue 4).
    fn release_drained_buffers(&mut self) {
        if self.input_pos == self.input.len() {
            // Nothing unread: the scanner sees the same (empty) slice.
            self.input.clear();
            self.input_pos = 0;
            if self.input.capacity() > RETAINED_CAPACITY {
                self.input = Vec::new();
            }
        }
        if self.output.is_empty() && self.output.capacity() > RETAINED_CAPACITY {
            self.output = Vec::new();
        }
    }

    /// The deadlines that run now. A timeout too long to represent as an
    /// `Instant` never fires.
    fn timers(&self) -> Timers {
        let limits = &self.config.limits;
        let mut timers = Timers::default();
        if self.input_stopped || self.peer_eof {
            return timers;
        }
        match self.role {
            Role::Server => {
                if let Some(since) = self.server.awaiting_full_since() {
                    // D3, D10: the continue timer replaces the message
                    // timer for the full request, and runs only once the
                    // 100 is out; before, nothing runs (the delay is ours).
                    timers.continue_wait = since.and_then(|t| t.checked_add(limits.continue_timeout));
                } else if let Some(started) = self.message_started {
                    if self.server_ready_for_message() {
                        timers.message = started.checked_add(limits.message_timeout);
                    }
                } else if self.server_idle() {
                    timers.idle = self.idle_since.checked_add(limits.idle_timeout);
                }
            }
            Role::Client => {
                timers.continue_wait = self.client.continue_deadline;
                timers.message = self
                    .message_started
                    .and_then(|t| t.checked_add(limits.message_timeout));
            }
        }
        timers
    }
}

/// The deadlines of one moment; `None` for a timer that does not run.
#[derive(Debug, Default, Clone, Copy)]
struct Timers {
    message: Option<Instant>,
    idle: Option<Instant>,
    continue_wait: Option<Instant>,
}
