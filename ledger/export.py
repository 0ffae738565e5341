"""Public export of a ledger: a self-contained directory a third party can replay with the core package.

Layout (format ``heldout-ledger-export``, version 1)::

    DIR/
      export.json                 manifest (canonical JSON, see below); unsigned: trust comes from the
                                  checkpoints, signed by the key that entry 0 declares, and from the
                                  ledger id, which is the hash of entry 0
      entries.jsonl               entry i is line i: its exact canonical bytes, then "\\n" (canonical JSON
                                  never contains a raw newline)
      checkpoints/<size>.note     every signed checkpoint, byte for byte (C2SP signed note), followed by the
                                  witnesses' cosignature/v1 lines the ledger holds for it
      blobs/sha256/<hh>/<hex>     every blob that an entry references (members named *_sha256) and the
                                  store holds; each file's name is its content's SHA-256
      keys/<key_id>.pub.json      public keys the ledger declares (genesis and ``key`` entries), nothing
                                  else: a key is trusted only because an entry declares it
      seals/<name>                the store's published seal manifests and reveals, verbatim: only those
                                  whose SHA-256 an exported entry names

The manifest: ``{"format", "version", "ledger_id", "origin", "size", "root" (base64), "note_verifier_key",
"checkpoints": [sizes], "blobs": [hex], "missing_blobs": [hex], "keys": [key ids], "seals": [names],
"entries": {"file", "count", "sha256"}}``. Nothing under the store's ``private/`` is read, so nothing private
can be exported. The export is deterministic: the same ledger state and store give the same bytes.

Read it with :func:`open_export`, which gives entry bytes, checkpoints, blobs (hash-checked), public keys and
seal manifests, proofs from the rebuilt tree, and :meth:`LedgerExport.verify` (the full replay, then every
manifest member against the files: :meth:`LedgerExport.manifest_problems`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from keys import MalformedInput, TrustedKey, b64encode, verifier_key_string
from keys.files import remove_stale_leftovers
from keys.names import ASCII_DIGITS
from keys.safeio import (
    DOCUMENT_LIMIT,
    ENTRIES_FILE_LIMIT,
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
from ledger.published import EntryList, check_replayed_claims
from ledger.replay import CheckpointClaim, EntryFn, ProgressFn, ReplayReport, replay
from ledger.rfc6962 import leaf_hash
from ledger.tree import CompactRange, HashTree, MemoryNodes
from seals import canonical_bytes, parse_json_object

EXPORT_FORMAT = "heldout-ledger-export"
EXPORT_VERSION = 1
#: export.json's members (FORMATS section 14): exactly these.
MANIFEST_MEMBERS = frozenset({"format", "version", "ledger_id", "origin", "size", "root", "note_verifier_key",
                              "checkpoints", "blobs", "missing_blobs", "keys", "seals", "entries"})
MANIFEST = "export.json"
ENTRIES = "entries.jsonl"
#: No entry is shorter than this (the smallest, a one-letter note, is 67 bytes with its newline): a file whose
#: lines are shorter on average holds lines that are not entries.
MIN_ENTRY_LINE = 40
#: Lines past the manifest's size that are still read (and located by the replay) rather than refused unread.
MAX_EXTRA_LINES = 10_000
CHECKPOINTS = "checkpoints"
BLOBS = Path("blobs") / "sha256"
KEYS = "keys"
#: A key file is one small canonical JSON object (section 4 of FORMATS.md); a larger one is refused unread.
KEY_FILE_LIMIT = 64 * 1024
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


def export_ledger(ledger: Ledger, dest: Path, *, blobs: BlobStore | None = None,
                  seals: Path | None = None, seal_files: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Write the export of ``ledger`` to ``dest`` (which must not exist or be empty); returns the manifest.

    The directory is built beside ``dest`` under a temporary name (``.<name>.tmp<pid>``) and renamed into
    place, so a failed export leaves nothing and a killed one leaves no partial export at ``dest``; what
    killed exports left beside ``dest`` is removed first (:func:`keys.files.remove_stale_leftovers`).
    ``blobs`` is the store's blob store, ``seals`` its seals folder; each is optional. ``seal_files``: the files
    of ``seals/`` the entries log, by name with the SHA-256 each must have (the caller, which knows the entry
    types, says which): each is published with exactly those bytes, from ``seals`` or, when the file there is
    missing or damaged, from its blob (a damaged working copy was left out before, silently)."""
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise LedgerUsageError(f"{dest} exists and is not an empty directory", path=str(dest))
    dest.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_leftovers(dest.parent, dest.name)  # what killed exports of dest left
    tmp = dest.parent / f".{dest.name}.tmp{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        manifest = _build(ledger, tmp, blobs=blobs, seals=seals, seal_files=seal_files)
        if dest.exists():
            dest.rmdir()
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return manifest


