//! Where a server's CPU goes under load: `perf record -g` attached to it,
//! read back as shares of its samples, user space against the kernel and
//! the kernel by what it does: sending, receiving, waiting. Kernel
//! functions name the parts, not system calls, so that `writev` (hyper)
//! and `sendto` (mio) count alike.

use std::fs;
use std::io;
use std::path::Path;
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use crate::generator::{self, Load};

/// Shares of a server's samples, in percent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// Samples taken.
    pub samples: u64,
    /// In the server's own code and its libraries.
    pub user: f64,
    /// In the kernel.
    pub kernel: f64,
    /// Sending on TCP (`tcp_sendmsg` and everything under it).
    pub send: f64,
    /// Of the send, the loopback's delivery of the segment into the peer's
    /// socket (`net_rx_action`), which the kernel does inside the send.
    pub delivery: f64,
    /// Receiving on TCP (`tcp_recvmsg`).
    pub receive: f64,
    /// Waiting for readiness (`do_epoll_wait`).
    pub wait: f64,
    /// Entering and leaving the kernel: `do_syscall_64`'s own samples, the
    /// part of each system call that fewer calls would save.
    #[serde(default)]
    pub entry: f64,
}

/// Attaches `perf record -g` to `pid` for `seconds` while `load` runs
/// (its duration should outlast the recording).
pub fn record(pid: u32, load: &Load, scratch: &Path, seconds: f64) -> io::Result<Profile> {
    let data = scratch.join(format!("perf-{pid}.data"));
    let log = scratch.join(format!("perf-{pid}.log"));
    let mut perf = Command::new("perf")
        .args(["record", "-g", "-o"])
        .arg(&data)
        .arg("-p")
        .arg(pid.to_string())
        .arg("--")
        .args(["sleep", &format!("{seconds}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(&log)?)
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run perf: {e}")))?;
    let outcome = generator::run(load);
    let status = perf.wait()?;
    let outcome = outcome?;
    if !status.success() || outcome.errors > 0 {
        let log = fs::read_to_string(&log).unwrap_or_default();
        return Err(io::Error::other(format!(
            "perf record: {status}, {} load errors: {log}",
            outcome.errors
        )));
    }
    let report = |args: &[&str]| -> io::Result<String> {
        let out = Command::new("perf")
            .args(["report", "--stdio", "-i"])
            .arg(&data)
            .args(args)
            .stderr(Stdio::null())
            .output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!("perf report {args:?}: {}", out.status)));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let by_dso = report(&["--no-children", "-n", "--sort", "dso"])?;
    let by_symbol = report(&["--children", "--sort", "sym", "-g", "none"])?;
    let profile = read_profile(&by_dso, &by_symbol);
    if profile.samples == 0 {
        return Err(io::Error::other("perf took no samples of the server"));
    }
    Ok(profile)
}

/// Reads the two reports: `--no-children -n --sort dso` and `--children
/// --sort sym -g none`.
pub fn read_profile(by_dso: &str, by_symbol: &str) -> Profile {
    let mut samples = 0;
    let mut kernel = 0.0;
    for line in rows(by_dso) {
        // "    81.96%         12742  [kernel.kallsyms]"
        let mut fields = line.split_whitespace();
        let (Some(share), Some(count), Some(dso)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let (Some(share), Ok(count)) = (percent(share), count.parse::<u64>()) else {
            continue;
        };
        samples += count;
        if dso.starts_with("[kernel") {
            kernel += share;
        }
    }
    let mut profile = Profile {
        samples,
        user: 100.0 - kernel,
        kernel,
        send: 0.0,
        delivery: 0.0,
        receive: 0.0,
        wait: 0.0,
        entry: 0.0,
    };
    for line in rows(by_symbol) {
        // "    61.90%     0.46%  [k] tcp_sendmsg"
        let mut fields = line.split_whitespace();
        let (Some(children), Some(own), Some(_space), Some(symbol)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (Some(children), Some(own)) = (percent(children), percent(own)) else {
            continue;
        };
        if symbol == "do_syscall_64" {
            profile.entry = own;
            continue;
        }
        let part = match symbol {
            "tcp_sendmsg" => &mut profile.send,
            "net_rx_action" => &mut profile.delivery,
            "tcp_recvmsg" => &mut profile.receive,
            "do_epoll_wait" => &mut profile.wait,
            _ => continue,
        };
        *part = children;
    }
    profile
}

/// The report's lines of figures, without its comments.
fn rows(report: &str) -> impl Iterator<Item = &str> {
    report
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
}

fn percent(field: &str) -> Option<f64> {
    field.strip_suffix('%')?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BY_DSO: &str = "# Samples: 15K of event 'cpu-clock:ppp'\n\
        #\n\
        # Overhead       Samples  Shared Object\n\
        # ........  ............  .................\n\
        #\n\
        \x20   81.96%         12742  [kernel.kallsyms]\n\
        \x20   12.37%          1923  hello_server\n\
        \x20    4.65%           723  libc.so.6\n\
        \x20    1.02%           158  [vdso]\n\
        \n\
        #\n\
        # (Tip: something)\n";

    const BY_SYMBOL: &str = "# Children      Self  Symbol\n\
        \x20   80.75%     0.00%  [k] entry_SYSCALL_64_after_hwframe\n\
        \x20   80.75%     2.58%  [k] do_syscall_64\n\
        \x20   66.17%     0.77%  [.] __send\n\
        \x20   63.96%     0.16%  [k] __x64_sys_sendto\n\
        \x20   61.90%     0.46%  [k] tcp_sendmsg\n\
        \x20   30.62%     1.05%  [k] net_rx_action\n\
        \x20   10.50%     0.17%  [k] __x64_sys_recvfrom\n\
        \x20    7.53%     0.18%  [k] tcp_recvmsg\n\
        \x20    3.56%     0.12%  [k] __x64_sys_epoll_wait\n\
        \x20    2.50%     0.14%  [k] do_epoll_wait\n\
        \x20    1.45%     1.45%  [.] jsontp_protocol::io_adapters::server::drive::Driver::step\n";

    #[test]
    fn reads_the_split_and_the_calls() {
        let p = read_profile(BY_DSO, BY_SYMBOL);
        assert_eq!(p.samples, 12742 + 1923 + 723 + 158);
        assert!((p.kernel - 81.96).abs() < 1e-9, "{p:?}");
        assert!((p.user - 18.04).abs() < 1e-9, "{p:?}");
        assert_eq!(
            (p.send, p.delivery, p.receive, p.wait),
            (61.90, 30.62, 7.53, 2.50)
        );
        assert_eq!(p.entry, 2.58);
    }

    #[test]
    fn an_empty_report_is_all_zero() {
        let p = read_profile("# nothing\n", "");
        assert_eq!(p.samples, 0);
        assert_eq!(p.kernel, 0.0);
        assert_eq!(p.send, 0.0);
    }
}
