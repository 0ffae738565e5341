"""Canonical JSON: RFC 8785 (JCS) bytes, with this project's emit rule for floats.

Two layers, kept apart on purpose:

* :func:`jcs_bytes` is plain RFC 8785 over a JSON value (the ``rfc8785`` package): it is what a verifier
  recomputes from a parsed document, so nothing is changed on the way.
* :func:`canonical_bytes` first *prepares* a Python value for emission: every float is rounded once to 6
  decimals with Python ``round()`` (banker's rounding on the decimal value), NaN and infinity are refused,
  numpy scalars and arrays are converted explicitly, tuples become lists. Whatever we sign goes through it.

Round-tripping is exact: parsing the canonical bytes and calling :func:`jcs_bytes` gives the same bytes,
because rounding a float already rounded to 6 decimals is the identity.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

import rfc8785

from keys.errors import MalformedInput

FLOAT_DECIMALS = 6
MAX_SAFE_INTEGER = 2**53 - 1


class CanonicalError(MalformedInput):
    """A value cannot be written as canonical JSON (NaN, infinity, a non-string key, an unknown type)."""


def _numpy_to_python(value: Any) -> Any:
    """Convert numpy scalars and arrays without importing numpy (the auditor's install has it, but the
    rule is explicit conversion: we look at the type's module, never call ``float()`` on unknown objects)."""
    module = type(value).__module__
    if (module == "numpy" or module.startswith("numpy.")) and hasattr(value, "tolist"):
        return value.tolist()
    return value


def prepare(value: Any, *, path: str = "$") -> Any:
    """Return a JSON value ready for JCS: floats rounded to 6 decimals, numpy converted, checks applied."""
    value = _numpy_to_python(value)
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise CanonicalError(f"integer at {path} exceeds the I-JSON safe range", path=path, found=value)
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CanonicalError(f"non-finite number at {path} ({value!r}) cannot be canonical JSON", path=path)
        rounded = round(value, FLOAT_DECIMALS)
        return 0.0 if rounded == 0 else rounded  # -0.0 and 0.0 are one number in JSON
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalError(f"object key at {path} is not a string", path=path, found=repr(key)[:60])
            out[key] = prepare(item, path=f"{path}.{key}")
        return out
    if isinstance(value, (list, tuple)):
        return [prepare(item, path=f"{path}[{i}]") for i, item in enumerate(value)]
    raise CanonicalError(f"value at {path} of type {type(value).__name__} is not JSON", path=path)


def jcs_bytes(value: Any) -> bytes:
    """RFC 8785 canonical bytes of a JSON value, unchanged (no rounding)."""
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise CanonicalError(f"not canonicalisable: {exc}") from exc
    except (TypeError, UnicodeEncodeError) as exc:  # a lone surrogate in a string or key is not UTF-8
        raise CanonicalError(f"not canonicalisable: {exc}") from exc


def canonical_bytes(value: Any) -> bytes:
    """Prepare then canonicalise: the bytes this project signs, hashes and stores."""
    return jcs_bytes(prepare(value))


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in pairs:
        if key in out:
            raise ValueError(f"duplicate member {key!r}")
        out[key] = item
    return out


def _parse_int(text: str) -> int | float:
    # JSON numbers are IEEE doubles (I-JSON): an integer literal beyond 2^53 is a float written without a
    # fraction (RFC 8785 emits 2^53 as "9007199254740992"), so read it back as that float.
    value = int(text)
    return value if abs(value) <= MAX_SAFE_INTEGER else float(text)


def parse_json(data: bytes | str, *, what: str = "document") -> Any:
    """Strict JSON: UTF-8, no duplicate members (they would let two readers see two documents), no
    NaN/Infinity literals. Raises :class:`MalformedInput` naming the document and the position."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedInput(f"{what} is not UTF-8 (byte {exc.start})", offset=exc.start) from None
    if not data.strip():
        raise MalformedInput(f"{what} is empty")
    try:
        return json.loads(
            data, object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant, parse_int=_parse_int
        )
    except json.JSONDecodeError as exc:
        raise MalformedInput(
            f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
            line=exc.lineno, column=exc.colno,
        ) from None
    except ValueError as exc:
        raise MalformedInput(f"{what} is not acceptable JSON: {exc}") from None


def parse_json_object(data: bytes | str, *, what: str = "document") -> dict[str, Any]:
    value = parse_json(data, what=what)
    if not isinstance(value, dict):
        raise MalformedInput(f"{what} is JSON but not an object (found {type(value).__name__})",
                             found=type(value).__name__)
    return value


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
