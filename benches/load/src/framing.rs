//! Where each response ends on a connection, and whether it is a success.
//!
//! jsontp responses are framed by the crate's own scanner (D1: the object
//! is the frame), the one the servers' connection machine uses; HTTP/1.1
//! responses by `Content-Length`, or by their chunks when nginx compresses
//! on the fly and so cannot know the length in advance.

use memchr::memmem;

// The one place this tool names the crate's framing scanner.
use jsontp_protocol::message::framing::{Scan, Scanner};

/// The protocol a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// jsontp: one JSON object per message.
    Jsontp,
    /// HTTP/1.1.
    Http,
}

/// What [`Framer::next`] found at the front of the unread bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framed {
    /// A whole response, `len` bytes long; `ok` when it is a 200.
    Response {
        /// Bytes the response takes, from the front of the buffer given.
        len: usize,
        /// The status is 200.
        ok: bool,
    },
    /// Not a whole response yet.
    Partial,
    /// Bytes that are no response: the connection is useless from here on.
    Error(String),
}

/// How many bytes of a jsontp response's start to search for the status:
/// the status object comes right after `jsontp` and `type`.
const JSONTP_STATUS_WITHIN: usize = 96;

/// An HTTP head longer than this is taken for garbage.
const MAX_HTTP_HEAD: usize = 16 * 1024;

/// Finds response boundaries for one connection.
#[derive(Debug)]
pub enum Framer {
    /// jsontp: the crate's incremental scanner.
    Jsontp(Scanner),
    /// HTTP/1.1: no state kept between responses but how many bytes the
    /// current one needs before it is worth looking again.
    Http {
        /// Fewer buffered bytes than this cannot make a whole response.
        need: usize,
    },
}

impl Framer {
    /// A framer at the start of a connection.
    pub fn new(protocol: Protocol) -> Framer {
        match protocol {
            Protocol::Jsontp => Framer::Jsontp(Scanner::new()),
            Protocol::Http => Framer::Http { need: 0 },
        }
    }

    /// Looks at `buf`: every byte received and not yet taken by an earlier
    /// [`Framed::Response`]. After a response, call again with the bytes
    /// after it; after [`Framed::Partial`], with the same bytes and more.
    pub fn next(&mut self, buf: &[u8]) -> Framed {
        match self {
            Framer::Jsontp(scanner) => match scanner.scan(buf) {
                Scan::Partial => Framed::Partial,
                Scan::Complete(frame) => {
                    let end = frame.end();
                    let message = &buf[frame.range()];
                    let head = &message[..message.len().min(JSONTP_STATUS_WITHIN)];
                    Framed::Response {
                        len: end,
                        ok: memmem::find(head, br#""code":200,"#).is_some(),
                    }
                }
                Scan::Error { at, .. } => Framed::Error(format!(
                    "not a jsontp message at byte {at}: {:?}",
                    String::from_utf8_lossy(&buf[at..buf.len().min(at + 40)])
                )),
                Scan::TooLarge { .. } => Framed::Error("a jsontp message past the limit".into()),
                // Content runs are only reported when asked for.
                Scan::Content(_) | Scan::TooDeep { .. } => Framed::Partial,
            },
            Framer::Http { need } => {
                if buf.len() < *need {
                    return Framed::Partial;
                }
                match http_response(buf) {
                    Ok(Some(framed)) => {
                        *need = 0;
                        framed
                    }
                    Ok(None) => {
                        *need = buf.len() + 1;
                        Framed::Partial
                    }
                    Err(e) => Framed::Error(e),
                }
            }
        }
    }
}

/// One HTTP/1.1 response at the front of `buf`: `Ok(None)` when it is not
/// all there yet.
fn http_response(buf: &[u8]) -> Result<Option<Framed>, String> {
    let Some(head_end) = memmem::find(buf, b"\r\n\r\n") else {
        if buf.len() > MAX_HTTP_HEAD {
            return Err("an HTTP head without end".into());
        }
        return Ok(None);
    };
    let head = &buf[..head_end];
    let body_start = head_end + 4;
    if !head.starts_with(b"HTTP/1.") {
        return Err(format!(
            "not an HTTP response: {:?}",
            String::from_utf8_lossy(&head[..head.len().min(40)])
        ));
    }
    let ok = head.get(8..13) == Some(b" 200 ".as_slice()) || head.get(8..) == Some(b" 200".as_slice());
    let mut content_length = None;
    let mut chunked = false;
    for line in head.split(|&b| b == b'\n').skip(1) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = memchr::memchr(b':', line) else {
            continue;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
                .ok_or("a content-length that is no number")?;
            content_length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = value.eq_ignore_ascii_case(b"chunked");
        }
    }
    if chunked {
        return Ok(chunked_end(buf, body_start)?.map(|len| Framed::Response { len, ok }));
    }
    let Some(length) = content_length else {
        return Err("an HTTP response with neither content-length nor chunks".into());
    };
    let len = body_start + length;
    Ok((buf.len() >= len).then_some(Framed::Response { len, ok }))
}

