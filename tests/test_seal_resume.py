"""A seal killed after its pools and intent are logged, and before its seal entry (heldout/generations/seal.py,
"resume"): the re-run resumes the logged intent from the pending draw instead of logging a second one.

Each killed run is the real ``heldout seal`` in a child forked from this process that SIGKILLs itself at a chosen
point after the intent is committed: at the first line of the draw, at the start of the staging
(``HELDOUT_CRASH_AT=seal.staging``) or just before the seal entry's append (``seal.intent``, the staging's own
intent file). Then the re-run exits 0, the ledger holds one intent for the generation, the audit finds nothing,
and the draw is the one the intent's checkpoint selects from the committed pool. A re-run that asks for other
parameters is refused, and so is an intent whose pending draw is lost unless ``--retry-draw`` (the audit then
reports the retried draw); no pending draw outlives its seal.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from heldout.cli import app
from heldout.generations import seal as seal_module
from heldout.generations.access import pending_draw_path
from heldout.generations.commitments import set_hash
from heldout.generations.draw import PoolRef
from heldout.generations.reveal import CaseOpening
from heldout.store import Store
from ledger import Ledger
from tests.cli_support import in_forked_child
from tests.generations_support import EXPIRES, NOW, cli, openings, snapshot, store_with_pools

TASKS = "bloodmnist,breastmnist"
GEN3 = ["seal", "gen3", "--tasks", TASKS, "--per-task", "20", "--expires", EXPIRES, "--budget-bits", "5000"]


@pytest.fixture
def pooled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A store with a bloodmnist and a breastmnist pool (200 cases each) and no generation; (store, ledger id)."""
    monkeypatch.setenv("HELDOUT_NOW", NOW)
    monkeypatch.delenv("HELDOUT_CRASH_AT", raising=False)
    store, ledger_id, _ = store_with_pools(tmp_path)
    return store, ledger_id


# --- killing the real command ------------------------------------------------------------------------------------

def _die(*args: Any, **kwargs: Any) -> Any:
    os.kill(os.getpid(), signal.SIGKILL)


def run_killed(argv: list[str], store: Path, *, crash_at: str | None = None,
               patch: tuple[str, Callable[..., Any]] | None = None) -> int | None:
    """``heldout argv --store STORE`` in a forked child killed with SIGKILL at ``crash_at`` (a staging crash point)
    or when it calls ``seal_module.<patch[0]>``; None when it was killed, else its exit code."""
    def child() -> int:
        if crash_at is not None:
            os.environ["HELDOUT_CRASH_AT"] = crash_at
        if patch is not None:
            setattr(seal_module, patch[0], patch[1])
        return CliRunner().invoke(app, [*argv, "--store", str(store)]).exit_code

    return in_forked_child(child)


KILL_POINTS: dict[str, dict[str, Any]] = {
    "first line of the draw": {"patch": ("_draw", _die)},
    "start of the staging": {"crash_at": "seal.staging"},
    "just before the seal entry's append": {"crash_at": "seal.intent"},
}


def kill_after_intent(store: Path, argv: list[str] = GEN3, point: str = "start of the staging") -> None:
    assert run_killed(argv, store, **KILL_POINTS[point]) is None, f"the seal was not killed at the {point}"


# --- reading the store -------------------------------------------------------------------------------------------

def entries(store: Path, ledger_id: str) -> list[tuple[int, dict[str, Any]]]:
    """The ledger's entries, read directly (no recovery runs)."""
    with Ledger.open(Ledger.locate(store / "ledgers", ledger_id)) as ledger:
        return list(ledger.entries())


def intents_of(store: Path, ledger_id: str, generation: str = "gen3") -> list[int]:
    return [i for i, e in entries(store, ledger_id) if e["type"] == "intent" and e["generation"] == generation]


def seals_of(store: Path, ledger_id: str, generation: str = "gen3") -> list[int]:
    return [i for i, e in entries(store, ledger_id) if e["type"] == "seal" and e["generation"] == generation]


def pending_file(store: Path, ledger_id: str, generation: str = "gen3") -> Path:
    return pending_draw_path(Store.open(store), ledger_id, generation)


def audit(store: Path, ledger_id: str) -> tuple[int, list[dict[str, Any]]]:
    result = cli("audit", ledger_id, "--json", "--jobs", "1", store=store)
    return result.exit_code, list(json.loads(result.output)["findings"])


def status_pending(store: Path) -> list[dict[str, Any]]:
    result = cli("status", "--json", store=store)
    assert result.exit_code == 0, result.output
    return list(json.loads(result.output)["pending_intents"])


def seal_json(store: Path, argv: list[str] = GEN3) -> dict[str, Any]:
    result = cli(*argv, "--json", store=store)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output))


