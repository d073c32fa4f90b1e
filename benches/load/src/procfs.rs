//! What `/proc` says about a server: CPU time, resident memory, children.

use std::fs;
use std::process::Command;

/// Clock ticks per second of `/proc/PID/stat`'s times.
pub fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|&t| t > 0.0)
        .unwrap_or(100.0)
}

/// User plus system CPU time of the processes, every thread included, in
/// clock ticks (`utime` + `stime`, fields 14 and 15 of `/proc/PID/stat`).
pub fn cpu_ticks(pids: &[u32]) -> Option<u64> {
    pids.iter().map(|&pid| one_cpu_ticks(pid)).sum()
}

fn one_cpu_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, field 2, is in parentheses and may hold spaces.
    let after_name = &stat[stat.rfind(')')? + 2..];
    let mut fields = after_name.split_ascii_whitespace();
    // `after_name` starts at field 3 (state): utime is field 14.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Resident memory of the processes in bytes (`VmRSS`).
pub fn rss_bytes(pids: &[u32]) -> Option<u64> {
    pids.iter().map(|&pid| one_rss(pid)).sum()
}

fn one_rss(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_ascii_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The child processes of `pid` (nginx's workers).
pub fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for task in tasks.flatten() {
        if let Ok(list) = fs::read_to_string(task.path().join("children")) {
            found.extend(
                list.split_ascii_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    found
}

/// CPUs online on the machine (not only those this process may use).
pub fn cpus_online() -> usize {
    fs::read_to_string("/proc/cpuinfo")
        .map(|c| c.lines().filter(|l| l.starts_with("processor")).count())
        .unwrap_or(0)
}

/// Whether this process runs as root (real user id 0).
pub fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_ascii_whitespace().nth(1).map(|uid| uid == "0"))
        })
        .unwrap_or(false)
}

/// The load average over 1, 5 and 15 minutes.
pub fn load_average() -> Option<[f64; 3]> {
    let text = fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_ascii_whitespace().map(|f| f.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        // Spend a little CPU so that the count can be checked for sense.
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x > 0);
        assert!(cpu_ticks(&[me]).is_some());
        let rss = rss_bytes(&[me]).expect("VmRSS");
        assert!(rss > 100 * 1024, "{rss}");
        assert!(load_average().is_some());
        assert!(cpu_ticks(&[u32::MAX]).is_none());
    }
}
