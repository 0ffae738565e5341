"""Where an audit reads from: the operator's store (ledger database, blobs, seal manifests, and the private
openings that hold the labels of still-sealed generations) or a public export (entries, checkpoints, blobs,
public keys and seal manifests only). Both present one interface to the checks."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from heldout.generations import GenerationState, RevealDocument, load_opening, manifest_path
from heldout.generations.access import noise_path, opening_path, withheld_blobs_path
from heldout.generations.seal import reveal_path
from heldout.store import Store
from keys import HeldoutError, IncompleteError, TrustedKey, UsageError, VerificationError
from keys.files import read_private_file
from keys.safeio import DOCUMENT_LIMIT, read_in
from ledger import BlobMissing, BlobStore, Checkpoint, Ledger, ReplayReport
from ledger.export import CHECKPOINTS, ENTRIES, SEALS
from ledger.log import LogReader
from ledger.policy import Policy
from ledger.public import PublicLog, open_public_log
from ledger.replay import EntryFn, ProgressFn
from seals import sha256_hex


class AuditSource(Protocol):
    """The log (``log``: any :class:`ledger.log.LogReader`: entries, roots, proofs), how it is replayed, its
    checkpoints with their cosignatures, its blobs, the files findings name, and the documents beside it."""

    mode: str
    ledger_id: str
    origin: str
    log: LogReader

    def replay(self, progress: ProgressFn | None, on_entry: EntryFn | None = None) -> ReplayReport: ...

    def checkpoints(self) -> list[Checkpoint]: ...

    @property
    def entries_file(self) -> str: ...

    def checkpoint_file(self, size: int) -> str: ...

    def blob(self, digest: str) -> bytes: ...

    def blob_file(self, digest: str) -> str: ...

    def has_blob(self, digest: str) -> bool: ...

    def seal_manifest(self, generation: str) -> tuple[bytes, str]: ...

    def published_reveal(self, generation: str) -> tuple[bytes, str] | None: ...

    def private_opening(self, state: GenerationState) -> RevealDocument: ...

    def noise_secret(self, state: GenerationState) -> bytes: ...

    def extra_keys(self) -> list[TrustedKey]: ...

    def export_problems(self) -> Iterator[HeldoutError]: ...

    def stray_seal_files(self, entries: Iterable[tuple[int, Mapping[str, Any]]]) -> Iterator[HeldoutError]:
        """Files of the published ``seals/`` named as no logged seal manifest or reveal (those that are named are
        checked by the seal and reveal checks)."""
        ...

    def witness_policy(self) -> Policy | None:
        """The witness policy this source answers to by default (the operator's store's; none for exports)."""
        ...


class OperatorSource:
    """The operator's own store: everything, including the private openings (labels of sealed sets)."""

    mode = "operator"

    def __init__(self, store: Store, ledger: Ledger) -> None:
        self.store = store
        self.ledger = ledger
        self.log: LogReader = ledger
        self.ledger_id = ledger.ledger_id
        self.origin = ledger.origin
        self.blobs = BlobStore(store.blobs)
        self.withheld = BlobStore(withheld_blobs_path(store, ledger.ledger_id))

    def replay(self, progress: ProgressFn | None, on_entry: EntryFn | None = None) -> ReplayReport:
        return self.ledger.verify(expected_id=self.ledger_id, progress=progress, on_entry=on_entry)

    def checkpoints(self) -> list[Checkpoint]:
        return self.ledger.cosigned_checkpoints()

    @property
    def entries_file(self) -> str:
        return self._relative(self.ledger.path)

    def checkpoint_file(self, size: int) -> str:
        return self._relative(self.ledger.path)  # the checkpoints live in the same database

    def _relative(self, path: Path | None) -> str:
        if path is None:  # a ledger in a database server: its URL (no password) and schema
            return self.ledger.location
        try:
            return str(path.relative_to(self.store.root))
        except ValueError:
            return str(path)

    def _holder(self, digest: str) -> BlobStore:
        """The published blobs, else the ones withheld until their generation is retired (operator only)."""
        return self.withheld if not self.blobs.has(digest) and self.withheld.has(digest) else self.blobs

    def blob(self, digest: str) -> bytes:
        # The published copy is read at once (one confined walk, not a check and then a read); only when it is
        # absent are the withheld blobs asked, as _holder does.
        try:
            return self.blobs.get(digest)
        except BlobMissing:
            if not self.withheld.has(digest):
                raise
        return self.withheld.get(digest)

    def blob_file(self, digest: str) -> str:
        return str(self._holder(digest).path(digest).relative_to(self.store.root))

    def has_blob(self, digest: str) -> bool:
        return self.blobs.has(digest) or self.withheld.has(digest)

    def seal_manifest(self, generation: str) -> tuple[bytes, str]:
        path = manifest_path(self.store, generation)
        data = self._read(path, "seal manifest")
        if data is None:
            raise HeldoutError(f"the seal manifest of {generation} is missing", file=str(path))
        return data, str(path.relative_to(self.store.root))

    def published_reveal(self, generation: str) -> tuple[bytes, str] | None:
        path = reveal_path(self.store, generation)
        data = self._read(path, "reveal")
        return (data, self._relative(path)) if data is not None else None

    def _read(self, path: Path, what: str) -> bytes | None:
        # the store is read like an export: confined, regular files only, bounded (keys.safeio)
        return read_in(self.store.root, str(path.relative_to(self.store.root)), limit=DOCUMENT_LIMIT, what=what)

    def private_opening(self, state: GenerationState) -> RevealDocument:
        try:
            return load_opening(self.store, self.ledger_id, state)
        except IncompleteError:
            raise
        except HeldoutError as exc:  # name the damaged file (its path holds only the public set hash)
            file = self._relative(opening_path(self.store, self.ledger_id, state.name, state.set_hash))
            raise VerificationError(exc.message, file=file,
                                    **{k: v for k, v in exc.evidence.items() if k not in ("index", "file")}) from None

    def noise_secret(self, state: GenerationState) -> bytes:
        digest = str(state.release.get("noise_sha256"))
        if self.blobs.has(digest):
            return self.blobs.get(digest)
        data = read_private_file(noise_path(self.store, self.ledger_id, state.name, state.set_hash))
        if sha256_hex(data) != digest:
            raise VerificationError(f"the Thresholdout noise secret of {state.name} is not the one its seal commits",
                                    expected=digest, found=sha256_hex(data), index=state.seal_index)
        return data

    def extra_keys(self) -> list[TrustedKey]:
        return []

    def export_problems(self) -> Iterator[HeldoutError]:
        return iter(())  # the operator's own store has no export manifest

    def stray_seal_files(self, entries: Iterable[tuple[int, Mapping[str, Any]]]) -> Iterator[HeldoutError]:
        return iter(())  # the store's seals/ is the operator's working folder, not a publication
    def witness_policy(self) -> Policy | None:
        from heldout.witness.operator import configured_policy

        return configured_policy(self.store)


