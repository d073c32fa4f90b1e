"""A file server on jsontp_protocol's asyncio server, with `jsontp serve`'s
flags and its rules: the library's `FileRules` judge every request (D5's
order, D11, D14, D17), this program only looks at the folder and moves
bytes.

    python3 python/examples/file_server.py [--root .] [--addr 127.0.0.1:8080]
        [--writable] [--token TOKEN] [--no-continue] [--language en-US,fr-FR] [--list]

GET and POST send a file (a folder its index.html, or its listing with
--list); files over 64 KiB stream from disk in constant memory. PUT writes
a temporary file beside the target, then renames it over: readers see the
old file or the new one. DELETE removes a file. OPTIONS lists the methods.
Nothing outside the root is reached: symlinks are followed only while they
stay inside it.
"""

import argparse
import asyncio
import codecs
import os
import signal
import stat
import tempfile

from jsontp_protocol import Response
from jsontp_protocol.aio import StreamingResponse, serve
from jsontp_protocol.files import INDEX, LISTING_PAGE, FileRules, Found, Place, listing_after, listing_text
from jsontp_protocol.files import media_type_of, next_page, write_failed, access_failed

PIECE = 64 * 1024  # files larger than this stream (D19)


class Folder:
    """The root folder, and what a resource path names inside it."""

    def __init__(self, root, listing):
        self.root = os.path.realpath(root)
        self.listing = listing

    def inside(self, path):
        """`path` with its symlinks followed, when that stays inside the root."""
        real = os.path.realpath(path)
        return real if real == self.root or real.startswith(self.root + os.sep) else None

    def relative(self, path):
        """A resource path as plain names under the root, or None (D7)."""
        names = path.strip("/").split("/") if path.strip("/") else []
        if any(name in ("", ".", "..") or "\0" in name for name in names):
            return None
        return os.path.join(self.root, *names)

    def read(self, request):
        """What GET and POST find: (media type, Found, what to send)."""
        path = request.path
        target = self.relative(path)
        real = self.inside(target) if target is not None else None
        if real is None:
            return media_type_of(path), Found.missing(), None
        try:
            info = os.stat(real)
        except FileNotFoundError:
            return media_type_of(path), Found.missing(), None
        except OSError as error:
            return media_type_of(path), Found.cannot_open(error), None
        media = media_type_of(path)
        if stat.S_ISDIR(info.st_mode):
            index = self.inside(os.path.join(real, INDEX))
            if index is not None and os.path.isfile(index):
                real, media, info = index, "text/html", os.stat(index)
            elif self.listing:
                return "application/json", *self.list(request, real)
            else:
                return "text/html", Found.missing(folder=True), None
        if not stat.S_ISREG(info.st_mode):
            return media, Found.not_a_file(), None
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as error:
            return media, Found.cannot_open(error), None
        file = os.fdopen(fd, "rb")
        if info.st_size > PIECE:
            text = is_text(file)
            file.seek(0)
            return media, Found.file(text, info.st_mtime), file
        with file:
            content = file.read()
            if len(content) != info.st_size or os.fstat(file.fileno()).st_mtime_ns != info.st_mtime_ns:
                return media, Found.changed(), None
        return media, Found.file(is_utf8(content), info.st_mtime), content

    def list(self, request, folder):
        """One page of a folder's listing (`?after=NAME` for the next)."""
        after = listing_after(request)
        try:
            names = sorted(
                entry.name
                for entry in os.scandir(folder)
                if "\\" not in entry.name and (after is None or entry.name > after)
            )
        except OSError as error:
            return Found.cannot_read(error), None
        page, more = names[:LISTING_PAGE], len(names) > LISTING_PAGE
        latest = os.stat(folder).st_mtime
        entries = []
        for name in page:
            real = self.inside(os.path.join(folder, name))
            try:
                info = os.stat(real) if real else None
            except OSError:
                info = None
            if info is None or not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
                continue
            latest = max(latest, info.st_mtime)
            folder_entry = stat.S_ISDIR(info.st_mode)
            entries.append({"name": name, "size": 0 if folder_entry else info.st_size,
                            "modified": info.st_mtime, "is_folder": folder_entry})
        body = {"next-page": next_page(request.path, page[-1])} if more and page else None
        return Found.listing(latest), (listing_text(entries), body)

    def place(self, path):
        """What PUT, DELETE and OPTIONS act on: (Place, target path)."""
        target = self.relative(path)
        if target is None:
            return Place.nowhere(), None
        if target == self.root:
            return Place.folder(), None
        folder = self.inside(os.path.dirname(target))
        if folder is None or not os.path.isdir(folder):
            return Place.nowhere(), None
        target = os.path.join(folder, os.path.basename(target))
        try:
            info = os.lstat(target)
        except FileNotFoundError:
            return Place.missing(), target
        if stat.S_ISDIR(info.st_mode):
            return Place.folder(), target
        try:
            modified = os.stat(target).st_mtime
        except OSError:
            modified = None
        return Place.file(modified), target


