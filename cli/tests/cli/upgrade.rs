//! Restarts nobody notices: an upgrade in place (SIGUSR2) under a stream
//! of new clients, an upgrade that fails, the drain's grace period, and
//! sockets passed in by a supervisor (systemd's protocol).
#![allow(clippy::disallowed_methods)] // the tests own their threads and the clock

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use command_fds::{CommandFdExt, FdMapping};
use jsontp_protocol::io_adapters::client::ClientOptions;
use jsontp_protocol::io_adapters::client::blocking::Client;
use jsontp_protocol::message::{Method, Request};

use crate::support::{Serve, serve_command, temp_root};

/// How long a test waits for any one thing.
const WAIT: Duration = Duration::from_secs(15);
/// How long a test waits for a line of the log: longer than the server's
/// own wait for an upgrade's new process (30 s), so that a slow machine
/// shows the server's verdict, whichever it is, rather than the test's.
const LOG_WAIT: Duration = Duration::from_secs(45);

/// A `jsontp serve` whose log (its own and its successors', who share its
/// stderr) arrives line by line.
struct Running {
    serve: Serve,
    addr: SocketAddr,
    log: Receiver<String>,
    /// Every line seen, for a failure's message.
    seen: Arc<Mutex<Vec<String>>>,
}

impl Running {
    fn start(command: &mut Command) -> Running {
        let mut child = command
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start jsontp serve");
        let stderr = BufReader::new(child.stderr.take().expect("stderr"));
        let serve = Serve(child);
        let (lines, log) = channel();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&seen);
        std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { break };
                kept.lock().expect("log").push(line.clone());
                let _ = lines.send(line);
            }
        });
        let start = log.recv_timeout(WAIT).expect("a start line");
        let addr = start
            .rsplit("://")
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("jsontp serve did not start: {start:?}"));
        Running {
            serve,
            addr,
            log,
            seen,
        }
    }

    fn pid(&self) -> u32 {
        self.serve.0.id()
    }

    /// The next log line holding `needle`.
    fn wait_for(&self, needle: &str) -> String {
        let until = Instant::now() + LOG_WAIT;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(_) => panic!(
                    "no log line with {needle:?}; the log:\n{}",
                    self.seen.lock().expect("log").join("\n")
                ),
            }
        }
    }

    fn exited_within(&mut self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if self.serve.0.try_wait().expect("wait").is_some() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

fn signal(pid: u32, name: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -{name} {pid}");
}

/// Kills a successor (not the test's child) when the test ends.
struct Successor(u32);

impl Drop for Successor {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-KILL", &self.0.to_string()]).status();
    }
}

/// The pid an `upgraded: process N serves now` line names.
fn successor_of(line: &str) -> Successor {
    let pid = line
        .split("process ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {line:?}"));
    Successor(pid)
}

/// The status of `method resource` on a new connection, or the error.
fn ask(addr: SocketAddr, method: Method, resource: &str) -> Result<u16, String> {
    let options = ClientOptions::default();
    let mut client = Client::connect(addr, options).map_err(|e| e.to_string())?;
    let request = Request::new(method, resource.parse().expect("resource"));
    client
        .send(request)
        .map(|answer| answer.response.status.code.as_u16())
        .map_err(|e| e.to_string())
}

