"""RFC 8785 conformance (the RFC's own examples) and this project's emit rule for floats."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keys import MalformedInput
from seals import CanonicalError, canonical_bytes, jcs_bytes, parse_json, parse_json_object, prepare

# RFC 8785 Appendix B: IEEE-754 bit patterns and their canonical serialisation.
RFC8785_NUMBERS = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),  # minus zero
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


def from_bits(hex_bits: str) -> float:
    return struct.unpack(">d", bytes.fromhex(hex_bits))[0]


@pytest.mark.parametrize(("bits", "expected"), RFC8785_NUMBERS)
def test_rfc8785_number_formatting(bits: str, expected: str) -> None:
    assert jcs_bytes(from_bits(bits)) == expected.encode()


@pytest.mark.parametrize(("value", "expected"), [(1e21, "1e+21"), (1e-7, "1e-7"), (-0.0, "0"), (5e-324, "5e-324"),
                                                 (1e20, "100000000000000000000"), (0.1, "0.1"), (100.0, "100")])
def test_number_formatting_edges(value: float, expected: str) -> None:
    assert jcs_bytes(value) == expected.encode()


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_refused(value: float) -> None:
    with pytest.raises(CanonicalError):
        jcs_bytes(value)
    with pytest.raises(CanonicalError):
        canonical_bytes({"x": [value]})


def test_rfc8785_string_escaping() -> None:
    # RFC 8785 3.2.2.2: only the mandatory escapes, lower-case hex, everything else literal UTF-8.
    value = "\u20ac$\u000f\nA'B\"\\\\\"/"
    assert jcs_bytes(value) == '"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"'.encode()


def test_rfc8785_full_example() -> None:
    # RFC 8785 3.2.2: the complete example, parsed from its JSON text.
    source = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/", "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert jcs_bytes(parse_json(source)) == expected.encode()


def test_rfc8785_key_order_by_utf16_code_units() -> None:
    # RFC 8785 3.2.3: U+1F600 (surrogates D83D DE00) sorts before U+FB33 in UTF-16, unlike in code points.
    value = {"\u20ac": 1, "\r": 2, "\ufb33": 3, "1": 4, "\U0001f600": 5, "\u0080": 6, "\u00f6": 7}
    order = [k for k in parse_json(jcs_bytes(value))]
    assert order == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_emit_rule_rounds_floats_once_to_six_decimals_half_even() -> None:
    assert canonical_bytes([1.2345674, 1.2345676]) == b"[1.234567,1.234568]"
    # Exact binary ties (k/128) go to the even sixth decimal: banker's rounding on the decimal value.
    assert canonical_bytes([0.0078125, 0.0234375]) == b"[0.007812,0.023438]"
    assert prepare(0.0078125) == 0.007812
    assert canonical_bytes({"a": 1e-7}) == b'{"a":0}'
    assert canonical_bytes({"a": -1e-9}) == b'{"a":0}'  # no "-0"
    assert canonical_bytes([1.5, 3, True, None]) == b"[1.5,3,true,null]"


def test_numpy_scalars_and_arrays_are_converted_explicitly() -> None:
    value = {"f": np.float32(0.25), "i": np.int64(7), "b": np.bool_(True), "a": np.array([[1, 2], [3, 4]])}
    assert canonical_bytes(value) == b'{"a":[[1,2],[3,4]],"b":true,"f":0.25,"i":7}'
    with pytest.raises(CanonicalError):
        canonical_bytes({"x": np.float64("nan")})


def test_lone_surrogates_refused() -> None:
    with pytest.raises(CanonicalError):
        jcs_bytes({"\ud800": 1})
    with pytest.raises(CanonicalError):
        canonical_bytes(["\udc00"])


def test_unsupported_values_refused() -> None:
    with pytest.raises(CanonicalError):
        canonical_bytes({1: "non-string key"})
    with pytest.raises(CanonicalError):
        canonical_bytes({"x": object()})
    with pytest.raises(CanonicalError):
        canonical_bytes({"x": 2**60})


@pytest.mark.parametrize("text", ['{"a":1,"a":2}', '{"a": NaN}', '{"a": Infinity}', '{"a":', "", "\xff"])
def test_strict_parsing_refuses(text: str) -> None:
    with pytest.raises(MalformedInput):
        parse_json(text.encode("latin-1"))


def test_parse_json_object_refuses_non_objects() -> None:
    with pytest.raises(MalformedInput, match="not an object"):
        parse_json_object(b"[1,2]")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False, width=64) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_canonical_round_trip_is_a_fixed_point(value: object) -> None:
    once = canonical_bytes(value)
    assert jcs_bytes(parse_json(once)) == once
    assert canonical_bytes(parse_json(once)) == once


# The C-encoder fast path must give exactly the rfc8785 package's bytes wherever it is taken.
fast_path_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False, width=64)
    | st.floats(min_value=-1e7, max_value=1e7, allow_nan=False).map(lambda x: round(x, 6))
    | st.text(alphabet=st.characters(codec="utf-8")),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(alphabet=st.characters(codec="utf-8"), max_size=6), children, max_size=5),
    max_leaves=30,
)


@given(fast_path_values)
def test_fast_path_equals_rfc8785(value: object) -> None:
    import rfc8785

    assert jcs_bytes(value) == rfc8785.dumps(value)


@pytest.mark.parametrize("value", [{"a": 2.0, "b": "\\u0000jcs-number-0\\u0000", "c": "\x00jcs-number-0\x00"},
                                   "\x00", 0.0001, 0.00001, 1e15 + 0.5, 1e16, 123456.789, -0.5, 0.1 + 0.2, 2.0, -0.0,
                                   "\x00\x1f\x7f\u2028\U0001f600", {"\u00e9": 1, "e": 2, "\U0001f600": 3, "\ufb33": 4}])
def test_fast_path_edges_equal_rfc8785(value: object) -> None:
    import rfc8785

    assert jcs_bytes(value) == rfc8785.dumps(value)
    assert jcs_bytes([value, {"k": value}]) == rfc8785.dumps([value, {"k": value}])


# canonical_bytes prepares and canonicalises in one walk where it can: it must give exactly the two steps' bytes
# (prepare, then jcs_bytes), and refuse exactly what they refuse.
one_walk_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60)
    | st.floats(width=64) | st.floats(min_value=-1e-3, max_value=1e-3)
    | st.floats(min_value=-1e17, max_value=1e17).map(lambda x: round(x, 7))
    | st.sampled_from([np.float64(0.1234567), np.int64(3), np.float32(2.5), np.bool_(True), 2.0**53, -(2.0**53) - 2,
                       1e16 + 0.5, 5e-7, 4.9999e-7, 1.5e-6, -0.0])
    | st.text(alphabet=st.characters(codec="utf-8"), max_size=4),
    lambda children: st.lists(children, max_size=4) | st.lists(children, max_size=3).map(tuple)
    | st.dictionaries(st.text(alphabet=st.characters(codec="utf-8"), max_size=4), children, max_size=4),
    max_leaves=25,
)


def two_steps(value: object, exact_integers: bool) -> bytes | str:
    try:
        return jcs_bytes(prepare(value, exact_integers=exact_integers))
    except MalformedInput as exc:
        return f"refused: {type(exc).__name__}"


@settings(max_examples=400, deadline=None)
@given(one_walk_values, st.booleans())
def test_the_one_walk_equals_prepare_then_jcs(value: object, exact_integers: bool) -> None:
    try:
        found: bytes | str = canonical_bytes(value, exact_integers=exact_integers)
    except MalformedInput as exc:
        found = f"refused: {type(exc).__name__}"
    assert found == two_steps(value, exact_integers)


# --- canonical_value: the ledger replay's one-pass reader of canonical bytes --------------------------------------

def _full_path(data: bytes) -> object:
    """What decode_entry's full path accepts: strict parse, then the bytes must be its RFC 8785 bytes."""
    value = parse_json(data)
    if jcs_bytes(value) != data:
        raise MalformedInput("not canonical")
    return value


