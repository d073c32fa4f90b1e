//! Where `jsontp serve`'s listening sockets come from, and how they pass
//! to the process that takes over from this one.
//!
//! - **Bound** by the server itself: one per worker (`SO_REUSEPORT`).
//! - **Passed in** by a supervisor, systemd's socket activation protocol:
//!   `LISTEN_FDS` descriptors from 3 up, named by `LISTEN_FDNAMES` (a
//!   socket named `admin` is the admin listener's). The supervisor keeps
//!   them open across restarts, so a stop leaves them listening.
//! - **Passed on** to a successor, an upgrade in place (`SIGUSR2`): the
//!   same binary path, started again with the same arguments, inherits
//!   the sockets by the same protocol and says when it serves; only then
//!   does this process stop accepting and finish its exchanges. Clients
//!   never meet a closed port: until the successor accepts, they wait in
//!   the sockets' queues.

use std::ffi::OsString;
use std::io;
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use command_fds::{CommandFdExt, FdMapping};

/// The name of an inherited socket that the admin listener takes.
pub const ADMIN_NAME: &str = "admin";
/// The name this process gives the serving sockets it passes on.
const SERVE_NAME: &str = "jsontp";

/// Where a successor says it is ready: the path of this process's
/// datagram socket. Its presence also says the sockets came from a
/// predecessor rather than a supervisor.
const READY_ENV: &str = "JSONTP_UPGRADE_NOTIFY";
/// Who keeps the sockets open across this process's end
/// ([`Keeper`]), passed on from predecessor to successor.
const KEEPER_ENV: &str = "JSONTP_SOCKETS_KEPT_BY";

/// How long a successor has to say it serves before the upgrade is given
/// up and this process goes on serving.
pub const UPGRADE_WAIT: Duration = Duration::from_secs(30);

/// Who else holds the listening sockets, which decides what a stop does
/// to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keeper {
    /// Nobody: a stop shuts them, and new clients are refused at once
    /// rather than left waiting for a server that is gone.
    Nobody,
    /// A supervisor (systemd) that passes them to the next start: a stop
    /// leaves them listening, and clients wait in their queues for it.
    Supervisor,
}

impl Keeper {
    fn as_str(self) -> &'static str {
        match self {
            Keeper::Nobody => "nobody",
            Keeper::Supervisor => "supervisor",
        }
    }
}

/// The listening sockets `jsontp serve` was given.
#[derive(Debug)]
pub struct Inherited {
    /// The sockets it serves jsontp on.
    pub serve: Vec<TcpListener>,
    /// The admin listener's, if one was named `admin`.
    pub admin: Option<TcpListener>,
    /// Who keeps them open after this process.
    pub keeper: Keeper,
}

/// Takes the sockets passed in by the socket activation protocol, if any.
/// Call it first, before any thread starts: it clears `LISTEN_FDS` and
/// `LISTEN_PID` from the environment, so that nothing this process starts
/// takes them for its own.
pub fn inherited() -> Result<Option<Inherited>, String> {
    let names: Vec<String> = std::env::var("LISTEN_FDNAMES")
        .map(|names| names.split(':').map(str::to_owned).collect())
        .unwrap_or_default();
    let mut fds = listenfd::ListenFd::from_env();
    if fds.len() == 0 {
        return Ok(None);
    }
    let mut serve = Vec::new();
    let mut admin = None;
    for n in 0..fds.len() {
        let socket = fds
            .take_tcp_listener(n)
            .map_err(|e| {
                format!(
                    "the socket passed in as descriptor {} is not a listening TCP socket: {e}",
                    n + 3
                )
            })?
            .ok_or_else(|| format!("the socket passed in as descriptor {} is gone", n + 3))?;
        if names.get(n).is_some_and(|name| name == ADMIN_NAME) {
            if admin.is_some() {
                return Err(format!(
                    "two sockets passed in are named {ADMIN_NAME:?}; name one only"
                ));
            }
            admin = Some(socket);
        } else {
            serve.push(socket);
        }
    }
    if serve.is_empty() {
        return Err(format!(
            "the only socket passed in is named {ADMIN_NAME:?}: pass one to serve jsontp on too"
        ));
    }
    let from_predecessor = std::env::var_os(READY_ENV).is_some();
    let keeper = match std::env::var(KEEPER_ENV).as_deref() {
        Ok("nobody") if from_predecessor => Keeper::Nobody,
        _ => Keeper::Supervisor,
    };
    Ok(Some(Inherited { serve, admin, keeper }))
}

