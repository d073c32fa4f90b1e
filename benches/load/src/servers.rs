//! The four servers and the kernel's floor: how each is started, pinned,
//! found ready and stopped, and what a request to each looks like.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::framing::Protocol;
use crate::procfs;

/// A server under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum ServerKind {
    /// nginx, one worker (or [`Launch::workers`]), serving the files.
    Nginx,
    /// `jsontp serve --workers 1` (or [`Launch::workers`]), serving the
    /// same files.
    JsontpServe,
    /// hyper 1.x "Hello, world!" on a tokio current-thread runtime.
    Hyper,
    /// `examples/hello_server` on the mio adapter.
    MioHello,
    /// `floor_server`: one `recv` and one `send` per request and no other
    /// work; not a server, the ceiling any server meets on this machine.
    Floor,
    /// `examples/hello_server` on the io_uring runtime (mode `uring`).
    UringHello,
    /// `jsontp serve --runtime uring` (mode `uring`).
    JsontpServeUring,
    /// Another build's `examples/hello_server` on mio, given with
    /// `--baseline` (mode `versus`).
    BaselineHello,
}

impl ServerKind {
    /// Every server compared, in table order (the floor is not one).
    pub const ALL: [ServerKind; 4] = [
        ServerKind::Nginx,
        ServerKind::JsontpServe,
        ServerKind::Hyper,
        ServerKind::MioHello,
    ];

    /// The servers compared, then the floor: what a suite measures when
    /// not told otherwise.
    pub const WITH_FLOOR: [ServerKind; 5] = [
        ServerKind::Nginx,
        ServerKind::JsontpServe,
        ServerKind::Hyper,
        ServerKind::MioHello,
        ServerKind::Floor,
    ];

    /// Short name, as in the table.
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Nginx => "nginx",
            ServerKind::JsontpServe => "jsontp serve",
            ServerKind::Hyper => "hyper hello",
            ServerKind::MioHello => "mio hello",
            ServerKind::Floor => "kernel floor",
            ServerKind::UringHello => "uring hello",
            ServerKind::JsontpServeUring => "jsontp serve (uring)",
            ServerKind::BaselineHello => "baseline mio hello",
        }
    }

    /// From its short name on the command line.
    pub fn from_short(name: &str) -> Option<ServerKind> {
        Some(match name {
            "nginx" => ServerKind::Nginx,
            "jsontp" => ServerKind::JsontpServe,
            "hyper" => ServerKind::Hyper,
            "mio" => ServerKind::MioHello,
            "floor" => ServerKind::Floor,
            "uring" => ServerKind::UringHello,
            "jsontp-uring" => ServerKind::JsontpServeUring,
            "baseline" => ServerKind::BaselineHello,
            _ => return None,
        })
    }

    /// The protocol it speaks.
    pub fn protocol(self) -> Protocol {
        match self {
            ServerKind::Nginx | ServerKind::Hyper => Protocol::Http,
            ServerKind::JsontpServe
            | ServerKind::MioHello
            | ServerKind::Floor
            | ServerKind::UringHello
            | ServerKind::JsontpServeUring
            | ServerKind::BaselineHello => Protocol::Jsontp,
        }
    }

    /// One GET of `path`, asking for gzip when `gzip`.
    pub fn request(self, path: &str, gzip: bool) -> Vec<u8> {
        match self.protocol() {
            Protocol::Jsontp => {
                let headers = if gzip { r#"{"accept-encoding":"gzip"}"# } else { "{}" };
                // Compact JSON and one newline, as senders write (D1).
                format!(
                    r#"{{"jsontp":"1.0","type":"request","resource":"{path}","method":"GET","headers":{headers},"body":{{"content":"","encoding":"identity"}}}}"#
                ) + "\n"
            }
            Protocol::Http => {
                let gzip = if gzip { "Accept-Encoding: gzip\r\n" } else { "" };
                format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{gzip}\r\n")
            }
        }
        .into_bytes()
    }
}

