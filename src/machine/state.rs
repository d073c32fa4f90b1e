//! The transition table shared by both roles (in the manner of h11).

/// Which side of the connection this machine plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Sends requests, receives responses.
    Client,
    /// Receives requests, sends responses.
    Server,
}
