#!/usr/bin/env bash
# Interop over loopback, run by scripts/ffi.sh: our Rust client
# (`jsontp get`/`put`) and the published crate's (jsontp 0.1.3) against the
# C servers (epoll file server, libuv hello server), and the C client
# against `jsontp serve`, byte-exact, with 100-continue and gzip/br
# content. Every command is bounded in time.
set -euo pipefail
jsontp="${JSONTP_BIN:?the jsontp command}"
out="${FFI_OUT:?the folder of the built examples}"
published="${PUBLISHED_CLIENT:?the client of the published crate, examples/published_client.rs}"
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
    for _ in $(seq 100); do
        python3 -c "import socket,sys; socket.create_connection(('127.0.0.1',$1),0.2)" 2>/dev/null && return 0
        sleep 0.05
    done
    echo "nothing listens on port $1" >&2
    return 1
}
start() { # start PORT COMMAND...
    local port=$1
    shift
    "$@" >"$work/server-$port.log" 2>&1 &
    pids+=($!)
    wait_port "$port"
}
same() { # same EXPECTED GOT WHAT
    cmp -s "$1" "$2" || { echo "interop: $3: the bytes differ" >&2; exit 1; }
    echo "ok: $3"
}

mkdir -p "$work/c-root" "$work/rust-root" "$work/down"
printf 'Hello, world!' >"$work/c-root/hello.txt"
head -c 200000 /dev/urandom >"$work/binary.bin"
seq 1 30000 >"$work/text.txt"

echo "--- jsontp get/put against the epoll file server"
port=$(free_port)
start "$port" "$out/epoll_server" --root "$work/c-root" --addr "127.0.0.1:$port" --writable
timeout 20 "$jsontp" get "127.0.0.1:$port/hello.txt" -s -o "$work/down/hello.txt"
same "$work/c-root/hello.txt" "$work/down/hello.txt" "jsontp get of a file"
for encoding in gzip br identity; do
    source="$work/binary.bin"
    [ "$encoding" = identity ] && source="$work/text.txt"
    timeout 20 "$jsontp" put "127.0.0.1:$port/up-$encoding" --file "$source" --encoding "$encoding" --continue -s
    same "$source" "$work/c-root/up-$encoding" "jsontp put --continue --encoding $encoding"
    timeout 20 "$jsontp" get "127.0.0.1:$port/up-$encoding" -s -o "$work/down/up-$encoding"
    same "$source" "$work/down/up-$encoding" "jsontp get of what it put ($encoding)"
done
code=$(timeout 20 "$jsontp" get "127.0.0.1:$port/missing.txt" -s -o /dev/null -w '%{code}' || true)
[ "$code" = 404 ] || { echo "interop: a missing file answered $code, not 404" >&2; exit 1; }
echo "ok: 404 for a missing file"

timeout 20 "$published" "$port" GET /hello.txt >"$work/down/published-hello.txt" 2>/dev/null
same "$work/c-root/hello.txt" "$work/down/published-hello.txt" "the published client's GET from the epoll server"
printf 'written by the published client' >"$work/published.txt"
timeout 20 "$published" "$port" PUT /published.txt "$(cat "$work/published.txt")" >/dev/null 2>&1
same "$work/published.txt" "$work/c-root/published.txt" "the published client's PUT to the epoll server"

echo "--- jsontp get and the published client against the libuv hello server"
port=$(free_port)
start "$port" "$out/uv_server" --addr "127.0.0.1:$port"
printf 'Hello from jsontp on libuv!\n' >"$work/hello-uv"
timeout 20 "$jsontp" get "127.0.0.1:$port/" -s -o "$work/down/hello-uv"
same "$work/hello-uv" "$work/down/hello-uv" "jsontp get from the libuv server"
timeout 20 "$jsontp" get "127.0.0.1:$port/" -s -d 'name=Ada' -o "$work/down/hello-uv-post"
same "$work/hello-uv" "$work/down/hello-uv-post" "jsontp POST to the libuv server"
timeout 20 "$published" "$port" GET / >"$work/down/hello-uv-published" 2>/dev/null
same "$work/hello-uv" "$work/down/hello-uv-published" "the published client's GET from the libuv server"

echo "--- the C client against jsontp serve"
port=$(free_port)
start "$port" "$jsontp" serve --root "$work/rust-root" --addr "127.0.0.1:$port" --writable
for encoding in gzip br deflate identity; do
    source="$work/binary.bin"
    [ "$encoding" = identity ] && source="$work/text.txt"
    timeout 20 "$out/epoll_client" put "127.0.0.1:$port" "/up-$encoding" --file "$source" --encoding "$encoding" --continue 2>/dev/null
    same "$source" "$work/rust-root/up-$encoding" "epoll_client put --continue --encoding $encoding"
    timeout 20 "$out/epoll_client" get "127.0.0.1:$port" "/up-$encoding" -o "$work/down/c-$encoding" 2>/dev/null
    same "$source" "$work/down/c-$encoding" "epoll_client get ($encoding)"
done
status=0
timeout 20 "$out/epoll_client" get "127.0.0.1:$port" /missing.txt -o /dev/null 2>/dev/null || status=$?
[ "$status" = 1 ] || { echo "interop: epoll_client exited $status for a 404, not 1" >&2; exit 1; }
echo "ok: epoll_client exits 1 for a 404"
