"""Canonical JSON: RFC 8785 (JCS) bytes, with this project's emit rule for floats.

Two layers, kept apart on purpose:

* :func:`jcs_bytes` is plain RFC 8785 over a JSON value (the ``rfc8785`` package): it is what a verifier
  recomputes from a parsed document, so nothing is changed on the way.
* :func:`canonical_bytes` first *prepares* a Python value for emission: every float is rounded once to 6
  decimals with Python ``round()`` (banker's rounding on the decimal value), NaN and infinity are refused,
  numpy scalars and arrays are converted explicitly, tuples become lists. Whatever we sign goes through it.

Round-tripping is exact: parsing the canonical bytes and calling :func:`jcs_bytes` gives the same bytes,
because rounding a float already rounded to 6 decimals is the identity.

Speed: the ``rfc8785`` package is pure Python (about 45 us per KiB). Where its output provably equals the C
JSON encoder's (``sort_keys``, compact separators, ``ensure_ascii=False``) the encoder is used instead; see
:func:`_fast_value`. Everything outside that domain goes through ``rfc8785``. tests/test_canonical.py checks
the equality with hypothesis.

The ledger's two hot paths (writing a batch of entries, reading a chunk of stored entries back) take ``orjson``
first, a compiled reader and writer, where they can prove its bytes are RFC 8785's: values without floats,
ASCII keys, integers inside 2^53 (:func:`plain_canonical_many`, :func:`canonical_values`). Without ``orjson``
installed they take the standard library's C paths, with the same answers.
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
import json.scanner
import math
from collections.abc import Callable, Mapping
from itertools import chain, compress, repeat
from operator import is_
from typing import Any

import rfc8785

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover (a core dependency; the standard library's paths answer the same)
    _orjson = None  # type: ignore[assignment]

from keys.errors import MalformedInput
from keys.safeio import DOCUMENT_LIMIT, MAX_JSON_DEPTH, check_json_depth

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


def prepare(value: Any, *, path: str = "$", exact_integers: bool = False) -> Any:
    """Return a JSON value ready for JCS: floats rounded to 6 decimals, numpy converted, checks applied;
    ``exact_integers`` also refuses integral floats beyond 2^53 (ledger entries: no such number is meant)."""
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
        if rounded.is_integer():
            if abs(rounded) <= MAX_SAFE_INTEGER:
                # JSON has one number type: 2.0 and 2 are the same number, written "2" by RFC 8785; -0.0 is 0.
                return int(rounded)
            if exact_integers:
                # an integral number beyond 2^53 (an integer literal in a file is read back as a double):
                # other readers (JavaScript, I-JSON) cannot hold it exactly, so it is refused, never rounded
                raise CanonicalError(f"number at {path} exceeds the I-JSON safe range (2^53)", path=path,
                                     found=repr(value)[:40])
        return rounded
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalError(f"object key at {path} is not a string", path=path, found=repr(key)[:60])
            out[key] = prepare(item, path=f"{path}.{key}", exact_integers=exact_integers)
        return out
    if isinstance(value, (list, tuple)):
        return [prepare(item, path=f"{path}[{i}]", exact_integers=exact_integers) for i, item in enumerate(value)]
    raise CanonicalError(f"value at {path} of type {type(value).__name__} is not JSON", path=path)


_FAST_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                                 check_circular=False)


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


# The C encoder behind json.JSONEncoder, made once: JSONEncoder.encode builds a new one per call, which is a
# tenth of the cost of encoding a 1 KiB ledger entry. Same arguments as _FAST_ENCODER (sort_keys, compact
# separators, UTF-8 literals, no NaN); falls back to it where the C accelerator is absent.
_C_MAKE_ENCODER = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODER = (_C_MAKE_ENCODER(None, _refuse, json.encoder.encode_basestring, None, ":", ",", True, False, False)
              if _C_MAKE_ENCODER is not None else None)


def _encode(value: Any) -> str:
    if _C_ENCODER is None or isinstance(value, str):
        return _FAST_ENCODER.encode(value)
    return "".join(_C_ENCODER(value, 0))


def _encode_each(values: list[Any]) -> list[bytes]:
    """``_encode(value).encode()`` of each value, the C encoder mapped over the batch in C where it applies to
    every value (the batch paths' per-item encode)."""
    if _C_ENCODER is None or any(isinstance(value, str) for value in values):
        return [_encode(value).encode("utf-8") for value in values]
    return list(map(str.encode, map("".join, map(_C_ENCODER, values, repeat(0)))))
_FAST_MAX_DEPTH = 64


_PLACEHOLDER = "\x00jcs-number-{}\x00"


class _OutsideFastDomain(Exception):
    pass


def _fast_value(value: Any, numbers: list[float], depth: int = 0) -> Any:
    r"""``value`` made ready for the C encoder, whose output then equals RFC 8785's; raises
    :class:`_OutsideFastDomain` where it cannot be.

    The domain: exact ``str``/``bool``/``None``/``list``/``dict`` types, ``int`` inside the I-JSON range, finite
    ``float``, ASCII object keys (JCS sorts by UTF-16 code units, Python by code points: the orders agree on
    ASCII), strings without NUL. Strings are escaped identically by both (\b \f \n \r \t \" \\, \u00xx lower-case
    for other control characters, everything else literal UTF-8). A float whose ``repr`` is positional and not
    integral is written identically too (Python's ``repr`` and ECMAScript's Number-to-String give the same
    shortest digits; Python is positional for 1e-4 <= |x| < 1e16, ECMAScript for 1e-6 <= |x| < 1e21). Any other
    float (2.0, 1e-05, 1e+16) is replaced by a placeholder string and written by ``rfc8785`` afterwards.
    """
    return _ready(value, numbers, depth, prepare=False)


def _ready(value: Any, numbers: list[float], depth: int = 0, *, prepare: bool) -> Any:
    """The walk behind :func:`_fast_value` (``prepare`` False) and :func:`_prepared_fast` (``prepare`` True:
    floats rounded to 6 decimals and integral ones written as integers first, tuples taken as lists, as
    :func:`prepare` does). Strings, booleans and nulls are handled in their object's loop (this walk is on
    the audit's per-bundle path)."""
    kind = type(value)
    if kind is dict:
        if depth >= _FAST_MAX_DEPTH:
            raise _OutsideFastDomain
        out = {}
        for key, item in value.items():
            if type(key) is not str or not key.isascii() or "\x00" in key:
                raise _OutsideFastDomain
            item_kind = type(item)
            if item_kind is str:
                if "\x00" in item:
                    raise _OutsideFastDomain
                out[key] = item
            elif item is None or item_kind is bool:
                out[key] = item
            else:
                out[key] = _ready(item, numbers, depth + 1, prepare=prepare)
        return out
    if kind is list or (prepare and kind is tuple):
        if depth >= _FAST_MAX_DEPTH:
            raise _OutsideFastDomain
        return [_ready(item, numbers, depth + 1, prepare=prepare) for item in value]
    if kind is str:
        if "\x00" in value:
            raise _OutsideFastDomain
        return value
    if kind is bool or value is None:
        return value
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        raise _OutsideFastDomain
    if kind is float:
        if not math.isfinite(value):
            raise _OutsideFastDomain
        if prepare:
            value = round(value, FLOAT_DECIMALS)
            if value.is_integer():  # prepare writes it as the integer (beyond 2^53: left to the two steps)
                if abs(value) <= MAX_SAFE_INTEGER:
                    return int(value)
                raise _OutsideFastDomain
        if not value.is_integer() and "e" not in repr(value):
            return value
        numbers.append(value)
        return _PLACEHOLDER.format(len(numbers) - 1)
    raise _OutsideFastDomain


def _direct(value: Any, depth: int = 0) -> bool:
    """Can the C encoder write ``value`` as is (every float already in the positional, non-integral form)?
    A check without copying: the common case (most documents) needs no placeholder. Plain loops, not
    ``all()`` over generators: this is on the audit's per-bundle path."""
    kind = type(value)
    if kind is str:
        return "\x00" not in value
    if kind is int:
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    if kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value) and not value.is_integer() and "e" not in repr(value)
    if depth >= _FAST_MAX_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not key.isascii() or "\x00" in key:
                return False
            if type(item) is str:
                if "\x00" in item:
                    return False
            elif not _direct(item, depth + 1):
                return False
        return True
    if kind is list:
        return all(_direct(item, depth + 1) for item in value)
    return False


