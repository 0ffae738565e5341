"""Kill-at-every-step: ``seal``, ``seal public`` (on a new store: its seal and reveal in one batch), ``retire
--reveal``, plain ``retire`` (a retire entry and nothing to publish), ``evaluate`` and ``passport issue`` are
atomic across SIGKILL (heldout/staging.py).

Each case copies a prepared store, runs the real command in a subprocess (``python -m heldout``) and kills it:
at a named step (``$HELDOUT_CRASH_AT``; the steps are discovered from an uncut run's ``$HELDOUT_CRASH_TRACE``, so
a step added later is covered without listing it here), or after a random delay inside the window an uncut
run spends between its first and last step. Then, before any other command touches the store, the files on
disk must be in one of three states:

- never started: the ledger, every public file (``seals/``, ``passports/``, ``blobs/``) and every private file
  outside ``private/staging/`` exactly as before; nothing secret (reveal, predictions) anywhere public;
- completed: the ledger grew by exactly the operation's entries and every file they name is published (a
  staging folder may remain, private, for the next command to remove);
- committed, publishing: the entries are logged, part of their files published, the rest staged with an
  intent; no public file that no entry names.

Then the next command (``status``) must leave exactly never-started or completed: the staging folder empty,
no temporary file beside a published one, ``ledger export`` holding exactly the files the entries name (the
export of a never-started store byte-identical to the one before), and ``audit`` clean. A never-started
operation is run again and must complete. Kills inside the recovery itself are covered too.

Sizes: every named step always (40 kills today; 14 cases more kill an operation after its commit and then the
next command at each step of its recovery: 28 kills); ``$HELDOUT_CRASH_KILLS`` random kills
spread over the six operations (CI default 150: commands that finish before their random time are run again
until that many were killed). The counts per operation and final state are printed at the end of the random campaign.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import json
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from heldout.generations import open_ledger
from heldout.generations.ledgers import generations_lock
from heldout.staging import lock_path
from heldout.store import Store
from keys.files import write_atomic, write_private_file
from ledger import BlobStore, Ledger
from ledger.entries import blob_references
from tests.audit_support import NOW, TASK, AuditFixture, build_store, command_clock
from tests.generations_support import cli, init_store, write_npz

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                reason="evaluate needs torch (harness extra)")

REPO = Path(__file__).resolve().parent.parent
RANDOM_KILLS = int(os.environ.get("HELDOUT_CRASH_KILLS", "150"))
WORKERS = max(1, int(os.environ.get("HELDOUT_CRASH_WORKERS", str(min(4, os.cpu_count() or 1)))))
SEED = int(os.environ.get("HELDOUT_CRASH_SEED", "20261201"))
PUBLIC = ("seals", "passports", "blobs")
NEW_TYPES = {"seal": ["pool", "intent", "seal"], "retire": ["retire", "reveal"], "evaluate": ["bundle"],
             "passport": ["passport"], "retire-plain": ["retire"], "seal-public": ["seal", "reveal"]}
#: Operations run under another operation's staging name (the prefix of their crash points).
STAGED_AS = {"retire-plain": "retire", "seal-public": "seal"}
#: Operations that run on a store holding only its genesis entry (``public`` is sealed once per ledger).
ON_NEW_STORE = frozenset({"seal-public"})


def step_prefix(op: str) -> str:
    return STAGED_AS.get(op, op)

#: Commit-then-draw logs the pool and the intent (one batch) before the draw, and the seal after it: a kill in
#: between leaves a logged draw that was never sealed. To the log that is a draw thrown away, and it must stay
#: visible (the audit reports it); nothing else may have been written.
ABANDONED = {"seal": ["pool", "intent"]}


def operation_args(op: str, fixture: AuditFixture) -> list[str]:
    return {
        "seal": ["seal", "gen3", "--tasks", TASK, "--per-task", "20", "--expires", "2027-05-01",
                 "--budget-bits", "1e9"],
        "retire": ["retire", "gen1", "--reason", "expired", "--reveal", "--with-images"],
        "retire-plain": ["retire", "gen2", "--reason", "leaked"],  # a retire entry only: nothing to publish
        # the public generation: its seal and its reveal in one batch, manifest and reveal published together
        "seal-public": ["seal", "public", "--tasks", TASK, "--data-root", str(fixture.data_root), "--expires",
                        "2027-06-01"],
        "evaluate": ["evaluate", "majority", "--generation", "gen2", "--tasks", TASK, "--data-root",
                     str(fixture.data_root)],
        "passport": ["passport", "issue", "model_0", "--generation", "gen2"],
    }[op]


# --- the store before, and what a store looks like ------------------------------------------------------------

@dataclass(frozen=True)
class Picture:
    """What the test compares: ledger entries, public and private files (SHA-256 by relative path)."""

    entries: list[bytes]
    public: dict[str, str]
    private: dict[str, str]
    staging: list[str]

    @property
    def hidden(self) -> list[str]:
        """Temporary files (``.<name>.tmp<pid>``) that a killed write left, public or private."""
        return [p for p in [*self.public, *self.private] if Path(p).name.startswith(".")]


def _files(root: Path, folder: str, *, skip: str | tuple[str, ...] | None = None) -> dict[str, str]:
    found = {}
    base = root / folder
    if base.is_dir():
        for path in sorted(base.rglob("*")):
            rel = str(path.relative_to(root))
            if path.is_file() and not (skip and rel.startswith(skip)):
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def picture(store: Path, ledger_id: str) -> Picture:
    """The store as it lies on disk (the ledger opened directly: no recovery runs)."""
    with Ledger.open(Ledger.locate(store / "ledgers", ledger_id)) as ledger:
        entries = [data for _, data in ledger.entries_bytes()]
    public: dict[str, str] = {}
    for folder in PUBLIC:
        public.update(_files(store, folder))
    staging_root = store / "private" / "staging"
    staging = sorted(str(p.relative_to(staging_root)) for p in staging_root.glob("*/*")) \
        if staging_root.is_dir() else []
    # a seal's pending draw (heldout/generations/seal.py) lives from before its intent to after its seal entry
    return Picture(entries, public, _files(store, "private", skip=("private/staging", "private/pending-draws")),
                   staging)


def expected_files(store: Path, ledger_id: str, new_entries: list[dict[str, Any]]) -> tuple[dict[str, str], set[str]]:
    """Public files the new entries name (path -> SHA-256 of the content, a passport file without its final
    newline) and the private openings a new seal needs."""
    public: dict[str, str] = {}
    private: set[str] = set()
    for entry in new_entries:
        for digest in blob_references(entry):
            public[f"blobs/sha256/{digest[:2]}/{digest}"] = digest
        kind, generation = entry["type"], entry.get("generation")
        if kind == "seal":
            public[f"seals/{generation}.seal.json"] = entry["manifest_sha256"]
            private.add(f"private/generations/{ledger_id}/{generation}/{entry['set_hash']}.reveal.json")
        elif kind == "reveal":
            public[f"seals/{generation}.reveal.json"] = entry["reveal_sha256"]
        elif kind == "passport":
            public[f"passports/{entry['model_id']}__{generation}.passport.json"] = entry["passport_sha256"]
    return public, private


def _content_sha(store: Path, rel: str) -> str:
    data = (store / rel).read_bytes()
    return hashlib.sha256(data[:-1] if rel.startswith("passports/") else data).hexdigest()


def classify(store: Path, ledger_id: str, before: Picture, op: str) -> str:
    """never-started | completed | publishing (see the module docstring); fails on anything else."""
    now = picture(store, ledger_id)
    n = len(before.entries)
    assert now.entries[:n] == before.entries, "the ledger's history changed"
    new = [json.loads(data) for data in now.entries[n:]]
    if not new:
        assert {k: v for k, v in now.public.items()} == before.public, \
            f"{op}: files were published without their ledger entry: " \
            f"{sorted(set(now.public.items()) ^ set(before.public.items()))}"
        assert now.private == before.private, f"{op}: private files outside staging changed"
        return "never-started"
    if [e["type"] for e in new] == ABANDONED.get(op):
        assert now.public == before.public, f"{op}: files were published for a draw that was never sealed"
        assert now.private == before.private, f"{op}: private files outside staging changed"
        return "draw-abandoned"
    assert [e["type"] for e in new] == NEW_TYPES[op], f"{op}: unexpected new entries {[e['type'] for e in new]}"
    public, private = expected_files(store, ledger_id, new)
    for rel, digest in now.public.items():
        if rel in before.public:
            assert before.public[rel] == digest or rel in public, f"{op}: {rel} changed"
            continue
        if Path(rel).name.startswith("."):
            continue  # a temporary file of a killed publish: allowed only while staged (checked below)
        assert rel in public, f"{op}: {rel} is public but no entry names it"
        assert _content_sha(store, rel) == public[rel], f"{op}: {rel} is not what its entry names"
    for rel in set(now.private) - set(before.private):
        assert rel in private or Path(rel).name.startswith("."), f"{op}: unexpected private file {rel}"
    complete = all(rel in now.public and _content_sha(store, rel) == digest for rel, digest in public.items()) \
        and private <= set(now.private)
    if complete and not now.hidden:
        return "completed"  # what is left in private/staging is private, and the next command removes it
    intents = [p for p in (store / "private" / "staging").glob("*/*/intent.json")]
    assert intents, f"{op}: committed, files missing ({sorted(set(public) - set(now.public))}) and nothing staged"
    return "publishing"


def export_files(store: Path, ledger_id: str, dest: Path) -> dict[str, bytes]:
    result = cli("ledger", "export", ledger_id, str(dest), store=store)
    assert result.exit_code == 0, result.output
    return {str(p.relative_to(dest)): p.read_bytes() for p in sorted(dest.rglob("*")) if p.is_file()}


def check_settled(store: Path, ledger_id: str, before: Picture, before_export: dict[str, bytes], op: str,
                  raw_state: str, work: Path) -> str:
    """After the next command: exactly never-started or completed, export and audit agreeing."""
    state = classify(store, ledger_id, before, op)
    assert state in ("never-started", "completed", "draw-abandoned"), f"{op}: still {state} after the next command"
    if raw_state == "draw-abandoned":
        assert state == "draw-abandoned", f"{op}: an abandoned draw became {state}"
    elif raw_state != "never-started":
        assert state == "completed", f"{op}: a logged operation was not completed"
    now = picture(store, ledger_id)
    assert not now.staging and not now.hidden, (now.staging, now.hidden)
    exported = export_files(store, ledger_id, work / f"export-{len(list(work.iterdir()))}")
    if state == "draw-abandoned":
        assert {n: d for n, d in exported.items() if n.startswith(("seals/", "blobs/"))} == \
            {n: d for n, d in before_export.items() if n.startswith(("seals/", "blobs/"))}, \
            f"{op}: an abandoned draw published files"
        with command_clock(NOW):
            audited = cli("audit", ledger_id, "--out", str(work / "audit_report.json"), store=store)
        assert audited.exit_code == 1 and "never sealed" in audited.output, audited.output
        return state
    if state == "never-started":
        assert exported == before_export, f"{op}: the export of a never-started operation differs"
    else:
        manifest = json.loads(exported["export.json"])
        public, _ = expected_files(store, ledger_id, [json.loads(d) for d in now.entries[len(before.entries):]])
        for rel in public:
            if rel.startswith(("seals/", "blobs/")):
                assert rel in exported, f"{op}: the export lacks {rel}"
        old = json.loads(before_export["export.json"])
        assert manifest["missing_blobs"] == old["missing_blobs"]
        shown = {name for name in exported if name.startswith("seals/")}
        assert shown == {name for name in before_export if name.startswith("seals/")} | {
            rel for rel in public if rel.startswith("seals/")}, f"{op}: the export's seals are not what entries name"
    with command_clock(NOW):
        audited = cli("audit", ledger_id, "--out", str(work / "audit_report.json"), store=store)
    assert audited.exit_code == 0, f"{op}: audit after {state}: {audited.output}"
    return state


# --- running and killing ----------------------------------------------------------------------------------

#: The auditor's state folder of the prepared store's clean audit (its record of the reports it wrote, which
#: ``passport issue`` requires of the report it cites): every killed command runs as that auditor.
AUDITOR_STATE: dict[str, str] = {}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELDOUT_CRASH")}
    env.update(PYTHONPATH=str(REPO), HELDOUT_NOW=NOW, HF_HUB_OFFLINE="1", **AUDITOR_STATE, **extra)
    return env


def run_cli(store: Path, args: list[str], **env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "heldout", *args, "--store", str(store)], cwd=REPO,
                            env=_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@dataclass(frozen=True)
class Base:
    """The store an operation starts from: its ledger, and its picture and export before the operation."""

    store: Path
    ledger_id: str
    before: Picture
    export: dict[str, bytes]


@dataclass(frozen=True)
class Prepared:
    fixture: AuditFixture
    before: Picture
    export: dict[str, bytes]
    steps: dict[str, list[str]]  # operation -> crash points in the order an uncut run meets them
    windows: dict[str, tuple[float, float]]  # operation -> seconds: the whole uncut run, its first to last step
    new_store: Base  # a store with its genesis entry only (ON_NEW_STORE operations start there)

    def base(self, op: str) -> Base:
        if op in ON_NEW_STORE:
            return self.new_store
        return Base(self.fixture.store, self.fixture.ledger_id, self.before, self.export)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    """public, gen1, gen2 with one synthetic bundle each, a clean audit at the head; then one uncut run of
    each operation (on a copy) to find its steps and timing."""
    root = tmp_path_factory.mktemp("crash")
    fixture = build_store(root, bundles_per_generation=1, n_public=40, per_task=20)
    AUDITOR_STATE["XDG_STATE_HOME"] = str(root / "auditor-state")
    with command_clock(NOW), pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", AUDITOR_STATE["XDG_STATE_HOME"])
        result = cli("audit", fixture.ledger_id, store=fixture.store)
    assert result.exit_code == 0, result.output
    before = picture(fixture.store, fixture.ledger_id)
    export = export_files(fixture.store, fixture.ledger_id, root / "export-before")
    with command_clock(NOW):
        new_id = init_store(root / "new-store")
    new_store = Base(root / "new-store", new_id, picture(root / "new-store", new_id),
                     export_files(root / "new-store", new_id, root / "export-new"))
    bases = {op: new_store if op in ON_NEW_STORE else Base(fixture.store, fixture.ledger_id, before, export)
             for op in NEW_TYPES}
    steps: dict[str, list[str]] = {}
    windows: dict[str, tuple[float, float]] = {}
    for op in NEW_TYPES:
        for attempt in range(2):  # the second run is warm (compiled modules, disk cache): its times count
            copy = root / f"uncut-{op}-{attempt}"
            shutil.copytree(bases[op].store, copy)
            trace = root / f"trace-{op}-{attempt}"
            start = time.monotonic()
            proc = run_cli(copy, operation_args(op, fixture), HELDOUT_CRASH_TRACE=str(trace))
            out, err = proc.communicate(timeout=300)
            whole = time.monotonic() - start
            assert proc.returncode == 0, (op, out, err)
            lines = [line.split() for line in trace.read_text().splitlines()]
            steps[op] = [name for name, _ in lines]
            busy = float(lines[-1][1]) - float(lines[0][1])
            windows[op] = (min(whole, windows[op][0]), min(busy, windows[op][1])) if op in windows else (whole, busy)
            assert classify(copy, bases[op].ledger_id, bases[op].before, op) == "completed"
            shutil.rmtree(copy)
    return Prepared(fixture, before, export, steps, windows, new_store)


@dataclass(frozen=True)
class Kill:
    """One case: the operation, its folder, and how it is killed."""

    op: str
    work: Path
    crash_at: str | None = None
    delay: float | None = None
    recover_crash_at: str | None = None


def launch(prepared: Prepared, case: Kill) -> tuple[int, str]:
    """Copy the store, run the command and kill it; returns its exit status and the end of its stderr."""
    case.work.mkdir()
    shutil.copytree(prepared.base(case.op).store, case.work / "store")
    proc = run_cli(case.work / "store", operation_args(case.op, prepared.fixture),
                   **({"HELDOUT_CRASH_AT": case.crash_at} if case.crash_at else {}))
    if case.delay is not None:
        try:
            proc.wait(timeout=case.delay)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=600)
    return proc.returncode, err.decode(errors="replace")[-400:]


def launch_all(prepared: Prepared, cases: list[Kill]) -> list[tuple[int, str]]:
    """The commands of several cases at once (each on its own copy); the checks then run one by one."""
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return list(pool.map(lambda case: launch(prepared, case), cases))


def check_case(prepared: Prepared, case: Kill, returncode: int, stderr: str) -> tuple[str, str]:
    """The checks after one kill; returns (state on disk right after the kill, state after the next command),
    or ('not-killed', state) when a random delay outlived the command."""
    op, work, crash_at = case.op, case.work, case.crash_at
    store = work / "store"
    base = prepared.base(op)
    ledger_id = base.ledger_id
    killed = returncode == -signal.SIGKILL
    timed = crash_at is not None and "+" in crash_at  # a kill at a random time after the step
    if crash_at is not None and not timed:
        assert killed, f"{op} at {crash_at}: exit {returncode}: {stderr}"
    elif not killed:
        assert returncode == 0, (op, returncode, stderr)
    raw = classify(store, ledger_id, base.before, op)
    if killed and crash_at is not None and not timed:
        steps = prepared.steps[op]
        if steps.index(crash_at) <= steps.index(f"{step_prefix(op)}.intent"):
            assert raw in ("never-started", "draw-abandoned" if op in ABANDONED else "never-started"), \
                f"{op} at {crash_at}: {raw}"
        elif crash_at == f"{step_prefix(op)}.done":
            assert raw == "completed", f"{op} at {crash_at}: {raw}"
        else:
            assert raw in ("publishing", "completed"), f"{op} at {crash_at}: {raw}"
    if case.recover_crash_at is not None:  # the next command is killed too, inside the recovery
        with subprocess.Popen([sys.executable, "-m", "heldout", "status", "--store", str(store)], cwd=REPO,
                              env=_env(HELDOUT_CRASH_AT=case.recover_crash_at), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) as nested:
            nested.communicate(timeout=120)
        assert nested.returncode == -signal.SIGKILL, f"recovery did not reach {case.recover_crash_at}"
        assert classify(store, ledger_id, base.before, op) in ("publishing", "completed")
    with command_clock(NOW):
        status = cli("status", "--json", store=store)
    assert status.exit_code == 0, status.output
    settled = check_settled(store, ledger_id, base.before, base.export, op, raw, work)
    generations = {g["generation"]: g for g in json.loads(status.output)["generations"]}
    if op == "seal":
        assert ("gen3" in generations) == (settled == "completed")
    if op == "retire":
        assert (generations["gen1"]["state"] == "retired") == (settled == "completed")
    if op == "retire-plain":
        assert (generations["gen2"]["state"] == "retired") == (settled == "completed")
    if op == "seal-public":
        assert ("public" in generations) == (settled == "completed")
    if settled in ("never-started", "draw-abandoned"):  # the operation can simply be run again
        with command_clock(NOW):
            again = cli(*operation_args(op, prepared.fixture), store=store)
        assert again.exit_code == 0, (op, again.output)
        assert classify(store, ledger_id, base.before, op) == "completed"  # an abandoned draw is resumed
        assert not (store / "private" / "pending-draws").exists()
    shutil.rmtree(work)
    return (raw if killed else "not-killed"), settled


def run_cases(prepared: Prepared, cases: list[Kill]) -> list[tuple[str, str]]:
    outcomes = []
    for start in range(0, len(cases), WORKERS * 2):
        batch = cases[start:start + WORKERS * 2]
        for case, (returncode, stderr) in zip(batch, launch_all(prepared, batch), strict=True):
            outcomes.append(check_case(prepared, case, returncode, stderr))
    return outcomes


# --- the tests --------------------------------------------------------------------------------------------

def test_uncut_runs_pass_every_kind_of_step(prepared: Prepared) -> None:
    """Each operation stages, records its intent, commits and publishes, in that order."""
    for op, steps in prepared.steps.items():
        kinds = [s.split(".")[1] for s in steps]
        assert kinds[0] == "staging" and kinds[-1] == "done", (op, steps)
        assert kinds.index("intent") < kinds.index("committed"), (op, steps)
        # an operation that publishes files does so after its commit (a plain retire publishes none)
        assert ("published" in kinds) == (op != "retire-plain"), (op, steps)
        assert "published" not in kinds or kinds.index("committed") < kinds.index("published"), (op, steps)
        assert all(k == "staged" for k in kinds[1:kinds.index("before-intent")]), (op, steps)


@pytest.mark.parametrize("op", list(NEW_TYPES))
def test_kill_at_every_step(prepared: Prepared, op: str, tmp_path: Path) -> None:
    """SIGKILL at each named step of the operation: never started before the commit, completed (at once or by
    the next command) after it."""
    outcomes = run_cases(prepared, [Kill(op, tmp_path / f"{number}", crash_at=step)
                                    for number, step in enumerate(prepared.steps[op])])
    states = Counter(outcomes)
    print(f"\n{op}: {len(prepared.steps[op])} kills at named steps: {dict(states)}")
    assert sum(states.values()) == len(prepared.steps[op])


@pytest.mark.parametrize("op", list(NEW_TYPES))
def test_kill_inside_recovery(prepared: Prepared, op: str, tmp_path: Path) -> None:
    """A kill after the commit, then a kill of the next command at each step of its recovery: the command
    after that still completes the operation."""
    prefix = step_prefix(op)
    published = [s.removeprefix(f"{prefix}.") for s in prepared.steps[op] if s.startswith(f"{prefix}.published.")]
    points = [f"recover.{label}" for label in published] + ["recover.finished"]
    outcomes = run_cases(prepared, [Kill(op, tmp_path / f"{number}", crash_at=f"{prefix}.committed",
                                         recover_crash_at=point) for number, point in enumerate(points)])
    # killed after its commit, an operation with files to publish is part-published; one without (a plain
    # retire) is complete on disk already, its staging folder left for the next command to remove
    assert outcomes == [("publishing" if published else "completed", "completed")] * len(points)


@pytest.mark.slow
def test_random_kills(prepared: Prepared, tmp_path: Path) -> None:
    """``$HELDOUT_CRASH_KILLS`` SIGKILLs at random times, two ways in turn: from outside, a random delay after
    the command starts (over its whole uncut run time), and from inside, a random delay (up to half its busy
    window) after a step drawn at random: anywhere in the staging, the ledger transaction, the fsyncs and
    renames of publishing, the removal of the staging folder."""
    rng = random.Random(SEED)
    ops = list(NEW_TYPES)
    table: dict[str, Counter[tuple[str, str]]] = {f"{op} {how}": Counter() for op in ops
                                                  for how in ("outside", "inside")}
    attempts = 0
    killed = 0
    while killed < RANDOM_KILLS and attempts < 3 * RANDOM_KILLS:  # a delay may outlive the command: go on
        cases = []
        for _ in range(WORKERS * 2):
            op = ops[attempts % len(ops)]
            whole, busy = prepared.windows[op]
            work = tmp_path / f"{attempts}"
            if attempts // len(ops) % 2 == 0:
                cases.append(Kill(op, work, delay=rng.uniform(0.0, whole)))
            else:
                anchor = rng.choice(prepared.steps[op])  # spread over the whole operation, both sides of the commit
                cases.append(Kill(op, work, crash_at=f"{anchor}+{rng.uniform(0.0, busy / 2):.4f}"))
            attempts += 1
        for case, outcome in zip(cases, run_cases(prepared, cases), strict=True):
            table[f"{case.op} {'outside' if case.delay is not None else 'inside'}"][outcome] += 1
            killed += outcome[0] != "not-killed"
    report = {key: {f"{raw} -> {settled}": n for (raw, settled), n in sorted(c.items())}
              for key, c in table.items()}
    print(f"\nrandom kills: {killed} of {attempts} commands killed;", json.dumps(report, indent=1))
    assert killed >= RANDOM_KILLS, report
    for op in ops if RANDOM_KILLS >= 80 else ():  # both sides of the commit are hit (at CI size)
        states = {raw for raw, _ in table[f"{op} inside"]} | {raw for raw, _ in table[f"{op} outside"]}
        assert "never-started" in states and states & {"publishing", "completed"}, (op, report)


# --- failures that are not kills ----------------------------------------------------------------------------

def _fail_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", no_space)


def test_temp_files_removed_when_a_write_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk in the middle of each durable writer: it raises and leaves no temporary file."""
    blobs = BlobStore(tmp_path / "blobs")
    (tmp_path / "private").mkdir(mode=0o700)
    _fail_fsync(monkeypatch)
    for write in (lambda: blobs.put(b"data"), lambda: write_atomic(tmp_path / "public" / "f.json", b"{}"),
                  lambda: write_private_file(tmp_path / "private" / "k.key", b"secret")):
        with pytest.raises(OSError):
            write()
    monkeypatch.undo()
    left = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert left == [], left


