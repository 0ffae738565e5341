"""Interop with an independent implementation: Go's golang.org/x/mod/sumdb/note and sumdb/tlog (the fixture in
tests/go/verifier) verify our checkpoints, inclusion proofs and consistency proofs for every ledger size 1..300
at random indices, recompute every root from the raw entries, produce byte-identical proofs and, given the
test key, byte-identical signed notes; and they reject mutated proofs and notes (negative controls).

Needs the Go toolchain and the Debian package golang-golang-x-mod-dev (``.ci/run`` installs both); skipped
only when ``go`` itself is absent."""

from __future__ import annotations

import base64
import json
import os
import random
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from keys import note_key_hash
from ledger import Ledger
from tests.go_support import build_go
from tests.test_ledger_support import T0, bundle_entry, ledger_signer, new_ledger

pytestmark = [pytest.mark.go, pytest.mark.skipif(shutil.which("go") is None, reason="Go toolchain not installed")]

MAX_SIZE = int(os.environ.get("HELDOUT_LEDGER_GO_SIZE", "300"))
SEED_BYTE = 1  # ledger_signer() is seeded_signer(1): 32 bytes of 0x01


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@pytest.fixture(scope="module")
def go_verifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_go("verifier", tmp_path_factory)


def run_go(verifier: Path, request: dict[str, Any]) -> dict[str, Any]:
    result = subprocess.run([str(verifier)], input=json.dumps(request), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def go_signer_key(ledger: Ledger) -> str:
    """The Go note signer key for the test seed (the fixture key, never a real one)."""
    key_hash = note_key_hash(ledger.key.name, ledger.key.public_key).hex()
    return f"PRIVATE+KEY+{ledger.key.name}+{key_hash}+{b64(bytes([1]) + bytes([SEED_BYTE]) * 32)}"


@pytest.fixture(scope="module")
def grown(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ledger]:
    """A ledger appended to one entry at a time up to MAX_SIZE: a signed checkpoint at every size."""
    signer = ledger_signer()
    ledger = new_ledger(tmp_path_factory.mktemp("go-ledger"))
    while ledger.size < MAX_SIZE:
        ledger.append(bundle_entry(ledger.size, pad=ledger.size % 7 * 13), signer=signer, now=T0)
    yield ledger
    ledger.close()


def flip(raw: bytes, bit: int) -> bytes:
    out = bytearray(raw)
    out[bit // 8 % len(out)] ^= 1 << (bit % 8)
    return bytes(out)


def test_go_accepts_our_checkpoints_and_proofs_for_sizes_1_to_300(go_verifier: Path, grown: Ledger) -> None:
    rng = random.Random(300)
    checkpoints = grown.checkpoints()
    assert [c.size for c in checkpoints] == list(range(1, MAX_SIZE + 1))
    inclusion, consistency = [], []
    for size in range(1, MAX_SIZE + 1):
        proof = grown.inclusion_proof(rng.randrange(size), size)
        inclusion.append({"index": proof.index, "size": size, "leaf": b64(proof.entry or b""),
                          "root": b64(checkpoints[size - 1].root), "proof": [b64(h) for h in proof.path]})
        old = rng.randint(1, size)
        cproof = grown.consistency_proof(old, size)
        consistency.append({"old": old, "new": size, "old_root": b64(checkpoints[old - 1].root),
                            "new_root": b64(checkpoints[size - 1].root), "proof": [b64(h) for h in cproof.path]})
    report = run_go(go_verifier, {
        "vkey": grown.verifier_key, "origin": grown.origin, "skey": go_signer_key(grown),
        "entries": [b64(grown.entry_bytes(i)) for i in range(grown.size)],
        "checkpoints": [c.note for c in checkpoints], "inclusion": inclusion, "consistency": consistency,
    })
    for checkpoint, result in zip(checkpoints, report["checkpoints"], strict=True):
        assert result["ok"], (checkpoint.size, result)
        assert result["go_root"] == checkpoint.root_b64
        assert result["go_signed"] == checkpoint.note  # Go's note.Sign gives our bytes exactly
    for item, result in zip(inclusion, report["inclusion"], strict=True):
        assert result["ok"] and result["same_as_go"] and result["go_proof_ok"], (item["index"], item["size"], result)
    for item, result in zip(consistency, report["consistency"], strict=True):
        assert result["ok"] and result["same_as_go"] and result["go_proof_ok"], (item["old"], item["new"], result)


def test_go_rejects_mutations(go_verifier: Path, grown: Ledger) -> None:
    """Negative controls: the same verifier refuses what it must, so the acceptance above means something."""
    rng = random.Random(17)
    inclusion, consistency, notes = [], [], []
    for _ in range(40):
        size = rng.randint(3, MAX_SIZE)
        proof = grown.inclusion_proof(rng.randrange(size), size)
        good: dict[str, Any] = {"index": proof.index, "size": size, "leaf": b64(proof.entry or b""),
                                "root": b64(grown.root(size)), "proof": [b64(h) for h in proof.path]}
        position = rng.randrange(len(proof.path))
        inclusion += [
            {**good, "proof": [b64(flip(h, rng.randrange(256))) if i == position else b64(h)
                               for i, h in enumerate(proof.path)]},
            {**good, "index": (proof.index + 1) % size},
            {**good, "leaf": b64(proof.entry + b" ")},  # type: ignore[operator]
            {**good, "proof": good["proof"][:-1]},
        ]
        old = rng.randint(1, size - 1)
        cproof = grown.consistency_proof(old, size)
        cgood: dict[str, Any] = {"old": old, "new": size, "old_root": b64(grown.root(old)),
                                 "new_root": b64(grown.root(size)), "proof": [b64(h) for h in cproof.path]}
        consistency += [
            {**cgood, "old_root": b64(flip(grown.root(old), 3))},
            {**cgood, "new_root": b64(grown.root(size - 1))},
            {**cgood, "proof": [*cgood["proof"], cgood["proof"][0]]},
        ]
        if cgood["proof"]:
            consistency.append({**cgood, "proof": [b64(flip(base64.b64decode(cgood["proof"][0]), 9)),
                                                   *cgood["proof"][1:]]})
        note = grown.checkpoint_at(size).note  # type: ignore[union-attr]
        notes += [note.replace(f"\n{size}\n", f"\n{size + 1}\n"), note.replace("\u2014", "-"),
                  note.replace(grown.origin, grown.origin + "x")]
    report = run_go(go_verifier, {"vkey": grown.verifier_key, "origin": grown.origin,
                                  "entries": [b64(grown.entry_bytes(i)) for i in range(grown.size)],
                                  "checkpoints": notes, "inclusion": inclusion, "consistency": consistency})
    assert not [r for r in report["inclusion"] if r["ok"]]
    assert not [r for r in report["consistency"] if r["ok"]]
    assert not [r for r in report["checkpoints"] if r["ok"]]


def test_go_still_verifies_the_operators_line_on_cosigned_checkpoints(go_verifier: Path,
                                                                      tmp_path: Path) -> None:
    """Three witnesses' cosignature/v1 lines after the log's own: Go's note.Open ignores them (unknown key
    ids, type 0x04) and verifies the operator's signature; the body and root are unchanged. A damaged
    operator line is still refused with the cosignatures present (negative control)."""
    from ledger.cosignature import cosign, with_cosignatures
    from tests.conftest import seeded_signer

    witnesses = [seeded_signer(50 + i, name=f"witness{i}.example/w", key_id=f"w{i}") for i in range(3)]
    signer = ledger_signer()
    with new_ledger(tmp_path) as ledger:
        cosigned = []
        for i in range(1, 9):
            ledger.append(bundle_entry(i), signer=signer, now=T0)
            checkpoint = ledger.latest_checkpoint()
            lines = [cosign(checkpoint, w, 1_780_000_000 + i).line for w in witnesses]
            cosigned.append(with_cosignatures(checkpoint, lines))
        assert all(c.note.count("\u2014") == 4 for c in cosigned)
        damaged = []
        for c in cosigned[:3]:  # one bit of the operator's signature flipped, the cosignatures intact
            operator_b64 = c.note.split("\u2014 ")[1].split(" ")[1].strip()
            damaged.append(c.note.replace(operator_b64, b64(flip(base64.b64decode(operator_b64), 100)), 1))
        report = run_go(go_verifier, {"vkey": ledger.verifier_key, "origin": ledger.origin,
                                      "entries": [b64(ledger.entry_bytes(i)) for i in range(ledger.size)],
                                      "checkpoints": [c.note for c in cosigned] + damaged})
    results = report["checkpoints"]
    for checkpoint, result in zip(cosigned, results, strict=False):
        assert result["ok"], (checkpoint.size, result)
        assert result["go_root"] == checkpoint.root_b64
    assert not [r for r in results[len(cosigned):] if r["ok"]]
