"""C2SP tlog-tiles: a ledger published as static files, and a verifying reader over such a folder or URL.

Layout (format ``heldout-ledger-tiles``, version 1; the first three kinds are the C2SP tlog-tiles API, the
rest is what ``ledger export`` puts beside its entries, in the same places)::

    OUT/
      checkpoint                  the latest signed checkpoint (C2SP signed note) with the witnesses'
                                  cosignature lines the ledger holds for it; written last, atomically
      tile/<L>/<N>[.p/<W>]        hash tiles of height 8: tile N of level L holds the W hashes (32 bytes each)
                                  of tree level 8*L, nodes 256*N .. 256*N+W-1; a full tile has W = 256 and
                                  no .p/<W> suffix; N is written in 3-digit path elements, all but the last
                                  prefixed with x (1234067 -> x001/x234/067)
      tile/entries/<N>[.p/<W>]    entry bundles: entries 256*N .. 256*N+W-1, each as a big-endian uint16
                                  length and the entry's exact bytes
      heldout-tiles.json          manifest (canonical JSON): format, version, ledger_id, origin, size, root,
                                  note_verifier_key, checkpoints (sizes), blobs, missing_blobs, keys, seals
      checkpoints/<size>.note     every signed checkpoint with its cosignatures (as in an export)
      blobs/sha256/<hh>/<hex>     every blob an entry references that the store holds (content-addressed)
      keys/<key_id>.pub.json      the public keys the ledger's entries declare
      seals/<name>                the store's published signed seal manifests and reveals, verbatim

Full tiles and full entry bundles never change once written: a re-run after appends writes only the tiles
the new entries complete or extend (a full tile already present with other bytes is refused, never
overwritten). Partial tiles for the new size are written beside the earlier partial ones (a reader holding
an older checkpoint still finds its own), and all partial versions of a tile are deleted once it is full and
the new checkpoint is in place. Nothing under the store's ``private/`` is read.

:class:`TilesLog` reads such a folder (files opened without following symbolic links, sizes bounded) or the
same layout over HTTP(S) (timeouts, sizes bounded) and presents the interface of
:class:`ledger.export.LedgerExport`. What it returns is checked: every entry against the leaf hash in its
level-0 tile, every hash tile against the tree the entries give, that tree's root against the ``checkpoint``
signed by the key entry 0 declares; :meth:`TilesLog.verify` then replays every checkpoint as an export's.
"""

from __future__ import annotations

import fcntl
import hashlib
import http.client
import os
import re
import shutil
import stat
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from keys import MalformedInput, TrustedKey, b64encode, verifier_key_string
from keys.files import write_synced
from keys.safeio import (
    BLOB_LIMIT,
    DOCUMENT_LIMIT,
    ENTRIES_FILE_LIMIT,
    KEY_FILE_LIMIT,
    NOTE_LIMIT,
    UnsafeFile,
    check_json_depth,
    file_in,
    list_in,
    read_in,
)
from ledger.blobs import BlobStore, check_sha256_hex
from ledger.checkpoint import Checkpoint, parse_checkpoint, verify_checkpoint
from ledger.entries import blob_references, decode_entry, genesis_key, is_ledger_id, ledger_id_of, origin_of
from ledger.errors import BlobMissing, LedgerIntegrityError, LedgerUsageError
from ledger.export import BLOBS, CHECKPOINTS, KEYS, SEALS, key_file_bytes
from ledger.ledger import Ledger
from ledger.published import EntryList, check_replayed_claims
from ledger.replay import CheckpointClaim, EntryFn, ProgressFn, ReplayReport, replay
from ledger.rfc6962 import HASH_SIZE, leaf_hash, node_hash
from ledger.tree import HashTree, MemoryNodes, frontier_root
from seals import canonical_bytes, parse_json_object

TILES_FORMAT = "heldout-ledger-tiles"
TILES_VERSION = 1
MANIFEST = "heldout-tiles.json"
CHECKPOINT = "checkpoint"
LOCK = ".heldout-tiles.lock"
TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT
MAX_BUNDLE_ENTRY = 0xFFFF  # the uint16 length prefix of an entry bundle

TILE_LIMIT = TILE_WIDTH * HASH_SIZE
BUNDLE_LIMIT = TILE_WIDTH * (2 + MAX_BUNDLE_ENTRY)
MANIFEST_LIMIT = ENTRIES_FILE_LIMIT  # it lists every checkpoint size and blob: it grows with the log
FETCH_TIMEOUT_S = 30.0
FETCH_THREADS = 8  # concurrent requests to a tiles server

_T = TypeVar("_T")
_TOP_LEVEL = {CHECKPOINT, "tile", MANIFEST, CHECKPOINTS, "blobs", KEYS, SEALS}


# paths and encodings ------------------------------------------------------------------------------------------

def index_path(index: int) -> str:
    """N in 3-digit path elements, all but the last prefixed with ``x`` (1234067 -> ``x001/x234/067``)."""
    parts = [f"{index % 1000:03d}"]
    index //= 1000
    while index:
        parts.append(f"x{index % 1000:03d}")
        index //= 1000
    return "/".join(reversed(parts))


