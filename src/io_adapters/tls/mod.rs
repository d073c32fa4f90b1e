//! TLS (D20) through the transport seam, with rustls and its `ring`
//! provider.
//!
//! A [`TlsStream`] wraps any [`Transport`](super::Transport) (a blocking std socket, a
//! non-blocking mio one) and is a `Transport` itself, so the one drive
//! step of each role runs over it unchanged. The async runtimes use
//! tokio-rustls' streams with their ordinary `serve_connection` and
//! `Client::from_stream` instead.
//!
//! Configuration: [`ServerTls`] (certificate chain and key, optionally a CA
//! that client certificates must chain to: mutual TLS) and [`ClientTls`]
//! (the system's roots, a CA file, or no check at all for tests). Both offer
//! ALPN [`ALPN`] and speak TLS 1.2 and 1.3.
//!
//! Here are the constants and the PEM readers both roles share. The rest
//! is in files by concern:
//!
//! - `server.rs`: [`ServerTls`], a server's settings;
//! - `client.rs`: [`ClientTls`], a client's settings;
//! - `verify.rs`: the client's certificate checks beyond path validation
//!   (a CA file's own certificates, pinned keys, `--insecure`);
//! - `stream.rs`: [`TlsStream`], the session over a `Transport`;
//! - `error.rs`: [`HandshakeError`], a failed handshake in words;
//! - `tokio_io.rs`: `TokioTlsStream` (feature `tokio`), for the async
//!   runtimes.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

pub use client::ClientTls;
#[cfg(feature = "tokio")]
pub(crate) use client::server_name_of;
pub use error::{HandshakeError, Side, refused_certificate};
pub use server::ServerTls;
pub use stream::TlsStream;
#[cfg(feature = "tokio")]
pub use tokio_io::TokioTlsStream;
#[cfg(feature = "tokio")]
pub(crate) use tokio_io::explain_handshake;
pub use verify::{NotPinned, public_key_pin};

mod client;
mod error;
mod server;
mod stream;
#[cfg(feature = "tokio")]
mod tokio_io;
mod verify;

/// The ALPN protocol name of jsontp over TLS (D20).
pub const ALPN: &[u8] = b"jsontp";

/// The default port of `jsontps://` addresses (D20).
pub const DEFAULT_PORT: u16 = 8443;

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// D20: TLS 1.2 or 1.3.
const VERSIONS: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13, &rustls::version::TLS12];

fn invalid(what: impl fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what.to_string())
}

fn read_certs(path: &Path) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
        .map_err(|e| invalid(format_args!("{}: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(invalid(format_args!(
            "{}: no PEM certificate in it",
            path.display()
        )));
    }
    Ok(certs)
}

fn read_roots(path: &Path) -> io::Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(path)? {
        roots
            .add(cert)
            .map_err(|e| invalid(format_args!("{}: {e}", path.display())))?;
    }
    Ok(roots)
}
