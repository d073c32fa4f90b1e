//! A test PKI: a CA, a server certificate for `localhost` and 127.0.0.1,
//! and a client certificate, made with rcgen. Shared by the adapters' TLS
//! tests and the command's (`cli/tests`), which include this file.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use jsontp_protocol::io_adapters::tls::{ClientTls, ServerTls};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A CA, a server certificate for `localhost` and 127.0.0.1, and a client
/// certificate, all as PEM files in a directory of their own.
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    pub fn new() -> Pki {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "jsontp-tls-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let ca_key = KeyPair::generate().expect("key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // Names of their own: a leaf named like its issuer looks
        // self-signed to OpenSSL.
        ca_params.distinguished_name = name("jsontp test CA");
        let ca = ca_params.self_signed(&ca_key).expect("CA");
        let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose, stem: &str| {
            let key = KeyPair::generate().expect("key");
            let mut params = CertificateParams::new(names).expect("params");
            params.extended_key_usages = vec![usage];
            params.distinguished_name = name(stem);
            let cert = params.signed_by(&key, &ca, &ca_key).expect("signed");
            std::fs::write(dir.join(format!("{stem}.pem")), cert.pem()).expect("write");
            std::fs::write(dir.join(format!("{stem}.key")), key.serialize_pem()).expect("write");
        };
        leaf(
            vec!["localhost".into(), "127.0.0.1".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
            "server",
        );
        leaf(
            vec!["client".into()],
            ExtendedKeyUsagePurpose::ClientAuth,
            "client",
        );
        std::fs::write(dir.join("ca.pem"), ca.pem()).expect("write");
        Pki { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    // The command's tests give the files to `jsontp serve` instead.
    #[allow(dead_code)]
    pub fn server(&self, mutual: bool) -> ServerTls {
        let ca = self.path("ca.pem");
        ServerTls::from_pem_files(
            &self.path("server.pem"),
            &self.path("server.key"),
            mutual.then_some(ca.as_path()),
        )
        .expect("server TLS")
    }

    pub fn client(&self) -> ClientTls {
        ClientTls::from_ca_file(&self.path("ca.pem")).expect("client TLS")
    }

    /// The test CA, as rustls's trust roots.
    pub fn roots(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(self.path("ca.pem")).expect("ca"))
            .expect("root");
        roots
    }

    /// A bare rustls client session over `socket`, for `localhost`,
    /// trusting the test CA: for tests that read and write the session
    /// themselves.
    // The command's tests speak TLS through `jsontp get` instead.
    #[allow(dead_code)]
    pub fn raw_session(
        &self,
        socket: std::net::TcpStream,
    ) -> rustls::StreamOwned<rustls::ClientConnection, std::net::TcpStream> {
        let config =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("versions")
                .with_root_certificates(self.roots())
                .with_no_client_auth();
        let session =
            rustls::ClientConnection::new(Arc::new(config), "localhost".try_into().expect("a name"))
                .expect("session");
        rustls::StreamOwned::new(session, socket)
    }

    /// A client that shows the client certificate.
    pub fn client_with_cert(&self) -> ClientTls {
        let roots = self.roots();
        let chain = vec![CertificateDer::from_pem_file(self.path("client.pem")).expect("cert")];
        let key = PrivateKeyDer::from_pem_file(self.path("client.key")).expect("key");
        let mut config =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .expect("versions")
                .with_root_certificates(roots)
                .with_client_auth_cert(chain, key)
                .expect("client cert");
        config.alpn_protocols = vec![jsontp_protocol::io_adapters::tls::ALPN.to_vec()];
        ClientTls::new(Arc::new(config))
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn name(common: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common);
    name
}