def _typed(value: object) -> object:
    """A value with its number types made visible (1 == 1.0 == True in Python)."""
    if isinstance(value, dict):
        return {k: _typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, repr(value))


def _agrees_with_full_path(data: bytes) -> bool:
    """canonical_value never accepts what the full path refuses, nor reads a value differently; returns
    whether it decided (True) or declined (False)."""
    from seals.canonical import canonical_value

    fast = canonical_value(data)
    if fast is None:
        return False
    _read_as_the_full_path_reads("canonical_value", data, fast)
    return True


def _read_as_the_full_path_reads(reader: str, data: bytes, value: object) -> None:
    """``reader`` accepted ``data`` as ``value``: the full path must accept it too, and read the same value."""
    try:
        full = _full_path(data)
    except MalformedInput as exc:
        raise AssertionError(f"{reader} accepted {data!r}, which the full path refuses: {exc}") from None
    assert _typed(full) == _typed(value), data


ascii_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False, width=64)
    | st.floats(min_value=-1e7, max_value=1e7, allow_nan=False).map(lambda x: round(x, 6))
    | st.text(alphabet=st.characters(codec="ascii")),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(alphabet=st.characters(codec="ascii"), max_size=5), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(fast_path_values)
def test_canonical_value_agrees_with_the_full_path_on_canonical_bytes(value: object) -> None:
    _agrees_with_full_path(jcs_bytes(value))


