//! The sans-I/O connection state machine.
//!
//! One [`ServerConnection`] or [`ClientConnection`] per TCP connection. It
//! holds no socket and reads no clock: bytes and the current time
//! ([`Now`]: a monotonic instant for timers, the wall clock for `date`) go
//! in; events and bytes to send come out.
//!
//! ```text
//!   bytes from the socket ──► receive_data(bytes, now) ─┐
//!   end of stream        ──► receive_eof(now)           │
//!                                                       ▼
//!                         next_event(now) ──► ServerEvent / ClientEvent
//!   answer / send       ──► send_response(…) / accept_continue(…) / send_request(…)
//!   bytes to the socket ◄── pending_output() + consume_output(n, now)
//!   timers              ◄── poll_timeout(); handle_timeout(now)
//! ```
//!
//! # Framing
//!
//! The message layer's decoder reads the peer's stream: its lexer,
//! [`Scanner`], finds where each message ends (D1), resuming where it
//! stopped; the decoder reads each message whole (by the one shortcut, or
//! by the text reader after the lexer), hands streamed content out in
//! pieces (D19), and judges every message by the one judge, so how a
//! message was read never changes its answer. The roles only say whether
//! requests or responses come. Every limit of D3 is checked as bytes
//! arrive, so the outcome never depends on how TCP split them.
//!
//! [`Scanner`]: crate::message::framing::Scanner
//!
//! # Exchanges
//!
//! Each exchange moves through the one table of [`table`], shared by both
//! roles; [`table::diagram`] renders every move. A move the application
//! asks for and the table refuses is a [`UsageError`]; one the peer's
//! message makes is a [`PeerError`].
//!
//! # The server role
//!
//! Responses go out strictly in request order (D2), including the errors
//! the machine answers itself. Requests are handed out one event at a
//! time: the next message is read once the caller has taken the events
//! of the last.
//!
//! ```text
//!  request ─────────────► ServerEvent::Request ─► send_response ─► written in turn
//!                         ─► consume_output past its end ─► ServerEvent::ResponseSent
//!  request with expect: 100-continue (D10), by ContinuePolicy:
//!   ├ AutoAccept ─► 100 written ─► full request ─► ServerEvent::Request (same id)
//!   │                              (another method or resource: 400, the
//!   │                               exchange ends, the connection stays open)
//!   ├ Ask ─► ServerEvent::ContinueRequested ─┬ accept_continue ─► as AutoAccept
//!   │                                        └ send_response 4xx/5xx ─► exchange
//!   │                                            done; the connection stays open
//!   └ Refuse ─► 501, then close
//!  with stream_content, a request written body last, content last (D19):
//!   ServerEvent::ContentHead (advisory: the envelope) ─► Content pieces
//!   ─► ServerEvent::Request (the one to answer) or a rejection
//!   (the full request of a handshake: a head under AutoAccept only; under
//!    Ask the application decided at ContinueRequested)
//!  content written before the rest of the head: held within the message
//!   limit; at the message's end ContentHead ─► Content pieces ─► Request
//! ```
//!
//! Every error response the server machine writes on its own, timeouts and
//! the stream cut short included, is reported as
//! [`PeerError::Rejected`] with the rejection it wrote (status, echo), so
//! an adapter can log it without knowing the protocol. Whatever the
//! application puts in a response's `resource`, the echo is the request's
//! own string (D7, D12).
//!
//! Reading pauses ([`ServerConnection::wants_read`] is false, and no new
//! request is handled) while [`ServerConfig::max_pipelined`] responses are
//! owed and not yet taken by the peer, while more than
//! [`ServerConfig::max_output_owed`] bytes of output are
//! queued beyond the response being written (D3), and while the
//! application decides a handshake; it resumes as the peer catches up.
//! [`ServerConnection::is_idle`] says when nothing is under way, for a
//! graceful shutdown.
//!
//! # The client role
//!
//! ```text
//!  send_request ─► request written ─► response ─► ClientEvent::Response
//!  send_request with expect: 100-continue (D10):
//!   first request written (headers as given, empty body)
//!   ├ 100 ─► ClientEvent::Continue; full request written (expect removed)
//!   │        ─► ClientEvent::Response
//!   ├ final 4xx/5xx ─► ClientEvent::Response; the full request is never sent
//!   └ continue_wait passes ─► full request written anyway; a late 100 is
//!                             taken quietly ─► ClientEvent::Response
//!  requests sent meanwhile wait until the handshake ends (the server reads
//!  the next request as the full one)
//! ```
//!
//! Responses are matched to requests in order. An echoed `resource` that
//! differs is [`PeerError::ResourceMismatch`], carrying the response (D13);
//! an error response echoing `""` (the server could not read our
//! request's resource, D12) answers the request like any other. End of
//! stream after complete responses is fine (the reference server closes
//! after each); with requests outstanding it is
//! [`PeerError::UnexpectedEof`].
//!
//! # The connection
//!
//! ```text
//!  Open ─ peer's end of stream ─► PeerEnded: complete messages still handled
//!    │                             │ the last one handled
//!    ▼                             ▼
//!  InputStopped: nothing more read; what is owed still goes out
//!    (server: framing error 400 echo "", over size 413, message or
//!     continue timeout 408, refused handshake 501, stream cut short 400
//!     "incomplete message": each goes out after every response owed
//!     before it; a message refused before its end (too deep, D3) that
//!     cannot end cleanly: no second answer, D1, D5)
//!    │ nothing owed any more (client: at once)
//!    ▼
//!  Closed: reported once as the role's Closed event; write out
//!          pending_output(), then close the socket
//!
//!  server idle timeout ─► Closed, nothing written
//!  output stalled (D3) ─► Closed, pending output dropped, PeerError::OutputStalled
//! ```
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
//!
//! The stall timer runs, in both roles and even once the connection is
//! closed, while any of our output has not reached the peer: when the peer
//! takes none of it for [`Limits::stall_timeout`], the connection closes
//! and the pending output is dropped, its memory freed. What counts as
//! taken is what the caller says: every byte written
//! ([`consume_output`](ServerConnection::consume_output)), until the caller
//! reports what its transport tells
//! ([`transport_acknowledged`](ServerConnection::transport_acknowledged):
//! the bytes the peer acknowledged, in the transport's own units, and
//! whether it holds more); from then on only a growing acknowledged count
//! restarts the timer, which runs while output is pending or the transport
//! holds any, so a send buffer that takes one more write is not mistaken
//! for a reader. A count says the peer took bytes since it was last read,
//! not when: while the timer runs, the machine's deadlines include moments
//! to read it again, a sixty-fourth of the stall timeout apart. The part
//! already written is given back as it grows, so a peer that reads
//! steadily keeps the buffer small.
//!
//! A quiet server connection (nothing received unhandled, nothing owed)
//! keeps its emptied buffers for a few milliseconds, so that a busy
//! keep-alive peer's next request reuses them, and then gives them back:
//! that moment is a deadline too, and acting on it closes nothing. Idle
//! connections cost their fixed state only.
//!
//! `poll_timeout` gives the earliest deadline; call `handle_timeout` once
//! it has passed.
//!
//! # Example: a server driven by hand
//!
//! ```
//! use jsontp_protocol::machine::{ServerConfig, ServerConnection, ServerEvent};
//! use jsontp_protocol::message::{Body, Response, Status, StatusCode};
//!
//! // The caller owns the clock; here it is read once and held: one moment.
//! let now = jsontp_protocol::io_adapters::now();
//! let mut server = ServerConnection::new(ServerConfig::default(), now);
//!
//! // A request arrives in two pieces; nothing happens until it is whole.
//! server.receive_data(br#"{"jsontp":"1.0","type":"request","resource":"/hello.txt","#, now);
//! assert_eq!(server.next_event(now), None);
//! server.receive_data(br#""method":"GET","headers":{},"body":{"content":"","encoding":"identity"}}"#, now);
//!
//! let Some(ServerEvent::Request { id, request }) = server.next_event(now) else {
//!     panic!("a request");
//! };
//! assert_eq!(request.resource.path(), "/hello.txt");
//!
//! // The answer; the machine adds `date`, `language` and the echoed resource.
//! let response = Response::new(Status::new(StatusCode::OK, "here it is"))
//!     .with_body(Body::text("Hello, world!"));
//! server.send_response(id, response, now)?;
//!
//! let out = server.pending_output();
//! assert!(out.starts_with(br#"{"jsontp":"1.0","type":"response","status":{"code":200,"#));
//! assert!(out.ends_with(b"}\n"));
//! let written = out.len(); // as if the socket took every byte
//! server.consume_output(written, now);
//! // The whole response left: an access log would record it now.
//! assert_eq!(
//!     server.next_event(now),
//!     Some(ServerEvent::ResponseSent { id, bytes: written as u64 })
//! );
//! assert!(server.is_idle());
//!
//! // The peer half-closes; nothing is owed, so the connection is done.
//! server.receive_eof(now);
//! assert!(server.is_closed());
//! assert_eq!(server.next_event(now), Some(ServerEvent::Closed));
//! # Ok::<(), jsontp_protocol::machine::UsageError>(())
//! ```

mod client;
mod config;
mod core;
mod event;
mod output;
mod responses;
mod server;
pub mod table;

pub use client::ClientConnection;
pub use config::{ClientConfig, ContinuePolicy, Limits, Now, ServerConfig};
pub use core::Acknowledged;
pub use event::{ClientEvent, PeerError, RequestId, ServerEvent, UsageError};
pub use output::OutputCopy;
#[cfg(all(feature = "adapters", target_os = "linux"))]
pub(crate) use output::splices;
pub use server::ServerConnection;
