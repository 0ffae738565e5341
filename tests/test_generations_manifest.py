"""The seal manifest model: validated in its constructor, exact JSON round trips, signed and verified."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keys import InvalidSignature, MalformedInput, UntrustedKey
from seals import canonical_bytes, parse_json_object
from seals.manifest import (
    COMMITMENT_SCHEME,
    LeakageBudget,
    ReleasePolicy,
    SealManifest,
    TaskCount,
    manifest_bytes,
    manifest_sha256,
)
from tests.conftest import seeded_signer

T0 = datetime(2026, 9, 1, tzinfo=UTC)


def budget(bits: float | None = 60.168969, basis: str = "default") -> LeakageBudget:
    return LeakageBudget(bits=bits, basis=basis, n=10_000, k=100, delta=0.05, eps=0.05 if bits is not None else None,
                         rule="test rule")


def manifest(**changes: object) -> SealManifest:
    fields: dict[str, object] = dict(
        generation="gen3", membership="sealed",
        tasks=(TaskCount("bloodmnist", 500), TaskCount("breastmnist", 500)), set_hash="ab" * 32,
        created=T0, expiry=T0 + timedelta(days=180), leakage_budget=budget(), release=ReleasePolicy(),
        seed=20260727, predecessor="gen2", ledger_id="0123456789abcdef0123", entry_index=7)
    fields.update(changes)
    return SealManifest(**fields)  # type: ignore[arg-type]


def test_manifest_records_the_design_fields() -> None:
    body = manifest().to_json()
    for member in ("generation", "spec_version", "tasks", "set_hash", "commitment_scheme", "created_utc",
                   "expiry_utc", "leakage_budget", "seed", "predecessor", "ledger_id", "entry_index"):
        assert member in body
    assert body["spec_version"] == "MedEval-1 v0.1"
    assert body["commitment_scheme"] == COMMITMENT_SCHEME
    assert body["tasks"] == {"bloodmnist": {"cases": 500}, "breastmnist": {"cases": 500}}
    assert body["n_cases"] == 1000


def test_signed_manifest_verifies_and_round_trips() -> None:
    signer = seeded_signer(1)
    original = manifest()
    signed = original.sign(signer)
    assert SealManifest.verify(signed, signer.public_key) == original
    # The published bytes are canonical: parse and re-canonicalise gives the same bytes and hash.
    data = manifest_bytes(signed)
    assert canonical_bytes(parse_json_object(data)) == data
    assert manifest_sha256(signed) == manifest_sha256(parse_json_object(data))


@pytest.mark.parametrize("member, value", [
    ("set_hash", "cd" * 32), ("entry_index", 8), ("expiry_utc", "2030-01-01T00:00:00Z"), ("seed", 1),
    ("generation", "gen4"), ("predecessor", None),
])
def test_changed_signed_manifest_fails_verification(member: str, value: object) -> None:
    signer = seeded_signer(1)
    signed = manifest().sign(signer)
    signed[member] = value
    with pytest.raises(InvalidSignature):
        SealManifest.verify(signed, signer.public_key)


def test_manifest_from_another_key_is_untrusted() -> None:
    signed = manifest().sign(seeded_signer(2, name="someone-else"))
    with pytest.raises(UntrustedKey):
        SealManifest.verify(signed, seeded_signer(1).public_key)


@pytest.mark.parametrize("changes", [
    {"generation": "gen0"}, {"generation": "Gen1"}, {"generation": "test"},
    {"membership": "public"},  # a genN with public membership
    {"tasks": ()}, {"tasks": (TaskCount("breastmnist", 1), TaskCount("bloodmnist", 1))},
    {"set_hash": "AB" * 32}, {"set_hash": "ab" * 31},
    {"expiry": T0}, {"expiry": T0 - timedelta(seconds=1)},
    {"ledger_id": "xyz"}, {"entry_index": 0}, {"predecessor": "gen3"}, {"predecessor": "public"},
    {"leakage_budget": budget(None, "public")}, {"seed": -1}, {"seed": 2**53},
])
def test_constructor_refuses_an_invalid_manifest(changes: dict[str, object]) -> None:
    with pytest.raises(MalformedInput):
        manifest(**changes)


def test_from_json_refuses_unknown_and_missing_members() -> None:
    body = manifest().to_json()
    with pytest.raises(MalformedInput, match="unknown members"):
        SealManifest.from_json({**body, "extra": 1})
    for member in ("seed", "tasks", "set_hash", "leakage_budget"):
        with pytest.raises(MalformedInput):
            SealManifest.from_json({k: v for k, v in body.items() if k != member})


def test_budget_and_release_rules() -> None:
    with pytest.raises(MalformedInput):
        LeakageBudget(bits=None, basis="default", n=1, k=1, delta=0.05, eps=0.05, rule="r")
    with pytest.raises(MalformedInput):
        LeakageBudget(bits=-1.0, basis="explicit", n=1, k=1, delta=0.05, eps=0.05, rule="r")
    with pytest.raises(MalformedInput):
        ReleasePolicy("ladder", None)
    with pytest.raises(MalformedInput):
        ReleasePolicy("full", 1.0)
    assert ReleasePolicy("ladder", 0.5).to_json() == {"mode": "ladder", "step": 0.5}


@settings(max_examples=60, deadline=None)
@given(
    counts=st.dictionaries(st.from_regex(r"[a-z][a-z0-9_]{0,12}", fullmatch=True), st.integers(1, 10**6),
                           min_size=1, max_size=5),
    seconds=st.integers(1, 10**9), bits=st.floats(0, 1e6, allow_nan=False), seed=st.integers(0, 2**53 - 1),
    index=st.integers(1, 10**9), step=st.one_of(st.none(), st.floats(0.001, 100)),
)
def test_manifest_json_round_trip(counts: dict[str, int], seconds: int, bits: float, seed: int, index: int,
                                  step: float | None) -> None:
    original = manifest(tasks=tuple(TaskCount(t, n) for t, n in sorted(counts.items())),
                        expiry=T0 + timedelta(seconds=seconds), leakage_budget=budget(bits, "explicit"),
                        seed=seed, entry_index=index,
                        release=ReleasePolicy() if step is None else ReleasePolicy("ladder", step))
    parsed = SealManifest.from_json(parse_json_object(canonical_bytes(original.to_json())))
    assert parsed == original
    assert canonical_bytes(parsed.to_json()) == canonical_bytes(original.to_json())


@pytest.mark.parametrize("member", ["created_utc", "expiry_utc"])
@pytest.mark.parametrize("spelling", ["+00:00", ".5Z", "z", " "])
def test_manifest_times_are_utc_times_of_section_1_only(member: str, spelling: str) -> None:
    """The manifest's times were read leniently and its seal entry rebuilt through format_utc: a manifest
    spelling ``...+00:00`` or ``...12:00:00.5Z`` passed heldout while the independent replay, comparing the
    manifest's text with its entry's, refused the export (red-team round 18). One spelling: ``...Z``."""
    body = manifest().to_json()
    stamp = body[member]
    body[member] = {"+00:00": stamp[:-1] + "+00:00", ".5Z": stamp[:-1] + ".5Z", "z": stamp[:-1] + "z",
                    " ": " " + stamp}[spelling]
    with pytest.raises(MalformedInput, match="not a UTC time"):
        SealManifest.from_json(body)
    SealManifest.from_json({**body, member: stamp})  # (the form of section 1 still reads)
