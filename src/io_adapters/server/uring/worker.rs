//! One worker: its loop over the ring's completions, its accepts (and the
//! clients held at the cap until there is room), its timer, the mail from
//! other workers, and its shutdown. What it does for each connection is
//! in `connection.rs`.
//!
//! A round of the loop: submit every entry queued since the last round
//! (the sends of every connection that wrote, the receives and accepts to
//! arm, the timer) and wait for one completion in the same system call,
//! or for none when a connection still has work; then take in every
//! completion, give each connection it concerns a turn of the drive step,
//! and the connections due their turn (timers, yielded turns).

use std::collections::VecDeque;
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use rustix::event::{EventfdFlags, eventfd};

use super::ring::{BUFFER_SIZE, Completion, Op, Ring, Unstarted};
use super::stream::RingStream;
use crate::io_adapters::server::mio::deadlines::{Deadline, Deadlines};
use crate::io_adapters::server::mio::paused::Paused;
use crate::io_adapters::server::mio::shared::{Mail, Mailbox, Shared, Waker};
use crate::io_adapters::server::{
    ACCEPT_BACKOFF, ADMISSION_RETRY, AcceptFaults, Accepted, ConnectionSettings, Driver, Enrolled, Handler,
    Member, OpenSockets, ServerOptions, Told, Wake, client_gave_up,
};

/// The drive step's read buffer, one per worker: a received pool buffer
/// fits whole.
const SCRATCH: usize = 4 * BUFFER_SIZE;

/// A client accepted at the connection cap (D3), held unserved until
/// there is room, as it would wait in the backlog; meanwhile the
/// connection idle longest, if any, is asked to close for it.
struct Held {
    socket: TcpStream,
    /// The member asked to close, while it is still to bring room.
    asked: Option<Arc<Member<Mail>>>,
    /// When to look again for an idle connection.
    look_at: Instant,
}

/// One client connection on a worker, while it is served.
pub(super) struct Client {
    pub(super) stream: Accepted<RingStream>,
    pub(super) driver: Driver,
    /// Its place in the server's roster (D3).
    pub(super) member: Enrolled<Mail>,
    /// What holds its drive step: its PROXY header not yet in (D21), or
    /// an answer awaited (its receive stays armed meanwhile).
    pub(super) paused: Option<Box<Paused>>,
    /// Its deadline, as the worker's set keeps it.
    pub(super) deadline: Deadline,
    /// The last round of the loop in which it had a turn.
    pub(super) round: u64,
    /// The last round in which a completion marked it for a turn: marked
    /// once however many of its completions a round brings.
    pub(super) touched: u64,
    /// Whether its send's completion concerns the drive step.
    pub(super) output: Output,
}

/// What a connection's drive step asked of its output at its last wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Output {
    /// Everything written was taken by the stream: a send's completion
    /// only starts the rest of a short send, and needs no turn.
    Handed,
    /// The stream would not take it all, the step waits for it to be
    /// sent (a close after the last answer), or a TLS session may hold
    /// some: a send's completion brings the connection's next turn.
    Waiting,
}

/// What a connection slot holds.
pub(super) enum Slot {
    /// Nothing: free for the next client.
    Vacant,
    /// A connection being served.
    Serving(Box<Client>),
    /// A connection over, whose socket the ring's operations still name
    /// (a receive, send or poll for room being cancelled): freed at their
    /// last completion.
    Closing(Accepted<RingStream>),
}

/// What a listening socket's multishot accept is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Accepting {
    /// Not armed: to be armed in the next round.
    Idle,
    /// Armed: completions bring clients.
    Armed,
    /// Cancelled (at the cap, or at shutdown); its last completion is
    /// still to come.
    Cancelling,
    /// Ended by a failure (out of descriptors): armed again then.
    Backoff(Instant),
}

/// One of a worker's listening sockets.
struct Listening {
    socket: std::net::TcpListener,
    accepting: Accepting,
}

