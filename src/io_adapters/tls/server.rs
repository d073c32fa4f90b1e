//! [`ServerTls`]: a server's settings, from PEM files (mutual TLS with a
//! client CA) or a rustls configuration as it is, and the server side of
//! the session it starts over an accepted stream.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};

use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;

use super::stream::TlsStream;
use super::{ALPN, VERSIONS, invalid, provider, read_certs, read_roots};
use crate::io_adapters::transport::Transport;

/// A server's TLS settings: the rustls configuration every accepted
/// connection is wrapped with. Cheap to clone; the clones share one cell,
/// so that [`ServerTls::replace`] changes the settings of every server
/// holding one of them.
#[derive(Clone)]
pub struct ServerTls {
    // Read once per accepted connection, written on a reload: a lock held
    // for an `Arc` clone costs nothing next to a handshake.
    config: Arc<RwLock<Arc<rustls::ServerConfig>>>,
}

impl ServerTls {
    /// Uses `config` as it is. Its ALPN list should hold [`ALPN`]
    /// ([`ServerTls::from_pem_files`] sets it).
    pub fn new(config: Arc<rustls::ServerConfig>) -> Self {
        ServerTls {
            config: Arc::new(RwLock::new(config)),
        }
    }

    /// Builds the configuration from PEM files: the certificate chain (leaf
    /// first) and its private key; with `client_ca`, every client must show
    /// a certificate issued by one of that file's CAs (mutual TLS, D20).
    /// ALPN `jsontp`, TLS 1.2 and 1.3.
    pub fn from_pem_files(cert_chain: &Path, key: &Path, client_ca: Option<&Path>) -> io::Result<Self> {
        let certs = read_certs(cert_chain)?;
        let key =
            PrivateKeyDer::from_pem_file(key).map_err(|e| invalid(format_args!("{}: {e}", key.display())))?;
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(VERSIONS)
            .map_err(invalid)?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(read_roots(ca)?),
                    provider(),
                )
                .build()
                .map_err(invalid)?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_single_cert(certs, key).map_err(invalid)?;
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(ServerTls::new(Arc::new(config)))
    }

    /// The rustls configuration connections accepted now are given.
    pub fn config(&self) -> Arc<rustls::ServerConfig> {
        // A panic elsewhere cannot leave the cell half-written: it holds
        // one `Arc`, replaced whole.
        Arc::clone(&self.config.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Gives the connections accepted from now on `next`'s configuration
    /// (a new certificate, key or client CA), in every server holding a
    /// clone of `self`. Sessions already started keep the configuration
    /// they began with.
    pub fn replace(&self, next: &ServerTls) {
        let next = next.config();
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = next;
    }

    /// Starts the server side of a TLS session over an accepted `stream`;
    /// the handshake runs in the stream's first reads and writes.
    pub fn accept<T: Transport>(&self, stream: T) -> io::Result<TlsStream<T>> {
        let conn = rustls::ServerConnection::new(self.config()).map_err(io::Error::other)?;
        Ok(TlsStream::new(conn.into(), stream))
    }
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls")
            .field("alpn", &self.config().alpn_protocols)
            .finish_non_exhaustive()
    }
}

/// Two settings are equal when they share one cell (rustls' configuration
/// cannot be compared); lets the server options stay `Eq`.
impl PartialEq for ServerTls {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
    }
}

impl Eq for ServerTls {}
