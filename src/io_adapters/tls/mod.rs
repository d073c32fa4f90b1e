//! TLS (D20) through the transport seam, with rustls and its `ring`
//! provider.
//!
//! A [`TlsStream`] wraps any [`Transport`] (a blocking std socket, a
//! non-blocking mio one) and is a [`Transport`] itself, so the one drive
//! step of each role runs over it unchanged. The async runtimes use
//! tokio-rustls' streams with their ordinary `serve_connection` and
//! `Client::from_stream` instead.
//!
//! Configuration: [`ServerTls`] (certificate chain and key, optionally a CA
//! that client certificates must chain to: mutual TLS) and [`ClientTls`]
//! (the system's roots, a CA file, or no check at all for tests). Both offer
//! ALPN [`ALPN`] and speak TLS 1.2 and 1.3.

use std::fmt;
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::transport::{Transport, would_block};

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

/// A server's TLS settings: the rustls configuration every accepted
/// connection is wrapped with. Cheap to clone (shared).
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<rustls::ServerConfig>,
}

impl ServerTls {
    /// Uses `config` as it is. Its ALPN list should hold [`ALPN`]
    /// ([`ServerTls::from_pem_files`] sets it).
    pub fn new(config: Arc<rustls::ServerConfig>) -> Self {
        ServerTls { config }
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

    /// The rustls configuration.
    pub fn config(&self) -> &Arc<rustls::ServerConfig> {
        &self.config
    }

    /// Starts the server side of a TLS session over an accepted `stream`;
    /// the handshake runs in the stream's first reads and writes.
    pub fn accept<T: Transport>(&self, stream: T) -> io::Result<TlsStream<T>> {
        let conn = rustls::ServerConnection::new(Arc::clone(&self.config)).map_err(io::Error::other)?;
        Ok(TlsStream::new(conn.into(), stream))
    }
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls")
            .field("alpn", &self.config.alpn_protocols)
            .finish_non_exhaustive()
    }
}

/// Two settings are equal when they share one configuration (rustls'
/// configuration cannot be compared); lets the server options stay `Eq`.
impl PartialEq for ServerTls {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
    }
}

impl Eq for ServerTls {}

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

/// A CA file's verifier: the usual path validation against the file's
/// certificates, and, for a server certificate that is byte for byte one
/// of them, the one refusal that a self-signed `CA:TRUE` certificate
/// meets (a CA used as an end entity) forgiven once its validity period
/// and its name are checked.
#[derive(Debug)]
struct ExactOrChained {
    exact: Vec<CertificateDer<'static>>,
    chained: Arc<rustls::client::WebPkiServerVerifier>,
}

impl ServerCertVerifier for ExactOrChained {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let checked =
            self.chained
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match checked {
            // webpki checks the validity period before the basic
            // constraints, so this refusal means the dates were good.
            Err(e)
                if is_ca_as_end_entity(&e)
                    && self.exact.iter().any(|c| c.as_ref() == end_entity.as_ref()) =>
            {
                let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
                rustls::client::verify_server_name(&parsed, server_name)?;
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chained.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.chained.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chained.supported_verify_schemes()
    }
}

/// Pinning: the server's public key must be one of the pins, once the
/// inner verifier has accepted its certificate.
#[derive(Debug)]
struct Pinned {
    inner: Arc<dyn ServerCertVerifier>,
    pins: Vec<[u8; 32]>,
}

/// A server key that is none of the pinned ones.
#[derive(Debug)]
pub struct NotPinned;

impl fmt::Display for NotPinned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the server's public key is none of the pinned keys")
    }
}

