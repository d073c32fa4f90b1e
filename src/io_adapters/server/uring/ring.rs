//! A worker's ring: the submission and completion queues, the pool of
//! buffers the kernel receives into, and the operations the worker asks
//! for, each a safe method. The one file of the server with `unsafe`: the
//! kernel reads and writes memory named in a submission until its last
//! completion, and each method says why the memory it names lives that
//! long.

#![allow(unsafe_code)]

use std::alloc::{Layout, alloc, alloc_zeroed, dealloc};
use std::io;
use std::os::fd::FromRawFd;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::rc::Rc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use io_uring::types::{BufRingEntry, Fd, Timespec};
use io_uring::{IoUring, cqueue, opcode, squeue};

/// Submission queue entries; the completion queue is twice as long, and
/// the kernel keeps completions that overflow it (`IORING_FEAT_NODROP`).
const ENTRIES: u32 = 1024;
/// Buffers the kernel receives into, shared by a worker's connections.
const BUFFERS: u16 = 512;
/// Size of each: a typical request, or a pipelined batch of them, fits
/// in one; content arrives in as many as it needs.
pub(super) const BUFFER_SIZE: usize = 16 * 1024;
/// The group id of the pool (one per ring).
const GROUP: u16 = 0;

/// What a completion is about: its kind in the low byte of `user_data`,
/// the connection's slot or listener's index above it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    /// The multishot accept on listener `n`.
    Accept(usize),
    /// The multishot receive of the connection in the slot.
    Recv(usize),
    /// The send of the connection in the slot.
    Send(usize),
    /// The one-shot poll for room in the socket of the connection in the
    /// slot, after `sendfile` found it full.
    Room(usize),
    /// The worker's timer.
    Timer,
    /// The poll of the worker's wake-up descriptor.
    Wake,
    /// A cancellation or a timer's update: its own completion says
    /// nothing the worker needs (the operation it acted on completes too).
    Aside,
}

impl Op {
    fn encode(self) -> u64 {
        let (kind, n) = match self {
            Op::Accept(n) => (0, n),
            Op::Recv(n) => (1, n),
            Op::Send(n) => (2, n),
            Op::Timer => (3, 0),
            Op::Wake => (4, 0),
            Op::Aside => (5, 0),
            Op::Room(n) => (6, n),
        };
        (n as u64) << 8 | kind
    }

    fn decode(data: u64) -> Op {
        let n = usize::try_from(data >> 8).unwrap_or(usize::MAX);
        match data & 0xff {
            0 => Op::Accept(n),
            1 => Op::Recv(n),
            2 => Op::Send(n),
            3 => Op::Timer,
            4 => Op::Wake,
            6 => Op::Room(n),
            _ => Op::Aside,
        }
    }
}

/// One completion, copied out of the queue.
#[derive(Debug, Clone, Copy)]
pub(super) struct Completion {
    pub(super) op: Op,
    /// The system call's result: a count or descriptor, or `-errno`.
    pub(super) result: i32,
    /// The pool buffer the bytes were received into, if any.
    pub(super) buffer: Option<u16>,
    /// A multishot operation stays armed (`IORING_CQE_F_MORE`).
    pub(super) more: bool,
}

impl Completion {
    /// The socket of a client an accept's completion brought.
    pub(super) fn accepted(&self) -> Option<std::net::TcpStream> {
        debug_assert!(matches!(self.op, Op::Accept(_)));
        // SAFETY: a successful accept's result is a new descriptor, which
        // nothing else owns.
        (self.result >= 0).then(|| unsafe { std::net::TcpStream::from_raw_fd(self.result) })
    }
}

/// A ring and its buffer pool.
pub(super) struct Ring {
    // Declared first, so dropped first: the kernel lets go of the pool's
    // memory with the ring.
    ring: IoUring,
    pool: Rc<Pool>,
    /// The time of the last timer armed or moved, which the kernel reads
    /// when the entry is submitted: boxed, so that it stays put until then.
    spec: Box<Timespec>,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring").finish_non_exhaustive()
    }
}

