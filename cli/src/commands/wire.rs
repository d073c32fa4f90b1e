//! What went over the connection: the `-vv` echo, and the first bytes
//! received, read when the exchange fails to say why.

use std::io::{self, Write};

use jsontp_protocol::io_adapters::client::Direction;

/// How much of the received bytes is kept: enough for the first bytes of
/// another protocol's answer (a TLS record, an HTTP status line, an HTML
/// page) after some whitespace. A download is not copied past it.
const KEPT: usize = 512;

/// The first bytes received, up to [`KEPT`], and the `-vv` echo.
#[derive(Default)]
pub struct Wire {
    received: Vec<u8>,
    /// `-vv`: echo every byte on stderr.
    echo: Option<RawEcho>,
}

impl Wire {
    /// A recorder; `echo` adds the `-vv` trace on stderr.
    pub fn new(echo: bool) -> Wire {
        Wire {
            echo: echo.then(RawEcho::default),
            ..Wire::default()
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
        }
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

    fn received(chunks: &[&[u8]]) -> Wire {
        let mut wire = Wire::new(false);
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
        let mut wire = Wire::new(false);
        wire.on_bytes(Direction::Sent, b"HTTP/1.1 200 OK\r\n");
        assert_eq!(wire.foreign_protocol(), None);
    }
}
