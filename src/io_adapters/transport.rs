//! The transport seam: the byte stream a drive step reads and writes.
//!
//! The drive steps ([`server::Driver`](super::server::Driver) and the
//! clients') never name a socket type. They read and write a [`Transport`]:
//! plain TCP, a Unix socket, and later TLS or a stream that has consumed a
//! PROXY header (D20, D21) are all the same to them. A transport is either
//! blocking, bounded by [`Transport::set_timeout`], or non-blocking,
//! answering [`io::ErrorKind::WouldBlock`]; the [`IoMode`] given to the
//! driver says which.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use crate::machine::{Acknowledged, OutputCopy};

/// A byte stream a drive step can serve: `Read + Write`, plus the two
/// things a connection needs beyond them.
///
/// Implemented for std's `TcpStream` and `UnixStream` and mio's
/// `TcpStream`. A wrapper (TLS, a PROXY-protocol reader) implements it by
/// passing both calls on to the socket underneath.
pub trait Transport: Read + Write {
    /// Ends our sending side and keeps receiving: TCP's half-close. A
    /// closing server calls it, then drains what the peer still sends for
    /// a moment, so that closing with unread input does not reset the
    /// connection and lose our last response.
    fn shutdown_write(&mut self) -> io::Result<()>;

    /// Blocking transports: how long one read or write may block (`None`:
    /// for ever). The drive step bounds every call so that it regains
    /// control to run the timers (D3) and notice a shutdown. A timed-out
    /// call answers `WouldBlock` or `TimedOut`. Non-blocking transports
    /// ignore it.
    fn set_timeout(&mut self, limit: Option<Duration>) -> io::Result<()>;

    /// What the peer has acknowledged of the bytes written, where the
    /// system tells (a TCP socket's `TCP_INFO` on Linux), counted where
    /// they leave for the network; `None` where it cannot tell. The stall
    /// limit (D3) counts the peer's progress by it: a kernel's send buffer
    /// growing to accept one more write is not the peer reading. A layer
    /// that transforms what it sends (TLS) passes on its socket's count,
    /// and holds more while it keeps records of its own.
    fn acknowledged(&self) -> Option<Acknowledged> {
        None
    }

    /// Sends pending output that an adapter keeps a copy of
    /// ([`ServerConnection::pending_output_copy`](crate::machine::ServerConnection::pending_output_copy))
    /// from the copy, where the system can (`sendfile` from the sealed
    /// file of `Body::add_sendfile_copy` into a plain TCP socket, on
    /// Linux): `None` where it cannot, and the caller writes the same
    /// bytes from memory. A stream that transforms what it sends (TLS)
    /// cannot.
    fn send_copy(&mut self, pending: OutputCopy<'_>) -> Option<io::Result<usize>> {
        let _ = pending;
        None
    }

    /// Writes `bufs`, which output sent with [`send_copy`](Self::send_copy)
    /// follows at once: where the system can hold them back to leave with
    /// it (`MSG_MORE` on a TCP socket, on Linux), it does, rather than
    /// send them as a small packet of their own. Elsewhere a plain write.
    fn write_before_copy(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.write_vectored(bufs)
    }
}

