"""Staged operations: a multi-step operation (seal, retire --reveal, evaluate, passport issue) is atomic across
crashes. The ledger entry is the commit point; every file the operation publishes waits in ``private/`` until
then.

**Order.** Holding the ledger's operation lock: (1) every file the operation will publish (blobs, seal
manifests, reveals, passports, private openings) is written to ``private/staging/<ledger id>/<op id>/``
(0700 folder, 0600 files, each fsynced); (2) ``intent.json`` is written there (atomically): what each staged
file becomes, its SHA-256, the ledger size before the operation and the SHA-256 of every entry it appends;
(3) the entries are appended in one ledger transaction (the commit); (4) each staged file is published with a
durable atomic write (``BlobStore.put``, ``keys.files.write_atomic``, ``keys.files.write_private_file``);
(5) ``intent.json`` is removed, then the folder.

**Recovery.** The next command that opens the ledger (``open_ledger``) or takes its lock finds what a killed
operation left and, under the same lock, finishes it when its entries are in the ledger (publishes the staged
files, idempotently) or discards it when they are not (removes the folder; nothing public was written). A
folder without ``intent.json`` never reached its commit and is discarded. Temporary files a killed publish
left beside its targets are removed. So a kill at any instant leaves the store, as every command sees it, as
if the operation never started or as if it completed; secret data (reveals, predictions of sealed
generations) never reaches a public folder before its entry is logged.

**Crash points.** ``crashpoint(name)`` kills the process with SIGKILL when ``$HELDOUT_CRASH_AT`` names it (at
once, or a given time later) and appends ``name`` to the file ``$HELDOUT_CRASH_TRACE`` when that is set: the
hook of the kill-at-every-step test (tests/test_crash_atomicity.py). Unset, it costs two dictionary look-ups.
"""

from __future__ import annotations

import errno
import hashlib
import os
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any

from heldout.store import Store
from keys import HeldoutError, Signer, StorageError, VerificationError, storage_error
from keys.files import (
    PRIVATE_FILE_MODE,
    ensure_private_dir,
    fsync_dir,
    write_atomic,
    write_private_file,
    write_synced,
)
from ledger import BlobStore, Ledger
from ledger.entries import encode_entry
from ledger.sqlite import lock_path as sqlite_lock_path
from seals import canonical_bytes, parse_json_object

CRASH_ENV = "HELDOUT_CRASH_AT"
CRASH_TRACE_ENV = "HELDOUT_CRASH_TRACE"
INTENT = "intent.json"
INTENT_VERSION = 1
#: where each kind of staged file may be published, relative to the store root
_DESTINATIONS = {"public": ("seals", "passports"), "private": ("private/generations", "private/withheld")}


def crashpoint(name: str) -> None:
    """The kill-at-every-step hook (module docstring). ``$HELDOUT_CRASH_AT`` is ``<step>`` (killed there) or
    ``<step>+<seconds>`` (killed that long after reaching the step, wherever the process then is: inside a
    ledger transaction, an fsync, a rename)."""
    trace = os.environ.get(CRASH_TRACE_ENV)
    if trace:
        with open(trace, "a", encoding="utf-8") as handle:
            handle.write(f"{name} {time.monotonic():.6f}\n")
    target = os.environ.get(CRASH_ENV)
    if target is None or not target.startswith(name):
        return
    if target == name:
        os.kill(os.getpid(), signal.SIGKILL)
    elif target[len(name)] == "+":
        timer = threading.Timer(float(target[len(name) + 1:]), os.kill, (os.getpid(), signal.SIGKILL))
        timer.daemon = True
        timer.start()


# --- the lock ---------------------------------------------------------------------------------------------

def lock_path(ledger: Ledger) -> Path | None:
    """The lock file of a SQLite ledger; ``None`` for a ledger in PostgreSQL (its lock is an advisory lock on
    the server: ``Ledger.operation_lock``)."""
    return None if ledger.path is None else sqlite_lock_path(ledger.path)


