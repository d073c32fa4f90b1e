#!/usr/bin/env bash
# Load benchmarks: `jsontp serve` and the mio adapter beside nginx and hyper
# (BENCHMARKS.md, "Load").
#
#   scripts/load-bench.sh [MODE] [options of `loadbench suite`]
#
# MODE
#   all           the four modes below (default; about 15 minutes)
#   throughput    req/s and server CPU per request: 16 connections at
#                 pipeline 1 and 16, 1 and 128 connections, a 300 KiB file,
#                 gzip, and the sweep over 1…256 connections with its plot
#   idle          resident memory per idle keep-alive connection (1…10,000)
#   syscalls      system calls per request (strace -c -f)
#   instructions  instructions per request (valgrind --tool=callgrind)
#   smoke         seconds: every server starts, every load completes without
#                 an error, the tables render; nothing is written (CI)
#   profile       where the CPU of hyper, the mio hello and the kernel's
#                 floor goes at pipeline 1 (perf record); not part of all
#   latency       p50, p99 and p99.9 of nginx and `jsontp serve` at 50 % and
#                 90 % of nginx's maximum rate, open loop, coordinated
#                 omission corrected (about a minute); not part of all
#   tls           req/s over TLS 1.3 of nginx and `jsontp serve`, the same
#                 certificate and cipher suite, pipeline 1 and 16; not part
#                 of all
#   workers       `jsontp serve --workers 2` beside nginx with two workers
#                 and `reuseport`, 64 connections, and 10,000 new ones: req/s
#                 and the connections each worker took (about 2 minutes);
#                 the servers get every CPU; not part of all
#   uring         the io_uring runtime beside epoll: the hello on io_uring,
#                 on mio, hyper and the kernel's floor, and `jsontp serve`
#                 on each runtime beside nginx, pipeline 1 and 16, rounds
#                 interleaved; instructions and system calls per request of
#                 each hello (a few minutes), the generator on io_uring;
#                 not part of all
#   versus PATH   this build's mio hello and another build's, PATH being
#                 its examples/hello_server (e.g. a `git worktree` of an
#                 older commit built with `cargo build --release --features
#                 mio --example hello_server`), alternately, pipeline 1 and
#                 16; not part of all
#   budget        instructions per request checked against the budgets
#                 below (CI): a hot path that grows past its budget fails;
#                 nothing is written
#
# Options go to the suite, e.g. `--runs 5 --seconds 10`, `--nginx none`.
# The full modes write their tables into BENCHMARKS.md between markers and
# the plot to benches/load/throughput.svg. Servers run on CPU 0, the load
# generator on CPU 1 (taskset; in mode workers the servers may use every
# CPU, the generator's one included); loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-all}
[ $# -gt 0 ] && shift
case "$mode" in
    all | throughput | idle | syscalls | instructions | smoke | profile | budget | latency | tls | workers | uring) ;;
    versus)
        [ $# -gt 0 ] || { echo "load-bench: versus needs the other build's hello_server" >&2; exit 2; }
        baseline=$1
        shift
        set -- --baseline "$baseline" "$@"
        ;;
    -h | --help)
        sed -n '2,47p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "load-bench: unknown mode $mode (all, throughput, idle, syscalls, instructions, smoke, profile, budget, latency, tls, workers, uring, versus)" >&2
        exit 2
        ;;
esac

note() { printf 'load-bench: %s\n' "$*" >&2; }

# apt_install, find_nginx.
source scripts/packages.sh

nginx=$(find_nginx)
if [ -z "$nginx" ]; then
    note "installing nginx-light"
    apt_install nginx-light || true
    nginx=$(find_nginx)
fi
suite_nginx=()
if [ -z "$nginx" ]; then
    note "nginx cannot be installed here: the nginx server is skipped"
    suite_nginx=(--nginx none)
else
    suite_nginx=(--nginx "$nginx")
fi

require() { # tool package
    if ! command -v "$1" >/dev/null 2>&1; then
        note "installing $2"
        apt_install "$2" || { note "$1 is needed for mode $mode and cannot be installed"; exit 1; }
    fi
}
case "$mode" in
    all | uring) require strace strace; require valgrind valgrind ;;
    syscalls) require strace strace ;;
    instructions | budget) require valgrind valgrind ;;
    profile) require perf linux-perf ;;
esac
require taskset util-linux

# Up to 10,000 idle connections, each an open file on both sides.
ulimit -n 65536 2>/dev/null || ulimit -n 20000 2>/dev/null || true
fds=$(ulimit -n)
idle=()
if [ "$fds" != unlimited ] && [ "$fds" -lt 10100 ]; then
    max=$((fds - 100))
    note "ulimit -n is $fds: at most $max idle connections"
    idle=(--idle-max "$max")