/// New clients one after another until `stop`: how many were answered
/// 200, and every other outcome.
fn steady_clients(addr: SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(u64, Vec<String>)> {
    std::thread::spawn(move || {
        let mut ok = 0;
        let mut failed = Vec::new();
        let until = Instant::now() + Duration::from_secs(60);
        while !stop.load(Ordering::SeqCst) && Instant::now() < until {
            match ask(addr, Method::Get, "/hello.txt") {
                Ok(200) => ok += 1,
                other => failed.push(format!("{other:?}")),
            }
        }
        (ok, failed)
    })
}

fn get_line(resource: &str) -> String {
    serde_json::json!({
        "jsontp": "1.0", "type": "request", "resource": resource, "method": "GET",
        "headers": {}, "body": {"content": "", "encoding": "identity"}
    })
    .to_string()
        + "\n"
}

#[test]
fn an_upgrade_in_place_refuses_no_one_and_lets_the_old_downloads_finish() {
    let root = temp_root("upgrade");
    let text = "jsontp upgrade test line\n".repeat(8 << 20 >> 5);
    std::fs::write(root.join("big.txt"), &text).expect("fixture");
    let mut server = Running::start(
        serve_command(
            &[
                "--addr",
                "127.0.0.1:0",
                "--workers",
                "2",
                "--quiet",
                "--shutdown-timeout",
                "20",
            ],
            &[],
        )
        .arg("--root")
        .arg(&root),
    );
    let addr = server.addr;
    // A download the old process is still sending when it hands over.
    let mut slow = TcpStream::connect(addr).expect("connect");
    slow.write_all(get_line("/big.txt").as_bytes()).expect("ask");
    let mut first = vec![0u8; 64 << 10];
    slow.read_exact(&mut first).expect("the download begins");
    let stop = Arc::new(AtomicBool::new(false));
    let clients = steady_clients(addr, Arc::clone(&stop));
    std::thread::sleep(Duration::from_millis(300));
    signal(server.pid(), "USR2");
    let successor = successor_of(&server.wait_for("upgraded: process"));
    assert_ne!(successor.0, server.pid());
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::SeqCst);
    let (ok, failed) = clients.join().expect("clients");
    assert!(
        failed.is_empty(),
        "{} of {} new clients failed, the first: {:?}",
        failed.len(),
        ok as usize + failed.len(),
        &failed[..failed.len().min(3)]
    );
    assert!(ok > 10, "only {ok} clients were served");
    // The old process still sends the download, then exits.
    assert!(
        !server.exited_within(Duration::from_millis(200)),
        "the old process left a download unfinished"
    );
    let mut rest = Vec::new();
    let mut reader = BufReader::new(&slow);
    reader
        .read_until(b'\n', &mut rest)
        .expect("the rest of the download");
    first.extend_from_slice(&rest);
    let response: serde_json::Value = serde_json::from_slice(&first).expect("one whole response");
    assert_eq!(response["status"]["code"], 200);
    assert!(
        response["body"]["content"].as_str() == Some(text.as_str()),
        "the download arrived whole"
    );
    drop(reader);
    drop(slow);
    assert!(
        server.exited_within(WAIT),
        "the old process exits once its exchanges are done"
    );
    // The successor serves, and takes the next upgrade too.
    assert_eq!(ask(addr, Method::Get, "/hello.txt"), Ok(200));
    signal(successor.0, "USR2");
    let third = successor_of(&server.wait_for("upgraded: process"));
    assert_ne!(third.0, successor.0);
    assert_eq!(ask(addr, Method::Get, "/hello.txt"), Ok(200));
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn an_upgrade_that_fails_leaves_the_old_process_serving() {
    let root = temp_root("upgrade-fails");
    let server = Running::start(
        serve_command(&["--addr", "127.0.0.1:0", "--workers", "1", "--quiet"], &[])
            .arg("--root")
            .arg(&root),
    );
    // The new process cannot start: its root is gone.
    let moved = root.with_extension("moved");
    std::fs::rename(&root, &moved).expect("move the root away");
    signal(server.pid(), "USR2");
    let line = server.wait_for("upgrade failed");
    assert!(line.contains("this process serves on"), "{line}");
    assert!(line.contains("ended before it served"), "{line}");
    std::fs::rename(&moved, &root).expect("move the root back");
    assert_eq!(ask(server.addr, Method::Get, "/hello.txt"), Ok(200));
    let _ = std::fs::remove_dir_all(&root);
}

/// A free loopback port, for an admin listener the test must name.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The status line of an HTTP/1.1 GET of `path` on `addr`.
fn http_status(addr: SocketAddr, path: &str) -> u16 {
    let mut stream = TcpStream::connect(addr).expect("connect to the admin listener");
    stream.set_read_timeout(Some(WAIT)).expect("timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("ask");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer");
    answer
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("not HTTP: {answer:?}"))
}

