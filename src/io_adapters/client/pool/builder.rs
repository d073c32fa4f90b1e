//! [`RequestBuilder`]: a request being made for a pool, reqwest's way:
//! headers, content, keys and a deadline of its own, errors kept for
//! `send`.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use super::origin::{Origin, split_url};
use crate::io_adapters::client::{ClientError, keys};
use crate::message::{Body, Headers, Method, Request};

/// A request being made for a pool ([`blocking::Pool::get`](crate::io_adapters::client::blocking::Pool::get)
/// and its siblings; the same on the tokio pool): reqwest's
/// `RequestBuilder`, with body keys for its JSON. Errors (a bad URL, keys
/// that do not serialise) wait for `send`, which returns them.
///
/// ```no_run
/// use jsontp_protocol::io_adapters::client::PoolOptions;
/// use jsontp_protocol::io_adapters::client::blocking::Pool;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Serialize)]
/// struct NewPost<'a> { title: &'a str }
/// #[derive(Deserialize)]
/// struct Created { id: u64 }
///
/// let pool = Pool::new(PoolOptions::default());
/// let created: Created = pool
///     .post("jsontp://127.0.0.1:8080/posts")
///     .keys(&NewPost { title: "hello" })
///     .timeout(std::time::Duration::from_secs(5))
///     .send()?
///     .keys()?;
/// println!("post {}", created.id);
/// # Ok::<(), jsontp_protocol::io_adapters::client::ClientError>(())
/// ```
#[must_use = "a request is sent by `send`"]
pub struct RequestBuilder<P> {
    pub(crate) pool: P,
    pub(crate) parts: Result<(Origin, Request), ClientError>,
    /// The call's own deadline, instead of the pool's.
    pub(crate) timeout: Option<Option<Duration>>,
}

impl<P: fmt::Debug> fmt::Debug for RequestBuilder<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestBuilder")
            .field("pool", &self.pool)
            .field("parts", &self.parts)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl<P> RequestBuilder<P> {
    /// A request with `method` to `url` (see [`split_url`]).
    pub(crate) fn new(pool: P, method: Method, url: &str) -> Self {
        RequestBuilder {
            pool,
            parts: split_url(url).map(|(origin, resource)| (origin, Request::new(method, resource))),
            timeout: None,
        }
    }

    fn map(mut self, f: impl FnOnce(Request) -> Result<Request, ClientError>) -> Self {
        self.parts = self.parts.and_then(|(origin, request)| Ok((origin, f(request)?)));
        self
    }

    /// The request's headers (D8), in place of any set before.
    pub fn headers(self, headers: Headers) -> Self {
        self.map(|request| Ok(request.with_headers(headers)))
    }

    /// The request's body (content and keys), in place of any set before.
    pub fn body(self, body: Body) -> Self {
        self.map(|request| Ok(request.with_body(body)))
    }

    /// `value`'s fields as body keys, beside the content (see
    /// [`body_from_keys`](crate::io_adapters::client::body_from_keys)): reqwest's `.json(&value)`.
    pub fn keys<T: Serialize + ?Sized>(self, value: &T) -> Self {
        self.map(|mut request| {
            let body = std::mem::take(&mut request.body);
            Ok(request.with_body(keys::keys_into(body, value)?))
        })
    }

    /// This call's deadline, in place of [`PoolOptions::call_timeout`](super::PoolOptions::call_timeout):
    /// waiting for a connection, connecting, sending and the answer.
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(Some(limit));
        self
    }

    /// The origin and the request, as `send` would send them.
    pub fn build(self) -> Result<(Origin, Request), ClientError> {
        self.parts
    }
}
