//! The sans-I/O connection state machine (issue 3).
//!
//! One [`Connection`] per TCP connection, in the [`Role::Server`] or
//! [`Role::Client`] role. It holds no socket and reads no clock: bytes and
//! the current time ([`Now`]: a monotonic instant for timers, the wall
//! clock for `date`) go in; events and bytes to send come out.
//!
//! ```text
//!   bytes from the socket ──► receive_data(bytes, now) ─┐
//!   end of stream        ──► receive_eof(now)           │
//!                                                       ▼
//!                         next_event(now) ──► Request / Response / Continue …
//!   answer / send       ──► send_response(…) / accept_continue(…) / send_request(…)
//!   bytes to the socket ◄── pending_output() + consume_output(n)
//!   timers              ◄── poll_timeout(); handle_timeout(now)
//! ```
//!
//! # Framing
//!
//! [`Scanner`] finds where each message ends on the stream (D1), resuming
//! where it stopped; [`scan()`] does the same for a whole buffer,
//! httparse-style. Every limit of D3 is checked as bytes arrive, so the
//! outcome never depends on how TCP split them.
//!
//! [`Scanner`]: crate::message::framing::Scanner
//! [`scan()`]: crate::message::framing::scan()
//!
//! # The server role
//!
//! Each exchange moves through the table of [`state`], shared by both
//! roles. Responses go out strictly in request order (D2), including the
//! errors the machine answers itself.
//!
//! ```text
//!  request ─────────────► Event::Request ─► send_response ─► written in turn
//!  request with expect: 100-continue (D10), by ContinuePolicy:
//!   ├ AutoAccept ─► 100 written ─► full request ─► Event::Request (same id)
//!   ├ Ask ─► Event::ContinueRequested ─┬ accept_continue ─► as AutoAccept
//!   │                                  └ send_response 4xx/5xx ─► exchange
//!   │                                      done; the connection stays open
//!   └ Refuse ─► 501, then close
//!
//!  connection:
//!   Open ─ framing error (400, echo "") / over size (413) / message or
//!          continue timeout (408) / refused handshake (501) ─► MustClose:
//!          the error goes out after every response owed before it, then
//!          is_closed()
//!   Open ─ peer's end of stream ─► every owed response written ─► closed
//!          (cut short mid-message: 400 "incomplete message", then closed)
//!   Open ─ idle timeout ─► closed, nothing written
//! ```
//!
//! Every error response the server machine writes on its own, timeouts and
//! the stream cut short included, is reported as
//! [`PeerError::Rejected`] with the rejection it wrote (status, echo), so
//! an adapter can log it without knowing the protocol.
//!
//! Reading pauses ([`Connection::wants_read`] is false) while
//! `max_pipelined` responses are owed and not yet written (D3), and while
//! the application decides a handshake.
//!
//! # The client role
//!
//! ```text
//!  send_request ─► request written ─► response ─► Event::Response
//!  send_request with expect: 100-continue (D10):
//!   first request written (headers as given, empty body)
//!   ├ 100 ─► Event::Continue; full request written (expect removed)
//!   │        ─► Event::Response
//!   ├ final 4xx/5xx ─► Event::Response; the full request is never sent
//!   └ continue_wait passes ─► full request written anyway; a late 100 is
//!                             taken quietly ─► Event::Response
//!  requests sent meanwhile wait until the handshake ends (the server reads
//!  the next request as the full one)
//! ```
//!
//! Responses are matched to requests in order; an echoed `resource` that
//! differs is [`PeerError::ResourceMismatch`] (D13). End of stream after
//! complete responses is fine (the reference server closes after each);
//! with requests outstanding it is [`PeerError::UnexpectedEof`].
//!
//! # Timers
//!
//! Timers are data (D3): the message timer runs from a message's first
//! byte (`{`) to its last; the server's idle timer runs while nothing is
//! under way or owed, from the end of the last message or the moment the
//! peer took the last response (whitespace between messages does not reset
//! it); the continue timer is, on a server, the wait for the full request
//! after `100` (it replaces the message timer for that request) and, on a
//! client, the wait for `100`. A server's continue timer starts when its
//! `100` goes into the output, not when the preliminary request is read:
//! pipelined behind slower responses (D2), the `100` may wait, and the
//! client cannot send the full request before it sees it. While the `100`
//! waits, and while reading is paused for backpressure, no timer runs on
//! the exchange: the delay is ours, not the peer's.
//! [`Connection::poll_timeout`] gives the earliest deadline; call
//! [`Connection::handle_timeout`] once it has passed.
//!
//! # Example: a server driven by hand
//!
//! ```
//! use jsontp::machine::{Config, Connection, Event, Role};
//! use jsontp::message::{Body, Response, Status, StatusCode};
//!
//! // The caller owns the clock; here it is read once and held: one moment.
//! let now = jsontp::io_adapters::now();
//! let mut server = Connection::new(Role::Server, Config::default(), now);
//!
//! // A request arrives in two pieces; nothing happens until it is whole.
//! server.receive_data(br#"{"jsontp":"1.0","type":"request","resource":"/hello.txt","#, now);
//! assert_eq!(server.next_event(now), None);
//! server.receive_data(br#""method":"GET","headers":{},"body":{"content":"","encoding":"identity"}}"#, now);
//!
//! let Some(Event::Request { id, request }) = server.next_event(now) else {
//!     panic!("a request");
//! };
//! assert_eq!(request.resource.path(), "/hello.txt");
//!
//! // The answer; the machine adds `date` and `language`.
//! let response = Response::new(Status::new(StatusCode::OK, "here it is"))
//!     .with_body(Body::text("Hello, world!"));
//! server.send_response(id, response, now)?;
//!
//! let out = server.pending_output();
//! assert!(out.starts_with(br#"{"jsontp":"1.0","type":"response","status":{"code":200,"#));
//! assert!(out.ends_with(b"}\n"));
//! let written = out.len(); // as if the socket took every byte
//! server.consume_output(written);
//!
//! // The peer half-closes; nothing is owed, so the connection is done.
//! server.receive_eof(now);
//! assert!(server.is_closed());
//! assert_eq!(server.next_event(now), Some(Event::Closed));
//! # Ok::<(), jsontp::machine::UsageError>(())
//! ```

mod client;
mod config;
mod connection;
mod event;
mod responses;
mod server;
pub mod state;

pub use config::{Config, ContinuePolicy, Limits, Now};
pub use connection::Connection;
pub use event::{Event, PeerError, RequestId, UsageError};
pub use state::Role;
