"""The audit against tampering: a seeded campaign of random single mutations of a public export (a byte of an
entry line, of a blob, of a seal manifest, of a published reveal, of a checkpoint note; a deleted, duplicated
or reordered entry line), each of which must make ``python audit.py <id> --from DIR`` exit 1 with a finding
that names the mutated entry (its index, or a range holding it) or file; and named attacks on the operator's
own store (a blob, a seal manifest, the private opening, the database).

The export comes from a store with bundles on public, gen1 and gen2, a passport entry, and gen1 retired with
its reveal, so every kind of entry and blob is in it. Unmutated, its audit is incomplete (exit 5: gen2 is
still sealed), so exit 1 is the mutation's doing. Size knob: ``HELDOUT_TAMPER_MUTATIONS`` (default 200)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from heldout.cli import app
from heldout.cli.audit_cmd import audit_command
from heldout.cli.common import handle_errors
from tests.audit_support import AuditFixture, build_store
from tests.conftest import REPO_ROOT

MUTATIONS = int(os.environ.get("HELDOUT_TAMPER_MUTATIONS", "200"))
SEED = 20260901
ISSUE_AT = "2026-09-02T00:00:00Z"
RETIRE_AT = "2026-09-03T00:00:00Z"
AUDIT_AT = "2026-09-04T00:00:00Z"
runner = CliRunner()

# ``python audit.py``'s command, built as audit.py builds it, so the campaign runs it in-process.
audit_app = typer.Typer(add_completion=False, pretty_exceptions_show_locals=False)
audit_app.command()(handle_errors(audit_command))

BLOB_KINDS = ("evaluation", "predictions", "passport", "reveal", "manifest")
KINDS = ("entry byte", *(f"{k} blob byte" for k in BLOB_KINDS), "seal manifest byte", "published reveal byte",
         "checkpoint note byte", "entry deleted", "entry duplicated", "entries reordered")


@dataclass(frozen=True)
class Scenario:
    fixture: AuditFixture
    pristine: Path
    work: Path


@dataclass(frozen=True)
class Mutation:
    """One file of the export replaced by ``data``; detected when a finding names one of ``entries`` (an index,
    or a range holding one) or one of ``files`` (paths relative to the export)."""

    kind: str
    path: str
    data: bytes
    entries: frozenset[int] = frozenset()
    files: frozenset[str] = frozenset()

    @property
    def target(self) -> str:
        named = [f"entry {i}" for i in sorted(self.entries)] + sorted(self.files)
        return " or ".join(named)


def invoke(*args: str) -> Any:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    root = tmp_path_factory.mktemp("tamper")
    with pytest.MonkeyPatch.context() as patch:
        fixture = build_store(root)
        store = str(fixture.store)
        patch.setenv("HELDOUT_NOW", ISSUE_AT)
        invoke("audit", fixture.ledger_id, "--store", store)
        invoke("passport", "issue", "model_0", "--generation", "gen2", "--store", store)
        patch.setenv("HELDOUT_NOW", RETIRE_AT)
        invoke("retire", "gen1", "--reason", "leaked", "--reveal", "--store", store)
        invoke("ledger", "export", fixture.ledger_id, str(root / "pristine"), "--store", store)
    return Scenario(fixture=fixture, pristine=root / "pristine", work=root / "work")


@pytest.fixture(autouse=True)
def audit_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every audit here runs at a fixed time (after the retire, before any expiry)."""
    monkeypatch.setenv("HELDOUT_NOW", AUDIT_AT)


def entry_lines(folder: Path) -> list[bytes]:
    return (folder / "entries.jsonl").read_bytes().split(b"\n")[:-1]


