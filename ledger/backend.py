"""Where ledgers live, and the one way to find, open, create and copy them on either backend.

A :class:`LedgerBackend` is a folder of SQLite ledger files (the embedded default) or a PostgreSQL database
(``postgresql://`` URL, no password in it: ``ledger.postgres``). :func:`backend_at` reads the one text form
both take on the command line. :func:`migrate` copies one ledger to another backend row for row (entries,
tree nodes, signed checkpoints and cosignatures exactly as stored; nothing is re-signed, so no key is needed)
and proves the copy identical before it becomes visible: the copy replays clean, holds the same entry bytes,
and has the same root at every checkpoint size.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from keys import Signer
from ledger import postgres, sqlite
from ledger.errors import LedgerIntegrityError, LedgerUsageError
from ledger.ledger import Ledger, closing_streams
from ledger.storage import CheckpointRow, Fill, LedgerStorage

#: Entries copied per statement batch by :func:`migrate`.
COPY_CHUNK = 5000


@dataclass(frozen=True)
class LedgerBackend:
    """A folder of ``<id>.sqlite`` files, or (``database`` set) a PostgreSQL database of ledger schemas."""

    folder: Path | None = None
    database: str | None = None

    def __post_init__(self) -> None:
        if (self.folder is None) == (self.database is None):
            raise LedgerUsageError("a ledger backend is a folder or a database URL")
        if self.database is not None:
            postgres.database_url(self.database)

    @property
    def description(self) -> str:
        return postgres.display_url(self.database) if self.database is not None else str(self.folder)

    def list_ids(self) -> list[str]:
        if self.database is not None:
            return postgres.list_ids(self.database)
        assert self.folder is not None
        return sqlite.list_ids(self.folder)

    def locate(self, ledger_id_or_prefix: str) -> str:
        """The full id of the one ledger here that an id or unique prefix names."""
        if self.database is not None:
            return postgres.locate(self.database, ledger_id_or_prefix)
        assert self.folder is not None
        return sqlite.locate(self.folder, ledger_id_or_prefix).name.removesuffix(sqlite.LEDGER_SUFFIX)

    def open(self, ledger_id_or_prefix: str, *, read_only: bool = False) -> Ledger:
        """The ledger an id or unique prefix names; ``read_only`` for commands that only read (a SQLite
        ledger is opened so that it is never written; a PostgreSQL session refuses writes)."""
        ledger_id = self.locate(ledger_id_or_prefix)
        if self.database is not None:
            opened = Ledger.open_storage(postgres.open_storage(self.database, ledger_id, read_only=read_only))
        else:
            assert self.folder is not None
            opened = Ledger.open(self.folder / f"{ledger_id}{sqlite.LEDGER_SUFFIX}", read_only=read_only)
        if opened.ledger_id != ledger_id:
            # The id is the genesis entry's hash: a file or schema named for one ledger that holds another's
            # rows (renamed or swapped by whoever holds the database) is not that ledger, whatever it verifies as.
            found = opened.ledger_id
            opened.close()
            raise LedgerIntegrityError(f"the ledger stored as {ledger_id} is ledger {found} (its genesis entry hashes "
                                       "to another id): its file or schema was renamed or swapped", expected=ledger_id,
                                       found=found, location=str(self.database or self.folder))
        return opened

    def create_storage(self, ledger_id: str, fill: Fill) -> LedgerStorage:
        if self.database is not None:
            return postgres.create_storage(self.database, ledger_id, fill)
        assert self.folder is not None
        return sqlite.create_storage(self.folder, ledger_id, fill)

    def create(self, signer: Signer, *, name: str, now: datetime, nonce: bytes | None = None) -> Ledger:
        """A new ledger here: genesis entry and first signed checkpoint, created atomically."""
        return Ledger.create_with(self.create_storage, signer, name=name, now=now, nonce=nonce)


#: ``scheme://``: what a URL begins with (RFC 3986's scheme), never a folder's name as an operator writes one.
_URL_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://.*", re.DOTALL)


def backend_at(text: str) -> LedgerBackend:
    """``postgresql://...`` names a database; any other URL is refused (a mistyped scheme, ``postgresq://``, must
    not become a local folder of that name, reported as a successful copy); anything else is a folder of SQLite
    ledger files."""
    if postgres.is_database_url(text):
        return LedgerBackend(database=text)
    if _URL_SCHEME.fullmatch(text.strip()):
        raise LedgerUsageError("a ledger location is a postgresql:// URL or a folder; this names another kind of "
                               "URL", found=postgres.display_url(text)[:80])
    return LedgerBackend(folder=Path(text))


@dataclass(frozen=True)
class MigrationReport:
    ledger_id: str
    size: int
    checkpoints: int
    cosignatures: int
    source: str
    destination: str

    def to_json(self) -> dict[str, object]:
        return {"ledger_id": self.ledger_id, "size": self.size, "checkpoints": self.checkpoints,
                "cosignatures": self.cosignatures, "source": self.source, "destination": self.destination,
                "identical": True}


#: ``progress(phase, done, total)``: the migration's three phases (source replay, copy, proof of the copy).
MigrationProgress = Callable[[str, int, int], None]


def _silent(phase: str, done: int, total: int) -> None:
    return None


def migrate(source: Ledger, destination: LedgerBackend, *,
            progress: MigrationProgress | None = None) -> MigrationReport:
    """Copy ``source`` into ``destination`` (which must not hold that ledger yet) and prove the copy identical;
    the copy appears only once proven (it is built and checked inside the creation transaction). ``progress``
    hears each phase: the source's replay, the copy (entries written), the replay and comparison of the copy."""
    tick = progress or _silent
    # a copy of a broken log would prove nothing
    source.verify(progress=lambda done, total: tick("verifying the source", done, total))
    if source.ledger_id in destination.list_ids():
        raise LedgerUsageError(f"{destination.description} already holds ledger {source.ledger_id}; a migration "
                               "writes only to a backend without it", found=source.ledger_id)
    counts = {"cosignatures": 0}

    def fill(storage: LedgerStorage) -> None:
        with source.snapshot():
            meta = source.storage.meta()
            storage.insert_meta([(k, v) for k, v in sorted(meta.items())
                                 if k not in ("schema_version", "min_node_level")])
            _copy_rows(source, storage, tick)
            cosignatures = list(source.storage.cosignature_rows())
            storage.insert_cosignatures(cosignatures)
            counts["cosignatures"] = len(cosignatures)
            _prove_identical(source, Ledger(storage), tick)

    copy = Ledger.open_storage(destination.create_storage(source.ledger_id, fill))
    try:
        report = MigrationReport(copy.ledger_id, copy.size, len(copy.checkpoints()), counts["cosignatures"],
                                 source.location, copy.location)
    finally:
        copy.close()
    return report


