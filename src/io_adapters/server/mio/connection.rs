//! What a worker does for each of its connections: takes it in, gives it
//! turns of the drive step, reads its PROXY header (D21), keeps its timer
//! in the worker's set, and closes it.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use mio::net::TcpStream;
use mio::{Interest, Token};

use super::MODE;
use super::awaited::Awaited;
use super::deadlines::Deadline;
use super::paused::Paused;
use super::shared::Mail;
use super::worker::{Client, Worker};
use crate::io_adapters::server::watch::peer_gone;
use crate::io_adapters::server::{Accepted, CloseCause, Driver, Handler, Step, proxied_peer};

/// Where a connection's PROXY header stands after a read (D21).
pub(in crate::io_adapters::server) enum HeaderRead {
    /// Read (or none due): the connection goes on to its messages.
    Done,
    /// Not all in yet: read again when more arrives, or at this time.
    Wait(Instant),
    /// None valid in time: the connection is over, without a response.
    Refused,
}

/// Reads what has arrived of a connection's PROXY header, if it is still
/// due (`paused`, with the time by which it must have arrived), from
/// `io`, the socket itself under any TLS session, never past the header;
/// once read, the client it names is the driver's peer. A silent peer
/// cannot hold its slot past the message timeout (D3), nor delay a
/// shutdown (`stopping`).
pub(in crate::io_adapters::server) fn read_proxy_header<R: io::Read + ?Sized>(
    paused: &mut Option<Box<Paused>>,
    io: &mut R,
    driver: &mut Driver,
    stopping: bool,
) -> HeaderRead {
    let Some(Paused::Header(reader, deadline)) = paused.as_deref_mut() else {
        return HeaderRead::Done;
    };
    let deadline = *deadline;
    let read = match reader.read_from(io) {
        Ok(Some(read)) => Ok(read),
        Ok(None) if !stopping && Instant::now() < deadline => return HeaderRead::Wait(deadline),
        Ok(None) => Err(io::ErrorKind::TimedOut.into()),
        Err(e) => Err(e),
    };
    match proxied_peer(read, driver.peer()) {
        Some(client) => {
            *paused = None;
            driver.set_peer(client);
            HeaderRead::Done
        }
        None => {
            driver.refuse_proxy_header();
            HeaderRead::Refused
        }
    }
}

impl<H: Handler> Worker<H> {
    pub(super) fn add(&mut self, stream: TcpStream, peer: SocketAddr) {
        self.settings.count_accepted();
        let _ = stream.set_nodelay(true);
        let Ok(mut stream) = Accepted::new(stream, &self.options) else {
            self.settings.count_unserved(CloseCause::TransportFailed);
            self.shared.release();
            return;
        };
        let slot = self.free.pop().unwrap_or(self.clients.len());
        let interest = Interest::READABLE | Interest::WRITABLE;
        if self
            .poll
            .registry()
            .register(stream.get_mut(), Token(slot), interest)
            .is_err()
        {
            self.free.push(slot);
            self.settings.count_unserved(CloseCause::TransportFailed);
            self.shared.release();
            return;
        }
        self.sockets.add(stream.get_ref());
        let mode = stream.mode(MODE);
        let member = self.shared.roster.enroll(Mail {
            mailbox: Arc::clone(&self.mailbox),
            slot,
        });
        let client = Client {
            stream,
            driver: Driver::with_settings(peer, &self.settings, mode),
            member,
            paused: Paused::header_due(&self.options),
            deadline: Deadline::default(),
            round: self.round,
        };
        if slot == self.clients.len() {
            self.clients.push(Some(client));
        } else {
            self.clients[slot] = Some(client);
        }
        self.drive(slot);
    }

    /// Gives the client its turn of this round, unless it had it.
    pub(super) fn turn(&mut self, slot: usize) {
        let round = self.round;
        let Some(Some(client)) = self.clients.get_mut(slot) else {
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
    /// yields its turn, or closes. While an answer is awaited, the step
    /// waits for it: the turn polls it and watches the peer.
    pub(super) fn drive(&mut self, slot: usize) {
        if !self.read_header(slot) {
            return;
        }
        loop {
            let Some(Some(client)) = self.clients.get_mut(slot) else {
                return;
            };
            // A reset peer has no answer to wait for.
            let gone = |stream: &Accepted<TcpStream>| matches!(stream.get_ref().take_error(), Ok(Some(e)) if peer_gone(&e));
            // Edge-triggered: room for earlier answers brings a turn.
            if let Some(awaiting) =
                Paused::turn_answer(&mut client.paused, &mut client.driver, &mut client.stream, gone)
            {
                return self.set_timer(slot, awaiting.until);
            }
            match client.driver.step(&mut client.stream, &mut self.scratch) {
                Step::Dispatch => {
                    if let Some(deferred) = client.driver.dispatch_handing_out(&*self.handler) {
                        let waker = self.mailbox.answer_waker(slot);
                        client.paused = Some(Box::new(Paused::Answer(Awaited::new(deferred, waker))));
                    }
                }
                Step::Wait { deadline, .. } => {
                    self.set_timer(slot, deadline);
                    return self.settle(slot);
                }
                Step::Yield => {
                    if !self.again.contains(&slot) {
                        self.again.push(slot);
                    }
                    return;
                }
                Step::Close => return self.remove(slot),
            }
        }
    }

    /// Reads what has arrived of the client's PROXY header, if it is still
    /// due (D21); whether the connection can go on to its messages.
    fn read_header(&mut self, slot: usize) -> bool {
        let Some(Some(client)) = self.clients.get_mut(slot) else {
            return false;
        };
        let stream = client.stream.get_mut();
        match read_proxy_header(&mut client.paused, stream, &mut client.driver, self.stopped) {
            HeaderRead::Done => true,
            HeaderRead::Wait(deadline) => {
                self.set_timer(slot, Some(deadline));
                false
            }
            HeaderRead::Refused => {
                self.remove(slot);
                false
            }
        }
    }

    fn set_timer(&mut self, slot: usize, at: Option<Instant>) {
        if let Some(Some(client)) = self.clients.get_mut(slot) {
            self.deadlines.set(&mut client.deadline, slot, at);
        }
    }

    pub(super) fn fire_timers(&mut self) {
        let now = Instant::now();
        while let Some(slot) = self.deadlines.next_due(now, &mut self.clients, |clients, slot| {
            Some(&mut clients.get_mut(slot)?.as_mut()?.deadline)
        }) {
            self.turn(slot);
        }
    }

    fn remove(&mut self, slot: usize) {
        let Some(mut client) = self.clients.get_mut(slot).and_then(Option::take) else {
            return;
        };
        self.deadlines.forget(&mut client.deadline, slot);
        self.again.retain(|s| *s != slot);
        let _ = self.poll.registry().deregister(client.stream.get_mut());
        // Out of the set before it closes (dropped below).
        self.sockets.remove(client.stream.get_ref());
        self.free.push(slot);
        self.shared.release();
    }
}
