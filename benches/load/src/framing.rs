//! Where each response ends on a connection, and whether it is a success.
//!
//! jsontp responses are framed by the crate's own scanner (D1: the object
//! is the frame), the one the servers' connection machine uses, and in the
//! mode the crate's own client reads with (D19): the text of `body.content`
//! comes out in runs, found by a search for quotes alone, and is taken out
//! of the buffer instead of being classified byte by byte. A response that
//! carries a 300 KiB file then costs the generator a quote search, not a
//! full scan, so that on large files the server and not the generator is
//! what limits the rate; and the buffer holds a response's head and tail,
//! whatever its content's size. HTTP/1.1 responses are framed by
//! `Content-Length`, or by their chunks when nginx compresses on the fly
//! and so cannot know the length in advance.

use std::ops::Range;

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

/// What [`Inbound::next`] found at the front of the unframed bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Framed {
    /// A whole response, now taken from the buffer; `ok` when it is a 200.
    Response {
        /// Bytes the response took on the wire, from the end of the one
        /// before (whitespace between them included), content included.
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

/// The buffer every connection reads into, whatever its protocol: HTTP's
/// must hold a whole 300 KiB response, and a jsontp connection, whose
/// buffer holds little more than a response's head once the content is
/// taken out, must not read in smaller pieces (more system calls and
/// wake-ups for the same bytes) than an HTTP one. Its pages are touched
/// only as far as reads fill them.
pub const READ_ROOM: usize = 512 * 1024;

/// An HTTP head longer than this is taken for garbage.
const MAX_HTTP_HEAD: usize = 16 * 1024;

/// One connection's received bytes, and where its responses end in them.
#[derive(Debug)]
pub struct Inbound {
    framer: Framer,
    unread: Unread,
}

impl Inbound {
    /// Nothing received yet on a connection that speaks `protocol`; the
    /// buffer starts at `capacity` bytes.
    pub fn new(protocol: Protocol, capacity: usize) -> Inbound {
        Inbound {
            framer: Framer::new(protocol),
            unread: Unread {
                buf: vec![0; capacity.max(1)],
                start: 0,
                filled: 0,
            },
        }
    }

    /// The free space after the received bytes, to read into. When there is
    /// none, the unframed bytes move to the buffer's front, or the buffer
    /// doubles when they fill it: for an HTTP response larger than it, or a
    /// jsontp one whose bytes besides its content (taken out) are.
    pub fn room(&mut self) -> &mut [u8] {
        let unread = &mut self.unread;
        if unread.filled == unread.buf.len() {
            if unread.start > 0 {
                unread.buf.copy_within(unread.start..unread.filled, 0);
                unread.filled -= unread.start;
                unread.start = 0;
            } else {
                let bigger = unread.buf.len() * 2;
                unread.buf.resize(bigger, 0);
            }
        }
        &mut unread.buf[unread.filled..]
    }

    /// `n` bytes were read into [`room`](Self::room).
    pub fn received(&mut self, n: usize) {
        self.unread.filled += n;
    }

    /// Bytes received and not yet part of a whole response, less any
    /// content already taken out.
    pub fn unframed(&self) -> usize {
        self.unread.filled - self.unread.start
    }

    /// The next whole response in the unframed bytes, taken from them.
    /// After [`Framed::Response`] call again: more may be buffered.
    pub fn next(&mut self) -> Framed {
        self.framer.next(&mut self.unread)
    }
}

/// A buffer whose bytes `start..filled` are received and not yet framed.
#[derive(Debug)]
struct Unread {
    buf: Vec<u8>,
    start: usize,
    filled: usize,
}

impl Unread {
    fn bytes(&self) -> &[u8] {
        &self.buf[self.start..self.filled]
    }

    /// The first `n` unframed bytes make a response.
    fn take(&mut self, n: usize) {
        self.start += n;
        if self.start == self.filled {
            self.start = 0;
            self.filled = 0;
        }
    }

    /// Takes `range` (offsets into [`bytes`](Self::bytes)) out, so that the
    /// bytes before and after it meet. The shorter side moves: usually the
    /// range reaches the end and nothing does; with small responses
    /// pipelined the bytes before it (the message's head) are the fewer.
    fn cut(&mut self, range: Range<usize>) {
        let (from, to) = (self.start + range.start, self.start + range.end);
        if self.filled - to <= range.start {
            self.buf.copy_within(to..self.filled, from);
            self.filled -= range.len();
        } else {
            self.buf.copy_within(self.start..from, self.start + range.len());
            self.start += range.len();
        }
    }
}

/// Finds response boundaries for one connection.
#[derive(Debug)]
enum Framer {
    /// jsontp: the crate's incremental scanner, with the content bytes it
    /// had taken out of the current response.
    Jsontp { scanner: Scanner, content: usize },
    /// HTTP/1.1: no state kept between responses but how many bytes the
    /// current one needs before it is worth looking again.
    Http {
        /// Fewer buffered bytes than this cannot make a whole response.
        need: usize,
    },
}

impl Framer {
    /// A framer at the start of a connection.
    fn new(protocol: Protocol) -> Framer {
        match protocol {
            Protocol::Jsontp => Framer::Jsontp {
                scanner: Scanner::new().with_content_runs(),
                content: 0,
            },
            Protocol::Http => Framer::Http { need: 0 },
        }
    }

    /// Takes the next whole response from `unread`, if there is one.
    fn next(&mut self, unread: &mut Unread) -> Framed {
        match self {
            Framer::Jsontp { scanner, content } => loop {
                let buf = unread.bytes();
                match scanner.scan(buf) {
                    Scan::Partial => return Framed::Partial,
                    Scan::Content(run) => {
                        // The scan goes on at the run's start once it is out.
                        *content += run.range().len();
                        unread.cut(run.range());
                    }
                    Scan::Complete(frame) => {
                        let message = &buf[frame.range()];
                        let head = &message[..message.len().min(JSONTP_STATUS_WITHIN)];
                        let ok = memmem::find(head, br#""code":200,"#).is_some();
                        let end = frame.end();
                        unread.take(end);
                        return Framed::Response {
                            len: end + std::mem::take(content),
                            ok,
                        };
                    }
                    Scan::Error { at, .. } => {
                        return Framed::Error(format!(
                            "not a jsontp message at byte {at}: {:?}",
                            String::from_utf8_lossy(&buf[at..buf.len().min(at + 40)])
                        ));
                    }
                    Scan::TooLarge { .. } => return Framed::Error("a jsontp message past the limit".into()),
                    // Only with a depth limit, which is not set; the scan goes on.
                    Scan::TooDeep { .. } => {}
                }
            },
            Framer::Http { need } => {
                let buf = unread.bytes();
                if buf.len() < *need {
                    return Framed::Partial;
                }
                match http_response(buf) {
                    Ok(Some(framed)) => {
                        *need = 0;
                        if let Framed::Response { len, .. } = framed {
                            unread.take(len);
                        }
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

    /// Feeds `pieces` in turn, each read into [`Inbound::room`] in as many
    /// reads as it takes, framing after each read; returns every response
    /// found, and the inbound for a look at its buffer.
    fn frame_pieces<'a>(
        protocol: Protocol,
        capacity: usize,
        pieces: impl IntoIterator<Item = &'a [u8]>,
    ) -> (Vec<(usize, bool)>, Inbound) {
        let mut inbound = Inbound::new(protocol, capacity);
        let mut found = Vec::new();
        for mut piece in pieces {
            while !piece.is_empty() {
                let room = inbound.room();
                let n = room.len().min(piece.len());
                room[..n].copy_from_slice(&piece[..n]);
                inbound.received(n);
                piece = &piece[n..];
                loop {
                    match inbound.next() {
                        Framed::Response { len, ok } => found.push((len, ok)),
                        Framed::Partial => break,
                        Framed::Error(e) => panic!("{e}"),
                    }
                }
            }
        }
        (found, inbound)
    }

    fn frame_all(protocol: Protocol, wire: &[u8], step: usize) -> Vec<(usize, bool)> {
        frame_pieces(protocol, 16 * 1024, wire.chunks(step)).0
    }

    /// A response as `jsontp serve` writes it, with `content` as its
    /// `body.content` text.
    fn response(code: u16, content: &str) -> Vec<u8> {
        format!(
            r#"{{"jsontp":"1.0","type":"response","status":{{"code":{code},"formal-message":"OK","human-message":"x"}},"resource":"/","headers":{{}},"body":{{"content":"{content}","encoding":"identity"}}}}"#
        )
        .into_bytes()
    }

    /// Escaped quotes and backslashes at the run's both ends and between,
    /// a brace and a status of its own: none of it may end the response.
    const TRICKY: &str = r#"\"}{\"code\":404, \\\" a \\\\\"\\ \\"#;

    #[test]
    fn a_jsontp_response_cut_anywhere_is_one_ok_response() {
        // Longer than the head before it, so that a head moved to the wrong
        // place loses the status.
        let one = response(200, &TRICKY.repeat(4));
        let len = one.len();
        for i in 0..=len {
            let (found, _) = frame_pieces(Protocol::Jsontp, 16, [&one[..i], &one[i..]]);
            assert_eq!(found, [(len, true)], "cut at {i}");
            for j in i..=len {
                let pieces = [&one[..i], &one[i..j], &one[j..]];
                let (found, _) = frame_pieces(Protocol::Jsontp, 64, pieces);
                assert_eq!(found, [(len, true)], "cut at {i} and {j}");
            }
        }
        // A second response behind the first, each piece read whole: the
        // first's content is taken out by moving its head, not what follows.
        let two = [&one[..], b"\n", &one].concat();
        for i in 0..=two.len() {
            let (found, _) = frame_pieces(Protocol::Jsontp, 4096, [&two[..i], &two[i..]]);
            assert_eq!(found, [(len, true), (len + 1, true)], "two, cut at {i}");
        }
    }

    #[test]
    fn jsontp_responses_split_anywhere() {
        let ok = response(200, r#"}{\"code\":404,"#);
        let missing = br#"{"jsontp":"1.0","type":"response","status":{"code":404,"formal-message":"Not Found","human-message":"\"code\":200,"},"resource":"/","headers":{},"body":{"content":"","encoding":"identity"}}"#;
        let mut wire = Vec::new();
        for part in [&ok[..], b"\n", missing, b"\n", &ok, b"\n"] {
            wire.extend_from_slice(part);
        }
        // Each response's length counts the newline before it.
        let expected = [(ok.len(), true), (missing.len() + 1, false), (ok.len() + 1, true)];
        for step in [1, 7, wire.len()] {
            assert_eq!(frame_all(Protocol::Jsontp, &wire, step), expected, "step {step}");
        }
    }

    #[test]
    fn a_large_content_never_grows_the_buffer() {
        // 300 KiB of lines, each ending in an escape, as a text file's are.
        let content = "a line of text, as a file has them\\n".repeat(300 * 1024 / 36);
        let wire = [response(200, &content), b"\n".to_vec(), response(200, &content)].concat();
        for step in [1000, 16 * 1024, 100_000] {
            let (found, inbound) = frame_pieces(Protocol::Jsontp, 16 * 1024, wire.chunks(step));
            let len = response(200, &content).len();
            assert_eq!(found, [(len, true), (len + 1, true)], "step {step}");
            assert_eq!(inbound.unread.buf.len(), 16 * 1024, "step {step}");
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
        let mut inbound = Inbound::new(Protocol::Http, 64);
        let wire = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nHello";
        inbound.room()[..wire.len()].copy_from_slice(wire);
        inbound.received(wire.len());
        let found = inbound.next();
        assert!(matches!(found, Framed::Error(_)), "{found:?}");
    }
}
