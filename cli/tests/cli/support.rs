//! Shared by the CLI tests: the binary, `jsontp serve` on a fresh folder,
//! a one-answer loopback peer, and runners bounded in time.
#![allow(clippy::disallowed_methods)] // the tests own their threads

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_jsontp");

/// A fresh, empty-but-for-`hello.txt` folder named after the test.
pub fn temp_root(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let root = std::env::temp_dir().join(format!(
        "jsontp-cli-{name}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("temp root");
    std::fs::write(root.join("hello.txt"), "Hello, world!").expect("fixture");
    root
}

/// A `jsontp serve` process, killed on drop so that a failing test leaves
/// none.
pub struct Serve(pub Child);

impl Serve {
    /// Sends the process SIGTERM (a graceful stop).
    pub fn terminate(&self) {
        let killed = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status()
            .expect("run kill");
        assert!(killed.success(), "kill -TERM {}", self.0.id());
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Every variable `jsontp serve` reads: cleared for the servers the tests
/// start, so that the developer's environment cannot change a test.
pub const SERVE_ENV: [&str; 19] = [
    "JSONTP_CONFIG",
    "JSONTP_ROOT",
    "JSONTP_ADDR",
    "JSONTP_WRITABLE",
    "JSONTP_TOKEN",
    "JSONTP_TOKEN_FILE",
    "JSONTP_LIST",
    "JSONTP_LANGUAGE",
    "JSONTP_NO_CONTINUE",
    "JSONTP_WORKERS",
    "JSONTP_MAX_CONNECTIONS",
    "JSONTP_QUIET",
    "JSONTP_LOG_FORMAT",
    "JSONTP_LOG_LEVEL",
    "JSONTP_MAX_UPLOAD",
    "JSONTP_MAX_SPOOL",
    "JSONTP_ADMIN",
    "JSONTP_DRAIN_GRACE",
    "JSONTP_CACHE_BYTES",
];

/// `jsontp serve ARGS…` with none of [`SERVE_ENV`] set but `env`.
pub fn serve_command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(BIN);
    command.arg("serve").args(args);
    for name in SERVE_ENV {
        command.env_remove(name);
    }
    // Read when --log-level is not given: the developer's must not change
    // what a test sees.
    command.env_remove("RUST_LOG");
    command.envs(env.iter().copied());
    command
}

/// Starts `jsontp serve` on port 0 with one worker and reads the address it
/// bound from its start line (`… on jsontp://127.0.0.1:PORT`): no race with
/// other tests for a free port. Returns its stderr for the access log.
pub fn spawn_serve(root: &Path, extra: &[&str]) -> (Serve, SocketAddr, BufReader<ChildStderr>) {
    spawn_serve_with_env(root, extra, &[])
}

/// `jsontp serve --workers 1 --quiet` on `root` with `extra`, under the
/// shell's `ulimit -n 24`: a handful of descriptors (the listener, the
/// poller, the root, and few more). `None` without a shell to set it.
/// Its log is drained on a thread of its own.
#[cfg(unix)]
pub fn spawn_serve_short_of_descriptors(root: &Path, extra: &str) -> Option<(Serve, SocketAddr)> {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "ulimit -n 24 && exec {BIN} serve {extra} --workers 1 --quiet --addr 127.0.0.1:0 --root '{}'",
            root.display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for name in SERVE_ENV {
        command.env_remove(name);
    }
    let Ok(mut child) = command.spawn() else {
        eprintln!("no sh here");
        return None;
    };
    let mut log = BufReader::new(child.stderr.take().expect("stderr"));
    let server = Serve(child);
    let mut line = String::new();
    let _ = log.read_line(&mut line);
    let Some(addr) = line
        .trim()
        .rsplit("://")
        .next()
        .and_then(|a| a.parse::<SocketAddr>().ok())
    else {
        panic!("jsontp serve did not start: {line:?}");
    };
    thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
    Some((server, addr))
}

/// [`spawn_serve`] with environment variables; `JSONTP_ADDR` and
/// `JSONTP_ROOT` in `env` replace the `--addr 127.0.0.1:0` and `--root ROOT`
/// it passes otherwise.
pub fn spawn_serve_with_env(
    root: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Serve, SocketAddr, BufReader<ChildStderr>) {
    let has = |variable: &str| env.iter().any(|(name, _)| *name == variable);
    let mut command = serve_command(&["--workers", "1"], env);
    if !has("JSONTP_ADDR") {
        command.args(["--addr", "127.0.0.1:0"]);
    }
    if !has("JSONTP_ROOT") {
        command.arg("--root").arg(root);
    }
    let mut child = command
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start jsontp serve");
    let mut stderr = BufReader::new(child.stderr.take().expect("piped stderr"));
    let server = Serve(child);
    let mut line = String::new();
    // The server writes this line once it listens, or exits with an error.
    let _ = stderr.read_line(&mut line);
    let addr = line
        .trim()
        // `jsontp://` or, with TLS, `jsontps://`.
        .rsplit("://")
        .next()
        // A JSON start line ends the URL with `"}`.
        .map(|a| a.trim_end_matches(['"', '}']))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("jsontp serve did not start: {line:?}"));
    (server, addr, stderr)
}

/// `jsontp serve --writable --quiet` on a fresh folder holding `hello.txt`
/// and `binary.bin` (the 256 byte values); cleaned up on drop.
pub struct Served {
    _serve: Serve,
    pub addr: SocketAddr,
    pub root: PathBuf,
}

impl Served {
    pub fn start(name: &str) -> Served {
        Served::start_with(name, &[])
    }

    /// As [`start`](Self::start), with more `jsontp serve` arguments.
    pub fn start_with(name: &str, extra: &[&str]) -> Served {
        let root = temp_root(name);
        std::fs::write(root.join("binary.bin"), binary()).expect("fixture");
        let mut args = vec!["--writable", "--quiet"];
        args.extend_from_slice(extra);
        let (serve, addr, mut log) = spawn_serve(&root, &args);
        // Keep draining its stderr so that it never blocks on a full pipe.
        thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
        Served {
            _serve: serve,
            addr,
            root,
        }
    }

    /// `127.0.0.1:PORT/path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.addr)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Every byte value once: not UTF-8, with a NUL.
pub fn binary() -> Vec<u8> {
    (0..=255u8).collect()
}

/// Runs `jsontp ARGS…`, bounded in time by the client's own `--timeout`.
pub fn jsontp(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .args(["--timeout", "10"])
        .output()
        .expect("run jsontp")
}

/// [`jsontp`] with `input` on its standard input.
pub fn jsontp_with_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .args(["--timeout", "10"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run jsontp");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.to_vec();
    let writer = thread::spawn(move || stdin.write_all(&input));
    let output = child.wait_with_output().expect("jsontp output");
    let _ = writer.join();
    output
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A loopback peer that reads one request (up to its closing newline, or
/// for 5 s), writes `answer` and closes. Returns its address.
pub fn one_answer_peer(answer: &[u8]) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let answer = answer.to_vec();
    thread::spawn(move || {
        let Ok((mut stream, _)) = listener.accept() else {
            return;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let mut request = Vec::new();
        let mut byte = [0u8; 1];
        while let Ok(1) = stream.read(&mut byte) {
            request.push(byte[0]);
            if byte[0] == b'\n' {
                break;
            }
        }
        let _ = stream.write_all(&answer);
    });
    addr
}

/// Everything under `root` (symlinks not followed) named as a server names
/// its temporary files or their folder: `.jsontp-…` and `.tmp…`. What an
/// upload left behind, or showed while it arrived.
pub fn temporaries(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(".jsontp-") || name.starts_with(".tmp") {
                found.push(entry.path());
            }
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                folders.push(entry.path());
            }
        }
    }
    found
}
