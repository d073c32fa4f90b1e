//! `jsontps://` with certificates as people make them: `openssl req -x509`
//! (rcgen makes the same shape where openssl is missing), served by
//! `jsontp serve --tls-cert` and fetched with `--cacert`.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;

use crate::support::{jsontp, spawn_serve, stderr, stdout, temp_root};

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
