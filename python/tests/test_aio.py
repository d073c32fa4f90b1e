"""The asyncio server and client: with each other, with the Rust command's
server and client, and with raw bytes."""

import asyncio
import gzip
import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

import jsontp_protocol as jt
from jsontp_protocol.aio import StreamingResponse, connect, serve

from conftest import free_port, request_line, wait_for_port


def run(coroutine, timeout=60):
    return asyncio.run(asyncio.wait_for(coroutine, timeout))


async def echo_app(incoming):
    if incoming.path == "/fail":
        raise RuntimeError("the disk is on fire")
    if incoming.path == "/refuse":
        return jt.Response(401, "send a token first")
    if incoming.path == "/big":
        pieces = int(incoming.query or "10")
        return StreamingResponse(200, "big", content=(b"x" * 65536 for _ in range(pieces)))
    if incoming.method == "POST":
        fields = await incoming.form()
        return jt.Response(200, "form", content=json.dumps(fields))
    if incoming.method == "PUT":
        size = 0
        async for piece in incoming.stream():
            size += len(piece)
        return jt.Response(201, f"stored {size} bytes")
    return jt.Response(200, "here", content=f"{incoming.method} {incoming.resource}")


def raw_exchange(port, data, read_until_close=True, timeout=5.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def answers(raw):
    return [json.loads(line) for line in raw.split(b"\n") if line.strip()]


def test_client_and_server_exchange_whole_and_pipelined():
    async def main():
        server = await serve(echo_app)
        async with server:
            async with await connect("127.0.0.1", server.port) as client:
                one = await client.get("/hello.txt")
                assert (one.status, one.text) == (200, "GET /hello.txt")
                assert one.headers["language"] == "en-US"
                many = await asyncio.gather(*(client.get(f"/p{i}") for i in range(40)))
                assert [r.text for r in many] == [f"GET /p{i}" for i in range(40)]
                posted = await client.post(
                    "/form", content="name=Ada&lang=fr%20FR",
                    headers={"content-type": "application/x-www-form-urlencoded"},
                )
                assert json.loads(posted.content) == [["name", "Ada"], ["lang", "fr FR"]]
                failed = await client.get("/fail")
                assert failed.status == 500 and "the disk is on fire" in failed.message

    run(main())


def test_streamed_upload_and_download_in_pieces():
    async def main():
        server = await serve(echo_app)
        async with server:
            async with await connect("127.0.0.1", server.port) as client:

                async def upload():
                    for _ in range(50):
                        yield b"y" * 100_000

                stored = await client.put("/up.bin", upload())
                assert (stored.status, stored.message) == (201, "stored 5000000 bytes")
                download = await client.stream("GET", "/big?40")
                # The head is known before the first byte of content.
                assert (download.status, download.response.message) == (200, "big")
                sizes = [len(piece) async for piece in download]
                assert sum(sizes) == 40 * 65536 and len(sizes) > 1
                assert download.response is not None and download.response.status == 200

    run(main())


def test_a_100_continue_upload_is_refused_before_its_content():
    async def main():
        server = await serve(echo_app)
        async with server:
            loop = asyncio.get_running_loop()
            raw = await loop.run_in_executor(
                None,
                raw_exchange,
                server.port,
                request_line("/refuse", "PUT", {"expect": "100-continue"}),
            )
            got = answers(raw)
            assert [a["status"]["code"] for a in got] == [401]
            raw = await loop.run_in_executor(
                None,
                raw_exchange,
                server.port,
                request_line("/up", "PUT", {"expect": "100-continue"}) + request_line("/up", "PUT", content="abc"),
            )
            got = answers(raw)
            assert [a["status"]["code"] for a in got] == [100, 201]
            assert got[1]["status"]["human-message"] == "stored 3 bytes"

    run(main())


def test_bad_bytes_get_the_protocols_answer_and_the_server_goes_on():
    async def main():
        server = await serve(echo_app)
        async with server:
            loop = asyncio.get_running_loop()
            raw = await loop.run_in_executor(None, raw_exchange, server.port, b'{"jsontp": 1.0, ]\n')
            got = answers(raw)
            assert [a["status"]["code"] for a in got] == [400]
            assert "framed" in got[0]["status"]["human-message"]
            raw = await loop.run_in_executor(None, raw_exchange, server.port, request_line("/x", "BREW"))
            assert answers(raw)[0]["status"]["code"] == 400
            assert server.refused == 2
            async with await connect("127.0.0.1", server.port) as client:
                assert (await client.get("/still")).status == 200

    run(main())


def test_shutdown_lets_a_slow_answer_finish_and_refuses_newcomers():
    release = None

    async def slow(incoming):
        await release.wait()
        return jt.Response(200, "finally")

    async def main():
        nonlocal release
        release = asyncio.Event()
        server = await serve(slow)
        port = server.port
        client = await connect("127.0.0.1", port)
        pending = asyncio.ensure_future(client.get("/slow"))
        await asyncio.sleep(0.1)
        stopping = asyncio.ensure_future(server.shutdown(timeout=10))
        await asyncio.sleep(0.1)
        with pytest.raises(OSError):
            await connect("127.0.0.1", port)
        release.set()
        answer = await pending
        assert answer.message == "finally"
        await stopping
        assert not server.connections
        await client.aclose()

    run(main())


def test_a_client_that_leaves_cancels_its_handler():
    cancelled = None

    async def forever(incoming):
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return jt.Response(200)

    async def main():
        nonlocal cancelled
        cancelled = asyncio.Event()
        server = await serve(forever)
        async with server:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(request_line("/wait"))
            await writer.drain()
            await asyncio.sleep(0.1)
            writer.transport.abort()
            await asyncio.wait_for(cancelled.wait(), 5)

    run(main())


def test_the_client_against_the_rust_server(rust_server):
    port, root = rust_server

    async def main():
        async with await connect("127.0.0.1", port) as client:
            hello = await client.get("/hello.txt")
            assert (hello.status, hello.text) == (200, "Hello, world!")
            data = os.urandom(300_000)
            stored = await client.put("/r.bin", data, encoding="gzip")
            assert stored.status == 201
            assert (root / "r.bin").read_bytes() == data
            back = await client.get("/r.bin", headers={"accept-encoding": ["br"]})
            assert back.encoding == "br" and back.content == data

            async def pieces():
                for i in range(20):
                    yield (b"%06d\n" % i) * 10_000

            stored = await client.put("/s.txt", pieces(), headers={"expect": "100-continue"})
            assert stored.status == 201
            assert (root / "s.txt").read_bytes() == b"".join([(b"%06d\n" % i) * 10_000 for i in range(20)])
            missing = await client.get("/nope.txt")
            assert missing.status == 404 and missing.message

    run(main())


def test_the_rust_client_against_the_python_server(jsontp_bin, tmp_path):
    upload = tmp_path / "upload.bin"
    upload.write_bytes(os.urandom(200_000))

    async def main():
        server = await serve(echo_app)
        async with server:
            url = f"127.0.0.1:{server.port}"

            async def jsontp(*args):
                process = await asyncio.create_subprocess_exec(
                    jsontp_bin, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE
                )
                out, err = await process.communicate()
                return process.returncode, out, err

            code, out, err = await jsontp("get", f"{url}/hello.txt")
            assert code == 0, err
            assert out == b"GET /hello.txt"
            code, out, err = await jsontp("put", f"{url}/u.bin", "--file", str(upload), "--continue", "-w", "%{human_message}")
            assert code == 0, err
            assert out.endswith(b"stored 200000 bytes")
            code, out, err = await jsontp("get", f"{url}/big?5", "-o", str(tmp_path / "big"))
            assert code == 0, err
            assert (tmp_path / "big").read_bytes() == b"x" * 5 * 65536

    run(main())


GIGABYTE_SCRIPT = textwrap.dedent(
    """
    import asyncio, resource, sys
    import jsontp_protocol as jt
    from jsontp_protocol.aio import StreamingResponse, connect, serve

    TOTAL = 1 << 30
    PIECE = b"z" * (1 << 20)

    async def app(incoming):
        if incoming.method == "PUT":
            size = 0
            async for piece in incoming.stream():
                size += len(piece)
            return jt.Response(201, str(size))
        return StreamingResponse(200, "a gigabyte", content=(PIECE for _ in range(TOTAL // len(PIECE))))

    async def main():
        big = jt.Limits(max_content_bytes=2 * TOTAL, min_content_rate=0)
        server = await serve(app, limits=big)
        async with server:
            async with await connect("127.0.0.1", server.port, limits=big) as client:
                size = 0
                async for piece in await client.stream("GET", "/gigabyte"):
                    size += len(piece)
                assert size == TOTAL, size
                async def up():
                    for _ in range(TOTAL // len(PIECE)):
                        yield PIECE
                stored = await client.put("/gigabyte", up())
                assert stored.message == str(TOTAL), stored
        print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)

    asyncio.run(main())
    """
)


def test_a_gigabyte_each_way_in_flat_memory():
    done = subprocess.run(
        [sys.executable, "-c", GIGABYTE_SCRIPT], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    peak_kib = int(done.stdout.strip().splitlines()[-1])
    assert peak_kib < 64 * 1024, f"the process peaked at {peak_kib // 1024} MiB"


def make_certificate(folder):
    """A self-signed certificate for 127.0.0.1 and localhost (openssl)."""
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    return key, cert


def test_tls_through_pythons_ssl_with_our_client_and_the_rust_client(jsontp_bin, tmp_path):
    import ssl

    key, cert = make_certificate(tmp_path)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)
    client_context = ssl.create_default_context(cafile=str(cert))

    async def main():
        server = await serve(echo_app, ssl=server_context)
        async with server:
            async with await connect("127.0.0.1", server.port, ssl=client_context, server_hostname="localhost") as client:
                answer = await client.get("/secret.txt")
                assert (answer.status, answer.text) == (200, "GET /secret.txt")
                stored = await client.put("/up.bin", os.urandom(100_000), encoding="br")
                assert stored.message == "stored 100000 bytes"
            process = await asyncio.create_subprocess_exec(
                jsontp_bin, "get", f"jsontps://localhost:{server.port}/over-tls", "--cacert", str(cert),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
            out, err = await process.communicate()
            assert process.returncode == 0, err
            assert out == b"GET /over-tls"
            # A client that does not trust the certificate is refused.
            with pytest.raises(ssl.SSLError):
                await connect("127.0.0.1", server.port, ssl=ssl.create_default_context(), server_hostname="localhost")

    run(main())


def test_a_streamed_upload_refused_before_its_content_stops_and_the_connection_goes_on(jsontp_bin, tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    port = free_port()
    process = subprocess.Popen(
        [jsontp_bin, "serve", "--root", str(root), "--addr", f"127.0.0.1:{port}", "--token", "tok"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    sent = []

    async def upload():
        for i in range(100):
            sent.append(i)
            yield b"u" * 65536

    async def main():
        async with await connect("127.0.0.1", port) as client:
            refused = await client.put("/up.bin", upload(), headers={"expect": "100-continue"})
            assert refused.status == 401 and "authorization" in refused.message
            assert len(sent) <= 1, "the content was sent after all"
            again = await client.put("/up.bin", b"ok", headers={"authorization": "tok"})
            assert again.status == 201

    try:
        wait_for_port(port)
        run(main())
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert (root / "up.bin").read_bytes() == b"ok"


def test_the_fetch_example_against_the_rust_server(rust_server, tmp_path):
    port, root = rust_server
    example = os.path.join(os.path.dirname(__file__), "..", "examples", "fetch.py")
    done = subprocess.run([sys.executable, example, f"127.0.0.1:{port}/hello.txt"], capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"Hello, world!" and done.stderr.startswith(b"200 ")
    saved = tmp_path / "saved"
    done = subprocess.run(
        [sys.executable, example, f"127.0.0.1:{port}/missing.txt", "-o", str(saved)], capture_output=True, timeout=30
    )
    assert done.returncode == 1 and done.stderr.startswith(b"404 ")
    assert not saved.exists(), "a 404's content was written"
