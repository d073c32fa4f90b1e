//! [`PoolStream`]: a pooled connection's stream, plain TCP or TLS over
//! it, and how the pool asks whether its server spoke while it was idle.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::client::Client;
use crate::io_adapters::client::pool::{Pooled, socket_spoke};

/// A pooled connection's stream: plain TCP, or TLS over it.
pub(crate) enum PoolStream {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<crate::io_adapters::tls::TokioTlsStream<TcpStream>>),
}

impl PoolStream {
    /// The TCP socket underneath.
    fn socket(&self) -> &TcpStream {
        match self {
            PoolStream::Plain(stream) => stream,
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => stream.get_ref().get_ref().0,
        }
    }
}

impl AsyncRead for PoolStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PoolStream::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => Pin::new(&mut **stream).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for PoolStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            PoolStream::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => Pin::new(&mut **stream).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PoolStream::Plain(stream) => Pin::new(stream).poll_flush(cx),
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => Pin::new(&mut **stream).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            PoolStream::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            PoolStream::Tls(stream) => Pin::new(&mut **stream).poll_shutdown(cx),
        }
    }
}

impl Pooled for Client<PoolStream> {
    fn is_closed(&self) -> bool {
        Client::is_closed(self)
    }

    fn server_spoke(&self) -> bool {
        #[cfg(unix)]
        {
            use std::os::fd::AsFd;
            socket_spoke(self.stream.socket().as_fd())
        }
        #[cfg(not(unix))]
        socket_spoke(self.stream.socket())
    }
}