/// Where the programs are.
#[derive(Debug, Clone)]
pub struct Programs {
    /// The `jsontp` binary (release).
    pub jsontp: PathBuf,
    /// `examples/hello_server` (release).
    pub hello: PathBuf,
    /// `hyper_hello` of this crate (release).
    pub hyper: PathBuf,
    /// `floor_server` of this crate (release).
    pub floor: PathBuf,
    /// `parse_count` of this crate (release), for the parsers' instructions.
    pub parse_count: PathBuf,
    /// nginx, when installed.
    pub nginx: Option<PathBuf>,
    /// Another build's `examples/hello_server`, for mode `versus`.
    pub baseline: Option<PathBuf>,
}

impl Programs {
    /// Whether `kind` can be run here.
    pub fn has(&self, kind: ServerKind) -> bool {
        match kind {
            ServerKind::Nginx => self.nginx.is_some(),
            ServerKind::BaselineHello => self.baseline.is_some(),
            _ => true,
        }
    }
}

/// How a server is started.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// Pin it to these CPUs (a `taskset -c` list: `0`, `0,1`).
    pub cpus: Option<String>,
    /// Run it under this program and its arguments (valgrind).
    pub under: Vec<String>,
    /// How long it may take to accept connections.
    pub ready_within: Option<Duration>,
    /// Serve TLS with this certificate chain and key (PEM files).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Workers of nginx and `jsontp serve`; 0 counts as 1. With more
    /// than one, nginx listens with `reuseport`, a socket per worker, as
    /// `jsontp serve` does.
    pub workers: usize,
    /// `jsontp serve`: an admin listener on a free loopback port, for its
    /// per-worker counts ([`Running::admin`]).
    pub admin: bool,
    /// nginx: log the first request of each connection with the worker's
    /// pid and the connection's number ([`Running::connection_log`]).
    pub log_connections: bool,
}

/// A server that is running.
pub struct Running {
    /// Which server.
    pub kind: ServerKind,
    /// Where it listens.
    pub addr: SocketAddr,
    child: Child,
    /// nginx's worker processes (empty for the others).
    workers: Vec<u32>,
    /// How many nginx workers to wait for.
    expected_workers: usize,
    /// `jsontp serve`'s admin listener, when asked for.
    pub admin: Option<SocketAddr>,
    /// nginx's log of `pid connection`, one line per connection, when
    /// asked for; complete once the server has stopped.
    pub connection_log: Option<PathBuf>,
    stopped: bool,
}

impl Running {
    /// The processes that do the work: what CPU time and memory are read
    /// from. nginx: the master and its worker.
    pub fn pids(&self) -> Vec<u32> {
        let mut pids = vec![self.child.id()];
        pids.extend(&self.workers);
        pids
    }

    /// The process that handles connections (nginx's worker; with
    /// `master_process off`, nginx itself).
    pub fn worker_pid(&self) -> u32 {
        self.workers.first().copied().unwrap_or(self.child.id())
    }

    /// nginx's worker processes, in the order they were found.
    pub fn worker_pids(&self) -> &[u32] {
        &self.workers
    }

