//! A tokio connection's stream as the server uses it: writes that ask the
//! kernel when tokio's readiness says the socket is full, and the watch
//! kept on the peer while an answer is awaited (what it sends ahead is
//! kept; a peer that left cancels the answer).

use std::future::{Future, poll_fn};
use std::io;
use std::task::Poll;

use tokio::io::{AsyncRead, AsyncWrite};

use super::READ_CHUNK;
use crate::io_adapters::server::Driver;
use crate::io_adapters::server::watch::{PROBE_FIRST, next_probe_wait, peer_gone};
use crate::io_adapters::transport::{PolledIo, PolledSendCopy};

/// A tokio TCP stream whose writes ask the kernel when tokio's cached
/// readiness says the socket is full.
///
/// tokio learns that a socket takes output again from an edge-triggered
/// readiness event, which Linux gives only once a third of the send buffer
/// is free. A peer reading slowly but steadily frees less than that between
/// two stall checks, and would be closed as a peer that takes nothing
/// (D3). When the drive offers output and tokio answers `Pending`, one
/// non-blocking `send` asks the kernel itself; the waker is registered
/// either way.
pub(super) struct KernelWrites(pub(super) tokio::net::TcpStream);

impl KernelWrites {
    /// What the peer acknowledged of the socket's output: the stall limit
    /// counts the peer's progress by it (D3).
    pub(super) fn acknowledged(&self) -> Option<crate::machine::Acknowledged> {
        crate::io_adapters::transport::tcp_acknowledged(std::os::fd::AsFd::as_fd(&self.0))
    }
}

