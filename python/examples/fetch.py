"""GET a resource with jsontp_protocol's asyncio client and write its
content to stdout or a file, as it arrives (constant memory).

    python3 python/examples/fetch.py 127.0.0.1:8080/hello.txt [-o FILE] [--tls-ca CA.pem]
"""

import argparse
import asyncio
import ssl
import sys

from jsontp_protocol import RemoteProtocolError
from jsontp_protocol.aio import connect


async def fetch(address, path, output, ca):
    host, _, port = address.rpartition(":")
    context = ssl.create_default_context(cafile=ca) if ca else None
    async with await connect(host, int(port), ssl=context, server_hostname=host if ca else None) as client:
        download = await client.stream("GET", path, headers={"accept-encoding": ["br", "gzip", "identity"]})
        # The status is known before the content: write only a success.
        print(f"{download.status} {download.response.message}", file=sys.stderr)
        sink = open(output, "wb") if output and download.status < 300 else None
        try:
            async for piece in download:
                if sink is not None:
                    sink.write(piece)
                elif output is None:
                    sys.stdout.buffer.write(piece)
        finally:
            if sink is not None:
                sink.close()
        return 0 if download.status < 400 else 1


def main():
    parser = argparse.ArgumentParser(description="GET a jsontp resource.")
    parser.add_argument("url", help="HOST:PORT/PATH")
    parser.add_argument("-o", "--output", help="write the content here (on a 2xx answer only)")
    parser.add_argument("--tls-ca", help="speak TLS, trusting this CA file (PEM)")
    args = parser.parse_args()
    address, slash, path = args.url.partition("/")
    try:
        sys.exit(asyncio.run(fetch(address, slash + path, args.output, args.tls_ca)))
    except (OSError, RemoteProtocolError) as error:
        print(f"fetch: {error}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
