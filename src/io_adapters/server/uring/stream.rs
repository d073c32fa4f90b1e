//! A connection's socket as the drive step sees it through the ring: a
//! non-blocking [`Transport`] over memory. Reads take what the ring's
//! receive completions left in the pool's buffers; writes fill an outbox
//! that the worker sends with one send entry per connection, every
//! connection's together, once per round of its loop. A prepared body's
//! sealed copy ([`Transport::send_copy`]) goes from its file with a direct
//! `sendfile` on the (non-blocking) socket, once nothing of the outbox is
//! left to send, so that the bytes keep their order. "Would block" means
//! nothing received yet, the outbox full, the outbox still to send before
//! a copy, or the socket full for `sendfile`; the completions that change
//! that (a receive, a send, a poll for room) give the connection its next
//! turn.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::rc::Rc;
use std::time::Duration;

use super::ring::{Completion, Pool};
use crate::io_adapters::server::watch::peer_gone;
use crate::io_adapters::transport::{Transport, tcp_acknowledged};
use crate::machine::{Acknowledged, OutputCopy};

/// Bytes the outbox takes before writes would block: the drive step's
/// output goes out in sends of at most this much, while the previous
/// one is under way.
const OUTBOX: usize = 256 * 1024;
/// Received buffers a connection may hold unread before its receive is
/// cancelled until it has read them: one connection whose handler is slow
/// to take its input cannot keep the pool's buffers from the others.
const HELD_BUFFERS: usize = 4;
/// Capacity an outbox keeps once sent, for the next answers: more (a
/// large answer's) is given back, so that an idle connection stays small.
const KEPT: usize = 16 * 1024;

/// Bytes received into a pool buffer, not yet read.
#[derive(Debug)]
struct Received {
    bid: u16,
    start: usize,
    end: usize,
}

/// The peer's side of the stream, as the receive completions tell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    Open,
    /// The peer ended its stream: read as 0 once the bytes before are read.
    Ended,
    /// The receive failed with this `errno`.
    Failed(i32),
}

/// The connection's multishot receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Receive {
    /// Not armed: before the first, after the last completion of one, or
    /// while the connection holds [`HELD_BUFFERS`] unread.
    Idle,
    /// Armed: completions bring bytes.
    Armed,
    /// A cancellation asked for; its last completion is still to come.
    Cancelling,
}

/// The connection's send: of the outbox through the ring, or of a copy
/// with `sendfile`, never both at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sending {
    /// None under way.
    Idle,
    /// `flight[sent..]` is being sent.
    Submitted { sent: usize },
    /// The kernel took `flight[..sent]` of it: the rest is to be sent
    /// again.
    Short { sent: usize },
    /// `sendfile` found the socket full: a poll for room is to be armed.
    Full,
    /// The poll for room is armed; its completion brings the next turn.
    Polling,
    /// A send failed with this `errno`: nothing more can be sent.
    Failed(i32),
}

/// One client's socket, read and written through the ring.
pub(super) struct RingStream {
    socket: TcpStream,
    pool: Rc<Pool>,
    inbox: VecDeque<Received>,
    input: Input,
    receive: Receive,
    /// Written, not yet handed to a send.
    outbox: Vec<u8>,
    /// What the send under way sends: left untouched until its completion.
    flight: Vec<u8>,
    sending: Sending,
}

impl std::fmt::Debug for RingStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingStream")
            .field("socket", &self.socket)
            .field("input", &self.input)
            .field("receive", &self.receive)
            .field("sending", &self.sending)
            .finish_non_exhaustive()
    }
}

impl RingStream {
    pub(super) fn new(socket: TcpStream, pool: Rc<Pool>) -> RingStream {
        RingStream {
            socket,
            pool,
            inbox: VecDeque::new(),
            input: Input::Open,
            receive: Receive::Idle,
            outbox: Vec::new(),
            flight: Vec::new(),
            sending: Sending::Idle,
        }
    }

    pub(super) fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    pub(super) fn socket(&self) -> &TcpStream {
        &self.socket
    }

