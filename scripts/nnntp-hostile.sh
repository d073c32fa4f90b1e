#!/usr/bin/env bash
# The NNNTP example under a flood of wrong passwords: 200 clients post with
# a wrong password as fast as they are answered for 10 s, while `/list` is
# timed once every 100 ms from another process. Reports the server's
# resident memory (from /proc), `/list`'s latency meanwhile, and how long
# an unknown user and a known user with a wrong password take to be
# refused (on the quiet server, before and after). Targets: resident
# memory under 256 MiB, `/list` within 100 ms, the two refusals within
# 10 % of each other.
#
# The example runs on a release build, on 127.0.0.1, with a database in a
# temporary folder. Every client comes from 127.0.0.1, so the per-address
# limits are raised: the flood measures the password pool, not the limit
# that would otherwise refuse it after 20 failures.
#
#   scripts/nnntp-hostile.sh [CLIENTS] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-200}
secs=${2:-10}

cargo build --quiet --release -p nnntp
dir=$(mktemp -d)
server=
cleanup() {
    if [[ -n $server ]]; then kill "$server" 2>/dev/null || true; fi
    rm -rf "$dir"
}
trap cleanup EXIT

"${CARGO_TARGET_DIR:-target}/release/nnntp" --addr 127.0.0.1:0 --db "$dir/news.db" \
    --failed-logins 1000000000 --signups 1000000 >"$dir/out" 2>"$dir/err" &
server=$!
for _ in $(seq 100); do
    grep -q 'listening on' "$dir/out" 2>/dev/null && break
    sleep 0.1
done
port=$(sed -n 's/^nnntp: listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$dir/out")
[[ -n $port ]] || { echo "nnntp-hostile: the example did not start" >&2; cat "$dir/err" >&2; exit 1; }

timeout 120 python3 - "$port" "$server" "$clients" "$secs" <<'EOF'
import asyncio, json, os, signal, socket, statistics, sys, time

PORT, PID, CLIENTS, SECONDS = (int(a) for a in sys.argv[1:5])
decoder = json.JSONDecoder()

def message(resource, nnntp):
    return json.dumps({"jsontp": "1.0", "type": "request", "resource": resource, "method": "GET",
                       "headers": {}, "body": {"content": "", "encoding": "identity", "nnntp": nnntp}}).encode()

def post(username, password):
    return message("/post", {"type": "post", "group": "g", "post": {"subject": "s", "body": "b"},
                             "author": {"username": username, "password": password}})

def parsed(buf):
    """The first whole JSON object in buf, or None while it is partial."""
    try:
        text = buf.decode().lstrip()
        return decoder.raw_decode(text)[0]
    except (UnicodeDecodeError, ValueError):
        return None

class Client:
    """One keep-alive connection, one request at a time (blocking)."""
    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", PORT))
    def ask(self, data):
        self.sock.sendall(data)
        buf = b""
        while (answer := parsed(buf)) is None:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return answer

def rss_mib():
    with open(f"/proc/{PID}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

def refusal_times(rounds=25):
    """Medians (ms) of the refusal of an unknown user and of a known one."""
    client, unknown, known = Client(), [], []
    for n in range(rounds):
        pair = [(f"nobody-{n}", unknown), ("ada", known)]
        # Each first in turn, so that neither always follows the other.
        for who, times in pair if n % 2 == 0 else reversed(pair):
            started = time.perf_counter()
            code = client.ask(post(who, "wrong"))["status"]["code"]
            times.append((time.perf_counter() - started) * 1000)
            assert code == 401, code
    return statistics.median(unknown), statistics.median(known)

async def flood(deadline, counts):
    async def one():
        while time.monotonic() < deadline:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", PORT)
                while time.monotonic() < deadline:
                    writer.write(post("ada", "wrong"))
                    buf = b""
                    while (answer := parsed(buf)) is None:
                        chunk = await reader.read(1 << 16)
                        if not chunk:
                            raise ConnectionError("closed")
                        buf += chunk
                    code = answer["status"]["code"]
                    counts[code] = counts.get(code, 0) + 1
                writer.close()
            except OSError:
                counts["connection lost"] = counts.get("connection lost", 0) + 1
    await asyncio.gather(*(one() for _ in range(CLIENTS)))

setup = Client()
assert setup.ask(message("/new", {"type": "new", "username": "ada", "password": "right"}))["status"]["code"] == 200
for n in range(20):
    assert setup.ask(post("ada", "right"))["status"]["code"] == 200

quiet_before = refusal_times()
rss_before = rss_mib()
read_end, write_end = os.pipe()
flooder = os.fork()
if flooder == 0:
    os.close(read_end)
    counts = {}
    asyncio.run(flood(time.monotonic() + SECONDS, counts))
    os.write(write_end, json.dumps(counts).encode())
    os._exit(0)
os.close(write_end)

# This process times /list and samples memory while the other floods.
probe, lists, peak = Client(), [], rss_before
started = time.monotonic()
while time.monotonic() < started + SECONDS:
    asked = time.perf_counter()
    answer = probe.ask(message("/list", {"type": "list", "group": "g"}))
    lists.append((time.perf_counter() - asked) * 1000)
    assert answer["status"]["code"] == 200, answer["status"]
    peak = max(peak, rss_mib())
    time.sleep(0.1)
    peak = max(peak, rss_mib())
with os.fdopen(read_end) as results:
    counts = json.loads(results.read() or "{}")
os.waitpid(flooder, 0)
rss_after = rss_mib()
quiet_after = refusal_times()

lists.sort()
def spread(u, k):
    return abs(u - k) / max(u, k) * 100
answers = ", ".join(f"{code} × {n}" for code, n in sorted(counts.items()))
print(f"nnntp-hostile: {CLIENTS} clients posting wrong passwords for {SECONDS} s")
print(f"  answers to the flood: {answers}")
print(f"  resident memory: {rss_before:.1f} MiB before, {peak:.1f} MiB at most, {rss_after:.1f} MiB after"
      f" (target: under 256 MiB) {'ok' if peak < 256 else 'MISSED'}")
print(f"  /list meanwhile: {len(lists)} answers, median {statistics.median(lists):.1f} ms,"
      f" slowest {lists[-1]:.1f} ms (target: within 100 ms) {'ok' if lists[-1] <= 100 else 'MISSED'}")
for when, (u, k) in (("before", quiet_before), ("after", quiet_after)):
    print(f"  refused, {when}: unknown user {u:.1f} ms, known user {k:.1f} ms (medians of 25),"
          f" {spread(u, k):.1f} % apart (target: within 10 %) {'ok' if spread(u, k) <= 10 else 'MISSED'}")
EOF
stopping=$(date +%s%N)
kill -INT "$server"
wait "$server" || true
server=
echo "  stopped $((($(date +%s%N) - stopping) / 1000000)) ms after SIGINT: $(grep stopped "$dir/err")"
