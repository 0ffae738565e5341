"""heldout's typed entry records (heldout/entries.py): validated in their constructors with the checks the log
registers, round trips with the log's entries, the registry's refusals, and a log that refuses types nobody
registered."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heldout.entries import (
    RECORD_TYPES,
    BundleEntry,
    EntryRecord,
    SealEntry,
    SpecEntry,
    entry_record,
    records,
)
from ledger import ENTRY_TYPES, EntryRejected, LedgerIntegrityError
from ledger.entries import GENERIC_TYPES, decode_entry, encode_entry, register_entry_type
from seals import canonical_bytes
from tests.test_ledger_entries import VALID, entry
from tests.test_ledger_support import ledger_signer, new_ledger

DOMAIN_TYPES = sorted(set(ENTRY_TYPES) - GENERIC_TYPES)


def test_every_domain_type_has_a_record_and_only_those() -> None:
    assert set(RECORD_TYPES) == set(DOMAIN_TYPES)
    assert {"genesis", "key", "note"} == GENERIC_TYPES
    for kind, cls in RECORD_TYPES.items():
        assert ENTRY_TYPES[kind] == dict(cls.MEMBERS)  # the log checks exactly what the record's constructor does


@pytest.mark.parametrize("kind", DOMAIN_TYPES)
def test_a_record_round_trips_with_its_entry(kind: str) -> None:
    logged = {**entry(kind), "extra_member": {"nested": [1, 2]}}
    record = entry_record(7, logged)
    assert isinstance(record, RECORD_TYPES[kind]) and record.index == 7
    assert record.to_entry() == logged
    assert encode_entry(record.to_entry()) == (kind, canonical_bytes(logged))
    assert record.get("extra_member") == {"nested": [1, 2]}


@pytest.mark.parametrize("kind, member", [(k, m) for k in DOMAIN_TYPES for m in RECORD_TYPES[k].MEMBERS])
def test_a_record_with_a_bad_member_does_not_exist(kind: str, member: str) -> None:
    cls = RECORD_TYPES[kind]
    bad = {**VALID[kind], member: 12345678 if isinstance(VALID[kind][member], str) else "not a count"}
    with pytest.raises(EntryRejected, match=member) as caught:
        cls(index=3, **bad)
    assert caught.value.evidence["field"] == member and caught.value.evidence["index"] == 3
    with pytest.raises(EntryRejected, match=member):  # and the log refuses the same entry
        encode_entry({"type": kind, "v": 1, **bad})


@pytest.mark.parametrize("kind", DOMAIN_TYPES)
def test_a_record_from_an_entry_of_another_type_or_lacking_a_member_is_refused(kind: str) -> None:
    cls = RECORD_TYPES[kind]
    other = next(k for k in DOMAIN_TYPES if k != kind)
    with pytest.raises(EntryRejected, match=f"not a {kind} entry"):
        cls.from_entry(entry(other), index=1)
    lacking = entry(kind)
    member = next(iter(cls.MEMBERS))
    del lacking[member]
    with pytest.raises(EntryRejected, match=member):
        cls.from_entry(lacking, index=1)


def test_an_extra_member_cannot_shadow_a_required_one() -> None:
    with pytest.raises(EntryRejected, match="generation"):
        RECORD_TYPES["retire"](generation="gen1", reason="leaked", created_utc="2026-03-01T00:00:00Z",
                    extra={"generation": "gen2"})
    with pytest.raises(EntryRejected, match="version"):
        SealEntry.from_entry({**entry("seal"), "v": 0})


def test_generic_entries_have_no_record_and_records_filter_by_type() -> None:
    pairs = [(0, entry("genesis")), (1, entry("note")), (2, entry("seal")), (3, entry("bundle")),
             (4, entry("spec")), (5, entry("bundle"))]
    assert entry_record(0, entry("genesis")) is None and entry_record(1, entry("note")) is None
    bundles = records(pairs, BundleEntry)
    assert [b.index for b in bundles] == [3, 5] and all(isinstance(b, BundleEntry) for b in bundles)
    assert [type(r).__name__ for r in records(pairs)] == ["SealEntry", "BundleEntry", "SpecEntry", "BundleEntry"]
    spec = records(pairs, SpecEntry)[0]
    assert spec.effective.year == 2027 and spec.created.year == 2026


def test_the_registry_refuses_a_redefinition() -> None:
    register_entry_type("seal", SealEntry.MEMBERS, SealEntry.OPTIONAL)  # the same definition again: a no-op
    with pytest.raises(ValueError, match="another definition"):
        register_entry_type("seal", {"generation": SealEntry.MEMBERS["generation"]})
    with pytest.raises(ValueError, match="another definition"):
        register_entry_type("note", {"text": SealEntry.MEMBERS["generation"]})
    with pytest.raises(ValueError, match="lowercase ASCII"):
        register_entry_type("bad type!", {"x": SealEntry.MEMBERS["generation"]})
    assert "frobnicate" not in ENTRY_TYPES


def test_attack_a_log_refuses_an_unregistered_type_on_append_and_on_replay(tmp_path: Path) -> None:
    crafted = {"type": "frobnicate", "v": 1, "created_utc": "2026-03-01T00:00:00Z"}
    with pytest.raises(EntryRejected, match="unknown entry type"):
        encode_entry(crafted)
    with pytest.raises(LedgerIntegrityError, match="unknown entry type"):
        decode_entry(canonical_bytes(crafted), index=4)
    ledger = new_ledger(tmp_path, entries=2)
    with ledger:
        size = ledger.size
        with pytest.raises(EntryRejected):
            ledger.append(crafted, signer=ledger_signer(), now=datetime(2026, 3, 2, tzinfo=UTC))
        assert ledger.size == size


hex64 = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
text = st.text(min_size=1, max_size=40).filter(lambda t: t.isprintable())
utc = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2099, 1, 1)).map(
    lambda d: d.strftime("%Y-%m-%dT%H:%M:%SZ"))


@settings(max_examples=60, deadline=None)
@given(generation=text, model=text, task=text, evaluation=hex64, predictions=hex64, created=utc,
       bits=st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_bundle_records_round_trip_through_the_log_bytes(generation: str, model: str, task: str, evaluation: str,
                                                          predictions: str, created: str, bits: float) -> None:
    record = BundleEntry(generation=generation, model_id=model, task=task, evaluation_sha256=evaluation,
                         predictions_sha256=predictions, created_utc=created, extra={"leakage_bits": bits})
    kind, data = encode_entry(record.to_entry())
    back = entry_record(9, decode_entry(data, index=9))
    assert kind == "bundle" and isinstance(back, BundleEntry)
    assert (back.generation, back.model_id, back.task, back.created_utc) == (generation, model, task, created)
    assert isinstance(back, EntryRecord) and back.index == 9


def test_a_record_reads_its_members_like_the_entry() -> None:
    record = BundleEntry.from_entry({**entry("bundle"), "leakage_bits": 3.5}, index=4)
    assert record["task"] == "pathmnist" == record.get("task") and record["leakage_bits"] == 3.5
    assert "task" in record and "leakage_bits" in record and "release" not in record
    assert record.get("release", "absent") == "absent"
    with pytest.raises(KeyError):
        record["release"]
