"""``heldout ledger ...`` as a user runs it (typer's CliRunner): init, append, show, head, checkpoint, pubkey,
leaf, prove, consistency, verify, export, and the exit codes of refusals."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from heldout.cli import app
from heldout.generations.ledgers import ledger_backend as ledger_backend_of
from heldout.store import Store
from keys import parse_verifier_key
from ledger import Ledger, LedgerBackend, parse_checkpoint, verify_checkpoint, verify_consistency, verify_inclusion
from ledger.rfc6962 import leaf_hash
from tests.test_ledger_attacks import tamper_postgres
from tests.test_ledger_support import bundle_entry

runner = CliRunner()
AT = "2026-03-01T12:00:00Z"


def run(store: Path, *args: str) -> Result:
    result = runner.invoke(app, ["ledger", *args, "--store", str(store)])
    assert "Traceback" not in result.output
    return result


@pytest.fixture
def store(tmp_path: Path, ledger_backend: LedgerBackend, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store with an operator key; its ledgers live in ``ledgers/`` (SQLite) or, in the PostgreSQL run, in
    the database ``HELDOUT_DATABASE`` names."""
    if ledger_backend.database is not None:
        monkeypatch.setenv("HELDOUT_DATABASE", ledger_backend.database)
    else:
        monkeypatch.delenv("HELDOUT_DATABASE", raising=False)
    root = tmp_path / "store"
    assert runner.invoke(app, ["keys", "init", "--store", str(root), "--name", "lab-operator",
                               "--key-id", "lab-1"]).exit_code == 0
    return root


@pytest.fixture
def ledger_id(store: Path, tmp_path: Path) -> str:
    result = run(store, "init", "--name", "MedEval ledger", "--at", AT, "--json")
    assert result.exit_code == 0, result.output
    ledger_id = json.loads(result.stdout)["ledger_id"]
    for i in range(1, 4):
        path = tmp_path / f"entry{i}.json"
        path.write_text(json.dumps({"text": f"note {i}", "blob_sha256": bundle_entry(i)["predictions_sha256"]}))
        appended = run(store, "append", ledger_id[:6], "--type", "note", "--json-file", str(path), "--at", AT,
                       "--json")
        assert appended.exit_code == 0, appended.output
        assert json.loads(appended.stdout)["index"] == i
    return str(ledger_id)


def opened(store: Path, ledger_id: str) -> Ledger:
    return ledger_backend_of(Store.open(store)).open(ledger_id)


def test_init_uses_the_store_operator_key(store: Path, ledger_id: str) -> None:
    with opened(store, ledger_id) as ledger:
        assert ledger.key.key_id == "lab-1" and ledger.key.name == "lab-operator"
        assert ledger.genesis["name"] == "MedEval ledger" and ledger.genesis["created_utc"] == AT
        assert ledger.entry(2) == {"type": "note", "v": 1, "text": "note 2", "created_utc": AT,
                                   "blob_sha256": bundle_entry(2)["predictions_sha256"]}


def test_init_without_a_key_is_a_usage_error(tmp_path: Path) -> None:
    result = run(tmp_path / "empty", "init", "--name", "x")
    assert result.exit_code == 2 and "heldout keys init" in result.output


def test_checkpoint_prints_the_note_byte_for_byte(store: Path, ledger_id: str) -> None:
    result = run(store, "checkpoint", ledger_id)
    assert result.exit_code == 0
    with opened(store, ledger_id) as ledger:
        assert result.stdout_bytes == ledger.latest_checkpoint().note.encode()
    signed = run(store, "checkpoint", ledger_id, "--sign", "--at", AT)
    assert signed.exit_code == 0 and signed.stdout_bytes == result.stdout_bytes  # head already signed


def test_pubkey_prints_the_note_verifier_key(store: Path, ledger_id: str) -> None:
    result = run(store, "pubkey", ledger_id)
    assert result.exit_code == 0 and result.stdout.endswith("\n")
    name, _, key = parse_verifier_key(result.stdout.strip())
    note = run(store, "checkpoint", ledger_id).stdout
    assert verify_checkpoint(note, name=name, key=key).size == 4


def test_leaf_writes_raw_entry_bytes(store: Path, ledger_id: str) -> None:
    result = run(store, "leaf", ledger_id, "--index", "2")
    assert result.exit_code == 0
    with opened(store, ledger_id) as ledger:
        assert result.stdout_bytes == ledger.entry_bytes(2)


