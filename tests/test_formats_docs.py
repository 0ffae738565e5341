"""docs/FORMATS.md: its worked examples are exactly what the code writes (regenerated from fixed seeds), and a
reader can recompute their hashes with the independent replay's functions (standard library, PyNaCl, rfc8785)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.formats_examples import build_example_ledger, build_examples, document_examples, export_example
from tests.independent import replay as independent

FORMATS = REPO_ROOT / "docs" / "FORMATS.md"


@pytest.fixture(scope="module")
def blocks() -> dict[str, str]:
    return document_examples(FORMATS.read_text(encoding="utf-8"))


def test_every_example_is_what_the_code_writes(blocks: dict[str, str]) -> None:
    generated = build_examples()
    assert set(blocks) == set(generated)
    stale = [name for name in generated if blocks[name] != generated[name]]
    assert not stale, f"stale examples {stale}: run python -m tests.formats_examples --write docs/FORMATS.md"


def _code(block: str) -> str:
    return block.split("\n", 1)[1].rsplit("```", 1)[0]


def _json(block: str, n: int = 0) -> dict:
    return json.loads(re.findall(r"```json\n(.*?)```", block, re.S)[n])


def test_ledger_example_recomputes(blocks: dict[str, str]) -> None:
    lines = _code(blocks["ledger-entries"]).splitlines()
    entries = [line.split(": ", 1)[1].encode() for line in lines if re.match(r"^\d+: ", line)]
    leaves = [line.split()[-1] for line in lines if line.strip().startswith("leaf ")]
    assert [independent.leaf_hash(e).hex() for e in entries] == leaves
    for entry in entries:
        assert independent.jcs(json.loads(entry)) == entry
    genesis = _code(blocks["genesis"])
    ledger_id = re.search(r"ledger id:\s+(\w+)", genesis).group(1)
    assert hashlib.sha256(entries[0]).hexdigest()[:20] == ledger_id
    leaf_bytes = [bytes.fromhex(h) for h in leaves]
    roots = re.findall(r"size (\d+): root ([0-9a-f]{64})", _code(blocks["ledger-checkpoints"]))
    for size, root in roots:
        assert independent.mth(leaf_bytes[: int(size)]).hex() == root
    key_entry = json.loads(entries[0])["key"]
    key = independent.Key(key_entry["key_id"], key_entry["name"], independent.b64decode_canonical(
        key_entry["public_key_b64"], "doc", "key"))
    note = independent.verify_note(_code(blocks["checkpoint-note"]), "doc", key, "heldout/ledger/" + ledger_id)
    assert note.size == 3 and note.root.hex() == dict(roots)["3"]
    proofs = _code(blocks["proofs"]).split("consistency")
    inclusion = [bytes.fromhex(h) for h in re.findall(r"^\s+([0-9a-f]{64})$", proofs[0], re.M)]
    consistency = [bytes.fromhex(h) for h in re.findall(r"^\s+([0-9a-f]{64})$", proofs[1], re.M)]
    assert independent.root_from_inclusion(2, 3, leaf_bytes[2], inclusion) == note.root
    root4, root6 = (bytes.fromhex(dict(roots)[s]) for s in ("4", "6"))
    assert independent.consistency_holds(4, 6, root4, root6, consistency)
    heldout = _json(blocks["passport-heldout"])
    cited = heldout["bundles"][0]
    path = [independent.b64decode_canonical(h, "doc", "proof") for h in cited["inclusion_proof"]]
    assert independent.root_from_inclusion(cited["index"], heldout["checkpoint"]["size"], leaf_bytes[2], path) \
        == note.root


def test_commitment_reveal_and_manifest_examples_recompute(blocks: dict[str, str]) -> None:
    reveal = _json(blocks["reveal"])
    for case in reveal["cases"]:
        payload = independent.jcs({k: case[k] for k in ("case_id", "content_sha256", "label")})
        assert hashlib.sha256(bytes.fromhex(case["salt"]) + payload).hexdigest() == case["commitment"]
    leaves = [independent.leaf_hash(bytes.fromhex(c["commitment"])) for c in reveal["cases"]]
    assert independent.mth(leaves).hex() == reveal["set_hash"]
    assert reveal["set_hash"] in blocks["commitments"]
    proof = _json(blocks["member-proof"])
    commitment = hashlib.sha256(bytes.fromhex(proof["case"]["salt"]) + independent.jcs(
        {k: proof["case"][k] for k in ("case_id", "content_sha256", "label")})).digest()
    root = independent.root_from_inclusion(proof["leaf_index"], proof["tree_size"], independent.leaf_hash(commitment),
                                           [bytes.fromhex(h) for h in proof["audit_path"]])
    assert root is not None and root.hex() == proof["set_hash"]
    manifest = _json(blocks["seal-manifest"])
    data = independent.jcs(manifest)
    assert hashlib.sha256(data).hexdigest() == reveal["manifest_sha256"]
    assert f'"manifest_sha256":"{reveal["manifest_sha256"]}"' in blocks["ledger-entries"]
    signature = independent.b64decode_canonical(manifest["signature"], "doc", "signature")
    body = independent.jcs({k: v for k, v in manifest.items() if k != "signature"})
    key = independent.b64decode_canonical(manifest["issuer"]["public_key_b64"], "doc", "key")
    assert independent.ed25519_ok(key, body, signature)
    assert not independent.ed25519_ok(key, body.replace(b'"gen1"', b'"gen2"'), signature)


def test_key_example_recomputes(blocks: dict[str, str]) -> None:
    text = _code(blocks["keys"])
    key_file = json.loads(text.splitlines()[-1])
    raw = independent.b64decode_canonical(key_file["public_key_b64"], "doc", "key")
    assert key_file["fingerprint"] == hashlib.sha256(raw).hexdigest()
    assert key_file["note_verifier_key"] == independent.verifier_key(key_file["name"], raw)


def test_readme_links_the_formats() -> None:
    assert "docs/FORMATS.md" in (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def test_the_example_export_replays_independently(tmp_path: Path) -> None:
    """The running example's export passes the independent replay, with its two missing blobs listed (and the
    passport that needs one of them left unchecked)."""
    built = build_example_ledger(tmp_path / "ledger")
    try:
        export = export_example(tmp_path, built)
        ledger_id = built["ledger"].ledger_id
    finally:
        built["ledger"].close()
    summary = independent.replay_export(export, ledger_id)
    assert len(summary.missing_blobs) == 2 and summary.passports == [] and summary.reveals == ["gen1"]
    assert summary.root.hex() in FORMATS.read_text(encoding="utf-8")
