"""Bad input, red-team round 10: every case a one-line usage error (exit 2, or exit 1 for a verified document)
that writes nothing, never a traceback. Each names the class it stands for:

* Unicode digits ("²") where a number is read (``str.isdigit`` takes them, ``int`` refuses them): an export's
  checkpoint file name, a task's size suffix, ``COLUMNS``;
* a witness URL that ``urlsplit`` refuses (an unclosed IPv6 bracket), given or stored;
* a refused ``witness add`` must not create the store it names;
* the operator's own data file (``--data-root``) malformed: bad input, not tampering;
* a generation argument that is a path (``../x``): bad input, not a tampered seal;
* a blank argument, which a path would read as the current folder;
* a ledger location that is a URL of another scheme than ``postgresql://``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from heldout.cli import app
from tests.audit_support import command_clock
from tests.conftest import REPO_ROOT
from tests.test_cli_bad_input_edges import AT, one_line_usage_error, store_and_export, tree_state

runner = CliRunner()


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A small store and its public export: (store, export, ledger id)."""
    return store_and_export(tmp_path_factory.mktemp("r10"))


def test_an_export_checkpoint_file_named_with_a_unicode_digit_is_a_finding_not_a_traceback(
        exported: tuple[Path, Path, str], tmp_path: Path) -> None:
    import shutil

    _, export, ledger_id = exported
    hostile = tmp_path / "hostile"
    shutil.copytree(export, hostile)
    (hostile / "checkpoints" / "\u00b2.note").write_text("x")
    result = runner.invoke(app, ["ledger", "verify", ledger_id, "--from", str(hostile)])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "unexpected file among the checkpoints" in result.output


def test_a_task_size_suffix_in_unicode_digits_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["data", "synth", "bloodmnist_\u00b2", "--out", str(tmp_path / "data")])
    assert "bloodmnist_\u00b2" in one_line_usage_error(result)
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("variable", ["COLUMNS", "LINES"])
def test_a_terminal_size_in_unicode_digits_is_ignored(tmp_path: Path, variable: str) -> None:
    """rich (ours and typer's help) read COLUMNS and LINES with isdigit and int: every command, --version and
    --help included, ended in a traceback. The CLI runs as a process here: the variable is read at start-up."""
    env = {**os.environ, variable: "\u00b2", "HOME": str(tmp_path)}
    for args in (["-c", "from heldout.cli import main; main()", "--version"], [str(REPO_ROOT / "audit.py"), "--help"]):
        done = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, check=False,
                              env=env, cwd=REPO_ROOT)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("url", ["http://[::1", "http://[::1]:99999", "http://[nonsense]/"])
def test_a_witness_url_that_cannot_be_split_is_a_usage_error_and_creates_no_store(tmp_path: Path, url: str) -> None:
    store = tmp_path / "new-store"
    result = runner.invoke(app, ["witness", "add", url, "--key", "garbage", "--store", str(store)])
    assert "a witness URL is its submission prefix" in one_line_usage_error(result)
    assert not store.exists()


def test_a_refused_witness_add_creates_no_store(tmp_path: Path) -> None:
    store = tmp_path / "new-store"
    result = runner.invoke(app, ["witness", "add", "http://127.0.0.1:8700", "--key", "garbage", "--store", str(store)])
    one_line_usage_error(result)
    assert not store.exists()


def test_a_stored_witness_url_that_cannot_be_split_is_a_usage_error(exported: tuple[Path, Path, str],
                                                                    tmp_path: Path) -> None:
    import json
    import shutil

    store = tmp_path / "store"
    shutil.copytree(exported[0], store)
    (store / "witnesses").mkdir(exist_ok=True)
    (store / "witnesses" / "witnesses.json").write_text(json.dumps({"witnesses": [
        {"url": "http://[::1", "vkey": "w+00000000+AQ=="}]}))
    result = runner.invoke(app, ["witness", "list", "--store", str(store)])
    assert "witness configuration" in one_line_usage_error(result)


def test_a_malformed_task_file_under_data_root_is_the_operators_bad_input(exported: tuple[Path, Path, str],
                                                                         tmp_path: Path) -> None:
    """evaluate read the operator's own npz and called a missing key tampering (exit 1); pool add said exit 2."""
    store = exported[0]
    data = tmp_path / "data"
    data.mkdir()
    np.savez(data / "bloodmnist.npz", nothing=np.zeros(3))
    before = tree_state(store)
    with command_clock(AT):
        result = runner.invoke(app, ["evaluate", "majority", "--generation", "gen2", "--tasks", "bloodmnist",
                                     "--data-root", str(data), "--store", str(store)])
    assert "lacks the official keys" in one_line_usage_error(result)
    assert tree_state(store) == before


@pytest.mark.parametrize("generation", ["../x", "/etc/passwd", "x/../gen2", "gen2/", "nosuch"])
def test_a_generation_argument_that_is_not_a_name_is_a_usage_error(exported: tuple[Path, Path, str],
                                                                   generation: str) -> None:
    result = runner.invoke(app, ["verify-reveal", generation, "--store", str(exported[0])])
    assert "is not a generation name" in one_line_usage_error(result)


@pytest.mark.parametrize("args", [
    ["init", "--store", ""], ["init", "--store", "   "], ["status", "--store="],
    ["ledger", "tiles", "LEDGER", ""], ["data", "synth", "bloodmnist", "--out", ""],
], ids=["store empty", "store spaces", "store= empty", "tiles out", "synth out"])
def test_a_blank_argument_is_a_usage_error_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              args: list[str]) -> None:
    """A blank path was the current folder: ``init --store ''`` wrote a store, private key included, wherever
    the command ran."""
    monkeypatch.chdir(tmp_path)
    assert "is empty or only whitespace" in one_line_usage_error(runner.invoke(app, args))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("destination", ["postgresq://lab@db.example/heldout", "mysql://db.example/heldout",
                                         "sqlite:///tmp/x"])
def test_a_ledger_location_with_another_url_scheme_is_a_usage_error(exported: tuple[Path, Path, str],
                                                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    destination: str) -> None:
    """``ledger migrate`` read a mistyped scheme as a folder, copied into ./postgresq:/... and said it was done."""
    store, _, ledger_id = exported
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["ledger", "migrate", str(store / "ledgers" / f"{ledger_id}.sqlite"), destination])
    assert "a postgresql:// URL or a folder" in one_line_usage_error(result)
    assert list(tmp_path.iterdir()) == []
