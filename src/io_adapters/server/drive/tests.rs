//! Unit tests of the drive step: the idle connection's size, closing to
//! make room (D3), and output offered from a file.

use super::step::write_pending;
use super::*;
use crate::io_adapters::transport::Transport;
use crate::machine::ServerEvent;
use crate::message::{Request, Response, StatusCode};

/// An idle keep-alive connection may cost at most 1 KB of a server's
/// memory beyond the kernel's socket (BENCHMARKS.md, "Idle
/// connections"), and the driver is most of it: what only a busy or
/// rare connection uses is boxed, what a server's connections share is
/// behind one `Arc`. A field that grows it past this bound wants the
/// same, or the budget revisited with the idle benchmark.
#[test]
#[cfg(target_pointer_width = "64")]
fn a_driver_fits_the_idle_connection_budget() {
    let size = std::mem::size_of::<Driver>();
    assert!(size <= 808, "a Driver is {size} bytes");
}

/// The first reason a connection is known to close for is the one it
/// lingers and closes with: a later cause, or the cause of the move
/// itself, does not replace it.
#[test]
fn the_first_close_reason_known_is_the_one_kept() {
    let peer = "127.0.0.1:9".parse().expect("address");
    let mut driver = Driver::new(peer, &ServerOptions::default(), IoMode::NonBlocking);
    driver.move_to_closing(CloseCause::Stalled);
    driver.move_to_closing(CloseCause::Rejected);
    driver.move_to_draining();
    assert!(matches!(
        driver.phase,
        Phase::Draining {
            closing: Some(CloseCause::Stalled),
            ..
        }
    ));
    driver.move_to_lingering(CloseCause::PeerClosed, Instant::now());
    assert!(matches!(
        driver.phase,
        Phase::Lingering {
            why: CloseCause::Stalled,
            ..
        }
    ));
    assert_eq!(
        driver.move_to_closed(CloseCause::TransportFailed, None),
        Step::Close
    );
    assert!(driver.is_closed());
    // Closed is the end: no move leaves it.
    driver.move_to_lingering(CloseCause::MadeRoom, Instant::now());
    driver.move_to_draining();
    assert!(driver.is_closed());
}

/// A non-blocking transport over bytes the test gives: reads say
/// `WouldBlock` when none wait, and the end of stream once the peer
/// closed. It records what it was given, and how much of it came from a
/// file.
#[derive(Default)]
struct Pipe {
    input: Vec<u8>,
    output: Vec<u8>,
    peer_closed: bool,
    shut: bool,
    #[cfg(target_os = "linux")]
    from_files: usize,
}

impl std::io::Read for Pipe {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.input.is_empty() {
            return match self.peer_closed {
                true => Ok(0),
                false => Err(std::io::ErrorKind::WouldBlock.into()),
            };
        }
        let n = buf.len().min(self.input.len());
        buf[..n].copy_from_slice(&self.input[..n]);
        self.input.drain(..n);
        Ok(n)
    }
}

impl std::io::Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Transport for Pipe {
    fn shutdown_write(&mut self) -> std::io::Result<()> {
        self.shut = true;
        Ok(())
    }

    fn set_timeout(&mut self, _limit: Option<Duration>) -> std::io::Result<()> {
        Ok(())
    }

    /// Takes a few KiB at a time, as a socket with a small send buffer.
    #[cfg(target_os = "linux")]
    fn send_copy(&mut self, pending: crate::machine::OutputCopy<'_>) -> Option<std::io::Result<usize>> {
        use std::os::unix::fs::FileExt;
        let mut piece = vec![0; pending.len.min(5000)];
        let (file, at) = pending.file()?;
        let read = file.read_at(&mut piece, at);
        Some(read.inspect(|&n| {
            self.output.extend_from_slice(&piece[..n]);
            self.from_files += n;
        }))
    }
}

