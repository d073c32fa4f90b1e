//! The client's drive step: every decision both clients share, once, and
//! the only calls into the machine on the client side.
//!
//! A call (`send`, `send_all`) queues its requests ([`ClientDriver::begin`]),
//! then steps until [`ClientStep::Done`], performing the waits the step
//! asks for, and collects the outcomes ([`ClientDriver::finish`]). The
//! blocking client steps over a blocking transport: a pending request goes
//! out first, bounded by a short slice, and reading takes over when the
//! server stops taking it (it may be waiting for us to read its
//! responses: a long pipeline must keep reading while it writes, or both
//! sides stop with full buffers). The async client steps over a polled
//! stream and waits for whichever comes first.

use std::time::{Duration, Instant};

use super::outstanding::{Deadlines, Outstanding};
use super::{Answer, ClientError, ClientOptions, Direction, Tracer};
use crate::io_adapters::now;
use crate::io_adapters::transport::{IoMode, Transport, is_reset, retime, socket_timeout, would_block};
use crate::machine::{ClientConnection, ClientEvent, RequestId, UsageError};
use crate::message::Request;

/// The most content read from an upload's source at once (D19).
pub(crate) const READ_PIECE: usize = 64 * 1024;

/// Where a call's streamed content comes from and goes to (D19): the
/// upload's reader, the download's writer. Without them content is held
/// in memory.
#[derive(Default)]
pub(crate) struct Streams<'a> {
    pub(crate) source: Option<&'a mut dyn std::io::Read>,
    pub(crate) sink: Option<&'a mut dyn std::io::Write>,
    buffer: Vec<u8>,
    /// The async client's: the sink is a buffer it empties after each
    /// piece ([`ClientStep::Drain`]), the source a [`Staged`] buffer it
    /// fills when it runs dry ([`ClientStep::Fill`]).
    staged: bool,
}

impl<'a> Streams<'a> {
    pub(crate) fn new(
        source: Option<&'a mut dyn std::io::Read>,
        sink: Option<&'a mut dyn std::io::Write>,
    ) -> Self {
        Streams {
            source,
            sink,
            buffer: Vec::new(),
            staged: false,
        }
    }

    /// Streams whose sink and source the caller moves between steps.
    #[cfg(feature = "tokio")]
    pub(crate) fn staged(source: Option<&'a mut Staged>, sink: Option<&'a mut Vec<u8>>) -> Self {
        Streams {
            source: source.map(|s| s as &mut dyn std::io::Read),
            sink: sink.map(|s| s as &mut dyn std::io::Write),
            buffer: Vec::new(),
            staged: true,
        }
    }
}

/// An upload's source as the async client stages it: what it read from
/// the real source and the step has not taken yet. Empty and not ended,
/// it answers `WouldBlock`, which the step turns into
/// [`ClientStep::Fill`].
#[cfg(feature = "tokio")]
#[derive(Debug, Default)]
pub(crate) struct Staged {
    pub(crate) bytes: Vec<u8>,
    taken: usize,
    /// The real source has ended.
    pub(crate) ended: bool,
    /// The real source failed: the step's next read meets this error.
    pub(crate) error: Option<std::io::Error>,
}

#[cfg(feature = "tokio")]
impl Staged {
    /// Whether everything staged was taken.
    pub(crate) fn is_empty(&self) -> bool {
        self.taken >= self.bytes.len()
    }

    /// Makes room for the next fill.
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.taken = 0;
    }
}

#[cfg(feature = "tokio")]
impl std::io::Read for Staged {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(error) = self.error.take() {
            return Err(error);
        }
        if self.is_empty() {
            return if self.ended {
                Ok(0)
            } else {
                Err(std::io::ErrorKind::WouldBlock.into())
            };
        }
        let n = buf.len().min(self.bytes.len() - self.taken);
        buf[..n].copy_from_slice(&self.bytes[self.taken..self.taken + n]);
        self.taken += n;
        Ok(n)
    }
}

/// How much one read of the server's stream takes: a large download
/// (D19) then costs a read per 64 KiB, not per 16.
pub(super) const READ_CHUNK: usize = 64 * 1024;

/// Blocking transports: the longest a write may block before the step
/// reads what the server sent meanwhile, and the longest that read blocks
/// before the step writes again.
const WRITE_SLICE: Duration = Duration::from_millis(20);

/// What a client does next in a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientStep {
    /// Wait until the transport is ready (each direction named answered
    /// `WouldBlock` in this step) or `deadline`, then step again. A
    /// blocking client has already waited in the timed-out call unless it
    /// waits for neither direction.
    Wait {
        read: bool,
        write: bool,
        deadline: Option<Instant>,
    },
    /// Every exchange of the call has its outcome.
    Done,
    /// Staged streams: a piece of content is in the sink buffer; write it
    /// out and empty the buffer, then step again.
    Drain,
    /// Staged streams: the upload's source buffer ran dry; fill it (or
    /// mark it ended), then step again.
    Fill,
}