def _fast_jcs(value: Any) -> bytes | None:
    """RFC 8785 bytes through the C encoder, or ``None`` when ``value`` is outside :func:`_fast_value`'s domain."""
    numbers: list[float] = []
    try:
        ready = value if _direct(value) else _fast_value(value, numbers)
    except (_OutsideFastDomain, RecursionError):
        return None
    return _encode_ready(ready, numbers)


def _encode_ready(ready: Any, numbers: list[float]) -> bytes | None:
    """The C encoder's bytes of a value made ready by :func:`_fast_value` (or :func:`_prepared_fast`), each
    placeholder replaced by ``rfc8785``'s text of its number; None where the encoder cannot write it."""
    try:
        text = _encode(ready)
    except (_OutsideFastDomain, UnicodeEncodeError, RecursionError):
        return None
    for i, number in enumerate(numbers):
        # The encoder wrote each placeholder as a JSON string with its NULs escaped: exactly this text.
        text = text.replace(f'"\\u0000jcs-number-{i}\\u0000"', rfc8785.dumps(number).decode("ascii"), 1)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the caller's rfc8785 path refuses it with its message
        return None


def _prepared_fast(value: Any, numbers: list[float]) -> Any:
    """``_fast_value(prepare(value))`` in one walk, for the common case: exact ``dict``/``list``/``tuple``/
    ``str``/``bool``/``None``/``int``/``float`` values, ASCII keys, no NUL, integers and rounded floats within
    2^53, nesting below the fast depth. Raises :class:`_OutsideFastDomain` for anything else (numpy values,
    non-finite floats, other mappings, ...): the caller then prepares and canonicalises it in two steps,
    which convert, refuse or write it as they do."""
    return _ready(value, numbers, prepare=True)


