"""Re-deriving a bundle's evaluation from its stored predictions: the one costly step of the audit, done in
worker processes when the audit is given more than one job.

A worker gets only bytes and arrays (the evaluation blob, the predictions blob, the labels), never a database
handle or the audit's state, and answers with a picklable :class:`RederiveOutcome`; the audit applies the
outcomes in ledger order, so its report is the same bytes whatever the number of jobs.
:func:`bundle_rederiver` yields a ``submit`` function: in-process with one job, else over a
``ProcessPoolExecutor`` (forkserver, with the metrics preloaded, so each worker starts as a cheap fork) with a
bounded number of bundles in flight, so memory stays bounded whatever the ledger's size. Bundles go to the
workers in batches of :data:`BATCH`, one pool task each: the pool's per-task round trip (pickling, queues,
a future, the result pipe) is then paid once per batch by the parent, which with two jobs on two cores
shares the cores with the workers.
"""

from __future__ import annotations

import multiprocessing
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.metrics import StoredPredictions, evaluation_bytes, first_difference
from harness.metrics.registry import (
    STREAMS_VERIFIED_FROM,
    SpecMetrics,
    metrics_for,
    numpy_release,
    streams_verified,
)
from keys import HeldoutError, IncompleteError, StorageError, VerificationError
from ledger.replay import available_cpus, forkserver_context
from seals import parse_json_object
from seals.canonical import prepare

#: Bundles sent to a worker as one task (measured with two workers: the parent's CPU per bundle for the
#: pool's round trip falls from ~0.25 ms to ~0.11 ms).
BATCH = 8
#: Bundles in flight per worker (two batches): enough to keep every worker busy, few enough to bound memory.
IN_FLIGHT_PER_WORKER = 2 * BATCH


@dataclass(frozen=True)
class RederiveJob:
    """What re-deriving bundle ``index`` needs: the evaluation and predictions blobs (hash-checked by the
    caller) and the labels it was scored against."""

    index: int
    evaluation: bytes
    predictions: bytes
    labels: np.ndarray


@dataclass(frozen=True)
class RederiveOutcome:
    """``problem``: None (the re-derived evaluation's canonical bytes are the blob's), ``"failed"`` (it does not
    re-derive: ``message`` and ``evidence`` say where), ``"incomplete"`` (it cannot be checked here) or
    ``"not-canonical"`` (every member re-derives but the blob is not canonical JSON)."""

    index: int
    problem: str | None = None
    message: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)

    def raise_problem(self, evaluation_file: Callable[[], str]) -> None:
        """Raise the error this outcome records (nothing when the bundle re-derived); ``evaluation_file`` names
        the evaluation blob's file, asked only when it is at fault."""
        if self.problem == "incomplete":
            raise IncompleteError(self.message, **self.evidence)
        if self.problem == "failed":
            raise VerificationError(f"bundle entry {self.index} does not re-derive: {self.message}",
                                    index=self.index, **self.evidence)
        if self.problem == "not-canonical":
            raise VerificationError(f"the evaluation blob of entry {self.index} is not canonical JSON",
                                    index=self.index, file=evaluation_file())


def rederive_bundle(job: RederiveJob) -> RederiveOutcome:
    """Re-derive one bundle's evaluation and compare it with the stored blob, byte for byte. One comparison does
    it when all is well; only a mismatch pays for working out which member differs."""
    evaluation = parse_json_object(job.evaluation, what=f"evaluation of entry {job.index}")
    metrics = metrics_for(evaluation.get("spec_version"))  # known: the caller looked it up already
    try:
        predictions = StoredPredictions.from_npz_bytes(job.predictions, n_test=int(job.labels.shape[0]),
                                                       n_classes=evaluation.get("n_classes"))
        rederived = metrics.rederive(evaluation, predictions, job.labels)
        if evaluation_bytes(rederived) == job.evaluation:
            return RederiveOutcome(job.index)
        if evaluation_bytes(evaluation) != job.evaluation:
            return RederiveOutcome(job.index, "not-canonical")
        require_numpy_explains(metrics, job.index, evaluation, rederived)
        metrics.check_rederived(evaluation, predictions, job.labels)  # raises naming the first difference
        raise VerificationError("the re-derived evaluation's canonical bytes differ from the stored ones")
    except IncompleteError as exc:
        return RederiveOutcome(job.index, "incomplete", exc.message, dict(exc.evidence))
    except HeldoutError as exc:
        return RederiveOutcome(job.index, "failed", exc.message,
                               {k: v for k, v in exc.evidence.items() if k != "index"})


def _without(value: Any, members: tuple[str, ...], path: str = "") -> Any:
    """``value`` (prepared JSON) with the members at the dotted paths ``members`` removed."""
    if not isinstance(value, dict):
        return value
    kept = {}
    for key, item in value.items():
        child = f"{path}.{key}" if path else key
        if child not in members:
            kept[key] = _without(item, members, child)
    return kept


#: The recorded composite was computed from unrounded scores, the check below from the recorded (6-dp) ones:
#: the index may differ by the scores' rounding (0.5e-6, weighted mean) plus its own (0.5e-6).
COMPOSITE_ROUNDING = 1.0e-6 + 1e-12


