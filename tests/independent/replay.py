"""An independent replay of a heldout ledger export, written from docs/FORMATS.md alone.

It uses the Python standard library, PyNaCl (Ed25519) and rfc8785 (JCS) and nothing of the project: no
``keys``, ``seals``, ``ledger``, ``harness``, ``heldout`` or ``audit`` import, and no numpy (the npz files are
read with ``zipfile`` and the .npy header rules, a stored-predictions zip byte by byte as section 8 lays it out).
tests/test_formats_independent.py checks that.

``replay_export(folder, ledger_id)`` applies the verifier rules of FORMATS.md section 12 in their order and
returns a summary; the first rule that fails raises :class:`ReplayFailure` naming the file (relative to the
export folder) and the rule.
"""

from __future__ import annotations

import ast
import base64
import binascii
import hashlib
import io
import json
import math
import os
import re
import stat
import struct
import unicodedata
import zipfile
from dataclasses import dataclass, field
from datetime import UTC as UTC_ZONE
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import rfc8785
from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

MANIFEST = "export.json"
ENTRIES = "entries.jsonl"
MAX_ENTRY_BYTES = 65536
MAX_ENTRY_NESTING = 64  # FORMATS.md 5: the entry object is level 1


def nesting(value: Any) -> int:
    """How many levels of arrays and objects ``value`` nests (0 for a scalar), without recursing."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest
MAX_SAFE_INTEGER = 2**53 - 1
# Every pattern below is applied with ``fullmatch`` and spells its classes out in ASCII: ``$`` also matches before
# a final newline (``re.match(r"^x$", "x\n")`` holds), and ``\d`` takes every Unicode digit ("٢٠٢٦", which
# ``strptime`` then reads as 2026): a key id "k\n" or a year in Arabic-Indic digits passed here and not in heldout.
HEX64 = re.compile(r"[0-9a-f]{64}")
UTC = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")
KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
CASE_ID = re.compile(r"([a-z][a-z0-9_]{0,63})-([0-9a-f]{16})(?:-([1-9][0-9]*))?")
SIZE_LINE = re.compile(r"(0|[1-9][0-9]{0,18})")
EM_DASH = "\u2014"
COMMITMENT_SCHEME = (
    "heldout-commit-v1: commitment = SHA-256(salt || JCS{case_id, content_sha256, label}); "
    "set_hash = RFC 6962 Merkle tree hash over leaf_hash(commitment) of the commitments sorted ascending; "
    "content_sha256 = heldout-case-v1"
)
PREDICTIONS_FORMAT = "MedEval-1 stored predictions v1"
PERTURBATIONS = ("brightness", "contrast", "defocus_blur", "detector_noise", "field_of_view", "gamma_shift",
                 "gaussian_noise", "pixelate", "quantise", "resolution", "shot_noise", "window_level")
DRAW_MEMBERS = {"algorithm", "seed_source", "intent_index", "pools", "checkpoint", "cosignatures", "seed"}
EXPORT_MEMBERS = {"format", "version", "ledger_id", "origin", "size", "root", "note_verifier_key", "checkpoints",
                  "blobs", "missing_blobs", "keys", "seals", "entries"}

TEXT, HEX, TIME, KEY, NOTE = "text", "hex64", "utc", "key", "note text"
MAX_NOTE_CHARS = 16384
# Section 12's fixed texts of a passport.
DECLARED_NOTE = ("No vendor declaration: this passport is issued by the evaluation operator from logged evidence; a "
                 "vendor's intended-use claims would be a separate, vendor-signed block.")
OBSERVED_NOTE = ("Not available: production history and drift require continuous monitoring, which this operator "
                 "does not run. The object is present and null on purpose.")
PUBLIC_ANCHOR = "the public generation (its cases and labels are published: this evidence is not held out)"
SEALED_ANCHOR = "the sealed held-out generation"
#: Section 12: each member of computed.heldout and computed.audit that a verifier compares has one form, exactly.
COUNT_FORM, TEXT_FORM, FLAG_FORM, TEXTS_FORM = "a non-negative integer", "a string", "true or false", \
    "a list of strings"
HELDOUT_FORMS = {"generation": TEXT_FORM, "ledger_id": TEXT_FORM, "set_hash": TEXT_FORM, "manifest_sha256": TEXT_FORM,
                 "note_verifier_key": TEXT_FORM, "expiry_utc": TEXT_FORM, "seal_index": COUNT_FORM}
CHECKPOINT_FORMS = {"size": COUNT_FORM, "root_b64": TEXT_FORM, "note": TEXT_FORM}
BUNDLE_FORMS = {"index": COUNT_FORM, "task": TEXT_FORM, "evaluation_sha256": TEXT_FORM,
                "predictions_sha256": TEXT_FORM, "leaf_hash_b64": TEXT_FORM, "inclusion_proof": TEXTS_FORM}
PROOFS_FORMS = {"seal": TEXT_FORM, "bundles": TEXTS_FORM}
AUDIT_FORMS = {"bundles": COUNT_FORM, "rederived": COUNT_FORM, "ledger_entries": COUNT_FORM, "ledger_head": TEXT_FORM,
               "ledger_intact": FLAG_FORM, "audit_command": TEXT_FORM}


def has_form(value: Any, form: str) -> bool:
    if form == COUNT_FORM:
        return type(value) is int and value >= 0
    if form == TEXT_FORM:
        return type(value) is str
    if form == FLAG_FORM:
        return type(value) is bool
    return type(value) is list and all(type(item) is str for item in value)


#: A note key name (C2SP signed-note as Go reads it): no unicode.IsSpace character, no "+".
NOTE_KEY_NAME = re.compile("[^\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000+]+")


def key_name_ok(name: Any) -> bool:
    """A key name as heldout declares one (keys.signer.check_key_name, FORMATS section 1): 1 to 128 characters,
    in Unicode NFC (two spellings of one name would be two note keys that look alike), each printable and not
    whitespace (no control, format or separator character: U+200B, U+0085, U+2028 ...), no "+" (it ends the name
    in a verifier key) and no backslash; a "/" is allowed (C2SP names such as ``witness.example/w1``)."""
    return isinstance(name, str) and 0 < len(name) <= 128 and unicodedata.normalize("NFC", name) == name \
        and all(char.isprintable() and not char.isspace() and char not in "+\\" for char in name) \
        and NOTE_KEY_NAME.fullmatch(name) is not None


#: MedEval-1's name and modality of each task (FORMATS rule 10; the reference passport's strings).
TASK_TABLE = {
    "bloodmnist": ("Peripheral blood cells (8-class)", "Microscopy"),
    "breastmnist": ("Breast ultrasound (malignancy)", "Ultrasound"),
    "dermamnist": ("Dermatoscopy (7-class skin lesion)", "Dermatoscopy"),
    "organcmnist": ("Abdominal CT organs \u2014 coronal (C)", "CT"),
    "pneumoniamnist": ("Paediatric chest X-ray (pneumonia)", "Chest X-ray"),
    "retinamnist": ("Fundus photography (DR grade)", "Fundus"),
    "pathmnist": ("Colorectal histology (9-class tissue)", "Histopathology"),
    "octmnist": ("Retinal OCT (4-class)", "OCT"),
    "tissuemnist": ("Kidney cortex cells (8-class)", "Microscopy"),
    "organamnist": ("Abdominal CT organs \u2014 axial (A)", "CT"),
    "organsmnist": ("Abdominal CT organs \u2014 sagittal (S)", "CT"),
}
#: The class count of each MedMNIST 2D single-label task (the MedMNIST v2 paper's table; MedEval-1 takes its tasks
#: from it): an evaluation's n_classes is its task's.
MEDMNIST_CLASSES = {"bloodmnist": 8, "breastmnist": 2, "dermamnist": 7, "octmnist": 4, "organamnist": 11,
                    "organcmnist": 11, "organsmnist": 11, "pathmnist": 9, "pneumoniamnist": 2, "retinamnist": 5,
                    "tissuemnist": 8}

#: The bounds of FORMATS section 16 ("Reading"), by the file's place in the export.
KiB, MiB = 1024, 1024 * 1024


def _bound_of(relative: str) -> int:
    if relative.startswith("blobs/"):
        return 256 * MiB
    if relative.startswith(("checkpoints/", "keys/")):
        return 64 * KiB
    if relative.startswith("seals/"):
        return 32 * MiB
    return 256 * MiB  # export.json, entries.jsonl


#: The charge of a full-release evaluation (FORMATS section 5): members that cost nothing, with all under them;
#: (low, high, decimals, cap) of each member whose numbers cost log2(values + 1) bits; the categorical strings.
FREE_MEMBERS = {"seed", "n_test", "n_cases", "n_classes", "n_specs", "runtime_s", "timestamp", "cost", "limitations",
                "code_fingerprint", "spec_version", "kind", "task", "task_name", "modality", "domain", "device",
                "split_origin", "basis", "caveat", "spec", "has_real_metadata", "dimensions_scored",
                "not_scored_reason", "not_applicable", "n_train_available"}
PROPORTIONS = ["auc", "balanced_accuracy", "ci95", "clean_reference_cc", "mean_agreement", "mean_retention",
               "worst_retention", "ece", "mean_confidence", "overconfidence", "best_chance_corrected",
               "worst_chance_corrected", "chance_corrected", "retention", "spread_balanced_accuracy",
               "worst_class_recall", "risk_coverage_auc", "full_data_chance_corrected", "per_fraction",
               "retention_by_fraction"]
CHARGE_RULES: dict[str, tuple[float, float, int, str | int | None]] = {
    "score": (0, 100, 6, None), "index": (0, 100, 6, None), "coverage": (0, 1, 6, 512),
    **{name: (0, 1, 6, "n_test") for name in ("accuracy", "full_accuracy", "selective_acc_at_50",
                                              "selective_acc_at_80")},
    "agreement_by_severity": (0, 1, 4, "n_cases"), "retention_by_severity": (0, 1, 4, None),
    "mean_kappa": (-1, 1, 6, None), "brier": (0, 2, 6, None), **{name: (0, 1, 6, None) for name in PROPORTIONS},
}
CATEGORICAL = {"best_spec": 6, "worst_spec": 6}
#: The optional dimensions of the reference harness's model families (FORMATS rule 10).
FAMILY_DIMENSIONS = {"foundation": {"spec_sensitivity"}, "trained_baseline": {"limited_data"},
                     "linear_probe": {"limited_data"}, "baseline": {"limited_data"}}


def evaluation_charge(evaluation: dict[str, Any]) -> float:
    """FORMATS section 5's charge of a full-release evaluation object, rounded to 6 decimals."""
    n_test = evaluation.get("n_test")
    caps = {"n_test": n_test, "n_cases": min(n_test, 1200)} if type(n_test) is int and n_test > 0 else {}

    def number_bits(rule: tuple[float, float, int, str | int | None] | None) -> float:
        if rule is None:
            return 64.0
        low, high, decimals, cap = rule
        values = round((high - low) * 10 ** decimals) + 1
        if isinstance(cap, str) and cap in caps:
            values = min(values, caps[cap] + 1)
        elif isinstance(cap, int):
            values = min(values, cap)
        return math.log2(values + 1)

    def bits(value: Any, name: str | None, rule: tuple[float, float, int, str | int | None] | None) -> float:
        if name in FREE_MEMBERS:
            return 0.0
        rule = CHARGE_RULES.get(name, rule) if name is not None else rule
        if isinstance(value, bool):
            return 1.0
        if isinstance(value, (int, float)) or (value is None and rule is not None):
            return number_bits(rule)
        if isinstance(value, dict):
            return sum(bits(item, key, rule) for key, item in value.items())
        if isinstance(value, list):
            return sum(bits(item, None, rule) for item in value)
        if isinstance(value, str) and name in CATEGORICAL:
            return math.log2(CATEGORICAL[name])
        return 0.0

    return round(math.fsum(bits(item, key, None) for key, item in evaluation.items()), 6)


REQUIRED: dict[str, dict[str, str]] = {
    "genesis": {"name": TEXT, "key": KEY, "created_utc": TIME, "nonce": HEX},
    "key": {"key": KEY, "role": TEXT, "created_utc": TIME},
    "seal": {"generation": TEXT, "manifest_sha256": HEX, "set_hash": HEX, "expiry_utc": TIME, "created_utc": TIME},
    "bundle": {"generation": TEXT, "model_id": TEXT, "task": TEXT, "evaluation_sha256": HEX,
               "predictions_sha256": HEX, "created_utc": TIME},
    "retire": {"generation": TEXT, "reason": TEXT, "created_utc": TIME},
    "reveal": {"generation": TEXT, "reveal_sha256": HEX, "created_utc": TIME},
    "passport": {"model_id": TEXT, "generation": TEXT, "passport_sha256": HEX, "created_utc": TIME},
    "spec": {"spec_version": TEXT, "superseded_by": TEXT, "effective_utc": TIME, "created_utc": TIME},
    "note": {"text": NOTE, "created_utc": TIME},
    "pool": {"task": TEXT, "pool_root": HEX, "pool_size": "count", "created_utc": TIME},
    "intent": {"generation": TEXT, "tasks": "per-task", "pools": "per-task", "expiry_utc": TIME, "created_utc": TIME},
}

#: The optional members with a form (FORMATS section 3's table), checked where present, as the required ones:
#: a member of another JSON type (``false`` for 0) would be read as a number by one verifier and not another.
BITS, BITS_OR_NULL, SEED, OBJECT, MEMBERSHIP, WORDS = "bits", "bits or null", "seed", "object", "membership", "words"
OPTIONAL: dict[str, dict[str, str]] = {
    "intent": {"release": OBJECT},
    "seal": {"membership": MEMBERSHIP, "tasks": "per-task", "n_cases": "count", "budget_bits": BITS_OR_NULL,
             "statement_bits": BITS, "release": OBJECT, "sources": OBJECT, "guarantee": OBJECT},
    "bundle": {**dict.fromkeys(("model_name", "family", "params", "behaviour_version", "split_origin", "device",
                                "code_fingerprint"), WORDS), "spec_version": TEXT,
               "seed": SEED, "n_test": "count", "n_cases": "count", "labels_hash": HEX, "leakage_bits": BITS,
               "release": OBJECT},
    "reveal": {"n_cases": "count", "image_blobs": OBJECT},
    "note": {"blob_sha256": HEX},
}


