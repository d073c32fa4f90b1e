//! D1: a connection whose first line is an HTTP/1.x request line comes
//! from a browser or an HTTP tool, and a person learns nothing from a
//! jsontp `400` about a byte `0x47`. Such a line is answered with one short
//! plain-text HTTP/1.1 `400` that says what the port speaks, then the
//! connection closes. Every other first byte goes to the machine at once,
//! which answers it as before.
//!
//! Only bytes that can still begin a request line (`GET `, `POST /x HT…`)
//! are held back, at most [`MOST_HELD`] of them and only until the line
//! ends or stops fitting; then they go to the machine whole, so a stray
//! `G…` that is not HTTP meets exactly the answer it met before. Held
//! bytes are a message begun, so they are held no longer than the message
//! time (D3) from the first of them: then they go to the machine too, which
//! answers them (`400`: no jsontp message begins so) and closes.

use std::borrow::Cow;
use std::time::{Duration, Instant};

/// The methods of HTTP/1.1 (RFC 9110 and RFC 5789): the words a request
/// line starts with.
const METHODS: [&[u8]; 9] = [
    b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"OPTIONS", b"PATCH", b"CONNECT", b"TRACE",
];

/// The longest first line held back before giving up on it being HTTP.
const MOST_HELD: usize = 8 * 1024;

/// Where the first line of a connection stands.
#[derive(Debug, Default)]
pub(crate) enum FirstLine {
    /// Nothing received yet.
    #[default]
    Watching,
    /// Bytes so far that may yet be an HTTP request line (boxed: few
    /// connections hold any, and every connection has a first line).
    Holding(Box<Held>),
    /// Decided (jsontp, or answered): bytes pass as they come.
    Decided,
}

/// Bytes held as a possible HTTP request line.
#[derive(Debug)]
pub(crate) struct Held {
    bytes: Vec<u8>,
    /// The message time after the first of them (D3).
    until: Instant,
}

/// What to do with bytes just received.
#[derive(Debug)]
pub(crate) enum Look<'a> {
    /// Hand these to the machine (held bytes first, when the line turned
    /// out not to be HTTP).
    Pass(Cow<'a, [u8]>),
    /// Nothing yet: the line may still be HTTP.
    Hold,
    /// An HTTP request line: send this answer and close.
    Http(Vec<u8>),
}

/// How far bytes go as an HTTP request line.
enum Verdict {
    Http,
    NotHttp,
    Undecided,
}

impl FirstLine {
    /// Takes bytes received at `now`; `message_time` bounds how long they
    /// may be held (D3).
    pub(crate) fn look<'a>(&mut self, bytes: &'a [u8], now: Instant, message_time: Duration) -> Look<'a> {
        let held = match self {
            FirstLine::Decided => return Look::Pass(Cow::Borrowed(bytes)),
            FirstLine::Watching => match verdict(bytes) {
                Verdict::NotHttp => {
                    *self = FirstLine::Decided;
                    return Look::Pass(Cow::Borrowed(bytes));
                }
                Verdict::Http => {
                    *self = FirstLine::Decided;
                    return Look::Http(answer(bytes));
                }
                Verdict::Undecided if bytes.is_empty() => return Look::Hold,
                Verdict::Undecided => {
                    *self = FirstLine::Holding(Box::new(Held {
                        bytes: bytes.to_vec(),
                        until: now + message_time,
                    }));
                    return Look::Hold;
                }
            },
            FirstLine::Holding(held) => {
                held.bytes.extend_from_slice(bytes);
                &mut held.bytes
            }
        };
        match verdict(held) {
            Verdict::Undecided => Look::Hold,
            Verdict::NotHttp => {
                let held = std::mem::take(held);
                *self = FirstLine::Decided;
                Look::Pass(Cow::Owned(held))
            }
            Verdict::Http => {
                let reply = answer(held);
                *self = FirstLine::Decided;
                Look::Http(reply)
            }
        }
    }

    /// The end of the stream: what is held goes to the machine.
    pub(crate) fn release(&mut self) -> Vec<u8> {
        match std::mem::replace(self, FirstLine::Decided) {
            FirstLine::Holding(held) => held.bytes,
            FirstLine::Watching | FirstLine::Decided => Vec::new(),
        }
    }

    /// Whether nothing has been received yet.
    pub(crate) fn is_watching(&self) -> bool {
        matches!(self, FirstLine::Watching)
    }

    /// When held bytes must go to the machine at the latest.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match self {
            FirstLine::Holding(held) => Some(held.until),
            FirstLine::Watching | FirstLine::Decided => None,
        }
    }

    /// What is held, once its time has run out at `now` (D3); else
    /// nothing.
    pub(crate) fn expire(&mut self, now: Instant) -> Vec<u8> {
        match self {
            FirstLine::Holding(held) if held.until <= now => self.release(),
            _ => Vec::new(),
        }
    }
}

