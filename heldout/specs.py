"""Spec supersession: the operator announces on the ledger that a spec version (e.g. "MedEval-1 v0.1") is
superseded from a given time. From then on no evaluation is run under it and every passport on it lapses
(exit 4); a passport issued before records the earlier of its generation's expiry and the supersession."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from harness.metrics.registry import BASE_SPEC_VERSION, METRICS
from heldout.entries import BundleEntry, SpecEntry, records
from heldout.generations.ledgers import generations_lock, ledger_signer
from heldout.store import Store
from keys import LapsedError, Signer, UsageError, VerificationError
from ledger import Ledger
from seals import format_utc


@dataclass(frozen=True)
class Supersession:
    spec_version: str
    superseded_by: str
    effective: datetime
    index: int

    def in_force(self, at: datetime) -> bool:
        return at >= self.effective

    @property
    def words(self) -> str:
        return f"spec {self.spec_version} superseded by {self.superseded_by} from {format_utc(self.effective)}"

    def to_json(self) -> dict[str, Any]:
        return {"spec_version": self.spec_version, "superseded_by": self.superseded_by,
                "effective_utc": format_utc(self.effective), "index": self.index}


class Supersessions(dict[str, Supersession]):
    """Supersessions by the version they supersede, with the contradictions met (``anomalies``)."""

    def __init__(self) -> None:
        super().__init__()
        self.anomalies: list[VerificationError] = []


def load_supersessions(entries: Iterable[tuple[int, Mapping[str, Any]]]) -> Supersessions:
    """Every ``spec`` entry, by the version it supersedes. What the supersede command refuses is a contradiction
    when an operator logs it anyway, kept in ``anomalies`` (the log cannot be repaired, so it must not stop
    every later command; the audit reports each): a version superseded twice (the first entry counts), a
    version superseded by itself or by a chain leading back to it (ignored: it would leave no current
    version), and a supersession dated to take effect before it was logged (it counts from its own entry's
    time: a supersession never lapses anything retroactively, which would rewrite past verdicts)."""
    found = Supersessions()
    for spec in records(entries, SpecEntry):
        version = spec.spec_version
        if version in found:
            found.anomalies.append(VerificationError(
                f"entry {spec.index} supersedes {version} again (first at entry {found[version].index}); ignored",
                index=spec.index, field="spec_version"))
            continue
        successor, seen = spec.superseded_by, {version}
        while successor not in seen and successor in found:
            seen.add(successor)
            successor = found[successor].superseded_by
        if successor in seen:
            found.anomalies.append(VerificationError(
                f"entry {spec.index} supersedes {version} by {spec.superseded_by}, which leads back to {successor}: "
                "a cycle would leave no current version; ignored", index=spec.index, field="superseded_by"))
            continue
        effective = spec.effective
        if effective < spec.created:
            found.anomalies.append(VerificationError(
                f"entry {spec.index} dates the supersession of {version} to take effect at "
                f"{spec.effective_utc}, before it was logged ({spec.created_utc}): it counts from its own time",
                index=spec.index, field="effective_utc", expected=f">= {spec.created_utc}",
                found=spec.effective_utc))
            effective = spec.created
        found[version] = Supersession(version, spec.superseded_by, effective, spec.index)
    return found


def require_not_superseded(supersessions: Mapping[str, Supersession], spec_version: str, at: datetime) -> None:
    """Raise :class:`LapsedError` (exit 4) when ``spec_version`` is superseded at ``at``."""
    found = supersessions.get(spec_version)
    if found is not None and found.in_force(at):
        raise LapsedError(f"{found.words}: nothing is evaluated or certified under it any more",
                          index=found.index, found=spec_version)


def spec_in_force(supersessions: Mapping[str, Supersession], at: datetime, *, before: int | None = None) -> str:
    """The spec version in force at ``at``: MedEval-1 v0.1, followed along the supersessions in force at ``at``
    (v0.1 -> its successor -> ...); with ``before``, only those logged before that entry index count (what an
    entry at that index could know)."""
    version = BASE_SPEC_VERSION
    seen = {version}
    while (found := supersessions.get(version)) is not None and found.in_force(at) \
            and (before is None or found.index < before):
        version = found.superseded_by
        if version in seen:
            raise VerificationError(f"the spec supersessions form a cycle through {version}", found=version)
        seen.add(version)
    return version


#: What makes two bundles one run (FORMATS rule 10): model, generation, task, stored predictions, spec.
BundleRun = tuple[str, str, str, str, str]


def bundle_run(bundle: BundleEntry, supersessions: Mapping[str, Supersession]) -> BundleRun:
    """The run a logged bundle is of: its model, generation, task and stored predictions, and the spec in force
    for it at its date (:func:`spec_in_force`, the supersessions logged before it), read from the ledger alone,
    never from the entry's optional copy or a blob a third party may not hold, so that every verifier and the
    operator's own command key a run alike (a copy that differs is a finding of its own)."""
    return (bundle.model_id, bundle.generation, bundle.task, bundle.predictions_sha256,
            spec_in_force(supersessions, bundle.created, before=int(bundle.index or 0)))


