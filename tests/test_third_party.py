"""A third party's replay, as a stranger would run it: a fresh virtual environment with the core package alone
(``pip install <repo>``: no torch, no model, no private data), then ``python audit.py <ledger-id> --from
<export>`` on an export whose gen2 (and gen1) are still sealed: exit 5, naming every bundle it could not
re-derive and why, with everything else checked. Slow: it installs the package (pip's cache is reused)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from heldout.cli import app
from tests.audit_support import build_store
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow
AUDIT_AT = "2026-09-02T00:00:00Z"


def clean_env() -> dict[str, str]:
    """The environment of a stranger's shell: nothing pointing into this checkout or its venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME",
                                                            "HELDOUT_STORE")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(Path(sys.prefix))))
    env["HELDOUT_NOW"] = AUDIT_AT
    env["COLUMNS"] = "200"  # the summary's tables unwrapped, whatever the terminal
    return env


def test_third_party_replay_in_a_clean_venv_without_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fixture = build_store(tmp_path / "operator")
    monkeypatch.setenv("HELDOUT_NOW", AUDIT_AT)
    result = CliRunner().invoke(app, ["ledger", "export", fixture.ledger_id, str(tmp_path / "export"), "--store",
                                      str(fixture.store)], catch_exceptions=False)
    assert result.exit_code == 0, result.output

    venv = tmp_path / "venv"
    env = clean_env()
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    python = venv / "bin" / "python"
    # a copy of the source tree, so the build leaves nothing in the checkout (build/, *.egg-info)
    source = tmp_path / "source"
    shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(".git", "*.egg-info", "build", "__pycache__",
                                                                      ".mypy_cache", ".ruff_cache",
                                                                      ".pytest_cache", "venv", ".venv"))
    pip = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check", str(source)],
                         capture_output=True, text=True, env=env, timeout=900)
    if pip.returncode != 0:
        pytest.fail(f"pip could not install the core package:\n{pip.stdout[-5000:]}\n{pip.stderr[-5000:]}")

    no_torch = subprocess.run([str(python), "-c", "import torch"], capture_output=True, text=True, env=env,
                              timeout=120)
    assert no_torch.returncode != 0 and "No module named 'torch'" in no_torch.stderr

    # the auditor's folder: audit.py alone, so every import comes from the installed package
    desk = tmp_path / "auditor"
    desk.mkdir()
    shutil.copy(REPO_ROOT / "audit.py", desk / "audit.py")
    where = subprocess.run([str(python), "-c", "import heldout, harness.metrics; print(heldout.__file__)"],
                           capture_output=True, text=True, env=env, cwd=desk, timeout=120)
    assert where.returncode == 0 and str(venv) in where.stdout, where.stdout + where.stderr

    done = subprocess.run([str(python), "audit.py", fixture.ledger_id, "--from", str(tmp_path / "export"),
                           "--out", str(desk / "audit_report.json")], capture_output=True, text=True, env=env,
                          cwd=desk, timeout=600)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 5, done.stdout + done.stderr
    report = json.loads((desk / "audit_report.json").read_text())
    assert report["mode"] == "third-party" and report["ledger_intact"] is True and report["findings"] == []
    sealed = {u["index"]: u for u in report["not_rederived"]}
    assert {u["generation"] for u in sealed.values()} == {"gen1", "gen2"}
    assert report["rederived"] == report["bundles"] - len(sealed) == 2  # the public bundles
    assert "incomplete" in done.stdout and "not re-derived" in done.stdout
    assert all("still sealed" in u["reason"] and "cannot re-derive" in u["reason"] for u in sealed.values())
    for index, unrederived in sealed.items():  # one row each: entry, generation, task, model, why
        row = next((line for line in done.stdout.splitlines() if line.startswith(f"│ {index} ")), "")
        assert unrederived["generation"] in row and unrederived["model_id"] in row, done.stdout
        assert unrederived["reason"] in row
