//! What went over the connection: the `-vv` echo, the `-v` head of the
//! answer read as its bytes arrive, and the first bytes received, read
//! when the exchange fails to say why.

use std::io::{self, Write};

use jsontp_protocol::io_adapters::client::Direction;
use jsontp_protocol::message::framing::{Scan, Scanner};
use jsontp_protocol::message::{MessageLimits, Response, Validation, parse_response};

use super::envelope::{print_continue, print_head};

/// How much of the received bytes is kept: enough for the first bytes of
/// another protocol's answer (a TLS record, an HTTP status line, an HTML
/// page) after some whitespace. A download is not copied past it.
const KEPT: usize = 512;

/// The first bytes received, up to [`KEPT`], the `-vv` echo and the `-v`
/// head.
pub struct Wire {
    received: Vec<u8>,
    /// `-vv`: echo every byte on stderr.
    echo: Option<RawEcho>,
    /// `-v`: the answer's head, shown on stderr as soon as it is read.
    head: Head,
    /// How the head is read: as the client reads the whole answer.
    validation: Validation,
    limits: MessageLimits,
}

/// `-v`, in curl's order: the answer's head (status line, headers, body
/// keys) on stderr before any of its content, downloads that stream
/// included. A sender writes `body` last and `content` last in it (D19),
/// so the head is whole when the content starts: it is read from the bytes
/// as they arrive, before the client hands over the first piece.
pub enum Head {
    /// Not asked for (no `-v`).
    Off,
    /// Reading the answer: the bytes of the message being read (content
    /// left out), and where in the answer.
    Reading {
        scanner: Scanner,
        bytes: Vec<u8>,
        at: Point,
    },
    /// Shown on stderr.
    Shown,
    /// Not readable before the content (the content came before its
    /// encoding, or the bytes are not a response this client reads): the
    /// head is shown from the whole answer, the content held until then.
    /// `continued`: a `100 Continue` was shown before.
    Unknown { continued: bool },
}

/// Where the reading of an answer is (D10: a `100 Continue` may come
/// before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// At the first message.
    First,
    /// A `100 Continue` was shown; at the next message.
    AfterContinue,
    /// A `100 Continue` was shown from what came before its content;
    /// reading on to its end.
    InContinue,
}

impl Wire {
    /// A recorder; `echo` adds the `-vv` trace on stderr, `head` the `-v`
    /// head, read with this validation and these limits.
    pub fn new(echo: bool, head: bool, validation: Validation, limits: MessageLimits) -> Wire {
        Wire {
            received: Vec::new(),
            echo: echo.then(RawEcho::default),
            head: if head {
                Head::Reading {
                    scanner: Scanner::with_limit(limits.max_message_bytes).with_content_runs(),
                    bytes: Vec::new(),
                    at: Point::First,
                }
            } else {
                Head::Off
            },
            validation,
            limits,
        }
    }

    /// Takes bytes going one way or the other.
    pub fn on_bytes(&mut self, direction: Direction, bytes: &[u8]) {
        if let Some(echo) = &mut self.echo {
            echo.show(direction, bytes);
        }
        if direction == Direction::Received {
            let room = KEPT - self.received.len();
            self.received.extend_from_slice(&bytes[..bytes.len().min(room)]);
            self.read_head(bytes);
        }
    }

    /// Where the `-v` head is.
    pub fn head(&self) -> &Head {
        &self.head
    }

    /// Reads received bytes towards the answer's head; shows a
    /// `100 Continue` and the head on stderr as soon as each is read.
    fn read_head(&mut self, data: &[u8]) {
        let Head::Reading { scanner, bytes, at } = &mut self.head else {
            return;
        };
        bytes.extend_from_slice(data);
        let head = loop {
            let found = scanner.scan(bytes);
            let message = match found {
                Scan::Partial => {
                    // Whitespace between messages is not kept.
                    let idle = scanner.idle_prefix();
                    bytes.drain(..idle);
                    scanner.drop_prefix(idle);
                    return;
                }
                Scan::Complete(frame) => {
                    let message = bytes[frame.range()].to_vec();
                    bytes.drain(..frame.end());
                    if *at == Point::InContinue {
                        *at = Point::AfterContinue;
                        continue;
                    }
                    read(&message, self.validation, &self.limits)
                }
                // The content starts: what came before it is the head, as
                // a message whose content is `""`. The content's text
                // leaves the buffer, as the scanner expects.
                Scan::Content(run) => {
                    let head =
                        (*at != Point::InContinue && run.is_first() && run.encoding().is_some()).then(|| {
                            let mut head = bytes[scanner.idle_prefix()..run.start()].to_vec();
                            head.extend_from_slice(b"\"}}");
                            head
                        });
                    bytes.drain(run.range());
                    match head {
                        Some(head) => read(&head, self.validation, &self.limits),
                        None if *at == Point::InContinue => continue,
                        None => None,
                    }
                }
                Scan::Error { .. } | Scan::TooLarge { .. } | Scan::TooDeep { .. } => None,
            };
            match message {
                Some(response) if response.status.code.as_u16() == 100 => {
                    if let Some(echo) = &mut self.echo {
                        echo.finish();
                    }
                    print_continue();
                    *at = match found {
                        Scan::Content(_) => Point::InContinue,
                        _ => Point::AfterContinue,
                    };
                }
                other => break other,
            }
        };
        let continued = *at != Point::First;
        self.head = match head {
            Some(response) => {
                if let Some(echo) = &mut self.echo {
                    echo.finish();
                }
                print_head(&response, false);
                Head::Shown
            }
            None => Head::Unknown { continued },
        };
    }

