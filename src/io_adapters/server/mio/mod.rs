//! The mio event-loop server (feature `mio`), the engine of `jsontp serve`.
//!
//! `workers` threads (default: one per core), each with its own `Poll`,
//! its connections, and a sorted set of their deadlines that sets the poll
//! timeout. [`MioServer::bind`] gives every worker a listening socket of
//! its own on the same port ([`listen_group`],
//! `SO_REUSEPORT`, Linux): the kernel spreads new connections evenly
//! across them, with no acceptor thread, no hand-over between threads and
//! no race of waking workers. The price is that a worker busy in a long
//! handler leaves the clients sent to its socket waiting, as nginx's
//! `reuseport` does; where that matters, [`MioServer::from_listener`] with
//! one [`listen`](super::listen) socket lets every worker accept from it,
//! whichever wakes first. Sockets passed in (a supervisor's, systemd's, a
//! previous process's: [`MioServer::from_listeners`]) are shared out
//! among the workers, every socket accepted from.
//!
//! Each connection is a [`Driver`](super::Driver) over a non-blocking socket registered
//! once, edge-triggered, for both directions; the worker performs what
//! [`Driver::step`](super::Driver::step) asks and nothing else. Reads go through one scratch
//! buffer per worker, so an idle connection holds only its socket and its
//! machine. A connection that used its turn's budget waits behind the
//! others. Handlers run on the worker thread, one at a time, so at most
//! `workers` at once, or [`ServerOptions::max_handlers`] if that is fewer;
//! a shutdown's deadline does not wait for them ([`ShutdownHandle`]). An
//! `async` answer ([`Handled::Later`](super::Handled::Later)) holds
//! nothing while it waits: the worker polls it when its waker names the
//! connection in the worker's mailbox, reads no further on the
//! connection until it is ready (what the peer sends meanwhile waits in
//! the kernel) but writes what is left of the earlier answers, and drops
//! it (cancelling the handler) when the peer resets the
//! connection, or closes it (told from a half-close, which still gets its
//! answer, by a newline now and then, D1), or at the drain deadline.
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

use mio::Token;
use mio::net::TcpListener;

use shared::Prepared;
pub use shared::ShutdownHandle;
use worker::Worker;

use super::{Handler, ServerOptions, listen_group};
use crate::io_adapters::transport::IoMode;

pub(super) mod awaited;
pub(super) mod connection;
pub(super) mod deadlines;
pub(super) mod paused;
pub(super) mod shared;
mod worker;

const WAKER: Token = Token(usize::MAX);

/// The token of a worker's `n`th listening socket, counted down from
/// below the waker's; a connection's token is its slot, counted up from 0.
const fn listener_token(n: usize) -> Token {
    Token(usize::MAX - 1 - n)
}

/// Which of a worker's `count` listening sockets `token` is, if any.
fn listener_of(token: Token, count: usize) -> Option<usize> {
    (usize::MAX - 1).checked_sub(token.0).filter(|&n| n < count)
}
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
    prepared: Prepared<H>,
}

impl<H: Handler> MioServer<H> {
    /// Binds `addr`, a listening socket per worker where the system
    /// balances them ([`listen_group`]), and prepares
    /// to serve `handler`.
    pub fn bind(addr: impl ToSocketAddrs, handler: H, options: ServerOptions) -> io::Result<Self> {
        let listeners = listen_group(addr, options.worker_count())?;
        MioServer::from_listeners(listeners, handler, options)
    }

    /// Serves an already bound listener, every worker accepting from it.
    pub fn from_listener(
        listener: std::net::TcpListener,
        handler: H,
        options: ServerOptions,
    ) -> io::Result<Self> {
        MioServer::from_listeners(vec![listener], handler, options)
    }

    /// Serves listeners bound elsewhere (by a supervisor such as systemd,
    /// or by the process this one takes over from), all on one port or
    /// not. Every socket is accepted from: with at least as many sockets
    /// as workers, each worker takes every `workers`th one; with fewer,
    /// workers share them. An empty list is an error.
    pub fn from_listeners(
        listeners: Vec<std::net::TcpListener>,
        handler: H,
        options: ServerOptions,
    ) -> io::Result<Self> {
        Ok(MioServer {
            prepared: Prepared::new(listeners, handler, options)?,
        })
    }

    /// The address the server listens on (useful after binding port 0):
    /// its first socket's.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.prepared.local_addr()
    }

    /// The listening sockets, to hand them to another process (an upgrade
    /// in place) with [`ShutdownHandle::hand_over`].
    pub fn listeners(&self) -> &[std::net::TcpListener] {
        self.prepared.listeners()
    }

    /// A handle that stops the server from another thread.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.prepared.shutdown_handle()
    }

    /// Serves until [`ShutdownHandle::shutdown`] and every worker is done,
    /// or the shutdown's deadline has passed (see [`ShutdownHandle`]).
    pub fn run(self) -> io::Result<()> {
        self.prepared.run("jsontp-mio", |parts| {
            let mut worker = Worker::new(
                parts.listeners.into_iter().map(TcpListener::from_std).collect(),
                parts.handler,
                parts.options,
                parts.settings,
                parts.shared,
                parts.open,
            )?;
            Ok(Box::new(move || worker.run()))
        })
    }
}
