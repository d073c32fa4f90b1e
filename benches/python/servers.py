"""The asyncio hello server of jsontp_protocol beside uvicorn (one worker)
with h11 and with httptools serving the same hello app, under the same
load generator (loadbench gen, 16 connections, pipeline 1): requests per
second, each server alone on CPU 0 and the generator on CPU 1, the servers
alternated over the rounds; the best round of each is kept.

    python3 benches/python/servers.py [--rounds 3] [--seconds 5] [--loadbench target/release/loadbench]
"""

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPOSITORY = HERE.parents[1]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"no server on port {port} after {timeout} s")


def servers(port):
    python = sys.executable
    return {
        "jsontp_protocol.aio": ([python, str(REPOSITORY / "python/examples/hello_server.py"), "--addr", f"127.0.0.1:{port}"], "jsontp"),
        "uvicorn + h11": ([python, "-m", "uvicorn", "asgi_hello:app", "--port", str(port), "--http", "h11", "--log-level", "warning", "--no-access-log"], "http"),
        "uvicorn + httptools": ([python, "-m", "uvicorn", "asgi_hello:app", "--port", str(port), "--http", "httptools", "--log-level", "warning", "--no-access-log"], "http"),
    }


def run_one(command, protocol, port, loadbench, seconds, connections, pipeline):
    pin = ["taskset", "-c", "0"] if os.cpu_count() and os.cpu_count() > 1 else []
    gen_pin = ["taskset", "-c", "1"] if pin else []
    server = subprocess.Popen(pin + command, cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(port)
        out = subprocess.run(
            gen_pin + [loadbench, "gen", "--addr", f"127.0.0.1:{port}", "--protocol", protocol,
                       "-c", str(connections), "-p", str(pipeline), "-d", str(seconds), "--warmup", "1",
                       "--pid", str(server.pid)],
            capture_output=True, text=True, timeout=seconds + 60, check=True,
        )
        result = json.loads(out.stdout.strip().splitlines()[-1])
        if result["errors"]:
            raise SystemExit(f"{command[0]}: {result['errors']} errors: {result['error_samples']}")
        return result
    finally:
        server.terminate()
        server.wait(timeout=10)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--pipeline", type=int, default=1)
    parser.add_argument("--loadbench", default=str(REPOSITORY / "target/release/loadbench"))
    args = parser.parse_args()
    best = {}
    for _ in range(args.rounds):
        port = free_port()
        for name, (command, protocol) in servers(port).items():
            result = run_one(command, protocol, port, args.loadbench, args.seconds, args.connections, args.pipeline)
            if name not in best or result["requests_per_second"] > best[name]["requests_per_second"]:
                best[name] = result
    base = best["uvicorn + h11"]["requests_per_second"]
    print(f"| server ({args.connections} connections, pipeline {args.pipeline}) | requests/s | × uvicorn + h11 | server CPU µs/request |")
    print("|---|---:|---:|---:|")
    for name, result in best.items():
        cpu = result.get("server_cpu_us_per_request")
        cpu = f"{cpu:.1f}" if cpu else "–"
        print(f"| {name} | {result['requests_per_second']:,.0f} | {result['requests_per_second'] / base:.2f} | {cpu} |")


if __name__ == "__main__":
    main()