/// One call under way: its exchanges and its clocks.
pub(crate) struct Call {
    outstanding: Outstanding,
    deadlines: Deadlines,
    /// The exchange whose request content streams from the source (D19).
    upload: Option<RequestId>,
}

/// One client connection: the machine and what the runtimes share.
pub(crate) struct ClientDriver {
    conn: ClientConnection,
    options: ClientOptions,
    mode: IoMode,
    /// The server ended its stream (or reset it).
    eof: bool,
    /// Writing failed with a reset: what the server sent before may still
    /// be readable, and the machine decides what it means.
    write_closed: bool,
    /// An error left the connection unusable.
    broken: bool,
    tracer: Option<Tracer>,
    /// The timeout last given to a blocking transport.
    timeout: Option<Option<Duration>>,
}

impl ClientDriver {
    pub(crate) fn new(options: ClientOptions, mode: IoMode) -> ClientDriver {
        ClientDriver {
            conn: ClientConnection::new(options.config.clone(), now()),
            options,
            mode,
            eof: false,
            write_closed: false,
            broken: false,
            tracer: None,
            timeout: None,
        }
    }

    pub(crate) fn options(&self) -> &ClientOptions {
        &self.options
    }

    pub(crate) fn set_tracer(&mut self, tracer: Tracer) {
        self.tracer = Some(tracer);
    }

    /// Whether the connection can take no more requests.
    pub(crate) fn is_closed(&self) -> bool {
        self.broken || self.conn.is_closed()
    }

    /// Queues `requests` on the machine, in order, each with its slot among
    /// the outcomes; a request the connection cannot take fails at once.
    pub(crate) fn begin(&mut self, requests: impl IntoIterator<Item = Request>) -> Call {
        let start = now();
        let mut outstanding = Outstanding::new(self.options.config.limits.message.max_decoded_body);
        for request in requests {
            if self.broken {
                outstanding.push_failed(ClientError::ConnectionClosed);
                continue;
            }
            match self.conn.send_request(request, start) {
                Ok(id) => outstanding.push(id),
                Err(UsageError::Closed) => outstanding.push_failed(ClientError::ConnectionClosed),
                Err(e) => outstanding.push_failed(ClientError::Usage(e)),
            }
        }
        Call {
            outstanding,
            deadlines: Deadlines::start(&self.options, start.instant),
            upload: None,
        }
    }

    /// Queues one request whose content `Streams::source` gives (D19):
    /// `request` is the head (its body's encoding and other keys).
    pub(crate) fn begin_upload(&mut self, request: Request) -> Call {
        let start = now();
        let mut outstanding = Outstanding::new(self.options.config.limits.message.max_decoded_body);
        let mut upload = None;
        if self.broken {
            outstanding.push_failed(ClientError::ConnectionClosed);
        } else {
            match self.conn.send_request_head(request, start) {
                Ok(id) => {
                    outstanding.push(id);
                    upload = Some(id);
                }
                Err(UsageError::Closed) => outstanding.push_failed(ClientError::ConnectionClosed),
                Err(e) => outstanding.push_failed(ClientError::Usage(e)),
            }
        }
        Call {
            outstanding,
            deadlines: Deadlines::start(&self.options, start.instant),
            upload,
        }
    }

    /// The outcomes of a finished call, in request order.
    pub(crate) fn finish(&mut self, call: Call) -> Vec<Result<Answer, ClientError>> {
        if call.outstanding.broke_connection() {
            self.broken = true;
        }
        call.outstanding.into_results()
    }