_depth: dict[str, int] = {}  # lock path -> how many times this process holds it (the lock is re-entrant)


@contextmanager
def ledger_lock(ledger: Ledger) -> Iterator[bool]:
    """An exclusive advisory lock on the ledger's operations; yields True for the outermost holder.

    Re-entrant within a process (a second ``flock`` on a new descriptor, or an advisory lock on a second
    connection, would wait for ourselves). The lock itself is the ledger's (``Ledger.operation_lock``): a
    ``flock`` on a separate lock file beside a SQLite ledger, never the SQLite file itself (closing any
    descriptor of that file would drop SQLite's own POSIX locks held by this process), or a session advisory
    lock on the PostgreSQL server, which also serializes operators on other hosts."""
    key = ledger.location
    if _depth.get(key):
        _depth[key] += 1
        try:
            yield False
        finally:
            _depth[key] -= 1
        return
    with ledger.operation_lock():
        _depth[key] = 1
        try:
            yield True
        finally:
            _depth.pop(key, None)


@contextmanager
def operation_lock(store: Store, ledger: Ledger) -> Iterator[None]:
    """The ledger's lock, with what a killed operation left finished or discarded first (module docstring)."""
    with ledger_lock(ledger) as outermost:
        if outermost:
            recover_staged(store, ledger)
        yield


# --- staging ------------------------------------------------------------------------------------------------

def staging_root(store: Store, ledger_id: str) -> Path:
    return store.private / "staging" / ledger_id


def _ensure_private_chain(store: Store, folder: Path) -> None:
    """Create ``folder`` and every folder between ``private/`` and it with mode 0700 (``mkdir(parents=True)``
    would give the intermediate ones the default mode)."""
    relative = folder.relative_to(store.private)
    current = store.private
    ensure_private_dir(current)
    for part in relative.parts:
        current = current / part
        ensure_private_dir(current)


_live: set[str] = set()  # staging folders of operations running in this process: recovery leaves them alone


@dataclass
class _StagedFile:
    label: str
    kind: str  # blob | public | private
    dest: str | None  # relative to the store root (None for blobs: named by their hash)
    sha256: str


