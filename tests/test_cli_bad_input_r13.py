"""Bad input, red-team round 13: every case a one-line usage error (exit 2) that writes nothing, never a
traceback. Each names the class it stands for:

* a file the user names (a witness policy, a follower's state, a witness's logs file) read whole before its
  bound was checked: a 4 GiB file took twice its size in memory, and a memory limit gave a traceback;
* an output written inside the public log the command reads (``--from``): it changed what the export
  publishes, and every verifier then refused the export;
* a supersession of a spec version this code does not implement, or one leading back (a cycle): logged for
  good, it ended every evaluation or was reported by every later audit;
* text recorded for good or shown on every page (a ledger's name, a site's release tag) with a newline, a
  control character or a byte that is not UTF-8; a key id that differs from the store's only in letter case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from heldout.cli import app
from tests.conftest import REPO_ROOT
from tests.test_cli_bad_input_edges import AT, one_line_usage_error, store_and_export, tree_state

runner = CliRunner()
SPARSE = 4 * 1024**3


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A small store and its public export: (store, export, ledger id)."""
    return store_and_export(tmp_path_factory.mktemp("r13"))


def sparse_file(path: Path) -> Path:
    with open(path, "wb") as handle:
        handle.truncate(SPARSE)  # 4 GiB of holes: nothing is written to disk, a whole read would take 4 GiB
    return path


# --- 1. named files are read within their bound -----------------------------------------------------------------

def test_a_huge_policy_file_is_refused_before_it_is_read(exported: tuple[Path, Path, str], tmp_path: Path) -> None:
    _, export, ledger_id = exported
    policy = sparse_file(tmp_path / "policy")
    for args in (["ledger", "verify", ledger_id, "--from", str(export), "--policy", str(policy)],
                 ["witness", "policy", str(policy), "--store", str(tmp_path / "witnessing-store")]):
        assert "policy file" in one_line_usage_error(runner.invoke(app, args))
    assert not (tmp_path / "witnessing-store").exists()


def test_a_huge_follow_state_is_refused_before_it_is_read(exported: tuple[Path, Path, str], tmp_path: Path) -> None:
    _, export, ledger_id = exported
    state = sparse_file(tmp_path / "state.json")
    line = one_line_usage_error(runner.invoke(app, ["ledger", "follow", ledger_id, "--from", str(export), "--state",
                                                    str(state)]))
    assert "client state" in line
    assert state.stat().st_size == SPARSE  # not rewritten


@pytest.mark.parametrize("body", ['{"logs":"abc"}', '{"logs":[1]}', '{"logs":[{"origin":"x"}]}'])
def test_a_damaged_witness_logs_file_is_a_setup_error(tmp_path: Path, body: str) -> None:
    """The witness's list of the logs it follows, damaged: one line, exit 2 (it was an AttributeError traceback
    when the witness served, and the trust command rewrote it)."""
    folder = tmp_path / "witness"
    assert runner.invoke(app, ["witness", "init", "--name", "w.example/w1", "--store", str(folder)]).exit_code == 0
    (folder / "logs.json").write_text(body)
    before = tree_state(folder)
    from keys import Signer, verifier_key_string

    origin = "heldout/ledger/" + "a" * 20
    operator = Signer.from_seed(bytes([7]) * 32, name="lab-operator", key_id="lab-1")
    key = verifier_key_string(operator.name, operator.public_key)
    line = one_line_usage_error(runner.invoke(app, ["witness", "trust-log", origin, key, "--store", str(folder)]))
    assert "logs" in line
    assert tree_state(folder) == before


# --- 2. no output inside the public log a command reads ----------------------------------------------------------

@pytest.mark.parametrize("inside", ["seals", "checkpoints/site", ".", "keys/new"])
def test_an_output_inside_the_export_it_reads_is_refused(exported: tuple[Path, Path, str], inside: str) -> None:
    _, export, ledger_id = exported
    before = tree_state(export)
    target = str(export / inside)
    audit = runner.invoke(app, ["audit", ledger_id, "--from", str(export), "--out", target, "--at", AT])
    assert "inside" in one_line_usage_error(audit)
    site = runner.invoke(app, ["site", "build", target, "--from", str(export), "--at", AT])
    assert "inside" in one_line_usage_error(site)
    follow = runner.invoke(app, ["ledger", "follow", ledger_id, "--from", str(export), "--state",
                                 str(export / inside / "state.json")])
    assert "inside" in one_line_usage_error(follow)
    assert tree_state(export) == before


