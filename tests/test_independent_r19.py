"""Red-team round 19 (stranger) against the independent replay (tests/independent/replay.py): a crafted export on
which it crashed or held unbounded memory where heldout refuses with bounded work. The replay cross-checks
heldout's verifiers, so it must refuse what they refuse with its own failure, never a traceback, and stay
bounded as they do:

1. JSON nested 3,000 deep (FORMATS section 2 allows 64, counted before parsing): a RecursionError traceback;
2. a reveal image npz with a DEFLATE member that expands 1,000:1: inflated whole (GBs);
3. every blob file read into memory and kept to the end (eight unreferenced 8 MiB files: the replay's peak grew by
   each one before it refused them);

and, from the operator's campaign, rule 10 checks the audit made and the replay did not (each export below was
refused by the third-party audit and accepted by the replay): a Thresholdout public estimate made up, and a ladder
value that its evaluation, published at retirement, refutes (FORMATS section 15 rule 10 now states both). A
full-release bundle whose blobs are listed missing stays the documented difference (sections 14 and 18).
"""

from __future__ import annotations

import hashlib
import io
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from heldout.cli import app
from tests.audit_support import build_store, command_clock
from tests.independent import replay
from tests.independent.replay import ReplayFailure, replay_export

runner = CliRunner()
NOW = "2026-09-01T00:00:00Z"
LATER = "2026-09-02T00:00:00Z"


def test_json_nested_past_64_levels_is_refused_before_parsing() -> None:
    for deep in (b"[" * 3000 + b"]" * 3000, b'{"a":' * 3000 + b"1" + b"}" * 3000):
        with pytest.raises(ValueError, match="64 levels"):
            replay.parse_json(deep)
        with pytest.raises(ReplayFailure, match="64 levels"):
            replay.canonical_document("export.json", deep, newline=False)
    assert replay.parse_json(b"[" * 64 + b"]" * 64) == eval("[" * 63 + "[]" + "]" * 63)  # (64 is allowed)
    # brackets inside strings are text, not nesting
    assert replay.parse_json(b'["' + b"[{" * 500 + b'"]') == ["[{" * 500]


def test_a_reveal_npz_that_inflates_past_its_ratio_is_refused_while_read() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive, \
            archive.open("pad.npy", "w") as member:
        for _ in range(16):
            member.write(bytes(1 << 20))  # 16 MiB of zeros: ~16 KiB deflated, 1000:1
    with pytest.raises(ValueError, match="zip bomb"):
        replay.read_npz(buffer.getvalue())


def test_unreferenced_blob_files_are_not_all_held_in_memory(tmp_path: Path) -> None:
    fixture = build_store(tmp_path / "fx", bundles_per_generation=1, n_public=30, per_task=20)
    export = tmp_path / "export"
    with command_clock(LATER):
        assert runner.invoke(app, ["ledger", "export", fixture.ledger_id, str(export), "--store",
                                   str(fixture.store)]).exit_code == 0
    assert replay_export(export, fixture.ledger_id).blobs_checked > 0  # (honest: replays)
    size = 8 << 20
    for k in range(8):
        data = bytes([k]) * size
        digest = hashlib.sha256(data).hexdigest()
        (export / "blobs" / "sha256" / digest[:2]).mkdir(exist_ok=True)
        (export / "blobs" / "sha256" / digest[:2] / digest).write_bytes(data)
        del data
    tracemalloc.start()
    try:
        with pytest.raises(ReplayFailure, match="referenced by no entry"):
            replay_export(export, fixture.ledger_id)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * size, peak  # one file at a time (all eight: 64 MiB)


# --- rule 10: what the audit checked of a withheld or missing bundle and the replay did not ----------------------

def _verdicts(store: Path, ledger_id: str, tmp_path: Path) -> tuple[int, str]:
    """The third-party audit's exit code on an export of ``store``, and the replay's failure (or "")."""
    export = tmp_path / "export"
    with command_clock(LATER):
        assert runner.invoke(app, ["ledger", "export", ledger_id, str(export), "--store", str(store)]).exit_code == 0
        audited = runner.invoke(app, ["audit", ledger_id, "--from", str(export), "--jobs", "1", "--out",
                                      str(tmp_path / "report.json")])
    try:
        replay_export(export, ledger_id)
    except ReplayFailure as exc:
        return audited.exit_code, str(exc)
    return audited.exit_code, ""


