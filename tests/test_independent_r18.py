"""Red-team round 18 against the independent replay (tests/independent/replay.py): a stranger's self-signed ledger
that heldout refuses and the replay accepted, or on which the replay crashed. The replay cross-checks heldout's
verifiers, so it must refuse exactly what they refuse, with its own failure (``replay FAILED``), never a
traceback. By class:

1. patterns: ``re.match`` with ``^...$`` (``$`` also matches before a final newline) and ``\\d`` (any Unicode digit,
   which ``strptime`` then reads): a key id "stranger\\n", a checkpoint file "2\\n.note", a year "٢٠٢٦";
2. checkpoint notes: an empty extension line (FORMATS section 7: a parser accepts only non-empty ones);
3. key names: heldout's rule (keys.signer.check_key_name: printable NFC, no whitespace, "+" or backslash);
4. documents: a signed passport whose ``subject`` is a string, whose ``computed`` is a list, or that names a
   generation no entry seals crashed the replay (AttributeError, KeyError); the same class in a reveal (hex that
   ``bytes.fromhex`` reads leniently, an ``order`` of another shape), a draw record and a leakage budget.

Each export is built here byte by byte, with PyNaCl and rfc8785 only (no heldout writer would write it); heldout's
verdict is its audit's (``heldout audit ID --from EXPORT``, which applies every rule the replay does).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from nacl.signing import SigningKey
from typer.testing import CliRunner

from heldout.cli import app
from heldout.generations.draw import DrawRecord
from heldout.generations.reveal import parse_reveal
from keys import HeldoutError
from ledger import open_export
from tests.conftest import REPO_ROOT
from tests.independent import replay
from tests.independent.replay import ReplayFailure, replay_export

EM_DASH = "\u2014"
CREATED = "2026-01-01T00:00:00Z"
LATER = "2026-01-02T00:00:00Z"
NOW = "2026-03-01T00:00:00Z"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _leaf(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def _mth(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return hashlib.sha256(b"\x01" + _mth(leaves[:k]) + _mth(leaves[k:])).digest()


class Stranger:
    """A key of the stranger's own (not a heldout Signer: its name and id are whatever the stranger writes)."""

    def __init__(self, name: str = "stranger", key_id: str = "stranger-key") -> None:
        self.signing = SigningKey(bytes([7]) * 32)
        self.public = bytes(self.signing.verify_key)
        self.name, self.key_id = name, key_id

    def key_hash(self) -> bytes:
        return hashlib.sha256(self.name.encode("utf-8") + b"\n\x01" + self.public).digest()[:4]

    def member(self) -> dict[str, str]:
        return {"key_id": self.key_id, "name": self.name, "public_key_b64": _b64(self.public)}

    def verifier_key(self) -> str:
        return f"{self.name}+{self.key_hash().hex()}+{_b64(bytes([1]) + self.public)}"

    def note(self, body: str) -> str:
        signature = self.signing.sign(body.encode("utf-8")).signature
        return f"{body}\n{EM_DASH} {self.name} {_b64(self.key_hash() + signature)}\n"

    def sign(self, doc: dict[str, Any]) -> dict[str, Any]:
        signed = {**doc, "issuer": {"algo": "Ed25519", **self.member()}}
        return {**signed, "signature": _b64(self.signing.sign(rfc8785.dumps(signed)).signature)}


def genesis(key: Stranger, **members: Any) -> dict[str, Any]:
    return {"type": "genesis", "v": 1, "name": "stranger", "key": key.member(), "created_utc": CREATED,
            "nonce": "00" * 32, **members}


def note_entry(**members: Any) -> dict[str, Any]:
    return {"type": "note", "v": 1, "text": "hello", "created_utc": LATER, **members}


