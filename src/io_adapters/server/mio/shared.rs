//! What every worker of a [`MioServer`](super::MioServer) shares: the
//! count of open connections under the cap, the roster of idle ones and
//! the [`Mail`] that asks one to close for a newcomer (D3), the drain
//! deadline; and the [`ShutdownHandle`] that starts the shutdown.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use mio::Waker;

use crate::io_adapters::server::{Places, Roster, Wake, stop_listening};

/// Stops a running [`MioServer`](super::MioServer): it stops listening at once (new clients
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
    pub(super) shared: Arc<Shared>,
}

#[derive(Debug)]
pub(super) struct Shared {
    pub(super) stopping: AtomicBool,
    pub(super) wakers: Mutex<Vec<Arc<Waker>>>,
    /// Connections open, all workers together.
    pub(super) open: AtomicUsize,
    pub(super) max: usize,
    /// The open connections, all workers together, which of them are
    /// idle, to make room at the cap (D3).
    pub(super) roster: Arc<Roster<Mail>>,
    /// Handles on the listening sockets, to stop them listening from the
    /// shutdown handle (emptied once it has).
    pub(super) listeners: Mutex<Vec<std::net::TcpListener>>,
    /// The places handlers take, when there are fewer than workers.
    pub(super) places: Option<Arc<Places>>,
    pub(super) shutdown_timeout: Duration,
    /// When the graceful shutdown must be over, once one has begun.
    pub(super) drain_until: Mutex<Option<Instant>>,
    /// Workers whose thread has ended.
    pub(super) ended: Mutex<usize>,
    /// A worker ended, or shutdown began.
    pub(super) changed: Condvar,
}

/// Counts its worker as ended when its thread does, panicking or not.
pub(super) struct Ending(pub(super) Arc<Shared>);

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
    pub(super) fn given_up_at(&self) -> Option<Instant> {
        let until = *self.drain_until.lock().unwrap_or_else(|p| p.into_inner());
        until.map(|until| until + Duration::from_millis(200))
    }

    pub(super) fn wake_all(&self) {
        for waker in self.wakers.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = waker.wake();
        }
    }

    /// Takes a place for one more connection, if there is room.
    pub(super) fn reserve(&self) -> bool {
        if self.open.fetch_add(1, Ordering::SeqCst) < self.max {
            return true;
        }
        self.open.fetch_sub(1, Ordering::SeqCst);
        false
    }

    /// Gives back a place taken for an accept that brought no connection.
    pub(super) fn unreserve(&self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
    }

    /// Gives a connection's place back; wakes the workers when that makes
    /// room again.
    pub(super) fn release(&self) {
        if self.open.fetch_sub(1, Ordering::SeqCst) == self.max {
            self.wake_all();
        }
    }
}

impl Shared {
    /// Waits until `workers` threads have ended; once a shutdown began, no
    /// later than its deadline (`false` then).
    pub(super) fn wait_for_workers(&self, workers: usize) -> bool {
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
/// to make room at the cap (D3), from any worker.
#[derive(Debug)]
pub(super) struct Mailbox {
    pub(super) waker: Arc<Waker>,
    pub(super) asked: Mutex<Vec<usize>>,
}

/// Wakes the worker of the connection in `slot` to read that it was asked
/// to close.
#[derive(Debug)]
pub(super) struct Mail {
    pub(super) mailbox: Arc<Mailbox>,
    pub(super) slot: usize,
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
