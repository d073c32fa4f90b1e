//! [`Pool`]: the pooled async client, its calls (one retry where D13
//! allows), the leases of its connections, and the task that closes idle
//! ones in time; and [`RequestBuilder`]'s `send` for it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;

#[cfg(feature = "tls")]
use super::client::tls_over;
use super::client::{Client, tcp};
use super::stream::PoolStream;
use crate::io_adapters::client::pool::{Checkout, Deadline, Lease, Reaper, Resend, Shared, may_retry};
use crate::io_adapters::client::{Answer, ClientError, Origin, PoolOptions, RequestBuilder, Scheme, Timeout};
use crate::message::{Method, Request};

type PoolShared = Shared<Client<PoolStream>, Notify>;

/// What one pooled call sends, and where its content comes from and goes.
struct Work<'a> {
    method: Method,
    /// The request of each attempt.
    request: Resend,
    streams: WorkStreams<'a>,
}

enum WorkStreams<'a> {
    /// Content in the request and the answer.
    InMemory,
    /// The answer's content to a writer.
    Download(&'a mut (dyn AsyncWrite + Unpin + Send)),
    /// The request's content from a reader: never sent again.
    Upload(
        &'a mut (dyn AsyncRead + Unpin + Send),
        Option<&'a mut (dyn AsyncWrite + Unpin + Send)>,
    ),
}

impl Work<'_> {
    fn retryable(&self) -> bool {
        !matches!(self.streams, WorkStreams::Upload(..))
    }
}