/// Whether `line` (the connection's first bytes) is, may become, or
/// cannot be an HTTP/1.x request line: `METHOD SP target SP HTTP/1.d`
/// and its line end.
fn verdict(line: &[u8]) -> Verdict {
    if line.len() > MOST_HELD {
        return Verdict::NotHttp;
    }
    let Some(space) = line.iter().position(|&b| b == b' ') else {
        // Still the method: it must be the start of one.
        return if METHODS.iter().any(|m| m.starts_with(line)) {
            Verdict::Undecided
        } else {
            Verdict::NotHttp
        };
    };
    if !METHODS.contains(&&line[..space]) {
        return Verdict::NotHttp;
    }
    let rest = &line[space + 1..];
    let target = rest.iter().take_while(|b| b.is_ascii_graphic()).count();
    let after = &rest[target..];
    match after.first() {
        None => return Verdict::Undecided,
        Some(b' ') if target > 0 => {}
        Some(_) => return Verdict::NotHttp,
    }
    let version = &after[1..];
    for (i, &b) in version.iter().enumerate() {
        let fits = match i {
            0..=6 => b == b"HTTP/1."[i],
            7 => b.is_ascii_digit(),
            8 => b == b'\r' || b == b'\n',
            9 => version[8] == b'\r' && b == b'\n',
            _ => true,
        };
        if !fits {
            return Verdict::NotHttp;
        }
        if b == b'\n' {
            return Verdict::Http;
        }
    }
    Verdict::Undecided
}

/// The plain-text answer, naming the address the client asked for when
/// its `Host` header came with the line.
fn answer(received: &[u8]) -> Vec<u8> {
    let host = host_of(received).unwrap_or("HOST:PORT");
    let text = format!(
        "This is a jsontp server: it speaks jsontp (JSON messages over TCP), not HTTP.\n\
         Try: jsontp get jsontp://{host}/\n"
    );
    format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    )
    .into_bytes()
}

