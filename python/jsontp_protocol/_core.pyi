"""Type stubs of the native core: the Rust library's sans-I/O connection
machines and messages. Times are seconds of `time.monotonic()`; every
`now=None` reads that clock."""

from typing import Any, Dict, List, Optional, Tuple, Union, final

Json = Any
Event = Union[
    "Request",
    "Response",
    "ContinueRequested",
    "ContentHead",
    "Content",
    "ResponseSent",
    "ContentDiscarded",
    "Continue",
    "ResponseHead",
    "Closed",
    "Sentinel",
]

class ProtocolError(Exception):
    """The base of RemoteProtocolError and LocalProtocolError."""

class RemoteProtocolError(ProtocolError):
    """The peer broke the protocol or went missing. A server's connection
    has already queued the answer the protocol gives (send
    `data_to_send()`); it closes when `closes` is true."""

    kind: str
    """`rejected`, `resource-mismatch`, `timed-out`, `unexpected-eof` or
    `output-stalled`."""
    status: Optional[int]
    """The status the protocol gives (D5), when there is one."""
    human_message: str
    """What exactly was wrong."""
    id: Optional[int]
    """The exchange, when the error belongs to one."""
    closes: bool
    """Whether the connection closes after it."""
    response: "Response"
    """With `kind == "resource-mismatch"`: the response as it came (D13)."""

class LocalProtocolError(ProtocolError):
    """This program asked for something the protocol does not allow now."""

def parse_form(text: str) -> Optional[List[Tuple[str, str]]]:
    """Form data (D11) as (name, value) pairs, or None."""

@final
class Sentinel:
    """`NEED_DATA` or `PAUSED`."""

NEED_DATA: Sentinel
"""Nothing can happen until more bytes arrive."""
PAUSED: Sentinel
"""Reading waits on this side: answer, write, or take the events given."""

@final
class Request:
    """A request: made to send, or read by a ServerConnection (then `id`
    names its exchange)."""

    def __init__(
        self,
        method: str,
        resource: str,
        *,
        headers: Optional[Dict[str, Json]] = None,
        content: Union[bytes, bytearray, memoryview, str, None] = None,
        encoding: Optional[str] = None,
        body: Optional[Dict[str, Json]] = None,
    ) -> None: ...
    @property
    def id(self) -> Optional[int]: ...
    @property
    def method(self) -> str: ...
    @property
    def resource(self) -> str: ...
    @property
    def path(self) -> str: ...
    @property
    def query(self) -> Optional[str]: ...
    @property
    def headers(self) -> Dict[str, Json]: ...
    @property
    def content(self) -> bytes: ...
    @property
    def text(self) -> Optional[str]: ...
    @property
    def encoding(self) -> str: ...
    @property
    def body(self) -> Dict[str, Json]: ...
    def form(self) -> Optional[List[Tuple[str, str]]]: ...
    def to_bytes(self) -> bytes: ...