impl std::error::Error for NotPinned {}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let verified =
            self.inner
                .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)?;
        let key = rustls::server::ParsedCertificate::try_from(end_entity)?.subject_public_key_info();
        let digest = sha256(key.as_ref());
        if self.pins.iter().any(|pin| pin[..] == digest[..]) {
            Ok(verified)
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::Other(rustls::OtherError(Arc::new(NotPinned))),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// SHA-256 of `bytes`, from the crypto provider's TLS 1.3 suite.
fn sha256(bytes: &[u8]) -> Vec<u8> {
    match rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256 {
        rustls::SupportedCipherSuite::Tls13(suite) => {
            suite.common.hash_provider.hash(bytes).as_ref().to_vec()
        }
        #[allow(unreachable_patterns)] // TLS 1.2 suites share the type
        _ => unreachable!("TLS13_AES_128_GCM_SHA256 is a TLS 1.3 suite"),
    }
}

/// SHA-256 of a certificate's SubjectPublicKeyInfo: its pin, as curl's
/// `--pinnedpubkey sha256//…` writes it (base64 of these bytes).
pub fn public_key_pin(certificate: &CertificateDer<'_>) -> io::Result<[u8; 32]> {
    let parsed = rustls::server::ParsedCertificate::try_from(certificate).map_err(invalid)?;
    let digest = sha256(parsed.subject_public_key_info().as_ref());
    digest.try_into().map_err(|_| invalid("SHA-256 gave no 32 bytes"))
}

/// Whether path validation refused a certificate for saying `CA:TRUE`.
fn is_ca_as_end_entity(e: &rustls::Error) -> bool {
    match e {
        rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other)) => {
            other.0.downcast_ref::<webpki::Error>() == Some(&webpki::Error::CaUsedAsEndEntity)
        }
        _ => false,
    }
}

/// `--insecure`: every certificate passes; the handshake's signatures are
/// still checked, so the session is at least with the certificate's holder.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A TLS session over a [`Transport`], itself a [`Transport`]: blocking
/// when the stream underneath blocks, non-blocking when it answers
/// `WouldBlock`.
///
/// A write that was taken is sent without a `flush` (the drive steps never
/// flush): whatever TLS output the socket could not take yet goes out at
/// the start of the next read or write. Readiness-based runtimes must use
/// [`IoMode::NonBlocking`](super::IoMode::NonBlocking), not
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
    fn new(conn: rustls::Connection, io: T) -> Self {
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

/// Which end of a TLS session an error happened at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The end that connected.
    Client,
    /// The end that accepted.
    Server,
}

/// A failed TLS handshake, with the cause in words (the inner error of the
/// [`io::Error`] the streams return: find it with `get_ref` and
/// `downcast_ref`).
#[derive(Debug)]
pub struct HandshakeError {
    /// Where it failed.
    pub side: Side,
    /// What rustls said.
    pub error: rustls::Error,
}

impl HandshakeError {
    /// Whether the failure is a server certificate that the client does not
    /// trust (seen from either end): what a CA file or pinning fixes.
    pub fn certificate_refused(&self) -> bool {
        use rustls::AlertDescription as A;
        match (&self.error, self.side) {
            (rustls::Error::InvalidCertificate(_), Side::Client) => true,
            (rustls::Error::AlertReceived(alert), Side::Server) => matches!(
                alert,
                A::UnknownCA | A::BadCertificate | A::CertificateUnknown | A::CertificateExpired
            ),
            _ => false,
        }
    }

    /// What most likely happened, in words a person reads, without
    /// rustls' names for it (the error itself is [`HandshakeError::error`]).
    fn cause(&self) -> String {
        use rustls::AlertDescription as A;
        let plaintext = matches!(
            self.error,
            rustls::Error::InvalidMessage(_)
                | rustls::Error::InappropriateHandshakeMessage { .. }
                | rustls::Error::InappropriateMessage { .. }
        );
        match (&self.error, self.side) {
            (_, Side::Client) if plaintext => {
                "the server did not answer with TLS (a plaintext jsontp:// port?)".into()
            }
            (_, Side::Server) if plaintext => {
                "the client did not speak TLS (a jsontp:// client at this TLS port? it needs jsontps://)"
                    .into()
            }
            (rustls::Error::InvalidCertificate(error), Side::Client) => server_certificate(error),
            (rustls::Error::AlertReceived(alert), Side::Client) => match alert {
                A::NoApplicationProtocol => "the server does not speak jsontp over TLS: it refused the \
                                             protocol name \"jsontp\" (ALPN) that this client offers"
                    .into(),
                A::CertificateRequired => {
                    "the server admits only clients that show a certificate (mutual TLS)".into()
                }
                alert if refuses_client_certificate(&self.error) => format!(
                    "the server refused this client's certificate (mutual TLS; TLS alert {})",
                    alert_name(*alert)
                ),
                A::HandshakeFailure | A::ProtocolVersion | A::InsufficientSecurity => {
                    "the server found nothing in common with this client to set up TLS with \
                     (TLS 1.2 or 1.3, and their usual cipher suites)"
                        .into()
                }
                A::UnrecognisedName => "the server does not serve the name connected to".into(),
                alert => format!(
                    "the server ended the handshake with TLS alert {}",
                    alert_name(*alert)
                ),
            },
            (rustls::Error::PeerIncompatible(_), Side::Client) => {
                "the server's TLS has nothing in common with this client's \
                 (TLS 1.2 or 1.3, and their usual cipher suites)"
                    .into()
            }
            (rustls::Error::PeerMisbehaved(_), Side::Client) => {
                "the server broke the TLS protocol during the handshake".into()
            }
            _ if self.certificate_refused() => "the client does not trust this server's certificate: a \
                                                client of a self-signed certificate or a private CA \
                                                must be given that certificate to trust (curl and \
                                                jsontp: --cacert FILE; -k skips the check)"
                .into(),
            (error, _) => error.to_string(),
        }
    }
}

