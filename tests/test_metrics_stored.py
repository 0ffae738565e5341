"""StoredPredictions: deterministic npz bytes, exact round trips, and a named test per malformed blob."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness.metrics as m
from harness.metrics.stored import FORMAT
from keys.errors import MalformedInput


def make_arrays(seed: int, n_test: int, n_classes: int, *, templates: bool, fractions: bool) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    n_cases = min(n_test, 1200)
    return {
        "clean_probs": rng.dirichlet(np.ones(n_classes), n_test),
        "perturbed_labels": {name: rng.integers(0, n_classes, (3, n_cases)) for name in m.PERTURBATIONS},
        "template_probs": rng.dirichlet(np.ones(n_classes), (6, n_cases)) if templates else None,
        "fraction_probs": rng.dirichlet(np.ones(n_classes), (3, n_test)) if fractions else None,
    }


def make(seed: int = 0, n_test: int = 20, n_classes: int = 3, *, templates: bool = True,
         fractions: bool = True) -> m.StoredPredictions:
    return m.StoredPredictions(**make_arrays(seed, n_test, n_classes, templates=templates, fractions=fractions))


def members_of(stored: m.StoredPredictions) -> dict[str, np.ndarray]:
    arrays = {"format": np.array(FORMAT), "clean_probs": stored.clean_probs}
    arrays.update({f"perturbed_labels.{name}": stored.perturbed_labels[name] for name in m.PERTURBATIONS})
    if stored.template_probs is not None:
        arrays["template_probs"] = stored.template_probs
    if stored.fraction_probs is not None:
        arrays["fraction_probs"] = stored.fraction_probs
    return arrays


def savez_bytes(arrays: dict[str, np.ndarray], *, compressed: bool = False) -> bytes:
    """``arrays`` as members of the stored layout of FORMATS section 8 (laid out as ``to_npz_bytes`` lays them
    out, whatever they hold), so that each named test below meets the check it names; ``compressed`` deflates
    them, which the layout refuses."""
    buffer = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if compressed else zipfile.ZIP_STORED
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        for name, array in arrays.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, np.asanyarray(array), version=(1, 0), allow_pickle=True)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            archive.writestr(info, member.getvalue())
    return buffer.getvalue()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_test=st.integers(1, 60), n_classes=st.integers(2, 12),
       templates=st.booleans(), fractions=st.booleans())
def test_round_trip_is_exact_and_bytes_are_canonical(seed, n_test, n_classes, templates, fractions):
    arrays = make_arrays(seed, n_test, n_classes, templates=templates, fractions=fractions)
    stored = m.StoredPredictions(**arrays)
    blob = stored.to_npz_bytes()
    loaded = m.StoredPredictions.from_npz_bytes(blob, n_test=n_test, n_classes=n_classes)
    assert loaded == stored
    assert loaded.to_npz_bytes() == blob
    assert m.StoredPredictions(**arrays).to_npz_bytes() == blob  # same arrays, same bytes
    np.testing.assert_array_equal(loaded.clean_probs, arrays["clean_probs"].astype(np.float32))
    for name in m.PERTURBATIONS:
        np.testing.assert_array_equal(loaded.perturbed_labels[name], arrays["perturbed_labels"][name])
    assert (loaded.template_probs is None) == (not templates)
    assert (loaded.fraction_probs is None) == (not fractions)


def test_round_trip_above_the_subset_cap():
    stored = make(n_test=1300, n_classes=4)
    assert stored.n_cases == 1200 and stored.perturbed_labels["pixelate"].shape == (3, 1200)
    assert m.StoredPredictions.from_npz_bytes(stored.to_npz_bytes()) == stored


def test_stored_dtypes_and_read_only_arrays():
    stored = make()
    assert stored.clean_probs.dtype == np.dtype("<f4")
    assert stored.perturbed_labels["brightness"].dtype == np.dtype("<i2")
    with pytest.raises(ValueError):
        stored.clean_probs[0, 0] = 0.5
    with pytest.raises(TypeError):
        stored.perturbed_labels["brightness"] = stored.perturbed_labels["contrast"]  # type: ignore[index]


def test_zip_has_fixed_timestamps_order_and_no_compression():
    stored = make()
    with zipfile.ZipFile(io.BytesIO(stored.to_npz_bytes())) as archive:
        infos = archive.infolist()
    assert [info.filename for info in infos][:2] == ["format.npy", "clean_probs.npy"]
    assert [info.filename for info in infos][-2:] == ["template_probs.npy", "fraction_probs.npy"]
    assert all(info.date_time == (1980, 1, 1, 0, 0, 0) for info in infos)
    assert all(info.compress_type == zipfile.ZIP_STORED for info in infos)


def test_the_numpy_savez_layout_of_the_same_members_is_refused():
    """np.savez writes zip64 members: not the layout of FORMATS section 8, whatever the arrays."""
    stored = make()
    assert m.StoredPredictions.from_npz_bytes(savez_bytes(members_of(stored))) == stored
    buffer = io.BytesIO()
    np.savez(buffer, **members_of(stored))  # type: ignore[arg-type]
    with pytest.raises(MalformedInput, match="zip64"):
        m.StoredPredictions.from_npz_bytes(buffer.getvalue())


# --- a named test per malformed blob ----------------------------------------------------------------------

def test_refuses_bytes_that_are_not_a_zip():
    with pytest.raises(MalformedInput, match="not a zip"):
        m.StoredPredictions.from_npz_bytes(b"PK\x03\x04 definitely not an archive")


def test_refuses_a_wrong_dtype_naming_expected_and_found():
    arrays = members_of(make())
    arrays["clean_probs"] = arrays["clean_probs"].astype(np.float64)
    with pytest.raises(MalformedInput, match="clean_probs has dtype <f8, expected <f4") as caught:
        m.StoredPredictions.from_npz_bytes(savez_bytes(arrays))
    assert caught.value.evidence["expected"] == "<f4" and caught.value.evidence["found"] == "<f8"


def test_refuses_int64_labels_on_load():
    arrays = members_of(make())
    arrays["perturbed_labels.gamma_shift"] = arrays["perturbed_labels.gamma_shift"].astype(np.int64)
    with pytest.raises(MalformedInput, match="expected <i2"):
        m.StoredPredictions.from_npz_bytes(savez_bytes(arrays))


def test_refuses_a_missing_perturbation():
    arrays = members_of(make())
    del arrays["perturbed_labels.resolution"]
    with pytest.raises(MalformedInput, match="unexpected set of members"):
        m.StoredPredictions.from_npz_bytes(savez_bytes(arrays))


def test_refuses_an_extra_member():
    arrays = members_of(make())
    arrays["notes"] = np.zeros(3, dtype=np.float32)
    with pytest.raises(MalformedInput, match="unexpected set of members"):
        m.StoredPredictions.from_npz_bytes(savez_bytes(arrays))


def test_refuses_a_pickled_object_array():
    arrays = members_of(make())
    arrays["template_probs"] = np.array([{"payload": "pickle"}], dtype=object)
    with pytest.raises(MalformedInput, match=r"not a plain \.npy array"):
        m.StoredPredictions.from_npz_bytes(savez_bytes(arrays))


def test_refuses_compressed_members():
    with pytest.raises(MalformedInput, match="compressed"):
        m.StoredPredictions.from_npz_bytes(savez_bytes(members_of(make()), compressed=True))


def test_refuses_an_unknown_format_marker():
    arrays = members_of(make())
    arrays["format"] = np.array("something else v9")
    with pytest.raises(MalformedInput, match="format marker"):
        m.StoredPredictions.from_npz_bytes(savez_bytes(arrays))


def test_refuses_wrong_perturbed_shape():
    arrays = members_of(make(n_test=20))
    arrays["perturbed_labels.pixelate"] = np.zeros((3, 19), dtype="<i2")
    with pytest.raises(MalformedInput, match=r"must have shape \(3, 20\)") as caught:
        m.StoredPredictions.from_npz_bytes(savez_bytes(arrays))
    assert caught.value.evidence["expected"] == [3, 20] and caught.value.evidence["found"] == [3, 19]


def test_refuses_wrong_template_count():
    arrays = members_of(make(n_test=20))
    arrays["template_probs"] = arrays["template_probs"][:5]
    with pytest.raises(MalformedInput, match="template_probs must have shape"):
        m.StoredPredictions.from_npz_bytes(savez_bytes(arrays))


def test_refuses_labels_out_of_range():
    arrays = members_of(make(n_classes=3))
    arrays["perturbed_labels.contrast"] = np.full((3, 20), 3, dtype="<i2")
    with pytest.raises(MalformedInput, match=r"outside 0\.\.2"):
        m.StoredPredictions.from_npz_bytes(savez_bytes(arrays))


def test_refuses_nan_probabilities():
    arrays = members_of(make())
    clean = arrays["clean_probs"].copy()
    clean[0, 0] = np.nan
    arrays["clean_probs"] = clean
    with pytest.raises(MalformedInput, match="NaN"):
        m.StoredPredictions.from_npz_bytes(savez_bytes(arrays))


def test_refuses_rows_that_are_not_distributions():
    arrays = members_of(make())
    arrays["fraction_probs"] = (arrays["fraction_probs"] * 0.5).astype("<f4")
    with pytest.raises(MalformedInput, match="do not sum to 1"):
        m.StoredPredictions.from_npz_bytes(savez_bytes(arrays))


def test_refuses_an_unexpected_test_size_or_class_count():
    blob = make(n_test=20, n_classes=3).to_npz_bytes()
    with pytest.raises(MalformedInput, match="expected 21"):
        m.StoredPredictions.from_npz_bytes(blob, n_test=21)
    with pytest.raises(MalformedInput, match="expected 4"):
        m.StoredPredictions.from_npz_bytes(blob, n_classes=4)


def test_constructor_refuses_float_labels_and_a_wrong_perturbation_set():
    arrays = make_arrays(0, 10, 2, templates=False, fractions=False)
    arrays["perturbed_labels"]["brightness"] = arrays["perturbed_labels"]["brightness"].astype(float)
    with pytest.raises(MalformedInput, match="integer labels"):
        m.StoredPredictions(**arrays)
    arrays = make_arrays(0, 10, 2, templates=False, fractions=False)
    del arrays["perturbed_labels"]["shot_noise"]
    with pytest.raises(MalformedInput, match="exactly the 12"):
        m.StoredPredictions(**arrays)
