"""``heldout witness serve``: the C2SP tlog-witness ``POST /add-checkpoint`` endpoint over the standard library's
threading HTTP server (HTTP/1.1 keep-alive), bounded: request bodies of at most 64 KiB with a Content-Length,
a socket timeout per connection, 127.0.0.1 by default. The protocol itself is ``ledger.witness.Witness``.

A witness folder holds ``private/keys/witness.key`` (0600, made by ``heldout witness init``), ``logs.json`` (the
logs it follows, ``heldout witness trust-log``), ``state/`` and ``evidence/``. One server per folder: a lock
file refuses a second, which could otherwise answer from a stale view of the state.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from keys import HeldoutError, Signer, UsageError
from keys.files import ensure_private_dir, removed_on_failure
from ledger.cosignature import Cosigner
from ledger.witness import MAX_REQUEST_BYTES, SIZE_CONTENT_TYPE, SizeConflict, Witness, WitnessRefusal

KEY_ID = "witness"
SOCKET_TIMEOUT_S = 10.0


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

    def log_message(self, format: str, *args: object) -> None:
        if self.server.verbose:
            super().log_message(format, *args)

    def _reply(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._reply(404, b"not found\n")

    def do_POST(self) -> None:
        if self.path.rstrip("/") != "/add-checkpoint":
            self._reply(404, b"not found\n")
            return
        length_text = self.headers.get("Content-Length")
        if length_text is None or not length_text.isdigit():
            self.close_connection = True
            self._reply(411, b"Content-Length required\n")
            return
        length = int(length_text)
        if length > MAX_REQUEST_BYTES:
            self.close_connection = True
            self._reply(413, b"request body too large\n")
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

    def __init__(self, address: tuple[str, int], witness: Witness, *, verbose: bool = False) -> None:
        self.witness = witness
        self.verbose = verbose
        super().__init__(address, _Handler)

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
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535 or not host:
        raise UsageError("--listen is HOST:PORT (e.g. 127.0.0.1:8700; port 0 picks a free one)", found=text)
    return host, int(port)


@contextmanager
def running(folder: Path, *, listen: str = "127.0.0.1:0", clock: Callable[[], datetime]) -> Iterator[WitnessServer]:
    """A witness server on a background thread for the duration of the block (tests, benchmarks)."""
    with folder_lock(folder):
        server = WitnessServer(parse_listen(listen), load_witness(folder, clock=clock))
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield server
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
            server.witness.close()