/// Where a chunked body that starts at `at` ends (after its last chunk and
/// an empty trailer), if it is all in `buf`.
fn chunked_end(buf: &[u8], mut at: usize) -> Result<Option<usize>, String> {
    loop {
        let Some(line_len) = memmem::find(&buf[at..], b"\r\n") else {
            return Ok(None);
        };
        let line = &buf[at..at + line_len];
        let hex = line.split(|&b| b == b';').next().unwrap_or(line).trim_ascii();
        let size = std::str::from_utf8(hex)
            .ok()
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .ok_or("a chunk size that is no number")?;
        at += line_len + 2;
        if size == 0 {
            // Trailer fields (none from the servers here), then CRLF.
            let rest = &buf[at..];
            if rest.len() < 2 {
                return Ok(None);
            }
            if rest.starts_with(b"\r\n") {
                return Ok(Some(at + 2));
            }
            return Ok(memmem::find(rest, b"\r\n\r\n").map(|i| at + i + 4));
        }
        at += size + 2;
        if buf.len() < at {
            return Ok(None);
        }
        if &buf[at - 2..at] != b"\r\n" {
            return Err("a chunk not followed by CRLF".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_all(protocol: Protocol, wire: &[u8], step: usize) -> Vec<(usize, bool)> {
        let mut framer = Framer::new(protocol);
        let mut found = Vec::new();
        let mut taken = 0;
        let mut have = 0;
        while have < wire.len() {
            have = (have + step).min(wire.len());
            loop {
                match framer.next(&wire[taken..have]) {
                    Framed::Response { len, ok } => {
                        found.push((len, ok));
                        taken += len;
                    }
                    Framed::Partial => break,
                    Framed::Error(e) => panic!("{e}"),
                }
            }
        }
        found
    }

    #[test]
    fn jsontp_responses_split_anywhere() {
        let ok = br#"{"jsontp":"1.0","type":"response","status":{"code":200,"formal-message":"OK","human-message":"x"},"resource":"/","headers":{},"body":{"content":"}{\"code\":404,","encoding":"identity"}}"#;
        let missing = br#"{"jsontp":"1.0","type":"response","status":{"code":404,"formal-message":"Not Found","human-message":"\"code\":200,"},"resource":"/","headers":{},"body":{"content":"","encoding":"identity"}}"#;
        let mut wire = Vec::new();
        for part in [&ok[..], b"\n", missing, b"\n", ok, b"\n"] {
            wire.extend_from_slice(part);
        }
        for step in [1, 7, wire.len()] {
            let found = frame_all(Protocol::Jsontp, &wire, step);
            let oks: Vec<bool> = found.iter().map(|f| f.1).collect();
            assert_eq!(oks, [true, false, true], "step {step}");
        }
    }

    #[test]
    fn http_by_length_and_by_chunks() {
        let mut wire = Vec::new();
        wire.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, world!");
        wire.extend_from_slice(b"HTTP/1.1 404 Not Found\r\ncontent-length: 3\r\n\r\nno!");
        wire.extend_from_slice(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHello\r\n8;x=y\r\n, world!\r\n0\r\n\r\n",
        );
        for step in [1, 5, wire.len()] {
            let found = frame_all(Protocol::Http, &wire, step);
            assert_eq!(found, [(52, true), (48, false), (79, true)], "step {step}");
        }
    }

    #[test]
    fn http_without_length_is_an_error() {
        let mut framer = Framer::new(Protocol::Http);
        let found = framer.next(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nHello");
        assert!(matches!(found, Framed::Error(_)), "{found:?}");
    }
}