def build(folder: Path, key: Stranger, entries: list[dict[str, Any]], *, blobs: tuple[bytes, ...] = (),
          extensions: tuple[str, ...] = (), body_tail: str = "") -> tuple[Path, str]:
    """An export of ``entries`` signed by ``key`` (a checkpoint at size 1 and at the head), as FORMATS section 14
    lays it out; ``extensions`` are the notes' extension lines, ``body_tail`` is appended to each note body raw."""
    lines = [rfc8785.dumps(entry) for entry in entries]
    ledger_id = hashlib.sha256(lines[0]).hexdigest()[:20]
    origin = f"heldout/ledger/{ledger_id}"
    leaves = [_leaf(line) for line in lines]
    sizes = sorted({1, len(lines)})
    export = folder / "export"
    for sub in ("checkpoints", "keys", "seals"):
        (export / sub).mkdir(parents=True)
    for size in sizes:
        body = "".join(f"{line}\n" for line in (origin, str(size), _b64(_mth(leaves[:size])), *extensions))
        (export / "checkpoints" / f"{size}.note").write_text(key.note(body + body_tail), encoding="utf-8")
    key_file = {"algo": "Ed25519", "fingerprint": hashlib.sha256(key.public).hexdigest(), "key_id": key.key_id,
                "name": key.name, "note_verifier_key": key.verifier_key(), "public_key_b64": _b64(key.public)}
    (export / "keys" / f"{key.key_id}.pub.json").write_bytes(rfc8785.dumps(key_file) + b"\n")
    for blob in blobs:
        digest = hashlib.sha256(blob).hexdigest()
        (export / "blobs" / "sha256" / digest[:2]).mkdir(parents=True, exist_ok=True)
        (export / "blobs" / "sha256" / digest[:2] / digest).write_bytes(blob)
    data = b"".join(line + b"\n" for line in lines)
    (export / "entries.jsonl").write_bytes(data)
    manifest = {"format": "heldout-ledger-export", "version": 1, "ledger_id": ledger_id, "origin": origin,
                "size": len(lines), "root": _b64(_mth(leaves)), "note_verifier_key": key.verifier_key(),
                "checkpoints": sizes, "blobs": sorted(hashlib.sha256(b).hexdigest() for b in blobs),
                "missing_blobs": [], "keys": [key.key_id], "seals": [],
                "entries": {"file": "entries.jsonl", "count": len(lines), "sha256": hashlib.sha256(data).hexdigest()}}
    (export / "export.json").write_bytes(rfc8785.dumps(manifest) + b"\n")
    return export, ledger_id


def heldout_audit(export: Path, ledger_id: str, tmp_path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["audit", ledger_id, "--from", str(export), "--jobs", "1", "--out",
                                      str(tmp_path / "report.json")], env={"HELDOUT_NOW": NOW})
    return result.exit_code, result.output


def both_refuse(export: Path, ledger_id: str, tmp_path: Path, rule: str, words: str) -> ReplayFailure:
    """heldout's audit fails the export (exit 1, no traceback) and the replay raises its own failure."""
    code, output = heldout_audit(export, ledger_id, tmp_path)
    assert code == 1 and "Traceback" not in output, output
    with pytest.raises(ReplayFailure) as failure:
        replay_export(export, ledger_id)
    assert failure.value.rule == rule and words in failure.value.message, str(failure.value)
    return failure.value


def both_accept(export: Path, ledger_id: str, tmp_path: Path) -> None:
    code, output = heldout_audit(export, ledger_id, tmp_path)
    assert code == 0, output
    open_export(export).verify(expected_id=ledger_id)
    replay_export(export, ledger_id)


# --- 1. patterns: fullmatch and ASCII classes ----------------------------------------------------------------

def test_a_genesis_key_id_ending_in_a_newline_is_refused(tmp_path: Path) -> None:
    key = Stranger(key_id="stranger\n")
    export, ledger_id = build(tmp_path, key, [genesis(key), note_entry()])
    with pytest.raises(HeldoutError, match="key id"):
        open_export(export).verify(expected_id=ledger_id)
    both_refuse(export, ledger_id, tmp_path, "entry", "key.key_id is not a key id")


