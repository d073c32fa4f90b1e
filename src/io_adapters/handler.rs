//! The application interface shared by every server adapter.

use std::net::SocketAddr;

use crate::message::{Request, Response};

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
    /// by default.
    fn check_continue(&self, request: &Request, info: &RequestInfo) -> Result<(), Response> {
        let _ = (request, info);
        Ok(())
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
