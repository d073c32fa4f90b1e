//! # jsontp
//!
//! A Rust implementation of the jsontp protocol: an HTTP-like request/response
//! protocol in which every message is one JSON object sent over TCP.
//!
//! The crate is built in three layers:
//!
//! - [`message`]: the types of jsontp messages and the pure functions that
//!   parse, validate and serialize them. No I/O.
//! - [`machine`]: a sans-I/O connection state machine for both the server and
//!   the client role. Bytes and the current time go in; events and bytes to
//!   send come out. No sockets, no threads, no clock.
//! - [`io_adapters`]: thin drivers that run the machine over real TCP with std
//!   blocking sockets, mio, or tokio (feature `tokio`).
//!
//! [`file_server`] is the application behind `jsontp serve`.
//!
//! Rule numbers such as D5 refer to the project's `DECISIONS.md`, which
//! settles what the protocol reference leaves open.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod file_server;
pub mod io_adapters;
pub mod machine;
pub mod message;
