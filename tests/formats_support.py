"""One small but complete store and its public export, built through the commands a user runs, for the format
tests (docs/FORMATS.md, docs/schemas, the independent replay).

The flow: init; pool add; seal public, gen1, gen2 (tests/audit_support.build_store, with synthetic bundles on
each); ``evaluate majority`` on gen2 (when the harness extra is installed); audit; passport issue on gen1;
audit; passport issue on gen2; ``retire gen1 --reveal --with-images``; a ``key`` entry through ``ledger
append`` and a ``note``; ``spec supersede``; ``ledger export``. Every entry type and every public document kind appears.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from keys import TrustedKey
from tests.audit_support import build_store, command_clock
from tests.conftest import seeded_signer
from tests.generations_support import cli

ISSUE_AT = "2026-09-02T00:00:00Z"
TASK = "bloodmnist"


@dataclass(frozen=True)
class FormatsFixture:
    store: Path
    export: Path
    ledger_id: str
    data_root: Path
    evaluated_majority: bool


def _run(store: Path, *args: str, at: str = ISSUE_AT) -> str:
    with command_clock(at):
        result = cli(*args, store=store)
    assert result.exit_code == 0, f"{args}: {result.output}"
    return result.output


def build_formats_export(root: Path) -> FormatsFixture:
    built = build_store(root, bundles_per_generation=1, n_public=24, per_task=16)
    store = built.store
    majority = importlib.util.find_spec("torch") is not None
    if majority:
        _run(store, "evaluate", "majority", "--generation", "gen2", "--tasks", TASK, "--data-root",
             str(built.data_root), at="2026-09-01T00:00:00Z")
    _run(store, "audit", built.ledger_id)
    _run(store, "passport", "issue", "model_0", "--generation", "gen1")
    _run(store, "audit", built.ledger_id)
    _run(store, "passport", "issue", "majority" if majority else "model_0", "--generation", "gen2")
    _run(store, "retire", "gen1", "--reason", "superseded", "--reveal", "--with-images")
    other = seeded_signer(3, name="second-key", key_id="second-key")
    key_entry = root / "key-entry.json"
    key_entry.write_text(json.dumps({"role": "passport-issuer", "key": {
        "key_id": other.key_id, "name": other.name, "public_key_b64": other.public_key.b64}}))
    _run(store, "ledger", "append", built.ledger_id, "--type", "key", "--json-file", str(key_entry))
    note_entry = root / "note-entry.json"
    note_entry.write_text(json.dumps({"text": "gen1 retired early: superseded by gen2"}))
    _run(store, "ledger", "append", built.ledger_id, "--type", "note", "--json-file", str(note_entry))
    _run(store, "spec", "supersede", "MedEval-1 v0.1", "--by", "MedEval-1 v0.2", "--effective", "2027-06-01")
    export = root / "export"
    _run(store, "ledger", "export", built.ledger_id, str(export))
    return FormatsFixture(store=store, export=export, ledger_id=built.ledger_id, data_root=built.data_root,
                          evaluated_majority=majority)


def second_key() -> TrustedKey:
    other = seeded_signer(3, name="second-key", key_id="second-key")
    return TrustedKey(other.key_id, other.name, other.public_key)
