"""Bad input found by the fourteenth round of outside campaigns, by class:

* a file the program wrote and reads back (a follower's state) is validated member by member before any member
  is used: a crafted one is a one-line refusal, never an AttributeError traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from heldout.cli import app
from tests.test_cli_bad_input_edges import store_and_export

runner = CliRunner()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A small store and its public export: (store, export, ledger id)."""
    return store_and_export(tmp_path_factory.mktemp("r14"))


def one_line_failure(result: Result, code: int) -> str:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == code, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("heldout: error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("state", [
    {"key": "x"}, {"key": [1]}, [], "text", 1,
    {"format": "heldout-checkpoint-client", "version": True, "origin": "o", "key": {"name": "n",
                                                                                     "public_key_b64": "k"},
     "note": "n"},
    {"format": "heldout-checkpoint-client", "version": 1, "origin": 5, "key": {"name": "n", "public_key_b64": "k"},
     "note": "n"},
    {"format": "heldout-checkpoint-client", "version": 1, "origin": "o", "key": {"name": ["n"],
                                                                                  "public_key_b64": "k"},
     "note": "n"},
    {"format": "heldout-checkpoint-client", "version": 1, "origin": "o", "key": {"name": "n", "public_key_b64": "k"},
     "note": {"size": 3}},
], ids=["key-text", "key-list", "array", "string", "number", "version-true", "origin-number", "name-list",
        "note-object"])
def test_a_crafted_follow_state_is_refused_in_one_line(exported: tuple[Path, Path, str], tmp_path: Path,
                                                       state: object) -> None:
    _, export, ledger_id = exported
    path = tmp_path / "state.json"
    path.write_text(json.dumps(state))
    before = path.read_bytes()
    line = one_line_failure(runner.invoke(app, ["ledger", "follow", ledger_id, "--from", str(export), "--state",
                                                str(path)]), 1)
    assert "client state" in line
    assert path.read_bytes() == before  # never replaced by the presented checkpoint