def test_a_hex_member_ending_in_a_newline_is_refused(tmp_path: Path) -> None:
    key = Stranger()
    export, ledger_id = build(tmp_path, key, [genesis(key, nonce="00" * 32 + "\n"), note_entry()])
    both_refuse(export, ledger_id, tmp_path, "entry", "nonce is not a valid hex64")


def test_an_extra_checkpoint_file_named_with_a_newline_is_refused(tmp_path: Path) -> None:
    """"2\\n.note" beside 2.note: its stem matched ^(0|[1-9][0-9]{0,18})$ and int("2\\n") is 2, so the replay read
    it as a second copy of checkpoint 2; heldout refuses an unexpected file among the checkpoints."""
    key = Stranger()
    export, ledger_id = build(tmp_path, key, [genesis(key), note_entry()])
    (export / "checkpoints" / "2\n.note").write_bytes((export / "checkpoints" / "2.note").read_bytes())
    with pytest.raises(HeldoutError, match="unexpected file among the checkpoints"):
        open_export(export).verify(expected_id=ledger_id)
    failure = both_refuse(export, ledger_id, tmp_path, "layout", "not a checkpoint file name")
    assert failure.file == "checkpoints/2\n.note"


def test_a_time_in_arabic_indic_digits_is_refused(tmp_path: Path) -> None:
    """\\d matched "٢٠٢٦" and strptime read it as 2026."""
    key = Stranger()
    export, ledger_id = build(tmp_path, key, [genesis(key), note_entry(created_utc="\u0662\u0660\u0662\u0666"
                                                                                  "-01-02T00:00:00Z")])
    both_refuse(export, ledger_id, tmp_path, "entry", "created_utc is not a valid utc")


def test_the_replay_applies_every_pattern_whole_and_in_ascii() -> None:
    """The class, in the source: no re.match / re.search anchored with $, no \\d, \\w or \\s (Unicode classes), and
    each pattern of the module refuses its value with a final newline."""
    source = (REPO_ROOT / "tests" / "independent" / "replay.py").read_text(encoding="utf-8")
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))
    assert not re.findall(r"\.match\(|re\.match|\$\"\)", code)
    assert not re.findall(r"re\.compile\(r?\"[^\"]*\\[dws]", code)
    for pattern, value in ((replay.HEX64, "0" * 64), (replay.UTC, CREATED), (replay.KEY_ID, "stranger"),
                           (replay.CASE_ID, "bloodmnist-0123456789abcdef"), (replay.SIZE_LINE, "12")):
        assert pattern.fullmatch(value) and not pattern.fullmatch(value + "\n"), pattern.pattern
    assert not replay.UTC.fullmatch("\u0662\u0660\u0662\u0666-01-02T00:00:00Z")
    assert not replay._real_time("\u0662\u0660\u0662\u0666-01-02T00:00:00Z")


# --- 2. checkpoint extension lines ----------------------------------------------------------------------------

def test_a_note_with_an_empty_extension_line_is_refused(tmp_path: Path) -> None:
    """origin, size, root, "", "extension": the last blank line still ends the body, so the note parses; FORMATS
    section 7 accepts only non-empty extension lines and heldout refuses it (the replay read the first three)."""
    key = Stranger()
    export, ledger_id = build(tmp_path, key, [genesis(key), note_entry()], body_tail="\nextension\n")
    with pytest.raises(HeldoutError, match="extension line is empty"):
        open_export(export).verify(expected_id=ledger_id)
    failure = both_refuse(export, ledger_id, tmp_path, "checkpoint", "extension line after the root is empty")
    assert failure.file == "checkpoints/1.note"


def test_a_note_with_non_empty_extension_lines_is_accepted_by_both(tmp_path: Path) -> None:
    key = Stranger()
    export, ledger_id = build(tmp_path, key, [genesis(key), note_entry()], extensions=("ext1", "v: 2"))
    both_accept(export, ledger_id, tmp_path)


