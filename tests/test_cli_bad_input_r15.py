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


# --- hostile file names in evidence ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_export(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    from tests.test_cli_bad_input_edges import store_and_export

    return store_and_export(tmp_path_factory.mktemp("r15-names"))


def _walk_json(value: object) -> None:
    """Fail on what an I-JSON reader refuses or a UTF-8 writer cannot write."""
    if isinstance(value, str):
        value.encode("utf-8")
    elif isinstance(value, bool) or value is None or isinstance(value, float):
        return
    elif isinstance(value, int):
        assert -(2**53) < value < 2**53, value
    elif isinstance(value, list):
        for item in value:
            _walk_json(item)
    else:
        assert isinstance(value, dict)
        for key, item in value.items():
            _walk_json(key)
            _walk_json(item)


@pytest.mark.parametrize("stray", [b"checkpoints/\xff.note", b"seals/gen9\xff.seal.json", b"blobs/sha256/\xfe",
                                   b"keys/\xff.pub.json", ("checkpoints/" + "1" * 250 + ".note").encode()])
def test_a_hostile_file_name_is_named_in_the_report_not_the_end_of_it(
        small_export: tuple[Path, Path, str], tmp_path: Path, stray: bytes) -> None:
    """A stray file whose name is not UTF-8, or a checkpoint named by 250 digits: the audit named it, then failed
    writing its report ("not canonicalisable", "exceeds the I-JSON safe range"), and ``ledger verify --json``
    printed lone-surrogate escapes and a 250-digit integer (red-team round 15). Evidence is made JSON-safe where
    errors are made (``keys.errors``): the report is written, naming the file, and ``--json`` is I-JSON."""
    import json
    import shutil

    _, export, ledger_id = small_export
    crafted = tmp_path / "export"
    shutil.copytree(export, crafted)
    with open(bytes(crafted) + b"/" + stray, "wb") as handle:
        handle.write(b"x")
    report = tmp_path / "report.json"
    audited = runner.invoke(app, ["audit", ledger_id, "--from", str(crafted), "--out", str(report), "--jobs", "1"])
    assert audited.exit_code == 1, audited.output
    assert audited.exception is None or isinstance(audited.exception, SystemExit), repr(audited.exception)
    written = json.loads(report.read_text(encoding="utf-8"))
    _walk_json(written)
    assert written["findings"], written
    verified = runner.invoke(app, ["ledger", "verify", ledger_id, "--from", str(crafted), "--json"])
    assert verified.exit_code == 1, verified.output
    _walk_json(json.loads(verified.stdout))


def test_a_published_reveal_whose_blob_is_listed_missing_gets_one_verdict(formats: FormatsFixture,
                                                                          tmp_path: Path) -> None:
    """The reveal blob listed in ``missing_blobs``, ``seals/gen1.reveal.json`` published with the hash the entry
    names: heldout accepted it (rule 9: nothing to check but the published file's hash), the independent replay
    refused it ("is not the reveal entry names": it compared the file with the absent blob). One verdict; and a
    published file with another hash is refused by both."""
    import hashlib
    import json
    import shutil

    from tests.independent.replay import ReplayFailure, replay_export

    crafted = tmp_path / "export"
    shutil.copytree(formats.export, crafted)
    entries = [json.loads(line) for line in (crafted / "entries.jsonl").read_text().splitlines()]
    digest = next(e["reveal_sha256"] for e in entries if e["type"] == "reveal" and e["generation"] == "gen1")
    (crafted / "blobs" / "sha256" / digest[:2] / digest).unlink()
    manifest = json.loads((crafted / "export.json").read_text())
    manifest["blobs"].remove(digest)
    manifest["missing_blobs"] = sorted([*manifest["missing_blobs"], digest])
    (crafted / "export.json").write_text(json.dumps(manifest, sort_keys=True, separators=(",", ":")) + "\n")
    published = crafted / "seals" / "gen1.reveal.json"
    assert hashlib.sha256(published.read_bytes()).hexdigest() == digest
    assert runner.invoke(app, ["ledger", "verify", formats.ledger_id, "--from", str(crafted)]).exit_code == 0
    replay_export(crafted, formats.ledger_id)
    published.write_bytes(published.read_bytes() + b" ")
    assert runner.invoke(app, ["ledger", "verify", formats.ledger_id, "--from", str(crafted)]).exit_code == 1
    with pytest.raises(ReplayFailure, match="is not the reveal entry"):
        replay_export(crafted, formats.ledger_id)


def test_messages_name_the_real_cause(formats: FormatsFixture, tmp_path: Path) -> None:
    """A folder given as --key was decoded as base64 ("--key decodes to 3 bytes"), an empty key file "decodes to
    0 bytes", and tiles whose first run stopped before the checkpoint were "not a ledger export (no
    export.json)" (red-team round 15). Each now says what it is, in one line, exit 2."""
    export, ledger_id = formats.export, formats.ledger_id
    (tmp_path / "adir").mkdir()
    (tmp_path / "empty.key").write_bytes(b"")
    half = tmp_path / "half"
    (half / "tile" / "0").mkdir(parents=True)
    (half / "heldout-tiles.json").write_bytes(b"")
    passport = str(sorted((formats.store / "passports").glob("*.json"))[0])
    for args, words in (
            (["passport", "verify", passport, "--from", str(export), "--key", str(tmp_path / "adir")],
             "is a folder, not a key or a key file"),
            (["passport", "verify", passport, "--from", str(export), "--key", str(tmp_path / "empty.key")],
             "empty.key is empty; an Ed25519 public key is 32 bytes"),
            (["ledger", "verify", ledger_id, "--from", str(half)], "holds tiles but no checkpoint")):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and words in lines[0], (args, result.stderr)


@pytest.mark.parametrize(("source", "words"), [
    ("postgresql:///heldout?host=/tmp/pg&user=lab", "is a database URL, not a public copy of a log"),
    ("s3://bucket/log", "s3://bucket/log is a URL, not a public copy of a log")])
def test_a_url_that_no_public_copy_has_is_named_as_such(formats: FormatsFixture, source: str, words: str) -> None:
    """`--from postgresql:///db?...` was read as a path and named "postgresql:/db?..." ("no export or tiles
    directory at"), nothing saying that a database is read through its store (red-team round 16)."""
    for args in (["ledger", "verify", formats.ledger_id, "--from", source],
                 ["audit", formats.ledger_id, "--from", source]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and source in lines[0] and words in lines[0], (args, result.stderr)
