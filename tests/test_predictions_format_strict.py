"""A stored-predictions blob is read as FORMATS section 8 lays it out and nothing else (rule 10 of section 15).

One reader (``keys.safeio.read_stored_npz`` under ``StoredPredictions.from_npz_bytes``) serves the harness, the
audit's re-derivation and the site; the independent replay has its own, written from section 8. Our writer's
blobs and the test corpus are read; a named test per other form (each differing from our writer's bytes in one
respect) is refused, naming what is wrong; and end to end, an operator who re-logs a public bundle with a GIF
header prepended to its predictions (a GIF/zip polyglot, which Python's zipfile reads) gets a finding from the
third-party audit and a refusal from the independent replay."""

from __future__ import annotations

import hashlib
import io
import json
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from harness.metrics import PERTURBATIONS, StoredPredictions
from harness.metrics.npz import load_npz
from heldout.cli import app
from heldout.generations import ledger_signer, open_ledger
from heldout.generations.cases import content_sha256
from heldout.generations.reveal import CaseOpening, RevealDocument, image_npz_bytes, verify_reveal_images
from heldout.store import Store
from keys.errors import MalformedInput
from keys.safeio import UnsafeFile, read_stored_npz
from ledger import BlobStore
from seals import parse_utc
from tests.audit_support import AuditFixture, build_store, command_clock
from tests.conftest import TEST_DATA
from tests.independent.replay import ReplayFailure, read_stored_predictions, replay_export

GIF_HEADER = b"GIF89a\x01\x00\x01\x00\x00\x00\x00;"  # 14 bytes: a 1x1 GIF's header, then the zip
DATE_1980 = (1980, 1, 1, 0, 0, 0)


def make(seed: int = 0, n_test: int = 20, n_classes: int = 3, *, templates: bool = True,
         fractions: bool = True) -> StoredPredictions:
    rng = np.random.default_rng(seed)
    n_cases = min(n_test, 1200)
    return StoredPredictions(
        clean_probs=rng.dirichlet(np.ones(n_classes), n_test),
        perturbed_labels={name: rng.integers(0, n_classes, (3, n_cases)) for name in PERTURBATIONS},
        template_probs=rng.dirichlet(np.ones(n_classes), (6, n_cases)) if templates else None,
        fraction_probs=rng.dirichlet(np.ones(n_classes), (3, n_test)) if fractions else None)


STORED = make()
BLOB = STORED.to_npz_bytes()


def members_of(blob: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        return [(info.filename, archive.read(info)) for info in archive.infolist()]


MEMBERS = members_of(BLOB)


def npy(array: np.ndarray, *, version: tuple[int, int] = (1, 0), fortran: bool = False) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.asfortranarray(array) if fortran else array, version=version,
                              allow_pickle=False)
    return buffer.getvalue()


def build(members: list[tuple[str, bytes]], *, compression: int = zipfile.ZIP_STORED,
          date: tuple[int, ...] = DATE_1980, zip64: bool = False, extra: bytes = b"",
          comment: bytes = b"") -> bytes:
    """A zip written as ``StoredPredictions.to_npz_bytes`` writes one, but for the one option given."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=date)  # type: ignore[arg-type]
            info.compress_type = compression
            info.create_system = 3
            info.external_attr = 0o100644 << 16
            info.extra = extra
            if zip64:
                with archive.open(info, "w", force_zip64=True) as member:
                    member.write(data)
            else:
                archive.writestr(info, data)
        archive.comment = comment
    return buffer.getvalue()


def replaced(name: str, data: bytes) -> list[tuple[str, bytes]]:
    return [(n, data if n == name else d) for n, d in MEMBERS]


CLEAN = np.array(STORED.clean_probs)


def refused(blob: bytes, match: str) -> MalformedInput:
    """``blob`` is refused by the one reader (naming ``match``) and by the independent replay's."""
    with pytest.raises(MalformedInput, match=match) as caught:
        StoredPredictions.from_npz_bytes(blob)
    with pytest.raises((ValueError, KeyError, TypeError, SyntaxError)):
        members = read_stored_predictions(blob)
        names = [m[0] for m in members]
        if names != [n[:-4] for n, _ in MEMBERS]:
            raise ValueError(f"members {names}")  # the replay's section-8 check refuses this by name and order
    return caught.value


