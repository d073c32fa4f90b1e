//! The application interface shared by every server adapter.

use std::net::SocketAddr;
use std::time::Duration;

use crate::machine::ServerConfig;
use crate::message::{Method, Request, Response, StatusCode};

/// What an adapter knows about a request besides the message itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequestInfo {
    /// The peer's address.
    pub peer: SocketAddr,
}

impl RequestInfo {
    /// Information about a request from `peer`.
    pub fn new(peer: SocketAddr) -> Self {
        RequestInfo { peer }
    }
}

/// One answered exchange, as an access log sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Exchange<'a> {
    /// Who asked.
    pub peer: SocketAddr,
    /// The request's method; `None` when the connection refused the message
    /// before it was a valid request (D5 levels 1–4).
    pub method: Option<Method>,
    /// The `resource` string as the response echoes it (`""` when it could
    /// not be read, D12).
    pub resource: &'a str,
    /// The status of the response.
    pub status: StatusCode,
    /// Size of the response's decoded content, in bytes.
    pub content_bytes: usize,
    /// How long the handler took to answer (zero for errors the connection
    /// answered itself).
    pub elapsed: Duration,
}

/// The application: answers requests.
///
/// Any `Fn(&Request) -> Response + Send + Sync` is a handler. Implement the
/// trait to see the peer, or to look at the first request of a 100-continue
/// handshake before the client sends its body (D10).
pub trait Handler: Send + Sync + 'static {
    /// Answers a complete, valid request. Protocol errors never get here:
    /// the connection answers them itself (D5 levels 1–4).
    fn handle(&self, request: &Request, info: &RequestInfo) -> Response;

    /// Looks at the first request of a 100-continue handshake (its body is
    /// empty): `Ok(())` accepts (the client then sends the full request),
    /// `Err(response)` answers with a final 4xx/5xx instead (D10). Accepts
    /// by default. Called only with
    /// [`ContinuePolicy::Ask`](crate::machine::ContinuePolicy::Ask).
    // A fixed part of the interface; the refusal is rare, so its size costs nothing.
    #[allow(clippy::result_large_err)]
    fn check_continue(&self, request: &Request, info: &RequestInfo) -> Result<(), Response> {
        let _ = (request, info);
        Ok(())
    }

    /// Told about every response once it is queued, the connection's own
    /// error responses included: the hook for an access log. Does nothing by
    /// default.
    fn log_exchange(&self, exchange: &Exchange<'_>) {
        let _ = exchange;
    }
}

impl<F> Handler for F
where
    F: Fn(&Request) -> Response + Send + Sync + 'static,
{
    fn handle(&self, request: &Request, _info: &RequestInfo) -> Response {
        self(request)
    }
}

/// How a server adapter runs: the connection configuration and the number of
/// worker threads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerOptions {
    /// The configuration of every connection (limits, timeouts, 100-continue
    /// policy, default language).
    pub config: ServerConfig,
    /// Worker threads; `0` means one per core
    /// ([`std::thread::available_parallelism`]).
    pub workers: usize,
}

impl ServerOptions {
    /// Sets the connection configuration (builder style).
    pub fn with_config(mut self, config: ServerConfig) -> Self {
        self.config = config;
        self
    }

    /// Sets the number of workers (builder style); `0` means one per core.
    pub fn with_workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// The number of workers to start: `workers`, or the number of cores.
    pub fn worker_count(&self) -> usize {
        if self.workers > 0 {
            self.workers
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}