def test_prove_json_verifies_against_the_signed_checkpoint(store: Path, ledger_id: str) -> None:
    result = run(store, "prove", ledger_id, "--index", "1", "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert {"index", "size", "root", "leaf_b64", "proof"} <= set(body)
    checkpoint = parse_checkpoint(run(store, "checkpoint", ledger_id).stdout)
    assert body["size"] == checkpoint.size and body["root"] == checkpoint.root_b64
    leaf = leaf_hash(base64.b64decode(body["leaf_b64"]))
    verify_inclusion(body["index"], body["size"], leaf, [base64.b64decode(h) for h in body["proof"]],
                     checkpoint.root)
    older = json.loads(run(store, "prove", ledger_id, "--index", "1", "--size", "2", "--json").stdout)
    assert older["size"] == 2 and older["root"] != body["root"]
    human = run(store, "prove", ledger_id, "--index", "1")
    assert human.exit_code == 0 and base64.b64decode(body["root"]).hex() in human.stdout  # hex for people


def test_consistency_json_verifies(store: Path, ledger_id: str) -> None:
    result = run(store, "consistency", ledger_id, "--old", "2", "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert set(body) == {"old", "new", "old_root", "new_root", "proof"} and body["new"] == 4
    verify_consistency(body["old"], body["new"], base64.b64decode(body["old_root"]),
                       base64.b64decode(body["new_root"]), [base64.b64decode(h) for h in body["proof"]])
    assert run(store, "consistency", ledger_id, "--old", "0", "--json").exit_code == 2
    assert run(store, "consistency", ledger_id, "--old", "3", "--new", "9").exit_code == 2


def test_show_and_head(store: Path, ledger_id: str) -> None:
    shown = run(store, "show", ledger_id, "--json")
    assert shown.exit_code == 0
    body = json.loads(shown.stdout)
    assert body["size"] == 4 and [e["entry"]["type"] for e in body["entries"]] == ["genesis"] + ["note"] * 3
    table = run(store, "show", ledger_id, "--start", "1", "--limit", "2")
    assert table.exit_code == 0 and "note 1" in table.stdout and "note 3" not in table.stdout
    head = json.loads(run(store, "head", ledger_id, "--json").stdout)
    assert head["size"] == head["checkpoint_size"] == 4 and head["root"] == head["checkpoint_root"]
    assert head["ledger_id"] == ledger_id


def test_verify_export_and_verify_from(store: Path, ledger_id: str, tmp_path: Path) -> None:
    verified = run(store, "verify", ledger_id, "--json")
    assert verified.exit_code == 0 and json.loads(verified.stdout)["ok"] is True
    out = tmp_path / "public"
    exported = run(store, "export", ledger_id, str(out))
    assert exported.exit_code == 0, exported.output
    assert (out / "export.json").is_file() and not (out / "private").exists()
    replay = runner.invoke(app, ["ledger", "verify", ledger_id, "--from", str(out), "--json"])
    assert replay.exit_code == 0, replay.output
    assert json.loads(replay.stdout)["size"] == 4
    assert run(store, "export", ledger_id, str(out)).exit_code == 2  # not an empty directory
    wrong = "0" * 20 if not ledger_id.startswith("0") else "1" * 20
    refused = runner.invoke(app, ["ledger", "verify", wrong, "--from", str(out)])
    assert refused.exit_code == 1 and "not the ledger asked for" in refused.output
    assert runner.invoke(app, ["ledger", "verify", "not-hex", "--from", str(out)]).exit_code == 2


def test_verify_jobs_decode_in_workers_with_the_same_result(store: Path, ledger_id: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """``ledger verify --jobs 2`` (two decoding workers, even on a short log) reports exactly what ``--jobs 1``
    (decoding in the replay's own process) reports, on SQLite and on PostgreSQL; ``--jobs 0`` is a usage error."""
    import ledger.replay as replay_module

    started: list[int] = []
    start = replay_module._DecoderPool.start

    def spy(jobs: int | None, total: int, ranges: object = None) -> object:
        pool = start(jobs, total, ranges)  # type: ignore[arg-type]
        started.append(0 if pool is None else len(pool.workers))
        return pool

    monkeypatch.setattr(replay_module._DecoderPool, "start", staticmethod(spy))
    alone = run(store, "verify", ledger_id, "--jobs", "1", "--json")
    workers = run(store, "verify", ledger_id, "--jobs", "2", "--json")
    assert started == [0, 2]
    assert alone.exit_code == workers.exit_code == 0, (alone.output, workers.output)
    assert json.loads(alone.stdout) == json.loads(workers.stdout) and json.loads(alone.stdout)["size"] == 4
    assert run(store, "verify", ledger_id, "--jobs", "0").exit_code == 2


def test_verify_reports_tampering_with_exit_1(store: Path, ledger_id: str) -> None:
    with opened(store, ledger_id) as ledger:
        if ledger.path is None:
            tamper_postgres(ledger, "UPDATE entries SET data = convert_to(replace(convert_from(data, 'UTF8'), "
                                    "'note 2', 'note 9'), 'UTF8') WHERE idx = 2")
        else:
            conn = sqlite3.connect(ledger.path, isolation_level=None)
            conn.execute("DROP TRIGGER entries_no_update")
            conn.execute("UPDATE entries SET data = CAST(REPLACE(CAST(data AS TEXT), 'note 2', 'note 9') AS BLOB) "
                         "WHERE idx = 2")
            conn.close()
    result = run(store, "verify", ledger_id)
    assert result.exit_code == 1 and "entry 2" in result.output


@pytest.mark.parametrize("args, code", [
    (["append", "{id}", "--type", "note", "--json-file", "{missing}"], 2),
    (["append", "{id}", "--type", "nonsense", "--json-file", "{file}"], 2),
    (["append", "{id}", "--type", "genesis", "--json-file", "{file}"], 2),
    (["leaf", "{id}", "--index", "99"], 2),
    (["prove", "{id}", "--index", "4", "--size", "4"], 2),
    (["head", "ffffffffffffffffff00"], 2),
])
def test_refusals_have_exit_codes_and_write_nothing(store: Path, ledger_id: str, tmp_path: Path, args: list[str],
                                                    code: int) -> None:
    entry_file = tmp_path / "retire.json"
    entry_file.write_text(json.dumps({"generation": "gen1", "reason": "leaked"}))
    filled = [a.format(id=ledger_id, missing=tmp_path / "nope.json", file=entry_file) for a in args]
    result = run(store, *filled)
    assert result.exit_code == code, result.output
    assert result.output.startswith("error:") or "error" in result.output
    with opened(store, ledger_id) as ledger:
        assert ledger.size == 4


def test_append_refuses_a_type_that_contradicts_the_file(store: Path, ledger_id: str, tmp_path: Path) -> None:
    path = tmp_path / "entry.json"
    path.write_text(json.dumps({"type": "bundle", "text": "x"}))
    result = run(store, "append", ledger_id, "--type", "note", "--json-file", str(path))
    assert result.exit_code == 2 and "differs from --type" in result.output
