//! `jsontp serve --config FILE`: the file below the environment and the
//! flags, its errors naming the key and line, `--check-config`, and SIGHUP
//! reloading the file, the token and the TLS files without dropping a
//! connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};
use std::thread;
use std::time::Duration;

use jsontp_protocol::io_adapters::client::ClientOptions;
use jsontp_protocol::io_adapters::client::blocking::Client;
use jsontp_protocol::message::{Method, Request};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

use crate::pki::Pki;
use crate::support::{Serve, serve_command, stderr, stdout, temp_root};

/// How long a test waits for a line of the server's log.
const WAIT: Duration = Duration::from_secs(15);

/// A `jsontp serve` process and its log, line by line.
struct Running {
    _serve: Serve,
    pid: u32,
    addr: SocketAddr,
    start_line: String,
    log: Receiver<String>,
}

impl Running {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Running {
        let mut child = serve_command(args, env)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start jsontp serve");
        let pid = child.id();
        let stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let serve = Serve(child);
        let (lines, log) = channel();
        thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let start_line = log.recv_timeout(WAIT).expect("a start line");
        let addr = start_line
            .rsplit("://")
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("jsontp serve did not start: {start_line:?}"));
        Running {
            _serve: serve,
            pid,
            addr,
            start_line,
            log,
        }
    }

    fn signal(&self, name: &str) {
        let sent = Command::new("kill")
            .args([&format!("-{name}"), &self.pid.to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -{name}");
    }

    /// The next log line that holds `needle`.
    fn wait_for(&self, needle: &str) -> String {
        loop {
            match self.log.recv_timeout(WAIT) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(_) => panic!("no log line with {needle:?}"),
            }
        }
    }

    /// The status of a GET of `path`, on a new connection.
    fn status(&self, path: &str) -> u16 {
        let mut client = Client::connect(self.addr, ClientOptions::default()).expect("connect");
        let request = Request::new(Method::Get, path.parse().expect("resource"));
        let answer = client.send(request).expect("answered");
        answer.response.status.code.as_u16()
    }
}

fn write_config(folder: &Path, text: &str) -> PathBuf {
    let file = folder.join("jsontp.toml");
    std::fs::write(&file, text).expect("config");
    file
}

/// The first lines of a file that serves `folder` quietly with one
/// worker on a free port.
fn quiet_head(folder: &Path) -> String {
    format!(
        "root = '{}'\naddr = \"127.0.0.1:0\"\nworkers = 1\nquiet = true\n",
        folder.display()
    )
}

fn canonical(path: &Path) -> String {
    std::fs::canonicalize(path)
        .expect("canonical")
        .display()
        .to_string()
}

#[test]
fn the_file_is_below_the_environment_which_is_below_the_flags() {
    let (from_file, from_env, from_flag) = (
        temp_root("config-file"),
        temp_root("config-env"),
        temp_root("config-flag"),
    );
    let config = write_config(
        &from_file,
        &format!(
            "root = '{}'\naddr = \"127.0.0.1:0\"\nworkers = 1\nquiet = true\nlist = true\nwritable = true\nmax-file = \"1M\"\n",
            from_file.display()
        ),
    );
    let config = config.to_string_lossy();

    // The file alone: its root, writable, listings.
    let server = Running::start(&["--config", &config], &[]);
    assert!(
        server.start_line.contains(&canonical(&from_file)),
        "{}",
        server.start_line
    );
    assert!(
        server.start_line.contains("writable by anyone"),
        "{}",
        server.start_line
    );
    assert_eq!(server.status("/"), 200, "list = true");
    assert_eq!(server.status("/hello.txt"), 200, "max-file = 1M");
    drop(server);

    // The environment over the file; a flag over the file.
    let env_root = from_env.to_string_lossy();
    let server = Running::start(
        &["--config", &config, "--max-file", "5"],
        &[
            ("JSONTP_ROOT", &env_root),
            ("JSONTP_LIST", "false"),
            ("JSONTP_WRITABLE", "false"),
        ],
    );
    assert!(
        server.start_line.contains(&canonical(&from_env)),
        "{}",
        server.start_line
    );
    assert!(server.start_line.contains("read-only"), "{}", server.start_line);
    assert_eq!(server.status("/"), 404, "JSONTP_LIST=false");
    assert_eq!(server.status("/hello.txt"), 500, "--max-file 5");
    drop(server);

    // A flag over the environment, the file read from JSONTP_CONFIG.
    let server = Running::start(
        &["--root", &from_flag.to_string_lossy()],
        &[("JSONTP_ROOT", &env_root), ("JSONTP_CONFIG", &config)],
    );
    assert!(
        server.start_line.contains(&canonical(&from_flag)),
        "{}",
        server.start_line
    );
    assert_eq!(server.status("/"), 200, "list = true, from the file");
    drop(server);
    for root in [from_file, from_env, from_flag] {
        let _ = std::fs::remove_dir_all(root);
    }
}

