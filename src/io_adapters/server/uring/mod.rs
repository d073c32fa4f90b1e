//! The io_uring server (feature `uring`, Linux 6.0 or later): the same
//! drive step as the std, mio and tokio servers, its I/O submitted and
//! completed in batches through one ring per worker.
//!
//! Thread per core, as the [`MioServer`](super::mio::MioServer):
//! `workers` threads (default: one per core), each with its own ring, its
//! connections, and one listening socket of its own on the same port
//! ([`listen_group`], `SO_REUSEPORT`), which the kernel balances.
//! [`UringServer::from_listener`] and [`UringServer::from_listeners`]
//! share sockets out as the mio server does. What every worker shares (the
//! connection cap and the idle connection asked to close for a newcomer,
//! D3; the places of handlers; the drain deadline) and the
//! [`ShutdownHandle`], with its `shutdown` and `hand_over`, are the mio
//! server's own.
//!
//! On each worker's ring:
//!
//! - **accept**: one multishot accept per listening socket, armed until
//!   cancelled; at the connection cap it is cancelled, and the clients it
//!   brought meanwhile are held until there is room, as mio holds one;
//! - **receive**: one multishot receive per connection into a pool of
//!   buffers provided to the kernel (a buffer ring of 512 buffers of 16
//!   KiB per worker, in huge pages where the system gives them on
//!   request), so that an idle connection holds no buffer. The
//!   drive step reads from the buffers received (a read that finds none
//!   would block), and each goes back to the pool once read. A connection
//!   that holds four buffers unread has its receive cancelled until it
//!   read them, and a receive ended by an empty pool is armed again once
//!   buffers are back;
//! - **send**: the drive step writes into the connection's outbox (256
//!   KiB; full, it would block); every connection's sends of a round of
//!   the loop are submitted together, with the wait for the next
//!   completion, in one `io_uring_enter`. A prepared body's sealed copy
//!   (`Body::add_sendfile_copy`) goes out from its file instead, on plain
//!   TCP, with a direct `sendfile` on the socket (non-blocking, as mio
//!   sends it), once nothing of the outbox is left to send, so that the
//!   bytes keep their order; when the socket is full, a one-shot poll for
//!   room (`POLLOUT`) gives the connection its next turn;
//! - **timers**: one timeout entry for the earliest deadline of the
//!   worker's connections (the D3 limits the drive step asks for, the
//!   held clients' next look for room, an accept's back-off), moved
//!   earlier when a nearer one comes;
//! - **wake-ups** (a shutdown, another worker's request to close an idle
//!   connection, an awaited `async` answer's waker): a multishot poll of
//!   an eventfd.
//!
//! A connection is a slot holding `Vacant`, `Serving` (its socket, its
//! [`Driver`](super::Driver)) or `Closing`: over, its place under the cap given
//! back, its socket kept until the ring's last completion for it (a
//! cancelled receive, send or poll for room) so that no operation names
//! freed memory or a reused slot.
//! Handlers run on the worker thread, one at a time, as on mio, and an
//! `async` answer is awaited as on mio: polled between the worker's
//! other turns, the connection read no further meanwhile (its receive
//! stays armed until it holds a few buffers unread) while the earlier
//! answers are written, dropped when the peer leaves or at the drain
//! deadline.
//!
//! Where the kernel refuses io_uring (no io_uring, `ENOSYS`; refused to
//! the process, `EPERM`, as `kernel.io_uring_disabled` or a container's
//! seccomp filter do; no buffer rings before Linux 5.19),
//! [`UringServer::bind`] and [`available`] answer an error of kind
//! [`Unsupported`](io::ErrorKind::Unsupported) that says so, so that a
//! caller can serve with the [`MioServer`](super::mio::MioServer) instead,
//! as `jsontp serve --runtime uring` does.
//!
//! ```no_run
//! use jsontp_protocol::io_adapters::server::ServerOptions;
//! use jsontp_protocol::io_adapters::server::uring::UringServer;
//! use jsontp_protocol::message::{Body, Request, Response, Status, StatusCode};
//!
//! let hello = |request: &Request| {
//!     Response::new(Status::new(StatusCode::OK, "hello"))
//!         .with_body(Body::text("hello"))
//! };
//! let server = UringServer::bind("127.0.0.1:8080", hello, ServerOptions::default())?;
//! let stop = server.shutdown_handle(); // stop.shutdown() from another thread
//! server.run()?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Here is the [`UringServer`] that starts the workers. The rest is in
//! files by concern: `ring.rs` (the ring, the buffer pool and the
//! operations: the module's only `unsafe`), `stream.rs` (a connection's
//! socket as the drive step's transport), `worker.rs` (a worker's loop,
//! its accepts, timer and mail) and `connection.rs` (what a worker does
//! for each connection).

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

