//! The stream between the drive step and the ring, driven by the worker's
//! and the kernel's moves in any order they could come, against a model
//! of what it must have done; the kernel is played by the test, through a
//! pool that no ring takes buffers from.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::rc::Rc;

use proptest::prelude::*;

use super::super::ring::{BUFFER_SIZE, Completion, Op, Pool};
use super::{HELD_BUFFERS, Input, OUTBOX, Receive, RingStream, Sending};
use crate::io_adapters::transport::Transport;

/// What the worker and the kernel do to a stream, one at a time, in
/// any order the two could (the simulation below).
#[derive(Debug, Clone)]
enum Act {
    /// The worker queues the stream's I/O as `queue_io` does: a poll
    /// for room armed when wanted, the receive armed when wanted or
    /// cancelled while the stream holds too much.
    Queue,
    /// The kernel completes the receive with `len` bytes in a buffer;
    /// `more`: it stays armed.
    Receive { len: usize, more: bool },
    /// The kernel ends the receive without a buffer: the peer's end
    /// (0), the pool dry, the cancellation, or a failure.
    EndReceive(i32),
    /// The drive step reads into room for `len` bytes.
    Read(usize),
    /// The drive step writes `len` bytes.
    Write(usize),
    /// The worker submits the stream's next send, if it has one.
    Submit,
    /// The kernel completes the send: `eighths` of its bytes taken
    /// (at least one byte), or none and a failure (0).
    Sent(u8),
    /// The drive step sends `len` bytes of a copy; `sendfile`, if
    /// called, takes `eighths` of them (at least one), or finds the
    /// socket full (0).
    Copy { len: usize, eighths: u8 },
    /// The kernel completes the poll for room.
    Room,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        3 => Just(Act::Queue),
        3 => (1..=BUFFER_SIZE, any::<bool>()).prop_map(|(len, more)| Act::Receive { len, more }),
        1 => prop_oneof![Just(0), Just(-libc::ENOBUFS), Just(-libc::ECANCELED), Just(-libc::ECONNRESET)]
            .prop_map(Act::EndReceive),
        3 => (1..40_000usize).prop_map(Act::Read),
        3 => prop_oneof![1..2_000usize, OUTBOX - 100..OUTBOX + 100].prop_map(Act::Write),
        3 => Just(Act::Submit),
        3 => prop_oneof![5 => 1..=8u8, 1 => Just(0u8)].prop_map(Act::Sent),
        2 => (1..400_000usize, prop_oneof![4 => 1..=8u8, 1 => Just(0u8)])
            .prop_map(|(len, eighths)| Act::Copy { len, eighths }),
        1 => Just(Act::Room),
    ]
}

/// Buffers in the simulation's pool.
const POOL: u16 = 16;

/// What the stream must have done, kept the simple way.
struct Model {
    /// Every byte received while the peer's stream was open, and
    /// those read.
    received: Vec<u8>,
    read: usize,
    /// The buffers the stream holds: their ids and bytes unread.
    inbox: VecDeque<(u16, usize)>,
    input: Input,
    receive: Receive,
    /// Every byte the stream accepted, written or sent from a copy, in
    /// the order accepted; and those that reached the socket.
    accepted: Vec<u8>,
    wire: Vec<u8>,
    /// Bytes written and not yet handed to a send.
    outbox: usize,
    /// The send under way: its bytes.
    flight: Option<Vec<u8>>,
    /// What a short send left, to be sent again.
    short: usize,
    /// `sendfile` found the socket full (`Full`), the poll for room is
    /// armed (`Polling`), or neither (`Idle`).
    room: Sending,
    /// A send failed.
    failed: Option<i32>,
    /// The next byte written or copied: every byte accepted follows
    /// the one before it, so any other order shows.
    next: u8,
}

impl Model {
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len)
            .map(|_| {
                self.next = self.next.wrapping_add(1);
                self.next
            })
            .collect()
    }

    fn held_output(&self) -> bool {
        self.outbox > 0 || self.flight.is_some() || self.short > 0
    }

    /// A free buffer of the "kernel's".
    fn free_buffer(&self) -> Option<u16> {
        (0..POOL).find(|bid| self.inbox.iter().all(|(held, _)| held != bid))
    }
}

