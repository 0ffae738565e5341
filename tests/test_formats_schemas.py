"""docs/schemas: every JSON document and entry the project writes (a real flow: init, pool, seal, evaluate,
audit, passport issue, retire --reveal, key and spec entries, export, a third-party audit, proofs) validates
against its schema; each schema refuses a document that lacks any of its required members; and no written
document carries a member its schema does not document (a format change must reach the docs)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from heldout.cli import app
from tests.audit_support import command_clock
from tests.conftest import REPO_ROOT
from tests.formats_examples import build_examples, document_examples
from tests.formats_support import ISSUE_AT, FormatsFixture, build_formats_export

SCHEMAS = REPO_ROOT / "docs" / "schemas"
ENTRY_TYPES = ("genesis", "key", "pool", "intent", "seal", "bundle", "retire", "reveal", "passport", "spec", "note")


def schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(schema(name))


def _cli_json(*args: str) -> Any:
    with command_clock(ISSUE_AT):
        result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code in (0, 5), result.output
    return json.loads(result.output)


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[str, Any]]]:
    """Schema name -> [(where, document)] for everything the flow wrote."""
    root = tmp_path_factory.mktemp("schemas")
    built: FormatsFixture = build_formats_export(root)
    store, export = built.store, built.export
    docs: dict[str, list[tuple[str, Any]]] = {}

    def add(name: str, where: str, value: Any) -> None:
        docs.setdefault(name, []).append((where, value))

    def load(path: Path) -> Any:
        return json.loads(path.read_bytes())

    entries = [json.loads(line) for line in (export / "entries.jsonl").read_text(encoding="utf-8").splitlines()]
    for index, entry in enumerate(entries):
        add(f"entry-{entry['type']}", f"entry {index}", entry)

    def blob(digest: str) -> Any:
        return load(export / "blobs" / "sha256" / digest[:2] / digest)

    for index, entry in enumerate(entries):
        if entry["type"] == "bundle":
            add("evaluation", f"evaluation of entry {index}", blob(entry["evaluation_sha256"]))
        elif entry["type"] == "passport":
            add("passport", f"passport blob of entry {index}", blob(entry["passport_sha256"]))
        elif entry["type"] == "reveal":
            add("reveal", f"reveal blob of entry {index}", blob(entry["reveal_sha256"]))
    add("export-manifest", "export.json", load(export / "export.json"))
    with command_clock(ISSUE_AT):
        tiled = CliRunner().invoke(app, ["ledger", "tiles", built.ledger_id, str(root / "tiles"), "--store",
                                         str(store)])
    assert tiled.exit_code == 0, tiled.output
    add("tiles-manifest", "heldout-tiles.json", load(root / "tiles" / "heldout-tiles.json"))
    for folder in (export / "keys", store / "keys"):
        for path in sorted(folder.glob("*.pub.json")):
            add("public-key", str(path), load(path))
    for path in sorted((store / "private" / "keys").glob("*.key")):
        add("private-key", str(path), load(path))
    for path in sorted((export / "seals").glob("*.seal.json")):
        add("seal-manifest", str(path), load(path))
    for path in sorted((export / "seals").glob("*.reveal.json")):
        add("reveal", str(path), load(path))
    for path in sorted((store / "private" / "generations").glob("*/*/*.reveal.json")):
        add("reveal", f"opening {path.name}", load(path))
    for path in sorted((store / "passports").glob("*.passport.json")):
        add("passport", str(path), load(path))
    for path in sorted((store / "audit").glob("*/audit_report.json")):
        add("audit-report", str(path), load(path))
    third_party = root / "third-party-audit.json"
    with command_clock(ISSUE_AT):
        result = CliRunner().invoke(app, ["audit", built.ledger_id, "--from", str(export), "--out", str(third_party)])
    assert result.exit_code == 5, result.output  # gen2 is still sealed
    add("audit-report", "third-party audit", load(third_party))
    gen2 = next(path for path in (store / "private" / "generations").glob("*/gen2/*.reveal.json"))
    case = load(gen2)["cases"][0]["case_id"]
    add("member-proof", "prove-member gen2", _cli_json("prove-member", "gen2", case, "--store", str(store)))
    add("inclusion-proof", "ledger prove", _cli_json("ledger", "prove", built.ledger_id, "--index", "3", "--json",
                                                    "--store", str(store)))
    add("consistency-proof", "ledger consistency", _cli_json("ledger", "consistency", built.ledger_id, "--old", "3",
                                                             "--json", "--store", str(store)))
    for name, evaluation in v02_corpus_evaluations():
        add("evaluation", f"MedEval-1 v0.2 corpus evaluation {name}", evaluation)
    site = root / "site"
    with command_clock(ISSUE_AT):
        result = CliRunner().invoke(app, ["site", "build", str(site), "--from", str(export), "--release-tag", "t"])
    assert result.exit_code == 0, result.output
    add("site-manifest", "site manifest.json", load(site / "manifest.json"))
    add("site-leaderboard", "site leaderboard.json", load(site / "leaderboard.json"))
    examples = document_examples((REPO_ROOT / "docs" / "FORMATS.md").read_text(encoding="utf-8"))
    assert examples == build_examples()
    for name in ("member-proof", "reveal", "seal-manifest", "audit-report"):
        add(name, f"FORMATS.md example {name}", json.loads(examples[name].split("```json\n")[1].split("```")[0]))
    return docs


def v02_corpus_evaluations() -> list[tuple[str, Any]]:
    """The MedEval-1 v0.2 evaluation blobs of the fixed corpus (tests/data/v02_corpus), as parsed JSON."""
    import numpy as np

    from harness.metrics import EvaluationMeta, StoredPredictions, evaluation_bytes
    from harness.metrics.registry import metrics_for

    corpus = REPO_ROOT / "tests" / "data" / "v02_corpus"
    out = []
    for case in json.loads((corpus / "corpus.json").read_text("utf-8"))["cases"]:
        predictions = StoredPredictions.from_npz_bytes((corpus / f"{case['name']}.npz").read_bytes())
        labels = np.array(json.loads((corpus / f"{case['name']}.labels.json").read_bytes()), dtype=np.int64)
        evaluation = metrics_for("MedEval-1 v0.2").build_evaluation(EvaluationMeta(**case["meta"]), predictions,
                                                                    labels)
        out.append((case["name"], json.loads(evaluation_bytes(evaluation))))
    return out


ALL_SCHEMAS = sorted(p.name[: -len(".schema.json")] for p in SCHEMAS.glob("*.schema.json"))


def test_every_schema_is_valid_draft_2020_12() -> None:
    assert ALL_SCHEMAS, "no schemas in docs/schemas"
    for name in ALL_SCHEMAS:
        body = schema(name)
        assert body["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        Draft202012Validator.check_schema(body)
    assert {f"entry-{t}" for t in ENTRY_TYPES} <= set(ALL_SCHEMAS)


@pytest.mark.parametrize("name", ALL_SCHEMAS)
def test_written_documents_validate(documents: dict[str, list[tuple[str, Any]]], name: str) -> None:
    found = documents.get(name)
    assert found, f"the flow wrote no document for the schema {name}"
    check = validator(name)
    for where, doc in found:
        errors = sorted(check.iter_errors(doc), key=lambda e: list(e.path))
        assert not errors, f"{where} does not validate against {name}: {errors[0].message} at {list(errors[0].path)}"


@pytest.mark.parametrize("name", ALL_SCHEMAS)
def test_a_missing_required_member_is_refused(documents: dict[str, list[tuple[str, Any]]], name: str) -> None:
    check = validator(name)
    where, doc = documents[name][0]
    required = schema(name)["required"]
    assert required
    for member in required:
        broken = {k: v for k, v in doc.items() if k != member}
        assert not check.is_valid(broken), f"{name} accepts {where} without {member}"


def _undocumented(instance: Any, node: dict[str, Any], path: str) -> Iterator[str]:
    """Members of ``instance`` that its schema node does not name (a map with additionalProperties as a schema
    names its members by pattern: those are documented)."""
    for choice in node.get("oneOf", []):
        if Draft202012Validator(choice).is_valid(instance):
            yield from _undocumented(instance, choice, path)
    if isinstance(instance, dict) and "properties" in node:
        for key, value in instance.items():
            if key not in node["properties"]:
                yield f"{path}.{key}"
            else:
                yield from _undocumented(value, node["properties"][key], f"{path}.{key}")
    elif isinstance(instance, dict) and isinstance(node.get("additionalProperties"), dict):
        for key, value in instance.items():
            yield from _undocumented(value, node["additionalProperties"], f"{path}.{key}")
    elif isinstance(instance, list) and isinstance(node.get("items"), dict):
        for i, value in enumerate(instance):
            yield from _undocumented(value, node["items"], f"{path}[{i}]")


@pytest.mark.parametrize("name", ALL_SCHEMAS)
def test_no_written_member_is_undocumented(documents: dict[str, list[tuple[str, Any]]], name: str) -> None:
    body = schema(name)
    for where, doc in documents[name]:
        extra = sorted(set(_undocumented(doc, body, "$")))
        assert not extra, f"{where} carries members {name} does not document: {extra}"


def test_entry_schemas_match_the_documented_table() -> None:
    """Each entry schema's required members are FORMATS.md's table row, and every type has a row."""
    text = (REPO_ROOT / "docs" / "FORMATS.md").read_text(encoding="utf-8")
    for kind in ENTRY_TYPES:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{kind}` |"))
        required_cell = re.sub(r"\([^)]*\)", "", row.split("|")[2])
        documented = {part.strip().split()[0].strip("`") for part in required_cell.split(",") if part.strip()}
        assert set(schema(f"entry-{kind}")["required"]) - {"type", "v"} == documented, kind
