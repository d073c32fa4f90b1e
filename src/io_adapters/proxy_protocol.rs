//! The PROXY protocol header (versions 1 and 2, as HAProxy, nginx and Envoy
//! send it) that a TCP load balancer puts at the start of a connection to
//! tell the server who the client is (D21).
//!
//! [`ProxyHeaderReader`] is incremental and never reads past the header:
//! [`ProxyHeaderReader::wanted`] says how many bytes may be read next
//! without taking any of the first message, so the bytes after the header
//! stay in the socket for the connection to read. It works a byte at a time
//! as well as in one read, on blocking and non-blocking sockets alike.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;
use std::time::{Duration, Instant};

use crate::io_adapters::transport::Transport;

/// The 12 bytes every version 2 header starts with.
const V2_SIGNATURE: &[u8; 12] = b"\r\n\r\n\0\r\nQUIT\n";
/// The fixed part of a version 2 header: signature, version and command,
/// family and protocol, length of the rest.
const V2_FIXED: usize = 16;
/// Version 2 address bytes this reader keeps: two IPv6 addresses and two
/// ports. Longer blocks (Unix addresses, TLVs) are read and dropped.
const V2_KEPT: usize = 36;
/// The longest version 1 line, CRLF included (the specification's bound).
const V1_MAX: usize = 107;
/// The shortest version 1 line: `PROXY UNKNOWN\r\n`. No header is shorter,
/// so this many bytes can always be read first.
const V1_MIN: usize = 15;

/// Reads one PROXY protocol header, incrementally.
#[derive(Debug, Clone)]
pub struct ProxyHeaderReader {
    buf: [u8; V1_MAX],
    len: usize,
    /// Version 2 bytes read beyond what `buf` keeps.
    skipped: usize,
}

impl Default for ProxyHeaderReader {
    fn default() -> Self {
        Self::new()
    }
}

/// What a complete header says about the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxiedPeer {
    /// The client's address, as the proxy saw it.
    Client(SocketAddr),
    /// No client address: a connection of the proxy's own (a health check,
    /// version 2 `LOCAL`), `UNKNOWN` (version 1), or a family other than
    /// TCP over IPv4 or IPv6. The socket's peer stands.
    Unknown,
}

/// A header that is not a valid PROXY protocol header: the connection is
/// closed without a response (D21).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyHeaderError {
    /// The connection does not start with either version's signature.
    NotProxy,
    /// A version 1 line that is malformed or longer than 107 bytes.
    BadV1,
    /// A version 2 header with an unknown version, command or a length too
    /// short for its addresses.
    BadV2,
}

impl fmt::Display for ProxyHeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProxyHeaderError::NotProxy => "the connection does not start with a PROXY protocol header",
            ProxyHeaderError::BadV1 => "malformed PROXY protocol version 1 header",
            ProxyHeaderError::BadV2 => "malformed PROXY protocol version 2 header",
        })
    }
}

impl std::error::Error for ProxyHeaderError {}

impl From<ProxyHeaderError> for io::Error {
    fn from(e: ProxyHeaderError) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, e)
    }
}

impl ProxyHeaderReader {
    /// A reader that has seen nothing yet.
    pub fn new() -> Self {
        ProxyHeaderReader {
            buf: [0; V1_MAX],
            len: 0,
            skipped: 0,
        }
    }

    fn is_v2(&self) -> bool {
        self.len > 0 && self.buf[0] == V2_SIGNATURE[0]
    }

    /// How many bytes the next read may take without reading past the
    /// header (at least 1 until the header is complete).
    pub fn wanted(&self) -> usize {
        if self.len < V1_MIN {
            return V1_MIN - self.len;
        }
        if self.is_v2() {
            if self.len < V2_FIXED {
                return V2_FIXED - self.len;
            }
            let total = V2_FIXED + usize::from(u16::from_be_bytes([self.buf[14], self.buf[15]]));
            return total.saturating_sub(self.len + self.skipped).max(1);
        }
        // Version 1: the line ends at CRLF, wherever that is. The shortest
        // line of the protocol named so far bounds what is surely header.
        let line = &self.buf[..self.len];
        let shortest: usize = if line.starts_with(b"PROXY TCP4 ") {
            // `PROXY TCP4 0.0.0.0 0.0.0.0 0 0\r\n`
            32
        } else if line.starts_with(b"PROXY TCP6 ") {
            // `PROXY TCP6 :: :: 0 0\r\n`
            22
        } else {
            0
        };
        shortest.saturating_sub(self.len).max(1)
    }

