"""The auditor's commands never load torch (nor open_clip, medmnist, torchvision), and never create
~/.medmnist: checked in a fresh interpreter through ``sys.modules``, with HOME pointed at an empty folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REFERENCE_KEY_B64, REFERENCE_PASSPORT, REPO_ROOT

PROBE = """
import json, sys
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
heavy = sorted(m for m in ("torch", "open_clip", "medmnist", "torchvision") if m in sys.modules)
print("PROBE", json.dumps({"code": code, "heavy": heavy}))
"""


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["data", "--help"],
        ["passport", "verify", "{ref}", "--key", REFERENCE_KEY_B64, "--at", "2026-08-04T00:00:00Z"],
        ["data", "synth", "dermamnist", "--out", "{out}", "--n-train", "3", "--n-val", "1", "--n-test", "2"],
    ],
)
def test_command_does_not_import_torch(tmp_path: Path, args: list[str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "HF_HUB_OFFLINE": "1"}
    argv = [a.replace("{ref}", str(REFERENCE_PASSPORT)).replace("{out}", str(tmp_path / "out")) for a in args]
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True, text=True,
                            timeout=120, check=False, env=env, cwd=REPO_ROOT)
    line = next((line for line in result.stdout.splitlines() if line.startswith("PROBE ")), None)
    assert line is not None, result.stdout + result.stderr
    assert json.loads(line[len("PROBE "):]) == {"code": 0, "heavy": []}
    assert not (home / ".medmnist").exists()