    /// Ends the `-vv` echo.
    pub fn finish(&mut self) {
        if let Some(echo) = &mut self.echo {
            echo.finish();
        }
    }

    /// What the peer speaks, when its first bytes show that it is not
    /// jsontp: an HTTP status line, or an HTML page (what an HTTP server
    /// sends to a request line it reads as HTTP/0.9, without a status
    /// line). Nothing it says will parse as jsontp, so this is the thing to
    /// tell the user.
    pub fn foreign_protocol(&self) -> Option<&'static str> {
        let start = self
            .received
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(self.received.len());
        let first = &self.received[start..];
        let starts_with =
            |prefix: &[u8]| first.len() >= prefix.len() && first[..prefix.len()].eq_ignore_ascii_case(prefix);
        // A TLS record (an alert, 0x15, or a handshake, 0x16) of version 3.x:
        // a TLS server refusing our plaintext (D20).
        if matches!(first, [0x15 | 0x16, 0x03, ..]) {
            Some("the peer answered with TLS, not plain jsontp (use a jsontps:// URL)")
        } else if first.starts_with(b"HTTP/") {
            Some("the peer answered in HTTP, not jsontp (is it a web server? check the host and port)")
        } else if starts_with(b"<!doctype html") || starts_with(b"<html") {
            Some(
                "the peer answered with an HTML page, not jsontp (is it a web server? check the host and port)",
            )
        } else {
            None
        }
    }
}

/// A response as the client reads it, when it is one.
fn read(bytes: &[u8], validation: Validation, limits: &MessageLimits) -> Option<Response> {
    parse_response(bytes, validation, limits)
        .ok()
        .map(|parsed| parsed.message)
}

/// `-vv`: every byte sent (`> `) and received (`< `), line by line.
struct RawEcho {
    last: Option<Direction>,
    at_line_start: bool,
}

impl Default for RawEcho {
    fn default() -> Self {
        RawEcho {
            last: None,
            at_line_start: true,
        }
    }
}

impl RawEcho {
    fn show(&mut self, direction: Direction, bytes: &[u8]) {
        let mut err = io::stderr().lock();
        // Lines on stderr are best effort: nothing to do if it is closed.
        if self.last != Some(direction) {
            if self.last.is_some() && !self.at_line_start {
                let _ = writeln!(err);
            }
            self.last = Some(direction);
            self.at_line_start = true;
        }
        let prefix = match direction {
            Direction::Sent => "> ",
            Direction::Received => "< ",
        };
        let text = String::from_utf8_lossy(bytes);
        for piece in text.split_inclusive('\n') {
            if self.at_line_start {
                let _ = err.write_all(prefix.as_bytes());
            }
            let _ = err.write_all(piece.as_bytes());
            self.at_line_start = piece.ends_with('\n');
        }
    }

    /// Ends the last line: the published reference writes no newline
    /// after its responses.
    fn finish(&mut self) {
        if !self.at_line_start {
            eprintln!();
            self.at_line_start = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quiet() -> Wire {
        Wire::new(false, false, Validation::Strict, MessageLimits::default())
    }

    fn received(chunks: &[&[u8]]) -> Wire {
        let mut wire = quiet();
        for chunk in chunks {
            wire.on_bytes(Direction::Received, chunk);
        }
        wire
    }

    fn foreign(chunks: &[&[u8]]) -> Option<&'static str> {
        received(chunks).foreign_protocol()
    }

    #[test]
    fn an_http_status_line_or_page_is_recognised() {
        let http = foreign(&[b"HTTP/1.1 400 Bad Request\r\n\r\n"]).expect("HTTP");
        assert!(
            http.starts_with("the peer answered in HTTP, not jsontp"),
            "{http}"
        );
        assert_eq!(foreign(&[b"\r\n", b"HTTP/1.0 ", b"200"]), Some(http));
        let html = foreign(&[b"<!DOCTYPE HTML>\n<html>"]).expect("HTML");
        assert!(html.contains("HTML page"), "{html}");
        assert_eq!(foreign(&[b"\n<html lang=\"en\">"]), Some(html));
        assert_eq!(foreign(&[b"{\"jsontp\":\"1.0\"}"]), None);
        assert_eq!(foreign(&[b"HTTP"]), None);
        assert_eq!(foreign(&[b"<"]), None);
        assert_eq!(foreign(&[]), None);
        // What was sent is not what the peer said.
        let mut wire = quiet();
        wire.on_bytes(Direction::Sent, b"HTTP/1.1 200 OK\r\n");
        assert_eq!(wire.foreign_protocol(), None);
    }
}