    /// Moves bytes and time until the call is done or must wait. What is
    /// still queued when the call is done (a full request after `100` that
    /// the server answered early) goes out with the next call.
    pub(crate) fn step<T: Transport + ?Sized>(
        &mut self,
        io: &mut T,
        scratch: &mut [u8],
        call: &mut Call,
        streams: &mut Streams<'_>,
    ) -> ClientStep {
        let mut write_blocked = false;
        let mut read_blocked = false;
        loop {
            let at = now();
            while let Some(event) = self.conn.next_event(at) {
                match (event, &mut streams.sink) {
                    // Downloaded content goes to the writer as it comes.
                    (ClientEvent::Content { data, .. }, Some(sink)) => {
                        if let Err(e) = sink.write_all(&data) {
                            return self.fail(call, ClientError::Sink(e));
                        }
                        if streams.staged {
                            return ClientStep::Drain;
                        }
                    }
                    (event, _) => call.outstanding.on_event(event),
                }
            }
            if call.outstanding.is_done() {
                return ClientStep::Done;
            }
            if self.conn.poll_timeout().is_some_and(|t| t <= at.instant) {
                self.conn.handle_timeout(at);
                continue;
            }
            let pending = !self.write_closed && !self.conn.pending_output().is_empty();
            if (self.conn.is_closed() || self.eof) && !pending {
                // The stream has ended or the machine has finished, and it
                // has said all it will about it: nothing more can come.
                call.outstanding.fail_rest(&ClientError::ClosedEarly);
                return ClientStep::Done;
            }
            if let Some(timeout) = call.deadlines.expired(at.instant) {
                return self.fail(call, ClientError::TimedOut(timeout));
            }
            let deadline = call.deadlines.next(self.conn.poll_timeout());
            let mut moved = false;

            if let (Some(id), Some(source)) = (call.upload, &mut streams.source) {
                let room = self.conn.content_room(id).min(READ_PIECE);
                if room > 0 {
                    if streams.buffer.len() < room {
                        streams.buffer.resize(room, 0);
                    }
                    moved = true;
                    match source.read(&mut streams.buffer[..room]) {
                        Ok(0) => {
                            call.upload = None;
                            let _ = self.conn.end_content(id, now());
                        }
                        Ok(n) => {
                            if let Err(e) = self.conn.send_content(id, &streams.buffer[..n], now()) {
                                return self.fail(call, ClientError::Usage(e));
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) if streams.staged && would_block(&e) => return ClientStep::Fill,
                        Err(e) => {
                            // The server sees the request cut short (D1).
                            self.conn.abort_content(id, now());
                            return self.fail(call, ClientError::Source(e));
                        }
                    }
                }
            }

            if pending && !write_blocked {
                if let Err(e) = self.bound(io, deadline, at.instant, true) {
                    return self.fail(call, ClientError::Io(e));
                }
                let out = self.conn.pending_output();
                match io.write(out) {
                    Ok(0) => return self.fail(call, ClientError::Io(std::io::ErrorKind::WriteZero.into())),
                    Ok(n) => {
                        if let Some(tracer) = self.tracer.as_mut() {
                            tracer(Direction::Sent, &out[..n]);
                        }
                        self.conn.consume_output(n, now());
                        moved = true;
                    }
                    Err(e) if would_block(&e) => write_blocked = true,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => moved = true,
                    Err(e) if is_reset(&e) => {
                        self.write_closed = true;
                        moved = true;
                    }
                    Err(e) => return self.fail(call, ClientError::Io(e)),
                }
            }

            let pending = !self.write_closed && !self.conn.pending_output().is_empty();
            let want_read = !self.eof && self.conn.wants_read();
            // Content still to read from the source counts as output: a
            // blocking read would hold it back (D19).
            let pending = pending
                || (!self.write_closed && call.upload.is_some_and(|id| self.conn.content_room(id) > 0));
            let read_turn = !self.mode.is_blocking() || !pending || write_blocked;
            if want_read && read_turn && !read_blocked {
                if let Err(e) = self.bound(io, deadline, at.instant, pending) {
                    return self.fail(call, ClientError::Io(e));
                }
                match io.read(scratch) {
                    Ok(0) => {
                        self.eof = true;
                        self.conn.receive_eof(now());
                        moved = true;
                    }
                    Ok(n) => {
                        let data = &scratch[..n];
                        if let Some(tracer) = self.tracer.as_mut() {
                            tracer(Direction::Received, data);
                        }
                        let at = now();
                        self.conn.receive_data(data, at);
                        call.deadlines.on_read(at.instant);
                        moved = true;
                    }
                    Err(e) if would_block(&e) => read_blocked = true,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => moved = true,
                    // A reset is an abrupt end of stream.
                    Err(e) if is_reset(&e) => {
                        self.eof = true;
                        self.conn.receive_eof(now());
                        moved = true;
                    }
                    Err(e) => return self.fail(call, ClientError::Io(e)),
                }
            }
            if moved {
                continue;
            }
            return ClientStep::Wait {
                read: want_read,
                write: pending,
                deadline,
            };
        }
    }

    /// Ends the call with `error` for every exchange still unanswered; the
    /// connection is unusable after it.
    pub(crate) fn fail(&mut self, call: &mut Call, error: ClientError) -> ClientStep {
        self.broken = true;
        call.outstanding.fail_rest(&error);
        ClientStep::Done
    }

    /// Blocking transports: a write, and a read while a write is pending,
    /// are bounded by [`WRITE_SLICE`]; a read with nothing to write waits
    /// until the nearest deadline.
    fn bound<T: Transport + ?Sized>(
        &mut self,
        io: &mut T,
        deadline: Option<Instant>,
        at: Instant,
        sliced: bool,
    ) -> std::io::Result<()> {
        if !self.mode.is_blocking() {
            return Ok(());
        }
        let until = deadline.map(|d| d.saturating_duration_since(at));
        let limit = match (until, sliced) {
            (Some(until), true) => Some(until.min(WRITE_SLICE)),
            (None, true) => Some(WRITE_SLICE),
            (until, false) => until,
        };
        let limit = limit.map(socket_timeout);
        if retime(self.timeout, limit) {
            io.set_timeout(limit)?;
            self.timeout = Some(limit);
        }
        Ok(())
    }
}