/// What the peer has acknowledged of a TCP socket's output (`TCP_INFO`'s
/// `tcpi_bytes_acked`), and whether the socket holds more (bytes unsent
/// or in flight), on Linux with glibc or musl; `None` elsewhere, or on a
/// kernel older than 4.6, which does not give both.
#[cfg(unix)]
#[allow(unsafe_code)]
pub(crate) fn tcp_acknowledged(socket: std::os::fd::BorrowedFd<'_>) -> Option<Acknowledged> {
    #[cfg(all(target_os = "linux", any(target_env = "gnu", target_env = "musl")))]
    {
        use std::os::fd::AsRawFd;
        let mut info = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
        let size = std::mem::size_of::<libc::tcp_info>();
        let mut len = libc::socklen_t::try_from(size).ok()?;
        // SAFETY: the kernel writes at most `len` bytes into `info`, which
        // has room for them, and sets `len` to how many it wrote; the
        // descriptor is borrowed for the call.
        let status = unsafe {
            libc::getsockopt(
                socket.as_raw_fd(),
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                info.as_mut_ptr().cast(),
                &mut len,
            )
        };
        // An older kernel fills less of the structure: without the unsent
        // count (the last field read here), it cannot tell.
        let needed = std::mem::offset_of!(libc::tcp_info, tcpi_notsent_bytes) + 4;
        if status != 0 || usize::try_from(len).ok()? < needed {
            return None;
        }
        // SAFETY: zeroed, then partly written by the kernel: every bit
        // pattern is a valid `tcp_info`, a structure of integers.
        let info = unsafe { info.assume_init() };
        Some(Acknowledged {
            bytes: info.tcpi_bytes_acked,
            holds_more: info.tcpi_unacked > 0 || info.tcpi_notsent_bytes > 0,
        })
    }
    #[cfg(not(all(target_os = "linux", any(target_env = "gnu", target_env = "musl"))))]
    {
        let _ = socket;
        None
    }
}

/// How the transport behaves when it has nothing to give or take; decides
/// how a drive step uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IoMode {
    /// Calls block, bounded by [`Transport::set_timeout`]. One call at a
    /// time: a pending write goes first, and reading waits until the write
    /// is done or timed out (a blocked read would hold the write back).
    Blocking,
    /// Calls answer `WouldBlock`. The step reads and writes in the same
    /// turn, until every direction it wants would block; only then does it
    /// ask to wait (what readiness-based runtimes require).
    NonBlocking,
    /// [`NonBlocking`](IoMode::NonBlocking), and a read that fills less than
    /// the buffer means the socket is drained: an edge-triggered poll
    /// (epoll, kqueue) reports new data as a new event, so the step spares
    /// the read that would only answer `WouldBlock`.
    EdgeTriggered,
}

impl IoMode {
    pub(crate) fn is_blocking(self) -> bool {
        self == IoMode::Blocking
    }
}

/// The timeout to give a blocking socket for `until`: whole milliseconds,
/// rounded up (zero would mean "for ever" to the socket). A deadline that
/// keeps its distance, as a moving stall deadline does during a transfer,
/// then keeps the timeout already set, with no system call.
pub(crate) fn socket_timeout(until: Duration) -> Duration {
    let millis = until.as_nanos().div_ceil(1_000_000).max(1);
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}

/// Whether a blocking socket whose timeout is `set` (`None`: never set;
/// `Some(None)`: none) must be given `wanted` instead. A timeout shorter
/// than wanted only wakes the step early (it is set again then), so the
/// one set stays until it is more than twice too short; one longer than
/// wanted would let a deadline pass unseen, so it stays only while that
/// is by at most a 64th of it, and 100 ms. A deadline that moves on with
/// every read, as a transfer's progress and rate deadlines do (D3, D19),
/// then costs no system call per read.
pub(crate) fn retime(set: Option<Option<Duration>>, wanted: Option<Duration>) -> bool {
    let Some(current) = set else {
        return true;
    };
    let (current, wanted) = (current.unwrap_or(Duration::MAX), wanted.unwrap_or(Duration::MAX));
    let late = (current / 64).min(Duration::from_millis(100));
    wanted.saturating_add(late) < current || wanted > current.saturating_mul(2)
}

/// Whether a read or write gave up for now (non-blocking, or a blocking
/// call's timeout) rather than failed.
pub(crate) fn would_block(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)
}

/// A peer that closed with unread data resets the connection.
pub(crate) fn is_reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted | io::ErrorKind::BrokenPipe
    )
}

impl Transport for TcpStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }

    fn set_timeout(&mut self, limit: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(limit)?;
        self.set_write_timeout(limit)
    }

    #[cfg(unix)]
    fn acknowledged(&self) -> Option<Acknowledged> {
        tcp_acknowledged(std::os::fd::AsFd::as_fd(self))
    }

    #[cfg(target_os = "linux")]
    fn send_copy(&mut self, pending: OutputCopy<'_>) -> Option<io::Result<usize>> {
        super::sendfile::send(std::os::fd::AsFd::as_fd(self), pending)
    }

    #[cfg(target_os = "linux")]
    fn write_before_copy(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        super::sendfile::write_more(std::os::fd::AsFd::as_fd(self), bufs)
    }
}