#[test]
fn the_drain_grace_serves_on_while_the_health_checks_say_503() {
    let root = temp_root("grace");
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
    let mut server = Running::start(
        serve_command(
            &[
                "--addr",
                "127.0.0.1:0",
                "--workers",
                "1",
                "--quiet",
                "--drain-grace",
                "1.5",
            ],
            &[],
        )
        .arg("--root")
        .arg(&root)
        .arg("--admin")
        .arg(admin.to_string()),
    );
    let addr = server.addr;
    server.wait_for("admin (/metrics, /live, /ready) on http://");
    assert_eq!(http_status(admin, "/ready"), 200);
    assert_eq!(ask(addr, Method::Options, "*"), Ok(200));
    let asked = Instant::now();
    signal(server.pid(), "TERM");
    server.wait_for("still accepting for 1.5 s");
    // Within the grace period: the health checks say 503, and clients
    // are still taken and served.
    assert_eq!(http_status(admin, "/ready"), 503);
    assert_eq!(http_status(admin, "/live"), 200);
    assert_eq!(ask(addr, Method::Options, "*"), Ok(503));
    assert_eq!(ask(addr, Method::Get, "/hello.txt"), Ok(200));
    assert!(
        asked.elapsed() < Duration::from_millis(1500),
        "the checks took the whole grace period"
    );
    // Past it: the server stops accepting and exits.
    assert!(
        server.exited_within(WAIT),
        "the server exits after its grace period"
    );
    assert!(
        asked.elapsed() >= Duration::from_millis(1500),
        "it stopped before its grace period ended"
    );
    let refused = TcpStream::connect_timeout(&addr, Duration::from_secs(2));
    assert!(refused.is_err(), "new clients are refused once it has stopped");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn sockets_a_supervisor_passes_in_are_served_and_left_listening_after_a_stop() {
    let root = temp_root("activation");
    let socket = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = socket.local_addr().expect("addr");
    let passed = OwnedFd::from(socket.try_clone().expect("clone"));
    let mut command = serve_command(&["--addr", "127.0.0.1:1", "--workers", "2", "--quiet"], &[]);
    command
        .arg("--root")
        .arg(&root)
        .env("LISTEN_FDS", "1")
        .env("LISTEN_FDNAMES", "jsontp")
        .env_remove("LISTEN_PID");
    command
        .fd_mappings(vec![FdMapping {
            parent_fd: passed,
            child_fd: 3,
        }])
        .expect("map the socket");
    let mut server = Running::start(&mut command);
    assert_eq!(
        server.addr, addr,
        "the start line names the socket passed in, not --addr"
    );
    assert_eq!(ask(addr, Method::Get, "/hello.txt"), Ok(200));
    signal(server.pid(), "TERM");
    assert!(server.exited_within(WAIT), "the server stops");
    // The supervisor's socket still listens: a client waits in its queue
    // for the next start instead of being refused.
    let waiting =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).expect("not refused after the stop");
    drop(waiting);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_stop_during_an_upgrade_gives_it_up_at_once() {
    let root = temp_root("upgrade-stop");
    let token = root.with_extension("token");
    std::fs::write(&token, "s3cret\n").expect("token");
    let mut server = Running::start(
        serve_command(&["--addr", "127.0.0.1:0", "--workers", "1", "--quiet"], &[])
            .arg("--root")
            .arg(&root)
            .arg("--token-file")
            .arg(&token),
    );
    // The new process hangs at its start: its token file is now a pipe
    // that nobody writes.
    std::fs::remove_file(&token).expect("remove the token");
    let made = Command::new("mkfifo").arg(&token).status().expect("run mkfifo");
    assert!(made.success(), "mkfifo");
    signal(server.pid(), "USR2");
    server.wait_for("upgrading: starting the new process");
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    signal(server.pid(), "TERM");
    let line = server.wait_for("upgrade given up");
    assert!(server.exited_within(Duration::from_secs(5)), "the server stops");
    assert!(asked.elapsed() < Duration::from_secs(5), "{:?}", asked.elapsed());
    let pid = line
        .split("new process (")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("the new process's pid");
    let alive = Command::new("kill").args(["-0", pid]).status().expect("run kill");
    assert!(!alive.success(), "the new process was stopped too: {line}");
    let _ = std::fs::remove_file(&token);
    let _ = std::fs::remove_dir_all(&root);
}