/// Whether this kernel lets the process set up a ring with a pool of
/// provided buffers: the error says why not, in words for an operator.
///
/// The ring is set up and dropped on a thread of its own: the kernel's
/// work for a ring runs on the thread that made it, and would interrupt a
/// blocking call of the caller's with `EINTR` (a socket read with a
/// timeout is not restarted).
pub(super) fn probe() -> io::Result<()> {
    let tried = std::thread::Builder::new()
        .name("jsontp-uring-probe".into())
        .spawn(|| Ring::new(8, 8).map(drop))?
        .join()
        .unwrap_or_else(|_| Err(io::Error::other("the io_uring probe panicked")));
    tried.map_err(|e| {
        let why = match e.raw_os_error() {
            Some(libc::ENOSYS) => "the kernel has no io_uring (ENOSYS)".to_string(),
            Some(libc::EPERM) | Some(libc::EACCES) => {
                format!("the kernel refuses io_uring to this process ({e}: kernel.io_uring_disabled, or a seccomp filter)")
            }
            Some(libc::EINVAL) => format!("the kernel's io_uring lacks provided buffer rings (Linux 5.19 and later): {e}"),
            _ => format!("the kernel refused to set up a ring: {e}"),
        };
        io::Error::new(io::ErrorKind::Unsupported, format!("io_uring is not available: {why}"))
    })
}

/// A worker's ring and pool, made before its thread starts (so that the
/// thread has only to enable it), not yet used.
pub(super) struct Unstarted {
    ring: IoUring,
    pool: Pool,
    /// A single issuer whose completions run when it waits for them
    /// (Linux 6.1), disabled until its thread enables it: that thread
    /// becomes its issuer. Else a plain ring, where the kernel offers no
    /// more.
    disabled: bool,
}

impl Unstarted {
    pub(super) fn new() -> io::Result<Unstarted> {
        Unstarted::with(ENTRIES, BUFFERS)
    }

    fn with(entries: u32, buffers: u16) -> io::Result<Unstarted> {
        let single = IoUring::builder()
            .setup_cqsize(entries * 2)
            .setup_single_issuer()
            .setup_defer_taskrun()
            .setup_r_disabled()
            .build(entries);
        let (ring, disabled) = match single {
            Ok(ring) => (ring, true),
            Err(_) => (
                IoUring::builder().setup_cqsize(entries * 2).build(entries)?,
                false,
            ),
        };
        let pool = Pool::new(buffers)?;
        // SAFETY: the pool's ring of entries is page-aligned, `buffers`
        // entries long, and outlives the ring (`Ring`'s field order, and
        // the connections' streams share it).
        unsafe {
            ring.submitter()
                .register_buf_ring_with_flags(pool.entries.as_ptr() as u64, buffers, GROUP, 0)?;
        }
        Ok(Unstarted { ring, pool, disabled })
    }
}

impl Ring {
    /// The ring, on the thread of the worker that uses it.
    pub(super) fn start(unstarted: Unstarted) -> io::Result<Ring> {
        let Unstarted { ring, pool, disabled } = unstarted;
        if disabled {
            ring.submitter().register_enable_rings()?;
        }
        let ring = Ring {
            ring,
            pool: Rc::new(pool),
            spec: Box::new(Timespec::new()),
        };
        for bid in 0..ring.pool.count {
            ring.pool.give_back(bid);
        }
        Ok(ring)
    }

    pub(super) fn new(entries: u32, buffers: u16) -> io::Result<Ring> {
        Ring::start(Unstarted::with(entries, buffers)?)
    }

