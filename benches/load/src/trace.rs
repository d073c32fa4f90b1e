//! System calls per request (`strace -c`) and instructions per request
//! (`valgrind --tool=callgrind`), each under a fixed number of requests.

use std::fs;
use std::io;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::generator::{self, Load};

/// System calls the server made for a fixed number of requests.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Syscalls {
    /// Requests answered while strace counted.
    pub requests: u64,
    /// Every system call counted.
    pub total: u64,
    /// The most frequent calls, by name, with their counts.
    pub top: Vec<(String, u64)>,
}

impl Syscalls {
    /// System calls per request.
    pub fn per_request(&self) -> f64 {
        self.total as f64 / self.requests.max(1) as f64
    }
}

/// Attaches `strace -c -f` to `pid` (every thread), runs `load` (with a
/// request count), detaches and reads the counts.
pub fn strace(pid: u32, load: &Load, scratch: &Path) -> io::Result<Syscalls> {
    let out = scratch.join(format!("strace-{pid}.txt"));
    let err = scratch.join(format!("strace-{pid}.log"));
    let _ = fs::remove_file(&out);
    let mut tracer = Command::new("strace")
        .args(["-c", "-f", "-o"])
        .arg(&out)
        .arg("-p")
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .stderr(fs::File::create(&err)?)
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run strace: {e}")))?;
    // Wait until it has attached to the process.
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if fs::read_to_string(&err).unwrap_or_default().contains("attached") {
            break;
        }
        if let Some(status) = tracer.try_wait()? {
            let log = fs::read_to_string(&err).unwrap_or_default();
            return Err(io::Error::other(format!("strace exited ({status}): {log}")));
        }
        if Instant::now() > until {
            let _ = tracer.kill();
            return Err(io::Error::other("strace did not attach"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let outcome = generator::run(load);
    let _ = Command::new("kill")
        .arg("-INT")
        .arg(tracer.id().to_string())
        .status();
    tracer.wait()?;
    let outcome = outcome?;
    if outcome.errors > 0 {
        return Err(io::Error::other(format!(
            "errors under strace: {:?}",
            outcome.error_samples
        )));
    }
    let table = fs::read_to_string(&out)?;
    let (total, mut rows) = parse_strace(&table)
        .ok_or_else(|| io::Error::other(format!("no strace summary in {}: {table}", out.display())))?;
    rows.sort_by_key(|row| std::cmp::Reverse(row.1));
    rows.truncate(4);
    Ok(Syscalls {
        requests: outcome.completed,
        total,
        top: rows,
    })
}

/// The `total` calls and the per-call rows of `strace -c`'s table.
pub fn parse_strace(table: &str) -> Option<(u64, Vec<(String, u64)>)> {
    let mut rows = Vec::new();
    let mut total = None;
    for line in table.lines() {
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        // % time, seconds, usecs/call, calls, [errors], name
        if fields.len() < 5 || fields[0].parse::<f64>().is_err() {
            continue;
        }
        let Some(name) = fields.last() else { continue };
        let Ok(calls) = fields[3].parse::<u64>() else {
            continue;
        };
        if *name == "total" {
            total = Some(calls);
        } else {
            rows.push((name.to_string(), calls));
        }
    }
    total.map(|t| (t, rows))
}

/// The instruction count callgrind wrote (`totals:` or `summary:`).
pub fn callgrind_total(file: &Path) -> io::Result<u64> {
    let text = fs::read_to_string(file)?;
    text.lines()
        .rev()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
                .and_then(|rest| rest.split_ascii_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
        })
        .ok_or_else(|| io::Error::other(format!("no totals in {}", file.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_strace_summary() {
        let table = "\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 52.10    0.104046           6     16011           write
 40.00    0.080000           4     16100       100 read
  7.90    0.015000           2      7000           epoll_wait
------ ----------- ----------- --------- --------- ----------------
100.00    0.199046           5     39111       100 total
";
        let (total, rows) = parse_strace(table).expect("a summary");
        assert_eq!(total, 39111);
        assert_eq!(
            rows,
            [
                ("write".to_string(), 16011),
                ("read".to_string(), 16100),
                ("epoll_wait".to_string(), 7000)
            ]
        );
        assert!(parse_strace("strace: attach: ptrace(PTRACE_SEIZE, 1): Operation not permitted").is_none());
    }
}