def _object(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (a member of a stranger's document read with
    ``.get``: a list or a string there fails the rule that reads it, not the replay)."""
    return value if isinstance(value, dict) else {}


def _bits(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


class ReplayFailure(Exception):
    """A rule of FORMATS.md does not hold; ``file`` is the export file at fault (relative path)."""

    def __init__(self, file: str, rule: str, message: str) -> None:
        super().__init__(f"{file}: [{rule}] {message}")
        self.file = file
        self.rule = rule
        self.message = message


@dataclass
class Summary:
    ledger_id: str
    size: int
    root: bytes
    checkpoints: list[int]
    entry_types: dict[str, int]
    blobs_checked: int
    seals: list[str]
    reveals: list[str]
    passports: list[int]
    missing_blobs: list[str] = field(default_factory=list)


# --- encodings ---------------------------------------------------------------------------------------------
def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate member {key!r}")
        out[key] = value
    return out


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _int(text: str) -> int | float:
    value = int(text)
    return value if abs(value) <= MAX_SAFE_INTEGER else float(text)


def _released_score(evaluation: Any) -> float | None:
    """``dimensions.accuracy.score`` of an evaluation (what the ladder and Thresholdout release), or None."""
    node = evaluation
    for part in ("dimensions", "accuracy", "score"):
        node = node.get(part) if isinstance(node, dict) else None
    return float(node) if type(node) in (int, float) and math.isfinite(node) else None


class _BlobFiles(dict):  # type: ignore[type-arg]
    """Blob name -> its content, read (and hash-checked again) from the export when asked: an export's blobs are
    not all held in memory at once (an export of many large predictions, or of large unreferenced files)."""

    def __init__(self, replay: Any) -> None:
        super().__init__()
        self._replay = replay

    def found(self, name: str, relative: str) -> None:
        super().__setitem__(name, relative)

    def __getitem__(self, name: str) -> bytes:
        relative = super().__getitem__(name)
        data = self._replay.read(relative)
        if hashlib.sha256(data).hexdigest() != name:
            raise ReplayFailure(relative, "blob", "content does not hash to its name (changed while replayed)")
        return bytes(data)

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self else default  # noqa: SIM401  (self.get is this method)


_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = re.compile(rb"[\[\]{}]")


def parse_json(data: bytes) -> Any:
    """Strict JSON (FORMATS.md 2): UTF-8, no duplicate member names, no NaN or Infinity, at most 4,096 + len / 16
    arrays and objects (counted before parsing: a text of empty arrays costs a parser 20 times its size)."""
    if data.count(b"[") + data.count(b"{") > 4096 + len(data) // 16:
        raise ValueError("more arrays and objects than FORMATS.md section 2 allows for its length")
    depth = 0  # nesting, counted before parsing too (a parser recurses: 3,000 levels end in a RecursionError)
    for bracket in _BRACKETS.findall(_STRINGS.sub(b'""', data)):
        depth += 1 if bracket in b"[{" else -1
        if depth > 64:
            raise ValueError("nested more than 64 levels deep (FORMATS.md section 2)")
    return json.loads(data.decode("utf-8"), object_pairs_hook=_no_duplicates, parse_constant=_reject_constant,
                      parse_int=_int)


def jcs(value: Any) -> bytes:
    return rfc8785.dumps(value)


def canonical_document(file: str, data: bytes, *, newline: bool) -> Any:
    """Parse ``data`` and require it to be exactly JCS of itself (plus one LF where the format says so)."""
    if newline:
        if not data.endswith(b"\n"):
            raise ReplayFailure(file, "canonical", "does not end with a newline")
        data = data[:-1]
    try:
        value = parse_json(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ReplayFailure(file, "canonical", f"not strict JSON ({exc})") from None
    try:
        again = jcs(value)
    except Exception as exc:  # rfc8785 refuses e.g. lone surrogates
        raise ReplayFailure(file, "canonical", f"not canonicalisable ({exc})") from None
    if again != data:
        raise ReplayFailure(file, "canonical", "not in canonical form (RFC 8785)")
    return value


def b64decode_canonical(text: Any, file: str, what: str) -> bytes:
    if not isinstance(text, str):
        raise ReplayFailure(file, "base64", f"{what} is not a string")
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise ReplayFailure(file, "base64", f"{what} is not base64") from None
    if base64.b64encode(raw).decode("ascii") != text:
        raise ReplayFailure(file, "base64", f"{what} is not canonical base64")
    return raw


def hex_bytes(value: Any, size: int) -> bytes | None:
    """The ``size`` bytes that ``value`` spells in lowercase hex (FORMATS section 1), or None."""
    if not isinstance(value, str) or len(value) != 2 * size or re.fullmatch(r"[0-9a-f]*", value) is None:
        return None
    return bytes.fromhex(value)


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _real_time(text: str) -> bool:
    if not UTC.fullmatch(text):
        return False
    try:
        datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return False
    return True


# --- RFC 6962 / 9162 ---------------------------------------------------------------------------------------
def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def same(found: Any, expected: Any) -> bool:
    """Equal as JSON values: ``true`` is not ``1`` (Python's ``True == 1`` is)."""
    return type(found) is type(expected) and found == expected


def draw_seed(source: str, material: bytes) -> bytes:
    """FORMATS.md, the draw: SHA-256("heldout-seal-seed-v1" LF || seed_source || LF || material)."""
    return sha256(b"heldout-seal-seed-v1\n" + source.encode("ascii") + b"\n" + material)


def draw_positions(seed: bytes, task: str, pool_size: int, count: int) -> list[int]:
    """FORMATS.md, the draw (heldout-draw-v1): a partial Fisher-Yates shuffle driven by SHA-256 blocks."""
    prefix = b"heldout-draw-v1\n" + seed + task.encode("utf-8") + b"\n"
    words: list[int] = []
    block = 0

    def next_word() -> int:
        nonlocal block
        if not words:
            digest = sha256(prefix + block.to_bytes(8, "big"))
            block += 1
            words.extend(int.from_bytes(digest[i:i + 8], "big") for i in range(0, 32, 8))
        return words.pop(0)

    order = list(range(pool_size))
    for i in range(count):
        span = pool_size - i
        limit = 2**64 - 2**64 % span
        word = next_word()
        while word >= limit:
            word = next_word()
        j = i + word % span
        order[i], order[j] = order[j], order[i]
    return sorted(order[:count])


def cosignature_time(line: Any, file: str) -> str:
    """The timestamp of a cosignature/v1 line (section 7), in the UTC form of section 1."""
    parts = line[2:].split(" ") if isinstance(line, str) and line.startswith(EM_DASH + " ") else []
    blob = b64decode_canonical(parts[1], file, "cosignature") if len(parts) == 2 else b""
    if len(blob) != 76:
        raise ReplayFailure(file, "draw", "a draw cosignature is not a cosignature/v1 line")
    (seconds,) = struct.unpack(">Q", blob[4:12])
    try:
        return datetime.fromtimestamp(seconds, UTC_ZONE).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):
        raise ReplayFailure(file, "draw", "a draw cosignature's timestamp is not a time") from None


PROOF_INDEX = re.compile(r"index (0|[1-9][0-9]{0,18})")
OFFSET_TIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?"
                         r"(?:Z|([+-])([0-9]{2}):([0-9]{2}))")


def offset_time(value: Any) -> datetime | None:
    """FORMATS section 1, time with offset (an evaluation's ``timestamp``): the instant, or None for any other
    form (no blanks, no lowercase z, no time without its offset). Built from its fields, not by a lenient parser."""
    match = OFFSET_TIME.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, sign, off_h, off_m = match.groups()
    try:
        offset = timedelta(hours=int(off_h or 0), minutes=int(off_m or 0)) * (-1 if sign == "-" else 1)
        local = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second),
                         int((fraction or "").ljust(6, "0")), tzinfo=timezone(offset))
        return local.astimezone(UTC_ZONE)
    except (ValueError, OverflowError):
        return None


def utc_moment(stamp: str) -> datetime:
    """A UTC time of section 1 (already checked) as an instant."""
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC_ZONE)


