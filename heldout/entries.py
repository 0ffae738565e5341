"""heldout's ledger entries as typed records, registered with the generic log (``ledger.entries``).

The log itself knows only its own entry types (genesis, key, note). Every domain entry (a pool commitment,
a seal's intent, a seal, a bundle, a retirement, a reveal, a passport, a spec supersession) is defined here: a
frozen record whose constructor checks its members with the same checks the log applies on append and on
replay (registered below, from the records' ``MEMBERS``), so a record that exists is a valid entry. Readers
turn a decoded entry into its record with :func:`entry_record` and match on the class, instead of probing
dictionaries for ``type`` and member names; writers build the record and append ``record.to_entry()``.

Members beyond the required ones (a seal's task counts and release policy, a bundle's leakage charge) are
kept in ``extra``, as the log keeps them: later versions may add members without breaking older readers.
Importing :mod:`heldout` registers the types, so every command and the audit see them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, ClassVar

from harness.provenance import n_classes as task_classes
from harness.provenance import task_description
from keys import HeldoutError
from ledger.entries import (
    Check,
    check_hex64,
    check_per_task,
    check_positive_int,
    check_text,
    check_utc,
    register_entry_type,
    validate_entry,
)
from ledger.errors import EntryRejected
from seals import CLOCK_TOLERANCE, format_utc, parse_utc
from seals.timeutil import parse_offset_time

_BASE_MEMBERS = frozenset({"type", "v"})


# The forms of the optional members (FORMATS section 3's table). A member a verifier reads must have one form
# for all of them: Python takes ``false`` for 0 and ``1.0`` for 1 where JavaScript or a stricter reader does
# not, so a value of another JSON type would get two verdicts (one verifier charges ``"leakage_bits": false``
# as 0 bits, another as missing). Checked on append and on replay, as the required members are.
def _check_bits(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return "a finite number >= 0 (bits)"
    return None


def _check_bits_or_null(value: Any) -> str | None:
    return None if value is None else _check_bits(value)


def _check_seed(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
        return "an integer in [0, 2^53)"
    return None


def _check_words(value: Any) -> str | None:  # a description, bounded by the entry's own size (64 KiB)
    return None if isinstance(value, str) and value else "a non-empty string"


def _check_object(value: Any) -> str | None:
    return None if isinstance(value, dict) else "a JSON object"


def _check_membership(value: Any) -> str | None:
    return None if value in ("sealed", "public") and isinstance(value, str) else '"sealed" or "public"'


@dataclass(frozen=True, kw_only=True)
class EntryRecord:
    """One domain entry. ``index`` is where it is in the log (None for one not yet appended); ``v`` its
    version; ``extra`` its members beyond the required ones."""

    TYPE: ClassVar[str]
    MEMBERS: ClassVar[Mapping[str, Check]]
    OPTIONAL: ClassVar[Mapping[str, Check]] = {}

    created_utc: str
    index: int | None = None
    v: int = 1
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The log's own validator (the checks registered below), so a record is valid exactly when its entry is.
        clash = sorted(set(self.extra) & (set(self.MEMBERS) | _BASE_MEMBERS))
        try:
            if clash:
                raise EntryRejected(f"{self.TYPE} entry: {clash[0]!r} is a required member, not an extra one",
                                    field=clash[0])
            validate_entry(self.to_entry())
        except EntryRejected as exc:
            if self.index is None:
                raise
            raise EntryRejected(exc.message, **{**exc.evidence, "index": self.index}) from None

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any], *, index: int | None = None) -> EntryRecord:
        """The record of a decoded entry of this type (raises EntryRejected naming the member at fault)."""
        if entry.get("type") != cls.TYPE:
            raise EntryRejected(f"not a {cls.TYPE} entry", field="type", found=str(entry.get("type"))[:60],
                                    **({} if index is None else {"index": index}))
        missing = [member for member in cls.MEMBERS if member not in entry]
        if missing:
            raise EntryRejected(f"{cls.TYPE} entry lacks the member {missing[0]!r}", field=missing[0],
                                    **({} if index is None else {"index": index}))
        required = {member: entry[member] for member in cls.MEMBERS}
        extra = {k: v for k, v in entry.items() if k not in cls.MEMBERS and k not in _BASE_MEMBERS}
        return cls(index=index, v=entry.get("v"), extra=extra, **required)  # type: ignore[arg-type]

    def to_entry(self) -> dict[str, Any]:
        """The entry as the log stores it (before canonicalisation)."""
        return {"type": self.TYPE, "v": self.v, **{m: getattr(self, m) for m in self.MEMBERS}, **self.extra}

    def get(self, member: str, default: Any = None) -> Any:
        """A member, required or extra, as the entry holds it (``default`` when absent)."""
        if member in self.MEMBERS:
            return getattr(self, member)
        return self.extra.get(member, default)

    def __contains__(self, member: object) -> bool:
        return member in self.MEMBERS or member in self.extra

    def __getitem__(self, member: str) -> Any:
        if member not in self:
            raise KeyError(member)
        return self.get(member)

    @property
    def created(self) -> datetime:
        return parse_utc(self.created_utc)


@dataclass(frozen=True, kw_only=True)
class PoolEntry(EntryRecord):
    """A task's pool committed before a draw: the RFC 6962 root of the salted commitments of its unused cases."""

    TYPE = "pool"
    MEMBERS: ClassVar[Mapping[str, Check]] = {
        "task": check_text, "pool_root": check_hex64, "pool_size": check_positive_int, "created_utc": check_utc,
    }

    task: str
    pool_root: str
    pool_size: int