def test_staged_secrets_are_private_until_the_commit(prepared: Prepared, tmp_path: Path) -> None:
    """Killed just before its commit, a reveal is nowhere public; its staged copy is 0600 in a 0700 folder."""
    case = Kill("retire", tmp_path / "case", crash_at="retire.intent")
    returncode, stderr = launch(prepared, case)
    assert returncode == -signal.SIGKILL, stderr
    store = case.work / "store"
    assert not (store / "seals" / "gen1.reveal.json").exists()
    staged = [p for p in (store / "private" / "staging").rglob("*")]
    assert staged
    for path in staged:
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path
    staged_files = next(json.loads(p.read_bytes())["files"] for p in staged if p.name == "intent.json")
    for item in staged_files:  # not even the content-addressed blobs are out
        digest = item["sha256"]
        assert not (store / "blobs" / "sha256" / digest[:2] / digest).exists()


def test_publish_failure_after_commit_is_finished_by_the_next_command(prepared: Prepared, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk error while publishing (the entries already logged): the command says so (exit 2, the
    environment's fault), the staged files stay, and the next command publishes them."""
    store = tmp_path / "store"
    shutil.copytree(prepared.fixture.store, store)
    import heldout.staging as staging

    def broken(path: Path, data: bytes) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(staging, "write_atomic", broken)
    with command_clock(NOW):
        failed = cli(*operation_args("seal", prepared.fixture), store=store)
    monkeypatch.undo()
    assert failed.exit_code == 2, failed.output
    assert "input/output error" in failed.output
    assert classify(store, prepared.fixture.ledger_id, prepared.before, "seal") == "publishing"
    with command_clock(NOW):
        assert cli("status", store=store).exit_code == 0
    assert check_settled(store, prepared.fixture.ledger_id, prepared.before, prepared.export, "seal", "publishing",
                         tmp_path) == "completed"


def seal_refused(prepared: Prepared, store: Path, monkeypatch: pytest.MonkeyPatch, owner: object, name: str,
                 replacement: object) -> Any:
    """Run the seal with ``owner.name`` replaced; it must fail (exit 2) after logging its pools and intent."""
    monkeypatch.setattr(owner, name, replacement)
    with command_clock(NOW):
        result = cli(*operation_args("seal", prepared.fixture), store=store)
    monkeypatch.undo()
    assert result.exit_code == 2, result.output
    assert classify(store, prepared.fixture.ledger_id, prepared.before, "seal") == "draw-abandoned"
    return result


def test_disk_full_after_the_seal_intent_says_it_is_logged_and_the_rerun_resumes_it(
        prepared: Prepared, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The disk fills up after the pools and the intent are logged, while the seal stages its files: the
    command says that the intent is logged and that running it again resumes it (exit 2, the environment's
    fault; it said only "no space left" as if nothing had happened), and the re-run seals that same intent."""
    store = tmp_path / "store"
    shutil.copytree(prepared.fixture.store, store)
    import heldout.staging as staging

    def no_space(path: Path, data: bytes, mode: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    failed = seal_refused(prepared, store, monkeypatch, staging, "write_synced", no_space)
    intent = len(prepared.before.entries) + 1  # one pool (one task), then the intent
    assert f"the seal intent of gen3 is logged (entry {intent})" in failed.output, failed.output
    assert "no space left" in failed.output and "run the same seal again" in failed.output, failed.output
    with command_clock(NOW):
        resumed = cli(*operation_args("seal", prepared.fixture), "--json", store=store)
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["resumed_intent"] == intent
    assert classify(store, prepared.fixture.ledger_id, prepared.before, "seal") == "completed"


def test_refused_commit_publishes_nothing(prepared: Prepared, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The append refused (another writer came first): the staging folder goes, nothing is published."""
    store = tmp_path / "store"
    shutil.copytree(prepared.fixture.store, store)
    real = Ledger.append_batch

    def raced(self: Ledger, entries: Any, **kwargs: Any) -> list[int]:
        if any(dict(e).get("type") == "seal" for e in entries):  # the pools and intent are logged as usual
            kwargs["expected_size"] = self.size - 1  # as if someone appended after the manifest was signed
        return real(self, entries, **kwargs)

    result = seal_refused(prepared, store, monkeypatch, Ledger, "append_batch", raced)
    assert "another writer appended" in result.output and "resumes the logged intent" in result.output
    assert picture(store, prepared.fixture.ledger_id).staging == []


def test_export_carries_only_files_an_entry_names(prepared: Prepared, tmp_path: Path) -> None:
    """Stray files in seals/ and blobs/ (a forged reveal, a manifest no entry names, an unreferenced blob) stay
    out of ``ledger export``, whatever their names."""
    store = tmp_path / "store"
    shutil.copytree(prepared.fixture.store, store)
    (store / "seals" / "gen1.reveal.json").write_bytes(b'{"cases": "every label of a sealed set"}')
    (store / "seals" / "gen7.seal.json").write_bytes(b'{"generation": "gen7"}')
    real = (store / "seals" / "gen2.seal.json").read_bytes()
    (store / "seals" / "copy-of-gen2.seal.json").write_bytes(real + b" ")
    stray = BlobStore(store / "blobs" / "sha256").put(b"predictions nobody logged")
    exported = export_files(store, prepared.fixture.ledger_id, tmp_path / "out")
    assert exported == prepared.export
    assert f"blobs/sha256/{stray[:2]}/{stray}" not in exported


def test_damaged_intent_is_refused_in_one_line(prepared: Prepared, tmp_path: Path) -> None:
    """A staged intent that is not what an operation writes (hand-edited, truncated): the next command refuses
    with one line naming the folder (exit 1), publishes nothing and deletes nothing."""
    store = tmp_path / "store"
    shutil.copytree(prepared.fixture.store, store)
    folder = store / "private" / "staging" / prepared.fixture.ledger_id / "seal-1-000000000000"
    folder.mkdir(parents=True, mode=0o700)
    for body in (b'{"intent_version": 1, "files": "x"}', b'{"intent_version": 1', b"[]"):
        (folder / "intent.json").write_bytes(body)
        with command_clock(NOW):
            result = cli("status", store=store)
        assert result.exit_code == 1, result.output
        assert "Traceback" not in result.output and str(folder.name) in result.output
        assert (folder / "intent.json").read_bytes() == body
    assert classify(store, prepared.fixture.ledger_id, prepared.before, "seal") == "never-started"


def test_operation_lock_is_reentrant_and_exclusive(prepared: Prepared, tmp_path: Path) -> None:
    """An API caller that holds the lock may call an operation that takes it again (no self-deadlock);
    another process cannot take it meanwhile, and can once it is released."""
    store = tmp_path / "store"
    shutil.copytree(prepared.fixture.store, store)
    st = Store.open(store)
    probe = ("import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR)\n"
             "try: fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
             "except BlockingIOError: sys.exit(3)\n")
    with open_ledger(st) as ledger:
        path = str(lock_path(ledger))
        with generations_lock(ledger, st), generations_lock(ledger, st):
            assert subprocess.run([sys.executable, "-c", probe, path], check=False).returncode == 3
        assert subprocess.run([sys.executable, "-c", probe, path], check=False).returncode == 0


def test_evaluate_logs_all_tasks_or_none(tmp_path: Path) -> None:
    """``evaluate`` on two tasks whose charges together exceed the budget while either alone fits: refused
    (exit 4) with nothing logged and nothing stored, not one bundle of the two."""
    store, data = tmp_path / "store", tmp_path / "data"
    with command_clock(NOW):
        ledger_id = init_store(store)
    shapes = {"bloodmnist": ((28, 28, 3), 8), "breastmnist": ((28, 28), 2)}
    for number, (task, (shape, classes)) in enumerate(shapes.items()):
        write_npz(data / f"{task}.npz", n_test=40, classes=classes, shape=shape, seed=number)
        pool = write_npz(tmp_path / "pool" / f"{task}.npz", n_test=40, classes=classes, shape=shape, seed=10 + number)
        assert cli("pool", "add", task, str(pool), store=store).exit_code == 0
    with command_clock(NOW):
        sealed = cli("seal", "gen1", "--tasks", ",".join(shapes), "--per-task", "20", "--expires", "2027-03-01",
                     "--budget-bits", "3500", store=store)
    assert sealed.exit_code == 0, sealed.output
    before = picture(store, ledger_id)
    with command_clock(NOW):
        both = cli("evaluate", "majority", "--generation", "gen1", "--tasks", ",".join(shapes), "--data-root",
                   str(data), store=store)
    assert both.exit_code == 4, both.output
    after = picture(store, ledger_id)
    assert (after.entries, after.public, after.staging) == (before.entries, before.public, [])
    with command_clock(NOW):
        one = cli("evaluate", "majority", "--generation", "gen1", "--tasks", "bloodmnist", "--data-root",
                  str(data), store=store)
    assert one.exit_code == 0, one.output
    assert len(picture(store, ledger_id).entries) == len(before.entries) + 1
