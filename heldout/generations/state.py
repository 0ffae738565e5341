"""Generation states, derived from the ledger every time (never kept in a separate file).

A generation exists once a ``seal`` entry names it. At a reference time ``now`` it is:

* ``retired``: a ``retire`` entry names it (whatever ``now`` is: the ledger as it stands is the truth), or a
  ``reveal`` entry does before any retire (its labels are public from then on; the reveal is an anomaly);
* ``sealed``: ``now`` is before its seal time (committed, not yet in force; only reachable with an injected
  clock that looks back);
* ``expired``: ``now`` is at or after its expiry;
* ``current``: otherwise, i.e. from its seal time until its expiry, unless retired.

Budget use is the seal's ``statement_bits`` (the smallest class sizes its manifest states) plus the sum of the
``leakage_bits`` each ``bundle`` entry on the generation carries (the evaluation command writes the charge of
its release mode there; the audit recomputes it). A bundle entry without ``leakage_bits`` is charged from its
evaluation blob when a blob store is given, and is otherwise reported as incomplete (exit 5).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from fractions import Fraction
from functools import cached_property
from typing import Any, Protocol

from harness.metrics.spec import split_origin_for
from heldout.entries import BundleEntry, EntryRecord, RetireEntry, RevealEntry, SealEntry, entry_record
from heldout.generations.budget import TOLERANCE as BUDGET_TOLERANCE
from heldout.generations.budget import charge_bits, implied_eps
from heldout.generations.release import WITHHOLDING_MODES, release_mode_of
from keys import ExpiredError, HeldoutError, IncompleteError, LapsedError, VerificationError
from ledger.errors import EntryRejected, SourceUnavailable
from ledger.log import LogReader
from seals import format_utc, parse_json_object

STATES = ("sealed", "current", "expired", "retired")
_GENERATION_TYPES = frozenset({SealEntry.TYPE, RetireEntry.TYPE, RevealEntry.TYPE, BundleEntry.TYPE})
RETIRE_REASONS = ("expired", "leaked", "superseded", "budget")
#: The retirement a reveal of a generation that was not retired implies (see :func:`load_generations`).
REVEALED_EARLY = "revealed before it was retired"


class BlobSource(Protocol):
    def get(self, sha256_hex: str) -> bytes: ...


def utc(now: datetime) -> datetime:
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)


@dataclass(frozen=True)
class BundleRecord:
    index: int
    model_id: str
    task: str
    created: datetime
    leakage_bits: float
    #: ladder / Thresholdout: whether its answer released something label-dependent (an improvement, an
    #: over-threshold answer); None on full-release generations
    label_dependent: bool | None = None

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "model_id": self.model_id, "task": self.task,
                "created_utc": format_utc(self.created), "leakage_bits": self.leakage_bits,
                "label_dependent": self.label_dependent}


@dataclass(frozen=True)
class GenerationState:
    """One generation as the ledger describes it, judged at ``now``."""

    name: str
    seal_index: int
    manifest_sha256: str
    set_hash: str
    created: datetime
    expiry: datetime
    tasks: Mapping[str, int]
    membership: str
    budget_bits: float | None
    release_mode: str
    ladder_step: float | None
    now: datetime
    release: Mapping[str, Any] = field(default_factory=dict)
    sources: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    statement_bits: float = 0.0
    guarantee: Mapping[str, Any] = field(default_factory=dict)
    retire_index: int | None = None
    retire_reason: str | None = None
    retired_at: datetime | None = None
    reveal_index: int | None = None
    reveal_sha256: str | None = None
    bundles: tuple[BundleRecord, ...] = field(default_factory=tuple)

    @property
    def n_cases(self) -> int:
        return sum(self.tasks.values())

    @property
    def state(self) -> str:
        return self.state_at(self.now)

    def state_at(self, now: datetime) -> str:
        now = utc(now)
        if self.retire_index is not None:
            return "retired"
        if now < self.created:
            return "sealed"
        if now >= self.expiry:
            return "expired"
        return "current"

    @property
    def revealed(self) -> bool:
        return self.reveal_index is not None

    @property
    def bits_used(self) -> float:
        """The seal's own statement (each task's smallest class) plus every bundle's charge."""
        return round(math.fsum([self.statement_bits, *(b.leakage_bits for b in self.bundles)]), 6)

    @cached_property
    def over_budget(self) -> dict[int, tuple[float, float]]:
        """The bundles admitted past the budget, by entry index: ``(used before it, its charge)`` for each bundle
        that :func:`~heldout.generations.budget.check_budget` would have refused with the bundles before it (the
        seal's statement plus their charges). The rule is enforced when a bundle is written; this is the same
        rule on replay, for a ledger whose operator skipped it (every charge is public)."""
        if self.budget_bits is None:
            return {}
        out: dict[int, tuple[float, float]] = {}
        # The exact running sum (floats are dyadic rationals): float() of it is math.fsum of the charges so far,
        # without summing the whole prefix again for every bundle (quadratic in the bundles of a generation).
        exact = Fraction(self.statement_bits)
        for bundle in self.bundles:
            used = round(float(exact), 6)
            if used + bundle.leakage_bits > self.budget_bits + BUDGET_TOLERANCE:
                out[bundle.index] = (used, bundle.leakage_bits)
            exact += Fraction(bundle.leakage_bits)
        return out

    def budget_error(self, index: int) -> VerificationError | None:
        """The finding for bundle ``index`` when it was admitted past the budget (see :meth:`over_budget`)."""
        over = self.over_budget.get(index)
        if over is None or self.budget_bits is None:
            return None
        used, charge = over
        return VerificationError(
            f"bundle entry {index} was admitted past the leakage budget of {self.name}: it charges {charge:.6f} "
            f"bits with {self.budget_bits - used:.6f} of {self.budget_bits:.6f} left", index=index,
            field="leakage_bits", expected=f"<= {round(self.budget_bits - used, 6)} bits", found=charge,
            generation=self.name, used_bits=used, budget_bits=self.budget_bits)

    @property
    def release_step(self) -> float | None:
        """The rounding step of ladder and Thresholdout releases (held in ``ladder_step`` for older callers)."""
        return self.ladder_step

    @property
    def withholding(self) -> bool:
        """Ladder and Thresholdout generations keep bundle blobs private until they are retired."""
        return self.release_mode in WITHHOLDING_MODES and self.retire_index is None

    def split_origin(self, task: str) -> str:
        """The spec's split_origin of a bundle on this generation and task (one rule: split_origin_for)."""
        source = self.sources.get(task) or {}
        return split_origin_for(self.name, public=self.membership == "public", origin=source.get("origin"),
                                sha256=source.get("sha256"))

    def current_guarantee(self) -> list[dict[str, Any]]:
        """Each released family's eps at the current spend, over the statistics released so far (at least
        one evaluation's worth), on the scale it is published on."""
        families = self.guarantee.get("families") if isinstance(self.guarantee, Mapping) else None
        if not isinstance(families, list) or self.budget_bits is None:
            return []
        delta = float(self.guarantee.get("delta", 0.05))
        out = []
        for family in families:
            per = int(family.get("per_evaluation", 1))
            statistics = max(1, len(self.bundles)) * per
            n = int(family.get("n", 1))
            eps = None if family.get("eps") is None else round(
                float(family.get("scale", 1.0)) * implied_eps(self.bits_used, n, statistics, delta), 6)
            out.append({"family": family.get("family"), "n": n, "statistics": statistics, "eps": eps})
        return out

    @property
    def bits_left(self) -> float | None:
        return None if self.budget_bits is None else round(self.budget_bits - self.bits_used, 6)

    @property
    def due_for_retirement(self) -> bool:
        """Expired and not yet retired, or its budget cannot take another bundle like the largest so far."""
        if self.retire_index is not None:
            return False
        if self.state == "expired":
            return True
        left = self.bits_left
        if left is None:
            return False
        largest = max((b.leakage_bits for b in self.bundles), default=0.0)
        return left <= 0 or left < largest

    def require_current(self, now: datetime | None = None) -> None:
        """Raise unless the generation is current at ``now``: retired is exit 4 (LapsedError), expired exit
        3 (ExpiredError), not yet in force exit 3 as well (it cannot be used before its seal time)."""
        moment = utc(now) if now is not None else self.now
        state = self.state_at(moment)
        if state == "retired":
            raise LapsedError(f"generation {self.name} was retired ({self.retire_reason}) at entry "
                              f"{self.retire_index}", generation=self.name, index=self.retire_index,
                              found="retired")
        if state == "expired":
            raise ExpiredError(f"generation {self.name} expired at {format_utc(self.expiry)}",
                               generation=self.name, expected=f"before {format_utc(self.expiry)}",
                               found=format_utc(moment))
        if state == "sealed":
            raise ExpiredError(f"generation {self.name} is in force only from {format_utc(self.created)}",
                               generation=self.name, expected=f"from {format_utc(self.created)}",
                               found=format_utc(moment))

    def bundles_by_task(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for b in self.bundles:
            counts[b.task] = counts.get(b.task, 0) + 1
        return counts

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.name,
            "state": self.state,
            "membership": self.membership,
            "seal_index": self.seal_index,
            "sealed_utc": format_utc(self.created),
            "expiry_utc": format_utc(self.expiry),
            "tasks": dict(self.tasks),
            "n_cases": self.n_cases,
            "set_hash": self.set_hash,
            "manifest_sha256": self.manifest_sha256,
            "release": {"mode": self.release_mode, "step": self.ladder_step,
                        **{k: v for k, v in self.release.items() if k in ("threshold", "sigma", "noise_sha256")},
                        "withholding": self.withholding,
                        # Dwork et al.'s budget B counts these (over-threshold answers); Blum & Hardt's ladder
                        # its improvements: the answers that carry information about the labels
                        "label_dependent_answers": sum(1 for b in self.bundles if b.label_dependent)},
            "sources": {task: dict(source) for task, source in self.sources.items()},
            "budget": {"bits": self.budget_bits, "used": self.bits_used, "left": self.bits_left,
                       "statement_bits": self.statement_bits, "guarantee_now": self.current_guarantee()},
            "bundles": len(self.bundles),
            "bundles_by_task": self.bundles_by_task(),
            "retired": None if self.retire_index is None else {
                "index": self.retire_index, "reason": self.retire_reason,
                "retired_utc": format_utc(self.retired_at) if self.retired_at else None},
            "revealed": None if self.reveal_index is None else {
                "index": self.reveal_index, "reveal_sha256": self.reveal_sha256},
            "due_for_retirement": self.due_for_retirement,
        }


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _seal_state(index: int, entry: SealEntry, now: datetime) -> GenerationState:
    tasks = entry.get("tasks")
    if not isinstance(tasks, dict) or not tasks or not all(
            isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in tasks.values()):
        raise VerificationError(f"seal entry {index} lacks its task counts", index=index, field="tasks")
    raw_release = entry.get("release")
    release: Mapping[str, Any] = raw_release if isinstance(raw_release, dict) else {}
    step = _number(release.get("step"))
    budget = entry.get("budget_bits")
    if budget is not None and _number(budget) is None:
        raise VerificationError(f"seal entry {index} has a malformed budget_bits", index=index,
                                field="budget_bits")
    sources = entry.get("sources")
    guarantee = entry.get("guarantee")
    statement = _number(entry.get("statement_bits"))
    return GenerationState(
        release=dict(release), sources=dict(sources) if isinstance(sources, dict) else {},
        statement_bits=statement if statement is not None else 0.0,
        guarantee=dict(guarantee) if isinstance(guarantee, dict) else {},
        name=entry.generation, seal_index=index, manifest_sha256=entry.manifest_sha256,
        set_hash=entry.set_hash, created=entry.created, expiry=entry.expiry, tasks=dict(sorted(tasks.items())),
        membership=str(entry.get("membership", "sealed")), budget_bits=_number(budget),
        release_mode=release_mode_of(raw_release), ladder_step=step, now=now,
    )


