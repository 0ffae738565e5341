"""Bad input found by the nineteenth round of outside campaigns: a path argument that names something other than a
file (a FIFO, a device, a folder, a dangling link) was said to be missing ("no policy file at X", "no passport
file", "no member proof file", a task file "not found: download it"), as round 17 fixed for ``--key``, ``--from``
and ``--since`` only. Each now says what is there (``keys.safeio.not_a_file``), exit 2, one line, nothing read
(a FIFO is never waited on); an absent path is still said to be missing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from heldout.cli import app

runner = CliRunner()


def _fifo(folder: Path) -> tuple[Path, str]:
    path = folder / "fifo"
    os.mkfifo(path)
    return path, "a FIFO"


def _folder(folder: Path) -> tuple[Path, str]:
    path = folder / "folder.npz"
    path.mkdir()
    return path, "a folder"


def _dangling(folder: Path) -> tuple[Path, str]:
    path = folder / "dangling"
    path.symlink_to(folder / "nowhere")
    return path, "a dangling symbolic link"


def _device(folder: Path) -> tuple[Path, str]:
    return Path(os.devnull), "a device"


KINDS = {"fifo": _fifo, "folder": _folder, "dangling": _dangling, "device": _device}

COMMANDS: dict[str, Callable[[Path, Path], list[str]]] = {
    "passport verify FILE": lambda path, tmp: ["passport", "verify", str(path), "--store", str(tmp / "s")],
    "passport verify --policy": lambda path, tmp: ["passport", "verify", str(tmp / "passport.json"), "--policy",
                                                   str(path), "--store", str(tmp / "s")],
    "witness policy FILE": lambda path, tmp: ["witness", "policy", str(path), "--store", str(tmp / "s")],
    "verify-member FILE": lambda path, tmp: ["verify-member", str(path), "--store", str(tmp / "s")],
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_path_that_is_not_a_file_is_said_as_what_it_is(tmp_path: Path, command: str, kind: str) -> None:
    assert runner.invoke(app, ["init", "--store", str(tmp_path / "s"), "--name", "lab"]).exit_code == 0
    (tmp_path / "passport.json").write_text("{}")
    path, said = KINDS[kind](tmp_path)
    result = runner.invoke(app, COMMANDS[command](path, tmp_path))
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"is {said}, not a" in lines[0], result.stderr
    absent = runner.invoke(app, COMMANDS[command](tmp_path / "absent", tmp_path))
    assert absent.exit_code == 2 and "no " in absent.stderr and "absent" in absent.stderr, absent.stderr


@pytest.mark.parametrize("kind", ["fifo", "folder", "dangling"])
def test_a_task_file_that_is_not_a_file_is_not_sent_to_be_downloaded(tmp_path: Path, kind: str) -> None:
    """``--data-root`` holding a FIFO (a folder, a dangling link) named like the task's file: "not found:
    download it" sent the user to the network for a file that stands there as something else."""
    pytest.importorskip("medmnist")  # (the task table is medmnist's INFO)
    from harness.data import load_task
    from harness.tasks import task_spec
    from keys import UsageError

    spec = task_spec("bloodmnist")
    made = {"fifo": lambda p: os.mkfifo(p), "folder": lambda p: p.mkdir(),
            "dangling": lambda p: p.symlink_to(tmp_path / "nowhere")}
    made[kind](tmp_path / spec.file_name)
    with pytest.raises(UsageError) as refused:
        load_task(spec, tmp_path)
    assert "download" not in refused.value.message and "not a task file" in refused.value.message
