//! The std server: blocking sockets, a thread per open connection.
//!
//! [`serve_connection`] runs one connection over any blocking
//! [`Transport`] (TCP, a Unix socket, a TLS stream) on the calling thread.
//! [`StdServer`] accepts TCP connections and serves each on a thread of its
//! own: `workers` threads wait ready, more start when every one is busy,
//! and the extra ones end after a while without work. So an idle
//! keep-alive connection, or a slow one, never keeps a new client waiting
//! for a thread; [`ServerOptions::max_connections`] bounds the connections
//! (and so the threads) at once: at the cap the one idle longest makes
//! room for a new client (each connection's thread sees that it was asked
//! within a fifth of a second), and with none idle the rest wait in the
//! kernel's backlog.
//! A connection's thread runs its handler once one of the server's
//! [`ServerOptions::max_handlers`] places is free; a shutdown's deadline
//! does not wait for handlers ([`ShutdownHandle`]). For many thousands of
//! connections the mio server costs less.
//!
//! ```no_run
//! use jsontp_protocol::io_adapters::server::ServerOptions;
//! use jsontp_protocol::io_adapters::server::blocking::StdServer;
//! use jsontp_protocol::message::{Body, Request, Response, Status, StatusCode};
//!
//! let hello = |request: &Request| {
//!     Response::new(Status::new(StatusCode::OK, "hello"))
//!         .with_body(Body::text("hello"))
//! };
//! let server = StdServer::bind("127.0.0.1:8080", hello, ServerOptions::default().with_workers(8))?;
//! let stop = server.shutdown_handle(); // stop.shutdown() from another thread
//! server.run()?;
//! # Ok::<(), std::io::Error>(())
//! ```

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::drive::BLOCKING_SLICE;
use super::{
    ACCEPT_BACKOFF, ADMISSION_RETRY, AcceptFaults, Accepted, Bounded, Driver, Handler, Member, OpenSockets,
    Places, Roster, ServerOptions, Step, Told, client_gave_up, listen, stop_listening,
};
use super::{CloseCause, proxied_peer};
use crate::io_adapters::proxy_protocol::read_blocking;
use crate::io_adapters::transport::{IoMode, Transport};

/// Size of each thread's read buffer.
const READ_BUFFER: usize = 16 * 1024;
/// How long a thread beyond the `workers` ready ones waits for another
/// connection before it ends.
const SPARE_THREAD_LIFE: Duration = Duration::from_secs(10);

/// Serves one connection over a blocking `stream` on the calling thread,
/// until it closes. Every read and write is bounded through
/// [`Transport::set_timeout`], so the timers (D3) run however quiet the
/// peer is. `options.config` configures the connection.
pub fn serve_connection<T: Transport, H: Handler + ?Sized>(
    stream: T,
    peer: SocketAddr,
    handler: &H,
    options: &ServerOptions,
) {
    let mut scratch = vec![0; READ_BUFFER];
    let mut stream = stream;
    serve(&mut stream, peer, handler, options, None, None, &mut scratch);
}

/// Runs one connection: performs what the drive step asks. `member`: its
/// place in the server's roster, which the connection cap may ask to
/// close while it is idle (D3); looked at after every step, so within a
/// [`BLOCKING_SLICE`].
fn serve<T: Transport, H: Handler + ?Sized>(
    stream: &mut T,
    peer: SocketAddr,
    handler: &H,
    options: &ServerOptions,
    stopping: Option<&AtomicBool>,
    member: Option<&Member<()>>,
    scratch: &mut [u8],
) {
    let mut driver = Driver::new(peer, options, IoMode::Blocking);
    let mut stopped = false;
    loop {
        if !stopped && stopping.is_some_and(|s| s.load(Ordering::SeqCst)) {
            stopped = true;
            driver.shut_down();
        }
        if let Some(member) = member
            && member.tell(driver.is_idle()) == Told::Close
        {
            member.answer(driver.close_idle());
        }
        match driver.step(stream, scratch) {
            Step::Dispatch => driver.dispatch(handler),
            // Waiting for neither direction: nothing to block on.
            Step::Wait {
                read: false,
                write: false,
                deadline,
            } => {
                let left = deadline.map_or(BLOCKING_SLICE, |d| d.saturating_duration_since(Instant::now()));
                std::thread::sleep(left.min(BLOCKING_SLICE));
            }
            // The timed-out read or write was the wait.
            Step::Wait { .. } | Step::Yield => {}
            Step::Close => return,
        }
    }
}

