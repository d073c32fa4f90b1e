#!/usr/bin/env bash
# jsontp behind HAProxy (D21), end to end, in under a minute:
#
#   1. two `jsontp serve --proxy-protocol` on loopback, HAProxy in front with
#      deploy/haproxy.cfg (its ports replaced, and its connections to the
#      servers made from 127.0.0.2 so that they cannot pass for the client);
#   2. a steady, bounded load through HAProxy with `jsontp get`;
#   3. one server killed: once HAProxy's jsontp health check marks it DOWN,
#      no request fails;
#   4. the surviving server's access log names the real client (127.0.0.1),
#      never HAProxy's connection (127.0.0.2).
#
# Needs haproxy (installed with apt-get when missing and possible; skipped
# with a message otherwise) and python3 (to find free ports).
set -euo pipefail
cd "$(dirname "$0")/.."

name=haproxy-test
# shellcheck source=scripts/haproxy-common.sh
. scripts/haproxy-common.sh

bin="${CARGO_TARGET_DIR:-target}/release/jsontp"
cargo build --release --quiet
[ -x "$bin" ] || fail "no $bin"

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# The probe closes its sockets before it prints: bash goes on as soon as
# the line is read, and a probe still holding a port (Python closes what
# is left open only as it exits) makes the server's bind fail.
read -r front port1 port2 < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks: s.bind(("127.0.0.1", 0))
ports = [s.getsockname()[1] for s in socks]
for s in socks: s.close()
print(*ports, flush=True)')

mkdir "$work/root"
printf 'hello through haproxy\n' > "$work/root/hello.txt"

start_server() { # name port
    "$bin" serve --root "$work/root" --addr "127.0.0.1:$2" --proxy-protocol \
        --log-format json --workers 2 2> "$work/$1.log" &
    pids+=($!)
    eval "$1_pid=$!"
}
start_server s1 "$port1"
start_server s2 "$port2"

sed -e "s/127\.0\.0\.1:8080/127.0.0.1:$front/" \
    -e "s/127\.0\.0\.1:8081/127.0.0.1:$port1/" \
    -e "s/127\.0\.0\.1:8082/127.0.0.1:$port2/" \
    -e "s/^\( *default-server \)/\1source 127.0.0.2 /" \
    deploy/haproxy.cfg > "$work/haproxy.cfg"
haproxy -c -q -f "$work/haproxy.cfg" || fail "haproxy rejects the configuration"
haproxy -db -f "$work/haproxy.cfg" > "$work/haproxy.log" 2>&1 &
pids+=($!)

# Both servers answer HAProxy's health check (an OPTIONS access line each).
for _ in $(seq 100); do
    if grep -q '"OPTIONS"' "$work/s1.log" && grep -q '"OPTIONS"' "$work/s2.log"; then break; fi
    sleep 0.1
done
grep -q '"OPTIONS"' "$work/s1.log" && grep -q '"OPTIONS"' "$work/s2.log" \
    || fail "the health checks never reached both servers"
sleep 1 # `rise 2`: both servers UP

now_ms() { date +%s%3N; }
load() { # out-file: one request after another until $work/stop exists
    while [ ! -e "$work/stop" ]; do
        local rc=0
        timeout 10 "$bin" get -s --timeout 5 "jsontp://127.0.0.1:$front/hello.txt" > /dev/null 2>&1 || rc=$?
        echo "$(now_ms) $rc" >> "$1"
    done
}
say "load through HAProxy on 127.0.0.1:$front to servers on :$port1 and :$port2"
load "$work/load1" & pids+=($!)
load "$work/load2" & pids+=($!)
sleep 3

say "killing the server on :$port2"
{ kill -9 "$s2_pid" && wait "$s2_pid"; } 2>/dev/null || true
killed=$(now_ms)
down=""
for _ in $(seq 100); do
    if grep -q 'jsontp2 is DOWN' "$work/haproxy.log"; then down=$(now_ms); break; fi
    sleep 0.1
done
[ -n "$down" ] || fail "HAProxy never marked the killed server DOWN"
say "HAProxy marked it DOWN after $((down - killed)) ms"
sleep 4
touch "$work/stop"
wait "${pids[-1]}" "${pids[-2]}" 2>/dev/null || true

cat "$work/load1" "$work/load2" > "$work/all"
total=$(wc -l < "$work/all")
failed=$(awk '$2 != 0' "$work/all" | wc -l)
before=$(awk -v k="$killed" '$1 < k' "$work/all" | wc -l)
after=$(awk -v d="$down" '$1 > d' "$work/all" | wc -l)
failed_after=$(awk -v d="$down" '$1 > d && $2 != 0' "$work/all" | wc -l)
say "$total requests: $before before the kill, $after after the DOWN mark; $failed failed in all, $failed_after after the DOWN mark"
[ "$before" -gt 0 ] && [ "$after" -gt 0 ] || fail "the load did not span the kill"
[ "$failed_after" -eq 0 ] || fail "$failed_after requests failed after HAProxy noticed"

# The access log: GET lines name the client, 127.0.0.1; HAProxy's own
# connections come from 127.0.0.2 (its health checks, which name no client).
gets=$(grep '"GET"' "$work/s1.log" || true)
[ -n "$gets" ] || fail "no GET in the surviving server's access log"
peers=$(printf '%s\n' "$gets" | python3 -c '
import json, sys
for line in sys.stdin:
    record = json.loads(line)
    fields = record.get("fields", record)
    print(fields["peer"])' | sed 's/:[0-9]*$//' | sort | uniq -c)
say "GET peers in the access log: $(echo $peers)"
printf '%s\n' "$peers" | grep -q ' 127\.0\.0\.1$' || fail "the client's address is not logged"
if printf '%s\n' "$peers" | grep -q '127\.0\.0\.2'; then fail "HAProxy's address logged as the client"; fi
say "OK"
