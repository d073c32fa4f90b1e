#!/usr/bin/env bash
# Large transfers (D19): `jsontp get/put` against `jsontp serve` for a
# text file and a file of random bytes of SIZE each (default 1 GiB),
# beside `cat FILE > /dev/null` (the physical anchor) and curl against
# nginx (`sendfile on`, as deployed) for the same files over HTTP (the
# peer anchor), in one run, with the peak resident memory (VmHWM) of the server
# and the client. Writes a Markdown table into BENCHMARKS.md between
# `<!-- transfer:begin -->` and `<!-- transfer:end -->`.
#
#   scripts/transfer-bench.sh [SIZE_MIB]     e.g. scripts/transfer-bench.sh 256
#
# Release build; loopback only; every transfer bounded by a timeout. The
# text file is sent as `identity` and as `gzip` (forced with
# accept-encoding / --encoding). Pinned as the load bench is: servers on
# CPU 0, clients on CPU 1.
set -euo pipefail
cd "$(dirname "$0")/.."

size_mib=${1:-1024}
note() { printf 'transfer-bench: %s\n' "$*" >&2; }

# apt_install, find_nginx.
source scripts/packages.sh

nginx=$(find_nginx)
if [ -z "$nginx" ]; then
    note "installing nginx-light"
    apt_install nginx-light || true
    nginx=$(find_nginx)
fi
command -v curl >/dev/null 2>&1 || apt_install curl || true
[ -x /usr/bin/time ] || apt_install time || true

cargo build --release --quiet
jsontp=$PWD/target/release/jsontp

server_cpu=()
client_cpu=()
pinning="nothing pinned (one CPU)"
if [ "$(nproc)" -ge 2 ]; then
    server_cpu=(taskset -c 0)
    client_cpu=(taskset -c 1)
    pinning="servers pinned to CPU 0, clients to CPU 1"
else
    note "one CPU only: nothing is pinned"
fi

work=$(mktemp -d /tmp/jsontp-transfer.XXXXXX)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

mkdir -p "$work/root" "$work/nginx"
# nginx's worker may run as another user: it must be able to read the file.
chmod 755 "$work" "$work/root"
file=$work/root/big.txt
note "writing a ${size_mib} MiB text file"
# `yes` ends on SIGPIPE when `head` has enough: not a failure.
{ yes 'the quick brown fox jumps over the lazy dog, 0123456789 "quoted" \ back' || true; } | head -c "$((size_mib << 20))" >"$file"
chmod 644 "$file"
bytes=$(stat -c %s "$file")
# Random bytes: binary content travels as base64 of a compressed stream
# (D9), and these do not compress (images, archives and video are alike).
random_file=$work/root/big.bin
head -c "$bytes" /dev/urandom >"$random_file"
chmod 644 "$random_file"
cat "$file" "$random_file" >/dev/null # warm the page cache

# CPU time a process has had, all its threads, in nanoseconds (0 when
# there is none: the anchors' rows have no server of ours to count).
cpu_ns() {
    cat /proc/"${1:-0}"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'
}