# --- what is accepted ---------------------------------------------------------------------------------------

def test_the_builder_reproduces_our_writer_byte_for_byte() -> None:
    """So each hostile blob below differs from an accepted one in exactly the respect its test names."""
    assert build(MEMBERS) == BLOB


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_test=st.integers(1, 40), n_classes=st.integers(2, 9),
       templates=st.booleans(), fractions=st.booleans())
def test_our_writers_blobs_round_trip(seed: int, n_test: int, n_classes: int, templates: bool,
                                      fractions: bool) -> None:
    stored = make(seed, n_test, n_classes, templates=templates, fractions=fractions)
    blob = stored.to_npz_bytes()
    loaded = StoredPredictions.from_npz_bytes(blob, n_test=n_test, n_classes=n_classes)
    assert loaded == stored and loaded.to_npz_bytes() == blob
    assert [m.name for m in read_stored_npz(blob, limit=len(blob), what="blob")] == \
        [name[:-4] for name, _ in members_of(blob)]
    replayed = read_stored_predictions(blob)
    assert [(name, descr, shape) for name, descr, shape, _ in replayed][1] == \
        ("clean_probs", "<f4", (n_test, n_classes))
    assert replayed[1][3] == stored.clean_probs.tobytes()


def test_every_stored_blob_in_the_test_data_is_accepted() -> None:
    blobs = sorted(TEST_DATA.glob("**/*.npz"))
    assert blobs, "no stored blobs in tests/data"
    for path in blobs:
        data = path.read_bytes()
        StoredPredictions.from_npz_bytes(data)
        read_stored_predictions(data)


# --- a named test per hostile form ----------------------------------------------------------------------------

def test_leading_junk_a_gif_zip_polyglot_is_refused_naming_the_offset() -> None:
    polyglot = GIF_HEADER + BLOB
    with zipfile.ZipFile(io.BytesIO(polyglot)) as archive:  # why it matters: zipfile reads it as the same zip
        assert archive.testzip() is None and len(archive.infolist()) == len(MEMBERS)
    error = refused(polyglot, r"has 14 bytes before its first zip record .*offset 0")
    assert error.evidence["found"] == 14


def test_leading_junk_starting_like_a_zip_record_is_refused() -> None:
    refused(b"PK\x03\x04" + bytes(60) + BLOB, "64 bytes unaccounted for")


def test_trailing_junk_is_refused() -> None:
    error = refused(BLOB + b"trailing", r"8 bytes after its end-of-central-directory record")
    assert error.evidence["found"] == 8


def test_an_archive_comment_is_refused() -> None:
    refused(build(MEMBERS, comment=b"hello"), r"5 bytes after its end-of-central-directory record")


def test_zip64_members_are_refused() -> None:
    blob = build(MEMBERS, zip64=True)
    assert StoredPredictions.from_npz_bytes(build(MEMBERS)) == STORED
    refused(blob, r"member format\.npy is a zip64 member")


def test_a_zip64_end_record_is_refused() -> None:
    """The same members, with the end record moved into zip64 records (as a writer of a big archive does)."""
    end = BLOB[-22:]
    entries, cd_size, cd_offset = struct.unpack("<10xHLL2x", end)
    cd_end = cd_offset + cd_size
    zip64_end = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, cd_size, cd_offset)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, cd_end, 1)
    blob = BLOB[:cd_end] + zip64_end + locator + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF,
                                                             0xFFFFFFFF, 0xFFFFFFFF, 0)
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:  # a valid zip64 archive of the same members
        assert [i.filename for i in archive.infolist()] == [n for n, _ in MEMBERS]
    refused(blob, "is a zip64 archive")


def test_npy_format_2_0_is_refused() -> None:
    refused(build(replaced("clean_probs.npy", npy(CLEAN, version=(2, 0)))),
            r"member clean_probs\.npy is \.npy format 2\.0 \(format 1\.0 only\)")


