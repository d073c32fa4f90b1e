//! The std blocking server (issue 4): a `TcpListener` served by a bounded
//! pool of threads, one connection per thread at a time.
//!
//! The acceptor hands each connection to the pool through a bounded queue
//! (as long as the pool). When the queue is full the acceptor waits, so
//! further clients wait in the kernel's accept backlog: none is dropped.
//! A keep-alive connection holds its thread until it closes, so the pool
//! size bounds the connections served at once; the mio server is the one
//! for many connections.
//!
//! ```no_run
//! use jsontp::io_adapters::{ServerOptions, std_server::StdServer};
//! use jsontp::message::{Body, Request, Response, Status, StatusCode};
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

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::drive::{Served, now};
use super::{Handler, ServerOptions};
use crate::machine::ServerConfig;

/// Longest blocking read: how soon an idle connection notices a shutdown.
const READ_SLICE: Duration = Duration::from_millis(200);
/// How long a closing connection drains the peer's input, so that closing
/// with unread bytes does not reset the connection and lose our last
/// response (conformance README).
const LINGER: Duration = Duration::from_millis(500);
/// Size of each worker's read buffer.
const READ_BUFFER: usize = 16 * 1024;

/// A blocking jsontp server on a pool of threads.
#[derive(Debug)]
pub struct StdServer<H> {
    listener: TcpListener,
    handler: Arc<H>,
    options: ServerOptions,
    shared: Arc<Shared>,
}

/// Stops a running [`StdServer`]: it stops accepting, lets every exchange
/// under way finish, closes idle connections, and `run` returns.
#[derive(Debug, Clone)]
pub struct ShutdownHandle {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    stopping: AtomicBool,
    /// Where to connect to wake the acceptor blocked in `accept`.
    wake: SocketAddr,
}

impl<H: Handler> StdServer<H> {
    /// Binds `addr` and prepares to serve `handler`.
    pub fn bind(addr: impl ToSocketAddrs, handler: H, options: ServerOptions) -> io::Result<Self> {
        StdServer::from_listener(TcpListener::bind(addr)?, handler, options)
    }

    /// Serves an already bound listener.
    pub fn from_listener(listener: TcpListener, handler: H, options: ServerOptions) -> io::Result<Self> {
        let mut wake = listener.local_addr()?;
        if wake.ip().is_unspecified() {
            let loopback: std::net::IpAddr = match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            };
            wake.set_ip(loopback);
        }
        Ok(StdServer {
            listener,
            handler: Arc::new(handler),
            options,
            shared: Arc::new(Shared {
                stopping: AtomicBool::new(false),
                wake,
            }),
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
    /// connections under way and returns.
    pub fn run(self) -> io::Result<()> {
        let workers = self.options.worker_count();
        let (queue, jobs) = sync_channel::<(TcpStream, SocketAddr)>(workers);
        let jobs = Arc::new(Mutex::new(jobs));
        let mut pool = Vec::with_capacity(workers);
        for n in 0..workers {
            let (jobs, handler) = (Arc::clone(&jobs), Arc::clone(&self.handler));
            let (config, shared) = (self.options.config.clone(), Arc::clone(&self.shared));
            let worker = std::thread::Builder::new()
                .name(format!("jsontp-std-{n}"))
                .spawn(move || work(&jobs, &*handler, &config, &shared))?;
            pool.push(worker);
        }
        let result = self.accept_loop(&queue);
        drop(queue); // workers finish their connection, then find the queue closed
        for worker in pool {
            let _ = worker.join();
        }
        result
    }

    fn accept_loop(&self, queue: &std::sync::mpsc::SyncSender<(TcpStream, SocketAddr)>) -> io::Result<()> {
        loop {
            let accepted = self.listener.accept();
            if self.shared.stopping.load(Ordering::SeqCst) {
                return Ok(());
            }
            match accepted {
                // Blocks while the queue is full: the client waits in the
                // backlog.
                Ok(job) => {
                    if queue.send(job).is_err() {
                        return Ok(());
                    }
                }
                // The client gave up before we accepted, or we ran out of
                // descriptors for a moment: keep serving the others.
                Err(e) if is_transient(&e) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => return Err(e),
            }
        }
    }
}

impl ShutdownHandle {
    /// Starts the graceful shutdown; returns at once.
    pub fn shutdown(&self) {
        if !self.shared.stopping.swap(true, Ordering::SeqCst) {
            // Wake the acceptor out of `accept`.
            let _ = TcpStream::connect_timeout(&self.shared.wake, Duration::from_secs(1));
        }
    }
}

fn is_transient(e: &io::Error) -> bool {
    use io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | Interrupted | WouldBlock | OutOfMemory
    ) || e.raw_os_error().is_some_and(|code| code == 23 || code == 24) // ENFILE, EMFILE
}

/// A pool thread: serves one queued connection after another.
fn work<H: Handler>(
    jobs: &Mutex<Receiver<(TcpStream, SocketAddr)>>,
    handler: &H,
    config: &ServerConfig,
    shared: &Shared,
) {
    let mut buffer = vec![0; READ_BUFFER];
    loop {
        // The lock is held only while waiting for a job.
        let job = jobs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .recv();
        let Ok((stream, peer)) = job else { return };
        serve_connection(stream, peer, handler, config, shared, &mut buffer);
    }
}

/// Runs one connection to its end: read, dispatch, write, honour timers.
fn serve_connection<H: Handler>(
    mut stream: TcpStream,
    peer: SocketAddr,
    handler: &H,
    config: &ServerConfig,
    shared: &Shared,
    buffer: &mut [u8],
) {
    let _ = stream.set_nodelay(true);
    // A peer that stops reading holds a write no longer than a message may take.
    let _ = stream.set_write_timeout(Some(config.limits.message_timeout));
    let mut served = Served::new(config, peer, now());
    loop {
        served.dispatch(handler);
        if write_pending(&mut stream, &mut served).is_err() {
            return; // the peer is gone or stuck: nothing more can be sent
        }
        if served.conn.is_closed() || (shared.stopping.load(Ordering::SeqCst) && served.is_idle()) {
            break;
        }
        let time = now();
        let deadline = served.conn.poll_timeout();
        if deadline.is_some_and(|d| d <= time.instant) {
            served.conn.handle_timeout(time);
            continue;
        }
        let until_timer = deadline.map_or(READ_SLICE, |d| d - time.instant);
        if !served.conn.wants_read() {
            if deadline.is_none() {
                break; // nothing to read and no timer: nothing can happen any more
            }
            std::thread::sleep(until_timer.min(READ_SLICE));
            continue;
        }
        let _ = stream.set_read_timeout(Some(until_timer.clamp(Duration::from_millis(1), READ_SLICE)));
        match stream.read(buffer) {
            Ok(0) => served.conn.receive_eof(now()),
            Ok(n) => served.receive(&buffer[..n], now()),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return, // reset by the peer
        }
    }
    linger_close(stream);
}

fn write_pending(stream: &mut TcpStream, served: &mut Served) -> io::Result<()> {
    while !served.conn.pending_output().is_empty() {
        match stream.write(served.conn.pending_output()) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => served.conn.consume_output(n, now()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Shuts down our sending side, drains the peer's input for a moment, and
/// closes (dropping the stream).
fn linger_close(mut stream: TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let until = Instant::now() + LINGER;
    let mut sink = [0u8; 4096];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}
