// The module's documentation is `docs/protocol-rules.md`, so that the rules
// read the same in a clone, on a forge and on docs.rs. The module has no
// items: it exists so that `crate::rules#d5` resolves wherever code cites a
// rule.
#![doc = include_str!("../docs/protocol-rules.md")]