/// Why a client refused the server's certificate, in words.
fn server_certificate(error: &rustls::CertificateError) -> String {
    use rustls::CertificateError as C;
    match error {
        C::NotValidForName => "the server's certificate is not made out for the name connected to".into(),
        C::NotValidForNameContext { expected, presented } => {
            let expected = match expected {
                ServerName::DnsName(name) => name.as_ref().to_owned(),
                ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
                other => format!("{other:?}"),
            };
            // webpki writes each name as `DnsName("host")` or
            // `IpAddress(1.2.3.4)`; the name alone is what a person types.
            let names: Vec<&str> = presented
                .iter()
                .filter_map(|name| {
                    name.strip_prefix("DnsName(\"")
                        .and_then(|n| n.strip_suffix("\")"))
                        .or_else(|| name.strip_prefix("IpAddress(").and_then(|n| n.strip_suffix(')')))
                })
                .collect();
            if names.is_empty() {
                format!("the server's certificate is not made out for the name {expected} (it names no host)")
            } else {
                format!(
                    "the server's certificate is not made out for the name {expected} (it is for {})",
                    names.join(", ")
                )
            }
        }
        C::Expired => "the server's certificate has expired".into(),
        C::ExpiredContext { not_after, .. } => {
            format!("the server's certificate expired on {}", when(*not_after))
        }
        C::NotValidYet => "the server's certificate is not valid yet (is this machine's clock right?)".into(),
        C::NotValidYetContext { not_before, .. } => format!(
            "the server's certificate is valid only from {} (is this machine's clock right?)",
            when(*not_before)
        ),
        C::Revoked => "the server's certificate has been revoked by its authority".into(),
        C::Other(other) if other.0.downcast_ref::<NotPinned>().is_some() => {
            "the server's public key is none of the pinned keys".into()
        }
        C::Other(other)
            if other.0.downcast_ref::<webpki::Error>() == Some(&webpki::Error::CaUsedAsEndEntity) =>
        {
            "the server's certificate is a CA certificate (CA:TRUE, as `openssl req -x509` makes a \
             self-signed one), not signed by an authority this client trusts"
                .into()
        }
        C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
            "the server's certificate is not made out for a TLS server (its key usage)".into()
        }
        C::UnknownIssuer | C::BadSignature | C::Other(_) => {
            "the server's certificate is not signed by an authority this client trusts \
             (a self-signed certificate, or a private CA's?)"
                .into()
        }
        _ => "the server's certificate was refused (malformed, or of a kind this client cannot check)".into(),
    }
}

/// A certificate's date, to the second, in UTC.
fn when(time: UnixTime) -> String {
    let written = crate::message::Date::from_unix_seconds(time.as_secs() as i64).to_string();
    // `YYYY-MM-DDTHH:MM:SSZ+0000` (D16), read as a person writes it.
    match (written.get(..10), written.get(11..19)) {
        (Some(day), Some(time)) => format!("{day} {time} UTC"),
        _ => written,
    }
}

/// A server's alert that refuses the client's certificate (mutual TLS).
fn refuses_client_certificate(error: &rustls::Error) -> bool {
    use rustls::AlertDescription as A;
    matches!(
        error,
        rustls::Error::AlertReceived(
            A::CertificateRequired
                | A::BadCertificate
                | A::UnsupportedCertificate
                | A::CertificateRevoked
                | A::CertificateExpired
                | A::CertificateUnknown
                | A::UnknownCA
                | A::AccessDenied
        )
    )
}

