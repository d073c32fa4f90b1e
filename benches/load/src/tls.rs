//! TLS for the load benchmark: a certificate both servers present (made
//! here with rcgen: a CA and a leaf for 127.0.0.1), the client
//! configuration the generator uses (TLS 1.3, one cipher suite, so that
//! nginx and `jsontp serve` do the same work), and the generator's stream,
//! plain or TLS, over a non-blocking mio socket.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mio::net::TcpStream;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, RootCertStore};

/// The suite both servers are held to: the one every TLS 1.3 stack has.
const SUITE: rustls::SupportedCipherSuite = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256;

/// The files a TLS server is started with, and the client configuration
/// that trusts them.
#[derive(Clone)]
pub struct Certificates {
    /// The leaf and the CA, PEM, leaf first.
    pub chain: PathBuf,
    /// The leaf's key, PEM.
    pub key: PathBuf,
    /// The generator's configuration.
    pub client: Arc<ClientConfig>,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certificates")
            .field("chain", &self.chain)
            .finish_non_exhaustive()
    }
}

/// Makes a CA and a leaf for 127.0.0.1 into `dir`.
pub fn certificates(dir: &Path) -> io::Result<Certificates> {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    fs::create_dir_all(dir)?;
    let ca_key = KeyPair::generate().map_err(io::Error::other)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(io::Error::other)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "loadbench CA");
    let ca = ca_params.self_signed(&ca_key).map_err(io::Error::other)?;
    let key = KeyPair::generate().map_err(io::Error::other)?;
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).map_err(io::Error::other)?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "loadbench server");
    let leaf = params.signed_by(&key, &ca, &ca_key).map_err(io::Error::other)?;
    let chain = dir.join("chain.pem");
    let key_file = dir.join("key.pem");
    fs::write(&chain, format!("{}{}", leaf.pem(), ca.pem()))?;
    fs::write(&key_file, key.serialize_pem())?;
    let mut roots = RootCertStore::empty();
    roots.add(ca.der().clone()).map_err(io::Error::other)?;
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = vec![SUITE];
    let mut client = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(io::Error::other)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    // No resumption: each connection measured pays its own handshake.
    client.resumption = rustls::client::Resumption::disabled();
    Ok(Certificates {
        chain,
        key: key_file,
        client: Arc::new(client),
    })
}

/// A connection of the generator: the socket, and its TLS session if any.
pub struct Stream {
    socket: TcpStream,
    tls: Option<Box<ClientConnection>>,
}

impl Stream {
    /// `socket` as it is, or with a TLS session to 127.0.0.1 under `tls`.
    pub fn new(socket: TcpStream, tls: Option<&Arc<ClientConfig>>) -> io::Result<Stream> {
        let tls = match tls {
            None => None,
            Some(config) => {
                let name = ServerName::try_from("127.0.0.1").map_err(io::Error::other)?;
                Some(Box::new(
                    ClientConnection::new(Arc::clone(config), name).map_err(io::Error::other)?,
                ))
            }
        };
        Ok(Stream { socket, tls })
    }

    /// The socket, to register with the poll.
    pub fn socket(&mut self) -> &mut TcpStream {
        &mut self.socket
    }

    /// Sends what TLS holds for the socket (records, handshake messages);
    /// stops at `WouldBlock`. Call it whenever the socket may take more.
    pub fn send_pending(&mut self) -> io::Result<()> {
        match &mut self.tls {
            Some(tls) => send_pending(&mut self.socket, tls),
            None => Ok(()),
        }
    }
}

fn send_pending(socket: &mut TcpStream, tls: &mut ClientConnection) -> io::Result<()> {
    while tls.wants_write() {
        match tls.write_tls(socket) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(tls) = &mut self.tls else {
            return self.socket.read(buf);
        };
        loop {
            match tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            // Nothing decrypted yet: more records from the socket
            // (`WouldBlock` when there are none).
            if tls.read_tls(&mut self.socket)? == 0 {
                return Ok(0);
            }
            tls.process_new_packets().map_err(io::Error::other)?;
            // The handshake may have an answer to send.
            send_pending(&mut self.socket, tls)?;
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(tls) = &mut self.tls else {
            return self.socket.write(buf);
        };
        let n = tls.writer().write(buf)?;
        self.send_pending()?;
        if n == 0 && !buf.is_empty() {
            // TLS holds as much plaintext as it takes: the socket must
            // drain first.
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_pending()
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader};
    use std::net::{SocketAddr, TcpListener};
    use std::thread;
    use std::time::Duration;

    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    use super::*;
    use crate::framing::Protocol;
    use crate::generator::{self, Driver, Load};

    const OK: &[u8] = br#"{"jsontp":"1.0","type":"response","status":{"code":200,"formal-message":"OK","human-message":"hi"},"resource":"/","headers":{},"body":{"content":"Hello, world!","encoding":"identity"}}"#;

    /// A TLS server on a thread per connection that answers each request
    /// line; serves connections until the test ends.
    fn server(certificates: &Certificates) -> SocketAddr {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&certificates.chain)
            .expect("chain")
            .collect::<Result<_, _>>()
            .expect("certificates");
        let key = PrivateKeyDer::from_pem_file(&certificates.key).expect("key");
        let config = Arc::new(
            rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_protocol_versions(&[&rustls::version::TLS13])
                .expect("versions")
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .expect("server config"),
        );
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let config = Arc::clone(&config);
                thread::spawn(move || {
                    let session = rustls::ServerConnection::new(config).expect("session");
                    let mut tls = BufReader::new(rustls::StreamOwned::new(session, stream));
                    let mut line = Vec::new();
                    while tls.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                        line.clear();
                        let mut out = OK.to_vec();
                        out.push(b'\n');
                        if tls
                            .get_mut()
                            .write_all(&out)
                            .and_then(|()| tls.get_mut().flush())
                            .is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    fn load(addr: SocketAddr, client: &Arc<ClientConfig>, pipeline: usize, reconnect: bool) -> Load {
        Load {
            addr,
            protocol: Protocol::Jsontp,
            request: b"{\"jsontp\":\"1.0\"}\n".to_vec(),
            connections: 4,
            pipeline,
            warmup: Duration::ZERO,
            duration: Duration::from_secs(20),
            requests: Some(200),
            server_pids: Vec::new(),
            tls: Some(Arc::clone(client)),
            reconnect,
            driver: Driver::Epoll,
        }
    }

    #[test]
    fn the_generator_speaks_tls_pipelined_and_a_connection_per_request() {
        let dir = std::env::temp_dir().join(format!("loadbench-tls-{}", std::process::id()));
        let certificates = certificates(&dir).expect("certificates");
        let addr = server(&certificates);
        for (pipeline, reconnect) in [(1, false), (16, false), (1, true)] {
            let got = generator::run(&load(addr, &certificates.client, pipeline, reconnect)).expect("run");
            assert_eq!(got.errors, 0, "p{pipeline} {reconnect}: {:?}", got.error_samples);
            assert_eq!(got.completed, 200, "p{pipeline} {reconnect}");
        }
        let _ = fs::remove_dir_all(&dir);
    }
}
