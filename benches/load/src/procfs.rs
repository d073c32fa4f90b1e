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

/// CPU time of processes, every thread included, in clock ticks: `utime`
/// and `stime`, fields 14 and 15 of `/proc/PID/stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// In user space: the process's own code.
    pub user: u64,
    /// In the kernel on the process's behalf: its system calls.
    pub system: u64,
}

impl CpuTicks {
    /// User plus system.
    pub fn total(self) -> u64 {
        self.user + self.system
    }

    /// The ticks spent since `earlier`, a reading of the same processes.
    pub fn since(self, earlier: CpuTicks) -> CpuTicks {
        CpuTicks {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

/// The CPU time of the processes together; `None` if one cannot be read.
pub fn cpu_ticks(pids: &[u32]) -> Option<CpuTicks> {
    pids.iter().try_fold(CpuTicks::default(), |sum, &pid| {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let one = parse_stat(&stat)?;
        Some(CpuTicks {
            user: sum.user + one.user,
            system: sum.system + one.system,
        })
    })
}

/// `utime` and `stime` of one `/proc/PID/stat` line.
fn parse_stat(stat: &str) -> Option<CpuTicks> {
    // The command name, field 2, is in parentheses and may hold spaces.
    let after_name = stat.get(stat.rfind(')')? + 2..)?;
    let mut fields = after_name.split_ascii_whitespace();
    // `after_name` starts at field 3 (state): utime is field 14.
    let user = fields.nth(11)?.parse().ok()?;
    let system = fields.next()?.parse().ok()?;
    Some(CpuTicks { user, system })
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

    #[test]
    fn parses_user_and_system_apart() {
        // A command name with a space and a parenthesis of its own.
        let stat = "4242 (a) b) S 1 4242 4242 0 -1 4194560 900 0 0 0 37 125 0 0 20 0 3 0 99 1000 200";
        let ticks = parse_stat(stat).expect("a stat line");
        assert_eq!(
            ticks,
            CpuTicks {
                user: 37,
                system: 125
            }
        );
        assert_eq!(ticks.total(), 162);
        let later = CpuTicks {
            user: 40,
            system: 130,
        };
        assert_eq!(later.since(ticks), CpuTicks { user: 3, system: 5 });
        assert!(parse_stat("4242 (cut short) S 1").is_none());
    }
}
