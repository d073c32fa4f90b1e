//! The closed-loop generator on io_uring: the same loop as the epoll
//! generator's ([`generator::run`]), with what it costs per request cut
//! down. Each connection keeps a receive into its own buffer armed and a
//! send of its queued requests; one `io_uring_enter` per turn submits every
//! connection's next operations and waits for completions, instead of a
//! write, a read and an `epoll_wait` per request.
//!
//! Plain TCP and keep-alive connections only: TLS and a connection per
//! request stay with the epoll generator.

#![allow(unsafe_code)]

use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::types::{Fd, SubmitArgs, Timespec};
use io_uring::{IoUring, opcode, squeue};

use crate::framing::{Inbound, READ_ROOM};
use crate::generator::{self, Clock, Load, Outcome, Tally};

/// The longest the run waits, once over, for the kernel to finish with
/// the connections' buffers before it gives up on freeing them.
const DRAIN: Duration = Duration::from_secs(1);

/// A receive or a send: the kind in the low bit of `user_data`, the
/// connection's index above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Recv(usize),
    Send(usize),
}

impl Op {
    fn encode(self) -> u64 {
        match self {
            Op::Recv(i) => (i as u64) << 1,
            Op::Send(i) => (i as u64) << 1 | 1,
        }
    }

    fn decode(data: u64) -> Op {
        let i = usize::try_from(data >> 1).unwrap_or(usize::MAX);
        if data & 1 == 0 { Op::Recv(i) } else { Op::Send(i) }
    }
}

/// Whether the kernel holds the connection's receive buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recv {
    Idle,
    Armed,
}

/// The connection's send: the kernel holds `out[written..]` while one is
/// in flight, so nothing is added to `out` until it completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Send {
    Idle,
    InFlight { written: usize },
}

/// Whether the connection still takes part in the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Life {
    Open,
    Closed,
}

struct Conn {
    socket: TcpStream,
    inbound: Inbound,
    /// The requests being sent.
    out: Vec<u8>,
    /// Requests counted as sent that wait for the send in flight to end.
    queued: u64,
    in_flight: usize,
    recv: Recv,
    send: Send,
    life: Life,
}

impl Conn {
    /// Whether the kernel still holds any of its memory.
    fn busy(&self) -> bool {
        self.recv == Recv::Armed || self.send != Send::Idle
    }
}

/// `IORING_RECVSEND_POLL_FIRST` (Linux 5.19): wait for data before
/// trying to receive. A receive is armed right after the last one took
/// what there was, so a first try would only find nothing.
const POLL_FIRST: u16 = 1;

/// How receives are asked for: waiting for data first, unless the kernel
/// refused that (older than 5.19), after which they try at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arming {
    PollFirst,
    TryFirst,
}

/// The ring, with each operation the generator asks for as a method.
struct Ring {
    ring: IoUring,
    arming: Arming,
}

impl Ring {
    /// A ring for `connections` connections, each with at most a receive
    /// and a send in flight. One thread submits and reaps, so the kernel
    /// may run completions' work at the wait (where it supports that).
    fn new(connections: usize) -> io::Result<Ring> {
        let entries = u32::try_from((2 * connections).next_power_of_two().clamp(8, 4096)).unwrap_or(4096);
        let cq = u32::try_from((2 * connections).next_power_of_two().max(2 * entries as usize))
            .unwrap_or(u32::MAX);
        let ring = IoUring::builder()
            .setup_cqsize(cq)
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(entries);
        let ring = match ring {
            Ok(ring) => ring,
            // An older kernel: a plain ring does the same, a little slower.
            Err(_) => IoUring::builder().setup_cqsize(cq).build(entries)?,
        };
        Ok(Ring {
            ring,
            arming: Arming::PollFirst,
        })
    }

