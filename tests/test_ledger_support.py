"""Shared helpers of the ledger tests (entries, deterministic ledgers, the public RFC 6962 vectors), plus the
checks that the helpers themselves are what the other tests assume."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import ledger.replay as replay_module
from keys import Signer
from ledger import Ledger, LedgerBackend, LedgerIntegrityError
from tests.conftest import REPO_ROOT, seeded_signer

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
VECTORS = Path(os.environ.get("HELDOUT_VECTORS", REPO_ROOT / "tests" / "data" / "rfc6962"))


def refusal_alike_with_and_without_workers(path: Path, chunk: int,
                                           monkeypatch: pytest.MonkeyPatch) -> tuple[str, dict[str, Any]]:
    """``Ledger.verify`` of the SQLite file at ``path`` in chunks of ``chunk`` entries, once in its own process
    and once with two decoding workers (which read the file themselves): both must refuse it, with the same
    message and evidence, which are returned."""
    monkeypatch.setattr(replay_module, "CHUNK", chunk)
    monkeypatch.setattr(replay_module, "PARALLEL_MIN_ENTRIES", 1)
    outcomes = []
    for cpus in (1, 2):
        monkeypatch.setattr(replay_module, "available_cpus", lambda cpus=cpus: cpus)
        with Ledger.open(path, read_only=True) as opened, pytest.raises(LedgerIntegrityError) as caught:
            opened.verify()
        outcomes.append((caught.value.message, caught.value.evidence))
    assert outcomes[0] == outcomes[1]
    return outcomes[0]


def hexhash(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


def bundle_entry(i: int, *, pad: int = 0, when: datetime = T0) -> dict[str, Any]:
    """A valid ``bundle`` entry unique to ``i`` (``pad`` extra characters to reach a size)."""
    entry: dict[str, Any] = {
        "type": "bundle", "v": 1, "generation": "gen1", "model_id": f"model-{i}", "task": "pathmnist",
        "evaluation_sha256": hexhash(f"evaluation {i}"), "predictions_sha256": hexhash(f"predictions {i}"),
        "created_utc": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if pad:
        entry["note"] = "x" * pad
    return entry


def retire_entry(i: int) -> dict[str, Any]:
    return {"type": "retire", "v": 1, "generation": f"gen{i}", "reason": "expired",
            "created_utc": "2026-03-02T00:00:00Z"}


def ledger_signer() -> Signer:
    return seeded_signer(1, name="ledger-operator", key_id="ledger-op")


def new_ledger(where: Path | LedgerBackend, signer: Signer | None = None, *, entries: int = 0, batch: int = 1,
               name: str = "test ledger") -> Ledger:
    """A ledger with a fixed nonce (same id for the same key) and ``entries`` bundle entries appended in
    batches of ``batch``, in a folder of SQLite files or on a backend (``ledger_backend`` fixture)."""
    signer = signer or ledger_signer()
    backend = where if isinstance(where, LedgerBackend) else LedgerBackend(folder=where)
    ledger = backend.create(signer, name=name, now=T0, nonce=bytes(32))
    index = 1
    while index <= entries:
        count = min(batch, entries - index + 1)
        ledger.append_batch([bundle_entry(i) for i in range(index, index + count)], signer=signer,
                            now=T0 + timedelta(minutes=index))
        index += count
    return ledger


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def vector_files(kind: str) -> Iterator[Path]:
    yield from sorted((VECTORS / kind).rglob("*.json"))


def load_vector(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def test_new_ledger_is_deterministic(tmp_path: Path) -> None:
    with new_ledger(tmp_path / "a", entries=3) as first, new_ledger(tmp_path / "b", entries=3) as second:
        assert first.ledger_id == second.ledger_id
        assert first.root() == second.root()
        assert first.size == 4


def test_vectors_are_present() -> None:
    assert len(list(vector_files("inclusion"))) > 50, f"public vectors not found at {VECTORS}"
    assert len(list(vector_files("consistency"))) > 50
