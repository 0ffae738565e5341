"""The auditor's commands never load torch (nor open_clip, medmnist, torchvision), and never create
~/.medmnist: checked in a fresh interpreter through ``sys.modules``, with HOME pointed at an empty folder.

Twice: in this environment (whatever extras it has), and as on a core-only install (``pip install .``), where
the harness packages are made unimportable in the probe. There every auditor command still works, and
``data synth``, which reads medmnist's task table, says in one line that it needs the harness extra (exit 2)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.audit_support import build_store
from tests.conftest import REFERENCE_KEY_B64, REFERENCE_PASSPORT, REPO_ROOT

HEAVY = ("torch", "open_clip", "medmnist", "torchvision", "transformers")

PROBE = f"""
import json, os, sys
HEAVY = {HEAVY!r}
if os.environ.get("PROBE_CORE_ONLY"):
    for name in HEAVY:
        sys.modules[name] = None  # as if not installed: import fails, find_spec returns None
sys.argv = ["heldout", *json.loads(sys.argv[1])]
from heldout.cli import main
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
import harness.models  # the registry itself must not need torch either
import harness.metrics
heavy = sorted(m for m in HEAVY if sys.modules.get(m) is not None)
print("PROBE", json.dumps({{"code": code, "heavy": heavy}}))
"""

SYNTH = ["data", "synth", "dermamnist", "--out", "{out}", "--n-train", "3", "--n-val", "1", "--n-test", "2"]
AUDITOR_COMMANDS = [
    ["--help"],
    ["--version"],
    ["data", "--help"],
    ["passport", "verify", "{ref}", "--key", REFERENCE_KEY_B64, "--at", "2026-08-04T00:00:00Z"],
]


def probe(tmp_path: Path, argv: list[str], *, core_only: bool) -> tuple[dict, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**os.environ, "HOME": str(home), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT),
           "HELDOUT_NOW": "2026-09-02T00:00:00Z"}
    env.pop("PROBE_CORE_ONLY", None)
    if core_only:
        env["PROBE_CORE_ONLY"] = "1"
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True, text=True,
                            timeout=300, check=False, env=env, cwd=tmp_path)
    line = next((line for line in result.stdout.splitlines() if line.startswith("PROBE ")), None)
    assert line is not None, result.stdout + result.stderr
    assert not (home / ".medmnist").exists()
    return json.loads(line[len("PROBE "):]), result.stderr


def fill(args: list[str], tmp_path: Path) -> list[str]:
    return [a.replace("{ref}", str(REFERENCE_PASSPORT)).replace("{out}", str(tmp_path / "out")) for a in args]


@pytest.mark.parametrize("args", [*AUDITOR_COMMANDS, SYNTH], ids=lambda a: " ".join(a[:2]))
def test_command_does_not_import_torch(tmp_path: Path, args: list[str]) -> None:
    outcome, stderr = probe(tmp_path, fill(args, tmp_path), core_only=False)
    expected = 0
    if args is SYNTH and importlib.util.find_spec("medmnist") is None:  # a core-only environment
        expected = 2
        assert "harness extra" in stderr
    assert outcome == {"code": expected, "heavy": []}, stderr


@pytest.mark.parametrize("args", AUDITOR_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_auditor_commands_work_on_a_core_only_install(tmp_path: Path, args: list[str]) -> None:
    outcome, stderr = probe(tmp_path, fill(args, tmp_path), core_only=True)
    assert outcome == {"code": 0, "heavy": []}, stderr


def test_data_synth_on_a_core_only_install_says_it_needs_the_harness(tmp_path: Path) -> None:
    outcome, stderr = probe(tmp_path, fill(SYNTH, tmp_path), core_only=True)
    assert outcome == {"code": 2, "heavy": []}
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "medmnist is not installed" in lines[0] and "harness" in lines[0], stderr
    assert not (tmp_path / "out").exists()


def test_a_third_party_replays_an_export_with_the_core_alone(tmp_path: Path) -> None:
    built = build_store(tmp_path / "operator", bundles_per_generation=1)
    export = tmp_path / "export"
    outcome, stderr = probe(tmp_path, ["ledger", "export", str(export), "--store", str(built.store)],
                            core_only=True)
    assert outcome["code"] == 0, stderr
    outcome, stderr = probe(tmp_path, ["ledger", "verify", built.ledger_id, "--from", str(export)], core_only=True)
    assert outcome == {"code": 0, "heavy": []}, stderr
    outcome, stderr = probe(tmp_path, ["audit", built.ledger_id, "--from", str(export), "--out",
                                       str(tmp_path / "report.json")], core_only=True)
    assert outcome == {"code": 5, "heavy": []}, stderr  # public re-derived; gen1 and gen2 still sealed
    assert json.loads((tmp_path / "report.json").read_text())["rederived"] >= 1
