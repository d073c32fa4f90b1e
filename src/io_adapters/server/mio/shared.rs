//! What every worker of an event-loop server shares (a
//! [`MioServer`](super::MioServer)'s, and the io_uring server's): the
//! count of open connections under the cap, the roster of idle ones and
//! the [`Mail`] that asks one to close for a newcomer (D3), the drain
//! deadline; the [`ShutdownHandle`] that starts the shutdown, and
//! [`run_workers`], which starts the workers' threads and waits for them.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::io_adapters::server::{
    Bounded, ConnectionSettings, Handler, OpenSockets, Places, Roster, ServerOptions, Wake, stop_listening,
};

/// Wakes a worker's event loop from another thread.
pub(in crate::io_adapters::server) type Waker = Arc<dyn WakeWorker>;

/// What wakes a worker: a mio `Waker`, an io_uring worker's eventfd.
pub(in crate::io_adapters::server) trait WakeWorker:
    Wake + std::fmt::Debug + Send + Sync
{
}

impl<W: Wake + std::fmt::Debug + Send + Sync> WakeWorker for W {}

impl Wake for mio::Waker {
    fn wake(&self) {
        // Fails only if the poll is gone, and with it the worker.
        let _ = mio::Waker::wake(self);
    }
}

/// Stops a running [`MioServer`](super::MioServer) (or io_uring server): it stops listening at once (new clients
/// are refused; [`hand_over`](Self::hand_over) leaves them to another process), every worker closes its idle connections and those
/// awaiting the full request of a handshake, finishes the exchanges under
/// way (bounded by the D3 timers), and `run` returns.
///
/// [`ServerOptions::shutdown_timeout`](crate::io_adapters::server::ServerOptions::shutdown_timeout) bounds it all, handlers included: a
/// handler runs on its worker's thread, so once the deadline has passed
/// the connections of a worker still held by one are shut down from
/// outside, and `run` returns without waiting for that thread. The
/// handler runs on to its end; what it answers is not sent, and whether
/// its work stands is the application's business (a process that exits
/// then ends it).
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    pub(in crate::io_adapters::server) shared: Arc<Shared>,
}

#[derive(Debug)]
pub(in crate::io_adapters::server) struct Shared {
    pub(in crate::io_adapters::server) stopping: AtomicBool,
    pub(in crate::io_adapters::server) wakers: Mutex<Vec<Waker>>,
    /// Connections open, all workers together.
    pub(in crate::io_adapters::server) open: AtomicUsize,
    pub(in crate::io_adapters::server) max: usize,
    /// The open connections, all workers together, which of them are
    /// idle, to make room at the cap (D3).
    pub(in crate::io_adapters::server) roster: Arc<Roster<Mail>>,
    /// Handles on the listening sockets, to stop them listening from the
    /// shutdown handle (emptied once it has).
    pub(in crate::io_adapters::server) listeners: Mutex<Vec<std::net::TcpListener>>,
    /// The places handlers take, when there are fewer than workers.
    pub(in crate::io_adapters::server) places: Option<Arc<Places>>,
    pub(in crate::io_adapters::server) shutdown_timeout: Duration,
    /// When the graceful shutdown must be over, once one has begun.
    pub(in crate::io_adapters::server) drain_until: Mutex<Option<Instant>>,
    /// Workers whose thread has ended.
    pub(in crate::io_adapters::server) ended: Mutex<usize>,
    /// A worker ended, or shutdown began.
    pub(in crate::io_adapters::server) changed: Condvar,
}

/// Counts its worker as ended when its thread does, panicking or not.
pub(in crate::io_adapters::server) struct Ending(pub(in crate::io_adapters::server) Arc<Shared>);

impl Drop for Ending {
    fn drop(&mut self) {
        *self.0.ended.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.0.changed.notify_all();
    }
}