    /// Queues `entry`, submitting what is queued first when the queue is
    /// full.
    ///
    /// # Safety
    /// The memory `entry` names must stay valid until its completion.
    unsafe fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: the caller's promise.
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                return Ok(());
            }
            self.submit(0, None)?;
        }
    }

    /// Submits what is queued and waits for `want` completions, at most
    /// `wait` long.
    fn submit(&mut self, want: usize, wait: Option<Duration>) -> io::Result<()> {
        let result = match wait {
            Some(wait) => {
                let spec = Timespec::new().sec(wait.as_secs()).nsec(wait.subsec_nanos());
                let args = SubmitArgs::new().timespec(&spec);
                self.ring.submitter().submit_with_args(want, &args)
            }
            None => self.ring.submit_and_wait(want),
        };
        match result {
            Ok(_) => Ok(()),
            // The time ran out, a signal came, or completions must be
            // reaped before more can be submitted: the caller reaps.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The completions there are, as (what, result).
    fn reap(&mut self, into: &mut Vec<(Op, i32)>) {
        into.clear();
        into.extend(
            self.ring
                .completion()
                .map(|cqe| (Op::decode(cqe.user_data()), cqe.result())),
        );
    }

    /// Asks the kernel to receive into what is left of the connection's
    /// buffer.
    fn recv(&mut self, conn: &mut Conn, i: usize) -> io::Result<()> {
        let room = conn.inbound.room();
        let entry = opcode::Recv::new(
            Fd(conn.socket.as_raw_fd()),
            room.as_mut_ptr(),
            u32::try_from(room.len()).unwrap_or(u32::MAX),
        )
        .ioprio(match self.arming {
            Arming::PollFirst => POLL_FIRST,
            Arming::TryFirst => 0,
        })
        .build()
        .user_data(Op::Recv(i).encode());
        conn.recv = Recv::Armed;
        // SAFETY: the buffer is the heap memory of `conn.inbound`, which
        // nothing touches while the receive is armed (`Recv::Armed`), and
        // the connections outlive every operation (`drain`).
        unsafe { self.push(entry) }
    }

    /// Asks the kernel to send `out[written..]`.
    fn send(&mut self, conn: &mut Conn, i: usize, written: usize) -> io::Result<()> {
        let rest = &conn.out[written..];
        let entry = opcode::Send::new(
            Fd(conn.socket.as_raw_fd()),
            rest.as_ptr(),
            u32::try_from(rest.len()).unwrap_or(u32::MAX),
        )
        .flags(libc::MSG_NOSIGNAL)
        .build()
        .user_data(Op::Send(i).encode());
        conn.send = Send::InFlight { written };
        // SAFETY: `out` is neither changed nor moved while the send is in
        // flight (`Send::InFlight`), and the connections outlive every
        // operation (`drain`).
        unsafe { self.push(entry) }
    }
}

/// Runs `load` on io_uring: the same loads, counts and measurements as
/// the epoll generator's, which [`generator::run`] has already checked.
pub fn run(load: &Load) -> io::Result<Outcome> {
    if load.tls.is_some() || load.reconnect {
        return Err(generator::invalid(
            "the io_uring generator drives plain TCP keep-alive connections only: \
             use the epoll generator (--generator epoll) for TLS or a connection per request",
        ));
    }
    let mut ring = Ring::new(load.connections)?;
    let mut conns = Vec::with_capacity(load.connections);
    for _ in 0..load.connections {
        let socket = TcpStream::connect_timeout(&load.addr, Duration::from_secs(5))?;
        socket.set_nodelay(true)?;
        conns.push(Conn {
            socket,
            inbound: Inbound::new(load.protocol, READ_ROOM),
            out: Vec::with_capacity(load.request.len() * load.pipeline),
            queued: 0,
            in_flight: 0,
            recv: Recv::Idle,
            send: Send::Idle,
            life: Life::Open,
        });
    }
    let outcome = drive(load, &mut ring, &mut conns);
    drain(&mut ring, conns);
    outcome
}

/// The run itself, from the first requests to the window's end.
fn drive(load: &Load, ring: &mut Ring, conns: &mut [Conn]) -> io::Result<Outcome> {
    let mut tally = Tally::new(load);
    for (i, conn) in conns.iter_mut().enumerate() {
        queue(conn, load.pipeline as u64, &mut tally);
        ring.recv(conn, i)?;
        start_send(ring, conn, i, &load.request)?;
    }
    let mut open = conns.len();
    let mut done = Vec::with_capacity(2 * conns.len());
    let mut clock = Clock::start(load);
    while let Some(wait) = clock.next_wait(load, &mut tally, open) {
        ring.submit(1, Some(wait))?;
        ring.reap(&mut done);
        for &(op, result) in &done {
            let (Op::Recv(i) | Op::Send(i)) = op;
            let Some(conn) = conns.get_mut(i) else {
                continue;
            };
            let was = conn.life;
            match op {
                Op::Recv(_) => received(ring, conn, i, result, load, &mut tally)?,
                Op::Send(_) => sent(ring, conn, i, result, &load.request, &mut tally)?,
            }
            if was == Life::Open && conn.life == Life::Closed {
                open -= 1;
            }
        }
    }
    Ok(clock.finish(load, tally))
}

/// Counts up to `wanted` more requests (as many as the run's count
/// allows) for the connection to send.
fn queue(conn: &mut Conn, wanted: u64, tally: &mut Tally) {
    let n = tally.allow(wanted);
    conn.queued += n;
    conn.in_flight += n as usize;
}

/// Sends the queued requests unless a send is in flight (its completion
/// sends them).
fn start_send(ring: &mut Ring, conn: &mut Conn, i: usize, request: &[u8]) -> io::Result<()> {
    if conn.send != Send::Idle || conn.queued == 0 || conn.life == Life::Closed {
        return Ok(());
    }
    conn.out.clear();
    for _ in 0..conn.queued {
        conn.out.extend_from_slice(request);
    }
    conn.queued = 0;
    ring.send(conn, i, 0)
}

/// A receive completed with `result`.
fn received(
    ring: &mut Ring,
    conn: &mut Conn,
    i: usize,
    result: i32,
    load: &Load,
    tally: &mut Tally,
) -> io::Result<()> {
    conn.recv = Recv::Idle;
    if conn.life == Life::Closed {
        return Ok(());
    }
    match usize::try_from(result) {
        Ok(0) => {
            let (_, why) = generator::server_closed(&mut conn.inbound, &mut conn.in_flight, tally);
            close(conn, tally, why);
            Ok(())
        }
        Ok(n) => {
            conn.inbound.received(n);
            tally.received(n);
            let (answered, broken) = generator::frame(&mut conn.inbound, &mut conn.in_flight, tally);
            if let Some(why) = broken {
                close(conn, tally, why);
                return Ok(());
            }
            if answered > 0 {
                queue(conn, answered as u64, tally);
                start_send(ring, conn, i, &load.request)?;
            }
            ring.recv(conn, i)
        }
        Err(_) if retry(result) => ring.recv(conn, i),
        Err(_) if -result == libc::EINVAL && ring.arming == Arming::PollFirst => {
            ring.arming = Arming::TryFirst;
            ring.recv(conn, i)
        }
        Err(_) => {
            close(
                conn,
                tally,
                format!("read: {}", io::Error::from_raw_os_error(-result)),
            );
            Ok(())
        }
    }
}

/// A send completed with `result`.
fn sent(
    ring: &mut Ring,
    conn: &mut Conn,
    i: usize,
    result: i32,
    request: &[u8],
    tally: &mut Tally,
) -> io::Result<()> {
    let Send::InFlight { written } = conn.send else {
        return Ok(());
    };
    conn.send = Send::Idle;
    if conn.life == Life::Closed {
        return Ok(());
    }
    match usize::try_from(result) {
        Ok(0) => {
            close(conn, tally, "the server stopped reading".into());
            Ok(())
        }
        // A short send: the rest, then what was queued meanwhile.
        Ok(n) if written + n < conn.out.len() => ring.send(conn, i, written + n),
        Ok(_) => start_send(ring, conn, i, request),
        Err(_) if retry(result) => ring.send(conn, i, written),
        Err(_) => {
            close(
                conn,
                tally,
                format!("write: {}", io::Error::from_raw_os_error(-result)),
            );
            Ok(())
        }
    }
}

/// Results that ask the operation to be made again: interrupted, no data
/// or room yet (a kernel that does not wait itself), or cancelled by the
/// kernel (this generator cancels nothing itself).
fn retry(result: i32) -> bool {
    matches!(-result, libc::EINTR | libc::EAGAIN | libc::ECANCELED)
}

fn close(conn: &mut Conn, tally: &mut Tally, why: String) {
    conn.life = Life::Closed;
    tally.error(why);
}

/// Ends every connection and waits for the kernel to hand back their
/// buffers before they are freed. Should it not within [`DRAIN`], they
/// are leaked rather than freed under it.
fn drain(ring: &mut Ring, mut conns: Vec<Conn>) {
    for conn in &conns {
        // Completes an armed receive (with nothing) and a send.
        let _ = conn.socket.shutdown(std::net::Shutdown::Both);
    }
    let deadline = Instant::now() + DRAIN;
    let mut done = Vec::new();
    while conns.iter().any(Conn::busy) {
        let now = Instant::now();
        if now >= deadline || ring.submit(1, Some(deadline - now)).is_err() {
            std::mem::forget(conns);
            return;
        }
        ring.reap(&mut done);
        for &(op, _) in &done {
            match op {
                Op::Recv(i) => {
                    if let Some(conn) = conns.get_mut(i) {
                        conn.recv = Recv::Idle;
                    }
                }
                Op::Send(i) => {
                    if let Some(conn) = conns.get_mut(i) {
                        conn.send = Send::Idle;
                    }
                }
            }
        }
    }
}
