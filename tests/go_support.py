"""Building the Go fixtures under tests/go/ without network: GOPATH mode over Debian's golang.org/x/mod
(golang-golang-x-mod-dev)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

GOPATH = "/usr/share/gocode"


def build_go(package: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``go build`` of tests/go/<package> into a temporary folder; returns the binary."""
    out = tmp_path_factory.mktemp("go") / package
    env = {**os.environ, "GO111MODULE": "off", "GOPATH": GOPATH, "CGO_ENABLED": "0"}
    if not env.get("GOCACHE") and not env.get("XDG_CACHE_HOME") and not env.get("HOME"):
        env["GOCACHE"] = str(tmp_path_factory.mktemp("gocache"))
    build = subprocess.run(["go", "build", "-o", str(out), "."], cwd=REPO_ROOT / "tests" / "go" / package,
                           env=env, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, f"go build failed (is golang-golang-x-mod-dev installed?):\n{build.stderr}"
    return out
