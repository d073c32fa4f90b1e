//! Every server runtime against raw sockets: framing, keep-alive,
//! pipelining, 100-continue, back-pressure, the access log, graceful
//! shutdown.

use jsontp_protocol::io_adapters::server::{Handled, Incoming};
use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use jsontp_protocol::machine::{ContinuePolicy, ServerConfig};
use jsontp_protocol::message::Method;

use crate::support::{
    Echo, Logged, Reader, Runtime, code, connect, content, continue_request, each_runtime, options, request,
    start, with_policy,
};

#[test]
fn one_request() {
    each_runtime(|adapter| {
        let server = start(adapter, Echo, options(with_policy(ContinuePolicy::AutoAccept), 2));
        let mut client = Reader::new(connect(server.addr));
        client.send(&request("GET", "/a", "hi"));
        let response = client.expect();
        assert_eq!(code(&response), 200, "{adapter:?}");
        assert_eq!(content(&response), "echo /a hi");
        assert_eq!(response["resource"], "/a", "D7 echo");
        server.shutdown_and_join();
    });
}

#[test]
fn keep_alive_serves_a_second_request() {
    // D2: the connection stays open after a response.
    each_runtime(|adapter| {
        let server = start(adapter, Echo, options(with_policy(ContinuePolicy::AutoAccept), 2));
        let mut client = Reader::new(connect(server.addr));
        for n in 0..3 {
            client.send(&request("GET", &format!("/n{n}"), ""));
            assert_eq!(content(&client.expect()), format!("echo /n{n} "), "{adapter:?}");
        }
        server.shutdown_and_join();
    });
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    // D2: several requests in one write, answers in request order.
    each_runtime(|adapter| {
        let server = start(adapter, Echo, options(with_policy(ContinuePolicy::AutoAccept), 2));
        let mut client = Reader::new(connect(server.addr));
        let burst: String = (0..10).map(|n| request("POST", &format!("/p{n}"), "x")).collect();
        client.send(&burst);
        for n in 0..10 {
            assert_eq!(client.expect()["resource"], format!("/p{n}"), "{adapter:?}");
        }
        server.shutdown_and_join();
    });
}

#[test]
fn a_handler_answering_1xx_gets_500_and_the_pipeline_goes_on() {
    // D12: a 1xx is only the acknowledgement; the adapter must not leave the
    // exchange unanswered, or every pipelined answer behind it would stall.
    each_runtime(|adapter| {
        let server = start(adapter, Echo, options(with_policy(ContinuePolicy::AutoAccept), 2));
        let mut client = Reader::new(connect(server.addr));
        client.send(&(request("GET", "/informational", "") + &request("GET", "/after", "")));
        let first = client.expect();
        assert_eq!(
            (code(&first), first["resource"].as_str()),
            (500, Some("/informational")),
            "{adapter:?}"
        );
        assert_eq!(content(&client.expect()), "echo /after ", "{adapter:?}");
        server.shutdown_and_join();
    });
}

#[test]
fn continue_accepted_then_full_request() {
    // D10: 100, then the full request is answered.
    each_runtime(|adapter| {
        let server = start(adapter, Echo, options(with_policy(ContinuePolicy::Ask), 2));
        let mut client = Reader::new(connect(server.addr));
        client.send(&continue_request("PUT", "/up"));
        let ack = client.expect();
        assert_eq!(code(&ack), 100, "{adapter:?}");
        client.send(&request("PUT", "/up", "the body"));
        assert_eq!(content(&client.expect()), "echo /up the body");
        server.shutdown_and_join();
    });
}

#[test]
fn continue_refused_by_the_handler_keeps_the_connection() {
    // D10: the application refuses with a final 4xx; the connection stays open.
    each_runtime(|adapter| {
        let server = start(adapter, Echo, options(with_policy(ContinuePolicy::Ask), 2));
        let mut client = Reader::new(connect(server.addr));
        client.send(&continue_request("PUT", "/refuse"));
        assert_eq!(code(&client.expect()), 401, "{adapter:?}");
        client.send(&request("GET", "/after", ""));
        assert_eq!(content(&client.expect()), "echo /after ");
        server.shutdown_and_join();
    });
}

#[test]
fn continue_refused_by_policy_is_501_and_close() {
    // D10: a server configured without 100-continue answers 501 and closes.
    each_runtime(|adapter| {
        let server = start(adapter, Echo, options(with_policy(ContinuePolicy::Refuse), 2));
        let mut client = Reader::new(connect(server.addr));
        client.send(&continue_request("PUT", "/up"));
        assert_eq!(code(&client.expect()), 501, "{adapter:?}");
        assert!(client.closed(), "{adapter:?}: the server closes after 501");
        server.shutdown_and_join();
    });
}

