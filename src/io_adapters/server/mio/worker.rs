//! One worker: its event loop, its accepts (and the client held at the
//! cap until there is room), the mail from other workers, and its
//! shutdown. What it does for each connection is in `connection.rs`.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Waker};

use super::deadlines::{Deadline, Deadlines};
use super::paused::Paused;
use super::shared::{self, Mail, Mailbox, Shared};
use super::{SCRATCH, WAKER, listener_of, listener_token};
use crate::io_adapters::server::{
    ACCEPT_BACKOFF, ADMISSION_RETRY, AcceptFaults, Accepted, ConnectionSettings, Driver, Enrolled, Handler,
    Member, OpenSockets, ServerOptions, Told, client_gave_up,
};

/// A client accepted at the connection cap (D3), held unserved until
/// there is room, as it would wait in the backlog; meanwhile the
/// connection idle longest, if any, is asked to close for it.
struct Held {
    stream: TcpStream,
    peer: SocketAddr,
    /// The member asked to close, while it is still to bring room.
    asked: Option<Arc<Member<Mail>>>,
    /// When to look again for an idle connection, when none was asked or
    /// the one asked declined.
    look_at: Instant,
}

/// One client connection on a worker.
pub(super) struct Client {
    pub(super) stream: Accepted<TcpStream>,
    pub(super) driver: Driver,
    /// Its place in the server's roster (D3).
    pub(super) member: Enrolled<Mail>,
    /// What holds its drive step: its PROXY header not yet in (D21), or
    /// an answer awaited.
    pub(super) paused: Option<Box<Paused>>,
    /// Its deadline, as the worker's set keeps it.
    pub(super) deadline: Deadline,
    /// The last round of the event loop in which it had a turn.
    pub(super) round: u64,
}

/// One of a worker's listening sockets.
struct Listening {
    socket: TcpListener,
    /// It may hold clients: edge-triggered, it reports no new event for
    /// clients already waiting, so this stays set until `WouldBlock`.
    ready: bool,
}

pub(super) struct Worker<H> {
    pub(super) poll: Poll,
    /// The sockets it accepts from; none once it stopped.
    listening: Vec<Listening>,
    pub(super) handler: Arc<H>,
    pub(super) options: ServerOptions,
    /// What every connection shares.
    pub(super) settings: ConnectionSettings,
    pub(super) shared: Arc<Shared>,
    /// This worker's connections' sockets, shut down from `run` if a
    /// handler holds the worker past the drain deadline.
    pub(super) sockets: Arc<OpenSockets>,
    pub(super) clients: Vec<Option<Client>>,
    pub(super) free: Vec<usize>,
    pub(super) deadlines: Deadlines,
    /// Clients that used their turn and still have work.
    pub(super) again: Vec<usize>,
    /// Counts the rounds of the event loop: one turn per client per round.
    pub(super) round: u64,
    pub(super) scratch: Vec<u8>,
    /// After running out of descriptors: no accept before then.
    accept_after: Option<Instant>,
    /// A client accepted at the cap, waiting for room.
    held: Option<Held>,
    /// Where other workers ask this one's connections to close (D3).
    pub(super) mailbox: Arc<Mailbox>,
    /// Warns once per burst of failed accepts.
    accept_faults: AcceptFaults,
    pub(super) stopped: bool,
}

