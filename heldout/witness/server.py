"""``heldout witness serve``: the C2SP tlog-witness ``POST /add-checkpoint`` endpoint over the standard library's
threading HTTP server (HTTP/1.1 keep-alive), bounded: request bodies of at most 64 KiB with a strictly parsed
Content-Length (ASCII digits only; anything else is 400, too large 413, none 411), a timeout per read and an
overall deadline per request (request line, headers and body: a client dripping bytes is answered 408 and
closed), a cap on concurrent connections (beyond it a new connection is answered 503 at once), 127.0.0.1 by
default. No exception in a handler escapes without an answer (500) or, for a client that went away, more than
one log line (only with ``verbose``). The protocol itself is ``ledger.witness.Witness``.

A witness folder holds ``private/keys/witness.key`` (0600, made by ``heldout witness init``), ``logs.json`` (the
logs it follows, ``heldout witness trust-log``), ``state/`` and ``evidence/``. One server per folder: a lock
file refuses a second, which could otherwise answer from a stale view of the state.
"""

from __future__ import annotations

import fcntl
import io
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from keys import HeldoutError, Signer, UsageError
from keys.files import ensure_private_dir, removed_on_failure
from keys.names import ASCII_DIGITS
from ledger.cosignature import Cosigner
from ledger.witness import MAX_REQUEST_BYTES, SIZE_CONTENT_TYPE, SizeConflict, Witness, WitnessRefusal