def _composite_difference(metrics: SpecMetrics, recorded: dict[str, Any]) -> tuple[str, Any, Any] | None:
    """Does the recorded composite follow from the recorded dimension scores (coverage and the dimensions
    scored exactly, the index within the rounding)? The first member that does not, else None."""
    try:
        expected = prepare(metrics.composite_of(recorded.get("dimensions") or {}))
    except HeldoutError:
        return "composite", "a composite of the recorded dimensions", "dimensions it cannot be computed from"
    found = recorded.get("composite")
    if not isinstance(found, dict):
        return "composite", expected, found
    for member in ("coverage", "dimensions_scored"):
        if expected.get(member) != found.get(member):
            return f"composite.{member}", expected.get(member), found.get(member)
    index, recorded_index = expected.get("index"), found.get("index")
    if (index is None) != (recorded_index is None) or (
            index is not None and not (isinstance(recorded_index, (int, float)) and not isinstance(recorded_index, bool)
                                       and abs(index - recorded_index) <= COMPOSITE_ROUNDING)):
        return "composite.index", index, recorded_index
    return None


def require_numpy_explains(metrics: SpecMetrics, index: int, recorded: dict[str, Any],
                           rederived: dict[str, Any]) -> None:
    """When an evaluation computed under another numpy version does not re-derive, tell numpy's stream
    change apart from tampering. A claimed version that is not a numpy release the harness runs under is a
    finding. When both versions lie in the series shown to draw the same streams
    (:func:`harness.metrics.registry.streams_verified`), the other version explains nothing: return, and the
    caller reports the first difference as tampering. Otherwise every member that does not depend on numpy's
    ``Generator`` streams must still re-derive exactly (else the caller reports the first difference as
    tampering), and the recorded composite must follow from the recorded dimensions; then the bundle is
    reported as not re-derivable here (exit 5), naming both numpy versions and the members that could not be
    checked."""
    recorded_version = recorded.get("numpy_version")
    if not metrics.numpy_streams or not isinstance(recorded_version, str) or recorded_version == np.__version__:
        return
    release = numpy_release(recorded_version)
    if release is None or release < STREAMS_VERIFIED_FROM:
        # A version the harness cannot run under would make the stream-dependent members unverifiable by
        # anyone, for good: a claim that turns any lie about them into "incomplete".
        raise VerificationError(
            f"the evaluation claims numpy {recorded_version[:40]!r}, which is not a numpy release this harness runs "
            f"under (numpy >= {STREAMS_VERIFIED_FROM[0]}.{STREAMS_VERIFIED_FROM[1]}): its stream-dependent "
            "members could never be checked", path="numpy_version", found=recorded_version[:40])
    if streams_verified(recorded_version) and streams_verified(np.__version__):
        return  # the same streams: the caller reports the first difference as tampering
    n_test = recorded.get("n_test")
    members = metrics.stream_dependent_members(n_test if isinstance(n_test, int) else 0)
    outside = first_difference(_without(prepare(rederived), members), _without(prepare(recorded), members))
    if outside is None and "composite" in members:
        outside = _composite_difference(metrics, recorded)
    if outside is not None:
        path, expected, found = outside
        raise VerificationError(
            f"re-derived evaluation differs at {path}: expected {expected!r} (re-derived), found {found!r} "
            f"(recorded); computed under numpy {recorded_version}, audited under numpy {np.__version__}, but "
            "this member does not depend on numpy's random streams", path=path, expected=expected, found=found)
    raise IncompleteError(
        f"bundle entry {index} was computed under numpy {recorded_version} and this auditor has numpy "
        f"{np.__version__}: {', '.join(members)} depend on numpy's random streams and do not re-derive here; "
        f"everything else does. Re-run the audit under numpy {recorded_version} to check them",
        index=index, numpy_recorded=recorded_version, numpy_auditor=np.__version__, members=", ".join(members))


def rederive_bundles(jobs: tuple[RederiveJob, ...]) -> list[RederiveOutcome]:
    """:func:`rederive_bundle` of each job of a batch, in order (a worker's task)."""
    return [rederive_bundle(job) for job in jobs]


class _Done:
    """A result computed in-process, behind the one method of a Future the audit uses."""

    def __init__(self, outcome: RederiveOutcome) -> None:
        self.outcome = outcome

    def result(self) -> RederiveOutcome:
        return self.outcome


class _Batches:
    """Jobs gathered into batches of :data:`BATCH`, each sent to the pool as one task: when it is full, or
    when a result of it is asked for first."""

    def __init__(self, pool: ProcessPoolExecutor, interrupts: _DeferredInterrupts) -> None:
        self.pool = pool
        self.interrupts = interrupts
        self.jobs: list[RederiveJob] = []
        self.waiting: list[_InBatch] = []

    def submit(self, job: RederiveJob) -> _InBatch:
        self.interrupts.check()
        pending = _InBatch(self, len(self.jobs))
        self.jobs.append(job)
        self.waiting.append(pending)
        if len(self.jobs) == BATCH:
            self.send()
        return pending

    def send(self) -> None:
        if self.jobs:
            try:
                future = self.pool.submit(rederive_bundles, tuple(self.jobs))
            except (BrokenProcessPool, EOFError) as exc:  # (a worker died while an earlier batch ran, or
                self.interrupts.check()  # the forkserver that starts them; after a Ctrl-C, of the Ctrl-C)
                raise _worker_failure(exc) from None
            for pending in self.waiting:
                pending.future = future
            self.jobs, self.waiting = [], []