@settings(max_examples=400, deadline=None)
@given(ascii_values, st.data())
def test_canonical_value_never_accepts_what_the_full_path_refuses(value: object, data: st.DataObject) -> None:
    """Mutated canonical bytes (a byte changed, inserted or dropped; a member duplicated), and Python's own
    JSON of the value (exponents, 12.0, big integers, other escapes): each is either declined or read as the
    full path reads it."""
    import json

    try:
        canonical = jcs_bytes(value)
    except CanonicalError:  # an integer beyond 2^53 has no RFC 8785 text: take Python's
        canonical = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    candidates = [canonical, json.dumps(value).encode()]
    position = data.draw(st.integers(0, len(canonical)))
    byte = data.draw(st.sampled_from(list(b' "\\,:[]{}0123456789.eE-+tfnul\x00\x7fa')))
    candidates += [canonical[:position] + bytes([byte]) + canonical[position + 1:],
                   canonical[:position] + bytes([byte]) + canonical[position:],
                   canonical[:position] + canonical[position + 1:]]
    if canonical.startswith(b'{"') and b"," not in canonical[1:-1]:
        candidates.append(canonical[:-1] + b"," + canonical[1:])  # its one member twice
    for candidate in candidates:
        _agrees_with_full_path(candidate)


@pytest.mark.parametrize("text", [
    b'{"a":1,"a":1}', b'{"a":12.0}', b'{"a":1e-7}', b'{"a":1E+21}', b'{"a":1e21}', b'{"a":0.00001}',
    b'{"a":NaN}', b'{"a":-0}', b'{"a":-0.0}', b'{"a":9007199254740993}', b'{"a":"\\u00e9"}', b'{"a":"\\/"}',
    b'{"b":1,"a":2}', b'{"a" :1}', b'{"a":"\\ud800"}', b'[' * 70 + b']' * 70, b'{"a":1.50}', b'{"a":0.1}',
    b'{"a":"\\u001f"}', b'{"a":"\\u007f"}', b'{"e":1,"\\u00e9":2}'])
def test_canonical_value_edges(text: bytes) -> None:
    """Each either declined or read as the full path reads it."""
    _agrees_with_full_path(text)


def test_canonical_value_decides_the_common_case() -> None:
    """Ledger entries (ASCII, short decimals, integers) are read in one pass, not declined."""
    from seals.canonical import canonical_value

    entry = {"type": "bundle", "v": 1, "leakage_bits": 12.5, "n_test": 200, "ok": True, "none": None,
             "nested": {"x": [1, 2.25, "\u0001"]}, "created_utc": "2026-03-01T00:00:00Z"}
    assert canonical_value(jcs_bytes(entry)) == entry


