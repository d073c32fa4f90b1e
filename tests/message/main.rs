//! The message layer: one message's fields and values, and the helpers an
//! application answers with (D5-D8, D11, D15, D17, D18).

mod cookies;
mod headers;
mod negotiation;
mod resources;
mod sample_request;
mod status;
mod versions;
