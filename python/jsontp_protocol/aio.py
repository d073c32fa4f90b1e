"""jsontp over asyncio: a server (`serve`) and a client (`connect`).

Both are thin: an `asyncio.Protocol` per connection feeds the sans-I/O core
the bytes and the loop's time, writes what it gives, runs its timers, and
hands requests to the application or responses to the caller. Every rule
of the protocol (framing, validation, 100-continue, pipelining in order,
D3's limits and timers) is the core's.

Server::

    from jsontp_protocol import Response
    from jsontp_protocol.aio import serve

    async def app(request):
        return Response(200, "hello", content="Hello, world!")

    server = await serve(app, "127.0.0.1", 8080)
    await server.serve_forever()

Client::

    from jsontp_protocol.aio import connect

    async with await connect("127.0.0.1", 8080) as client:
        response = await client.get("/hello.txt")
        print(response.status, response.text)
"""

from __future__ import annotations

import asyncio
import collections
import logging
import ssl as _ssl
from typing import (
    Any,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Deque,
    Dict,
    Iterable,
    List,
    Optional,
    Set,
    Tuple,
    Union,
)

from . import _core as core

__all__ = [
    "Incoming",
    "StreamingResponse",
    "Server",
    "serve",
    "Client",
    "ClientResponse",
    "Download",
    "connect",
]

log = logging.getLogger("jsontp_protocol.aio")

# Content buffered for a reader that has not taken it, per connection,
# before the socket stops being read: memory stays bounded whatever the
# peer sends (D3), and TCP tells the peer to wait.
HIGH_WATER = 1 << 20
LOW_WATER = 256 << 10
# Bytes held for the core while it reads nothing (it waits on an answer,
# or on the peer to take ours, D3). The socket is still read meanwhile, up
# to this much, so that a peer that resets the connection is noticed and
# what is being done for it cancelled; a half-close still gets its
# answers (D1).
HELD_MAX = 64 << 10
# A peer that ended its half of the stream may still wait for its answers
# (D1), or may have gone: only a write tells. While an answer is awaited
# after the peer's end, a newline (whitespace between messages, D1) is
# written this often; to a peer that has gone it brings a reset, and what
# is being done for it is cancelled.
PROBE_EVERY = 1.0

Content = Union[bytes, AsyncIterable[bytes], Iterable[bytes]]


class _Waiters:
    """Futures woken together when a connection makes progress."""

    __slots__ = ("_futures",)

    def __init__(self) -> None:
        self._futures: list = []

    def wait(self) -> "asyncio.Future[None]":
        future = asyncio.get_running_loop().create_future()
        self._futures.append(future)
        return future

    def wake(self, error: Optional[BaseException] = None) -> None:
        futures, self._futures = self._futures, []
        for future in futures:
            if not future.done():
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)


