"""Generic entries an operator appends by hand (``heldout ledger append``): ``note`` (free text, optional blob
reference: incident reports, annotations) and ``key`` (declaring another signing key).

Domain entries (seal, bundle, retire, reveal, passport, spec, pool, intent) are written only by their own
operations, which check them against the ledger; this module refuses them. Many entries given at once (a JSON
Lines file) are appended as one batch under one signed checkpoint: all or none, under the same lock as every
other operation, so a bulk load never interleaves with a seal or an evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from heldout.generations.ledgers import generations_lock, ledger_signer, open_ledger
from heldout.store import Store
from keys import MalformedInput
from ledger import EntryRejected
from ledger.entries import RAW_APPEND_TYPES, check_key_declaration, validate_entry
from seals import format_utc, parse_json_object


@dataclass(frozen=True)
class AppendedEntries:
    """What a generic append logged: the entries' indices and the checkpoint that covers them."""

    indices: tuple[int, ...]
    size: int
    root_hex: str
    entry_type: str

    def to_json(self) -> dict[str, Any]:
        first = self.indices[0]
        return {"index": first, "indices": list(self.indices), "count": len(self.indices), "size": self.size,
                "root": self.root_hex, "type": self.entry_type}


def check_generic_type(entry_type: str) -> str:
    if entry_type not in RAW_APPEND_TYPES:
        raise EntryRejected(
            f"ledger append writes only generic entries ({', '.join(sorted(RAW_APPEND_TYPES))}); a {entry_type!r} "
            "entry is appended by its own command (init, seal, evaluate, retire, passport issue, spec "
            "supersede), which checks it against the ledger", field="type", expected=sorted(RAW_APPEND_TYPES),
            found=entry_type[:60])
    return entry_type


def parse_jsonl(data: bytes, *, what: str) -> list[dict[str, Any]]:
    """One JSON object per line (a final newline optional); a blank or malformed line is refused naming it."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if not lines:
        raise EntryRejected(f"{what} holds no entry", field="jsonl")
    objects = []
    for number, line in enumerate(lines, start=1):
        try:
            objects.append(parse_json_object(line, what=f"{what} line {number}"))
        except MalformedInput as exc:
            raise EntryRejected(exc.message, **{**exc.evidence, "input_line": number}) from None
    return objects


def complete_entries(entry_type: str, objects: Sequence[Mapping[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """``type`` from ``entry_type`` (a different one in an object is refused), ``v`` 1 and ``created_utc`` the
    reference time where absent; each entry's shape checked before anything is written."""
    check_generic_type(entry_type)
    entries = []
    for position, body in enumerate(objects, start=1):
        if "type" in body and body["type"] != entry_type:
            raise EntryRejected(f"entry {position} of the input: its type {str(body['type'])[:60]!r} differs from "
                                f"--type {entry_type}", field="type", input_line=position, expected=entry_type,
                                found=str(body["type"])[:60])
        entry = {"type": entry_type, "v": 1, "created_utc": format_utc(now), **body}
        try:
            validate_entry(entry)
        except EntryRejected as exc:
            raise EntryRejected(f"entry {position} of the input: {exc.message}",
                                **{**exc.evidence, "input_line": position}) from None
        entries.append(entry)
    return entries


def append_generic(store: Store, ledger_id: str | None, entry_type: str, objects: Sequence[Mapping[str, Any]], *,
                   now: datetime, key_id: str | None = None, expected_size: int | None = None) -> AppendedEntries:
    """Append ``objects`` as ``entry_type`` entries, one batch, one checkpoint (all or none). A ``key`` entry
    must declare a key id the ledger (or an earlier entry of the batch) does not declare yet. ``expected_size``:
    append only onto a ledger of exactly that many entries (:class:`ledger.AppendConflict` otherwise, nothing
    written), so that re-running a batch whose first run was killed after its commit cannot log it twice."""
    entries = complete_entries(entry_type, objects, now)
    with open_ledger(store, ledger_id) as ledger:
        signer = store.load_signer(key_id) if key_id is not None else ledger_signer(store, ledger)
        with generations_lock(ledger, store):
            if entry_type == "key":
                history: list[tuple[int, Mapping[str, Any]]] = list(ledger.entries())
                for entry in entries:
                    check_key_declaration(entry, history)
                    history.append((len(history), entry))
            indices = ledger.append_batch(entries, signer=signer, now=now, expected_size=expected_size)
            checkpoint = ledger.latest_checkpoint()
    return AppendedEntries(indices=tuple(indices), size=checkpoint.size, root_hex=checkpoint.root.hex(),
                           entry_type=entry_type)
