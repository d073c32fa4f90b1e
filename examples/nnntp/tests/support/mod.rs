//! The news router served on each of the library's servers, on a free
//! loopback port. The library's own `tests/app/support.rs` chooses its
//! runtimes by the library's features, which this package does not have:
//! here all three are always built.

use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use jsontp_protocol::app::Router;
use jsontp_protocol::io_adapters::client::ClientOptions;
use jsontp_protocol::io_adapters::client::blocking::Client;
use jsontp_protocol::io_adapters::server::ServerOptions;
use jsontp_protocol::io_adapters::server::blocking::StdServer;
use jsontp_protocol::io_adapters::server::mio::MioServer;
use jsontp_protocol::io_adapters::server::tokio::{AcceptAll, serve_service};
use jsontp_protocol::io_adapters::server::{Handler, Incoming, Reply};
use jsontp_protocol::message::{Method, Request, Response};
use serde_json::Value;

pub const LIMIT: Duration = Duration::from_secs(20);

/// The servers a router runs on: std and mio with it as a `Handler`,
/// tokio with it as a tower service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    Std,
    Mio,
    Tokio,
}

pub const RUNTIMES: &[Runtime] = &[Runtime::Std, Runtime::Mio, Runtime::Tokio];

/// A server running on its own thread; shut down when dropped.
pub struct Running {
    pub addr: SocketAddr,
    stop: Option<Box<dyn FnOnce() + Send>>,
    thread: Option<JoinHandle<std::io::Result<()>>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            stop();
        }
        if let Some(thread) = self.thread.take() {
            let started = Instant::now();
            while !thread.is_finished() && started.elapsed() < LIMIT {
                std::thread::sleep(Duration::from_millis(5));
            }
            if thread.is_finished() && !std::thread::panicking() {
                thread.join().expect("server thread").expect("server run");
            }
        }
    }
}

/// Serves `router` on `runtime`.
pub fn start(runtime: Runtime, router: Router, options: ServerOptions) -> Running {
    match runtime {
        Runtime::Std => {
            let server = StdServer::bind("127.0.0.1:0", router, options).expect("bind");
            let (addr, handle) = (server.local_addr().expect("addr"), server.shutdown_handle());
            Running {
                addr,
                stop: Some(Box::new(move || handle.shutdown())),
                thread: Some(std::thread::spawn(move || server.run())),
            }
        }
        Runtime::Mio => {
            let server = MioServer::bind("127.0.0.1:0", router, options).expect("bind");
            let (addr, handle) = (server.local_addr().expect("addr"), server.shutdown_handle());
            Running {
                addr,
                stop: Some(Box::new(move || handle.shutdown())),
                thread: Some(std::thread::spawn(move || server.run())),
            }
        }
        Runtime::Tokio => start_hooked(router.clone(), router, options),
    }
}

/// Serves any tower service of requests on the tokio server, with no
/// checks before its content.
pub fn start_service<S>(service: S, options: ServerOptions) -> Running
where
    S: tower::Service<Incoming> + Clone + Send + 'static,
    S::Response: Into<Reply>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::Future: Send,
{
    start_hooked(service, AcceptAll, options)
}

/// Serves a tower service on the tokio server, `hooks` asked about each
/// request's head.
fn start_hooked<S, H>(service: S, hooks: H, options: ServerOptions) -> Running
where
    S: tower::Service<Incoming> + Clone + Send + 'static,
    S::Response: Into<Reply>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::Future: Send,
    H: Handler,
{
    let server = crate::on_tokio::on_tokio(move |listener, shutdown| {
        serve_service(listener, service, hooks, options, shutdown)
    });
    Running {
        addr: server.addr,
        stop: Some(server.stop),
        thread: Some(server.thread),
    }
}

pub fn client(addr: SocketAddr) -> Client {
    Client::connect(addr, ClientOptions::default()).expect("connect")
}

/// A request with these body keys (an object).
pub fn request(method: Method, resource: &str, keys: Value) -> Request {
    let mut request = Request::new(method, resource.parse().expect("resource"));
    if let Value::Object(keys) = keys {
        for (key, value) in keys {
            request.body = request.body.with_extra(key, value).expect("body key");
        }
    }
    request
}

/// Sends one request on a connection of its own.
pub fn ask(addr: SocketAddr, request: Request) -> Response {
    client(addr).send(request).expect("answer").response
}