class _Inbound:
    """A message's content on its way in, in pieces, to one reader.

    Its phase moves one way: ``waiting`` (a handshake not yet accepted),
    ``open`` (pieces arrive for the reader), ``dropping`` (the reader takes
    no more: pieces are thrown away until the message ends), then ``done``
    (the message was read whole and valid) or ``failed`` (the core refused
    it, or the connection was lost).
    """

    __slots__ = ("phase", "pieces", "queued", "error", "_waiters", "_owner")

    def __init__(self, owner: "_Connection", phase: str) -> None:
        self.phase = phase
        self.pieces: Deque[bytes] = collections.deque()
        self.queued = 0
        self.error: Optional[BaseException] = None
        self._waiters = _Waiters()
        self._owner = owner

    def feed(self, data: bytes) -> None:
        if self.phase != "open":
            return
        self.pieces.append(data)
        self.queued += len(data)
        self._owner.buffered += len(data)
        self._owner.update_reading()
        self._waiters.wake()

    def end(self) -> None:
        if self.phase in ("waiting", "open", "dropping"):
            self.phase = "done"
        self._waiters.wake()

    def fail(self, error: BaseException) -> None:
        if self.phase in ("waiting", "open", "dropping"):
            self.phase = "failed"
            self.error = error
        self._forget()
        self._waiters.wake()

    def discard(self) -> None:
        """Drops what arrived (the core said it belonged to a first request)."""
        self._forget()

    def drop(self) -> None:
        """The reader takes no more: what arrives is thrown away."""
        if self.phase in ("waiting", "open"):
            self.phase = "dropping"
        self._forget()

    def _forget(self) -> None:
        self._owner.buffered -= self.queued
        self.pieces.clear()
        self.queued = 0
        self._owner.update_reading()

    async def next_piece(self) -> Optional[bytes]:
        while True:
            if self.pieces:
                piece = self.pieces.popleft()
                self.queued -= len(piece)
                self._owner.buffered -= len(piece)
                self._owner.update_reading()
                return piece
            if self.phase == "failed":
                assert self.error is not None
                raise self.error
            if self.phase in ("done", "dropping"):
                return None
            await self._waiters.wait()

    async def until_settled(self) -> None:
        """Waits until the message ended, one way or the other."""
        while self.phase in ("waiting", "open", "dropping") and not self._owner.lost:
            await self._waiters.wait()


class _Answered(Exception):
    """The request was answered before its content was all sent."""


class _Connection(asyncio.Protocol):
    """What server and client connections share: the transport, the timer,
    writing what the core gives, and reading only while it should."""

    def __init__(self, machine: Any) -> None:
        self.machine = machine
        self.transport: Optional[asyncio.Transport] = None
        self.loop = asyncio.get_event_loop()
        self.timer: Optional[asyncio.TimerHandle] = None
        self.deadline: Optional[float] = None
        self.buffered = 0
        self.held = bytearray()
        self.ended = False
        self.reading = True
        self.write_paused = False
        self.lost = False
        self.progress = _Waiters()

    # asyncio's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.held or not self.machine.wants_read:
            self.held += data
        else:
            self.machine.receive_data(data, self.loop.time())
        self.pump()

    def eof_received(self) -> bool:
        # The peer ended its half: what it already sent is still answered
        # (D1), so the transport stays open for writing.
        self.ended = True
        if not self.held:
            self.machine.receive_data(b"", self.loop.time())
        self.pump()
        return True

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        self.progress.wake()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.lost = True
        if self.timer is not None:
            self.timer.cancel()
        self.progress.wake(ConnectionError("the connection was lost"))
        self.on_lost()

    # the core's side

    def pump(self) -> None:
        """Takes every event the core has, then writes what it gives,
        until neither gives more."""
        while not self.lost:
            self.take_events()
            if self.held and self.machine.wants_read:
                held, self.held = bytes(self.held), bytearray()
                self.machine.receive_data(held, self.loop.time())
                if self.ended:
                    self.machine.receive_data(b"", self.loop.time())
                continue
            if not self.flush():
                break
        self.update_reading()
        self.schedule()

    def flush(self) -> bool:
        """Writes what the core has to send; whether there was any."""
        if self.transport is None or self.lost:
            return False
        data = self.machine.data_to_send(self.loop.time())
        if data:
            self.transport.write(data)
            self.progress.wake()
        if self.machine.is_closed and not self.machine.pending_bytes:
            self.transport.close()
        return bool(data)

    def update_reading(self) -> None:
        if self.transport is None or self.lost:
            return
        want = len(self.held) < HELD_MAX and self.buffered < (
            LOW_WATER if not self.reading else HIGH_WATER
        )
        if want != self.reading:
            self.reading = want
            if want:
                self.transport.resume_reading()
            else:
                self.transport.pause_reading()

    def schedule(self) -> None:
        deadline = None if self.lost else self.machine.poll_timeout()
        if deadline == self.deadline:
            return
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.deadline = deadline
        if deadline is not None:
            self.timer = self.loop.call_at(deadline, self.on_timer)

    def on_timer(self) -> None:
        self.timer = None
        self.deadline = None
        self.machine.handle_timeout(self.loop.time())
        self.pump()

    async def until_writable(self) -> None:
        """Waits for progress: the transport drained or the core moved."""
        if self.lost:
            raise ConnectionError("the connection was lost")
        await self.progress.wait()

    async def send_streamed(
        self, id: int, content: Content, answered: Callable[[], bool] = lambda: False
    ) -> None:
        """Sends streamed content for exchange `id` within the room the core
        gives (D3), waiting for the transport to drain. Once `answered()`
        (a client's request refused before its content, D10), it stops: the
        core sends no more of it."""
        try:
            if isinstance(content, (bytes, bytearray, memoryview)):
                await self._send_piece(id, bytes(content), answered)
            elif hasattr(content, "__aiter__"):
                async for piece in content:  # type: ignore[union-attr]
                    await self._send_piece(id, piece, answered)
            else:
                for piece in content:  # type: ignore[union-attr]
                    await self._send_piece(id, piece, answered)
        except _Answered:
            return
        except BaseException:
            if not self.lost:
                self.machine.abort_content(id, self.loop.time())
                self.pump()
            raise
        if answered():
            return
        self.machine.end_content(id, self.loop.time())
        self.pump()

    async def _send_piece(self, id: int, piece: bytes, answered: Callable[[], bool]) -> None:
        view = memoryview(piece)
        while view:
            if self.lost:
                raise ConnectionError("the connection was lost")
            if answered():
                raise _Answered
            room = self.machine.content_room(id)
            if room == 0 or self.write_paused:
                await self.until_writable()
                continue
            self.machine.send_content(id, view[:room].tobytes(), self.loop.time())
            view = view[room:]
            self.pump()

    # what the roles fill in

    def take_events(self) -> None:
        raise NotImplementedError

    def on_lost(self) -> None:
        raise NotImplementedError


