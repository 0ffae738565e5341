"""A demo-like store for the site tests, built without torch (``tests.audit_support``: synthetic bundles of the
``majority``-style made-up models): public, gen1 and gen2 sealed; passports issued after clean audits (one
re-issued, so the first is superseded); gen1 retired and revealed (its passport lapses); a public export."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner, Result

from heldout.cli import app
from tests.audit_support import build_store, command_clock

ISSUE_AT = "2026-09-02T00:00:00Z"
SITE_AT = "2026-10-01T00:00:00Z"  # gen2 and public current, gen1 retired
runner = CliRunner()


@dataclass(frozen=True)
class SiteFixture:
    store: Path
    export: Path
    ledger_id: str
    key_b64: str


def run(*args: str) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"crashed: {result.exception!r}\n{result.output}")
    return result


def build_site_store(root: Path) -> SiteFixture:
    fixture = build_store(root)
    store = str(fixture.store)
    with command_clock(ISSUE_AT):
        for model, generation in (("model_0", "gen1"), ("model_0", "gen2"), ("model_1", "gen2"),
                                  ("model_1", "gen2"), ("model_0", "public")):
            audited = run("audit", fixture.ledger_id, "--store", store)
            assert audited.exit_code == 0, audited.output
            issued = run("passport", "issue", model, "--generation", generation, "--store", store)
            assert issued.exit_code == 0, issued.output
        retired = run("retire", "gen1", "--reason", "superseded", "--reveal", "--store", store)
        assert retired.exit_code == 0, retired.output
        exported = run("ledger", "export", fixture.ledger_id, str(root / "export"), "--store", store)
        assert exported.exit_code == 0, exported.output
    return SiteFixture(store=fixture.store, export=root / "export", ledger_id=fixture.ledger_id,
                       key_b64=fixture.key_b64)


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
