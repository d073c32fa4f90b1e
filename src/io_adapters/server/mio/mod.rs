//! The mio event-loop server (feature `mio`), the engine of `jsontp serve`.
//!
//! `workers` threads (default: one per core), each with its own `Poll`,
//! its connections, and a sorted set of their deadlines that sets the poll
//! timeout. Every worker registers its own `try_clone` of the one listening
//! socket: the kernel wakes the workers and whichever accepts first gets
//! the client. That needs no acceptor thread and no hand-over between
//! threads; the price, a spurious wake-up of the other workers per burst of
//! connections, is small for a few workers.
//!
//! Each connection is a [`Driver`] over a non-blocking socket registered
//! once, edge-triggered, for both directions; the worker performs what
//! [`Driver::step`] asks and nothing else. Reads go through one scratch
//! buffer per worker, so an idle connection holds only its socket and its
//! machine. A connection that used its turn's budget waits behind the
//! others. Handlers run on the worker thread, one at a time, so at most
//! `workers` at once, or [`ServerOptions::max_handlers`] if that is fewer;
//! a shutdown's deadline does not wait for them ([`ShutdownHandle`]).
//!
//! At the connection cap a worker holds the client it accepted and asks
//! the connection idle longest, on whichever worker, to close for it
//! ([`ServerOptions::max_connections`]): that worker is woken, and closes
//! it unless it became busy meanwhile.
//!
//! ```no_run
//! use jsontp_protocol::io_adapters::server::ServerOptions;
//! use jsontp_protocol::io_adapters::server::mio::MioServer;
//! use jsontp_protocol::message::{Body, Request, Response, Status, StatusCode};
//!
//! let hello = |request: &Request| {
//!     Response::new(Status::new(StatusCode::OK, "hello"))
//!         .with_body(Body::text("hello"))
//! };
//! let server = MioServer::bind("127.0.0.1:8080", hello, ServerOptions::default())?;
//! let stop = server.shutdown_handle(); // stop.shutdown() from another thread
//! server.run()?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::collections::BTreeSet;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use super::{
    ACCEPT_BACKOFF, ADMISSION_RETRY, AcceptFaults, Accepted, Bounded, ConnectionSettings, Driver, Enrolled,
    Handler, Member, OpenSockets, Places, Roster, ServerOptions, Step, Told, Wake, client_gave_up, listen,
    proxied_peer, stop_listening,
};
use crate::io_adapters::proxy_protocol::ProxyHeaderReader;
use crate::io_adapters::transport::IoMode;

const LISTENER: Token = Token(usize::MAX);
const WAKER: Token = Token(usize::MAX - 1);
/// Each worker's read buffer, shared by all its connections.
const SCRATCH: usize = 64 * 1024;

/// How a socket reports readiness here: edge-triggered where mio's
/// backends are (epoll, kqueue), where a short read means drained.
const MODE: IoMode = if cfg!(windows) {
    IoMode::NonBlocking
} else {
    IoMode::EdgeTriggered
};

/// A non-blocking jsontp server on `workers` event loops.
#[derive(Debug)]
pub struct MioServer<H> {
    listener: std::net::TcpListener,
    handler: Arc<H>,
    options: ServerOptions,
    shared: Arc<Shared>,
}

/// Stops a running [`MioServer`]: it stops listening at once (new clients
/// are refused), every worker closes its idle connections and those
/// awaiting the full request of a handshake, finishes the exchanges under
/// way (bounded by the D3 timers), and `run` returns.
///
/// [`ServerOptions::shutdown_timeout`] bounds it all, handlers included: a
/// handler runs on its worker's thread, so once the deadline has passed
/// the connections of a worker still held by one are shut down from
/// outside, and `run` returns without waiting for that thread. The
/// handler runs on to its end; what it answers is not sent, and whether
/// its work stands is the application's business (a process that exits
/// then ends it).
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    stopping: AtomicBool,
    wakers: Mutex<Vec<Arc<Waker>>>,
    /// Connections open, all workers together.
    open: AtomicUsize,
    max: usize,
    /// The open connections, all workers together, which of them are
    /// idle, to make room at the cap (D3).
    roster: Arc<Roster<Mail>>,
    /// A handle on the listening socket, to stop it listening from the
    /// shutdown handle.
    listener: Mutex<Option<std::net::TcpListener>>,
    /// The places handlers take, when there are fewer than workers.
    places: Option<Arc<Places>>,
    shutdown_timeout: Duration,
    /// When the graceful shutdown must be over, once one has begun.
    drain_until: Mutex<Option<Instant>>,
    /// Workers whose thread has ended.
    ended: Mutex<usize>,
    /// A worker ended, or shutdown began.
    changed: Condvar,
}