# orjson's options for plain values: sorted keys, integers refused beyond 2^53 - 1 (the I-JSON range, as
# _direct checks), and no writing in its own way of what JSON has no form for (dataclasses, datetimes,
# subclasses: refused, the caller's other path names them).
_ORJSON_OPTIONS = (_orjson.OPT_SORT_KEYS | _orjson.OPT_STRICT_INTEGER | _orjson.OPT_PASSTHROUGH_DATACLASS
                   | _orjson.OPT_PASSTHROUGH_DATETIME | _orjson.OPT_PASSTHROUGH_SUBCLASS) if _orjson else 0


def _plain(value: Any) -> bool:
    """Whether ``value`` is in the plain domain: exact JSON types without a float, ASCII keys, integers within
    2^53, nested below the fast depth. (Unlike :func:`_direct`'s, this domain takes NUL in strings: no float
    means no placeholder, and both writers escape NUL as RFC 8785 does.)"""
    try:
        return _plain_walk(value, 0)
    except RecursionError:
        return False


def _plain_walk(value: Any, depth: int) -> bool:
    # Plain loops, not all() over generators: this is on the ledger's append path.
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    if depth >= _FAST_MAX_DEPTH:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not key.isascii():
                return False
            if type(item) is not str and not _plain_walk(item, depth + 1):
                return False
        return True
    if kind is list:
        return all(type(item) is str or _plain_walk(item, depth + 1) for item in value)
    return False


