"""jsontp for Python, on the Rust implementation's core.

Two layers, as h11 and its servers have them:

- The sans-I/O core: `ServerConnection` and `ClientConnection` take bytes and
  the time and give events (`Request`, `Response`, `Content`, ...), take
  answers and give bytes. They hold no socket and read no clock unless asked.
  Every rule of the protocol (D1-D21) is the Rust core's.
- `jsontp_protocol.aio`: an asyncio server (`serve`) and client (`connect`)
  on that core.
"""

from ._core import (
    NEED_DATA,
    PAUSED,
    ClientConnection,
    Closed,
    Content,
    ContentDiscarded,
    ContentHead,
    Continue,
    ContinueRequested,
    Limits,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    Request,
    Response,
    ResponseHead,
    ResponseSent,
    ServerConnection,
)

__all__ = [
    "NEED_DATA",
    "PAUSED",
    "ClientConnection",
    "Closed",
    "Content",
    "ContentDiscarded",
    "ContentHead",
    "Continue",
    "ContinueRequested",
    "Limits",
    "LocalProtocolError",
    "ProtocolError",
    "RemoteProtocolError",
    "Request",
    "Response",
    "ResponseHead",
    "ResponseSent",
    "ServerConnection",
]
