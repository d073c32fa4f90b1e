//! [`PoolOptions`]: how a pool connects, keeps and limits its
//! connections, and how long a call may take.

use std::time::Duration;

use crate::io_adapters::client::ClientOptions;

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
    /// [`RequestBuilder::timeout`](super::RequestBuilder::timeout) sets one call's.
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