def join_lines(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def blobs_by_kind(folder: Path) -> dict[str, list[tuple[str, frozenset[int]]]]:
    """The export's blobs by what references them (member ``<kind>_sha256``), with the referencing entries."""
    found: dict[str, dict[str, set[int]]] = {kind: {} for kind in BLOB_KINDS}
    for index, line in enumerate(entry_lines(folder)):
        entry = json.loads(line)
        for kind in BLOB_KINDS:
            digest = entry.get(f"{kind}_sha256")
            if isinstance(digest, str) and (folder / "blobs" / "sha256" / digest[:2] / digest).is_file():
                found[kind].setdefault(f"blobs/sha256/{digest[:2]}/{digest}", set()).add(index)
    return {kind: sorted((path, frozenset(refs)) for path, refs in blobs.items()) for kind, blobs in found.items()}


def flip_byte(rng: random.Random, data: bytes) -> tuple[int, bytes]:
    offset = rng.randrange(len(data))
    changed = bytearray(data)
    changed[offset] ^= rng.randrange(1, 256)  # never the same byte
    return offset, bytes(changed)


def make_mutation(rng: random.Random, kind: str, folder: Path) -> Mutation:
    lines = entry_lines(folder)
    entries_data = join_lines(lines)
    if kind == "entry byte":
        offset, data = flip_byte(rng, entries_data)
        index = entries_data[:offset].count(b"\n")
        targets = {index}
        files: set[str] = set()
        if entries_data[offset] == ord("\n"):  # a line end: the two lines run together
            targets.add(index + 1)
            if offset == len(entries_data) - 1:
                files.add("entries.jsonl")
        return Mutation(kind, "entries.jsonl", data, frozenset(targets), frozenset(files))
    if kind.endswith(" blob byte"):
        path, _refs = rng.choice(blobs_by_kind(folder)[kind.removesuffix(" blob byte")])
        return Mutation(kind, path, flip_byte(rng, (folder / path).read_bytes())[1], files=frozenset({path}))
    if kind in ("seal manifest byte", "published reveal byte", "checkpoint note byte"):
        pattern = {"seal manifest byte": "seals/*.seal.json", "published reveal byte": "seals/*.reveal.json",
                   "checkpoint note byte": "checkpoints/*.note"}[kind]
        path = rng.choice(sorted(p.relative_to(folder).as_posix() for p in folder.glob(pattern)))
        return Mutation(kind, path, flip_byte(rng, (folder / path).read_bytes())[1], files=frozenset({path}))
    if kind == "entry deleted":
        index = rng.randrange(len(lines))
        return Mutation(kind, "entries.jsonl", join_lines(lines[:index] + lines[index + 1:]), frozenset({index}))
    if kind == "entry duplicated":
        index = rng.randrange(len(lines))
        changed = [*lines[:index + 1], lines[index], *lines[index + 1:]]
        return Mutation(kind, "entries.jsonl", join_lines(changed), frozenset({index, index + 1}))
    if kind == "entries reordered":
        first, second = sorted(rng.sample(range(len(lines)), 2))
        changed = list(lines)
        changed[first], changed[second] = changed[second], changed[first]
        return Mutation(kind, "entries.jsonl", join_lines(changed), frozenset({first, second}))
    raise AssertionError(kind)


def reset(scenario: Scenario) -> Path:
    if scenario.work.exists():
        shutil.rmtree(scenario.work)
    shutil.copytree(scenario.pristine, scenario.work)
    return scenario.work


def names_target(finding: dict[str, Any], mutation: Mutation) -> bool:
    index = finding.get("index")
    if isinstance(index, int) and index in mutation.entries:
        return True
    span = (finding.get("evidence") or {}).get("entries")
    if isinstance(span, str):
        first, _, last = span.partition("..")
        if any(int(first) <= i <= int(last) for i in mutation.entries):
            return True
    file = finding.get("file")
    if isinstance(file, str):
        parts = Path(file).parts
        return any(parts[-len(Path(f).parts):] == Path(f).parts for f in mutation.files)
    return False


def audit_export(ledger_id: str, folder: Path, report: Path) -> tuple[int, dict[str, Any] | None, str]:
    report.unlink(missing_ok=True)
    result = runner.invoke(audit_app, [ledger_id, "--from", str(folder), "--out", str(report)])
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), (
        f"the audit crashed: {result.exception!r}\n{result.output}")
    document = json.loads(report.read_text()) if report.is_file() else None
    return result.exit_code, document, result.output