def uninterrupted_draw(store: Path, ledger_id: str, intent_index: int, saved: dict[str, Any]
                       ) -> tuple[str, set[str]]:
    """(seed hex, drawn case ids) that the draw of an uninterrupted seal gives from the intent's checkpoint and the
    candidates the killed run saved (the same function the seal calls, on the raw ledger)."""
    candidates = {task: sorted((CaseOpening(case_id=row[0], task=task, content_sha256=row[1], label=row[2],
                                            salt=bytes.fromhex(row[3])) for row in rows), key=lambda o: o.commitment)
                  for task, rows in saved["candidates"].items()}
    intent = dict(entries(store, ledger_id))[intent_index]
    pools = {task: PoolRef(intent["pools"][task], set_hash([o.commitment for o in openings]), len(openings))
             for task, openings in candidates.items()}
    with Ledger.open(Ledger.locate(store / "ledgers", ledger_id)) as ledger:
        record, drawn = seal_module._draw(ledger, "gen3", intent_index, pools, candidates, 20, None)
    return record.seed, {o.case_id for o in drawn}


# --- the tests ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("point", sorted(KILL_POINTS))
def test_a_seal_killed_after_its_intent_is_resumed_with_one_intent_and_a_clean_audit(
        pooled: tuple[Path, str], point: str) -> None:
    store, ledger_id = pooled
    kill_after_intent(store, point=point)
    [first] = intents_of(store, ledger_id)
    assert seals_of(store, ledger_id) == []
    path = pending_file(store, ledger_id)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved = json.loads(path.read_bytes())
    assert [(p["generation"], p["intent_index"], p["resumable_here"]) for p in status_pending(store)] == \
        [("gen3", first, True)]

    result = seal_json(store)

    assert result["resumed_intent"] == first
    assert intents_of(store, ledger_id) == [first]
    manifest = json.loads((store / "seals" / "gen3.seal.json").read_text())
    assert manifest["draw"]["intent_index"] == first
    seed, drawn = uninterrupted_draw(store, ledger_id, first, saved)
    assert manifest["draw"]["seed"] == seed
    assert {case["case_id"] for case in openings(store, "gen3")} == drawn
    assert audit(store, ledger_id) == (0, [])
    assert status_pending(store) == []
    assert not path.exists() and not path.parent.exists()


def test_the_rerun_of_the_killed_command_line_itself_is_resumed(pooled: tuple[Path, str]) -> None:
    """The red-team repro: ``HELDOUT_CRASH_AT=seal.intent heldout seal gen3 ...``, then the same line again."""
    store, ledger_id = pooled
    kill_after_intent(store, point="just before the seal entry's append")
    result = cli(*GEN3, store=store)
    assert result.exit_code == 0, result.output
    assert "resumed the seal intent of gen3" in result.output
    assert len(intents_of(store, ledger_id)) == 1 and len(seals_of(store, ledger_id)) == 1
    assert cli("ledger", "verify", store=store).exit_code == 0
    assert audit(store, ledger_id) == (0, [])


@pytest.mark.parametrize("other", [["--per-task", "21"], ["--expires", "2027-04-01"], ["--ladder-step", "5"],
                                   ["--tasks", "bloodmnist"]], ids=["per-task", "expiry", "release", "tasks"])
def test_a_rerun_with_other_parameters_is_refused_and_writes_nothing(pooled: tuple[Path, str],
                                                                     other: list[str]) -> None:
    store, ledger_id = pooled
    kill_after_intent(store)
    [first] = intents_of(store, ledger_id)
    assert cli("status", store=store).exit_code == 0  # the recovery discards the killed staging folder first
    before = snapshot(store)
    option, value = other
    argv = list(GEN3)
    if option in argv:
        argv[argv.index(option) + 1] = value
    else:
        argv += other
    refused = cli(*argv, store=store)
    assert refused.exit_code == 2, refused.output
    assert "a pending draw of gen3 exists with other parameters" in refused.output
    assert f"entry {first}" in refused.output
    assert snapshot(store) == before
    assert seal_json(store)["resumed_intent"] == first  # the intent's own parameters still finish it
    assert audit(store, ledger_id) == (0, [])


def test_a_pending_intent_without_its_pending_draw_is_refused_unless_retry_draw(pooled: tuple[Path, str]) -> None:
    store, ledger_id = pooled
    kill_after_intent(store)
    [first] = intents_of(store, ledger_id)
    pending_file(store, ledger_id).unlink()  # the salts of the committed pools are lost
    assert [(p["intent_index"], p["resumable_here"]) for p in status_pending(store)] == [(first, False)]
    before = snapshot(store)
    refused = cli(*GEN3, store=store)
    assert refused.exit_code == 2, refused.output
    message = " ".join(refused.output.split())
    assert f"the seal intent of gen3 at entry {first} was logged and never sealed" in message
    assert "retried draw" in message and "--retry-draw" in message
    assert snapshot(store) == before

    retried = seal_json(store, [*GEN3, "--retry-draw"])
    assert retried["resumed_intent"] is None
    [_, second] = intents_of(store, ledger_id)
    manifest = json.loads((store / "seals" / "gen3.seal.json").read_text())
    assert manifest["draw"]["intent_index"] == second
    code, findings = audit(store, ledger_id)
    assert code == 1
    assert [f["check"] for f in findings] == ["draw"]
    assert f"the seal intent of gen3 was logged 2 times (entries {first}, {second})" in findings[0]["message"]
    assert not pending_file(store, ledger_id).exists()


