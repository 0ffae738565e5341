"""Bad input found by the eighteenth round of outside campaigns, by class:

* a path whose bytes are not UTF-8: a store folder so named ended every command that opens its ledger read-only
  in a UnicodeEncodeError traceback (the SQLite URI was built from text), and ``audit --from`` such a folder
  printed "clean", then failed writing its report (the command it states held the raw name) with exit 1;
* a relative ``$XDG_DATA_HOME`` or ``$XDG_STATE_HOME`` was used relative to the current folder (the XDG
  specification says to ignore it), so ``init`` run in a checkout put the store inside it;
* ``audit --since`` naming a FIFO, a device, a folder or a dangling link said there was no file there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from heldout.cli import app
from heldout.store import auditor_state_path, default_store_path

runner = CliRunner()
NOT_UTF8 = os.fsdecode(b"st\xffore")


def one_error_line(result: object) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0].startswith("heldout: error: "), result.output  # type: ignore[attr-defined]
    return lines[0]


def test_a_store_whose_folder_name_is_not_utf8_is_opened(tmp_path: Path) -> None:
    store = tmp_path / NOT_UTF8
    assert runner.invoke(app, ["init", "--store", str(store), "--name", "lab"]).exit_code == 0
    for args in (["status"], ["ledger", "verify"], ["audit"]):
        result = runner.invoke(app, [*args, "--store", str(store)])
        assert result.exit_code == 0, (args, result.output)
        assert "Traceback" not in result.output


def test_a_third_party_audit_of_a_folder_whose_name_is_not_utf8_writes_its_report(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert runner.invoke(app, ["init", "--store", str(store), "--name", "lab"]).exit_code == 0
    ledger_id = (store / "ledgers" / "DEFAULT").read_text().strip()
    export = tmp_path / os.fsdecode(b"export\xff")
    assert runner.invoke(app, ["ledger", "export", ledger_id, str(export), "--store", str(store)]).exit_code == 0
    report = tmp_path / "report.json"
    result = runner.invoke(app, ["audit", ledger_id, "--from", str(export), "--out", str(report)])
    assert result.exit_code == 0, result.output
    assert "\\udcff" in json.loads(report.read_text())["audit_command"]


@pytest.mark.parametrize("variable", ["XDG_DATA_HOME", "XDG_STATE_HOME"])
def test_a_relative_xdg_folder_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.delenv("HELDOUT_STORE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(variable, "relative/folder")
    chosen = default_store_path() if variable == "XDG_DATA_HOME" else auditor_state_path()
    assert chosen.is_absolute() and str(chosen).startswith(str(tmp_path / "home")), chosen
    monkeypatch.setenv(variable, str(tmp_path / "absolute"))
    chosen = default_store_path() if variable == "XDG_DATA_HOME" else auditor_state_path()
    assert chosen.parent == tmp_path / "absolute"


def _fifo(folder: Path) -> Path:
    os.mkfifo(folder / "fifo")
    return folder / "fifo"


def _dangling(folder: Path) -> Path:
    (folder / "dangling").symlink_to(folder / "nowhere")
    return folder / "dangling"


@pytest.mark.parametrize(("make", "words"), [(_fifo, "is a FIFO"), (lambda folder: Path(os.devnull), "is a device"),
                                             (lambda folder: folder, "is a folder"),
                                             (_dangling, "is a dangling symbolic link")],
                         ids=["fifo", "device", "folder", "dangling link"])
def test_since_naming_something_other_than_a_file_is_refused_as_what_it_is(tmp_path: Path, make: object,
                                                                          words: str) -> None:
    store = tmp_path / "store"
    assert runner.invoke(app, ["init", "--store", str(store), "--name", "lab"]).exit_code == 0
    since = make(tmp_path)  # type: ignore[operator]
    result = runner.invoke(app, ["audit", "--store", str(store), "--since", str(since)])
    assert result.exit_code == 2, result.output
    assert f"--since {since} {words}, not a report file" in one_error_line(result)


def test_pool_labels_past_the_int64_range_are_named_as_they_are(tmp_path: Path) -> None:
    """uint64 labels of 2^63 were cast to int64 before the range check, and the refusal quoted -2^63."""
    import numpy as np

    store = tmp_path / "store"
    assert runner.invoke(app, ["init", "--store", str(store), "--name", "lab"]).exit_code == 0
    pool = tmp_path / "pool.npz"
    np.savez(pool, test_images=np.zeros((10, 28, 28, 3), np.uint8), test_labels=np.full((10, 1), 2**63, np.uint64))
    result = runner.invoke(app, ["pool", "add", "bloodmnist", str(pool), "--store", str(store)])
    assert result.exit_code == 2, result.output
    line = one_error_line(result)
    assert str(2**63) in line and "-9223372036854775808" not in line, line