@final
class Response:
    """A response: made to answer with, or read by a ClientConnection."""

    def __init__(
        self,
        status: int,
        message: Optional[str] = None,
        *,
        headers: Optional[Dict[str, Json]] = None,
        content: Union[bytes, bytearray, memoryview, str, None] = None,
        encoding: Optional[str] = None,
        body: Optional[Dict[str, Json]] = None,
    ) -> None: ...
    @property
    def id(self) -> Optional[int]: ...
    @property
    def forgiven(self) -> List[str]: ...
    @property
    def status(self) -> int: ...
    @property
    def message(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def resource(self) -> str: ...
    @property
    def headers(self) -> Dict[str, Json]: ...
    @property
    def content(self) -> bytes: ...
    @property
    def text(self) -> Optional[str]: ...
    @property
    def encoding(self) -> str: ...
    @property
    def body(self) -> Dict[str, Json]: ...

@final
class ContinueRequested:
    """The first request of a 100-continue handshake (D10)."""

    @property
    def id(self) -> int: ...
    @property
    def request(self) -> Request: ...

@final
class ContentHead:
    """A request whose content follows in pieces (D19); advisory."""

    @property
    def id(self) -> int: ...
    @property
    def request(self) -> Request: ...

@final
class Content:
    """The next piece of a message's decoded content."""

    @property
    def id(self) -> int: ...
    @property
    def data(self) -> bytes: ...

@final
class ResponseSent:
    """A response wholly left."""

    @property
    def id(self) -> int: ...
    @property
    def bytes(self) -> int: ...

@final
class ContentDiscarded:
    """Drop the pieces of `id` received so far (D10)."""

    @property
    def id(self) -> int: ...

@final
class Continue:
    """The server acknowledged with 100 (D10)."""

    @property
    def id(self) -> int: ...

@final
class ResponseHead:
    """A response whose content follows in pieces (D19); advisory."""

    @property
    def id(self) -> int: ...
    @property
    def response(self) -> Response: ...

@final
class Closed:
    """The connection is finished: write what is pending, then close."""

    @property
    def reason(self) -> str: ...

@final
class Limits:
    """D3's limits and timeouts, and D19's for streamed content."""

    def __init__(
        self,
        *,
        max_message_bytes: Optional[int] = None,
        max_decoded_body: Optional[int] = None,
        max_depth: Optional[int] = None,
        max_headers: Optional[int] = None,
        message_timeout: Optional[float] = None,
        stall_timeout: Optional[float] = None,
        max_content_bytes: Optional[int] = None,
        content_gap_timeout: Optional[float] = None,
        min_content_rate: Optional[int] = None,
    ) -> None: ...

class ServerConnection:
    """One server connection's state machine (D2: answers in order)."""

    def __init__(
        self,
        *,
        continue_policy: str = "auto",
        language: str = "en-US",
        stream_content: bool = False,
        limits: Optional[Limits] = None,
        idle_timeout: float = 60.0,
        continue_timeout: float = 300.0,
        max_pipelined: int = 16,
        max_output_owed: int = 1 << 20,
        now: Optional[float] = None,
    ) -> None: ...
    def receive_data(self, data: bytes, now: Optional[float] = None) -> None: ...
    def next_event(self, now: Optional[float] = None) -> Event: ...
    def send_response(self, id: int, response: Response, now: Optional[float] = None) -> None: ...
    def accept_continue(self, id: int, now: Optional[float] = None) -> None: ...
    def send_response_head(self, id: int, response: Response, now: Optional[float] = None) -> None: ...
    def content_room(self, id: int) -> int: ...
    def send_content(self, id: int, data: bytes, now: Optional[float] = None) -> None: ...
    def end_content(self, id: int, now: Optional[float] = None) -> None: ...
    def abort_content(self, id: int, now: Optional[float] = None) -> None: ...
    def data_to_send(self, now: Optional[float] = None, max: Optional[int] = None) -> bytes: ...
    @property
    def pending_bytes(self) -> int: ...
    def poll_timeout(self) -> Optional[float]: ...
    def handle_timeout(self, now: Optional[float] = None) -> None: ...
    @property
    def wants_read(self) -> bool: ...
    @property
    def is_idle(self) -> bool: ...
    @property
    def is_closed(self) -> bool: ...

class ClientConnection:
    """One client connection's state machine (responses matched in order)."""

    def __init__(
        self,
        *,
        validation: str = "strict",
        continue_wait: float = 1.0,
        stream_content: bool = False,
        limits: Optional[Limits] = None,
        now: Optional[float] = None,
    ) -> None: ...
    def send_request(self, request: Request, now: Optional[float] = None) -> int: ...
    def send_request_head(self, request: Request, now: Optional[float] = None) -> int: ...
    def content_room(self, id: int) -> int: ...
    def send_content(self, id: int, data: bytes, now: Optional[float] = None) -> None: ...
    def end_content(self, id: int, now: Optional[float] = None) -> None: ...
    def abort_content(self, id: int, now: Optional[float] = None) -> None: ...
    def receive_data(self, data: bytes, now: Optional[float] = None) -> None: ...
    def next_event(self, now: Optional[float] = None) -> Event: ...
    def data_to_send(self, now: Optional[float] = None, max: Optional[int] = None) -> bytes: ...
    @property
    def pending_bytes(self) -> int: ...
    def poll_timeout(self) -> Optional[float]: ...
    def handle_timeout(self, now: Optional[float] = None) -> None: ...
    @property
    def wants_read(self) -> bool: ...
    @property
    def is_closed(self) -> bool: ...

# The file rules (jsontp_protocol.files).

INDEX: str
LISTING_PAGE: int

@final
class Found:
    """What a GET or POST found at a path."""

    @staticmethod
    def file(text: bool, modified: Optional[float] = None) -> "Found": ...
    @staticmethod
    def listing(modified: Optional[float] = None) -> "Found": ...
    @staticmethod
    def too_large(limit: int, modified: Optional[float] = None) -> "Found": ...
    @staticmethod
    def missing(folder: bool = False) -> "Found": ...
    @staticmethod
    def not_a_file() -> "Found": ...
    @staticmethod
    def cannot_open(error: OSError) -> "Found": ...
    @staticmethod
    def cannot_read(error: OSError) -> "Found": ...
    @staticmethod
    def changed() -> "Found": ...

@final
class Place:
    """What a path names for PUT, DELETE and OPTIONS."""

    @staticmethod
    def file(modified: Optional[float] = None) -> "Place": ...
    @staticmethod
    def folder() -> "Place": ...
    @staticmethod
    def missing() -> "Place": ...
    @staticmethod
    def nowhere() -> "Place": ...

@final
class Verdict:
    """A request that passed every rule."""

    @property
    def language(self) -> str: ...
    @property
    def action(self) -> str:
        """`serve`, `write`, `remove` or `options`."""
    @property
    def media(self) -> Optional[str]: ...
    @property
    def encoding(self) -> Optional[str]: ...
    @property
    def methods(self) -> Optional[List[str]]: ...
    @property
    def response(self) -> Optional[Response]:
        """`options`: the whole answer."""

@final
class FileRules:
    """One file server's rules."""

    def __init__(self, *, writable: bool = True, token: Optional[str] = None, languages: Optional[List[str]] = None) -> None: ...
    @property
    def writable(self) -> bool: ...
    def judge(
        self,
        request: Request,
        *,
        media: Optional[str] = None,
        found: Optional[Found] = None,
        place: Optional[Place] = None,
        exists: bool = False,
    ) -> Union[Verdict, Response]: ...

def media_type_of(path: str) -> str: ...
def refused_name(path: str) -> Optional[str]: ...
def allowed_methods(writable: bool, place: Place, exists: bool) -> List[str]: ...
def listing_text(entries: List[Dict[str, Any]]) -> bytes: ...
def listing_after(request: Request) -> Optional[str]: ...
def next_page(path: str, last: str) -> str: ...
def write_failed(error: OSError, language: str) -> Response: ...
def access_failed(error: OSError, language: str) -> Response: ...
