"""Entries: every type's required members, the canonical bytes (the C-encoder shortcut must equal
seals.canonical_bytes everywhere), decoding stored bytes, blob references."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keys import MalformedInput
from ledger import ENTRY_TYPES, EntryRejected, LedgerIntegrityError, blob_references
from ledger.entries import decode_entry, encode_entry, entry_canonical_bytes
from seals import canonical_bytes
from tests.conftest import seeded_signer
from tests.test_ledger_support import hexhash

KEY = {"key_id": "k-1", "name": "issuer", "public_key_b64": seeded_signer(30).public_key.b64}
VALID: dict[str, dict[str, Any]] = {
    "genesis": {"name": "ledger", "key": KEY, "created_utc": "2026-03-01T00:00:00Z", "nonce": hexhash("n")},
    "key": {"key": KEY, "role": "passport-issuer", "created_utc": "2026-03-01T00:00:00Z"},
    "seal": {"generation": "gen3", "manifest_sha256": hexhash("m"), "set_hash": hexhash("s"),
             "expiry_utc": "2027-03-01T00:00:00Z", "created_utc": "2026-03-01T00:00:00Z"},
    "bundle": {"generation": "gen3", "model_id": "m", "task": "pathmnist", "evaluation_sha256": hexhash("e"),
               "predictions_sha256": hexhash("p"), "created_utc": "2026-03-01T00:00:00Z"},
    "retire": {"generation": "gen1", "reason": "leaked", "created_utc": "2026-03-01T00:00:00Z"},
    "reveal": {"generation": "gen1", "reveal_sha256": hexhash("r"), "created_utc": "2026-03-01T00:00:00Z"},
    "passport": {"model_id": "m", "generation": "gen3", "passport_sha256": hexhash("x"),
                 "created_utc": "2026-03-01T00:00:00Z"},
    "spec": {"spec_version": "MedEval-1 v0.1", "superseded_by": "MedEval-1 v0.2",
             "effective_utc": "2027-01-01T00:00:00Z", "created_utc": "2026-03-01T00:00:00Z"},
    "note": {"text": "the gen1 pool was re-scanned", "created_utc": "2026-03-01T00:00:00Z"},
    "pool": {"task": "pathmnist", "pool_root": hexhash("pool"), "pool_size": 900,
             "created_utc": "2026-03-01T00:00:00Z"},
    "intent": {"generation": "gen3", "tasks": {"pathmnist": 100}, "pools": {"pathmnist": 4},
               "expiry_utc": "2027-03-01T00:00:00Z", "created_utc": "2026-03-01T00:00:00Z"},
}


def entry(kind: str) -> dict[str, Any]:
    return {"type": kind, "v": 1, **VALID[kind]}


def test_the_examples_cover_every_type() -> None:
    assert set(VALID) == set(ENTRY_TYPES)


@pytest.mark.parametrize("kind", sorted(ENTRY_TYPES))
def test_each_type_is_accepted_where_it_belongs(kind: str) -> None:
    index = 0 if kind == "genesis" else 5
    assert encode_entry(entry(kind), index=index) == (kind, canonical_bytes(entry(kind)))
    with pytest.raises(EntryRejected, match="genesis"):
        encode_entry(entry(kind), index=5 if kind == "genesis" else 0)


@pytest.mark.parametrize("kind, member", [(k, m) for k in sorted(ENTRY_TYPES) for m in ENTRY_TYPES[k]])
def test_each_required_member_is_required(kind: str, member: str) -> None:
    broken = entry(kind)
    del broken[member]
    with pytest.raises(EntryRejected, match=member) as caught:
        encode_entry(broken)
    assert caught.value.evidence["field"] == member and caught.value.exit_code == 2


@pytest.mark.parametrize("key", [
    {"key_id": "k", "name": "has space", "public_key_b64": KEY["public_key_b64"]},
    {"key_id": "k", "name": "n", "public_key_b64": "AAAA"},
    {"name": "n", "public_key_b64": KEY["public_key_b64"]},
    "not an object",
])
def test_keys_in_entries_are_checked(key: Any) -> None:
    with pytest.raises(EntryRejected, match="key"):
        encode_entry({**entry("key"), "key": key})


@pytest.mark.parametrize("kind, member, value", [
    ("pool", "pool_size", 0), ("pool", "pool_size", True), ("pool", "pool_root", "AB" * 32),
    ("intent", "tasks", {}), ("intent", "tasks", {"pathmnist": 0}), ("intent", "pools", {"pathmnist": "4"}),
])
def test_commit_then_draw_entries_are_checked(kind: str, member: str, value: Any) -> None:
    with pytest.raises(EntryRejected, match=member):
        encode_entry({**entry(kind), member: value})


@pytest.mark.parametrize("kind, member, value", [
    ("bundle", "leakage_bits", False), ("bundle", "leakage_bits", "0"), ("bundle", "leakage_bits", -1),
    ("bundle", "family", ["foundation"]), ("bundle", "seed", True), ("bundle", "seed", 1.5),
    ("bundle", "spec_version", None), ("bundle", "n_test", 0), ("bundle", "labels_hash", "AB" * 32),
    ("bundle", "release", "ladder"), ("seal", "budget_bits", True), ("seal", "membership", "open"),
    ("seal", "statement_bits", None), ("reveal", "n_cases", "60"),
])
def test_optional_members_have_one_json_type(kind: str, member: str, value: Any) -> None:
    """An optional member, where present, has the form FORMATS section 3 gives it, as a required one does:
    ``false`` where a number goes would be 0 to one verifier and not a number to another."""
    with pytest.raises(EntryRejected, match=member):
        encode_entry({**entry(kind), member: value})


def test_impossible_dates_are_refused() -> None:
    with pytest.raises(EntryRejected, match="calendar"):
        encode_entry({**entry("retire"), "created_utc": "2026-02-30T00:00:00Z"})


def test_non_json_values_are_refused() -> None:
    with pytest.raises(EntryRejected, match="not canonical"):
        encode_entry({**entry("retire"), "score": float("nan")})
    with pytest.raises(EntryRejected, match="surrogate"):
        encode_entry({**entry("retire"), "\ud800": 1})
    with pytest.raises(EntryRejected):
        encode_entry({**entry("retire"), "big": 2**60})


# --- the canonical-bytes shortcut ----------------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["\u2028", "\x7f", "\x00\x1f", "\ud800", "\U0001f600", "\ue000", '"\\/', "\b\f\n\r\t"]),
)
json_keys = st.one_of(st.text(max_size=6), st.sampled_from(["\ue000", "\U0001f600", "a", "A", "é", "\ud800"]))
json_values = st.recursive(json_scalars, lambda children: st.one_of(
    st.lists(children, max_size=4), st.dictionaries(json_keys, children, max_size=4),
    st.tuples(children, children)), max_leaves=20)


def entry_reference_bytes(value: object) -> bytes:
    # ledger entries also refuse integral numbers beyond 2^53 (issue 9), so the reference refuses them too
    return canonical_bytes(value, exact_integers=True)


def _outcome(function: Any, value: Any) -> bytes | str:
    try:
        return function(value)
    except MalformedInput:
        return "refused"
    except UnicodeError:  # seals.jcs_bytes lets a lone-surrogate member name through as UnicodeEncodeError
        return "refused (unicode)"


@settings(max_examples=1500, deadline=None)
@given(json_values)
def test_shortcut_equals_seals_canonical_bytes(value: Any) -> None:
    assert _outcome(entry_canonical_bytes, value) == _outcome(entry_reference_bytes, value)


@pytest.mark.parametrize("value", [
    {"\ue000": 1, "\U0001f600": 2},   # UTF-16 order differs from code-point order: falls back
    {"b": "\ud800"},                  # lone surrogate: refused by both
    {"a": [True, False, None, 0, -1, 2**53 - 1]},
    {"x": "\u2028\x7f\x00\x1f\"\\"},
    {"f": 0.1 + 0.2, "g": -0.0, "h": 1e21},
    {"t": (1, 2)},
])
def test_shortcut_edge_cases(value: Any) -> None:
    assert _outcome(entry_canonical_bytes, value) == _outcome(entry_reference_bytes, value)


def test_decode_insists_on_canonical_valid_bytes() -> None:
    data = canonical_bytes(entry("retire"))
    assert decode_entry(data, index=3) == entry("retire")
    for bad in (data.replace(b",", b", ", 1), data[:-1], b"\xff", canonical_bytes({**entry("retire"), "v": 0})):
        with pytest.raises(LedgerIntegrityError) as caught:
            decode_entry(bad, index=3)
        assert caught.value.evidence["index"] == 3


def test_blob_references_are_the_sha256_members() -> None:
    bundle = {**entry("bundle"), "extra": {"figure_sha256": hexhash("f"), "nested": [{"data_sha256": hexhash("d")}]},
              "not_a_hash_sha256": "xyz"}
    assert blob_references(bundle) == [hexhash("e"), hexhash("p"), hexhash("f"), hexhash("d")]


# --- the lean validation pass ---------------------------------------------------------------------------------

def _mutated_entry(draw: st.DrawFn) -> tuple[Any, int | None]:
    """A valid entry of any type with one member replaced, removed or retyped (or the whole thing replaced),
    at an index that may or may not suit it."""
    import heldout.entries  # noqa: F401  (the domain types are registered)

    kind = draw(st.sampled_from(sorted(VALID)))
    value: Any = entry(kind)
    members = sorted(value)
    how = draw(st.sampled_from(["keep", "drop", "replace", "optional", "whole", "subclass"]))
    if how == "optional":  # an optional member (a note's blob reference, a bundle's charge), well formed or not
        member = draw(st.sampled_from(["blob_sha256", "leakage_bits", "seed", "family", "n_test"]))
        value[member] = draw(st.sampled_from([hexhash("b"), hexhash("b")[:63], 7, 0, 1.5, -1, None, True, "x"]))
    elif how == "drop":
        del value[draw(st.sampled_from(members))]
    elif how == "replace":
        value[draw(st.sampled_from(members))] = draw(json_values | st.sampled_from(
            [True, 0, -1, 1.0, "", "x" * 257, "2026-02-30T00:00:00Z", hexhash("a").upper(), {}, {"a": 0}]))
    elif how == "whole":
        value = draw(json_values)
    elif how == "subclass":
        value = type("Entry", (dict,), {})(value)
    return value, draw(st.none() | st.integers(min_value=0, max_value=2))


@settings(max_examples=1500, deadline=None)
@given(st.data())
def test_the_lean_validation_pass_accepts_exactly_what_the_full_path_accepts(data: st.DataObject) -> None:
    """``_entry_is_valid`` (the replay's and the append's per-entry check) says yes only where the full path,
    which names the fault, passes; and on plain dicts it says no only where the full path refuses."""
    from ledger.entries import _entry_is_valid, _validate_entry_naming_the_fault

    value, index = _mutated_entry(data.draw)
    try:
        _validate_entry_naming_the_fault(value, index)
        passes = True
    except EntryRejected:
        passes = False
    lean = _entry_is_valid(value, index)
    assert not lean or passes, (value, index)
    if type(value) is dict:
        assert lean == passes, (value, index)


@settings(max_examples=600, deadline=None)
@given(st.data())
def test_the_batch_validation_pass_accepts_exactly_what_each_entry_passes(data: st.DataObject) -> None:
    """``_entries_are_valid`` (the replay's check of a whole chunk, a member at a time) says yes exactly where
    every entry passes ``_entry_is_valid`` at its own index: chunks of mutated entries of every type, mixed
    or of one type, starting at index 0 (genesis) or later."""
    from ledger.entries import _entries_are_valid, _entry_is_valid

    first = data.draw(st.sampled_from([0, 1, 5]))
    kinds = data.draw(st.lists(st.sampled_from(sorted(VALID)), min_size=1, max_size=6)
                      | st.sampled_from(sorted(VALID)).map(lambda kind: [kind] * 4))
    entries: list[Any] = [entry(kind) for kind in kinds]
    if first == 0 and data.draw(st.booleans()):
        entries[0] = entry("genesis")
    for _ in range(data.draw(st.integers(0, 2))):
        position = data.draw(st.integers(0, len(entries) - 1))
        entries[position] = _mutated_entry(data.draw)[0]
    each = all(_entry_is_valid(value, first + k) for k, value in enumerate(entries))
    assert _entries_are_valid(entries, first) == (each and all(type(value) is dict for value in entries)), \
        (first, entries)


@pytest.mark.parametrize("member_value", [
    ("reason", "x" * 256), ("reason", "x" * 257), ("reason", ""), ("generation", "\u00e9"),
    ("created_utc", "2026-02-29T00:00:00Z"), ("created_utc", "2028-02-29T00:00:00Z"), ("v", True), ("v", 0)])
def test_the_batch_validation_pass_edges(member_value: tuple[str, Any]) -> None:
    from ledger.entries import _entries_are_valid, _entry_is_valid

    member, value = member_value
    entries = [entry("retire"), {**entry("retire"), member: value}, entry("retire")]
    assert _entries_are_valid(entries, 3) == all(_entry_is_valid(e, 3 + k) for k, e in enumerate(entries))
    bundles = [entry("bundle"), {**entry("bundle"), "evaluation_sha256": hexhash("e").upper()}]
    assert not _entries_are_valid(bundles, 3)
    assert _entries_are_valid([entry("genesis"), *entries[:1]], 0)
    assert not _entries_are_valid(entries, 0)


def _nested(depth: int, leaf: Any) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("with_float", [False, True], ids=["plain path", "float path"])
def test_the_append_refuses_an_entry_nested_deeper_than_every_reader_reads(tmp_path: Any, with_float: bool) -> None:
    """An entry nested past 64 levels was signed (through the library) and then refused by every reader: one
    append left an append-only log its own verify and export called damaged. The writer and the readers apply
    one limit, on both encoding paths (plain entries; entries with a float, written by rfc8785)."""
    from seals import format_utc
    from tests.test_ledger_support import T0, ledger_signer, new_ledger

    signer = ledger_signer()
    with new_ledger(tmp_path / "log", signer) as ledger:
        accepted = {}
        for depth in (61, 62, 63, 64, 70):
            entry = {"type": "note", "v": 1, "text": "deep", "created_utc": format_utc(T0),
                     "extra": _nested(depth, 0.5 if with_float else "x")}
            try:
                ledger.append(entry, signer=signer, now=T0)
                accepted[depth] = True
            except EntryRejected as exc:
                assert "nested" in exc.message
                accepted[depth] = False
        assert accepted == {61: True, 62: True, 63: True, 64: False, 70: False}  # the entry object is level 1
        ledger.verify()  # what was signed, every reader reads
        for index in range(1, ledger.size):
            decode_entry(ledger.entry_bytes(index), index=index)