@dataclass(frozen=True, kw_only=True)
class IntentEntry(EntryRecord):
    """A seal's intent, logged before its draw: the generation, its sizes per task and the pools drawn from."""

    TYPE = "intent"
    MEMBERS: ClassVar[Mapping[str, Check]] = {
        "generation": check_text, "tasks": check_per_task, "pools": check_per_task, "expiry_utc": check_utc,
        "created_utc": check_utc,
    }

    OPTIONAL: ClassVar[Mapping[str, Check]] = {"release": _check_object}

    generation: str
    tasks: Mapping[str, int]
    pools: Mapping[str, int]
    expiry_utc: str


@dataclass(frozen=True, kw_only=True)
class SealEntry(EntryRecord):
    """A generation sealed: its manifest, set hash and expiry (task counts, release policy, budget in extra)."""

    TYPE = "seal"
    MEMBERS: ClassVar[Mapping[str, Check]] = {
        "generation": check_text, "manifest_sha256": check_hex64, "set_hash": check_hex64, "expiry_utc": check_utc,
        "created_utc": check_utc,
    }
    OPTIONAL: ClassVar[Mapping[str, Check]] = {
        "membership": _check_membership, "tasks": check_per_task, "n_cases": check_positive_int,
        "budget_bits": _check_bits_or_null, "statement_bits": _check_bits, "release": _check_object,
        "sources": _check_object, "guarantee": _check_object,
    }

    generation: str
    manifest_sha256: str
    set_hash: str
    expiry_utc: str

    @property
    def expiry(self) -> datetime:
        return parse_utc(self.expiry_utc)


def optional_dimensions(evaluation: Mapping[str, Any]) -> frozenset[str] | None:
    """The optional dimensions an evaluation object has (non-null under ``dimensions``: scored, or present and
    not scored); None when it has no ``dimensions`` object."""
    dimensions = evaluation.get("dimensions")
    if not isinstance(dimensions, Mapping):
        return None
    return frozenset(name for name in BundleEntry.OPTIONAL_DIMENSIONS if dimensions.get(name) is not None)