impl<H: Handler> Worker<H> {
    pub(super) fn new(
        listeners: Vec<TcpListener>,
        handler: Arc<H>,
        options: ServerOptions,
        settings: ConnectionSettings,
        shared: Arc<Shared>,
        sockets: Arc<OpenSockets>,
    ) -> io::Result<Self> {
        let poll = Poll::new()?;
        let mut listening = Vec::with_capacity(listeners.len());
        for (n, mut socket) in listeners.into_iter().enumerate() {
            poll.registry()
                .register(&mut socket, listener_token(n), Interest::READABLE)?;
            listening.push(Listening { socket, ready: true });
        }
        let waker: shared::Waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        shared
            .wakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::clone(&waker));
        let mailbox = Arc::new(Mailbox::new(waker));
        Ok(Worker {
            poll,
            listening,
            handler,
            options,
            settings,
            shared,
            sockets,
            clients: Vec::new(),
            free: Vec::new(),
            deadlines: Deadlines::default(),
            again: Vec::new(),
            round: 0,
            scratch: vec![0; SCRATCH],
            accept_after: None,
            held: None,
            mailbox,
            accept_faults: AcceptFaults::default(),
            stopped: false,
        })
    }

    pub(super) fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        loop {
            // Checked after registering the waker, so no wake-up is lost.
            if !self.stopped && self.shared.stopping.load(Ordering::SeqCst) {
                self.stop();
            }
            if self.stopped && self.clients.iter().all(Option::is_none) {
                return Ok(());
            }
            self.accept();
            let timeout = if self.again.is_empty() {
                let accept_at = self
                    .accept_after
                    .filter(|_| self.listening.iter().any(|l| l.ready));
                let first = self.deadlines.first();
                let look_at = self.held.as_ref().map(|held| held.look_at);
                [first, accept_at, look_at]
                    .into_iter()
                    .flatten()
                    .min()
                    .map(|at| at.saturating_duration_since(Instant::now()))
            } else {
                Some(Duration::ZERO)
            };
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            // One turn per client per round, whether it is ready, waiting
            // for its next turn, or due.
            self.round += 1;
            let again = std::mem::take(&mut self.again);
            for event in events.iter() {
                let token = event.token();
                if token == WAKER {
                    self.read_mail();
                } else if let Some(n) = listener_of(token, self.listening.len()) {
                    self.listening[n].ready = true;
                } else {
                    let slot = token.0;
                    if event.is_read_closed()
                        && let Some(Some(client)) = self.clients.get_mut(slot)
                    {
                        client.driver.peer_closed_reading();
                    }
                    self.turn(slot);
                }
            }
            for slot in again {
                self.turn(slot);
            }
            self.fire_timers();
        }
    }

    /// During shutdown: stop accepting, ask every connection to close once
    /// nothing is under way.
    fn stop(&mut self) {
        self.stopped = true;
        // New clients are refused from here on: so is one held at the cap.
        self.held = None;
        for mut listening in std::mem::take(&mut self.listening) {
            let _ = self.poll.registry().deregister(&mut listening.socket);
        }
        for slot in 0..self.clients.len() {
            if let Some(client) = &mut self.clients[slot] {
                client.driver.shut_down();
                self.drive(slot);
            }
        }
    }

    /// Accepts while a listening socket has clients and there is room,
    /// from each in turn. A socket stays `ready` until `WouldBlock`, and
    /// the accept is retried when room is made or the back-off ends.
    fn accept(&mut self) {
        let mut next = 0;
        while self.admit_held() {
            let Some(n) = (0..self.listening.len())
                .map(|k| (next + k) % self.listening.len())
                .find(|&n| self.listening[n].ready)
            else {
                return;
            };
            next = n + 1;
            if self.accept_after.is_some_and(|at| Instant::now() < at) {
                return;
            }
            self.accept_after = None;
            // At the cap, a client is taken and held until there is room
            // (D3): a closing connection wakes every worker.
            let reserved = self.shared.reserve();
            match self.listening[n].socket.accept() {
                Ok((stream, peer)) if reserved => {
                    self.accept_faults.accepted();
                    self.add(stream, peer);
                }
                Ok((stream, peer)) => {
                    self.accept_faults.accepted();
                    self.held = Some(Held {
                        stream,
                        peer,
                        asked: None,
                        look_at: Instant::now(),
                    });
                }
                Err(e) => {
                    if reserved {
                        self.shared.unreserve();
                    }
                    if e.kind() == io::ErrorKind::WouldBlock {
                        self.listening[n].ready = false;
                    } else if !client_gave_up(&e) {
                        // Out of descriptors or memory: serve the open
                        // connections, and try again shortly.
                        self.accept_faults.failed(&e);
                        self.accept_after = Some(Instant::now() + ACCEPT_BACKOFF);
                    }
                }
            }
        }
    }

    /// Serves the client held at the cap once there is room; until then,
    /// asks the connection idle longest to close for it. Whether no client
    /// is held any more.
    fn admit_held(&mut self) -> bool {
        let Some(held) = &mut self.held else {
            return true;
        };
        if self.shared.reserve() {
            if let Some(Held { stream, peer, .. }) = self.held.take() {
                self.add(stream, peer);
            }
            return true;
        }
        // Looked at again at `look_at`, or when a connection closes.
        let now = Instant::now();
        if now >= held.look_at {
            self.shared.roster.make_room(&mut held.asked);
            held.look_at = now + ADMISSION_RETRY;
        }
        false
    }

    /// Reads which of this worker's connections were asked to close to make
    /// room at the cap, and lets each answer; and gives a turn to those
    /// whose awaited answers were woken.
    fn read_mail(&mut self) {
        let asked = std::mem::take(&mut *self.mailbox.asked.lock().unwrap_or_else(|p| p.into_inner()));
        for slot in asked {
            self.settle(slot);
        }
        for slot in self.mailbox.take_woken() {
            self.turn(slot);
        }
    }

    /// Tells the client's member how it stands; closes it if it was asked
    /// to and is idle (D3).
    pub(super) fn settle(&mut self, slot: usize) {
        let Some(Some(client)) = self.clients.get_mut(slot) else {
            return;
        };
        if client.member.tell(client.driver.is_idle()) == Told::Close {
            let closing = client.driver.close_idle();
            client.member.answer(closing);
            if closing {
                self.drive(slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An idle keep-alive connection may cost at most 1 KB of the server's
    /// memory beyond the kernel's socket (BENCHMARKS.md, "Idle
    /// connections"): its `Client`, plus its entry in the worker's timer
    /// set and the allocator's share (about 70 bytes). A field that grows
    /// it past this bound must be boxed or shared, or the budget revisited
    /// with the idle benchmark.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_client_fits_the_idle_connection_budget() {
        let size = std::mem::size_of::<Client>();
        assert!(size <= 880, "a Client is {size} bytes");
    }
}