    /// Takes in a receive's completion.
    pub(super) fn received(&mut self, done: &Completion) {
        if let Some(bid) = done.buffer {
            self.pool.taken();
            match usize::try_from(done.result) {
                Ok(len) if len > 0 && self.input == Input::Open => self.inbox.push_back(Received {
                    bid,
                    start: 0,
                    end: len,
                }),
                _ => self.pool.give_back(bid),
            }
        }
        match done.result {
            0 if self.input == Input::Open => self.input = Input::Ended,
            // The pool ran dry (re-armed once buffers are back), or we
            // cancelled it.
            e if e == -libc::ENOBUFS || e == -libc::ECANCELED => {}
            e if e < 0 && self.input == Input::Open => self.input = Input::Failed(-e),
            _ => {}
        }
        if !done.more {
            self.receive = Receive::Idle;
        }
    }

    /// Whether to arm a receive now: the peer's stream is open, none is
    /// armed, and the connection holds few buffers unread.
    pub(super) fn wants_receive(&self) -> bool {
        self.input == Input::Open && self.receive == Receive::Idle && self.inbox.len() < HELD_BUFFERS
    }

    /// Whether to cancel the armed receive: the connection holds enough
    /// unread.
    pub(super) fn holds_too_much(&self) -> bool {
        self.receive == Receive::Armed && self.inbox.len() >= HELD_BUFFERS
    }

    pub(super) fn set_receive(&mut self, receive: Receive) {
        self.receive = receive;
    }

    pub(super) fn receive(&self) -> Receive {
        self.receive
    }

    /// The bytes to send next, if no send is under way and there are
    /// any: the caller submits a send of them and keeps the stream (and so
    /// them) until its completion.
    pub(super) fn next_send(&mut self) -> Option<&[u8]> {
        let sent = match self.sending {
            Sending::Idle if !self.outbox.is_empty() => {
                self.flight.clear();
                std::mem::swap(&mut self.flight, &mut self.outbox);
                if self.outbox.capacity() > KEPT {
                    self.outbox = Vec::new();
                }
                0
            }
            Sending::Short { sent } => sent,
            _ => return None,
        };
        self.sending = Sending::Submitted { sent };
        Some(&self.flight[sent..])
    }

    /// Takes in a send's completion.
    pub(super) fn sent(&mut self, result: i32) {
        let Sending::Submitted { sent } = self.sending else {
            return;
        };
        self.sending = match usize::try_from(result) {
            Ok(n) if sent + n < self.flight.len() => Sending::Short { sent: sent + n },
            Ok(_) => Sending::Idle,
            Err(_) => Sending::Failed(-result),
        };
        match self.sending {
            // Nothing written can leave any more: it is not held for a
            // send to come (the shutdown would wait for one).
            Sending::Failed(_) => (self.outbox, self.flight) = (Vec::new(), Vec::new()),
            Sending::Idle if self.flight.capacity() > KEPT => self.flight = Vec::new(),
            _ => {}
        }
    }

    /// Whether a send failed: the drive step learns it at its next write.
    pub(super) fn send_failed(&self) -> bool {
        matches!(self.sending, Sending::Failed(_))
    }

    /// Whether the peer is gone, as far as the ring has told: its receive
    /// failed with a reset, or a send failed (nothing more reaches it).
    pub(super) fn peer_left(&self) -> bool {
        let reset =
            matches!(self.input, Input::Failed(errno) if peer_gone(&io::Error::from_raw_os_error(errno)));
        reset || self.send_failed()
    }

    /// Whether a send is under way, whose bytes the kernel reads.
    pub(super) fn sending(&self) -> bool {
        matches!(self.sending, Sending::Submitted { .. })
    }

    /// Whether to arm a poll for room in the socket: `sendfile` found it
    /// full. The caller arms it, then calls [`polled`](Self::polled).
    pub(super) fn wants_room(&self) -> bool {
        self.sending == Sending::Full
    }

    /// The poll for room is armed.
    pub(super) fn polled(&mut self) {
        if self.sending == Sending::Full {
            self.sending = Sending::Polling;
        }
    }

    /// Whether the poll for room is armed (to be cancelled at the close).
    pub(super) fn polling(&self) -> bool {
        self.sending == Sending::Polling
    }

    /// Takes in the poll's completion: room, the socket's end, or its
    /// cancellation. The next `sendfile` tells which.
    pub(super) fn room(&mut self) {
        if self.sending == Sending::Polling {
            self.sending = Sending::Idle;
        }
    }

    /// Whether an operation of the ring still names this stream: it must
    /// be kept until the last completion.
    pub(super) fn in_flight(&self) -> bool {
        self.sending() || self.polling() || self.receive != Receive::Idle
    }