# ---------------------------------------------------------------------------
# Server
# ---------------------------------------------------------------------------


class StreamingResponse:
    """A response whose content is sent in pieces as `content` yields them
    (bytes, or an iterable or async iterable of bytes), in constant memory
    (D19). The other arguments are `Response`'s."""

    __slots__ = ("head", "content")

    def __init__(
        self,
        status: int,
        message: Optional[str] = None,
        *,
        content: Content,
        headers: Optional[Dict[str, Any]] = None,
        encoding: Optional[str] = None,
        body: Optional[Dict[str, Any]] = None,
    ) -> None:
        self.head = core.Response(status, message, headers=headers, encoding=encoding, body=body)
        self.content = content


Answer = Union[core.Response, StreamingResponse]
App = Callable[["Incoming"], Awaitable[Answer]]


class Incoming:
    """A request as the application gets it: the request's head (method,
    resource, headers, body keys) at once, its content with `read()` or
    `stream()`. Reading the content of a 100-continue request accepts it
    (D10); answering without reading refuses it unseen."""

    __slots__ = ("request", "_exchange", "_content")

    def __init__(self, request: core.Request, exchange: "_Exchange") -> None:
        self.request = request
        self._exchange = exchange
        self._content: Optional[bytes] = None

    @property
    def id(self) -> int:
        return self.request.id

    @property
    def method(self) -> str:
        return self.request.method

    @property
    def resource(self) -> str:
        return self.request.resource

    @property
    def path(self) -> str:
        return self.request.path

    @property
    def query(self) -> Optional[str]:
        return self.request.query

    @property
    def headers(self) -> Dict[str, Any]:
        return self.request.headers

    @property
    def encoding(self) -> str:
        return self.request.encoding

    @property
    def body(self) -> Dict[str, Any]:
        return self.request.body

    async def form(self) -> Optional[List[Tuple[str, str]]]:
        """A `POST`'s content read as form data (D11): (name, value) pairs,
        or None for other methods and for content that is not form data."""
        if self.method != "POST":
            return None
        try:
            text = (await self.read()).decode("utf-8")
        except UnicodeDecodeError:
            return None
        return core.parse_form(text)

    async def stream(self) -> AsyncIterator[bytes]:
        """The decoded content, piece by piece, as it arrives. Raises
        `RemoteProtocolError` if the core refuses the message after all
        (its answer is already sent; the application's is dropped)."""
        exchange = self._exchange
        inbound = exchange.inbound
        if inbound is None:
            content = self.request.content
            if content:
                yield content
            return
        exchange.accept()
        while True:
            piece = await inbound.next_piece()
            if piece is None:
                return
            yield piece

    async def read(self) -> bytes:
        """The whole decoded content (bounded by the limits of D3/D19); it
        is kept, so that reading it again gives it again."""
        if self._exchange.inbound is None:
            return self.request.content
        if self._content is None:
            self._content = b"".join([piece async for piece in self.stream()])
        return self._content

    def __repr__(self) -> str:
        return f"<Incoming {self.method} {self.resource!r}>"


