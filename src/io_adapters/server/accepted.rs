//! An accepted connection as the server serves it: plain, or TLS over the
//! socket.

use std::io;
use std::time::Duration;

use super::ServerOptions;
#[cfg(feature = "mio")]
use crate::io_adapters::transport::IoMode;
use crate::io_adapters::transport::Transport;

/// An accepted connection as the server serves it: the socket itself, or
/// a TLS session over it when the server options carry TLS (feature `tls`).
///
/// The one place where the synchronous runtimes (std, mio) turn an accepted
/// socket into what they serve: a reader of the PROXY protocol header
/// (D21) belongs here too.
#[derive(Debug)]
#[non_exhaustive]
pub enum Accepted<S> {
    /// Plain TCP.
    Plain(S),
    /// TLS over the socket (D20); the handshake runs in the first reads and
    /// writes.
    #[cfg(feature = "tls")]
    Tls(Box<crate::io_adapters::tls::TlsStream<S>>),
}

impl<S: Transport> Accepted<S> {
    /// Wraps an accepted `stream` as `options` say.
    pub fn new(stream: S, options: &ServerOptions) -> io::Result<Self> {
        #[cfg(feature = "tls")]
        if let Some(tls) = &options.tls {
            return Ok(Accepted::Tls(Box::new(tls.accept(stream)?)));
        }
        let _ = options;
        Ok(Accepted::Plain(stream))
    }

    /// The socket underneath.
    pub fn get_ref(&self) -> &S {
        match self {
            Accepted::Plain(s) => s,
            #[cfg(feature = "tls")]
            Accepted::Tls(s) => s.get_ref(),
        }
    }

    /// The socket underneath, mutably (to register it with a poller).
    pub fn get_mut(&mut self) -> &mut S {
        match self {
            Accepted::Plain(s) => s,
            #[cfg(feature = "tls")]
            Accepted::Tls(s) => s.get_mut(),
        }
    }

    /// How a readiness-based runtime drives it: a TLS session cannot be
    /// edge-triggered (a short read of plaintext does not mean the socket is
    /// drained), so `edge` becomes [`IoMode::NonBlocking`] there.
    #[cfg(feature = "mio")]
    pub(crate) fn mode(&self, edge: IoMode) -> IoMode {
        match self {
            Accepted::Plain(_) => edge,
            #[cfg(feature = "tls")]
            Accepted::Tls(_) if edge == IoMode::EdgeTriggered => IoMode::NonBlocking,
            #[cfg(feature = "tls")]
            Accepted::Tls(_) => edge,
        }
    }
}

impl<S: Transport> io::Read for Accepted<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Accepted::Plain(s) => s.read(buf),
            #[cfg(feature = "tls")]
            Accepted::Tls(s) => s.read(buf),
        }
    }
}

impl<S: Transport> io::Write for Accepted<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Accepted::Plain(s) => s.write(buf),
            #[cfg(feature = "tls")]
            Accepted::Tls(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Accepted::Plain(s) => s.write_vectored(bufs),
            #[cfg(feature = "tls")]
            Accepted::Tls(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Accepted::Plain(s) => s.flush(),
            #[cfg(feature = "tls")]
            Accepted::Tls(s) => s.flush(),
        }
    }
}

impl<S: Transport> Transport for Accepted<S> {
    fn shutdown_write(&mut self) -> io::Result<()> {
        match self {
            Accepted::Plain(s) => s.shutdown_write(),
            #[cfg(feature = "tls")]
            Accepted::Tls(s) => s.shutdown_write(),
        }
    }

    fn set_timeout(&mut self, limit: Option<Duration>) -> io::Result<()> {
        match self {
            Accepted::Plain(s) => s.set_timeout(limit),
            #[cfg(feature = "tls")]
            Accepted::Tls(s) => s.set_timeout(limit),
        }
    }

    fn acknowledged(&self) -> Option<crate::machine::Acknowledged> {
        match self {
            Accepted::Plain(s) => s.acknowledged(),
            #[cfg(feature = "tls")]
            Accepted::Tls(s) => s.acknowledged(),
        }
    }

    fn send_copy(&mut self, pending: crate::machine::OutputCopy<'_>) -> Option<io::Result<usize>> {
        match self {
            Accepted::Plain(s) => s.send_copy(pending),
            #[cfg(feature = "tls")]
            Accepted::Tls(_) => None,
        }
    }

    fn write_before_copy(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Accepted::Plain(s) => s.write_before_copy(bufs),
            #[cfg(feature = "tls")]
            Accepted::Tls(s) => io::Write::write_vectored(s, bufs),
        }
    }
}
