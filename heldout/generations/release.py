"""Release mechanisms for sealed generations: what a bundle makes public, and what that costs in bits.

Three modes (``release.mode`` of the seal manifest):

* ``full``: the whole evaluation object and its stored predictions are public at once; the charge is
  :func:`heldout.generations.budget.charge_bits` (every label-dependent number at its released precision).
* ``ladder`` (Blum & Hardt 2015, "The Ladder"): per task, the public record of a bundle is only its *ladder
  value*: the model's score rounded to the step when it beats the best released so far by at least one step,
  else "no improvement" (null). The evaluation and predictions blobs are withheld (kept under ``private/``,
  their SHA-256 committed in the bundle entry) until the generation is retired.
* ``thresholdout`` (Dwork et al. 2015, "The reusable holdout", Science 349): per bundle the operator supplies a
  public estimate of the same score (computed without the held-out labels). The released value is that public
  estimate, unless it differs from the held-out score by more than ``T + eta``; then the held-out score plus
  Laplace noise ``xi``, rounded to the step, is released and the threshold is redrawn (``T + gamma``), with
  ``gamma ~ Lap(2 sigma)``, ``eta ~ Lap(4 sigma)``, ``xi ~ Lap(sigma)`` as in the paper. Evaluation blobs are
  withheld until retirement as for the ladder.

**The score** both mechanisms release is the accuracy dimension's score, ``100 * cc(balanced accuracy)``:
a function of predictions and labels alone, which hardware cannot move (the composite includes cost).

**Charge: the description length of the released sequence.** Given the public count of bundles on a task
(which does not depend on the labels), a ladder or Thresholdout transcript is determined by the positions of
its label-dependent answers (ladder improvements, Thresholdout over-threshold answers) and their values.
We code it as a prefix code: each such answer costs ``gamma(gap) + log2(values)``, with ``gamma(g) = 2 *
floor(log2 g) + 1`` the Elias gamma length of the number of bundles since the previous such answer (1 for
the very next one), and ``values`` the number of values the answer could take: for the ladder, the levels
strictly above the best released so far (``step`` apart in [0, 100]); for Thresholdout, every level of [0, 100]
at ``step``. An answer that releases nothing label-dependent ("no improvement", or the public estimate) costs
0 bits when it is made: its cost is in the next answer's gap. The sum of the charges is the exact length
of one description of the whole released sequence, which is what the budget's union bound counts.

**Admission before running.** Whether an answer will be label-dependent is itself label-dependent, so a
bundle is admitted (before the model runs) only if the budget can pay the worst case of its answer
(:func:`worst_case_bits`); its actual charge is then at most that.

**Noise.** Thresholdout noise comes from a 32-byte secret drawn at seal time (kept under ``private/``, its
SHA-256 published in the manifest as ``noise_sha256``) and published at retirement, so anyone can recompute
every draw: uniform ``u`` in (0, 1) from the first 8 bytes of SHA-256(secret || canonical {"answer": k,
"draw": name, "task": t}) read as a big-endian integer (``(x + 0.5) / 2^64``), and ``Laplace(b) = -b *
sign(u - 1/2) * ln(1 - 2|u - 1/2|)`` (inverse CDF), with ``k`` the answer's place in the task's transcript (0
for the first bundle on the task). ``gamma`` after an over-threshold answer is drawn with ``answer`` = that
answer's place (the initial one with ``answer`` = -1). Not the entry's ledger index: the operator, who holds
the secret, chooses that freely (a batch of notes before the bundle moves it) and could try each index until
the noise suited it; an answer's place in the transcript moves only with more answers, each of them charged.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from heldout.entries import BundleEntry, records
from keys import MalformedInput, UsageError
from seals import jcs_bytes

FULL = "full"
LADDER = "ladder"
THRESHOLDOUT = "thresholdout"
WITHHOLDING_MODES = (LADDER, THRESHOLDOUT)
SCORE_LOW = 0.0
SCORE_HIGH = 100.0
TOLERANCE = 1e-9
NOISE_BYTES = 32
#: What the ladder and Thresholdout release about a bundle (a member path of the evaluation object).
RELEASED_SCORE = "dimensions.accuracy.score"
RELEASED_SCORE_WORDS = "accuracy score = 100 * cc(balanced accuracy), in [0, 100]"


def gamma_bits(gap: int) -> int:
    """Length of the Elias gamma code of a positive integer: 2 * floor(log2 gap) + 1."""
    if gap < 1:
        raise UsageError("a gap between answers is a positive integer", found=gap)
    return 2 * (gap.bit_length() - 1) + 1


def levels(step: float, low: float = SCORE_LOW, high: float = SCORE_HIGH) -> int:
    """The multiples of ``step`` in [low, high]."""
    if not step > 0:
        raise UsageError("the step must be positive", field="step", found=step)
    return math.floor((high - low) / step + TOLERANCE) + 1


def on_release_grid(value: Any, step: float) -> bool:
    """Whether ``value`` is what a ladder or Thresholdout answer releases: a number (not a boolean) in [0, 100]
    that is a multiple of ``step`` written to 6 decimals. A value off the grid, or outside the range, describes
    the score past what its charge, log2 of the grid's levels, pays for."""
    if type(value) not in (int, float) or not math.isfinite(value):
        return False
    return SCORE_LOW - TOLERANCE <= value <= SCORE_HIGH + TOLERANCE and round(round(value / step) * step, 6) == value


