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
same layout over HTTP(S) (a timeout per socket operation and an overall deadline per request, sizes bounded)
and presents the interface of :class:`ledger.export.LedgerExport`. What it returns is checked: every entry
against the leaf hash in its level-0 tile, every hash tile against the tree the entries give, that tree's root
against the ``checkpoint`` signed by the key entry 0 declares; :meth:`TilesLog.verify` then replays every
checkpoint as an export's. The manifest's lists are checked item by item before any item is used (checkpoint
sizes strictly increasing up to the size, so never more notes fetched than the log has entries; digests and
names of the form they must have; never a boolean where an integer belongs), and in a local folder every name
under the folders the tiles own (``checkpoints/``, ``keys/``, ``blobs/``) must be one the manifest names.
"""

from __future__ import annotations

import fcntl
import hashlib
import http.client
import io
import math
import os
import re
import shutil
import socket
import stat
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from keys import MalformedInput, TrustedKey, b64encode, verifier_key_string
from keys.files import write_synced
from keys.names import SHA256_HEX
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
from keys.signer import check_key_id
from ledger.blobs import BlobStore, check_sha256_hex
from ledger.checkpoint import Checkpoint, parse_checkpoint, verify_checkpoint
from ledger.entries import blob_references, decode_entry, genesis_key, is_ledger_id, ledger_id_of, origin_of
from ledger.errors import BlobMissing, LedgerIntegrityError, LedgerUsageError, SourceUnavailable
from ledger.export import (
    BLOBS,
    CHECKPOINTS,
    KEYS,
    MANIFEST_MEMBERS,
    MIN_ENTRY_LINE,
    SEALS,
    key_file_bytes,
    logged_seal_bytes,
    store_seal_bytes,
)
from ledger.ledger import Ledger
from ledger.published import EntryList, check_replayed_claims
from ledger.replay import CheckpointClaim, EntryFn, ProgressFn, ReplayReport, replay
from ledger.rfc6962 import HASH_SIZE, leaf_hash, node_hash
from ledger.tree import HashTree, MemoryNodes, frontier_root
from seals import canonical_bytes, parse_json_object

TILES_FORMAT = "heldout-ledger-tiles"
TILES_VERSION = 1
#: heldout-tiles.json's members (FORMATS section 16): export.json's but ``entries``.
TILES_MANIFEST_MEMBERS = MANIFEST_MEMBERS - {"entries"}
MANIFEST = "heldout-tiles.json"
CHECKPOINT = "checkpoint"
LOCK = ".heldout-tiles.lock"
TILE_HEIGHT = 8
TILE_WIDTH = 1 << TILE_HEIGHT
MAX_BUNDLE_ENTRY = 0xFFFF  # the uint16 length prefix of an entry bundle

TILE_LIMIT = TILE_WIDTH * HASH_SIZE
BUNDLE_LIMIT = TILE_WIDTH * (2 + MAX_BUNDLE_ENTRY)
MANIFEST_LIMIT = ENTRIES_FILE_LIMIT  # it lists every checkpoint size and blob: it grows with the log
FETCH_TIMEOUT_S = 30.0  # the most one socket operation (connect, one receive) may wait
FETCH_DEADLINE_S = 120.0  # the most one request may take in all (redirects, headers, body): a dripping server
FETCH_THREADS = 8  # concurrent requests to a tiles server
#: The most a command may spend reading one HTTP source in all (from its first request): each request is bounded
#: by FETCH_DEADLINE_S, but a slow server answering every one of hundreds of requests just in time held a
#: verifier for hours. ``$HELDOUT_FETCH_BUDGET_S`` sets another (seconds).
FETCH_BUDGET_S = 3600.0
FETCH_BUDGET_ENV = "HELDOUT_FETCH_BUDGET_S"

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

    def _holds(self, rel: str, data: bytes) -> bool | None:
        """Whether the file at ``rel`` holds ``data`` (None: there is no file). A file of another size is not
        read (whatever the folder holds, it is never read whole)."""
        path = self.root / rel
        try:
            info = path.lstat()
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(info.st_mode):
            raise LedgerIntegrityError("the tiles directory holds something other than a file here", file=rel)
        return info.st_size == len(data) and LocalFiles(self.root).read(rel, len(data)) == data

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
        found = self._holds(rel, data)
        if found is None:
            self._write(rel, data, replace=False)
        elif found:
            self.result.unchanged += 1
        else:
            raise LedgerIntegrityError("a full tile or content-addressed file in the tiles directory differs from "
                                       "what the ledger gives (it is never rewritten; write to a new folder)",
                                       file=rel)

    def replaceable(self, rel: str, data: bytes) -> None:
        if self._holds(rel, data):
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
    files = LocalFiles(out)  # (bounded, regular files only: the folder may hold anything)
    held = files.read(MANIFEST, MANIFEST_LIMIT) if MANIFEST in names else None
    manifest = _json_object(held, MANIFEST) if held is not None else {}
    if manifest.get("ledger_id") != ledger.ledger_id:
        raise LedgerUsageError(f"{out} publishes another ledger", path=str(out), expected=ledger.ledger_id,
                               found=manifest.get("ledger_id"))
    published = verify_checkpoint(files.read(CHECKPOINT, NOTE_LIMIT) or b"", name=ledger.key.name,
                                  key=ledger.key.public_key, origin=ledger.origin)
    signed = ledger.checkpoint_at(published.size) if published.size <= ledger.size else None
    # The ledger's own signed checkpoint of that size, not only the stored tree: a database edited under the
    # same key (an entry rewritten and its checkpoint re-signed, the stored hashes left) keeps the old root in
    # its nodes while it signs another; republishing over the published one would fork the folder.
    if published.size > ledger.size or ledger.root(published.size) != published.root \
            or (signed is not None and signed.root != published.root):
        raise LedgerIntegrityError(f"{out} publishes a history this ledger does not extend (size "
                                   f"{published.size}); write to a new folder", path=str(out),
                                   checkpoint=published.size)
    # a run that stopped between its manifest and its checkpoint left a manifest of a later state of this
    # same (append-only) ledger: what it lists as written was written before it, so it is kept as a start
    return published.size, manifest


def write_tiles(ledger: Ledger, out: Path, *, blobs: BlobStore | None = None,
                seals: Path | None = None, seal_files: Mapping[str, str] | None = None) -> TilesResult:
    """Write (or extend) the tlog-tiles layout of ``ledger`` in ``out`` up to its latest checkpoint (see the
    module docstring). The checkpoint is written last: until the manifest is replaced readers see the previous
    state, then "being updated" (exit 2) until the checkpoint is. One run at a time per folder (an exclusive
    lock on ``OUT/.heldout-tiles.lock``; a second run is refused)."""
    out = Path(out)
    _previous(ledger, out)  # refuse a foreign folder before creating anything in it
    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out / LOCK, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LedgerUsageError(f"another 'ledger tiles' run is writing {out}", path=str(out)) from None
        _remove_temp_files(out)
        return _write_tiles(ledger, out, blobs=blobs, seals=seals, seal_files=seal_files)
    finally:
        os.close(fd)  # releases the lock


_TEMP_NAME = re.compile(r"\..+\.tmp[0-9]+")


def _remove_temp_files(out: Path) -> None:
    """The temporary files (``.NAME.tmpPID``) of runs killed before they linked them into place: under the
    folder's lock no other run writes, so every one is a leftover, which readers would rightly report as a
    file the manifest does not list."""
    for folder, _, names in os.walk(out):
        for name in names:
            if _TEMP_NAME.fullmatch(name):
                (Path(folder) / name).unlink(missing_ok=True)


def _write_tiles(ledger: Ledger, out: Path, *, blobs: BlobStore | None, seals: Path | None,
                 seal_files: Mapping[str, str] | None) -> TilesResult:
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
    missing = _strings(previous.get("missing_blobs"))
    present = _strings(previous.get("blobs"))
    known = set(present)
    # What an earlier run published is not taken on its word: a listed blob gone from OUT is written again from
    # the store, or the run refuses, rather than calling OUT "unchanged" while every verifier refuses it.
    for digest in present:
        check_sha256_hex(digest)
        rel = f"{BLOBS}/{digest[:2]}/{digest}"
        if not os.path.lexists(out / rel):
            if blobs is None or not blobs.has(digest):
                raise LedgerIntegrityError(f"{rel}, which an earlier run published, is gone from the tiles "
                                           "directory and the store does not hold it; write to a new folder",
                                           file=rel)
            writer.immutable(rel, blobs.get(digest))
    for key_id in _strings(previous.get("keys")):
        rel = f"{KEYS}/{check_key_id(key_id)}.pub.json"
        if not any(key.key_id == key_id for key in declared) and not os.path.lexists(out / rel):
            raise LedgerIntegrityError(f"{rel}, which an earlier run published, is gone from the tiles directory; "
                                       "write to a new folder", file=rel)
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
    # Key files, seal files and checkpoint notes are named by the manifest: a reader refuses one the manifest
    # does not name. They are written after the new manifest, while the checkpoint still says the old size (a
    # reader sees "being updated", exit 2), never before it (a run killed there made every reader call the
    # folder tampered with, exit 1, until the next run).
    named: list[tuple[str, bytes, bool]] = []  # (path, bytes, immutable)
    key_ids = set(_strings(previous.get("keys")))
    for key in declared:
        named.append((f"{KEYS}/{key.key_id}.pub.json", key_file_bytes(key), True))
        key_ids.add(key.key_id)
    if seal_files is not None:  # the logged bytes only, as an export publishes them
        for name, data in logged_seal_bytes(seal_files, seals=seals, blobs=blobs):
            named.append((f"{SEALS}/{name}", data, False))
    elif seals is not None and seals.is_dir():
        for path in sorted(seals.iterdir()):
            if path.is_file() and not path.is_symlink() and not path.name.startswith("."):
                held = store_seal_bytes(seals, path.name)
                if held is not None:
                    named.append((f"{SEALS}/{path.name}", held, False))
    seal_folder = out / SEALS
    present_seals = [p.name for p in seal_folder.iterdir() if not p.name.startswith(".")] \
        if seal_folder.is_dir() else []
    seal_names = sorted({*present_seals, *(rel.removeprefix(f"{SEALS}/") for rel, _, _ in named
                                           if rel.startswith(f"{SEALS}/"))})
    for checkpoint in checkpoints:
        rel = f"{CHECKPOINTS}/{checkpoint.size}.note"
        note = checkpoint.note_bytes
        if checkpoint.size <= old:
            # a published note only ever gains cosignature lines, so an unchanged length is the same note
            existing = out / rel
            if existing.is_file() and not existing.is_symlink() and existing.stat().st_size == len(note):
                continue
        named.append((rel, note, False))
    manifest = {
        "format": TILES_FORMAT, "version": TILES_VERSION, "ledger_id": ledger.ledger_id, "origin": ledger.origin,
        "size": new, "root": latest.root_b64,
        "note_verifier_key": verifier_key_string(ledger.key.name, ledger.key.public_key),
        "checkpoints": [c.size for c in checkpoints], "blobs": sorted(present), "missing_blobs": missing,
        "keys": sorted(key_ids), "seals": seal_names,
    }
    writer.replaceable(MANIFEST, canonical_bytes(manifest) + b"\n")
    writer.sync()
    for rel, data, immutable in named:
        (writer.immutable if immutable else writer.replaceable)(rel, data)
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


def _strings(value: object) -> list[str]:
    """The strings of a list an earlier run's manifest holds (nothing from anything else)."""
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _read_back_root(out: Path, level: int, number: int) -> bytes:
    rel = hash_tile_path(level, number)
    path = out / rel
    if path.is_symlink() or not path.is_file():
        raise LedgerIntegrityError("the tiles directory lacks a full tile an earlier run wrote; write to a new "
                                   "folder", file=rel)
    data = LocalFiles(out).read(rel, TILE_LIMIT) or b""
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
_PREFIX = re.compile(r"[0-9a-f]{2}")


