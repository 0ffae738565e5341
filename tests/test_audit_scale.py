"""The audit at scale: ``--jobs N`` re-derives bundles in worker processes and writes the same report bytes
whatever N is; ``--since REPORT`` trusts an earlier clean report only after its checkpoint verifies and a
consistency proof ties it to the current log, then re-derives only the bundles appended since."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from heldout.audit import ReportRecord
from heldout.cli import app
from seals import canonical_bytes
from tests.audit_support import NOW, AuditFixture, add_bundle, build_store, command_clock
from tests.generations_support import cli

runner = CliRunner()
AUDIT_AT = "2026-09-02T00:00:00Z"
# A numpy beyond the series shown to draw v0.1's streams alike (harness.metrics.registry.streams_verified): its
# streams may differ, so an evaluation made under it may not re-derive here.
OTHER_NUMPY = "3.0.0"


def other_stream(numpy_version: str) -> Any:
    """The evaluation as another bootstrap stream would have made it (another ci95)."""
    def edit(evaluation: dict[str, Any]) -> dict[str, Any]:
        changed = copy.deepcopy(evaluation)
        changed["numpy_version"] = numpy_version
        low, high = changed["dimensions"]["accuracy"]["ci95"]
        changed["dimensions"]["accuracy"]["ci95"] = [low - 0.0123, high + 0.0045]
        return changed
    return edit


def audit(*args: str) -> tuple[int, str]:
    with command_clock(AUDIT_AT):
        result = runner.invoke(app, ["audit", *args])
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Bundles that re-derive, one forged (a stream its numpy does not give) and one computed under another
    numpy (incomplete), both on the public generation so that a third party re-derives them too, one whose
    predictions blob was tampered with, and one withheld under ladder release."""
    root = tmp_path_factory.mktemp("mixed")
    built = build_store(root, bundles_per_generation=2)
    store = built.store
    with command_clock(NOW):
        sealed = cli("seal", "gen3", "--tasks", "bloodmnist", "--per-task", "20", "--expires", "2027-05-01",
                     "--budget-bits", "1e9", "--ladder-step", "1.0", store=store)
    assert sealed.exit_code == 0, sealed.output
    public = built.data_root
    forged = add_bundle(store, "public", "forged", seed=7, data_root=public, edit=other_stream(np.__version__))
    other = add_bundle(store, "public", "other-numpy", seed=8, data_root=public, edit=other_stream(OTHER_NUMPY))
    tampered = add_bundle(store, "gen1", "tampered", seed=9)
    withheld = add_bundle(store, "gen3", "withheld", seed=10)
    add_bundle(store, "gen2", "late", seed=11)
    from heldout.generations import open_ledger
    from heldout.store import Store

    with open_ledger(Store.open(store)) as ledger:
        digest = ledger.entry(tampered)["predictions_sha256"]
    export = root / "export"
    with command_clock(AUDIT_AT):
        assert cli("ledger", "export", built.ledger_id, str(export), store=store).exit_code == 0
    for folder in (store, export):  # the same damage in the store and in its export
        blob = folder / "blobs" / "sha256" / digest[:2] / digest
        data = bytearray(blob.read_bytes())
        data[len(data) // 2] ^= 1
        blob.write_bytes(bytes(data))
    return {"fixture": built, "root": root, "export": export, "forged": forged, "other": other,
            "tampered": tampered, "withheld": withheld}


@pytest.mark.parametrize("mode", ["operator", "third-party"])
def test_the_report_is_the_same_bytes_whatever_the_number_of_jobs(mixed: dict[str, Any], mode: str) -> None:
    fixture: AuditFixture = mixed["fixture"]
    where = ["--store", str(fixture.store)] if mode == "operator" else ["--from", str(mixed["export"])]
    reports = []
    for jobs in (1, 2, 3):
        out = mixed["root"] / f"{mode}-jobs{jobs}.json"
        code, _ = audit(fixture.ledger_id, *where, "--jobs", str(jobs), "--out", str(out), "--json")
        reports.append((code, out.read_bytes()))
    assert reports[0] == reports[1] == reports[2]
    code, data = reports[0]
    report = json.loads(data)
    failed = {f["index"] for f in report["findings"] if f["check"] == "bundle"}
    unrederived = {u["index"] for u in report["not_rederived"]}
    assert code == 1
    assert {mixed["forged"], mixed["tampered"]} <= failed  # forged: found by a worker; tampered: before it
    assert mixed["other"] in unrederived  # another numpy: incomplete, as a worker reported it
    if mode == "operator":
        assert mixed["withheld"] not in unrederived | failed  # the operator re-derives what it withholds
        assert report["rederived"] == report["bundles"] - 3
    else:
        assert mixed["withheld"] in unrederived
    indices = [f["index"] for f in report["findings"] if f["check"] == "bundle"]
    assert indices == sorted(indices)


def test_jobs_is_refused_below_one(mixed: dict[str, Any]) -> None:
    fixture: AuditFixture = mixed["fixture"]
    code, output = audit(fixture.ledger_id, "--store", str(fixture.store), "--jobs", "0")
    assert code == 2 and "--jobs" in output


def test_more_than_one_job_runs_in_worker_processes_with_bounded_bundles_in_flight() -> None:
    from heldout.audit.rederive import BATCH, IN_FLIGHT_PER_WORKER, _Done, _InBatch, bundle_rederiver

    with bundle_rederiver(2, 10) as (_, in_flight):
        assert in_flight == 2 * IN_FLIGHT_PER_WORKER
    with bundle_rederiver(1, 10) as (_, in_flight):
        assert in_flight == 0
    from heldout.audit.rederive import RederiveJob

    job = RederiveJob(index=5, evaluation=b'{"spec_version":"MedEval-1 v0.1"}', predictions=b"not an npz",
                      labels=np.zeros(3, dtype=np.int64))
    with bundle_rederiver(2, 2) as (submit, _):
        pending = submit(job)
        assert isinstance(pending, _InBatch) and pending.future is None  # gathered into a batch...
        remote = pending.result()  # ...sent when its result is asked for
        assert pending.future is not None
        batch = [submit(RederiveJob(index=i, evaluation=job.evaluation, predictions=job.predictions,
                                    labels=job.labels)) for i in range(BATCH)]
        assert all(p.future is not None for p in batch)  # a full batch goes at once
        assert [p.result().index for p in batch] == list(range(BATCH))  # each outcome in its place
    with bundle_rederiver(1, 2) as (submit, _):
        local = submit(job)
        assert isinstance(local, _Done)
    assert remote == local.result() and remote.problem == "failed"  # the predictions do not read


# --- incremental: --since REPORT ---------------------------------------------------------------------------------

def report_of(path: Path) -> dict[str, Any]:
    return json.loads(path.read_bytes())


def operator_audit(fixture: AuditFixture, out: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code, _ = audit(fixture.ledger_id, "--store", str(fixture.store), "--out", str(out), "--json", *extra)
    return code, report_of(out)


@pytest.fixture
def audited(tmp_path: Path) -> tuple[AuditFixture, Path]:
    """A store whose full audit is clean, and that audit's report."""
    built = build_store(tmp_path, bundles_per_generation=1)
    first = tmp_path / "r0.json"
    code, report = operator_audit(built, first)
    assert code == 0 and report["rederived"] == report["bundles"] == 3 and report["since"] is None
    assert report["checkpoint"].startswith(f"heldout/ledger/{built.ledger_id}\n{report['ledger_entries']}\n")
    return built, first


def rewrite_entry(fixture: AuditFixture, index: int, old: bytes, new: bytes) -> None:
    """Entry bytes and their stored leaf hash rewritten together in the database (triggers dropped): the
    value ``old`` becomes ``new``, and the entry stays a valid one."""
    (path,) = (fixture.store / "ledgers").glob("*.sqlite")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        data = bytes(conn.execute("SELECT data FROM entries WHERE idx = ?", (index,)).fetchone()[0])
        changed = data.replace(old, new, 1)
        assert changed != data
        for trigger in ("entries_no_update", "nodes_no_update"):
            conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        conn.execute("UPDATE entries SET data = ?, leaf_hash = ? WHERE idx = ?",
                     (changed, hashlib.sha256(b"\x00" + changed).digest(), index))
    finally:
        conn.close()


def test_incremental_audit_rederives_only_the_bundles_appended_since(audited: tuple[AuditFixture, Path]) -> None:
    built, first = audited
    earlier = report_of(first)
    new = [add_bundle(built.store, "gen1", f"new_{k}", seed=50 + k) for k in range(2)]
    code, report = operator_audit(built, first.parent / "r1.json", "--since", str(first))
    assert code == 0, report["findings"]
    assert report["since"] == {"report_sha256": hashlib.sha256(first.read_bytes()).hexdigest(),
                               "ledger_entries": earlier["ledger_entries"], "ledger_head": earlier["ledger_head"],
                               "bundles": 3, "rederived_now": len(new)}
    assert report["rederived"] == report["bundles"] == 5
    full_code, full = operator_audit(built, first.parent / "full.json")
    assert full_code == 0 and full["since"] is None
    assert {k: v for k, v in report.items() if k not in ("since", "checked")} == \
        {k: v for k, v in full.items() if k not in ("since", "checked")}
    # and the chain goes on: nothing appended since r1, nothing re-derived
    code, again = operator_audit(built, first.parent / "r2.json", "--since", str(first.parent / "r1.json"))
    assert code == 0 and again["since"]["rederived_now"] == 0 and again["rederived"] == 5


def test_tamper_before_the_trusted_size_is_a_finding_and_a_full_audit(audited: tuple[AuditFixture, Path]) -> None:
    built, first = audited
    earlier = report_of(first)
    add_bundle(built.store, "gen2", "new_0", seed=60)
    bundle = min(g["seal_index"] for g in earlier["generations"].values()) + 1
    target = next(i for i in range(bundle, earlier["ledger_entries"]) if b'"model_0"' in entry_bytes(built, i))
    rewrite_entry(built, target, b'"model_0"', b'"model_9"')
    code, report = operator_audit(built, first.parent / "r1.json", "--since", str(first))
    assert code == 1
    checks = {f["check"] for f in report["findings"]}
    assert {"ledger", "since"} <= checks
    since = next(f for f in report["findings"] if f["check"] == "since")
    assert since["evidence"]["report_sha256"] == hashlib.sha256(first.read_bytes()).hexdigest()
    assert "audited in full" in since["message"]
    assert report["since"] is None and report["rederived"] == report["bundles"]  # every bundle re-derived


def test_tamper_after_the_trusted_size_is_a_finding(audited: tuple[AuditFixture, Path]) -> None:
    built, first = audited
    earlier = report_of(first)
    new = add_bundle(built.store, "gen2", "model_new", seed=61)
    assert new >= earlier["ledger_entries"]
    rewrite_entry(built, new, b'"model_new"', b'"model_neW"')
    code, report = operator_audit(built, first.parent / "r1.json", "--since", str(first))
    assert code == 1
    ledger = next(f for f in report["findings"] if f["check"] == "ledger")
    low, _, high = ledger["evidence"]["entries"].partition("..")
    assert earlier["ledger_entries"] <= int(low) <= new <= int(high)
    assert any(f["check"] == "since" for f in report["findings"]) and report["since"] is None


def test_a_tampered_new_bundle_is_found_by_the_incremental_audit(audited: tuple[AuditFixture, Path]) -> None:
    built, first = audited
    new = add_bundle(built.store, "gen2", "model_new", seed=62)
    digest = json.loads(entry_bytes(built, new))["predictions_sha256"]
    blob = built.store / "blobs" / "sha256" / digest[:2] / digest
    data = bytearray(blob.read_bytes())
    data[len(data) // 3] ^= 1
    blob.write_bytes(bytes(data))
    code, report = operator_audit(built, first.parent / "r1.json", "--since", str(first))
    assert code == 1
    assert report["since"] is not None and report["since"]["rederived_now"] == 0
    assert {f["index"] for f in report["findings"]} == {new}  # the bundle check and the blob sweep name it


@pytest.mark.parametrize("damage", ["flipped", "deleted"])
def test_attack_a_blob_damaged_at_rest_before_the_trusted_size(audited: tuple[AuditFixture, Path],
                                                               damage: str) -> None:
    """A bundle's predictions blob, audited clean, is damaged (or deleted) at rest afterwards, and an unrelated
    bundle appended: the incremental audit re-derives only the new bundle but hash-checks every blob it vouches
    for, so it names the old one as the full audit does (red-team round 15: ``--since`` reported clean)."""
    built, first = audited
    earlier = report_of(first)
    old = next(i for i in range(earlier["ledger_entries"]) if b'"type":"bundle"' in entry_bytes(built, i))
    digest = json.loads(entry_bytes(built, old))["predictions_sha256"]
    blob = built.store / "blobs" / "sha256" / digest[:2] / digest
    if damage == "flipped":
        data = bytearray(blob.read_bytes())
        data[len(data) // 2] ^= 1
        blob.write_bytes(bytes(data))
    else:
        blob.unlink()
    add_bundle(built.store, "gen2", "model_new", seed=64)
    code, report = operator_audit(built, first.parent / "r1.json", "--since", str(first))
    assert code == 1
    assert report["since"] is not None and report["since"]["rederived_now"] == 1  # the chain held: incremental
    assert [(f["check"], f["index"]) for f in report["findings"]] == [("blob", old)]
    assert digest in json.dumps(report["findings"][0])
    full_code, full = operator_audit(built, first.parent / "full.json")
    assert full_code == 1 and {f["index"] for f in full["findings"]} == {old}


def entry_bytes(fixture: AuditFixture, index: int) -> bytes:
    (path,) = (fixture.store / "ledgers").glob("*.sqlite")
    conn = sqlite3.connect(path)
    try:
        return bytes(conn.execute("SELECT data FROM entries WHERE idx = ?", (index,)).fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize("problem", ["failed report", "another ledger", "forged checkpoint", "version 1",
                                     "not a report"])
def test_a_report_that_cannot_be_trusted_is_a_finding_and_a_full_audit(
        audited: tuple[AuditFixture, Path], tmp_path: Path, problem: str) -> None:
    built, first = audited
    earlier = report_of(first)
    if problem == "failed report":
        earlier.update(verdict="failed", exit_code=1)
    elif problem == "another ledger":
        earlier["ledger_id"] = "0" * 20
    elif problem == "forged checkpoint":  # a larger size claimed for the same signed note
        earlier["checkpoint"] = earlier["checkpoint"].replace(f"\n{earlier['ledger_entries']}\n",
                                                              f"\n{earlier['ledger_entries'] - 1}\n", 1)
    elif problem == "version 1":
        earlier["version"] = 1
    given = tmp_path / "given.json"
    given.write_bytes(b"[]" if problem == "not a report" else canonical_bytes(earlier) + b"\n")
    own_record(built).add(given.read_bytes())  # as if this auditor had written it: the checks below must hold
    add_bundle(built.store, "gen1", "new_0", seed=63)
    code, report = operator_audit(built, tmp_path / "r1.json", "--since", str(given))
    assert code == 1
    assert [f["check"] for f in report["findings"]] == ["since"]
    assert report["since"] is None and report["rederived"] == report["bundles"] == 4


def own_record(fixture: AuditFixture) -> ReportRecord:
    """The operator auditor's record of the clean reports it wrote."""
    from heldout.store import auditor_state_path

    return ReportRecord.of(auditor_state_path(), fixture.ledger_id, "operator")


def test_attack_since_a_clean_report_this_auditor_never_wrote(audited: tuple[AuditFixture, Path],
                                                              tmp_path: Path) -> None:
    """Everything a report says can be written from public data: a stranger (or the operator) writes a "clean"
    report around the ledger's real latest checkpoint, covering a bundle that does not re-derive. Carried
    forward, it would spare that bundle its re-derivation; it is refused, and the full audit finds the bundle."""
    from heldout.generations import open_ledger
    from heldout.store import Store

    built, first = audited
    assert hashlib.sha256(first.read_bytes()).hexdigest() in own_record(built).digests()

    def forged(evaluation: dict[str, Any]) -> dict[str, Any]:
        return {**evaluation, "composite": {**evaluation["composite"], "index": 99.0}}

    bad = add_bundle(built.store, "gen2", "forger", seed=64, edit=forged)
    with open_ledger(Store.open(built.store)) as ledger:
        checkpoint = ledger.latest_checkpoint()
        bundles = sum(1 for _, e in ledger.entries() if e.get("type") == "bundle")
    claim = {**report_of(first), "ledger_entries": checkpoint.size, "ledger_head": checkpoint.root.hex(),
             "checkpoint": checkpoint.note, "bundles": bundles, "rederived": bundles}
    given = tmp_path / "claim.json"
    given.write_bytes(canonical_bytes(claim) + b"\n")
    code, report = operator_audit(built, tmp_path / "r1.json", "--since", str(given))
    assert code == 1 and report["since"] is None
    since = [f for f in report["findings"] if f["check"] == "since"]
    assert len(since) == 1 and "not a clean report this auditor wrote" in since[0]["message"]
    assert any(f["index"] == bad and f["check"] == "bundle" for f in report["findings"])
    assert hashlib.sha256(given.read_bytes()).hexdigest() not in own_record(built).digests()


def test_the_record_of_clean_reports_survives_a_line_cut_short(audited: tuple[AuditFixture, Path],
                                                               tmp_path: Path) -> None:
    """A crash in the middle of recording costs that one line: the next report is recorded on a line of its own,
    and a failed audit's report is never recorded."""
    built, first = audited
    record = own_record(built)
    with record.path.open("ab") as cut:
        cut.write(b"0123abcd")
    code, _ = operator_audit(built, tmp_path / "r1.json")
    assert code == 0
    assert hashlib.sha256((tmp_path / "r1.json").read_bytes()).hexdigest() in record.digests()
    assert hashlib.sha256(first.read_bytes()).hexdigest() in record.digests()
    lines = record.path.read_bytes().count(b"\n")
    assert operator_audit(built, tmp_path / "again.json")[0] == 0  # the same report (same clock): recorded once
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "r1.json").read_bytes()
    assert record.path.read_bytes().count(b"\n") == lines
    digest = json.loads(entry_bytes(built, add_bundle(built.store, "gen1", "late", seed=65)))["predictions_sha256"]
    blob = built.store / "blobs" / "sha256" / digest[:2] / digest
    blob.write_bytes(blob.read_bytes()[:-1])
    code, _ = operator_audit(built, tmp_path / "r2.json")
    assert code == 1
    assert hashlib.sha256((tmp_path / "r2.json").read_bytes()).hexdigest() not in record.digests()


def test_a_clean_report_on_disk_is_always_in_the_record(audited: tuple[AuditFixture, Path], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The record is written before the report: an audit killed while recording leaves no report, never a clean
    report that the next ``--since`` refuses as not its own (red-team round 10: a kill between the report and
    its record turned the next incremental audit into a failed one)."""
    built, _ = audited

    def killed(self: ReportRecord, data: bytes) -> None:
        raise SystemExit(137)  # (as a SIGKILL would leave it: nothing after this point ran)

    monkeypatch.setattr(ReportRecord, "add", killed)
    audit(built.ledger_id, "--store", str(built.store), "--out", str(tmp_path / "r1.json"))
    monkeypatch.undo()
    assert not (tmp_path / "r1.json").exists()
    code, _ = operator_audit(built, tmp_path / "r1.json")
    assert code == 0 and hashlib.sha256((tmp_path / "r1.json").read_bytes()).hexdigest() in own_record(built).digests()
    add_bundle(built.store, "gen1", "later", seed=66)
    code, since = operator_audit(built, tmp_path / "r2.json", "--since", str(tmp_path / "r1.json"))
    assert code == 0 and since["since"] is not None, since["findings"]


def test_since_a_missing_file_is_a_usage_error(audited: tuple[AuditFixture, Path], tmp_path: Path) -> None:
    built, _ = audited
    code, output = audit(built.ledger_id, "--store", str(built.store), "--since", str(tmp_path / "nothing.json"))
    assert code == 2 and "nothing.json" in output


def test_a_resigned_fork_of_the_trusted_history_fails_the_consistency_proof(tmp_path: Path) -> None:
    """The operator holds the key: it rewrites an entry the earlier audit covered and re-signs every checkpoint,
    so the export replays on its own. Only the consistency proof from the trusted checkpoint can tell."""
    from heldout.generations import ledger_signer, open_ledger
    from heldout.store import Store
    from ledger.checkpoint import sign_checkpoint
    from ledger.rfc6962 import leaf_hash
    from ledger.tree import HashTree, MemoryNodes

    built = build_store(tmp_path, bundles_per_generation=0)
    add_bundle(built.store, "public", "model_a", seed=70, data_root=built.data_root)
    first_export = tmp_path / "e0"
    with command_clock(AUDIT_AT):
        assert cli("ledger", "export", built.ledger_id, str(first_export), store=built.store).exit_code == 0
    r0 = tmp_path / "r0.json"
    code, _ = audit(built.ledger_id, "--from", str(first_export), "--out", str(r0))
    assert code == 0 and report_of(r0)["since"] is None
    trusted_size = report_of(r0)["ledger_entries"]
    add_bundle(built.store, "public", "model_b", seed=71, data_root=built.data_root)
    fork = tmp_path / "e1"
    with command_clock(AUDIT_AT):
        assert cli("ledger", "export", built.ledger_id, str(fork), store=built.store).exit_code == 0
    code, _ = audit(built.ledger_id, "--from", str(fork), "--out", str(tmp_path / "honest.json"), "--since", str(r0))
    assert code == 0 and report_of(tmp_path / "honest.json")["since"]["rederived_now"] == 1
    tiles = tmp_path / "tiles"  # the same log published as tlog-tiles carries the export's report forward too
    with command_clock(AUDIT_AT):
        assert cli("ledger", "tiles", built.ledger_id, str(tiles), store=built.store).exit_code == 0
    code, _ = audit(built.ledger_id, "--from", str(tiles), "--out", str(tmp_path / "tiles.json"), "--since", str(r0))
    assert code == 0 and report_of(tmp_path / "tiles.json")["since"]["rederived_now"] == 1

    lines = (fork / "entries.jsonl").read_bytes().splitlines()
    target = next(i for i in range(1, trusted_size) if b'"model_a"' in lines[i])
    lines[target] = lines[target].replace(b'"model_a"', b'"model_z"')
    (fork / "entries.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))
    nodes = MemoryNodes()
    for line in lines:
        nodes.append(leaf_hash(line))
    tree = HashTree(nodes)
    st = Store.open(built.store)
    with open_ledger(st) as ledger:
        signer, origin = ledger_signer(st, ledger), ledger.origin
    for note in (fork / "checkpoints").glob("*.note"):
        size = int(note.name.split(".")[0])
        note.write_text(sign_checkpoint(origin, size, tree.root_at(size), signer).note, encoding="utf-8")
    manifest = json.loads((fork / "export.json").read_bytes())  # and the manifest made to agree
    manifest["root"] = base64.b64encode(tree.root_at(len(lines))).decode()
    manifest["entries"]["sha256"] = hashlib.sha256((fork / "entries.jsonl").read_bytes()).hexdigest()
    (fork / "export.json").write_bytes(canonical_bytes(manifest) + b"\n")
    code, _ = audit(built.ledger_id, "--from", str(fork), "--out", str(tmp_path / "forked.json"))
    forked = report_of(tmp_path / "forked.json")
    assert forked["ledger_intact"], forked["findings"]  # on its own, the re-signed fork replays
    code, _ = audit(built.ledger_id, "--from", str(fork), "--out", str(tmp_path / "r1.json"), "--since", str(r0))
    report = report_of(tmp_path / "r1.json")
    assert code == 1 and report["since"] is None
    since = [f for f in report["findings"] if f["check"] == "since"]
    assert len(since) == 1 and "consistency" in since[0]["message"]
    assert since[0]["evidence"]["old_size"] == trusted_size


def test_python_audit_py_with_two_jobs_writes_the_same_report(mixed: dict[str, Any]) -> None:
    """The entry point a stranger runs: worker processes started from ``python audit.py`` (whose main module
    the workers import) give the report the in-process run gives."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT

    fixture: AuditFixture = mixed["fixture"]
    outs = []
    for jobs in ("1", "2"):
        out = mixed["root"] / f"audit-py-{jobs}.json"
        done = subprocess.run([sys.executable, "audit.py", fixture.ledger_id, "--store", str(fixture.store),
                               "--jobs", jobs, "--out", str(out)], cwd=REPO_ROOT, capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "HELDOUT_NOW": AUDIT_AT},
                              timeout=300)
        assert done.returncode == 1, done.stderr  # the mixed store has findings
        assert "Traceback" not in done.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
