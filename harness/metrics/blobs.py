"""The canonical bytes of what a bundle's hashes cover, shared by the harness (which writes them) and the
audit (which checks them), numpy only so the auditor's install can recompute them."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from seals.canonical import canonical_bytes


def evaluation_bytes(evaluation: dict[str, Any]) -> bytes:
    """The evaluation blob: canonical JSON (RFC 8785, floats rounded to 6 dp once)."""
    return canonical_bytes(evaluation)


def labels_bytes(labels: ArrayLike) -> bytes:
    """The test labels as canonical JSON: a list of integers in test-case order (``(n,)`` or ``(n, 1)``)."""
    array = np.asarray(labels)
    if array.ndim == 2 and array.shape[1] == 1:
        array = array[:, 0]
    return canonical_bytes([int(v) for v in array.tolist()])