# --- 3. key names ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["str\u200banger", "e\u0301tranger", "str\\anger", "str\u00adanger"],
                         ids=["zero-width-space", "not-NFC", "backslash", "soft-hyphen"])
def test_a_key_name_heldout_refuses_is_refused(tmp_path: Path, name: str) -> None:
    key = Stranger(name=name)
    export, ledger_id = build(tmp_path, key, [genesis(key), note_entry()])
    with pytest.raises(HeldoutError, match="key name"):
        open_export(export).verify(expected_id=ledger_id)
    both_refuse(export, ledger_id, tmp_path, "entry", "key.name is not a key name")


@pytest.mark.parametrize("name", ["witness.example/w1", "\u00e9tranger", "\u6f22\u5b57"])
def test_a_key_name_heldout_accepts_is_accepted(tmp_path: Path, name: str) -> None:
    key = Stranger(name=name)
    export, ledger_id = build(tmp_path, key, [genesis(key), note_entry()])
    both_accept(export, ledger_id, tmp_path)


# --- 4. a stranger's signed documents: a failure, never a traceback ---------------------------------------------

def _passport(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "passport_version": "0.1", "spec_version": "MedEval-1 v0.1", "subject": {"model_id": "m"},
        "computed": {"audit": {}, "cross_site": None, "evaluations": [], "heldout": {"generation": "gen1"},
                     "sources": []},
        "declared": None, "observed": None, "declared_note": "x", "observed_note": "x",
        "issued_utc": LATER, "expiry_utc": "2027-01-01T00:00:00Z", "expiry_basis": "x", "canonicalisation": "x"}
    for path, value in changes.items():
        *parents, last = path.split("__")
        body = doc
        for parent in parents:
            body = body[parent]
        body[last] = value
    return doc


PASSPORTS: dict[str, tuple[dict[str, Any], str]] = {
    "subject-a-string": ({"subject": "m"}, "subject is not an object"),
    "computed-a-list": ({"computed": []}, "computed is not an object"),
    "no-seal-entry": ({}, "which no entry seals"),
    "heldout-a-list": ({"computed__heldout": ["gen1"]}, "computed.heldout is not an object"),
    "checkpoint-a-list": ({"computed__heldout__checkpoint": []}, "computed.heldout.checkpoint is not an object"),
    "proofs-a-string": ({"computed__heldout__proofs": "p"}, "computed.heldout.proofs is not an object"),
    "bundle-ref-a-string": ({"computed__heldout__bundles": ["b"]}, "bundles[0] is not an object"),
    "seal-index-true": ({"computed__heldout__seal_index": True}, "seal_index is not the ledger's: section 12 "
                        "gives it one form, a non-negative integer"),
    "inclusion-proof-an-object": ({"computed__heldout__bundles": [{"inclusion_proof": {}}]},
                                  "inclusion_proof is not the ledger's: section 12 gives it one form, a list of "
                                  "strings"),
    "audit-a-list": ({"computed__audit": []}, "computed.audit is not an object"),
    "evaluations-of-strings": ({"computed__evaluations": ["e"]}, "computed.evaluations is not a list of objects"),
    "issued-not-a-time": ({"issued_utc": 20260102}, "issued_utc is not a UTC time of section 1"),
}


@pytest.mark.parametrize("case", sorted(PASSPORTS))
def test_a_stranger_signed_passport_of_another_shape_fails_without_a_traceback(tmp_path: Path, case: str) -> None:
    changes, words = PASSPORTS[case]
    key = Stranger()
    blob = rfc8785.dumps(key.sign(_passport(**changes)))
    entry = {"type": "passport", "v": 1, "model_id": "m", "generation": "gen1",
             "passport_sha256": hashlib.sha256(blob).hexdigest(), "created_utc": LATER}
    export, ledger_id = build(tmp_path, key, [genesis(key), entry], blobs=(blob,))
    failure = both_refuse(export, ledger_id, tmp_path, "passport", words)
    assert failure.file.startswith("blobs/sha256/")
    done = replay.main([str(export), ledger_id])  # the command line: "replay FAILED", exit 1
    assert done == 1