impl Shared {
    /// What the workers of a server with `options` serving `listeners`
    /// share, the sockets made non-blocking; an empty list is an error.
    pub(in crate::io_adapters::server) fn serving(
        listeners: &[std::net::TcpListener],
        options: &ServerOptions,
    ) -> io::Result<Shared> {
        if listeners.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no listening socket to serve",
            ));
        }
        let mut handles = Vec::with_capacity(listeners.len());
        for listener in listeners {
            listener.set_nonblocking(true)?;
            handles.push(listener.try_clone()?);
        }
        Ok(Shared::new(options, handles))
    }

    /// What the workers of a server with `options` share, `listeners`
    /// being handles on its listening sockets.
    fn new(options: &ServerOptions, listeners: Vec<std::net::TcpListener>) -> Shared {
        // A worker calls one handler at a time (an `async` answer it
        // awaits takes no place): places are needed only when there are
        // fewer than workers.
        let places = (options.max_handlers < options.worker_count())
            .then(|| Arc::new(Places::new(options.max_handlers)));
        Shared {
            stopping: AtomicBool::new(false),
            wakers: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            max: options.max_connections.max(1),
            roster: Arc::default(),
            listeners: Mutex::new(listeners),
            places,
            shutdown_timeout: options.shutdown_timeout,
            drain_until: Mutex::new(None),
            ended: Mutex::new(0),
            changed: Condvar::new(),
        }
    }

    /// When `run` stops waiting for the workers: the drain deadline, and a
    /// little more, in which every worker not held by a handler has closed
    /// its connections itself.
    pub(in crate::io_adapters::server) fn given_up_at(&self) -> Option<Instant> {
        let until = *self.drain_until.lock().unwrap_or_else(|p| p.into_inner());
        until.map(|until| until + Duration::from_millis(200))
    }

    pub(in crate::io_adapters::server) fn wake_all(&self) {
        for waker in self.wakers.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            waker.wake();
        }
    }

    /// Takes a place for one more connection, if there is room.
    pub(in crate::io_adapters::server) fn reserve(&self) -> bool {
        if self.open.fetch_add(1, Ordering::SeqCst) < self.max {
            return true;
        }
        self.open.fetch_sub(1, Ordering::SeqCst);
        false
    }

    /// Gives back a place taken for an accept that brought no connection.
    pub(in crate::io_adapters::server) fn unreserve(&self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }

    /// Gives a connection's place back; wakes the workers when that makes
    /// room again.
    pub(in crate::io_adapters::server) fn release(&self) {
        if self.open.fetch_sub(1, Ordering::SeqCst) == self.max {
            self.wake_all();
        }
    }
}

impl Shared {
    /// Waits until `workers` threads have ended; once a shutdown began, no
    /// later than its deadline (`false` then).
    pub(in crate::io_adapters::server) fn wait_for_workers(&self, workers: usize) -> bool {
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
        self.stop(Listening::Stop);
    }

    /// Starts the graceful shutdown of a server whose listening sockets
    /// another process has taken over (an upgrade in place, a socket
    /// systemd keeps): as [`shutdown`](Self::shutdown), but the sockets
    /// are not shut. The workers stop accepting and close their handles,
    /// and the clients that arrive meanwhile wait in the sockets' queues
    /// for the other process, instead of being refused. Returns at once.
    pub fn hand_over(&self) {
        self.stop(Listening::HandOver);
    }

    fn stop(&self, listening: Listening) {
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
        let handles = std::mem::take(&mut *self.shared.listeners.lock().unwrap_or_else(|p| p.into_inner()));
        if listening == Listening::Stop {
            for handle in &handles {
                stop_listening(handle);
            }
        }
        self.shared.wake_all();
    }
}

/// What a shutdown does to the listening sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listening {
    /// Shut them: new clients are refused at once.
    Stop,
    /// Leave them listening for the process that shares them.
    HandOver,
}

/// Where a worker is told which of its connections were asked to close
/// to make room at the cap (D3), from any worker, and which have an
/// awaited answer to poll again, from any thread.
#[derive(Debug)]
pub(in crate::io_adapters::server) struct Mailbox {
    pub(in crate::io_adapters::server) waker: Waker,
    pub(in crate::io_adapters::server) asked: Mutex<Vec<usize>>,
    woken: Mutex<Vec<usize>>,
}