/// The `Host` header among the lines received, if it is a plain
/// `host[:port]`.
fn host_of(received: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(received).ok()?;
    text.lines().skip(1).find_map(|line| {
        let (name, value) = line.split_once(':')?;
        let value = value.trim();
        let plain = !value.is_empty()
            && value.len() <= 255
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
        (name.eq_ignore_ascii_case("host") && plain).then_some(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MESSAGE_TIME: Duration = Duration::from_secs(30);

    /// `bytes` received, all at one instant.
    fn look<'a>(first: &mut FirstLine, bytes: &'a [u8]) -> Look<'a> {
        first.look(bytes, Instant::now(), MESSAGE_TIME)
    }

    fn passes(look: &Look<'_>) -> Option<Vec<u8>> {
        match look {
            Look::Pass(bytes) => Some(bytes.to_vec()),
            _ => None,
        }
    }

    #[test]
    fn a_request_line_is_answered_in_http() {
        let mut first = FirstLine::default();
        let request = b"GET / HTTP/1.1\r\nHost: localhost:8080\r\nAccept: */*\r\n\r\n";
        let Look::Http(reply) = look(&mut first, request) else {
            panic!("an HTTP request line");
        };
        let reply = String::from_utf8(reply).expect("text");
        assert!(reply.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{reply}");
        assert!(reply.contains("jsontp get jsontp://localhost:8080/"), "{reply}");
        let (head, body) = reply.split_once("\r\n\r\n").expect("head and body");
        assert!(
            head.contains(&format!("Content-Length: {}", body.len())),
            "{reply}"
        );
        // Whatever comes next passes (the connection is closing anyway).
        assert_eq!(passes(&look(&mut first, b"more")), Some(b"more".to_vec()));
    }

    #[test]
    fn a_line_in_pieces_is_held_until_it_ends() {
        let mut first = FirstLine::default();
        for piece in [&b"PO"[..], b"ST /form", b" HTTP/1.", b"0\r"] {
            assert!(matches!(look(&mut first, piece), Look::Hold), "{piece:?}");
        }
        let Look::Http(reply) = look(&mut first, b"\n") else {
            panic!("an HTTP request line");
        };
        assert!(String::from_utf8_lossy(&reply).contains("jsontp://HOST:PORT/"));
    }

    #[test]
    fn anything_else_passes_whole_and_at_once() {
        for stray in [
            &b"{\"jsontp\":\"1.0\"}"[..],
            b" \n{",
            b"GARBAGE",
            b"get / HTTP/1.1\r\n",
            b"GET  / HTTP/1.1\r\n",
            b"GET / HTTP/2\r\n",
            b"GET / HTTP/1.1 \r\n",
            b"PRI * HTTP/2.0\r\n",
            b"\xef\xbb\xbf{}",
        ] {
            let mut first = FirstLine::default();
            let mut passed = Vec::new();
            for byte in stray {
                match look(&mut first, std::slice::from_ref(byte)) {
                    Look::Pass(bytes) => passed.extend_from_slice(&bytes),
                    Look::Hold => {}
                    Look::Http(_) => panic!("{stray:?} is not HTTP"),
                }
            }
            passed.extend(first.release());
            assert_eq!(passed, stray, "every byte, in order");
        }
        // A first byte that starts no method is never held.
        assert!(matches!(look(&mut FirstLine::default(), b"{"), Look::Pass(_)));
        assert!(matches!(look(&mut FirstLine::default(), b"GA"), Look::Pass(_)));
    }

    #[test]
    fn a_line_too_long_is_not_held_for_ever() {
        let mut first = FirstLine::default();
        assert!(matches!(look(&mut first, b"GET /"), Look::Hold));
        let long = vec![b'a'; MOST_HELD];
        let Look::Pass(bytes) = look(&mut first, &long) else {
            panic!("given up past the limit");
        };
        assert_eq!(bytes.len(), MOST_HELD + 5);
    }

    #[test]
    fn held_bytes_are_held_for_the_message_time_from_the_first() {
        let start = Instant::now();
        let mut first = FirstLine::default();
        assert_eq!(first.deadline(), None);
        assert!(matches!(first.look(b"GE", start, MESSAGE_TIME), Look::Hold));
        let until = start + MESSAGE_TIME;
        assert_eq!(first.deadline(), Some(until));
        // More of the line does not move the deadline (D3: from the first
        // byte of a message to its last).
        let later = start + Duration::from_secs(20);
        assert!(matches!(first.look(b"T /x", later, MESSAGE_TIME), Look::Hold));
        assert_eq!(first.deadline(), Some(until));
        assert_eq!(first.expire(until - Duration::from_millis(1)), b"");
        assert_eq!(first.expire(until), b"GET /x", "given up at the deadline");
        assert_eq!(first.deadline(), None);
        assert!(matches!(first.look(b"more", until, MESSAGE_TIME), Look::Pass(_)));
        // A connection that holds nothing has no deadline of its own.
        let mut first = FirstLine::default();
        assert!(matches!(first.look(b"{", start, MESSAGE_TIME), Look::Pass(_)));
        assert_eq!(first.deadline(), None);
    }

    /// A peer that sends its bytes once, then nothing, and keeps what it
    /// is sent.
    struct Peer {
        to_send: Vec<u8>,
        received: Vec<u8>,
    }

    impl std::io::Read for Peer {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.to_send.is_empty() {
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
            let n = self.to_send.len().min(buf.len());
            buf[..n].copy_from_slice(&self.to_send[..n]);
            self.to_send.drain(..n);
            Ok(n)
        }
    }

    impl std::io::Write for Peer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.received.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl crate::io_adapters::Transport for Peer {
        fn shutdown_write(&mut self) -> std::io::Result<()> {
            Ok(())
        }

        fn set_timeout(&mut self, _limit: Option<Duration>) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_that_never_ends_is_answered_at_the_message_time() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU64, Ordering};

        use crate::io_adapters::Clock;
        use crate::io_adapters::IoMode;
        use crate::io_adapters::server::{Driver, ServerOptions, Step};
        use crate::machine::Now;
        use crate::message::{Date, Request, Response};

        // Simulated time: milliseconds since `start`.
        let start = Instant::now();
        let elapsed = Arc::new(AtomicU64::new(0));
        let clock = {
            let elapsed = Arc::clone(&elapsed);
            Clock::from_fn(move || {
                let ms = elapsed.load(Ordering::SeqCst);
                Now {
                    instant: start + Duration::from_millis(ms),
                    wall: Date::from_unix_seconds(1_795_000_000 + ms as i64 / 1000),
                }
            })
        };
        let options = ServerOptions::default().with_clock(clock);
        let message_time = options.config.limits.message_timeout;
        let handler = |_: &Request| Response::ok("never asked");
        let mut driver = Driver::new(
            "127.0.0.1:1".parse().expect("addr"),
            &options,
            IoMode::NonBlocking,
        );
        let mut peer = Peer {
            to_send: b"GET /x".to_vec(),
            received: Vec::new(),
        };
        let mut scratch = vec![0; 4096];
        let mut answered_at = None;
        for _ in 0..100 {
            match driver.step(&mut peer, &mut scratch) {
                Step::Dispatch => driver.dispatch(&handler),
                Step::Wait { deadline, .. } => {
                    let deadline = deadline.expect("a timer: the peer says nothing more");
                    let at = deadline.duration_since(start).as_millis() as u64;
                    assert!(at > elapsed.load(Ordering::SeqCst), "time moves on");
                    elapsed.store(at, Ordering::SeqCst);
                }
                Step::Yield => {}
                Step::Close => break,
            }
            if answered_at.is_none() && !peer.received.is_empty() {
                answered_at = Some(Duration::from_millis(elapsed.load(Ordering::SeqCst)));
            }
        }
        assert!(driver.is_closed());
        // D3: held no longer than any partial message, then answered as the
        // machine answers such first bytes.
        assert_eq!(answered_at, Some(message_time), "answered at the message time");
        let answer = String::from_utf8_lossy(&peer.received);
        assert!(answer.contains(r#""code":400"#), "{answer}");
    }

    #[test]
    fn only_a_plain_host_is_repeated() {
        assert_eq!(host_of(b"GET / HTTP/1.1\r\nhost: [::1]:80\r\n"), Some("[::1]:80"));
        assert_eq!(host_of(b"GET / HTTP/1.1\r\nHost: a b\r\n"), None);
        assert_eq!(host_of(b"GET / HTTP/1.1\r\nHost: <script>\r\n"), None);
        assert_eq!(host_of(b"GET / HTTP/1.1\r\n"), None);
    }
}
