#!/usr/bin/env bash
# A balanced pool that loses nothing: HAProxy (deploy/haproxy.cfg, its
# ports replaced) in front of two `jsontp serve` instances on loopback,
# under a steady, bounded load of small GETs from the library's pooled
# client (cli/examples/pool_load.rs: keep-alive connections, and D13's one
# retry of an idempotent request whose reused connection closed before any
# byte of its answer). Meanwhile:
#
#   1. instance 1 is upgraded in place UPGRADES times (SIGUSR2: the new
#      process starts on the same sockets, the old one hands over and
#      drains), each upgrade waiting for the old process to exit;
#   2. instance 2 is killed (SIGKILL) and started again on its port.
#
# It passes when the client saw 0 failed requests and 0 refused
# connections, and prints the figures BENCHMARKS.md quotes.
#
#   UPGRADES=20 scripts/pool-test.sh          (CI runs UPGRADES=5)
#
# Needs haproxy (installed with apt-get when missing and possible; skipped
# with a message otherwise) and python3. Every wait is bounded.
set -euo pipefail
cd "$(dirname "$0")/.."

upgrades=${UPGRADES:-20}
clients=${CLIENTS:-4}

name=pool-test
# shellcheck source=scripts/haproxy-common.sh
. scripts/haproxy-common.sh

target="${CARGO_TARGET_DIR:-target}/release"
cargo build --release --quiet -p jsontp-cli --bin jsontp --example pool_load
bin="$target/jsontp"
load="$target/examples/pool_load"
[ -x "$bin" ] && [ -x "$load" ] || fail "no $bin or $load"

work=$(mktemp -d)
cleanup() {
    # Every process this script started, the upgrades' successors too
    # (their command lines name this run's folder).
    pkill -KILL -f -- "--root $work/root" 2>/dev/null || true
    [ -n "${haproxy_pid:-}" ] && kill "$haproxy_pid" 2>/dev/null || true
    [ -n "${load_pid:-}" ] && kill "$load_pid" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

read -r front port1 port2 < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks: s.bind(("127.0.0.1", 0))
ports = [s.getsockname()[1] for s in socks]
for s in socks: s.close()
print(*ports, flush=True)')

mkdir "$work/root"
printf 'hello through the pool\n' > "$work/root/hello.txt"

start_server() { # name port: its pid in $name_pid
    "$bin" serve --root "$work/root" --addr "127.0.0.1:$2" --proxy-protocol \
        --log-format json --quiet --workers 2 --shutdown-timeout 10 2>> "$work/$1.log" &
    eval "$1_pid=$!"
    for _ in $(seq 100); do
        grep -q "127.0.0.1:$2" "$work/$1.log" 2>/dev/null && return 0
        sleep 0.05
    done
    fail "$1 did not start"
}
start_server s1 "$port1"
start_server s2 "$port2"

sed -e "s/127\.0\.0\.1:8080/127.0.0.1:$front/" \
    -e "s/127\.0\.0\.1:8081/127.0.0.1:$port1/" \
    -e "s/127\.0\.0\.1:8082/127.0.0.1:$port2/" \
    deploy/haproxy.cfg > "$work/haproxy.cfg"
haproxy -c -q -f "$work/haproxy.cfg" || fail "haproxy rejects the configuration"
haproxy -db -f "$work/haproxy.cfg" > "$work/haproxy.log" 2>&1 &
haproxy_pid=$!
# Both servers UP: HAProxy logs only changes, so wait for the checks to
# have passed `rise` times (2 × 500 ms) on both.
sleep 1.5

started=$(date +%s%3N)
"$load" "jsontp://127.0.0.1:$front/hello.txt" --expect 'hello through the pool' \
    --clients "$clients" --seconds 600 --stop-file "$work/stop" > "$work/summary.json" 2> "$work/load.log" &
load_pid=$!
sleep 1

# Waits up to $2 seconds for pid $1 to exit.
wait_exit() {
    for _ in $(seq $(($2 * 20))); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.05
    done
    return 1
}

say "upgrading instance 1 in place $upgrades times under load"
for n in $(seq "$upgrades"); do
    old=$s1_pid
    kill -USR2 "$old"
    new=""
    for _ in $(seq 600); do
        new=$(grep -o '"successor":"[0-9]*"' "$work/s1.log" | sed -n "${n}p" | tr -dc 0-9 || true)
        [ -n "$new" ] && break
        grep -q 'upgrade failed' "$work/s1.log" && fail "upgrade $n failed"
        sleep 0.05
    done
    [ -n "$new" ] || fail "upgrade $n: no new process within 30 s"
    wait_exit "$old" 15 || fail "upgrade $n: the old process $old did not finish draining"
    s1_pid=$new
done
say "killing instance 2 (SIGKILL) and starting it again"
kill -KILL "$s2_pid"
wait "$s2_pid" 2>/dev/null || true
sleep 1.5
start_server s2 "$port2"
sleep 2
touch "$work/stop"
wait "$load_pid" || true
load_pid=""
elapsed=$(( $(date +%s%3N) - started ))

python3 - "$work/summary.json" "$upgrades" "$elapsed" <<'PY' || fail "the client saw failures: $(cat "$work/summary.json")"
import json, sys
summary = json.load(open(sys.argv[1]))
upgrades, elapsed = sys.argv[2], int(sys.argv[3]) / 1000
print(f"pool-test: {summary['requests']} requests in {elapsed:.1f} s through HAProxy, "
      f"{upgrades} upgrades in place and a SIGKILL with a restart: "
      f"{summary['failed']} failed, {summary['refused']} refused")
if summary["requests"] == 0 or summary["failed"] or summary["refused"] or summary["ok"] != summary["requests"]:
    print(json.dumps(summary), file=sys.stderr)
    sys.exit(1)
PY
say "OK"
