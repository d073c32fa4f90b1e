#!/usr/bin/env bash
# The default download is never the slow choice: `jsontp get` of 64 MiB of
# text as it asks by default (br first, which the server compresses with
# an effort that follows how fast the peer takes the bytes) against
# `-H accept-encoding=identity`, on loopback and over a 100 Mbit/s link
# between two network namespaces (a veth pair; netem's rate where the
# kernel has netem, else a token bucket of the same rate). Prints the
# times and ratios, and exits non-zero when a target is missed:
#
#   - loopback: the default within 1.2x identity's time;
#   - 100 Mbit/s: the default at least 2x faster than identity.
#
#   scripts/compress-bench.sh [SIZE_MIB]     (default 64)
#
# Needs root (namespaces, tc). Builds the `jsontp` binary in release
# mode. Every transfer is bounded by a timeout; the namespaces are
# removed on exit. The text is the repository's own Rust and Markdown,
# repeated: a period of megabytes, longer than any compressor's window.
set -euo pipefail
cd "$(dirname "$0")/.."

size_mib=${1:-64}
runs=${COMPRESS_RUNS:-5}
note() { printf 'compress-bench: %s\n' "$*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
    note "needs root for the network namespaces"
    exit 2
fi

cargo build --release --quiet --bin jsontp
jsontp=$PWD/target/release/jsontp

work=$(mktemp -d /tmp/jsontp-compress.XXXXXX)
tag=jc$$
server_ns=${tag}s
client_ns=${tag}c
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    ip netns del "$server_ns" 2>/dev/null || true
    ip netns del "$client_ns" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/root"
file=$work/root/big.txt
note "writing ${size_mib} MiB of text"
git ls-files '*.rs' '*.md' | xargs cat >"$work/corpus"
while [ "$(stat -c %s "$work/corpus")" -lt $((size_mib << 20)) ]; do
    cat "$work/corpus" "$work/corpus" >"$work/corpus2"
    mv "$work/corpus2" "$work/corpus"
done
head -c $((size_mib << 20)) "$work/corpus" >"$file"
rm "$work/corpus"
# A cut inside a UTF-8 sequence would make the file binary: trim to the
# last newline.
python3 - "$file" <<'EOF'
import sys
path = sys.argv[1]
data = open(path, "rb").read()
open(path, "wb").write(data[: data.rindex(b"\n") + 1])
EOF
bytes=$(stat -c %s "$file")
cat "$file" >/dev/null # warm the page cache

# Starts `jsontp serve` on ADDR (in namespace NS when given) and waits
# until it answers.
serve() {
    local ns=$1 addr=$2 host=${2%:*} port=${2##*:}
    if [ -n "$ns" ]; then
        ip netns exec "$ns" "$jsontp" serve --root "$work/root" --addr "$addr" --quiet 2>"$work/serve.log" &
    else
        "$jsontp" serve --root "$work/root" --addr "$addr" --quiet 2>"$work/serve.log" &
    fi
    pids+=($!)
    for _ in $(seq 50); do
        if in_ns "$ns" bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null; then
            return
        fi
        sleep 0.1
    done
    note "the server on $addr did not start: $(head -c 300 "$work/serve.log")"
    exit 2
}
stop_server() {
    kill "${pids[-1]}" 2>/dev/null || true
    wait "${pids[-1]}" 2>/dev/null || true
    unset 'pids[-1]'
}

in_ns() {
    local ns=$1
    shift
    if [ -n "$ns" ]; then ip netns exec "$ns" "$@"; else "$@"; fi
}

# One download of URL (in namespace NS when given) with the extra
# arguments given, in seconds; with `check`, its bytes are compared with
# the file's. 0 when it fails.
once() {
    local ns=$1 url=$2 limit=$3 check=$4
    shift 4
    local out=/dev/null began ended
    [ "$check" = check ] && out=$work/got
    began=$(date +%s%N)
    if ! in_ns "$ns" timeout "$limit" "$jsontp" get "$url" -s "$@" >"$out" 2>"$work/get.err"; then
        note "failed: jsontp get $url $* ($(head -c 300 "$work/get.err"))"
        echo 0
        return
    fi
    ended=$(date +%s%N)
    if [ "$check" = check ] && ! cmp -s "$work/got" "$file"; then
        note "wrong content from jsontp get $url $*"
        echo 0
        return
    fi
    awk -v n="$((ended - began))" 'BEGIN { printf "%.3f", n / 1e9 }'
}

# Identity and the default, one after the other $runs times (so that a
# machine busy with something else weighs on both alike); prints the
# median of each. The first download of each is checked.
both() {
    local ns=$1 url=$2 limit=$3 identity=() default=() check=check
    for _ in $(seq "$runs"); do
        identity+=("$(once "$ns" "$url" "$limit" "$check" -H accept-encoding=identity)")
        default+=("$(once "$ns" "$url" "$limit" "$check")")
        check=
    done
    echo "$(median "${identity[@]}") $(median "${default[@]}")"
}
median() {
    if printf '%s\n' "$@" | grep -qx 0; then
        echo 0
        return
    fi
    printf '%s\n' "$@" | sort -n | awk '{ t[NR] = $1 } END { print t[int((NR + 1) / 2)] }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
failed=0
check() {
    local what=$1 ok=$2
    if [ "$ok" = 1 ]; then
        echo "  ok: $what"
    else
        echo "  MISSED: $what"
        failed=1
    fi
}

note "loopback"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
serve "" "127.0.0.1:$port"
url="jsontp://127.0.0.1:$port/big.txt"
read -r loop_identity loop_default <<<"$(both "" "$url" 60)"
stop_server

note "100 Mbit/s between two namespaces"
ip netns add "$server_ns"
ip netns add "$client_ns"
ip link add "${tag}a" type veth peer name "${tag}b"
ip link set "${tag}a" netns "$server_ns"
ip link set "${tag}b" netns "$client_ns"
ip -n "$server_ns" addr add 10.231.45.1/24 dev "${tag}a"
ip -n "$client_ns" addr add 10.231.45.2/24 dev "${tag}b"
for ns in "$server_ns" "$client_ns"; do ip -n "$ns" link set lo up; done
ip -n "$server_ns" link set "${tag}a" up
ip -n "$client_ns" link set "${tag}b" up
# The server's side sends the content: its egress is the link's rate.
if ip netns exec "$server_ns" tc qdisc add dev "${tag}a" root netem rate 100mbit 2>/dev/null; then
    shaper="netem rate 100mbit"
else
    ip netns exec "$server_ns" tc qdisc add dev "${tag}a" root tbf rate 100mbit burst 64kb latency 100ms
    shaper="tbf rate 100mbit (no netem in this kernel)"
fi
serve "$server_ns" "10.231.45.1:7745"
url="jsontp://10.231.45.1:7745/big.txt"
runs=1
read -r link_identity link_default <<<"$(both "$client_ns" "$url" 60)"
stop_server

echo
echo "jsontp get of $bytes bytes of text (the repository's sources), default (br first) against identity:"
echo
echo "| link | identity (s) | default (s) | default / identity |"
echo "|---|---|---|---|"
echo "| loopback, median of ${COMPRESS_RUNS:-5}, alternating | $loop_identity | $loop_default | $(ratio "$loop_default" "$loop_identity") |"
echo "| 100 Mbit/s ($shaper) | $link_identity | $link_default | $(ratio "$link_default" "$link_identity") |"
echo
check "loopback: the default within 1.2x identity's time" \
    "$(awk -v d="$loop_default" -v i="$loop_identity" 'BEGIN { print (d > 0 && i > 0 && d <= 1.2 * i) ? 1 : 0 }')"
check "100 Mbit/s: the default at least 2x faster than identity" \
    "$(awk -v d="$link_default" -v i="$link_identity" 'BEGIN { print (d > 0 && i > 0 && 2 * d <= i) ? 1 : 0 }')"
exit "$failed"