/// The worker's one timeout entry in the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Timer {
    Unarmed,
    /// Completes at this time (or when moved).
    Armed(Instant),
}

/// Where the worker is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    Serving,
    /// Shutting down: no new client, connections closing once nothing is
    /// under way.
    Stopping,
}

/// Wakes a worker: one more count on its eventfd, which its ring polls.
#[derive(Debug)]
struct EventWaker(OwnedFd);

impl Wake for EventWaker {
    fn wake(&self) {
        // Fails only if the count is at its maximum: awake anyway.
        let _ = rustix::io::write(&self.0, &1u64.to_ne_bytes());
    }
}

pub(super) struct Worker<H> {
    pub(super) ring: Ring,
    listening: Vec<Listening>,
    pub(super) handler: Arc<H>,
    pub(super) options: ServerOptions,
    pub(super) settings: ConnectionSettings,
    pub(super) shared: Arc<Shared>,
    /// This worker's connections' sockets, shut down from `run` if a
    /// handler holds the worker past the drain deadline.
    pub(super) sockets: Arc<OpenSockets>,
    pub(super) slots: Vec<Slot>,
    pub(super) free: Vec<usize>,
    /// The connections' deadlines.
    pub(super) deadlines: Deadlines,
    timer: Timer,
    /// Connections that used their turn and still have work.
    pub(super) again: Vec<usize>,
    /// Connections a completion concerned this round.
    touched: Vec<usize>,
    /// Connections whose receive waits for the pool to have buffers again
    /// (a receive ends when it finds none).
    pub(super) starved: Vec<usize>,
    completions: Vec<Completion>,
    /// Counts the rounds of the loop: one turn per connection per round.
    pub(super) round: u64,
    pub(super) scratch: Vec<u8>,
    /// Clients accepted at the cap, waiting for room.
    held: VecDeque<Held>,
    /// Where other workers ask this one's connections to close (D3), and
    /// where awaited answers' wakers name their connections.
    pub(super) mailbox: Arc<Mailbox>,
    /// The descriptor the ring polls for wake-ups.
    wake: Arc<EventWaker>,
    accept_faults: AcceptFaults,
    pub(super) stage: Stage,
}