def _is_int(value: object) -> bool:
    """An integer, and not a boolean (``True == 1`` in Python; JSON's ``true`` is no size)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: object) -> str:
    """A name or value from the files, for a message: printable, at most 120 characters."""
    text = value if isinstance(value, str) else repr(value)
    return text[:120] if text.isprintable() else ascii(text)[:120]


def _increasing_sizes(value: object, size: int) -> list[int]:
    """``value`` as checkpoint sizes of a log of ``size`` entries: a list of integers, strictly increasing from
    1, ending at ``size`` (so at most ``size`` of them), checked in one pass before anything is fetched."""
    if not isinstance(value, list) or not value:
        raise LedgerIntegrityError("the tiles manifest lists no checkpoint sizes", file=MANIFEST,
                                   field="checkpoints")
    if len(value) > size:
        raise LedgerIntegrityError(f"the tiles manifest lists {len(value)} checkpoint sizes for a log of {size} "
                                   "entries", file=MANIFEST, field="checkpoints", expected=size, found=len(value))
    previous = 0
    for position, item in enumerate(value):
        if not _is_int(item) or not previous < item <= size:
            raise LedgerIntegrityError(f"the tiles manifest's checkpoint sizes are not strictly increasing "
                                       f"integers from 1 to the log's size {size}", file=MANIFEST,
                                       field="checkpoints", index=position, found=_shown(item))
        previous = item
    if previous != size:
        raise LedgerIntegrityError("the tiles manifest's last checkpoint size is not the log's size",
                                   file=MANIFEST, field="checkpoints", expected=size, found=previous)
    return value


def _names_problem(value: object, pattern: re.Pattern[str], most: int | None) -> str | None:
    """Why ``value`` is not a list of distinct strings matching ``pattern`` in sorted order (at most ``most``),
    or ``None``: every item is checked before any is used (hashed, joined into a path, fetched)."""
    if not isinstance(value, list):
        return f"it is a JSON {_JSON_TYPES.get(type(value), type(value).__name__)}"
    if most is not None and len(value) > most:
        return f"it has {len(value)} items, more than the log's {most} entries can name"
    for position, item in enumerate(value):
        if not isinstance(item, str) or not pattern.fullmatch(item):
            return f"item {position} is {_shown(item)}"
        if position and item <= value[position - 1]:
            return f"item {position} repeats or is out of order"
    return None


_JSON_TYPES = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean",
               type(None): "null"}


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


class FetchDeadline(TimeoutError):
    """A server answered too slowly: the request was not complete within its overall deadline."""


@dataclass(frozen=True)
class _Deadline:
    at: float  # time.monotonic()
    seconds: float

    @classmethod
    def start(cls, seconds: float) -> _Deadline:
        return cls(time.monotonic() + seconds, seconds)

    def left(self) -> float:
        """Seconds left; :class:`FetchDeadline` once none are."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise FetchDeadline(f"no complete answer within {self.seconds:g} s (the server is too slow)")
        return left