def test_a_site_folder_that_holds_the_export_it_reads_is_refused(exported: tuple[Path, Path, str],
                                                                 tmp_path: Path) -> None:
    """``site build /www --from /www/export``: the build replaces /www, taking the export it read with it."""
    import shutil

    _, export, _ = exported
    www = tmp_path / "www"
    shutil.copytree(export, www / "export")
    before = tree_state(www)
    line = one_line_usage_error(runner.invoke(app, ["site", "build", str(www), "--from", str(www / "export"),
                                                    "--at", AT]))
    assert "is inside the site folder" in line
    assert tree_state(www) == before


def test_a_huge_file_in_the_stores_seals_is_never_read_whole(exported: tuple[Path, Path, str],
                                                             tmp_path: Path) -> None:
    """A working copy in ``seals/`` past a seal document's bound is not the logged document: the export and the
    tiles publish the logged bytes from the blob store, and never read the file (it took 3.2 GB)."""
    import shutil

    store, _, ledger_id = exported
    copy = tmp_path / "store"
    shutil.copytree(store, copy)
    logged = (copy / "seals" / "gen1.seal.json").read_bytes()
    sparse_file(copy / "seals" / "gen1.seal.json")
    for command in (["ledger", "export", ledger_id, str(tmp_path / "export")],
                    ["ledger", "tiles", ledger_id, str(tmp_path / "tiles")]):
        result = runner.invoke(app, [*command, "--store", str(copy)])
        assert result.exit_code == 0, result.output
    assert (tmp_path / "export" / "seals" / "gen1.seal.json").read_bytes() == logged
    assert (tmp_path / "tiles" / "seals" / "gen1.seal.json").read_bytes() == logged


# --- 3. supersessions are of versions this code implements, and never lead back ---------------------------------
# (tests/test_specs.py: test_bad_supersessions_are_refused_and_write_nothing, and the cycle's own test)

# --- 4. text recorded for good ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["a\nb", "tab\there", "bell\x07", "bidi\u202e"])
def test_a_ledger_name_with_a_control_character_is_refused(tmp_path: Path, name: str) -> None:
    store = tmp_path / "store"
    assert runner.invoke(app, ["keys", "init", "--name", "lab-operator", "--store", str(store)]).exit_code == 0
    before = tree_state(store)
    line = one_line_usage_error(runner.invoke(app, ["ledger", "init", "--name", name, "--store", str(store)]))
    assert "printable" in line
    assert tree_state(store) == before


def test_a_release_tag_that_is_not_utf8_is_a_usage_error(exported: tuple[Path, Path, str], tmp_path: Path) -> None:
    """The byte reaches the program as a lone surrogate (Python's argv decoding); it was exit 1 ("not
    canonicalisable"), as if the export were at fault."""
    _, export, _ = exported
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "COLUMNS": "200"}
    result = subprocess.run([sys.executable, "-m", "heldout", "site", "build", str(tmp_path / "site"), "--from",
                             str(export), "--at", AT, "--release-tag", b"v1\xff".decode("utf-8", "surrogateescape")],
                            env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stderr
    assert "release-tag" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "site").exists()
    assert "printable" in one_line_usage_error(runner.invoke(app, [
        "site", "build", str(tmp_path / "site"), "--from", str(export), "--at", AT, "--release-tag", "v1\nv2"]))


def test_a_key_id_that_differs_only_in_case_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    made = runner.invoke(app, ["keys", "init", "--name", "lab-operator", "--key-id", "lab-1", "--store", str(store),
                               "--json"])
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["key_id"] == "lab-1"
    before = tree_state(store)
    line = one_line_usage_error(runner.invoke(app, ["keys", "init", "--name", "lab-operator", "--key-id", "LAB-1",
                                                    "--store", str(store)]))
    assert "only in letter case" in line
    assert tree_state(store) == before
