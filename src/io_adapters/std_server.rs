//! The std blocking server (issue 4).
