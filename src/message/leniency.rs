//! How strictly a client reads responses (D13): strict by default, or a
//! lenient mode that forgives what the published reference implementation
//! leaves out and reports what it forgave. Its own module because both the
//! parser and the header readers decide by it.

/// How strictly a client checks responses (D13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Validation {
    /// Every rule of the response message holds.
    #[default]
    Strict,
    /// Missing `date`/`language` and an empty `encoding` are forgiven (the
    /// published reference crate sends both) and reported; so are header
    /// names outside the protocol's list, which are dropped.
    Lenient,
}

/// What a lenient parse forgave in a response (D13).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Forgiven {
    /// `headers.date` was missing.
    MissingDate,
    /// `headers.language` was missing.
    MissingLanguage,
    /// `body.encoding` was `""`; read as `identity`.
    EmptyEncoding,
    /// One or more header names outside the protocol's list were dropped.
    UnknownHeader,
}