/// A TLS alert by its name in the standard (RFC 8446), `unknown_ca`.
fn alert_name(alert: rustls::AlertDescription) -> String {
    if let rustls::AlertDescription::Unknown(code) = alert {
        return format!("number {code}");
    }
    // rustls names the alerts in camel case: `UnknownCA`, `UnknownPSKIdentity`.
    let camel = format!("{alert:?}");
    let chars: Vec<char> = camel.chars().collect();
    let mut name = String::with_capacity(camel.len() + 4);
    for (i, c) in chars.iter().enumerate() {
        let word_starts = c.is_ascii_uppercase()
            && i > 0
            && (chars[i - 1].is_ascii_lowercase() || chars.get(i + 1).is_some_and(char::is_ascii_lowercase));
        if word_starts {
            name.push('_');
        }
        name.push(c.to_ascii_lowercase());
    }
    name
}

/// The cause in words, as a person reads it (a command's line, a server's
/// log); rustls' own error is the [`source`](std::error::Error::source).
impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TLS handshake failed: {}", self.cause())
    }
}

impl std::error::Error for HandshakeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Whether an I/O error is a handshake that failed on a server
/// certificate the client does not trust.
pub fn refused_certificate(error: &io::Error) -> bool {
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<HandshakeError>())
        .is_some_and(HandshakeError::certificate_refused)
}

impl From<HandshakeError> for io::Error {
    fn from(e: HandshakeError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, e)
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

/// A tokio-rustls stream (either role) as the async runtimes serve it.
///
/// tokio-rustls takes a write and keeps what the socket cannot take yet
/// until the next `poll_flush`; the drive steps never flush. This wrapper
/// flushes after every write and before every read, so a response left
/// behind by a full socket still goes out once it drains (the flush that
/// answers `Pending` has registered the task to be woken then).
#[cfg(feature = "tokio")]
#[derive(Debug)]
pub struct TokioTlsStream<S> {
    inner: tokio_rustls::TlsStream<S>,
}

#[cfg(feature = "tokio")]
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

#[cfg(feature = "tokio")]
mod tokio_io {
    use std::io;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

    use super::TokioTlsStream;

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
}

/// A client handshake error from tokio-rustls, said as plainly as
/// [`TlsStream`] says it.
#[cfg(feature = "tokio")]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alerts_are_named_as_the_standard_names_them() {
        use rustls::AlertDescription as A;
        assert_eq!(alert_name(A::DecodeError), "decode_error");
        assert_eq!(alert_name(A::UnknownCA), "unknown_ca");
        assert_eq!(alert_name(A::UnknownPSKIdentity), "unknown_psk_identity");
        assert_eq!(alert_name(A::BadRecordMac), "bad_record_mac");
        assert_eq!(alert_name(A::Unknown(200)), "number 200");
    }

    #[test]
    fn a_handshake_error_shows_words_not_rustls_names() {
        use rustls::CertificateError as C;
        let said = |error: rustls::Error| {
            HandshakeError {
                side: Side::Client,
                error,
            }
            .to_string()
        };
        let ca = C::Other(rustls::OtherError(Arc::new(webpki::Error::CaUsedAsEndEntity)));
        let text = said(rustls::Error::InvalidCertificate(ca));
        assert!(text.contains("a CA certificate (CA:TRUE"), "{text}");
        assert!(!text.contains("CaUsedAsEndEntity"), "{text}");
        let text = said(rustls::Error::InvalidCertificate(C::NotValidForNameContext {
            expected: ServerName::try_from("example.com").expect("name"),
            presented: vec!["DnsName(\"localhost\")".into(), "IpAddress(127.0.0.1)".into()],
        }));
        assert!(
            text.ends_with("not made out for the name example.com (it is for localhost, 127.0.0.1)"),
            "{text}"
        );
        let text = said(rustls::Error::AlertReceived(
            rustls::AlertDescription::DecodeError,
        ));
        assert!(
            text.ends_with("the server ended the handshake with TLS alert decode_error"),
            "{text}"
        );
    }
}