def _level_index(value: float, step: float) -> int:
    return round(value / step)


def released_score(evaluation: Mapping[str, Any]) -> float | None:
    """The score the ladder and Thresholdout release, read from an evaluation object (None if not scored)."""
    node: Any = evaluation
    for part in RELEASED_SCORE.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    if node is None:
        return None
    if isinstance(node, bool) or not isinstance(node, (int, float)) or not math.isfinite(node):
        raise MalformedInput(f"{RELEASED_SCORE} is not a finite number", field=RELEASED_SCORE, found=repr(node))
    return float(node)


# --- the ladder -------------------------------------------------------------------------------------------

def ladder_release(score: float, best_so_far: float | None, step: float) -> float | None:
    """The value to release for ``score`` under the Ladder: None when it does not beat ``best_so_far`` by at
    least ``step``; otherwise ``score`` rounded to the nearest multiple of ``step`` (6 decimals)."""
    if not math.isfinite(score):
        raise MalformedInput("a ladder score must be a finite number", found=repr(score))
    if not step > 0:
        raise UsageError("the ladder step must be positive", field="step", found=step)
    if best_so_far is not None and score < best_so_far + step - TOLERANCE:
        return None
    return round(round(score / step) * step, 6)


def ladder_levels_above(best_so_far: float | None, step: float) -> int:
    """How many values a ladder improvement over ``best_so_far`` can take (all levels when there is none)."""
    total = levels(step)
    if best_so_far is None:
        return total
    return max(0, total - (_level_index(best_so_far, step) + 1))


@dataclass(frozen=True)
class Transcript:
    """The public answers on one (generation, task) so far, in ledger order: for each bundle its released
    value, or None when nothing label-dependent was released ("no improvement" / the public estimate)."""

    answers: tuple[float | None, ...] = ()
    label_dependent: tuple[bool, ...] = ()

    def gap(self) -> int:
        """Bundles since the last label-dependent answer, counting the next one (1 when it is next)."""
        last = max((i for i, flag in enumerate(self.label_dependent) if flag), default=-1)
        return len(self.label_dependent) - last

    def best(self) -> float | None:
        values = [a for a, flag in zip(self.answers, self.label_dependent, strict=True) if flag and a is not None]
        return max(values) if values else None

    def then(self, answer: float | None, label_dependent: bool) -> Transcript:
        return Transcript((*self.answers, answer), (*self.label_dependent, label_dependent))


def answer_bits(mode: str, transcript: Transcript, label_dependent: bool, step: float) -> float:
    """Bits of the next answer after ``transcript`` (module docstring): 0 when it releases nothing
    label-dependent, else gamma(gap) + log2(values it could take)."""
    if not label_dependent:
        return 0.0
    values = ladder_levels_above(transcript.best(), step) if mode == LADDER else levels(step)
    if values < 1:
        raise UsageError("no ladder level is left above the best released score", found=transcript.best())
    return round(gamma_bits(transcript.gap()) + math.log2(values), 6)


def worst_case_bits(mode: str, transcript: Transcript, step: float) -> float:
    """The most the next answer can cost (what admission checks before the model runs)."""
    if mode == LADDER and ladder_levels_above(transcript.best(), step) < 1:
        return 0.0  # nothing above the top level: the answer can only be "no improvement"
    return answer_bits(mode, transcript, True, step)


def _answers(bundles: Iterable[BundleEntry], generation: str) -> Iterator[tuple[int, str, float | None, Any]]:
    """(index, task, released value, label_dependent as logged) of each bundle of ``generation`` that carries a
    release record, in ledger order."""
    for bundle in bundles:
        release = bundle.get("release")
        if bundle.generation != generation or not isinstance(release, Mapping):
            continue
        value = release.get("value")
        answer = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        yield int(bundle.index or 0), bundle.task, answer, release.get("label_dependent")


