"""The lean, strict reader of stored-predictions blobs (``keys.safeio.read_stored_npz``, its yes/no form
``plain_stored_npz``, and ``harness.metrics.npz.load_stored_npz``): on our writer's layout (FORMATS section 8) it
gives exactly the arrays the zipfile path (``load_npz`` with ``check_npz``) gives; anything else it refuses,
naming why, and there is no other path. A named test per hostile blob, and a fuzz that it never accepts what the
zipfile path would refuse or read otherwise (tests/test_predictions_format_strict.py has a test per form that
the zipfile path reads but section 8 refuses)."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness.metrics as m
from harness.metrics.npz import load_npz, load_stored_npz
from keys.errors import MalformedInput
from keys.safeio import UnsafeFile, plain_stored_npz
from tests.test_metrics_stored import make


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, version=(1, 0), allow_pickle=True)
    return buffer.getvalue()


def archive(members: dict[str, bytes]) -> bytes:
    """An uncompressed zip written as ``StoredPredictions.to_npz_bytes`` writes one (the plain layout)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o100644 << 16
            zf.writestr(info, data)
    return buffer.getvalue()


def members_bytes(blob: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(blob)) as zf:
        return {info.filename: zf.read(info) for info in zf.infolist()}


def slow(blob: bytes) -> dict[str, np.ndarray]:
    return load_npz(blob, what="blob", limit=max(len(blob), 1), stored_only=True)


def same_arrays(first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> bool:
    return first.keys() == second.keys() and all(
        first[k].dtype == second[k].dtype and first[k].shape == second[k].shape
        and first[k].tobytes() == second[k].tobytes() for k in first)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_test=st.integers(1, 40), n_classes=st.integers(2, 9),
       templates=st.booleans(), fractions=st.booleans())
def test_the_plain_layout_reads_to_the_zipfile_paths_arrays(seed, n_test, n_classes, templates, fractions):
    blob = make(seed, n_test, n_classes, templates=templates, fractions=fractions).to_npz_bytes()
    assert plain_stored_npz(blob, limit=len(blob)) is not None  # our writer's blobs take the lean path
    fast = load_stored_npz(blob, what="blob", limit=len(blob))
    assert same_arrays(fast, slow(blob))
    assert all(not array.flags.writeable for array in fast.values())  # views of the blob, never written


BLOB = make(3, 25, 4).to_npz_bytes()


@settings(max_examples=300, deadline=None)
@given(position=st.integers(0, len(BLOB) - 1), value=st.integers(0, 255))
def test_a_changed_byte_is_read_as_the_zipfile_path_reads_it_or_declined(position, value):
    """The lean reader never accepts what the zipfile path refuses, nor reads anything differently."""
    blob = BLOB[:position] + bytes([value]) + BLOB[position + 1:]
    members = plain_stored_npz(blob, limit=len(blob))
    if members is None:
        return
    assert same_arrays(load_stored_npz(blob, what="blob", limit=len(blob)), slow(blob))


@pytest.mark.parametrize("cut", [1, 21, 22, 100, len(BLOB) // 2, len(BLOB) - 1])
def test_a_truncated_blob_is_declined_and_refused(cut):
    blob = BLOB[:cut]
    assert plain_stored_npz(blob, limit=len(blob)) is None
    with pytest.raises(MalformedInput):
        m.StoredPredictions.from_npz_bytes(blob)


def test_a_header_claiming_a_huge_shape_is_refused_before_allocation():
    members = members_bytes(BLOB)
    header = members["clean_probs.npy"]
    claimed = header.replace(b"'shape': (25, 4), }", b"'shape': (1099511627775, 4), }").replace(
        b" " * 11 + b"\n", b"\n", 1)
    assert len(claimed) == len(header) and b"1099511627775" in claimed
    blob = archive({**members, "clean_probs.npy": claimed})
    assert plain_stored_npz(blob, limit=len(blob)) is None
    with pytest.raises(UnsafeFile, match="does not fit"):
        m.StoredPredictions.from_npz_bytes(blob)


def test_a_header_whose_dtype_does_not_fit_the_member_is_refused():
    members = members_bytes(BLOB)
    relabelled = members["clean_probs.npy"].replace(b"'descr': '<f4'", b"'descr': '<f8'")
    blob = archive({**members, "clean_probs.npy": relabelled})
    assert plain_stored_npz(blob, limit=len(blob)) is None
    with pytest.raises(UnsafeFile, match="does not fit"):
        m.StoredPredictions.from_npz_bytes(blob)


def test_a_wrong_dtype_that_fits_its_member_is_read_then_refused_by_name():
    members = members_bytes(BLOB)
    wide = np.zeros((3, 25), dtype="<i8")
    blob = archive({**members, "perturbed_labels.gamma_shift.npy": npy(wide)})
    assert plain_stored_npz(blob, limit=len(blob)) is not None
    with pytest.raises(MalformedInput, match="gamma_shift has dtype <i8, expected <i2"):
        m.StoredPredictions.from_npz_bytes(blob)


def test_a_pickled_object_array_is_declined_and_refused_without_unpickling():
    members = members_bytes(BLOB)
    blob = archive({**members, "template_probs.npy": npy(np.array([{"payload": "pickle"}], dtype=object))})
    assert plain_stored_npz(blob, limit=len(blob)) is None
    with pytest.raises(UnsafeFile, match=r"not a plain \.npy array"):
        m.StoredPredictions.from_npz_bytes(blob)


def test_a_fortran_order_member_is_refused():
    members = members_bytes(BLOB)
    blob = archive({**members, "clean_probs.npy": npy(np.asfortranarray(
        np.frombuffer(members["clean_probs.npy"][-400:], dtype="<f4").reshape(25, 4)))})
    assert plain_stored_npz(blob, limit=len(blob)) is None
    with pytest.raises(UnsafeFile, match=r"member clean_probs\.npy is in Fortran order"):
        load_stored_npz(blob, what="blob", limit=len(blob))


def test_a_wrong_crc_is_declined_and_refused():
    data_at = BLOB.index(b"\x93NUMPY", BLOB.index(b"clean_probs.npy")) + 200
    blob = BLOB[:data_at] + bytes([BLOB[data_at] ^ 1]) + BLOB[data_at + 1:]
    assert plain_stored_npz(blob, limit=len(blob)) is None
    with pytest.raises(UnsafeFile, match=r"clean_probs.npy is unreadable \(BadZipFile\)"):
        m.StoredPredictions.from_npz_bytes(blob)


def test_members_beyond_the_limit_are_declined():
    assert plain_stored_npz(BLOB, limit=len(BLOB) // 2) is None
    with pytest.raises(UnsafeFile, match="expands to more than"):
        load_stored_npz(BLOB, what="blob", limit=len(BLOB) // 2)


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_duplicate_and_odd_member_names_are_declined():
    members = members_bytes(BLOB)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in [*members.items(), ("clean_probs.npy", members["clean_probs.npy"])]:
            zf.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    duplicated = buffer.getvalue()
    assert plain_stored_npz(duplicated, limit=len(duplicated)) is None
    with pytest.raises(UnsafeFile, match="duplicate"):
        m.StoredPredictions.from_npz_bytes(duplicated)
    dotted = archive({**members, "../clean_probs.npy": members["clean_probs.npy"]})
    assert plain_stored_npz(dotted, limit=len(dotted)) is None