/// Counts its worker as ended when its thread does, panicking or not.
struct Ending(Arc<Shared>);

impl Drop for Ending {
    fn drop(&mut self) {
        *self.0.ended.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.0.changed.notify_all();
    }
}

impl Shared {
    /// When `run` stops waiting for the workers: the drain deadline, and a
    /// little more, in which every worker not held by a handler has closed
    /// its connections itself.
    fn given_up_at(&self) -> Option<Instant> {
        let until = *self.drain_until.lock().unwrap_or_else(|p| p.into_inner());
        until.map(|until| until + Duration::from_millis(200))
    }

    fn wake_all(&self) {
        for waker in self.wakers.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = waker.wake();
        }
    }

    /// Takes a place for one more connection, if there is room.
    fn reserve(&self) -> bool {
        if self.open.fetch_add(1, Ordering::SeqCst) < self.max {
            return true;
        }
        self.open.fetch_sub(1, Ordering::SeqCst);
        false
    }

    /// Gives back a place taken for an accept that brought no connection.
    fn unreserve(&self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }

    /// Gives a connection's place back; wakes the workers when that makes
    /// room again.
    fn release(&self) {
        if self.open.fetch_sub(1, Ordering::SeqCst) == self.max {
            self.wake_all();
        }
    }
}

impl<H: Handler> MioServer<H> {
    /// Binds `addr` (with [`listen`]'s backlog) and prepares
    /// to serve `handler`.
    pub fn bind(addr: impl ToSocketAddrs, handler: H, options: ServerOptions) -> io::Result<Self> {
        MioServer::from_listener(listen(addr)?, handler, options)
    }

    /// Serves an already bound listener.
    pub fn from_listener(
        listener: std::net::TcpListener,
        handler: H,
        options: ServerOptions,
    ) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        // A worker runs one handler at a time: places are needed only
        // when there are fewer than workers.
        let places = (options.max_handlers < options.worker_count())
            .then(|| Arc::new(Places::new(options.max_handlers)));
        let shared = Arc::new(Shared {
            stopping: AtomicBool::new(false),
            wakers: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            max: options.max_connections.max(1),
            roster: Arc::default(),
            listener: Mutex::new(Some(listener.try_clone()?)),
            places,
            shutdown_timeout: options.shutdown_timeout,
            drain_until: Mutex::new(None),
            ended: Mutex::new(0),
            changed: Condvar::new(),
        });
        Ok(MioServer {
            listener,
            handler: Arc::new(handler),
            options,
            shared,
        })
    }

    /// The address the server listens on (useful after binding port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// A handle that stops the server from another thread.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Serves until [`ShutdownHandle::shutdown`] and every worker is done,
    /// or the shutdown's deadline has passed (see [`ShutdownHandle`]).
    pub fn run(self) -> io::Result<()> {
        let mut threads = Vec::new();
        let mut sockets = Vec::new();
        let mut result = Ok(());
        let settings = ConnectionSettings::new(&self.options);
        let places = self.shared.places.clone();
        let handler = Arc::new(Bounded::new(Arc::clone(&self.handler), places));
        for n in 0..self.options.worker_count() {
            let open = Arc::new(OpenSockets::default());
            let worker = self.listener.try_clone().and_then(|listener| {
                Worker::new(
                    TcpListener::from_std(listener),
                    Arc::clone(&handler),
                    self.options.clone(),
                    settings.clone(),
                    Arc::clone(&self.shared),
                    Arc::clone(&open),
                )
            });
            let thread = std::thread::Builder::new().name(format!("jsontp-mio-{n}"));
            let shared = Arc::clone(&self.shared);
            let started = worker.and_then(|mut worker| {
                thread.spawn(move || {
                    let _ending = Ending(shared);
                    worker.run()
                })
            });
            match started {
                Ok(thread) => {
                    threads.push(thread);
                    sockets.push(open);
                }
                Err(e) => {
                    result = Err(e);
                    ShutdownHandle {
                        shared: Arc::clone(&self.shared),
                    }
                    .shutdown();
                    break;
                }
            }
        }
        // The workers hold their own handles; once they drop them at
        // shutdown, the socket is closed.
        drop(self.listener);
        if !self.shared.wait_for_workers(threads.len()) {
            tracing::warn!(
                "shutdown deadline passed with handlers still running: their connections are closed"
            );
            for open in &sockets {
                open.shut_all();
            }
        }
        for thread in threads {
            // A worker still held by a handler is left to end on its own.
            if !thread.is_finished() {
                continue;
            }
            match thread.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => result = Err(e),
                Err(_) => result = Err(io::Error::other("a server worker panicked")),
            }
        }
        result
    }
}