def transcripts(entries: Iterable[tuple[int, Mapping[str, Any]]], generation: str) -> dict[str, Transcript]:
    """The transcript of every task of ``generation`` from its bundle entries (``release`` members)."""
    answers: dict[str, list[float | None]] = {}
    flags: dict[str, list[bool]] = {}
    for _, task, answer, dependent in _answers(records(entries, BundleEntry), generation):
        answers.setdefault(task, []).append(answer)
        flags.setdefault(task, []).append(bool(dependent))
    return {task: Transcript(tuple(answers[task]), tuple(flags[task])) for task in answers}


@dataclass(frozen=True)
class ReleaseLog:
    """Every public answer on one generation, per task in ledger order with its entry index, read once: the
    transcript before any bundle (and Thresholdout's last over-threshold answer) by a binary search, where
    rebuilding it from the entries for each bundle would make an audit quadratic in the bundles."""

    indices: Mapping[str, tuple[int, ...]]
    answers: Mapping[str, tuple[float | None, ...]]
    dependent: Mapping[str, tuple[Any, ...]]  # label_dependent as logged (the audit reports a non-boolean)

    @classmethod
    def of(cls, bundles: Iterable[BundleEntry], generation: str) -> ReleaseLog:
        """From the log's bundle records in ledger order (those of other generations are passed over)."""
        indices: dict[str, list[int]] = {}
        answers: dict[str, list[float | None]] = {}
        dependent: dict[str, list[Any]] = {}
        for index, task, answer, flag in _answers(bundles, generation):
            indices.setdefault(task, []).append(index)
            answers.setdefault(task, []).append(answer)
            dependent.setdefault(task, []).append(flag)
        return cls({t: tuple(v) for t, v in indices.items()}, {t: tuple(v) for t, v in answers.items()},
                   {t: tuple(v) for t, v in dependent.items()})

    def _position(self, task: str, index: int) -> int:
        return bisect.bisect_left(self.indices.get(task, ()), index)

    def before(self, task: str, index: int) -> Transcript:
        """The transcript of ``task`` from the answers logged before entry ``index``
        (``transcripts(<those entries>)[task]``)."""
        position = self._position(task, index)
        return Transcript(self.answers.get(task, ())[:position],
                          tuple(bool(flag) for flag in self.dependent.get(task, ())[:position]))

    def place(self, task: str, index: int) -> int:
        """The place in the task's transcript of the answer at entry ``index`` (the answers logged before it)."""
        return self._position(task, index)

    def last_over_threshold(self, task: str, index: int) -> int | None:
        """``last_over_threshold(<entries before index>, generation, task)``: a place in the transcript."""
        position = self._position(task, index)
        flags = self.dependent.get(task, ())
        for at in range(position - 1, -1, -1):
            if bool(flags[at]):  # (read as the transcript reads it; a non-boolean flag is a finding of its own)
                return at
        return None


# --- Thresholdout ----------------------------------------------------------------------------------------

def _uniform(secret: bytes, answer: int, draw: str, task: str) -> float:
    digest = hashlib.sha256(secret + jcs_bytes({"answer": answer, "draw": draw, "task": task})).digest()
    (word,) = struct.unpack(">Q", digest[:8])
    return (word + 0.5) / 2.0**64


def laplace_quantile(u: float, scale: float) -> float:
    """The Laplace(0, scale) inverse CDF at u in (0, 1): -scale * sign(u - 1/2) * ln(1 - 2|u - 1/2|)."""
    if not 0 < u < 1:
        raise UsageError("a uniform draw lies in (0, 1)", found=u)
    centred = u - 0.5
    return -scale * math.copysign(1.0, centred) * math.log(1.0 - 2.0 * abs(centred))


def laplace(secret: bytes, scale: float, *, answer: int, draw: str, task: str) -> float:
    """One Laplace(scale) draw by inverse CDF from the keyed uniform (module docstring)."""
    return laplace_quantile(_uniform(secret, answer, draw, task), scale)


@dataclass(frozen=True)
class ThresholdoutAnswer:
    value: float
    over_threshold: bool
    eta: float
    xi: float | None
    threshold: float  # T + gamma in force when this query was answered


def thresholdout_threshold(secret: bytes, threshold: float, sigma: float, task: str,
                           last_over_threshold: int | None) -> float:
    """The noisy threshold in force: T + gamma, gamma redrawn after each over-threshold answer."""
    return threshold + laplace(secret, 2 * sigma, answer=-1 if last_over_threshold is None else last_over_threshold,
                               draw="gamma", task=task)