    /// Stops it with SIGTERM (so that valgrind writes its counts), then
    /// SIGKILL if it is still there after `grace`.
    pub fn stop(&mut self, grace: Duration) -> io::Result<()> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        // Twice: a signal that lands while valgrind's scheduler holds it
        // has been seen to go unanswered.
        for _ in 0..2 {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(self.child.id().to_string())
                .status();
            let until = Instant::now() + grace / 2;
            while Instant::now() < until {
                if self.child.try_wait()?.is_some() {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.child.kill()?;
        self.child.wait().map(|_| ())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.stop(Duration::from_secs(5));
    }
}

/// A free port on 127.0.0.1 (free when asked; the server binds it next).
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Starts `kind` on a free loopback port, serving `root` (the file
/// servers), with its scratch files in `scratch`; returns once it accepts
/// connections.
pub fn start(
    kind: ServerKind,
    programs: &Programs,
    root: &Path,
    scratch: &Path,
    launch: &Launch,
) -> io::Result<Running> {
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    let workers = launch.workers.max(1);
    let admin = if launch.admin && kind == ServerKind::JsontpServe {
        Some(SocketAddr::from(([127, 0, 0, 1], free_port()?)))
    } else {
        None
    };
    let mut connection_log = None;
    let (program, args): (PathBuf, Vec<String>) = match kind {
        ServerKind::JsontpServe | ServerKind::JsontpServeUring => (
            programs.jsontp.clone(),
            vec![
                "serve".into(),
                "--root".into(),
                root.display().to_string(),
                "--addr".into(),
                addr.to_string(),
                "--workers".into(),
                workers.to_string(),
                "--quiet".into(),
            ]
            .into_iter()
            .chain(admin.iter().flat_map(|a| ["--admin".to_string(), a.to_string()]))
            .chain(
                (kind == ServerKind::JsontpServeUring)
                    .then(|| ["--runtime".to_string(), "uring".to_string()])
                    .into_iter()
                    .flatten(),
            )
            .chain(launch.tls.iter().flat_map(|(chain, key)| {
                [
                    "--tls-cert".to_string(),
                    chain.display().to_string(),
                    "--tls-key".to_string(),
                    key.display().to_string(),
                ]
            }))
            .collect(),
        ),
        ServerKind::MioHello => (programs.hello.clone(), vec!["mio".into(), addr.to_string()]),
        ServerKind::UringHello => (programs.hello.clone(), vec!["uring".into(), addr.to_string()]),
        ServerKind::BaselineHello => (
            programs
                .baseline
                .clone()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no --baseline given"))?,
            vec!["mio".into(), addr.to_string()],
        ),
        ServerKind::Hyper => (programs.hyper.clone(), vec![addr.to_string()]),
        ServerKind::Floor => (programs.floor.clone(), vec![addr.to_string()]),
        ServerKind::Nginx => {
            let nginx = programs
                .nginx
                .clone()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "nginx is not installed"))?;
            let dir = scratch.join(format!("nginx-{}", addr.port()));
            fs::create_dir_all(&dir)?;
            let conf = dir.join("nginx.conf");
            if launch.log_connections {
                let log = dir.join("connections.log");
                // A port seen before leaves its old log here.
                let _ = fs::remove_file(&log);
                connection_log = Some(log);
            }
            // One process under valgrind, so that it counts the worker.
            fs::write(
                &conf,
                nginx_config(&NginxConfig {
                    addr,
                    root,
                    dir: &dir,
                    master: launch.under.is_empty(),
                    tls: launch.tls.as_ref(),
                    workers,
                    connection_log: connection_log.as_deref(),
                }),
            )?;
            (
                nginx,
                vec![
                    "-p".into(),
                    dir.display().to_string(),
                    "-e".into(),
                    dir.join("error.log").display().to_string(),
                    "-c".into(),
                    conf.display().to_string(),
                ],
            )
        }
    };
    let mut command = match (&launch.cpus, launch.under.split_first()) {
        (Some(cpus), _) => {
            let mut c = Command::new("taskset");
            c.arg("-c").arg(cpus);
            c.args(&launch.under);
            c.arg(&program);
            c
        }
        (None, Some((first, rest))) => {
            let mut c = Command::new(first);
            c.args(rest).arg(&program);
            c
        }
        (None, None) => Command::new(&program),
    };
    command.args(&args).stdin(Stdio::null()).stdout(Stdio::null());
    // Start lines and valgrind's notes; errors show when a start fails.
    let log = fs::File::create(scratch.join(format!("{}.log", file_stem(kind))))?;
    command.stderr(log);
    let child = command
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot start {}: {e}", program.display())))?;
    let mut running = Running {
        kind,
        addr,
        child,
        workers: Vec::new(),
        expected_workers: if launch.under.is_empty() { workers } else { 0 },
        admin,
        connection_log,
        stopped: false,
    };
    let within = launch.ready_within.unwrap_or(Duration::from_secs(10));
    wait_ready(&mut running, within).map_err(|e| {
        let log = fs::read_to_string(scratch.join(format!("{}.log", file_stem(kind)))).unwrap_or_default();
        io::Error::new(e.kind(), format!("{} did not start: {e}\n{log}", kind.name()))
    })?;
    Ok(running)
}

/// The scratch-file name of a server's log.
fn file_stem(kind: ServerKind) -> &'static str {
    match kind {
        ServerKind::Nginx => "nginx",
        ServerKind::JsontpServe => "jsontp-serve",
        ServerKind::Hyper => "hyper-hello",
        ServerKind::MioHello => "mio-hello",
        ServerKind::Floor => "floor",
        ServerKind::UringHello => "uring-hello",
        ServerKind::JsontpServeUring => "jsontp-serve-uring",
        ServerKind::BaselineHello => "baseline-hello",
    }
}

