//! The connection state machine, without sockets: the transition table,
//! each role against bytes written by hand (transcripts), a client and a
//! server wired together, the D3 limits on output, and property tests.

mod client;
mod output;
mod pair;
mod props;
mod refused;
mod server;
mod streaming;
mod support;
mod table;