#[cfg(unix)]
impl Transport for std::os::unix::net::UnixStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }

    fn set_timeout(&mut self, limit: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(limit)?;
        self.set_write_timeout(limit)
    }
}

#[cfg(feature = "mio")]
impl Transport for mio::net::TcpStream {
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.shutdown(Shutdown::Write)
    }

    fn set_timeout(&mut self, _limit: Option<Duration>) -> io::Result<()> {
        Ok(())
    }

    #[cfg(unix)]
    fn acknowledged(&self) -> Option<Acknowledged> {
        tcp_acknowledged(std::os::fd::AsFd::as_fd(self))
    }

    #[cfg(target_os = "linux")]
    fn send_copy(&mut self, pending: OutputCopy<'_>) -> Option<io::Result<usize>> {
        super::sendfile::send(std::os::fd::AsFd::as_fd(self), pending)
    }

    #[cfg(target_os = "linux")]
    fn write_before_copy(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        super::sendfile::write_more(std::os::fd::AsFd::as_fd(self), bufs)
    }
}

impl<T: Transport + ?Sized> Transport for &mut T {
    fn shutdown_write(&mut self) -> io::Result<()> {
        (**self).shutdown_write()
    }

    fn set_timeout(&mut self, limit: Option<Duration>) -> io::Result<()> {
        (**self).set_timeout(limit)
    }

    fn acknowledged(&self) -> Option<Acknowledged> {
        (**self).acknowledged()
    }

    fn send_copy(&mut self, pending: OutputCopy<'_>) -> Option<io::Result<usize>> {
        (**self).send_copy(pending)
    }

    fn write_before_copy(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        (**self).write_before_copy(bufs)
    }
}

impl<T: Transport + ?Sized> Transport for Box<T> {
    fn shutdown_write(&mut self) -> io::Result<()> {
        (**self).shutdown_write()
    }

    fn set_timeout(&mut self, limit: Option<Duration>) -> io::Result<()> {
        (**self).set_timeout(limit)
    }

    fn acknowledged(&self) -> Option<Acknowledged> {
        (**self).acknowledged()
    }

    fn send_copy(&mut self, pending: OutputCopy<'_>) -> Option<io::Result<usize>> {
        (**self).send_copy(pending)
    }

    fn write_before_copy(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        (**self).write_before_copy(bufs)
    }
}

/// A tokio stream seen through the synchronous [`Transport`] for one poll:
/// `Pending` reads as `WouldBlock`, having registered the task's waker, so
/// the async runtimes run the same drive step as the others (the way
/// tokio-rustls runs rustls' synchronous I/O).
#[cfg(feature = "tokio")]
pub(crate) struct PolledIo<'a, 'b, S> {
    pub(crate) io: &'a mut S,
    pub(crate) cx: &'a mut std::task::Context<'b>,
    /// What the stream tells of its output ([`Transport::acknowledged`]),
    /// where the caller knows how to ask its concrete type.
    pub(crate) acknowledged: fn(&S) -> Option<Acknowledged>,
    /// Sends pending output from an adapter's copy
    /// ([`Transport::send_copy`]), where the caller knows its concrete
    /// type can: `None` where it cannot.
    pub(crate) send_copy: PolledSendCopy<S>,
}

/// How a [`PolledIo`] sends from an adapter's copy, with the poll's
/// context for the socket's readiness.
#[cfg(feature = "tokio")]
pub(crate) type PolledSendCopy<S> =
    fn(&mut S, &mut std::task::Context<'_>, OutputCopy<'_>) -> Option<io::Result<usize>>;

/// A [`PolledSendCopy`] for a stream that cannot send from a copy (TLS,
/// a stream of the caller's): every byte is written from memory.
#[cfg(feature = "tokio")]
pub(crate) fn no_copy<S>(
    _stream: &mut S,
    _cx: &mut std::task::Context<'_>,
    _pending: OutputCopy<'_>,
) -> Option<io::Result<usize>> {
    None
}

