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
//! Each connection is a [`Driver`](super::Driver) over a non-blocking socket registered
//! once, edge-triggered, for both directions; the worker performs what
//! [`Driver::step`](super::Driver::step) asks and nothing else. Reads go through one scratch
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
//!
//! Here is the [`MioServer`] that starts the workers and waits for them.
//! The rest is in files by concern: `shared.rs` (what the workers share,
//! and the [`ShutdownHandle`]), `worker.rs` (a worker's event loop, its
//! accepts and its mail) and `connection.rs` (what a worker does for each
//! connection).

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex};

use mio::Token;
use mio::net::TcpListener;

pub use shared::ShutdownHandle;
use shared::{Ending, Shared};
use worker::Worker;

use super::{Bounded, ConnectionSettings, Handler, OpenSockets, Places, ServerOptions, listen};
use crate::io_adapters::transport::IoMode;

mod connection;
mod shared;
mod worker;

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
