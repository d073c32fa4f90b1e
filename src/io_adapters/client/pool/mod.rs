//! What the two pools share ([`blocking::Pool`](super::blocking::Pool),
//! `tokio::Pool`): where a call goes ([`Origin`]), how a pool behaves
//! ([`PoolOptions`]), the request builder ([`RequestBuilder`]), and the
//! bookkeeping of connections per host, which each pool runs under its
//! own lock and wakes its own waiters from.
//!
//! One exchange per connection at a time: a call takes a connection of
//! its own for as long as its exchange lasts (no pipelining across calls:
//! an answer never waits behind another call's), and gives it back when
//! the answer is whole.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{ClientError, ClientOptions, Progress, Timeout, keys};
use crate::message::{Body, Headers, Method, Request, Resource};

/// The port of `jsontp://` addresses that give none.
pub const DEFAULT_PORT: u16 = 8080;

/// The port of `jsontps://` addresses that give none (D20).
pub const DEFAULT_TLS_PORT: u16 = 8443;

/// How a pool talks to a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `jsontp://`: plain TCP.
    Plain,
    /// `jsontps://`: TLS (D20), the certificate checked against the host
    /// name as [`PoolOptions::tls`] says.
    Tls,
}

/// Where a pool's calls go: a scheme, a host and a port. Connections are
/// pooled, and limited, per origin.
///
/// ```
/// use jsontp_protocol::io_adapters::client::{Origin, Scheme};
///
/// let origin: Origin = "jsontps://news.example.org".parse()?;
/// assert_eq!((origin.scheme(), origin.host(), origin.port()), (Scheme::Tls, "news.example.org", 8443));
/// let origin: Origin = "127.0.0.1:9000".parse()?;
/// assert_eq!(origin.to_string(), "jsontp://127.0.0.1:9000");
/// # Ok::<(), jsontp_protocol::io_adapters::client::ClientError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Origin {
    scheme: Scheme,
    /// Without brackets, in lower case.
    host: String,
    port: u16,
}

impl Origin {
    /// `host` (a name, or an IP address; brackets around IPv6 are
    /// optional) at `port`.
    pub fn new(scheme: Scheme, host: &str, port: u16) -> Origin {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        Origin {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
        }
    }

    /// `jsontp://host:port`, `jsontps://host:port`, or `host:port` (plain);
    /// the scheme in any case (D7), the port 8080 or 8443 when absent.
    /// A path after the address is refused here: [`split_url`] takes
    /// both.
    pub fn parse(text: &str) -> Result<Origin, ClientError> {
        let (origin, rest) = split(text)?;
        if !rest.is_empty() && rest != "/" {
            return Err(bad_url(
                text,
                "has a path: an origin is the scheme, host and port alone",
            ));
        }
        Ok(origin)
    }

    /// How it is reached.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The host, without brackets: the name a TLS certificate is checked
    /// against.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `host:port` (`[v6]:port`), to connect to.
    pub(crate) fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl From<std::net::SocketAddr> for Origin {
    /// A plain origin at this address.
    fn from(addr: std::net::SocketAddr) -> Origin {
        Origin::new(Scheme::Plain, &addr.ip().to_string(), addr.port())
    }
}

impl FromStr for Origin {
    type Err = ClientError;

    fn from_str(text: &str) -> Result<Origin, ClientError> {
        Origin::parse(text)
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.scheme {
            Scheme::Plain => "jsontp",
            Scheme::Tls => "jsontps",
        };
        write!(f, "{scheme}://{}", self.address())
    }
}

fn bad_url(url: &str, reason: impl Into<String>) -> ClientError {
    ClientError::BadUrl {
        url: url.to_owned(),
        reason: reason.into(),
    }
}

/// A URL's origin, and the rest (from its `/`, `?` or `#`).
fn split(url: &str) -> Result<(Origin, &str), ClientError> {
    let has = |scheme: &str| {
        url.get(..scheme.len())
            .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
    };
    let (rest, scheme) = if has("jsontp://") {
        (&url["jsontp://".len()..], Scheme::Plain)
    } else if has("jsontps://") {
        (&url["jsontps://".len()..], Scheme::Tls)
    } else if url.contains("://") {
        return Err(bad_url(url, "is not a jsontp:// or jsontps:// URL"));
    } else {
        (url, Scheme::Plain)
    };
    let (authority, path) = match rest.find(['/', '?', '#']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let default = match scheme {
        Scheme::Plain => DEFAULT_PORT,
        Scheme::Tls => DEFAULT_TLS_PORT,
    };
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| bad_url(url, "has an unclosed ["))?;
        match after {
            "" => (host, None),
            _ => (
                host,
                Some(
                    after
                        .strip_prefix(':')
                        .ok_or_else(|| bad_url(url, "has text after ]"))?,
                ),
            ),
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(bad_url(url, "names no host"));
    }
    let port = match port {
        None => default,
        Some(port) => match port.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => return Err(bad_url(url, "has a port that is not a number from 1 to 65535")),
        },
    };
    Ok((Origin::new(scheme, host, port), path))
}