/// A pooled, async client: reqwest's `Client` for jsontp, the twin of
/// [`blocking::Pool`](crate::io_adapters::client::blocking::Pool), whose documentation says
/// how connections are reused, limited per origin, closed when idle, and
/// when a call is sent again (D13). Cheap to clone (the clones share the
/// connections); calls from any number of tasks at once, each future
/// `Send`. A call dropped before its answer (a timeout around it) closes
/// its connection with it.
///
/// Idle connections are closed in time by a task on the runtime of the
/// call that left one idle, which ends when none is.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use jsontp_protocol::io_adapters::client::PoolOptions;
/// use jsontp_protocol::io_adapters::client::tokio::Pool;
/// use serde::Deserialize;
///
/// #[derive(Deserialize)]
/// struct Groups { groups: Vec<String> }
///
/// let pool = Pool::new(PoolOptions::default());
/// let calls: Vec<_> = (0..8)
///     .map(|_| {
///         let pool = pool.clone();
///         tokio::spawn(async move { pool.get("jsontp://127.0.0.1:1119/groups").send().await })
///     })
///     .collect();
/// for call in calls {
///     let groups: Groups = call.await??.keys()?;
///     println!("{}", groups.groups.join(", "));
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Pool {
    shared: Arc<PoolShared>,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

impl Default for Pool {
    /// A pool with [`PoolOptions::default`].
    fn default() -> Self {
        Pool::new(PoolOptions::default())
    }
}

impl Pool {
    /// A pool with no connection yet.
    pub fn new(options: PoolOptions) -> Pool {
        Pool {
            shared: Arc::new(Shared::new(options)),
        }
    }

    /// The options in use.
    pub fn options(&self) -> &PoolOptions {
        &self.shared.options
    }

    /// A request with `method` to `url` (`jsontp://host:port/path`,
    /// `jsontps://…`), sent by [`RequestBuilder::send`].
    pub fn request(&self, method: Method, url: &str) -> RequestBuilder<Pool> {
        RequestBuilder::new(self.clone(), method, url)
    }

    /// A `GET` of `url`.
    pub fn get(&self, url: &str) -> RequestBuilder<Pool> {
        self.request(Method::Get, url)
    }

    /// A `POST` to `url`.
    pub fn post(&self, url: &str) -> RequestBuilder<Pool> {
        self.request(Method::Post, url)
    }

    /// A `PUT` to `url`.
    pub fn put(&self, url: &str) -> RequestBuilder<Pool> {
        self.request(Method::Put, url)
    }

    /// A `DELETE` of `url`.
    pub fn delete(&self, url: &str) -> RequestBuilder<Pool> {
        self.request(Method::Delete, url)
    }

    /// An `OPTIONS` of `url`.
    pub fn options_of(&self, url: &str) -> RequestBuilder<Pool> {
        self.request(Method::Options, url)
    }

    /// Sends `request` to `origin` on a pooled connection and waits for
    /// its answer, within the pool's deadline; sent again once where D13
    /// allows.
    pub async fn send(&self, origin: &Origin, request: Request) -> Result<Answer, ClientError> {
        self.call(origin, Work::new(request, WorkStreams::InMemory), None)
            .await
    }

    /// Sends `request` to `origin` and writes the answer's content to
    /// `sink` as it arrives (D19), as [`Client::download`] does; sent
    /// again once where D13 allows (nothing has reached `sink` then).
    pub async fn download(
        &self,
        origin: &Origin,
        request: Request,
        sink: &mut (dyn AsyncWrite + Unpin + Send),
    ) -> Result<Answer, ClientError> {
        self.call(origin, Work::new(request, WorkStreams::Download(sink)), None)
            .await
    }

    /// Sends `head` to `origin` with the content `source` yields, read as
    /// the server takes it (D19), as [`Client::upload`] does. Never sent
    /// again, whatever its method: the source has been read.
    pub async fn upload<'s>(
        &self,
        origin: &Origin,
        head: Request,
        source: &'s mut (dyn AsyncRead + Unpin + Send),
        sink: Option<&'s mut (dyn AsyncWrite + Unpin + Send)>,
    ) -> Result<Answer, ClientError> {
        self.call(origin, Work::new(head, WorkStreams::Upload(source, sink)), None)
            .await
    }

    /// The connections to `origin` open and waiting for a call.
    pub fn idle_connections(&self, origin: &Origin) -> usize {
        self.shared.idle_count(origin)
    }

    /// The connections to `origin` open, idle or in use.
    pub fn open_connections(&self, origin: &Origin) -> usize {
        self.shared.open_count(origin)
    }

    /// One call: a connection, the exchange, and the retry D13 allows.
    async fn call(
        &self,
        origin: &Origin,
        mut work: Work<'_>,
        limit: Option<Option<Duration>>,
    ) -> Result<Answer, ClientError> {
        let method = work.method;
        let limit = limit.unwrap_or(self.shared.options.call_timeout);
        let deadline = Deadline::after(self.shared.now(), limit);
        let mut lease = self.lease(origin, deadline).await?;
        let reused = lease.reused();
        let outcome = match self.attempt(&mut lease, deadline, &mut work).await {
            Err(error) if work.retryable() && may_retry(&error, method, reused) => {
                tracing::debug!(%origin, %method, %error, "sending again on a new connection (D13)");
                lease.reconnecting();
                self.connect_into(&mut lease, deadline).await?;
                self.attempt(&mut lease, deadline, &mut work).await
            }
            outcome => outcome,
        };
        if lease.finish() {
            start_reaper(&self.shared);
        }
        outcome
    }

    /// One exchange on the lease's connection, within the deadline.
    async fn attempt(
        &self,
        lease: &mut Lease<Client<PoolStream>, Notify>,
        deadline: Deadline,
        work: &mut Work<'_>,
    ) -> Result<Answer, ClientError> {
        let bounded = deadline.bound(self.shared.now(), self.shared.options.client.exchange_timeout)?;
        let reused = lease.reused();
        let client = lease.conn().ok_or(ClientError::ConnectionClosed)?;
        let retryable = work.retryable();
        let request = work.request.next(reused, retryable)?;
        client.driver.set_exchange_timeout(bounded.limit);
        let outcome = match &mut work.streams {
            WorkStreams::InMemory => client.send(request).await,
            WorkStreams::Download(sink) => client.download(request, &mut **sink).await,
            WorkStreams::Upload(source, sink) => {
                client
                    .upload(request, &mut **source, sink.as_mut().map(|sink| &mut **sink as _))
                    .await
            }
        };
        outcome.map_err(|e| bounded.blame(e))
    }

    /// A place among `origin`'s connections, with its connection: an idle
    /// one, or a new one; waits while every place is taken.
    async fn lease(
        &self,
        origin: &Origin,
        deadline: Deadline,
    ) -> Result<Lease<Client<PoolStream>, Notify>, ClientError> {
        loop {
            // Listening before looking: a change between the two wakes it.
            let changed = self.shared.signal.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            match self.shared.checkout(origin) {
                Checkout::Reuse(conn) => {
                    return Ok(Lease::new(Arc::clone(&self.shared), origin.clone(), Some(conn)));
                }
                Checkout::Connect => {
                    let mut lease = Lease::new(Arc::clone(&self.shared), origin.clone(), None);
                    self.connect_into(&mut lease, deadline).await?;
                    return Ok(lease);
                }
                Checkout::Full(_) => {}
            }
            match deadline.left(self.shared.now())? {
                None => changed.await,
                Some(left) => tokio::time::timeout(left, changed)
                    .await
                    .map_err(|_| ClientError::TimedOut(Timeout::Call))?,
            }
        }
    }

    /// Connects the lease's place to its origin, within the deadline.
    async fn connect_into(
        &self,
        lease: &mut Lease<Client<PoolStream>, Notify>,
        deadline: Deadline,
    ) -> Result<(), ClientError> {
        let options = &self.shared.options;
        let origin = lease.origin().clone();
        let bounded = deadline.bound(self.shared.now(), options.client.connect_timeout)?;
        let address = origin.address();
        let stream = tcp(address.clone(), bounded.limit)
            .await
            .map_err(|e| bounded.blame(e))?;
        let stream = match origin.scheme() {
            Scheme::Plain => PoolStream::Plain(stream),
            #[cfg(feature = "tls")]
            Scheme::Tls => {
                let tls = options.client_tls().map_err(|source| ClientError::Tls {
                    addr: address.clone(),
                    source,
                })?;
                let bounded = deadline.bound(self.shared.now(), options.client.connect_timeout)?;
                let stream = tls_over(stream, &address, origin.host(), &tls, bounded.limit)
                    .await
                    .map_err(|e| bounded.blame(e))?;
                PoolStream::Tls(Box::new(stream))
            }
            #[cfg(not(feature = "tls"))]
            Scheme::Tls => return Err(crate::io_adapters::client::blocking::no_tls(&address)),
        };
        lease.connected(Client::from_stream(stream, options.client.clone()));
        Ok(())
    }
}

