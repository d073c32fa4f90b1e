//! The JSON syntax layer (D4): strict serde_json fast path, JSON5 fallback,
//! duplicate keys, UTF-8 and the depth limit checked before any recursive
//! parser runs.