_DEADLINE = "heldout_deadline"  # the attribute of a urllib Request that carries its deadline (and redirects')


def _deadline_of(request: urllib.request.Request) -> _Deadline:
    deadline = getattr(request, _DEADLINE, None)
    return deadline if isinstance(deadline, _Deadline) else _Deadline.start(FETCH_DEADLINE_S)


class _DeadlineIO(io.RawIOBase):
    """The reading side of a connection's socket: each receive waits at most the per-operation timeout and
    never past the request's deadline, so neither headers nor a body sent a byte at a time can hold a
    reader longer than the deadline."""

    def __init__(self, sock: socket.socket, deadline: _Deadline) -> None:
        super().__init__()
        self._sock = sock
        self._raw = sock.makefile("rb", buffering=0)  # counts as a reference, as http.client's own reader does
        self._per_operation = sock.gettimeout()
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self._deadline.left()
        self._sock.settimeout(left if self._per_operation is None else min(left, self._per_operation))
        try:
            return self._raw.readinto(buffer)
        except TimeoutError:
            self._deadline.left()  # past the deadline: say that rather than a bare "timed out"
            raise

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


class _DeadlineResponse(http.client.HTTPResponse):
    deadline: _Deadline

    def __init__(self, sock: socket.socket, *args: Any, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        self.fp.close()
        self.fp = io.BufferedReader(_DeadlineIO(sock, self.deadline))


def _response_class(deadline: _Deadline) -> type[http.client.HTTPResponse]:
    return type("DeadlineResponse", (_DeadlineResponse,), {"deadline": deadline})


def deadline_response_class(seconds: float) -> type[http.client.HTTPResponse]:
    """An ``http.client`` response class whose reading (status line, headers, body: however slowly a peer
    sends them) ends within ``seconds`` of this call, with :class:`FetchDeadline`: set on a connection before
    each request whose answer must not hold its reader longer (a witness's, say)."""
    return _response_class(_Deadline.start(seconds))


class _DeadlineHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, *, deadline: _Deadline, timeout: Any = FETCH_TIMEOUT_S, **kwargs: Any) -> None:
        per_operation = timeout if isinstance(timeout, (int, float)) else FETCH_TIMEOUT_S
        super().__init__(host, timeout=min(per_operation, deadline.left()), **kwargs)
        self.response_class = _response_class(deadline)