/// Steps `driver` until it waits or closes, answering every request.
fn settle(driver: &mut Driver, io: &mut Pipe) -> Step {
    let mut scratch = vec![0; 4096];
    loop {
        match driver.step(io, &mut scratch) {
            Step::Dispatch => {
                driver.dispatch(&|_: &Request| Response::from_code(StatusCode::OK, "fine"));
            }
            Step::Yield => {}
            done => return done,
        }
    }
}

/// The connection cap closes only an idle connection (D3): never one
/// with a message begun or an answer owed, and an idle one as its idle
/// timeout would, without a response.
#[test]
fn only_an_idle_connection_closes_to_make_room() {
    let peer = "127.0.0.1:9".parse().expect("address");
    let mut driver = Driver::new(peer, &ServerOptions::default(), IoMode::NonBlocking);
    let mut io = Pipe::default();
    assert!(matches!(settle(&mut driver, &mut io), Step::Wait { .. }));
    assert!(driver.is_idle(), "a fresh connection that sent nothing");

    let get = br#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity","content":""}}"#;
    io.input.extend_from_slice(&get[..40]);
    assert!(matches!(settle(&mut driver, &mut io), Step::Wait { .. }));
    assert!(!driver.is_idle(), "a message begun");
    assert!(!driver.close_idle());

    io.input.extend_from_slice(&get[40..]);
    assert!(matches!(settle(&mut driver, &mut io), Step::Wait { .. }));
    let answered = io.output.len();
    assert!(answered > 0, "answered");
    assert!(driver.is_idle(), "answered, nothing owed");

    assert!(driver.close_idle());
    assert!(!driver.is_idle(), "closing");
    assert!(!driver.close_idle(), "once");
    // It lingers: our side shut, the peer's input drained.
    assert!(matches!(settle(&mut driver, &mut io), Step::Wait { .. }));
    assert!(io.shut);
    io.peer_closed = true;
    assert_eq!(settle(&mut driver, &mut io), Step::Close);
    assert_eq!(io.output.len(), answered, "no response for the close");
}

/// What a connection sends for one `GET` answered with `body`: the
/// bytes, and how many of them came from a file.
#[cfg(target_os = "linux")]
fn sent_for(body: crate::message::Body) -> (Vec<u8>, usize) {
    let now = Now {
        instant: Instant::now(),
        wall: crate::message::Date::from_unix_seconds(1_795_000_000),
    };
    let mut conn = ServerConnection::new(ServerConfig::default(), now);
    let get = br#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity","content":""}}"#;
    conn.receive_data(get, now);
    let event = conn.next_event(now);
    let Some(ServerEvent::Request { id, .. }) = event else {
        panic!("a request: {event:?}");
    };
    let response = Response::from_code(StatusCode::OK, "here").with_body(body);
    conn.send_response(id, response, now).expect("answered");
    let mut io = Pipe::default();
    while !conn.pending_output().is_empty() {
        let (written, _) = write_pending(&conn, &mut io);
        conn.consume_output(written.expect("taken"), now);
    }
    (io.output, io.from_files)
}

#[test]
#[cfg(target_os = "linux")]
fn a_body_a_file_holds_goes_from_the_file_and_the_rest_from_memory() {
    use crate::message::{Body, Encoding};
    let text = "line \"one\"\n".repeat(3000);
    let body = Body::prepared(Arc::from(text.as_bytes()), Encoding::Identity).expect("text");
    let written_len = body.written_len().expect("prepared");
    let (from_memory, none) = sent_for(body.clone());
    assert_eq!(none, 0);
    let mut body = body;
    body.add_sendfile_copy().expect("a memfd");
    let (with_file, from_file) = sent_for(body);
    assert!(with_file == from_memory, "the same bytes either way");
    assert_eq!(from_file, written_len);
}

