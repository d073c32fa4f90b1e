//! Application work is bounded on every runtime: no more handlers run at
//! once than the server's places, and a handler that outlasts a
//! shutdown's drain deadline holds neither its connection nor the server:
//! the connection is closed and `run`/`serve` returns at the deadline.

use jsontp_protocol::io_adapters::server::{Handled, Incoming};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use jsontp_protocol::io_adapters::server::{Handler, ServerOptions};
use jsontp_protocol::message::{Request, Response};

use crate::support::{LIMIT, Reader, Running, Runtime, code, connect, each_runtime, request, start};

/// The drain deadline of these tests.
const DRAIN: Duration = Duration::from_secs(1);
/// How long past the deadline a server may take to return.
const MARGIN: Duration = Duration::from_millis(700);

/// `handler` on `runtime`. On tokio the runtime is shut down without
/// waiting for blocking tasks once `serve` returns, as a program that
/// must exit at the deadline does: the time measured is `serve`'s own.
fn serve<H: Handler>(runtime: Runtime, handler: H, options: ServerOptions) -> Running {
    match runtime {
        #[cfg(feature = "tokio")]
        Runtime::Tokio => on_tokio(move |listener, stop| {
            jsontp_protocol::io_adapters::server::tokio::serve(listener, handler, options, stop)
        }),
        _ => start(runtime, handler, options),
    }
}

/// Runs `serve` on a tokio runtime of its own; see [`serve`].
#[cfg(feature = "tokio")]
fn on_tokio<F, Fut>(serve: F) -> Running
where
    F: FnOnce(tokio::net::TcpListener, std::pin::Pin<Box<dyn Future<Output = ()> + Send>>) -> Fut
        + Send
        + 'static,
    Fut: Future<Output = std::io::Result<()>>,
{
    let listener = jsontp_protocol::io_adapters::server::listen("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("non-blocking");
    let addr = listener.local_addr().expect("addr");
    let stop = Arc::new(tokio::sync::Notify::new());
    let stopped = Arc::clone(&stop);
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let served = runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            serve(listener, Box::pin(async move { stopped.notified().await })).await
        });
        // A blocking handler past the deadline is not waited for.
        runtime.shutdown_background();
        served
    });
    Running::new(addr, Box::new(move || stop.notify_one()), thread)
}

/// A handler that says it began, then works until it is released or 20 s
/// have passed: far longer than the drain deadline, never for ever.
struct Stuck {
    began: Mutex<mpsc::Sender<()>>,
    release: Mutex<mpsc::Receiver<()>>,
}

/// A stuck handler, what tells that it began, and what releases it
/// (dropped: released).
fn stuck() -> (Stuck, mpsc::Receiver<()>, mpsc::Sender<()>) {
    let (began, began_rx) = mpsc::channel();
    let (release_tx, release) = mpsc::channel();
    let handler = Stuck {
        began: Mutex::new(began),
        release: Mutex::new(release),
    };
    (handler, began_rx, release_tx)
}

impl Stuck {
    fn work(&self) {
        let _ = self.began.lock().unwrap().send(());
        let _ = self.release.lock().unwrap().recv_timeout(Duration::from_secs(20));
    }
}

impl Handler for Stuck {
    fn respond(&self, _incoming: Incoming) -> Handled {
        self.work();
        Response::ok("done at last").into()
    }
}

/// Sends a request to a server whose handler works past the deadline,
/// stops the server once the handler began, and checks that `run` or
/// `serve` returned at the deadline and the connection was closed.
fn returns_at_the_deadline(served: Running, began: &mpsc::Receiver<()>, runtime: &str) {
    let mut peer = Reader::new(connect(served.addr));
    peer.send(&request("GET", "/work", ""));
    began
        .recv_timeout(LIMIT)
        .unwrap_or_else(|_| panic!("{runtime}: the handler never began"));
    let took = served.stop_within(DRAIN + Duration::from_secs(4));
    let took =
        took.unwrap_or_else(|| panic!("{runtime}: the server waited for the handler past its deadline"));
    assert!(
        took >= DRAIN - Duration::from_millis(100),
        "{runtime}: it returned before the deadline: {took:?}"
    );
    assert!(took < DRAIN + MARGIN, "{runtime}: it took {took:?}");
    // The connection is closed, unanswered: no answer can say what the
    // handler will have done.
    let waited = Instant::now();
    assert!(peer.closed(), "{runtime}: the connection stays open");
    assert!(
        waited.elapsed() < Duration::from_secs(1),
        "{runtime}: closed late"
    );
}

#[test]
fn a_handler_past_the_drain_deadline_holds_neither_the_server_nor_its_connection() {
    each_runtime(|runtime| {
        let (handler, began, release) = stuck();
        let options = ServerOptions::default().with_shutdown_timeout(DRAIN);
        let served = serve(runtime, handler, options);
        returns_at_the_deadline(served, &began, &format!("{runtime:?}"));
        drop(release);
    });
}

#[cfg(feature = "tower")]
#[test]
fn a_blocking_router_handler_past_the_drain_deadline_does_not_hold_serve_service() {
    use jsontp_protocol::app::{Router, get};

    let (handler, began, release) = stuck();
    let handler = Arc::new(handler);
    let router = Router::new().route(
        "/work",
        get(move || {
            handler.work();
            "done at last"
        }),
    );
    let options = ServerOptions::default().with_shutdown_timeout(DRAIN);
    let served = on_tokio(move |listener, stop| {
        jsontp_protocol::io_adapters::server::tokio::serve_service(
            listener,
            router.clone(),
            router,
            options,
            stop,
        )
    });
    returns_at_the_deadline(served, &began, "tokio service");
    drop(release);
}

/// Counts the handlers running, and the most that ever ran at once.
#[derive(Default)]
struct Counted {
    running: AtomicUsize,
    most: AtomicUsize,
}

impl Counted {
    /// Counts itself among the handlers running while it works.
    fn count(&self) -> Response {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(150));
        self.running.fetch_sub(1, Ordering::SeqCst);
        Response::ok("counted")
    }
}

#[test]
fn no_more_handlers_run_at_once_than_the_server_has_places() {
    each_runtime(|runtime| {
        let counted = Arc::new(Counted::default());
        let handler = {
            let counted = Arc::clone(&counted);
            move |_: &Request| counted.count()
        };
        // More mio workers than places: the places bound them.
        let options = ServerOptions::default().with_max_handlers(2).with_workers(4);
        let served = serve(runtime, handler, options);
        let addr = served.addr;
        let clients: Vec<_> = (0..6)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut peer = Reader::new(connect(addr));
                    peer.send(&request("GET", "/count", ""));
                    code(&peer.expect())
                })
            })
            .collect();
        for client in clients {
            assert_eq!(client.join().expect("client"), 200, "{runtime:?}");
        }
        let most = counted.most.load(Ordering::SeqCst);
        assert!(most <= 2, "{runtime:?}: {most} handlers ran at once");
        served.stop_within(LIMIT).expect("the server returns");
    });
}
