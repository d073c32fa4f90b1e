"""The file rules from Python, and the example file server beside
`jsontp serve`: the same requests get the same answers, since both are
judged by the library's `app::files`."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import jsontp_protocol as jt
from jsontp_protocol.files import FileRules, Found, Place, allowed_methods, listing_text, media_type_of, next_page

from conftest import free_port, request_line, wait_for_port

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "file_server.py"


def request(method, resource, **headers):
    return jt.Request(method, resource, headers=headers or None)


def test_judge_keeps_d5s_order():
    rules = FileRules(writable=False, token="s3cret", languages=["en-US", "fr-FR"])
    # 415 (level 5) before 404 (level 6): accept is checked against the name.
    refused = rules.judge(request("GET", "/gone.txt", accept="application/json"), media="text/plain", found=Found.missing())
    assert isinstance(refused, jt.Response) and refused.status == 415
    # The token (401) before a missing file's 404...
    refused = rules.judge(request("DELETE", "/gone.txt"), place=Place.missing(), exists=False)
    assert refused.status == 401 and "authorization" in refused.message
    # ...then a read-only server's 405, which lists what is allowed...
    refused = rules.judge(request("DELETE", "/a.txt", authorization="Bearer s3cret"), place=Place.file(1.0e9))
    assert refused.status == 405 and refused.body["allowed-methods"] == ["GET", "POST", "OPTIONS"]
    # ...and on a writable one, a good token opens writes.
    writable = FileRules(token="s3cret")
    verdict = writable.judge(request("DELETE", "/a.txt", authorization="Bearer s3cret"), place=Place.file(1.0e9))
    assert verdict.action == "remove"
    # D17: a condition that fails is 412, before the missing file's 404.
    refused = rules.judge(
        request("GET", "/gone.txt", **{"if-unmodified-since": "2020-01-01T00:00:00Z+0000"}),
        media="text/plain",
        found=Found.missing(),
    )
    assert refused.status == 412
    # Negotiation: binary content cannot go as identity (D8).
    refused = rules.judge(request("GET", "/a.bin", **{"accept-encoding": "identity"}), media="application/octet-stream", found=Found.file(False))
    assert refused.status == 412
    verdict = rules.judge(request("GET", "/a.txt", **{"accept-language": "fr-FR"}), media="text/plain", found=Found.file(True))
    assert (verdict.action, verdict.language, verdict.encoding, verdict.media) == ("serve", "fr-FR", "identity", "text/plain")
    options = rules.judge(request("OPTIONS", "/a.txt"), place=Place.file())
    assert options.action == "options" and options.methods == ["GET", "POST", "OPTIONS"]
    assert options.response.body["allowed-methods"] == ["GET", "POST", "OPTIONS"]
    # Facts of the wrong kind for the method are the server's fault.
    wrong = rules.judge(request("GET", "/a.txt"), place=Place.file())
    assert wrong.status == 500 and "fault of the server" in wrong.message
    with pytest.raises(ValueError, match="media= and found="):
        rules.judge(request("GET", "/a.txt"))


def test_helpers_are_the_libraries():
    assert media_type_of("/a/notes.TXT") == "text/plain"
    assert media_type_of("/x.unknown-ext") == "application/octet-stream"
    assert allowed_methods(True, Place.missing(), False) == ["PUT", "OPTIONS"]
    assert next_page("/docs", "a b") == "/docs/?after=a%20b"
    text = listing_text([{"name": "a", "size": 3, "modified": 0.0, "is_folder": False}])
    assert json.loads(text) == [{"name": "a", "size": 3, "modified": "1970-01-01T00:00:00Z+0000", "is-folder": False}]
    assert text.endswith(b"\n")


REQUESTS = [
    ("GET", "/hello.txt", {}, ""),
    ("GET", "/", {}, ""),
    ("GET", "/sub/", {}, ""),
    ("GET", "/nested", {}, ""),
    ("GET", "/missing.txt", {}, ""),
    ("GET", "/bin.bin", {"accept-encoding": "identity"}, ""),
    ("GET", "/hello.txt", {"accept": "application/json"}, ""),
    ("GET", "/hello.txt", {"accept-language": "de-DE"}, ""),
    ("GET", "/hello.txt", {"if-modified-since": "2999-01-01T00:00:00Z+0000"}, ""),
    ("GET", "/a\\b.txt", {}, ""),
    ("POST", "/hello.txt", {"content-type": "application/x-www-form-urlencoded"}, "a=1"),
    ("POST", "/hello.txt", {"content-type": "image/png"}, ""),
    ("PUT", "/new.txt", {}, "new"),
    ("PUT", "/new.txt", {"authorization": "wrong"}, "new"),
    ("PUT", "/new.txt", {"authorization": "Bearer tok"}, "new"),
    ("PUT", "/sub", {"authorization": "tok"}, "x"),
    ("PUT", "/nowhere/x.txt", {"authorization": "tok"}, "x"),
    ("DELETE", "/missing.txt", {"authorization": "tok"}, ""),
    ("DELETE", "/old.txt", {"authorization": "tok", "if-unmodified-since": "2000-01-01T00:00:00Z+0000"}, ""),
    ("DELETE", "/new.txt", {"authorization": "tok"}, ""),
    ("OPTIONS", "/hello.txt", {}, ""),
    ("OPTIONS", "/missing.txt", {}, ""),
    ("OPTIONS", "/sub", {}, ""),
]


def exchange_all(port):
    """Every request of REQUESTS on one connection, in turn: (code,
    human-message, allowed-methods, content) of each answer."""
    out = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        stream = s.makefile("rb")
        for method, resource, headers, content in REQUESTS:
            s.sendall(request_line(resource, method, headers, content))
            answer = json.loads(stream.readline())
            out.append((method, resource, answer["status"]["code"], answer["status"]["human-message"],
                        answer["body"].get("allowed-methods"), answer["body"].get("content"),
                        answer["headers"].get("language")))
    return out


def fixture(root):
    root.mkdir()
    (root / "hello.txt").write_text("Hello, world!")
    (root / "index.html").write_text("<h1>hello</h1>\n")
    (root / "bin.bin").write_bytes(bytes(range(256)))
    (root / "sub").mkdir()
    (root / "sub" / "page.txt").write_text("nested")
    (root / "nested").mkdir()
    # A fixed modification time: the answers that name it are the same
    # for both servers.
    (root / "old.txt").write_text("old")
    os.utime(root / "old.txt", (1577836800, 1577836800))


def serve(command, port):
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
    except BaseException:
        process.kill()
        raise
    return process


def test_the_python_file_server_answers_as_jsontp_serve_does(jsontp_bin, tmp_path):
    answers = {}
    for name in ("rust", "python"):
        root = tmp_path / name
        fixture(root)
        port = free_port()
        flags = ["--root", str(root), "--addr", f"127.0.0.1:{port}", "--token", "tok", "--language", "en-US,fr-FR"]
        command = [jsontp_bin, "serve", *flags] if name == "rust" else [sys.executable, str(EXAMPLE), *flags]
        process = serve(command, port)
        try:
            answers[name] = exchange_all(port)
        finally:
            process.terminate()
            process.wait(timeout=10)
    # The success messages are each server's own words; every status,
    # refusal, method list, content and language is the rules'.
    for rust, python in zip(answers["rust"], answers["python"]):
        if rust[2] < 300:
            rust, python = rust[:3] + rust[4:], python[:3] + python[4:]
        assert rust == python
    assert [a[2] for a in answers["python"]] == [
        200, 200, 404, 404, 404, 412, 415, 406, 304, 400, 200, 415,
        401, 401, 201, 409, 404, 404, 412, 204, 200, 200, 200,
    ]