def plain_canonical_bytes(value: Any) -> bytes | None:
    """:func:`canonical_bytes` of a value that holds no float, computed without the preparing walk (for such
    values it is the identity), or ``None`` when the value is outside that domain. The ledger's hot path.

    Inside the domain (exact JSON types, ASCII keys, integers within 2^53, no float; see :func:`_plain`)
    orjson writes RFC 8785's bytes: keys sorted by code point are sorted by UTF-16 code unit when they are
    ASCII, integers and literals are written alike, and strings are escaped alike (tests/test_canonical.py
    compares every character of the Basic Multilingual Plane, and values with hypothesis)."""
    if not _plain(value):
        return None
    if _orjson is not None:
        try:
            return _orjson.dumps(value, option=_ORJSON_OPTIONS)
        except _orjson.JSONEncodeError:  # a lone surrogate: the caller's rfc8785 path refuses it
            return None
    return _encode_ready(value, [])


def plain_canonical_many(values: list[Any]) -> list[bytes | None]:
    """:func:`plain_canonical_bytes` of each value (``None`` where it answers ``None``), the whole batch written
    in one call when every value is in the domain (the ledger's batched appends)."""
    plain = _flat_plain(values)
    if plain is None:  # some value nests: walked one by one
        try:
            plain = bool(values) and all([_plain_walk(value, 0) for value in values])  # _plain of each, one try
        except RecursionError:
            plain = False
    if plain:
        written = _orjson_each(values)
        if written is not None:
            return list(written)
        try:
            return list(_encode_each(values))
        except (_OutsideFastDomain, UnicodeEncodeError, RecursionError, ValueError, TypeError):
            pass
    return [plain_canonical_bytes(value) for value in values]


_SCALARS = frozenset({str, bool, type(None)})


def _flat_plain(values: list[Any]) -> bool | None:
    """:func:`_plain` of every value when each is an object of scalars (a ledger entry is one), decided in a few
    C passes over the whole batch instead of a Python loop per member; ``None`` when some member nests (or the
    values are not all objects): then the caller walks each value."""
    if not values or set(map(type, values)) != {dict}:
        return None
    if not set(map(type, chain.from_iterable(values))) <= {str}:  # (iterating a dict gives its keys)
        return False
    if not "".join(chain.from_iterable(values)).isascii():
        return False
    members = list(chain.from_iterable(map(dict.values, values)))
    kinds = set(map(type, members))
    if kinds <= _SCALARS:
        return True
    if kinds <= _SCALARS | {int}:
        numbers = list(compress(members, map(is_, map(type, members), repeat(int))))
        return min(numbers) >= -MAX_SAFE_INTEGER and max(numbers) <= MAX_SAFE_INTEGER
    return None


def _orjson_each(values: list[Any]) -> list[bytes] | None:
    """orjson's bytes of each plain value, written as one list and cut at its elements' boundaries; ``None``
    when orjson is absent, a value is not an object, or the cut is not certain.

    The cut: every element is an object, so consecutive elements meet at ``},{``. The text is cut at every
    ``},{`` and kept only when there are exactly as many pieces as values: then every occurrence is such a
    meeting point (one inside an element would make a piece more; ``},{`` cannot overlap itself, so none is
    missed)."""
    if _orjson is None or set(map(type, values)) != {dict}:
        return None
    try:
        text = _orjson.dumps(values, option=_ORJSON_OPTIONS)
    except _orjson.JSONEncodeError:
        return None
    # Each ``}`` is found by memchr and the two bytes after it compared: the same cut points as splitting at
    # ``},{`` (every occurrence starts with a ``}``), a third faster than searching for the three bytes, and
    # each piece is sliced once, braces included.
    pieces: list[bytes] = []
    find, start, position, last = text.find, 1, 1, len(text) - 1
    while (brace := find(b"}", position, last)) >= 0:
        if text[brace + 1:brace + 3] == b",{":
            pieces.append(text[start:brace + 1])
            start = brace + 2
        position = brace + 1
    pieces.append(text[start:last])
    return pieces if len(pieces) == len(values) else None


