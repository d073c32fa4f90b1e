//! The bookkeeping of connections per origin that each pool runs under
//! its own lock: the idle ones and their age, the per-host limit, the
//! lease a call holds its connection by, and whether an idle socket has
//! heard from its server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::options::PoolOptions;
use super::origin::Origin;

/// A pooled connection, as the bookkeeping sees it.
pub(crate) trait Pooled: Send {
    /// Whether the client has found it unusable (closed, broken).
    fn is_closed(&self) -> bool;

    /// Whether the server has closed it, or sent what nobody asked for,
    /// while it was idle: then it is never used again.
    fn server_spoke(&self) -> bool;
}

/// How a pool wakes the calls waiting for a connection.
pub(crate) trait Signal: Default + Send + Sync {
    fn wake_all(&self);
}

impl Signal for std::sync::Condvar {
    fn wake_all(&self) {
        self.notify_all();
    }
}

#[cfg(feature = "tokio")]
impl Signal for ::tokio::sync::Notify {
    fn wake_all(&self) {
        self.notify_waiters();
    }
}

/// Whether the task that closes idle connections in time runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reaper {
    Stopped,
    Running,
}

/// A pool's state: its options, its connections per origin under one
/// lock, and the signal that wakes the calls waiting for one.
pub(crate) struct Shared<C, S> {
    pub(crate) options: PoolOptions,
    hosts: Mutex<Hosts<C>>,
    pub(crate) signal: S,
}

/// The connections of every origin.
pub(crate) struct Hosts<C> {
    map: HashMap<Origin, Host<C>>,
    pub(crate) reaper: Reaper,
    /// Counts the changes a waiting call may be waiting for (a connection
    /// back, a place freed): a call that saw `Full` at one count waits
    /// until it moves, so that no change between its look and its wait is
    /// missed.
    pub(crate) changes: u64,
}

/// One origin's connections: `open` counts those idle and those in use
/// (and those being made), which the per-host limit bounds.
struct Host<C> {
    /// Oldest first: a call takes the most recently used.
    idle: Vec<Idle<C>>,
    open: usize,
}

struct Idle<C> {
    conn: C,
    since: Instant,
}

/// What a call may do with an origin now.
pub(crate) enum Checkout<C> {
    /// Use this idle connection.
    Reuse(C),
    /// Make a new connection: a place for it is counted.
    Connect,
    /// Wait for the count of changes to move from this one: every place
    /// is taken.
    Full(u64),
}

impl<C: Pooled, S: Signal> Shared<C, S> {
    pub(crate) fn new(mut options: PoolOptions) -> Self {
        options.max_connections_per_host = options.max_connections_per_host.max(1);
        Shared {
            options,
            hosts: Mutex::new(Hosts {
                map: HashMap::new(),
                reaper: Reaper::Stopped,
                changes: 0,
            }),
            signal: S::default(),
        }
    }

    /// The time, as the clients read it.
    pub(crate) fn now(&self) -> Instant {
        self.options.client.clock.now().instant
    }

    /// The lock over every origin's connections. A panic elsewhere while
    /// it was held leaves the counts as they were, which stay usable.
    pub(crate) fn hosts(&self) -> MutexGuard<'_, Hosts<C>> {
        self.hosts.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes an idle connection to `origin` that is still good, or a place
    /// for a new one, or says to wait. Idle connections past their time,
    /// or that the server closed meanwhile, are closed on the way.
    pub(crate) fn checkout(&self, origin: &Origin) -> Checkout<C> {
        let now = self.now();
        let mut hosts = self.hosts();
        let host = hosts.map.entry(origin.clone()).or_insert_with(|| Host {
            idle: Vec::new(),
            open: 0,
        });
        let mut freed = host.prune(now, self.options.idle_timeout);
        let mut checkout = None;
        while let Some(idle) = host.idle.pop() {
            if !idle.conn.is_closed() && !idle.conn.server_spoke() {
                checkout = Some(Checkout::Reuse(idle.conn));
                break;
            }
            host.open -= 1;
            freed = true;
        }
        if checkout.is_none() && host.open < self.options.max_connections_per_host {
            host.open += 1;
            checkout = Some(Checkout::Connect);
        }
        if freed {
            hosts.changes += 1;
        }
        let checkout = checkout.unwrap_or(Checkout::Full(hosts.changes));
        drop(hosts);
        // Places freed here may be more than this call takes.
        if freed {
            self.signal.wake_all();
        }
        checkout
    }

    /// A connection back from a call: kept idle when it is usable and
    /// there is room, else closed and its place freed. `true` when the
    /// reaper must start.
    pub(crate) fn check_in(&self, origin: &Origin, conn: C) -> bool {
        let now = self.now();
        let mut hosts = self.hosts();
        let Some(host) = hosts.map.get_mut(origin) else {
            return false;
        };
        let start = if conn.is_closed() || host.idle.len() >= self.options.max_idle_per_host {
            host.open -= 1;
            drop(conn);
            false
        } else {
            host.idle.push(Idle { conn, since: now });
            // Only on the system's clock: the reaper sleeps real time. On
            // a clock of the caller's, idle connections past their time
            // are closed when the pool is next used for their origin.
            self.options.idle_timeout.is_some()
                && self.options.client.clock.is_system()
                && hosts.reaper == Reaper::Stopped
        };
        if start {
            hosts.reaper = Reaper::Running;
        }
        hosts.changes += 1;
        drop(hosts);
        self.signal.wake_all();
        start
    }

    /// A place given up (a connection closed, or never made).
    pub(crate) fn release(&self, origin: &Origin) {
        let mut hosts = self.hosts();
        if let Some(host) = hosts.map.get_mut(origin) {
            host.open -= 1;
            if host.open == 0 {
                hosts.map.remove(origin);
            }
        }
        hosts.changes += 1;
        drop(hosts);
        self.signal.wake_all();
    }

