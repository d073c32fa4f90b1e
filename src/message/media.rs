//! Media types and media ranges (D8, D18), as HTTP writes them:
//! `type/subtype` with optional `; name=value` parameters.

use std::fmt;
use std::str::FromStr;

use super::ValueError;

/// A media type such as `text/plain; charset=utf-8`. Type and subtype are
/// stored lower-case; parameters keep their order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MediaType {
    essence: String,
    slash: usize,
    params: Vec<(String, String)>,
}

impl MediaType {
    /// The top-level type, e.g. `text`.
    pub fn type_(&self) -> &str {
        &self.essence[..self.slash]
    }

    /// The subtype, e.g. `plain`.
    pub fn subtype(&self) -> &str {
        &self.essence[self.slash + 1..]
    }

    /// `type/subtype` without parameters.
    pub fn essence(&self) -> &str {
        &self.essence
    }

    /// The parameters, names lower-case, in the order given.
    pub fn params(&self) -> &[(String, String)] {
        &self.params
    }
}

impl FromStr for MediaType {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let _ = s;
        todo!("issue 2: media types")
    }
}

impl fmt::Display for MediaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let _ = f;
        todo!("issue 2: media types")
    }
}

/// A media range of `accept`: `type/subtype`, `type/*` or `*/*`, with
/// optional parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MediaRange {
    range: MediaType,
}

impl MediaRange {
    /// Whether `media` falls in this range (parameters of the range, other
    /// than `q`, must be present on `media` with equal values).
    pub fn matches(&self, media: &MediaType) -> bool {
        let _ = media;
        todo!("issue 2: media ranges")
    }
}

impl FromStr for MediaRange {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let _ = s;
        todo!("issue 2: media ranges")
    }
}

impl fmt::Display for MediaRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.range.fmt(f)
    }
}