/// A step polled through [`PolledIo`] waits: whether to return `Pending`
/// (the I/O it tried registered the waker, and `timer` now runs to
/// `deadline`), or step again at once (the deadline has passed).
#[cfg(feature = "tokio")]
pub(crate) fn park(
    cx: &mut std::task::Context<'_>,
    timer: &mut std::pin::Pin<Box<tokio::time::Sleep>>,
    deadline: Option<std::time::Instant>,
) -> bool {
    use std::future::Future;
    let Some(deadline) = deadline else {
        return true;
    };
    timer.as_mut().reset(deadline.into());
    timer.as_mut().poll(cx).is_pending()
}

#[cfg(feature = "tokio")]
mod polled {
    use std::io::{self, Read, Write};
    use std::pin::Pin;
    use std::task::Poll;
    use std::time::Duration;

    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

    use super::{PolledIo, Transport};

    fn ready<T>(poll: Poll<io::Result<T>>) -> io::Result<T> {
        match poll {
            Poll::Ready(result) => result,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    impl<S: AsyncRead + Unpin> Read for PolledIo<'_, '_, S> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let mut buf = ReadBuf::new(buf);
            ready(Pin::new(&mut *self.io).poll_read(self.cx, &mut buf))?;
            Ok(buf.filled().len())
        }
    }

    impl<S: AsyncWrite + Unpin> Write for PolledIo<'_, '_, S> {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            ready(Pin::new(&mut *self.io).poll_write(self.cx, buf))
        }

        fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
            ready(Pin::new(&mut *self.io).poll_write_vectored(self.cx, bufs))
        }

        fn flush(&mut self) -> io::Result<()> {
            ready(Pin::new(&mut *self.io).poll_flush(self.cx))
        }
    }

    impl<S: AsyncRead + AsyncWrite + Unpin> Transport for PolledIo<'_, '_, S> {
        fn shutdown_write(&mut self) -> io::Result<()> {
            ready(Pin::new(&mut *self.io).poll_shutdown(self.cx))
        }

        fn set_timeout(&mut self, _limit: Option<Duration>) -> io::Result<()> {
            Ok(())
        }

        fn acknowledged(&self) -> Option<crate::machine::Acknowledged> {
            (self.acknowledged)(self.io)
        }

        fn send_copy(&mut self, pending: crate::machine::OutputCopy<'_>) -> Option<io::Result<usize>> {
            (self.send_copy)(self.io, self.cx, pending)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_socket_timeout_is_whole_milliseconds_and_never_zero() {
        assert_eq!(socket_timeout(Duration::ZERO), MS);
        assert_eq!(socket_timeout(Duration::from_micros(1)), MS);
        assert_eq!(socket_timeout(Duration::from_micros(1_001)), 2 * MS);
        assert_eq!(socket_timeout(30_000 * MS), 30_000 * MS);
    }

    #[test]
    fn a_timeout_is_set_again_only_when_it_would_be_late_or_wake_too_often() {
        assert!(retime(None, Some(MS)), "never set");
        assert!(retime(None, None), "never set");
        let thirty = Some(Some(30_000 * MS));
        // A moving deadline a few milliseconds nearer: late by at most
        // 100 ms, kept.
        assert!(!retime(thirty, Some(29_950 * MS)));
        assert!(retime(thirty, Some(29_899 * MS)), "over 100 ms late");
        // Further: woken early, which is harmless, until twice too short.
        assert!(!retime(thirty, Some(60_000 * MS)));
        assert!(retime(thirty, Some(60_001 * MS)));
        assert!(
            retime(thirty, None),
            "none wanted: for ever is far more than twice"
        );
        // A short slice is late by a 64th of itself at most.
        let slice = Some(Some(20 * MS));
        assert!(!retime(slice, Some(20 * MS - Duration::from_micros(300))));
        assert!(retime(slice, Some(19 * MS)));
        // None set: anything shorter must be set.
        assert!(retime(Some(None), Some(30_000 * MS)));
        assert!(!retime(Some(None), None));
    }
}
