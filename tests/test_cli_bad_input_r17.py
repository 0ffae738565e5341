"""Bad input found by the seventeenth round of outside campaigns (a stranger's arguments and documents), by class:

* a path argument that names something other than what the option takes: ``--key`` naming a FIFO, a device, a
  dangling link or a link loop was read as base64 of its own name (a misleading "must be base64" refusal, and a
  name that happens to decode would be taken as a key); ``--from`` naming a file, a FIFO, a device or a dangling
  link was judged a public log that failed its check (exit 1) rather than a wrong argument (exit 2);
* a member proof's texts were coerced with ``str()`` (a number or a list became a "name" quoted in the verdict),
  and its generation chose the seal manifest to read before the proof was parsed at all;
* ``audit --out`` naming a file that is not an audit report was refused only after the whole audit had run.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from heldout.cli import app
from tests.formats_support import FormatsFixture, build_formats_export
from tests.generations_support import openings

runner = CliRunner()


@pytest.fixture(scope="module")
def formats(tmp_path_factory: pytest.TempPathFactory) -> FormatsFixture:
    return build_formats_export(tmp_path_factory.mktemp("r17"))


def _fifo(folder: Path) -> Path:
    path = folder / "fifo"
    os.mkfifo(path)
    return path


def _dangling(folder: Path) -> Path:
    path = folder / "dangling"
    path.symlink_to(folder / "nowhere")
    return path


def _loop(folder: Path) -> Path:
    path = folder / "loop"
    path.symlink_to(path)
    return path


def _device(folder: Path) -> Path:
    return Path(os.devnull)


def _plain_file(folder: Path) -> Path:
    path = folder / "plain"
    path.write_text("not a folder\n")
    return path


NOT_A_KEY: dict[str, tuple[Callable[[Path], Path], str]] = {
    "fifo": (_fifo, "is a FIFO"),
    "device": (_device, "is a device"),
    "dangling link": (_dangling, "is a dangling symbolic link"),
    "link loop": (_loop, "is a symbolic link loop"),
}


def one_error_line(result: Any) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("heldout: error: "), result.output
    return lines[0]


@pytest.mark.parametrize("kind", sorted(NOT_A_KEY))
def test_key_naming_a_fifo_device_or_broken_link_is_refused_as_what_it_is(
        formats: FormatsFixture, tmp_path: Path, kind: str) -> None:
    make, words = NOT_A_KEY[kind]
    key = make(tmp_path)
    passport = str(sorted((formats.store / "passports").glob("*.json"))[0])
    result = runner.invoke(app, ["passport", "verify", passport, "--key", str(key)])
    assert result.exit_code == 2, result.output
    line = one_error_line(result)
    assert f"--key {key} {words}, not a key or a key file" in line


def test_a_dangling_link_whose_name_decodes_as_a_key_is_not_taken_as_one(
        formats: FormatsFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A link named with 43 base64 characters and '=' decodes to 32 bytes: read as text, it was a key."""
    monkeypatch.chdir(tmp_path)
    name = "A" * 43 + "="
    Path(name).symlink_to(tmp_path / "gone")
    passport = str(sorted((formats.store / "passports").glob("*.json"))[0])
    result = runner.invoke(app, ["passport", "verify", passport, "--key", name])
    assert result.exit_code == 2, result.output
    assert "is a dangling symbolic link" in one_error_line(result)


NOT_A_FOLDER: dict[str, tuple[Callable[[Path], Path], str]] = {
    "file": (_plain_file, "is a file"),
    "fifo": (_fifo, "is a FIFO"),
    "device": (_device, "is a device"),
    "dangling link": (_dangling, "is a dangling symbolic link"),
}


def _member_proof(formats: FormatsFixture, tmp_path: Path) -> Path:
    case = openings(formats.store, "gen1")[0]["case_id"]
    out = tmp_path / "member.json"
    result = runner.invoke(app, ["prove-member", "gen1", case, "--out", str(out), "--store", str(formats.store)])
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize("command", ["verify-reveal", "verify-member"])
@pytest.mark.parametrize("kind", sorted(NOT_A_FOLDER))
def test_from_naming_something_other_than_a_folder_is_a_usage_error(
        formats: FormatsFixture, tmp_path: Path, command: str, kind: str) -> None:
    make, words = NOT_A_FOLDER[kind]
    source = make(tmp_path)
    first = "gen1" if command == "verify-reveal" else str(_member_proof(formats, tmp_path))
    result = runner.invoke(app, [command, first, "--from", str(source), "--store", str(formats.store)])
    assert result.exit_code == 2, result.output
    assert f"--from {source} {words}, not a folder" in one_error_line(result)


def test_verify_member_from_the_export_still_verifies(formats: FormatsFixture, tmp_path: Path) -> None:
    """The refusals above leave the real thing working: a proof checked against the public export."""
    proof = _member_proof(formats, tmp_path)
    result = runner.invoke(app, ["verify-member", str(proof), "--from", str(formats.export),
                                 "--store", str(formats.store)])
    assert result.exit_code == 0, result.output
    assert "is a member of gen1" in result.stdout


MEMBER_EDITS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "generation a number": (lambda d: d.__setitem__("generation", 1), "wrong type"),
    "generation a list": (lambda d: d.__setitem__("generation", ["gen1"]), "wrong type"),
    "case id a number": (lambda d: d["case"].__setitem__("case_id", 7), "wrong type"),
    "task a list": (lambda d: d["case"].__setitem__("task", ["bloodmnist"]), "wrong type"),
    "set hash a number": (lambda d: d.__setitem__("set_hash", 0), "wrong type"),
    "generation a path": (lambda d: d.__setitem__("generation", "../seals/gen1"), "not a generation's name"),
    "generation with a suffix": (lambda d: d.__setitem__("generation", "gen1.seal.json"),
                                 "not a generation's name"),
}


@pytest.mark.parametrize("edit", sorted(MEMBER_EDITS))
def test_member_proof_members_are_typed_and_its_generation_is_a_name(
        formats: FormatsFixture, tmp_path: Path, edit: str) -> None:
    change, words = MEMBER_EDITS[edit]
    good = json.loads(_member_proof(formats, tmp_path).read_text())
    bad = copy.deepcopy(good)
    change(bad)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(bad))
    result = runner.invoke(app, ["verify-member", str(path), "--store", str(formats.store)])
    assert result.exit_code == 1, result.output
    line = one_error_line(result)
    assert words in line and "is a member" not in result.stdout


def test_audit_out_that_is_not_a_report_is_refused_before_the_audit_runs(
        formats: FormatsFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import heldout.cli.audit_cmd as audit_cmd

    def audit_ran(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the audit ran before its --out was checked")

    monkeypatch.setattr(audit_cmd, "_run", audit_ran)
    key_file = tmp_path / "precious.json"
    key_file.write_text('{"not": "a report"}\n')
    for args in (["audit", formats.ledger_id, "--store", str(formats.store)],
                 ["audit", formats.ledger_id, "--from", str(formats.export)]):
        result = runner.invoke(app, [*args, "--out", str(key_file)])
        assert result.exit_code == 2, result.output
        assert "exists and is not an audit report" in one_error_line(result)
        assert key_file.read_text() == '{"not": "a report"}\n'
