//! The async clients (feature `tokio`): [`Pool`], the twin of
//! [`blocking::Pool`](super::blocking::Pool), and [`Client`], the twin of
//! [`blocking::Client`](super::blocking::Client), with the same options,
//! outcomes and errors, and the same drive step, polled through the
//! stream (tokio's `Pending` is the step's `WouldBlock`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use jsontp_protocol::io_adapters::client::PoolOptions;
//! use jsontp_protocol::io_adapters::client::tokio::Pool;
//!
//! let pool = Pool::new(PoolOptions::default());
//! let answer = pool.get("jsontp://127.0.0.1:8080/hello.txt").send().await?;
//! println!("{}", answer.response.body.as_text().unwrap_or(""));
//! # Ok(())
//! # }
//! ```
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use jsontp_protocol::io_adapters::client::ClientOptions;
//! use jsontp_protocol::io_adapters::client::tokio::Client;
//! use jsontp_protocol::message::{Method, Request};
//!
//! let mut client = Client::connect("127.0.0.1:8080", ClientOptions::default()).await?;
//! let answer = client.send(Request::new(Method::Get, "/hello.txt".parse()?)).await?;
//! println!("{}", answer.response.body.as_text().unwrap_or(""));
//! # Ok(())
//! # }
//! ```
//!
//! The parts, in files by concern: `client.rs` ([`Client`], and how a
//! connection is made), `stream.rs` (a pooled connection's stream),
//! `pool.rs` ([`Pool`] and its calls) and `service.rs` (`ClientService`,
//! feature `tower`).

pub use client::Client;
pub use pool::Pool;
#[cfg(feature = "tower")]
pub use service::ClientService;

mod client;
mod pool;
#[cfg(feature = "tower")]
mod service;
mod stream;