def _copy_rows(source: Ledger, storage: LedgerStorage, tick: MigrationProgress = _silent) -> None:
    """Entries, nodes and checkpoints in index order, each checkpoint inserted once its entries are (the
    destination's triggers check the same growth rules as on the first write). All three are streamed; the
    nodes come in the order their last entry completes them (``ledger.storage.NODE_ORDER``)."""
    with closing_streams(source.storage.stored_nodes(), source.storage.checkpoint_rows()) as (nodes, checkpoints):
        _copy_streams(source, storage, nodes, checkpoints, tick)


def _copy_streams(source: Ledger, storage: LedgerStorage, nodes: Iterator[tuple[int, int, bytes]],
                  checkpoints: Iterator[CheckpointRow], tick: MigrationProgress) -> None:
    waiting = next(nodes, None)
    done = 0
    for checkpoint in checkpoints:
        size = checkpoint[0]
        while done < size:
            stop = min(size, done + COPY_CHUNK)
            storage.insert_entries(list(source.storage.entry_rows(done, stop)))
            done = stop
            tick("copying", done, source.size)
            ready = []
            while waiting is not None and (waiting[1] + 1) << waiting[0] <= done:
                ready.append(waiting)
                waiting = next(nodes, None)
            storage.insert_nodes(ready)
        storage.insert_checkpoint(checkpoint)
    if done != source.size or waiting is not None:
        raise LedgerIntegrityError("the source holds entries or tree nodes past its last checkpoint",
                                   expected=done, found=source.size)


def _prove_identical(source: Ledger, copy: Ledger, tick: MigrationProgress = _silent) -> None:
    report = copy.verify(expected_id=source.ledger_id,
                         progress=lambda done, total: tick("proving the copy", done, total))
    if report.size != source.size:
        raise LedgerIntegrityError("the copy has another size", expected=source.size, found=report.size)
    for (index, original), (_, copied) in zip(source.entries_bytes(), copy.entries_bytes(), strict=True):
        if original != copied:
            raise LedgerIntegrityError("the copy holds other bytes for an entry", index=index)
    theirs = source.checkpoints()
    ours = copy.checkpoints()
    if [c.note for c in theirs] != [c.note for c in ours]:
        raise LedgerIntegrityError("the copy holds other checkpoints", expected=len(theirs), found=len(ours))
    for checkpoint in theirs:
        if copy.root(checkpoint.size) != source.root(checkpoint.size) or copy.root(checkpoint.size) != \
                checkpoint.root:
            raise LedgerIntegrityError("the copy has another root at a checkpoint size", size=checkpoint.size)
    if list(copy.storage.cosignature_rows()) != list(source.storage.cosignature_rows()):
        raise LedgerIntegrityError("the copy holds other cosignatures")