# --- canonical_values: the same decision for a batch at once ---------------------------------------------------

def _batch_agrees_item_by_item(items: list[bytes]) -> bool:
    """canonical_values either declines the batch or reads every item exactly as canonical_value reads it
    alone, and accepts only batches whose every item canonical_value accepts; returns whether it decided."""
    from seals.canonical import canonical_value, canonical_values

    batch = canonical_values(items)
    if batch is None:
        return False
    singles = [canonical_value(item) for item in items]
    # it accepted no item that does not stand alone (canonical_value's None is also the value of b"null")
    assert all(single is not None or item == b"null" for item, single in zip(items, singles, strict=True)), items
    assert [_typed(v) for v in batch] == [_typed(v) for v in singles], items
    return True


@settings(max_examples=300, deadline=None)
@given(st.lists(fast_path_values, min_size=1, max_size=6))
def test_canonical_values_reads_a_batch_of_canonical_items_as_each_alone(values: list[object]) -> None:
    _batch_agrees_item_by_item([jcs_bytes(v) for v in values])


def _texts_of(values: list[object]) -> list[bytes]:
    """Each value's RFC 8785 text (an integer beyond 2^53 has none: Python's)."""
    import json

    texts = []
    for value in values:
        try:
            texts.append(jcs_bytes(value))
        except CanonicalError:
            texts.append(json.dumps(value, sort_keys=True, separators=(",", ":")).encode())
    return texts


def _recut(texts: list[bytes], data: st.DataObject) -> list[bytes]:
    """The texts joined with commas and cut again into as many items, at arbitrary places."""
    joined = b",".join(texts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(joined)), min_size=len(texts) - 1,
                                     max_size=len(texts) - 1)))
    return [joined[a:b] for a, b in zip([0, *cuts], [*cuts, len(joined)], strict=True)]


@settings(max_examples=300, deadline=None)
@given(st.lists(ascii_values, min_size=2, max_size=5), st.data())
def test_canonical_values_declines_items_that_straddle_their_boundaries(values: list[object],
                                                                       data: st.DataObject) -> None:
    """The batch's items re-cut at arbitrary places (an item carrying the next one's start, or ``1,2`` as
    one item) and mutated: never accepted unless each item stands alone as canonical_value reads it."""
    items = _recut(_texts_of(values), data)
    _batch_agrees_item_by_item(items)
    position = data.draw(st.integers(0, max(0, len(items) - 1)))
    byte = data.draw(st.sampled_from(list(b' "\\,:[]{}0123456789.eE-+')))
    mutated = list(items)
    mutated[position] = mutated[position] + bytes([byte])
    _batch_agrees_item_by_item(mutated)


@pytest.mark.parametrize("items", [
    # the boundaries move but the element count and the whole text stay canonical
    [b'{"a":1},{"b":2}', b'{"c":[{"d":1}', b'{"e":2}]}'],
    [b'1,2', b'3'], [b'{"a":"x', b'y"}'], [b'{"a":1}', b'{"a":1,"a":1}'], [b'{"a":1}', b'[' * 70 + b']' * 70],
    [b'{"a":1}', b'{"a":9007199254740993}'], [b'{"a":1}', b' {"a":1}'], [b'{"a":1}', b'']])
def test_canonical_values_edges(items: list[bytes]) -> None:
    from seals.canonical import canonical_values

    assert canonical_values(items) is None
    _batch_agrees_item_by_item(items)


def test_canonical_values_decides_the_common_case() -> None:
    from seals.canonical import canonical_values

    entries = [{"type": "bundle", "v": 1, "n": i, "x": [1, 2.25, {"y": None}], "ok": True} for i in range(50)]
    assert canonical_values([jcs_bytes(e) for e in entries]) == entries