def require_spec_in_force(supersessions: Mapping[str, Supersession], what: str, index: int, spec_version: Any,
                          at: datetime) -> None:
    """An entry at ``index`` made at ``at`` under ``spec_version`` (an evaluation) was made under the spec in
    force then: not one already superseded (its successor governs), and not one no supersession before it had
    put in force yet (the operator would choose the metrics per model: MedEval-1 v0.2 is not in force before a
    logged supersession of v0.1 takes effect). Raises :class:`VerificationError` naming which."""
    in_force = spec_in_force(supersessions, at, before=index)
    if spec_version == in_force:
        return
    superseded = supersessions.get(str(spec_version))
    if superseded is not None and superseded.index < index and superseded.in_force(at):
        raise VerificationError(f"{what} entry {index} was made under {superseded.words} (entry "
                                f"{superseded.index})", index=index, field="spec_version", found=spec_version,
                                expected=in_force)
    raise VerificationError(f"{what} entry {index} was made under {spec_version}, which was not in force at "
                            f"{format_utc(at)}: the spec then was {in_force} (a version is in force once a "
                            "supersession logged before the entry puts it in force)", index=index,
                            field="spec_version", found=spec_version, expected=in_force)


def current_spec_version(supersessions: Mapping[str, Supersession], at: datetime) -> str:
    """The spec version new evaluations use at ``at`` (:func:`spec_in_force`). Refused (exit 2) when the ledger
    names a current version this code does not implement."""
    version = spec_in_force(supersessions, at)
    if version not in METRICS:
        raise UsageError(f"the ledger makes {version} the current spec, which this code does not implement "
                         f"(implemented: {', '.join(METRICS)})", found=version, expected=list(METRICS))
    return version


def supersede_spec(store: Store, ledger: Ledger, spec_version: str, *, superseded_by: str, effective: datetime,
                   now: datetime) -> int:
    """Append the ``spec`` entry, signed by the store's key for ``ledger``, under the generations lock (a
    supersession and an evaluation or passport under that spec are ordered, never interleaved). Refused (exit
    2, nothing written) for a version already superseded, a successor equal to it, or an effective time in the
    past (a supersession never lapses anything retroactively)."""
    with generations_lock(ledger, store):
        return _append_supersession(ledger, ledger_signer(store, ledger), spec_version, superseded_by=superseded_by,
                                    effective=effective, now=now)


def _append_supersession(ledger: Ledger, signer: Signer, spec_version: str, *, superseded_by: str,
                         effective: datetime, now: datetime) -> int:
    from harness.metrics.registry import METRICS  # (the versions this code computes; imported when used)

    if superseded_by.strip() == spec_version.strip():
        raise UsageError("a spec version cannot supersede itself", found=spec_version)
    for what, version in (("the superseded version", spec_version), ("--by", superseded_by)):
        if version not in METRICS:  # a supersession cannot be undone: a typo would end every evaluation
            raise UsageError(f"{what} {version[:60]!r} is not a spec version this code implements "
                             f"({', '.join(METRICS)})", field="spec_version" if what != "--by" else "superseded_by",
                             expected=list(METRICS), found=version[:60])
    if effective < now:
        raise UsageError("the supersession must take effect now or later", field="effective",
                         expected=f">= {format_utc(now)}", found=format_utc(effective))
    supersessions = load_supersessions(ledger.entries())
    existing = supersessions.get(spec_version)
    if existing is not None:
        raise UsageError(f"{spec_version} is already superseded (entry {existing.index})", index=existing.index)
    successor, seen = superseded_by, {spec_version}
    while successor not in seen and successor in supersessions:
        seen.add(successor)
        successor = supersessions[successor].superseded_by
    if successor in seen:  # every verifier would ignore it and report it, for good
        raise UsageError(f"{superseded_by} leads back to {spec_version} along the logged supersessions: a cycle "
                         "would leave no current version (a version is never superseded by an earlier one)",
                         field="superseded_by", found=superseded_by)
    entry = SpecEntry(spec_version=spec_version, superseded_by=superseded_by, effective_utc=format_utc(effective),
                      created_utc=format_utc(now))
    return ledger.append(entry.to_entry(), signer=signer, now=now)
