//! The adapters over real streams: every server runtime (std, mio, tokio)
//! and every client (blocking, tokio), against each other, against raw
//! sockets and scripted peers, against the published reference crate, and
//! under the conditions that used to hurt (idle and slow peers, bursts, a
//! lack of descriptors, shutdown). Loopback only; every test is bounded in
//! time.
#![allow(clippy::disallowed_methods)] // tests own threads and the clock

mod awaited;
mod clients;
mod fair_connections;
mod handlers;
mod hostile;
mod interop;
mod listeners;
mod matrix;
mod metrics;
#[cfg(feature = "tokio")]
#[path = "../common/on_tokio.rs"]
mod on_tokio;
mod pipelines;
#[cfg(feature = "tls")]
mod pki;
mod pool;
mod proxy;
#[path = "../common/reference_get.rs"]
mod reference_get;
mod refused_uploads;
mod robustness;
mod seam;
mod servers;
mod simulation;
mod stall;
mod streaming;
mod support;
mod tls;
