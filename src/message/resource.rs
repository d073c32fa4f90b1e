//! The `resource` field (D7): seven shapes, parsed into their parts, the
//! original string kept for the echo.

use std::fmt;
use std::str::FromStr;

use super::ValueError;

/// A parsed `resource`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    original: String,
    scheme: bool,
    host: Option<String>,
    port: Option<u16>,
    path: String,
    query: Option<String>,
    fragment: Option<String>,
}

impl Resource {
    /// The string exactly as the request wrote it; responses echo it (D7).
    pub fn as_str(&self) -> &str {
        &self.original
    }

    /// Whether it was written with the `jsontp://` scheme.
    pub fn has_scheme(&self) -> bool {
        self.scheme
    }

    /// The host, if the shape carries one. Ignored by default (D7).
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// The port, if written.
    pub fn port(&self) -> Option<u16> {
        self.port
    }

    /// The path, percent-decoded and normalised, always starting with `/`
    /// and never climbing above the root.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The query, without `?`, as written.
    pub fn query(&self) -> Option<&str> {
        self.query.as_deref()
    }

    /// The fragment, without `#`, as written.
    pub fn fragment(&self) -> Option<&str> {
        self.fragment.as_deref()
    }
}

impl FromStr for Resource {
    type Err = ValueError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let _ = s;
        todo!("issue 2: D7 resources")
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.original)
    }
}
