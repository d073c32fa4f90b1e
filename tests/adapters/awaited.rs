//! `async` answers on every runtime: one awaited holds none of the
//! server's other connections (on mio and io_uring, a worker polls it
//! between its other connections' turns); a peer that leaves cancels its
//! answer; a shutdown's drain deadline cuts one short, recorded as `504`
//! (the application had the request and may still finish it, D13).

use std::future::poll_fn;
use std::sync::{Arc, Mutex, mpsc};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use jsontp_protocol::io_adapters::server::{AccessRecord, Handled, Handler, Incoming, ServerOptions};
use jsontp_protocol::message::{Body, Response, Status, StatusCode};

use crate::support::{LIMIT, Reader, Running, Runtime, code, connect, content, each_runtime, request, start};

/// A latch that `async` answers await and a request opens.
#[derive(Default)]
struct Gate {
    state: Mutex<(bool, Vec<Waker>)>,
}

impl Gate {
    fn open(&self) {
        let mut state = self.state.lock().unwrap();
        state.0 = true;
        for waker in state.1.drain(..) {
            waker.wake();
        }
    }

    async fn opened(&self) {
        poll_fn(|cx| {
            let mut state = self.state.lock().unwrap();
            if state.0 {
                Poll::Ready(())
            } else {
                state.1.push(cx.waker().clone());
                Poll::Pending
            }
        })
        .await;
    }
}

/// Tells, when dropped, that the future holding it ended (answered or
/// cancelled).
struct Ended(mpsc::Sender<&'static str>, &'static str);

impl Drop for Ended {
    fn drop(&mut self) {
        let _ = self.0.send(self.1);
    }
}

/// `/wait` answers once `/open` came (an `async` answer); `/open` and any
/// other resource answer at once. The futures tell when they began and
/// when they ended; the access log keeps each record's status and
/// whether the answer left whole.
struct Gated {
    gate: Arc<Gate>,
    events: Mutex<mpsc::Sender<&'static str>>,
    records: Mutex<mpsc::Sender<Record>>,
}

/// An access record's resource, status and whether its answer left whole.
type Record = (String, u16, bool);

fn gated() -> (Gated, mpsc::Receiver<&'static str>, mpsc::Receiver<Record>) {
    let (events, events_rx) = mpsc::channel();
    let (records, records_rx) = mpsc::channel();
    let handler = Gated {
        gate: Arc::default(),
        events: Mutex::new(events),
        records: Mutex::new(records),
    };
    (handler, events_rx, records_rx)
}

impl Handler for Gated {
    fn respond(&self, incoming: Incoming) -> Handled {
        let path = incoming.request.resource.path().to_owned();
        match path.as_str() {
            "/wait" => {
                let gate = Arc::clone(&self.gate);
                let events = self.events.lock().unwrap().clone();
                Handled::later(async move {
                    let _ = events.send("began");
                    let _ended = Ended(events, "ended");
                    // Never for ever: a test that fails still ends.
                    let deadline = Instant::now() + Duration::from_secs(20);
                    let opened = gate.opened();
                    let mut opened = std::pin::pin!(opened);
                    poll_fn(|cx| match opened.as_mut().poll(cx) {
                        Poll::Ready(()) => Poll::Ready(()),
                        Poll::Pending if Instant::now() >= deadline => Poll::Ready(()),
                        Poll::Pending => Poll::Pending,
                    })
                    .await;
                    answer("opened").into()
                })
            }
            "/open" => {
                self.gate.open();
                answer("open").into()
            }
            "/large" => answer(&"x".repeat(LARGE)).into(),
            "/panic" => Handled::later(async {
                std::future::ready(()).await;
                panic!("an async answer that fails")
            }),
            other => answer(other).into(),
        }
    }

    fn log_exchange(&self, record: &AccessRecord<'_>) {
        let _ = self.records.lock().unwrap().send((
            record.resource.to_owned(),
            record.status.as_u16(),
            record.complete,
        ));
    }
}

