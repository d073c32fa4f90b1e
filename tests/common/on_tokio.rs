//! A server on a tokio runtime of its own, for the test crates that start
//! one: bound to a free loopback port, on a thread, stopped by a
//! notification.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::thread::JoinHandle;

/// What resolves once the server is told to stop.
pub type Shutdown = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A server started by [`on_tokio`]: where it listens, what tells it to
/// stop, and the thread it runs on.
pub struct OnTokio {
    pub addr: SocketAddr,
    pub stop: Box<dyn Fn() + Send>,
    pub thread: JoinHandle<io::Result<()>>,
}

/// Runs `serve`, given the listener and its shutdown, on a two-thread
/// runtime.
pub fn on_tokio<F, Fut>(serve: F) -> OnTokio
where
    F: FnOnce(tokio::net::TcpListener, Shutdown) -> Fut + Send + 'static,
    Fut: Future<Output = io::Result<()>>,
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
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            serve(listener, Box::pin(async move { stopped.notified().await })).await
        })
    });
    OnTokio {
        addr,
        stop: Box::new(move || stop.notify_one()),
        thread,
    }
}
