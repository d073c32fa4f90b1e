//! The std blocking client (issue 5).