# Seconds a command takes (to the millisecond: /usr/bin/time's hundredths
# are too coarse for a transfer of a few tens of milliseconds), the median
# of $runs runs (one run of a transfer this short varies by a third from
# one to the next), the largest peak RSS (KiB) of those runs, and the CPU
# time of a transfer in milliseconds, the mean of the runs: the client's
# (user and system, from /usr/bin/time) and the server's ($server_pid,
# from the scheduler's count, "-" without one).
runs=${TRANSFER_RUNS:-5}
measure() {
    local began ended times=() kib=0 client_s=0 server_before
    server_before=$(cpu_ns "${server_pid:-}")
    for _ in $(seq "$runs"); do
        began=$(date +%s%N)
        if ! /usr/bin/time -f '%M %U %S' -o "$work/time" timeout 600 "${client_cpu[@]}" "$@" >/dev/null 2>"$work/stderr"; then
            note "failed: $* ($(head -c 300 "$work/stderr"))"
            echo "0 - - -"
            return
        fi
        ended=$(date +%s%N)
        times+=("$((ended - began))")
        read -r run_kib user system <<<"$(tail -1 "$work/time")"
        kib=$(awk -v a="$kib" -v b="$run_kib" 'BEGIN { print (b > a ? b : a) }')
        client_s=$(awk -v a="$client_s" -v u="$user" -v s="$system" 'BEGIN { print a + u + s }')
    done
    local median server_ms="-"
    median=$(printf '%s\n' "${times[@]}" | sort -n | awk '{ t[NR] = $1 } END { print t[int((NR + 1) / 2)] }')
    if [ -n "${server_pid:-}" ]; then
        server_ms=$(awk -v a="$server_before" -v b="$(cpu_ns "$server_pid")" -v n="$runs" 'BEGIN { printf "%.0f", (b - a) / n / 1e6 }')
    fi
    echo "$(awk -v n="$median" 'BEGIN { printf "%.3f", n / 1e9 }') $kib $(awk -v s="$client_s" -v n="$runs" 'BEGIN { printf "%.0f", s / n * 1000 }') $server_ms"
}
mbps() { awk -v b="$bytes" -v s="$1" 'BEGIN { if (s > 0) printf "%.0f", b / s / 1e6; else print "-" }'; }
hwm() { awk '/VmHWM/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo -; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The physical anchor.
server_pid=
read -r cat_s _ <<<"$(measure cat "$file")"

# nginx + curl.
nginx_row="| curl ← nginx (HTTP) | - | - | - | - | - | - | - |"
if [ -n "$nginx" ] && command -v curl >/dev/null 2>&1; then
    port=$(free_port)
    cat >"$work/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
error_log $work/nginx/error.log;
pid $work/nginx/nginx.pid;
events { worker_connections 64; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    client_body_temp_path $work/nginx;
    proxy_temp_path $work/nginx;
    fastcgi_temp_path $work/nginx;
    uwsgi_temp_path $work/nginx;
    scgi_temp_path $work/nginx;
    server { listen 127.0.0.1:$port; root $work/root; }
}
EOF
    "${server_cpu[@]}" "$nginx" -c "$work/nginx/nginx.conf" &
    pids+=($!)
    sleep 1
    nginx_pid=$(cat "$work/nginx/nginx.pid" 2>/dev/null || true)
    worker=$(pgrep -P "${nginx_pid:-0}" | head -1 || true)
    server_pid=$worker
    read -r curl_s curl_kib curl_ms worker_ms <<<"$(measure curl -sf -o /dev/null "http://127.0.0.1:$port/big.txt")"
    read -r curl_random_s curl_random_kib curl_random_ms worker_random_ms <<<"$(measure curl -sf -o /dev/null "http://127.0.0.1:$port/big.bin")"
    nginx_row="| curl ← nginx (HTTP), GET text | $(mbps "$curl_s") | $curl_s | 1.00 | $worker_ms | $curl_ms | $(hwm "${worker:-0}") | $curl_kib |
| curl ← nginx (HTTP), GET random bytes | $(mbps "$curl_random_s") | $curl_random_s | 1.00 | $worker_random_ms | $curl_random_ms | $(hwm "${worker:-0}") | $curl_random_kib |"
    kill "${pids[-1]}" 2>/dev/null || true
fi

# One `jsontp serve` per case, so that its VmHWM is the case's own.
serve() { # [more options of jsontp serve]
    local port
    port=$(free_port)
    "${server_cpu[@]}" "$jsontp" serve --root "$work/root" --addr "127.0.0.1:$port" --writable --quiet "$@" 2>/dev/null &
    pids+=($!)
    server_pid=$!
    for _ in $(seq 50); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
        sleep 0.1
    done
    url="jsontp://127.0.0.1:$port"
}

rows=()
# A row: its time to the last byte against curl's for the same file
# (`anchor`, in seconds): how many times as long it took.
row() {
    local label=$1 anchor=${2:-${curl_s:-}} seconds client_kib client_ms server_ms
    read -r seconds client_kib client_ms server_ms <<<"$measured"
    local ratio="-"
    if [ -n "$anchor" ]; then
        ratio=$(awk -v a="$anchor" -v b="$seconds" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", b / a; else print "-" }')
    fi
    rows+=("| $label | $(mbps "$seconds") | $seconds | $ratio | $server_ms | $client_ms | $(hwm "$server_pid") | $client_kib |")
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
}

# Every download goes to standard output, which `measure` sends to
# /dev/null as curl's `-o /dev/null` does: the rows time the transfer, not
# a file system.
serve
measured=$(measure "$jsontp" get "$url/big.txt" -H accept-encoding=identity -s)
row "jsontp get ← jsontp serve, identity"
# With a cache large enough to keep the text's escaped form (about twice
# the file, in sealed in-memory files), sent with `sendfile` as nginx
# sends the file. A first request streams the file and starts making the
# form on a thread of the server's; the runs measured begin once the
# cache holds it (its admin listener's /metrics), so none of them streams
# and the server's CPU is the sending alone.
cache=$(( (size_mib * 2 + size_mib / 4 + 8) ))M
admin=$(free_port)
serve --cache-bytes "$cache" --admin "127.0.0.1:$admin"
"$jsontp" get "$url/big.txt" -H accept-encoding=identity -s >/dev/null
kept=0
for _ in $(seq 300); do
    held=$(curl -s "http://127.0.0.1:$admin/metrics" | awk '/^jsontp_file_cache_bytes / { print $2 }')
    if [ -n "$held" ] && [ "$held" -gt $((2 * bytes)) ]; then
        kept=1
        break
    fi
    sleep 0.1
done
[ "$kept" = 1 ] || note "the escaped form was not kept within 30 s; the row may mix streamed runs"
measured=$(measure "$jsontp" get "$url/big.txt" -H accept-encoding=identity -s)
row "jsontp get ← jsontp serve --cache-bytes $cache, identity (the escaped form kept)"
serve
measured=$(measure "$jsontp" get "$url/big.txt" -H accept-encoding=gzip -s)
row "jsontp get ← jsontp serve, gzip"
serve
measured=$(measure "$jsontp" get "$url/big.bin" -H accept-encoding=gzip -s)
row "jsontp get ← jsontp serve, random bytes, gzip" "${curl_random_s:-}"
serve
measured=$(measure "$jsontp" get "$url/big.bin" -H accept-encoding=br -s)
row "jsontp get ← jsontp serve, random bytes, br" "${curl_random_s:-}"
serve
measured=$(measure "$jsontp" put "$url/up.txt" --file "$file" -s)
row "jsontp put → jsontp serve, identity"
serve
measured=$(measure "$jsontp" put "$url/up.txt" --file "$file" --encoding gzip -s)
row "jsontp put → jsontp serve, gzip"

cpu=$(awk -F: '/model name/ { print $2; exit }' /proc/cpuinfo | sed 's/^ //')
table=$(
    echo "Measured $(date -u '+%Y-%m-%d %H:%M') UTC with \`scripts/transfer-bench.sh $size_mib\` (release build, loopback, a ${size_mib} MiB text file and ${size_mib} MiB of random bytes; $pinning; each time the median of $runs runs); $cpu, $(nproc) cores; load average $(cut -d' ' -f1 /proc/loadavg) at the end."
    echo
    echo "\`cat FILE > /dev/null\`: $(mbps "$cat_s") MB/s (the page cache's speed, the physical anchor)."
    echo
    echo "| transfer | content MB/s | seconds to the last byte | × curl ← nginx's time | server CPU (ms) | client CPU (ms) | server peak RSS (KiB) | client peak RSS (KiB) |"
    echo "|---|---|---|---|---|---|---|---|"
    echo "$nginx_row"
    printf '%s\n' "${rows[@]}"
)
echo "$table"

if grep -q '<!-- transfer:begin -->' BENCHMARKS.md; then
    python3 - "$table" <<'EOF'
import sys
text = open("BENCHMARKS.md").read()
start = text.index("<!-- transfer:begin -->") + len("<!-- transfer:begin -->")
end = text.index("<!-- transfer:end -->")
open("BENCHMARKS.md", "w").write(text[:start] + "\n" + sys.argv[1] + "\n" + text[end:])
EOF
    note "BENCHMARKS.md updated"
fi