/// Tells whoever waits that this process now serves: the predecessor of
/// an upgrade, and systemd (`Type=notify`), with this process's pid as
/// the service's main one, since after an upgrade it is no longer the
/// process systemd started. Failures are logged: the server serves
/// whether or not anyone hears it.
pub fn tell_ready() {
    if let Some(path) = std::env::var_os(READY_ENV)
        && let Err(e) = send_datagram(Path::new(&path), b"READY=1\n")
    {
        tracing::error!(error = %e, "cannot tell the process being upgraded that this one serves");
    }
    if let Some(socket) = std::env::var_os("NOTIFY_SOCKET") {
        let message = format!("READY=1\nMAINPID={}\n", std::process::id());
        if let Err(e) = send_datagram(Path::new(&socket), message.as_bytes()) {
            tracing::warn!(error = %e, "cannot tell systemd that the server is ready (NOTIFY_SOCKET)");
        }
    }
}

/// Sends one datagram to the socket at `path`, or in Linux's abstract
/// namespace when it starts with `@` (as systemd may name it).
fn send_datagram(path: &Path, message: &[u8]) -> io::Result<()> {
    let socket = UnixDatagram::unbound()?;
    #[cfg(target_os = "linux")]
    if let Some(name) = path.to_str().and_then(|p| p.strip_prefix('@')) {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
        return socket.send_to_addr(message, &addr).map(drop);
    }
    socket.send_to(message, path).map(drop)
}

/// How to start this process again: the binary's path and the arguments,
/// as they were at start. The path is read then, so that a binary
/// replaced at that path since (a package upgrade) is the one started.
#[derive(Debug, Clone)]
pub struct Successor {
    program: PathBuf,
    args: Vec<OsString>,
}

impl Successor {
    /// This process, as started.
    pub fn of_this_process() -> io::Result<Successor> {
        Ok(Successor {
            program: std::env::current_exe()?,
            args: std::env::args_os().skip(1).collect(),
        })
    }

    /// Starts the successor on `serve` (and `admin`) and waits, at most
    /// `wait` and while `stop_asked` says no, until it says it serves; its
    /// pid then. An error says why the upgrade did not happen; the
    /// successor, if it still runs, is stopped, and this process goes on
    /// as before.
    // The binary owns its clock; the sans-I/O core is what may not.
    #[allow(clippy::disallowed_methods)]
    pub fn start(
        &self,
        serve: &[TcpListener],
        admin: Option<&TcpListener>,
        keeper: Keeper,
        wait: Duration,
        stop_asked: &mut dyn FnMut() -> bool,
    ) -> Result<u32, String> {
        let folder = tempfile::Builder::new()
            .prefix("jsontp-upgrade-")
            .tempdir()
            .map_err(|e| format!("cannot make a folder for the new process's signal: {e}"))?;
        let ready_path = folder.path().join("ready");
        let ready = UnixDatagram::bind(&ready_path)
            .map_err(|e| format!("cannot listen for the new process's signal: {e}"))?;
        ready
            .set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| e.to_string())?;
        let mut names = Vec::new();
        let mut mappings = Vec::new();
        for (socket, name) in serve
            .iter()
            .map(|s| (s, SERVE_NAME))
            .chain(admin.map(|s| (s, ADMIN_NAME)))
        {
            let fd = OwnedFd::from(
                socket
                    .try_clone()
                    .map_err(|e| format!("cannot pass a socket on: {e}"))?,
            );
            mappings.push(FdMapping {
                parent_fd: fd,
                child_fd: 3 + i32::try_from(names.len()).unwrap_or(i32::MAX - 3),
            });
            names.push(name);
        }
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .env("LISTEN_FDS", names.len().to_string())
            .env("LISTEN_FDNAMES", names.join(":"))
            .env_remove("LISTEN_PID")
            .env(READY_ENV, &ready_path)
            .env(KEEPER_ENV, keeper.as_str());
        command
            .fd_mappings(mappings)
            .map_err(|_| "cannot pass the sockets on: two at one descriptor".to_owned())?;
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.program.display()))?;
        let pid = child.id();
        let until = Instant::now() + wait;
        let mut message = [0u8; 64];
        loop {
            match ready.recv(&mut message) {
                Ok(n) if message[..n].starts_with(b"READY=1") => return Ok(pid),
                Ok(_) => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(e) => return Err(stop(child, format!("cannot hear from the new process: {e}"))),
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "the new process ({pid}) ended before it served ({status}): see its messages above"
                ));
            }
            if stop_asked() {
                return Err(stop(child, format!("the new process ({pid}) is stopped")));
            }
            if Instant::now() >= until {
                return Err(stop(
                    child,
                    format!(
                        "the new process ({pid}) did not serve within {} s; stopped it",
                        wait.as_secs()
                    ),
                ));
            }
        }
    }
}

/// Stops a successor given up on; `why`, for the error.
fn stop(mut child: Child, why: String) -> String {
    let _ = child.kill();
    let _ = child.wait();
    why
}