/// A blocking jsontp server, a thread per connection.
#[derive(Debug)]
pub struct StdServer<H> {
    listener: TcpListener,
    handler: Arc<H>,
    options: ServerOptions,
    shared: Arc<Shared>,
}

/// Stops a running [`StdServer`]: it stops listening at once (new clients
/// are refused), closes idle connections and those awaiting the full
/// request of a handshake, lets every other exchange under way finish, and
/// `run` returns.
///
/// [`ServerOptions::shutdown_timeout`] bounds it all, handlers included:
/// once it has passed, the connections still open are shut down (a
/// handler still running holds its thread, not its connection) and `run`
/// returns without waiting for those threads. Such a handler runs on to
/// its end; what it answers is not sent, and whether its work stands is
/// the application's business (a process that exits then ends it).
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    stopping: AtomicBool,
    /// Where to connect to wake the acceptor blocked in `accept`, where
    /// shutting the listener down does not.
    wake: SocketAddr,
    /// A handle on the listening socket, to stop it listening from the
    /// shutdown handle.
    listener: Mutex<Option<TcpListener>>,
    pool: Mutex<Pool>,
    /// The places handlers take ([`ServerOptions::max_handlers`]).
    places: Arc<Places>,
    /// The open connections' sockets, shut down from here when the drain
    /// deadline passes.
    sockets: OpenSockets,
    /// The open connections, which of them are idle, to make room at the
    /// cap (D3).
    roster: Arc<Roster<()>>,
    shutdown_timeout: Duration,
    /// When the graceful shutdown must be over, once one has begun.
    drain_until: Mutex<Option<Instant>>,
    /// A connection was queued, or the pool closed.
    work: Condvar,
    /// A connection or a thread ended, or shutdown began.
    changed: Condvar,
}

#[derive(Debug, Default)]
struct Pool {
    jobs: VecDeque<(TcpStream, SocketAddr)>,
    /// Threads waiting for a connection.
    idle: usize,
    threads: usize,
    /// Connections accepted and not yet closed.
    open: usize,
    closed: bool,
}

impl Shared {
    fn pool(&self) -> MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// When `run` stops waiting for the connections' threads: the drain
    /// deadline, and one slice more, in which every connection whose
    /// thread is free has noticed it and closed itself.
    fn given_up_at(&self) -> Option<Instant> {
        let until = *self.drain_until.lock().unwrap_or_else(|p| p.into_inner());
        until.map(|until| until + BLOCKING_SLICE)
    }
}

impl<H: Handler> StdServer<H> {
    /// Binds `addr` (with [`listen`]'s backlog) and prepares
    /// to serve `handler`.
    pub fn bind(addr: impl ToSocketAddrs, handler: H, options: ServerOptions) -> io::Result<Self> {
        StdServer::from_listener(listen(addr)?, handler, options)
    }

