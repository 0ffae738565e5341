"""The code fingerprint: which harness code produced an evaluation (12 hex characters, like the reference).

SHA-256 over every ``.py`` file under ``harness/`` (metrics included), in sorted order of their paths relative
to the package, each contributing ``path NUL length NUL bytes``; the first 12 hex characters. Any edit to the
harness's source changes it; caches, data and files outside ``harness/`` do not.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path
from typing import Final

HARNESS_ROOT: Final = Path(__file__).resolve().parent
FINGERPRINT_HEX: Final = 12


def source_files(root: Path = HARNESS_ROOT) -> list[Path]:
    """The files the fingerprint covers, sorted by their path relative to ``root``."""
    files = [p for p in root.rglob("*.py") if "__pycache__" not in p.parts and p.is_file()]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def fingerprint_of(root: Path) -> str:
    """The fingerprint of the harness source tree at ``root`` (see the module docstring)."""
    digest = hashlib.sha256()
    for path in source_files(root):
        data = path.read_bytes()
        digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        digest.update(str(len(data)).encode("ascii") + b"\0" + data)
    return digest.hexdigest()[:FINGERPRINT_HEX]


@cache
def code_fingerprint() -> str:
    """The fingerprint of the harness this process runs (computed once per process)."""
    return fingerprint_of(HARNESS_ROOT)
