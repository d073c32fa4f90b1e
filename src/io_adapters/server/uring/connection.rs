//! What a worker does for each of its connections: takes it in, takes in
//! its completions, gives it turns of the drive step (or, while an `async`
//! answer is awaited, polls it and watches the peer), reads its PROXY
//! header (D21), keeps its deadline in the worker's set, queues its sends
//! and receives on the ring, and closes it once the ring is done with its
//! socket.

use std::net::TcpStream;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use super::MODE;
use super::ring::{Completion, Op};
use super::stream::{Receive, RingStream};
use super::worker::{Client, Output, Slot, Stage, Worker};
use crate::io_adapters::server::mio::awaited::Awaited;
use crate::io_adapters::server::mio::connection::{HeaderRead, read_proxy_header};
use crate::io_adapters::server::mio::deadlines::Deadline;
use crate::io_adapters::server::mio::paused::Paused;
use crate::io_adapters::server::mio::shared::Mail;
use crate::io_adapters::server::{Accepted, CloseCause, Driver, Handler, Step};

impl<H: Handler> Worker<H> {
    /// Serves a client accepted under the cap.
    pub(super) fn add(&mut self, socket: TcpStream) {
        self.settings.count_accepted();
        let _ = socket.set_nodelay(true);
        // `sendfile` on it must answer that it would block, not wait: the
        // ring's operations on a socket do not block either way.
        if let Err(e) = socket.set_nonblocking(true) {
            tracing::warn!(error = %e, "a client's socket could not be made non-blocking: not served");
            self.settings.count_unserved(CloseCause::TransportFailed);
            self.shared.release();
            return;
        }
        let peer = socket.peer_addr();
        let stream = Accepted::new(
            RingStream::new(socket, Rc::clone(self.ring.pool())),
            &self.options,
        );
        let (Ok(peer), Ok(stream)) = (peer, stream) else {
            // The client is gone already, or its TLS session could not be
            // set up.
            self.settings.count_unserved(CloseCause::TransportFailed);
            self.shared.release();
            return;
        };
        let slot = self.free.pop().unwrap_or(self.slots.len());
        self.sockets.add(stream.get_ref().socket());
        let member = self.shared.roster.enroll(Mail {
            mailbox: Arc::clone(&self.mailbox),
            slot,
        });
        let client = Client {
            driver: Driver::with_settings(peer, &self.settings, MODE),
            stream,
            member,
            paused: Paused::header_due(&self.options),
            deadline: Deadline::default(),
            round: self.round,
            // No round yet: rounds count up from 0.
            touched: u64::MAX,
            output: Output::Waiting,
        };
        if slot == self.slots.len() {
            self.slots.push(Slot::Serving(Box::new(client)));
        } else {
            self.slots[slot] = Slot::Serving(Box::new(client));
        }
        self.drive(slot);
    }

    /// Takes in a receive's, send's or poll for room's completion for the
    /// connection in `slot`; frees the slot once a closed connection's last
    /// one is in.
    pub(super) fn completed(&mut self, slot: usize, done: &Completion) {
        let (stream, driver) = match self.slots.get_mut(slot) {
            Some(Slot::Serving(client)) => (client.stream.get_mut(), Some(&mut client.driver)),
            Some(Slot::Closing(stream)) => (stream.get_mut(), None),
            _ => return,
        };
        match done.op {
            Op::Recv(_) => {
                stream.received(done);
                if let Some(driver) = driver
                    && !stream.input_open()
                {
                    // A short read no longer shows the buffers emptied of
                    // everything the peer will send (see `MODE`).
                    driver.peer_closed_reading();
                }
            }
            Op::Room(_) => stream.room(),
            _ => stream.sent(done.result),
        }
        match &self.slots[slot] {
            // A send that completed while the drive step waits only to
            // read changes nothing it waits for: the rest of a short one
            // is sent, and the turn skipped (a failure is the step's to
            // see).
            Slot::Serving(client)
                if matches!(done.op, Op::Send(_))
                    && client.output == Output::Handed
                    && !client.stream.get_ref().send_failed() =>
            {
                self.queue_io(slot);
            }
            Slot::Serving(_) => self.touch(slot),
            Slot::Closing(stream) if !stream.get_ref().in_flight() => {
                let Slot::Closing(stream) = std::mem::replace(&mut self.slots[slot], Slot::Vacant) else {
                    return;
                };
                // Out of the set before it closes (dropped here).
                self.sockets.remove(stream.get_ref().socket());
                drop(stream);
                self.free.push(slot);
            }
            _ => {}
        }
    }

    /// Gives the client its turn of this round, unless it had it.
    pub(super) fn turn(&mut self, slot: usize) {
        let round = self.round;
        let Some(Slot::Serving(client)) = self.slots.get_mut(slot) else {
            return;
        };
        if client.round == round {
            // Had its turn: the next round, then.
            if !self.again.contains(&slot) {
                self.again.push(slot);
            }
            return;
        }
        client.round = round;
        self.drive(slot);
    }