impl<H: Handler> Worker<H> {
    /// Made on the worker's own thread, the ring's one issuer.
    pub(super) fn new(
        ring: Unstarted,
        listeners: Vec<std::net::TcpListener>,
        handler: Arc<H>,
        options: ServerOptions,
        settings: ConnectionSettings,
        shared: Arc<Shared>,
        sockets: Arc<OpenSockets>,
    ) -> io::Result<Self> {
        let mut ring = Ring::start(ring)?;
        let wake = Arc::new(EventWaker(eventfd(
            0,
            EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK,
        )?));
        ring.poll_wake(wake.0.as_raw_fd())?;
        let waker: Waker = Arc::clone(&wake) as Waker;
        shared
            .wakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::clone(&waker));
        let listening = listeners
            .into_iter()
            .map(|socket| Listening {
                socket,
                accepting: Accepting::Idle,
            })
            .collect();
        Ok(Worker {
            ring,
            listening,
            handler,
            options,
            settings,
            shared,
            sockets,
            slots: Vec::new(),
            free: Vec::new(),
            deadlines: Deadlines::default(),
            timer: Timer::Unarmed,
            again: Vec::new(),
            touched: Vec::new(),
            starved: Vec::new(),
            completions: Vec::new(),
            round: 0,
            scratch: vec![0; SCRATCH],
            held: VecDeque::new(),
            mailbox: Arc::new(Mailbox::new(waker)),
            wake,
            accept_faults: AcceptFaults::default(),
            stage: Stage::Serving,
        })
    }

    pub(super) fn run(&mut self) -> io::Result<()> {
        loop {
            // Checked after the wake-up poll is armed, so no wake-up is lost.
            if self.stage == Stage::Serving && self.shared.stopping.load(Ordering::SeqCst) {
                self.stop();
            }
            if self.is_done() {
                return Ok(());
            }
            self.admit_held();
            self.arm_accepts()?;
            self.arm_timer()?;
            let want = usize::from(self.again.is_empty());
            let mut completions = std::mem::take(&mut self.completions);
            self.ring.complete(want, |done| completions.push(done))?;
            self.round += 1;
            // The mail is read after the turns: a connection asked to
            // close for a newcomer answers by what it received in this
            // batch too.
            let woken = completions.iter().any(|done| done.op == Op::Wake);
            for done in completions.drain(..) {
                self.take(done);
            }
            self.completions = completions;
            // One turn per connection per round, whether a completion
            // concerned it, it yielded its last, or its deadline came.
            let mut touched = std::mem::take(&mut self.touched);
            let again = std::mem::take(&mut self.again);
            for &slot in touched.iter().chain(&again) {
                self.turn(slot);
            }
            touched.clear();
            self.touched = touched;
            if woken {
                self.read_mail();
            }
            self.fire_timers();
            if !self.starved.is_empty() && self.ring.pool().has_free() {
                let mut starved = std::mem::take(&mut self.starved);
                starved.sort_unstable();
                starved.dedup();
                for slot in starved {
                    self.queue_io(slot);
                }
            }
        }
    }

    /// Whether the worker may end: stopped, with no connection and no
    /// operation of the ring naming a socket (the pool's buffers and the
    /// connections' outboxes go with the worker).
    fn is_done(&self) -> bool {
        self.stage == Stage::Stopping
            && self.slots.iter().all(|slot| matches!(slot, Slot::Vacant))
            && self
                .listening
                .iter()
                .all(|l| !matches!(l.accepting, Accepting::Armed | Accepting::Cancelling))
    }

    /// Takes in one completion.
    fn take(&mut self, done: Completion) {
        match done.op {
            Op::Accept(n) => self.accepted(n, &done),
            Op::Recv(slot) | Op::Send(slot) | Op::Room(slot) => self.completed(slot, &done),
            Op::Timer => self.timer = Timer::Unarmed,
            Op::Wake => {
                let mut count = [0; 8];
                let _ = rustix::io::read(&self.wake.0, &mut count);
                if !done.more {
                    // The poll ended (it should not): armed again.
                    let _ = self.ring.poll_wake(self.wake.0.as_raw_fd());
                }
            }
            Op::Aside => {}
        }
    }

    /// A client from listener `n`, or the accept's failure or end.
    fn accepted(&mut self, n: usize, done: &Completion) {
        let Some(listening) = self.listening.get_mut(n) else {
            return;
        };
        if !done.more {
            listening.accepting = match listening.accepting {
                Accepting::Armed if done.result < 0 && done.result != -libc::ECANCELED => {
                    Accepting::Backoff(Instant::now() + ACCEPT_BACKOFF)
                }
                _ => Accepting::Idle,
            };
        }
        let Some(socket) = done.accepted() else {
            let e = io::Error::from_raw_os_error(-done.result);
            if done.result != -libc::ECANCELED && !client_gave_up(&e) {
                // Out of descriptors or memory: serve the open
                // connections, and try again shortly.
                self.accept_faults.failed(&e);
            }
            return;
        };
        self.accept_faults.accepted();
        if self.stage == Stage::Stopping {
            // New clients are refused from here on.
            return;
        }
        // At the cap, a client is taken and held until there is room
        // (D3), and the accepts wait: a closing connection wakes every
        // worker.
        if self.held.is_empty() && self.shared.reserve() {
            self.add(socket);
        } else {
            self.held.push_back(Held {
                socket,
                asked: None,
                look_at: Instant::now(),
            });
            self.pause_accepts();
        }
    }

    /// Arms the accept of every listener that waits for it, unless
    /// clients are held at the cap or the worker stops.
    fn arm_accepts(&mut self) -> io::Result<()> {
        if self.stage == Stage::Stopping || !self.held.is_empty() {
            return Ok(());
        }
        let now = Instant::now();
        for (n, listening) in self.listening.iter_mut().enumerate() {
            let due = match listening.accepting {
                Accepting::Idle => true,
                Accepting::Backoff(at) => at <= now,
                Accepting::Armed | Accepting::Cancelling => false,
            };
            if due {
                self.ring.accept(listening.socket.as_raw_fd(), n)?;
                listening.accepting = Accepting::Armed;
            }
        }
        Ok(())
    }

    fn pause_accepts(&mut self) {
        for (n, listening) in self.listening.iter_mut().enumerate() {
            if listening.accepting == Accepting::Armed && self.ring.cancel(Op::Accept(n)).is_ok() {
                listening.accepting = Accepting::Cancelling;
            }
        }
    }

    /// Serves the clients held at the cap as room comes; until then, asks
    /// the connection idle longest to close for the first.
    fn admit_held(&mut self) {
        while !self.held.is_empty() {
            if self.shared.reserve() {
                if let Some(held) = self.held.pop_front() {
                    self.add(held.socket);
                }
                continue;
            }
            // Looked at again at `look_at`, or when a connection closes.
            let now = Instant::now();
            if let Some(held) = self.held.front_mut()
                && now >= held.look_at
            {
                self.shared.roster.make_room(&mut held.asked);
                held.look_at = now + ADMISSION_RETRY;
            }
            return;
        }
    }

    /// Arms the ring's timer for the earliest deadline, or moves it there
    /// when it is earlier than the one armed (a timer that comes early
    /// only makes a round with nothing due).
    fn arm_timer(&mut self) -> io::Result<()> {
        let connection = self.deadlines.first();
        let held = self.held.front().map(|held| held.look_at);
        let accept = self.listening.iter().filter_map(|l| match l.accepting {
            Accepting::Backoff(at) => Some(at),
            _ => None,
        });
        let Some(first) = [connection, held].into_iter().flatten().chain(accept).min() else {
            return Ok(());
        };
        let after = first.saturating_duration_since(Instant::now());
        match self.timer {
            Timer::Armed(at) if at <= first => return Ok(()),
            Timer::Armed(_) => self.ring.time(after, true)?,
            Timer::Unarmed => self.ring.time(after, false)?,
        }
        self.timer = Timer::Armed(first);
        Ok(())
    }

    /// During shutdown: stop accepting, ask every connection to close once
    /// nothing is under way.
    fn stop(&mut self) {
        self.stage = Stage::Stopping;
        // New clients are refused from here on: so are those held.
        self.held.clear();
        self.pause_accepts();
        for slot in 0..self.slots.len() {
            if let Slot::Serving(client) = &mut self.slots[slot] {
                client.driver.shut_down();
                self.drive(slot);
            }
        }
    }

    /// Reads which of this worker's connections were asked to close to
    /// make room at the cap, and lets each answer; and gives a turn to
    /// those whose awaited answers were woken (a slot closed since, or
    /// taken by another connection, only gets a turn too many).
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
        let Some(Slot::Serving(client)) = self.slots.get_mut(slot) else {
            return;
        };
        if client.member.tell(client.driver.is_idle()) == Told::Close {
            // Bytes the ring has not brought to the drive step yet are a
            // message begun, which keeps a connection open (D3).
            let closing = !client.stream.get_ref().has_unread() && client.driver.close_idle();
            client.member.answer(closing);
            if closing {
                self.drive(slot);
            }
        }
    }

    /// Marks the connection in `slot` for a turn this round.
    pub(super) fn touch(&mut self, slot: usize) {
        let Some(Slot::Serving(client)) = self.slots.get_mut(slot) else {
            return;
        };
        if client.touched != self.round {
            client.touched = self.round;
            self.touched.push(slot);
        }
    }
}
