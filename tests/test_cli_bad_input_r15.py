"""Bad input found by the fifteenth round of outside campaigns, by class:

* times at either end of what a datetime holds: a reference time (``$HELDOUT_NOW``, ``--at``) in the last day of
  year 9999 ended the audit, ``passport verify`` and ``site build`` in an OverflowError traceback (exit 1, read
  as "verification failed"), where a tolerance was added to it. Every such sum now holds at the end of the range
  (``seals.shifted``); each command gives its verdict or a one-line refusal, never a traceback.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from heldout.cli import app
from seals import CLOCK_TOLERANCE, shifted
from tests.formats_support import FormatsFixture, build_formats_export

runner = CliRunner()

END_OF_TIME = ("9999-12-31T12:00:00Z", "9999-12-31T23:59:59Z")
START_OF_TIME = ("0001-01-01T00:00:00Z",)


@pytest.fixture(scope="module")
def formats(tmp_path_factory: pytest.TempPathFactory) -> FormatsFixture:
    return build_formats_export(tmp_path_factory.mktemp("r15"))


def stored_files(store: Path) -> dict[Path, bytes]:
    """The store's files and their bytes (SQLite's shared-memory index aside: readers write it)."""
    return {p: p.read_bytes() for p in store.rglob("*") if p.is_file() and not p.name.endswith("-shm")}


def commands(fixture: FormatsFixture, out: Path) -> dict[str, list[str]]:
    store, export, ledger = str(fixture.store), str(fixture.export), fixture.ledger_id
    passport = str(sorted((fixture.store / "passports").glob("*.json"))[0])
    return {
        "audit": ["audit", ledger, "--store", store, "--out", str(out / "audit.json")],
        "audit --from": ["audit", ledger, "--from", export, "--out", str(out / "audit-export.json")],
        "passport verify": ["passport", "verify", passport, "--store", store],
        "passport verify --from": ["passport", "verify", passport, "--from", export],
        "passport verify offline": ["passport", "verify", passport],
        "site build": ["site", "build", str(out / "site"), "--store", store],
        "site build --from": ["site", "build", str(out / "site-export"), "--from", export],
        "status": ["status", "--store", store],
        "verify-reveal": ["verify-reveal", "gen1", "--store", store],
        "ledger verify": ["ledger", "verify", ledger, "--store", store],
    }


@pytest.mark.parametrize("moment", END_OF_TIME + START_OF_TIME)
@pytest.mark.parametrize("how", ["HELDOUT_NOW", "--at"])
def test_a_reference_time_at_either_end_of_the_range_gets_a_verdict_not_a_traceback(
        formats: FormatsFixture, tmp_path: Path, moment: str, how: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every reading command at a reference time in the first or last day a datetime holds: its verdict (at the
    end of time the generations have expired, their passports too) or a one-line refusal, never a traceback;
    nothing in the store changes."""
    before = stored_files(formats.store)
    ran = 0
    for name, args in commands(formats, tmp_path).items():
        if how == "--at":
            if name not in ("passport verify", "passport verify --from", "passport verify offline", "site build",
                            "site build --from", "verify-reveal"):
                continue
            args = [*args, "--at", moment]
        else:
            monkeypatch.setenv("HELDOUT_NOW", moment)
        result = runner.invoke(app, args)
        ran += 1
        assert result.exception is None or isinstance(result.exception, SystemExit), (name, repr(result.exception))
        assert "Traceback" not in result.output, (name, result.output)
        if result.exit_code == 2:
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            assert len(lines) == 1 and lines[0].startswith("heldout: error: "), (name, result.stderr)
    assert ran >= 6
    after = stored_files(formats.store)
    assert {p for p in after if before.get(p) != after[p]} <= {p for p in after if "audit" in p.parts}, \
        "a reading command wrote into the store"  # (the audit writes its report there)


def test_shifted_holds_at_the_ends_of_the_range() -> None:
    end = datetime.max.replace(tzinfo=UTC)
    start = datetime.min.replace(tzinfo=UTC)
    assert shifted(end - timedelta(hours=1), CLOCK_TOLERANCE) == end
    assert shifted(start + timedelta(hours=1), -CLOCK_TOLERANCE) == start
    assert shifted(datetime(2026, 1, 1, tzinfo=UTC), CLOCK_TOLERANCE) == datetime(2026, 1, 2, tzinfo=UTC)
    assert shifted(datetime(2026, 1, 2, tzinfo=UTC), -CLOCK_TOLERANCE) == datetime(2026, 1, 1, tzinfo=UTC)
    assert shifted(datetime.max, CLOCK_TOLERANCE) == datetime.max  # a naive time stays naive


def test_the_demo_started_too_near_the_end_of_time_is_refused_before_it_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo dates its generations' expiry up to 120 days ahead: at $HELDOUT_NOW in the last months of year
    9999 it is refused in one line before the store is made (or an earlier demo store rebuilt)."""
    monkeypatch.setenv("HELDOUT_NOW", "9999-12-31T00:00:00Z")
    result = runner.invoke(app, ["demo", "--store", str(tmp_path / "demo")])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("heldout: error: the demo dates things up to 120 days") and \
        len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "demo").exists()