def detected(code: int, document: dict[str, Any] | None, output: str, mutation: Mutation) -> bool:
    if code != 1:
        return False
    if document is None:  # refused before a report could be written: the one-line error must name it
        return any(f in output for f in mutation.files) or any(f"entry {i}" in output for i in mutation.entries)
    return any(names_target(f, mutation) for f in document["findings"])


def campaign(rng: random.Random, folder: Path, count: int) -> list[Mutation]:
    """``count`` distinct-from-pristine mutations, cycling through the kinds so each gets its share."""
    chosen: list[Mutation] = []
    attempts = 0
    while len(chosen) < count:
        attempts += 1
        assert attempts < 10 * count + 100, "cannot draw enough mutations that change the bytes"
        mutation = make_mutation(rng, KINDS[len(chosen) % len(KINDS)], folder)
        if mutation.data == (folder / mutation.path).read_bytes():
            continue  # leaves the bytes identical: not a mutation
        chosen.append(mutation)
    return chosen


def test_pristine_export_is_intact_but_incomplete(scenario: Scenario, tmp_path: Path) -> None:
    code, document, output = audit_export(scenario.fixture.ledger_id, reset(scenario), tmp_path / "report.json")
    assert code == 5, output
    assert document is not None and document["findings"] == [] and document["ledger_intact"] is True
    assert {u["generation"] for u in document["not_rederived"]} == {"gen2"}
    kinds = {json.loads(line)["type"] for line in entry_lines(scenario.pristine)}
    assert {"genesis", "seal", "bundle", "passport", "retire", "reveal"} <= kinds


@pytest.mark.slow
def test_tamper_campaign_every_mutation_detected_and_located(scenario: Scenario, tmp_path: Path) -> None:
    mutations = campaign(random.Random(SEED), scenario.pristine, MUTATIONS)
    tally: Counter[str] = Counter()
    caught: Counter[str] = Counter()
    missed: list[str] = []
    for number, mutation in enumerate(mutations):
        folder = reset(scenario)
        (folder / mutation.path).write_bytes(mutation.data)
        code, document, output = audit_export(scenario.fixture.ledger_id, folder, tmp_path / "report.json")
        tally[mutation.kind] += 1
        if detected(code, document, output, mutation):
            caught[mutation.kind] += 1
        else:
            named = [(f["check"], f["index"], f["file"], f["evidence"].get("entries")) for f in
                     (document or {}).get("findings", [])]
            missed.append(f"#{number} {mutation.kind} of {mutation.path} (expected {mutation.target}): exit {code}, "
                          f"findings {named}")
    width = max(len(k) for k in KINDS)
    print(f"\ntamper campaign: {len(mutations)} mutations (seed {SEED})")
    for kind in KINDS:
        print(f"  {kind:<{width}}  {caught[kind]:>4} / {tally[kind]:<4} detected and located")
    print(f"  {'total':<{width}}  {sum(caught.values()):>4} / {sum(tally.values())}")
    assert not missed, "\n".join(missed)
    assert sum(tally.values()) == MUTATIONS
    if len(KINDS) <= MUTATIONS:
        assert set(tally) == set(KINDS)