/// `jsontp serve --config FILE ARGS…` run to its end.
fn serve_with(config: &Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--config", config.to_str().expect("path")];
    all.extend_from_slice(args);
    serve_command(&all, &[]).output().expect("run jsontp serve")
}

#[test]
fn a_bad_file_is_refused_naming_the_key_and_the_line() {
    let folder = temp_root("config-errors");
    let root = folder.display().to_string();
    for (text, wanted) in [
        // TOML itself: the line of the fault.
        ("list = true\nwritable = yes\n", ":2: not valid TOML"),
        // A value the option's own parser refuses, with what it expects.
        (
            "list = true\n\nmax-upload = \"2X\"\n",
            ":3: max-upload: invalid value '2X' for '--max-upload <SIZE>': expected a size such as",
        ),
        ("list = \"yes\"\n", ":1: list: expected true or false"),
        (
            "language = [\"en-US\", \"nope\"]\n",
            ":1: language: invalid value 'nope'",
        ),
        // An unknown key, with the nearest one.
        (
            "list = true\nmax_uplod = \"2G\"\n",
            ":2: unknown key max_uplod; did you mean max-upload?",
        ),
        (
            "cache-bytes = \"lots\"\n",
            ":1: cache-bytes: invalid value 'lots' for '--cache-bytes <SIZE>': expected a size such as",
        ),
        (
            "config = \"other.toml\"\n",
            ":1: config: set on the command line or in the environment only",
        ),
        (
            "token = \"a\"\ntoken-file = \"b\"\n",
            ":2: token-file: the token is also given by token on line 2",
        ),
    ] {
        let config = write_config(&folder, &format!("root = '{root}'\n{text}"));
        // The lines above are one lower: `root` comes first.
        let wanted = {
            let (line, rest) = wanted[1..].split_once(':').expect("line");
            let line: usize = line.parse().expect("number");
            format!("{}:{}:{rest}", config.display(), line + 1)
        };
        let started = serve_with(&config, &["--addr", "127.0.0.1:0"]);
        assert_eq!(started.status.code(), Some(2), "{text:?}: {}", stderr(&started));
        assert!(
            stderr(&started).contains(&wanted),
            "{text:?}: {}",
            stderr(&started)
        );
        let checked = serve_with(&config, &["--check-config"]);
        assert_eq!(checked.status.code(), Some(1), "{text:?}");
        assert!(
            stderr(&checked).contains(&wanted),
            "{text:?}: {}",
            stderr(&checked)
        );
        assert!(
            stderr(&checked).contains("not valid"),
            "{text:?}: {}",
            stderr(&checked)
        );
        assert_eq!(
            stderr(&checked).lines().count(),
            1,
            "one line: {}",
            stderr(&checked)
        );
    }
    let _ = std::fs::remove_dir_all(&folder);
}

