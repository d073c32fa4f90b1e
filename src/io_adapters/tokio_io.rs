//! The tokio server and client, behind the `tokio` feature (issue 5).