    /// Performs what the drive step asks until the connection waits,
    /// yields its turn, or closes; then queues the I/O it left for the
    /// ring. While an answer is awaited, the step waits for it: the turn
    /// polls it and watches the peer (its receive stays armed, what it
    /// sends ahead held in the stream, up to `HELD_BUFFERS`).
    pub(super) fn drive(&mut self, slot: usize) {
        if !self.read_header(slot) {
            return self.queue_io(slot);
        }
        loop {
            let Some(Slot::Serving(client)) = self.slots.get_mut(slot) else {
                return;
            };
            // A reset peer, or one no send reaches any more, has no
            // answer to wait for.
            let gone = |stream: &Accepted<RingStream>| stream.get_ref().peer_left();
            if let Some(awaiting) =
                Paused::turn_answer(&mut client.paused, &mut client.driver, &mut client.stream, gone)
            {
                // A full outbox: its send's completion brings the next
                // turn, to write on.
                if awaiting.writing {
                    client.output = Output::Waiting;
                }
                self.set_timer(slot, awaiting.until);
                // A probe's newline goes with this round's sends; its
                // failure, a completion, brings the next turn.
                return self.queue_io(slot);
            }
            match client.driver.step(&mut client.stream, &mut self.scratch) {
                Step::Dispatch => {
                    if let Some(deferred) = client.driver.dispatch_handing_out(&*self.handler) {
                        let waker = self.mailbox.answer_waker(slot);
                        client.paused = Some(Box::new(Paused::Answer(Awaited::new(deferred, waker))));
                    }
                }
                Step::Wait { deadline, write, .. } => {
                    // A TLS session holds records the outbox would not
                    // take, sent at its next call, whatever the step says.
                    let plain = matches!(client.stream, Accepted::Plain(_));
                    client.output = if write || !plain {
                        Output::Waiting
                    } else {
                        Output::Handed
                    };
                    self.set_timer(slot, deadline);
                    self.settle(slot);
                    return self.queue_io(slot);
                }
                Step::Yield => {
                    client.output = Output::Waiting;
                    if !self.again.contains(&slot) {
                        self.again.push(slot);
                    }
                    return self.queue_io(slot);
                }
                Step::Close => return self.close(slot),
            }
        }
    }

    /// Queues what the connection's socket needs of the ring: the send of
    /// what it wrote (submitted with every other connection's at the next
    /// round) or the poll for room that `sendfile` found missing, and its
    /// receive armed, or cancelled while it holds enough unread.
    pub(super) fn queue_io(&mut self, slot: usize) {
        let Some(Slot::Serving(client)) = self.slots.get_mut(slot) else {
            return;
        };
        let stream = client.stream.get_mut();
        let fd = stream.fd();
        let queued = match stream.next_send() {
            // SAFETY: the bytes are the stream's, untouched until the
            // send's completion, and the stream (with its socket) is kept
            // until then, even once the connection is closed.
            #[allow(unsafe_code)]
            Some(bytes) => unsafe { self.ring.send(fd, bytes, slot) },
            None => Ok(()),
        };
        let queued = queued.and_then(|()| {
            if stream.wants_room() {
                self.ring.poll_room(fd, slot)?;
                stream.polled();
            }
            if stream.wants_receive() && self.ring.pool().has_free() {
                self.ring.receive(fd, slot)?;
                stream.set_receive(Receive::Armed);
            } else if stream.wants_receive() {
                // Armed once buffers are back in the pool.
                self.starved.push(slot);
            } else if stream.holds_too_much() {
                self.ring.cancel(Op::Recv(slot))?;
                stream.set_receive(Receive::Cancelling);
            }
            Ok(())
        });
        if let Err(e) = queued {
            tracing::warn!(error = %e, "the ring refused an operation: the connection is closed");
            self.close(slot);
        }
    }

    /// Reads what has arrived of the client's PROXY header, if it is still
    /// due (D21); whether the connection can go on to its messages.
    fn read_header(&mut self, slot: usize) -> bool {
        let Some(Slot::Serving(client)) = self.slots.get_mut(slot) else {
            return false;
        };
        let (stream, stopping) = (client.stream.get_mut(), self.stage == Stage::Stopping);
        match read_proxy_header(&mut client.paused, stream, &mut client.driver, stopping) {
            HeaderRead::Done => true,
            HeaderRead::Wait(deadline) => {
                self.set_timer(slot, Some(deadline));
                false
            }
            HeaderRead::Refused => {
                self.close(slot);
                false
            }
        }
    }

    /// Keeps the connection's deadline in the worker's set.
    fn set_timer(&mut self, slot: usize, at: Option<Instant>) {
        if let Some(Slot::Serving(client)) = self.slots.get_mut(slot) {
            self.deadlines.set(&mut client.deadline, slot, at);
        }
    }

    /// Gives every connection whose deadline has come its turn.
    pub(super) fn fire_timers(&mut self) {
        let now = Instant::now();
        while let Some(slot) =
            self.deadlines
                .next_due(now, &mut self.slots, |slots, slot| match slots.get_mut(slot) {
                    Some(Slot::Serving(client)) => Some(&mut client.deadline),
                    _ => None,
                })
        {
            self.turn(slot);
        }
    }

    /// The connection is over: its place under the cap is given back at
    /// once; its socket is closed once the ring's operations that name it
    /// have completed (cancelled here).
    fn close(&mut self, slot: usize) {
        let Some(Slot::Serving(client)) = self.slots.get_mut(slot) else {
            return;
        };
        self.deadlines.forget(&mut client.deadline, slot);
        self.again.retain(|s| *s != slot);
        let stream = client.stream.get_mut();
        if stream.receive() == Receive::Armed && self.ring.cancel(Op::Recv(slot)).is_ok() {
            stream.set_receive(Receive::Cancelling);
        }
        if stream.sending() {
            let _ = self.ring.cancel(Op::Send(slot));
        }
        if stream.polling() {
            let _ = self.ring.cancel(Op::Room(slot));
        }
        self.shared.release();
        let Slot::Serving(client) = std::mem::replace(&mut self.slots[slot], Slot::Vacant) else {
            return;
        };
        if client.stream.get_ref().in_flight() {
            self.slots[slot] = Slot::Closing(client.stream);
        } else {
            self.sockets.remove(client.stream.get_ref().socket());
            self.free.push(slot);
        }
    }
}