impl<'a> Work<'a> {
    fn new(request: Request, streams: WorkStreams<'a>) -> Self {
        Work {
            method: request.method,
            request: Resend::new(request),
            streams,
        }
    }
}

/// Starts the task that closes the pool's idle connections in time, on
/// the current runtime; it holds the pool only while it looks, and ends
/// when none is idle or the pool is gone. Without a runtime, or when the
/// runtime stops first, idle connections are closed when a call next
/// looks.
fn start_reaper(shared: &Arc<PoolShared>) {
    /// Marks the reaper stopped if its task ends early (its runtime shut
    /// down), so that the next connection to come back starts another.
    struct Stopping(std::sync::Weak<PoolShared>);
    impl Drop for Stopping {
        fn drop(&mut self) {
            if let Some(shared) = self.0.upgrade() {
                shared.hosts().reaper = Reaper::Stopped;
            }
        }
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        shared.hosts().reaper = Reaper::Stopped;
        return;
    };
    let weak = Arc::downgrade(shared);
    runtime.spawn(async move {
        let stopping = Stopping(weak.clone());
        loop {
            let Some(shared) = weak.upgrade() else {
                break;
            };
            let next = shared.reap();
            let now = shared.now();
            drop(shared);
            match next {
                Some(at) => tokio::time::sleep(at.saturating_duration_since(now)).await,
                // `reap` marked it stopped, under the lock.
                None => {
                    std::mem::forget(stopping);
                    return;
                }
            }
        }
        drop(stopping);
    });
}

impl RequestBuilder<Pool> {
    /// Sends the request on the pool ([`Pool::send`]) and waits for its
    /// answer; the errors of building it come out here.
    pub async fn send(self) -> Result<Answer, ClientError> {
        let (origin, request) = self.parts?;
        self.pool
            .call(&origin, Work::new(request, WorkStreams::InMemory), self.timeout)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooled_calls_can_run_on_any_task() {
        fn is_send<T: Send>(_: &T) {}
        fn is_shared<T: Send + Sync>() {}
        is_shared::<Pool>();
        let pool = Pool::default();
        let origin = Origin::parse("127.0.0.1:1").expect("origin");
        let request = Request::new(Method::Get, "/".parse().expect("resource"));
        is_send(&pool.send(&origin, request));
        is_send(&pool.get("jsontp://127.0.0.1:1/").send());
    }
}