def _tile_name(level: str, index: int, width: int) -> str:
    if not 1 <= width <= TILE_WIDTH:
        raise LedgerUsageError(f"a tile holds 1..{TILE_WIDTH} hashes", found=width)
    suffix = "" if width == TILE_WIDTH else f".p/{width}"
    return f"tile/{level}/{index_path(index)}{suffix}"


def hash_tile_path(level: int, index: int, width: int = TILE_WIDTH) -> str:
    return _tile_name(str(level), index, width)


def bundle_path(index: int, width: int = TILE_WIDTH) -> str:
    return _tile_name("entries", index, width)


def encode_bundle(entries: list[bytes]) -> bytes:
    return b"".join(len(data).to_bytes(2, "big") + data for data in entries)


def decode_bundle(data: bytes, *, where: str) -> list[bytes]:
    entries: list[bytes] = []
    offset = 0
    while offset < len(data):
        if offset + 2 > len(data):
            raise LedgerIntegrityError("an entry bundle ends inside a length prefix (truncated?)", file=where,
                                       offset=offset)
        length = int.from_bytes(data[offset:offset + 2], "big")
        end = offset + 2 + length
        if end > len(data):
            raise LedgerIntegrityError("an entry bundle ends inside an entry (truncated?)", file=where,
                                       offset=offset, expected=length, found=len(data) - offset - 2)
        entries.append(data[offset + 2:end])
        offset = end
    return entries


def subtree_root(hashes: list[bytes]) -> bytes:
    """The root of a perfect subtree given its 2**k lowest hashes (a tile's hashes, or an aligned part)."""
    level = list(hashes)
    while len(level) > 1:
        level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def root_from_levels(size: int, hashes_at: Callable[[int, int, int], list[bytes]]) -> bytes:
    """The tree root for ``size`` from tile levels: ``hashes_at(L, start, count)`` gives ``count`` hashes of
    tree level 8*L from index ``start``. Every maximal perfect subtree of the size lies in one tile."""
    frontier: list[tuple[int, bytes]] = []
    offset = 0
    for height in range(size.bit_length() - 1, -1, -1):
        if size >> height & 1:
            level, within = divmod(height, TILE_HEIGHT)
            shift = TILE_HEIGHT * level
            frontier.append((height, subtree_root(hashes_at(level, offset >> shift, 1 << within))))
            offset += 1 << height
    return frontier_root(frontier)


