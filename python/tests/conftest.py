import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def jsontp_bin() -> str:
    """The Rust command `jsontp` (JSONTP_BIN, or the workspace's build)."""
    given = os.environ.get("JSONTP_BIN")
    if given:
        assert Path(given).is_file(), f"JSONTP_BIN={given} is not a file"
        return given
    for profile in ("release", "debug"):
        candidate = REPOSITORY / "target" / profile / "jsontp"
        if candidate.is_file():
            return str(candidate)
    found = shutil.which("jsontp")
    if found:
        return found
    pytest.skip("no jsontp command: build it with `cargo build --release -p jsontp-cli` or set JSONTP_BIN")


def request_line(resource="/hello.txt", method="GET", headers=None, content="", encoding="identity", **body) -> bytes:
    """One request as a client writes it: compact JSON and a line break."""
    message = {
        "jsontp": "1.0",
        "type": "request",
        "resource": resource,
        "method": method,
        "headers": headers or {},
        "body": {"content": content, "encoding": encoding, **body},
    }
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


@pytest.fixture
def rust_server(jsontp_bin, tmp_path):
    """`jsontp serve --writable` over a temporary folder: (port, root)."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "hello.txt").write_text("Hello, world!")
    port = free_port()
    process = subprocess.Popen(
        [jsontp_bin, "serve", "--root", str(root), "--addr", f"127.0.0.1:{port}", "--writable"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port)
        yield port, root
    finally:
        process.terminate()
        process.wait(timeout=10)
