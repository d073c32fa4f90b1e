"""The hello server on jsontp_protocol's asyncio server: every request is
answered "Hello, world!" (the benchmark beside uvicorn, BENCHMARKS.md).

    python3 python/examples/hello_server.py [--addr 127.0.0.1:8080]
"""

import argparse
import asyncio

from jsontp_protocol import Response
from jsontp_protocol.aio import serve


async def app(incoming):
    return Response(200, "here it is", headers={"content-type": "text/plain"}, content="Hello, world!")


async def main(host, port):
    server = await serve(app, host, port)
    print(f"serving on {host}:{server.port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="A jsontp hello server on asyncio.")
    parser.add_argument("--addr", default="127.0.0.1:8080", help="HOST:PORT to listen on")
    args = parser.parse_args()
    host, _, port = args.addr.rpartition(":")
    try:
        asyncio.run(main(host, int(port)))
    except KeyboardInterrupt:
        pass