#[test]
fn check_config_checks_what_a_start_would_and_says_so_in_one_line() {
    let folder = temp_root("config-check");
    let root = folder.display().to_string();
    let config = write_config(
        &folder,
        &format!(
            "root = '{root}'\nmax-upload = \"2G\"\nlanguage = [\"en-US\", \"fr-FR\"]\nshutdown-timeout = 10\n"
        ),
    );
    let checked = serve_with(&config, &["--check-config"]);
    assert_eq!(checked.status.code(), Some(0), "{}", stderr(&checked));
    assert_eq!(
        stdout(&checked).trim(),
        format!("jsontp serve: {}: valid", config.display())
    );
    // What only a start would find: the root is a file, the token file is
    // missing, the certificate needs its key.
    let file = folder.join("hello.txt");
    for (args, wanted) in [
        (vec!["--root", file.to_str().expect("path")], "cannot serve"),
        (
            vec!["--token-file", "/nonexistent/token"],
            "cannot read the token from /nonexistent/token",
        ),
        (
            vec!["--tls-cert", "/nonexistent/cert.pem"],
            "--tls-cert needs --tls-key",
        ),
        (
            vec![
                "--tls-cert",
                "/nonexistent/cert.pem",
                "--tls-key",
                "/nonexistent/key.pem",
            ],
            "cannot set up TLS",
        ),
    ] {
        let checked = serve_with(&config, &[&args[..], &["--check-config"]].concat());
        assert_eq!(checked.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&checked).contains(wanted),
            "{args:?}: {}",
            stderr(&checked)
        );
        assert_eq!(stderr(&checked).lines().count(), 1, "{}", stderr(&checked));
    }
    // Without a file: the flags and the environment.
    let checked = serve_command(&["--check-config", "--root", &root], &[])
        .output()
        .expect("run");
    assert_eq!(checked.status.code(), Some(0), "{}", stderr(&checked));
    assert_eq!(stdout(&checked).trim(), "jsontp serve: the settings: valid");
    let _ = std::fs::remove_dir_all(&folder);
}

#[test]
fn sighup_applies_a_new_setting_and_keeps_the_old_ones_when_the_file_is_bad() {
    let folder = temp_root("config-reload");
    let head = quiet_head(&folder);
    let config = write_config(&folder, &format!("{head}list = false\n"));
    let server = Running::start(&["--config", &config.to_string_lossy()], &[]);
    assert_eq!(server.status("/"), 404);

    write_config(&folder, &format!("{head}list = true\n"));
    server.signal("HUP");
    server.wait_for("reloaded the settings");
    assert_eq!(server.status("/"), 200, "list = true after SIGHUP");

    // A bad value: refused, named, and the settings stay.
    write_config(&folder, &format!("{head}list = \"yes\"\n"));
    server.signal("HUP");
    let line = server.wait_for("reload refused");
    assert!(
        line.contains(&format!("{}:5: list: expected true or false", config.display())),
        "{line}"
    );
    assert_eq!(server.status("/"), 200, "the old settings still serve");

    // What a running process cannot change is named, not applied.
    write_config(&folder, &format!("{head}list = false\nmax-upload = \"2G\"\n"));
    server.signal("HUP");
    let line = server.wait_for("restart or upgrade (SIGUSR2)");
    assert!(line.contains("max-upload"), "{line}");
    assert!(!line.contains("list"), "{line}");
    server.wait_for("reloaded the settings");
    assert_eq!(server.status("/"), 404, "list = false after SIGHUP");
    drop(server);
    let _ = std::fs::remove_dir_all(&folder);
}