fn wait_ready(running: &mut Running, within: Duration) -> io::Result<()> {
    let until = Instant::now() + within;
    loop {
        if let Some(status) = running.child.try_wait()? {
            return Err(io::Error::other(format!("it exited: {status}")));
        }
        if TcpStream::connect_timeout(&running.addr, Duration::from_millis(200)).is_ok() {
            break;
        }
        if Instant::now() > until {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "not accepting connections",
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if running.kind == ServerKind::Nginx {
        // The master listens; its workers, forked after, serve. With
        // `master_process off` there is no worker to wait for.
        let pid = running.child.id();
        let until_workers = Instant::now() + Duration::from_secs(2);
        loop {
            running.workers = procfs::children(pid);
            if running.workers.len() >= running.expected_workers.max(1) || Instant::now() > until_workers {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(())
}

/// What an nginx configuration says.
struct NginxConfig<'a> {
    addr: SocketAddr,
    root: &'a Path,
    dir: &'a Path,
    master: bool,
    tls: Option<&'a (PathBuf, PathBuf)>,
    workers: usize,
    connection_log: Option<&'a Path>,
}

/// nginx as the comparison asks: one worker (or `workers`, each with a
/// listening socket of its own), no access log, static files as Debian's
/// package configures them (`sendfile on`, `tcp_nopush on`: the file goes
/// from the page cache to the socket inside the kernel), in the
/// foreground, on loopback.
fn nginx_config(config: &NginxConfig) -> String {
    let NginxConfig {
        addr,
        root,
        dir,
        master,
        tls,
        workers,
        connection_log,
    } = *config;
    let mut c = String::new();
    let _ = writeln!(c, "daemon off;");
    let _ = writeln!(c, "master_process {};", if master { "on" } else { "off" });
    let _ = writeln!(c, "worker_processes {workers};");
    let _ = writeln!(c, "pid {}/nginx.pid;", dir.display());
    if procfs::is_root() {
        // The worker reads the files wherever the checkout is, whatever
        // the folders above it let `nobody` see.
        let _ = writeln!(c, "user root;");
    }
    // Room for the idle-connection benchmark's 10,000 connections.
    let _ = writeln!(c, "worker_rlimit_nofile 20000;");
    let _ = writeln!(c, "events {{ worker_connections 16384; }}");
    let _ = writeln!(c, "http {{");
    let _ = writeln!(c, "    include /etc/nginx/mime.types;");
    let _ = writeln!(c, "    default_type application/octet-stream;");
    match connection_log {
        None => {
            let _ = writeln!(c, "    access_log off;");
        }
        Some(log) => {
            // Only a connection's first request is logged: one line per
            // connection, which worker took it, and nearly nothing written
            // under a keep-alive load. Buffered, so that a new connection
            // per request does not cost a `write` each; flushed at exit.
            let _ = writeln!(c, "    log_format connections '$pid $connection';");
            let _ = writeln!(
                c,
                "    map $connection_requests $first_request {{ 1 1; default 0; }}"
            );
            let _ = writeln!(
                c,
                "    access_log {} connections buffer=64k flush=1s if=$first_request;",
                log.display()
            );
        }
    }
    let _ = writeln!(c, "    sendfile on;");
    let _ = writeln!(c, "    tcp_nopush on;");
    // Scratch folders of its own, so that it runs without root too.
    for temp in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        let _ = writeln!(c, "    {temp}_temp_path {}/{temp};", dir.display());
    }
    // nginx closes a keep-alive connection after 1000 requests by default;
    // the other servers never do, and a closed loop must not see closes.
    let _ = writeln!(c, "    keepalive_requests 100000000;");
    // Only a request that asks for gzip gets it (the gzip row). Level 6,
    // zlib's default, as jsontp's encoder uses: the same work on both.
    let _ = writeln!(c, "    gzip on;");
    let _ = writeln!(c, "    gzip_types text/plain;");
    let _ = writeln!(c, "    gzip_comp_level 6;");
    let _ = writeln!(c, "    server {{");
    let reuseport = if workers > 1 { " reuseport" } else { "" };
    match tls {
        None => {
            let _ = writeln!(c, "        listen {addr}{reuseport};");
        }
        Some((chain, key)) => {
            // TLS 1.3 and the one suite the generator offers; no session
            // cache, as `jsontp serve` keeps none.
            let _ = writeln!(c, "        listen {addr} ssl{reuseport};");
            let _ = writeln!(c, "        ssl_certificate {};", chain.display());
            let _ = writeln!(c, "        ssl_certificate_key {};", key.display());
            let _ = writeln!(c, "        ssl_protocols TLSv1.3;");
            let _ = writeln!(c, "        ssl_session_cache off;");
            let _ = writeln!(c, "        ssl_session_tickets off;");
        }
    }
    let _ = writeln!(c, "        root {};", root.display());
    let _ = writeln!(c, "    }}");
    let _ = writeln!(c, "}}");
    c
}

/// The files both file servers serve, written into `root`.
pub fn write_files(root: &Path) -> io::Result<()> {
    fs::create_dir_all(root)?;
    fs::write(root.join(HELLO), b"Hello, world!")?;
    fs::write(root.join(BIG), text(BIG_BYTES))?;
    fs::write(root.join(TEXT), text(TEXT_BYTES))?;
    Ok(())
}

/// The 13-byte file.
pub const HELLO: &str = "hello.txt";
/// The big text file.
pub const BIG: &str = "big.txt";
/// Its size: 300 KiB.
pub const BIG_BYTES: usize = 300 * 1024;
/// The text file that goes out gzipped.
pub const TEXT: &str = "text.txt";
/// Its size: 16 KiB.
pub const TEXT_BYTES: usize = 16 * 1024;

/// `len` bytes of words and lines: compresses as prose does (about 3:1),
/// the same bytes on every run.
fn text(len: usize) -> Vec<u8> {
    const WORDS: [&str; 24] = [
        "the",
        "server",
        "answers",
        "each",
        "request",
        "in",
        "order",
        "and",
        "a",
        "message",
        "is",
        "one",
        "object",
        "on",
        "stream",
        "of",
        "bytes",
        "connection",
        "keeps",
        "alive",
        "while",
        "client",
        "sends",
        "more",
    ];
    let mut out = Vec::with_capacity(len + 16);
    let mut state: u32 = 0x2545_f491;
    let mut line = 0;
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        let word = WORDS[(state % WORDS.len() as u32) as usize];
        out.extend_from_slice(word.as_bytes());
        line += word.len() + 1;
        if line > 70 {
            out.push(b'\n');
            line = 0;
        } else {
            out.push(b' ');
        }
    }
    out.truncate(len);
    out
}
