# What scripts/haproxy-test.sh and scripts/pool-test.sh share, sourced by
# both after setting `name`: their messages, a failure that shows the last
# lines of every log in "$work", and HAProxy, installed with apt-get when
# missing and possible (the script is skipped, exit 0, otherwise).

say() { printf '%s\n' "$name: $*"; }
fail() {
    say "FAIL: $*" >&2
    for log in "${work:-/nonexistent}"/*.log; do
        [ -f "$log" ] && { echo "--- $log (last lines)"; tail -n 15 "$log"; } >&2
    done
    exit 1
}

if ! command -v haproxy >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        say "installing haproxy with apt-get"
        if ! DEBIAN_FRONTEND=noninteractive timeout 120 apt-get install -y -q haproxy >/dev/null 2>&1; then
            timeout 60 apt-get update -q >/dev/null 2>&1 || true
            DEBIAN_FRONTEND=noninteractive timeout 120 apt-get install -y -q haproxy >/dev/null 2>&1 || true
        fi
    fi
    if ! command -v haproxy >/dev/null 2>&1; then
        say "SKIPPED: haproxy is not installed and could not be installed (apt-get as root)"
        exit 0
    fi
fi