/// A URL (`jsontp://host:port/path?query`, `jsontps://…`, or
/// `host:port/path`) as the origin to connect to and the `resource` to
/// send (D7): the path with its query and fragment, `/` when it has none.
///
/// ```
/// use jsontp_protocol::io_adapters::client::split_url;
///
/// let (origin, resource) = split_url("jsontp://127.0.0.1:9000/posts?page=2")?;
/// assert_eq!(origin.to_string(), "jsontp://127.0.0.1:9000");
/// assert_eq!(resource.to_string(), "/posts?page=2");
/// # Ok::<(), jsontp_protocol::io_adapters::client::ClientError>(())
/// ```
pub fn split_url(url: &str) -> Result<(Origin, Resource), ClientError> {
    let (origin, path) = split(url)?;
    let path = match path.chars().next() {
        Some('/') => path.to_owned(),
        _ => format!("/{path}"),
    };
    let resource = path
        .parse::<Resource>()
        .map_err(|e| bad_url(url, format!("has a path that {e}")))?;
    Ok((origin, resource))
}

/// How a pool connects, keeps and limits its connections, and how long a
/// call may take.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PoolOptions {
    /// How each connection connects, waits and validates
    /// ([`ClientOptions`]): its timeouts bound each step of a call, the
    /// clock is the pool's too.
    pub client: ClientOptions,
    /// The most connections open to one origin at once, in use or idle
    /// (at least 1). A call that finds them all in use waits for one to
    /// come back or close, bounded by its deadline.
    pub max_connections_per_host: usize,
    /// The most idle connections kept per origin; one more is closed when
    /// it comes back.
    pub max_idle_per_host: usize,
    /// How long a connection may stay idle before the pool closes it.
    /// `None`: until the server closes it.
    pub idle_timeout: Option<Duration>,
    /// The deadline of a whole call, from its start: waiting for a
    /// connection, connecting, sending and the answer, and the one retry
    /// (D13). `None`: each step bounded by its own timeout only.
    /// [`RequestBuilder::timeout`] sets one call's.
    pub call_timeout: Option<Duration>,
    /// The certificates trusted for `jsontps://` origins (D20). `None`:
    /// the system's roots, loaded at the first TLS connection.
    #[cfg(feature = "tls")]
    pub tls: Option<crate::io_adapters::tls::ClientTls>,
}

