//! Memory per idle keep-alive connection: open connections in steps, each
//! after one exchange, and read the server's resident memory at each step.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::framing::{Framed, Inbound};
use crate::procfs;
use crate::servers::{Running, ServerKind};

/// Resident memory against idle connections, and the line through it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdleMemory {
    /// The server.
    pub server: ServerKind,
    /// (connections, resident bytes) at each step.
    pub points: Vec<(usize, u64)>,
    /// Least-squares slope: bytes per idle connection.
    pub bytes_per_connection: f64,
}

/// How long the server gets to settle after a step before its memory is
/// read.
const SETTLE: Duration = Duration::from_millis(300);

/// Unframed bytes past which a server's answer is taken for no response.
const MAX_UNFRAMED: usize = 64 * 1024;

/// Opens connections to `server` up to each count of `steps` (ascending),
/// each carrying one `request` and its response before it goes idle, and
/// reads the server's resident memory at every step.
pub fn measure(server: &Running, request: &[u8], steps: &[usize]) -> io::Result<IdleMemory> {
    let mut open: Vec<TcpStream> = Vec::with_capacity(steps.last().copied().unwrap_or(0));
    let mut points = Vec::with_capacity(steps.len());
    for &step in steps {
        while open.len() < step {
            let stream = one_exchange(server, request).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "{} after {} idle connections: {e}",
                        server.kind.name(),
                        open.len()
                    ),
                )
            })?;
            open.push(stream);
        }
        std::thread::sleep(SETTLE);
        let rss = procfs::rss_bytes(&server.pids())
            .ok_or_else(|| io::Error::other(format!("no VmRSS for {}", server.kind.name())))?;
        points.push((step, rss));
    }
    // Each connection must still be open: a server that closed some would
    // look cheaper than it is.
    let mut probe = [0u8; 1];
    let mut closed = 0;
    for stream in &open {
        stream.set_nonblocking(true)?;
        match (&*stream).read(&mut probe) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            _ => closed += 1,
        }
    }
    if closed > 0 {
        return Err(io::Error::other(format!(
            "{} closed {closed} of {} idle connections during the measurement",
            server.kind.name(),
            open.len()
        )));
    }
    Ok(IdleMemory {
        server: server.kind,
        bytes_per_connection: slope(&points),
        points,
    })
}

/// Connects, sends `request`, reads its one response.
fn one_exchange(server: &Running, request: &[u8]) -> io::Result<TcpStream> {
    let mut stream = TcpStream::connect_timeout(&server.addr, Duration::from_secs(5))?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.write_all(request)?;
    let mut inbound = Inbound::new(server.kind.protocol(), 16 * 1024);
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if inbound.unframed() >= MAX_UNFRAMED || Instant::now() > until {
            return Err(io::Error::other("no whole response"));
        }
        let n = stream.read(inbound.room())?;
        if n == 0 {
            return Err(io::Error::other("closed before the response"));
        }
        inbound.received(n);
        match inbound.next() {
            Framed::Response { ok: true, .. } => return Ok(stream),
            Framed::Response { ok: false, .. } => return Err(io::Error::other("not a 200")),
            Framed::Partial => {}
            Framed::Error(e) => return Err(io::Error::other(e)),
        }
    }
}

/// Least-squares slope of y over x.
pub fn slope(points: &[(usize, u64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mean_x = points.iter().map(|p| p.0 as f64).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1 as f64).sum::<f64>() / n;
    let mut num = 0.0;
    let mut den = 0.0;
    for &(x, y) in points {
        num += (x as f64 - mean_x) * (y as f64 - mean_y);
        den += (x as f64 - mean_x).powi(2);
    }
    if den == 0.0 { 0.0 } else { num / den }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line_and_of_noise_around_it() {
        assert_eq!(slope(&[(1, 1000), (11, 2000)]), 100.0);
        let s = slope(&[(0, 100), (10, 1090), (20, 2110), (30, 3000)]);
        assert!((s - 97.0).abs() < 3.0, "{s}");
        assert_eq!(slope(&[(5, 1)]), 0.0);
    }
}