    /// Serves an already bound listener.
    pub fn from_listener(listener: TcpListener, handler: H, options: ServerOptions) -> io::Result<Self> {
        listener.set_nonblocking(false)?;
        let mut wake = listener.local_addr()?;
        if wake.ip().is_unspecified() {
            let loopback: std::net::IpAddr = match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            };
            wake.set_ip(loopback);
        }
        let handle = listener.try_clone()?;
        let shared = Arc::new(Shared {
            stopping: AtomicBool::new(false),
            wake,
            listener: Mutex::new(Some(handle)),
            pool: Mutex::new(Pool::default()),
            places: Arc::new(Places::new(options.max_handlers)),
            sockets: OpenSockets::default(),
            roster: Arc::default(),
            shutdown_timeout: options.shutdown_timeout,
            drain_until: Mutex::new(None),
            work: Condvar::new(),
            changed: Condvar::new(),
        });
        Ok(StdServer {
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

    /// Serves until [`ShutdownHandle::shutdown`], then waits for the
    /// connections under way and returns: at the latest once
    /// [`ServerOptions::shutdown_timeout`] has passed, whatever their
    /// handlers still do (see [`ShutdownHandle`]).
    pub fn run(self) -> io::Result<()> {
        let StdServer {
            listener,
            handler,
            options,
            shared,
        } = self;
        // Every call takes one of the server's places.
        let handler = Arc::new(Bounded::new(handler, Some(Arc::clone(&shared.places))));
        let ready = options.worker_count();
        for _ in 0..ready {
            shared.pool().threads += 1;
            if spawn(None, &handler, &options, &shared, ready).is_err() {
                shared.pool().threads -= 1;
                close_pool(&shared);
                return Err(io::Error::other("cannot start the server's threads"));
            }
        }
        let result = accept_loop(&listener, &handler, &options, &shared, ready);
        // New clients are refused from here on.
        drop(listener);
        if let Some(handle) = shared.listener.lock().unwrap_or_else(|p| p.into_inner()).take() {
            stop_listening(&handle);
        }
        close_pool(&shared);
        result
    }
}

/// Accepts while there is room, hands each connection to a thread.
fn accept_loop<H: Handler>(
    listener: &TcpListener,
    handler: &Arc<H>,
    options: &ServerOptions,
    shared: &Arc<Shared>,
    ready: usize,
) -> io::Result<()> {
    let max = options.max_connections.max(1);
    let mut faults = AcceptFaults::default();
    if let Some(metrics) = &options.metrics {
        metrics.watch(options);
    }
    loop {
        if shared.stopping() {
            return Ok(());
        }
        let accepted = listener.accept();
        if shared.stopping() {
            return Ok(());
        }
        match accepted {
            Ok((stream, peer)) => {
                faults.accepted();
                if let Some(metrics) = &options.metrics {
                    metrics.count_accepted();
                }
                // At the cap, the client is held until there is room (D3).
                if !make_room(shared, max) {
                    if let Some(metrics) = &options.metrics {
                        metrics.count_unserved(CloseCause::Shutdown);
                    }
                    return Ok(());
                }
                hand_over(stream, peer, handler, options, shared, ready)
            }
            Err(e) if client_gave_up(&e) => {}
            // Out of descriptors or memory: the client stays in the
            // backlog; the open connections go on meanwhile.
            Err(e) if lacks_resources(&e) => {
                faults.failed(&e);
                std::thread::sleep(ACCEPT_BACKOFF);
            }
            Err(e) => return Err(e),
        }
    }
}

/// Waits until fewer than `max` connections are open, asking the one idle
/// longest, if any, to close meanwhile (D3); `false` if a shutdown began
/// first. The client accepted waits unserved, as it would in the backlog.
fn make_room(shared: &Shared, max: usize) -> bool {
    let mut asked = None;
    loop {
        if shared.stopping() {
            return false;
        }
        if shared.pool().open < max {
            return true;
        }
        // Not under the pool's lock: a closing connection takes the
        // roster's, then the pool's.
        shared.roster.make_room(&mut asked);
        let pool = shared.pool();
        if pool.open < max {
            return true;
        }
        // A connection closing wakes it; a member that declines, or one
        // that becomes idle, is seen at the next look.
        let _ = shared
            .changed
            .wait_timeout(pool, ADMISSION_RETRY)
            .unwrap_or_else(|p| p.into_inner());
    }
}

/// Out of descriptors (EMFILE, ENFILE), buffers or memory.
fn lacks_resources(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::OutOfMemory
        || e.kind() == io::ErrorKind::WouldBlock
        || e.raw_os_error().is_some_and(|code| matches!(code, 23 | 24 | 105))
}

/// Gives a connection to a waiting thread, or to a new one.
fn hand_over<H: Handler>(
    stream: TcpStream,
    peer: SocketAddr,
    handler: &Arc<H>,
    options: &ServerOptions,
    shared: &Arc<Shared>,
    ready: usize,
) {
    let mut pool = shared.pool();
    pool.open += 1;
    if pool.idle > pool.jobs.len() {
        pool.jobs.push_back((stream, peer));
        shared.work.notify_one();
        return;
    }
    pool.threads += 1;
    drop(pool);
    if let Err(unstarted) = spawn(Some((stream, peer)), handler, options, shared, ready) {
        // No thread to be had: the connection waits for one to be free.
        let mut pool = shared.pool();
        pool.threads -= 1;
        if let Some(job) = unstarted {
            pool.jobs.push_back(job);
        }
    }
}

type Job = (TcpStream, SocketAddr);

/// Starts a thread that serves `first`, then whatever is queued. Gives the
/// job back if no thread could be started.
fn spawn<H: Handler>(
    first: Option<Job>,
    handler: &Arc<H>,
    options: &ServerOptions,
    shared: &Arc<Shared>,
    ready: usize,
) -> Result<(), Option<Job>> {
    let job = Arc::new(Mutex::new(first));
    let (handler, options, shared) = (Arc::clone(handler), options.clone(), Arc::clone(shared));
    let handed = Arc::clone(&job);
    let started = std::thread::Builder::new()
        .name("jsontp-std".into())
        .spawn(move || {
            let first = handed.lock().unwrap_or_else(|p| p.into_inner()).take();
            work(first, &*handler, &options, &shared, ready);
        });
    match started {
        Ok(_) => Ok(()),
        Err(_) => Err(job.lock().unwrap_or_else(|p| p.into_inner()).take()),
    }
}

/// A server thread: serves one connection after another; a spare thread
/// ends after [`SPARE_THREAD_LIFE`] without one.
fn work<H: Handler>(
    mut job: Option<Job>,
    handler: &H,
    options: &ServerOptions,
    shared: &Shared,
    ready: usize,
) {
    let mut scratch = vec![0; READ_BUFFER];
    loop {
        if let Some((mut stream, peer)) = job.take() {
            // Responses are written whole: Nagle would only delay them.
            let _ = stream.set_nodelay(true);
            // Behind a load balancer the client is who the PROXY header
            // says; without a valid one, no response at all (D21).
            let peer = if options.proxy_protocol {
                let limit = options.config.limits.message_timeout;
                // A header still awaited does not delay a shutdown.
                let stopping = || shared.stopping.load(Ordering::SeqCst);
                let header = read_blocking(&mut stream, limit, BLOCKING_SLICE, stopping);
                proxied_peer(header, peer)
            } else {
                Some(peer)
            };
            // A TLS handshake that fails closes this connection only.
            let accepted = peer.map(|peer| (peer, Accepted::new(stream, options)));
            if let Some(metrics) = &options.metrics {
                match &accepted {
                    None => metrics.count_unserved(CloseCause::NoProxyHeader),
                    Some((_, Err(_))) => metrics.count_unserved(CloseCause::TransportFailed),
                    Some((_, Ok(_))) => {}
                }
            }
            if let Some((peer, Ok(mut stream))) = accepted {
                shared.sockets.add(stream.get_ref());
                let member = shared.roster.enroll(());
                serve(
                    &mut stream,
                    peer,
                    handler,
                    options,
                    Some(&shared.stopping),
                    Some(&member),
                    &mut scratch,
                );
                drop(member);
                // Out of the set before it closes (dropped below).
                shared.sockets.remove(stream.get_ref());
            }
            shared.pool().open -= 1;
            shared.changed.notify_all();
        }
        let mut pool = shared.pool();
        pool.idle += 1;
        let mut until = Instant::now() + SPARE_THREAD_LIFE;
        loop {
            if let Some(next) = pool.jobs.pop_front() {
                pool.idle -= 1;
                job = Some(next);
                break;
            }
            let now = Instant::now();
            if pool.closed || (now >= until && pool.threads > ready) {
                pool.idle -= 1;
                pool.threads -= 1;
                shared.changed.notify_all();
                return;
            }
            if now >= until {
                until = now + SPARE_THREAD_LIFE;
            }
            pool = shared
                .work
                .wait_timeout(pool, until - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// Tells every thread to end once its connection is done, and waits for
/// them: once a shutdown's drain deadline has passed, no longer. The
/// connections still open then (their threads held by handlers) are shut
/// down, and their threads left to end on their own.
fn close_pool(shared: &Shared) {
    let mut pool = shared.pool();
    pool.closed = true;
    shared.work.notify_all();
    while pool.threads > 0 {
        let Some(until) = shared.given_up_at() else {
            pool = shared.changed.wait(pool).unwrap_or_else(|p| p.into_inner());
            continue;
        };
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            drop(pool);
            tracing::warn!(
                "shutdown deadline passed with handlers still running: their connections are closed"
            );
            shared.sockets.shut_all();
            return;
        }
        pool = shared
            .changed
            .wait_timeout(pool, left)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

impl ShutdownHandle {
    /// Starts the graceful shutdown; returns at once.
    pub fn shutdown(&self) {
        let until = Instant::now() + self.shared.shutdown_timeout;
        {
            // Set before `stopping`, which `run` waits for, so that it
            // finds the deadline set.
            let mut drain_until = self.shared.drain_until.lock().unwrap_or_else(|p| p.into_inner());
            if drain_until.is_some() {
                return;
            }
            *drain_until = Some(until);
        }
        // A request still waiting for a handler then never gets one.
        self.shared.places.close_at(until);
        self.shared.stopping.store(true, Ordering::SeqCst);
        let handle = self
            .shared
            .listener
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(handle) = handle {
            stop_listening(&handle);
        }
        // Wake the acceptor if it waits for room, or in `accept` where
        // shutting the listener down does not wake it.
        {
            let _pool = self.shared.pool();
            self.shared.changed.notify_all();
        }
        let _ = TcpStream::connect_timeout(&self.shared.wake, Duration::from_secs(1));
    }
}