def day_after(stamp: str) -> str:
    """The UTC time one day (the clock tolerance of section 1) after ``stamp``, in the same form."""
    moment = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC_ZONE)
    return (moment + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ") if moment.year < 9999 else stamp


def note_cosignature_times(note: str) -> list[str]:
    """The timestamps (section 1 form) of a note's cosignature/v1 lines (76 bytes: key id, time, signature);
    other signature lines, the log's own among them, are skipped."""
    times = []
    for line in note.rpartition("\n\n")[2].splitlines():
        parts = line[2:].split(" ") if line.startswith(EM_DASH + " ") else []
        try:
            blob = base64.b64decode(parts[1], validate=True) if len(parts) == 2 else b""
        except binascii.Error:
            continue
        if len(blob) == 76:
            times.append(cosignature_time(line, "note"))
    return times


def day_before(stamp: str) -> str:
    """The UTC time one day (the clock tolerance of section 1) before ``stamp``, in the same form."""
    moment = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC_ZONE)
    return (moment - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ") if moment.year > 1 else stamp


def leaf_hash(data: bytes) -> bytes:
    return sha256(b"\x00" + data)


def node_hash(left: bytes, right: bytes) -> bytes:
    return sha256(b"\x01" + left + right)


def _split(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def mth(leaves: list[bytes]) -> bytes:
    """RFC 9162 2.1.1 over leaf hashes."""
    if not leaves:
        return sha256(b"")
    if len(leaves) == 1:
        return leaves[0]
    k = _split(len(leaves))
    return node_hash(mth(leaves[:k]), mth(leaves[k:]))


def inclusion_path(index: int, leaves: list[bytes]) -> list[bytes]:
    if len(leaves) == 1:
        return []
    k = _split(len(leaves))
    if index < k:
        return [*inclusion_path(index, leaves[:k]), mth(leaves[k:])]
    return [*inclusion_path(index - k, leaves[k:]), mth(leaves[:k])]


def consistency_proof(m: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 9162 2.1.4.1 PROOF(m, D[n])."""
    def subproof(m: int, d: list[bytes], complete: bool) -> list[bytes]:
        n = len(d)
        if m == n:
            return [] if complete else [mth(d)]
        k = _split(n)
        if m <= k:
            return [*subproof(m, d[:k], complete), mth(d[k:])]
        return [*subproof(m - k, d[k:], False), mth(d[:k])]

    return [] if m in (0, len(leaves)) else subproof(m, leaves, True)


def root_from_inclusion(index: int, size: int, leaf: bytes, path: list[bytes]) -> bytes | None:
    """RFC 9162 2.1.3.2; None when the path cannot be a proof for (index, size)."""
    if index >= size:
        return None
    fn, sn, r = index, size - 1, leaf
    for sibling in path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = node_hash(sibling, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, sibling)
        fn >>= 1
        sn >>= 1
    return r if sn == 0 else None


def consistency_holds(m: int, n: int, old_root: bytes, new_root: bytes, proof: list[bytes]) -> bool:
    """RFC 9162 2.1.4.2 (1 <= m <= n)."""
    if m == n:
        return not proof and old_root == new_root
    if not proof:
        return False
    path = list(proof)
    if m & (m - 1) == 0:  # m is a power of two: the old root is the first node
        path.insert(0, old_root)
    fn, sn = m - 1, n - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == old_root and sr == new_root and sn == 0


# --- keys and notes ----------------------------------------------------------------------------------------
def note_key_hash(name: str, public_key: bytes) -> bytes:
    return sha256(name.encode("utf-8") + b"\n" + b"\x01" + public_key)[:4]


def verifier_key(name: str, public_key: bytes) -> str:
    encoded = base64.b64encode(b"\x01" + public_key).decode("ascii")
    return f"{name}+{note_key_hash(name, public_key).hex()}+{encoded}"


def ed25519_ok(public_key: bytes, message: bytes, signature: bytes) -> bool:
    try:
        VerifyKey(public_key).verify(message, signature)
    except (BadSignatureError, ValueError, TypeError):
        return False
    return True


@dataclass(frozen=True)
class Key:
    key_id: str
    name: str
    public_key: bytes


def _key_member(value: Any, file: str, where: str) -> Key:
    if not isinstance(value, dict):
        raise ReplayFailure(file, "entry", f"{where}: key is not an object")
    key_id, name = value.get("key_id"), value.get("name")
    if not isinstance(key_id, str) or not KEY_ID.fullmatch(key_id):
        raise ReplayFailure(file, "entry", f"{where}: key.key_id is not a key id")
    if not key_name_ok(name):
        raise ReplayFailure(file, "entry", f"{where}: key.name is not a key name (printable NFC, no whitespace, "
                            "'+' or backslash)")
    raw = b64decode_canonical(value.get("public_key_b64"), file, f"{where} key.public_key_b64")
    if len(raw) != 32:
        raise ReplayFailure(file, "entry", f"{where}: key.public_key_b64 is not 32 bytes")
    return Key(key_id, name, raw)


# --- checkpoints -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Note:
    origin: str
    size: int
    root: bytes


def verify_note(text: str, file: str, key: Key, origin: str) -> Note:
    """FORMATS.md 7: structure, origin, size, and a valid signature by the ledger key."""
    if len(text.encode("utf-8", "surrogatepass")) > 16384:
        raise ReplayFailure(file, "checkpoint", "the note is over 16 KiB")
    if not text.endswith("\n") or "\n\n" not in text:
        raise ReplayFailure(file, "checkpoint", "not a signed note (blank line, final newline)")
    if re.search(r"[\x00-\x09\x0b-\x1f\x7f]", text):
        raise ReplayFailure(file, "checkpoint", "control characters in the note")
    split = text.rfind("\n\n")
    body, block = text[:split + 1], text[split + 2:]
    lines = body[:-1].split("\n")
    if len(lines) < 3:
        raise ReplayFailure(file, "checkpoint", "body lacks origin, size or root")
    note_origin, size_text, root_text, *extensions = lines
    if note_origin != origin:
        raise ReplayFailure(file, "checkpoint", f"origin {note_origin!r} is not {origin!r}")
    if not SIZE_LINE.fullmatch(size_text) or int(size_text) >= 2**63:
        raise ReplayFailure(file, "checkpoint", "size line is not a decimal number below 2^63")
    root = b64decode_canonical(root_text, file, "root line")
    if len(root) != 32:
        raise ReplayFailure(file, "checkpoint", "root is not 32 bytes")
    if not all(extensions):  # section 7: "a parser accepts non-empty ones after the root"
        raise ReplayFailure(file, "checkpoint", "an extension line after the root is empty")
    if block.count("\n") > 100:
        raise ReplayFailure(file, "checkpoint", "more than 100 signature lines")
    wanted = note_key_hash(key.name, key.public_key)
    signed = False
    for line in block[:-1].split("\n"):
        if not line.startswith(EM_DASH + " "):
            raise ReplayFailure(file, "checkpoint", "a signature line does not start with an em dash")
        parts = line[2:].split(" ")
        if len(parts) != 2 or not NOTE_KEY_NAME.fullmatch(parts[0]):
            raise ReplayFailure(file, "checkpoint", "a signature line is not '— name base64'")
        blob = b64decode_canonical(parts[1], file, "signature")
        if len(blob) < 5:
            raise ReplayFailure(file, "checkpoint", "a signature is not a 4-byte key hash and a signature")
        if parts[0] == key.name and blob[:4] == wanted:
            if not ed25519_ok(key.public_key, body.encode("utf-8"), blob[4:]):
                raise ReplayFailure(file, "checkpoint", "the ledger key's signature does not verify")
            signed = True
    if not signed:
        raise ReplayFailure(file, "checkpoint", "no signature by the ledger key")
    return Note(note_origin, int(size_text), root)


# --- npy / npz (stdlib) ------------------------------------------------------------------------------------
def read_npy(data: bytes) -> tuple[str, tuple[int, ...], bytes]:
    """(descr, shape, raw C-order data) of a .npy file without pickled objects."""
    if data[:6] != b"\x93NUMPY":
        raise ValueError("not a .npy file")
    major = data[6]
    if major == 1:
        (length,) = struct.unpack("<H", data[8:10])
        start = 10
    else:
        (length,) = struct.unpack("<I", data[8:12])
        start = 12
    header = ast.literal_eval(data[start:start + length].decode("latin-1"))
    if not isinstance(header, dict) or header.get("fortran_order") is not False:
        raise ValueError("not a C-order array")
    return str(header["descr"]), tuple(header["shape"]), data[start + length:]


NPZ_TOTAL = 256 * 1024 * 1024  # what one npz blob may expand to (a blob's own bound)
NPZ_RATIO = 200  # the most a member may expand over its compressed size (a DEFLATE bomb reaches ~1000:1)


def read_npz(data: bytes) -> dict[str, tuple[str, tuple[int, ...], bytes]]:
    """Each .npy member, inflated as it is read and refused (ValueError) past the bounds, whatever sizes the
    archive declares: a member may not expand more than NPZ_RATIO times its compressed bytes (plus 4 KiB), nor
    the archive past NPZ_TOTAL."""
    found: dict[str, tuple[str, tuple[int, ...], bytes]] = {}
    total = 0
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                continue
            bound = min(NPZ_RATIO * max(info.compress_size, 1) + 4096, NPZ_TOTAL - total)
            chunks, size = [], 0
            with archive.open(info) as member:
                while chunk := member.read(1 << 20):
                    size += len(chunk)
                    if size > bound:
                        raise ValueError(f"member {info.filename[:60]} expands past {bound} bytes (a zip bomb?)")
                    chunks.append(chunk)
            total += size
            found[info.filename[:-4]] = read_npy(b"".join(chunks))
    return found


STORED_MEMBER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,200}\.npy")
STORED_DESCR = re.compile(r"<f4|<i2|<U[1-9][0-9]{0,5}")
DOS_1980 = (0, 0x21)  # MS-DOS (time, date) of 1980-01-01 00:00:00


def read_stored_predictions(data: bytes) -> list[tuple[str, str, tuple[int, ...], bytes]]:
    """The members (name without .npy, descr, shape, raw C-order data) of a stored-predictions zip, in archive
    order, as FORMATS section 8 lays it out and nothing else: the first local header at offset 0, members
    uncompressed, dated 1980-01-01 00:00:00, without flags, extra fields or comments, version needed at most
    2.0, back to back, then the central directory, then the end record ending the blob (no zip64, no comment);
    each member a format 1.0 .npy in C order of <f4, <i2 or <U. ValueError says what is not."""
    if not data.startswith(b"PK\x03\x04"):
        first = data.find(b"PK\x03\x04")
        raise ValueError(f"{first} bytes before the first local header" if first > 0 else "not a zip")
    if len(data) < 22 or data[-22:-18] != b"PK\x05\x06":
        raise ValueError("the end-of-central-directory record does not end the blob (trailing bytes or comment)")
    disk, cd_disk, count_here, count, cd_size, cd_offset, comment = struct.unpack("<4H2LH", data[-18:])
    if count == 0xFFFF or 0xFFFFFFFF in (cd_size, cd_offset) or data[-42:-38] == b"PK\x06\x07":
        raise ValueError("a zip64 archive")
    if disk or cd_disk or count_here != count or comment or cd_offset + cd_size != len(data) - 22:
        raise ValueError("the end record does not describe one central directory directly before it")
    members: list[tuple[str, str, tuple[int, ...], bytes]] = []
    seen: set[str] = set()
    at, record = 0, cd_offset
    for _ in range(count):
        fixed = data[record:record + 46]
        if len(fixed) != 46 or fixed[:4] != b"PK\x01\x02":
            raise ValueError("a malformed central directory")
        (need, flags, method, time, date, crc, packed, size, name_length, extra_length, comment_length,
         disk_start, _, _, offset) = struct.unpack("<6x5H3L5H2L", fixed)
        name = data[record + 46:record + 46 + name_length].decode("ascii")
        record += 46 + name_length + extra_length + comment_length
        if not STORED_MEMBER.fullmatch(name) or name in seen:
            raise ValueError(f"member name {name[:60]!r} is not a new plain name.npy")
        seen.add(name)
        if method != 0:
            raise ValueError(f"member {name} is compressed")
        if need >= 45:
            raise ValueError(f"member {name} is a zip64 member")
        if flags or extra_length or comment_length or need > 20 or disk_start:
            raise ValueError(f"member {name} has flags, an extra field, a comment, or needs zip > 2.0")
        if (time, date) != DOS_1980:
            raise ValueError(f"member {name} is not dated 1980-01-01 00:00:00")
        if offset != at or packed != size:
            raise ValueError(f"member {name} is not where the previous one ends, or declares two sizes")
        local = data[at:at + 30]
        body_at = at + 30 + name_length
        if len(local) != 30 or local[:4] != b"PK\x03\x04" \
                or struct.unpack("<4x5H3L2H", local) != (need, flags, method, time, date, crc, packed, size,
                                                        name_length, 0) \
                or data[at + 30:body_at] != name.encode("ascii"):
            raise ValueError(f"member {name}: its local header is not its central directory record's")
        at = body_at + size
        body = data[body_at:at]
        if at > cd_offset or binascii.crc32(body) != crc:
            raise ValueError(f"member {name} runs into the central directory or fails its CRC-32")
        if body[:8] != b"\x93NUMPY\x01\x00" or len(body) < 10:
            raise ValueError(f"member {name} is not a format 1.0 .npy file")
        (length,) = struct.unpack("<H", body[8:10])
        if length > 10_000 or 10 + length > len(body):
            raise ValueError(f"member {name}: its .npy header is over 10,000 bytes or truncated")
        header = ast.literal_eval(body[10:10 + length].decode("latin-1"))
        if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"} \
                or header["fortran_order"] is not False or not isinstance(header["shape"], tuple):
            raise ValueError(f"member {name}: its .npy header is not {{descr, fortran_order: False, shape}}")
        descr, shape, raw = header["descr"], header["shape"], body[10 + length:]
        if not isinstance(descr, str) or not STORED_DESCR.fullmatch(descr) \
                or not all(type(d) is int and d >= 0 for d in shape):
            raise ValueError(f"member {name} has dtype {str(descr)[:20]!r} or shape {str(shape)[:40]}")
        cells = math.prod(shape)
        if len(raw) != cells * (4 * int(descr[2:]) if descr.startswith("<U") else int(descr[2:])):
            raise ValueError(f"member {name}: its header does not describe its size")
        members.append((name[:-4], descr, shape, raw))
    if at != cd_offset or record != len(data) - 22:
        raise ValueError("bytes between the members, the central directory and the end record")
    return members


def _unicode_items(descr: str, shape: tuple[int, ...], raw: bytes) -> list[str]:
    if not descr.startswith("<U"):
        raise ValueError(f"not a unicode array ({descr})")
    width = int(descr[2:]) * 4
    count = 1
    for d in shape:
        count *= d
    return [raw[i * width:(i + 1) * width].decode("utf-32-le").rstrip("\x00") for i in range(count)]


def content_sha256(image: bytes, shape: tuple[int, ...], label: int) -> str:
    header = jcs({"dtype": "uint8", "label": label, "scheme": "heldout-case-v1", "shape": list(shape)})
    return hashlib.sha256(header + b"\n" + image).hexdigest()


# --- the replay ------------------------------------------------------------------------------------------
class _Replay:
    def __init__(self, folder: Path, ledger_id: str) -> None:
        self.folder = Path(folder)
        self.pinned = ledger_id
        self.entries: list[dict[str, Any]] = []
        self.lines: list[bytes] = []
        self.leaves: list[bytes] = []
        self.roots: dict[int, bytes] = {}  # MTH of the first n leaves, by n (checkpoints, passports, draws, audits)
        self.keys: list[Key] = []
        self.blob_files = _BlobFiles(self)  # the blobs found, read again when one is needed (never all held)
        self.referenced: list[str] = []
        self.seal_docs: dict[str, dict[str, Any]] = {}
        self.seal_entries: dict[str, tuple[int, dict[str, Any]]] = {}
        self.reveal_docs: dict[str, dict[str, Any]] = {}


    def root_at(self, size: int) -> bytes:
        """The MTH of the first ``size`` leaves, computed once per size (a passport's checkpoint and its proofs'
        are usually one note, and a checkpoint's root was computed when the checkpoints were replayed)."""
        if size not in self.roots:
            self.roots[size] = mth(self.leaves[:size])
        return self.roots[size]
    def read(self, relative: str, limit: int | None = None) -> bytes:
        """A file of the export: reached without a symbolic link, a regular file, within its bound (FORMATS
        sections 15 and 17); anything else in its place is a fault of that file."""
        bound = limit if limit is not None else _bound_of(relative)
        found = self.lstat(relative)
        if found is None:
            raise ReplayFailure(relative, "layout", "missing")
        path, mode = found
        if not stat.S_ISREG(mode):
            raise ReplayFailure(relative, "layout", "not a regular file")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise ReplayFailure(relative, "layout", f"cannot be read ({exc.strerror})") from None
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ReplayFailure(relative, "layout", "not a regular file")
            chunks, total = [], 0  # (read a piece at a time: read(bound + 1) would allocate the bound at once)
            while total <= bound and (chunk := handle.read(min(1 << 24, bound + 1 - total))):
                chunks.append(chunk)
                total += len(chunk)
            data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if len(data) > bound:
            raise ReplayFailure(relative, "layout", f"larger than its bound ({bound} bytes)")
        return data

    def listing(self, relative: str) -> list[str]:
        """The names in a folder of the export (none when it is absent); the folder is a real one, reached
        without a symbolic link."""
        found = self.lstat(relative)
        if found is None:
            return []
        if not stat.S_ISDIR(found[1]):
            raise ReplayFailure(relative, "layout", "not a folder")
        return sorted(os.listdir(found[0]))

    def seal_listing(self) -> list[str]:
        """The names in ``seals/``, hidden ones (``.name``) aside: FORMATS rule 8."""
        return [name for name in self.listing("seals") if not name.startswith(".")]

    def lstat(self, relative: str) -> tuple[Path, int] | None:
        """The path of ``relative`` in the export and its mode, every step taken without following a symbolic
        link (a link anywhere on the way is a fault); None when it is absent."""
        path = self.folder
        mode = 0
        for part in relative.split("/"):
            path = path / part
            try:
                mode = os.lstat(path).st_mode
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise ReplayFailure(relative, "layout", f"cannot be read ({exc.strerror})") from None
            if stat.S_ISLNK(mode):
                raise ReplayFailure(relative, "layout", "a symbolic link, not a file or folder of the export")
        return path, mode

    def blob(self, digest: str, index: int, what: str) -> bytes | None:
        """The blob's bytes (already hash-checked) or None when the manifest lists it missing."""
        if digest in self.blob_files:
            return self.blob_files[digest]
        if digest in self.missing:
            return None
        raise ReplayFailure(f"blobs/sha256/{digest[:2]}/{digest}", "blob",
                            f"{what} of entry {index} is neither exported nor listed in missing_blobs")

    # R1 ------------------------------------------------------------------------------------------------
    def manifest_file(self) -> None:
        if self.lstat("checkpoint") is not None and self.lstat("tile") is not None:  # FORMATS 16, "Reading"
            raise ReplayFailure(MANIFEST, "layout", "the folder also holds tiles (checkpoint and tile/): two logs")
        value = canonical_document(MANIFEST, self.read(MANIFEST), newline=True)
        if not isinstance(value, dict) or set(value) != EXPORT_MEMBERS:
            raise ReplayFailure(MANIFEST, "export", "members are not exactly those of format version 1")
        if value["format"] != "heldout-ledger-export" or value["version"] != 1:
            raise ReplayFailure(MANIFEST, "export", "unknown format or version")
        missing = value["missing_blobs"]
        if not isinstance(missing, list) or not all(isinstance(d, str) and HEX64.fullmatch(d) for d in missing):
            raise ReplayFailure(MANIFEST, "export", "missing_blobs is not a list of SHA-256 hex values")
        self.manifest = value
        self.missing = set(missing)

    # R2, R3 --------------------------------------------------------------------------------------------
    def entries_file(self) -> None:
        raw = self.read(ENTRIES)
        if not raw.endswith(b"\n"):
            raise ReplayFailure(ENTRIES, "entries", "empty or not ending with a newline")
        self.lines = raw[:-1].split(b"\n")
        for index, line in enumerate(self.lines):
            if len(line) > MAX_ENTRY_BYTES:
                raise ReplayFailure(ENTRIES, "entry", f"entry {index} is over 64 KiB")
            try:
                entry = canonical_document(ENTRIES, line, newline=False)
            except ReplayFailure as exc:
                raise ReplayFailure(ENTRIES, "entry", f"entry {index}: {exc.message}") from None
            if nesting(entry) > MAX_ENTRY_NESTING:
                raise ReplayFailure(ENTRIES, "entry", f"entry {index} is nested more than {MAX_ENTRY_NESTING} levels")
            self.check_entry(index, entry)
            self.entries.append(entry)
            self.leaves.append(leaf_hash(line))
        self.ledger_id = hashlib.sha256(self.lines[0]).hexdigest()[:20]
        if self.ledger_id != self.pinned:
            raise ReplayFailure(ENTRIES, "ledger-id", f"entry 0 hashes to ledger {self.ledger_id}, not {self.pinned}")
        self.origin = "heldout/ledger/" + self.ledger_id
        self.ledger_key = _key_member(self.entries[0]["key"], ENTRIES, "entry 0")
        self.keys = [self.ledger_key]
        self.key_declared_at = {self.ledger_key.key_id: 0}
        for i, e in enumerate(self.entries):
            if e["type"] == "key":
                key = _key_member(e["key"], ENTRIES, f"entry {i}")
                if key.key_id in self.key_declared_at:  # FORMATS rule 3: one key id is declared once
                    raise ReplayFailure(ENTRIES, "entry", f"entry {i} declares key id {key.key_id} again (entry "
                                        f"{self.key_declared_at[key.key_id]} declared it)")
                self.key_declared_at[key.key_id] = i
                self.keys.append(key)

    def check_entry(self, index: int, entry: Any) -> None:
        where = f"entry {index}"
        if not isinstance(entry, dict):
            raise ReplayFailure(ENTRIES, "entry", f"{where} is not an object")
        kind = entry.get("type")
        if kind not in REQUIRED:
            raise ReplayFailure(ENTRIES, "entry", f"{where} has unknown type {kind!r}")
        version = entry.get("v")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ReplayFailure(ENTRIES, "entry", f"{where}: v is not a positive integer")
        if (index == 0) != (kind == "genesis"):
            raise ReplayFailure(ENTRIES, "entry", f"{where}: genesis is entry 0 and only entry 0")
        for member, check in [*REQUIRED[kind].items(), *OPTIONAL.get(kind, {}).items()]:
            value = entry.get(member)
            if member not in entry:
                if member in REQUIRED[kind]:
                    raise ReplayFailure(ENTRIES, "entry", f"{where} lacks {member}")
                continue
            ok = {TEXT: isinstance(value, str) and 0 < len(value) <= 256,
                  BITS: _bits(value), BITS_OR_NULL: value is None or _bits(value),
                  SEED: _count(value) and value < 2**53, OBJECT: isinstance(value, dict),
                  MEMBERSHIP: value in ("sealed", "public"), WORDS: isinstance(value, str) and value != "",
                  HEX: isinstance(value, str) and bool(HEX64.fullmatch(value)),
                  TIME: isinstance(value, str) and _real_time(value),
                  KEY: True,
                  NOTE: isinstance(value, str) and bool(value.strip()) and len(value) <= MAX_NOTE_CHARS,
                  "count": _count(value) and value > 0,
                  "per-task": isinstance(value, dict) and bool(value) and all(
                      _count(v) and v > 0 for v in value.values())}[check]
            if not ok:
                raise ReplayFailure(ENTRIES, "entry", f"{where}: {member} is not a valid {check}")
            if check == KEY:
                _key_member(value, ENTRIES, where)

    # R4, R5 --------------------------------------------------------------------------------------------
    def checkpoints(self) -> None:
        notes: dict[int, Note] = {}
        for name in self.listing("checkpoints"):
            relative = f"checkpoints/{name}"
            stem, _, suffix = name.partition(".")
            if suffix != "note" or not SIZE_LINE.fullmatch(stem):
                raise ReplayFailure(relative, "layout", "not a checkpoint file name <size>.note")
            try:
                text = self.read(relative).decode("utf-8")
            except UnicodeDecodeError:
                raise ReplayFailure(relative, "checkpoint", "not UTF-8") from None
            note = verify_note(text, relative, self.ledger_key, self.origin)
            if note.size != int(stem):
                raise ReplayFailure(relative, "checkpoint", f"signs size {note.size}, filed under {stem}")
            notes[note.size] = note
        if not notes:
            raise ReplayFailure("checkpoints/", "checkpoint", "the export has no checkpoint")
        size = len(self.lines)
        previous: Note | None = None
        for checkpoint_size in sorted(notes):
            note = notes[checkpoint_size]
            if checkpoint_size > size:
                raise ReplayFailure(ENTRIES, "checkpoint-root",
                                    f"checkpoint {checkpoint_size} signs more entries than the {size} present")
            if self.root_at(checkpoint_size) != note.root:
                raise ReplayFailure(ENTRIES, "checkpoint-root",
                                    f"the entries do not give the root signed at size {checkpoint_size}")
            if previous is not None and not consistency_holds(
                    previous.size, note.size, previous.root, note.root,
                    consistency_proof(previous.size, self.leaves[:note.size])):
                raise ReplayFailure(f"checkpoints/{checkpoint_size}.note", "consistency",
                                    f"not consistent with checkpoint {previous.size}")
            previous = note
        assert previous is not None
        if previous.size != size:
            raise ReplayFailure(ENTRIES, "checkpoint-root", f"{size - previous.size} entries after the last checkpoint")
        self.notes = notes
        self.root = previous.root

    # R6 ------------------------------------------------------------------------------------------------
    def key_files(self) -> None:
        found: dict[str, Key] = {}
        for name in self.listing("keys"):
            relative = f"keys/{name}"
            if not name.endswith(".pub.json"):
                raise ReplayFailure(relative, "layout", "not a public key file <key_id>.pub.json")
            body = canonical_document(relative, self.read(relative), newline=True)
            if not isinstance(body, dict) or set(body) != {"algo", "key_id", "name", "public_key_b64", "fingerprint",
                                                           "note_verifier_key"}:
                raise ReplayFailure(relative, "key-file", "members are not those of a public key file")
            if body["algo"] != "Ed25519":
                raise ReplayFailure(relative, "key-file", "algo is not Ed25519")
            key = _key_member(body, relative, relative)
            if key.key_id != name[: -len(".pub.json")]:
                raise ReplayFailure(relative, "key-file", "key_id is not the file name")
            if body["fingerprint"] != hashlib.sha256(key.public_key).hexdigest():
                raise ReplayFailure(relative, "key-file", "fingerprint is not SHA-256 of the key")
            if body["note_verifier_key"] != verifier_key(key.name, key.public_key):
                raise ReplayFailure(relative, "key-file", "note_verifier_key does not match name and key")
            if key not in self.keys:
                raise ReplayFailure(relative, "key-file", "a key no ledger entry declares")
            found[key.key_id] = key
        for key in self.keys:
            if found.get(key.key_id) != key:
                raise ReplayFailure(f"keys/{key.key_id}.pub.json", "key-file",
                                    "a key the ledger declares has no matching key file")
        self.key_files_found = found

    # R7 ------------------------------------------------------------------------------------------------
    def blobs(self) -> None:
        prefixes = self.listing("blobs/sha256")
        for prefix in prefixes:  # (an empty folder too: blobs/sha256 holds two-hex prefix folders only)
            if re.fullmatch(r"[0-9a-f]{2}", prefix) is None:
                raise ReplayFailure(f"blobs/sha256/{prefix}", "layout", "not a prefix folder blobs/sha256/<hh>")
        found = [(prefix, name) for prefix in prefixes for name in self.listing(f"blobs/sha256/{prefix}")]
        for prefix, name in found:
            relative = f"blobs/sha256/{prefix}/{name}"
            if not HEX64.fullmatch(name) or prefix != name[:2]:
                raise ReplayFailure(relative, "layout", "not a blob path blobs/sha256/<hh>/<sha256>")
            if hashlib.sha256(self.read(relative)).hexdigest() != name:
                raise ReplayFailure(relative, "blob", "content does not hash to its name")
            self.blob_files.found(name, relative)

        def walk(value: Any) -> None:
            if isinstance(value, dict):
                for key, item in value.items():
                    if key.endswith("_sha256") and isinstance(item, str) and HEX64.fullmatch(item):
                        self.referenced.append(item)
                    else:
                        walk(item)
            elif isinstance(value, list):
                for item in value:
                    walk(item)

        for entry in self.entries:
            walk(entry)
        for digest in self.referenced:
            if digest not in self.blob_files and digest not in self.missing:
                raise ReplayFailure(f"blobs/sha256/{digest[:2]}/{digest}", "blob",
                                    "referenced, not exported and not listed in missing_blobs")
        for digest in self.blob_files:
            if digest not in self.referenced:
                raise ReplayFailure(f"blobs/sha256/{digest[:2]}/{digest}", "blob",
                                    "exported but referenced by no entry")

    # R8 ------------------------------------------------------------------------------------------------
    def signed_document(self, file: str, doc: Any, before: int | None = None) -> Key:
        """FORMATS.md 3: issuer is a ledger key (declared by an entry before ``before``, when given: a passport's
        issuer before the passport's entry); Ed25519 over JCS of the document without signature."""
        if not isinstance(doc, dict) or not isinstance(doc.get("issuer"), dict):
            raise ReplayFailure(file, "signature", "no issuer")
        issuer = doc["issuer"]
        if issuer.get("algo") != "Ed25519":
            raise ReplayFailure(file, "signature", "issuer.algo is not Ed25519")
        claimed = _key_member(issuer, file, "issuer")
        if claimed not in self.keys:
            raise ReplayFailure(file, "signature", "issued under a key the ledger does not declare")
        if before is not None and self.key_declared_at[claimed.key_id] >= before:
            raise ReplayFailure(file, "signature", f"issued under a key declared only after entry {before}")
        signature = b64decode_canonical(doc.get("signature"), file, "signature")
        body = jcs({k: v for k, v in doc.items() if k != "signature"})
        if len(signature) != 64 or not ed25519_ok(claimed.public_key, body, signature):
            raise ReplayFailure(file, "signature", "signature does not verify")
        return claimed

    def seals(self) -> None:
        for index, entry in enumerate(self.entries):
            if entry["type"] != "seal":
                continue
            name = entry["generation"]
            if name in self.seal_entries:
                raise ReplayFailure(ENTRIES, "seal", f"entry {index} seals {name} again")
            tasks = entry.get("tasks")
            if not isinstance(tasks, dict) or not tasks or not all(
                    isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in tasks.values()):
                raise ReplayFailure(ENTRIES, "seal", f"seal entry {index} lacks its task counts")
            noise = (entry.get("release") or {}).get("noise_sha256")
            if noise is not None and any((e.get("release") or {}).get("noise_sha256") == noise
                                         for _, e in self.seal_entries.values()):
                raise ReplayFailure(ENTRIES, "seal", f"seal entry {index} reuses another generation's Thresholdout "
                                    "noise secret (rule 8)")
            self.seal_entries[name] = (index, entry)
        for name in self.seal_listing():
            generation, _, suffix = name.partition(".")
            if suffix not in ("seal.json", "reveal.json") or generation not in self.seal_entries:
                raise ReplayFailure(f"seals/{name}", "layout", "not a manifest or reveal of a sealed generation")
            self.read(f"seals/{name}")  # a regular file, within its bound
        for name, (index, entry) in self.seal_entries.items():
            file = f"seals/{name}.seal.json"
            data = self.read(file)
            if hashlib.sha256(data).hexdigest() != entry["manifest_sha256"]:
                raise ReplayFailure(file, "seal", f"is not the manifest seal entry {index} names")
            doc = canonical_document(file, data, newline=False)
            self.signed_document(file, doc, before=index)  # (signed by a key declared before the seal entry)
            if doc.get("type") != "heldout/seal-manifest" or doc.get("manifest_version") != 1:
                raise ReplayFailure(file, "seal", "not a seal manifest version 1")
            tasks = doc.get("tasks")
            expected = {"generation": name, "set_hash": entry["set_hash"], "ledger_id": self.ledger_id,
                        "entry_index": index, "expiry_utc": entry["expiry_utc"], "created_utc": entry["created_utc"],
                        "commitment_scheme": COMMITMENT_SCHEME}
            for member, value in expected.items():
                if doc.get(member) != value:
                    raise ReplayFailure(file, "seal", f"{member} disagrees with seal entry {index}")
            if not isinstance(tasks, dict) or not all(isinstance(c, dict) for c in tasks.values()) \
                    or {t: c.get("cases") for t, c in tasks.items()} != entry.get("tasks") \
                    or doc.get("n_cases") != sum(entry.get("tasks", {}).values()):
                raise ReplayFailure(file, "seal", f"task counts disagree with seal entry {index}")
            if entry != self.seal_entry_of(doc, hashlib.sha256(data).hexdigest()):
                raise ReplayFailure(file, "seal", f"seal entry {index} is not exactly the entry the manifest makes")
            if not self.budget_follows(doc):
                raise ReplayFailure(file, "seal", "its leakage_budget is not what its rule gives from the manifest")
            if doc.get("membership") != "public":
                self.check_draw(file, name, doc, index)
            self.seal_docs[name] = doc
        intents: dict[str, list[int]] = {}
        for index, entry in enumerate(self.entries):
            if entry["type"] == "intent":
                intents.setdefault(entry["generation"], []).append(index)
        for name, indices in intents.items():
            used = (self.seal_docs.get(name) or {}).get("draw") or {}
            if len(indices) > 1 or used.get("intent_index") != indices[0]:
                raise ReplayFailure(ENTRIES, "draw", f"the intent of {name} was logged at entries {indices}, "
                                    "not exactly once and drawn from: a retried or abandoned draw")

    @staticmethod
    def budget_follows(doc: dict[str, Any], weak: tuple[str, int] | None = None) -> bool:
        """FORMATS.md section 9, "The budget follows from its rule", from the manifest alone: some task W whose
        cases over its classes can hold the stated smallest class n gives exactly the stated bits (or eps),
        statement and families (each family compared by its numbers; the descriptive texts are not). With
        ``weak`` (the weakest task and its smallest class, from the revealed labels): that task, that n."""
        budget = doc.get("leakage_budget")
        tasks = doc.get("tasks")
        if not isinstance(budget, dict) or not isinstance(tasks, dict) or not tasks:
            return False
        cases = {task: counts.get("cases") for task, counts in tasks.items() if isinstance(counts, dict)}
        if len(cases) != len(tasks) or not all(_count(c) and c > 0 for c in cases.values()):
            return False
        basis, n, k, delta = budget.get("basis"), budget.get("n"), budget.get("k"), budget.get("delta")
        if basis == "public":
            return doc.get("membership") == "public" and (budget.get("bits"), n, k, delta, budget.get("eps")) == (
                None, min(cases.values()), 1, 0.05, None)
        mode = _object(doc.get("release")).get("mode")
        if basis not in ("default", "explicit") or mode not in ("full", "ladder", "thresholdout") or \
                not _count(n) or not _count(k) or k < 1 or type(delta) not in (int, float) or not 0 < delta < 1:
            return False  # (section 9: k >= 1 models, delta in (0, 1); else there is no rule to follow)
        try:
            return _Replay._budget_rule_holds(budget, cases, mode, basis, n, k, delta, weak)
        except (ValueError, OverflowError, ZeroDivisionError):  # a stated eps or bits no double arithmetic holds
            return False

    @staticmethod
    def _budget_rule_holds(budget: dict[str, Any], cases: dict[str, int], mode: str, basis: str, n: int, k: int,
                           delta: float, weak: tuple[str, int] | None) -> bool:
        def eps_at(bits: float, at: int, statistics: int) -> float:
            return round(math.sqrt((max(bits, 0.0) * math.log(2) + math.log(2 * statistics / delta)) / (2 * at)), 6)

        statement = round(math.fsum(math.log2(c + 1) for c in cases.values()), 6)
        for task, count in sorted(cases.items()):
            if weak is not None and (task, n) != weak:
                continue
            classes = MEDMNIST_CLASSES.get(task.removesuffix("_224"))
            if classes is None or not 1 <= n <= max(1, count // classes):
                continue
            per = 512 * classes + 256 if mode == "full" else 1
            statistics = k * len(cases) * per
            if basis == "default":
                eps = budget.get("eps")
                if not isinstance(eps, (int, float)):
                    return False
                bits = round((2 * n * eps * eps - math.log(2 * statistics / delta)) / math.log(2), 6)
            else:
                bits = budget.get("bits")
                if not isinstance(bits, (int, float)):
                    return False
                eps = eps_at(bits, n, statistics)
            score_scale = 100.0 / (1.0 - 1.0 / classes)
            # (n, scale, per evaluation, covered) of each released family, in FORMATS order
            shapes = [(n, score_scale, 1, True)] if mode != "full" else [
                (n, score_scale, 256 * classes, True), (n, 1.0, 256 * classes, True), (count, 1.0, 256, True),
                (n, 1.0, 256, False)]
            families = [{"n": at, "scale": round(scale, 6), "per_evaluation": each, "statistics": statistics,
                         "eps": round(scale * eps_at(bits, at, statistics), 6) if covered else None}
                        for at, scale, each, covered in shapes]
            listed = budget.get("families")
            stated = [{key: f.get(key) for key in ("n", "scale", "per_evaluation", "statistics", "eps")}
                      for f in listed if isinstance(f, dict)] if isinstance(listed, list) else None
            if (budget.get("bits"), budget.get("eps"), budget.get("statement_bits")) == (bits, eps, statement) \
                    and stated == families:
                return True
        return False

    @staticmethod
    def seal_entry_of(doc: dict[str, Any], digest: str) -> dict[str, Any]:
        """FORMATS.md section 9, binding: the seal entry a manifest makes, member by member."""
        budget = _object(doc.get("leakage_budget"))
        tasks = _object(doc.get("tasks"))  # (each an object: seals() checked them)
        entry: dict[str, Any] = {
            "type": "seal", "v": 1, "generation": doc.get("generation"), "set_hash": doc.get("set_hash"),
            "created_utc": doc.get("created_utc"), "expiry_utc": doc.get("expiry_utc"),
            "membership": doc.get("membership"), "n_cases": doc.get("n_cases"),
            "tasks": {task: counts.get("cases") for task, counts in tasks.items()},
            "budget_bits": budget.get("bits"), "release": doc.get("release"),
            "manifest_sha256": digest}
        if doc.get("membership") == "public":
            entry["sources"] = {task: {"origin": c.get("origin"), "sha256": c.get("sha256")}
                                for task, c in tasks.items()}
        if budget.get("families"):
            entry["statement_bits"] = budget.get("statement_bits")
            entry["guarantee"] = {"delta": budget.get("delta"), "k": budget.get("k"),
                                  "families": budget.get("families")}
        return entry

    def check_draw(self, file: str, name: str, doc: dict[str, Any], seal_index: int) -> None:
        """FORMATS.md, the draw: the intent and pool entries it names, the seed from the first checkpoint
        containing the intent."""
        draw = doc.get("draw")
        if not isinstance(draw, dict) or draw.get("algorithm") != "heldout-draw-v1":
            raise ReplayFailure(file, "draw", "a sealed generation's manifest records its draw (heldout-draw-v1)")
        checkpoint, pools, cosignatures = draw.get("checkpoint"), draw.get("pools"), draw.get("cosignatures")
        if set(draw) != DRAW_MEMBERS or not isinstance(checkpoint, dict) or set(checkpoint) != {"size", "note"} \
                or not _count(checkpoint["size"]) or not isinstance(checkpoint["note"], str) \
                or not isinstance(pools, dict) or not pools or not all(
                    isinstance(ref, dict) and set(ref) == {"index", "pool_root", "pool_size"} and _count(ref["index"])
                    and _count(ref["pool_size"]) and isinstance(ref["pool_root"], str) for ref in pools.values()) \
                or not isinstance(cosignatures, list) or not all(isinstance(line, str) for line in cosignatures):
            raise ReplayFailure(file, "draw", "draw is not {algorithm, seed_source, intent_index, pools {task: {index, "
                                "pool_root, pool_size}}, checkpoint {size, note}, cosignatures [lines], seed}")
        at = draw.get("intent_index")
        if not _count(at) or at >= seal_index or self.entries[at]["type"] != "intent" \
                or self.entries[at]["generation"] != name:
            raise ReplayFailure(file, "draw", "intent_index is not an intent of the generation before its seal")
        intent = self.entries[at]
        if intent["tasks"] != {t: c["cases"] for t, c in doc["tasks"].items()} \
                or intent["expiry_utc"] != doc["expiry_utc"] or intent.get("release") != doc.get("release") \
                or intent["pools"] != {t: ref.get("index") for t, ref in pools.items()}:
            raise ReplayFailure(file, "draw", f"the manifest disagrees with its intent entry {at}")
        for task, ref in pools.items():
            pool = self.entries[ref["index"]] if _count(ref.get("index")) and ref["index"] < at else {}
            if pool.get("type") != "pool" or pool.get("task") != task or pool.get("pool_root") != ref.get(
                    "pool_root") or pool.get("pool_size") != ref.get("pool_size"):
                raise ReplayFailure(file, "draw", f"draw.pools.{task} is not the pool entry it names")
        note = verify_note(checkpoint["note"], file, self.ledger_key, self.origin)
        if note.size != at + 1 or checkpoint["size"] != note.size or self.root_at(note.size) != note.root:
            raise ReplayFailure(file, "draw", "the seed's checkpoint is not this ledger's first containing the intent")
        carried = set(checkpoint["note"].rpartition("\n\n")[2].splitlines())
        if any(line not in carried for line in cosignatures):
            raise ReplayFailure(file, "draw", "a recorded cosignature is not a signature line of the seed's note")
        source = draw.get("seed_source")
        if source == "checkpoint-root":
            material = note.root
        elif source == "witness-cosignatures" and draw.get("cosignatures"):
            material = "".join(line + "\n" for line in sorted(draw["cosignatures"])).encode("utf-8")
        else:
            raise ReplayFailure(file, "draw", "unknown seed source")
        if draw_seed(source, material).hex() != draw.get("seed"):
            raise ReplayFailure(file, "draw", "the seed is not the one its material gives")
        if source == "witness-cosignatures" and str(doc.get("created_utc")) < day_before(
                max(cosignature_time(line, file) for line in draw["cosignatures"])):
            raise ReplayFailure(file, "draw", "the manifest is dated more than a day before a cosignature its seed "
                                "comes from")

    # R9 ------------------------------------------------------------------------------------------------
    def reveals(self) -> None:
        reveal_files: dict[str, str] = {}
        revealed: set[str] = set()  # generations a reveal entry names (its blob present or not)
        for index, entry in enumerate(self.entries):
            if entry["type"] != "reveal":
                continue
            name = entry["generation"]
            revealed.add(name)
            if name not in self.seal_docs or self.seal_entries[name][0] > index:
                raise ReplayFailure(ENTRIES, "reveal", f"entry {index} reveals {name}, which no earlier entry seals")
            if self.seal_entries[name][1].get("membership") != "public" and not any(
                    e["type"] == "retire" and e["generation"] == name for e in self.entries[:index]):
                raise ReplayFailure(ENTRIES, "reveal", f"entry {index} reveals {name} before it is retired")
            digest = entry["reveal_sha256"]
            file = f"blobs/sha256/{digest[:2]}/{digest}"
            data = self.blob(digest, index, "reveal_sha256")
            published = f"seals/{name}.reveal.json"
            if published in (f"seals/{n}" for n in self.seal_listing()):
                shown = self.read(published)  # the blob's bytes; with the blob listed missing, its hash
                differs = shown != data if data is not None else sha256(shown).hex() != digest
                if differs:
                    raise ReplayFailure(published, "reveal", f"is not the reveal entry {index} names")
            if data is None:
                continue
            doc = canonical_document(file, data, newline=False)
            self.check_reveal(file, name, doc, entry, index)
            self.reveal_docs[name] = doc
            reveal_files[name] = file
        for published_name in self.seal_listing():
            if published_name.endswith(".reveal.json") and published_name.split(".")[0] not in revealed:
                raise ReplayFailure(f"seals/{published_name}", "reveal", "published, but no reveal entry names it")
        # generations are disjoint: no revealed case is one (same task and content hash, or same case id) of a
        # generation sealed before it; the later one is at fault
        held: dict[tuple[str, str], str] = {}
        for name in sorted(self.reveal_docs, key=lambda n: self.seal_entries[n][0]):
            cases = self.reveal_docs[name]["cases"]
            for case in cases:
                earlier = held.get((case["task"], case["content_sha256"])) or held.get((case["task"], case["case_id"]))
                if earlier is not None:
                    raise ReplayFailure(reveal_files[name], "reveal", f"{name} holds {case['case_id']}, a case of "
                                        f"{earlier}, which was sealed before it: generations are disjoint")
            for case in cases:
                held.setdefault((case["task"], case["content_sha256"]), name)
                held.setdefault((case["task"], case["case_id"]), name)

    def check_reveal(self, file: str, name: str, doc: Any, entry: dict[str, Any], index: int) -> None:
        manifest = self.seal_docs[name]
        members = {"type", "reveal_version", "generation", "ledger_id", "set_hash", "manifest_sha256", "membership",
                   "commitment_scheme", "n_cases", "cases", "images", "order", "pools"}
        if not isinstance(doc, dict) or set(doc) != members or doc["type"] != "heldout/reveal" \
                or doc["reveal_version"] != 1:
            raise ReplayFailure(file, "reveal", "not a reveal version 1")
        for member in ("generation", "ledger_id", "set_hash", "membership", "n_cases", "commitment_scheme"):
            if doc[member] != manifest[member]:
                raise ReplayFailure(file, "reveal", f"{member} is not the manifest's")
        if doc["manifest_sha256"] != self.seal_entries[name][1]["manifest_sha256"]:
            raise ReplayFailure(file, "reveal", "manifest_sha256 is not the seal entry's")
        cases = doc["cases"]
        if not isinstance(cases, list) or len(cases) != doc["n_cases"]:
            raise ReplayFailure(file, "reveal", "n_cases is not the number of cases")
        salt_size = 0 if doc["membership"] == "public" else 32
        previous = b""
        counts: dict[str, int] = {}
        seen: set[str] = set()
        for i, case in enumerate(cases):
            where = f"case #{i}"
            if not isinstance(case, dict) or set(case) != {"case_id", "task", "content_sha256", "label", "salt",
                                                           "commitment"}:
                raise ReplayFailure(file, "reveal", f"{where} has the wrong members")
            # lowercase hex of the stated size, nothing else (bytes.fromhex also reads "AB", " ab" and "a\u3000b")
            salt, listed = hex_bytes(case["salt"], salt_size), hex_bytes(case["commitment"], 32)
            if salt is None or listed is None:
                raise ReplayFailure(file, "reveal", f"{where}: salt or commitment is not lowercase hex of its size")
            label = case["label"]
            if isinstance(label, bool) or not isinstance(label, int) or label < 0:
                raise ReplayFailure(file, "reveal", f"{where}: label is not a non-negative integer")
            if not isinstance(case["task"], str) or not isinstance(case["content_sha256"], str):
                raise ReplayFailure(file, "reveal", f"{where}: task or content_sha256 is not a string")
            match = CASE_ID.fullmatch(case["case_id"]) if isinstance(case["case_id"], str) else None
            if not match or match.group(1) != case["task"] or match.group(2) != case["content_sha256"][:16] \
                    or (match.group(3) and doc["membership"] != "public") \
                    or not HEX64.fullmatch(case["content_sha256"]):
                raise ReplayFailure(file, "reveal", f"{where}: case id is not <task>-<16 hex of the content hash>")
            if case["case_id"] in seen:
                raise ReplayFailure(file, "reveal", f"{where}: listed twice")
            seen.add(case["case_id"])
            payload = jcs({"case_id": case["case_id"], "content_sha256": case["content_sha256"], "label": label})
            if sha256(salt + payload) != listed:
                raise ReplayFailure(file, "reveal", f"{where} ({case['case_id']}): commitment does not open")
            if listed <= previous:
                raise ReplayFailure(file, "reveal", f"{where}: cases are not in ascending commitment order")
            previous = listed
            counts[case["task"]] = counts.get(case["task"], 0) + 1
        if counts != {t: c["cases"] for t, c in manifest["tasks"].items()}:
            raise ReplayFailure(file, "reveal", "case counts per task are not the manifest's")
        images, order, pools = doc["images"], doc["order"], doc["pools"]
        if images is not None and (not isinstance(images, dict) or not all(
                isinstance(digest, str) for digest in images.values())):
            raise ReplayFailure(file, "reveal", "images is not null or an object {task: sha256}")
        if order is not None and (not isinstance(order, dict) or not all(
                isinstance(ids, list) and all(isinstance(c, str) for c in ids) and ids
                and sorted(ids) == sorted(c["case_id"] for c in cases if c["task"] == task)
                for task, ids in order.items())):
            raise ReplayFailure(file, "reveal", "order is not null or an object {task: exactly that task's case ids}")
        if pools is not None and (not isinstance(pools, dict) or not all(
                isinstance(listed, list) and all(hex_bytes(c, 32) is not None for c in listed)
                for listed in pools.values())):
            raise ReplayFailure(file, "reveal", "pools is not null or an object {task: [lowercase hex commitments]}")
        root = mth([leaf_hash(bytes.fromhex(c["commitment"])) for c in cases]).hex()
        if root != manifest["set_hash"]:
            raise ReplayFailure(file, "reveal", "the commitments do not hash to the sealed set hash")
        if doc["membership"] != "public":
            self.check_drawn(file, doc, manifest)
            # the weakest task (smallest class, then fewest cases, then name) and its smallest class, exactly
            smallest: dict[str, int] = {}
            for task in counts:
                classes = MEDMNIST_CLASSES.get(task.removesuffix("_224"), 0)
                labels = [c["label"] for c in cases if c["task"] == task]
                if classes == 0 or any(label >= classes for label in labels):
                    raise ReplayFailure(file, "reveal", f"a case of {task} has a label the task does not have")
                smallest[task] = max(1, min(labels.count(k) for k in range(classes)))
            weak = min(counts, key=lambda t: (smallest[t], counts[t], t))
            if not self.budget_follows(manifest, weak=(weak, smallest[weak])):
                raise ReplayFailure(file, "reveal", "the manifest's leakage_budget is not what its rule gives on "
                                    "the revealed labels")
        elif doc["pools"] is not None:
            raise ReplayFailure(file, "reveal", "the public generation lists no pools")
        if doc["images"] is not None:
            self.check_images(file, doc, entry, index)

    def check_drawn(self, file: str, doc: dict[str, Any], manifest: dict[str, Any]) -> None:
        """FORMATS.md, the draw at reveal: each task's revealed pool hashes to its pool root, and the seed selects
        exactly the revealed commitments from it."""
        draw = manifest["draw"]
        pools = doc["pools"]
        if not isinstance(pools, dict) or set(pools) != set(manifest["tasks"]):
            raise ReplayFailure(file, "draw", "the reveal does not list each task's committed pool")
        seed = bytes.fromhex(draw["seed"])
        for task, listed in sorted(pools.items()):
            pool = [bytes.fromhex(c) for c in listed]
            ref = draw["pools"][task]
            if len(pool) != ref["pool_size"] or pool != sorted(set(pool)) \
                    or mth([leaf_hash(c) for c in pool]).hex() != ref["pool_root"]:
                raise ReplayFailure(file, "draw", f"the revealed pool of {task} is not the committed one")
            revealed = {bytes.fromhex(c["commitment"]) for c in doc["cases"] if c["task"] == task}
            chosen = {pool[p] for p in draw_positions(seed, task, len(pool), len(revealed))}
            if chosen != revealed:
                raise ReplayFailure(file, "draw", f"the revealed cases of {task} are not those the seed selects")

    def check_images(self, file: str, doc: dict[str, Any], entry: dict[str, Any], index: int) -> None:
        named = entry.get("image_blobs") or {}
        by_id = {c["case_id"]: c for c in doc["cases"]}
        for task, digest in doc["images"].items():
            if named.get(f"{task}_sha256") != digest:
                raise ReplayFailure(file, "reveal", f"image blob of {task} is not named by reveal entry {index}")
            data = self.blob(digest, index, f"image_blobs.{task}_sha256")
            if data is None:
                continue
            blob_file = f"blobs/sha256/{digest[:2]}/{digest}"
            try:
                arrays = read_npz(data)
                ids = _unicode_items(*arrays["case_ids"])
                descr, shape, raw = arrays["images"]
            except (KeyError, IndexError, ValueError, TypeError, zipfile.BadZipFile, SyntaxError, struct.error,
                    EOFError, NotImplementedError, RuntimeError, MemoryError, RecursionError) as exc:
                raise ReplayFailure(blob_file, "reveal-images", f"not a reveal image file ({exc})") from None
            if descr != "|u1" or len(shape) < 3 or not all(type(d) is int and d >= 0 for d in shape) \
                    or shape[0] != len(ids):
                raise ReplayFailure(blob_file, "reveal-images", "images are not uint8 N x H x W (x C)")
            per_case = len(raw) // shape[0] if shape[0] else 0
            for n, case_id in enumerate(ids):
                case = by_id.get(case_id)
                if case is None or case["task"] != task:
                    raise ReplayFailure(blob_file, "reveal-images", f"holds {case_id}, not a case of {task}")
                image = raw[n * per_case:(n + 1) * per_case]
                if content_sha256(image, shape[1:], case["label"]) != case["content_sha256"]:
                    raise ReplayFailure(blob_file, "reveal-images", f"{case_id}: image does not hash to its content")

    # R10 -----------------------------------------------------------------------------------------------
    def supersession(self, spec_version: Any, before: int) -> tuple[int, dict[str, Any]] | None:
        """The supersession of ``spec_version`` that counts (section 5: the first spec entry for it, unless it
        closes a cycle) among the entries before ``before``: its index and entry; None when there is none."""
        counted: dict[str, tuple[int, dict[str, Any]]] = {}
        for index, e in enumerate(self.entries[:before]):
            if e["type"] != "spec" or e["spec_version"] in counted:
                continue
            successor, seen = e["superseded_by"], {e["spec_version"]}
            while successor not in seen and successor in counted:
                seen.add(successor)
                successor = counted[successor][1]["superseded_by"]
            if successor not in seen:
                counted[e["spec_version"]] = (index, e)
        return counted.get(spec_version) if isinstance(spec_version, str) else None

    def supersessions(self) -> None:
        """Section 5: a spec entry that does not count (a version superseded again, or one closing a cycle) or
        that is dated to take effect before it was logged is reported (the audit reports each)."""
        for index, e in enumerate(self.entries):
            if e["type"] != "spec":
                continue
            if self.supersession(e["spec_version"], index + 1) != (index, e) \
                    and self.supersession(e["spec_version"], index) is None:
                raise ReplayFailure(ENTRIES, "spec", f"entry {index} supersedes {e['spec_version']} by "
                                    f"{e['superseded_by']}, which leads back to it (a cycle; it does not count)")
            if self.supersession(e["spec_version"], index) is not None:
                raise ReplayFailure(ENTRIES, "spec", f"entry {index} supersedes {e['spec_version']} again")
            if e["effective_utc"] < e["created_utc"]:
                raise ReplayFailure(ENTRIES, "spec", f"entry {index} takes effect before it was logged")

    def supersession_time(self, spec_version: Any, before: int) -> str | None:
        """When the supersession that counts (:meth:`supersession`) takes effect: the later of its effective_utc
        and its created_utc (times in the one textual form compare as strings); None when there is none."""
        found = self.supersession(spec_version, before)
        return None if found is None else max(found[1]["effective_utc"], found[1]["created_utc"])

    def expiry_basis(self, doc: dict[str, Any], index: int, expiry: str) -> str:
        """Section 12's expiry_basis of a passport at ``index`` whose expiry_utc is ``expiry``."""
        heldout = doc["computed"]["heldout"]
        name, seal = heldout["generation"], self.seal_entries[heldout["generation"]][1]
        if expiry != seal["expiry_utc"]:
            spec_index, spec = self.supersession(doc.get("spec_version"), index)  # type: ignore[misc]
            return (f"spec {spec['spec_version']} superseded by {spec['superseded_by']} from {expiry} (ledger entry "
                    f"{spec_index}), before the expiry of the generation this evidence is anchored to ({name}, "
                    f"{seal['expiry_utc']}); the passport lapses earlier if the generation is retired")
        anchor = PUBLIC_ANCHOR if seal.get("membership") == "public" else SEALED_ANCHOR
        return (f"{anchor} this evidence is anchored to ({name}, set hash {seal['set_hash'][:16]}...) is published "
                f"to expire {expiry}; the passport lapses earlier if the generation is retired or its spec version "
                "superseded")

    def spec_in_force(self, before: int, at: str) -> str:
        """Section 5: the spec in force at ``at``, MedEval-1 v0.1 followed along the supersessions that count
        among the entries before ``before`` and take effect by ``at``."""
        version, seen = "MedEval-1 v0.1", {"MedEval-1 v0.1"}
        while (effective := self.supersession_time(version, before)) is not None and effective <= at:
            version = self.supersession(version, before)[1]["superseded_by"]  # type: ignore[index]
            if version in seen:
                break
            seen.add(version)
        return version

    def superseded(self, spec_version: Any, before: int, at: str) -> bool:
        """Is ``spec_version`` superseded, by a spec entry before index ``before``, at the time ``at``?"""
        effective = self.supersession_time(spec_version, before)
        return effective is not None and effective <= at

    def retired_before(self, name: str, index: int) -> bool:
        """A retire entry before ``index``, or a reveal of a generation that is not public (which retires it)."""
        public = self.seal_entries[name][1].get("membership") == "public"
        return any(e["generation"] == name and (e["type"] == "retire" or (e["type"] == "reveal" and not public))
                   for e in self.entries[:index] if e["type"] in ("retire", "reveal"))

    def over_budget(self, index: int) -> bool:
        """Was bundle ``index`` admitted past its generation's budget (statement plus the charges before it, summed
        and rounded to 6 decimals, plus its own, above budget_bits + 1e-9)?"""
        entry = self.entries[index]
        seal = self.seal_entries[entry["generation"]][1]
        budget = seal.get("budget_bits")
        if not isinstance(budget, (int, float)):
            return False
        charges = [float(seal.get("statement_bits") or 0.0)] + [
            round(float(e.get("leakage_bits", 0.0)), 6) for e in self.entries[:index]
            if e["type"] == "bundle" and e["generation"] == entry["generation"]]
        return round(math.fsum(charges), 6) + round(float(entry.get("leakage_bits", 0.0)), 6) > budget + 1e-9

    def dimensions_reference(self, model_id: str, known: dict[str, tuple[int, set[str]] | None]
                             ) -> tuple[int, set[str]] | None:
        """(index, optional dimensions) of the model's first bundle, in index order, on a generation that
        releases in full whose evaluation is exported and has a ``dimensions`` object (a withheld evaluation is
        published only at its generation's retirement: it is never the reference); None when it has none."""
        if model_id not in known:
            known[model_id] = None
            for index, entry in enumerate(self.entries):
                if entry["type"] != "bundle" or entry["model_id"] != model_id:
                    continue
                seal = self.seal_entries.get(entry["generation"])
                if seal is None or (seal[1].get("release") or {}).get("mode", "full") != "full":
                    continue
                data = self.blob_files.get(entry["evaluation_sha256"])
                try:
                    dimensions = parse_json(data).get("dimensions") if data is not None else None
                except (ValueError, AttributeError):
                    continue  # (that bundle's own checks name it)
                if isinstance(dimensions, dict):
                    known[model_id] = (index, {d for d in ("limited_data", "spec_sensitivity")
                                               if dimensions.get(d) is not None})
                    break
        return known[model_id]

    def check_release(self, index: int, entry: dict[str, Any], mode: str, step: Any,
                      transcript: list[tuple[Any, bool]]) -> None:
        """FORMATS rule 10 on a withheld bundle's release record, from the entry alone: its value is an answer the
        mechanism could give after the task's earlier answers (label-dependent: a multiple of the step in [0,
        100], on a ladder above the best; otherwise nothing on a ladder, the public estimate under Thresholdout),
        and its bits are that answer's description length, gamma(gap) + log2(the values it could take)."""
        release = entry.get("release")
        if not isinstance(release, dict) or release.get("mode") != mode or not isinstance(step, (int, float)) \
                or isinstance(step, bool) or not step > 0:
            raise ReplayFailure(ENTRIES, "bundle", f"entry {index} lacks its {mode} release record")
        dependent, value = release.get("label_dependent"), release.get("value")
        if not isinstance(dependent, bool):
            raise ReplayFailure(ENTRIES, "bundle", f"entry {index}: release.label_dependent is not a boolean")
        best = max((v for v, flag in transcript if flag), default=None)
        levels = math.floor(100 / step + 1e-9) + 1
        if dependent:
            on_grid = type(value) in (int, float) and 0 <= value <= 100 \
                and round(round(value / step) * step, 6) == value
            if not on_grid or (mode == "ladder" and best is not None and value < best + step - 1e-9):
                raise ReplayFailure(ENTRIES, "bundle", f"entry {index}: its released value {value!r} is not a {mode} "
                                    f"answer (a multiple of the step {step} in [0, 100]"
                                    + (", above the best before it)" if mode == "ladder" else ")"))
            gap = len(transcript) - max((i for i, (_, flag) in enumerate(transcript) if flag), default=-1)
            values = levels if mode == "thresholdout" or best is None else max(0, levels - (round(best / step) + 1))
            bits = round(2 * (gap.bit_length() - 1) + 1 + math.log2(values), 6) if values > 0 else None
        else:
            if (mode == "ladder" and value is not None) or (mode == "thresholdout"
                                                             and value != release.get("public_estimate")):
                raise ReplayFailure(ENTRIES, "bundle", f"entry {index}: a {mode} answer that releases nothing "
                                    "label-dependent releases " + ("a value" if mode == "ladder" else
                                                                   "another value than the public estimate"))
            bits = 0.0
        if bits is None or release.get("bits") != bits:
            raise ReplayFailure(ENTRIES, "bundle", f"entry {index}: its release's bits are not the description length "
                                f"of its answer ({bits})")
        transcript.append((value, dependent))

    def bundles(self) -> None:
        model_dimensions: dict[str, tuple[int, set[str]] | None] = {}  # a model's first full-release evaluation's
        runs: dict[tuple[str, str, str, str, str], int] = {}  # (model, generation, task, predictions, spec)
        transcripts: dict[tuple[str, str], list[tuple[Any, bool]]] = {}  # (generation, task) -> (value, dependent)
        for index, entry in enumerate(self.entries):
            if entry["type"] != "bundle":
                continue
            # the spec of the run is the one in force at its date (the entry's copy may be left out)
            spec = self.spec_in_force(index, entry["created_utc"])
            run = (entry["model_id"], entry["generation"], entry["task"], entry["predictions_sha256"], spec)
            if runs.setdefault(run, index) != index:
                raise ReplayFailure(ENTRIES, "bundle", f"entry {index} logs the predictions of entry {runs[run]} "
                                    "again (same model, generation, task and spec version)")
            name = entry["generation"]
            seal = self.seal_entries.get(name)
            if seal is None or seal[0] > index:
                raise ReplayFailure(ENTRIES, "bundle", f"entry {index} is on a generation no earlier entry seals")
            if self.retired_before(name, index):
                raise ReplayFailure(ENTRIES, "bundle", f"entry {index} is on {name} after its retirement")
            if entry["task"] not in (seal[1].get("tasks") or {}):
                raise ReplayFailure(ENTRIES, "bundle", f"entry {index} is on a task {name}'s seal does not list")
            release = entry.get("release")
            budgeted = isinstance(seal[1].get("budget_bits"), (int, float))
            if budgeted and not isinstance(entry.get("leakage_bits"), (int, float)):
                raise ReplayFailure(ENTRIES, "bundle", f"entry {index} states no leakage_bits on {name}, which has a "
                                    "leakage budget")
            if budgeted and isinstance(release, dict) and release.get("bits") != entry["leakage_bits"]:
                raise ReplayFailure(ENTRIES, "bundle", f"entry {index}: leakage_bits is not its release's bits")
            if self.over_budget(index):
                raise ReplayFailure(ENTRIES, "bundle", f"entry {index} was admitted past {name}'s leakage budget")
            mode = (seal[1].get("release") or {}).get("mode", "full")
            if mode == "full" and "release" in entry:  # FORMATS section 5: ladder and Thresholdout only
                raise ReplayFailure(ENTRIES, "bundle", f"entry {index} carries a release record on {name}, which "
                                    "releases in full")
            ladder_best: Any = None
            if mode in ("ladder", "thresholdout"):
                transcript = transcripts.setdefault((name, entry["task"]), [])
                ladder_best = max((v for v, flag in transcript if flag), default=None)
                self.check_release(index, entry, mode, seal[1]["release"].get("step"), transcript)
            if (seal[1].get("release") or {}).get("mode") == "thresholdout" and isinstance(release, dict):
                earlier = [j for j, e in enumerate(self.entries[:index]) if e["type"] == "bundle"
                           and e["generation"] == "public" and e["model_id"] == entry["model_id"]
                           and e["task"] == entry["task"]]
                if release.get("public_bundle") != (earlier[-1] if earlier else None):
                    raise ReplayFailure(ENTRIES, "bundle", f"entry {index}: public_bundle is not the model's "
                                        "latest public bundle of the task")
                if any(self.entries[earlier[-1]].get(member) != entry.get(member) for member in
                       ("seed", "model_name", "family", "params", "behaviour_version", "code_fingerprint")):
                    raise ReplayFailure(ENTRIES, "bundle", f"entry {index}: public_bundle is another run of the "
                                        "model (seed or configuration)")
                public_data_name = self.entries[earlier[-1]]["evaluation_sha256"]
                public_data = self.blob(public_data_name, earlier[-1], "evaluation_sha256")
                if public_data is not None:  # the estimate is that evaluation's released score (rule 10)
                    public_file = f"blobs/sha256/{public_data_name[:2]}/{public_data_name}"
                    score = _released_score(canonical_document(public_file, public_data, newline=False))
                    if score is None or release.get("public_estimate") != round(score, 6):
                        raise ReplayFailure(ENTRIES, "bundle", f"entry {index}: public_estimate is not the released "
                                            f"score of public bundle {earlier[-1]} ({score})")
            # UTC times in the one textual form compare as strings
            if not seal[1]["created_utc"] <= entry["created_utc"] < seal[1]["expiry_utc"]:
                raise ReplayFailure(ENTRIES, "bundle", f"entry {index} was made while {name} was not current")
            if "spec_version" in entry and entry["spec_version"] != self.spec_in_force(index, entry["created_utc"]):
                # (the entry's copy: its evaluation may be withheld or missing)
                raise ReplayFailure(ENTRIES, "bundle", f"entry {index} was made under a spec not in force then")
            if spec == "MedEval-1 v0.2" and "seed" not in entry:
                raise ReplayFailure(ENTRIES, "bundle", f"entry {index}: a MedEval-1 v0.2 bundle entry states no "
                                    "seed")  # (the entry's copy: its evaluation may be withheld)
            if spec == "MedEval-1 v0.2" and entry["seed"] != 20260727:
                raise ReplayFailure(ENTRIES, "bundle", f"entry {index}: a MedEval-1 v0.2 evaluation's seed is not "
                                    "20260727")
            full = (seal[1].get("release") or {}).get("mode", "full") == "full"
            data = self.blob(entry["evaluation_sha256"], index, "evaluation_sha256")
            if data is not None and mode == "ladder" and isinstance(release, dict):
                # published at retirement: the released value is the ladder's answer for the evaluation's score
                score = _released_score(canonical_document(
                    f"blobs/sha256/{entry['evaluation_sha256'][:2]}/{entry['evaluation_sha256']}", data,
                    newline=False))
                step = seal[1]["release"].get("step")
                expected = None if score is None or (ladder_best is not None and score < ladder_best + step - 1e-9) \
                    else round(round(score / step) * step, 6)
                if release.get("value") != expected:
                    raise ReplayFailure(ENTRIES, "bundle", f"entry {index}: its released value is not the ladder's "
                                        f"answer for its evaluation's score ({expected})")
            if data is not None:
                file = f"blobs/sha256/{entry['evaluation_sha256'][:2]}/{entry['evaluation_sha256']}"
                evaluation = canonical_document(file, data, newline=False)
                if not isinstance(evaluation, dict):
                    raise ReplayFailure(file, "bundle", f"entry {index}: the evaluation is not a JSON object")
                if evaluation.get("spec_version") == "MedEval-1 v0.2" and (
                        type(evaluation.get("seed")) is not int or evaluation.get("seed") != 20260727):
                    raise ReplayFailure(file, "bundle", f"entry {index}: a MedEval-1 v0.2 evaluation's seed is not "
                                        "20260727")
                dimensions = evaluation.get("dimensions")
                optional = ({d for d in ("limited_data", "spec_sensitivity") if dimensions.get(d) is not None}
                            if isinstance(dimensions, dict) else set())
                if optional != FAMILY_DIMENSIONS.get(entry.get("family"), optional):
                    raise ReplayFailure(file, "bundle", f"entry {index}: the evaluation's optional dimensions are "
                                        f"not a {entry.get('family')} model's")
                reference = self.dimensions_reference(entry["model_id"], model_dimensions)
                if reference is not None and isinstance(dimensions, dict) and optional != reference[1]:
                    raise ReplayFailure(file, "bundle", f"entry {index}: the evaluation's optional dimensions are "
                                        f"not those of its model's first bundle (entry {reference[0]})")
                if budgeted and full and evaluation_charge(evaluation) != round(float(entry["leakage_bits"]), 6):
                    raise ReplayFailure(file, "bundle", f"evaluation charge is not entry {index}'s leakage_bits")
                for member in ("task", "n_test", "seed", "spec_version", "split_origin", "code_fingerprint",
                               "device"):
                    if member in entry and evaluation.get(member) != entry[member]:
                        raise ReplayFailure(file, "bundle", f"evaluation {member} disagrees with entry {index}")
                classes = MEDMNIST_CLASSES.get(entry["task"].removesuffix("_224"))
                if type(evaluation.get("n_classes")) is not int or evaluation.get("n_classes") != classes:
                    raise ReplayFailure(file, "bundle", f"evaluation n_classes is not task {entry['task']}'s "
                                        f"class count ({classes})")
                task_name, modality = TASK_TABLE.get(entry["task"].removesuffix("_224"), ("", ""))
                large = entry["task"].endswith("_224")
                described = {"task_name": f"{task_name} @224px" if large else task_name, "modality": modality,
                             "kind": "image224" if large else "image", "domain": "medicine"}
                for member, value in described.items():
                    if evaluation.get(member) != value:
                        raise ReplayFailure(file, "bundle", f"evaluation {member} is not task {entry['task']}'s")
                n_test = evaluation.get("n_test")
                if "n_cases" in entry and isinstance(n_test, int) and entry["n_cases"] != min(n_test, 1200):
                    raise ReplayFailure(ENTRIES, "bundle", f"entry {index}: n_cases is not min(n_test, 1200)")
                public = seal[1].get("membership") == "public"
                source = (seal[1].get("sources") or {}).get(entry["task"]) or {}
                origin = source.get("origin") or "unrecorded"
                expected = name if not public else "official released split" if origin == "official" else \
                    f"{origin} split sha256:{source.get('sha256') or 'unrecorded'}"
                if evaluation.get("split_origin") != expected:
                    raise ReplayFailure(file, "bundle", f"evaluation split_origin is not {name}'s")
                if self.superseded(evaluation.get("spec_version"), index, entry["created_utc"]):
                    raise ReplayFailure(ENTRIES, "bundle", f"entry {index} was made under a superseded spec")
                if evaluation.get("spec_version") != self.spec_in_force(index, entry["created_utc"]):
                    raise ReplayFailure(ENTRIES, "bundle", f"entry {index} was made under a spec not yet in force")
                ran = offset_time(evaluation.get("timestamp"))
                day = timedelta(days=1)
                if ran is None or ran - utc_moment(entry["created_utc"]) > day \
                        or utc_moment(seal[1]["created_utc"]) - ran > day:
                    raise ReplayFailure(file, "bundle", f"evaluation timestamp is not within a day of [the seal, "
                                        f"entry {index}]")
            predictions = self.blob(entry["predictions_sha256"], index, "predictions_sha256")
            if predictions is not None:
                self.check_predictions(entry, predictions)
            reveal = self.reveal_docs.get(entry["generation"])
            if reveal is not None and "labels_hash" in entry:
                cases = [c for c in reveal["cases"] if c["task"] == entry["task"]]
                order = (reveal["order"] or {}).get(entry["task"])
                by_id = {c["case_id"]: c for c in cases}
                ids = order if order is not None else sorted(by_id)
                labels = [by_id[c]["label"] for c in ids]
                if hashlib.sha256(jcs(labels)).hexdigest() != entry["labels_hash"]:
                    raise ReplayFailure(ENTRIES, "bundle", f"entry {index}: labels_hash is not the revealed labels'")

    def check_predictions(self, entry: dict[str, Any], data: bytes) -> None:
        digest = entry["predictions_sha256"]
        file = f"blobs/sha256/{digest[:2]}/{digest}"
        try:
            members = read_stored_predictions(data)
            arrays = {name: (descr, shape) for name, descr, shape, _ in members}
            (marker,) = _unicode_items(*members[0][1:]) if members and members[0][0] == "format" else ("",)
        except (ValueError, KeyError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
            raise ReplayFailure(file, "predictions", f"not a stored-predictions zip ({exc})") from None
        order = ["format", "clean_probs", *(f"perturbed_labels.{p}" for p in PERTURBATIONS), "template_probs",
                 "fraction_probs"]
        required = order[:2 + len(PERTURBATIONS)]
        if marker != PREDICTIONS_FORMAT or [name for name, *_ in members] != [n for n in order if n in arrays] \
                or not set(required) <= set(arrays):
            raise ReplayFailure(file, "predictions", "members, their order or the format marker are not stored "
                                "predictions v1")
        descr, shape = arrays["clean_probs"]
        if descr != "<f4" or len(shape) != 2 or ("n_test" in entry and shape[0] != entry["n_test"]):
            raise ReplayFailure(file, "predictions", "clean_probs is not <f4 (n_test, K)")
        n_test, k = shape
        n_cases = min(n_test, 1200)
        expected: dict[str, tuple[str, tuple[int, ...]]] = {
            f"perturbed_labels.{p}": ("<i2", (3, n_cases)) for p in PERTURBATIONS}
        expected.update({"template_probs": ("<f4", (6, n_cases, k)), "fraction_probs": ("<f4", (3, n_test, k))})
        for name, (want_descr, want_shape) in expected.items():
            if name in arrays and arrays[name] != (want_descr, want_shape):
                raise ReplayFailure(file, "predictions", f"{name} is not {want_descr} {want_shape}")

    # R11 -----------------------------------------------------------------------------------------------
    def passports(self) -> list[int]:
        done = []
        for index, entry in enumerate(self.entries):
            if entry["type"] != "passport":
                continue
            digest = entry["passport_sha256"]
            data = self.blob(digest, index, "passport_sha256")
            if data is None:
                continue
            file = f"blobs/sha256/{digest[:2]}/{digest}"
            doc = canonical_document(file, data, newline=False)
            self.check_passport(file, doc, entry, index)
            done.append(index)
        return done

    @staticmethod
    def passport_shape(file: str, doc: dict[str, Any]) -> None:
        """FORMATS section 12's members and their forms, before any is read: a stranger signs what they like, and a
        ``subject`` that is a string or a ``computed`` that is a list is a failed passport, not a traceback."""
        def fail(what: str) -> None:
            raise ReplayFailure(file, "passport", what)

        for member in ("passport_version", "spec_version", "subject", "computed", "declared", "observed",
                       "issued_utc", "expiry_utc", "expiry_basis", "canonicalisation"):
            if member not in doc:
                fail(f"lacks {member}")
        for member in ("passport_version", "spec_version", "expiry_basis"):
            if not isinstance(doc[member], str):
                fail(f"{member} is not a string")
        for member in ("issued_utc", "expiry_utc"):  # section 12: UTC times of section 1 (compared as text)
            if not isinstance(doc[member], str) or not _real_time(doc[member]):
                fail(f"{member} is not a UTC time of section 1")
        subject, computed = doc["subject"], doc["computed"]
        if not isinstance(subject, dict) or not isinstance(subject.get("model_id"), str):
            fail("subject is not an object naming a model_id")
        if not isinstance(computed, dict):
            fail("computed is not an object")
        for member in ("audit", "cross_site", "evaluations", "heldout", "sources"):
            if member not in computed:
                fail(f"lacks computed.{member}")
        if not isinstance(computed["evaluations"], list) or not all(
                isinstance(evaluation, dict) for evaluation in computed["evaluations"]):
            fail("computed.evaluations is not a list of objects")
        if not isinstance(computed["sources"], list):
            fail("computed.sources is not a list")
        heldout = computed["heldout"]
        if not isinstance(heldout, dict):
            fail("computed.heldout is not an object (a passport of a ledger is anchored to it)")
        bundles = heldout.get("bundles")
        if bundles is not None and not isinstance(bundles, list):
            fail("computed.heldout.bundles is not a list")
        bodies = [("computed.heldout", heldout, HELDOUT_FORMS),
                  ("computed.heldout.checkpoint", heldout.get("checkpoint"), CHECKPOINT_FORMS),
                  ("computed.heldout.proofs", heldout.get("proofs"), PROOFS_FORMS),
                  ("computed.audit", computed["audit"], AUDIT_FORMS),
                  *((f"computed.heldout.bundles[{k}]", ref, BUNDLE_FORMS) for k, ref in enumerate(bundles or []))]
        for where, body, forms in bodies:
            if body is None and not where.startswith("computed.heldout.bundles["):
                continue  # (absent: which must be there is the checks' below)
            if not isinstance(body, dict):
                fail(f"{where} is not an object")
            for member, form in forms.items():
                if member in body and not has_form(body[member], form):
                    fail(f"{where}.{member} is not the ledger's: section 12 gives it one form, {form}")

    def check_passport_proofs(self, file: str, heldout: dict[str, Any], seal_index: int, cited: list[Any],
                              index: int) -> None:
        """FORMATS section 12 and rule 11: the offline proofs (C2SP tlog-proof texts) of the seal entry and of each
        cited bundle, in order, all on one checkpoint note signed by the ledger key, at a size no later than the
        passport's entry, with this ledger's root there; each carries its entry's bytes and leads to that root."""
        proofs = heldout.get("proofs")
        texts = [proofs.get("seal"), *proofs.get("bundles")] if isinstance(proofs, dict) and \
            isinstance(proofs.get("bundles"), list) else None
        if texts is None or len(texts) != len(cited) + 1:
            raise ReplayFailure(file, "passport", "its proofs are not one for the seal and one per cited bundle")
        parsed = []
        for position, (text, at) in enumerate(zip(texts, [seal_index, *cited], strict=True)):
            what = "proofs.seal" if position == 0 else f"proofs.bundles[{position - 1}]"
            if not isinstance(text, str):
                raise ReplayFailure(file, "passport", f"{what} is not text")
            head, _, note_text = text.partition("\n\n")
            lines = head.split("\n")
            if not note_text or lines[0] != "c2sp.org/tlog-proof@v1" or len(lines) < 3 \
                    or not lines[1].startswith("extra ") or PROOF_INDEX.fullmatch(lines[2]) is None:
                raise ReplayFailure(file, "passport", f"{what} is not a tlog-proof with its entry as extra data")
            extra = b64decode_canonical(lines[1][len("extra "):], file, what)
            proven_at = int(lines[2][len("index "):])
            path = [b64decode_canonical(line, file, what) for line in lines[3:]]
            parsed.append((what, at, proven_at, extra, path, note_text))
        if len({item[5] for item in parsed}) != 1:
            raise ReplayFailure(file, "passport", "its proofs rest on different checkpoints")
        note = verify_note(parsed[0][5], file, self.ledger_key, self.origin)
        if note.size > index or self.root_at(note.size) != note.root:
            raise ReplayFailure(file, "passport", f"its proofs' checkpoint is not a tree head of this ledger before "
                                f"entry {index}")
        for what, at, proven_at, extra, path, _ in parsed:
            if proven_at != at or root_from_inclusion(proven_at, note.size, leaf_hash(extra), path) != note.root:
                raise ReplayFailure(file, "passport", f"{what} does not prove entry {at}")

    def check_passport(self, file: str, doc: Any, entry: dict[str, Any], index: int) -> None:
        self.signed_document(file, doc, before=index)
        self.passport_shape(file, doc)
        if self.superseded(doc.get("spec_version"), index, str(doc.get("issued_utc"))):
            raise ReplayFailure(file, "passport", "issued under a spec version already superseded")
        if doc["subject"].get("model_id") != entry["model_id"]:
            raise ReplayFailure(file, "passport", f"subject.model_id is not entry {index}'s")
        for member, value in (("declared", doc.get("declared")), ("observed", doc.get("observed")),
                              ("cross_site", (doc.get("computed") or {}).get("cross_site"))):
            if value is not None:  # FORMATS 12: null (the operator has no such evidence to give)
                raise ReplayFailure(file, "passport", f"{member} is not null")
        heldout = doc["computed"].get("heldout")
        if not isinstance(heldout, dict) or heldout.get("generation") != entry["generation"]:
            raise ReplayFailure(file, "passport", f"computed.heldout.generation is not entry {index}'s")
        sealed = self.seal_entries.get(entry["generation"])
        if sealed is None:
            raise ReplayFailure(file, "passport", f"entry {index} names {entry['generation']}, which no entry seals")
        seal_index, seal = sealed
        if seal_index > index:
            raise ReplayFailure(file, "passport", f"entry {index} comes before {entry['generation']}'s seal")
        expected = {"ledger_id": self.ledger_id, "set_hash": seal["set_hash"], "seal_index": seal_index,
                    "manifest_sha256": seal["manifest_sha256"], "expiry_utc": seal["expiry_utc"],
                    "note_verifier_key": verifier_key(self.ledger_key.name, self.ledger_key.public_key)}
        for member, value in expected.items():
            if not same(heldout.get(member), value):
                raise ReplayFailure(file, "passport", f"computed.heldout.{member} is not the ledger's")
        if str(doc.get("expiry_utc")) > seal["expiry_utc"]:
            raise ReplayFailure(file, "passport", "its expiry is after its generation's")
        if entry["created_utc"] >= seal["expiry_utc"] or self.retired_before(entry["generation"], index):
            raise ReplayFailure(file, "passport", "it was logged when its generation was no longer current")
        effective = self.supersession_time(doc.get("spec_version"), index)
        expiry = min(seal["expiry_utc"], effective) if effective is not None else seal["expiry_utc"]
        if doc.get("expiry_utc") != expiry:
            raise ReplayFailure(file, "passport", f"its expiry_utc is not {expiry}, the one its ledger gives")
        checkpoint = heldout.get("checkpoint") or {}
        note = verify_note(str(checkpoint.get("note")), file, self.ledger_key, self.origin)
        if not same(checkpoint.get("size"), note.size) or \
                checkpoint.get("root_b64") != base64.b64encode(note.root).decode():
            raise ReplayFailure(file, "passport", "checkpoint size or root_b64 is not its note's")
        if note.size > index or self.root_at(note.size) != note.root:
            raise ReplayFailure(file, "passport", "its checkpoint is not a tree head of this ledger before it")
        earliest = self.entries[note.size - 1]["created_utc"] if note.size else ""
        if not earliest <= str(doc.get("issued_utc")) <= entry["created_utc"]:
            raise ReplayFailure(file, "passport", "its issued_utc lies outside the times its ledger allows")
        proofs = heldout.get("proofs") if isinstance(heldout.get("proofs"), dict) else {}
        notes = [str(checkpoint.get("note"))] + [text.partition("\n\n")[2] for text in
                                                 [proofs.get("seal"), *(proofs.get("bundles") or [])]
                                                 if isinstance(text, str)]
        witnessed = [stamp for text in notes for stamp in note_cosignature_times(text)]
        if witnessed and str(doc.get("issued_utc")) < day_before(max(witnessed)):
            raise ReplayFailure(file, "passport", "its issued_utc is more than a day before a cosignature on its "
                                "checkpoint")
        evaluations = doc["computed"].get("evaluations")
        cited = heldout.get("bundles")
        if not isinstance(cited, list) or not isinstance(evaluations, list) or len(cited) != len(evaluations):
            raise ReplayFailure(file, "passport", "computed.heldout.bundles and computed.evaluations differ in length")
        if not cited:
            raise ReplayFailure(file, "passport", "it cites no bundle")
        self.check_passport_proofs(file, heldout, seal_index, [ref.get("index") for ref in cited], index)
        withholding = (seal.get("release") or {}).get("mode", "full") in ("ladder", "thresholdout")
        for k, (ref, evaluation) in enumerate(zip(cited, evaluations, strict=True)):
            at = ref.get("index")
            if not _count(at) or not at < note.size:
                raise ReplayFailure(file, "passport", f"bundles[{k}] lies outside its checkpoint")
            bundle = self.entries[at]
            if bundle["type"] != "bundle" or bundle["model_id"] != entry["model_id"] \
                    or bundle["generation"] != entry["generation"]:
                raise ReplayFailure(file, "passport", f"bundles[{k}] is not a bundle of the model on the generation")
            leaf = self.leaves[at]
            if b64decode_canonical(ref.get("leaf_hash_b64"), file, "leaf_hash_b64") != leaf:
                raise ReplayFailure(file, "passport", f"bundles[{k}].leaf_hash_b64 is not entry {at}'s leaf hash")
            path = [b64decode_canonical(h, file, "inclusion_proof") for h in ref.get("inclusion_proof") or []]
            if root_from_inclusion(at, note.size, leaf, path) != note.root:
                raise ReplayFailure(file, "passport", f"bundles[{k}]: inclusion proof does not lead to the root")
            for member in ("evaluation_sha256", "predictions_sha256", "task"):
                if ref.get(member) != bundle.get(member):
                    raise ReplayFailure(file, "passport", f"bundles[{k}].{member} is not entry {at}'s")
            withheld = {"kind": "withheld-bundle", "task": bundle.get("task"), "release": bundle.get("release"),
                        "evaluation_sha256": bundle.get("evaluation_sha256"),
                        "note": "evaluation withheld until the generation is retired; "
                                "only the released value is public"}
            for spec in ([bundle["spec_version"]] if "spec_version" in bundle else []) + \
                    ([evaluation["spec_version"]] if isinstance(evaluation, dict) and "spec_version" in evaluation
                     else []):
                if spec != doc.get("spec_version"):
                    raise ReplayFailure(file, "passport", f"bundles[{k}] is under {spec}, not the passport's spec")
            if withholding and "release" in bundle and evaluation == withheld:
                continue
            if hashlib.sha256(jcs(evaluation)).hexdigest() != bundle["evaluation_sha256"]:
                raise ReplayFailure(file, "passport", f"evaluations[{k}] is not the evaluation entry {at} logged")
        cited_entries = [self.entries[ref["index"]] for ref in cited]
        said: dict[str, Any] = {}
        tasks = [e["task"] for e in cited_entries]
        if tasks != sorted(set(tasks)):
            raise ReplayFailure(file, "passport", "its cited bundles are not one per task in task order")
        for member in ("model_name", "family", "params", "behaviour_version"):  # the first cited entry's
            if member != "params" and len({jcs(e.get(member)) for e in cited_entries}) > 1:
                raise ReplayFailure(file, "passport", f"its cited bundles name the model differently ({member})")
            said[member] = cited_entries[0].get(member) if cited_entries else None
        named = [e["code_fingerprint"] for e in cited_entries if "code_fingerprint" in e]
        if not all(isinstance(value, str) for value in named):
            raise ReplayFailure(file, "passport", "a cited bundle's code_fingerprint is not text")
        prints = sorted(set(named))
        said.update(code_fingerprints=prints, code_fingerprint=prints[-1] if prints else None)
        for member, value in said.items():
            if jcs(doc["subject"].get(member)) != jcs(value):
                raise ReplayFailure(file, "passport", f"subject.{member} is not what its cited bundles say")
        latest: dict[str, int] = {}
        for at, bundle in enumerate(self.entries[:note.size]):
            if bundle["type"] == "bundle" and bundle["model_id"] == entry["model_id"] \
                    and bundle["generation"] == entry["generation"]:
                latest[bundle["task"]] = at
        if sorted(latest.values()) != sorted(ref.get("index") for ref in cited):
            raise ReplayFailure(file, "passport", "it does not cite the model's latest bundle of every task")
        if any(self.over_budget(at) for at in latest.values()):
            raise ReplayFailure(file, "passport", "it cites a bundle admitted past the budget")
        audit = doc["computed"].get("audit") or {}
        then = audit.get("ledger_entries")
        if not _count(then) or then != note.size or audit.get("ledger_intact") is not True \
                or audit.get("ledger_head") != self.root_at(then).hex():
            raise ReplayFailure(file, "passport", "computed.audit is not this ledger's head at its checkpoint")
        bundles = sum(1 for e in self.entries[:then] if e["type"] == "bundle")
        if not same(audit.get("bundles"), bundles) or not same(audit.get("rederived"), bundles):
            raise ReplayFailure(file, "passport", "computed.audit does not claim every bundle below it re-derived")
        for member, text in (("declared_note", DECLARED_NOTE), ("observed_note", OBSERVED_NOTE),
                             ("expiry_basis", self.expiry_basis(doc, index, expiry))):
            if doc.get(member) != text:
                raise ReplayFailure(file, "passport", f"its {member} is not the text section 12 gives")

    # R12 ------------------------------------------------------------------------------------------------
    def manifest_claims(self) -> None:
        m = self.manifest
        present = sorted(self.blob_files)
        referenced = sorted(set(self.referenced) - set(self.blob_files))
        claims = {
            "ledger_id": self.ledger_id,
            "origin": self.origin,
            "size": len(self.lines),
            "root": base64.b64encode(self.root).decode(),
            "note_verifier_key": verifier_key(self.ledger_key.name, self.ledger_key.public_key),
            "checkpoints": sorted(self.notes),
            "blobs": present,
            "missing_blobs": referenced,
            "keys": sorted(self.key_files_found),
            "seals": self.seal_listing(),
            "entries": {"file": ENTRIES, "count": len(self.lines),
                        "sha256": hashlib.sha256(self.read(ENTRIES)).hexdigest()},
        }
        for member, value in claims.items():
            if m[member] != value:
                raise ReplayFailure(MANIFEST, "export", f"{member} does not describe the export")

    # R13 ------------------------------------------------------------------------------------------------
    def entry_times(self) -> None:
        latest = ""
        for index, entry in enumerate(self.entries):
            stamp = entry["created_utc"]
            if stamp < latest:
                raise ReplayFailure(ENTRIES, "time", f"entry {index} is dated {stamp}, before an earlier entry's "
                                    f"{latest}: the ledger's time ran backwards")
            latest = stamp


def replay_export(folder: Path, ledger_id: str) -> Summary:
    """Replay the export in ``folder`` as the ledger ``ledger_id`` (the id the auditor pins); raise
    :class:`ReplayFailure` at the first broken rule."""
    r = _Replay(folder, ledger_id)
    r.manifest_file()     # R1
    r.entries_file()      # R2, R3
    r.checkpoints()       # R4, R5
    r.key_files()         # R6
    r.blobs()             # R7
    r.seals()             # R8
    r.reveals()           # R9
    r.supersessions()     # R10 (section 5)
    r.bundles()           # R10
    passports = r.passports()  # R11
    r.manifest_claims()   # R12
    r.entry_times()       # R13
    types: dict[str, int] = {}
    for entry in r.entries:
        types[entry["type"]] = types.get(entry["type"], 0) + 1
    return Summary(ledger_id=r.ledger_id, size=len(r.lines), root=r.root, checkpoints=sorted(r.notes),
                   entry_types=types, blobs_checked=len(r.blob_files), seals=sorted(r.seal_docs),
                   reveals=sorted(r.reveal_docs), passports=passports, missing_blobs=sorted(r.missing))


def main(argv: list[str] | None = None) -> int:
    """``python tests/independent/replay.py EXPORT_DIR LEDGER_ID``: exit 0 and a one-line summary when the export
    replays, exit 1 and the first broken rule when it does not, exit 2 for a wrong command line."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python tests/independent/replay.py EXPORT_DIR LEDGER_ID", file=sys.stderr)
        return 2
    try:
        summary = replay_export(Path(args[0]), args[1])
    except ReplayFailure as failure:
        print(f"replay FAILED: {failure}", file=sys.stderr)
        return 1
    print(f"replay OK: ledger {summary.ledger_id}, {summary.size} entries, {len(summary.checkpoints)} checkpoints, "
          f"{summary.blobs_checked} blobs, {len(summary.passports)} passports")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