def test_a_made_up_thresholdout_public_estimate_is_refused_by_the_replay_too(tmp_path: Path) -> None:
    """A Thresholdout bundle whose release states 97 as the public estimate (and, below the threshold, as its
    value) where the model's cited public run scores far lower: the audit refused, the replay accepted."""
    from tests.audit_support import add_bundle, log_withheld_bundle
    from tests.test_release_budget import thresholdout_store

    store, ledger_id, data = thresholdout_store(tmp_path)
    with command_clock(NOW):
        public = add_bundle(store, "public", "liar", seed=5, skill=0.05, data_root=data)
        log_withheld_bundle(store, "gen1", "liar", seed=5, skill=0.05, release=lambda ledger, state: {
            "mode": "thresholdout", "value": 97, "label_dependent": False, "bits": 0.0,
            "score": "dimensions.accuracy.score", "public_estimate": 97, "public_bundle": public})
    code, failure = _verdicts(store, ledger_id, tmp_path)
    assert code == 1
    assert f"public_estimate is not the released score of public bundle {public}" in failure


def test_a_ladder_value_its_published_evaluation_refutes_is_refused_by_the_replay_too(tmp_path: Path) -> None:
    """A ladder "improvement" to 95 for a weak model (on the grid, above the best, charged right), then the
    generation retired with its reveal: the evaluation is public, and its score is far below 95."""
    from tests.audit_support import log_withheld_bundle, withholding_store

    store, _, ledger_id = withholding_store(tmp_path, (
        "seal", "gen1", "--tasks", "bloodmnist", "--per-task", "80", "--expires", "2027-03-01", "--budget-bits",
        "400", "--ladder-step", "1"), pool_cases=120)
    with command_clock(NOW):
        log_withheld_bundle(store, "gen1", "liar", seed=5, skill=0.05, release=lambda ledger, state: {
            "mode": "ladder", "value": 95, "label_dependent": True, "bits": 7.658211,
            "score": "dimensions.accuracy.score"})
    with command_clock(LATER):
        assert runner.invoke(app, ["retire", "gen1", "--reason", "expired", "--reveal", "--store",
                                   str(store)]).exit_code == 0
    code, failure = _verdicts(store, ledger_id, tmp_path)
    assert code == 1
    assert "its released value is not the ladder's answer" in failure


def test_a_full_release_bundle_whose_blobs_are_listed_missing_is_never_reported_verified(tmp_path: Path) -> None:
    """An export that lists a full-release bundle's evaluation and predictions as missing (the round-19 operator
    had under-charged it): nothing of the bundle, its charge included, can be checked. FORMATS section 14 keeps
    such an export valid for the replay, which lists the blobs as not checked (section 18 states the difference):
    the third-party audit fails it, naming the missing blob."""
    import json
    import os

    import rfc8785

    fixture = build_store(tmp_path / "fx", bundles_per_generation=1, n_public=30, per_task=20)
    export = tmp_path / "export"
    with command_clock(LATER):
        assert runner.invoke(app, ["ledger", "export", fixture.ledger_id, str(export), "--store",
                                   str(fixture.store)]).exit_code == 0
    lines = (export / "entries.jsonl").read_text().splitlines()
    index = max(i for i, line in enumerate(lines) if json.loads(line)["type"] == "bundle"
                and json.loads(line)["generation"] == "public")
    manifest = json.loads((export / "export.json").read_text())
    withheld = [json.loads(lines[index])[member] for member in ("evaluation_sha256", "predictions_sha256")]
    for digest in withheld:
        os.unlink(export / "blobs" / "sha256" / digest[:2] / digest)
        manifest["blobs"] = [b for b in manifest["blobs"] if b != digest]
        manifest["missing_blobs"] = sorted([*manifest["missing_blobs"], digest])
    (export / "export.json").write_bytes(rfc8785.dumps(manifest) + b"\n")
    with command_clock(LATER):
        audited = runner.invoke(app, ["audit", fixture.ledger_id, "--from", str(export), "--jobs", "1", "--out",
                                      str(tmp_path / "report.json")])
    assert audited.exit_code == 1 and withheld[0] in audited.output
    assert set(withheld) <= set(replay_export(export, fixture.ledger_id).missing_blobs)  # listed: not checked