impl Shared {
    /// Waits until `workers` threads have ended; once a shutdown began, no
    /// later than its deadline (`false` then).
    fn wait_for_workers(&self, workers: usize) -> bool {
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        while *ended < workers {
            ended = match self.given_up_at() {
                None => self.changed.wait(ended).unwrap_or_else(|p| p.into_inner()),
                Some(until) => {
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return false;
                    }
                    self.changed
                        .wait_timeout(ended, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
            };
        }
        true
    }
}

impl ShutdownHandle {
    /// Starts the graceful shutdown; returns at once.
    pub fn shutdown(&self) {
        let until = Instant::now() + self.shared.shutdown_timeout;
        {
            let mut drain_until = self.shared.drain_until.lock().unwrap_or_else(|p| p.into_inner());
            drain_until.get_or_insert(until);
        }
        if let Some(places) = &self.shared.places {
            // A request still waiting for a handler then never gets one.
            places.close_at(until);
        }
        self.shared.stopping.store(true, Ordering::SeqCst);
        {
            // `run` waits for the deadline from here on.
            let _ended = self.shared.ended.lock().unwrap_or_else(|p| p.into_inner());
            self.shared.changed.notify_all();
        }
        let handle = self
            .shared
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(handle) = handle {
            stop_listening(&handle);
        }
        self.shared.wake_all();
    }
}

/// Where a worker is told which of its connections were asked to close
/// to make room at the cap (D3), from any worker.
#[derive(Debug)]
struct Mailbox {
    waker: Arc<Waker>,
    asked: Mutex<Vec<usize>>,
}

/// Wakes the worker of the connection in `slot` to read that it was asked
/// to close.
#[derive(Debug)]
struct Mail {
    mailbox: Arc<Mailbox>,
    slot: usize,
}

impl Wake for Mail {
    fn wake(&self) {
        self.mailbox
            .asked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(self.slot);
        let _ = self.mailbox.waker.wake();
    }
}

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
struct Client {
    stream: Accepted<TcpStream>,
    driver: Driver,
    /// Its place in the server's roster (D3).
    member: Enrolled<Mail>,
    /// Until the PROXY header is in (D21): its reader, and the time by
    /// which the header must have arrived. Boxed: it is needed for a
    /// connection's first bytes only.
    header: Option<Box<(ProxyHeaderReader, Instant)>>,