class _Exchange:
    """One request and the task answering it."""

    __slots__ = ("id", "inbound", "task", "connection")

    def __init__(self, connection: "_ServerConnection", id: int, inbound: Optional[_Inbound]) -> None:
        self.id = id
        self.connection = connection
        self.inbound = inbound
        self.task: Optional[asyncio.Task] = None

    def accept(self) -> None:
        inbound = self.inbound
        if inbound is not None and inbound.phase == "waiting":
            inbound.phase = "open"
            self.connection.machine.accept_continue(self.id, self.connection.loop.time())
            self.connection.pump()


class _ServerConnection(_Connection):
    def __init__(self, server: "Server") -> None:
        super().__init__(server._new_machine(asyncio.get_event_loop().time()))
        self.server = server
        self.exchanges: Dict[int, _Exchange] = {}
        self.streaming = 0
        self.probe: Optional[asyncio.TimerHandle] = None

    def eof_received(self) -> bool:
        keep = super().eof_received()
        self._start_probing()
        return keep

    def _start_probing(self) -> None:
        if self.probe is None and self.exchanges and not self.lost:
            self.probe = self.loop.call_later(PROBE_EVERY, self._probe)

    def _probe(self) -> None:
        self.probe = None
        if self.lost or not self.exchanges:
            return
        quiet = (
            self.streaming == 0
            and not self.machine.pending_bytes
            and self.transport is not None
            and not self.transport.get_write_buffer_size()
        )
        if quiet:
            self.transport.write(b"\n")  # type: ignore[union-attr]
        self._start_probing()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.server._opened(self)
        self.schedule()

    def on_lost(self) -> None:
        if self.probe is not None:
            self.probe.cancel()
        # A client that left cancels what was being done for it.
        for exchange in self.exchanges.values():
            if exchange.inbound is not None:
                exchange.inbound.fail(ConnectionError("the client closed the connection"))
            if exchange.task is not None:
                exchange.task.cancel()
        self.exchanges.clear()
        self.server._closed(self)

    def take_events(self) -> None:
        machine = self.machine
        now = self.loop.time()
        while True:
            try:
                event = machine.next_event(now)
            except core.RemoteProtocolError as error:
                # The core answered it itself; a reader of its content
                # learns why, and the application's answer is dropped.
                exchange = self.exchanges.get(error.id) if error.id is not None else None
                if exchange is not None and exchange.inbound is not None:
                    exchange.inbound.fail(error)
                self.server._refused(error)
                continue
            kind = type(event)
            if kind is core.Request:
                exchange = self.exchanges.get(event.id)
                if exchange is None:
                    self._start(event, None)
                elif exchange.inbound is not None:
                    exchange.inbound.end()
            elif kind is core.Content:
                exchange = self.exchanges.get(event.id)
                if exchange is not None and exchange.inbound is not None:
                    exchange.inbound.feed(event.data)
            elif kind is core.ContentHead:
                self._start(event.request, _Inbound(self, "open"))
            elif kind is core.ContinueRequested:
                self._start(event.request, _Inbound(self, "waiting"))
            elif kind is core.ResponseSent:
                self.exchanges.pop(event.id, None)
                if self.server._draining and machine.is_idle:
                    self.transport.close()  # type: ignore[union-attr]
            elif kind is core.ContentDiscarded:
                exchange = self.exchanges.get(event.id)
                if exchange is not None and exchange.inbound is not None:
                    exchange.inbound.discard()
            elif kind is core.Closed:
                continue
            else:  # NEED_DATA or PAUSED
                return

    def _start(self, request: core.Request, inbound: Optional[_Inbound]) -> None:
        exchange = _Exchange(self, request.id, inbound)
        self.exchanges[request.id] = exchange
        exchange.task = self.loop.create_task(self._answer(exchange, Incoming(request, exchange)))
        if self.ended:
            self._start_probing()

    async def _answer(self, exchange: _Exchange, incoming: Incoming) -> None:
        try:
            answer = await self.server.app(incoming)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the application's fault, said as such
            log.exception("the application failed on %r", incoming)
            answer = core.Response(
                500, f"the application failed: {type(error).__name__}: {error}"
            )
        if isinstance(answer, StreamingResponse):
            head, content = answer.head, answer.content
        elif isinstance(answer, core.Response):
            head, content = answer, None
        else:
            log.error("the application answered %r with %r, not a Response", incoming, answer)
            head, content = core.Response(500, "the application answered with something that is not a response"), None
        inbound = exchange.inbound
        if inbound is not None:
            if inbound.phase == "waiting" and head.status >= 400:
                # A handshake refused unseen (D10): the content never comes.
                inbound.drop()
            else:
                # The answer goes after the request's end (D19: the core
                # may still refuse it); content no one read is dropped.
                exchange.accept()
                inbound.drop()
                await inbound.until_settled()
                if inbound.phase == "failed" or self.lost:
                    return
        if self.lost:
            return
        now = self.loop.time()
        if content is None:
            self.machine.send_response(exchange.id, head, now)
            self.pump()
        else:
            self.machine.send_response_head(exchange.id, head, now)
            self.streaming += 1
            try:
                self.pump()
                await self.send_streamed(exchange.id, content)
            finally:
                self.streaming -= 1