#: Leaf hashes folded into the export's compact range at a time; no interior node is kept (only the root).
_LEAF_BATCH, _KEEP_NO_NODES = 4096, 64


def _build(ledger: Ledger, out: Path, *, blobs: BlobStore | None, seals: Path | None,
           seal_files: Mapping[str, str] | None) -> dict[str, Any]:
    with ledger.snapshot():  # entries and checkpoints of the same state
        checkpoints = ledger.cosigned_checkpoints()
        size = checkpoints[-1].size
        digest = hashlib.sha256()
        referenced: dict[str, None] = {}
        tree, leaves = CompactRange(), []  # the root the entries give, as a verifier will compute it
        with open(out / ENTRIES, "wb") as handle:
            for index, data in ledger.entries_bytes(0, size):
                line = data + b"\n"
                handle.write(line)
                digest.update(line)
                leaves.append(leaf_hash(data))
                if len(leaves) == _LEAF_BATCH:
                    tree.extend(leaves, _KEEP_NO_NODES)
                    leaves.clear()
                for ref in blob_references(decode_entry(data, index=index)):
                    referenced.setdefault(ref)
            handle.flush()
            os.fsync(handle.fileno())
        for checkpoint in checkpoints:
            _write_file(out / CHECKPOINTS / f"{checkpoint.size}.note", checkpoint.note_bytes)
        tree.extend(leaves, _KEEP_NO_NODES)
        root = tree.root()
        if root != checkpoints[-1].root:
            # The stored tree (whence ledger.root) can disagree with the entries in a damaged database: what is
            # published is what the entries give, and it must be the signed root, or nothing is published.
            raise LedgerIntegrityError(f"the ledger's entries do not give the root its checkpoint {size} signs (a "
                                       "damaged ledger: run heldout ledger verify); nothing was published",
                                       size=size, expected=checkpoints[-1].root_b64, found=b64encode(root))
        keys = _ledger_keys(ledger)

    copied: list[str] = []
    missing: list[str] = []
    for ref in referenced:
        if blobs is None or not blobs.has(ref):
            missing.append(ref)
            continue
        data = blobs.get(ref)  # re-hashed: a tampered store blob stops the export
        _write_file(out / BLOBS / ref[:2] / ref, data)
        copied.append(ref)

    by_id = _declared(keys)
    for key_id, key in sorted(by_id.items()):
        _write_file(out / KEYS / f"{key_id}.pub.json", key_file_bytes(key))

    seal_names: list[str] = []
    if seal_files is not None:
        for name, data in logged_seal_bytes(seal_files, seals=seals, blobs=blobs):
            _write_file(out / SEALS / name, data)
            seal_names.append(name)
    elif seals is not None and seals.is_dir():
        for path in sorted(seals.iterdir()):
            if path.is_file() and not path.is_symlink() and not path.name.startswith("."):
                held = store_seal_bytes(seals, path.name)
                # Only what an exported entry vouches for (a manifest_sha256, a reveal_sha256): a file that no
                # entry names (left by a failed operation, or put there by hand) is never published.
                if held is not None and hashlib.sha256(held).hexdigest() in referenced:
                    _write_file(out / SEALS / path.name, held)
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


def store_seal_bytes(seals: Path, name: str) -> bytes | None:
    """The store's working copy ``seals/<name>``, read bounded: None when it is absent, not a regular file, or
    past a seal document's bound (no document the log vouches for)."""
    try:
        return read_in(seals, name, limit=DOCUMENT_LIMIT, what="the store's seals")
    except UnsafeFile:
        return None


def logged_seal_bytes(seal_files: Mapping[str, str], *, seals: Path | None,
                      blobs: BlobStore | None) -> Iterator[tuple[str, bytes]]:
    """For each file of ``seal_files`` (name: the SHA-256 its entry logs), the logged bytes: the store's working
    copy in ``seals`` when it has that hash, else its blob (re-hashed); a file found in neither is left out (the
    readers then report it missing). What an export and a tiles directory publish under ``seals/``."""
    for name, expected in sorted(seal_files.items()):
        found = store_seal_bytes(seals, name) if seals is not None else None
        if (found is None or hashlib.sha256(found).hexdigest() != expected) and blobs is not None \
                and blobs.has(expected):
            found = blobs.get(expected)  # re-hashed: the logged bytes themselves
        if found is not None and hashlib.sha256(found).hexdigest() == expected:
            yield name, found


