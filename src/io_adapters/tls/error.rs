//! A failed handshake said in words: [`HandshakeError`] and the [`Side`]
//! it failed at, what most likely happened (a plaintext peer, a
//! certificate not trusted, an alert by its standard name), and
//! [`refused_certificate`] to find it in an [`io::Error`].

use std::fmt;
use std::io;

use rustls::pki_types::{ServerName, UnixTime};

use super::verify::NotPinned;

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
pub(super) fn refuses_client_certificate(error: &rustls::Error) -> bool {
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

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