class WorkerDied(StorageError):
    """A re-derivation worker ended without answering: the environment failed, not the evidence. The audit stops
    with no verdict (exit 2), as for a source it cannot read: no finding is made of it."""


def _worker_failure(exc: BaseException) -> WorkerDied:
    return WorkerDied(
        f"a re-derivation worker of the audit ended without answering ({exc}): killed, out of memory, or unable to "
        "import heldout (a file named like one of its packages, such as harness.py, in the folder the audit runs "
        "from shadows it); nothing was concluded. Run again, with --jobs 1 to see the cause")


class _InBatch:
    """A bundle's place in a batch, behind the one method of a Future the audit uses."""

    def __init__(self, batches: _Batches, position: int) -> None:
        self.batches = batches
        self.position = position
        self.future: Future[list[RederiveOutcome]] | None = None

    def result(self) -> RederiveOutcome:
        if self.future is None:  # its batch is still being gathered: send it as it is
            self.batches.send()
        assert self.future is not None
        self.batches.interrupts.check()
        try:
            outcome = self.future.result()[self.position]
        except (BrokenProcessPool, EOFError) as exc:  # (EOFError: the forkserver itself died at start)
            self.batches.interrupts.check()  # (the interrupt, when there was one, is what ended it)
            raise _worker_failure(exc) from None
        self.batches.interrupts.check()
        return outcome


class _DeferredInterrupts:
    """While the pool runs, the terminal's interrupt is noted and raised at the next safe point (a submit, a
    result asked for), never in the middle of the pool's own bookkeeping: raised there, it left a lock of
    concurrent.futures held and the audit waiting for good at its shutdown (red-team round 19). A result being
    waited for is its batch's (seconds): the interrupt is raised when it is in."""

    def __init__(self) -> None:
        self.pending = False
        self.terminated = False
        self.previous: Any = None
        self.previous_term: Any = None

    def __enter__(self) -> _DeferredInterrupts:
        if threading.current_thread() is threading.main_thread():  # (only the main thread handles signals)
            self.previous = signal.signal(signal.SIGINT, self._note)
            # ``kill PID`` (SIGTERM) too: by default it ended this process on the spot, and its workers, its
            # forkserver and the resource tracker lived on, holding the command's output open (red-team round 21)
            self.previous_term = signal.signal(signal.SIGTERM, self._note_term)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
        if self.previous_term is not None:
            signal.signal(signal.SIGTERM, self.previous_term)

    def _note(self, signum: int, frame: Any) -> None:
        self.pending = True

    def _note_term(self, signum: int, frame: Any) -> None:
        self.terminated = True

    def check(self) -> None:
        if self.terminated:
            self.terminated = False
            raise SystemExit(128 + signal.SIGTERM)  # (the pool is ended on the way out, its workers with it)
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt


Pending = _InBatch | _Done
Submit = Callable[[RederiveJob], Pending]


def default_jobs() -> int:
    """Every core this process may run on (as the ledger replay's decoding counts them)."""
    return available_cpus()


def _pool_context() -> Any:
    """forkserver where there is one (workers fork from a server that has the metrics imported: cheap starts,
    and no fork of a process that runs threads, such as a progress bar's); spawn elsewhere."""
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        return forkserver_context([__name__])
    return multiprocessing.get_context("spawn")  # pragma: no cover


@contextmanager
def bundle_rederiver(jobs: int, bundles: int) -> Iterator[tuple[Submit, int]]:
    """``(submit, in_flight)``: ``submit(job)`` starts re-deriving a bundle and returns its pending result;
    the caller keeps at most ``in_flight`` pending and takes them in order. One job (or one bundle): in-process."""
    workers = max(1, min(jobs, bundles))
    if workers == 1:
        yield (lambda job: _Done(rederive_bundle(job))), 0
        return
    with _DeferredInterrupts() as interrupts:
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context(), initializer=_leave_interrupts)
        try:
            yield _Batches(pool, interrupts).submit, workers * IN_FLIGHT_PER_WORKER
        except BaseException:
            # Ctrl-C (or any failure) in the parent: the batches not started are dropped, the running ones
            # end, and the workers with them; waiting for every queued batch would hold an interrupted audit
            # for minutes
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        interrupts.check()  # (one that came during the last wait)


def _leave_interrupts() -> None:
    """A worker ignores the terminal's interrupt: it reaches the whole process group, and the parent, which
    handles it (exit 130, one line), ends the pool. A worker that took it died with a traceback of its own and
    left the pool broken, and the parent waiting on it (red-team round 19)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