    /// The deadline the client's machine asks for.
    timer: Option<Instant>,
    /// Its entry in the worker's timer set, never later than `timer`: a
    /// deadline that moves later (every request moves the idle deadline)
    /// leaves the set alone, and the entry, when it comes, arms the new
    /// one. Earlier entries it replaced stay in the set until their time,
    /// and are passed over.
    armed: Option<Instant>,
    /// The last round of the event loop in which it had a turn.
    round: u64,
}

struct Worker<H> {
    poll: Poll,
    listener: Option<TcpListener>,
    handler: Arc<H>,
    options: ServerOptions,
    /// What every connection shares.
    settings: ConnectionSettings,
    shared: Arc<Shared>,
    /// This worker's connections' sockets, shut down from `run` if a
    /// handler holds the worker past the drain deadline.
    sockets: Arc<OpenSockets>,
    clients: Vec<Option<Client>>,
    free: Vec<usize>,
    timers: BTreeSet<(Instant, usize)>,
    /// Clients that used their turn and still have work.
    again: Vec<usize>,
    /// Counts the rounds of the event loop: one turn per client per round.
    round: u64,
    scratch: Vec<u8>,
    /// The listener may hold clients: accept when there is room.
    accept_ready: bool,
    /// After running out of descriptors: no accept before then.
    accept_after: Option<Instant>,
    /// A client accepted at the cap, waiting for room.
    held: Option<Held>,
    /// Where other workers ask this one's connections to close (D3).
    mailbox: Arc<Mailbox>,
    /// Warns once per burst of failed accepts.
    accept_faults: AcceptFaults,
    stopped: bool,
}

impl<H: Handler> Worker<H> {
    fn new(
        mut listener: TcpListener,
        handler: Arc<H>,
        options: ServerOptions,
        settings: ConnectionSettings,
        shared: Arc<Shared>,
        sockets: Arc<OpenSockets>,
    ) -> io::Result<Self> {
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        shared
            .wakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::clone(&waker));
        let mailbox = Arc::new(Mailbox {
            waker,
            asked: Mutex::new(Vec::new()),
        });
        Ok(Worker {
            poll,
            listener: Some(listener),
            handler,
            options,
            settings,
            shared,
            sockets,
            clients: Vec::new(),
            free: Vec::new(),
            timers: BTreeSet::new(),
            again: Vec::new(),
            round: 0,
            scratch: vec![0; SCRATCH],
            accept_ready: true,
            accept_after: None,
            held: None,
            mailbox,
            accept_faults: AcceptFaults::default(),
            stopped: false,
        })
    }

