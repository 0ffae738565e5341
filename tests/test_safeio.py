"""``keys.safeio``, the one bounded, confined reader, checked on its own (the campaign in
tests/test_hostile_export.py checks it through the auditor's commands)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from keys.safeio import UnsafeFile, check_json_depth, file_in, list_in, npy_header, read_in, read_named, require_in

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ax,:\u00e9\u2028'),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\a'), children,
                                                                       max_size=3),
    max_leaves=40,
)


def depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    return 0


@given(json_values, st.integers(0, 8))
def test_the_linear_depth_check_agrees_with_the_recursive_depth(value: Any, limit: int) -> None:
    """Brackets inside strings (escaped quotes too) do not count; nesting up to the limit passes; the text as
    str or as its UTF-8 bytes, its other characters written as they are or escaped."""
    text = json.dumps(value, ensure_ascii=bool(limit % 2))
    if depth(value) <= limit:
        check_json_depth(text, what="doc", limit=limit)
        check_json_depth(text.encode(), what="doc", limit=limit)
    else:
        with pytest.raises(UnsafeFile, match="nested more than"):
            check_json_depth(text, what="doc", limit=limit)
        with pytest.raises(UnsafeFile, match="nested more than"):
            check_json_depth(text.encode(), what="doc", limit=limit)


def test_a_wide_text_is_refused_before_it_is_parsed_and_within_a_few_times_its_size() -> None:
    """Empty arrays, 3 bytes each, cost a parser about 20 times their text (FORMATS section 2 bounds the count:
    4,096 + length / 16). The refusal comes before parsing, so it costs about the text's size; a text at the
    bound parses."""
    import tracemalloc

    from keys import MalformedInput
    from keys.safeio import JSON_CHARS_PER_CONTAINER, JSON_CONTAINER_ALLOWANCE
    from seals import parse_json

    wide = b"[" + b"[]," * 2_000_000 + b"[]]"
    tracemalloc.start()
    try:
        with pytest.raises(MalformedInput, match="arrays and objects"):
            parse_json(wide, what="doc")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(wide), peak
    padding = b" " * (JSON_CHARS_PER_CONTAINER - 3)
    count = 100_000
    at_bound = b"[" + (b"[]," + padding) * count + b"[]]"
    assert at_bound.count(b"[") <= JSON_CONTAINER_ALLOWANCE + len(at_bound) // JSON_CHARS_PER_CONTAINER
    assert len(parse_json(at_bound, what="doc")) == count + 1
    with pytest.raises(MalformedInput, match="arrays and objects"):
        parse_json(b"[" + b"[]," * (2 * JSON_CONTAINER_ALLOWANCE) + b"[]]", what="doc")


def test_deep_nesting_within_64_kib_is_refused_without_recursion() -> None:
    with pytest.raises(UnsafeFile, match="nested more than 64"):
        check_json_depth(b"[" * 30000 + b"]" * 30000, what="entry")


@given(st.integers(65, 5000), st.sampled_from([b"[", b'{"a":', b'[{"a":']), st.integers(0, 100),
       st.sampled_from([b"", b"1", b"]", b"}", b'"x', b"]]]"]))
def test_deep_nesting_that_is_never_closed_is_refused_without_recursion(opened: int, opener: bytes, closed: int,
                                                                        tail: bytes) -> None:
    """Nested past the limit and never closed (or closed by too few brackets, or the wrong ones): the depth check
    passed it as "unbalanced: the parser reports it", and the parser recursed into every bracket before the
    fault: a RecursionError from every reader of a stranger's file (red-team round 20). Refused by the depth
    check; and whatever reaches the parser is a MalformedInput, never a RecursionError."""
    from keys import MalformedInput
    from seals import parse_json

    text = opener * opened + tail + b"]" * min(closed, opened - 1)
    with pytest.raises(UnsafeFile, match="nested more than 64"):
        check_json_depth(text, what="doc")
    with pytest.raises(MalformedInput):
        parse_json(text, what="doc")


@given(json_values, st.sampled_from([0, 30, 63, 64, 65, 2000]))
def test_a_truncated_document_is_read_or_malformed_never_a_recursion(value: Any, wrapped: int) -> None:
    """A document nested in ``wrapped`` arrays, cut anywhere: what is cut is refused as a MalformedInput (too
    deep, or not JSON), never a RecursionError; what is whole and within the limit is read as it was."""
    from keys import MalformedInput
    from seals import parse_json

    text = b"[" * wrapped + json.dumps(value).encode() + b"]" * wrapped
    for cut in range(1, len(text) + 1, max(1, len(text) // 7)):
        whole = cut == len(text) and depth(value) + wrapped <= 64
        try:
            parse_json(text[:cut], what="doc")
        except MalformedInput:
            assert not whole
    if depth(value) + wrapped <= 64:
        parsed = parse_json(text, what="doc")
        for _ in range(wrapped):
            parsed = parsed[0]
        assert parsed == value


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "root"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "file").write_bytes(b"content")
    (tmp_path / "outside").write_bytes(b"outside")
    return folder


def test_a_regular_file_inside_the_root_is_read(root: Path) -> None:
    assert read_in(root, "sub/file", limit=100, what="t") == b"content"
    assert read_in(root, "sub/absent", limit=100, what="t") is None
    assert file_in(root, "sub/file", what="t") and not file_in(root, "absent/x", what="t")
    assert list_in(root, "sub", what="t") == ["file"]


@pytest.mark.parametrize("name", ["../outside", "/etc/passwd", "sub/../sub/file", "sub//file", "./sub/file", "",
                                  "sub/file\x00"])
def test_names_leaving_the_root_are_refused(root: Path, name: str) -> None:
    with pytest.raises(UnsafeFile, match="not a name inside"):
        read_in(root, name, limit=100, what="t")


@pytest.mark.parametrize("shape", ["symlink", "symlinked folder", "fifo", "directory", "too large", "socket"])
def test_non_regular_or_oversize_files_are_refused(root: Path, tmp_path: Path, shape: str) -> None:
    target = root / "sub" / "file"
    if shape == "symlink":
        target.unlink()
        target.symlink_to(tmp_path / "outside")
    elif shape == "symlinked folder":
        (root / "sub").rename(tmp_path / "moved")
        (root / "sub").symlink_to(tmp_path / "moved", target_is_directory=True)
    elif shape == "fifo":
        target.unlink()
        os.mkfifo(target)
    elif shape == "directory":
        target.unlink()
        target.mkdir()
    elif shape == "too large":
        with open(target, "r+b") as handle:
            handle.truncate(2 * 1024**3)  # sparse: refused by its size, not read
    else:
        import socket

        target.unlink()
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(target))
    with pytest.raises(UnsafeFile):
        read_in(root, "sub/file", limit=1024, what="t")
    with pytest.raises(UnsafeFile):
        require_in(root, "sub/file", limit=1024, what="t")


def test_a_named_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeFile, match="FIFO"):
        read_named(fifo, limit=100, what="passport")


def _npy(header: str, payload: bytes = b"") -> bytes:
    raw = header.encode("latin1")
    raw += b" " * (63 - (10 + len(raw)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(raw).to_bytes(2, "little") + raw + payload


@pytest.mark.parametrize(("header", "match"), [
    ("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", "dtype"),
    ("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", "dtype"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", "shape"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,), }", "shape"),
    ("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}", "unexpected"),
    ("__import__('os')", "unreadable"),
])
def test_npy_headers_are_checked(header: str, match: str) -> None:
    with pytest.raises(UnsafeFile, match=match):
        npy_header(_npy(header), what="member")


def test_a_plain_npy_header_is_read() -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.zeros((3, 4), dtype="<f4"))
    descr, shape, length = npy_header(buffer.getvalue(), what="member")
    assert (descr, shape) == ("<f4", (3, 4)) and length + 48 == len(buffer.getvalue())