impl Mailbox {
    pub(in crate::io_adapters::server) fn new(waker: Waker) -> Mailbox {
        Mailbox {
            waker,
            asked: Mutex::new(Vec::new()),
            woken: Mutex::new(Vec::new()),
        }
    }

    /// The waker of the answer awaited by the connection in `slot`.
    pub(in crate::io_adapters::server) fn answer_waker(self: &Arc<Self>, slot: usize) -> std::task::Waker {
        std::task::Waker::from(Arc::new(Woken {
            mailbox: Arc::clone(self),
            slot,
        }))
    }

    /// Puts `slot` on one of the mailbox's lists (once) and wakes the
    /// worker to read it.
    fn post(&self, list: &Mutex<Vec<usize>>, slot: usize) {
        {
            let mut list = list.lock().unwrap_or_else(|p| p.into_inner());
            // Once each: a connection named often grows nothing.
            if !list.contains(&slot) {
                list.push(slot);
            }
        }
        self.waker.wake();
    }

    /// The connections whose awaited answers were woken since the last
    /// call. A connection closed since may be among them, or its slot
    /// taken by another: a poll too many does a future no harm.
    pub(in crate::io_adapters::server) fn take_woken(&self) -> Vec<usize> {
        std::mem::take(&mut *self.woken.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Wakes the worker of the connection in `slot` to poll its awaited
/// answer.
struct Woken {
    mailbox: Arc<Mailbox>,
    slot: usize,
}

impl std::task::Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.mailbox.post(&self.mailbox.woken, self.slot);
    }
}

/// Wakes the worker of the connection in `slot` to read that it was asked
/// to close.
#[derive(Debug)]
pub(in crate::io_adapters::server) struct Mail {
    pub(in crate::io_adapters::server) mailbox: Arc<Mailbox>,
    pub(in crate::io_adapters::server) slot: usize,
}

impl Wake for Mail {
    fn wake(&self) {
        self.mailbox.post(&self.mailbox.asked, self.slot);
    }
}

/// A worker of an event-loop server, made ready to run on a thread of
/// its own.
pub(in crate::io_adapters::server) type Work = Box<dyn FnOnce() -> io::Result<()> + Send>;

/// Starts `workers` threads named `name-N`, worker `n`'s work made by
/// `make(n, the listeners, its open sockets)`, and waits for them: until they all ended,
/// or a shutdown's deadline passed (then the connections of workers still
/// held by a handler are shut from here, and their threads are left to
/// end on their own). `listeners`, the server's handles on its sockets,
/// are dropped once the workers hold their own.
pub(in crate::io_adapters::server) fn run_workers(
    shared: &Arc<Shared>,
    listeners: Vec<std::net::TcpListener>,
    workers: usize,
    name: &str,
    mut make: impl FnMut(usize, &[std::net::TcpListener], Arc<OpenSockets>) -> io::Result<Work>,
) -> io::Result<()> {
    let mut threads = Vec::new();
    let mut sockets = Vec::new();
    // Every worker made before any starts, so that they start accepting
    // together: a worker still being made would leave the clients the
    // kernel queued on its socket waiting behind later ones.
    let made: Vec<_> = (0..workers)
        .map(|n| {
            let open = Arc::new(OpenSockets::default());
            make(n, &listeners, Arc::clone(&open)).map(|work| (work, open))
        })
        .collect();
    let mut result = Ok(());
    for (n, made) in made.into_iter().enumerate() {
        let thread = std::thread::Builder::new().name(format!("{name}-{n}"));
        let ending = Arc::clone(shared);
        let started = made.and_then(|(work, open)| {
            let thread = thread.spawn(move || {
                let _ending = Ending(ending);
                work()
            });
            thread.map(|thread| (thread, open))
        });
        match started {
            Ok((thread, open)) => {
                threads.push(thread);
                sockets.push(open);
            }
            Err(e) => {
                result = Err(e);
                ShutdownHandle {
                    shared: Arc::clone(shared),
                }
                .shutdown();
                break;
            }
        }
    }
    // The workers hold their own handles; once they drop them at
    // shutdown, the sockets are closed (unless handed over).
    drop(listeners);
    if !shared.wait_for_workers(threads.len()) {
        tracing::warn!("shutdown deadline passed with handlers still running: their connections are closed");
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

/// What a server on worker threads holds until it runs: its listening
/// sockets, its handler, its options and the state its workers share. The
/// mio and io_uring servers are each this, with workers of their own.
#[derive(Debug)]
pub(in crate::io_adapters::server) struct Prepared<H> {
    listeners: Vec<std::net::TcpListener>,
    handler: Arc<H>,
    options: ServerOptions,
    shared: Arc<Shared>,
}

/// What one worker starts with: the sockets it accepts from
/// ([`share_out`]), the handler within the server's places, the options,
/// its settings (and metrics shard), the shared state and its open
/// sockets.
pub(in crate::io_adapters::server) struct WorkerParts<H> {
    pub(in crate::io_adapters::server) listeners: Vec<std::net::TcpListener>,
    pub(in crate::io_adapters::server) handler: Arc<Bounded<H>>,
    pub(in crate::io_adapters::server) options: ServerOptions,
    pub(in crate::io_adapters::server) settings: ConnectionSettings,
    pub(in crate::io_adapters::server) shared: Arc<Shared>,
    pub(in crate::io_adapters::server) open: Arc<OpenSockets>,
}

impl<H: Handler> Prepared<H> {
    /// Serving `handler` on `listeners` (an empty list is an error).
    pub(in crate::io_adapters::server) fn new(
        listeners: Vec<std::net::TcpListener>,
        handler: H,
        options: ServerOptions,
    ) -> io::Result<Self> {
        let shared = Arc::new(Shared::serving(&listeners, &options)?);
        Ok(Prepared {
            listeners,
            handler: Arc::new(handler),
            options,
            shared,
        })
    }

    /// The first listening socket's address.
    pub(in crate::io_adapters::server) fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.listeners[0].local_addr()
    }

    /// The listening sockets.
    pub(in crate::io_adapters::server) fn listeners(&self) -> &[std::net::TcpListener] {
        &self.listeners
    }

    /// A handle that stops the server from another thread.
    pub(in crate::io_adapters::server) fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Runs the workers the options ask for on threads named `name-N`
    /// ([`run_workers`]), worker `n`'s work made by `make` from its parts.
    pub(in crate::io_adapters::server) fn run(
        self,
        name: &str,
        make: impl Fn(WorkerParts<H>) -> io::Result<Work>,
    ) -> io::Result<()> {
        let settings = ConnectionSettings::new(&self.options);
        let places = self.shared.places.clone();
        let handler = Arc::new(Bounded::new(Arc::clone(&self.handler), places));
        let workers = self.options.worker_count();
        let (options, shared) = (self.options, self.shared);
        run_workers(&shared, self.listeners, workers, name, |n, listeners, open| {
            make(WorkerParts {
                listeners: share_out(listeners, workers, n)?,
                handler: Arc::clone(&handler),
                settings: settings.for_worker(n, &options),
                options: options.clone(),
                shared: Arc::clone(&shared),
                open,
            })
        })
    }
}

/// The sockets worker `n` of `workers` accepts from: every `workers`th
/// one from the `n`th when there are enough to go round, else one that
/// it shares with other workers. No socket is left without a worker: a
/// client the kernel queued on it would wait for nobody.
pub(in crate::io_adapters::server) fn share_out(
    listeners: &[std::net::TcpListener],
    workers: usize,
    n: usize,
) -> io::Result<Vec<std::net::TcpListener>> {
    let mine: Vec<&std::net::TcpListener> = if listeners.len() >= workers {
        listeners.iter().skip(n).step_by(workers).collect()
    } else {
        vec![&listeners[n % listeners.len()]]
    };
    mine.into_iter().map(std::net::TcpListener::try_clone).collect()
}
