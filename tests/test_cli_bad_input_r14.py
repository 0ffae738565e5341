"""Bad input found by the fourteenth round of outside campaigns, by class:

* a file the program wrote and reads back (a follower's state) is validated member by member before any member
  is used: a crafted one is a one-line refusal, never an AttributeError traceback;
* text from a ledger, an export, a file name or the user is printed as text, never read as rich markup: "[/x]"
  ended commands in a MarkupError traceback after their work was written, and "[red]...[/red]" hid text.
"""

from __future__ import annotations

import json
import shutil
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


MARKUP = "[/x][red]h[/red]"  # (ledger show cuts a value after 16 characters)


def test_a_note_that_looks_like_markup_is_shown_as_written(exported: tuple[Path, Path, str], tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(exported[0], store, symlinks=True)
    note = tmp_path / "note.json"
    note.write_text(json.dumps({"text": MARKUP}))
    appended = runner.invoke(app, ["ledger", "append", "--type", "note", "--json-file", str(note), "--store",
                                   str(store), "--at", "2026-09-02T00:00:00Z"])
    assert appended.exit_code == 0, appended.output
    shown = runner.invoke(app, ["ledger", "show", "--store", str(store)], env={"COLUMNS": "400"})
    assert shown.exit_code == 0 and shown.exception is None, shown.output
    assert MARKUP in shown.output


def test_names_and_paths_that_look_like_markup_are_shown_as_written(tmp_path: Path) -> None:
    store = tmp_path / "st[/x]"
    made = runner.invoke(app, ["init", "--store", str(store), "--name", "lab [/x] [red]red[/red]"],
                         env={"HELDOUT_NOW": "2026-09-01T00:00:00Z", "COLUMNS": "400"})
    assert made.exit_code == 0 and made.exception is None, made.output
    assert str(store) in " ".join(made.output.split())
    head = runner.invoke(app, ["ledger", "head", "--store", str(store)])
    assert head.exit_code == 0 and head.exception is None, head.output


def test_an_export_naming_a_model_in_markup_gets_its_verdict_printed(exported: tuple[Path, Path, str],
                                                                     tmp_path: Path) -> None:
    """A stranger's export whose entries name a model "cnn[/x]": the third-party audit printed a traceback
    instead of its verdict."""
    _, export, ledger_id = exported
    crafted = tmp_path / "export"
    shutil.copytree(export, crafted, symlinks=True)
    entries = crafted / "entries.jsonl"
    text = entries.read_text()
    assert '"model_id":"model_0"' in text
    entries.write_text(text.replace('"model_id":"model_0"', '"model_id":"cnn[/x]"'))
    result = runner.invoke(app, ["audit", ledger_id, "--from", str(crafted), "--jobs", "1", "--out",
                                 str(tmp_path / "r.json")], env={"COLUMNS": "400"})
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "failed" in result.output and "cnn[/x]" in result.output


def test_a_database_server_that_never_answers_is_given_up_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PostgreSQL URL whose listener accepts and never answers held every command for ever (red-team round
    14): connecting waits at most ``ledger.postgres.CONNECT_TIMEOUT_S`` (unless the URL sets connect_timeout),
    then exit 2 in one line."""
    import socket
    import time

    pytest.importorskip("psycopg")
    import ledger.postgres as postgres

    monkeypatch.setattr(postgres, "CONNECT_TIMEOUT_S", 1)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        url = f"postgresql://lab@127.0.0.1:{listener.getsockname()[1]}/heldout"
        started = time.monotonic()
        result = runner.invoke(app, ["init", "--store", str(tmp_path / "store"), "--database", url])
        took = time.monotonic() - started
    line = one_line_failure(result, 2)
    assert "cannot connect to the ledger database" in line and took < 10, (line, took)
    assert not (tmp_path / "store").exists()  # nothing made for a ledger that could not be


@pytest.mark.parametrize("command", [["init"], ["keys", "init", "--name", "op"], ["ledger", "init", "--name", "x"]],
                         ids=" ".join)
def test_a_folder_of_other_files_is_not_made_a_store(tmp_path: Path, command: list[str]) -> None:
    """``HELDOUT_STORE=/ heldout init`` made a store, private key included, among the files of the root folder
    (red-team round 14). A folder that holds other files and nothing of a store is refused; a new or empty
    folder, or a store, is used."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    line = one_line_failure(runner.invoke(app, [*command, "--store", str(home)],
                                          env={"HELDOUT_NOW": "2026-09-01T00:00:00Z"}), 2)
    assert "not a heldout store" in line or "no private key" in line  # (ledger init needs a key first)
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    made = runner.invoke(app, ["init", "--store", str(empty)], env={"HELDOUT_NOW": "2026-09-01T00:00:00Z"})
    assert made.exit_code == 0, made.output


def test_a_sealed_generation_given_a_data_root_is_refused(exported: tuple[Path, Path, str], tmp_path: Path) -> None:
    """``seal genN --data-root X`` was accepted and X ignored (the cases come from the private pool), though the
    help says "public only" and --seed is refused there alike."""
    store = tmp_path / "store"
    shutil.copytree(exported[0], store, symlinks=True)
    def listing() -> list[Path]:  # (not SQLite's own -wal and -shm, made by any reader)
        return sorted(p.relative_to(store) for p in store.rglob("*") if not p.name.endswith(("-wal", "-shm")))

    before = listing()
    line = one_line_failure(runner.invoke(app, ["seal", "gen3", "--tasks", "bloodmnist", "--per-task", "5",
                                                "--expires", "2027-05-01", "--data-root", str(tmp_path), "--store",
                                                str(store)], env={"HELDOUT_NOW": "2026-09-02T00:00:00Z"}), 2)
    assert "--data-root applies to the public generation only" in line
    assert listing() == before


def test_an_integer_of_thousands_of_digits_is_refused_as_a_number_too_large(tmp_path: Path) -> None:
    """It was refused with Python's own advice to call sys.set_int_max_str_digits() (red-team round 14): every
    JSON number is a double, and one of 5,000 digits is too large for it."""
    from keys import MalformedInput
    from seals import parse_json_object

    with pytest.raises(MalformedInput, match="too large for a double"):
        parse_json_object(b'{"v": ' + b"9" * 5000 + b"}", what="entry file")
    assert parse_json_object(b'{"v": ' + b"1" + b"0" * 20 + b"}", what="entry file") == {"v": 1e20}