def thresholdout_answer(holdout: float, public: float, *, secret: bytes, threshold: float, sigma: float,
                        step: float, task: str, answer: int, last_over_threshold: int | None) -> ThresholdoutAnswer:
    """Dwork et al.'s Thresholdout for one query, the ``answer``-th on the task (its place in the transcript;
    ``last_over_threshold`` the place of the last over-threshold one): the public estimate unless
    |holdout - public| > T_hat + eta, else holdout + xi, clipped to [0, 100] and rounded to ``step``."""
    if not (math.isfinite(holdout) and math.isfinite(public)):
        raise MalformedInput("Thresholdout needs finite scores", found=[holdout, public])
    t_hat = thresholdout_threshold(secret, threshold, sigma, task, last_over_threshold)
    eta = laplace(secret, 4 * sigma, answer=answer, draw="eta", task=task)
    if abs(holdout - public) > t_hat + eta:
        xi = laplace(secret, sigma, answer=answer, draw="xi", task=task)
        noisy = min(SCORE_HIGH, max(SCORE_LOW, holdout + xi))
        return ThresholdoutAnswer(round(round(noisy / step) * step, 6), True, eta, xi, t_hat)
    return ThresholdoutAnswer(round(public, 6), False, eta, None, t_hat)


# --- the release record of one bundle -----------------------------------------------------------------------

def release_record(mode: str, *, step: float, transcript: Transcript, score: float | None,
                   public_estimate: float | None = None, secret: bytes | None = None,
                   threshold: float | None = None, sigma: float | None = None, task: str = "") -> dict[str, Any]:
    """The ``release`` member of a withheld bundle entry that answers after ``transcript``: what is public about
    it, and its charge."""
    if mode == LADDER:
        value = None if score is None else ladder_release(score, transcript.best(), step)
        dependent = value is not None
        record: dict[str, Any] = {"mode": LADDER, "value": value, "label_dependent": dependent}
    elif mode == THRESHOLDOUT:
        if public_estimate is None or secret is None or threshold is None or sigma is None:
            raise UsageError("a Thresholdout release needs the public estimate of the score "
                             "(--public-estimate or a public bundle of the same model and task)",
                             field="public_estimate")
        if score is None:
            raise UsageError("the held-out score is not scored: Thresholdout has nothing to compare",
                             field="score")
        answer = thresholdout_answer(score, public_estimate, secret=secret, threshold=threshold, sigma=sigma,
                                     step=step, task=task, answer=len(transcript.answers),
                                     last_over_threshold=last_over_threshold(transcript))
        dependent = answer.over_threshold
        record = {"mode": THRESHOLDOUT, "value": answer.value, "label_dependent": dependent,
                  "public_estimate": round(public_estimate, 6)}
    else:
        raise UsageError(f"release mode {mode!r} does not withhold", field="release.mode", found=mode)
    record["bits"] = answer_bits(mode, transcript, dependent, step)
    record["score"] = RELEASED_SCORE
    return record


def last_over_threshold(transcript: Transcript) -> int | None:
    """The place in ``transcript`` of its last over-threshold (label-dependent) Thresholdout answer."""
    return max((place for place, flag in enumerate(transcript.label_dependent) if flag), default=None)


def withheld_view(entry: Mapping[str, Any]) -> dict[str, Any]:
    """What a passport carries in place of a withheld bundle's evaluation: the public record alone."""
    return {"kind": "withheld-bundle", "task": entry.get("task"), "release": entry.get("release"),
            "evaluation_sha256": entry.get("evaluation_sha256"),
            "note": "evaluation withheld until the generation is retired; only the released value is public"}


def release_mode_of(release: Any) -> str:
    """The release mode a seal entry's ``release`` member states for its generation (``full`` when it states
    none, or is no object)."""
    return str(release.get("mode", FULL)) if isinstance(release, dict) else FULL


def cited_evaluation_matches(evaluation: Mapping[str, Any], entry: Mapping[str, Any], sha256_of: Any, *,
                             generation_mode: str) -> bool:
    """A passport's evaluation stands for a bundle entry: the evaluation whose SHA-256 the entry commits, or,
    for a withheld bundle, exactly its :func:`withheld_view`. Withheld by the generation's sealed release mode,
    not by the entry's word: a ``release`` record on a bundle of a full-release generation (whose evaluation is
    public) must not let a passport show its made-up value in place of the evaluation."""
    release = entry.get("release")
    withheld = generation_mode in WITHHOLDING_MODES and isinstance(release, dict) and \
        release.get("mode") == generation_mode
    if withheld and dict(evaluation) == withheld_view(entry):
        return True
    return bool(sha256_of(evaluation) == entry.get("evaluation_sha256"))
