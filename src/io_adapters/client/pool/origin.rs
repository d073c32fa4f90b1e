//! Where a call goes: an [`Origin`] (scheme, host, port), and a URL split
//! into its origin and resource ([`split_url`]).

use std::fmt;
use std::str::FromStr;

use crate::io_adapters::client::ClientError;
use crate::message::Resource;

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
    /// name as [`PoolOptions::tls`](super::PoolOptions::tls) says.
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
