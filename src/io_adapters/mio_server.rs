//! The mio event-loop server (issue 4), the engine of `jsontp serve`.
//!
//! `workers` threads (default: one per core), each with its own `Poll`,
//! its connections, and a sorted set of the machines' deadlines that sets
//! the poll timeout. Every worker registers its own `try_clone` of the one
//! listening socket: the kernel wakes the workers and whichever accepts
//! first gets the client. That needs no acceptor thread and no hand-over
//! between threads; the price, a spurious wake-up of the other workers per
//! burst of connections, is small for a few workers.
//!
//! Read and write interest follow what the machine wants (`wants_read`,
//! `pending_output`). Reads go through one scratch buffer per worker, so an
//! idle connection holds only its socket and its machine. Handlers run on
//! the worker thread.
//!
//! ```no_run
//! use jsontp::io_adapters::{ServerOptions, mio_server::MioServer};
//! use jsontp::message::{Body, Request, Response, Status, StatusCode};
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
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};

use super::drive::{Served, now};
use super::{Handler, ServerOptions};
use crate::machine::ServerConfig;

const LISTENER: Token = Token(usize::MAX);
const WAKER: Token = Token(usize::MAX - 1);
/// Each worker's read buffer, shared by all its connections.
const SCRATCH: usize = 64 * 1024;
/// Read/write rounds for one connection before the others get a turn.
const ROUNDS: usize = 32;
/// How long a closing connection drains the peer's input (conformance
/// README: closing with unread input resets the connection).
const LINGER: Duration = Duration::from_millis(500);

/// A non-blocking jsontp server on `workers` event loops.
#[derive(Debug)]
pub struct MioServer<H> {
    listener: std::net::TcpListener,
    handler: Arc<H>,
    options: ServerOptions,
    shared: Arc<Shared>,
}

/// Stops a running [`MioServer`]: every worker stops accepting, closes its
/// idle connections, finishes the exchanges under way (bounded by the D3
/// timers), and `run` returns.
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    stopping: AtomicBool,
    wakers: Mutex<Vec<Arc<Waker>>>,
}

impl<H: Handler> MioServer<H> {
    /// Binds `addr` and prepares to serve `handler`.
    pub fn bind(addr: impl ToSocketAddrs, handler: H, options: ServerOptions) -> io::Result<Self> {
        MioServer::from_listener(std::net::TcpListener::bind(addr)?, handler, options)
    }

    /// Serves an already bound listener.
    pub fn from_listener(
        listener: std::net::TcpListener,
        handler: H,
        options: ServerOptions,
    ) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        Ok(MioServer {
            listener,
            handler: Arc::new(handler),
            options,
            shared: Arc::default(),
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

    /// Serves until [`ShutdownHandle::shutdown`] and every worker is done.
    pub fn run(self) -> io::Result<()> {
        let mut threads = Vec::new();
        for n in 0..self.options.worker_count() {
            let mut worker = Worker::new(
                TcpListener::from_std(self.listener.try_clone()?),
                Arc::clone(&self.handler),
                self.options.config.clone(),
                Arc::clone(&self.shared),
            )?;
            let thread = std::thread::Builder::new().name(format!("jsontp-mio-{n}"));
            threads.push(thread.spawn(move || worker.run())?);
        }
        let mut result = Ok(());
        for thread in threads {
            match thread.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => result = Err(e),
                Err(_) => result = Err(io::Error::other("a server worker panicked")),
            }
        }
        result
    }
}

impl ShutdownHandle {
    /// Starts the graceful shutdown; returns at once.
    pub fn shutdown(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        for waker in self
            .shared
            .wakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = waker.wake();
        }
    }
}

/// One client connection on a worker.
struct Client {
    stream: TcpStream,
    served: Served,
    interest: Interest,
    /// The deadline this client has in the worker's timer set.
    timer: Option<Instant>,
    /// Once the machine is closed: when we give up writing to a peer that
    /// does not read.
    flush_until: Option<Instant>,
    /// Once our side is shut down: until when we drain the peer's input.
    linger_until: Option<Instant>,
}

