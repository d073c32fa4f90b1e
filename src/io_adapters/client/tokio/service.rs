//! [`ClientService`]: a pool's calls to one origin as a `tower::Service`
//! (feature `tower`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::pool::Pool;
use crate::io_adapters::client::{Answer, ClientError, ClientOptions, Origin, PoolOptions};
use crate::message::Request;

/// A pool's calls to one origin as a `tower::Service` (feature `tower`):
/// tower's layers (timeouts, retries, rate limits) and its balancing
/// across several servers apply to it unchanged.
///
/// Each call takes a connection kept open from an earlier call, or
/// connects a new one, sends its request and waits for the answer; the
/// connection is kept for the next call when it is still usable. Calls in
/// flight at once each have their own connection, so the answers never
/// wait for each other; bound them with a concurrency limit in front, or
/// give a pool with a per-host limit ([`from_pool`](Self::from_pool)). A
/// call dropped before its answer (a timeout) drops its connection with
/// it. As on the [`Pool`], an idempotent request is sent again once when a
/// reused connection closes before any byte of its answer (D13).
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use std::time::Duration;
/// use jsontp_protocol::io_adapters::client::ClientOptions;
/// use jsontp_protocol::io_adapters::client::tokio::ClientService;
/// use jsontp_protocol::message::{Method, Request};
/// use tower::{Service, ServiceBuilder, ServiceExt};
///
/// let mut news = ServiceBuilder::new()
///     .timeout(Duration::from_secs(2))
///     .service(ClientService::new("news.example.org:1119", ClientOptions::default()));
/// let request = Request::new(Method::Get, "/list".parse()?);
/// let answer = news.ready().await?.call(request).await?;
/// println!("{}", answer.response.status.human_message);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ClientService {
    pool: Pool,
    /// The origin, or why `new` could not read it (every call's error).
    origin: Result<Origin, Arc<ClientError>>,
}

impl ClientService {
    /// Calls to `addr` (`"host:port"`, or `jsontp://…`), each connection
    /// made with `options`, on a pool of its own: no limit of connections
    /// and at most 8 kept idle.
    pub fn new(addr: impl Into<String>, options: ClientOptions) -> ClientService {
        let addr = addr.into();
        let pool = Pool::new(
            PoolOptions::default()
                .with_client(options)
                .with_max_connections_per_host(usize::MAX)
                .with_max_idle_per_host(8),
        );
        ClientService {
            pool,
            origin: Origin::parse(&addr).map_err(Arc::new),
        }
    }

    /// Calls to `origin` on `pool`, with its limits, shared with the
    /// pool's other calls.
    pub fn from_pool(pool: Pool, origin: Origin) -> ClientService {
        ClientService {
            pool,
            origin: Ok(origin),
        }
    }

    /// Keeps at most `max` connections open between calls (builder style;
    /// 8 by default, 0 to close each after its answer). A pool of its own
    /// with these options, no longer shared with clones made before.
    pub fn with_max_idle(self, max: usize) -> ClientService {
        let options = self.pool.options().clone().with_max_idle_per_host(max);
        ClientService {
            pool: Pool::new(options),
            origin: self.origin,
        }
    }

    /// The connections open and waiting for a call.
    pub fn idle_connections(&self) -> usize {
        self.origin
            .as_ref()
            .map_or(0, |origin| self.pool.idle_connections(origin))
    }
}

impl tower::Service<Request> for ClientService {
    type Response = Answer;
    type Error = ClientError;
    type Future = Pin<Box<dyn std::future::Future<Output = Result<Answer, ClientError>> + Send>>;

    /// Always ready: a call that finds no open connection makes one (or
    /// waits for one, under a pool's per-host limit).
    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), ClientError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            match &this.origin {
                Ok(origin) => this.pool.send(origin, request).await,
                Err(error) => Err(error.duplicate()),
            }
        })
    }
}
