#!/usr/bin/env bash
# The Python package beside h11 and uvicorn (BENCHMARKS.md, "Python"):
#
#   scripts/python-bench.sh [--rounds 3] [--seconds 5]
#
# 1. one request read and its response written through jsontp_protocol's
#    sans-I/O API and through h11 (the same HTTP/1.1 cycle), in one process;
# 2. the asyncio hello server (python/examples/hello_server.py) beside
#    uvicorn, one worker, with h11 and with httptools, serving the same
#    hello app, under the same load generator (loadbench gen: 16
#    connections, pipeline 1; the servers on CPU 0, the generator on CPU 1).
#
# Installs what it needs into target/python-bench-venv: the package from
# python/ (release build), h11, uvicorn, httptools. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
target="$CARGO_TARGET_DIR"
venv="$target/python-bench-venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check ./python h11 uvicorn httptools
# The load generator is a crate of its own; it shares the target folder.
cargo build --release --quiet --manifest-path benches/load/Cargo.toml
echo "## one request cycle, Python API against h11"
"$venv/bin/python" benches/python/cycle.py
echo
echo "## the asyncio hello server against uvicorn"
"$venv/bin/python" benches/python/servers.py --loadbench "$target/release/loadbench" "$@"