class StagedOperation:
    """One operation's staging folder (see the module docstring); made by :func:`staged_operation`."""

    def __init__(self, store: Store, ledger: Ledger, name: str) -> None:
        self.store = store
        self.ledger = ledger
        self.name = name
        self.folder = staging_root(store, ledger.ledger_id) / f"{name}-{os.getpid()}-{secrets.token_hex(6)}"
        self.files: list[_StagedFile] = []
        self._data: list[bytes] = []
        self.committed = False

    def _stage(self, label: str, kind: str, dest: Path | None, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        relative = None if dest is None else _check_dest(kind, dest.relative_to(self.store.root).as_posix())
        write_synced(self.folder / str(len(self.files)), data, PRIVATE_FILE_MODE)
        self.files.append(_StagedFile(label=label, kind=kind, dest=relative, sha256=digest))
        self._data.append(data)
        crashpoint(f"{self.name}.staged.{label}")
        return digest

    def blob(self, data: bytes, *, label: str) -> str:
        """Stage a content-addressed blob; returns its SHA-256 hex."""
        return self._stage(label, "blob", None, data)

    def public_file(self, path: Path, data: bytes, *, label: str) -> None:
        """Stage a public file of the store (under ``seals/`` or ``passports/``)."""
        self._stage(label, "public", path, data)

    def private_file(self, path: Path, data: bytes, *, label: str) -> None:
        """Stage a private file of the store (under ``private/generations/`` or ``private/withheld/``), published
        0600, never replaced."""
        self._stage(label, "private", path, data)

    def commit(self, entries: Sequence[Mapping[str, Any]], *, signer: Signer, now: datetime,
               expected_size: int | None = None) -> list[int]:
        """Record the intent, append ``entries`` in one transaction, then publish every staged file."""
        size_before = self.ledger.size if expected_size is None else expected_size
        intent = {
            "intent_version": INTENT_VERSION, "operation": self.name, "ledger_id": self.ledger.ledger_id,
            "size_before": size_before,
            "entries_sha256": [hashlib.sha256(encode_entry(entry)[1]).hexdigest() for entry in entries],
            "files": [{"label": f.label, "kind": f.kind, "dest": f.dest, "sha256": f.sha256} for f in self.files],
        }
        crashpoint(f"{self.name}.before-intent")
        tmp = self.folder / f".{INTENT}.tmp"
        write_synced(tmp, canonical_bytes(intent), PRIVATE_FILE_MODE)
        os.replace(tmp, self.folder / INTENT)
        fsync_dir(self.folder)
        crashpoint(f"{self.name}.intent")
        indices = self.ledger.append_batch(entries, signer=signer, now=now, expected_size=expected_size)
        self.committed = True
        crashpoint(f"{self.name}.committed")
        try:
            _publish(self.store, self.folder, intent, step=self.name, in_memory=self._data)
            _remove(self.folder)
        except (HeldoutError, OSError) as exc:
            raise PublishPending(self.name, indices, exc) from None
        crashpoint(f"{self.name}.done")
        return indices


class PublishPending(StorageError):
    """An operation's entries are in the ledger (its commit) but publishing its files failed (a full disk, an I/O
    error): exit 2 as any environment error, saying that the operation happened and that the next command that
    opens the ledger publishes what it staged. "Nothing was written" would be false, and running it again is
    refused (it is logged)."""

    def __init__(self, operation: str, indices: Sequence[int], cause: HeldoutError | OSError) -> None:
        reason = cause.message if isinstance(cause, HeldoutError) else storage_error(cause).message
        where = f"entry {indices[0]}" if len(indices) == 1 else f"entries {indices[0]}..{indices[-1]}"
        super().__init__(f"the {operation} is logged ({where}), but publishing its files failed: {reason}; the next "
                         "command that opens the ledger publishes them once there is room (do not run it again)",
                         entries=list(indices))


@contextmanager
def staged_operation(store: Store, ledger: Ledger, name: str) -> Iterator[StagedOperation]:
    """A staging folder for one operation; the caller holds :func:`operation_lock`. Discarded when the block
    raises before the commit; kept for the next command to finish when publishing after the commit fails."""
    operation = StagedOperation(store, ledger, name)
    _ensure_private_chain(store, operation.folder.parent)
    operation.folder.mkdir(mode=0o700)
    fsync_dir(operation.folder.parent)
    _live.add(str(operation.folder))
    try:
        crashpoint(f"{name}.staging")
        yield operation
    except BaseException:
        intent = operation.folder / INTENT
        # Kept only when the entries are in the ledger (the error came while publishing): the next command
        # publishes them. An append that raised wrote nothing, so the folder goes.
        if not operation.committed and not (intent.is_file() and _committed(
                ledger, parse_json_object(intent.read_bytes(), what=str(intent)))):
            _remove(operation.folder)
        raise
    finally:
        _live.discard(str(operation.folder))


def _check_dest(kind: str, dest: str) -> str:
    """A staged file's destination: a plain relative path inside the folders its kind may publish to."""
    path = PurePosixPath(dest)
    allowed = _DESTINATIONS.get(kind, ())
    if path.is_absolute() or ".." in path.parts or not any(
            path.parts[: len(PurePosixPath(a).parts)] == PurePosixPath(a).parts for a in allowed):
        raise VerificationError(f"a staged {kind} file names a destination outside {', '.join(allowed)}",
                                field="dest", found=dest[:200])
    return dest


def _remove(folder: Path) -> None:
    """Remove a staging folder: the intent first, so a kill halfway leaves a folder recovery discards."""
    if not folder.is_dir():
        return
    (folder / INTENT).unlink(missing_ok=True)
    fsync_dir(folder)
    shutil.rmtree(folder, ignore_errors=True)
    if folder.parent.is_dir():
        fsync_dir(folder.parent)


def _remove_temporaries(target: Path) -> None:
    """Temporary files (``.<name>.tmp<pid>``) that a killed write left beside ``target``."""
    if target.parent.is_dir():
        for leftover in target.parent.glob(f".{target.name}.tmp*"):
            leftover.unlink(missing_ok=True)


def _publish(store: Store, folder: Path, intent: Mapping[str, Any], *, step: str,
             in_memory: Sequence[bytes] | None = None) -> None:
    """Publish every staged file of ``folder`` (idempotent: publishing twice writes the same bytes twice).
    ``in_memory``: the staged bytes, hashed when staged, from the operation itself; recovery reads each file
    back and checks it against the intent."""
    blobs = BlobStore(store.blobs)
    for position, item in enumerate(intent["files"]):
        if in_memory is not None:
            data = in_memory[position]
        else:
            data = (folder / str(position)).read_bytes()
            if hashlib.sha256(data).hexdigest() != item["sha256"]:
                raise VerificationError(f"staged file {folder / str(position)} does not match its intent",
                                        file=str(folder / str(position)), expected=item["sha256"])
        if item["kind"] == "blob":
            _remove_temporaries(blobs.path(item["sha256"]))
            blobs.put(data)
        else:
            target = store.root / _check_dest(item["kind"], item["dest"])
            _remove_temporaries(target)
            if item["kind"] == "public":
                write_atomic(target, data)
            elif not (target.is_file() and target.read_bytes() == data):
                _ensure_private_chain(store, target.parent)
                write_private_file(target, data)
        crashpoint(f"{step}.published.{item['label']}")


# --- recovery -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Recovered:
    operation: str
    folder: str
    outcome: str  # finished | discarded


def _committed(ledger: Ledger, intent: Mapping[str, Any]) -> bool:
    """Whether the intent's entries are in the ledger (one batch: the first found at or after the size the
    operation started from, the rest right after it)."""
    wanted = list(intent["entries_sha256"])
    found: list[str] = []
    for _, data in ledger.entries_bytes(int(intent["size_before"])):
        digest = hashlib.sha256(data).hexdigest()
        if found or digest == wanted[0]:
            found.append(digest)
            if len(found) == len(wanted):
                break
    if not found:
        return False
    if found != wanted:
        raise VerificationError("a staged operation's entries are only partly in the ledger",
                                expected=wanted, found=found)
    return True


def _read_intent(path: Path, ledger: Ledger) -> dict[str, Any]:
    """A staged operation's intent, refused (naming the folder) unless it has the shape :meth:`commit` writes."""
    intent = parse_json_object(path.read_bytes(), what=str(path))
    entries, files, size = intent.get("entries_sha256"), intent.get("files"), intent.get("size_before")
    if intent.get("intent_version") != INTENT_VERSION or intent.get("ledger_id") != ledger.ledger_id \
            or not isinstance(size, int) or isinstance(size, bool) or size < 0 \
            or not isinstance(entries, list) or not entries or not all(isinstance(e, str) for e in entries) \
            or not isinstance(files, list) or not all(
                isinstance(f, dict) and f.get("kind") in ("blob", "public", "private")
                and isinstance(f.get("sha256"), str) and isinstance(f.get("label"), str)
                and (f["kind"] == "blob" or isinstance(f.get("dest"), str)) for f in files):
        raise VerificationError(f"the staged operation in {path.parent} is damaged or not for ledger "
                                f"{ledger.ledger_id}; look at it, then remove the folder", file=str(path),
                                expected=ledger.ledger_id, found=intent.get("ledger_id"))
    return intent


def recover_staged(store: Store, ledger: Ledger) -> list[Recovered]:
    """Finish or discard every operation a killed command left for ``ledger``; the caller holds its lock."""
    root = staging_root(store, ledger.ledger_id)
    if not root.is_dir():
        return []
    done: list[Recovered] = []
    for folder in sorted(root.iterdir()):
        if str(folder) in _live or not folder.is_dir():
            continue
        intent_file = folder / INTENT
        operation = folder.name.split("-", 1)[0]
        if not intent_file.is_file():
            _remove(folder)  # staged, never committed: nothing public was written
            done.append(Recovered(operation, folder.name, "discarded"))
            crashpoint("recover.discarded")
            continue
        intent = _read_intent(intent_file, ledger)
        if _committed(ledger, intent):
            _publish(store, folder, intent, step="recover")
            outcome = "finished"
        else:
            outcome = "discarded"
        _remove(folder)
        done.append(Recovered(operation, folder.name, outcome))
        crashpoint(f"recover.{outcome}")
    return done


def logged_but_unpublished(store: Store, ledger: Ledger) -> bool:
    """Whether a staged operation's entries are in ``ledger`` (so its files must be published before anything
    is judged), as :func:`recover_staged` decides, writing nothing: what a reader that cannot recover asks. An
    operation killed before its commit left files nobody logged (recovery discards them): the store is judged as
    it is. A damaged intent counts as logged (it cannot be told apart)."""
    root = staging_root(store, ledger.ledger_id)
    try:
        folders = [f for f in sorted(root.iterdir()) if str(f) not in _live and f.is_dir()]
    except OSError:
        return True
    for folder in folders:
        intent_file = folder / INTENT
        if not intent_file.is_file():
            continue
        try:
            if _committed(ledger, _read_intent(intent_file, ledger)):
                return True
        except (OSError, HeldoutError):
            return True
    return False


def staging_pending(store: Store, ledger_id: str) -> bool:
    """Whether a killed operation left a staging folder for ``ledger_id`` (one ``stat`` when none did)."""
    root = staging_root(store, ledger_id)
    try:
        return root.is_dir() and any(str(p) not in _live for p in root.iterdir())
    except OSError:
        return False


READ_ONLY_ERRNOS = (errno.EROFS, errno.EACCES, errno.EPERM)


class UnpublishedOperation(StorageError):
    """A reader found an operation logged on the ledger whose files (blobs, seal documents) a killed or failed
    command left staged, and could not publish them now: exit 2, nothing judged. Judged as they are, the store
    lacks files its ledger names, which every verdict would call tampering (a full disk is never that)."""

    def __init__(self, store: Store, ledger_id: str, cause: OSError | None) -> None:
        where = staging_root(store, ledger_id)
        if cause is None or cause.errno in READ_ONLY_ERRNOS:
            how = "this store cannot be written (a read-only copy?): run any heldout command on a writable copy " \
                  "first, which publishes them"
        else:
            how = f"publishing them failed: {storage_error(cause).message}; free space (or mend the cause) and run " \
                  "any heldout command, which publishes them"
        super().__init__(f"an operation on ledger {ledger_id} did not finish publishing: its files are still staged "
                         f"in {where}; {how}. Nothing was judged or written", path=str(where))


def recover_if_staged(store: Store, ledger: Ledger, *, read_only_is_done: bool = True) -> list[Recovered]:
    """What a command that opens ``ledger`` runs first: nothing (one ``stat``) unless a killed operation left a
    staging folder; then, under the lock, :func:`recover_staged`. A read-only store is left as it is
    (``read_only_is_done`` False: its error is raised, for the caller to judge)."""
    if not staging_pending(store, ledger.ledger_id):
        return []
    try:
        with ledger_lock(ledger) as outermost:
            return recover_staged(store, ledger) if outermost else []
    except OSError as exc:
        if read_only_is_done and exc.errno in READ_ONLY_ERRNOS:
            return []  # a read-only copy: its reader sees the ledger as committed, its files as they are
        raise
