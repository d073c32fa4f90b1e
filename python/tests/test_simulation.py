"""The asyncio server as a deterministic simulation: a fake transport, an
event loop on a virtual clock, scenarios made by Hypothesis (pipelined
requests split anywhere, content, refused handshakes, slow handlers, bad
messages, a peer that ends its half or resets, a shutdown), and the
invariants checked after every step the connection takes:

- one answer per request, in request order (D2), each the one it should be;
- an open connection always has a deadline, reads, or has a handler at
  work: nothing waits on nothing;
- a shutdown ends within its bound, and every connection ends.
"""

import asyncio
import json
import selectors

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jsontp_protocol as jt
from jsontp_protocol import aio

from conftest import request_line


class VirtualLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only when it would wait: what it
    would sleep for passes at once, so a run is the same every time."""

    def __init__(self):
        super().__init__(selectors.DefaultSelector())
        self.now = 1000.0
        real_select = self._selector.select

        def select(timeout=None):
            if timeout is None:
                raise AssertionError("the simulation is stuck: nothing is scheduled and nothing can happen")
            self.now += timeout
            return real_select(0)

        self._selector.select = select

    def time(self):
        return self.now


class FakeTransport(asyncio.Transport):
    def __init__(self, loop, protocol):
        super().__init__()
        self.loop = loop
        self.protocol = protocol
        self.written = bytearray()
        self.closing = False
        self.reading = True

    def write(self, data):
        assert not self.closing, "written after close"
        self.written += data

    def close(self):
        if not self.closing:
            self.closing = True
            self.loop.call_soon(self.protocol.connection_lost, None)

    def abort(self):
        self.close()

    def is_closing(self):
        return self.closing

    def pause_reading(self):
        self.reading = False

    def resume_reading(self):
        self.reading = True

    def get_write_buffer_size(self):
        return 0


# What each kind of request is, and the answer it must get.
def message_of(index, kind, size, delay):
    if kind == "get":
        return request_line(f"/get/{index}"), (f"/get/{index}", 200, None)
    if kind == "put":
        return request_line(f"/put/{index}", "PUT", content="p" * size), (f"/put/{index}", 201, str(size))
    if kind == "slow":
        resource = f"/slow/{index}?{delay}"
        return request_line(resource), (resource, 200, None)
    if kind == "refuse":
        headers = {"expect": "100-continue"}
        return request_line(f"/refuse/{index}", "PUT", headers), (f"/refuse/{index}", 403, None)
    assert kind == "bad"
    return request_line(f"/bad/{index}", "BREW"), (f"/bad/{index}", 400, None)


async def app(incoming):
    kind = incoming.path.split("/")[1]
    if kind == "slow":
        await asyncio.sleep(float(incoming.query))
    if kind == "put":
        content = await incoming.read()
        return jt.Response(201, str(len(content)))
    if kind == "refuse":
        return jt.Response(403, "not this one")
    return jt.Response(200, "ok", content=incoming.resource)


scenarios = st.fixed_dictionaries(
    {
        "requests": st.lists(
            st.tuples(
                st.sampled_from(["get", "put", "slow", "refuse", "bad"]),
                st.integers(min_value=0, max_value=300_000),
                st.sampled_from([0.0, 0.001, 0.5, 3.0]),
            ),
            min_size=1,
            max_size=12,
        ),
        # Where the stream is cut, as fractions of its length.
        "cuts": st.lists(st.floats(min_value=0.0, max_value=1.0), max_size=8),
        "gaps": st.lists(st.sampled_from([0.0, 0.0001, 0.2, 2.0]), min_size=9, max_size=9),
        "then": st.sampled_from(["stay", "end", "reset", "shutdown"]),
        "garbage": st.booleans(),
    }
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios)
def test_the_server_keeps_its_invariants_in_any_scenario(scenario):
    loop = VirtualLoop()
    try:
        loop.run_until_complete(asyncio.wait_for(simulate(loop, scenario), 10_000))
    finally:
        loop.close()


async def simulate(loop, scenario):
    server = aio.Server(
        app,
        continue_policy="ask",
        language="en-US",
        limits=jt.Limits(message_timeout=30.0, content_gap_timeout=30.0, min_content_rate=0),
        idle_timeout=60.0,
        # Few answers owed before the core stops reading: the scenarios
        # pause it (D3) and the server must hold what comes meanwhile.
        max_pipelined=2,
        max_connections=8,
    )
    messages, expected = [], []
    for index, (kind, size, delay) in enumerate(scenario["requests"]):
        message, answer = message_of(index, kind, size, delay)
        messages.append(message)
        expected.append(answer)
    stream = b"".join(messages)
    if scenario["garbage"]:
        stream += b'{"jsontp": ]\n'
        expected.append(("", 400, None))
    cuts = sorted({int(c * len(stream)) for c in scenario["cuts"]} - {0, len(stream)})
    pieces = [stream[a:b] for a, b in zip([0] + cuts, cuts + [len(stream)])]

    protocol = aio._ServerConnection(server)
    transport = FakeTransport(loop, protocol)
    steps = []

    def check():
        steps.append(len(transport.written))
        answers = [json.loads(line) for line in bytes(transport.written).split(b"\n") if line.strip()]
        finals = [a for a in answers if a["status"]["code"] != 100]
        # One answer per request, in order, each the one it should be.
        assert len(finals) <= len(expected), finals
        for got, (resource, code, message) in zip(finals, expected):
            assert got["resource"] == resource, (got, resource)
            assert got["status"]["code"] == code, got
            if message is not None:
                assert got["status"]["human-message"] == message
        # No 100 for a handshake the application refused unseen.
        assert not any(a["status"]["code"] == 100 for a in answers)
        # Nothing waits on nothing.
        if not protocol.lost and not transport.closing:
            working = any(e.task is not None and not e.task.done() for e in protocol.exchanges.values())
            assert protocol.machine.poll_timeout() is not None or transport.reading or working, "stuck"

    original_pump = protocol.pump

    def pump():
        original_pump()
        check()

    protocol.pump = pump
    protocol.connection_made(transport)
    check()

    for piece, gap in zip(pieces, scenario["gaps"] + [0.0] * len(pieces)):
        await asyncio.sleep(gap)
        if protocol.lost:
            break
        protocol.data_received(piece)

    then = scenario["then"]
    if then == "end" and not protocol.lost:
        protocol.eof_received()
    elif then == "reset" and not protocol.lost:
        await asyncio.sleep(0.25)
        transport.closing = True
        protocol.connection_lost(ConnectionResetError("reset by the peer"))
    elif then == "shutdown":
        started = loop.time()
        await server.shutdown(timeout=5.0)
        assert loop.time() - started <= 5.0 + 1e-6, "the shutdown passed its bound"
        assert protocol.lost

    # Every connection ends: by the peer's end, the idle timeout, or a
    # closing error, within the longest timer of the scenario.
    deadline = loop.time() + 200.0
    while not protocol.lost and loop.time() < deadline:
        await asyncio.sleep(1.0)
    assert protocol.lost, "the connection never ended"
    check_final = [json.loads(line) for line in bytes(transport.written).split(b"\n") if line.strip()]
    finals = [a["status"]["code"] for a in check_final]
    if then in ("stay", "end") and not scenario["garbage"]:
        # Nothing cut the connection short: every request was answered.
        assert len(finals) == len(expected), (finals, expected)
    if scenario["garbage"] and then in ("stay", "end"):
        assert finals[-1] == 400 and len(finals) == len(expected)


class PeerTransport(FakeTransport):
    """The client's transport: what it writes reaches a server machine
    driven by the test, after a delay."""

    def __init__(self, loop, protocol, deliver):
        super().__init__(loop, protocol)
        self.deliver = deliver

    def write(self, data):
        super().write(data)
        self.deliver(bytes(data))


client_scenarios = st.fixed_dictionaries(
    {
        "requests": st.lists(
            st.tuples(st.sampled_from(["GET", "PUT"]), st.integers(min_value=0, max_value=200_000)),
            min_size=1,
            max_size=10,
        ),
        "delays": st.lists(st.sampled_from([0.0, 0.001, 0.3, 2.0]), min_size=10, max_size=10),
        "cut": st.integers(min_value=1, max_value=70_000),
        "dies_after": st.one_of(st.none(), st.integers(min_value=0, max_value=9)),
    }
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(client_scenarios)
def test_the_client_keeps_its_invariants_in_any_scenario(scenario):
    loop = VirtualLoop()
    try:
        loop.run_until_complete(asyncio.wait_for(simulate_client(loop, scenario), 10_000))
    finally:
        loop.close()


async def simulate_client(loop, scenario):
    machine = jt.ClientConnection(stream_content=True, now=loop.time())
    protocol = aio._ClientConnection(machine)
    server = jt.ServerConnection(now=loop.time())
    delays = scenario["delays"]
    answered = []
    latest = [0.0]

    def serve_events():
        while True:
            try:
                event = server.next_event(loop.time())
            except jt.RemoteProtocolError as error:
                raise AssertionError(f"the client sent something wrong: {error}")
            if not isinstance(event, jt.Request):
                if event is jt.NEED_DATA or event is jt.PAUSED:
                    return
                continue
            index = len(answered)
            answered.append(event.id)
            at = loop.time() + delays[index % len(delays)]
            if scenario["dies_after"] is not None and index >= scenario["dies_after"]:
                # After every answer given before it: timers due at the
                # same moment run in no set order.
                loop.call_at(max(at, latest[0]) + 0.001, die)
                return
            size = len(event.content) if event.method == "PUT" else scenario["requests"][index][1]
            response = jt.Response(200, event.resource, content="r" * size)
            latest[0] = max(latest[0], at)
            loop.call_at(at, answer, event.id, response)

    def answer(id, response):
        if protocol.lost:
            return
        server.send_response(id, response, loop.time())
        out = server.data_to_send(loop.time())
        cut = scenario["cut"]
        for start in range(0, len(out), cut):
            if not protocol.lost:
                protocol.data_received(out[start : start + cut])
        serve_events()

    def deliver(data):
        def arrive():
            server.receive_data(data, loop.time())
            serve_events()

        loop.call_soon(arrive)

    def die():
        if not protocol.lost:
            transport.closing = True
            protocol.connection_lost(ConnectionResetError("the server went away"))

    transport = PeerTransport(loop, protocol, deliver)
    protocol.connection_made(transport)
    client = aio.Client(protocol)

    async def one(index, method, size):
        resource = f"/r/{index}"
        if method == "PUT":
            return await client.put(resource, "p" * size)
        return await client.get(resource)

    results = await asyncio.gather(
        *(one(i, method, size) for i, (method, size) in enumerate(scenario["requests"])),
        return_exceptions=True,
    )
    # Every request ends, answered or failed; answers are their own, in order.
    dies_after = scenario["dies_after"]
    for index, (result, (method, size)) in enumerate(zip(results, scenario["requests"])):
        if dies_after is not None and index >= dies_after:
            assert isinstance(result, (ConnectionError, jt.RemoteProtocolError)), result
            continue
        assert not isinstance(result, BaseException), (index, result, answered)
        assert result.status == 200 and result.message == f"/r/{index}"
        assert result.content == b"r" * size
    assert not protocol.pending, "a request was forgotten"