class Server:
    """A running jsontp server: `serve()` makes one. `close()` stops
    accepting; `shutdown()` also lets what is under way finish, within a
    bound. Usable as an async context manager, which shuts it down."""

    def __init__(
        self,
        app: App,
        *,
        continue_policy: str,
        language: str,
        limits: Optional[core.Limits],
        idle_timeout: float,
        max_pipelined: int,
        max_connections: int,
    ) -> None:
        self.app = app
        self._machine_options = dict(
            continue_policy=continue_policy,
            language=language,
            stream_content=True,
            limits=limits,
            idle_timeout=idle_timeout,
            max_pipelined=max_pipelined,
        )
        # Checked once here, so that a wrong option fails at start.
        core.ServerConnection(**self._machine_options)  # type: ignore[arg-type]
        self.max_connections = max_connections
        self.connections: Set[_ServerConnection] = set()
        self._server: Optional[asyncio.AbstractServer] = None
        self._draining = False
        self._all_closed = _Waiters()
        self.refused = 0

    def _new_machine(self, now: float) -> core.ServerConnection:
        return core.ServerConnection(now=now, **self._machine_options)  # type: ignore[arg-type]

    def _opened(self, connection: _ServerConnection) -> None:
        if self._draining:
            connection.transport.close()  # type: ignore[union-attr]
            return
        if len(self.connections) >= self.max_connections:
            # At the cap an idle connection makes room; with none idle the
            # newcomer is closed unserved, before it sent anything.
            idle = next((c for c in self.connections if c.machine.is_idle), None)
            if idle is None:
                connection.transport.close()  # type: ignore[union-attr]
                return
            idle.transport.close()  # type: ignore[union-attr]
        self.connections.add(connection)

    def _closed(self, connection: _ServerConnection) -> None:
        self.connections.discard(connection)
        if not self.connections:
            self._all_closed.wake()

    def _refused(self, error: core.RemoteProtocolError) -> None:
        self.refused += 1

    @property
    def sockets(self):
        return self._server.sockets if self._server is not None else ()

    @property
    def port(self) -> int:
        """The port listened on (useful with port 0)."""
        return self.sockets[0].getsockname()[1]

    async def serve_forever(self) -> None:
        assert self._server is not None
        await self._server.serve_forever()

    def close(self) -> None:
        """Stops accepting connections; those open go on."""
        if self._server is not None:
            self._server.close()

    async def shutdown(self, timeout: float = 30.0) -> None:
        """Stops accepting, closes idle connections at once and the others as
        soon as they are idle; after `timeout` seconds the rest are cut."""
        self.close()
        self._draining = True
        for connection in list(self.connections):
            if connection.machine.is_idle:
                connection.transport.close()  # type: ignore[union-attr]
        if self.connections:
            try:
                await asyncio.wait_for(self._until_all_closed(), timeout)
            except asyncio.TimeoutError:
                for connection in list(self.connections):
                    connection.transport.abort()  # type: ignore[union-attr]
                # An aborted transport reports its loss on the loop's next turn.
                while self.connections:
                    await self._all_closed.wait()
        if self._server is not None:
            await self._server.wait_closed()

    async def _until_all_closed(self) -> None:
        while self.connections:
            await self._all_closed.wait()

    async def __aenter__(self) -> "Server":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()