    /// Takes `bytes` (at most [`wanted`](Self::wanted) of them): `Ok(None)`
    /// while the header is incomplete, then what it says.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<Option<ProxiedPeer>, ProxyHeaderError> {
        while !bytes.is_empty() {
            let take = self.wanted().min(bytes.len());
            let (now, rest) = bytes.split_at(take);
            bytes = rest;
            if self.is_v2() && self.len >= V2_FIXED + V2_KEPT {
                self.skipped += now.len();
            } else {
                let room = self.buf.len() - self.len;
                let kept = now.len().min(room);
                self.buf[self.len..self.len + kept].copy_from_slice(&now[..kept]);
                self.len += kept;
                self.skipped += now.len() - kept;
            }
            if let Some(peer) = self.check()? {
                // Anything after the header is not ours; callers that read
                // no more than `wanted` never pass any.
                return Ok(Some(peer));
            }
        }
        Ok(None)
    }

    /// Validates what has arrived; the peer once the header is complete.
    fn check(&self) -> Result<Option<ProxiedPeer>, ProxyHeaderError> {
        let seen = &self.buf[..self.len];
        if seen.is_empty() {
            return Ok(None);
        }
        if seen[0] == V2_SIGNATURE[0] {
            let n = seen.len().min(V2_SIGNATURE.len());
            if seen[..n] != V2_SIGNATURE[..n] {
                return Err(ProxyHeaderError::NotProxy);
            }
            if seen.len() < V2_FIXED {
                return Ok(None);
            }
            return self.check_v2();
        }
        let n = seen.len().min(6);
        if seen[..n] != b"PROXY "[..n] {
            return Err(ProxyHeaderError::NotProxy);
        }
        match seen.iter().position(|&b| b == b'\n') {
            Some(end) => parse_v1(&seen[..=end]).map(Some),
            None if seen.len() >= V1_MAX => Err(ProxyHeaderError::BadV1),
            None => Ok(None),
        }
    }

    fn check_v2(&self) -> Result<Option<ProxiedPeer>, ProxyHeaderError> {
        let head = &self.buf[..V2_FIXED];
        let rest = usize::from(u16::from_be_bytes([head[14], head[15]]));
        // Version 2; command LOCAL (0) or PROXY (1).
        let command = match head[12] {
            0x20 => Command::Local,
            0x21 => Command::Proxy,
            _ => return Err(ProxyHeaderError::BadV2),
        };
        let needed = match head[13] >> 4 {
            1 => 12,
            2 => 36,
            _ => 0,
        };
        if command == Command::Proxy && rest < needed {
            return Err(ProxyHeaderError::BadV2);
        }
        if self.len + self.skipped < V2_FIXED + rest {
            return Ok(None);
        }
        if command == Command::Local {
            return Ok(Some(ProxiedPeer::Unknown));
        }
        let a = &self.buf[V2_FIXED..];
        // Only TCP (protocol 1) carries a client address a server can use.
        let peer = match (head[13] >> 4, head[13] & 0x0f) {
            (1, 1) => {
                let ip = Ipv4Addr::new(a[0], a[1], a[2], a[3]);
                ProxiedPeer::Client(SocketAddr::new(ip.into(), u16::from_be_bytes([a[8], a[9]])))
            }
            (2, 1) => {
                let mut octets = [0; 16];
                octets.copy_from_slice(&a[..16]);
                let ip = Ipv6Addr::from(octets);
                ProxiedPeer::Client(SocketAddr::new(ip.into(), u16::from_be_bytes([a[32], a[33]])))
            }
            _ => ProxiedPeer::Unknown,
        };
        Ok(Some(peer))
    }

    /// Reads the header from `io` until it is complete, `io` would block
    /// (`Ok(None)`: call again when it is readable), or fails. An end of
    /// stream before the header's end is `UnexpectedEof`, an invalid header
    /// `InvalidData`.
    pub fn read_from<R: io::Read + ?Sized>(&mut self, io: &mut R) -> io::Result<Option<ProxiedPeer>> {
        let mut chunk = [0; V1_MAX];
        loop {
            let want = self.wanted().min(chunk.len());
            match io.read(&mut chunk[..want]) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    if let Some(peer) = self.feed(&chunk[..n])? {
                        return Ok(Some(peer));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    Local,
    Proxy,
}

/// Parses one version 1 line, CRLF included.
fn parse_v1(line: &[u8]) -> Result<ProxiedPeer, ProxyHeaderError> {
    let bad = ProxyHeaderError::BadV1;
    let line = line.strip_suffix(b"\r\n").ok_or(bad)?;
    let line = std::str::from_utf8(line).map_err(|_| bad)?;
    let mut fields = line.split(' ');
    let (Some("PROXY"), Some(family)) = (fields.next(), fields.next()) else {
        return Err(bad);
    };
    if family == "UNKNOWN" {
        // The rest of the line, if any, is to be ignored.
        return Ok(ProxiedPeer::Unknown);
    }
    let (Some(src), Some(dst), Some(src_port), Some(dst_port), None) = (
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
        fields.next(),
    ) else {
        return Err(bad);
    };
    // Both addresses must be of the family named, both ports decimal
    // numbers of at most 16 bits without a sign.
    let ip: IpAddr = match family {
        "TCP4" => {
            Ipv4Addr::from_str(dst).map_err(|_| bad)?;
            Ipv4Addr::from_str(src).map_err(|_| bad)?.into()
        }
        "TCP6" => {
            Ipv6Addr::from_str(dst).map_err(|_| bad)?;
            Ipv6Addr::from_str(src).map_err(|_| bad)?.into()
        }
        _ => return Err(bad),
    };
    port(dst_port)?;
    let port = port(src_port)?;
    Ok(ProxiedPeer::Client(SocketAddr::new(ip, port)))
}

/// A version 1 port: decimal digits only, at most 65535.
fn port(text: &str) -> Result<u16, ProxyHeaderError> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ProxyHeaderError::BadV1);
    }
    text.parse().map_err(|_| ProxyHeaderError::BadV1)
}

