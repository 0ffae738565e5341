"""Checkpoints: the exact C2SP tlog-checkpoint signed-note bytes, parsing, signature checks, malformed notes."""

from __future__ import annotations

import base64
import hashlib
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from keys import Signer, note_key_hash
from ledger import CheckpointError, LedgerKeyError, NoteFormatError, parse_checkpoint, sign_checkpoint
from ledger import verify_checkpoint as verify
from tests.conftest import seeded_signer

ORIGIN = "heldout/ledger/0123456789abcdef0123"
ROOT = hashlib.sha256(b"root").digest()


def test_note_bytes_are_exactly_the_c2sp_format() -> None:
    signer = seeded_signer(3, name="operator")
    checkpoint = sign_checkpoint(ORIGIN, 42, ROOT, signer)
    body = f"{ORIGIN}\n42\n{base64.b64encode(ROOT).decode()}\n"
    signature = signer.sign(body.encode())
    key_hash = hashlib.sha256(b"operator\n\x01" + signer.public_key.raw).digest()[:4]
    expected = body + "\n\u2014 operator " + base64.b64encode(key_hash + signature).decode() + "\n"
    assert checkpoint.note == expected
    assert key_hash == note_key_hash("operator", signer.public_key)
    signer.public_key.verify(body.encode(), signature)  # raises if not


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF).filter(
    lambda c: unicodedata.category(c) != "Cc"), min_size=1, max_size=40),
       st.integers(min_value=0, max_value=2**63 - 1), st.binary(min_size=32, max_size=32))
def test_sign_parse_verify_round_trip(origin: str, size: int, root: bytes) -> None:
    signer = seeded_signer(4, name="op")
    note = sign_checkpoint(origin, size, root, signer).note
    parsed = verify(note, name="op", key=signer.public_key, origin=origin)
    assert (parsed.origin, parsed.size, parsed.root, parsed.note) == (origin, size, root, note)
    assert verify(note.encode(), name="op", key=signer.public_key).size == size


def test_extension_lines_and_witness_signatures_are_accepted() -> None:
    operator, witness = seeded_signer(5, name="op"), seeded_signer(6, name="witness")
    body = f"{ORIGIN}\n7\n{base64.b64encode(ROOT).decode()}\nextension line\n"

    def line(signer: Signer) -> str:
        blob = note_key_hash(signer.name, signer.public_key) + signer.sign(body.encode())
        return f"\u2014 {signer.name} {base64.b64encode(blob).decode()}\n"

    note = body + "\n" + line(witness) + line(operator)
    parsed = verify(note, name="op", key=operator.public_key, origin=ORIGIN)
    assert parsed.extensions == ("extension line",) and len(parsed.signatures) == 2
    verify(note, name="witness", key=witness.public_key)


def test_a_note_carries_at_most_100_signature_lines_as_go_reads_it() -> None:
    """Go's note package refuses a note of more than 100 signatures ("malformed note"); a note heldout accepted
    and Go refused gave two verdicts on one log (a stranger added 150 lines under unknown keys: 2.8 KB)."""
    operator = seeded_signer(5, name="op")
    note = sign_checkpoint(ORIGIN, 7, ROOT, operator).note
    other = "\u2014 stranger " + base64.b64encode(bytes(68)).decode() + "\n"
    assert len(verify(note + other * 99, name="op", key=operator.public_key).signatures) == 100
    with pytest.raises(NoteFormatError, match="at most 100 signature lines"):
        verify(note + other * 100, name="op", key=operator.public_key)


def test_a_bad_signature_by_the_named_key_is_refused() -> None:
    signer = seeded_signer(7, name="op")
    note = sign_checkpoint(ORIGIN, 3, ROOT, signer).note
    head, _, sig = note.rpartition(" ")
    blob = bytearray(base64.b64decode(sig))
    blob[10] ^= 1
    tampered = head + " " + base64.b64encode(bytes(blob)).decode() + "\n"
    with pytest.raises(CheckpointError, match="does not verify"):
        verify(tampered, name="op", key=signer.public_key)


def test_a_note_signed_by_another_key_is_refused() -> None:
    signer, other = seeded_signer(8, name="op"), seeded_signer(9, name="op")
    note = sign_checkpoint(ORIGIN, 3, ROOT, other).note
    with pytest.raises(LedgerKeyError, match="not signed by the ledger key"):
        verify(note, name="op", key=signer.public_key)


def test_a_note_for_another_origin_is_refused() -> None:
    signer = seeded_signer(10, name="op")
    note = sign_checkpoint("heldout/ledger/ffffffffffffffffffff", 3, ROOT, signer).note
    with pytest.raises(CheckpointError, match="origin"):
        verify(note, name="op", key=signer.public_key, origin=ORIGIN)


GOOD = sign_checkpoint(ORIGIN, 5, ROOT, seeded_signer(11, name="op")).note


@pytest.mark.parametrize("note", [
    GOOD[:-1],                                          # no final newline
    GOOD.replace("\n\n", "\n"),                         # no blank line before the signatures
    GOOD.replace("\u2014", "-"),                        # hyphen, not an em dash
    GOOD.replace("\n5\n", "\n05\n"),                    # leading zero in the size
    GOOD.replace("\n5\n", "\n-5\n"),                    # negative size
    GOOD.replace("\n5\n", "\n99999999999999999999\n"),  # size out of range
    GOOD.replace(base64.b64encode(ROOT).decode(), base64.b64encode(ROOT[:31]).decode()),
    GOOD.replace(base64.b64encode(ROOT).decode(), base64.b64encode(ROOT).decode().rstrip("=")),
    GOOD.replace(ORIGIN, ORIGIN + "\t"),                # control character
    f"{ORIGIN}\n5\n\n\u2014 op AAAA\n",                 # missing root line, short signature
    GOOD.replace(" op ", " op x "),                     # three fields in the signature line
    GOOD + "\u2014 op\n",                               # signature line without base64
    "x" * 20000,
])
def test_malformed_notes_are_refused(note: str) -> None:
    with pytest.raises(NoteFormatError):
        parse_checkpoint(note)


def test_non_utf8_notes_are_refused() -> None:
    with pytest.raises(NoteFormatError, match="UTF-8"):
        parse_checkpoint(GOOD.encode() + b"\xff")


@pytest.mark.parametrize(("name", "valid"), [
    ("w\ufeff", True),   # U+FEFF is no whitespace to Go's note package (unicode.IsSpace): JavaScript's \s took it
    ("w\u200b", True),   # nor is a zero-width space
    ("w\x85", False),    # NEL is (JavaScript's \s did not take it)
    ("w\xa0", False), ("w\u3000", False), ("w\u2007", False), ("w\u2028", False), ("w+x", False),
])
def test_a_signature_line_name_is_read_as_go_reads_it(name: str, valid: bool) -> None:
    """A foreign signature line (a witness's, anyone's) is ignored when well formed and refuses the note when
    its name holds whitespace: whitespace as Go's note package reads it, in every reader here (this one,
    keys.names.NOTE_NAME; the site's verify.js; the independent replay), so that one note has one verdict."""
    signer = seeded_signer(8, name="op")
    note = sign_checkpoint(ORIGIN, 5, ROOT, signer).note + f"\u2014 {name} {base64.b64encode(bytes(68)).decode()}\n"
    if valid:
        assert verify(note, name="op", key=signer.public_key, origin=ORIGIN).size == 5
    else:
        with pytest.raises(NoteFormatError, match="a signature line is"):
            parse_checkpoint(note)