async def serve(
    app: App,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    ssl: Optional[_ssl.SSLContext] = None,
    continue_policy: str = "ask",
    language: str = "en-US",
    limits: Optional[core.Limits] = None,
    idle_timeout: float = 60.0,
    max_pipelined: int = 16,
    max_connections: int = 1024,
    backlog: int = 1024,
    sock: Any = None,
) -> Server:
    """Starts serving `app` (an `async def app(incoming) -> Response |
    StreamingResponse`) on `host:port` (or on `sock`), over TLS with `ssl`.

    `continue_policy="ask"` (the default) lets the application refuse a
    100-continue upload before its content (D10): the `100` goes out when
    it first reads the content. `"auto"` acknowledges at once, `"refuse"`
    answers `501`. `limits` are D3's per connection; `max_connections`
    bounds the connections held (at the cap an idle one makes room, or
    the newcomer is closed).
    """
    server = Server(
        app,
        continue_policy=continue_policy,
        language=language,
        limits=limits,
        idle_timeout=idle_timeout,
        max_pipelined=max_pipelined,
        max_connections=max_connections,
    )
    loop = asyncio.get_running_loop()
    if sock is not None:
        server._server = await loop.create_server(
            lambda: _ServerConnection(server), sock=sock, ssl=ssl, backlog=backlog
        )
    else:
        server._server = await loop.create_server(
            lambda: _ServerConnection(server), host, port, ssl=ssl, backlog=backlog
        )
    return server


# ---------------------------------------------------------------------------
# Client
# ---------------------------------------------------------------------------


class ClientResponse:
    """A response read whole: the core's `Response` head and its content."""

    __slots__ = ("head", "content")

    def __init__(self, head: core.Response, content: bytes) -> None:
        self.head = head
        self.content = content

    @property
    def status(self) -> int:
        return self.head.status

    @property
    def message(self) -> str:
        return self.head.message

    @property
    def headers(self) -> Dict[str, Any]:
        return self.head.headers

    @property
    def encoding(self) -> str:
        return self.head.encoding

    @property
    def body(self) -> Dict[str, Any]:
        return self.head.body

    @property
    def text(self) -> Optional[str]:
        try:
            return self.content.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def __repr__(self) -> str:
        return f"<ClientResponse {self.status} {self.message!r}, {len(self.content)} content bytes>"


