//! Applications on the servers: the router, its extractors and answers,
//! over TCP on every runtime (std and mio with synchronous handlers, tokio
//! as a tower service with `async` ones and tower's layers).
#![allow(clippy::disallowed_methods)] // tests own threads and the clock

mod access;
#[cfg(feature = "tower")]
mod client_service;
mod extract;
#[cfg(feature = "tower")]
#[path = "../common/on_tokio.rs"]
mod on_tokio;
mod routing;
#[cfg(feature = "tower")]
mod service;
mod support;
#[cfg(feature = "tower")]
mod tower_http;