class ExportSource:
    """A third party's copy: the public export (or tiles directory or URL) alone. Labels exist only for revealed
    (and public) sets."""

    mode = "third-party"

    def __init__(self, export: PublicLog, expected_id: str) -> None:
        self.export = export
        self.log: LogReader = export
        self.expected_id = expected_id  # the id the auditor pinned: the replay checks entry 0 hashes to it
        self.ledger_id = expected_id
        self.origin = export.origin

    @classmethod
    def open(cls, source: str | Path, expected_id: str) -> ExportSource:
        return cls(open_public_log(source), expected_id)

    def replay(self, progress: ProgressFn | None, on_entry: EntryFn | None = None) -> ReplayReport:
        # the manifest's other members are reported one by one (export_problems), not as the replay's failure
        return self.export.verify(expected_id=self.expected_id, progress=progress, check_blobs=False,
                                  check_manifest=False, on_entry=on_entry)

    def checkpoints(self) -> list[Checkpoint]:
        return self.export.checkpoints()

    @property
    def entries_file(self) -> str:
        return ENTRIES

    def checkpoint_file(self, size: int) -> str:
        return f"{CHECKPOINTS}/{size}.note"

    def blob(self, digest: str) -> bytes:
        return self.export.blob(digest)

    def blob_file(self, digest: str) -> str:
        return self.export.blob_file(digest)

    def has_blob(self, digest: str) -> bool:
        return self.export.has_blob(digest)

    def seal_manifest(self, generation: str) -> tuple[bytes, str]:
        name = f"{generation}.seal.json"
        try:
            return self.export.seal_bytes(name), f"seals/{name}"
        except HeldoutError as exc:
            raise HeldoutError(f"the seal manifest of {generation} is not in the export", file=f"seals/{name}",
                               cause=exc.message) from None

    def published_reveal(self, generation: str) -> tuple[bytes, str] | None:
        name = f"{generation}.reveal.json"
        if not self.export.has_seal(name):
            return None
        return self.export.seal_bytes(name), f"{SEALS}/{name}"

    def private_opening(self, state: GenerationState) -> RevealDocument:
        raise IncompleteError(f"generation {state.name} is still sealed: its labels are not revealed, so a third "
                              "party cannot re-derive its bundles", index=state.seal_index)

    def noise_secret(self, state: GenerationState) -> bytes:
        digest = str(state.release.get("noise_sha256"))
        if not self.export.has_blob(digest):
            if state.retire_index is not None:  # retirement publishes it: without it no answer can be checked
                raise VerificationError(f"{state.name} is retired but its Thresholdout noise secret is not "
                                        "published", index=state.retire_index, field="noise_sha256", found=digest)
            raise IncompleteError(f"the Thresholdout noise secret of {state.name} is published only at retirement",
                                  index=state.seal_index)
        return self.export.blob(digest)

    def extra_keys(self) -> list[TrustedKey]:
        return []

    def export_problems(self) -> Iterator[HeldoutError]:
        return self.export.manifest_problems()

    def stray_seal_files(self, entries: Iterable[tuple[int, Mapping[str, Any]]]) -> Iterator[HeldoutError]:
        from heldout.generations.verify import published_seal_problems

        return published_seal_problems(self.export, entries, named_too=False)
    def witness_policy(self) -> Policy | None:
        return None  # a third party names the witnesses it trusts (--policy); the export cannot


def operator_source(store: Store, ledger_id: str | None) -> OperatorSource:
    from heldout.generations import open_ledger

    if not store.ledgers.is_dir():
        raise UsageError(f"no ledgers in the store at {store.root}", store=str(store.root))
    return OperatorSource(store, open_ledger(store, ledger_id, read_only=True))