    /// Closes the idle connections past their time. The next time one
    /// will be, or `None` when none is idle: the reaper stops (it is
    /// marked stopped here, under the lock, so that the next connection
    /// to come back starts it again).
    pub(crate) fn reap(&self) -> Option<Instant> {
        let now = self.now();
        let limit = self.options.idle_timeout?;
        let mut hosts = self.hosts();
        let mut next: Option<Instant> = None;
        let mut freed = false;
        hosts.map.retain(|_, host| {
            freed |= host.prune(now, Some(limit));
            if let Some(oldest) = host.idle.first() {
                let due = oldest.since + limit;
                next = Some(next.map_or(due, |n| n.min(due)));
            }
            host.open > 0
        });
        if next.is_none() {
            hosts.reaper = Reaper::Stopped;
        }
        if freed {
            hosts.changes += 1;
        }
        drop(hosts);
        if freed {
            self.signal.wake_all();
        }
        next
    }

    /// Idle connections to `origin`.
    pub(crate) fn idle_count(&self, origin: &Origin) -> usize {
        self.hosts().map.get(origin).map_or(0, |h| h.idle.len())
    }

    /// Connections to `origin`, idle or in use.
    pub(crate) fn open_count(&self, origin: &Origin) -> usize {
        self.hosts().map.get(origin).map_or(0, |h| h.open)
    }
}

impl<C> Host<C> {
    /// Closes the idle connections older than `limit`; whether any was.
    fn prune(&mut self, now: Instant, limit: Option<Duration>) -> bool {
        let Some(limit) = limit else {
            return false;
        };
        let before = self.idle.len();
        // Oldest first: the expired ones are a prefix.
        let expired = self.idle.partition_point(|idle| now >= idle.since + limit);
        self.idle.drain(..expired);
        self.open -= before - self.idle.len();
        expired > 0
    }
}

/// A place a call holds among an origin's connections, and the
/// connection in it: given back by [`finish`](Self::finish), freed when
/// dropped without (a call that failed, or was cancelled mid-exchange:
/// its connection closes with it).
pub(crate) struct Lease<C: Pooled, S: Signal> {
    shared: Arc<Shared<C, S>>,
    origin: Origin,
    held: Held<C>,
}

/// What a lease holds.
enum Held<C> {
    /// A place, its connection being made.
    Place,
    /// A connection: `reused` when it came from the idle ones.
    Conn { conn: C, reused: bool },
    /// Nothing any more: the connection went back, or the place was freed.
    Nothing,
}

impl<C: Pooled, S: Signal> Lease<C, S> {
    /// A place counted by [`Shared::checkout`], with its connection when
    /// it was an idle one.
    pub(crate) fn new(shared: Arc<Shared<C, S>>, origin: Origin, reused: Option<C>) -> Self {
        let held = match reused {
            Some(conn) => Held::Conn { conn, reused: true },
            None => Held::Place,
        };
        Lease { shared, origin, held }
    }

    pub(crate) fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Puts a new connection in the place (closing any there before).
    pub(crate) fn connected(&mut self, conn: C) {
        self.held = Held::Conn { conn, reused: false };
    }

    /// Gives up the connection held, keeping the place for a new one.
    pub(crate) fn reconnecting(&mut self) {
        self.held = Held::Place;
    }

    /// Whether the connection held came from the idle ones.
    pub(crate) fn reused(&self) -> bool {
        matches!(self.held, Held::Conn { reused: true, .. })
    }

    /// The connection held, if one is.
    pub(crate) fn conn(&mut self) -> Option<&mut C> {
        match &mut self.held {
            Held::Conn { conn, .. } => Some(conn),
            _ => None,
        }
    }

    /// Gives the connection back to the pool (kept idle if it is still
    /// usable). `true` when the reaper must start.
    pub(crate) fn finish(mut self) -> bool {
        match std::mem::replace(&mut self.held, Held::Nothing) {
            Held::Conn { conn, .. } => self.shared.check_in(&self.origin, conn),
            Held::Place => {
                self.shared.release(&self.origin);
                false
            }
            Held::Nothing => false,
        }
    }
}

impl<C: Pooled, S: Signal> Drop for Lease<C, S> {
    fn drop(&mut self) {
        if !matches!(self.held, Held::Nothing) {
            // The connection, mid-exchange or broken, closes here.
            self.held = Held::Nothing;
            self.shared.release(&self.origin);
        }
    }
}

/// Whether a TCP socket that should be quiet (idle, between exchanges)
/// has had its end closed by the server or holds bytes nobody asked for:
/// one peek, which never blocks and leaves the bytes where they are.
#[cfg(unix)]
pub(crate) fn socket_spoke(socket: std::os::fd::BorrowedFd<'_>) -> bool {
    use rustix::net::{RecvFlags, recv};
    let mut byte = [0u8; 1];
    loop {
        match recv(socket, &mut byte[..], RecvFlags::PEEK | RecvFlags::DONTWAIT) {
            // Nothing to read, and the stream is open: quiet.
            Err(rustix::io::Errno::AGAIN) => return false,
            Err(rustix::io::Errno::INTR) => {}
            // The end of the stream, bytes (a TLS alert, a last word
            // before a close), or an error such as a reset.
            Ok(_) | Err(_) => return true,
        }
    }
}

/// Elsewhere the pool cannot tell without reading: a connection the
/// server closed is found out by its call, and retried where D13 allows.
#[cfg(not(unix))]
pub(crate) fn socket_spoke<T>(_socket: T) -> bool {
    false
}