    /// Queues an entry, submitting what is queued first if the queue is
    /// full.
    ///
    /// # Safety
    ///
    /// What the entry names must live until its last completion.
    unsafe fn push(&mut self, entry: squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: passed on to the caller.
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                return Ok(());
            }
            self.ring.submit()?;
        }
    }

    /// Accepts clients from `listener` until cancelled or failed.
    pub(super) fn accept(&mut self, listener: RawFd, n: usize) -> io::Result<()> {
        let entry = opcode::AcceptMulti::new(Fd(listener))
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(Op::Accept(n).encode());
        // SAFETY: names no memory; the worker keeps the listener open
        // until the accept's last completion.
        unsafe { self.push(entry) }
    }

    /// Receives from `socket` into the pool until cancelled, the pool
    /// runs dry, the peer ends its stream, or it fails.
    pub(super) fn receive(&mut self, socket: RawFd, slot: usize) -> io::Result<()> {
        let entry = opcode::RecvMulti::new(Fd(socket), GROUP)
            .build()
            .user_data(Op::Recv(slot).encode());
        // SAFETY: the pool's memory outlives the ring; the socket is kept
        // open until the receive's last completion.
        unsafe { self.push(entry) }
    }

    /// Sends `bytes` on `socket`.
    ///
    /// # Safety
    ///
    /// `bytes` must stay where they are, unchanged, until the send's
    /// completion, and `socket` open.
    pub(super) unsafe fn send(&mut self, socket: RawFd, bytes: &[u8], slot: usize) -> io::Result<()> {
        let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        let entry = opcode::Send::new(Fd(socket), bytes.as_ptr(), len)
            .flags(libc::MSG_NOSIGNAL)
            .build()
            .user_data(Op::Send(slot).encode());
        // SAFETY: passed on to the caller.
        unsafe { self.push(entry) }
    }

    /// Cancels the operation `op` (all of a multishot one's arming).
    pub(super) fn cancel(&mut self, op: Op) -> io::Result<()> {
        let entry = opcode::AsyncCancel::new(op.encode())
            .build()
            .user_data(Op::Aside.encode());
        // SAFETY: names no memory.
        unsafe { self.push(entry) }
    }

    /// Polls `socket` once for room to send (or its end, or an error).
    pub(super) fn poll_room(&mut self, socket: RawFd, slot: usize) -> io::Result<()> {
        let entry = opcode::PollAdd::new(Fd(socket), libc::POLLOUT as u32)
            .build()
            .user_data(Op::Room(slot).encode());
        // SAFETY: names no memory; the socket is kept open until the
        // poll's completion.
        unsafe { self.push(entry) }
    }

    /// Polls `fd` for input until cancelled.
    pub(super) fn poll_wake(&mut self, fd: RawFd) -> io::Result<()> {
        let entry = opcode::PollAdd::new(Fd(fd), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(Op::Wake.encode());
        // SAFETY: names no memory; the worker keeps `fd` open as long as
        // the ring.
        unsafe { self.push(entry) }
    }

    /// Arms the timer to complete after `after`, or moves it, already
    /// armed, to then. At most once between two submissions (the time is
    /// kept in one place until submitted).
    pub(super) fn time(&mut self, after: Duration, armed: bool) -> io::Result<()> {
        *self.spec = Timespec::new().sec(after.as_secs()).nsec(after.subsec_nanos());
        let spec: *const Timespec = &*self.spec;
        let entry = if armed {
            opcode::TimeoutUpdate::new(Op::Timer.encode(), spec)
                .build()
                .user_data(Op::Aside.encode())
        } else {
            opcode::Timeout::new(spec).build().user_data(Op::Timer.encode())
        };
        // SAFETY: the kernel reads the time when the entry is submitted;
        // `spec` stays put and unchanged until then (once per submission).
        unsafe { self.push(entry) }
    }

    /// Submits what is queued and waits for at least `want` completions
    /// (none: returns at once), then hands each completion to `each`.
    pub(super) fn complete(&mut self, want: usize, mut each: impl FnMut(Completion)) -> io::Result<()> {
        match self.ring.submit_and_wait(want) {
            Ok(_) => {}
            // A signal, or completions to reap before more can be
            // submitted: reaped below.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR | libc::EBUSY)) => {}
            Err(e) => return Err(e),
        }
        for cqe in self.ring.completion() {
            each(Completion {
                op: Op::decode(cqe.user_data()),
                result: cqe.result(),
                buffer: cqueue::buffer_select(cqe.flags()),
                more: cqueue::more(cqe.flags()),
            });
        }
        Ok(())
    }

    /// The pool, which the connections' streams read received bytes from
    /// and give buffers back to.
    pub(super) fn pool(&self) -> &Rc<Pool> {
        &self.pool
    }
}

/// The buffers the kernel receives into (a provided buffer ring): each
/// completion of a receive names the one it filled, which is the
/// worker's until given back.
pub(super) struct Pool {
    /// The ring of entries the kernel takes buffers from.
    entries: NonNull<BufRingEntry>,
    entries_layout: Layout,
    /// `count` buffers of `BUFFER_SIZE` bytes.
    memory: NonNull<u8>,
    memory_layout: Layout,
    count: u16,
    /// Entries handed to the kernel, counted; wraps.
    tail: std::cell::Cell<u16>,
    /// Buffers the kernel holds.
    free: std::cell::Cell<u16>,
}