/// The content of `/large`: more than the sockets on either side hold,
/// less than the output a connection may hold for its peer (D3).
const LARGE: usize = 768 * 1024;

/// `200` with `text` as its content.
fn answer(text: &str) -> Response {
    Response::new(Status::new(StatusCode::OK, "fine")).with_body(Body::text(text))
}

/// `Gated` served on `runtime` with `options` and one worker, which every
/// connection shares; what its answers tell, and its access log.
fn serve_gated(
    runtime: Runtime,
    options: ServerOptions,
) -> (Running, mpsc::Receiver<&'static str>, mpsc::Receiver<Record>) {
    let (handler, events, records) = gated();
    (start(runtime, handler, options.with_workers(1)), events, records)
}

/// The next record of `resource`, skipping others.
fn record_of(records: &mpsc::Receiver<Record>, resource: &str) -> (u16, bool) {
    let until = Instant::now() + LIMIT;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let (logged, status, complete) = records
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no record of {resource}"));
        if logged == resource {
            return (status, complete);
        }
    }
}

/// A connection to `served` that sent `requests`, once the answer of its
/// `/wait` began (`events`).
fn awaiting(
    served: &Running,
    requests: &str,
    events: &mpsc::Receiver<&'static str>,
    runtime: Runtime,
) -> Reader {
    let mut waiting = Reader::new(connect(served.addr));
    waiting.send(requests);
    assert_eq!(events.recv_timeout(LIMIT), Ok("began"), "{runtime:?}");
    waiting
}

/// Opens the gate from a connection of its own, on the server's one
/// worker: answered while `/wait` is awaited.
fn open_gate(served: &Running, runtime: Runtime) {
    let mut opener = Reader::new(connect(served.addr));
    opener.send(&request("GET", "/open", ""));
    assert_eq!(content(&opener.expect()), "open", "{runtime:?}");
}

/// The runtimes that await an answer apart from the connection's thread:
/// the std server runs it to its end on that thread, as it runs a
/// blocking handler, and so cannot cancel it.
fn awaits_apart(runtime: Runtime) -> bool {
    !matches!(runtime, Runtime::Std)
}

/// Whether `runtime` is tokio's, whose access log shows no record of a
/// connection closed at the drain deadline.
fn on_tokio(runtime: Runtime) -> bool {
    #[cfg(feature = "tokio")]
    return matches!(runtime, Runtime::Tokio);
    #[cfg(not(feature = "tokio"))]
    return {
        let _ = runtime;
        false
    };
}

#[test]
fn an_awaited_answer_holds_none_of_the_other_connections() {
    each_runtime(|runtime| {
        // One worker: every connection shares it.
        let (served, events, records) = serve_gated(runtime, ServerOptions::default());
        // Pipelined behind the awaited answer: answered after it (D2).
        let requests = request("GET", "/wait", "") + &request("GET", "/after", "");
        let mut waiting = awaiting(&served, &requests, &events, runtime);
        open_gate(&served, runtime);
        let first = waiting.expect();
        assert_eq!(content(&first), "opened", "{runtime:?}");
        assert_eq!(content(&waiting.expect()), "/after", "{runtime:?}");
        assert_eq!(events.recv_timeout(LIMIT), Ok("ended"), "{runtime:?}");
        assert_eq!(record_of(&records, "/wait"), (200, true), "{runtime:?}");
        // The connection goes on.
        waiting.send(&request("GET", "/again", ""));
        assert_eq!(content(&waiting.expect()), "/again", "{runtime:?}");
        served.stop_within(LIMIT).expect("the server returns");
    });
}

#[test]
fn an_awaited_answer_that_panics_gets_a_500_and_the_connection_goes_on() {
    each_runtime(|runtime| {
        let (served, _events, _records) = serve_gated(runtime, ServerOptions::default());
        let mut peer = Reader::new(connect(served.addr));
        peer.send(&request("GET", "/panic", ""));
        assert_eq!(code(&peer.expect()), 500, "{runtime:?}");
        peer.send(&request("GET", "/after", ""));
        assert_eq!(content(&peer.expect()), "/after", "{runtime:?}");
        served.stop_within(LIMIT).expect("the server returns");
    });
}