@pytest.mark.slow
def test_tamper_through_python_audit_py(scenario: Scenario, tmp_path: Path) -> None:
    """A handful of the campaign's mutations through a real ``python audit.py`` process."""
    rng = random.Random(SEED + 1)
    for kind in ("entry byte", "predictions blob byte", "seal manifest byte", "checkpoint note byte",
                 "entries reordered"):
        mutation = make_mutation(rng, kind, scenario.pristine)
        folder = reset(scenario)
        (folder / mutation.path).write_bytes(mutation.data)
        report = tmp_path / "report.json"
        report.unlink(missing_ok=True)
        done = subprocess.run([sys.executable, str(REPO_ROOT / "audit.py"), scenario.fixture.ledger_id, "--from",
                               str(folder), "--out", str(report)], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path, env={**os.environ, "HELDOUT_NOW": AUDIT_AT, "PYTHONPATH": str(REPO_ROOT)})
        assert "Traceback" not in done.stderr, done.stderr
        document = json.loads(report.read_text()) if report.is_file() else None
        assert detected(done.returncode, document, done.stdout + done.stderr, mutation), (
            kind, mutation.target, done.returncode, done.stdout[-3000:])


# --- named localisation cases -------------------------------------------------------------------------------

def test_altered_entry_is_located_to_a_range_in_entries_jsonl(scenario: Scenario, tmp_path: Path) -> None:
    """A still-canonical change to a bundle entry (its leakage charge) replays, but breaks the signed roots:
    the finding names the entries between the last checkpoint that holds and the first that does not."""
    folder = reset(scenario)
    lines = entry_lines(folder)
    index = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == "bundle")
    entry = json.loads(lines[index])
    lines[index] = lines[index].replace(json.dumps(entry["leakage_bits"]).encode(),
                                        json.dumps(entry["leakage_bits"] + 1).encode())
    (folder / "entries.jsonl").write_bytes(join_lines(lines))
    code, document, output = audit_export(scenario.fixture.ledger_id, folder, tmp_path / "report.json")
    assert code == 1, output
    assert document is not None
    ledger = [f for f in document["findings"] if f["check"] == "ledger"]
    assert len(ledger) == 1
    first, _, last = ledger[0]["evidence"]["entries"].partition("..")
    assert int(first) <= index <= int(last)
    assert ledger[0]["file"] == "entries.jsonl"
    assert ledger[0]["index"] == (index if first == last else None)
    assert f"entries {first}..{last}" in output or f"entry {index}" in output


def test_unsigned_tail_is_located(scenario: Scenario, tmp_path: Path) -> None:
    folder = reset(scenario)
    lines = entry_lines(folder)
    (folder / "entries.jsonl").write_bytes(join_lines([*lines, lines[-1]]))
    code, document, _ = audit_export(scenario.fixture.ledger_id, folder, tmp_path / "report.json")
    assert code == 1 and document is not None
    spans = [f["evidence"].get("entries") for f in document["findings"] if f["check"] == "ledger"]
    assert spans == [f"{len(lines)}..{len(lines)}"]


def test_bad_checkpoint_signature_names_the_note(scenario: Scenario, tmp_path: Path) -> None:
    folder = reset(scenario)
    note = sorted((folder / "checkpoints").glob("*.note"))[0]
    text = note.read_text()
    head, _, signature = text.rstrip("\n").rpartition(" ")
    swapped = signature[:-4] + ("AAAA" if signature[-4:] != "AAAA" else "BBBB")
    note.write_text(f"{head} {swapped}\n")
    code, document, _ = audit_export(scenario.fixture.ledger_id, folder, tmp_path / "report.json")
    assert code == 1 and document is not None
    files = [f["file"] for f in document["findings"] if f["check"] == "ledger"]
    assert files == [f"checkpoints/{note.name}"]


# --- the operator's own store -------------------------------------------------------------------------------

@pytest.fixture
def operator_store(tmp_path: Path) -> AuditFixture:
    return build_store(tmp_path)


def operator_audit(fixture: AuditFixture) -> tuple[int, dict[str, Any], str]:
    result = runner.invoke(audit_app, [fixture.ledger_id, "--store", str(fixture.store), "--json"])
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.output
    path = fixture.store / "audit" / fixture.ledger_id / "audit_report.json"
    return result.exit_code, json.loads(path.read_text()), result.output


