//! `jsontps://` with certificates as people make them: `openssl req -x509`
//! (rcgen makes the same shape where openssl is missing), served by
//! `jsontp serve --tls-cert` and fetched with `--cacert`.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;

use jsontp_protocol::io_adapters::client::ClientOptions;
use jsontp_protocol::io_adapters::client::blocking::Client;
use jsontp_protocol::message::{Method, Request};

use crate::pki::Pki;
use crate::support::{jsontp, spawn_serve, spawn_serve_with_env, stderr, stdout, temp_root};

/// A self-signed certificate for `localhost` with `CA:TRUE`, as
/// `openssl req -x509` writes it, and its key: `(cert.pem, key.pem)`.
fn self_signed(folder: &Path, name: &str) -> (PathBuf, PathBuf) {
    let cert = folder.join(format!("{name}-cert.pem"));
    let key = folder.join(format!("{name}-key.pem"));
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .args([
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
        ])
        .output();
    match made {
        Ok(out) if out.status.success() => {}
        _ => {
            let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            let pair = rcgen::KeyPair::generate().expect("key");
            let made = params.self_signed(&pair).expect("certificate");
            std::fs::write(&cert, made.pem()).expect("cert.pem");
            std::fs::write(&key, pair.serialize_pem()).expect("key.pem");
        }
    }
    let text = std::fs::read_to_string(&cert).expect("cert.pem");
    assert!(text.contains("BEGIN CERTIFICATE"), "{text}");
    (cert, key)
}

#[test]
fn a_self_signed_certificate_given_with_cacert_is_trusted_for_its_names_only() {
    let root = temp_root("tls-self-signed");
    let keys = temp_root("tls-keys");
    let (cert, key) = self_signed(&keys, "server");
    let (other, _) = self_signed(&keys, "other");
    let (_serve, addr, mut log) = spawn_serve(
        &root,
        &[
            "--tls-cert",
            &cert.to_string_lossy(),
            "--tls-key",
            &key.to_string_lossy(),
        ],
    );
    let url = |host: &str| format!("jsontps://{host}:{}/hello.txt", addr.port());
    let cert_arg = cert.to_string_lossy().into_owned();

    let trusted = jsontp(&["get", "--cacert", &cert_arg, &url("localhost")]);
    assert_eq!(trusted.status.code(), Some(0), "{}", stderr(&trusted));
    assert_eq!(stdout(&trusted), "Hello, world!");

    // Without it: the cause in words and the flags that help.
    let unknown = jsontp(&["get", &url("localhost")]);
    assert_eq!(unknown.status.code(), Some(2));
    let said = stderr(&unknown);
    assert!(
        said.contains("not signed by an authority this client trusts")
            && said.contains("--cacert FILE")
            && said.contains("-k"),
        "{said}"
    );

    // Trusted exactly for its names: 127.0.0.1 is not one of them.
    let by_address = jsontp(&["get", "--cacert", &cert_arg, &url("127.0.0.1")]);
    assert_eq!(by_address.status.code(), Some(2));
    assert!(
        stderr(&by_address).contains("not made out for the name"),
        "{}",
        stderr(&by_address)
    );

    // Another self-signed certificate does not vouch for this one.
    let wrong = jsontp(&["get", "--cacert", &other.to_string_lossy(), &url("localhost")]);
    assert_eq!(wrong.status.code(), Some(2));
    let said = stderr(&wrong);
    assert!(said.contains("is neither in") && said.contains("-k"), "{said}");

    // -k still skips the check.
    let insecure = jsontp(&["get", "-k", &url("localhost")]);
    assert_eq!(insecure.status.code(), Some(0), "{}", stderr(&insecure));

    // A plaintext URL on the TLS port: told to use jsontps://.
    let plain = jsontp(&["get", &format!("jsontp://localhost:{}/hello.txt", addr.port())]);
    assert_eq!(plain.status.code(), Some(2));
    assert!(stderr(&plain).contains("jsontps://"), "{}", stderr(&plain));

    // The operator hears of the refusals at the default log level.
    let (found, lines) = thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let mut seen = Vec::new();
            let mut line = String::new();
            while log.read_line(&mut line).is_ok_and(|n| n > 0) {
                if line.contains("does not trust this server's certificate") && line.contains("--cacert") {
                    return (true, seen);
                }
                seen.push(std::mem::take(&mut line));
            }
            (false, seen)
        });
        // The server's stderr closes when it is killed.
        thread::sleep(std::time::Duration::from_millis(500));
        drop(_serve);
        reader.join().expect("log reader")
    });
    assert!(found, "the server's log: {lines:?}");
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&keys);
}