@dataclass(frozen=True, kw_only=True)
class BundleEntry(EntryRecord):
    """A model's evaluation on a generation's task: its evaluation and stored predictions blobs."""

    TYPE = "bundle"
    MEMBERS: ClassVar[Mapping[str, Check]] = {
        "generation": check_text, "model_id": check_text, "task": check_text, "evaluation_sha256": check_hex64,
        "predictions_sha256": check_hex64, "created_utc": check_utc,
    }
    OPTIONAL: ClassVar[Mapping[str, Check]] = {
        **dict.fromkeys(("model_name", "family", "params", "behaviour_version", "split_origin", "device",
                         "code_fingerprint"), _check_words),
        "spec_version": check_text,
        "seed": _check_seed, "n_test": check_positive_int, "n_cases": check_positive_int,
        "labels_hash": check_hex64, "leakage_bits": _check_bits, "release": _check_object,
    }

    generation: str
    model_id: str
    task: str
    evaluation_sha256: str
    predictions_sha256: str

    #: Members the entry shares with its evaluation blob (FORMATS section 15, rule 10): where the entry has one,
    #: the evaluation's is equal. (The entry's copy is what rules read without the blob, a withheld one
    #: included: the witnessed-time check, a passport's spec; a copy that disagrees would let one blob be
    #: judged by the other's word.)
    EVALUATION_MEMBERS: ClassVar[tuple[str, ...]] = ("task", "seed", "spec_version", "code_fingerprint", "n_test",
                                                     "split_origin", "device")

    #: What makes two bundles of one model id the same run of it, as far as their entries say: its description,
    #: its code and its seed (the seed chooses a trained model's weights). A Thresholdout bundle's public
    #: estimate must come from such a run: another seed of the model is another model.
    RUN_MEMBERS: ClassVar[tuple[str, ...]] = ("seed", "model_name", "family", "params", "behaviour_version",
                                              "code_fingerprint")

    #: The spec versions that fix the evaluation seed, and that seed (MedEval-1 v0.2's amendment A1, in
    #: docs/MEDEVAL-1.2.md: "one integer per evaluation cycle", never chosen per evaluation).
    SPEC_SEEDS: ClassVar[Mapping[str, int]] = {"MedEval-1 v0.2": 20260727}
    #: The optional dimensions (MEDEVAL-1): ``limited_data`` is scored exactly for a model with a training
    #: step, ``spec_sensitivity`` exactly for one that takes a text prompt; null otherwise (not applicable).
    OPTIONAL_DIMENSIONS: ClassVar[tuple[str, ...]] = ("limited_data", "spec_sensitivity")
    #: The model families of the reference harness and the optional dimensions their evaluations have
    #: (``harness.models``: ``trains``, ``uses_prompts``). Another family is bound by its own first bundle only
    #: (:func:`optional_dimensions`: a model has the same ones in every evaluation).
    FAMILY_DIMENSIONS: ClassVar[Mapping[str, frozenset[str]]] = {
        "foundation": frozenset({"spec_sensitivity"}), "trained_baseline": frozenset({"limited_data"}),
        "linear_probe": frozenset({"limited_data"}), "baseline": frozenset({"limited_data"}),
    }

    def run_difference(self, other: BundleEntry | Mapping[str, Any]) -> tuple[str, Any, Any] | None:
        """The first of :data:`RUN_MEMBERS` where ``other`` (another bundle entry) differs, as (member, this
        entry's, the other's); None for the same run."""
        for member in self.RUN_MEMBERS:
            if self.get(member) != other.get(member):
                return member, self.get(member), other.get(member)
        return None

    def evaluation_disagreement(self, evaluation: Mapping[str, Any], *, cases_for: Callable[[int], int] | None = None,
                                sealed: datetime | None = None) -> EvaluationDisagreement | None:
        """The first member where ``evaluation`` (the blob this entry logs) is not what the entry and the task
        say; None when it agrees. Besides the shared members: the evaluation's ``n_classes`` is the MedEval-1
        task table's for the task (predictions padded with classes the task does not have re-derive alike, and
        lower chance, 1/K, under every chance-corrected score), and so are its ``task_name``, ``modality``,
        ``kind`` and ``domain`` (a page shows them: another modality or resolution is a false description of the
        evidence); with ``cases_for`` (the spec's ``n_cases_for``), the entry's ``n_cases`` is what the
        evaluation's ``n_test`` gives; its ``timestamp`` (when it was run) is no later than the entry's
        ``created_utc`` and, with ``sealed`` (its generation's seal time), no earlier than the seal: an evaluation
        on cases drawn at the seal cannot precede it (each to within the clock tolerance: the harness may run on
        another host)."""
        for member in self.EVALUATION_MEMBERS:
            if member in self and self.get(member) != evaluation.get(member):
                return EvaluationDisagreement(member, self.get(member), evaluation.get(member),
                                              f"{member} of the evaluation is not the entry's")
        try:
            classes: Any = task_classes(self.task)
            described = task_description(self.task)
        except HeldoutError:
            return EvaluationDisagreement("task", "a MedEval-1 task", self.task, "its task is not a MedEval-1 task")
        found = evaluation.get("n_classes")
        if found != classes or type(found) is not int:
            said = f"counts {found} classes" if type(found) is int else f"states no class count (n_classes {found!r})"
            return EvaluationDisagreement("n_classes", classes, found, (
                f"its evaluation {said}, and task {self.task} has {classes} (MedEval-1's task table): classes the "
                "task does not have lower chance under every chance-corrected score"))
        for member, expected in described.items():  # what it says of its task is the task table's
            if evaluation.get(member) != expected:
                return EvaluationDisagreement(member, expected, evaluation.get(member), (
                    f"{member} of the evaluation is not its task's ({self.task} in MedEval-1's task table)"))
        dated = self._evaluation_time_disagreement(evaluation.get("timestamp"), sealed)
        if dated is not None:
            return dated
        version, seed = evaluation.get("spec_version"), evaluation.get("seed")
        fixed = self.SPEC_SEEDS.get(version) if isinstance(version, str) else None
        if fixed is not None and (type(seed) is not int or seed != fixed):
            return EvaluationDisagreement("seed", fixed, seed, (
                f"its evaluation's seed is {seed!r}: under {version} every evaluation uses the one seed {fixed} (a "
                "seed chosen per evaluation could be ground for a better interval)"))
        expected_dimensions = self.FAMILY_DIMENSIONS.get(str(self.get("family")))
        found_dimensions = optional_dimensions(evaluation)
        if expected_dimensions is not None and found_dimensions != expected_dimensions:
            return EvaluationDisagreement("dimensions", sorted(expected_dimensions), sorted(found_dimensions or ()), (
                f"its evaluation scores {' and '.join(sorted(found_dimensions or ())) or 'neither'} of "
                f"{' and '.join(self.OPTIONAL_DIMENSIONS)}, and a {self.get('family')} model has "
                f"{' and '.join(sorted(expected_dimensions))} (a dimension left out raises the composite index)"))
        n_test = evaluation.get("n_test")
        if cases_for is not None and "n_cases" in self and type(n_test) is int and n_test >= 0 \
                and self.get("n_cases") != cases_for(n_test):  # the robustness subset's size follows from n_test
            return EvaluationDisagreement("n_cases", cases_for(n_test), self.get("n_cases"), (
                "its n_cases is not what its evaluation's n_test gives (the robustness subset's size)"))
        return None

    def _evaluation_time_disagreement(self, stamp: Any, sealed: datetime | None) -> EvaluationDisagreement | None:
        try:
            ran = parse_offset_time(stamp, what="the evaluation's timestamp")
        except HeldoutError:
            ran = None
        if ran is None:
            return EvaluationDisagreement("timestamp", "an ISO 8601 time with its offset", stamp,
                                          "its evaluation's timestamp is not a time in the form of FORMATS section 1")
        if ran - self.created > CLOCK_TOLERANCE:  # (differences: no date overflows)
            return EvaluationDisagreement("timestamp", f"<= {self.created_utc}", stamp, (
                f"its evaluation is dated {stamp}, more than the clock tolerance (a day) after the entry that logs "
                f"it ({self.created_utc})"))
        if sealed is not None and sealed - ran > CLOCK_TOLERANCE:
            return EvaluationDisagreement("timestamp", f">= {format_utc(sealed)}", stamp, (
                f"its evaluation is dated {stamp}, more than the clock tolerance (a day) before its generation was "
                f"sealed ({format_utc(sealed)}): the cases it was run on were drawn at the seal"))
        return None