/// The metrics count a connection in one state at a time, from its first
/// to its last phase, its close once with its reason, and what it read,
/// wrote and answered; a driver dropped before it closed leaves the count
/// of open connections too.
#[test]
fn every_phase_move_and_exchange_is_counted_in_the_metrics() {
    use crate::io_adapters::server::{CloseCause, ConnectionState, ServerMetrics};
    let metrics = ServerMetrics::new();
    let options = ServerOptions::default().with_metrics(metrics.clone());
    let open = |state| metrics.snapshot().connections(state);
    let peer = "127.0.0.1:9".parse().expect("address");
    let mut driver = Driver::new(peer, &options, IoMode::NonBlocking);
    assert_eq!(open(ConnectionState::Serving), 1);

    let get = br#"{"jsontp":"1.0","type":"request","resource":"/a","method":"GET","headers":{},"body":{"encoding":"identity","content":""}}"#;
    let mut io = Pipe::default();
    io.input.extend_from_slice(get);
    assert!(matches!(settle(&mut driver, &mut io), Step::Wait { .. }));
    let snapshot = metrics.snapshot();
    assert_eq!(snapshot.requests(200), 1);
    assert_eq!(snapshot.duration_count(), 1);
    assert_eq!(snapshot.received_bytes(), get.len() as u64);
    assert_eq!(snapshot.sent_bytes(), io.output.len() as u64);

    driver.move_to_draining();
    assert_eq!(open(ConnectionState::Serving), 0);
    assert_eq!(open(ConnectionState::Draining), 1);
    // Nothing under way: it closes at once, lingering first.
    assert!(matches!(settle(&mut driver, &mut io), Step::Wait { .. }));
    assert_eq!(open(ConnectionState::Draining), 0);
    assert_eq!(open(ConnectionState::Lingering), 1);
    io.peer_closed = true;
    assert_eq!(settle(&mut driver, &mut io), Step::Close);
    // Counted once, whatever moves after.
    let _ = driver.move_to_closed(CloseCause::TransportFailed, None);
    drop(driver);
    let snapshot = metrics.snapshot();
    assert_eq!(snapshot.open_connections(), 0);
    assert_eq!(snapshot.closed(CloseCause::Shutdown), 1);
    assert_eq!(snapshot.closed_total(), 1);

    drop(Driver::new(peer, &options, IoMode::NonBlocking));
    let snapshot = metrics.snapshot();
    assert_eq!(snapshot.open_connections(), 0);
    assert_eq!(snapshot.closed(CloseCause::Dropped), 1);
    assert_eq!(snapshot.closed_total(), 2);
}

/// A client accepted just before a shutdown began cannot know of it: a
/// connection that has received nothing waits a moment for its first
/// request instead of closing under it, and no longer than that (nor than
/// the drain); one that has spoken closes at once when idle.
#[test]
fn a_draining_connection_that_received_nothing_waits_a_moment_for_its_first_request() {
    use std::sync::{Arc, Mutex};
    let time = Arc::new(Mutex::new(crate::io_adapters::now()));
    let source = Arc::clone(&time);
    let clock = crate::io_adapters::Clock::from_fn(move || *source.lock().expect("time"));
    let options = ServerOptions::default().with_clock(clock);
    let peer = "127.0.0.1:9".parse().expect("address");
    let mut silent = Driver::new(peer, &options, IoMode::NonBlocking);
    let start = time.lock().expect("time").instant;
    silent.move_to_draining();
    assert!(!silent.may_stop(), "its first request may be on its way");
    let grace = super::phase::FIRST_REQUEST_GRACE;
    assert_eq!(
        silent.wake_at(None),
        Some(start + grace),
        "stepped again when the grace ends"
    );
    time.lock().expect("time").instant += grace;
    assert!(
        silent.may_stop(),
        "a connection left silent holds the drain no longer"
    );
    // One that has received bytes is not waited for: idle, it closes.
    let mut spoken = Driver::new(peer, &options, IoMode::NonBlocking);
    let _ = spoken.first_line.look(b"{", start, Duration::from_secs(1));
    spoken.move_to_draining();
    assert!(!spoken.first_line.is_watching());
    assert!(
        spoken.may_stop(),
        "a connection that spoke and is idle closes at once"
    );
}