#[test]
fn slow_client_trickling_bytes() {
    // D1: the message is reassembled from small pieces.
    each_runtime(|adapter| {
        let server = start(adapter, Echo, options(with_policy(ContinuePolicy::AutoAccept), 2));
        let mut client = Reader::new(connect(server.addr));
        let text = request("POST", "/slow", "trickled");
        for piece in text.as_bytes().chunks(7) {
            client.stream.write_all(piece).expect("write");
            std::thread::sleep(Duration::from_millis(3));
        }
        assert_eq!(content(&client.expect()), "echo /slow trickled", "{adapter:?}");
        server.shutdown_and_join();
    });
}

#[test]
fn client_disconnecting_mid_message_does_not_hurt_the_server() {
    each_runtime(|adapter| {
        let server = start(adapter, Echo, options(with_policy(ContinuePolicy::AutoAccept), 2));
        for _ in 0..5 {
            let mut gone = connect(server.addr);
            let text = request("PUT", "/cut", "never finished");
            gone.write_all(&text.as_bytes()[..text.len() / 2]).expect("write");
            drop(gone);
        }
        let mut client = Reader::new(connect(server.addr));
        client.send(&request("GET", "/still", ""));
        assert_eq!(content(&client.expect()), "echo /still ", "{adapter:?}");
        server.shutdown_and_join();
    });
}

#[test]
fn half_close_after_a_message_still_gets_the_answer() {
    // D1: a peer that half-closes after a complete message gets its response, then the close.
    each_runtime(|adapter| {
        let server = start(adapter, Echo, options(with_policy(ContinuePolicy::AutoAccept), 2));
        let mut client = Reader::new(connect(server.addr));
        client.send(&request("GET", "/half", ""));
        client.stream.shutdown(Shutdown::Write).expect("half close");
        assert_eq!(content(&client.expect()), "echo /half ", "{adapter:?}");
        assert!(client.closed());
        server.shutdown_and_join();
    });
}