plain_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(alphabet=st.characters(codec="utf-8")),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(alphabet=st.characters(codec="utf-8"), max_size=5), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(plain_values, max_size=6) | st.lists(fast_path_values | one_walk_values, max_size=6))
def test_plain_canonical_many_is_plain_canonical_bytes_of_each(values: list[object]) -> None:
    """The ledger's batched encoder answers, for every value, what the one-value encoder answers (bytes, or
    None outside its domain), whether the batch is all plain or mixed."""
    from seals.canonical import plain_canonical_bytes, plain_canonical_many

    assert plain_canonical_many(values) == [plain_canonical_bytes(value) for value in values]


# --- the orjson tier of the ledger's batch writer and reader ----------------------------------------------------
# plain_canonical_many and canonical_values take orjson first where they can prove its bytes are RFC 8785's.
# The proofs rest on three facts about orjson, each tested here: how it escapes strings, that it writes every
# float with a fraction or a signed exponent, and that the tiers agree with the reference paths.

def test_orjson_escapes_every_character_as_rfc8785_does() -> None:
    import orjson
    import rfc8785

    from seals.canonical import _ORJSON_OPTIONS

    chars = [chr(c) for c in range(0x10000) if not 0xD800 <= c < 0xE000]
    chars += [chr(c) for c in range(0x10000, 0x110000, 499)] + ["\U0010ffff", "\U0001f600"]
    differing = [c for c in chars if orjson.dumps(c, option=_ORJSON_OPTIONS) != rfc8785.dumps(c)]
    assert not differing, [hex(ord(c)) for c in differing[:10]]
    assert orjson.dumps({"k": "".join(chars)}, option=_ORJSON_OPTIONS) == rfc8785.dumps({"k": "".join(chars)})


def _float_text_is_marked(value: float) -> None:
    import orjson

    text = orjson.dumps(value)
    assert b"." in text or b"+" in text or b"e-" in text, (value, text)


@given(st.floats(allow_nan=False, allow_infinity=False, width=64))
def test_orjson_writes_every_float_with_a_fraction_or_a_signed_exponent(value: float) -> None:
    _float_text_is_marked(value)


@pytest.mark.parametrize("value", [from_bits(bits) for bits, _ in RFC8785_NUMBERS]
                         + [0.0, -0.0, 1.0, 2.0**53, 1e15, 1e16, 1e17, 1e20, 1e21, 1e22, 1e300, 1e-4, 1e-5, 1e-6,
                            1e-7, 5e-7, 5e-324, -1e-7, 2.5, 123456789.0, 1e308])
def test_orjson_float_edges_are_marked(value: float) -> None:
    _float_text_is_marked(value)


@settings(max_examples=300, deadline=None)
@given(plain_values)
def test_plain_canonical_bytes_is_rfc8785_where_it_answers(value: object) -> None:
    import rfc8785

    from seals.canonical import plain_canonical_bytes

    written = plain_canonical_bytes(value)
    if written is not None:
        assert written == rfc8785.dumps(value)


class _Key(str):
    pass


class _Text(str):
    pass


class _Number(int):
    pass


@pytest.mark.parametrize("values", [
    [{"a": [{"b": 1}, {"c": 2}]}, {"d": "},{"}],  # the separator inside elements: more pieces than values
    [{"a": 1}, {}, {"b": "x"}], [{}], [{"a": 1}, [1, 2]], [{"a": "\x00"}, {"b": 1}], [{"a": 2**53}],
    [{"a": "\ud800"}], [{"\u00e9": 1}], [{"a": "\U0001f600", "b": "\ue000"}],
    # objects of scalars (decided over the whole batch at once): the integer bounds, literals, a float, a key
    # that is a str subclass or not ASCII in a later object, a nested member after flat ones
    [{"a": 2**53 - 1}, {"b": -(2**53) + 1}], [{"a": 1}, {"b": -(2**53)}], [{"a": True, "b": None}, {"c": False}],
    [{"a": "x"}, {"b": 1.0}], [{"a": 1}, {_Key("b"): 1}], [{"a": 1}, {"\u00e9": "x"}], [{"a": 1}, {"b": [1]}],
    [{"a": 1}, {"b": {"c": 2**60}}], [{"a": _Text("x")}], [{"a": 1}, {"b": _Number(2)}], [{}, {}]])