def _bundle_bits(index: int, entry: BundleEntry, blobs: BlobSource | None) -> float:
    bits = _number(entry.get("leakage_bits"))
    if bits is not None:
        return round(bits, 6)
    if blobs is None:
        raise IncompleteError(f"bundle entry {index} carries no leakage_bits and no blob store was given to "
                              "charge it from its evaluation", index=index, field="leakage_bits")
    evaluation = parse_json_object(blobs.get(entry.evaluation_sha256),
                                   what=f"evaluation of bundle entry {index}")
    return charge_bits(evaluation)


def _label_dependent(entry: BundleEntry) -> bool | None:
    release = entry.get("release")
    flag = release.get("label_dependent") if isinstance(release, Mapping) else None
    return flag if isinstance(flag, bool) else None


class Generations(dict[str, GenerationState]):
    """The generations of a ledger by name, with the contradictions met while reading it (``anomalies``)."""

    def __init__(self) -> None:
        super().__init__()
        self.anomalies: list[VerificationError] = []


def load_generations(ledger: LogReader | Iterable[tuple[int, Mapping[str, Any] | EntryRecord]], now: datetime, *,
                     blobs: BlobSource | None = None) -> Generations:
    """Every generation sealed on ``ledger`` (any log: a ledger, an export, tiles; or its ``(index, entry)``
    pairs, already read), in seal order, judged at ``now``.

    An append-only log cannot be repaired, so a contradiction in it (a name sealed twice, a retire or reveal
    of no sealed generation, a second retire or reveal: written by a dishonest operator straight into the
    database, or crafted into an export) must not stop every later command: the first entry counts, and each
    contradiction is kept in ``anomalies`` (a :class:`VerificationError` naming the entry) for status and the
    audit to report."""
    now = utc(now)
    pairs = ledger.entries() if isinstance(ledger, LogReader) else ledger
    out = Generations()
    states: dict[str, GenerationState] = {}
    bundles: dict[str, list[BundleRecord]] = {}
    updates: dict[str, dict[str, Any]] = {}
    for index, entry in pairs:
        if (entry.TYPE if isinstance(entry, EntryRecord) else entry.get("type")) not in _GENERATION_TYPES:
            continue
        try:  # (a caller that holds the typed records already, the audit, passes them)
            record = entry if isinstance(entry, EntryRecord) else entry_record(index, entry)
        except EntryRejected as exc:  # only a hand-made pair gets here: a decoded entry is valid
            out.anomalies.append(VerificationError(f"entry {index}: {exc.message}; ignored",
                                                   **{"index": index, **exc.evidence}))
            continue
        if isinstance(record, SealEntry):
            name = record.generation
            if name in states:
                out.anomalies.append(VerificationError(
                    f"entry {index} seals {name} again (first sealed at entry {states[name].seal_index}); "
                    "ignored", index=index, field="generation", found=name))
                continue
            try:
                states[name] = _seal_state(index, record, now)
            except VerificationError as exc:
                out.anomalies.append(VerificationError(f"{exc.message}; ignored", **exc.evidence))
                continue
            noise = states[name].release.get("noise_sha256")
            reused = next((other for other in states.values() if other.name != name and noise is not None
                           and other.release.get("noise_sha256") == noise), None)
            if reused is not None:  # (the draws do not name the generation: the same secret, the same noise)
                out.anomalies.append(VerificationError(
                    f"entry {index} seals {name} with the Thresholdout noise secret of {reused.name} (noise_sha256 "
                    f"{str(noise)[:16]}...): the first retirement publishes it, and with it the noise of both",
                    index=index, field="release.noise_sha256", found=noise))
            bundles[name] = []
            updates[name] = {}
        elif isinstance(record, (RetireEntry, RevealEntry)):
            name, kind = record.generation, record.TYPE
            if name not in states:
                out.anomalies.append(VerificationError(
                    f"entry {index} ({kind}) names {name[:60]!r}, which no earlier entry seals; ignored",
                    index=index, field="generation", found=name[:60]))
                continue
            done = updates[name]
            if isinstance(record, RetireEntry) and done.get("retire_reason") == REVEALED_EARLY:
                continue  # already retired by its early reveal (reported there): the retire entry changes nothing
            if f"{kind}_index" in done:
                out.anomalies.append(VerificationError(
                    f"entry {index}: {name} was already {kind}ed at entry {done[f'{kind}_index']}; ignored",
                    index=index, field="type", found=kind))
                continue
            done[f"{kind}_index"] = index
            if isinstance(record, RetireEntry):
                done["retire_reason"] = record.reason
                done["retired_at"] = record.created
            else:
                done["reveal_sha256"] = record.reveal_sha256
                if "retire_index" not in done and states[name].membership != "public":
                    # Its labels are public from here on, so nothing after it is held out: the generation counts
                    # as retired at this entry (bundles after it are refused, passports on it lapse), and the
                    # reveal is reported. Only `public` is revealed at its seal.
                    out.anomalies.append(VerificationError(
                        f"entry {index} reveals {name}, which is not retired: its labels are public from this "
                        "entry on, so it counts as retired here", index=index, field="type", found=kind))
                    done.update(retire_index=index, retire_reason=REVEALED_EARLY, retired_at=record.created)
        elif isinstance(record, BundleEntry) and record.generation in states:
            try:
                bits = _bundle_bits(index, record, blobs)
            except SourceUnavailable:  # the source could not be read: no verdict (exit 2)
                raise
            except HeldoutError as exc:  # (a withheld or missing evaluation): one entry's fault, not every
                # generation's; on a budgeted generation the entry breaks FORMATS section 5 and that is said
                bits = 0.0
                if states[record.generation].budget_bits is not None:
                    out.anomalies.append(VerificationError(
                        f"bundle entry {index} states no leakage_bits and its evaluation cannot be read to charge "
                        f"it ({exc.message}): the budget of {record.generation} is judged after it without its "
                        "charge", index=index, field="leakage_bits"))
            bundles[record.generation].append(BundleRecord(
                index=index, model_id=record.model_id, task=record.task, created=record.created,
                leakage_bits=bits, label_dependent=_label_dependent(record)))
    for name, state in states.items():
        out[name] = replace(state, **updates[name], bundles=tuple(bundles[name]))
    return out