def _public_reveal(**changes: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """A public generation's reveal of two cases and the manifest it answers (members the replay compares)."""
    cases = []
    for n in range(2):
        content = hashlib.sha256(bytes([n])).hexdigest()
        case = {"case_id": f"bloodmnist-{content[:16]}", "task": "bloodmnist", "content_sha256": content,
                "label": n, "salt": ""}
        payload = rfc8785.dumps({"case_id": case["case_id"], "content_sha256": content, "label": n})
        cases.append({**case, "commitment": hashlib.sha256(payload).hexdigest()})
    cases.sort(key=lambda c: c["commitment"])
    set_hash = _mth([_leaf(bytes.fromhex(c["commitment"])) for c in cases]).hex()
    manifest = {"generation": "public", "ledger_id": "0" * 20, "set_hash": set_hash, "membership": "public",
                "n_cases": 2, "commitment_scheme": replay.COMMITMENT_SCHEME, "tasks": {"bloodmnist": {"cases": 2}}}
    doc = {"type": "heldout/reveal", "reveal_version": 1, **{m: manifest[m] for m in (
        "generation", "ledger_id", "set_hash", "membership", "n_cases", "commitment_scheme")},
        "manifest_sha256": "1" * 64, "cases": cases, "images": None, "order": None, "pools": None}
    for member, value in changes.items():
        if member == "commitment_upper":
            doc["cases"][0]["commitment"] = doc["cases"][0]["commitment"].upper()
        else:
            doc[member] = value
    return doc, manifest


def _replay_with(tmp_path: Path, **state: Any) -> replay._Replay:
    r = replay._Replay(tmp_path, "0" * 20)
    for name, value in state.items():
        setattr(r, name, value)
    return r


@pytest.mark.parametrize("change", [{"commitment_upper": True}, {"order": "bloodmnist"},
                                    {"order": {"bloodmnist": ["bloodmnist-0"]}}, {"images": ["x"]}],
                         ids=["uppercase-commitment", "order-a-string", "order-not-the-cases", "images-a-list"])
def test_a_reveal_heldout_refuses_is_refused(tmp_path: Path, change: dict[str, Any]) -> None:
    """bytes.fromhex reads "AB" (and blanks) as hex: a commitment in uppercase opened in the replay; heldout takes
    lowercase hex only. An order or images of another shape crashed the replay later (bundles, images)."""
    doc, manifest = _public_reveal(**change)
    with pytest.raises(HeldoutError):
        parse_reveal(json.loads(json.dumps(doc)))
    r = _replay_with(tmp_path, seal_docs={"public": manifest},
                     seal_entries={"public": (1, {"manifest_sha256": "1" * 64, "membership": "public"})})
    with pytest.raises(ReplayFailure) as failure:
        r.check_reveal("blobs/sha256/ab/ab", "public", doc, {}, 2)
    assert failure.value.rule == "reveal", str(failure.value)
    plain, _ = _public_reveal()  # (the unchanged reveal passes both)
    parse_reveal(plain)
    r.check_reveal("blobs/sha256/ab/ab", "public", plain, {}, 2)


def _draw_setup(tmp_path: Path, key: Stranger, **draw_changes: Any) -> tuple[replay._Replay, dict[str, Any]]:
    """A pool entry, an intent, a checkpoint at the intent, and a manifest whose draw names them."""
    pool = {"type": "pool", "v": 1, "task": "bloodmnist", "pool_root": "2" * 64, "pool_size": 4, "created_utc": LATER}
    intent = {"type": "intent", "v": 1, "generation": "gen1", "tasks": {"bloodmnist": 2}, "pools": {"bloodmnist": 0},
              "expiry_utc": NOW, "created_utc": LATER}
    leaves = [_leaf(rfc8785.dumps(e)) for e in (pool, intent)]
    origin = "heldout/ledger/" + "0" * 20
    note = key.note(f"{origin}\n2\n{_b64(_mth(leaves))}\n")
    draw = {"algorithm": "heldout-draw-v1", "seed_source": "checkpoint-root", "intent_index": 1,
            "pools": {"bloodmnist": {"index": 0, "pool_root": "2" * 64, "pool_size": 4}},
            "checkpoint": {"size": 2, "note": note}, "cosignatures": [],
            "seed": replay.draw_seed("checkpoint-root", _mth(leaves)).hex(), **draw_changes}
    manifest = {"tasks": {"bloodmnist": {"cases": 2}}, "expiry_utc": NOW, "created_utc": NOW, "draw": draw}
    ledger_key = replay.Key(key.key_id, key.name, key.public)
    r = _replay_with(tmp_path, entries=[pool, intent], leaves=leaves, ledger_key=ledger_key, origin=origin)
    return r, manifest


def _cosignature_line() -> str:
    """A cosignature/v1 line (4-byte key id, timestamp 2026-01-01, signature) of a witness the note lacks."""
    return f"{EM_DASH} witness {_b64(b'wkid' + (1767225600).to_bytes(8, 'big') + bytes(64))}"


@pytest.mark.parametrize("case", ["pools-a-list", "checkpoint-a-list", "a-member-more", "cosignatures-of-numbers",
                                  "a-cosignature-the-note-does-not-carry"])
def test_a_draw_record_heldout_refuses_is_refused(tmp_path: Path, case: str) -> None:
    key = Stranger()
    line = _cosignature_line()
    material = (line + "\n").encode("utf-8")
    changes = {"pools-a-list": {"pools": ["bloodmnist"]}, "checkpoint-a-list": {"checkpoint": ["x"]},
               "a-member-more": {"note": "x"}, "cosignatures-of-numbers": {"cosignatures": [1]},
               "a-cosignature-the-note-does-not-carry": {
                   "seed_source": "witness-cosignatures", "cosignatures": [line],
                   "seed": replay.draw_seed("witness-cosignatures", material).hex()}}[case]
    r, manifest = _draw_setup(tmp_path, key, **changes)
    if case != "a-cosignature-the-note-does-not-carry":
        with pytest.raises(HeldoutError):
            DrawRecord.from_json(json.loads(json.dumps(manifest["draw"])))
    with pytest.raises(ReplayFailure) as failure:
        r.check_draw("seals/gen1.seal.json", "gen1", manifest, 2)
    assert failure.value.rule == "draw", str(failure.value)
    plain, unchanged = _draw_setup(tmp_path, key)  # (the draw as recorded passes)
    DrawRecord.from_json(unchanged["draw"])
    plain.check_draw("seals/gen1.seal.json", "gen1", unchanged, 2)


@pytest.mark.parametrize("budget", [{"delta": 0}, {"delta": -1}, {"k": 0}, {"families": 5}],
                         ids=["delta-0", "delta-negative", "k-0", "families-a-number"])
def test_a_leakage_budget_no_rule_gives_is_refused_without_a_traceback(budget: dict[str, Any]) -> None:
    """The replay divided by delta, took the log of 2 k tasks / delta and iterated families as read: a stranger's
    manifest with delta 0 raised ZeroDivisionError. A budget no rule gives does not follow (heldout refuses delta
    outside (0, 1) and k < 1)."""
    manifest = {"membership": "sealed", "release": {"mode": "full"}, "tasks": {"bloodmnist": {"cases": 80}},
                "leakage_budget": {"basis": "default", "n": 2, "k": 100, "delta": 0.05, "eps": 0.5, "families": [],
                                   **budget}}
    assert replay._Replay.budget_follows(manifest) is False
    assert replay._Replay.budget_follows({**manifest, "release": ["full"]}) is False
    made = replay._Replay.seal_entry_of({**manifest, "leakage_budget": [budget]}, "0" * 64)  # (another shape)
    assert made["budget_bits"] is None
