"""A reference time given ahead of the machine's clock (``--at``, ``$HELDOUT_NOW``) cannot date a ledger entry.

The ledger's time only moves forward, so one entry dated in 2062 (a mistyped year) would refuse every append
made on the real date until 2062, on a log nobody can rewrite. Every writing command goes through the store's
ledgers (``open_ledger``, ``create_ledger``), which bound what an append may date by the machine's clock plus
the clock tolerance; a rehearsal (``$HELDOUT_REHEARSAL=1``: the demo, the tests) runs at any time on a store
of its own. Here the machine's clock is a fixed time, so no test depends on today's date.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

import heldout.generations.ledgers as ledgers
from heldout.cli import app
from heldout.generations import open_ledger
from heldout.store import Store
from tests.generations_support import init_store, store_with_pools

runner = CliRunner()
CLOCK = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def machine_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's clock reads CLOCK, and this is no rehearsal."""
    monkeypatch.setattr(ledgers, "system_clock", lambda: CLOCK)
    monkeypatch.delenv(ledgers.REHEARSAL_ENV, raising=False)


def ledger_size(store: Path) -> int:
    with open_ledger(Store.open(store), read_only=True) as ledger:
        return ledger.size


def append_note(store: Path, text: str, *, at: str | None = None) -> object:
    args = ["ledger", "append", "--type", "note", "--json-file", "-", "--store", str(store)]
    env = {"HELDOUT_NOW": at} if at is not None else {}
    return runner.invoke(app, args, input=json.dumps({"text": text}), env=env)


def error_of(result: object) -> str:
    stderr: str = result.stderr  # type: ignore[attr-defined]
    assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
    assert "Traceback" not in stderr
    return stderr


def test_an_append_dated_years_ahead_of_the_clock_is_refused_and_the_log_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELDOUT_NOW", "2026-03-01T12:00:00Z")
    store = tmp_path / "store"
    init_store(store)
    before = ledger_size(store)
    stderr = error_of(append_note(store, "mistyped year", at="2062-03-01T12:00:00Z"))
    assert "2062-03-01T12:00:00Z" in stderr and "machine's clock" in stderr and "HELDOUT_REHEARSAL" in stderr
    assert ledger_size(store) == before  # nothing written
    # ... so an append on the real date still goes through (a logged 2062 entry would refuse it until 2062)
    assert append_note(store, "on the real date", at="2026-03-01T13:00:00Z").exit_code == 0  # type: ignore[attr-defined]
    assert ledger_size(store) == before + 1


def test_an_entry_whose_own_date_runs_ahead_of_the_clock_is_refused(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound is on what an entry is dated, whichever time dated it: a created_utc written in the input
    within a day of a --at that itself runs ahead."""
    monkeypatch.setenv("HELDOUT_NOW", "2026-03-01T12:00:00Z")
    store = tmp_path / "store"
    init_store(store)
    before = ledger_size(store)
    entry = {"text": "dated by hand", "created_utc": "2026-03-03T12:00:00Z"}
    result = runner.invoke(app, ["ledger", "append", "--type", "note", "--json-file", "-", "--store", str(store)],
                           input=json.dumps(entry), env={"HELDOUT_NOW": "2026-03-03T00:00:00Z"})
    assert "2026-03-03T12:00:00Z" in error_of(result)
    assert ledger_size(store) == before


def test_a_ledger_created_ahead_of_the_clock_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    store = tmp_path / "store"
    result = runner.invoke(app, ["init", "--store", str(store), "--name", "lab"], env={"HELDOUT_NOW": "2062-03-01"})
    assert "machine's clock" in error_of(result)
    assert not list(store.glob("ledgers/*.sqlite"))


def test_a_seal_dated_ahead_of_the_clock_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELDOUT_NOW", "2026-03-01T12:00:00Z")
    store, _, _ = store_with_pools(tmp_path)
    before = ledger_size(store)
    seal = ["seal", "gen1", "--tasks", "bloodmnist", "--per-task", "10", "--expires", "2062-06-01",
            "--budget-bits", "5000", "--store", str(store)]
    result = runner.invoke(app, seal, env={"HELDOUT_NOW": "2062-03-01T12:00:00Z"})
    assert "machine's clock" in error_of(result)
    assert ledger_size(store) == before
    status = runner.invoke(app, ["status", "--json", "--store", str(store)])
    assert status.exit_code == 0 and "gen1" not in status.output


def test_a_day_ahead_is_within_the_clock_tolerance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELDOUT_NOW", "2026-03-01T12:00:00Z")
    store = tmp_path / "store"
    init_store(store)
    assert append_note(store, "tomorrow", at="2026-03-02T12:00:00Z").exit_code == 0  # type: ignore[attr-defined]
    error_of(append_note(store, "a second later", at="2026-03-02T12:00:01Z"))


def test_a_rehearsal_runs_at_any_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ledgers.REHEARSAL_ENV, "1")
    monkeypatch.setenv("HELDOUT_NOW", "2062-03-01T12:00:00Z")
    store = tmp_path / "store"
    init_store(store)
    assert append_note(store, "next year's rehearsal").exit_code == 0  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", ["yes", "0 ", "true", "2"])
def test_a_rehearsal_switch_that_is_not_1_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           value: str) -> None:
    monkeypatch.setenv("HELDOUT_NOW", "2026-03-01T12:00:00Z")
    store = tmp_path / "store"
    init_store(store)
    monkeypatch.setenv(ledgers.REHEARSAL_ENV, value)
    assert "HELDOUT_REHEARSAL" in error_of(append_note(store, "note"))
