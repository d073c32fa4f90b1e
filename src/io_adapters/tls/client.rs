//! [`ClientTls`]: which server certificates a client trusts (the system's
//! roots, a CA file, pinned keys, or none for tests), and the client side
//! of the session it starts over a connected stream.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::ServerName;

use super::stream::TlsStream;
use super::verify::{AnyCertificate, ExactOrChained, Pinned};
use super::{ALPN, VERSIONS, invalid, provider, read_certs};
use crate::io_adapters::transport::Transport;

/// A client's TLS settings: which server certificates it trusts. Cheap to
/// clone (shared).
#[derive(Clone)]
pub struct ClientTls {
    config: Arc<rustls::ClientConfig>,
    /// How server certificates are checked, when this crate built the
    /// configuration: what pinning wraps.
    verifier: Option<Arc<dyn ServerCertVerifier>>,
}

impl ClientTls {
    /// Uses `config` as it is (for instance with a client certificate for
    /// mutual TLS). Its ALPN list should hold [`ALPN`].
    pub fn new(config: Arc<rustls::ClientConfig>) -> Self {
        ClientTls {
            config,
            verifier: None,
        }
    }

    /// A configuration that checks server certificates with `verifier`.
    fn with_verifier(verifier: Arc<dyn ServerCertVerifier>) -> io::Result<Self> {
        let mut config = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(VERSIONS)
            .map_err(invalid)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::clone(&verifier))
            .with_no_client_auth();
        config.alpn_protocols = vec![ALPN.to_vec()];
        Ok(ClientTls {
            config: Arc::new(config),
            verifier: Some(verifier),
        })
    }

    fn with_roots(roots: RootCertStore) -> io::Result<Self> {
        let verifier =
            rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(invalid)?;
        ClientTls::with_verifier(verifier)
    }

    /// Also requires the server's public key to be one of `pins`: the
    /// SHA-256 digests of the keys' SubjectPublicKeyInfo, as curl's
    /// `--pinnedpubkey sha256//…` gives them. Checked after the
    /// configured verification, never instead of it (after
    /// [`insecure`](Self::insecure), the pin is the only check). Only for
    /// a `ClientTls` built by this crate's constructors.
    pub fn with_pinned_keys(self, pins: Vec<[u8; 32]>) -> io::Result<Self> {
        let Some(inner) = self.verifier else {
            return Err(invalid(
                "pinning needs a ClientTls made by its constructors, not ClientTls::new",
            ));
        };
        ClientTls::with_verifier(Arc::new(Pinned { inner, pins }))
    }

    /// Trusts the system's root certificates (D20's default).
    pub fn system_roots() -> io::Result<Self> {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = RootCertStore::empty();
        roots.add_parsable_certificates(found.certs);
        if roots.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no system root certificate could be loaded (give a CA file)",
            ));
        }
        ClientTls::with_roots(roots)
    }

    /// Trusts only the certificates of the PEM file at `path`: as CAs, and
    /// each one also as itself. A self-signed certificate made the usual
    /// way (`openssl req -x509`) says `CA:TRUE`, which path validation
    /// refuses to see as a server's own certificate; a server that shows
    /// exactly a certificate of the file, valid now and for the name asked,
    /// is trusted as curl trusts it. Nothing else is weakened: any other
    /// certificate must chain to the file's CAs as usual.
    pub fn from_ca_file(path: &Path) -> io::Result<Self> {
        let certs = read_certs(path)?;
        let mut roots = RootCertStore::empty();
        for cert in &certs {
            roots
                .add(cert.clone())
                .map_err(|e| invalid(format_args!("{}: {e}", path.display())))?;
        }
        let provider = provider();
        let chained = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::clone(&provider),
        )
        .build()
        .map_err(invalid)?;
        ClientTls::with_verifier(Arc::new(ExactOrChained {
            exact: certs,
            chained,
        }))
    }

    /// Accepts any server certificate, checking only the handshake's
    /// signatures: no authentication at all. For tests and local use.
    pub fn insecure() -> Self {
        ClientTls::with_verifier(Arc::new(AnyCertificate(provider()))).expect("ring supports TLS 1.2 and 1.3")
    }

    /// The rustls configuration.
    pub fn config(&self) -> &Arc<rustls::ClientConfig> {
        &self.config
    }

    /// Starts the client side of a TLS session with `server_name` (a DNS
    /// name or an IP address) over a connected `stream`; the handshake
    /// runs in the stream's first reads and writes, or in
    /// [`TlsStream::handshake`].
    pub fn connect<T: Transport>(&self, server_name: &str, stream: T) -> io::Result<TlsStream<T>> {
        let conn = rustls::ClientConnection::new(Arc::clone(&self.config), server_name_of(server_name)?)
            .map_err(io::Error::other)?;
        Ok(TlsStream::new(conn.into(), stream))
    }
}

/// The name a client checks the certificate against: a DNS name, or an IP
/// address (brackets of an IPv6 literal dropped).
pub(crate) fn server_name_of(host: &str) -> io::Result<ServerName<'static>> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned())
        .map_err(|e| invalid(format_args!("{host}: not a TLS server name: {e}")))
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls")
            .field("alpn", &self.config.alpn_protocols)
            .finish_non_exhaustive()
    }
}
