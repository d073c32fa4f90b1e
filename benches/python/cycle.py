"""One request read and its response written, through the Python API of
jsontp_protocol and through h11 doing the same HTTP/1.1 cycle, in one
process: microseconds per cycle, best of several rounds.

    python3 benches/python/cycle.py [--rounds 7] [--cycles 20000]
"""

import argparse
import json
import time

import h11

import jsontp_protocol as jt

JSONTP_REQUEST = (
    json.dumps(
        {
            "jsontp": "1.0",
            "type": "request",
            "resource": "/hello.txt",
            "method": "GET",
            "headers": {"accept-encoding": ["gzip", "identity"], "accept-language": "en-US"},
            "body": {"content": "", "encoding": "identity"},
        },
        separators=(",", ":"),
    ).encode()
    + b"\n"
)
HTTP_REQUEST = (
    b"GET /hello.txt HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip, identity\r\n"
    b"Accept-Language: en-US\r\n\r\n"
)
CONTENT = b"Hello, world!"


def jsontp_cycles(n):
    server = jt.ServerConnection()
    response = jt.Response(200, "here it is", headers={"content-type": "text/plain"}, content=CONTENT)
    NEED_DATA, Request = jt.NEED_DATA, jt.Request
    start = time.perf_counter()
    for _ in range(n):
        server.receive_data(JSONTP_REQUEST)
        event = server.next_event()
        assert type(event) is Request
        # A server answers with a response it makes for the request.
        server.send_response(event.id, response)
        out = server.data_to_send()
        assert server.next_event().id == event.id  # ResponseSent
        assert server.next_event() is NEED_DATA
    elapsed = time.perf_counter() - start
    assert out.endswith(b"}\n")
    return elapsed


def h11_cycles(n):
    server = h11.Connection(h11.SERVER)
    start = time.perf_counter()
    for _ in range(n):
        server.receive_data(HTTP_REQUEST)
        event = server.next_event()
        assert type(event) is h11.Request
        assert type(server.next_event()) is h11.EndOfMessage
        out = server.send(
            h11.Response(
                status_code=200,
                headers=[("Content-Type", "text/plain"), ("Content-Length", str(len(CONTENT)))],
            )
        )
        out += server.send(h11.Data(data=CONTENT))
        out += server.send(h11.EndOfMessage())
        server.start_next_cycle()
    elapsed = time.perf_counter() - start
    assert out.endswith(CONTENT)
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cycles", type=int, default=20_000)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args()
    best = {"jsontp_protocol": float("inf"), "h11": float("inf")}
    for _ in range(args.rounds):
        # Alternated, so that both see the same machine.
        best["jsontp_protocol"] = min(best["jsontp_protocol"], jsontp_cycles(args.cycles))
        best["h11"] = min(best["h11"], h11_cycles(args.cycles))
    micros = {name: seconds / args.cycles * 1e6 for name, seconds in best.items()}
    ratio = micros["jsontp_protocol"] / micros["h11"]
    if args.json:
        print(json.dumps({"us_per_cycle": micros, "ratio": ratio, "h11": h11.__version__}))
        return
    print(f"jsontp_protocol: {micros['jsontp_protocol']:.2f} us per cycle")
    print(f"h11 {h11.__version__}: {micros['h11']:.2f} us per cycle")
    print(f"ratio: {ratio:.3f} of h11's cost")


if __name__ == "__main__":
    main()
