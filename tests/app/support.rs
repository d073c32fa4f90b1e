//! Servers with a router, on each runtime, on a free loopback port.

use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use jsontp_protocol::app::Router;
use jsontp_protocol::io_adapters::client::ClientOptions;
use jsontp_protocol::io_adapters::client::blocking::Client;
use jsontp_protocol::io_adapters::server::ServerOptions;
use jsontp_protocol::message::{Method, Request, Response};
use serde_json::Value;

pub const LIMIT: Duration = Duration::from_secs(20);

/// The runtimes a router runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    Std,
    #[cfg(feature = "mio")]
    Mio,
    #[cfg(all(feature = "uring", target_os = "linux"))]
    Uring,
    #[cfg(feature = "tower")]
    Tokio,
}

impl Runtime {
    /// Whether the router runs there as a `Handler`, rather than as a
    /// tower service (with the router as its hooks).
    pub fn takes_handlers(self) -> bool {
        match self {
            Runtime::Std => true,
            #[cfg(feature = "mio")]
            Runtime::Mio => true,
            #[cfg(all(feature = "uring", target_os = "linux"))]
            Runtime::Uring => true,
            #[cfg(feature = "tower")]
            Runtime::Tokio => false,
        }
    }
}

pub const RUNTIMES: &[Runtime] = &[
    Runtime::Std,
    #[cfg(feature = "mio")]
    Runtime::Mio,
    #[cfg(all(feature = "uring", target_os = "linux"))]
    Runtime::Uring,
    #[cfg(feature = "tower")]
    Runtime::Tokio,
];

/// A server running on its own thread; shut down when dropped.
pub struct Running {
    pub addr: SocketAddr,
    stop: Option<Box<dyn FnOnce() + Send>>,
    thread: Option<JoinHandle<std::io::Result<()>>>,
}

impl Running {
    /// Starts the graceful shutdown and waits for the server to return;
    /// how long that took.
    #[allow(dead_code)]
    pub fn shutdown_and_join(mut self) -> Duration {
        let started = Instant::now();
        if let Some(stop) = self.stop.take() {
            stop();
        }
        if let Some(thread) = self.thread.take() {
            while !thread.is_finished() {
                assert!(started.elapsed() < LIMIT, "the server did not return in time");
                std::thread::sleep(Duration::from_millis(5));
            }
            thread.join().expect("server thread").expect("server run");
        }
        started.elapsed()
    }
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

/// Serves `router` on `runtime`: as a `Handler` on std and mio, as a
/// tower service on tokio.
pub fn start(runtime: Runtime, router: Router, options: ServerOptions) -> Running {
    match runtime {
        Runtime::Std => {
            use jsontp_protocol::io_adapters::server::blocking::StdServer;
            let server = StdServer::bind("127.0.0.1:0", router, options).expect("bind");
            let (addr, handle) = (server.local_addr().expect("addr"), server.shutdown_handle());
            Running {
                addr,
                stop: Some(Box::new(move || handle.shutdown())),
                thread: Some(std::thread::spawn(move || server.run())),
            }
        }
        #[cfg(feature = "mio")]
        Runtime::Mio => {
            use jsontp_protocol::io_adapters::server::mio::MioServer;
            let server = MioServer::bind("127.0.0.1:0", router, options).expect("bind");
            let (addr, handle) = (server.local_addr().expect("addr"), server.shutdown_handle());
            Running {
                addr,
                stop: Some(Box::new(move || handle.shutdown())),
                thread: Some(std::thread::spawn(move || server.run())),
            }
        }
        #[cfg(all(feature = "uring", target_os = "linux"))]
        Runtime::Uring => {
            use jsontp_protocol::io_adapters::server::uring::UringServer;
            let server = UringServer::bind("127.0.0.1:0", router, options).expect("bind");
            let (addr, handle) = (server.local_addr().expect("addr"), server.shutdown_handle());
            Running {
                addr,
                stop: Some(Box::new(move || handle.shutdown())),
                thread: Some(std::thread::spawn(move || server.run())),
            }
        }
        #[cfg(feature = "tower")]
        Runtime::Tokio => start_hooked(router.clone(), router, options),
    }
}

/// Serves any tower service of requests on the tokio server, with no
/// checks before its content ([`AcceptAll`](jsontp_protocol::io_adapters::server::tokio::AcceptAll)).
#[cfg(feature = "tower")]
pub fn start_service<S>(service: S, options: ServerOptions) -> Running
where
    S: tower::Service<jsontp_protocol::io_adapters::server::Incoming> + Clone + Send + 'static,
    S::Response: Into<jsontp_protocol::io_adapters::server::Reply>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::Future: Send,
{
    start_hooked(
        service,
        jsontp_protocol::io_adapters::server::tokio::AcceptAll,
        options,
    )
}

/// Serves any tower service of requests on the tokio server, with `hooks`
/// asked about each request's head and told each access record.
#[cfg(feature = "tower")]
pub fn start_hooked<S, H>(service: S, hooks: H, options: ServerOptions) -> Running
where
    S: tower::Service<jsontp_protocol::io_adapters::server::Incoming> + Clone + Send + 'static,
    S::Response: Into<jsontp_protocol::io_adapters::server::Reply>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::Future: Send,
    H: jsontp_protocol::io_adapters::server::Handler,
{
    let server = crate::on_tokio::on_tokio(move |listener, shutdown| {
        jsontp_protocol::io_adapters::server::tokio::serve_service(
            listener, service, hooks, options, shutdown,
        )
    });
    Running {
        addr: server.addr,
        stop: Some(server.stop),
        thread: Some(server.thread),
    }
}

/// Serves `handler` on the tokio server, as the std and mio servers do.
#[cfg(feature = "tower")]
pub fn start_on_tokio<H: jsontp_protocol::io_adapters::server::Handler>(
    handler: H,
    options: ServerOptions,
) -> Running {
    let server = crate::on_tokio::on_tokio(move |listener, shutdown| {
        jsontp_protocol::io_adapters::server::tokio::serve(listener, handler, options, shutdown)
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

/// The `allowed-methods` of a response, as names.
pub fn allowed(response: &Response) -> Vec<String> {
    let list = response
        .body
        .extra()
        .get("allowed-methods")
        .and_then(Value::as_array);
    list.into_iter()
        .flatten()
        .map(|m| m.as_str().unwrap_or_default().to_owned())
        .collect()
}