/// The value of the gauge `name` on the admin listener at `admin`;
/// `None` when it shows none.
fn gauge(admin: &str, name: &str) -> Option<f64> {
    let (status, text) = crate::admin::http_get(admin.parse().expect("addr"), "/metrics");
    assert_eq!(status, 200);
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn cache_bytes_is_layered_as_every_option_and_applied_on_sighup() {
    let folder = temp_root("config-cache-bytes");
    let head = quiet_head(&folder);
    let config = write_config(&folder, &format!("{head}cache-bytes = \"1M\"\n"));
    let config = config.to_string_lossy();
    let (limit, files) = ("jsontp_file_cache_limit_bytes", "jsontp_file_cache_files");
    let admin = || format!("127.0.0.1:{}", crate::admin::free_port());

    // The file alone.
    let at = admin();
    let server = Running::start(&["--config", &config, "--admin", &at], &[]);
    assert_eq!(server.status("/hello.txt"), 200);
    assert_eq!(gauge(&at, limit), Some(f64::from(1 << 20)), "the file's 1M");
    assert_eq!(gauge(&at, files), Some(1.0), "hello.txt kept");
    drop(server);

    // The variable over the file.
    let at = admin();
    let server = Running::start(
        &["--config", &config, "--admin", &at],
        &[("JSONTP_CACHE_BYTES", "2M")],
    );
    assert_eq!(gauge(&at, limit), Some(f64::from(2 << 20)), "the variable's 2M");
    drop(server);

    // The flag over both: 0 keeps nothing, so there is no cache to show,
    // and files are still served.
    let at = admin();
    let server = Running::start(
        &["--config", &config, "--admin", &at, "--cache-bytes", "0"],
        &[("JSONTP_CACHE_BYTES", "2M")],
    );
    assert_eq!(server.status("/hello.txt"), 200);
    assert_eq!(gauge(&at, files), None, "--cache-bytes 0: no cache");
    assert_eq!(gauge(&at, limit), None);
    drop(server);

    // SIGHUP applies a new size to the running server, with no warning
    // that it waits for a restart.
    let at = admin();
    let server = Running::start(&["--config", &config, "--admin", &at], &[]);
    write_config(&folder, &format!("{head}cache-bytes = \"3M\"\n"));
    server.signal("HUP");
    loop {
        let line = server.log.recv_timeout(WAIT).expect("the reload's lines");
        assert!(!line.contains("restart or upgrade"), "{line}");
        if line.contains("reloaded the settings") {
            break;
        }
    }
    assert_eq!(gauge(&at, limit), Some(f64::from(3 << 20)), "reloaded: 3M");
    drop(server);
    let _ = std::fs::remove_dir_all(&folder);
}

#[test]
fn sighup_changes_the_log_filter_for_the_events_that_follow() {
    let folder = temp_root("config-log-level");
    let head = format!(
        "root = '{}'\naddr = \"127.0.0.1:0\"\nworkers = 1\n",
        folder.display()
    );
    let config = write_config(&folder, &format!("{head}log-level = \"warn\"\n"));
    let server = Running::start(&["--config", &config.to_string_lossy()], &[]);
    // At `warn`, a request leaves no access-log line. An exchange's record
    // is told just after its response has left, which may be after the
    // client has read it; with one worker, a second exchange is answered
    // only once the first's record was told. So `/before.txt`'s record is
    // filtered at `warn` for certain, while `/barrier.txt`'s may be told
    // on either side of the reload.
    assert_eq!(server.status("/before.txt"), 404);
    assert_eq!(server.status("/barrier.txt"), 404);
    write_config(
        &folder,
        &format!("{head}log-level = \"warn,jsontp::access=info\"\n"),
    );
    server.signal("HUP");
    // Every line from the start: none is `/before.txt`'s record, and the
    // first request after the reload is logged.
    let mut reloaded = false;
    loop {
        let line = server
            .log
            .recv_timeout(WAIT)
            .expect("the reload, then /hello.txt's record");
        assert!(!line.contains("restart or upgrade"), "{line}");
        if line.contains("reloaded the settings") {
            reloaded = true;
            assert_eq!(server.status("/hello.txt"), 200);
        } else if line.contains("jsontp::access") {
            assert!(!line.contains("/before.txt"), "logged at warn: {line}");
            if line.contains("/hello.txt") {
                assert!(reloaded, "{line}");
                break;
            }
        }
    }
    drop(server);
    let _ = std::fs::remove_dir_all(&folder);
}

/// A TLS client trusting both test CAs, so that either certificate is
/// accepted and the test compares what it was shown.
fn trusting(pkis: &[&Pki]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for pki in pkis {
        roots
            .add(CertificateDer::from_pem_file(pki.path("ca.pem")).expect("ca"))
            .expect("root");
    }
    let mut config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"jsontp".to_vec()];
    Arc::new(config)
}