def jcs_bytes(value: Any) -> bytes:
    """RFC 8785 canonical bytes of a JSON value, unchanged (no rounding)."""
    fast = _fast_jcs(value)
    if fast is not None:
        return fast
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise CanonicalError(f"not canonicalisable: {exc}") from exc
    except (TypeError, UnicodeEncodeError) as exc:  # a lone surrogate in a string or key is not UTF-8
        raise CanonicalError(f"not canonicalisable: {exc}") from exc


def canonical_bytes(value: Any, *, exact_integers: bool = False) -> bytes:
    """Prepare then canonicalise: the bytes this project signs, hashes and stores. In the common case (see
    :func:`_prepared_fast`) both are done in one walk, with the same result."""
    numbers: list[float] = []
    try:
        fast = _encode_ready(_prepared_fast(value, numbers), numbers)
    except (_OutsideFastDomain, RecursionError):
        fast = None
    if fast is not None:
        return fast
    return jcs_bytes(prepare(value, exact_integers=exact_integers))


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
    digits = text.lstrip("-")
    if len(digits) > 17:  # (beyond 2^53 anyway: read as the double it is, never as a huge int Python refuses)
        return _parse_float(text)
    value = int(text)
    return value if abs(value) <= MAX_SAFE_INTEGER else _parse_float(text)


def _parse_float(text: str) -> float:
    # A literal too large for a double (1e400) would read as infinity, which JSON has no form for: refused as
    # the NaN and Infinity literals are, so no such value enters a document (or an audit's evidence).
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large for a double")
    return value