class Download:
    """A response whose content arrives in pieces: iterate it
    (`async for piece in download`). `response` is its head (status,
    headers, body keys) from the start; after the last piece it is the
    whole response as the core read it, valid to its end (D19)."""

    __slots__ = ("_inbound", "_pending", "response")

    def __init__(self, pending: "_Pending", head: core.Response) -> None:
        self._pending = pending
        self._inbound = pending.inbound
        self.response: core.Response = head

    @property
    def status(self) -> int:
        return self.response.status

    @property
    def headers(self) -> Dict[str, Any]:
        return self.response.headers

    def __aiter__(self) -> "Download":
        return self

    async def __anext__(self) -> bytes:
        piece = await self._inbound.next_piece()
        if piece is None:
            self.response = await self._pending.head
            raise StopAsyncIteration
        return piece


class _Pending:
    """A request sent and not yet answered: `first` is the response's head
    as soon as it is known, `head` the whole response read to its end."""

    __slots__ = ("inbound", "first", "head")

    def __init__(self, connection: "_ClientConnection") -> None:
        self.inbound = _Inbound(connection, "open")
        self.first: "asyncio.Future[core.Response]" = connection.loop.create_future()
        self.head: "asyncio.Future[core.Response]" = connection.loop.create_future()

    def begin(self, head: core.Response) -> None:
        if not self.first.done():
            self.first.set_result(head)

    def answer(self, response: core.Response) -> None:
        self.inbound.end()
        self.begin(response)
        if not self.head.done():
            self.head.set_result(response)

    def fail(self, error: BaseException) -> None:
        self.inbound.fail(error)
        for future in (self.first, self.head):
            if not future.done():
                future.set_exception(error)
                # Retrieved or not, the error was told through the inbound.
                future.exception()


class _ClientConnection(_Connection):
    def __init__(self, machine: core.ClientConnection) -> None:
        super().__init__(machine)
        self.pending: Dict[int, _Pending] = {}
        self.closed = _Waiters()

    def on_lost(self) -> None:
        error = ConnectionError("the server closed the connection before answering")
        for pending in self.pending.values():
            pending.fail(error)
        self.pending.clear()
        self.closed.wake()

    def take_events(self) -> None:
        machine = self.machine
        now = self.loop.time()
        while True:
            try:
                event = machine.next_event(now)
            except core.RemoteProtocolError as error:
                if error.id is not None and error.id in self.pending:
                    self.pending.pop(error.id).fail(error)
                else:
                    for pending in self.pending.values():
                        pending.fail(error)
                    self.pending.clear()
                continue
            kind = type(event)
            if kind is core.Content:
                pending = self.pending.get(event.id)
                if pending is not None:
                    pending.inbound.feed(event.data)
            elif kind is core.ResponseHead:
                pending = self.pending.get(event.id)
                if pending is not None:
                    pending.begin(event.response)
            elif kind is core.Response:
                pending = self.pending.pop(event.id, None)
                if pending is not None:
                    pending.answer(event)
            elif kind is core.Continue:
                continue
            elif kind is core.Closed:
                error = ConnectionError(f"the connection closed: {event.reason}")
                for pending in self.pending.values():
                    pending.fail(error)
                self.pending.clear()
                continue
            else:
                return


def _told_through(pending: _Pending) -> Callable[["asyncio.Task[None]"], None]:
    """An upload's failure told to whoever waits for its answer."""

    def done(upload: "asyncio.Task[None]") -> None:
        if not upload.cancelled() and upload.exception() is not None:
            pending.fail(upload.exception())  # type: ignore[arg-type]

    return done