fi

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
note "building (release)"
cargo build --release --quiet --bin jsontp --example hello_server
# The bench tooling is a crate of its own; it shares the target folder.
cargo build --release --quiet --manifest-path benches/load/Cargo.toml
if [ "$mode" = smoke ]; then
    # The tooling's own checks: framing, ratios, the markers, the plot.
    cargo test --release --quiet --manifest-path benches/load/Cargo.toml
fi

# Servers on CPU 0, this driver and its load generator on CPU 1. Mode
# workers reads --server-cpu as "pin": its two-worker servers get every
# CPU, so that each worker has a core, and share CPU 1 with the generator.
pin=()
cpus=(--server-cpu 0)
if [ "$(nproc)" -ge 2 ]; then
    pin=(taskset -c 1)
else
    note "one CPU only: nothing is pinned"
    cpus=(--server-cpu none)
fi

# Instructions per request (callgrind, user space, whole server process)
# that the hot paths may not pass: the figures measured when each was set,
# plus about 5 % for the differences between machines of this kind (the
# C library's memcpy, the CPU's vector width). At pipeline 16 the figure
# also depends on how the requests happen to batch into reads, which
# moves it by up to 6 % from run to run: those budgets are the highest of
# recent runs plus 5 %. Raise one only with the reason in the commit.
BUDGET_MIO_HELLO_P1=6920
BUDGET_MIO_HELLO_P16=4720
BUDGET_URING_HELLO_P1=7560
BUDGET_URING_HELLO_P16=4840
BUDGET_SERVE_P1=10110
BUDGET_SERVE_P16=7880
BUDGET_PARSE=3140

if [ "$mode" = budget ]; then
    measured=$(mktemp)
    trap 'rm -f "$measured"' EXIT
    cp BENCHMARKS.md "$measured"
    "${pin[@]}" "$CARGO_TARGET_DIR/release/loadbench" suite instructions \
        --bin-dir "$CARGO_TARGET_DIR/release" \
        --work "$CARGO_TARGET_DIR/loadbench" \
        --write "$measured" \
        --command "scripts/load-bench.sh budget" \
        --nginx none "${cpus[@]}" "$@"
    # The rows of the instructions table: | server | p1 | p16 |.
    table=$(sed -n '/<!-- loadbench:instructions:begin -->/,/<!-- loadbench:instructions:end -->/p' "$measured")
    row() { grep -m1 "^| $1 |" <<<"$table" | tr -d ' ' | cut -d'|' -f"$2"; }
    failed=0
    check() { # what measured budget
        if [ -z "$2" ]; then
            note "$1: not measured"
            failed=1
        elif [ "$2" -gt "$3" ]; then
            note "$1: $2 instructions, over its budget of $3"
            failed=1
        else
            note "$1: $2 instructions (budget $3)"
        fi
    }
    check "mio hello, pipeline 1" "$(row 'mio hello' 3)" "$BUDGET_MIO_HELLO_P1"
    check "mio hello, pipeline 16" "$(row 'mio hello' 4)" "$BUDGET_MIO_HELLO_P16"
    check "uring hello, pipeline 1" "$(row 'uring hello' 3)" "$BUDGET_URING_HELLO_P1"
    check "uring hello, pipeline 16" "$(row 'uring hello' 4)" "$BUDGET_URING_HELLO_P16"
    check "jsontp serve, pipeline 1" "$(row 'jsontp serve' 3)" "$BUDGET_SERVE_P1"
    check "jsontp serve, pipeline 16" "$(row 'jsontp serve' 4)" "$BUDGET_SERVE_P16"
    check "parse_request, the typical GET" "$(row 'jsontp `parse_request`.*' 3)" "$BUDGET_PARSE"
    exit "$failed"
fi

# Mode uring compares servers faster than the epoll generator at pipeline
# 1: its generator drives the connections on io_uring, which costs it less
# per request, so that the servers and not the generator set the rate.
generator=()
if [ "$mode" = uring ]; then
    generator=(--generator uring)
fi

command_line="scripts/load-bench.sh $mode${*:+ $*}"
exec "${pin[@]}" "$CARGO_TARGET_DIR/release/loadbench" suite "$mode" \
    --bin-dir "$CARGO_TARGET_DIR/release" \
    --work "$CARGO_TARGET_DIR/loadbench" \
    --write BENCHMARKS.md \
    --svg benches/load/throughput.svg \
    --command "$command_line" \
    "${suite_nginx[@]}" "${cpus[@]}" "${idle[@]}" "${generator[@]}" "$@"
