"""Public export of a ledger: a self-contained directory a third party can replay with the core package.

Layout (format ``heldout-ledger-export``, version 1)::

    DIR/
      export.json                 manifest (canonical JSON, see below); unsigned: trust comes from the
                                  checkpoints, signed by the key that entry 0 declares, and from the
                                  ledger id, which is the hash of entry 0
      entries.jsonl               entry i is line i: its exact canonical bytes, then "\\n" (canonical JSON
                                  never contains a raw newline)
      checkpoints/<size>.note     every signed checkpoint, byte for byte (C2SP signed note)
      blobs/sha256/<hh>/<hex>     every blob that an entry references (members named *_sha256) and the
                                  store holds; each file's name is its content's SHA-256
      keys/<key_id>.pub.json      public keys: the ledger's own (genesis and ``key`` entries) and the
                                  store's keyring (same format as the store's keys/)
      seals/<name>                the store's published seal manifests and reveals, verbatim: only those
                                  whose SHA-256 an exported entry names

The manifest: ``{"format", "version", "ledger_id", "origin", "size", "root" (base64), "note_verifier_key",
"checkpoints": [sizes], "blobs": [hex], "missing_blobs": [hex], "keys": [key ids], "seals": [names],
"entries": {"file", "count", "sha256"}}``. Nothing under the store's ``private/`` is read, so nothing private
can be exported. The export is deterministic: the same ledger state and store give the same bytes.

Read it with :func:`open_export`, which gives entry bytes, checkpoints, blobs (hash-checked), public keys and
seal manifests, proofs from the rebuilt tree, and :meth:`LedgerExport.verify` (the full replay).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from keys import MalformedInput, TrustedKey, b64encode, verifier_key_string
from keys.keyring import load_public_key_file, parse_public_key_file
from keys.safeio import (
    DOCUMENT_LIMIT,
    ENTRIES_FILE_LIMIT,
    KEY_FILE_LIMIT,
    NOTE_LIMIT,
    UnsafeFile,
    file_in,
    list_in,
    read_in,
    require_in,
)
from ledger.blobs import BlobStore
from ledger.checkpoint import Checkpoint, parse_checkpoint
from ledger.entries import blob_references, decode_entry, genesis_key, is_ledger_id
from ledger.errors import BlobMissing, LedgerIntegrityError, LedgerUsageError
from ledger.ledger import Ledger
from ledger.proofs import ConsistencyProof, InclusionProof
from ledger.replay import CheckpointClaim, ProgressFn, ReplayReport, replay
from ledger.rfc6962 import leaf_hash
from ledger.tree import HashTree, MemoryNodes
from seals import canonical_bytes, parse_json_object

EXPORT_FORMAT = "heldout-ledger-export"
EXPORT_VERSION = 1
MANIFEST = "export.json"
ENTRIES = "entries.jsonl"
CHECKPOINTS = "checkpoints"
BLOBS = Path("blobs") / "sha256"
KEYS = "keys"
SEALS = "seals"


def _ledger_keys(ledger: Ledger) -> list[TrustedKey]:
    keys = [ledger.key]
    for _, entry in ledger.entries():
        if entry.get("type") == "key":
            keys.append(genesis_key(entry))  # same {key_id, name, public_key_b64} shape
    return keys


def _write_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def export_ledger(ledger: Ledger, dest: Path, *, blobs: BlobStore | None = None, seals: Path | None = None,
                  keyring: Path | None = None) -> dict[str, Any]:
    """Write the export of ``ledger`` to ``dest`` (which must not exist or be empty); returns the manifest.

    The directory is built beside ``dest`` under a temporary name and renamed into place, so a failed export
    leaves nothing. ``blobs`` is the store's blob store, ``seals`` its seals folder, ``keyring`` its keys
    folder; each is optional."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise LedgerUsageError(f"{dest} exists and is not an empty directory", path=str(dest))
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.tmp{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        manifest = _build(ledger, tmp, blobs=blobs, seals=seals, keyring=keyring)
        if dest.exists():
            dest.rmdir()
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


def _build(ledger: Ledger, out: Path, *, blobs: BlobStore | None, seals: Path | None,
           keyring: Path | None) -> dict[str, Any]:
    conn = ledger.db.conn
    conn.execute("BEGIN")  # one snapshot: entries and checkpoints of the same state
    try:
        checkpoints = ledger.checkpoints()
        size = checkpoints[-1].size
        digest = hashlib.sha256()
        referenced: dict[str, None] = {}
        with open(out / ENTRIES, "wb") as handle:
            for index, data in ledger.entries_bytes(0, size):
                line = data + b"\n"
                handle.write(line)
                digest.update(line)
                for ref in blob_references(decode_entry(data, index=index)):
                    referenced.setdefault(ref)
            handle.flush()
            os.fsync(handle.fileno())
        for checkpoint in checkpoints:
            _write_file(out / CHECKPOINTS / f"{checkpoint.size}.note", checkpoint.note_bytes)
        root = ledger.root(size)
        keys = _ledger_keys(ledger)
    finally:
        conn.execute("COMMIT")

    copied: list[str] = []
    missing: list[str] = []
    for ref in referenced:
        if blobs is None or not blobs.has(ref):
            missing.append(ref)
            continue
        data = blobs.get(ref)  # re-hashed: a tampered store blob stops the export
        _write_file(out / BLOBS / ref[:2] / ref, data)
        copied.append(ref)

    by_id: dict[str, TrustedKey] = {}
    for key in [*keys, *(_keyring(keyring))]:
        known = by_id.get(key.key_id)
        if known is not None and known != key:
            raise LedgerIntegrityError(f"key id {key.key_id!r} names two different keys (ledger and keyring)",
                                       field="key_id", found=key.key_id)
        by_id[key.key_id] = key
    for key_id, key in sorted(by_id.items()):
        body = key.to_json()
        _write_file(out / KEYS / f"{key_id}.pub.json", canonical_bytes(body) + b"\n")

    seal_names: list[str] = []
    if seals is not None and seals.is_dir():
        for path in sorted(seals.iterdir()):
            if path.is_file() and not path.is_symlink() and not path.name.startswith("."):
                data = path.read_bytes()
                # Only what an exported entry vouches for (a manifest_sha256, a reveal_sha256): a file that no
                # entry names (left by a failed operation, or put there by hand) is never published.
                if hashlib.sha256(data).hexdigest() in referenced:
                    _write_file(out / SEALS / path.name, data)
                    seal_names.append(path.name)

    manifest = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "ledger_id": ledger.ledger_id,
        "origin": ledger.origin,
        "size": size,
        "root": b64encode(root),
        "note_verifier_key": verifier_key_string(ledger.key.name, ledger.key.public_key),
        "checkpoints": [c.size for c in checkpoints],
        "blobs": sorted(copied),
        "missing_blobs": sorted(missing),
        "keys": sorted(by_id),
        "seals": seal_names,
        "entries": {"file": ENTRIES, "count": size, "sha256": digest.hexdigest()},
    }
    _write_file(out / MANIFEST, canonical_bytes(manifest) + b"\n")
    return manifest