/// A TLS connection to `addr`, its handshake done, its socket's receive
/// buffer small so that a large answer waits on the server's side.
fn connect_tls(
    addr: SocketAddr,
    config: &Arc<rustls::ClientConfig>,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    socket.set_recv_buffer_size(16 * 1024).expect("buffer");
    socket.connect_timeout(&addr.into(), WAIT).expect("connect");
    let tcp: TcpStream = socket.into();
    tcp.set_read_timeout(Some(WAIT)).expect("timeout");
    let name = ServerName::try_from("localhost").expect("name");
    let conn = rustls::ClientConnection::new(Arc::clone(config), name).expect("session");
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock).expect("handshake");
    }
    tls
}

fn leaf_of(tls: &rustls::StreamOwned<rustls::ClientConnection, TcpStream>) -> Vec<u8> {
    tls.conn.peer_certificates().expect("certificates")[0].to_vec()
}

fn leaf_file(path: &Path) -> Vec<u8> {
    CertificateDer::from_pem_file(path).expect("certificate").to_vec()
}

#[test]
fn a_certificate_reloaded_on_sighup_is_served_to_new_connections_while_an_old_download_finishes() {
    let (old, new) = (Pki::new(), Pki::new());
    let folder = temp_root("config-tls");
    let (cert, key) = (folder.join("cert.pem"), folder.join("key.pem"));
    std::fs::copy(old.path("server.pem"), &cert).expect("cert");
    std::fs::copy(old.path("server.key"), &key).expect("key");
    // Larger than what the sockets hold: the server sends it while the
    // client reads.
    let big: String = (0..16 << 20).map(|n| char::from(b'a' + (n % 26) as u8)).collect();
    std::fs::write(folder.join("big.txt"), &big).expect("big file");
    let config = write_config(
        &folder,
        &format!(
            "root = '{}'\naddr = \"127.0.0.1:0\"\nworkers = 1\nquiet = true\ntls-cert = '{}'\ntls-key = '{}'\n",
            folder.display(),
            cert.display(),
            key.display()
        ),
    );
    let server = Running::start(&["--config", &config.to_string_lossy()], &[]);
    assert!(server.start_line.contains("jsontps://"), "{}", server.start_line);
    let client = trusting(&[&old, &new]);

    // A download under way: its first bytes read, the rest still to come.
    let mut download = connect_tls(server.addr, &client);
    assert_eq!(leaf_of(&download), leaf_file(&old.path("server.pem")));
    download
        .write_all(
            br#"{"jsontp":"1.0","type":"request","resource":"/big.txt","method":"GET","headers":{},"body":{"encoding":"identity","content":""}}"#,
        )
        .expect("request");
    let mut first = vec![0; 64 * 1024];
    download.read_exact(&mut first).expect("the first bytes");

    std::fs::copy(new.path("server.pem"), &cert).expect("new cert");
    std::fs::copy(new.path("server.key"), &key).expect("new key");
    server.signal("HUP");
    server.wait_for("reloaded the settings");

    let fresh = connect_tls(server.addr, &client);
    assert_eq!(
        leaf_of(&fresh),
        leaf_file(&new.path("server.pem")),
        "a new connection is shown the new certificate"
    );
    drop(fresh);

    // The old download goes on to its end, whole.
    let rest = (&first[..]).chain(&mut download);
    let answer: serde_json::Value = serde_json::Deserializer::from_reader(rest)
        .into_iter()
        .next()
        .expect("an answer")
        .expect("the whole answer, JSON");
    assert_eq!(answer["status"]["code"], 200, "{}", answer["status"]);
    assert!(
        answer["body"]["content"].as_str() == Some(big.as_str()),
        "the download arrived whole"
    );
    drop(server);
    let _ = std::fs::remove_dir_all(&folder);
}
