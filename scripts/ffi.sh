#!/usr/bin/env bash
# The C library (ffi/), in one command: builds libjsontp.a and libjsontp.so
# (release), checks that ffi/include/jsontp.h is what cbindgen writes from
# the code, writes jsontp.pc, builds the C tests and examples into
# target/ffi/, and runs the tests plain, under AddressSanitizer and
# UndefinedBehaviorSanitizer, and under valgrind; then the interop tests
# over loopback (our Rust client and the published crate's against the C
# servers, the C client against `jsontp serve`) and, when it sits beside
# the checkout, the conformance suite against the epoll file server.
#
#   scripts/ffi.sh                  everything above
#   scripts/ffi.sh --write-header   rewrite ffi/include/jsontp.h from the code, and stop
#   PREFIX=/usr/local scripts/ffi.sh --install
#                                   build, then install the libraries, the header and
#                                   jsontp.pc under PREFIX (no tests)
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
out="$target/ffi"
mode="${1:-all}"
started=$(date +%s)
step() { printf '\n==> ffi: %s (at %d s)\n' "$*" $(($(date +%s) - started)); }

need_apt() { # need_apt COMMAND-OR-FILE PACKAGE
    if [ -e "$1" ] || command -v "$1" >/dev/null 2>&1; then return 0; fi
    echo "installing $2"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq "$2" >/dev/null
}

step "cbindgen"
command -v cbindgen >/dev/null || cargo install --locked cbindgen
generated=$(mktemp)
trap 'rm -f "$generated"' EXIT
(cd ffi && cbindgen --quiet --config cbindgen.toml --crate jsontp-ffi --output "$generated")
if [ "$mode" = "--write-header" ]; then
    cp "$generated" ffi/include/jsontp.h
    echo "wrote ffi/include/jsontp.h"
    exit 0
fi
if ! diff -u ffi/include/jsontp.h "$generated" >"$generated.diff"; then
    head -n 40 "$generated.diff" >&2
    rm -f "$generated.diff"
    echo "ffi/include/jsontp.h does not match the code in ffi/src: run scripts/ffi.sh --write-header and commit it" >&2
    exit 1
fi
rm -f "$generated.diff"

step "the library (release): libjsontp.a, libjsontp.so"
cargo build --release -p jsontp-ffi
mkdir -p "$out/lib" "$out/include" "$out/tests" "$out/asan"
cp "$target/release/libjsontp.a" "$target/release/libjsontp.so" "$out/lib/"
cp ffi/include/jsontp.h "$out/include/"
# What a static link of a Rust library needs from the system.
static_libs="-lpthread -ldl -lm"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
write_pc() { # write_pc PREFIX FILE
    cat >"$2" <<EOF
prefix=$1
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: jsontp
Description: The jsontp protocol (JSON messages over TCP): a sans-I/O connection machine and file rules
Version: $version
Libs: -L\${libdir} -ljsontp
Libs.private: $static_libs
Cflags: -I\${includedir}
EOF
}
write_pc "$(cd "$out" && pwd)" "$out/jsontp.pc"

if [ "$mode" = "--install" ]; then
    prefix="${PREFIX:?set PREFIX to install under, such as /usr/local}"
    step "install under $prefix"
    install -d "$prefix/lib/pkgconfig" "$prefix/include"
    install -m 644 "$out/lib/libjsontp.a" "$prefix/lib/"
    install -m 755 "$out/lib/libjsontp.so" "$prefix/lib/"
    install -m 644 ffi/include/jsontp.h "$prefix/include/"
    write_pc "$prefix" "$prefix/lib/pkgconfig/jsontp.pc"
    echo "installed; cc app.c \$(pkg-config --cflags --libs jsontp)"
    exit 0
fi

cflags=(-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O1 -g -I ffi/include)
static=("$out/lib/libjsontp.a" $static_libs)

step "C tests (plain, linked to the shared library through pkg-config)"
need_apt pkg-config pkg-config
tests=()
for source in ffi/tests/*.c; do
    name=$(basename "$source" .c)
    tests+=("$name")
    # shellcheck disable=SC2046
    cc "${cflags[@]}" "$source" -o "$out/tests/$name" \
        $(PKG_CONFIG_PATH="$out" pkg-config --cflags --libs jsontp) -Wl,-rpath,"$(cd "$out/lib" && pwd)"
    "$out/tests/$name"
done

step "C tests under AddressSanitizer and UndefinedBehaviorSanitizer (static library)"
for name in "${tests[@]}"; do
    cc "${cflags[@]}" -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all \
        "ffi/tests/$name.c" "${static[@]}" -o "$out/asan/$name"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$out/asan/$name"
done

step "C tests under valgrind (the library built unoptimised)"
# Memcheck reports the optimised library's comparisons of bytes that a
# derived Clone leaves undefined beside an Option's value (ASan and UBSan
# find nothing there); unoptimised code makes no such comparisons, so
# every report here is one to act on.
need_apt valgrind valgrind
cargo build -p jsontp-ffi
for name in "${tests[@]}"; do
    cc "${cflags[@]}" "ffi/tests/$name.c" "$target/debug/libjsontp.a" $static_libs -o "$out/tests/$name.valgrind"
    valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=1 \
        "$out/tests/$name.valgrind"
done

step "examples: epoll_server, epoll_client, uv_server"
need_apt /usr/include/uv.h libuv1-dev
for name in epoll_server epoll_client; do
    cc "${cflags[@]}" "ffi/examples/$name.c" "${static[@]}" -o "$out/$name"
done
cc "${cflags[@]}" ffi/examples/uv_server.c "${static[@]}" -luv -o "$out/uv_server"

step "interop over loopback: jsontp get/put and the published crate's client against the C servers, the C client against jsontp serve"
cargo build --release -p jsontp-cli
cargo build --release -p jsontp-ffi --example published_client
JSONTP_BIN="$target/release/jsontp" FFI_OUT="$out" PUBLISHED_CLIENT="$target/release/examples/published_client" \
    bash ffi/tests/interop.sh

conformance=../shared/conformance/run.py
if [ -f "$conformance" ]; then
    step "conformance suite: the epoll file server"
    python3 "$conformance" --server "$out/epoll_server --root {root} --addr 127.0.0.1:{port} --writable"
fi

step "done"
