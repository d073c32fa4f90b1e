//! The file server behind `jsontp serve` (issue 4).