def test_a_pending_draw_of_another_attempt_is_not_resumed(pooled: tuple[Path, str]) -> None:
    """A pending draw that does not rebuild the logged pools (its salts are not the committed ones) is never used:
    the seal is refused as for a lost one."""
    store, ledger_id = pooled
    kill_after_intent(store)
    path = pending_file(store, ledger_id)
    doc = json.loads(path.read_bytes())
    doc["candidates"]["bloodmnist"][0][3] = "00" * 32
    path.write_bytes(json.dumps(doc).encode())
    refused = cli(*GEN3, store=store)
    assert refused.exit_code == 2, refused.output
    assert "does not rebuild the bloodmnist pool entry" in " ".join(refused.output.split())
    assert len(intents_of(store, ledger_id)) == 1 and seals_of(store, ledger_id) == []


def test_a_pending_draw_whose_cases_were_sealed_since_is_not_resumed(pooled: tuple[Path, str]) -> None:
    """gen4 sealed while gen3's draw was pending takes cases of gen3's committed pool: resuming gen3 could draw
    them again, so it is refused (generations stay disjoint)."""
    store, ledger_id = pooled
    kill_after_intent(store)
    seal_json(store, ["seal", "gen4", *GEN3[2:]])
    refused = cli(*GEN3, store=store)
    assert refused.exit_code == 2, refused.output
    assert "has since been sealed in another generation" in " ".join(refused.output.split())
    assert len(intents_of(store, ledger_id)) == 1 and seals_of(store, ledger_id) == []


def test_no_pending_draw_remains_after_a_seal(pooled: tuple[Path, str], monkeypatch: pytest.MonkeyPatch) -> None:
    store, ledger_id = pooled
    path = pending_file(store, ledger_id)
    real = seal_module._draw
    seen: list[bool] = []

    def drawing(*args: Any) -> Any:  # the pending draw is on disk while the logged intent is drawn
        seen.append(path.is_file())
        return real(*args)

    monkeypatch.setattr(seal_module, "_draw", drawing)
    seal_json(store)
    assert seen == [True]
    assert not path.exists() and not (store / "private" / "pending-draws").exists()


def test_a_publish_failing_after_the_commit_removes_the_pending_draw(pooled: tuple[Path, str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk error while publishing, the seal entry already logged: the next command publishes the staged files;
    the generation is sealed, so its pending draw is gone already."""
    import heldout.staging as staging

    store, ledger_id = pooled

    def broken(path: Path, data: bytes) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(staging, "write_atomic", broken)
    failed = cli(*GEN3, store=store)
    monkeypatch.undo()
    assert failed.exit_code == 2, failed.output
    assert len(seals_of(store, ledger_id)) == 1 and not pending_file(store, ledger_id).exists()
    assert audit(store, ledger_id) == (0, [])


def test_a_pending_draw_left_by_a_seal_killed_after_its_commit_goes_with_the_next_seal(
        pooled: tuple[Path, str]) -> None:
    store, ledger_id = pooled
    assert run_killed(GEN3, store, crash_at="seal.done") is None  # committed and published, not yet cleaned
    path = pending_file(store, ledger_id)
    assert seals_of(store, ledger_id) and path.is_file()
    dead = subprocess.Popen(["true"])
    dead.wait()
    half_written = path.with_name(f".{path.name}.tmp{dead.pid}")  # what a write killed halfway leaves
    half_written.write_bytes(b"{")
    assert cli(*GEN3, store=store).exit_code == 2  # already sealed; its leftover pending draw goes
    assert not path.exists() and not half_written.exists()
    assert audit(store, ledger_id) == (0, [])


def test_a_seal_killed_before_its_intent_is_logged_starts_afresh(pooled: tuple[Path, str]) -> None:
    store, ledger_id = pooled
    assert run_killed(GEN3, store, patch=("_commit_and_intend", _die)) is None
    assert pending_file(store, ledger_id).is_file() and intents_of(store, ledger_id) == []
    result = seal_json(store)
    assert result["resumed_intent"] is None
    assert len(intents_of(store, ledger_id)) == 1 and not pending_file(store, ledger_id).exists()
    assert audit(store, ledger_id) == (0, [])


def test_a_killed_thresholdout_seal_resumes_with_its_noise_secret(pooled: tuple[Path, str]) -> None:
    """The intent's release commits to the noise secret's SHA-256: the pending draw keeps the secret."""
    store, ledger_id = pooled
    argv = [*GEN3, "--thresholdout", "--threshold", "4", "--sigma", "1"]
    kill_after_intent(store, argv)
    [first] = intents_of(store, ledger_id)
    assert seal_json(store, argv)["resumed_intent"] == first
    assert audit(store, ledger_id) == (0, [])