KEY_ID = "witness"
SOCKET_TIMEOUT_S = 10.0  # the longest wait for any one read (and the idle time of a keep-alive connection)
REQUEST_DEADLINE_S = 30.0  # request line + headers + body, however the bytes trickle in
MAX_CONNECTIONS = 64  # handler threads at once; beyond this a new connection gets 503 and is closed
# Connections one client address may hold at once: a keep-alive connection answered request after request (a GET
# every few seconds) keeps its thread for good, so one client reconnecting up to the cap above could hold every
# slot. Behind a reverse proxy every client has the proxy's address: raise it there (--max-per-address).
MAX_CONNECTIONS_PER_ADDRESS = 16
_CLIENT_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class BadHeader(Exception):
    """A request header the server reads is malformed: answered ``status`` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def parse_content_length(values: list[str] | None, *, limit: int = MAX_REQUEST_BYTES) -> int:
    """The body length from the Content-Length header(s): ASCII digits only, one value, at most ``limit``.
    Raises BadHeader with 411 (none), 400 (malformed, repeated with different values) or 413 (over the limit);
    the digits are compared with the limit before any conversion, so no value is too long to answer."""
    if not values:
        raise BadHeader(411, "Content-Length required")
    texts = {value.strip(" \t") for value in values}
    if len(texts) != 1:
        raise BadHeader(400, "conflicting Content-Length headers")
    text = texts.pop()
    if ASCII_DIGITS.fullmatch(text) is None:
        raise BadHeader(400, "Content-Length is not a number")
    significant = text.lstrip("0") or "0"
    if len(significant) > len(str(limit)) or int(significant) > limit:
        raise BadHeader(413, "request body too large")
    return int(significant)


_BUSY_TEXT = b"too many connections; retry\n"
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: "
         + str(len(_BUSY_TEXT)).encode() + b"\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + _BUSY_TEXT)


class _DeadlineReader(io.RawIOBase):
    """The connection's input for one handler: every receive waits at most the per-read timeout and never past
    the deadline of the request being read, so a client sending a byte now and then cannot hold the thread."""

    def __init__(self, handler: _Handler) -> None:
        super().__init__()
        self._handler = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        handler = self._handler
        remaining = handler.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("request deadline passed")
        handler.connection.settimeout(min(remaining, handler.server.read_timeout_s))
        n = handler.connection.recv_into(buffer)
        if n:
            handler.received = True
        return n


def witness_key_path(folder: Path) -> Path:
    return Path(folder) / "private" / "keys" / f"{KEY_ID}.key"


def init_witness(folder: Path, *, name: str) -> Cosigner:
    """Create a witness folder with a fresh Ed25519 key named ``name``; refuses an existing key."""
    path = witness_key_path(folder)
    if path.exists():
        raise UsageError(f"the witness folder {folder} already has a key", path=str(path))
    with removed_on_failure(Path(folder), Path(folder) / "private", path.parent):  # a refusal leaves no folder
        ensure_private_dir(Path(folder) / "private")
        ensure_private_dir(path.parent)
        signer = Signer.generate(name=name, key_id=KEY_ID)
        signer.save(path)
    return Cosigner.of(signer)


def load_witness(folder: Path, *, clock: Callable[[], datetime]) -> Witness:
    path = witness_key_path(folder)
    if not path.is_file():
        raise UsageError(f"no witness key in {folder}; run: heldout witness init --store {folder} --name NAME",
                         path=str(path))
    return Witness(Path(folder), Signer.load(path), clock=clock)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT_S
    # Headers and body go out in separate writes; with Nagle on, a keep-alive client's delayed ACK holds the
    # second one for ~40 ms per request.
    disable_nagle_algorithm = True
    server: WitnessServer
    deadline = 0.0  # time.monotonic() after which the request being read is abandoned (408)
    received = False  # whether any byte of the request being read has arrived
    responded = False  # whether a status line has been sent for it

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.read_timeout_s)
        self.rfile.close()  # the socket stays open; reads go through the deadline instead
        self.rfile = io.BufferedReader(_DeadlineReader(self))

    def finish(self) -> None:
        with suppress(OSError):  # the client is gone: nothing left to flush
            super().finish()

    def log_message(self, format: str, *args: object) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def send_response(self, code: int, message: str | None = None) -> None:
        self.responded = True
        self.connection.settimeout(self.server.read_timeout_s)  # writes: not the little left of a deadline
        super().send_response(code, message)

    def handle_one_request(self) -> None:
        """One request under the overall deadline. Every way out answers or closes: a deadline passed is 408 (if
        anything of the request arrived), a client gone is one log line, any other exception is 500."""
        self.deadline = time.monotonic() + self.server.request_deadline_s
        self.received = self.responded = False
        self.requestline, self.request_version, self.command = "", "", ""  # until parse_request sets them
        try:  # (the base class's loop, which drops any timeout without an answer and lets the rest escape)
            self.raw_requestline = self.rfile.readline(65537)
            if len(self.raw_requestline) > 65536:
                self.send_error(414)
                self.close_connection = True
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            self.received = True  # (a pipelined request may come from the buffer, without a read)
            if not self.parse_request():  # an error has been answered
                return
            method = getattr(self, "do_" + self.command, None)
            if method is None:
                self.send_error(501, f"Unsupported method ({self.command!r})")
                return
            method()
            self.wfile.flush()
        except TimeoutError:
            self.close_connection = True
            self.log_message("request timed out")
            if self.received and not self.responded:
                self._reply_quietly(408, b"request timed out\n")
        except _CLIENT_GONE as exc:  # (between keep-alive requests, a client closing is no news)
            self.close_connection = True
            if self.received:
                self.log_message("client went away: %s", type(exc).__name__)
        except Exception as exc:  # a bug or an unusable witness: answered, never a traceback in the log
            self.close_connection = True
            self.log_message("error handling the request: %s: %s", type(exc).__name__, exc)
            if not self.responded:
                self._reply_quietly(500, b"internal error\n")

    def _reply_quietly(self, status: int, body: bytes) -> None:
        """A last answer on a connection about to close; a client already gone is not an error."""
        with suppress(OSError):
            self._reply(status, body, close=True)

    def _reply(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8", *,
               close: bool = False) -> None:
        if close:
            self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _body_skipped(self) -> bool:
        """Read and drop the body of a request answered without it; False when its extent is unknown or over
        the limit (the connection must then close). Left unread, a body is parsed as the next request on a
        keep-alive connection: a request smuggled past whatever a proxy in front allows."""
        if self.headers.get_all("Transfer-Encoding"):
            return False
        if not self.headers.get_all("Content-Length"):
            return True
        try:
            length = parse_content_length(self.headers.get_all("Content-Length"))
        except BadHeader:
            return False
        return len(self.rfile.read(length)) == length

    def do_GET(self) -> None:
        self._reply(404, b"not found\n", close=not self._body_skipped())

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/add-checkpoint":
            self._reply(404, b"not found\n", close=not self._body_skipped())
            return
        try:
            if self.headers.get_all("Transfer-Encoding"):  # chunked bodies are not supported: no framing to trust
                raise BadHeader(400 if self.headers.get_all("Content-Length") else 411,
                                "Transfer-Encoding is not supported; send a Content-Length")
            length = parse_content_length(self.headers.get_all("Content-Length"))
        except BadHeader as exc:  # the body's extent is unknown: answer and close
            self._reply(exc.status, (exc.message + "\n").encode(), close=True)
            return
        body = self.rfile.read(length)
        if len(body) != length:
            self.close_connection = True
            return
        try:
            cosignature = self.server.witness.add_checkpoint(body)
        except SizeConflict as exc:
            self._reply(409, f"{exc.size}\n".encode(), SIZE_CONTENT_TYPE)
            return
        except WitnessRefusal as exc:
            self._reply(exc.status, (exc.message + "\n").encode())
            return
        except HeldoutError as exc:  # the witness's own state is unusable: refuse, never cosign
            self._reply(500, (exc.message + "\n").encode())
            return
        self._reply(200, cosignature.line.encode("utf-8"))


class WitnessServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], witness: Witness, *, verbose: bool = False,
                 max_connections: int = MAX_CONNECTIONS, request_deadline_s: float = REQUEST_DEADLINE_S,
                 read_timeout_s: float = SOCKET_TIMEOUT_S,
                 max_per_address: int = MAX_CONNECTIONS_PER_ADDRESS) -> None:
        if max_connections < 1 or max_per_address < 1 or request_deadline_s <= 0 or read_timeout_s <= 0:
            raise ValueError("max_connections, max_per_address, request_deadline_s and read_timeout_s must be "
                             "positive")
        self.witness = witness
        self.verbose = verbose
        self.request_deadline_s = request_deadline_s
        self.read_timeout_s = read_timeout_s
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        self.max_per_address = max_per_address
        self._held: dict[str, int] = {}  # connections open per client address
        self._held_lock = threading.Lock()
        super().__init__(address, _Handler)

    def _log(self, message: str) -> None:
        if self.verbose:
            print(f"[witness] {message}", file=sys.stderr, flush=True)

    def process_request(self, request: Any, client_address: Any) -> None:
        """A handler thread per connection, at most ``max_connections`` at once and ``max_per_address`` from one
        client address; beyond either the connection is answered 503 on the spot (never blocking the accept
        loop) and closed."""
        address = str(client_address[0])
        with self._held_lock:
            held = self._held.get(address, 0)
            if held >= self.max_per_address:
                refusal: str | None = f"{held} connections open from this address"
            elif not self._slots.acquire(blocking=False):
                refusal = f"{self.max_connections} connections open"
            else:
                refusal = None
                self._held[address] = held + 1
        if refusal is not None:
            self._refuse(request, client_address, refusal)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release(address)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release(str(client_address[0]))

    def _release(self, address: str) -> None:
        with self._held_lock:
            held = self._held.pop(address) - 1
            if held:
                self._held[address] = held
            self._slots.release()

    def _refuse(self, request: socket.socket, client_address: Any, why: str) -> None:
        self._log(f"{client_address[0]}: {why}, answered 503")
        try:
            request.setblocking(False)
            request.send(_BUSY)
            for _ in range(4):  # what the client already sent: unread, closing would reset the connection
                if not request.recv(65536):
                    break
        except OSError:
            pass
        self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Whatever escapes a handler (the handler answers its own errors): one line, only when verbose."""
        exc = sys.exc_info()[1]
        self._log(f"{client_address[0] if client_address else '?'}: {type(exc).__name__}: {exc}")

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


@contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """One server per witness folder (an exclusive flock held while serving)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    fd = os.open(Path(folder) / ".serve.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"another witness server is using {folder}", path=str(folder)) from None
        yield
    finally:
        os.close(fd)


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or ASCII_DIGITS.fullmatch(port) is None or len(port) > 5 or not 0 <= int(port) <= 65535 or not host:
        raise UsageError("--listen is HOST:PORT (e.g. 127.0.0.1:8700; port 0 picks a free one)", found=text)
    return host, int(port)


@contextmanager
def running(folder: Path, *, listen: str = "127.0.0.1:0", clock: Callable[[], datetime],
            **limits: Any) -> Iterator[WitnessServer]:
    """A witness server on a background thread for the duration of the block (tests, benchmarks); ``limits``
    go to WitnessServer (verbose, max_connections, max_per_address, request_deadline_s, read_timeout_s)."""
    with folder_lock(folder):
        server = WitnessServer(parse_listen(listen), load_witness(folder, clock=clock), **limits)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield server
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
            server.witness.close()
