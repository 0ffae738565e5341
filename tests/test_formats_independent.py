"""The independent replay (tests/independent/replay.py, written from docs/FORMATS.md alone) against a real
export: green as exported, red naming the file when one byte of any file kind is flipped, and provably
independent of the project's packages."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from heldout.cli import app
from heldout.generations import ledger_signer, load_generations, open_ledger
from heldout.generations.access import opening_bytes
from heldout.store import Store
from keys import Signer
from ledger import BlobStore, Ledger, export_ledger, open_export
from ledger.entries import encode_entry
from seals import canonical_bytes, parse_utc, sha256_hex, sign_document
from tests.conftest import REPO_ROOT
from tests.formats_support import ISSUE_AT, FormatsFixture, build_formats_export
from tests.independent.replay import ReplayFailure, replay_export

PROJECT_PACKAGES = ("keys", "seals", "ledger", "harness", "heldout", "audit")
INDEPENDENT = REPO_ROOT / "tests" / "independent"
ALLOWED_THIRD_PARTY = {"nacl", "rfc8785"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> FormatsFixture:
    return build_formats_export(tmp_path_factory.mktemp("formats"))


def test_replay_accepts_the_real_export(built: FormatsFixture) -> None:
    summary = replay_export(built.export, built.ledger_id)
    assert set(summary.entry_types) == {"genesis", "key", "seal", "bundle", "retire", "reveal", "passport", "spec",
                                        "note", "pool", "intent"}
    assert summary.seals == ["gen1", "gen2", "public"] and summary.reveals == ["gen1", "public"]
    assert len(summary.passports) == 2 and summary.missing_blobs == []
    project = open_export(built.export).verify(expected_id=built.ledger_id)  # the project's own replay agrees
    assert (summary.size, summary.root) == (project.size, project.root)
    assert summary.checkpoints == [c.size for c in open_export(built.export).checkpoints()]


def test_replay_refuses_another_ledger_id(built: FormatsFixture) -> None:
    other = "0" * 20 if built.ledger_id != "0" * 20 else "1" * 20
    with pytest.raises(ReplayFailure) as failure:
        replay_export(built.export, other)
    assert failure.value.file == "entries.jsonl" and failure.value.rule == "ledger-id"


def _entries(export: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (export / "entries.jsonl").read_text(encoding="utf-8").splitlines()]


def _blob(export: Path, member: str) -> list[Path]:
    """The blob files named by ``member`` anywhere in an entry (``*`` for a task's image blob)."""
    found: list[Path] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                named = key.endswith("_sha256") and (key == member or (member == "*image*" and key not in (
                    "manifest_sha256", "reveal_sha256", "evaluation_sha256", "predictions_sha256",
                    "passport_sha256")))
                if named and isinstance(item, str):
                    found.append(export / "blobs" / "sha256" / item[:2] / item)
                else:
                    walk(item)

    for entry in _entries(export):
        walk(entry)
    return sorted(set(found))


FILE_KINDS: dict[str, Callable[[Path], list[Path]]] = {
    "entries": lambda e: [e / "entries.jsonl"],
    "export-manifest": lambda e: [e / "export.json"],
    "checkpoint": lambda e: sorted((e / "checkpoints").iterdir()),
    "key-file": lambda e: sorted((e / "keys").iterdir()),
    "seal-manifest": lambda e: sorted((e / "seals").glob("*.seal.json")),
    "published-reveal": lambda e: sorted((e / "seals").glob("*.reveal.json")),
    "blob-seal-manifest": lambda e: _blob(e, "manifest_sha256"),
    "blob-reveal": lambda e: _blob(e, "reveal_sha256"),
    "blob-reveal-images": lambda e: _blob(e, "*image*"),
    "blob-evaluation": lambda e: _blob(e, "evaluation_sha256"),
    "blob-predictions": lambda e: _blob(e, "predictions_sha256"),
    "blob-passport": lambda e: _blob(e, "passport_sha256"),
}


def _flips(path: Path) -> Iterator[int]:
    size = path.stat().st_size
    yield from sorted({0, size // 2, size - 1})


@pytest.mark.parametrize("kind", sorted(FILE_KINDS))
def test_one_flipped_byte_is_named(built: FormatsFixture, kind: str) -> None:
    files = FILE_KINDS[kind](built.export)
    assert files, f"the export has no file of kind {kind}"
    for path in files:
        original = path.read_bytes()
        relative = path.relative_to(built.export).as_posix()
        for position in _flips(path):
            changed = bytearray(original)
            changed[position] ^= 0x01
            path.write_bytes(bytes(changed))
            try:
                with pytest.raises(ReplayFailure) as failure:
                    replay_export(built.export, built.ledger_id)
            finally:
                path.write_bytes(original)
            assert failure.value.file == relative, (
                f"flipping byte {position} of {relative} was blamed on {failure.value.file}: {failure.value}")
    replay_export(built.export, built.ledger_id)  # restored: green again


def test_a_deleted_blob_is_named(built: FormatsFixture) -> None:
    path = _blob(built.export, "evaluation_sha256")[0]
    original = path.read_bytes()
    path.unlink()
    try:
        with pytest.raises(ReplayFailure) as failure:
            replay_export(built.export, built.ledger_id)
    finally:
        path.write_bytes(original)
    assert failure.value.file == path.relative_to(built.export).as_posix()


def test_replay_imports_nothing_of_the_project() -> None:
    """Loaded in a fresh interpreter, the replay pulls in none of the project's packages (nor numpy)."""
    code = ("import json, sys; import tests.independent.replay; "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert not loaded & {*PROJECT_PACKAGES, "numpy"}, sorted(loaded & {*PROJECT_PACKAGES, "numpy"})
    assert {"nacl", "rfc8785"} <= loaded


def test_replay_source_imports_only_stdlib_pynacl_and_rfc8785() -> None:
    for path in sorted(INDEPENDENT.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 0, f"{path.name}: relative import"
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top == "__future__" or top in sys.stdlib_module_names or top in ALLOWED_THIRD_PARTY, (
                    f"{path.name} imports {name}")


# A dishonest operator holds the keys: each export below is signed and hash-consistent, yet breaks one rule of
# FORMATS.md section 15. The independent replay must still refuse it, naming the rule and the file.

def _crafted_export(built: FormatsFixture, tmp_path: Path, craft: Callable[[Store, Ledger, Signer], None]) -> Path:
    store_copy = tmp_path / "store"
    shutil.copytree(built.store, store_copy)
    st = Store.open(store_copy)
    with open_ledger(st) as ledger:
        craft(st, ledger, ledger_signer(st, ledger))
        export = tmp_path / "export"
        export_ledger(ledger, export, blobs=BlobStore(st.blobs), seals=st.seals)
    return export


def _entries_of(ledger: Ledger, kind: str) -> list[tuple[int, dict[str, Any]]]:
    return [(i, e) for i, e in ledger.entries() if e["type"] == kind]


def _reveal_with_a_wrong_label(st: Store, ledger: Ledger, signer: Signer) -> None:
    state = load_generations(ledger, parse_utc(ISSUE_AT))["gen2"]
    opening = json.loads(opening_bytes(st, ledger.ledger_id, state))
    opening["cases"][0]["label"] += 1  # the commitment no longer opens
    data = canonical_bytes(opening)
    digest = BlobStore(st.blobs).put(data)
    (st.seals / "gen2.reveal.json").write_bytes(data)
    ledger.append_batch([{"type": "retire", "v": 1, "generation": "gen2", "reason": "expired", "created_utc": ISSUE_AT},
                         {"type": "reveal", "v": 1, "generation": "gen2", "reveal_sha256": digest,
                          "created_utc": ISSUE_AT}], signer=signer, now=parse_utc(ISSUE_AT))


def _reveal_before_retirement(st: Store, ledger: Ledger, signer: Signer) -> None:
    """A true reveal of gen2, which is not retired: its labels are public while it is still held out."""
    state = load_generations(ledger, parse_utc(ISSUE_AT))["gen2"]
    data = opening_bytes(st, ledger.ledger_id, state)
    digest = BlobStore(st.blobs).put(data)
    (st.seals / "gen2.reveal.json").write_bytes(data)
    ledger.append({"type": "reveal", "v": 1, "generation": "gen2", "reveal_sha256": digest,
                   "created_utc": ISSUE_AT}, signer=signer, now=parse_utc(ISSUE_AT))


def _passport_claiming_an_audit_of_no_bundle(st: Store, ledger: Ledger, signer: Signer) -> None:
    _, entry = _entries_of(ledger, "passport")[-1]
    doc = json.loads(BlobStore(st.blobs).get(entry["passport_sha256"]))
    doc["computed"]["audit"].update(bundles=0, rederived=0)
    resigned = sign_document(doc, signer)
    digest = BlobStore(st.blobs).put(canonical_bytes(resigned))
    ledger.append({**entry, "passport_sha256": digest}, signer=signer, now=parse_utc(ISSUE_AT))


def _passport_dated_by_its_issuer(member: str, value: str) -> Callable[[Store, Ledger, Signer], None]:
    def craft(st: Store, ledger: Ledger, signer: Signer) -> None:
        _, entry = _entries_of(ledger, "passport")[-1]
        doc = json.loads(BlobStore(st.blobs).get(entry["passport_sha256"]))
        doc[member] = value
        resigned = sign_document({k: v for k, v in doc.items() if k != "signature"}, signer)
        digest = BlobStore(st.blobs).put(canonical_bytes(resigned))
        ledger.append({**entry, "passport_sha256": digest}, signer=signer, now=parse_utc(ISSUE_AT))
    return craft


def _passport_with_a_wrong_inclusion_proof(st: Store, ledger: Ledger, signer: Signer) -> None:
    _, entry = _entries_of(ledger, "passport")[-1]
    doc = json.loads(BlobStore(st.blobs).get(entry["passport_sha256"]))
    path = doc["computed"]["heldout"]["bundles"][0]["inclusion_proof"]
    path[0], path[-1] = path[-1], path[0]
    resigned = sign_document(doc, signer)
    digest = BlobStore(st.blobs).put(canonical_bytes(resigned))
    ledger.append({**entry, "passport_sha256": digest}, signer=signer, now=parse_utc(ISSUE_AT))


def _manifest_that_names_another_entry(st: Store, ledger: Ledger, signer: Signer) -> None:
    _, entry = _entries_of(ledger, "seal")[-1]
    manifest = json.loads((st.seals / f"{entry['generation']}.seal.json").read_bytes())
    manifest.update(generation="gen9", predecessor=None, entry_index=ledger.size + 1,  # off by one
                    created_utc=ISSUE_AT)  # dated now: the ledger's time only moves forward
    data = canonical_bytes(sign_document({k: v for k, v in manifest.items() if k != "signature"}, signer))
    (st.seals / "gen9.seal.json").write_bytes(data)
    BlobStore(st.blobs).put(data)
    ledger.append({**entry, "generation": "gen9", "manifest_sha256": sha256_hex(data), "created_utc": ISSUE_AT},
                  signer=signer, now=parse_utc(ISSUE_AT))


def _bundle_with_a_wrong_labels_hash(st: Store, ledger: Ledger, signer: Signer) -> None:
    _, entry = next((i, e) for i, e in _entries_of(ledger, "bundle") if e["generation"] == "public")
    ledger.append({**entry, "model_id": "another", "labels_hash": "0" * 64, "created_utc": ISSUE_AT}, signer=signer,
                  now=parse_utc(ISSUE_AT))  # (another model: the same run of one is logged once)


def _bundle_after_retirement(st: Store, ledger: Ledger, signer: Signer) -> None:
    _, entry = next((i, e) for i, e in _entries_of(ledger, "bundle") if e["generation"] == "gen1")
    ledger.append({**entry, "model_id": "another", "created_utc": ISSUE_AT}, signer=signer,
                  now=parse_utc(ISSUE_AT))  # gen1 retired before


def _bundle_on_a_task_the_seal_does_not_list(st: Store, ledger: Ledger, signer: Signer) -> None:
    """A bundle on a still sealed generation: its labels are not public, but its task is, in the seal entry."""
    _, entry = next((i, e) for i, e in _entries_of(ledger, "bundle") if e["generation"] == "gen2")
    ledger.append({**entry, "task": "pathmnist", "created_utc": ISSUE_AT}, signer=signer, now=parse_utc(ISSUE_AT))


def _entry_dated_before_its_predecessor(st: Store, ledger: Ledger, signer: Signer) -> None:
    """The operator's own program, without the forward-time check, logs a backdated key entry."""
    key = {"key_id": "backdated", "name": "backdated", "public_key_b64": signer.public_key.b64}
    entry = {"type": "key", "v": 1, "key": key, "role": "auditor", "created_utc": "2026-01-01T00:00:00Z"}
    ledger._append_encoded([encode_entry(entry)], signer=signer, now=parse_utc(ISSUE_AT))


def _retried_intent(st: Store, ledger: Ledger, signer: Signer) -> None:
    _, intent = next((i, e) for i, e in _entries_of(ledger, "intent") if e["generation"] == "gen2")
    ledger.append({**intent, "created_utc": ISSUE_AT}, signer=signer, now=parse_utc(ISSUE_AT))


CRAFTED = {
    "retried-intent": (_retried_intent, "draw", "entries.jsonl", "not exactly once"),
    "entry-dated-before-its-predecessor": (_entry_dated_before_its_predecessor, "time", "entries.jsonl",
                                           "time ran backwards"),
    "bundle-after-retirement": (_bundle_after_retirement, "bundle", "entries.jsonl", "after its retirement"),
    "reveal-commitment-does-not-open": (_reveal_with_a_wrong_label, "reveal", "blob", "commitment does not open"),
    "reveal-before-retirement": (_reveal_before_retirement, "reveal", "entries.jsonl", "before it is retired"),
    "passport-audit-of-no-bundle": (_passport_claiming_an_audit_of_no_bundle, "passport", "blob",
                                    "does not claim every bundle below it re-derived"),
    "passport-inclusion-proof": (_passport_with_a_wrong_inclusion_proof, "passport", "blob",
                                 "inclusion proof does not lead to the root"),
    "manifest-entry-index": (_manifest_that_names_another_entry, "seal", "seals/gen9.seal.json",
                             "entry_index disagrees"),
    "bundle-labels-hash": (_bundle_with_a_wrong_labels_hash, "bundle", "entries.jsonl", "labels_hash"),
    "passport-expiry-not-the-ledgers": (_passport_dated_by_its_issuer("expiry_utc", "2026-12-31T00:00:00Z"),
                                        "passport", "blob", "the one its ledger gives"),
    "passport-issued-before-its-evidence": (_passport_dated_by_its_issuer("issued_utc", "2025-01-01T00:00:00Z"),
                                            "passport", "blob", "outside the times its ledger allows"),
    "bundle-foreign-task": (_bundle_on_a_task_the_seal_does_not_list, "bundle", "entries.jsonl",
                            "seal does not list"),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_an_operator_crafted_export_breaking_one_rule_is_refused(built: FormatsFixture, tmp_path: Path,
                                                                 case: str) -> None:
    craft, rule, file, words = CRAFTED[case]
    export = _crafted_export(built, tmp_path, craft)
    with pytest.raises(ReplayFailure) as failure:
        replay_export(export, built.ledger_id)
    assert failure.value.rule == rule and words in failure.value.message, str(failure.value)
    assert failure.value.file == file or (file == "blob" and failure.value.file.startswith("blobs/sha256/")), \
        str(failure.value)


@pytest.mark.parametrize("member, value, form", [("leakage_bits", False, "bits"), ("leakage_bits", "0", "bits"),
                                                  ("family", ["foundation"], "words"), ("seed", True, "seed"),
                                                  ("spec_version", None, "text")])
def test_attack_an_optional_member_of_another_json_type(built: FormatsFixture, tmp_path: Path, member: str,
                                                        value: Any, form: str) -> None:
    """The operator's own program, without the log's member checks, logs a bundle whose optional member has another
    JSON type than FORMATS section 3 gives it. Python compares ``false`` equal to 0 and a JavaScript or stricter
    reader does not: one verifier charged ``"leakage_bits": false`` as 0 bits, another as missing. Every
    optional member has one form, checked as a required one (the append refuses it: test_ledger_entries): the
    replay names the entry, and so do our audit and ledger verify of the crafted export."""
    from ledger import entries as log_entries

    def craft(st: Store, ledger: Ledger, signer: Signer) -> None:
        _, entry = next((i, e) for i, e in _entries_of(ledger, "bundle") if e["generation"] == "public")
        forged = {**entry, "model_id": "typed", member: value, "created_utc": ISSUE_AT}
        ledger._append_encoded([("bundle", canonical_bytes(forged))], signer=signer, now=parse_utc(ISSUE_AT))

    with pytest.MonkeyPatch.context() as patch:  # the operator's program: reads and writes without the checks
        patch.setattr(log_entries, "_entry_is_valid", lambda entry, index: False)
        patch.setattr(log_entries, "_entries_are_valid", lambda entries, first: False)
        patch.setattr(log_entries, "validate_entry", lambda entry, *, index=None: str(entry["type"]))
        export = _crafted_export(built, tmp_path, craft)
    with pytest.raises(ReplayFailure) as failure:
        replay_export(export, built.ledger_id)
    assert failure.value.rule == "entry" and f"{member} is not a valid {form}" in failure.value.message, \
        str(failure.value)
    size = len(_entries(export))
    for command in (["ledger", "verify", built.ledger_id, "--from", str(export)],
                    ["audit", built.ledger_id, "--from", str(export), "--jobs", "1", "--out",
                     str(tmp_path / "r.json")]):
        result = CliRunner().invoke(app, command, env={"HELDOUT_NOW": ISSUE_AT})
        assert result.exit_code == 1, (command, result.output)
        assert f"entry {size - 1}" in result.output and member in result.output, result.output


def _link_to_same_bytes(path: Path, outside: Path) -> None:
    copy = outside / path.name
    copy.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(copy)


def _link_to_itself(path: Path, outside: Path) -> None:
    path.unlink()
    path.symlink_to(path)


def _link_to_dev_zero(path: Path, outside: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _folder(path: Path, outside: Path) -> None:
    path.unlink()
    path.mkdir()


def _fifo(path: Path, outside: Path) -> None:
    path.unlink()
    os.mkfifo(path)


PLACES: dict[str, Callable[[Path, Path], None]] = {
    "a link to an outside file with the same bytes": _link_to_same_bytes, "a link to itself": _link_to_itself,
    "a link to /dev/zero": _link_to_dev_zero, "a folder": _folder, "a FIFO": _fifo,
}


@pytest.mark.parametrize("kind", ["checkpoint", "key-file", "blob-evaluation", "published-reveal"])
@pytest.mark.parametrize("shape", sorted(PLACES))
def test_the_replay_reads_only_the_exports_own_regular_files(built: FormatsFixture, tmp_path: Path, kind: str,
                                                            shape: str) -> None:
    """FORMATS section 15: every file a rule reads is reached without a symbolic link, is a regular file and
    within its bound. Found by a mutation campaign: the replay followed links (a copy outside passed), read
    /dev/zero until memory ran out, hung on a FIFO and crashed on a folder or a link loop. Each is now a
    ReplayFailure naming the file, and no read blocks."""
    export = tmp_path / "export"
    shutil.copytree(built.export, export, symlinks=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    target = FILE_KINDS[kind](export)[0]
    relative = target.relative_to(export).as_posix()
    PLACES[shape](target, outside)
    with pytest.raises(ReplayFailure) as failure:
        replay_export(export, built.ledger_id)
    assert failure.value.file == relative and failure.value.rule == "layout", str(failure.value)