def bundle_on(fixture: AuditFixture, generation: str) -> tuple[int, dict[str, Any]]:
    from heldout.generations import open_ledger
    from heldout.store import Store

    with open_ledger(Store.open(fixture.store)) as ledger:
        return next((i, e) for i, e in ledger.entries() if e.get("type") == "bundle"
                    and e.get("generation") == generation)


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_operator_attack_tampered_predictions_blob(operator_store: AuditFixture) -> None:
    index, entry = bundle_on(operator_store, "gen2")
    digest = entry["predictions_sha256"]
    blob = operator_store.store / "blobs" / "sha256" / digest[:2] / digest
    flip(blob, len(blob.read_bytes()) // 2)
    code, report, output = operator_audit(operator_store)
    assert code == 1, output
    assert any(f["index"] == index and f["file"] == f"blobs/sha256/{digest[:2]}/{digest}"
               for f in report["findings"]), report["findings"]
    assert report["rederived"] == report["bundles"] - 1


def test_operator_attack_tampered_seal_manifest(operator_store: AuditFixture) -> None:
    manifest = operator_store.store / "seals" / "gen2.seal.json"
    flip(manifest, manifest.read_bytes().index(b'"set_hash"') + 12)
    code, report, output = operator_audit(operator_store)
    assert code == 1, output
    seal = [f for f in report["findings"] if f["check"] == "seal"]
    assert [f["file"] for f in seal] == ["seals/gen2.seal.json"]
    seal_index = report["generations"]["gen2"]["seal_index"]
    assert seal[0]["index"] == seal_index


def test_operator_attack_tampered_private_opening(operator_store: AuditFixture) -> None:
    """The operator swaps a label in the sealed opening (what the bundles are re-derived against)."""
    (opening,) = (operator_store.store / "private" / "generations").glob("*/gen2/*.reveal.json")
    document = json.loads(opening.read_text())
    case = document["cases"][0]
    case["label"] = (case["label"] + 1) % 8
    opening.write_text(json.dumps(document))
    code, report, output = operator_audit(operator_store)
    assert code == 1, output
    gen2 = {i for i, line in enumerate(report_entries(operator_store)) if line.get("generation") == "gen2"
            and line.get("type") == "bundle"}
    named = [f for f in report["findings"] if f["check"] == "bundle" and f["index"] in gen2]
    assert {f["index"] for f in named} == gen2
    relative = opening.relative_to(operator_store.store).as_posix()
    assert all(f["file"] == relative for f in named), named
    assert report["rederived"] == report["bundles"] - len(gen2)


def report_entries(fixture: AuditFixture) -> list[dict[str, Any]]:
    from heldout.generations import open_ledger
    from heldout.store import Store

    with open_ledger(Store.open(fixture.store)) as ledger:
        return [entry for _, entry in ledger.entries()]


def test_operator_attack_rewritten_entry_in_database(operator_store: AuditFixture) -> None:
    """Entry bytes and their stored leaf hash rewritten together: only the signed roots can tell, and the
    audit locates the damage to entries of the database file."""
    index, entry = bundle_on(operator_store, "gen1")
    (path,) = (operator_store.store / "ledgers").glob("*.sqlite")
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        data = bytes(conn.execute("SELECT data FROM entries WHERE idx = ?", (index,)).fetchone()[0])
        bits = json.dumps(entry["leakage_bits"]).encode()
        changed = data.replace(bits, json.dumps(entry["leakage_bits"] / 2).encode())
        leaf = hashlib.sha256(b"\x00" + changed).digest()
        for trigger in ("entries_no_update", "nodes_no_update"):
            conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        conn.execute("UPDATE entries SET data = ?, leaf_hash = ? WHERE idx = ?", (changed, leaf, index))
    finally:
        conn.close()
    code, report, output = operator_audit(operator_store)
    assert code == 1, output
    ledger = [f for f in report["findings"] if f["check"] == "ledger"]
    assert len(ledger) == 1 and ledger[0]["file"] == path.relative_to(operator_store.store).as_posix()
    first, _, last = ledger[0]["evidence"]["entries"].partition("..")
    assert int(first) <= index <= int(last)
