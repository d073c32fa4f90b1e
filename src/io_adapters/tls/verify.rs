//! How a client checks a server's certificate beyond rustls' own path
//! validation: a CA file's certificates trusted as themselves too, pinned
//! public keys, and `--insecure`'s acceptance of any certificate.

use std::fmt;
use std::io;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::invalid;

/// The handshake's signatures, checked by the wrapped verifier `$inner`:
/// the verifiers here add to its certificate check, never to that.
macro_rules! signatures_checked_by {
    ($inner:ident) => {
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.$inner.verify_tls12_signature(message, cert, dss)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.$inner.verify_tls13_signature(message, cert, dss)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.$inner.supported_verify_schemes()
        }
    };
}

/// A CA file's verifier: the usual path validation against the file's
/// certificates, and, for a server certificate that is byte for byte one
/// of them, the one refusal that a self-signed `CA:TRUE` certificate
/// meets (a CA used as an end entity) forgiven once its validity period
/// and its name are checked.
#[derive(Debug)]
pub(super) struct ExactOrChained {
    pub(super) exact: Vec<CertificateDer<'static>>,
    pub(super) chained: Arc<rustls::client::WebPkiServerVerifier>,
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

    signatures_checked_by!(chained);
}

/// Pinning: the server's public key must be one of the pins, once the
/// inner verifier has accepted its certificate.
#[derive(Debug)]
pub(super) struct Pinned {
    pub(super) inner: Arc<dyn ServerCertVerifier>,
    pub(super) pins: Vec<[u8; 32]>,
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

    signatures_checked_by!(inner);
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
pub(super) struct AnyCertificate(pub(super) Arc<CryptoProvider>);

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