/// Reads the header from a blocking `io`, within `limit` in all (D21: a
/// silent or slow peer cannot hold the connection longer than it could
/// hold a message, D3). Each read waits `slice` at most, after which
/// `give_up` is asked whether to stop (a server shutting down says yes:
/// the wait ends with `Interrupted`). Leaves `io`'s timeout unset.
pub fn read_blocking<T: Transport + ?Sized>(
    io: &mut T,
    limit: Duration,
    slice: Duration,
    give_up: impl Fn() -> bool,
) -> io::Result<ProxiedPeer> {
    let deadline = Instant::now() + limit;
    let mut reader = ProxyHeaderReader::new();
    let result = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break Err(io::ErrorKind::TimedOut.into());
        }
        if give_up() {
            break Err(io::ErrorKind::Interrupted.into());
        }
        io.set_timeout(Some(left.min(slice).max(Duration::from_millis(1))))?;
        match reader.read_from(io) {
            Ok(Some(peer)) => break Ok(peer),
            // A timed-out read: the deadline and `give_up` decide.
            Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
            Err(e) => break Err(e),
        }
    };
    io.set_timeout(None)?;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(bytes: &[u8]) -> Result<Option<ProxiedPeer>, ProxyHeaderError> {
        let mut r = ProxyHeaderReader::new();
        r.feed(bytes)
    }

    #[test]
    fn v1_unknown_is_the_shortest_header() {
        assert_eq!(whole(b"PROXY UNKNOWN\r\n"), Ok(Some(ProxiedPeer::Unknown)));
    }

    #[test]
    fn v1_never_asks_past_the_line() {
        let line = b"PROXY TCP4 192.0.2.1 192.0.2.2 5000 80\r\n{";
        let mut r = ProxyHeaderReader::new();
        let mut at = 0;
        loop {
            let n = r.wanted();
            assert!(at + n < line.len(), "asked past the header at {at}");
            if let Some(peer) = r.feed(&line[at..at + n]).unwrap() {
                assert_eq!(peer, ProxiedPeer::Client("192.0.2.1:5000".parse().unwrap()));
                break;
            }
            at += n;
        }
    }

    #[test]
    fn v1_rejects_bad_lines() {
        for bad in [
            &b"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n"[..],
            b"PROXY TCP4 ::1 ::1 1 2\r\n",
            b"PROXY TCP9 1.2.3.4 5.6.7.8 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 70000 2\r\n",
            b"PROXY TCP4 1.2.3.4 nowhere 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 -2\r\n",
        ] {
            assert_eq!(whole(bad), Err(ProxyHeaderError::BadV1), "{bad:?}");
        }
        assert_eq!(whole(&[b'P'; 200]), Err(ProxyHeaderError::NotProxy));
        let mut long = b"PROXY UNKNOWN".to_vec();
        long.resize(120, b'x');
        assert_eq!(whole(&long), Err(ProxyHeaderError::BadV1));
    }

    #[test]
    fn v2_skips_tlvs_it_does_not_keep() {
        let mut h = V2_SIGNATURE.to_vec();
        h.extend([0x21, 0x11, 0, 12 + 50]);
        h.extend([10, 0, 0, 1, 10, 0, 0, 2, 0x13, 0x88, 0, 80]);
        h.extend([0xEE; 50]);
        assert_eq!(
            whole(&h),
            Ok(Some(ProxiedPeer::Client("10.0.0.1:5000".parse().unwrap())))
        );
    }

    #[test]
    fn v2_rejects_unknown_version_and_short_blocks() {
        let mut h = V2_SIGNATURE.to_vec();
        h.extend([0x31, 0x11, 0, 12]);
        assert_eq!(whole(&h), Err(ProxyHeaderError::BadV2));
        let mut h = V2_SIGNATURE.to_vec();
        h.extend([0x21, 0x21, 0, 12]);
        assert_eq!(whole(&h), Err(ProxyHeaderError::BadV2));
    }
}
