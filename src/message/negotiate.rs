//! Helpers an application uses to answer the negotiation and conditional
//! headers (D5 level 5, D8, D17, D18). Each returns the [`Status`] to answer
//! with when the request cannot be satisfied.

use super::{Date, Encoding, LanguageRange, LanguageTag, MediaRange, MediaType, Status};

/// Chooses the response encoding: the first entry of the client's
/// `accept-encoding` (in its order) that is in `available`; `identity` when
/// the header is absent. `412` when nothing listed can be produced (D8).
pub fn choose_encoding(accepted: Option<&[Encoding]>, available: &[Encoding]) -> Result<Encoding, Status> {
    let _ = (accepted, available);
    todo!("issue 2: negotiation")
}

/// Chooses the response language: the first entry of `accept-language` that
/// `offered` contains, or `offered[0]` for `*` or no header. `406` when no
/// entry matches (D18).
pub fn choose_language(
    accepted: Option<&[LanguageRange]>,
    offered: &[LanguageTag],
) -> Result<LanguageTag, Status> {
    let _ = (accepted, offered);
    todo!("issue 2: negotiation")
}

/// Checks the request's `content-type` against the media types the server
/// takes (essence compared, parameters allowed): `415` when unsupported.
pub fn check_content_type(content_type: Option<&MediaType>, supported: &[MediaType]) -> Result<(), Status> {
    let _ = (content_type, supported);
    todo!("issue 2: negotiation")
}

/// Checks `accept` against the media type a resource is offered in: `415`
/// when no range matches (reference: accept).
pub fn check_accept(accept: Option<&[MediaRange]>, offered: &MediaType) -> Result<(), Status> {
    let _ = (accept, offered);
    todo!("issue 2: negotiation")
}

/// What the conditional headers say about a resource (D17).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// Serve the resource.
    Proceed,
    /// `304`: not modified since `if-modified-since`.
    NotModified,
    /// `412`: modified since `if-unmodified-since`, or a conditional header
    /// names a resource that cannot be provided.
    PreconditionFailed,
}

/// Evaluates `if-modified-since` / `if-unmodified-since` against the
/// resource's last-modified time (`None`: the resource cannot be provided).
/// Whole seconds are compared (D16).
pub fn evaluate_conditions(
    if_modified_since: Option<Date>,
    if_unmodified_since: Option<Date>,
    last_modified: Option<Date>,
) -> Condition {
    let _ = (if_modified_since, if_unmodified_since, last_modified);
    todo!("issue 2: conditional requests")
}
