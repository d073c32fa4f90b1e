//! Thin drivers that run the [`machine`](crate::machine) over real TCP.