def test_plain_canonical_many_edges(values: list[object]) -> None:
    import rfc8785

    from seals.canonical import plain_canonical_bytes, plain_canonical_many

    many = plain_canonical_many(values)
    assert many == [plain_canonical_bytes(value) for value in values]
    for value, written in zip(values, many, strict=True):
        if written is not None:
            assert written == rfc8785.dumps(value)


scalar_objects = st.dictionaries(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=4),
    st.none() | st.booleans() | st.integers(-(2**53) - 2, 2**53 + 2) | st.text(max_size=4) | st.floats(width=64),
    max_size=5)


@settings(max_examples=300, deadline=None)
@given(st.lists(scalar_objects, min_size=1, max_size=8))
def test_plain_canonical_many_of_flat_objects_is_plain_canonical_bytes_of_each(values: list[object]) -> None:
    """Batches of objects of scalars (ledger entries) are decided in one pass over the batch; the answer for
    each must be the one-value encoder's (a float or an integer past 2^53 anywhere sends the batch to it),
    with orjson and without it (then the domain check alone keeps such values off the fast writer)."""
    from unittest import mock

    import seals.canonical as canonical

    expected = [canonical.plain_canonical_bytes(value) for value in values]
    assert canonical.plain_canonical_many(values) == expected
    with mock.patch.object(canonical, "_orjson", None):
        assert canonical.plain_canonical_many(values) == expected


def _orjson_tier_agrees(items: list[bytes]) -> bool:
    """The orjson tier either declines or reads each item as the full path reads it alone, accepting only
    items the full path accepts; returns whether it decided."""
    from seals.canonical import _orjson_read, _within_depth

    joined = b"[" + b",".join(items) + b"]"
    if not joined.isascii() or not _within_depth(items):  # canonical_values's own conditions for the tier
        return False
    read = _orjson_read(items, joined)
    if read is None:
        return False
    for item, value in zip(items, read, strict=True):
        _read_as_the_full_path_reads("the orjson tier", item, value)
    return True


ascii_objects = st.dictionaries(st.text(alphabet=st.characters(codec="ascii"), max_size=4), ascii_values,
                                min_size=1, max_size=4)


@settings(max_examples=400, deadline=None)
@given(st.lists(ascii_objects, min_size=1, max_size=5), st.data())
def test_orjson_tier_reads_only_what_the_full_path_reads(values: list[dict[str, object]],
                                                        data: st.DataObject) -> None:
    """Canonical objects, Python's own JSON of them (exponents, 12.0, big integers), the batch re-cut at
    arbitrary places and a byte changed, inserted or dropped: each batch declined, or read item by item as
    the full path reads it."""
    import json

    texts = _texts_of(values)
    _orjson_tier_agrees(texts)
    _orjson_tier_agrees([json.dumps(value, sort_keys=True, separators=(",", ":")).encode() for value in values])
    _orjson_tier_agrees(_recut(texts, data))
    position = data.draw(st.integers(0, len(texts) - 1))
    where = data.draw(st.integers(0, len(texts[position])))
    byte = data.draw(st.sampled_from(list(b' "\\,:[]{}0123456789.eE-+tfnul\x00\x7fa')))
    text = texts[position]
    for changed in (text[:where] + bytes([byte]) + text[where + 1:], text[:where] + bytes([byte]) + text[where:],
                    text[:where] + text[where + 1:]):
        _orjson_tier_agrees([*texts[:position], changed, *texts[position + 1:]])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(alphabet=st.characters(codec="ascii")),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(alphabet=st.characters(codec="ascii"), max_size=5), children, max_size=4),
    max_leaves=20), min_size=1, max_size=6))
def test_orjson_tier_decides_canonical_objects_without_floats(values: list[object]) -> None:
    from seals.canonical import _orjson_read, _within_depth

    items = [jcs_bytes({"k": value}) for value in values]
    joined = b"[" + b",".join(items) + b"]"
    if joined.isascii() and _within_depth(items):
        assert _orjson_read(items, joined) is not None or not _float_free_strings(joined), items