impl Pool {
    fn new(count: u16) -> io::Result<Pool> {
        debug_assert!(count.is_power_of_two());
        let entries_layout = Layout::from_size_align(usize::from(count) * size_of::<BufRingEntry>(), 4096)
            .map_err(io::Error::other)?;
        let memory_layout =
            Layout::from_size_align(usize::from(count) * BUFFER_SIZE, crate::io_adapters::HUGE_PAGE)
                .map_err(io::Error::other)?;
        // SAFETY: both layouts have a non-zero size. The buffers are not
        // zeroed (megabytes, which would delay a worker's start): a
        // buffer is read only up to what the kernel wrote into it.
        let (entries, memory) = unsafe { (alloc_zeroed(entries_layout), alloc(memory_layout)) };
        let (Some(entries), Some(memory)) = (NonNull::new(entries.cast()), NonNull::new(memory)) else {
            return Err(io::ErrorKind::OutOfMemory.into());
        };
        // The kernel fills the buffers in the ring's order, so every
        // receive lands in the next one of 8 MiB: in huge pages, where the
        // system gives them on request, its copy and ours miss the TLB
        // far less. Only advice: refused, the pages stay small.
        // SAFETY: the range is the allocation just made, and advice does
        // not change its contents.
        let _ = unsafe { libc::madvise(memory.as_ptr().cast(), memory_layout.size(), libc::MADV_HUGEPAGE) };
        Ok(Pool {
            entries,
            entries_layout,
            memory,
            memory_layout,
            count,
            tail: std::cell::Cell::new(0),
            free: std::cell::Cell::new(0),
        })
    }

    /// The first `len` bytes of buffer `bid`, which a completion handed
    /// to the worker.
    pub(super) fn bytes(&self, bid: u16, len: usize) -> &[u8] {
        assert!(bid < self.count && len <= BUFFER_SIZE);
        // SAFETY: in the pool's memory; the kernel does not write to a
        // buffer between handing it over and getting it back.
        unsafe { std::slice::from_raw_parts(self.memory.as_ptr().add(usize::from(bid) * BUFFER_SIZE), len) }
    }

    /// A completion took buffer `bid` from the kernel.
    pub(super) fn taken(&self) {
        self.free.set(self.free.get().saturating_sub(1));
    }

    /// Whether the kernel has buffers to receive into.
    pub(super) fn has_free(&self) -> bool {
        self.free.get() > 0
    }

    /// Gives buffer `bid` back to the kernel.
    pub(super) fn give_back(&self, bid: u16) {
        assert!(bid < self.count);
        let tail = self.tail.get();
        let index = usize::from(tail & (self.count - 1));
        // SAFETY: `index` is within the ring; the kernel reads an entry
        // only once the tail below covers it, and the tail was not yet
        // moved past it, so nobody else touches it now.
        unsafe {
            let entry = &mut *self.entries.as_ptr().add(index);
            entry.set_addr(self.memory.as_ptr().add(usize::from(bid) * BUFFER_SIZE) as u64);
            entry.set_len(BUFFER_SIZE as u32);
            entry.set_bid(bid);
        }
        let tail = tail.wrapping_add(1);
        self.tail.set(tail);
        self.free.set(self.free.get() + 1);
        // SAFETY: the ring's tail, a u16 the kernel only reads; the
        // release store publishes the entry written above.
        unsafe {
            let at = BufRingEntry::tail(self.entries.as_ptr()).cast_mut();
            AtomicU16::from_ptr(at).store(tail, Ordering::Release);
        }
    }
}

/// The kernel's part, played by a test: a pool that no ring takes buffers
/// from, so that the test hands them over with the bytes it chooses.
#[cfg(test)]
impl Pool {
    /// `count` buffers (a power of two), all the "kernel's".
    pub(super) fn unregistered(count: u16) -> Rc<Pool> {
        let pool = Pool::new(count).expect("memory for the pool");
        for bid in 0..count {
            pool.give_back(bid);
        }
        Rc::new(pool)
    }

    /// Writes `bytes` into buffer `bid`, as a receive would before its
    /// completion hands the buffer over.
    pub(super) fn fill(&self, bid: u16, bytes: &[u8]) {
        assert!(bid < self.count && bytes.len() <= BUFFER_SIZE);
        // SAFETY: within buffer `bid`, which the caller has not handed
        // over: nothing reads it meanwhile, and no ring writes this pool.
        unsafe {
            let at = self.memory.as_ptr().add(usize::from(bid) * BUFFER_SIZE);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), at, bytes.len());
        }
    }

    /// Buffers the kernel holds.
    pub(super) fn free(&self) -> u16 {
        self.free.get()
    }
}

// SAFETY: a pool owns its memory, which no other value points into until
// it is shared (by `Rc`, on the worker's thread): it may move to that
// thread before.
unsafe impl Send for Pool {}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with these layouts; the ring that
        // used them is gone (dropped before the pool).
        unsafe {
            dealloc(self.entries.as_ptr().cast(), self.entries_layout);
            dealloc(self.memory.as_ptr(), self.memory_layout);
        }
    }
}
