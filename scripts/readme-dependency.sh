#!/usr/bin/env bash
# The README's dependency line and its first Rust example, in a fresh
# project outside this workspace: they must build as a new user copies
# them, with only the checkout's path put in for `../jsontp`.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

line=$(awk '/^\[dependencies\]$/ { getline; print; exit }' README.md)
case "$line" in
    'jsontp-protocol = { path = "../jsontp"'*) ;;
    *) echo "README: the dependency line is not the expected path form: $line" >&2; exit 1 ;;
esac
project=$(mktemp -d)
trap 'rm -rf "$project"' EXIT
mkdir -p "$project/src"
cat > "$project/Cargo.toml" <<TOML
[package]
name = "readme-example"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
${line/..\/jsontp/$repo}

[workspace]
TOML
awk '/^```rust$/ { inside = 1; next } /^```$/ { if (inside) exit } inside' README.md > "$project/src/main.rs"
grep -q "fn main" "$project/src/main.rs" || { echo "README: the first Rust example has no main" >&2; exit 1; }
# A target folder of its own, kept between runs: the example's build
# shares nothing with the workspace's and must not disturb it.
CARGO_TARGET_DIR="$repo/target/readme-example" cargo build --quiet --manifest-path "$project/Cargo.toml"
echo "the README's dependency line builds its first example"