def _float_free_strings(joined: bytes) -> bool:
    # the float check's only false alarms come from strings; without these, it must say yes
    return not any(mark in joined for mark in (b".", b"+", b"e-", b"\\"))


@pytest.mark.parametrize("items", [
    [b'{"a":1.0}'], [b'{"a":1e+21}'], [b'{"a":1e21}'], [b'{"a":9007199254740992}'], [b'{"a":9007199254740993}'],
    [b'{"a":-0}'], [b'{"a":1,"a":1}'], [b'{"a":0.5}'], [b'{"a":5e-7}'], [b'{"a":"\\true","b":1}'],
    [b'{"a":"\\true.","b":1}'], [b'{"a":true,"b":"1.5e-3"}'], [b'{"a":[{"b":1}', b'{"c":2}]}', b'{"d":1},{"e":2}'],
    [b'{"a":1}', b'[1]'], [b'{"a":1}', b'"x"'], [b'{"a":"\\u001e"}'], [b'{"a":"\\u00e9"}'], [b'{"a":"\\/"}'],
    [b'{"b":1,"a":2}'], [b'{"a" :1}'], [b'{"a":"\\ud800"}'], [b'{"a":' * 70 + b'1' + b'}' * 70]])
def test_orjson_tier_edges(items: list[bytes]) -> None:
    _orjson_tier_agrees(items)
    _batch_agrees_item_by_item(items)


def test_orjson_tier_reads_objects_only() -> None:
    """Ledger entries are objects; other items are left to the standard library's path (the tier's argument
    about where each item ends is made for objects)."""
    from seals.canonical import _orjson_read, canonical_values

    for items in ([b"1", b"2"], [b'{"a":1}', b'"x"'], [b"[1]"], [b"null"]):
        assert _orjson_read(items, b"[" + b",".join(items) + b"]") is None
    assert canonical_values([b"1", b"[2]"]) == [1, [2]]


@pytest.mark.parametrize(("text", "free"), [
    (b'{"a":1.5}', False), (b'{"a":1e+21}', False), (b'{"a":5e-7}', False), (b'{"a":-2.0}', False),
    (b'{"a":[1,2,{"b":3.25}]}', False), (b'{"a":true,"b":false,"c":null,"d":12}', True),
    (b'{"a":1E5}', False), (b'[2E-3,true]', False), (b'{"e.E":"1.5e-3","t":"true false"}', True)])
def test_float_free(text: bytes, free: bool) -> None:
    from seals.canonical import _float_free

    assert _float_free(text) is free


@settings(max_examples=200, deadline=None)
@given(ascii_objects, st.floats(allow_nan=False, allow_infinity=False, width=64))
def test_float_free_never_misses_a_float(value: dict[str, object], number: float) -> None:
    import json

    import orjson

    from seals.canonical import _float_free

    # texts as orjson writes them (the tier checks its own writing), and as Python does
    for text in (orjson.dumps({**value, "zz": number}), orjson.dumps([value, [number]]),
                 json.dumps([value, number]).encode()):
        assert not _float_free(text), text


@settings(max_examples=150, deadline=None)
@given(st.lists(ascii_objects | plain_values.map(lambda v: {"k": v}), min_size=1, max_size=5))
def test_batch_paths_answer_the_same_without_orjson(values: list[object]) -> None:
    """Without orjson installed, the batch writer and reader give the same answers from the standard
    library's paths."""
    from unittest import mock

    import seals.canonical as canonical

    items = [item for item in canonical.plain_canonical_many(values) if item is not None]
    read = canonical.canonical_values(items)
    with mock.patch.object(canonical, "_orjson", None):
        assert canonical.plain_canonical_many(values) == canonical.plain_canonical_many(values)
        stdlib_items = [item for item in canonical.plain_canonical_many(values) if item is not None]
        stdlib_read = canonical.canonical_values(items)
    assert stdlib_items == items
    assert read is None or stdlib_read is None or _typed(read) == _typed(stdlib_read)