def _keyring(folder: Path | None) -> list[TrustedKey]:
    if folder is None or not folder.is_dir():
        return []
    return [load_public_key_file(path) for path in sorted(folder.glob("*.pub.json"))]


class LedgerExport:
    """Read access to an export directory. Nothing read here is trusted until :meth:`verify` has run:
    entries and checkpoints are as found; blobs are hash-checked on every read."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        manifest_path = self.folder / MANIFEST
        if not self.folder.is_dir():
            raise LedgerUsageError(f"{self.folder} is not a ledger export (not a folder)", path=str(self.folder))
        try:
            data = read_in(self.folder, MANIFEST, limit=DOCUMENT_LIMIT, what="ledger export")
            if data is None:
                raise LedgerUsageError(f"{self.folder} is not a ledger export (no {MANIFEST})",
                                       path=str(self.folder))
            self.manifest = parse_json_object(data, what=str(manifest_path))
        except MalformedInput as exc:
            raise LedgerIntegrityError(exc.message, file=str(manifest_path)) from None
        if self.manifest.get("format") != EXPORT_FORMAT or self.manifest.get("version") != EXPORT_VERSION:
            raise LedgerIntegrityError("unknown export format", file=str(manifest_path),
                                       expected=f"{EXPORT_FORMAT} v{EXPORT_VERSION}",
                                       found=f"{self.manifest.get('format')} v{self.manifest.get('version')}")
        claimed = self.manifest.get("ledger_id")
        if not isinstance(claimed, str) or not is_ledger_id(claimed):
            raise LedgerIntegrityError("the export manifest has no valid ledger id", file=str(manifest_path))
        self.ledger_id: str = claimed
        self.origin: str = str(self.manifest.get("origin"))
        self.blobs = BlobStore(self.folder / BLOBS)
        self._entries: list[bytes] | None = None
        self._tree: HashTree | None = None

    # entries ----------------------------------------------------------------------------------------------
    def _load(self) -> list[bytes]:
        if self._entries is None:
            path = self.folder / ENTRIES
            raw = self._read(ENTRIES, limit=ENTRIES_FILE_LIMIT)
            if raw is None:
                raise LedgerIntegrityError(f"the export has no {ENTRIES}", file=str(path))
            if raw and not raw.endswith(b"\n"):
                raise LedgerIntegrityError(f"{ENTRIES} does not end with a newline (truncated?)", file=str(path))
            self._entries = raw.split(b"\n")[:-1] if raw else []
        return self._entries

    @property
    def size(self) -> int:
        return len(self._load())

    def entry_bytes(self, index: int) -> bytes:
        entries = self._load()
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(entries):
            raise LedgerUsageError(f"index {index} is outside the export (size {len(entries)})", index=index)
        return entries[index]

    def entry(self, index: int) -> dict[str, Any]:
        return parse_json_object(self.entry_bytes(index), what=f"entry {index}")

    def entries(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
        for index, data in enumerate(self._load()[start:end], start=start):
            yield index, parse_json_object(data, what=f"entry {index}")

    def entries_bytes(self) -> Iterator[tuple[int, bytes]]:
        yield from enumerate(self._load())

    # checkpoints ------------------------------------------------------------------------------------------
    def _checkpoint_files(self) -> list[tuple[int, Path]]:
        folder = self.folder / CHECKPOINTS
        names = self._list(CHECKPOINTS)
        found = []
        for name in names:
            path = folder / name
            stem, _, suffix = name.partition(".")
            if suffix != "note" or not stem.isdigit() or str(int(stem)) != stem:
                raise LedgerIntegrityError("unexpected file among the checkpoints", file=str(path))
            found.append((int(stem), path))
        if len(found) > max(self.size, 1):  # sizes strictly increase up to the entry count: more is padding
            raise LedgerIntegrityError(f"the export holds {len(found)} checkpoints for {self.size} entries",
                                       file=CHECKPOINTS, expected=self.size, found=len(found))
        return sorted(found)

    def checkpoints(self) -> list[Checkpoint]:
        """Every checkpoint, parsed (signatures are checked by :meth:`verify`)."""
        return [parse_checkpoint(self._note(size).encode()) for size, _ in self._checkpoint_files()]

    def latest_checkpoint(self) -> Checkpoint:
        files = self._checkpoint_files()
        if not files:
            raise LedgerIntegrityError("the export has no checkpoint", path=str(self.folder))
        return parse_checkpoint(self._note(files[-1][0]).encode())

    # blobs, keys, seals -----------------------------------------------------------------------------------
    def blob(self, sha256_hex: str) -> bytes:
        return self.blobs.get(sha256_hex)

    def has_blob(self, sha256_hex: str) -> bool:
        return self.blobs.has(sha256_hex)

    @property
    def ledger_key(self) -> TrustedKey:
        """The checkpoint key that entry 0 declares."""
        return genesis_key(decode_entry(self.entry_bytes(0), index=0))

    def public_keys(self) -> list[TrustedKey]:
        keys = []
        for name in self._list(KEYS):
            if name.endswith(".pub.json"):
                data = self._read(f"{KEYS}/{name}", limit=KEY_FILE_LIMIT)
                keys.append(parse_public_key_file(data or b"", source=f"{KEYS}/{name}"))
        return keys

    def seal_paths(self) -> list[Path]:
        return [self.folder / SEALS / name for name in self._list(SEALS) if self.has_seal(name)]

    def has_seal(self, name: str) -> bool:
        """Whether ``seals/<name>`` is in the export (a link or a non-regular file there is refused)."""
        if "/" in name or name.startswith("."):
            return False
        try:
            return file_in(self.folder, [SEALS, name], what="ledger export")
        except UnsafeFile as exc:
            raise LedgerIntegrityError(exc.message, **exc.evidence) from None

    def seal_bytes(self, name: str) -> bytes:
        path = self.folder / SEALS / name
        data = None if "/" in name or name.startswith(".") else self._read(f"{SEALS}/{name}", limit=DOCUMENT_LIMIT)
        if data is None:
            raise LedgerUsageError(f"no seal manifest {name!r} in the export", path=str(path))
        return data

    # confined, bounded reading (keys.safeio): a crafted export is refused, never followed, waited on or
    # read without a bound; every refusal is tampering (exit 1)
    def _read(self, relative: str, *, limit: int) -> bytes | None:
        try:
            return read_in(self.folder, relative, limit=limit, what="ledger export")
        except UnsafeFile as exc:
            raise LedgerIntegrityError(exc.message, **exc.evidence) from None

    def _list(self, relative: str) -> list[str]:
        try:
            return list_in(self.folder, relative, what="ledger export") or []
        except UnsafeFile as exc:
            raise LedgerIntegrityError(exc.message, **exc.evidence) from None

    def _note(self, size: int) -> str:
        relative = f"{CHECKPOINTS}/{size}.note"
        try:
            return require_in(self.folder, relative, limit=NOTE_LIMIT, what="ledger export").decode("utf-8")
        except UnsafeFile as exc:
            raise LedgerIntegrityError(exc.message, **exc.evidence) from None
        except UnicodeDecodeError:
            raise LedgerIntegrityError("a checkpoint note is not UTF-8", file=relative) from None

    # tree and proofs ---------------------------------------------------------------------------------------
    def _hash_tree(self) -> HashTree:
        if self._tree is None:
            nodes = MemoryNodes()
            for data in self._load():
                nodes.append(leaf_hash(data))
            self._tree = HashTree(nodes)
        return self._tree

    def root(self, size: int | None = None) -> bytes:
        size = self.size if size is None else size
        if not 0 <= size <= self.size:
            raise LedgerUsageError(f"size {size} is outside 0..{self.size}", size=size)
        return self._hash_tree().root_at(size)

    def inclusion_proof(self, index: int, size: int | None = None) -> InclusionProof:
        size = self.size if size is None else size
        entry = self.entry_bytes(index)
        if not index < size <= self.size:
            raise LedgerUsageError(f"index {index} is not inside size {size}", index=index, size=size)
        tree = self._hash_tree()
        return InclusionProof(index, size, leaf_hash(entry), tree.root_at(size),
                              tuple(tree.inclusion_path(index, size)), entry)

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> ConsistencyProof:
        new = self.size if new_size is None else new_size
        if not 1 <= old_size <= new <= self.size:
            raise LedgerUsageError(f"sizes {old_size}..{new} are outside 1..{self.size}", old=old_size, new=new)
        tree = self._hash_tree()
        return ConsistencyProof(old_size, new, tree.root_at(old_size), tree.root_at(new),
                                tuple(tree.consistency_path(old_size, new)))

    # verification -----------------------------------------------------------------------------------------
    def verify(self, *, expected_id: str | None = None, progress: ProgressFn | None = None,
               check_blobs: bool = True) -> ReplayReport:
        """Replay the export (``ledger.replay``) and check that the manifest describes what was replayed;
        with ``check_blobs`` every exported blob is re-hashed (a missing referenced blob is listed in the
        manifest's ``missing_blobs``, not an error here: the audit decides what it needs)."""
        claims = [CheckpointClaim(size, self._note(size)) for size, _ in self._checkpoint_files()]
        entries = self._load()
        report, nodes = replay(((data, None) for data in entries), len(entries), claims,
                               expected_id=expected_id, progress=progress)
        self._tree = HashTree(nodes)
        m = self.manifest
        mismatches = {
            "ledger_id": (m.get("ledger_id"), report.ledger_id),
            "origin": (m.get("origin"), report.origin),
            "size": (m.get("size"), report.size),
            "root": (m.get("root"), b64encode(report.root)),
            "checkpoints": (m.get("checkpoints"), [c for c, _ in self._checkpoint_files()]),
            "note_verifier_key": (m.get("note_verifier_key"),
                                  verifier_key_string(report.key.name, report.key.public_key)),
        }
        for member, (claimed, actual) in mismatches.items():
            if claimed != actual:
                raise LedgerIntegrityError(f"the export manifest's {member} does not match the replayed ledger",
                                           file=MANIFEST, field=member, expected=actual, found=claimed)
        if check_blobs:
            listed = set(m.get("blobs") or []) | set(m.get("missing_blobs") or [])
            for digest in report.blobs:
                if digest not in listed:
                    raise LedgerIntegrityError("an entry references a blob the manifest does not list",
                                               file=MANIFEST, found=digest)
            for digest in m.get("blobs") or []:
                try:
                    self.blobs.verify(digest)
                except BlobMissing as exc:
                    raise LedgerIntegrityError(f"exported blob {digest} is missing", file=str(exc.evidence.get(
                        "file")), found=digest) from None
        return report


def open_export(folder: Path) -> LedgerExport:
    """Open an export directory for reading (see the module docstring for its layout)."""
    return LedgerExport(folder)