class Client:
    """A client connection: requests go out in order on one connection
    (pipelined when several are under way) and are answered in order.
    `connect()` makes one; close it with `close()` or `async with`."""

    def __init__(self, connection: _ClientConnection) -> None:
        self._connection = connection

    async def request(
        self,
        method: str,
        resource: str,
        *,
        headers: Optional[Dict[str, Any]] = None,
        content: Optional[Content] = None,
        encoding: Optional[str] = None,
        body: Optional[Dict[str, Any]] = None,
    ) -> ClientResponse:
        """Sends a request and reads its response whole. `content` may be
        bytes or str, or an iterable or async iterable of bytes sent in
        pieces (D19)."""
        download = await self._send(method, resource, headers, content, encoding, body)
        pieces = [piece async for piece in download]
        assert download.response is not None
        return ClientResponse(download.response, b"".join(pieces))

    async def get(self, resource: str, **options: Any) -> ClientResponse:
        return await self.request("GET", resource, **options)

    async def post(self, resource: str, **options: Any) -> ClientResponse:
        return await self.request("POST", resource, **options)

    async def put(self, resource: str, content: Content, **options: Any) -> ClientResponse:
        return await self.request("PUT", resource, content=content, **options)

    async def delete(self, resource: str, **options: Any) -> ClientResponse:
        return await self.request("DELETE", resource, **options)

    async def options(self, resource: str, **options: Any) -> ClientResponse:
        return await self.request("OPTIONS", resource, **options)

    async def stream(
        self,
        method: str,
        resource: str,
        *,
        headers: Optional[Dict[str, Any]] = None,
        content: Optional[Content] = None,
        encoding: Optional[str] = None,
        body: Optional[Dict[str, Any]] = None,
    ) -> Download:
        """Sends a request and gives its response once its head is known,
        its content as it arrives, in constant memory:
        `download = await client.stream(...)`, `download.status`, then
        `async for piece in download`."""
        return await self._send(method, resource, headers, content, encoding, body)

    async def _send(self, method, resource, headers, content, encoding, body) -> Download:
        connection = self._connection
        if connection.lost:
            raise ConnectionError("the connection is closed")
        machine = connection.machine
        now = connection.loop.time()
        whole = content is None or isinstance(content, (bytes, str))
        request = core.Request(
            method,
            resource,
            headers=headers,
            content=content if whole else None,
            encoding=encoding,
            body=body,
        )
        if whole:
            id = machine.send_request(request, now)
        else:
            id = machine.send_request_head(request, now)
        pending = _Pending(connection)
        connection.pending[id] = pending
        connection.pump()
        if not whole:
            # The answer may come before the upload ends (a handshake
            # refused before the content, D10): the upload then stops.
            upload = connection.loop.create_task(
                connection.send_streamed(id, content, pending.head.done)  # type: ignore[arg-type]
            )
            upload.add_done_callback(_told_through(pending))
        return Download(pending, await pending.first)

    def close(self) -> None:
        transport = self._connection.transport
        if transport is not None:
            transport.close()

    async def aclose(self) -> None:
        self.close()
        if not self._connection.lost:
            await self._connection.closed.wait()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def connect(
    host: str,
    port: int,
    *,
    ssl: Optional[_ssl.SSLContext] = None,
    server_hostname: Optional[str] = None,
    validation: str = "strict",
    limits: Optional[core.Limits] = None,
    continue_wait: float = 1.0,
) -> Client:
    """Opens a connection to a jsontp server (over TLS with `ssl`, D20).
    `validation="lenient"` forgives what D13 lets a client forgive."""
    loop = asyncio.get_running_loop()
    machine = core.ClientConnection(
        validation=validation,
        continue_wait=continue_wait,
        stream_content=True,
        limits=limits,
        now=loop.time(),
    )
    _, connection = await loop.create_connection(
        lambda: _ClientConnection(machine),
        host,
        port,
        ssl=ssl,
        server_hostname=server_hostname if ssl is not None else None,
    )
    return Client(connection)
