"""The auditor's commands never load torch: checked in a fresh interpreter through ``sys.modules``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REFERENCE_KEY_B64

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
heavy = sorted(m for m in ("torch", "open_clip", "medmnist", "torchvision") if m in sys.modules)
print("PROBE", json.dumps({"code": code, "heavy": heavy}))
"""


def run_probe(args: list[str]) -> dict:
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True, text=True,
                            timeout=120, check=False)
    line = next(line for line in result.stdout.splitlines() if line.startswith("PROBE "))
    return json.loads(line[len("PROBE "):])


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["passport", "verify", "{ref}", "--key", REFERENCE_KEY_B64, "--at", "2026-08-04T00:00:00Z"],
    ],
)
def test_command_does_not_import_torch(args: list[str], reference_passport_path: Path) -> None:
    probe = run_probe([a.replace("{ref}", str(reference_passport_path)) for a in args])
    assert probe["code"] == 0
    assert probe["heavy"] == []
