"""A bare clone works (issue 9, section 1): the tests need nothing beside the checkout, CI runs the README's
test command in a fresh clone outside the checkout's parent, the README's walkthrough runs as written, and
neither the demo nor a third-party audit writes into the current folder (the demo is checked in
tests/test_cli_output.py, with its closing commands)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.audit_support import build_store
from tests.conftest import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()


def shell_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", README, re.S)


def readme_test_command() -> str:
    block = next(b for b in shell_blocks() if "pytest" in b)
    return block.strip()


def needs_git() -> None:
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")


@pytest.fixture
def outside() -> Iterator[Path]:
    """A temporary folder that is not beside the checkout (so no ../shared can be found from a clone in it)."""
    folder = Path(tempfile.mkdtemp(prefix="heldout-clone-"))
    assert REPO_ROOT.parent not in folder.parents and folder.parent != REPO_ROOT.parent
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_ci_runs_the_readme_test_command_in_a_fresh_clone_outside_the_checkout() -> None:
    script = (REPO_ROOT / ".ci" / "run").read_text()
    command = readme_test_command()
    assert command in script, "the README's test command must appear in .ci/run as written"
    clone = script.index("git clone")
    assert "mktemp -d" in script[:clone] and script.index(command) > clone
    assert "ruff check ." in script and "mypy" in script
    for package in ("golang-go", "golang-golang-x-mod-dev", "chromium", "postgresql"):
        assert package in script


def test_a_fresh_clone_outside_the_checkout_collects_and_runs_the_tests_that_need_data(outside: Path) -> None:
    needs_git()
    clone = outside / "heldout"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(REPO_ROOT), str(clone)], check=True, timeout=300)
    assert not (clone.parent / "shared").exists()
    env = {**os.environ, "PYTHONPATH": str(clone), "HF_HUB_OFFLINE": "1"}
    env.pop("HELDOUT_REFERENCE", None)
    collected = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider"],
                               cwd=clone, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-3000:]
    count = re.search(r"(\d+) tests? collected", collected.stdout)
    assert count is not None and int(count.group(1)) > 100, collected.stdout[-500:]
    # The RFC 6962/9162 vectors and the reference passport, both under tests/data.
    data_tests = ["tests/test_ledger_tree.py", "tests/test_ledger_verify.py",
                  "tests/test_passport_verify.py::test_reference_passport_valid_at_issue_time",
                  "tests/test_passport_verify.py::test_reference_passport_json_verdict"]
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *data_tests],
                         cwd=clone, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True,
                            check=True, timeout=60)
    assert status.stdout == "", "running the tests left files in the clone: " + status.stdout


def test_the_readme_walkthrough_runs_as_written(tmp_path: Path) -> None:
    pytest.importorskip("medmnist", reason="data synth reads medmnist's task table (the harness extra)")
    block = re.search(r"<!-- walkthrough -->\n```sh\n(.*?)```", README, re.S)
    assert block is not None
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("HELDOUT_STORE", None)
    ran = subprocess.run(["bash", "-euo", "pipefail", "-c", block.group(1)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=600, check=False)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert "sealed gen3" in ran.stdout and "clean" in ran.stdout and "verified" in ran.stdout


def test_a_third_party_audit_writes_nothing_into_the_current_folder(tmp_path: Path) -> None:
    built = build_store(tmp_path / "operator", bundles_per_generation=1)
    export = tmp_path / "export"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "XDG_DATA_HOME": str(tmp_path / "xdg"),
           "HELDOUT_NOW": "2026-09-02T00:00:00Z"}
    env.pop("HELDOUT_STORE", None)
    done = subprocess.run([sys.executable, "-m", "heldout", "ledger", "export", str(export), "--store",
                           str(built.store)], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    here = tmp_path / "checkout"
    here.mkdir()
    audited = subprocess.run([sys.executable, str(REPO_ROOT / "audit.py"), built.ledger_id, "--from", str(export)],
                             cwd=here, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert audited.returncode == 5, audited.stdout + audited.stderr  # gen1 and gen2 are still sealed
    assert list(here.iterdir()) == []
    report = tmp_path / "xdg" / "heldout" / "audit" / built.ledger_id / "from-export" / "audit_report.json"
    assert json.loads(report.read_text())["verdict"] == "incomplete"
    assert f"report written to {report}" in audited.stdout


def test_what_a_user_may_create_in_a_checkout_is_ignored() -> None:
    needs_git()
    names = ["heldout-demo-store/x", "heldout-demo/x", "store/x", "audit_report.json", "public-export/x",
             "third-party-audit.json", ".venv/x"]
    ignored = subprocess.run(["git", "check-ignore", *names], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=60, check=False)
    assert sorted(ignored.stdout.split()) == sorted(names)