/// One act, done to the stream and to the model, with what the stream
/// answered checked against the model.
fn step(stream: &mut RingStream, pool: &Pool, model: &mut Model, act: Act) -> Result<(), TestCaseError> {
    match act {
        Act::Queue => {
            prop_assert_eq!(stream.wants_room(), model.room == Sending::Full);
            if stream.wants_room() {
                stream.polled();
                model.room = Sending::Polling;
            }
            let wants = model.input == Input::Open
                && model.receive == Receive::Idle
                && model.inbox.len() < HELD_BUFFERS;
            prop_assert_eq!(stream.wants_receive(), wants);
            let too_much = model.receive == Receive::Armed && model.inbox.len() >= HELD_BUFFERS;
            prop_assert_eq!(stream.holds_too_much(), too_much);
            if wants {
                stream.set_receive(Receive::Armed);
                model.receive = Receive::Armed;
            } else if too_much {
                stream.set_receive(Receive::Cancelling);
                model.receive = Receive::Cancelling;
            }
        }
        Act::Receive { len, more } => {
            let (Some(bid), false) = (model.free_buffer(), model.receive == Receive::Idle) else {
                return Ok(());
            };
            let bytes: Vec<u8> = (0..len)
                .map(|i| (model.received.len() + i) as u8 ^ 0x5a)
                .collect();
            pool.fill(bid, &bytes);
            let result = i32::try_from(len).expect("a buffer's length");
            stream.received(&Completion {
                op: Op::Recv(0),
                result,
                buffer: Some(bid),
                more,
            });
            if model.input == Input::Open {
                model.inbox.push_back((bid, len));
                model.received.extend_from_slice(&bytes);
            }
            if !more {
                model.receive = Receive::Idle;
            }
        }
        Act::EndReceive(result) => {
            if model.receive == Receive::Idle {
                return Ok(());
            }
            stream.received(&Completion {
                op: Op::Recv(0),
                result,
                buffer: None,
                more: false,
            });
            model.receive = Receive::Idle;
            if model.input == Input::Open {
                match result {
                    0 => model.input = Input::Ended,
                    e if e == -libc::ENOBUFS || e == -libc::ECANCELED => {}
                    e => model.input = Input::Failed(-e),
                }
            }
        }
        Act::Read(len) => {
            let mut room = vec![0; len];
            let unread: usize = model.inbox.iter().map(|(_, left)| left).sum();
            let n = unread.min(len);
            match (stream.read(&mut room), n, model.input) {
                (Ok(got), 1.., _) => {
                    prop_assert_eq!(got, n, "as much as was received and fits");
                    let want = &model.received[model.read..model.read + n];
                    prop_assert!(room[..n] == *want, "the bytes received, in order");
                }
                (Ok(0), 0, Input::Ended) => {}
                (Err(e), 0, Input::Open) => prop_assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
                (Err(e), 0, Input::Failed(errno)) => prop_assert_eq!(e.raw_os_error(), Some(errno)),
                (got, n, input) => prop_assert!(false, "read {got:?} with {n} unread and {input:?}"),
            }
            model.read += n;
            let mut taken = n;
            while let Some((_, left)) = model.inbox.front_mut() {
                let take = taken.min(*left);
                *left -= take;
                taken -= take;
                if *left > 0 {
                    break;
                }
                model.inbox.pop_front();
            }
        }
        Act::Write(len) => {
            let room = OUTBOX - model.outbox;
            let next = model.next;
            let bytes = model.bytes(len);
            let took = match (stream.write(&bytes), model.failed) {
                (Err(e), Some(errno)) => {
                    prop_assert_eq!(e.raw_os_error(), Some(errno));
                    0
                }
                (Err(e), None) => {
                    prop_assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
                    prop_assert_eq!(room, 0, "the outbox has room");
                    0
                }
                (Ok(took), None) => {
                    prop_assert_eq!(took, len.min(room), "all the outbox has room for");
                    model.accepted.extend_from_slice(&bytes[..took]);
                    model.outbox += took;
                    took
                }
                (Ok(took), Some(_)) => {
                    prop_assert!(false, "{took} bytes written after a failed send");
                    took
                }
            };
            // Bytes not taken are offered again, as the drive step does.
            model.next = next.wrapping_add((took % 256) as u8);
        }
        Act::Submit => {
            let due = model.flight.is_none()
                && model.failed.is_none()
                && (model.short > 0 || (model.outbox > 0 && model.room == Sending::Idle));
            match stream.next_send() {
                Some(bytes) => {
                    prop_assert!(due, "a send only when one is due");
                    let at = model.wire.len();
                    prop_assert!(
                        bytes == &model.accepted[at..at + bytes.len()],
                        "the bytes after those sent, in order"
                    );
                    if model.short > 0 {
                        prop_assert_eq!(bytes.len(), model.short, "a short send's rest");
                        model.short = 0;
                    } else {
                        prop_assert_eq!(bytes.len(), model.outbox, "the whole outbox");
                        model.outbox = 0;
                    }
                    model.flight = Some(bytes.to_vec());
                }
                None => prop_assert!(!due, "a send is due"),
            }
        }
        Act::Sent(eighths) => {
            let Some(flight) = model.flight.take() else {
                return Ok(());
            };
            if eighths == 0 {
                stream.sent(-libc::EPIPE);
                model.failed = Some(libc::EPIPE);
                model.outbox = 0;
            } else {
                let n = (flight.len() * usize::from(eighths)).div_ceil(8);
                stream.sent(i32::try_from(n).expect("a send's length"));
                model.wire.extend_from_slice(&flight[..n]);
                model.short = flight.len() - n;
            }
        }
        Act::Copy { len, eighths } => {
            let can = model.failed.is_none() && model.room == Sending::Idle && !model.held_output();
            let (mut called, mut all_left) = (false, false);
            let sent = stream.send_from(|_| {
                called = true;
                all_left = model.wire.len() == model.accepted.len();
                Some(match eighths {
                    0 => Err(io::ErrorKind::WouldBlock.into()),
                    _ => Ok((len * usize::from(eighths)).div_ceil(8)),
                })
            });
            prop_assert_eq!(called, can, "sendfile exactly when all before it has left");
            prop_assert!(
                !called || all_left,
                "sendfile while bytes before the copy are held"
            );
            match (sent.expect("a file"), called, model.failed) {
                (Ok(n), true, _) => {
                    let bytes = model.bytes(n);
                    model.accepted.extend_from_slice(&bytes);
                    model.wire.extend_from_slice(&bytes);
                }
                (Err(e), true, _) => {
                    prop_assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
                    model.room = Sending::Full;
                }
                (Err(e), false, Some(errno)) => prop_assert_eq!(e.raw_os_error(), Some(errno)),
                (Err(e), false, None) => prop_assert_eq!(e.kind(), io::ErrorKind::WouldBlock),
                (Ok(n), false, _) => prop_assert!(false, "{n} bytes sent without sendfile"),
            }
        }
        Act::Room => {
            if model.room == Sending::Polling {
                stream.room();
                model.room = Sending::Idle;
            }
        }
    }
    let in_flight =
        model.flight.is_some() || model.room == Sending::Polling || model.receive != Receive::Idle;
    prop_assert_eq!(
        stream.in_flight(),
        in_flight,
        "kept exactly while the ring names it"
    );
    prop_assert_eq!(stream.sending(), model.flight.is_some());
    prop_assert_eq!(stream.holds_output(), model.held_output());
    let held = u16::try_from(model.inbox.len()).expect("a pool's count");
    prop_assert_eq!(pool.free(), POOL - held, "every buffer read is back in the pool");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The stream between the drive step and the ring, driven by the
    /// worker's and the kernel's moves in any order they could come:
    /// the bytes read are those received, in order; the bytes that
    /// reach the socket are those accepted, in order, a copy's only
    /// once everything before it has left; the stream is kept exactly
    /// while an operation of the ring names it; every buffer goes back
    /// to the pool; and once the ring's operations are done, nothing
    /// accepted is lost and the sending side can be shut.
    #[test]
    fn the_stream_keeps_order_and_buffers_whatever_the_ring_does(acts in proptest::collection::vec(act(), 1..120)) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let _peer = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (socket, _) = listener.accept().expect("accept");
        let pool = Pool::unregistered(POOL);
        let mut stream = RingStream::new(socket, Rc::clone(&pool));
        let mut model = Model {
            received: Vec::new(),
            read: 0,
            inbox: VecDeque::new(),
            input: Input::Open,
            receive: Receive::Idle,
            accepted: Vec::new(),
            wire: Vec::new(),
            outbox: 0,
            flight: None,
            short: 0,
            room: Sending::Idle,
            failed: None,
            next: 0,
        };
        for act in acts {
            step(&mut stream, &pool, &mut model, act)?;
        }
        // The connection closes: the ring's operations complete, the
        // sends whole, until nothing names the stream.
        for _ in 0..4 {
            for act in [Act::Sent(8), Act::Queue, Act::Room, Act::Submit, Act::Sent(8), Act::EndReceive(-libc::ECANCELED)] {
                step(&mut stream, &pool, &mut model, act)?;
            }
        }
        prop_assert!(!stream.in_flight());
        match model.failed {
            None => {
                prop_assert!(model.wire == model.accepted, "nothing accepted is lost");
                prop_assert!(stream.shutdown_write().is_ok(), "nothing held back the shutdown");
            }
            Some(errno) => {
                let failed = stream.shutdown_write().expect_err("the send failed");
                prop_assert_eq!(failed.raw_os_error(), Some(errno), "the send's failure, not a wait");
            }
        }
        drop(stream);
        prop_assert_eq!(pool.free(), POOL, "every buffer is back");
    }
}
