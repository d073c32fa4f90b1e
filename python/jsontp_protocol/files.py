"""The rules of a file server, the library's (the same code `jsontp serve`
judges requests by): a server gathers what a path holds, as a `Found` (for
GET and POST) or a `Place` (for PUT, DELETE and OPTIONS), and
`FileRules.judge` gives a `Verdict` or the `Response` to send, in D5's
order: refused names, content-type, accept, accept-encoding,
accept-language, the token (D14), read-only servers' 405, folders' 409,
the conditional headers (D17), then 404.

See python/examples/file_server.py for a whole server on them.
"""

from ._core import (
    INDEX,
    LISTING_PAGE,
    FileRules,
    Found,
    Place,
    Verdict,
    access_failed,
    allowed_methods,
    listing_after,
    listing_text,
    media_type_of,
    next_page,
    refused_name,
    write_failed,
)

__all__ = [
    "INDEX",
    "LISTING_PAGE",
    "FileRules",
    "Found",
    "Place",
    "Verdict",
    "access_failed",
    "allowed_methods",
    "listing_after",
    "listing_text",
    "media_type_of",
    "next_page",
    "refused_name",
    "write_failed",
]