struct Worker<H> {
    poll: Poll,
    listener: Option<TcpListener>,
    handler: Arc<H>,
    config: ServerConfig,
    shared: Arc<Shared>,
    clients: Vec<Option<Client>>,
    free: Vec<usize>,
    timers: BTreeSet<(Instant, usize)>,
    /// Clients that used up their rounds and still have work.
    again: Vec<usize>,
    scratch: Vec<u8>,
}

impl<H: Handler> Worker<H> {
    fn new(
        mut listener: TcpListener,
        handler: Arc<H>,
        config: ServerConfig,
        shared: Arc<Shared>,
    ) -> io::Result<Self> {
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        shared
            .wakers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(waker);
        Ok(Worker {
            poll,
            listener: Some(listener),
            handler,
            config,
            shared,
            clients: Vec::new(),
            free: Vec::new(),
            timers: BTreeSet::new(),
            again: Vec::new(),
            scratch: vec![0; SCRATCH],
        })
    }

    fn run(&mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        loop {
            // Checked after registering the waker, so no wake-up is lost.
            if self.shared.stopping.load(Ordering::SeqCst) && self.stop_step() {
                return Ok(());
            }
            let timeout = if self.again.is_empty() {
                self.timers
                    .first()
                    .map(|(at, _)| at.saturating_duration_since(Instant::now()))
            } else {
                Some(Duration::ZERO)
            };
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            for event in events.iter() {
                match event.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    Token(slot) => self.drive(slot),
                }
            }
            for slot in std::mem::take(&mut self.again) {
                self.drive(slot);
            }
            self.fire_timers();
        }
    }

    /// During shutdown: stop accepting, close idle clients. True when done.
    fn stop_step(&mut self) -> bool {
        if let Some(mut listener) = self.listener.take() {
            let _ = self.poll.registry().deregister(&mut listener);
        }
        for slot in 0..self.clients.len() {
            let idle = self.clients[slot]
                .as_ref()
                .is_some_and(|c| c.linger_until.is_none() && c.served.is_idle());
            if idle {
                self.begin_linger(slot);
            }
        }
        self.clients.iter().all(Option::is_none)
    }

    fn accept(&mut self) {
        while let Some(listener) = &self.listener {
            match listener.accept() {
                Ok((stream, peer)) => self.add(stream, peer),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionAborted | io::ErrorKind::Interrupted
                    ) => {}
                // Out of descriptors or memory: leave the rest in the
                // backlog; the next connection wakes us again.
                Err(_) => return,
            }
        }
    }

    fn add(&mut self, mut stream: TcpStream, peer: SocketAddr) {
        let _ = stream.set_nodelay(true);
        let slot = self.free.pop().unwrap_or(self.clients.len());
        if self
            .poll
            .registry()
            .register(&mut stream, Token(slot), Interest::READABLE)
            .is_err()
        {
            self.free.push(slot);
            return;
        }
        let client = Client {
            stream,
            served: Served::new(&self.config, peer, now()),
            interest: Interest::READABLE,
            timer: None,
            flush_until: None,
            linger_until: None,
        };
        if slot == self.clients.len() {
            self.clients.push(Some(client));
        } else {
            self.clients[slot] = Some(client);
        }
        self.drive(slot);
    }

    /// Moves bytes between the socket and the machine until neither can
    /// make progress, then re-arms interest and the timer from what the
    /// machine wants.
    fn drive(&mut self, slot: usize) {
        let Some(Some(client)) = self.clients.get_mut(slot) else {
            return;
        };
        if client.linger_until.is_some() {
            // Drain and discard until the peer closes or would block.
            loop {
                match client.stream.read(&mut self.scratch) {
                    Ok(0) => return self.remove(slot),
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return self.remove(slot),
                }
            }
        }
        let mut rounds = 0;
        loop {
            let mut progress = false;
            if client.served.conn.wants_read() {
                // Edge-triggered readiness: keep reading until WouldBlock.
                progress = match client.stream.read(&mut self.scratch) {
                    Ok(0) => {
                        client.served.conn.receive_eof(now());
                        true
                    }
                    Ok(n) => {
                        client.served.receive(&self.scratch[..n], now());
                        true
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => true,
                    Err(_) => return self.remove(slot), // reset: nothing can be sent
                };
            }
            client.served.dispatch(&*self.handler);
            while !client.served.conn.pending_output().is_empty() {
                match client.stream.write(client.served.conn.pending_output()) {
                    Ok(0) => return self.remove(slot),
                    Ok(n) => {
                        client.served.conn.consume_output(n, now());
                        progress = true;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return self.remove(slot),
                }
            }
            if !progress {
                break;
            }
            rounds += 1;
            if rounds == ROUNDS {
                self.again.push(slot);
                break;
            }
        }
        self.settle(slot);
    }

    /// After driving: close, or re-arm interest and the timer.
    fn settle(&mut self, slot: usize) {
        let stopping = self.shared.stopping.load(Ordering::SeqCst);
        let Some(Some(client)) = self.clients.get_mut(slot) else {
            return;
        };
        let flushed = client.served.conn.pending_output().is_empty();
        if (client.served.conn.is_closed() && flushed) || (stopping && client.served.is_idle()) {
            return self.begin_linger(slot);
        }
        let deadline = if client.served.conn.is_closed() {
            *client
                .flush_until
                .get_or_insert_with(|| Instant::now() + self.config.limits.message_timeout)
        } else {
            match client.served.conn.poll_timeout() {
                Some(at) => at,
                None => {
                    self.set_timer(slot, None);
                    return self.arm(slot);
                }
            }
        };
        self.set_timer(slot, Some(deadline));
        self.arm(slot);
    }

    fn arm(&mut self, slot: usize) {
        let Some(Some(client)) = self.clients.get_mut(slot) else {
            return;
        };
        let read = client.served.conn.wants_read();
        let write = !client.served.conn.pending_output().is_empty();
        // With nothing to write, stay readable even when not reading, to
        // notice a reset.
        let wanted = match (read, write) {
            (true, true) => Interest::READABLE | Interest::WRITABLE,
            (false, true) => Interest::WRITABLE,
            (_, false) => Interest::READABLE,
        };
        if wanted != client.interest {
            client.interest = wanted;
            if self
                .poll
                .registry()
                .reregister(&mut client.stream, Token(slot), wanted)
                .is_err()
            {
                self.remove(slot);
            }
        }
    }

    /// Shuts down our side and drains the peer's input for [`LINGER`].
    fn begin_linger(&mut self, slot: usize) {
        let Some(Some(client)) = self.clients.get_mut(slot) else {
            return;
        };
        let _ = client.stream.shutdown(Shutdown::Write);
        let until = Instant::now() + LINGER;
        client.linger_until = Some(until);
        self.set_timer(slot, Some(until));
        let Some(Some(client)) = self.clients.get_mut(slot) else {
            return;
        };
        if client.interest != Interest::READABLE {
            client.interest = Interest::READABLE;
            let _ = self
                .poll
                .registry()
                .reregister(&mut client.stream, Token(slot), Interest::READABLE);
        }
        self.drive(slot);
    }

    fn set_timer(&mut self, slot: usize, at: Option<Instant>) {
        let Some(Some(client)) = self.clients.get_mut(slot) else {
            return;
        };
        if client.timer == at {
            return;
        }
        if let Some(old) = client.timer.take() {
            self.timers.remove(&(old, slot));
        }
        if let Some(at) = at {
            self.timers.insert((at, slot));
            client.timer = Some(at);
        }
    }

    fn fire_timers(&mut self) {
        let instant = Instant::now();
        while let Some(&(at, slot)) = self.timers.first() {
            if at > instant {
                break;
            }
            self.timers.pop_first();
            let Some(Some(client)) = self.clients.get_mut(slot) else {
                continue;
            };
            client.timer = None;
            if client.linger_until.is_some() || client.flush_until.is_some() {
                self.remove(slot);
            } else {
                client.served.conn.handle_timeout(now());
                self.drive(slot);
            }
        }
    }

    fn remove(&mut self, slot: usize) {
        let Some(mut client) = self.clients.get_mut(slot).and_then(Option::take) else {
            return;
        };
        if let Some(at) = client.timer {
            self.timers.remove(&(at, slot));
        }
        self.again.retain(|s| *s != slot);
        let _ = self.poll.registry().deregister(&mut client.stream);
        self.free.push(slot);
    }
}
