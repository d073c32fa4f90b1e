//! `jsontp serve --admin HOST:PORT`: what an operator's tools ask a
//! server, in plain HTTP/1.1 as Prometheus and orchestrators speak it.
//!
//! - `GET /metrics`: the counters, in Prometheus' text format.
//! - `GET /live`: `200` while the process runs its loop.
//! - `GET /ready`: `200` while it serves, `503` once it drains (a stop
//!   began), so that a balancer or an orchestrator sends it no one new.
//!
//! One thread answers one connection at a time, each bounded in size
//! and time ([`LIMIT`], [`HEAD_LIMIT`]): a scrape or a probe is small and
//! rare, and a client that stalls holds the listener for two seconds at
//! most. Every answer closes its connection.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token, Waker};

/// The most a request's head may take, in bytes: a probe's is a line or
/// two.
const HEAD_LIMIT: usize = 8 * 1024;
/// The most time a connection may take to send its request, and its
/// answer to leave.
const LIMIT: Duration = Duration::from_secs(2);

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);

/// Whether the server takes new clients, as `/ready` and the jsontp
/// health check report it.
#[derive(Debug, Default)]
pub struct Health(AtomicU8);

/// The states of [`Health`], in the order they come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serving {
    /// Taking and serving clients.
    Ready,
    /// A stop began: the exchanges under way finish, and a balancer
    /// should send no one new.
    Draining,
}

impl Health {
    /// Where the server stands.
    pub fn get(&self) -> Serving {
        match self.0.load(Ordering::Relaxed) {
            0 => Serving::Ready,
            _ => Serving::Draining,
        }
    }

    /// The server drains from now on; there is no way back.
    pub fn drain(&self) {
        self.0.store(1, Ordering::Relaxed);
    }
}

/// The admin listener's thread; dropping this leaves it running,
/// [`stop`](Self::stop) ends it.
#[derive(Debug)]
pub struct Admin {
    waker: Arc<Waker>,
}

impl Admin {
    /// Answers on `listener` on a thread of its own: `/metrics` with what
    /// `metrics` writes, `/live`, and `/ready` from `health`.
    pub fn spawn(
        listener: TcpListener,
        health: Arc<Health>,
        metrics: impl Fn(&mut String) + Send + 'static,
    ) -> io::Result<Admin> {
        listener.set_nonblocking(true)?;
        let mut listener = mio::net::TcpListener::from_std(listener);
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        // The binary owns its threads; the sans-I/O core is what may not.
        #[allow(clippy::disallowed_methods)]
        std::thread::Builder::new()
            .name("jsontp-admin".into())
            .spawn(move || run(poll, &listener, &health, &metrics))?;
        Ok(Admin { waker })
    }

    /// Stops answering: the thread ends and its handle on the socket
    /// closes (a process it was handed to answers on it from then on).
    pub fn stop(&self) {
        let _ = self.waker.wake();
    }
}

fn run(mut poll: Poll, listener: &mio::net::TcpListener, health: &Health, metrics: &dyn Fn(&mut String)) {
    let mut events = Events::with_capacity(8);
    loop {
        if let Err(e) = poll.poll(&mut events, None) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            tracing::error!(error = %e, "the admin listener stops");
            return;
        }
        for event in &events {
            if event.token() == WAKER {
                return;
            }
        }
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
                    let stream = TcpStream::from(std::os::fd::OwnedFd::from(stream));
                    if let Err(e) = answer(stream, health, metrics) {
                        tracing::debug!(error = %e, "an admin request failed");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if gave_up(&e) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "the admin listener cannot accept; retrying shortly");
                    std::thread::sleep(Duration::from_millis(100));
                    break;
                }
            }
        }
    }
}

/// A client that left before it was accepted.
fn gave_up(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted
    )
}

/// Reads one request and writes its answer.
fn answer(mut stream: TcpStream, health: &Health, metrics: &dyn Fn(&mut String)) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(LIMIT))?;
    let head = read_head(&mut stream)?;
    let (status, content_type, body) = match respond(&head, health, metrics) {
        Reply::Text(status, body) => (status, "text/plain; charset=utf-8", body),
        Reply::Metrics(body) => (200, "text/plain; version=0.0.4; charset=utf-8", body),
    };
    let head_only = head.starts_with(b"HEAD ");
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n",
        reason(status),
        body.len()
    );
    if status == 405 {
        out.push_str("allow: GET, HEAD\r\n");
    }
    out.push_str("\r\n");
    if !head_only {
        out.push_str(&body);
    }
    stream.write_all(out.as_bytes())?;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// The request's head, up to its blank line, within [`HEAD_LIMIT`] and