@dataclass(frozen=True)
class EvaluationDisagreement:
    """Where a bundle entry's evaluation is not what the entry and its task say: the member, what the entry or
    the task table gives, what the evaluation (or for ``n_cases``, the entry) has, and the sentence saying so."""

    member: str
    expected: Any
    found: Any
    reason: str


@dataclass(frozen=True, kw_only=True)
class RetireEntry(EntryRecord):
    TYPE = "retire"
    MEMBERS: ClassVar[Mapping[str, Check]] = {
        "generation": check_text, "reason": check_text, "created_utc": check_utc,
    }

    generation: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class RevealEntry(EntryRecord):
    TYPE = "reveal"
    MEMBERS: ClassVar[Mapping[str, Check]] = {
        "generation": check_text, "reveal_sha256": check_hex64, "created_utc": check_utc,
    }
    OPTIONAL: ClassVar[Mapping[str, Check]] = {"n_cases": check_positive_int, "image_blobs": _check_object}

    generation: str
    reveal_sha256: str


@dataclass(frozen=True, kw_only=True)
class PassportEntry(EntryRecord):
    TYPE = "passport"
    MEMBERS: ClassVar[Mapping[str, Check]] = {
        "model_id": check_text, "generation": check_text, "passport_sha256": check_hex64, "created_utc": check_utc,
    }

    model_id: str
    generation: str
    passport_sha256: str