def parse_json(data: bytes | str, *, what: str = "document") -> Any:
    """Strict JSON: UTF-8, no duplicate members (they would let two readers see two documents), no
    NaN/Infinity literals nor numbers beyond a double's range, nesting at most ``keys.safeio.MAX_JSON_DEPTH``
    deep. Raises :class:`MalformedInput` naming the document and the position."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedInput(f"{what} is not UTF-8 (byte {exc.start})", offset=exc.start) from None
    if len(data) > DOCUMENT_LIMIT:  # parsing costs several times the text in memory: bounded here for all
        raise MalformedInput(f"{what} is {len(data)} characters, over the {DOCUMENT_LIMIT}-byte document limit",
                             expected=DOCUMENT_LIMIT, found=len(data))
    if not data.strip():
        raise MalformedInput(f"{what} is empty")
    # before json recurses (deep nesting is a refusal, not a RecursionError) and builds (a text of empty
    # containers would cost 20 times its size): check_json_depth holds the text to check_json_width too
    check_json_depth(data, what=what)
    try:
        return json.loads(
            data, object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant, parse_int=_parse_int,
            parse_float=_parse_float,
        )
    except json.JSONDecodeError as exc:
        raise MalformedInput(
            f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})",
            line=exc.lineno, column=exc.colno,
        ) from None
    except ValueError as exc:
        raise MalformedInput(f"{what} is not acceptable JSON: {exc}") from None
    except RecursionError:  # (the depth check above refuses what nests deep; this is the last word, not a trace)
        raise MalformedInput(f"{what} is nested too deeply to read", expected=MAX_JSON_DEPTH) from None


class _Declined(Exception):
    pass


def _plain_float(text: str) -> float:
    # A float token that Python and RFC 8785 (ECMAScript) write alike when Python writes it back unchanged:
    # fixed notation (Python uses it for 1e-4 <= |x| < 1e16, ECMAScript for 1e-6 <= |x| < 1e21), the same
    # shortest round-trip digits, and not integral (Python writes 12.0, ECMAScript 12). Exponents and ".0"
    # decline to the full path.
    if "e" in text or "E" in text or text.endswith(".0"):
        raise _Declined
    return float(text)


# Integers are read as parse_json reads them (beyond 2^53 as a float, which never writes back unchanged).
_CANONICAL_DECODER = json.JSONDecoder(parse_float=_plain_float, parse_int=_parse_int,
                                      parse_constant=_refuse_constant)
_CANONICAL_SCAN: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(_CANONICAL_DECODER)  # type: ignore[arg-type]


def canonical_value(data: bytes) -> Any | None:
    """The value of ``data`` when ``data`` is exactly the RFC 8785 bytes of a value :func:`parse_json` accepts
    and :func:`jcs_bytes` writes back unchanged, decided in C; ``None`` when this cannot tell, and the caller
    takes the full path (:func:`parse_json`, then :func:`jcs_bytes` and a comparison), which accepts everything
    this accepts and names the fault of anything else. The ledger's replay reads every entry through it.

    Why it is sound: the text is ASCII (so key order by code point is RFC 8785's UTF-16 order; an escaped lone
    surrogate cannot be encoded back and declines) and nested within the depth limit; NaN and Infinity are
    refused; integers are read as :func:`parse_json` reads them (beyond 2^53: a float, whose Python text is
    never RFC 8785's, so it declines); a float token is taken only where Python's and RFC 8785's number texts
    coincide (``_plain_float``). For such values the compact, sorted C encoder writes exactly RFC 8785's bytes,
    so equality with ``data`` also rules out duplicate members (the parser keeps one and
    the bytes would differ), whitespace, escapes RFC 8785 does not use, and non-canonical numbers. Tests check
    with hypothesis that it never accepts what the full path refuses, nor reads a value differently.
    """
    if not data.isascii():
        return None
    try:
        check_json_depth(data, what="entry")
        text = data.decode("ascii")
        value, end = _CANONICAL_SCAN(text, 0)  # the C scanner, without decode()'s wrappers
        written = _encode(value).encode("utf-8")
    except (_Declined, MalformedInput, ValueError, TypeError, RecursionError, StopIteration):
        return None
    return value if end == len(text) and written == data else None


def canonical_values(items: list[bytes]) -> list[Any] | None:
    """:func:`canonical_value` of every item of a batch, decided in three C passes over the whole batch instead
    of a scan and an encode per item; ``None`` when this cannot tell for the batch (the caller then asks
    :func:`canonical_value` item by item, which also names the faulty one).

    Why it is the same answer: the batch is read as the JSON array ``J = "[" + ",".join(items) + "]"`` with
    :func:`canonical_value`'s scanner, and accepted only when each element, written back by the same encoder,
    is byte for byte its item. Then ``J`` is exactly the encoder's text of the list, whose i-th element spans
    exactly the i-th item; JSON's grammar is unambiguous, so the scanner's reading of ``J`` is the encoder's
    structure, and the scanner read each item's span as it reads the item alone: each value is
    ``canonical_value(item)``. An item that would not stand alone (``1,2``, a bracket closed in the next one)
    makes the element count or a written element differ, and the batch declines. The depth limit is checked
    on each item (its brackets counted, a sufficient bound), ASCII on the whole. Tests check the equivalence
    with hypothesis, on items built to straddle their boundaries."""
    if not items:
        return []
    joined = b"[" + b",".join(items) + b"]"
    if not joined.isascii():
        return None
    if not _within_depth(items):
        return None
    if _orjson is not None:
        read = _orjson_read(items, joined)
        if read is not None:
            return read
    text = joined.decode("ascii")
    try:
        values, end = _CANONICAL_SCAN(text, 0)
        if end != len(text) or type(values) is not list or len(values) != len(items):
            return None
        written = _encode_each(values)
    except (_Declined, MalformedInput, ValueError, TypeError, RecursionError, StopIteration):
        return None
    return values if written == items else None


def _orjson_read(items: list[bytes], joined: bytes) -> list[Any] | None:
    """:func:`canonical_values` of a batch of objects without floats, read by orjson; ``None`` when this cannot
    tell (a float, an item that is not an object, orjson refusing or writing other bytes), and the caller takes
    the standard library's path. The caller has checked that ``joined`` (the items as one JSON array) is ASCII,
    and the items within the depth limit (:func:`_within_depth`).

    Why it is the same answer. Each item is read alone, so each is one whole JSON text, and an object. The
    values are written back as one list and accepted only when that is ``joined`` byte for byte:

    * The i-th element the writer wrote is the i-th item: both are objects starting where the previous one
      ended (first at offset 1), and an object's text ends at the brace matching its first one, which the one
      string fixes. So each item is orjson's text of its own value.
    * orjson's text is RFC 8785's for these values: no float (orjson writes every float with ``.``, ``+`` (in
      ``e+``) or ``e-``; when the text holds one of these, :func:`_float_free` decides), integers within 2^53 - 1
      (``OPT_STRICT_INTEGER`` refuses the others), ASCII keys (so sorted by code point is sorted by UTF-16
      code unit), strings escaped as RFC 8785 escapes them (compared character by character in the tests).
    * A text that reads back as another text was not canonical: duplicate members (one is kept), whitespace,
      an escape RFC 8785 does not use, ``-0``; the bytes differ and the batch declines.
    * On such texts orjson and the standard library read the same value (JSON's grammar is unambiguous, and
      no number is outside the range both read exactly)."""
    try:
        values = list(map(_orjson.loads, items))
        if set(map(type, values)) != {dict} or _orjson.dumps(values, option=_ORJSON_OPTIONS) != joined:
            return None
    except (ValueError, TypeError, RecursionError):  # orjson's JSONDecodeError, JSONEncodeError
        return None
    # orjson writes every float with a fraction or an exponent, always signed (tests check this on every kind of
    # float); "+" and "." are found by memchr, "e-" by a slower search only when they are absent.
    if (b"." in joined or b"+" in joined or b"e-" in joined) and not _float_free(joined):
        return None
    return values


# Outside strings these characters are only in numbers with a fraction or an exponent (and in true and false,
# which _float_free takes out first); inside strings, Z is as good a character as any.
_FLOAT_MARKS = bytes.maketrans(b".eE", b"ZZZ")


def _float_free(joined: bytes) -> bool:
    """Whether the JSON text ``joined`` (ASCII, valid) holds no number with a fraction or an exponent.

    ``true`` and ``false`` are replaced by ``1`` and ``0``, then every ``.``, ``e`` and ``E`` by ``Z``, and
    the result is read: a number with a fraction or an exponent now holds a ``Z`` outside any string, which
    no JSON reader takes. The replacements touch neither quotes nor backslashes, so every string keeps its
    extent, or (an escape such as ``\t`` before ``rue``, ``\u001e``) stops being valid: either way the answer
    is never a wrong yes, only at worst a no for a text without a float, which then takes the slower path."""
    marked = joined.replace(b"true", b"1").replace(b"false", b"0").translate(_FLOAT_MARKS)
    try:
        _orjson.loads(marked)
    except (ValueError, RecursionError):
        return False
    return True


def _within_depth(items: list[bytes]) -> bool:
    """Whether every item is certainly nested within the depth limit (False: it may not be, and the caller
    declines). Fewer openings than the limit cannot nest deeper (check_json_depth's own first test, per item;
    the two maxima bound each item's count from above, and are counted in C). Nor can an item too short to
    hold one more opening and closing bracket than the limit allows (most ledger entries: nothing to count),
    nor one whose only bracket is its first character."""
    return (max(map(len, items)) <= 2 * MAX_JSON_DEPTH + 1
            # nor an object with no other bracket (a flat ledger entry), found by memchr
            or (max(map(bytes.find, items, repeat(b"{"), repeat(1))) < 0
                and not any(map(bytes.__contains__, items, repeat(b"["))))
            or (max(map(bytes.count, items, repeat(b"{"))) + max(map(bytes.count, items, repeat(b"["))))
            <= MAX_JSON_DEPTH or max(map(_openings, items)) <= MAX_JSON_DEPTH)


def _openings(item: bytes) -> int:
    return item.count(b"{") + item.count(b"[")


def parse_json_object(data: bytes | str, *, what: str = "document") -> dict[str, Any]:
    value = parse_json(data, what=what)
    if not isinstance(value, dict):
        raise MalformedInput(f"{what} is JSON but not an object (found {type(value).__name__})",
                             found=type(value).__name__)
    return value


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