/// [`LIMIT`]; what arrived when the peer stopped or the limits were hit.
// The binary owns its clock; the sans-I/O core is what may not.
#[allow(clippy::disallowed_methods)]
fn read_head(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let until = Instant::now() + LIMIT;
    let mut head = Vec::with_capacity(256);
    let mut piece = [0u8; 1024];
    while head.len() < HEAD_LIMIT && !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(&mut piece) {
            Ok(0) => break,
            Ok(n) => head.extend_from_slice(&piece[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => break,
            Err(e) => return Err(e),
        }
    }
    Ok(head)
}

/// An answer before it is written.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    Text(u16, String),
    Metrics(String),
}

/// The answer to a request whose head is `head`.
fn respond(head: &[u8], health: &Health, metrics: &dyn Fn(&mut String)) -> Reply {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Reply::Text(400, "expected a request line: GET /metrics HTTP/1.1\n".into());
    };
    if !version.starts_with("HTTP/1.") || !head.ends_with(b"\r\n\r\n") && !head.ends_with(b"\n\n") {
        return Reply::Text(
            400,
            "expected an HTTP/1.1 request head, ended by a blank line\n".into(),
        );
    }
    let path = target.split('?').next().unwrap_or_default();
    let known = ["/metrics", "/live", "/ready"];
    if !known.contains(&path) {
        return Reply::Text(
            404,
            "not found: the admin paths are /metrics, /live and /ready\n".into(),
        );
    }
    if method != "GET" && method != "HEAD" {
        return Reply::Text(405, format!("{path} answers GET and HEAD only\n"));
    }
    match path {
        "/metrics" => {
            let mut text = String::with_capacity(8 * 1024);
            metrics(&mut text);
            Reply::Metrics(text)
        }
        "/live" => Reply::Text(200, "live\n".into()),
        _ => match health.get() {
            Serving::Ready => Reply::Text(200, "ready\n".into()),
            Serving::Draining => Reply::Text(
                503,
                "draining: this server is stopping and takes no new clients\n".into(),
            ),
        },
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(head: &str, health: &Health) -> Reply {
        respond(head.as_bytes(), health, &|out: &mut String| {
            out.push_str("jsontp_up 1\n")
        })
    }

    #[test]
    fn the_paths_and_their_answers() {
        let health = Health::default();
        assert_eq!(
            ask("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", &health),
            Reply::Metrics("jsontp_up 1\n".into())
        );
        assert_eq!(
            ask("GET /live HTTP/1.1\r\n\r\n", &health),
            Reply::Text(200, "live\n".into())
        );
        assert_eq!(
            ask("HEAD /ready?x=1 HTTP/1.0\r\n\r\n", &health),
            Reply::Text(200, "ready\n".into())
        );
        health.drain();
        assert!(matches!(
            ask("GET /ready HTTP/1.1\r\n\r\n", &health),
            Reply::Text(503, _)
        ));
        assert!(matches!(
            ask("GET /live HTTP/1.1\r\n\r\n", &health),
            Reply::Text(200, _)
        ));
    }

    #[test]
    fn anything_else_is_refused_and_says_what_is_served() {
        let health = Health::default();
        for (head, status) in [
            ("GET /other HTTP/1.1\r\n\r\n", 404),
            ("POST /metrics HTTP/1.1\r\n\r\n", 405),
            ("GET /metrics\r\n\r\n", 400),
            ("GET /metrics HTTP/2\r\n\r\n", 400),
            ("GET /metrics HTTP/1.1\r\n", 400),
            ("", 400),
        ] {
            match ask(head, &health) {
                Reply::Text(got, why) => {
                    assert_eq!(got, status, "{head:?}");
                    assert!(!why.is_empty());
                }
                Reply::Metrics(_) => panic!("{head:?} answered with metrics"),
            }
        }
    }
}