class _DeadlineHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, *, deadline: _Deadline, timeout: Any = FETCH_TIMEOUT_S, **kwargs: Any) -> None:
        per_operation = timeout if isinstance(timeout, (int, float)) else FETCH_TIMEOUT_S
        super().__init__(host, timeout=min(per_operation, deadline.left()), **kwargs)
        self.response_class = _response_class(deadline)


class _DeadlineHTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(partial(_DeadlineHTTPConnection, deadline=_deadline_of(req)), req)


class _DeadlineHTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(partial(_DeadlineHTTPSConnection, deadline=_deadline_of(req)), req,
                            context=getattr(self, "_context", None))


class _NoSchemeChange(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> urllib.request.Request | None:
        if not is_url(newurl):
            raise LedgerUsageError("a tiles server redirected outside http(s)", found=newurl[:120])
        if req.full_url.lower().startswith("https:") and not newurl.lower().startswith("https:"):
            # what is fetched is verified anyway, but an auditor who asked for https is not moved to plain http
            raise LedgerUsageError("a tiles server redirected from https to plain http", found=newurl[:120])
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None:
            setattr(new, _DEADLINE, _deadline_of(req))  # a redirect runs on the first request's deadline
        return new


def _reason(exc: BaseException) -> str:
    """Why a fetch failed, in one printable line (a server's status line is shown escaped, never raw)."""
    reason: object = exc
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        reason = exc.reason
    text = str(reason)[:200]
    if not text.isprintable():
        text = ascii(text)
    if isinstance(reason, FetchDeadline) or not isinstance(reason, BaseException):
        return text
    return f"{type(reason).__name__}: {text}" if text else type(reason).__name__


def http_opener() -> urllib.request.OpenerDirector:
    """A urllib opener whose requests each finish within their deadline (see :func:`http_get`) and follow
    redirects only to http(s)."""
    return urllib.request.build_opener(_NoSchemeChange, _DeadlineHTTPHandler, _DeadlineHTTPSHandler)


def http_get(url: str, limit: int, *, method: str = "GET", timeout: float = FETCH_TIMEOUT_S,
             deadline: float | None = None, opener: urllib.request.OpenerDirector | None = None,
             over_limit: type[LedgerIntegrityError] | type[LedgerUsageError] = LedgerIntegrityError,
             shown: str | None = None) -> bytes | None:
    """GET (or HEAD) ``url``: its body, ``b""`` for HEAD, ``None`` on 404 or 410. Each socket operation waits at
    most ``timeout`` s and the whole request (connecting, redirects, headers, body) at most ``deadline`` s
    (default :data:`FETCH_DEADLINE_S`). Any failure to fetch (unreachable, an HTTP error, a malformed answer,
    the deadline, a body shorter than its ``Content-Length``) is a :class:`LedgerUsageError` naming the URL;
    a body (declared or read) over ``limit`` bytes is ``over_limit`` naming ``shown`` (default the URL)."""
    where = url if url.isprintable() else ascii(url)  # for messages
    shown = where if shown is None else shown
    if not is_url(url):
        raise LedgerUsageError(f"cannot fetch {where}: not an http(s) URL", path=where)
    try:
        request = urllib.request.Request(url, method=method, headers={"Accept-Encoding": "identity"})
        setattr(request, _DEADLINE, _Deadline.start(FETCH_DEADLINE_S if deadline is None else deadline))
        response = (opener or http_opener()).open(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code in (404, 410):
            return None
        raise SourceUnavailable(f"cannot fetch {where}: HTTP {exc.code}", path=where) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
        raise SourceUnavailable(f"cannot fetch {where}: {_reason(exc)}", path=where) from None
    with response:
        if response.status != 200:  # 204, 206 (a range), ...: not the published file's bytes, whole
            raise SourceUnavailable(f"cannot fetch {where}: HTTP {response.status} (a published file is served "
                                    "whole, with 200)", path=where, found=response.status)
        coding = ",".join(response.headers.get_all("Content-Encoding") or ["identity"]).strip().lower()
        if coding != "identity":  # asked for identity: bytes in a coding are not the published file's bytes
            raise SourceUnavailable(f"cannot fetch {where}: the server sent it with Content-Encoding {coding[:40]!r}; "
                                    "a published file is read as published (serve it without a content coding)",
                                    path=where, found=coding[:40])
        # http.client undoes "chunked" alone and reads any other transfer coding ("gzip, chunked") as the body:
        # coded bytes judged as the file would be reported as tampering, when the server is what is wrong
        transfer = ",".join(response.headers.get_all("Transfer-Encoding") or []).strip().lower()
        if transfer not in ("", "chunked"):
            raise SourceUnavailable(f"cannot fetch {where}: the server sent it with Transfer-Encoding "
                                    f"{transfer[:40]!r}, which this client does not decode (only chunked)",
                                    path=where, found=transfer[:40])
        if method == "HEAD":
            return b""
        expected = response.length  # what Content-Length promises (None: chunked, or not said)
        if expected is not None and expected > limit:
            raise over_limit(f"{shown} is {expected} bytes, over the {limit}-byte limit", file=shown,
                             expected=limit, found=expected)
        try:
            data = _read_bounded(response, limit)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise SourceUnavailable(f"cannot fetch {where}: {_reason(exc)}", path=where) from None
    if data is None:  # nothing of it is kept: an exception's frames would hold a buffer of the whole limit
        raise over_limit(f"{shown} is over the {limit}-byte limit", file=shown, expected=limit)
    if expected is not None and len(data) < expected:
        raise SourceUnavailable(f"cannot fetch {where}: the body ended after {len(data)} of the {expected} bytes "
                               "its Content-Length promises (connection cut?)", path=where, expected=expected,
                               found=len(data))
    return data


_READ_CHUNK = 1 << 20


def _read_bounded(response: Any, limit: int) -> bytes | None:
    """The body, read a chunk at a time into one buffer of at most ``limit`` + 1 bytes; ``None`` (the buffer
    dropped) once it holds more than ``limit``. One ``read(limit + 1)`` of a chunked body held the chunks and
    their join, twice the limit, for every over-limit answer."""
    buffer = bytearray()
    while len(buffer) <= limit:
        chunk = response.read(min(_READ_CHUNK, limit + 1 - len(buffer)))
        if not chunk:
            return bytes(buffer)
        buffer += chunk
    return None


def fetch_budget() -> float:
    """:data:`FETCH_BUDGET_S`, or ``$HELDOUT_FETCH_BUDGET_S`` (a positive number of seconds)."""
    text = os.environ.get(FETCH_BUDGET_ENV, "").strip()
    if not text:
        return FETCH_BUDGET_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise LedgerUsageError(f"${FETCH_BUDGET_ENV} is not a positive number of seconds", found=text[:40])
    return value


class HttpFiles:
    """The same layout served over HTTP(S) (:func:`http_get`): a timeout per socket operation and a deadline
    per request (injectable: ``timeout``, ``deadline``), sizes bounded (the declared length first), 404/410
    as absent, redirects only to http(s)."""

    def __init__(self, base: str, *, timeout: float = FETCH_TIMEOUT_S, deadline: float | None = None,
                 budget: float | None = None) -> None:
        self.base = base.rstrip("/")
        self.timeout = timeout
        self.deadline = deadline  # None: FETCH_DEADLINE_S at each request
        self.budget = fetch_budget() if budget is None else budget
        self._started: float | None = None  # time.monotonic() of the first request
        self.opener = http_opener()
        # What a GET found where HEAD said "absent", kept for the read that follows (one file), and the paths
        # HEAD said are present: a GET that then finds nothing is the server contradicting itself.
        self._confirmed: tuple[str, bytes] | None = None
        self._present: set[str] = set()

    def where(self, rel: str) -> str:
        return f"{self.base}/{rel}"

    def _get(self, rel: str, limit: int, method: str) -> bytes | None:
        url = f"{self.base}/{'/'.join(_parts(rel))}"
        now = time.monotonic()
        if self._started is None:
            self._started = now
        left = self._started + self.budget - now
        if left <= 0:
            raise self._spent(url)
        per_request = FETCH_DEADLINE_S if self.deadline is None else self.deadline
        try:
            return http_get(url, limit, method=method, timeout=self.timeout, deadline=min(per_request, left),
                            opener=self.opener, shown=rel)
        except SourceUnavailable:
            if left < per_request and time.monotonic() >= self._started + self.budget:
                raise self._spent(url) from None  # cut by the budget, not by its own deadline
            raise

    def _spent(self, url: str) -> SourceUnavailable:
        return SourceUnavailable(f"cannot fetch {url}: reading {self.base} has taken more than {self.budget:g} s "
                                 f"in all (the server is too slow; ${FETCH_BUDGET_ENV} allows more)", path=url,
                                 expected=self.budget)

    def read(self, rel: str, limit: int) -> bytes | None:
        confirmed = self._confirmed  # (one read of the slot: reads run on several threads)
        if confirmed is not None and confirmed[0] == rel and len(confirmed[1]) <= limit:
            self._confirmed = None
            return confirmed[1]
        data = self._get(rel, limit, "GET")
        if data is None and rel in self._present:
            raise SourceUnavailable(f"cannot fetch {self.where(rel)}: the server answered HEAD with the file and GET "
                                    "with 404 (its answers disagree: nothing can be judged from it)",
                                    path=self.where(rel))
        return data

    def exists(self, rel: str) -> bool:
        """HEAD, and where it says "absent" a GET too: the GET's answer is the one every read gets, so a server
        whose HEAD answers differ from its GETs (a GET-only object store answers HEAD with 404) is judged by
        what it serves, never "missing" on one verifier's HEAD and present on another's GET."""
        if self._get(rel, 0, "HEAD") is not None:
            self._present.add(rel)
            return True
        data = self._get(rel, BLOB_LIMIT, "GET")
        if data is None:
            return False
        self._confirmed = (rel, data)
        self._present.add(rel)
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
        version = self.manifest.get("version")
        if self.manifest.get("format") != TILES_FORMAT or not _is_int(version) or version != TILES_VERSION:
            raise LedgerIntegrityError("unknown tiles format", file=MANIFEST,
                                       expected=f"{TILES_FORMAT} v{TILES_VERSION}",
                                       found=f"{_shown(self.manifest.get('format'))} v{_shown(version)}")
        claimed = self.manifest.get("ledger_id")
        if not isinstance(claimed, str) or not is_ledger_id(claimed):
            raise LedgerIntegrityError("the tiles manifest has no valid ledger id", file=MANIFEST)
        self.ledger_id: str = claimed
        self.origin: str = str(self.manifest.get("origin"))
        note = self.files.read(CHECKPOINT, NOTE_LIMIT)
        if note is None:
            raise LedgerUsageError(f"{self.source} has no {CHECKPOINT}", path=self.source)
        self._checkpoint = parse_checkpoint(note)
        size = self.manifest.get("size")
        if isinstance(size, int) and not isinstance(size, bool) and size > self._checkpoint.size:
            # What a run of `ledger tiles` leaves between its two last writes (the manifest, then the
            # checkpoint), killed there or not yet done: no verdict on the log, a read to make again (exit 2)
            raise SourceUnavailable(f"{self.source} is being updated (its manifest is at size {size}, its "
                                    f"checkpoint at {self._checkpoint.size}): try again", path=self.source,
                                    expected=self._checkpoint.size, found=size)
        if not _is_int(size) or size != self._checkpoint.size:
            raise LedgerIntegrityError("the tiles manifest and checkpoint disagree on the size", file=MANIFEST,
                                       expected=self._checkpoint.size, found=_shown(size))
        self.blobs = TileBlobs(self.files)
        self._sizes: list[int] | None = None
        self._notes: dict[int, str] = {}
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
        # a window of requests in flight (never one per tile up front: the size may be huge), and on a
        # failure the ones not started are cancelled (each started one ends within its deadline)
        pool = ThreadPoolExecutor(max_workers=FETCH_THREADS)
        pending: deque[Future[_T]] = deque()
        try:
            for number in numbers:
                pending.append(pool.submit(fetch, number))
                if len(pending) >= 2 * FETCH_THREADS:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()
            pool.shutdown(wait=True)

    def _load(self) -> list[bytes]:
        if self._entries is not None:
            return self._entries
        size = self._checkpoint.size
        entries: list[bytes] = []
        nodes = MemoryNodes()
        bundles = (size + TILE_WIDTH - 1) >> TILE_HEIGHT

        held = 0

        def add(number: int, bundle: list[bytes], leaves: list[bytes]) -> None:
            nonlocal held
            # The entries together are bounded as an export's entries.jsonl is (its lines are these bytes and a
            # LF each): one log, one verdict in either form, and a stranger's signed size cannot make the reader
            # hold more than that bound.
            # (each counted as at least the shortest line an export takes: a log of empty entries is refused as
            # soon as its export would be, not after a quarter of a billion of them were fetched and hashed)
            held += sum(max(len(data) + 1, MIN_ENTRY_LINE) for data in bundle)
            if held > ENTRIES_FILE_LIMIT:
                raise LedgerIntegrityError(f"the log's entries are over the {ENTRIES_FILE_LIMIT}-byte limit of a "
                                           "public log (an export's entries.jsonl has the same)",
                                           file=bundle_path(number, len(leaves)), expected=ENTRIES_FILE_LIMIT,
                                           found=held)
            for offset, (data, stored) in enumerate(zip(bundle, leaves, strict=True)):
                if leaf_hash(data) != stored:
                    index = (number << TILE_HEIGHT) + offset
                    bundle_file = bundle_path(number, len(leaves))
                    tile_file = hash_tile_path(0, number, len(leaves))
                    # one of the two is damaged; the entry bundle is named, as the bytes whose hash is the entry
                    # (a damaged leaf tile alone differs from the tree above too, and both files are in the message)
                    raise LedgerIntegrityError(f"entry {index}: its bytes in {bundle_file} do not hash to its leaf "
                                               f"in {tile_file}", index=index, file=bundle_file,
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
        """The manifest's checkpoint sizes, checked before any note is fetched: integers (never booleans),
        strictly increasing from 1, the last one the log's size, so there are never more of them than the log
        has entries."""
        if self._sizes is None:
            self._sizes = _increasing_sizes(self.manifest.get("checkpoints"), self._checkpoint.size)
        return self._sizes

    def _note(self, size: int) -> str:
        """The note of checkpoint ``size``, fetched once: later uses (the witness policy, the head a report or
        a site shows) get the text the replay verified, not a second answer of the server."""
        found = self._notes.get(size)
        if found is not None:
            return found
        rel = f"{CHECKPOINTS}/{size}.note"
        data = self.files.read(rel, NOTE_LIMIT)
        if data is None:
            raise LedgerIntegrityError(f"the tiles directory lacks {rel}", file=rel)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise LedgerIntegrityError("a checkpoint note is not UTF-8", file=rel) from None
        self._notes[size] = text
        return text

    def checkpoints(self) -> list[Checkpoint]:
        self._load()  # the size that bounds the list is then the one the ledger's key signed
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
            if name in self.seal_names():  # listed by the manifest and gone: the publication is incomplete
                raise LedgerIntegrityError(f"the tiles manifest lists seals/{name}, which is missing",
                                           file=f"{SEALS}/{name}", field="seals")
            raise LedgerUsageError(f"no seal manifest {name!r} in the tiles directory", path=f"{SEALS}/{name}")
        return data

    def has_seal(self, name: str) -> bool:
        return _PART.fullmatch(name) is not None and self.files.exists(f"{SEALS}/{name}")

    def location(self, relative: str) -> str:
        """Where a file of the tiles is (its path, or its URL), for messages."""
        return self.files.where(relative)

    def _digests(self, member: str) -> list[str]:
        """The manifest's ``blobs`` or ``missing_blobs``, each item checked before any is used."""
        value = self.manifest.get(member)
        problem = _names_problem(value, SHA256_HEX, None)
        if problem is not None:
            raise LedgerIntegrityError(f"the tiles manifest's {member} is not a sorted list of distinct SHA-256 "
                                       f"digests in lowercase hex: {problem}", file=MANIFEST, field=member)
        assert isinstance(value, list)
        return value

    def seal_names(self) -> list[str]:
        """The files of ``seals/`` as the manifest lists them (a local folder's listing is checked against the
        list by :meth:`manifest_problems`; over HTTP there is no listing)."""
        names = self.manifest.get("seals")
        problem = _names_problem(names, _PART, self._checkpoint.size)
        if problem is not None:
            raise LedgerIntegrityError(f"the tiles manifest's seals is not a sorted list of distinct file names: "
                                       f"{problem}", file=MANIFEST, field="seals")
        assert isinstance(names, list)
        return names

    # tree and proofs ---------------------------------------------------------------------------------------
    def _hash_tree(self) -> HashTree:
        self._load()
        assert self._tree is not None
        return self._tree

    # verification -----------------------------------------------------------------------------------------
    def manifest_problems(self) -> Iterator[LedgerIntegrityError]:
        """Each way the manifest and the files disagree: canonical form; ``keys`` = the ids the ledger
        declares, each key file exactly that key; ``blobs`` + ``missing_blobs`` = the blobs the entries
        reference (each a SHA-256 in hex, sorted, once); in a local folder also no file the manifest does not
        name in the folders the tiles own (``checkpoints/``, ``keys/``, ``blobs/``: hidden files included, as an
        export's reader refuses them; ``seals/``: hidden files aside, as an export's), each one reported with
        its path; a killed run's temporary files (``.NAME.tmpPID``, never read) aside: the folder is written in
        place, and a crash is not tampering. Files beside these folders and tiles beyond the size are the C2SP
        layout's business, not reported."""
        m = self.manifest
        if self.manifest_bytes != canonical_bytes(m) + b"\n":
            yield LedgerIntegrityError(f"{MANIFEST} is not in canonical form (canonical JSON and one newline)",
                                       file=MANIFEST, field=MANIFEST)
        if set(m) != TILES_MANIFEST_MEMBERS:
            yield LedgerIntegrityError(f"{MANIFEST}'s members are not exactly those of FORMATS section 16 "
                                       "(export.json's but entries)", file=MANIFEST, field=MANIFEST,
                                       expected=sorted(TILES_MANIFEST_MEMBERS),
                                       found=[str(k)[:60] for k in sorted(m)][:40])
        declared: dict[str, TrustedKey] = {}
        for key in self.public_keys():
            declared.setdefault(key.key_id, key)
        if m.get("keys") != sorted(declared):
            yield LedgerIntegrityError("the tiles manifest's keys are not the keys the ledger declares",
                                       file=MANIFEST, field="keys", expected=sorted(declared),
                                       found=_shown(m.get("keys")))
        for key_id, key in sorted(declared.items()):
            rel = f"{KEYS}/{key_id}.pub.json"
            if self.files.read(rel, KEY_FILE_LIMIT) != key_file_bytes(key):
                yield LedgerIntegrityError("a key file is missing or not the key its ledger entry declares",
                                           file=rel, field="keys", expected=key.public_key.b64)
        referenced: set[str] = set()
        for index, data in self.entries_bytes():
            referenced.update(blob_references(decode_entry(data, index=index)))
        lists: dict[str, list[str]] = {}
        for member in ("blobs", "missing_blobs"):
            try:
                lists[member] = self._digests(member)
            except LedgerIntegrityError as exc:
                yield exc
        listed, missing = lists.get("blobs"), lists.get("missing_blobs")
        if listed is not None and missing is not None and (
                sorted({*listed, *missing}) != sorted(referenced) or set(listed) & set(missing)):
            yield LedgerIntegrityError("the tiles manifest's blobs and missing_blobs are not the blobs the entries "
                                       "reference", file=MANIFEST, field="blobs")
        try:
            sizes = self._checkpoint_sizes()
        except LedgerIntegrityError as exc:
            yield exc
            sizes = None
        try:
            seals: list[str] | None = self.seal_names()
        except LedgerIntegrityError as exc:
            yield exc
            seals = None
        folders: list[tuple[str, list[str] | None, bool]] = [
            (CHECKPOINTS, None if sizes is None else [f"{s}.note" for s in sizes], False),
            (KEYS, [f"{k}.pub.json" for k in declared], False),
            (SEALS, seals, True),
        ]
        for folder, names, hidden_aside in folders:
            found = self.files.listing(folder)
            if found is None or names is None:
                continue
            expected = set(names)
            for name in found:
                if _TEMP_NAME.fullmatch(name):  # a killed run's temporary file: never read, the next run removes it
                    continue
                if name not in expected and not (hidden_aside and name.startswith(".")):
                    yield LedgerIntegrityError(f"unexpected file in the tiles directory's {folder}/ (the tiles "
                                               "manifest does not name it)", file=f"{folder}/{_shown(name)}",
                                               field=folder)
            absent = sorted(expected - set(found))
            if absent:
                yield LedgerIntegrityError(f"the tiles directory's {folder}/ lacks files the tiles manifest names",
                                           file=f"{folder}/{absent[0]}", field=folder, found=len(absent))
        yield from self._blob_file_problems(listed)

    def _blob_file_problems(self, listed: list[str] | None) -> Iterator[LedgerIntegrityError]:
        """In a local folder: every name under ``blobs/`` is ``sha256/<hh>/<hex>`` of a blob the manifest lists,
        and every listed blob is there (over HTTP there is no listing: each listed blob is fetched instead)."""
        if not isinstance(self.files, LocalFiles):
            return
        top = self.files.listing("blobs")
        if top is None:
            if listed:
                yield LedgerIntegrityError("the tiles directory has no blobs/ folder but its manifest lists blobs",
                                           file=f"{BLOBS}/", field="blobs")
            return
        for name in top:
            if name != BLOBS.name:
                yield LedgerIntegrityError("unexpected name in the tiles directory's blobs/ (only sha256/ belongs "
                                           "there)", file=f"blobs/{_shown(name)}", field="blobs")
        expected = set(listed or [])
        present: set[str] = set()
        for prefix in self.files.listing(str(BLOBS)) or []:
            where = f"{BLOBS}/{_shown(prefix)}"
            if not _PREFIX.fullmatch(prefix):
                yield LedgerIntegrityError("unexpected name in the tiles directory's blobs (not a two-hex-digit "
                                           "folder)", file=where, field="blobs")
                continue
            try:
                names = self.files.listing(f"{BLOBS}/{prefix}")
            except LedgerIntegrityError as exc:
                yield exc
                continue
            if names is None:
                continue
            for name in names:
                if _TEMP_NAME.fullmatch(name):  # a killed run's temporary file: never read, the next run removes it
                    continue
                if (not SHA256_HEX.fullmatch(name) or name[:2] != prefix
                        or (listed is not None and name not in expected)):
                    yield LedgerIntegrityError("a blob file in the tiles directory is not one its manifest lists",
                                               file=f"{where}/{_shown(name)}", field="blobs")
                else:
                    present.add(name)
        absent = sorted(expected - present)
        if listed is not None and absent:
            yield LedgerIntegrityError(f"listed blob {absent[0]} is missing", file=f"{BLOBS}/{absent[0][:2]}/"
                                       f"{absent[0]}", field="blobs", found=len(absent))

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
            for digest in self._digests("blobs"):
                try:
                    self.blobs.verify(digest)
                except BlobMissing:
                    raise LedgerIntegrityError(f"listed blob {digest} is missing", file=self.blobs.path_of(
                        digest), found=digest) from None
        return report


def open_tiles(source: str | Path) -> TilesLog:
    """Open a tiles directory or the http(s) URL of one for reading."""
    return TilesLog(source)