impl Default for PoolOptions {
    /// The client's default options; 32 connections per origin, all of
    /// which may stay idle, for 50 s: less than a server's own idle limit
    /// (D3: 60 s), so that the pool, not the server, ends an idle
    /// connection. No deadline per call beyond each step's timeouts.
    fn default() -> Self {
        PoolOptions {
            client: ClientOptions::default(),
            max_connections_per_host: 32,
            max_idle_per_host: 32,
            idle_timeout: Some(Duration::from_secs(50)),
            call_timeout: None,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

impl PoolOptions {
    /// Each connection's options (builder style).
    pub fn with_client(mut self, client: ClientOptions) -> Self {
        self.client = client;
        self
    }

    /// The most connections per origin (builder style; at least 1).
    pub fn with_max_connections_per_host(mut self, max: usize) -> Self {
        self.max_connections_per_host = max.max(1);
        self
    }

    /// The most idle connections kept per origin (builder style; 0 closes
    /// each after its call).
    pub fn with_max_idle_per_host(mut self, max: usize) -> Self {
        self.max_idle_per_host = max;
        self
    }

    /// How long a connection may stay idle (builder style).
    pub fn with_idle_timeout(mut self, limit: Option<Duration>) -> Self {
        self.idle_timeout = limit;
        self
    }

    /// The deadline of every call (builder style).
    pub fn with_call_timeout(mut self, limit: Option<Duration>) -> Self {
        self.call_timeout = limit;
        self
    }

    /// The certificates trusted for `jsontps://` origins (builder style).
    #[cfg(feature = "tls")]
    pub fn with_tls(mut self, tls: crate::io_adapters::tls::ClientTls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The TLS settings for `jsontps://` origins: the options', else the
    /// system's roots, loaded once.
    #[cfg(feature = "tls")]
    pub(crate) fn client_tls(&self) -> Result<crate::io_adapters::tls::ClientTls, std::io::Error> {
        use std::sync::OnceLock;
        static SYSTEM: OnceLock<Result<crate::io_adapters::tls::ClientTls, String>> = OnceLock::new();
        if let Some(tls) = &self.tls {
            return Ok(tls.clone());
        }
        SYSTEM
            .get_or_init(|| crate::io_adapters::tls::ClientTls::system_roots().map_err(|e| e.to_string()))
            .clone()
            .map_err(std::io::Error::other)
    }
}

/// Whether a call that failed with `error` may be sent again, once, on a
/// new connection (D13): its connection was reused (a new one that closes
/// at once is the server's answer, not a stale connection), it closed
/// before any byte of the answer arrived, and the method is idempotent
/// (`GET`, `OPTIONS`, `PUT`, `DELETE`; never a `POST`).
pub(crate) fn may_retry(error: &ClientError, method: Method, reused: bool) -> bool {
    reused && error.progress().is_some_and(|p| p.may_send_again(method))
}

/// A call's request, and the copy kept for the one retry D13 allows,
/// made only when the request goes out on a reused connection with a
/// method that may be sent again.
pub(crate) struct Resend {
    first: Option<Request>,
    spare: Option<Request>,
}

impl Resend {
    pub(crate) fn new(request: Request) -> Resend {
        Resend {
            first: Some(request),
            spare: None,
        }
    }

    /// The request for this attempt: the call's own the first time
    /// (copied when `reused` and the call `may_retry`), its copy after.
    pub(crate) fn next(&mut self, reused: bool, may_retry: bool) -> Result<Request, ClientError> {
        match self.first.take() {
            Some(request) => {
                if reused && may_retry && Progress::UNSENT.may_send_again(request.method) {
                    self.spare = Some(request.clone());
                }
                Ok(request)
            }
            None => self.spare.take().ok_or(ClientError::ConnectionClosed),
        }
    }
}

/// A call's deadline ([`PoolOptions::call_timeout`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(Option<Instant>);

/// One step's time limit under a call's deadline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounded {
    /// The step's own limit or what is left of the deadline, the earlier.
    pub(crate) limit: Option<Duration>,
    /// Whether that is the deadline's: a timeout of the step is then the
    /// call's.
    by_call: bool,
}

impl Bounded {
    /// `error`, with a step's timeout that the deadline set said as the
    /// call's.
    pub(crate) fn blame(self, error: ClientError) -> ClientError {
        match error {
            ClientError::TimedOut(Timeout::Connect | Timeout::Exchange) if self.by_call => {
                ClientError::TimedOut(Timeout::Call)
            }
            other => other,
        }
    }
}

impl Deadline {
    pub(crate) fn after(now: Instant, limit: Option<Duration>) -> Deadline {
        Deadline(limit.map(|limit| now + limit))
    }

    /// What is left of it, or the call's timeout when it has passed.
    pub(crate) fn left(self, now: Instant) -> Result<Option<Duration>, ClientError> {
        match self.0 {
            None => Ok(None),
            Some(at) if now >= at => Err(ClientError::TimedOut(Timeout::Call)),
            Some(at) => Ok(Some(at - now)),
        }
    }

    /// A step's limit `own` under the deadline.
    pub(crate) fn bound(self, now: Instant, own: Option<Duration>) -> Result<Bounded, ClientError> {
        Ok(match (self.left(now)?, own) {
            (Some(left), Some(own)) if own < left => Bounded {
                limit: Some(own),
                by_call: false,
            },
            (Some(left), _) => Bounded {
                limit: Some(left),
                by_call: true,
            },
            (None, own) => Bounded {
                limit: own,
                by_call: false,
            },
        })
    }
}

/// A pooled connection, as the bookkeeping sees it.
pub(crate) trait Pooled: Send {
    /// Whether the client has found it unusable (closed, broken).
    fn is_closed(&self) -> bool;

    /// Whether the server has closed it, or sent what nobody asked for,
    /// while it was idle: then it is never used again.
    fn server_spoke(&self) -> bool;
}

/// How a pool wakes the calls waiting for a connection.
pub(crate) trait Signal: Default + Send + Sync {
    fn wake_all(&self);
}

impl Signal for std::sync::Condvar {
    fn wake_all(&self) {
        self.notify_all();
    }
}

#[cfg(feature = "tokio")]
impl Signal for ::tokio::sync::Notify {
    fn wake_all(&self) {
        self.notify_waiters();
    }
}

/// Whether the task that closes idle connections in time runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reaper {
    Stopped,
    Running,
}

/// A pool's state: its options, its connections per origin under one
/// lock, and the signal that wakes the calls waiting for one.
pub(crate) struct Shared<C, S> {
    pub(crate) options: PoolOptions,
    hosts: Mutex<Hosts<C>>,
    pub(crate) signal: S,
}

/// The connections of every origin.
pub(crate) struct Hosts<C> {
    map: HashMap<Origin, Host<C>>,
    pub(crate) reaper: Reaper,
    /// Counts the changes a waiting call may be waiting for (a connection
    /// back, a place freed): a call that saw `Full` at one count waits
    /// until it moves, so that no change between its look and its wait is
    /// missed.
    pub(crate) changes: u64,
}

/// One origin's connections: `open` counts those idle and those in use
/// (and those being made), which the per-host limit bounds.
struct Host<C> {
    /// Oldest first: a call takes the most recently used.
    idle: Vec<Idle<C>>,
    open: usize,
}

struct Idle<C> {
    conn: C,
    since: Instant,
}

/// What a call may do with an origin now.
pub(crate) enum Checkout<C> {
    /// Use this idle connection.
    Reuse(C),
    /// Make a new connection: a place for it is counted.
    Connect,
    /// Wait for the count of changes to move from this one: every place
    /// is taken.
    Full(u64),
}

impl<C: Pooled, S: Signal> Shared<C, S> {
    pub(crate) fn new(mut options: PoolOptions) -> Self {
        options.max_connections_per_host = options.max_connections_per_host.max(1);
        Shared {
            options,
            hosts: Mutex::new(Hosts {
                map: HashMap::new(),
                reaper: Reaper::Stopped,
                changes: 0,
            }),
            signal: S::default(),
        }
    }

    /// The time, as the clients read it.
    pub(crate) fn now(&self) -> Instant {
        self.options.client.clock.now().instant
    }

    /// The lock over every origin's connections. A panic elsewhere while
    /// it was held leaves the counts as they were, which stay usable.
    pub(crate) fn hosts(&self) -> MutexGuard<'_, Hosts<C>> {
        self.hosts.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes an idle connection to `origin` that is still good, or a place
    /// for a new one, or says to wait. Idle connections past their time,
    /// or that the server closed meanwhile, are closed on the way.
    pub(crate) fn checkout(&self, origin: &Origin) -> Checkout<C> {
        let now = self.now();
        let mut hosts = self.hosts();
        let host = hosts.map.entry(origin.clone()).or_insert_with(|| Host {
            idle: Vec::new(),
            open: 0,
        });
        let mut freed = host.prune(now, self.options.idle_timeout);
        let mut checkout = None;
        while let Some(idle) = host.idle.pop() {
            if !idle.conn.is_closed() && !idle.conn.server_spoke() {
                checkout = Some(Checkout::Reuse(idle.conn));
                break;
            }
            host.open -= 1;
            freed = true;
        }
        if checkout.is_none() && host.open < self.options.max_connections_per_host {
            host.open += 1;
            checkout = Some(Checkout::Connect);
        }
        if freed {
            hosts.changes += 1;
        }
        let checkout = checkout.unwrap_or(Checkout::Full(hosts.changes));
        drop(hosts);
        // Places freed here may be more than this call takes.
        if freed {
            self.signal.wake_all();
        }
        checkout
    }

    /// A connection back from a call: kept idle when it is usable and
    /// there is room, else closed and its place freed. `true` when the
    /// reaper must start.
    pub(crate) fn check_in(&self, origin: &Origin, conn: C) -> bool {
        let now = self.now();
        let mut hosts = self.hosts();
        let Some(host) = hosts.map.get_mut(origin) else {
            return false;
        };
        let start = if conn.is_closed() || host.idle.len() >= self.options.max_idle_per_host {
            host.open -= 1;
            drop(conn);
            false
        } else {
            host.idle.push(Idle { conn, since: now });
            // Only on the system's clock: the reaper sleeps real time. On
            // a clock of the caller's, idle connections past their time
            // are closed when the pool is next used for their origin.
            self.options.idle_timeout.is_some()
                && self.options.client.clock.is_system()
                && hosts.reaper == Reaper::Stopped
        };
        if start {
            hosts.reaper = Reaper::Running;
        }
        hosts.changes += 1;
        drop(hosts);
        self.signal.wake_all();
        start
    }

    /// A place given up (a connection closed, or never made).
    pub(crate) fn release(&self, origin: &Origin) {
        let mut hosts = self.hosts();
        if let Some(host) = hosts.map.get_mut(origin) {
            host.open -= 1;
            if host.open == 0 {
                hosts.map.remove(origin);
            }
        }
        hosts.changes += 1;
        drop(hosts);
        self.signal.wake_all();
    }

    /// Closes the idle connections past their time. The next time one
    /// will be, or `None` when none is idle: the reaper stops (it is
    /// marked stopped here, under the lock, so that the next connection
    /// to come back starts it again).
    pub(crate) fn reap(&self) -> Option<Instant> {
        let now = self.now();
        let limit = self.options.idle_timeout?;
        let mut hosts = self.hosts();
        let mut next: Option<Instant> = None;
        let mut freed = false;
        hosts.map.retain(|_, host| {
            freed |= host.prune(now, Some(limit));
            if let Some(oldest) = host.idle.first() {
                let due = oldest.since + limit;
                next = Some(next.map_or(due, |n| n.min(due)));
            }
            host.open > 0
        });
        if next.is_none() {
            hosts.reaper = Reaper::Stopped;
        }
        if freed {
            hosts.changes += 1;
        }
        drop(hosts);
        if freed {
            self.signal.wake_all();
        }
        next
    }

    /// Idle connections to `origin`.
    pub(crate) fn idle_count(&self, origin: &Origin) -> usize {
        self.hosts().map.get(origin).map_or(0, |h| h.idle.len())
    }

    /// Connections to `origin`, idle or in use.
    pub(crate) fn open_count(&self, origin: &Origin) -> usize {
        self.hosts().map.get(origin).map_or(0, |h| h.open)
    }
}

impl<C> Host<C> {
    /// Closes the idle connections older than `limit`; whether any was.
    fn prune(&mut self, now: Instant, limit: Option<Duration>) -> bool {
        let Some(limit) = limit else {
            return false;
        };
        let before = self.idle.len();
        // Oldest first: the expired ones are a prefix.
        let expired = self.idle.partition_point(|idle| now >= idle.since + limit);
        self.idle.drain(..expired);
        self.open -= before - self.idle.len();
        expired > 0
    }
}

/// A place a call holds among an origin's connections, and the
/// connection in it: given back by [`finish`](Self::finish), freed when
/// dropped without (a call that failed, or was cancelled mid-exchange:
/// its connection closes with it).
pub(crate) struct Lease<C: Pooled, S: Signal> {
    shared: Arc<Shared<C, S>>,
    origin: Origin,
    held: Held<C>,
}

/// What a lease holds.
enum Held<C> {
    /// A place, its connection being made.
    Place,
    /// A connection: `reused` when it came from the idle ones.
    Conn { conn: C, reused: bool },
    /// Nothing any more: the connection went back, or the place was freed.
    Nothing,
}

impl<C: Pooled, S: Signal> Lease<C, S> {
    /// A place counted by [`Shared::checkout`], with its connection when
    /// it was an idle one.
    pub(crate) fn new(shared: Arc<Shared<C, S>>, origin: Origin, reused: Option<C>) -> Self {
        let held = match reused {
            Some(conn) => Held::Conn { conn, reused: true },
            None => Held::Place,
        };
        Lease { shared, origin, held }
    }

    pub(crate) fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Puts a new connection in the place (closing any there before).
    pub(crate) fn connected(&mut self, conn: C) {
        self.held = Held::Conn { conn, reused: false };
    }

    /// Gives up the connection held, keeping the place for a new one.
    pub(crate) fn reconnecting(&mut self) {
        self.held = Held::Place;
    }

    /// Whether the connection held came from the idle ones.
    pub(crate) fn reused(&self) -> bool {
        matches!(self.held, Held::Conn { reused: true, .. })
    }

    /// The connection held, if one is.
    pub(crate) fn conn(&mut self) -> Option<&mut C> {
        match &mut self.held {
            Held::Conn { conn, .. } => Some(conn),
            _ => None,
        }
    }

    /// Gives the connection back to the pool (kept idle if it is still
    /// usable). `true` when the reaper must start.
    pub(crate) fn finish(mut self) -> bool {
        match std::mem::replace(&mut self.held, Held::Nothing) {
            Held::Conn { conn, .. } => self.shared.check_in(&self.origin, conn),
            Held::Place => {
                self.shared.release(&self.origin);
                false
            }
            Held::Nothing => false,
        }
    }
}

impl<C: Pooled, S: Signal> Drop for Lease<C, S> {
    fn drop(&mut self) {
        if !matches!(self.held, Held::Nothing) {
            // The connection, mid-exchange or broken, closes here.
            self.held = Held::Nothing;
            self.shared.release(&self.origin);
        }
    }
}

/// Whether a TCP socket that should be quiet (idle, between exchanges)
/// has had its end closed by the server or holds bytes nobody asked for:
/// one peek, which never blocks and leaves the bytes where they are.
#[cfg(unix)]
pub(crate) fn socket_spoke(socket: std::os::fd::BorrowedFd<'_>) -> bool {
    use rustix::net::{RecvFlags, recv};
    let mut byte = [0u8; 1];
    loop {
        match recv(socket, &mut byte[..], RecvFlags::PEEK | RecvFlags::DONTWAIT) {
            // Nothing to read, and the stream is open: quiet.
            Err(rustix::io::Errno::AGAIN) => return false,
            Err(rustix::io::Errno::INTR) => {}
            // The end of the stream, bytes (a TLS alert, a last word
            // before a close), or an error such as a reset.
            Ok(_) | Err(_) => return true,
        }
    }
}

/// Elsewhere the pool cannot tell without reading: a connection the
/// server closed is found out by its call, and retried where D13 allows.
#[cfg(not(unix))]
pub(crate) fn socket_spoke<T>(_socket: T) -> bool {
    false
}

/// A request being made for a pool ([`blocking::Pool::get`](super::blocking::Pool::get)
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
    /// [`body_from_keys`](super::body_from_keys)): reqwest's `.json(&value)`.
    pub fn keys<T: Serialize + ?Sized>(self, value: &T) -> Self {
        self.map(|mut request| {
            let body = std::mem::take(&mut request.body);
            Ok(request.with_body(keys::keys_into(body, value)?))
        })
    }

    /// This call's deadline, in place of [`PoolOptions::call_timeout`]:
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_an_origin_and_a_resource() {
        let split = |url: &str| {
            split_url(url)
                .map(|(o, r)| (o.to_string(), r.to_string()))
                .map_err(|e| e.to_string())
        };
        let pair = |o: &str, r: &str| Ok((o.to_owned(), r.to_owned()));
        assert_eq!(
            split("jsontp://Example.com:9000/a?x=1#f"),
            pair("jsontp://example.com:9000", "/a?x=1#f")
        );
        assert_eq!(split("JSONTPS://h/x"), pair("jsontps://h:8443", "/x"));
        assert_eq!(split("localhost:1"), pair("jsontp://localhost:1", "/"));
        assert_eq!(split("jsontp://[::1]/x"), pair("jsontp://[::1]:8080", "/x"));
        assert_eq!(split("[::1]:9/?q"), pair("jsontp://[::1]:9", "/?q"));
        for (url, why) in [
            ("http://h/x", "is not a jsontp:// or jsontps:// URL"),
            ("jsontp://:80/", "names no host"),
            ("jsontp://h:0/", "has a port that is not a number from 1 to 65535"),
            ("jsontp://[::1/", "has an unclosed ["),
        ] {
            let error = split_url(url).expect_err(url);
            assert_eq!(error.to_string(), format!("the URL {url:?} {why}"));
        }
        assert!(Origin::parse("jsontp://h:1/path").is_err());
        assert_eq!(
            Origin::from("127.0.0.1:7".parse::<std::net::SocketAddr>().unwrap()),
            Origin::parse("127.0.0.1:7").unwrap()
        );
    }

    #[test]
    fn only_a_reused_idempotent_exchange_that_heard_nothing_is_retried() {
        use super::super::{Progress, Sent};
        let closed = |request, answer_began| ClientError::ClosedEarly {
            progress: Progress {
                request,
                answer_began,
            },
        };
        for method in [Method::Get, Method::Options, Method::Put, Method::Delete] {
            assert!(may_retry(&closed(Sent::Whole, false), method, true), "{method}");
            assert!(may_retry(&closed(Sent::Part, false), method, true), "{method}");
            assert!(!may_retry(&closed(Sent::Whole, true), method, true), "{method}");
            assert!(!may_retry(&closed(Sent::Whole, false), method, false), "{method}");
            assert!(!may_retry(&ClientError::TimedOut(Timeout::Read), method, true));
        }
        assert!(!may_retry(&closed(Sent::Whole, false), Method::Post, true));
        assert!(!may_retry(&closed(Sent::Nothing, false), Method::Post, true));
    }

    #[test]
    fn a_step_under_the_deadline_takes_the_earlier_limit_and_the_blame() {
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        let deadline = Deadline::after(t0, Some(second * 5));
        let own = deadline.bound(t0, Some(second)).expect("time left");
        assert_eq!(own.limit, Some(second));
        assert!(matches!(
            own.blame(ClientError::TimedOut(Timeout::Connect)),
            ClientError::TimedOut(Timeout::Connect)
        ));
        let late = deadline
            .bound(t0 + second * 4, Some(second * 10))
            .expect("time left");
        assert_eq!(late.limit, Some(second));
        assert!(matches!(
            late.blame(ClientError::TimedOut(Timeout::Exchange)),
            ClientError::TimedOut(Timeout::Call)
        ));
        assert!(matches!(
            late.blame(ClientError::TimedOut(Timeout::Read)),
            ClientError::TimedOut(Timeout::Read)
        ));
        assert!(matches!(
            deadline.left(t0 + second * 5),
            Err(ClientError::TimedOut(Timeout::Call))
        ));
        assert_eq!(
            Deadline::after(t0, None)
                .bound(t0, None)
                .expect("no deadline")
                .limit,
            None
        );
    }

    struct Fake {
        closed: bool,
    }

    impl Pooled for Fake {
        fn is_closed(&self) -> bool {
            self.closed
        }
        fn server_spoke(&self) -> bool {
            false
        }
    }

    #[test]
    fn the_bookkeeping_keeps_the_limit_and_the_idle_time() {
        use std::sync::{Condvar, Mutex as StdMutex};
        let time = Arc::new(StdMutex::new(crate::io_adapters::now()));
        let held = Arc::clone(&time);
        let clock = crate::io_adapters::Clock::from_fn(move || *held.lock().unwrap());
        let options = PoolOptions::default()
            .with_client(ClientOptions::default().with_clock(clock))
            .with_max_connections_per_host(2)
            .with_idle_timeout(Some(Duration::from_secs(10)));
        let shared: Arc<Shared<Fake, Condvar>> = Arc::new(Shared::new(options));
        let origin = Origin::parse("h:1").unwrap();
        assert!(matches!(shared.checkout(&origin), Checkout::Connect));
        assert!(matches!(shared.checkout(&origin), Checkout::Connect));
        let Checkout::Full(seen) = shared.checkout(&origin) else {
            panic!("two at most")
        };
        assert!(
            !shared.check_in(&origin, Fake { closed: false }),
            "no reaper on a clock of the caller's"
        );
        assert!(shared.hosts().changes > seen, "a waiting call sees the change");
        assert!(
            !shared.check_in(&origin, Fake { closed: true }),
            "a closed one is not kept"
        );
        assert_eq!((shared.idle_count(&origin), shared.open_count(&origin)), (1, 1));
        assert!(matches!(shared.checkout(&origin), Checkout::Reuse(_)));
        // A lease dropped mid-exchange frees its place.
        drop(Lease::new(
            Arc::clone(&shared),
            origin.clone(),
            Some(Fake { closed: false }),
        ));
        assert_eq!(shared.open_count(&origin), 0);

        assert!(matches!(shared.checkout(&origin), Checkout::Connect));
        shared.check_in(&origin, Fake { closed: false });
        assert_eq!(
            shared.reap().map(|at| at - time.lock().unwrap().instant),
            Some(Duration::from_secs(10))
        );
        time.lock().unwrap().instant += Duration::from_secs(10);
        assert_eq!(shared.reap(), None, "closed at its idle limit; the reaper stops");
        assert_eq!(shared.open_count(&origin), 0);
        assert_eq!(shared.hosts().reaper, Reaper::Stopped);
    }
}