def test_npy_format_3_0_is_refused() -> None:
    error = refused(build(replaced("clean_probs.npy", npy(CLEAN, version=(3, 0)))),
                    r"member clean_probs\.npy is \.npy format 3\.0")
    assert error.evidence == {"field": "clean_probs.npy", "expected": "1.0", "found": "3.0"}


def test_fortran_order_is_refused() -> None:
    refused(build(replaced("clean_probs.npy", npy(CLEAN, fortran=True))),
            r"member clean_probs\.npy is in Fortran order")


def raw_npy(header: str, payload: bytes) -> bytes:
    """A format 1.0 .npy file with the header text given (padded as numpy pads it) and the data given."""
    text = header.encode("latin1")
    text += b" " * (63 - (10 + len(text)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + payload


CLEAN_SHAPE = f"'shape': {CLEAN.shape}"


@pytest.mark.parametrize(("header", "match"), [
    (f"{{'descr': '=f4', 'fortran_order': False, {CLEAN_SHAPE}, }}", r"dtype '=f4', not written as numpy"),
    (f"{{'descr': 'f4', 'fortran_order': False, {CLEAN_SHAPE}, }}", r"dtype 'f4', not written as numpy"),
    (f"{{'descr': '|f4', 'fortran_order': False, {CLEAN_SHAPE}, }}", r"dtype '\|f4', not written as numpy"),
    (f"{{'descr': '<f4', 'fortran_order': False, {CLEAN_SHAPE}, 'note': 1}}", r"unexpected \.npy header"),
    (f"{{'descr': '<f4', 'fortran_order': 0, {CLEAN_SHAPE}, }}", r"invalid \.npy header"),
    (f"{{'descr': '<f4', 'fortran_order': False, {CLEAN_SHAPE}, }}" + " " * 10_000, "oversize"),
], ids=["native-order", "no-order", "pipe-order", "extra-key", "fortran-order-0", "oversize"])
def test_npy_headers_not_as_numpy_writes_them_are_refused(header: str, match: str) -> None:
    refused(build(replaced("clean_probs.npy", raw_npy(header, CLEAN.tobytes()))), match)


def test_a_big_endian_format_marker_is_refused() -> None:
    marker = np.array("MedEval-1 stored predictions v1").astype(">U31")
    refused(build(replaced("format.npy", npy(marker))), "unknown format marker")


def test_a_deflated_member_is_refused() -> None:
    refused(build(MEMBERS, compression=zipfile.ZIP_DEFLATED), r"member format\.npy is compressed")


def test_another_member_time_is_refused() -> None:
    refused(build(MEMBERS, date=(2026, 9, 1, 12, 0, 0)),
            r"member format\.npy is dated 2026-09-01 12:00:00, not 1980-01-01 00:00:00")


def test_an_extra_field_is_refused() -> None:
    timestamp = b"UT\x05\x00\x01\x00\x00\x00\x00"  # extended timestamp, as Info-ZIP writes it
    refused(build(MEMBERS, extra=timestamp), r"member format\.npy has an extra field \(ids \['0x5455'\]")


def test_general_purpose_flags_are_refused() -> None:
    """Bit 11 (UTF-8 names) set in the first member's local header and central directory record."""
    blob = bytearray(BLOB)
    cd_offset = struct.unpack("<L", BLOB[-6:-2])[0]
    for flags_at in (6, cd_offset + 8):
        blob[flags_at + 1] |= 0x08
    refused(bytes(blob), r"member format\.npy has general-purpose flags 0x0800")


def test_a_wrong_crc_is_refused() -> None:
    data_at = BLOB.index(b"\x93NUMPY", BLOB.index(b"clean_probs.npy")) + 200
    blob = BLOB[:data_at] + bytes([BLOB[data_at] ^ 1]) + BLOB[data_at + 1:]
    refused(blob, r"member clean_probs\.npy .*CRC-32")


def test_members_out_of_order_are_refused() -> None:
    swapped = list(MEMBERS)
    swapped[2], swapped[3] = swapped[3], swapped[2]
    error = refused(build(swapped), r"member 3 is perturbed_labels\.contrast\.npy, expected "
                                    r"perturbed_labels\.brightness\.npy")
    assert error.evidence["field"] == "perturbed_labels.contrast"
    last_two = [*MEMBERS[:-2], MEMBERS[-1], MEMBERS[-2]]
    refused(build(last_two), r"member 15 is fraction_probs\.npy, expected template_probs\.npy")


def test_an_extra_member_is_refused() -> None:
    refused(build([*MEMBERS, ("notes.npy", npy(np.zeros(3, "<f4")))]), "unexpected set of members")


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_a_duplicate_member_is_refused() -> None:
    refused(build([*MEMBERS, MEMBERS[1]]), r"duplicate members \(clean_probs\.npy\)")


def test_a_missing_member_is_refused() -> None:
    refused(build([m for m in MEMBERS if m[0] != "perturbed_labels.pixelate.npy"]), "unexpected set of members")


def test_bytes_between_members_are_refused() -> None:
    """A gap after the first member's data: its central directory offsets skip it, as a crafted zip can."""
    first_end = 30 + len("format.npy") + len(MEMBERS[0][1])
    gap = b"\x00" * 16
    cd_offset, = struct.unpack("<L", BLOB[-6:-2])
    blob = bytearray(BLOB[:first_end] + gap + BLOB[first_end:])
    cd_offset += len(gap)
    position = cd_offset
    while blob[position:position + 4] == b"PK\x01\x02":
        offset, = struct.unpack_from("<L", blob, position + 42)
        if offset:
            struct.pack_into("<L", blob, position + 42, offset + len(gap))
        name_length, extra_length, comment_length = struct.unpack_from("<3H", blob, position + 28)
        position += 46 + name_length + extra_length + comment_length
    struct.pack_into("<L", blob, len(blob) - 6, cd_offset)
    with zipfile.ZipFile(io.BytesIO(bytes(blob))) as archive:  # zipfile reads it
        assert archive.testzip() is None
    refused(bytes(blob), r"member clean_probs\.npy: its local header is at offset \d+, not \d+")


def accepted_by_the_replay(blob: bytes) -> bool:
    try:
        members = read_stored_predictions(blob)
    except (ValueError, KeyError, TypeError, SyntaxError):
        return False
    return [m[0] for m in members] == [n[:-4] for n, _ in MEMBERS] and members[1][3] == CLEAN.tobytes()


@settings(max_examples=200, deadline=None)
@given(position=st.integers(0, len(BLOB) - 1), value=st.integers(0, 255))
def test_a_changed_byte_is_refused_cleanly_or_read_the_same_by_both_readers(position: int, value: int) -> None:
    """Hostile input never crashes either reader, and they agree: a changed byte is refused as malformed input
    by both, or (a byte neither section 8 nor the CRC covers, such as a member's permissions) read by both as
    the writer's arrays."""
    blob = BLOB[:position] + bytes([value]) + BLOB[position + 1:]
    try:
        accepted = StoredPredictions.from_npz_bytes(blob) == STORED
    except MalformedInput:
        accepted = False
    assert accepted == accepted_by_the_replay(blob)


def test_a_huge_claimed_shape_is_refused_before_anything_is_allocated() -> None:
    header = dict(MEMBERS)["clean_probs.npy"]
    claimed = header.replace(b"'shape': (20, 3), }", b"'shape': (1099511627775, 3), }").replace(
        b" " * 11 + b"\n", b"\n", 1)
    assert len(claimed) == len(header) and b"1099511627775" in claimed
    with pytest.raises(UnsafeFile, match="does not fit"):
        StoredPredictions.from_npz_bytes(build(replaced("clean_probs.npy", claimed)))


# --- end to end: an operator re-logs a public bundle with a GIF/zip polyglot as its predictions ----------------

runner = CliRunner()
LATER = "2026-09-02T00:00:00Z"


def cli_at(*args: Any) -> Any:
    with command_clock(LATER):
        return runner.invoke(app, [str(a) for a in args])


def relog_with_predictions(fx: AuditFixture, change: Callable[[bytes], bytes]) -> int:
    """As the operator, through the library: append a copy of the last public bundle entry whose predictions
    blob is ``change`` of the original (same evaluation, same time)."""
    st_ = Store.open(fx.store)
    with open_ledger(st_) as ledger:
        signer = ledger_signer(st_, ledger)
        entries = list(ledger.entries())
        _, last = [(i, e) for i, e in entries if e["type"] == "bundle" and e["generation"] == "public"][-1]
        blobs = BlobStore(st_.blobs)
        entry = dict(last)
        entry["predictions_sha256"] = blobs.put(change(blobs.get(last["predictions_sha256"])))
        entry["created_utc"] = entries[-1][1]["created_utc"]
        return ledger.append(entry, signer=signer, now=parse_utc(entry["created_utc"]))


def test_a_relogged_bundle_with_polyglot_predictions_is_a_finding_and_the_replay_refuses(tmp_path: Path) -> None:
    fx = build_store(tmp_path / "base", bundles_per_generation=1)
    index = relog_with_predictions(fx, lambda blob: GIF_HEADER + blob)
    export = tmp_path / "export"
    assert cli_at("ledger", "export", fx.ledger_id, export, "--store", fx.store).exit_code == 0
    result = cli_at("audit", fx.ledger_id, "--from", export, "--jobs", "1", "--json", "--out", tmp_path / "r.json")
    report = json.loads(result.output)
    assert result.exit_code == 1, result.output
    at_entry = [f["message"] for f in report["findings"] if f.get("index") == index]
    assert any("14 bytes before its first zip record" in m for m in at_entry), report["findings"]
    assert [f for f in report["findings"] if f.get("index") != index] == []  # only the re-logged bundle
    with pytest.raises(ReplayFailure) as failure:
        replay_export(export, fx.ledger_id)
    digest = json.loads((export / "entries.jsonl").read_text().splitlines()[index])["predictions_sha256"]
    assert failure.value.file == f"blobs/sha256/{digest[:2]}/{digest}"
    assert failure.value.rule == "predictions" and "14 bytes before the first local header" in str(failure.value)


# --- reveal image files (FORMATS section 10: C order), read by every verifier alike ---------------------------

def _reveal_with_image(images: np.ndarray) -> tuple[RevealDocument, dict[str, bytes]]:
    """A one-case reveal whose image blob holds ``images`` as ``np.savez`` writes them (a Fortran-order array is
    written with ``fortran_order: True``)."""
    image = np.ascontiguousarray(images[0])
    opening = CaseOpening(case_id="case-0", task="bloodmnist", content_sha256=content_sha256(image, 3), label=3,
                          salt=bytes(32))
    buffer = io.BytesIO()
    np.savez(buffer, case_ids=np.asarray(["case-0"], dtype=np.str_), labels=np.asarray([3], dtype=np.int64),
             images=images)
    blob = buffer.getvalue()
    reveal = RevealDocument(generation="gen1", ledger_id="0" * 64, set_hash="0" * 64, manifest_sha256="0" * 64,
                            membership="sealed", openings=(opening,), listed_commitments=(opening.commitment,),
                            images={"bloodmnist": hashlib.sha256(blob).hexdigest()})
    return reveal, {hashlib.sha256(blob).hexdigest(): blob}


def test_a_reveal_image_file_in_fortran_order_is_refused() -> None:
    # The independent replay refuses a Fortran-order member; the audit and verify-reveal read the same file the
    # same way (it once passed them), so that one published reveal has one verdict.
    pixels = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(1, 3, 8)
    reveal, blobs = _reveal_with_image(pixels)
    verify_reveal_images(reveal, SimpleNamespace(get=blobs.__getitem__))  # the C-order file verifies
    reveal, blobs = _reveal_with_image(np.asfortranarray(pixels))
    with pytest.raises(UnsafeFile, match=r"member images\.npy is in Fortran order"):
        verify_reveal_images(reveal, SimpleNamespace(get=blobs.__getitem__))


def test_the_reveal_writer_writes_c_order_whatever_array_it_is_given() -> None:
    pixels = np.asfortranarray(np.arange(24, dtype=np.uint8).reshape(2, 3, 4))
    blob = image_npz_bytes(["a", "b"], np.asarray([0, 1]), pixels)
    arrays = load_npz(blob, what="images", c_order_only=True)
    assert np.array_equal(arrays["images"], pixels)