def is_utf8(content):
    try:
        content.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def is_text(file):
    """Whether a large file is UTF-8 text, read through once (D8)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        while True:
            piece = file.read(PIECE)
            decoder.decode(piece, final=not piece)
            if not piece:
                return True
    except UnicodeDecodeError:
        return False


async def pieces_of(file):
    """A large file's content, piece by piece, read on a worker thread so
    that the event loop never waits on the disk; closed at the end."""
    loop = asyncio.get_running_loop()
    with file:
        while True:
            piece = await loop.run_in_executor(None, file.read, PIECE)
            if not piece:
                return
            yield piece


def make_app(folder, rules):
    async def app(incoming):
        request = incoming.request
        loop = asyncio.get_running_loop()
        # The file system is looked at on a worker thread: a slow disk or a
        # large file never holds the event loop, and so no other client.
        if request.method in ("GET", "POST"):
            media, found, source = await loop.run_in_executor(None, folder.read, request)
            verdict = rules.judge(request, media=media, found=found)
            if isinstance(verdict, Response):
                if hasattr(source, "close"):
                    source.close()
                return verdict
            headers = {"content-type": verdict.media, "language": verdict.language}
            if isinstance(source, tuple):  # a listing page, and its next page
                content, body = source
                return Response(200, "here is the listing", headers=headers, content=content,
                                encoding=verdict.encoding, body=body)
            if isinstance(source, bytes):
                return Response(200, "here is the file", headers=headers, content=source,
                                encoding=verdict.encoding)
            return StreamingResponse(200, "here is the file", headers=headers, content=pieces_of(source),
                                     encoding=verdict.encoding)
        place, target = await loop.run_in_executor(None, folder.place, request.path)
        # Where the place is missing, a GET finds nothing there either.
        verdict = rules.judge(request, place=place, exists=False)
        if isinstance(verdict, Response):
            return verdict
        headers = {"language": verdict.language}
        if verdict.action == "options":
            return verdict.response
        if verdict.action == "remove":
            try:
                await loop.run_in_executor(None, os.remove, target)
            except OSError as error:
                return access_failed(error, verdict.language)
            return Response(204, "the file was deleted", headers=headers)
        # write: the content into a temporary file beside the target, then
        # renamed over it, so that no reader sees half a file.
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".jsontp-put-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as file:
                async for piece in incoming.stream():
                    await loop.run_in_executor(None, file.write, piece)
                await loop.run_in_executor(None, lambda: (file.flush(), os.fsync(file.fileno())))
            os.chmod(temporary, 0o644)
            os.replace(temporary, target)
        except OSError as error:
            os.unlink(temporary)
            return write_failed(error, verdict.language)
        except BaseException:
            os.unlink(temporary)
            raise
        return Response(201, "the file was written", headers=headers)

    return app


async def main(args):
    host, _, port = args.addr.rpartition(":")
    languages = [tag.strip() for tag in args.language.split(",") if tag.strip()] if args.language else None
    rules = FileRules(writable=args.writable or args.token is not None, token=args.token, languages=languages)
    folder = Folder(args.root, args.list)
    server = await serve(
        make_app(folder, rules),
        host or "127.0.0.1",
        int(port),
        continue_policy="refuse" if args.no_continue else "ask",
        language=(languages or ["en-US"])[0],
    )
    mode = "read-only" if not rules.writable else ("writable with the token" if args.token else "writable by anyone")
    print(f"serving {folder.root} on {host}:{server.port}, {mode}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await server.shutdown(timeout=10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Serve a folder over jsontp (asyncio).")
    parser.add_argument("--root", default=".", help="the folder to serve (default: the current one)")
    parser.add_argument("--addr", default="127.0.0.1:8080", help="HOST:PORT to listen on")
    parser.add_argument("--writable", action="store_true", help="allow PUT and DELETE")
    parser.add_argument("--token", help="require this token (authorization) for PUT and DELETE (D14)")
    parser.add_argument("--no-continue", action="store_true", help="answer 100-continue requests 501 (D10)")
    parser.add_argument("--language", help="the languages offered, comma-separated, the default first")
    parser.add_argument("--list", action="store_true", help="list folders without index.html")
    asyncio.run(main(parser.parse_args()))