def _split(data: bytes) -> list[bytes]:
    return [data[i:i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]


def _levels(size: int) -> Iterator[tuple[int, int]]:
    """(level, number of hashes at tree level 8*level) for every tile level a tree of ``size`` has."""
    level = 0
    while size >> (TILE_HEIGHT * level):
        yield level, size >> (TILE_HEIGHT * level)
        level += 1


def _json_object(data: bytes, what: str) -> dict[str, Any]:
    try:
        check_json_depth(data, what=what)
        return parse_json_object(data, what=what)
    except MalformedInput as exc:
        raise LedgerIntegrityError(exc.message, file=what) from None


# writing -----------------------------------------------------------------------------------------------------

@dataclass
class TilesResult:
    """What one ``write_tiles`` run did (``written``: paths whose bytes it wrote, ``unchanged``: files it found
    already holding the right bytes, ``removed``: superseded partial tiles)."""

    ledger_id: str
    size: int
    previous_size: int
    written: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    blobs: int = 0
    missing_blobs: int = 0

    def to_json(self) -> dict[str, Any]:
        full = [p for p in self.written if p.startswith("tile/") and ".p/" not in p]
        return {"ledger_id": self.ledger_id, "size": self.size, "previous_size": self.previous_size,
                "written": len(self.written), "full_tiles_written": len(full), "unchanged": self.unchanged,
                "removed_partials": len(self.removed), "blobs": self.blobs, "missing_blobs": self.missing_blobs}


class _Writer:
    """Files under OUT: immutable ones are written once (linked into place, never replaced), replaceable
    ones atomically; directories are fsynced once, before the checkpoint."""

    def __init__(self, root: Path, result: TilesResult) -> None:
        self.root = root
        self.result = result
        self.dirs: set[Path] = set()

    def _existing(self, rel: str) -> bytes | None:
        path = self.root / rel
        try:
            info = path.lstat()
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(info.st_mode):
            raise LedgerIntegrityError("the tiles directory holds something other than a file here", file=rel)
        return path.read_bytes()

    def _write(self, rel: str, data: bytes, *, replace: bool) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        try:
            write_synced(tmp, data, 0o644, exclusive=False)
            if replace:
                os.replace(tmp, path)
            else:
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    self.immutable(rel, data)  # appeared meanwhile: compared as any existing file
                    return
        finally:
            tmp.unlink(missing_ok=True)
        self.dirs.add(path.parent)
        self.result.written.append(rel)

    def immutable(self, rel: str, data: bytes) -> None:
        found = self._existing(rel)
        if found is None:
            self._write(rel, data, replace=False)
        elif found == data:
            self.result.unchanged += 1
        else:
            raise LedgerIntegrityError("a full tile or content-addressed file in the tiles directory differs from "
                                       "what the ledger gives (it is never rewritten; write to a new folder)",
                                       file=rel)

    def replaceable(self, rel: str, data: bytes) -> None:
        if self._existing(rel) == data:
            self.result.unchanged += 1
        else:
            self._write(rel, data, replace=True)

    def sync(self) -> None:
        for folder in sorted(self.dirs):
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.dirs.clear()


def _previous(ledger: Ledger, out: Path) -> tuple[int, dict[str, Any]]:
    """The size OUT already publishes for this ledger (0 for a new folder) and its manifest."""
    if not out.exists():
        return 0, {}
    if not out.is_dir() or out.is_symlink():
        raise LedgerUsageError(f"{out} is not a directory", path=str(out))
    names = {p.name for p in out.iterdir()}
    foreign = sorted(n for n in names if n not in _TOP_LEVEL and not n.startswith("."))
    if foreign:
        raise LedgerUsageError(f"{out} is not a tiles directory (it holds {foreign[0]!r})", path=str(out))
    if CHECKPOINT not in names:
        return 0, {}  # empty, or a first run that stopped before its checkpoint: immutable files are compared
    manifest = _json_object((out / MANIFEST).read_bytes(), MANIFEST) if MANIFEST in names else {}
    if manifest.get("ledger_id") != ledger.ledger_id:
        raise LedgerUsageError(f"{out} publishes another ledger", path=str(out), expected=ledger.ledger_id,
                               found=manifest.get("ledger_id"))
    published = verify_checkpoint((out / CHECKPOINT).read_bytes(), name=ledger.key.name,
                                  key=ledger.key.public_key, origin=ledger.origin)
    if published.size > ledger.size or ledger.root(published.size) != published.root:
        raise LedgerIntegrityError(f"{out} publishes a history this ledger does not extend (size "
                                   f"{published.size}); write to a new folder", path=str(out),
                                   checkpoint=published.size)
    # a run that stopped between its manifest and its checkpoint left a manifest of a later state of this
    # same (append-only) ledger: what it lists as written was written before it, so it is kept as a start
    return published.size, manifest


def write_tiles(ledger: Ledger, out: Path, *, blobs: BlobStore | None = None,
                seals: Path | None = None) -> TilesResult:
    """Write (or extend) the tlog-tiles layout of ``ledger`` in ``out`` up to its latest checkpoint (see the
    module docstring). The checkpoint is written last: until then readers see the previous state. One run
    at a time per folder (an exclusive lock on ``OUT/.heldout-tiles.lock``; a second run is refused)."""
    out = Path(out)
    _previous(ledger, out)  # refuse a foreign folder before creating anything in it
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LedgerUsageError(f"another 'ledger tiles' run is writing {out}", path=str(out)) from None
        return _write_tiles(ledger, out, blobs=blobs, seals=seals)
    finally:
        os.close(fd)  # releases the lock


def _write_tiles(ledger: Ledger, out: Path, *, blobs: BlobStore | None, seals: Path | None) -> TilesResult:
    old, previous = _previous(ledger, out)
    checkpoints = ledger.cosigned_checkpoints()
    latest = checkpoints[-1]
    new = latest.size
    if new < old:
        raise LedgerUsageError(f"{out} already publishes size {old}, beyond the ledger's checkpoint {new}",
                               path=str(out))
    result = TilesResult(ledger.ledger_id, new, old)
    writer = _Writer(out, result)

    # level 0: entry bundles and leaf-hash tiles, streamed from the first tile the old size left partial
    referenced: dict[str, None] = {}
    declared: list[TrustedKey] = [ledger.key] if old == 0 else []
    first = old >> TILE_HEIGHT << TILE_HEIGHT
    # levels[L] = (first index, hashes of tree level 8*L held in memory); level 0 keeps only its partial tail
    levels: dict[int, tuple[int, list[bytes]]] = {0: (new >> TILE_HEIGHT << TILE_HEIGHT, [])}
    full_roots: list[bytes] = []  # roots of the full tiles this run completed on the level below
    chunk: list[bytes] = []
    leaves: list[bytes] = []

    def flush(number: int) -> None:
        tile = b"".join(leaves)
        if len(chunk) == TILE_WIDTH:
            writer.immutable(bundle_path(number), encode_bundle(chunk))
            writer.immutable(hash_tile_path(0, number), tile)
            full_roots.append(subtree_root(leaves))
        else:
            writer.replaceable(bundle_path(number, len(chunk)), encode_bundle(chunk))
            writer.replaceable(hash_tile_path(0, number, len(chunk)), tile)
            levels[0] = (number << TILE_HEIGHT, list(leaves))

    for index, data in ledger.entries_bytes(first, new):
        if len(data) > MAX_BUNDLE_ENTRY:
            raise LedgerUsageError(f"entry {index} is {len(data)} bytes; a tlog-tiles entry bundle holds entries "
                                   f"of at most {MAX_BUNDLE_ENTRY} bytes", index=index, found=len(data))
        chunk.append(data)
        leaves.append(leaf_hash(data))
        if index >= old:
            entry = decode_entry(data, index=index)
            for ref in blob_references(entry):
                referenced.setdefault(ref)
            if entry.get("type") == "key":
                declared.append(genesis_key(entry))
        if len(chunk) == TILE_WIDTH:
            flush(index >> TILE_HEIGHT)
            chunk, leaves = [], []
    if chunk:
        flush((new - 1) >> TILE_HEIGHT)

    # levels above: hash j of level L is the root of full tile j of level L-1 (read back from OUT when an
    # earlier run completed it), tiled the same way
    below_first = first >> TILE_HEIGHT
    for level, count in _levels(new):
        if level == 0:
            continue
        start = (old >> (TILE_HEIGHT * level)) >> TILE_HEIGHT << TILE_HEIGHT
        hashes = [_read_back_root(out, level - 1, j) for j in range(start, below_first)] + full_roots
        if start + len(hashes) != count:
            raise LedgerIntegrityError("tile arithmetic went wrong", level=level, expected=count,
                                       found=start + len(hashes))
        levels[level] = (start, hashes)
        full_roots = []
        for number in range(start >> TILE_HEIGHT, (count + TILE_WIDTH - 1) >> TILE_HEIGHT):
            part = hashes[(number << TILE_HEIGHT) - start:((number + 1) << TILE_HEIGHT) - start]
            if len(part) == TILE_WIDTH:
                writer.immutable(hash_tile_path(level, number), b"".join(part))
                full_roots.append(subtree_root(part))
            else:
                writer.replaceable(hash_tile_path(level, number, len(part)), b"".join(part))
        below_first = start >> TILE_HEIGHT

    def hashes_at(level: int, start: int, count: int) -> list[bytes]:
        first_held, held = levels[level]
        offset = start - first_held
        if offset < 0 or offset + count > len(held):
            raise LedgerIntegrityError("tile arithmetic went wrong", level=level, index=start)
        return held[offset:offset + count]

    computed = root_from_levels(new, hashes_at)
    if computed != latest.root:
        raise LedgerIntegrityError("the tiles give another root than the ledger's checkpoint (a damaged tiles "
                                   "directory?); nothing was published", expected=latest.root_b64,
                                   found=b64encode(computed), checkpoint=new)

    # what a verifier needs beside the tiles, as an export holds it
    missing = [d for d in previous.get("missing_blobs") or [] if isinstance(d, str)]
    present = [d for d in previous.get("blobs") or [] if isinstance(d, str)]
    known = set(present)
    for digest in dict.fromkeys([*missing, *referenced]):
        if digest in known:
            continue
        check_sha256_hex(digest)
        if blobs is not None and blobs.has(digest):
            writer.immutable(f"{BLOBS}/{digest[:2]}/{digest}", blobs.get(digest))
            present.append(digest)
        else:
            known.add(digest)
            missing.append(digest)
    missing = sorted(set(missing) - set(present))
    key_ids = {k for k in previous.get("keys") or [] if isinstance(k, str)}
    for key in declared:
        writer.immutable(f"{KEYS}/{key.key_id}.pub.json", key_file_bytes(key))
        key_ids.add(key.key_id)
    if seals is not None and seals.is_dir():
        for path in sorted(seals.iterdir()):
            if path.is_file() and not path.is_symlink() and not path.name.startswith("."):
                writer.replaceable(f"{SEALS}/{path.name}", path.read_bytes())
    seal_folder = out / SEALS
    seal_names = sorted(p.name for p in seal_folder.iterdir() if not p.name.startswith(".")) \
        if seal_folder.is_dir() else []
    for checkpoint in checkpoints:
        rel = f"{CHECKPOINTS}/{checkpoint.size}.note"
        note = checkpoint.note_bytes
        if checkpoint.size <= old:
            # a published note only ever gains cosignature lines, so an unchanged length is the same note
            existing = out / rel
            if existing.is_file() and not existing.is_symlink() and existing.stat().st_size == len(note):
                continue
        writer.replaceable(rel, note)
    manifest = {
        "format": TILES_FORMAT, "version": TILES_VERSION, "ledger_id": ledger.ledger_id, "origin": ledger.origin,
        "size": new, "root": latest.root_b64,
        "note_verifier_key": verifier_key_string(ledger.key.name, ledger.key.public_key),
        "checkpoints": [c.size for c in checkpoints], "blobs": sorted(present), "missing_blobs": missing,
        "keys": sorted(key_ids), "seals": seal_names,
    }
    writer.replaceable(MANIFEST, canonical_bytes(manifest) + b"\n")
    writer.sync()
    writer.replaceable(CHECKPOINT, latest.note_bytes)
    writer.sync()
    result.blobs, result.missing_blobs = len(present), len(missing)

    # partial versions of tiles this run completed are no longer needed by any reader of this checkpoint
    for level, count in [(-1, new), *_levels(new)]:
        old_count = old >> (TILE_HEIGHT * max(level, 0))
        for number in range(old_count >> TILE_HEIGHT, count >> TILE_HEIGHT):
            name = bundle_path(number) if level < 0 else hash_tile_path(level, number)
            partials = out / f"{name}.p"
            if partials.is_dir() and not partials.is_symlink():
                shutil.rmtree(partials)
                result.removed.append(f"{name}.p")
    return result


def _read_back_root(out: Path, level: int, number: int) -> bytes:
    rel = hash_tile_path(level, number)
    path = out / rel
    if path.is_symlink() or not path.is_file():
        raise LedgerIntegrityError("the tiles directory lacks a full tile an earlier run wrote; write to a new "
                                   "folder", file=rel)
    data = path.read_bytes()
    if len(data) != TILE_LIMIT:
        raise LedgerIntegrityError("a full tile in the tiles directory has the wrong length", file=rel,
                                   expected=TILE_LIMIT, found=len(data))
    return subtree_root(_split(data))


# reading -----------------------------------------------------------------------------------------------------

def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def is_tiles_dir(folder: Path) -> bool:
    """Whether ``folder`` holds ``checkpoint`` and ``tile/`` (a link or a non-regular file there is refused,
    so that a tampered folder never reads as some other kind of source)."""
    if not Path(folder).is_dir():
        return False
    files = LocalFiles(Path(folder))
    return files.exists(CHECKPOINT) and files.listing("tile") is not None


_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")


def _parts(rel: str) -> list[str]:
    parts = rel.split("/")
    if not all(_PART.fullmatch(p) for p in parts):
        raise LedgerUsageError("not a name inside the tiles directory", found=rel[:120])
    return parts


class LocalFiles:
    """Files under a folder, read through ``keys.safeio``: no symbolic link followed anywhere on the path,
    regular files only, sizes bounded before reading; a refusal is tampering (exit 1)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise LedgerUsageError(f"no tiles directory at {self.root}", path=str(self.root))

    def where(self, rel: str) -> str:
        return str(self.root / rel)

    def read(self, rel: str, limit: int) -> bytes | None:
        try:
            return read_in(self.root, _parts(rel), limit=limit, what="tiles directory")
        except UnsafeFile as exc:
            raise LedgerIntegrityError(exc.message, **exc.evidence) from None

    def exists(self, rel: str) -> bool:
        try:
            return file_in(self.root, _parts(rel), what="tiles directory")
        except UnsafeFile as exc:
            raise LedgerIntegrityError(exc.message, **exc.evidence) from None

    def listing(self, rel: str) -> list[str] | None:
        try:
            return list_in(self.root, _parts(rel), what="tiles directory")
        except UnsafeFile as exc:
            raise LedgerIntegrityError(exc.message, **exc.evidence) from None


class _NoSchemeChange(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> urllib.request.Request | None:
        if not is_url(newurl):
            raise LedgerUsageError("a tiles server redirected outside http(s)", found=newurl[:120])
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class HttpFiles:
    """The same layout served over HTTP(S): GET with a timeout, sizes bounded (the declared length first),
    404/410 as absent, redirects only to http(s)."""

    def __init__(self, base: str, *, timeout: float = FETCH_TIMEOUT_S) -> None:
        self.base = base.rstrip("/")
        self.timeout = timeout
        self.opener = urllib.request.build_opener(_NoSchemeChange)

    def where(self, rel: str) -> str:
        return f"{self.base}/{rel}"

    def _open(self, rel: str, method: str) -> Any:
        url = f"{self.base}/{'/'.join(_parts(rel))}"
        try:
            return self.opener.open(urllib.request.Request(url, method=method), timeout=self.timeout)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code in (404, 410):
                return None
            raise LedgerUsageError(f"cannot fetch {url}: HTTP {exc.code}", path=url) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise LedgerUsageError(f"cannot fetch {url}: {reason}", path=url) from None

    def read(self, rel: str, limit: int) -> bytes | None:
        response = self._open(rel, "GET")
        if response is None:
            return None
        with response:
            declared = response.headers.get("Content-Length")
            if declared is not None and declared.isdigit() and int(declared) > limit:
                raise LedgerIntegrityError(f"{rel} is {declared} bytes, over the {limit}-byte limit", file=rel,
                                           expected=limit, found=int(declared))
            try:
                data = response.read(limit + 1)
            except (OSError, http.client.HTTPException) as exc:
                raise LedgerUsageError(f"cannot fetch {self.where(rel)}: {exc}", path=self.where(rel)) from None
        if len(data) > limit:
            raise LedgerIntegrityError(f"{rel} is over the {limit}-byte limit", file=rel, expected=limit)
        return bytes(data)

    def exists(self, rel: str) -> bool:
        response = self._open(rel, "HEAD")
        if response is None:
            return False
        response.close()
        return True

    def listing(self, rel: str) -> list[str] | None:
        return None  # HTTP has no listing: what the manifest names is fetched instead


Files = LocalFiles | HttpFiles


class TileBlobs:
    """The tiles directory's content-addressed blobs (each read is bounded and re-hashed)."""

    def __init__(self, files: Files) -> None:
        self.files = files

    def path_of(self, digest: str) -> str:
        check_sha256_hex(digest)
        return f"{BLOBS}/{digest[:2]}/{digest}"

    def has(self, digest: str) -> bool:
        return self.files.exists(self.path_of(digest))

    def get(self, digest: str) -> bytes:
        rel = self.path_of(digest)
        data = self.files.read(rel, BLOB_LIMIT)
        if data is None:
            raise BlobMissing(f"blob {digest} is not in the tiles directory", file=rel, found="missing")
        found = hashlib.sha256(data).hexdigest()
        if found != digest:
            raise LedgerIntegrityError(f"blob {digest} has been altered", file=rel, expected=digest, found=found)
        return data

    def verify(self, digest: str) -> None:
        self.get(digest)


class TilesLog(EntryList):
    """Read access to a tiles directory or URL with the interface of :class:`ledger.export.LedgerExport`.
    Entries are checked against the tiles and the tiles against the signed ``checkpoint`` when first read;
    :meth:`verify` replays every checkpoint and checks the manifest."""

    what = "the tiles"

    def __init__(self, source: str | Path) -> None:
        self.source = str(source)
        self.files: Files = HttpFiles(self.source) if is_url(self.source) else LocalFiles(Path(self.source))
        raw = self.files.read(MANIFEST, MANIFEST_LIMIT)
        if raw is None:
            raise LedgerUsageError(f"{self.source} is not a heldout tiles directory (no {MANIFEST})",
                                   path=self.source)
        self.manifest_bytes = raw
        self.manifest: dict[str, Any] = _json_object(raw, MANIFEST)
        if self.manifest.get("format") != TILES_FORMAT or self.manifest.get("version") != TILES_VERSION:
            raise LedgerIntegrityError("unknown tiles format", file=MANIFEST,
                                       expected=f"{TILES_FORMAT} v{TILES_VERSION}",
                                       found=f"{self.manifest.get('format')} v{self.manifest.get('version')}")
        claimed = self.manifest.get("ledger_id")
        if not isinstance(claimed, str) or not is_ledger_id(claimed):
            raise LedgerIntegrityError("the tiles manifest has no valid ledger id", file=MANIFEST)
        self.ledger_id: str = claimed
        self.origin: str = str(self.manifest.get("origin"))
        note = self.files.read(CHECKPOINT, NOTE_LIMIT)
        if note is None:
            raise LedgerUsageError(f"{self.source} has no {CHECKPOINT}", path=self.source)
        self._checkpoint = parse_checkpoint(note)
        if self.manifest.get("size") != self._checkpoint.size:
            raise LedgerIntegrityError("the tiles manifest and checkpoint disagree on the size (being updated? "
                                       "try again)", file=MANIFEST, expected=self._checkpoint.size,
                                       found=self.manifest.get("size"))
        self.blobs = TileBlobs(self.files)
        self._entries: list[bytes] | None = None
        self._nodes: MemoryNodes | None = None
        self._tree: HashTree | None = None

    # tiles ------------------------------------------------------------------------------------------------
    def _tile(self, path_of: Callable[[int], str], width: int, limit: int) -> tuple[str, bytes, bool]:
        """A tile of ``width``: its own .p/<width> file, else the full tile (the spec lets a server keep
        only that); returns (path read, bytes, whether it is the full one)."""
        rel = path_of(width)
        data = self.files.read(rel, limit)
        if data is None and width < TILE_WIDTH:
            full = path_of(TILE_WIDTH)
            data = self.files.read(full, limit)
            if data is not None:
                return full, data, True
        if data is None:
            raise LedgerIntegrityError(f"the tiles directory lacks {rel}", file=self.files.where(rel))
        return rel, data, width == TILE_WIDTH

    def _hash_tile(self, level: int, number: int, width: int) -> list[bytes]:
        rel, data, full = self._tile(partial(hash_tile_path, level, number), width, TILE_LIMIT)
        expected = TILE_LIMIT if full else width * HASH_SIZE
        if len(data) != expected:
            raise LedgerIntegrityError("a hash tile has the wrong length (truncated?)", file=rel,
                                       expected=expected, found=len(data))
        return _split(data)[:width]

    def _level0(self, number: int) -> tuple[list[bytes], list[bytes]]:
        """Entry bundle ``number`` and its leaf-hash tile, for the checkpoint's size: (entries, leaves)."""
        width = min(TILE_WIDTH, self._checkpoint.size - (number << TILE_HEIGHT))
        rel, data, full = self._tile(partial(bundle_path, number), width, BUNDLE_LIMIT)
        bundle = decode_bundle(data, where=rel)
        if len(bundle) != (TILE_WIDTH if full else width):
            raise LedgerIntegrityError("an entry bundle holds another number of entries than its name says",
                                       file=rel, expected=TILE_WIDTH if full else width, found=len(bundle))
        return bundle[:width], self._hash_tile(0, number, width)

    def _upper_tile(self, level: int, count: int, number: int) -> list[bytes]:
        """Hash tile ``number`` of ``level`` (which holds ``count`` hashes at the checkpoint's size)."""
        return self._hash_tile(level, number, min(TILE_WIDTH, count - (number << TILE_HEIGHT)))

    def _fetched(self, fetch: Callable[[int], _T], numbers: range) -> Iterator[_T]:
        """``fetch`` over ``numbers`` in order; over HTTP several at a time (the round trips overlap)."""
        if isinstance(self.files, LocalFiles) or len(numbers) < 2:
            yield from map(fetch, numbers)
            return
        with ThreadPoolExecutor(max_workers=FETCH_THREADS) as pool:
            yield from pool.map(fetch, numbers)

    def _load(self) -> list[bytes]:
        if self._entries is not None:
            return self._entries
        size = self._checkpoint.size
        entries: list[bytes] = []
        nodes = MemoryNodes()
        bundles = (size + TILE_WIDTH - 1) >> TILE_HEIGHT

        def add(number: int, bundle: list[bytes], leaves: list[bytes]) -> None:
            for offset, (data, stored) in enumerate(zip(bundle, leaves, strict=True)):
                if leaf_hash(data) != stored:
                    index = (number << TILE_HEIGHT) + offset
                    raise LedgerIntegrityError(f"entry {index}: its bytes do not hash to the leaf in its tile",
                                               index=index, file=hash_tile_path(0, number, len(leaves)),
                                               expected=b64encode(stored), found=b64encode(leaf_hash(data)))
                nodes.append(stored)
                entries.append(data)

        if bundles:
            # the checkpoint must be signed by the key entry 0 declares before more than the first bundle is
            # fetched: a stranger's unsigned size cannot make the reader fetch a log that is not there
            add(0, *self._level0(0))
            key = genesis_key(decode_entry(entries[0], index=0))
            verify_checkpoint(self._checkpoint.note, name=key.name, key=key.public_key,
                              origin=origin_of(ledger_id_of(entries[0])))
        for number, (bundle, leaves) in enumerate(self._fetched(self._level0, range(1, bundles)), start=1):
            add(number, bundle, leaves)
        for level, count in _levels(size):
            if level == 0:
                continue
            tiles = range((count + TILE_WIDTH - 1) >> TILE_HEIGHT)
            for number, hashes in enumerate(self._fetched(partial(self._upper_tile, level, count), tiles)):
                for offset, stored in enumerate(hashes):
                    index = (number << TILE_HEIGHT) + offset
                    if nodes.node(TILE_HEIGHT * level, index) != stored:
                        raise LedgerIntegrityError("a hash tile does not match the entries",
                                                   file=hash_tile_path(level, number, len(hashes)),
                                                   level=level, index=index)
        tree = HashTree(nodes)
        if size and tree.root_at(size) != self._checkpoint.root:
            raise LedgerIntegrityError("the tiles do not give the checkpoint's root", file=CHECKPOINT,
                                       expected=self._checkpoint.root_b64, found=b64encode(tree.root_at(size)))
        self._entries, self._nodes, self._tree = entries, nodes, tree
        return entries

    # checkpoints ------------------------------------------------------------------------------------------
    def _checkpoint_sizes(self) -> list[int]:
        sizes = self.manifest.get("checkpoints")
        if not isinstance(sizes, list) or not sizes or not all(
                isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
            raise LedgerIntegrityError("the tiles manifest lists no checkpoint sizes", file=MANIFEST,
                                       field="checkpoints")
        return sizes

    def _note(self, size: int) -> str:
        rel = f"{CHECKPOINTS}/{size}.note"
        data = self.files.read(rel, NOTE_LIMIT)
        if data is None:
            raise LedgerIntegrityError(f"the tiles directory lacks {rel}", file=rel)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise LedgerIntegrityError("a checkpoint note is not UTF-8", file=rel) from None

    def checkpoints(self) -> list[Checkpoint]:
        return [parse_checkpoint(self._note(size)) for size in self._checkpoint_sizes()]

    def latest_checkpoint(self) -> Checkpoint:
        return self._checkpoint

    # blobs, keys, seals -----------------------------------------------------------------------------------
    def blob(self, sha256_hex: str) -> bytes:
        return self.blobs.get(sha256_hex)

    def has_blob(self, sha256_hex: str) -> bool:
        return self.blobs.has(sha256_hex)

    def blob_file(self, sha256_hex: str) -> str:
        return self.blobs.path_of(sha256_hex)

    @property
    def ledger_key(self) -> TrustedKey:
        return genesis_key(decode_entry(self.entry_bytes(0), index=0))

    def public_keys(self) -> list[TrustedKey]:
        return [genesis_key(entry) for _, entry in self.entries() if entry.get("type") in ("genesis", "key")]

    def seal_bytes(self, name: str) -> bytes:
        if "/" in name or name.startswith(".") or not _PART.fullmatch(name):
            raise LedgerUsageError(f"no seal manifest {name!r} in the tiles directory", path=name)
        data = self.files.read(f"{SEALS}/{name}", DOCUMENT_LIMIT)
        if data is None:
            raise LedgerUsageError(f"no seal manifest {name!r} in the tiles directory", path=f"{SEALS}/{name}")
        return data

    def has_seal(self, name: str) -> bool:
        return _PART.fullmatch(name) is not None and self.files.exists(f"{SEALS}/{name}")

    def location(self, relative: str) -> str:
        """Where a file of the tiles is (its path, or its URL), for messages."""
        return self.files.where(relative)

    def seal_names(self) -> list[str]:
        """The files of ``seals/`` as the manifest lists them (a local folder's listing is checked against the
        list by :meth:`manifest_problems`; over HTTP there is no listing)."""
        names = self.manifest.get("seals")
        if not isinstance(names, list) or not all(isinstance(n, str) and _PART.fullmatch(n) for n in names):
            raise LedgerIntegrityError("the tiles manifest's seals are not a list of file names", file=MANIFEST,
                                       field="seals")
        return sorted(names)

    # tree and proofs ---------------------------------------------------------------------------------------
    def _hash_tree(self) -> HashTree:
        self._load()
        assert self._tree is not None
        return self._tree

    # verification -----------------------------------------------------------------------------------------
    def manifest_problems(self) -> Iterator[LedgerIntegrityError]:
        """Each way the manifest and the files disagree: canonical form; ``keys`` = the ids the ledger
        declares, each key file exactly that key; ``blobs`` + ``missing_blobs`` = the blobs the entries
        reference; in a local folder also no file the manifest does not name (checkpoints, keys, seals,
        blobs)."""
        m = self.manifest
        if self.manifest_bytes != canonical_bytes(m) + b"\n":
            yield LedgerIntegrityError(f"{MANIFEST} is not in canonical form (canonical JSON and one newline)",
                                       file=MANIFEST, field=MANIFEST)
        declared: dict[str, TrustedKey] = {}
        for key in self.public_keys():
            declared.setdefault(key.key_id, key)
        if m.get("keys") != sorted(declared):
            yield LedgerIntegrityError("the tiles manifest's keys are not the keys the ledger declares",
                                       file=MANIFEST, field="keys", expected=sorted(declared), found=m.get("keys"))
        for key_id, key in sorted(declared.items()):
            rel = f"{KEYS}/{key_id}.pub.json"
            if self.files.read(rel, KEY_FILE_LIMIT) != key_file_bytes(key):
                yield LedgerIntegrityError("a key file is missing or not the key its ledger entry declares",
                                           file=rel, field="keys", expected=key.public_key.b64)
        referenced: set[str] = set()
        for index, data in self.entries_bytes():
            referenced.update(blob_references(decode_entry(data, index=index)))
        listed, missing = m.get("blobs"), m.get("missing_blobs")
        if not isinstance(listed, list) or not isinstance(missing, list) or \
                sorted(set(listed) | set(missing)) != sorted(referenced) or set(listed) & set(missing):
            yield LedgerIntegrityError("the tiles manifest's blobs and missing_blobs are not the blobs the entries "
                                       "reference", file=MANIFEST, field="blobs")
        expected_files = {
            CHECKPOINTS: sorted(f"{s}.note" for s in m.get("checkpoints") or []),
            KEYS: sorted(f"{k}.pub.json" for k in declared),
            SEALS: sorted(str(s) for s in m.get("seals") or []),
        }
        for folder, names in expected_files.items():
            found = self.files.listing(folder)
            if found is not None and sorted(n for n in found if not n.startswith(".")) != names:
                yield LedgerIntegrityError(f"the files under {folder}/ are not the ones the tiles manifest names",
                                           file=f"{folder}/", field=folder)
        blob_root = self.files.listing(str(BLOBS))
        if blob_root is not None:
            present = sorted(name for prefix in blob_root for name in self.files.listing(f"{BLOBS}/{prefix}") or [])
            if isinstance(listed, list) and present != sorted(str(d) for d in listed):
                yield LedgerIntegrityError("the blob files are not the ones the tiles manifest lists",
                                           file=f"{BLOBS}/", field="blobs")

    def verify(self, *, expected_id: str | None = None, progress: ProgressFn | None = None,
               check_blobs: bool = True, check_manifest: bool = True, on_entry: EntryFn | None = None,
               jobs: int | None = None) -> ReplayReport:
        """Replay the entries the tiles give (checked against them on reading) with every checkpoint the
        manifest lists, check the ``checkpoint`` file is the latest of them, then the manifest as an
        export's (:meth:`manifest_problems` with ``check_manifest``, every listed blob with ``check_blobs``)."""
        entries = self._load()
        claims = [CheckpointClaim(size, self._note(size)) for size in self._checkpoint_sizes()]
        report = replay(((data, None) for data in entries), len(entries), claims, expected_id=expected_id,
                        progress=progress, on_entry=on_entry, jobs=jobs)
        latest = verify_checkpoint(self._checkpoint.note, name=report.key.name, key=report.key.public_key,
                                   origin=report.origin)
        if latest.size != report.size or latest.root != report.root:
            raise LedgerIntegrityError("the checkpoint file is not the latest checkpoint", file=CHECKPOINT,
                                       expected=report.size, found=latest.size)
        m = self.manifest
        check_replayed_claims(m, report, what="the tiles manifest", file=MANIFEST)
        if check_manifest:
            for problem in self.manifest_problems():
                raise problem
        if check_blobs:
            for digest in m.get("blobs") or []:
                try:
                    self.blobs.verify(str(digest))
                except BlobMissing:
                    raise LedgerIntegrityError(f"listed blob {digest} is missing", file=self.blobs.path_of(
                        str(digest)), found=digest) from None
        return report


def open_tiles(source: str | Path) -> TilesLog:
    """Open a tiles directory or the http(s) URL of one for reading."""
    return TilesLog(source)