impl KernelWrites {
    /// Sends a prepared body's pending text from its sealed copy with
    /// `sendfile` (Linux), as the std and mio servers do: the kernel then
    /// copies nothing from memory into the socket. tokio's readiness
    /// decides when to try; when it says the socket is full, the kernel is
    /// asked all the same, as [`poll_write`](AsyncWrite::poll_write) does,
    /// with the waker registered. `None` for a copy that is not a file.
    pub(super) fn send_copy(
        &mut self,
        cx: &mut std::task::Context<'_>,
        pending: crate::machine::OutputCopy<'_>,
    ) -> Option<io::Result<usize>> {
        #[cfg(target_os = "linux")]
        {
            pending.file()?;
            let send = || {
                crate::io_adapters::sendfile::send(std::os::fd::AsFd::as_fd(&self.0), pending)
                    .unwrap_or_else(|| Err(io::ErrorKind::Unsupported.into()))
            };
            loop {
                return Some(match self.0.poll_write_ready(cx) {
                    Poll::Ready(Ok(())) => match self.0.try_io(tokio::io::Interest::WRITABLE, send) {
                        // The readiness was stale and is cleared now: the
                        // next poll registers the waker.
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                        sent => sent,
                    },
                    Poll::Ready(Err(e)) => Err(e),
                    Poll::Pending => send(),
                });
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (cx, pending);
            None
        }
    }
}

impl AsyncRead for KernelWrites {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for KernelWrites {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match std::pin::Pin::new(&mut self.0).poll_write(cx, buf) {
            Poll::Pending => match rustix::net::send(&self.0, buf, rustix::net::SendFlags::NOSIGNAL) {
                Ok(n) => Poll::Ready(Ok(n)),
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e.into())),
            },
            ready => ready,
        }
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match std::pin::Pin::new(&mut self.0).poll_write_vectored(cx, bufs) {
            // As `poll_write`: the kernel may take it all the same.
            Poll::Pending => match rustix::net::sendmsg(
                &self.0,
                bufs,
                &mut rustix::net::SendAncillaryBuffer::default(),
                rustix::net::SendFlags::NOSIGNAL,
            ) {
                Ok(n) => Poll::Ready(Ok(n)),
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => Poll::Pending,
                Err(e) => Poll::Ready(Err(e.into())),
            },
            ready => ready,
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// The most a connection reads ahead while its application works: what
/// the peer sends meanwhile (its next requests, pipelined) waits here for
/// the drive step, and past this the peer is no longer watched.
pub(super) const WATCH_AHEAD: usize = 4 * READ_CHUNK;

/// A connection's stream, with what was read from it while the
/// application worked: the drive step reads those bytes first, so that
/// watching the peer loses nothing it sent.
pub(super) struct Watched<S> {
    stream: S,
    ahead: Vec<u8>,
    /// How much of `ahead` the drive step has read.
    taken: usize,
    acknowledged: fn(&S) -> Option<crate::machine::Acknowledged>,
    send_copy: PolledSendCopy<S>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Watched<S> {
    /// `stream`, whose peer's acknowledged bytes `acknowledged` reads, and
    /// which sends from an adapter's copy with `send_copy` where it can.
    pub(super) fn new(
        stream: S,
        acknowledged: fn(&S) -> Option<crate::machine::Acknowledged>,
        send_copy: PolledSendCopy<S>,
    ) -> Self {
        Watched {
            stream,
            ahead: Vec::new(),
            taken: 0,
            acknowledged,
            send_copy,
        }
    }

    /// What the stream says the peer acknowledged, for [`PolledIo`].
    pub(super) fn acknowledged(&self) -> Option<crate::machine::Acknowledged> {
        (self.acknowledged)(&self.stream)
    }

    /// Sends pending output from an adapter's copy, for [`PolledIo`]:
    /// what was read ahead is input, so nothing stands in the way.
    pub(super) fn send_copy(
        &mut self,
        cx: &mut std::task::Context<'_>,
        pending: crate::machine::OutputCopy<'_>,
    ) -> Option<io::Result<usize>> {
        (self.send_copy)(&mut self.stream, cx, pending)
    }

    /// Awaits `answer` while writing what is left of `driver`'s earlier
    /// answers and reading what the peer sends meanwhile: a peer that
    /// resets the connection (or whose stream fails) is gone, and
    /// `answer` is dropped unfinished, which cancels an `async` handler
    /// (`None`).
    ///
    /// An end of stream may be a half-close, whose peer still gets every
    /// answer it is owed (D1), or a peer that closed and left: the two
    /// look alike until something is written. So when a byte written now
    /// falls between messages, one newline is written (the
    /// whitespace D1 allows there): a peer still reading skips it, and one
    /// that left has its system answer with a reset, which makes the next
    /// newline fail (a read cannot tell: after an end of stream it gives
    /// the end again). So a newline goes out now and then, less and less
    /// often, until the answer is ready or a write fails. Without a probe,
    /// only the answer is awaited from then on.
    pub(super) async fn watching<F: Future>(&mut self, answer: F, driver: &mut Driver) -> Option<F::Output> {
        let mut answer = std::pin::pin!(answer);
        let mut watch = Watch::Reading;
        poll_fn(|cx| {
            let mut io = PolledIo {
                io: &mut *self,
                cx: &mut *cx,
                acknowledged: Self::acknowledged,
                send_copy: Self::send_copy,
            };
            driver.write_while_awaited(&mut io);
            if driver.is_closed() {
                return Poll::Ready(None);
            }
            if let Poll::Ready(out) = answer.as_mut().poll(cx) {
                return Poll::Ready(Some(out));
            }
            let probe = driver.between_messages();
            loop {
                watch = match std::mem::replace(&mut watch, Watch::Ended) {
                    Watch::Reading => match self.read_ahead(cx) {
                        Poll::Ready(Ok(())) if probe => Watch::Probing { wait: PROBE_FIRST },
                        Poll::Ready(Ok(())) => Watch::Ended,
                        Poll::Ready(Err(_)) => return Poll::Ready(None),
                        Poll::Pending => {
                            watch = Watch::Reading;
                            return Poll::Pending;
                        }
                    },
                    Watch::Probing { wait } => match self.probe(cx) {
                        Poll::Ready(Ok(())) => Watch::Probed {
                            timer: Box::pin(tokio::time::sleep(wait)),
                            wait,
                        },
                        Poll::Ready(Err(e)) if peer_gone(&e) => return Poll::Ready(None),
                        // Nothing known: the answer alone is awaited.
                        Poll::Ready(Err(_)) | Poll::Pending => Watch::Ended,
                    },
                    Watch::Probed { mut timer, wait } => {
                        if timer.as_mut().poll(cx).is_pending() {
                            watch = Watch::Probed { timer, wait };
                            return Poll::Pending;
                        }
                        Watch::Probing {
                            wait: next_probe_wait(wait),
                        }
                    }
                    Watch::Ended => {
                        watch = Watch::Ended;
                        return Poll::Pending;
                    }
                };
            }
        })
        .await
    }

    /// Writes one newline, flushed (a TLS session holds it until then).
    fn probe(&mut self, cx: &mut std::task::Context<'_>) -> Poll<io::Result<()>> {
        let mut stream = std::pin::Pin::new(&mut self.stream);
        match stream.as_mut().poll_write(cx, b"\n") {
            Poll::Ready(Ok(_)) => stream.poll_flush(cx),
            other => other.map_ok(|_| ()),
        }
    }

    /// Reads what the peer sends ahead, up to [`WATCH_AHEAD`]:
    /// `Ready(Ok)` at the end of its stream, `Ready(Err)` when it failed,
    /// `Pending` otherwise (with room full, reading stops: past it the
    /// peer is no longer watched).
    fn read_ahead(&mut self, cx: &mut std::task::Context<'_>) -> Poll<io::Result<()>> {
        // Read through the stack: a connection holds memory for what its
        // peer sent ahead only while there is some.
        let mut chunk = [0u8; 4096];
        while self.ahead.len() < WATCH_AHEAD {
            let room = chunk.len().min(WATCH_AHEAD - self.ahead.len());
            let mut buf = tokio::io::ReadBuf::new(&mut chunk[..room]);
            match std::pin::Pin::new(&mut self.stream).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Ok(())),
                Poll::Ready(Ok(())) => self.ahead.extend_from_slice(buf.filled()),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => break,
            }
        }
        Poll::Pending
    }
}

/// How a connection is watched while its answer is awaited.
enum Watch {
    /// Reading what the peer sends ahead.
    Reading,
    /// Its stream ended: a newline is to be written, to tell a peer that
    /// left from one that half-closed; the next one `wait` later.
    Probing { wait: std::time::Duration },
    /// A newline went out; the next goes when `timer` fires, `wait` after
    /// the last.
    Probed {
        timer: std::pin::Pin<Box<tokio::time::Sleep>>,
        wait: std::time::Duration,
    },
    /// Nothing more to learn: only the answer is awaited.
    Ended,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.taken < this.ahead.len() {
            let n = buf.remaining().min(this.ahead.len() - this.taken);
            buf.put_slice(&this.ahead[this.taken..this.taken + n]);
            this.taken += n;
            if this.taken == this.ahead.len() {
                // Given back: an idle connection keeps no buffer.
                this.ahead = Vec::new();
                this.taken = 0;
            }
            return Poll::Ready(Ok(()));
        }
        std::pin::Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