fn many_clients(adapter: Runtime, workers: usize, clients: usize) {
    let server = start(adapter, Echo, options(ServerConfig::default(), workers));
    let done = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..clients)
        .map(|n| {
            let (addr, done) = (server.addr, Arc::clone(&done));
            std::thread::spawn(move || {
                let mut client = Reader::new(connect(addr));
                for k in 0..2 {
                    client.send(&request("GET", &format!("/c{n}/{k}"), ""));
                    assert_eq!(content(&client.expect()), format!("echo /c{n}/{k} "));
                }
                done.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("client thread");
    }
    assert_eq!(done.load(Ordering::SeqCst), clients);
    server.shutdown_and_join();
}

#[cfg(feature = "mio")]
#[test]
fn mio_serves_200_clients_at_once() {
    many_clients(Runtime::Mio, 2, 200);
}

#[cfg(all(feature = "uring", target_os = "linux"))]
#[test]
fn uring_serves_200_clients_at_once() {
    many_clients(Runtime::Uring, 2, 200);
}

#[cfg(feature = "tokio")]
#[test]
fn tokio_serves_200_clients_at_once() {
    many_clients(Runtime::Tokio, 2, 200);
}

#[test]
fn std_serves_more_clients_than_its_ready_threads() {
    // More threads start when the ready ones are busy; none is dropped.
    many_clients(Runtime::Std, 4, 40);
}

#[test]
fn graceful_shutdown_finishes_the_exchange_under_way() {
    each_runtime(|adapter| {
        let server = start(adapter, Echo, options(with_policy(ContinuePolicy::AutoAccept), 2));
        let mut idle = Reader::new(connect(server.addr));
        idle.send(&request("GET", "/warm", ""));
        idle.expect();
        let mut busy = Reader::new(connect(server.addr));
        let text = request("POST", "/busy", "finished after shutdown");
        let (first, rest) = text.as_bytes().split_at(text.len() / 2);
        busy.stream.write_all(first).expect("write");
        std::thread::sleep(Duration::from_millis(100)); // let the server read it
        server.stop();
        // The idle connection is closed...
        assert!(idle.closed(), "{adapter:?}: idle connection closed at shutdown");
        // ...the one under way is answered.
        busy.stream.write_all(rest).expect("write the rest");
        assert_eq!(
            content(&busy.expect()),
            "echo /busy finished after shutdown",
            "{adapter:?}"
        );
        let addr = server.addr;
        assert!(server.join() < Duration::from_secs(3), "{adapter:?}: run returns");
        // No longer accepting.
        let refused = TcpStream::connect_timeout(&addr, Duration::from_secs(1))
            .map(|s| {
                s.set_read_timeout(Some(Duration::from_secs(1))).ok();
                Reader::new(s).closed()
            })
            .unwrap_or(true);
        assert!(refused, "{adapter:?}: no service after shutdown");
    });
}

#[test]
fn a_client_that_reads_late_gets_every_pipelined_answer() {
    // D3 back-pressure: the server stops reading while responses are owed,
    // and resumes once the client takes them; nothing is lost or reordered.
    each_runtime(|adapter| {
        let server = start(adapter, Echo, options(with_policy(ContinuePolicy::AutoAccept), 2));
        let mut client = Reader::new(connect(server.addr));
        let filler = "y".repeat(20_000);
        let burst: String = (0..60)
            .map(|n| request("POST", &format!("/b{n}"), &filler))
            .collect();
        let mut writer = client.stream.try_clone().expect("clone");
        let sender = std::thread::spawn(move || writer.write_all(burst.as_bytes()));
        std::thread::sleep(Duration::from_millis(200)); // let the buffers fill up
        for n in 0..60 {
            let response = client.expect();
            assert_eq!(response["resource"], format!("/b{n}"), "{adapter:?}");
            assert_eq!(
                content(&response).len(),
                format!("echo /b{n} ").len() + filler.len()
            );
        }
        sender.join().expect("sender").expect("the whole burst is taken");
        server.shutdown_and_join();
    });
}

#[test]
fn errors_the_connection_writes_itself_reach_the_access_log() {
    // D1: a stream cut short mid-message is answered 400 "incomplete
    // message"; D3: a message that does not end in time, 408. Both are the
    // machine's own answers and must be logged like any other.
    each_runtime(|adapter| {
        let log = Logged::default();
        let mut config = ServerConfig::default();
        config.limits.message_timeout = Duration::from_millis(200);
        let server = start(adapter, log.clone(), options(config, 2));

        let mut cut = Reader::new(connect(server.addr));
        cut.stream.write_all(b"{\"jsontp\":\"1.0\",").expect("write");
        cut.stream.shutdown(Shutdown::Write).expect("half close");
        assert_eq!(code(&cut.expect()), 400, "{adapter:?}");
        assert!(cut.closed(), "{adapter:?}");
        assert_eq!(log.lines(1), [(None, 400, String::new())], "{adapter:?}");

        let mut slow = Reader::new(connect(server.addr));
        slow.stream.write_all(b"{\"jsontp\":\"1.0\",").expect("write");
        assert_eq!(code(&slow.expect()), 408, "{adapter:?}");
        assert!(slow.closed(), "{adapter:?}");
        assert_eq!(
            log.lines(2),
            [(None, 400, String::new()), (None, 408, String::new())],
            "{adapter:?}"
        );
        server.shutdown_and_join();
    });
}

#[test]
fn a_panicking_handler_gets_a_500_and_the_connection_goes_on() {
    each_runtime(|adapter| {
        let server = start(adapter, Echo, options(ServerConfig::default(), 2));
        let mut client = Reader::new(connect(server.addr));
        client.send(&(request("GET", "/panic", "") + &request("GET", "/after", "")));
        assert_eq!(code(&client.expect()), 500, "{adapter:?}");
        assert_eq!(content(&client.expect()), "echo /after ", "{adapter:?}");
        server.shutdown_and_join();
    });
}

#[test]
fn requests_without_newlines_are_framed_by_the_object() {
    // D1: the reference crate never sends a newline; the object is the frame.
    each_runtime(|adapter| {
        let server = start(adapter, Echo, options(ServerConfig::default(), 2));
        let mut client = Reader::new(connect(server.addr));
        let burst =
            request("GET", "/slow", "").trim_end().to_owned() + request("POST", "/fast", "a=b").trim_end();
        client.send(&burst);
        assert_eq!(content(&client.expect()), "echo /slow ", "{adapter:?}");
        assert_eq!(content(&client.expect()), "echo /fast a=b", "{adapter:?}");
        server.shutdown_and_join();
    });
}

#[test]
fn the_access_log_sees_answers_and_refusals() {
    each_runtime(|adapter| {
        let log = Logged::default();
        let server = start(adapter, log.clone(), options(ServerConfig::default(), 2));
        let mut client = Reader::new(connect(server.addr));
        client.send(&(request("GET", "/ok", "") + &request("FETCH", "/bad", "")));
        assert_eq!(code(&client.expect()), 200, "{adapter:?}");
        assert_eq!(
            code(&client.expect()),
            400,
            "{adapter:?}: the machine refuses the method (D5)"
        );
        assert_eq!(
            log.lines(2),
            [
                (Some(Method::Get), 200, "/ok".to_owned()),
                (None, 400, "/bad".to_owned())
            ],
            "{adapter:?}"
        );
        server.shutdown_and_join();
    });
}

/// Answers every request with the same large prepared body, which (on
/// Linux) a sealed copy also holds: the socket takes it with `sendfile`.
struct Prepared(jsontp_protocol::message::Body);

impl jsontp_protocol::io_adapters::server::Handler for Prepared {
    fn respond(&self, _incoming: Incoming) -> Handled {
        use jsontp_protocol::message::{Response, Status, StatusCode};
        Response::new(Status::new(StatusCode::OK, "prepared"))
            .with_body(self.0.clone())
            .into()
    }
}

/// What this process has read through the kernel's file paths so far
/// (`rchar` of `/proc/self/io`): `sendfile` counts the bytes it reads from
/// its file there; a socket's `recv` and `send` count nothing.
#[cfg(target_os = "linux")]
fn bytes_read_from_files() -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").expect("/proc/self/io");
    io.lines()
        .find_map(|line| line.strip_prefix("rchar: "))
        .and_then(|n| n.parse().ok())
        .expect("an rchar line")
}

#[cfg(target_os = "linux")]
#[test]
fn every_runtime_sends_a_prepared_body_from_its_sealed_copy_on_plain_tcp() {
    use jsontp_protocol::io_adapters::CopyArena;
    use jsontp_protocol::message::{Body, Encoding};
    let text = "a \"quoted\" line \\ of text\n".repeat(40_000);
    let prepared = |text: &str| Body::prepared(Arc::from(text.as_bytes()), Encoding::Identity).expect("text");
    // A copy in a file of its own, and one in a huge page shared with
    // another text before it (where the kernel makes huge pages).
    let mut own = prepared(&text);
    own.add_sendfile_copy().expect("a memfd");
    let arena = CopyArena::new(4 << 20);
    let mut before_it = prepared(&"another text\n".repeat(20_000));
    before_it.add_sendfile_copy_in(&arena).expect("a copy");
    let mut shared = prepared(&text);
    shared.add_sendfile_copy_in(&arena).expect("a copy");
    let written = own.written_len().expect("prepared");
    for body in [own, shared] {
        each_runtime(|adapter| {
            let server = start(
                adapter,
                Prepared(body.clone()),
                options(with_policy(ContinuePolicy::AutoAccept), 2),
            );
            let mut client = Reader::new(connect(server.addr));
            let before = bytes_read_from_files();
            client.send(&request("GET", "/f", ""));
            let response = client.expect();
            let read = bytes_read_from_files() - before;
            assert!(content(&response) == text, "{adapter:?}: the text, whole");
            // The written text went from the copy: read from its file, not
            // written from memory.
            assert!(
                read >= written as u64,
                "{adapter:?}: {read} bytes read from files, the text is {written}"
            );
            server.shutdown_and_join();
        });
    }
}

#[test]
fn a_prepared_body_and_its_sendfile_copy_reach_a_slow_reader_whole_and_in_order() {
    use jsontp_protocol::message::{Body, Encoding};
    let text: String = (0..60_000)
        .map(|n| format!("line {n} \"quoted\" \\ end\n"))
        .collect();
    #[allow(unused_mut, reason = "the copy is made on Linux only")]
    let mut body = Body::prepared(Arc::from(text.as_bytes()), Encoding::Identity).expect("text");
    #[cfg(target_os = "linux")]
    body.add_sendfile_copy().expect("a memfd");
    let body = Arc::new(body);
    each_runtime(|adapter| {
        let handler = Prepared(Body::clone(&body));
        let server = start(
            adapter,
            handler,
            options(with_policy(ContinuePolicy::AutoAccept), 2),
        );
        let mut client = Reader::new(connect(server.addr));
        // Three answers owed at once, more than the sockets hold, read
        // only after the server has had to stop at a full socket: each
        // goes in several sends, each from where the last stopped.
        let burst: String = (0..3).map(|n| request("GET", &format!("/f{n}"), "")).collect();
        client.send(&burst);
        std::thread::sleep(Duration::from_millis(200));
        for n in 0..3 {
            let response = client.expect();
            assert_eq!(response["resource"], format!("/f{n}"), "{adapter:?}");
            assert!(content(&response) == text, "{adapter:?}: answer {n} is the text");
        }
        server.shutdown_and_join();
    });
}