#[test]
fn earlier_answers_go_out_while_a_later_one_is_awaited() {
    each_runtime(|runtime| {
        if !awaits_apart(runtime) {
            return;
        }
        let (served, events, _records) = serve_gated(runtime, ServerOptions::default());
        let requests = request("GET", "/large", "") + &request("GET", "/wait", "");
        let mut waiting = awaiting(&served, &requests, &events, runtime);
        // The whole of the first answer, while the second is awaited.
        let first = waiting.expect();
        assert_eq!(content(&first).len(), LARGE, "{runtime:?}");
        open_gate(&served, runtime);
        assert_eq!(content(&waiting.expect()), "opened", "{runtime:?}");
        served.stop_within(LIMIT).expect("the server returns");
    });
}

#[test]
fn a_peer_that_leaves_cancels_its_awaited_answer() {
    each_runtime(|runtime| {
        if !awaits_apart(runtime) {
            return;
        }
        let (served, events, records) = serve_gated(runtime, ServerOptions::default());
        let leaving = awaiting(&served, &request("GET", "/wait", ""), &events, runtime);
        let left = Instant::now();
        drop(leaving);
        assert_eq!(
            events.recv_timeout(LIMIT),
            Ok("ended"),
            "{runtime:?}: the answer of a peer that left is still awaited"
        );
        assert!(
            left.elapsed() < Duration::from_secs(2),
            "{runtime:?}: {:?}",
            left.elapsed()
        );
        // Never answered: nothing written, not complete.
        assert_eq!(record_of(&records, "/wait"), (503, false), "{runtime:?}");
        // The worker serves on.
        let mut next = Reader::new(connect(served.addr));
        next.send(&request("GET", "/next", ""));
        assert_eq!(code(&next.expect()), 200, "{runtime:?}");
        served.stop_within(LIMIT).expect("the server returns");
    });
}

#[test]
fn a_peer_that_half_closes_still_gets_its_awaited_answer() {
    each_runtime(|runtime| {
        let (served, events, _records) = serve_gated(runtime, ServerOptions::default());
        let mut waiting = awaiting(&served, &request("GET", "/wait", ""), &events, runtime);
        waiting
            .stream
            .shutdown(std::net::Shutdown::Write)
            .expect("half-close");
        // Long enough for several newlines to tell it from a peer gone.
        std::thread::sleep(Duration::from_millis(150));
        open_gate(&served, runtime);
        assert_eq!(content(&waiting.expect()), "opened", "{runtime:?}");
        served.stop_within(LIMIT).expect("the server returns");
    });
}

#[test]
fn a_shutdown_cuts_an_awaited_answer_short_at_its_deadline() {
    const DRAIN: Duration = Duration::from_millis(600);
    each_runtime(|runtime| {
        if !awaits_apart(runtime) {
            return;
        }
        let options = ServerOptions::default().with_shutdown_timeout(DRAIN);
        let (served, events, records) = serve_gated(runtime, options);
        let mut waiting = awaiting(&served, &request("GET", "/wait", ""), &events, runtime);
        let took = served
            .stop_within(DRAIN + Duration::from_secs(3))
            .unwrap_or_else(|| panic!("{runtime:?}: the server waited for the answer past its deadline"));
        assert!(
            took >= DRAIN - Duration::from_millis(100),
            "{runtime:?}: {took:?}"
        );
        assert!(took < DRAIN + Duration::from_millis(700), "{runtime:?}: {took:?}");
        assert_eq!(events.recv_timeout(LIMIT), Ok("ended"), "{runtime:?}: cancelled");
        // No answer can say what the application will have done.
        assert!(waiting.closed(), "{runtime:?}: the connection stays open");
        if !on_tokio(runtime) {
            assert_eq!(
                record_of(&records, "/wait"),
                (StatusCode::GATEWAY_TIMEOUT.as_u16(), false),
                "{runtime:?}"
            );
        }
    });
}