/// `sha256//BASE64` of the certificate's key, as curl's --pinnedpubkey
/// takes it; checked against openssl's own reckoning where it is found.
fn pin_of(cert: &Path) -> String {
    use base64::Engine;
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let der = CertificateDer::from_pem_file(cert).expect("a PEM certificate");
    let pin = jsontp_protocol::io_adapters::tls::public_key_pin(&der).expect("a key");
    let ours = base64::engine::general_purpose::STANDARD.encode(pin);
    let openssl = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "openssl x509 -in '{}' -pubkey -noout | openssl pkey -pubin -outform der \
             | openssl dgst -sha256 -binary | base64",
            cert.display()
        ))
        .output();
    if let Ok(out) = openssl
        && out.status.success()
        && !out.stdout.is_empty()
    {
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            ours,
            "openssl agrees"
        );
    }
    format!("sha256//{ours}")
}

#[test]
fn pinnedpubkey_requires_the_servers_key_as_curl_does() {
    let root = temp_root("tls-pinned");
    let keys = temp_root("tls-pinned-keys");
    let (cert, key) = self_signed(&keys, "server");
    let (other, _) = self_signed(&keys, "other");
    let (_serve, addr, _log) = spawn_serve(
        &root,
        &[
            "--tls-cert",
            &cert.to_string_lossy(),
            "--tls-key",
            &key.to_string_lossy(),
            "--quiet",
        ],
    );
    let url = format!("jsontps://localhost:{}/hello.txt", addr.port());
    let cert_arg = cert.to_string_lossy().into_owned();
    let (right, wrong) = (pin_of(&cert), pin_of(&other));

    let pinned = jsontp(&["get", "--cacert", &cert_arg, "--pinnedpubkey", &right, &url]);
    assert_eq!(pinned.status.code(), Some(0), "{}", stderr(&pinned));
    assert_eq!(stdout(&pinned), "Hello, world!");
    // One of several pins is enough; -k with a pin checks the pin alone.
    let several = format!("{wrong};{right}");
    let out = jsontp(&["get", "-k", "--pinnedpubkey", &several, &url]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    // Another key: refused, even with the certificate trusted.
    for trust in [&["--cacert", cert_arg.as_str()][..], &["-k"]] {
        let mut args = vec!["get", "--pinnedpubkey", &wrong, &url];
        args.extend_from_slice(trust);
        let out = jsontp(&args);
        assert_eq!(out.status.code(), Some(2), "{trust:?}");
        assert!(
            stderr(&out).contains("none of the pinned keys"),
            "{trust:?}: {}",
            stderr(&out)
        );
    }
    // A pin not written as curl writes it is a usage error.
    let out = jsontp(&["get", "--pinnedpubkey", "md5//abc", &url]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("sha256//BASE64"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&keys);
}

/// `jsontp serve --tls-cert --tls-client-ca`, the key given by
/// `JSONTP_TLS_KEY`: serves TLS, and only to clients with a certificate.
#[test]
fn the_command_serves_mutual_tls_from_flags_and_env() {
    let pki = Pki::new();
    let root = temp_root("tls-mutual");
    std::fs::write(root.join("hello.txt"), "hello").expect("file");
    let (cert, ca, key) = (pki.path("server.pem"), pki.path("ca.pem"), pki.path("server.key"));
    let (_serve, addr, _log) = spawn_serve_with_env(
        &root,
        &[
            "--quiet",
            "--tls-cert",
            &cert.to_string_lossy(),
            "--tls-client-ca",
            &ca.to_string_lossy(),
        ],
        &[("JSONTP_TLS_KEY", &key.to_string_lossy())],
    );
    let get = || Request::new(Method::Get, "/hello.txt".parse().expect("resource"));
    let mut client = Client::connect_tls(
        addr,
        "localhost",
        &pki.client_with_cert(),
        ClientOptions::default(),
    )
    .expect("mutual TLS");
    let answer = client.send(get()).expect("answered");
    assert_eq!(answer.response.body.content(), b"hello");
    let refused = match Client::connect_tls(addr, "localhost", &pki.client(), ClientOptions::default()) {
        Err(_) => true,
        Ok(mut client) => client.send(get()).is_err(),
    };
    assert!(refused, "served a client without a certificate");
    let _ = std::fs::remove_dir_all(&root);
}