@dataclass(frozen=True, kw_only=True)
class SpecEntry(EntryRecord):
    """A spec version superseded from ``effective_utc`` on: passports on it lapse then (heldout/specs.py)."""

    TYPE = "spec"
    MEMBERS: ClassVar[Mapping[str, Check]] = {
        "spec_version": check_text, "superseded_by": check_text, "effective_utc": check_utc,
        "created_utc": check_utc,
    }

    spec_version: str
    superseded_by: str
    effective_utc: str

    @property
    def effective(self) -> datetime:
        return parse_utc(self.effective_utc)


RECORD_TYPES: dict[str, type[EntryRecord]] = {
    cls.TYPE: cls for cls in (PoolEntry, IntentEntry, SealEntry, BundleEntry, RetireEntry, RevealEntry,
                              PassportEntry, SpecEntry)}


def entry_record(index: int | None, entry: Mapping[str, Any]) -> EntryRecord | None:
    """The typed record of a decoded entry; None for the log's generic entries (genesis, key, note). Raises
    EntryRejected for an entry of a domain type that is not a valid one (a decoded entry always is)."""
    cls = RECORD_TYPES.get(str(entry.get("type")))
    return None if cls is None else cls.from_entry(entry, index=index)


def records(pairs: Iterable[tuple[int, Mapping[str, Any]]], *types: type[EntryRecord]) -> list[Any]:
    """The records of ``(index, entry)`` pairs that are of ``types`` (every domain type when none is given),
    in log order."""
    wanted = {cls.TYPE for cls in types} if types else set(RECORD_TYPES)
    return [RECORD_TYPES[str(entry["type"])].from_entry(entry, index=index)
            for index, entry in pairs if entry.get("type") in wanted]


def _check_registration() -> None:
    for cls in RECORD_TYPES.values():
        declared = {f.name for f in fields(cls)} - {"index", "v", "extra"}
        if declared != set(cls.MEMBERS):  # pragma: no cover (a definition error, caught at import)
            raise TypeError(f"{cls.__name__}: fields {sorted(declared)} differ from MEMBERS {sorted(cls.MEMBERS)}")
        register_entry_type(cls.TYPE, cls.MEMBERS, cls.OPTIONAL)


_check_registration()