    /// Sends from a file with `send`, given the socket, once nothing of
    /// the outbox is left to send before it: until then, and while the
    /// socket is full, it would block. `None` (the copy is not a file)
    /// is passed on.
    fn send_from(
        &mut self,
        send: impl FnOnce(BorrowedFd<'_>) -> Option<io::Result<usize>>,
    ) -> Option<io::Result<usize>> {
        match self.sending {
            Sending::Idle if self.outbox.is_empty() => {}
            Sending::Failed(errno) => return Some(Err(io::Error::from_raw_os_error(errno))),
            // The outbox's bytes come first (the send's completion brings
            // the next turn), or the socket is full (the poll's does).
            _ => return Some(Err(io::ErrorKind::WouldBlock.into())),
        }
        let sent = send(self.socket.as_fd())?;
        if matches!(&sent, Err(e) if e.kind() == io::ErrorKind::WouldBlock) {
            self.sending = Sending::Full;
        }
        Some(sent)
    }

    /// Whether the peer's stream may bring more bytes: it has neither
    /// ended nor failed.
    pub(super) fn input_open(&self) -> bool {
        self.input == Input::Open
    }

    /// Whether bytes have arrived that the drive step has not read: in
    /// the inbox, or still in the socket, not yet received by the ring.
    pub(super) fn has_unread(&self) -> bool {
        use rustix::net::{RecvFlags, recv};
        let mut byte = [0u8; 1];
        let peeked = recv(&self.socket, &mut byte, RecvFlags::PEEK | RecvFlags::DONTWAIT);
        !self.inbox.is_empty() || matches!(peeked, Ok((n, _)) if n > 0)
    }

    /// Bytes written and not yet taken by the kernel (`sendfile` hands
    /// the kernel its bytes in the call).
    fn holds_output(&self) -> bool {
        !self.outbox.is_empty() || matches!(self.sending, Sending::Submitted { .. } | Sending::Short { .. })
    }
}

impl Drop for RingStream {
    fn drop(&mut self) {
        for received in self.inbox.drain(..) {
            self.pool.give_back(received.bid);
        }
    }
}

impl Read for RingStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        while n < buf.len()
            && let Some(front) = self.inbox.front_mut()
        {
            let take = (front.end - front.start).min(buf.len() - n);
            let bytes = self.pool.bytes(front.bid, front.end);
            buf[n..n + take].copy_from_slice(&bytes[front.start..front.start + take]);
            n += take;
            front.start += take;
            if front.start == front.end {
                let bid = front.bid;
                self.inbox.pop_front();
                self.pool.give_back(bid);
            }
        }
        match self.input {
            _ if n > 0 => Ok(n),
            Input::Open => Err(io::ErrorKind::WouldBlock.into()),
            Input::Ended => Ok(0),
            Input::Failed(errno) => Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

impl Write for RingStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[io::IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        if let Sending::Failed(errno) = self.sending {
            return Err(io::Error::from_raw_os_error(errno));
        }
        let mut n = 0;
        for buf in bufs {
            let room = OUTBOX.saturating_sub(self.outbox.len());
            let take = buf.len().min(room);
            self.outbox.extend_from_slice(&buf[..take]);
            n += take;
            if take < buf.len() {
                break;
            }
        }
        if n == 0 && bufs.iter().any(|buf| !buf.is_empty()) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Transport for RingStream {
    /// Shuts the socket's sending side once the outbox is sent: until
    /// then it would block, and the send's completion brings the next
    /// turn. After a failed send, nothing will come: the failure.
    fn shutdown_write(&mut self) -> io::Result<()> {
        if let Sending::Failed(errno) = self.sending {
            return Err(io::Error::from_raw_os_error(errno));
        }
        if self.holds_output() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.socket.shutdown(Shutdown::Write)
    }

    fn set_timeout(&mut self, _limit: Option<Duration>) -> io::Result<()> {
        Ok(())
    }

    /// The kernel's count, and the outbox: bytes written here are not yet
    /// in the socket.
    fn acknowledged(&self) -> Option<Acknowledged> {
        let told = tcp_acknowledged(self.socket.as_fd())?;
        Some(Acknowledged {
            bytes: told.bytes,
            holds_more: told.holds_more || self.holds_output(),
        })
    }

    /// Sends a prepared body's sealed copy from its file with `sendfile`,
    /// in order after the outbox (see [`send_from`](Self::send_from)).
    fn send_copy(&mut self, pending: OutputCopy<'_>) -> Option<io::Result<usize>> {
        pending.file()?;
        self.send_from(|socket| crate::io_adapters::sendfile::send(socket, pending))
    }
}

#[cfg(test)]
mod simulation;

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::super::ring::{Op, Ring};
    use super::*;

    /// A stream over a loopback connection, with the ring whose pool it
    /// reads from.
    fn stream() -> (RingStream, TcpStream, Ring) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let peer = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (socket, _) = listener.accept().expect("accept");
        let ring = Ring::new(8, 8).expect("io_uring");
        (RingStream::new(socket, Rc::clone(ring.pool())), peer, ring)
    }

    #[test]
    fn writes_fill_the_outbox_then_would_block_and_shutting_waits_for_the_send() {
        let (mut stream, _peer, _ring) = stream();
        let big = vec![b'x'; OUTBOX + 10];
        assert_eq!(stream.write(&big).expect("taken"), OUTBOX);
        let full = stream.write(b"more").expect_err("the outbox is full");
        assert_eq!(full.kind(), io::ErrorKind::WouldBlock);
        // Our side is shut only once what was written has left.
        let held = stream.shutdown_write().expect_err("output held");
        assert_eq!(held.kind(), io::ErrorKind::WouldBlock);
        assert!(stream.acknowledged().is_none_or(|told| told.holds_more));
        // A send takes it all; its completion frees the outbox.
        assert_eq!(stream.next_send().map(<[u8]>::len), Some(OUTBOX));
        assert!(stream.next_send().is_none(), "one send at a time");
        assert_eq!(stream.write(b"more").expect("room again"), 4);
        stream.sent(i32::try_from(OUTBOX - 6).expect("fits"));
        assert_eq!(
            stream.next_send().map(<[u8]>::len),
            Some(6),
            "the rest of a short send"
        );
        stream.sent(6);
        assert_eq!(stream.next_send(), Some(&b"more"[..]));
        stream.sent(4);
        stream.shutdown_write().expect("nothing held");
        // A large answer's buffers are not kept by an idle connection.
        assert!(stream.outbox.capacity() <= KEPT && stream.flight.capacity() <= KEPT);
    }

    #[test]
    fn reads_take_what_the_ring_received_then_the_end() {
        let (mut stream, mut peer, mut ring) = stream();
        let mut buf = [0u8; 4];
        let nothing = stream.read(&mut buf).expect_err("nothing received");
        assert_eq!(nothing.kind(), io::ErrorKind::WouldBlock);
        assert!(stream.wants_receive());
        peer.write_all(b"abcdef").expect("sent");
        peer.shutdown(Shutdown::Write).expect("our end");
        ring.receive(stream.fd(), 0).expect("armed");
        stream.set_receive(Receive::Armed);
        // The bytes, then the end: the receive's last completion.
        while stream.in_flight() {
            let mut done = Vec::new();
            ring.complete(1, |completion| done.push(completion))
                .expect("completions");
            for completion in &done {
                stream.received(completion);
            }
        }
        assert_eq!(stream.read(&mut buf).expect("bytes"), 4);
        assert_eq!(&buf, b"abcd");
        assert_eq!(stream.read(&mut buf).expect("the rest"), 2);
        assert_eq!(&buf[..2], b"ef");
        assert_eq!(stream.read(&mut buf).expect("the end"), 0);
        assert!(!stream.wants_receive(), "the peer's stream is over");
        assert!(ring.pool().has_free(), "the buffer is back in the pool");
    }

    /// A sealed-like file of `len` bytes of `y`, and a `sendfile` of it
    /// from `offset` for [`RingStream::send_from`].
    fn file(len: usize) -> std::fs::File {
        let fd = rustix::fs::memfd_create("ring-test", rustix::fs::MemfdFlags::CLOEXEC).expect("memfd");
        let mut file = std::fs::File::from(fd);
        file.write_all(&vec![b'y'; len]).expect("written");
        file
    }

    fn sendfile(
        file: &std::fs::File,
        offset: usize,
        len: usize,
    ) -> impl FnOnce(BorrowedFd<'_>) -> Option<io::Result<usize>> + '_ {
        move |socket| {
            let mut at = offset as u64;
            Some(rustix::fs::sendfile(socket, file, Some(&mut at), len).map_err(io::Error::from))
        }
    }

    /// Takes completions until one of `op` (bounded by the ring's timer).
    fn until(ring: &mut Ring, op: Op) -> Completion {
        ring.time(Duration::from_secs(10), false).expect("timer");
        loop {
            let mut done = Vec::new();
            ring.complete(1, |completion| done.push(completion))
                .expect("completions");
            assert!(
                done.iter().all(|c| c.op != Op::Timer),
                "no completion of {op:?} in time"
            );
            if let Some(found) = done.iter().find(|c| c.op == op) {
                return *found;
            }
        }
    }

    /// Fills the socket by `sendfile` from `at` until it would block;
    /// where it stopped.
    fn fill(stream: &mut RingStream, file: &std::fs::File, mut at: usize, len: usize) -> usize {
        loop {
            match stream.send_from(sendfile(file, at, len - at)).expect("a file") {
                Ok(n) => {
                    assert!(n > 0 && at + n < len, "the socket never filled");
                    at += n;
                }
                Err(e) => {
                    assert_eq!(e.kind(), io::ErrorKind::WouldBlock, "{e}");
                    return at;
                }
            }
        }
    }

    #[test]
    fn a_copy_goes_by_sendfile_after_the_outbox_and_waits_for_room_in_a_full_socket() {
        let (mut stream, mut peer, mut ring) = stream();
        stream.socket.set_nonblocking(true).expect("non-blocking");
        rustix::net::sockopt::set_socket_send_buffer_size(&stream.socket, 16 * 1024).expect("small");
        let len = 8 << 20;
        let copy = file(len);
        stream.write_all(b"head").expect("taken");
        // The outbox's bytes go first: the copy would block until they are
        // sent, and nothing but the send's completion is awaited.
        let first = stream.send_from(sendfile(&copy, 0, len)).expect("a file");
        assert_eq!(
            first.expect_err("the outbox first").kind(),
            io::ErrorKind::WouldBlock
        );
        assert!(!stream.wants_room());
        let fd = stream.fd();
        let bytes = stream.next_send().expect("the outbox");
        // SAFETY: the bytes are the stream's, untouched until the send's
        // completion, taken in below.
        #[allow(unsafe_code)]
        unsafe { ring.send(fd, bytes, 0) }.expect("queued");
        stream.sent(until(&mut ring, Op::Send(0)).result);
        // Then the copy, until the socket is full: a poll for room is due,
        // and the stream is kept while it is armed.
        let at = fill(&mut stream, &copy, 0, len);
        assert!(stream.wants_room() && !stream.in_flight());
        ring.poll_room(fd, 0).expect("armed");
        stream.polled();
        assert!(stream.in_flight() && !stream.wants_room());
        let waiting = stream.send_from(|_| panic!("no sendfile while the poll is armed"));
        assert_eq!(
            waiting.expect("a file").expect_err("full").kind(),
            io::ErrorKind::WouldBlock
        );
        // The peer reads, in order: the poll completes, the copy goes on.
        let mut got = vec![0; at + 4];
        peer.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("bounded");
        peer.read_exact(&mut got).expect("what was sent");
        assert!(got.starts_with(b"head") && got[4..].iter().all(|&b| b == b'y'));
        until(&mut ring, Op::Room(0));
        stream.room();
        assert!(!stream.in_flight());
        let more = stream.send_from(sendfile(&copy, at, len - at)).expect("a file");
        assert!(more.expect("room") > 0);
        // Full again, and closed: the poll is cancelled, and the stream
        // kept until its completion.
        fill(&mut stream, &copy, at, len);
        ring.poll_room(fd, 0).expect("armed");
        stream.polled();
        ring.cancel(Op::Room(0)).expect("cancelled");
        assert_eq!(until(&mut ring, Op::Room(0)).result, -libc::ECANCELED);
        stream.room();
        assert!(!stream.in_flight());
    }

    #[test]
    fn a_send_that_fails_fails_the_writes_after_it() {
        let (mut stream, _peer, _ring) = stream();
        stream.write_all(b"answer").expect("taken");
        assert!(stream.next_send().is_some());
        stream.sent(-libc::EPIPE);
        assert!(!stream.sending());
        let failed = stream.write(b"next").expect_err("the peer is gone");
        assert_eq!(failed.raw_os_error(), Some(libc::EPIPE));
    }
}
