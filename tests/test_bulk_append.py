"""``heldout ledger append --type note --jsonl-file F``: one entry per line, one batch, one checkpoint, all or
none (issue 11 section 1); the same generic-entry rules as a single ``--json-file`` append."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from heldout.cli import app
from heldout.generations import open_ledger
from heldout.store import Store
from ledger import Ledger
from tests.generations_support import NOW, cli, init_store, runner


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HELDOUT_NOW", NOW)
    path = tmp_path / "store"
    init_store(path)
    return path


def _ledger(store: Path) -> Ledger:
    return open_ledger(Store.open(store), read_only=True)


def _state(store: Path) -> tuple[int, int]:
    with _ledger(store) as ledger:
        return ledger.size, len(ledger.checkpoints())


def test_a_jsonl_file_is_one_batch_under_one_checkpoint(store: Path, tmp_path: Path) -> None:
    notes = tmp_path / "incidents.jsonl"
    notes.write_text("".join(json.dumps({"text": f"incident {i}"}) + "\n" for i in range(100)))
    size, checkpoints = _state(store)
    result = cli("ledger", "append", "--type", "note", "--jsonl-file", str(notes), "--json", store=store)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["indices"] == list(range(size, size + 100)) and report["size"] == size + 100
    assert _state(store) == (size + 100, checkpoints + 1)  # one checkpoint for the whole file
    with _ledger(store) as ledger:
        assert [e["text"] for _, e in ledger.entries(size)] == [f"incident {i}" for i in range(100)]
        assert ledger.latest_checkpoint().root.hex() == report["root"]
    assert cli("ledger", "verify", store=store).exit_code == 0


@pytest.mark.parametrize(("body", "words"), [
    ('{"text": "a"}\n{"text": "b"}\nnot json\n', "line 3"),
    ('{"text": "a"}\n\n{"text": "c"}\n', "line 2"),
    ('{"text": "a"}\n{"text": "b", "type": "seal"}\n', "entry 2"),
    ('{"text": "a"}\n{"text": ""}\n', "entry 2"),
    ("", "no entry"),
])
def test_one_bad_line_refuses_the_whole_file(store: Path, tmp_path: Path, body: str, words: str) -> None:
    lines = tmp_path / "bad.jsonl"
    lines.write_text(body)
    before = _state(store)
    result = cli("ledger", "append", "--type", "note", "--jsonl-file", str(lines), store=store)
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert _state(store) == before  # all or none


def test_jsonl_from_stdin(store: Path) -> None:
    size, _ = _state(store)
    result = runner.invoke(app, ["ledger", "append", "--type", "note", "--jsonl-file", "-", "--store", str(store)],
                           input='{"text": "one"}\n{"text": "two"}')
    assert result.exit_code == 0, result.output
    assert "2 note entries" in result.output
    assert _state(store)[0] == size + 2


@pytest.mark.parametrize("args", [[], ["--json-file", "a.json", "--jsonl-file", "b.jsonl"]])
def test_exactly_one_input_is_given(store: Path, args: list[str]) -> None:
    before = _state(store)
    result = cli("ledger", "append", "--type", "note", *args, store=store)
    assert result.exit_code == 2 and "exactly one of --json-file or --jsonl-file" in result.output
    assert _state(store) == before


def test_a_domain_type_is_refused_in_bulk_too(store: Path, tmp_path: Path) -> None:
    lines = tmp_path / "seals.jsonl"
    lines.write_text('{"generation": "gen9"}\n')
    before = _state(store)
    result = cli("ledger", "append", "--type", "seal", "--jsonl-file", str(lines), store=store)
    assert result.exit_code == 2 and "only generic entries" in result.output
    assert _state(store) == before


def test_expected_size_makes_a_rerun_of_a_committed_batch_a_refusal_not_a_second_copy(store: Path,
                                                                                      tmp_path: Path) -> None:
    """A batch whose run was killed after its commit (its caller never saw the answer) is run again: with
    --expected-size the second run is refused (exit 2, nothing written) instead of logging the batch twice."""
    notes = tmp_path / "incidents.jsonl"
    notes.write_text("".join(json.dumps({"text": f"incident {i}"}) + "\n" for i in range(3)))
    size, checkpoints = _state(store)
    args = ("ledger", "append", "--type", "note", "--jsonl-file", str(notes), "--expected-size", str(size))
    assert cli(*args, store=store).exit_code == 0
    again = cli(*args, store=store)
    assert again.exit_code == 2 and "Traceback" not in again.output, again.output
    assert _state(store) == (size + 3, checkpoints + 1)