    fn run(&mut self) -> io::Result<()> {
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
                    .filter(|_| self.accept_ready && self.listener.is_some());
                let first = self.timers.first().map(|(at, _)| *at);
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
                match event.token() {
                    LISTENER => self.accept_ready = true,
                    WAKER => self.read_mail(),
                    Token(slot) => {
                        if event.is_read_closed()
                            && let Some(Some(client)) = self.clients.get_mut(slot)
                        {
                            client.driver.peer_closed_reading();
                        }
                        self.turn(slot);
                    }
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
        if let Some(mut listener) = self.listener.take() {
            let _ = self.poll.registry().deregister(&mut listener);
        }
        for slot in 0..self.clients.len() {
            if let Some(client) = &mut self.clients[slot] {
                client.driver.shut_down();
                self.drive(slot);
            }
        }
    }

    /// Accepts while the listener has clients and there is room. Edge-
    /// triggered: the listener reports no new event for clients already
    /// waiting, so `accept_ready` stays set until `WouldBlock`, and the
    /// accept is retried when room is made or the back-off ends.
    fn accept(&mut self) {
        while self.admit_held() && self.accept_ready {
            let Some(listener) = &self.listener else { return };
            if self.accept_after.is_some_and(|at| Instant::now() < at) {
                return;
            }
            self.accept_after = None;
            // At the cap, a client is taken and held until there is room
            // (D3): a closing connection wakes every worker.
            let reserved = self.shared.reserve();
            match listener.accept() {
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
                        self.accept_ready = false;
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
    /// room at the cap, and lets each answer.
    fn read_mail(&mut self) {
        let asked = std::mem::take(&mut *self.mailbox.asked.lock().unwrap_or_else(|p| p.into_inner()));
        for slot in asked {
            self.settle(slot);
        }
    }

    /// Tells the client's member how it stands; closes it if it was asked
    /// to and is idle (D3).
    fn settle(&mut self, slot: usize) {
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

    fn add(&mut self, stream: TcpStream, peer: SocketAddr) {
        let _ = stream.set_nodelay(true);
        let Ok(mut stream) = Accepted::new(stream, &self.options) else {
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
            self.shared.release();
            return;
        }
        self.sockets.add(stream.get_ref());
        let mode = stream.mode(MODE);
        let header = self.options.proxy_protocol.then(|| {
            let limit = self.options.config.limits.message_timeout;
            Box::new((ProxyHeaderReader::new(), Instant::now() + limit))
        });
        let member = self.shared.roster.enroll(Mail {
            mailbox: Arc::clone(&self.mailbox),
            slot,
        });
        let client = Client {
            stream,
            driver: Driver::with_settings(peer, &self.settings, mode),
            member,
            header,
            timer: None,
            armed: None,
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
    fn turn(&mut self, slot: usize) {
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
    /// yields its turn, or closes.
    fn drive(&mut self, slot: usize) {
        if !self.read_header(slot) {
            return;
        }
        loop {
            let Some(Some(client)) = self.clients.get_mut(slot) else {
                return;
            };
            match client.driver.step(&mut client.stream, &mut self.scratch) {
                Step::Dispatch => client.driver.dispatch(&*self.handler),
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
    /// due (D21); whether the connection can go on to its messages. It
    /// reads from the socket itself, under any TLS session, and never past
    /// the header.
    fn read_header(&mut self, slot: usize) -> bool {
        let Some(Some(client)) = self.clients.get_mut(slot) else {
            return false;
        };
        let Some(header) = &mut client.header else {
            return true;
        };
        let (reader, deadline) = &mut **header;
        let (peer, deadline) = (client.driver.peer(), *deadline);
        let header = match reader.read_from(client.stream.get_mut()) {
            Ok(Some(header)) => Ok(header),
            Ok(None) if !self.stopped && Instant::now() < deadline => {
                self.set_timer(slot, Some(deadline));
                return false;
            }
            // A silent peer cannot hold its slot past the message
            // timeout (D3), nor delay a shutdown.
            Ok(None) => Err(io::ErrorKind::TimedOut.into()),
            Err(e) => Err(e),
        };
        match proxied_peer(header, peer) {
            Some(client_addr) => {
                client.header = None;
                client.driver.set_peer(client_addr);
                true
            }
            None => {
                self.remove(slot);
                false
            }
        }
    }

    fn set_timer(&mut self, slot: usize, at: Option<Instant>) {
        let Some(Some(client)) = self.clients.get_mut(slot) else {
            return;
        };
        client.timer = at;
        if let Some(at) = at
            && client.armed.is_none_or(|armed| at < armed)
        {
            self.timers.insert((at, slot));
            client.armed = Some(at);
        }
    }

    fn fire_timers(&mut self) {
        let now = Instant::now();
        while let Some(&(at, slot)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            let Some(Some(client)) = self.clients.get_mut(slot) else {
                continue;
            };
            if client.armed != Some(at) {
                // An entry an earlier deadline replaced.
                continue;
            }
            client.armed = None;
            match client.timer {
                Some(later) if later > now => {
                    self.timers.insert((later, slot));
                    client.armed = Some(later);
                }
                Some(_) => {
                    client.timer = None;
                    self.turn(slot);
                }
                None => {}
            }
        }
    }

    fn remove(&mut self, slot: usize) {
        let Some(mut client) = self.clients.get_mut(slot).and_then(Option::take) else {
            return;
        };
        if let Some(at) = client.armed {
            self.timers.remove(&(at, slot));
        }
        self.again.retain(|s| *s != slot);
        let _ = self.poll.registry().deregister(client.stream.get_mut());
        // Out of the set before it closes (dropped below).
        self.sockets.remove(client.stream.get_ref());
        self.free.push(slot);
        self.shared.release();
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
        assert!(size <= 872, "a Client is {size} bytes");
    }
}