pub use super::mio::ShutdownHandle;
use super::mio::shared::{Prepared, WorkerParts};
use super::{Handler, ServerOptions, listen_group};
use crate::io_adapters::transport::IoMode;
use worker::Worker;

mod connection;
mod ring;
mod stream;
mod worker;

/// How the drive step sees a connection's stream: as an edge-triggered
/// socket. A read takes from every buffer the ring has filled, so a short
/// read has emptied them, and bytes that arrive later come as a completion,
/// which gives the connection a turn: the read that would only answer
/// `WouldBlock` is spared. The end of the peer's stream is told to the
/// driver when its completion comes, so that a short read does not hide it.
const MODE: IoMode = IoMode::EdgeTriggered;

/// Whether this kernel lets the process use io_uring as the server does:
/// an error of kind [`Unsupported`](io::ErrorKind::Unsupported) saying
/// why not (see the [module](self)).
pub fn available() -> io::Result<()> {
    ring::probe()
}

/// A jsontp server on `workers` threads, each with its own io_uring.
#[derive(Debug)]
pub struct UringServer<H> {
    prepared: Prepared<H>,
}

impl<H: Handler> UringServer<H> {
    /// Binds `addr`, a listening socket per worker ([`listen_group`]), and
    /// prepares to serve `handler`. An error of kind
    /// [`Unsupported`](io::ErrorKind::Unsupported) when the kernel
    /// refuses io_uring, before binding anything.
    pub fn bind(addr: impl ToSocketAddrs, handler: H, options: ServerOptions) -> io::Result<Self> {
        available()?;
        let listeners = listen_group(addr, options.worker_count())?;
        UringServer::from_listeners(listeners, handler, options)
    }

    /// Serves an already bound listener, every worker accepting from it.
    pub fn from_listener(
        listener: std::net::TcpListener,
        handler: H,
        options: ServerOptions,
    ) -> io::Result<Self> {
        UringServer::from_listeners(vec![listener], handler, options)
    }

    /// Serves listeners bound elsewhere (by a supervisor such as systemd,
    /// or by the process this one takes over from), shared out among the
    /// workers as [`MioServer::from_listeners`](super::mio::MioServer::from_listeners)
    /// does. An empty list is an error, and so is a kernel that refuses
    /// io_uring ([`Unsupported`](io::ErrorKind::Unsupported)).
    pub fn from_listeners(
        listeners: Vec<std::net::TcpListener>,
        handler: H,
        options: ServerOptions,
    ) -> io::Result<Self> {
        available()?;
        Ok(UringServer {
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
        self.prepared.run("jsontp-uring", |parts| {
            // The ring is made here, so that the thread starts accepting
            // at once, and enabled on the worker's thread, its one issuer.
            let ring = ring::Unstarted::new()?;
            Ok(Box::new(move || {
                let WorkerParts {
                    listeners,
                    handler,
                    options,
                    settings,
                    shared,
                    open,
                } = parts;
                Worker::new(ring, listeners, handler, options, settings, shared, open)?.run()
            }))
        })
    }
}
