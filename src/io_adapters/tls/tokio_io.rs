//! [`TokioTlsStream`]: a tokio-rustls stream as the async runtimes serve
//! it, flushed after every write; and a tokio-rustls handshake error said
//! as [`TlsStream`](super::TlsStream) says it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::error::{HandshakeError, Side};

/// A tokio-rustls stream (either role) as the async runtimes serve it.
///
/// tokio-rustls takes a write and keeps what the socket cannot take yet
/// until the next `poll_flush`; the drive steps never flush. This wrapper
/// flushes after every write and before every read, so a response left
/// behind by a full socket still goes out once it drains (the flush that
/// answers `Pending` has registered the task to be woken then).
#[derive(Debug)]
pub struct TokioTlsStream<S> {
    inner: tokio_rustls::TlsStream<S>,
}

impl<S> TokioTlsStream<S> {
    /// Wraps a stream whose handshake is done.
    pub fn new(inner: tokio_rustls::TlsStream<S>) -> Self {
        TokioTlsStream { inner }
    }

    /// The tokio-rustls stream (the socket, the rustls session).
    pub fn get_ref(&self) -> &tokio_rustls::TlsStream<S> {
        &self.inner
    }
}

/// Sends what is held back; `Pending` is fine (the waker is set).
fn push<S: AsyncRead + AsyncWrite + Unpin>(
    inner: &mut tokio_rustls::TlsStream<S>,
    cx: &mut Context<'_>,
) -> io::Result<()> {
    match Pin::new(inner).poll_flush(cx) {
        Poll::Ready(Err(e)) => Err(e),
        _ => Ok(()),
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for TokioTlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        push(&mut self.inner, cx)?;
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TokioTlsStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let mut written = Pin::new(&mut self.inner).poll_write(cx, buf);
        if written.is_pending() {
            // A full session takes no plaintext, but sending its
            // records on the way may have made room: offer once more,
            // so that output the peer took counts as taken (D3).
            written = Pin::new(&mut self.inner).poll_write(cx, buf);
        }
        if let Poll::Ready(Ok(_)) = written {
            push(&mut self.inner, cx)?;
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
/// A client handshake error from tokio-rustls, said as plainly as
/// [`TlsStream`](super::TlsStream) says it.
pub(crate) fn explain_handshake(e: io::Error) -> io::Error {
    let Some(error) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    else {
        return e;
    };
    HandshakeError {
        side: Side::Client,
        error: error.clone(),
    }
    .into()
}
