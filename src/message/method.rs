//! The five request methods (reference: Endpoints; D11).

use std::fmt;

/// A jsontp request method. Compared exactly: `get` is not `GET` (D5 level 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// Retrieve the resource.
    Get,
    /// As `GET`, with `application/x-www-form-urlencoded` content (D11).
    Post,
    /// Create or replace the resource (`201`).
    Put,
    /// Delete the resource (`204`).
    Delete,
    /// Report the allowed methods (`200`, body key `allowed-methods`).
    Options,
}

impl Method {
    /// All five methods, in the order the protocol lists them.
    pub const ALL: [Method; 5] = [
        Method::Get,
        Method::Post,
        Method::Put,
        Method::Delete,
        Method::Options,
    ];

    /// The method's name as it appears on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
        }
    }

    /// Parses a wire name, exactly (no case folding).
    pub fn from_wire(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.as_str() == name)
    }

    /// Whether a request with this method must carry `body.content` (D9).
    pub const fn requires_content(self) -> bool {
        matches!(self, Method::Post | Method::Put)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_case_sensitive() {
        for m in Method::ALL {
            assert_eq!(Method::from_wire(m.as_str()), Some(m));
        }
        assert_eq!(Method::from_wire("get"), None);
        assert_eq!(Method::from_wire("PATCH"), None);
    }
}