def key_file_bytes(key: TrustedKey) -> bytes:
    return canonical_bytes(key.to_json()) + b"\n"


def _declared(keys: list[TrustedKey]) -> dict[str, TrustedKey]:
    """The ledger's declared keys by id; one id naming two keys is a broken ledger."""
    by_id: dict[str, TrustedKey] = {}
    for key in keys:
        known = by_id.get(key.key_id)
        if known is not None and known != key:
            raise LedgerIntegrityError(f"key id {key.key_id!r} names two different keys in the ledger's entries",
                                       field="key_id", found=key.key_id)
        by_id[key.key_id] = key
    return by_id


class LedgerExport(EntryList):
    """Read access to an export directory. Nothing read here is trusted until :meth:`verify` has run:
    entries and checkpoints are as found; blobs are hash-checked on every read."""

    what = "the export"

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
        version = self.manifest.get("version")
        if self.manifest.get("format") != EXPORT_FORMAT or type(version) is not int or version != EXPORT_VERSION:
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
        self._notes: dict[int, str] = {}
        self._checkpoint_list: list[tuple[int, Path]] | None = None

    # entries ----------------------------------------------------------------------------------------------
    def _load(self) -> list[bytes]:
        if self._entries is None:
            path = self.folder / ENTRIES
            raw = self._read(ENTRIES, limit=ENTRIES_FILE_LIMIT)
            if raw is None:
                raise LedgerIntegrityError(f"the export has no {ENTRIES}", file=str(path))
            if raw and not raw.endswith(b"\n"):
                raise LedgerIntegrityError(f"{ENTRIES} does not end with a newline (truncated?)", file=str(path))
            # counted before splitting, which makes an object per line: a file of short lines is refused unsplit
            # (a few lines more or fewer than the manifest says are read, so that the replay locates them)
            lines, claimed = raw.count(b"\n"), self.manifest.get("size")
            if type(claimed) is int and lines > claimed + MAX_EXTRA_LINES:
                raise LedgerIntegrityError(f"{ENTRIES} holds {lines} lines and the export manifest's size is "
                                           f"{claimed}", file=str(path), expected=claimed, found=lines)
            if lines * MIN_ENTRY_LINE > len(raw):
                raise LedgerIntegrityError(f"{ENTRIES} holds {lines} lines in {len(raw)} bytes: lines shorter than "
                                           f"any entry ({MIN_ENTRY_LINE} bytes and more)", file=str(path),
                                           found=lines)
            self._entries = raw.split(b"\n")[:-1] if raw else []
        return self._entries

    # checkpoints ------------------------------------------------------------------------------------------
    def _checkpoint_files(self) -> list[tuple[int, Path]]:
        """The checkpoint notes the export holds, listed once (like :meth:`_note`, what was verified is what is
        used later)."""
        if self._checkpoint_list is None:
            self._checkpoint_list = self._list_checkpoint_files()
        return self._checkpoint_list

    def _list_checkpoint_files(self) -> list[tuple[int, Path]]:
        folder = self.folder / CHECKPOINTS
        names = self._list(CHECKPOINTS)
        found = []
        for name in names:
            path = folder / name
            stem, _, suffix = name.partition(".")
            if suffix != "note" or ASCII_DIGITS.fullmatch(stem) is None or str(int(stem)) != stem:
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

    def blob_file(self, sha256_hex: str) -> str:
        return str(self.blobs.path(sha256_hex).relative_to(self.folder))

    @property
    def ledger_key(self) -> TrustedKey:
        """The checkpoint key that entry 0 declares."""
        return genesis_key(decode_entry(self.entry_bytes(0), index=0))

    def public_keys(self) -> list[TrustedKey]:
        """The keys the ledger's entries declare (genesis and ``key`` entries); the ``keys/`` files are only
        copies, checked against these by :meth:`manifest_problems`."""
        keys = []
        for index, data in self.entries_bytes():
            entry = decode_entry(data, index=index)
            if entry.get("type") in ("genesis", "key"):
                keys.append(genesis_key(entry))
        return keys

    def seal_paths(self) -> list[Path]:
        return [self.folder / SEALS / name for name in self._list(SEALS) if self.has_seal(name)]

    def location(self, relative: str) -> str:
        """Where a file of the export is, for messages."""
        return str(self.folder / relative)

    def seal_names(self) -> list[str]:
        return [path.name for path in self.seal_paths()]

    def has_seal(self, name: str) -> bool:
        """Whether ``seals/<name>`` is in the export (a link or a non-regular file there is refused)."""
        if "/" in name or name.startswith("."):
            return False
        return self._is_file(f"{SEALS}/{name}")

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

    def _is_file(self, relative: str) -> bool:
        """Whether ``relative`` is a regular file of the export (absent: False; a link or anything else: refused)."""
        try:
            return file_in(self.folder, relative, what="ledger export")
        except UnsafeFile as exc:
            raise LedgerIntegrityError(exc.message, **exc.evidence) from None

    def _list(self, relative: str) -> list[str]:
        try:
            return list_in(self.folder, relative, what="ledger export") or []
        except UnsafeFile as exc:
            raise LedgerIntegrityError(exc.message, **exc.evidence) from None

    def _note(self, size: int) -> str:
        """The note of checkpoint ``size``, read once: every later use (the witness policy, the head a report
        or a site shows) gets the text the replay verified, whatever the file holds by then (a note swapped
        after the replay must not be judged in place of the one whose root was checked)."""
        found = self._notes.get(size)
        if found is not None:
            return found
        relative = f"{CHECKPOINTS}/{size}.note"
        try:
            text = require_in(self.folder, relative, limit=NOTE_LIMIT, what="ledger export").decode("utf-8")
        except UnsafeFile as exc:
            raise LedgerIntegrityError(exc.message, **exc.evidence) from None
        except UnicodeDecodeError:
            raise LedgerIntegrityError("a checkpoint note is not UTF-8", file=relative) from None
        self._notes[size] = text
        return text

    # tree and proofs ---------------------------------------------------------------------------------------
    def _hash_tree(self) -> HashTree:
        if self._tree is None:
            nodes = MemoryNodes()
            for data in self._load():
                nodes.append(leaf_hash(data))
            self._tree = HashTree(nodes)
        return self._tree

    # verification -----------------------------------------------------------------------------------------
    def manifest_problems(self) -> Iterator[LedgerIntegrityError]:
        """Each way the manifest and the files disagree (call after :meth:`verify`'s replay, or on an export
        whose entries decode): export.json in canonical form; ``entries`` (file, count, SHA-256 of
        entries.jsonl); ``keys`` = the ids the ledger declares, each ``keys/`` file exactly that key's file and
        no other file there; ``seals`` = the files under ``seals/``; ``blobs`` = the blob files present, each
        one an entry references, and ``missing_blobs`` = the referenced ones absent."""
        m = self.manifest
        raw = self._read(MANIFEST, limit=DOCUMENT_LIMIT)  # every file read here confined and bounded (_read)
        if raw != canonical_bytes(m) + b"\n":
            yield LedgerIntegrityError("export.json is not in canonical form (canonical JSON and one newline)",
                                       file=MANIFEST, field="export.json")
        if set(m) != MANIFEST_MEMBERS:
            yield LedgerIntegrityError("export.json's members are not exactly those of FORMATS section 14",
                                       file=MANIFEST, field="export.json", expected=sorted(MANIFEST_MEMBERS),
                                       found=sorted(m)[:40])
        entries_raw = self._read(ENTRIES, limit=ENTRIES_FILE_LIMIT) or b""
        expected_entries = {"file": ENTRIES, "count": self.size, "sha256": hashlib.sha256(entries_raw).hexdigest()}
        if m.get("entries") != expected_entries:
            yield LedgerIntegrityError("the export manifest's entries member does not describe entries.jsonl",
                                       file=MANIFEST, field="entries", expected=expected_entries,
                                       found=m.get("entries"))
        declared = _declared(self.public_keys())
        if m.get("keys") != sorted(declared):
            yield LedgerIntegrityError("the export manifest's keys are not the keys the ledger declares",
                                       file=MANIFEST, field="keys", expected=sorted(declared), found=m.get("keys"))
        key_files = self._list(KEYS)
        for key_id in sorted(set(declared) - {n.removesuffix(".pub.json") for n in key_files}):
            yield LedgerIntegrityError("a key the ledger declares has no key file in the export (FORMATS section 14: "
                                       "each declared key has exactly its keys/ file)",
                                       file=f"{KEYS}/{key_id}.pub.json", field="keys", expected=key_id)
        for name in key_files:
            key = declared.get(name.removesuffix(".pub.json")) if name.endswith(".pub.json") else None
            if key is None:
                yield LedgerIntegrityError("a key file in the export names a key no ledger entry declares "
                                           "(keys are trusted only when the genesis or a key entry declares them)",
                                           file=f"{KEYS}/{name}", field="keys")
                continue
            try:  # a link, a folder, a FIFO or an oversized file there is refused by the confined read
                data = self._read(f"{KEYS}/{name}", limit=KEY_FILE_LIMIT)
            except LedgerIntegrityError as exc:
                yield LedgerIntegrityError(f"a key file in the export is not a plain file: {exc.message}",
                                           file=f"{KEYS}/{name}", field="keys")
                continue
            if data != key_file_bytes(key):
                yield LedgerIntegrityError("a key file in the export is not the key its ledger entry declares",
                                           file=f"{KEYS}/{name}", field="keys", expected=key.public_key.b64)
        seal_names = [p.name for p in self.seal_paths()]
        if m.get("seals") != seal_names:
            yield LedgerIntegrityError("the export manifest's seals are not the files under seals/", file=MANIFEST,
                                       field="seals", expected=seal_names, found=m.get("seals"))
        referenced: set[str] = set()
        for index, data in self.entries_bytes():
            referenced.update(blob_references(decode_entry(data, index=index)))
        present: list[str] = []
        for prefix in self._list(str(BLOBS)):
            if len(prefix) != 2 or prefix.strip("0123456789abcdef"):
                yield LedgerIntegrityError("a file or folder in blobs/sha256 that is not a two-hex prefix folder",
                                           file=f"{BLOBS}/{prefix}", field="blobs")
                continue
            try:  # a link, a file or anything but a real folder where a prefix folder belongs is refused
                names = self._list(f"{BLOBS}/{prefix}")
            except LedgerIntegrityError as exc:
                yield LedgerIntegrityError(f"not a blob folder: {exc.message}", file=f"{BLOBS}/{prefix}",
                                           field="blobs")
                continue
            for name in names:
                relative = f"{BLOBS}/{prefix}/{name}"
                try:
                    plain = self._is_file(relative)
                except LedgerIntegrityError as exc:
                    yield LedgerIntegrityError(f"not a blob file: {exc.message}", file=relative, field="blobs")
                    continue
                if not plain or prefix != name[:2] or name not in referenced:
                    yield LedgerIntegrityError("a blob file in the export is not one an entry references",
                                               file=relative, field="blobs")
                    continue
                present.append(name)
        missing = sorted(referenced - set(present))
        for member, expected in (("blobs", sorted(present)), ("missing_blobs", missing)):
            if m.get(member) != expected:
                yield LedgerIntegrityError(f"the export manifest's {member} member does not match the blob files",
                                           file=MANIFEST, field=member, expected=expected, found=m.get(member))

    def verify(self, *, expected_id: str | None = None, progress: ProgressFn | None = None,
               check_blobs: bool = True, check_manifest: bool = True, on_entry: EntryFn | None = None,
               jobs: int | None = None) -> ReplayReport:
        """Replay the export (``ledger.replay``) and check that the manifest describes what was replayed;
        with ``check_manifest`` also every other manifest member and file (:meth:`manifest_problems`; the
        audit reports them one by one instead); with ``check_blobs`` every exported blob is re-hashed (a
        missing referenced blob is listed in the manifest's ``missing_blobs``, not an error here: the audit
        decides what it needs). ``on_entry`` receives each entry as the replay decodes it (``ledger.replay``).
        ``jobs`` is accepted for the reader interface and not used: the export's replay keeps every decoded
        entry (its blob references, its proof tree), so it decodes in this process."""
        del jobs
        claims = [CheckpointClaim(size, self._note(size)) for size, _ in self._checkpoint_files()]
        entries = self._load()
        referenced: dict[str, None] = {}
        nodes = MemoryNodes()  # the export holds its entries in memory anyway; its proofs come from this tree

        def keep(index: int, data: bytes, entry: dict[str, Any]) -> None:
            nodes.append(leaf_hash(data))
            referenced.update(dict.fromkeys(blob_references(entry)))
            if on_entry is not None:
                on_entry(index, data, entry)

        report = replay(((data, None) for data in entries), len(entries), claims, expected_id=expected_id,
                        progress=progress, on_entry=keep)
        self._tree = HashTree(nodes)
        m = self.manifest
        check_replayed_claims(m, report, what="the export manifest", file=MANIFEST,
                              checkpoints=[c for c, _ in self._checkpoint_files()])
        if check_manifest:
            for problem in self.manifest_problems():
                raise problem
        if check_blobs:
            listed = set(m.get("blobs") or []) | set(m.get("missing_blobs") or [])
            for digest in referenced:
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
