//! [`TlsStream`]: a rustls session over any [`Transport`], itself a
//! [`Transport`], so that the blocking and mio drive steps run over it
//! unchanged; its handshake, and its reads and writes.

use std::fmt;
use std::io::{self, Read, Write};
use std::time::Duration;

use super::error::{HandshakeError, Side, refuses_client_certificate};
use crate::io_adapters::transport::{Transport, would_block};

/// A TLS session over a [`Transport`], itself a [`Transport`]: blocking
/// when the stream underneath blocks, non-blocking when it answers
/// `WouldBlock`.
///
/// A write that was taken is sent without a `flush` (the drive steps never
/// flush): whatever TLS output the socket could not take yet goes out at
/// the start of the next read or write. Readiness-based runtimes must use
/// [`IoMode::NonBlocking`](crate::io_adapters::IoMode::NonBlocking), not
/// `EdgeTriggered`: a short read of plaintext says nothing about the
/// socket underneath.
pub struct TlsStream<T> {
    conn: rustls::Connection,
    io: T,
}

impl<T> fmt::Debug for TlsStream<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsStream")
            .field("handshaking", &self.conn.is_handshaking())
            .field("alpn", &self.conn.alpn_protocol())
            .finish_non_exhaustive()
    }
}

impl<T: Transport> TlsStream<T> {
    pub(super) fn new(conn: rustls::Connection, io: T) -> Self {
        TlsStream { conn, io }
    }

    /// The stream underneath.
    pub fn get_ref(&self) -> &T {
        &self.io
    }

    /// The stream underneath, mutably (reading or writing it directly
    /// breaks the session).
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.io
    }

    /// The rustls session (the peer's certificates, the ALPN protocol, the
    /// version agreed).
    pub fn session(&self) -> &rustls::Connection {
        &self.conn
    }

    /// Runs the handshake to its end now, each read and write bounded by
    /// `limit` (blocking streams). A non-blocking stream answers
    /// `WouldBlock` until it is done.
    pub fn handshake(&mut self, limit: Option<Duration>) -> io::Result<()> {
        self.io.set_timeout(limit)?;
        while self.conn.is_handshaking() {
            self.send_pending()?;
            if !self.conn.is_handshaking() {
                break;
            }
            if self.receive()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the connection during the TLS handshake",
                ));
            }
        }
        self.send_pending()
    }

    /// Sends the TLS output rustls holds, until none is left or the stream
    /// would block.
    fn send_pending(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            if self.conn.write_tls(&mut self.io)? == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
        }
        Ok(())
    }

    /// Reads TLS input once and processes it; the bytes read (0: the peer
    /// closed). A protocol error is sent to the peer as an alert (as far as
    /// the socket takes it) and returned.
    fn receive(&mut self) -> io::Result<usize> {
        let n = self.conn.read_tls(&mut self.io)?;
        if let Err(e) = self.conn.process_new_packets() {
            let _ = self.send_pending();
            return Err(self.explain(e));
        }
        // Handshake messages or a key update may want an answer.
        match self.send_pending() {
            Err(e) if !would_block(&e) => return Err(e),
            _ => {}
        }
        Ok(n)
    }

    /// A rustls error as an I/O error that says what most likely happened.
    fn explain(&self, e: rustls::Error) -> io::Error {
        let side = match self.conn {
            rustls::Connection::Client(_) => Side::Client,
            rustls::Connection::Server(_) => Side::Server,
        };
        if self.conn.is_handshaking() {
            HandshakeError { side, error: e }.into()
        } else if side == Side::Client && refuses_client_certificate(&e) {
            // A TLS 1.3 server judges the client's certificate after the
            // client's side of the handshake is done: its refusal comes
            // with the first read, and is the handshake's failure all the
            // same. Its kind says it even where the error is copied as text.
            io::Error::new(io::ErrorKind::PermissionDenied, HandshakeError { side, error: e })
        } else {
            io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}"))
        }
    }
}

impl<T: Transport> Read for TlsStream<T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Output the socket could not take before goes first, but a full
        // socket must not keep us from reading.
        match self.send_pending() {
            Err(e) if !would_block(&e) => return Err(e),
            _ => {}
        }
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The peer closed without close_notify. A jsontp message is
                // framed by its own JSON, never by the end of the stream, so
                // a truncation cannot pass for a whole message: read it as
                // the end, like TCP's.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if self.receive()? == 0 {
                // Let rustls tell a clean close from a truncation above.
                if self.conn.wants_read() && self.conn.is_handshaking() {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the peer closed the connection during the TLS handshake",
                    ));
                }
                return match self.conn.reader().read(buf) {
                    Ok(n) => Ok(n),
                    Err(_) => Ok(0),
                };
            }
        }
    }
}

impl<T: Transport> Write for TlsStream<T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Nothing new is taken while older output waits: that is the
        // back-pressure a non-blocking caller waits on.
        self.send_pending()?;
        while self.conn.is_handshaking() {
            if self.receive()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the connection during the TLS handshake",
                ));
            }
            self.send_pending()?;
        }
        let n = self.conn.writer().write(buf)?;
        // Taken: what the socket cannot take now goes at the next call.
        match self.send_pending() {
            Err(e) if !would_block(&e) => Err(e),
            _ => Ok(n),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_pending()?;
        self.io.flush()
    }
}

impl<T: Transport> Transport for TlsStream<T> {
    /// Sends close_notify and every byte still held, then half-closes the
    /// socket underneath.
    fn shutdown_write(&mut self) -> io::Result<()> {
        self.conn.send_close_notify();
        self.send_pending()?;
        self.io.shutdown_write()
    }

    fn set_timeout(&mut self, limit: Option<Duration>) -> io::Result<()> {
        self.io.set_timeout(limit)
    }

    /// What the socket says the peer acknowledged: ciphertext, counted
    /// against the socket's own earlier count, never against the
    /// plaintext written. Records the session still keeps are held too.
    fn acknowledged(&self) -> Option<crate::machine::Acknowledged> {
        let told = self.io.acknowledged()?;
        Some(crate::machine::Acknowledged {
            holds_more: told.holds_more || self.conn.wants_write(),
            ..told
        })
    }
}
