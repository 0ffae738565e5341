"""The worked examples of docs/FORMATS.md, generated from fixed seeds by the project's own writers.

Every example block in the document sits between ``<!-- BEGIN example NAME -->`` and ``<!-- END example NAME -->``;
tests/test_formats_docs.py regenerates them and requires the document to hold exactly these bytes, so an example
cannot drift from what the code writes. Rewrite the blocks after a deliberate format change with::

    python -m tests.formats_examples --write docs/FORMATS.md

Keys: Ed25519 seeds of 32 equal bytes (0x01 the operator, 0x02 a second key), as tests/conftest.py does. Times
are fixed; the genesis nonce is bytes 0..31; salts are bytes of one value each.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from heldout.audit import ExportSource, run_audit
from heldout.generations.budget import TaskShape, budget_record, charge_bits
from heldout.generations.commitments import MemberProof, commitment, commitment_payload, inclusion_path, set_hash
from heldout.generations.draw import DrawRecord, PoolRef, derive_seed, draw_cases, seed_material
from heldout.generations.reveal import CaseOpening, build_reveal, reveal_bytes
from keys import Signer, TrustedKey, b64encode, note_key_hash, verifier_key_string
from ledger import BlobStore, Ledger, export_ledger
from ledger.entries import make_genesis, origin_of
from ledger.rfc6962 import leaf_hash
from ledger.tlogproof import TlogProof
from seals import canonical_bytes, sign_document
from seals.manifest import ReleasePolicy, SealManifest, TaskCount, manifest_bytes

BEGIN = "<!-- BEGIN example {} -->"
END = "<!-- END example {} -->"
T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 1, 2, tzinfo=UTC)
T2 = datetime(2026, 2, 1, tzinfo=UTC)
NONCE = bytes(range(32))


def operator() -> Signer:
    return Signer.from_seed(bytes([1]) * 32, name="example-operator", key_id="example-key")


def second_key() -> Signer:
    return Signer.from_seed(bytes([2]) * 32, name="example-issuer", key_id="example-issuer-key")


def _text(data: bytes) -> str:
    return data.decode("utf-8")


def _block(lines: list[str]) -> str:
    return "```text\n" + "\n".join(lines) + "\n```"


def _json_block(value: Any) -> str:
    return "```json\n" + json.dumps(value, indent=1, ensure_ascii=False) + "\n```"


def example_canonical() -> str:
    value = {"b": 0.1 + 0.2, "a": [2.0, -0.0, 1e-7, 12345678.1234565], "é": "tab\there", "n": None}
    data = canonical_bytes(value)
    return _block([
        "input (Python):  {'b': 0.1 + 0.2, 'a': [2.0, -0.0, 1e-7, 12345678.1234565], 'é': 'tab\\there', 'n': None}",
        f"canonical bytes: {_text(data)}",
        f"SHA-256:         {hashlib.sha256(data).hexdigest()}",
    ])


def example_keys() -> str:
    signer = operator()
    key = signer.public_key
    trusted = TrustedKey(signer.key_id, signer.name, key)
    file_bytes = canonical_bytes(trusted.to_json()) + b"\n"
    return _block([
        "seed:               32 bytes of 0x01",
        f"public key (b64):   {key.b64}",
        f"fingerprint:        SHA-256(public key) = {key.fingerprint}",
        f"note key hash:      SHA-256('{signer.name}' || 0x0A || 0x01 || public key)[:4] = "
        f"{note_key_hash(signer.name, key).hex()}",
        f"note verifier key:  {verifier_key_string(signer.name, key)}",
        f"keys/{signer.key_id}.pub.json (export form, {len(file_bytes)} bytes, ends with LF):",
        _text(file_bytes).rstrip("\n"),
    ])


def _genesis() -> tuple[dict[str, Any], bytes]:
    genesis = make_genesis(name="example", signer=operator(), now=T0, nonce=NONCE)
    return genesis, canonical_bytes(genesis)


def example_genesis() -> str:
    _, data = _genesis()
    digest = hashlib.sha256(data).hexdigest()
    return _block([
        f"entry 0 bytes:  {_text(data)}",
        f"SHA-256:        {digest}",
        f"ledger id:      {digest[:20]}",
        f"origin line:    {origin_of(digest[:20])}",
        f"leaf hash:      SHA-256(0x00 || entry bytes) = {leaf_hash(data).hex()}",
    ])


CASES = (("bloodmnist", 3, 0x11), ("bloodmnist", 5, 0x22), ("bloodmnist", 0, 0x33))


def _openings() -> list[CaseOpening]:
    out = []
    for n, (task, label, salt_byte) in enumerate(CASES):
        content = hashlib.sha256(f"example case {n}".encode()).hexdigest()
        out.append(CaseOpening(case_id=f"{task}-{content[:16]}", task=task, content_sha256=content, label=label,
                               salt=bytes([salt_byte]) * 32))
    return out


def example_commitments() -> str:
    lines = []
    commitments = []
    for o in _openings():
        payload = commitment_payload(o.case_id, o.content_sha256, o.label)
        c = commitment(o.salt, o.case_id, o.content_sha256, o.label)
        commitments.append(c)
        lines += [f"case {o.case_id}", f"  salt (hex):  {o.salt.hex()}", f"  payload:     {_text(payload)}",
                  f"  commitment:  SHA-256(salt bytes || payload) = {c.hex()}",
                  f"  leaf hash:   SHA-256(0x00 || commitment) = {leaf_hash(c).hex()}"]
    lines.append("sorted commitments (ascending bytes): " + ", ".join(c.hex()[:8] + "…" for c in sorted(commitments)))
    lines.append(f"set hash (RFC 6962 root over the sorted leaves): {set_hash(commitments)}")
    return _block(lines)


def example_member_proof() -> str:
    openings = _openings()
    commitments = [o.commitment for o in openings]
    target = openings[0]
    index, path = inclusion_path(commitments, target.commitment)
    proof = MemberProof(generation="gen1", set_hash=set_hash(commitments), case_id=target.case_id,
                        task=target.task, content_sha256=target.content_sha256, label=target.label,
                        salt=target.salt, leaf_index=index, tree_size=len(commitments), path=tuple(path))
    return _json_block(proof.to_json())


def _commit_entries() -> list[dict[str, Any]]:
    """Entries 1 and 2 of the example ledger: the pool commitment (the three example cases, all of them drawn)
    and the seal intent."""
    commitments = [o.commitment for o in _openings()]
    return [{"type": "pool", "v": 1, "task": "bloodmnist", "pool_root": set_hash(commitments), "pool_size": 3,
             "created_utc": "2026-01-01T00:00:00Z"},
            {"type": "intent", "v": 1, "generation": "gen1", "tasks": {"bloodmnist": 3}, "pools": {"bloodmnist": 1},
             "expiry_utc": "2026-02-01T00:00:00Z", "release": {"mode": "full", "step": None},
             "created_utc": "2026-01-01T00:00:00Z"}]


def _example_draw() -> DrawRecord:
    """The draw of gen1: its seed from the root of checkpoint 3 (genesis, pool, intent), no witnesses."""
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger.create(Path(tmp), operator(), name="example", now=T0, nonce=NONCE)
        try:
            ledger.append_batch(_commit_entries(), signer=operator(), now=T0)
            checkpoint = ledger.checkpoint_at(3)
            assert checkpoint is not None
        finally:
            ledger.close()
    seed = derive_seed("checkpoint-root", seed_material("checkpoint-root", root=checkpoint.root))
    assert draw_cases(seed, {"bloodmnist": sorted(_openings(), key=lambda o: o.commitment)}, {"bloodmnist": 3})
    return DrawRecord(seed_source="checkpoint-root", intent_index=2,
                      pools={"bloodmnist": PoolRef(1, _commit_entries()[0]["pool_root"], 3)},
                      checkpoint_size=3, checkpoint_note=checkpoint.note, cosignatures=(), seed=seed.hex())


def _manifest(ledger_id: str) -> tuple[SealManifest, dict[str, Any], bytes]:
    openings = _openings()
    manifest = SealManifest(
        generation="gen1", membership="sealed", tasks=(TaskCount("bloodmnist", len(openings)),),
        set_hash=set_hash([o.commitment for o in openings]), created=T0, expiry=T2,
        # an explicit 64 bits (too few for a full evaluation of 3 cases: the seal command would refuse it; a
        # format example shows the members), with what the rule gives from it at the smallest class (1)
        leakage_budget=budget_record(mode="full", weak=TaskShape("bloodmnist", 3, 8, 1), n=3, n_tasks=1, counts=[3],
                                     k=100, delta=0.05, eps=None, bits=64.0),
        release=ReleasePolicy(), seed=None, predecessor=None, ledger_id=ledger_id, entry_index=3,
        draw=_example_draw().to_json())
    signed = manifest.sign(operator())
    return manifest, signed, manifest_bytes(signed)


def _reveal(ledger_id: str, manifest_digest: str) -> bytes:
    return reveal_bytes(build_reveal(generation="gen1", ledger_id=ledger_id, manifest_sha256=manifest_digest,
                                     membership="sealed", openings=_openings(),
                                     pools={"bloodmnist": [o.commitment for o in _openings()]}))


def example_seal_manifest() -> str:
    _, genesis_bytes = _genesis()
    ledger_id = hashlib.sha256(genesis_bytes).hexdigest()[:20]
    _, signed, data = _manifest(ledger_id)
    body = {k: v for k, v in signed.items() if k != "signature"}
    return "\n\n".join([
        _json_block(signed),
        _block([f"signed bytes (JCS of the document without signature), SHA-256: "
                f"{hashlib.sha256(canonical_bytes(body)).hexdigest()}",
                f"file bytes = JCS of the signed document ({len(data)} bytes, no trailing newline)",
                f"manifest_sha256 = SHA-256(file bytes) = {hashlib.sha256(data).hexdigest()}"]),
    ])


def example_reveal() -> str:
    _, genesis_bytes = _genesis()
    ledger_id = hashlib.sha256(genesis_bytes).hexdigest()[:20]
    _, _, manifest_data = _manifest(ledger_id)
    data = _reveal(ledger_id, hashlib.sha256(manifest_data).hexdigest())
    return "\n\n".join([_json_block(json.loads(data)),
                        _block([f"reveal_sha256 = SHA-256(JCS bytes, {len(data)} bytes) = "
                                f"{hashlib.sha256(data).hexdigest()}"])])


def _evaluation() -> dict[str, Any]:
    """A stand-in for a MedEval-1 evaluation object (a real one has every member MEDEVAL-1.md lists)."""
    return {"task": "bloodmnist", "n_classes": 8, "n_test": 3, "seed": 1, "spec_version": "MedEval-1 v0.1",
            "split_origin": "gen1", "task_name": "Peripheral blood cells (8-class)", "modality": "Microscopy",
            "kind": "image", "domain": "medicine", "timestamp": "2026-01-02T00:00:00+00:00",
            "composite": {"index": 61.25, "coverage": 1, "dimensions_scored": 9}}


def build_example_ledger(folder: Path) -> dict[str, Any]:
    """The example ledger of the document: genesis, pool + intent (one batch), seal, bundle, passport, retire +
    reveal (one batch), spec, key."""
    signer = operator()
    ledger = Ledger.create(folder, signer, name="example", now=T0, nonce=NONCE)
    ledger_id = ledger.ledger_id
    ledger.append_batch(_commit_entries(), signer=signer, now=T0)
    _, signed, manifest_data = _manifest(ledger_id)
    manifest_digest = hashlib.sha256(manifest_data).hexdigest()
    reveal_data = _reveal(ledger_id, manifest_digest)
    budget = signed["leakage_budget"]
    ledger.append({"type": "seal", "v": 1, "generation": "gen1", "manifest_sha256": manifest_digest,
                   "set_hash": signed["set_hash"], "expiry_utc": "2026-02-01T00:00:00Z",
                   "created_utc": "2026-01-01T00:00:00Z", "membership": "sealed", "tasks": {"bloodmnist": 3},
                   "n_cases": 3, "budget_bits": 64.0, "release": {"mode": "full", "step": None},
                   "statement_bits": budget["statement_bits"],
                   "guarantee": {"delta": budget["delta"], "k": budget["k"], "families": budget["families"]}},
                  signer=signer, now=T0)
    evaluation_data = canonical_bytes(_evaluation())
    predictions = b"(stand-in for the predictions npz)"
    bundle = {"type": "bundle", "v": 1, "generation": "gen1", "model_id": "majority", "task": "bloodmnist",
              "evaluation_sha256": hashlib.sha256(evaluation_data).hexdigest(),
              "predictions_sha256": hashlib.sha256(predictions).hexdigest(),
              # the labels in evaluation order (ascending case id): bloodmnist-00d3… 0, -9534… 5, -9967… 3
              "labels_hash": hashlib.sha256(canonical_bytes([0, 5, 3])).hexdigest(),
              "leakage_bits": charge_bits(_evaluation()), "n_test": 3, "n_cases": 3, "seed": 1,
              "spec_version": "MedEval-1 v0.1", "split_origin": "gen1", "created_utc": "2026-01-02T00:00:00Z"}
    ledger.append(bundle, signer=signer, now=T1)
    checkpoint = ledger.latest_checkpoint()
    proof = ledger.inclusion_proof(4, checkpoint.size)

    def tlog_proof(index: int) -> str:
        path = tuple(ledger.inclusion_proof(index, checkpoint.size).path)
        return TlogProof(index, path, checkpoint.note, ledger.entry_bytes(index)).text()

    heldout = {"generation": "gen1", "set_hash": signed["set_hash"], "manifest_sha256": manifest_digest,
               "seal_index": 3, "expiry_utc": "2026-02-01T00:00:00Z", "ledger_id": ledger_id,
               "note_verifier_key": ledger.verifier_key,
               "checkpoint": {"size": checkpoint.size, "root_b64": checkpoint.root_b64, "note": checkpoint.note},
               "bundles": [{"index": 4, "task": "bloodmnist", "leaf_hash_b64": b64encode(proof.leaf_hash),
                            "evaluation_sha256": bundle["evaluation_sha256"],
                            "predictions_sha256": bundle["predictions_sha256"],
                            "inclusion_proof": [b64encode(h) for h in proof.path]}],
               "proofs": {"seal": tlog_proof(3), "bundles": [tlog_proof(4)]}}
    ledger.append({"type": "passport", "v": 1, "model_id": "majority", "generation": "gen1",
                   "passport_sha256": "0" * 64, "created_utc": "2026-01-02T00:00:00Z"}, signer=signer, now=T1)
    ledger.append_batch([
        {"type": "retire", "v": 1, "generation": "gen1", "reason": "expired", "created_utc": "2026-02-01T00:00:00Z"},
        {"type": "reveal", "v": 1, "generation": "gen1", "reveal_sha256": hashlib.sha256(reveal_data).hexdigest(),
         "n_cases": 3, "created_utc": "2026-02-01T00:00:00Z"}], signer=signer, now=T2)
    ledger.append({"type": "spec", "v": 1, "spec_version": "MedEval-1 v0.1", "superseded_by": "MedEval-1 v0.2",
                   "effective_utc": "2026-03-01T00:00:00Z", "created_utc": "2026-02-01T00:00:00Z"},
                  signer=signer, now=T2)
    other = second_key()
    ledger.append({"type": "key", "v": 1, "role": "passport-issuer", "created_utc": "2026-02-01T00:00:00Z",
                   "key": {"key_id": other.key_id, "name": other.name, "public_key_b64": other.public_key.b64}},
                  signer=signer, now=T2)
    return {"ledger": ledger, "heldout": heldout, "manifest": manifest_data, "reveal": reveal_data,
            "evaluation": evaluation_data}


def _listing(folder: Path) -> list[str]:
    return [p.relative_to(folder).as_posix() for p in sorted(folder.rglob("*")) if p.is_file()]


def export_example(folder: Path, built: dict[str, Any]) -> Path:
    """``folder/export``: the example ledger exported from a store holding the seal manifest, reveal and
    evaluation blobs (the predictions and passport blobs are missing, so listed in ``missing_blobs``)."""
    blobs = BlobStore(folder / "blobs")
    for data in (built["manifest"], built["reveal"], built["evaluation"]):
        blobs.put(data)
    seals = folder / "seals"
    seals.mkdir()
    (seals / "gen1.seal.json").write_bytes(built["manifest"])
    (seals / "gen1.reveal.json").write_bytes(built["reveal"])
    export = folder / "export"
    export_ledger(built["ledger"], export, blobs=blobs, seals=seals)
    return export


def example_ledger() -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        built = build_example_ledger(Path(tmp))
        ledger: Ledger = built["ledger"]
        try:
            lines = []
            for index, data in ledger.entries_bytes():
                lines.append(f"{index}: {_text(data)}")
                lines.append(f"   leaf {leaf_hash(data).hex()}")
            checkpoints = ledger.checkpoints()
            roots = [f"size {c.size}: root {c.root.hex()} (base64 {c.root_b64})" for c in checkpoints]
            note = ledger.checkpoint_at(5)
            assert note is not None
            inclusion = ledger.inclusion_proof(4, 5)
            consistency = ledger.consistency_proof(6, 8)
            heldout = built["heldout"]
            export = export_example(Path(tmp), built)
            manifest_text = (export / "export.json").read_text(encoding="utf-8")
            listing = _listing(export)
            before = Path.cwd()
            os.chdir(tmp)  # the report names files relative to the export's path: keep it "export"
            try:
                report = run_audit(ExportSource.open(Path("export"), ledger.ledger_id), now=T2,
                                   audit_command=f"python audit.py {ledger.ledger_id} --from export")
            finally:
                os.chdir(before)
            report_text = _text(canonical_bytes(report.to_json()))
        finally:
            ledger.close()
    return {
        "ledger-entries": _block(lines),
        "ledger-checkpoints": _block(["checkpoint sizes: " + ", ".join(str(c.size) for c in checkpoints), *roots]),
        "checkpoint-note": "```text\n" + note.note + "```",
        "proofs": _block([
            "inclusion of entry 4 in size 5 (RFC 9162 audit path, leaf to root, hex):",
            *[f"  {h.hex()}" for h in inclusion.path],
            "consistency from size 6 to size 8 (RFC 9162 2.1.4, hex):",
            *[f"  {h.hex()}" for h in consistency.path]]),
        "passport-heldout": _json_block(heldout),
        "export": _block(["files:", *[f"  {name}" for name in listing], "", "export.json:",
                          manifest_text.rstrip("\n")]),
        "audit-report": _json_block(json.loads(report_text)),
    }


def example_signed_document() -> str:
    doc = sign_document({"example": "a signed document", "value": 0.5}, operator())
    body = {k: v for k, v in doc.items() if k != "signature"}
    return "\n\n".join([_json_block(doc), _block([f"signed bytes: {_text(canonical_bytes(body))}"])])


def build_examples() -> dict[str, str]:
    examples = {
        "canonical": example_canonical(),
        "keys": example_keys(),
        "genesis": example_genesis(),
        "commitments": example_commitments(),
        "member-proof": example_member_proof(),
        "seal-manifest": example_seal_manifest(),
        "reveal": example_reveal(),
        "signed-document": example_signed_document(),
    }
    examples.update(example_ledger())
    return examples


_BLOCK = re.compile(r"<!-- BEGIN example ([a-z0-9-]+) -->\n(.*?)<!-- END example \1 -->", re.S)


def document_examples(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2).removesuffix("\n") for m in _BLOCK.finditer(text)}


def rewrite(text: str, examples: dict[str, str]) -> str:
    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        return f"{BEGIN.format(name)}\n{examples[name]}\n{END.format(name)}"

    return _BLOCK.sub(fill, text)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write":
        path = Path(sys.argv[2])
        path.write_text(rewrite(path.read_text(encoding="utf-8"), build_examples()), encoding="utf-8")
    else:
        for name, block in build_examples().items():
            print(f"{BEGIN.format(name)}\n{block}\n{END.format(name)}\n")
