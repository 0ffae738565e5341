"""Ladder generations release only what they charge for: five models evaluated on a ladder generation leave,
in the export, in every ``--json`` output and in every passport, no evaluation number beyond the ladder
values; a third party's audit is incomplete (exit 5, saying why) until ``retire --reveal`` publishes the
withheld blobs, then complete (exit 0); the operator's audit re-derives everything throughout."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from heldout.cli import app
from heldout.generations import open_ledger
from heldout.generations.access import withheld_blobs_path
from heldout.store import Store
from tests.audit_support import N_CLASSES, NOW, TASK, add_bundle, withholding_store
from tests.generations_support import cli, runner
from tests.independent.replay import replay_export

MODELS = [("majority_like", 0.0), ("weak", 0.1), ("weak_again", 0.05), ("fair", 0.2), ("good", 0.3)]
STEP = 1.0


def stranger(*args: str) -> Any:
    """A command as a third party runs it: no store of its own."""
    return runner.invoke(app, list(args), catch_exceptions=False)


def _floats(value: Any, path: str = "") -> list[tuple[str, float]]:
    """Every non-integer number in a JSON value, with its path (label-free members skipped: cost, timing)."""
    if isinstance(value, dict):
        return [f for key, item in value.items() if key not in ("cost", "runtime_s", "seconds_total")
                for f in _floats(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [f for i, item in enumerate(value) for f in _floats(item, f"{path}[{i}]")]
    if isinstance(value, float) and not value.is_integer():
        return [(path, value)]
    return []


NUMBER = re.compile(r"(?<![0-9A-Za-z_.])-?[0-9]+\.[0-9]+(?:[eE][-+]?[0-9]+)?(?![0-9A-Za-z_])")


def _numbers(text: str) -> set[float]:
    """Every decimal number written in a text, as a whole token, rounded as the canonical form rounds."""
    return {round(float(token), 6) for token in NUMBER.findall(text)}


@pytest.fixture
def ladder(tmp_path: Path) -> dict[str, Any]:
    store, _, ledger_id = withholding_store(tmp_path, ("seal", "gen1", "--tasks", TASK, "--per-task", "80", "--expires",
                                                      "2027-03-01", "--budget-bits", "400", "--ladder-step", str(STEP)),
                                            pool_cases=120)
    indices = [add_bundle(store, "gen1", model, seed=10 + i, skill=skill) for i, (model, skill) in enumerate(MODELS)]
    return {"store": store, "ledger_id": ledger_id, "indices": indices, "root": tmp_path}


def test_ladder_generation_releases_only_ladder_values_until_retired(ladder: dict[str, Any],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    store: Path = ladder["store"]
    ledger_id: str = ladder["ledger_id"]
    root: Path = ladder["root"]
    monkeypatch.setenv("HELDOUT_NOW", "2026-09-02T00:00:00Z")
    st = Store.open(store)

    # What was evaluated, read from the private store on purpose: the numbers that must not get out.
    with open_ledger(st) as ledger:
        entries = {i: e for i, e in ledger.entries() if i in ladder["indices"]}
    released = {e["release"]["value"] for e in entries.values()} - {None}
    secret: dict[str, float] = {}
    committed: set[str] = set()
    for index, entry in entries.items():
        assert entry["release"]["mode"] == "ladder" and "evaluation_sha256" in entry
        committed |= {entry["evaluation_sha256"], entry["predictions_sha256"]}
        evaluation = _withheld(st, ledger_id, entry)
        for path, value in _floats(evaluation):
            if round(value, 6) not in released and len(json.dumps(round(value, 6))) >= 6:
                secret[f"{index}{path}"] = value
    assert len(secret) > 200  # the evaluations hold hundreds of label-dependent numbers
    assert not any((st.blobs / d[:2] / d).exists() for d in committed)  # nothing published in blobs/

    # The ladder's own numbers: improvements only, each a step above the best so far, charged by description length.
    values = [entries[i]["release"]["value"] for i in sorted(entries)]
    best = -math.inf
    for value in values:
        if value is not None:
            assert value >= best + STEP - 1e-9
            best = value
    assert sum(entries[i]["leakage_bits"] for i in entries) < 60  # not ~2,000 bits per bundle

    outputs: dict[str, str] = {}
    outputs["status"] = cli("status", "--json", store=store).output
    gen1 = next(g for g in json.loads(outputs["status"])["generations"] if g["generation"] == "gen1")
    assert gen1["release"]["label_dependent_answers"] == len([v for v in values if v is not None])
    operator = cli("audit", ledger_id, "--json", store=store)
    assert operator.exit_code == 0, operator.output  # the operator re-derives every withheld bundle
    outputs["operator audit"] = operator.output
    assert json.loads(operator.output)["rederived"] == json.loads(operator.output)["bundles"]
    issued = cli("passport", "issue", "good", "--generation", "gen1", "--json", store=store)
    assert issued.exit_code == 0, issued.output
    outputs["passport issue"] = issued.output
    passports = list((store / "passports").glob("*.json"))
    assert passports
    for passport in passports:
        outputs[f"passport {passport.name}"] = passport.read_text()
        cited = json.loads(passport.read_text())["computed"]["evaluations"]
        assert all(e["kind"] == "withheld-bundle" for e in cited)
    export = root / "export"
    assert cli("ledger", "export", ledger_id, str(export), store=store).exit_code == 0
    for path in sorted(export.rglob("*")):
        if path.is_file():
            outputs[f"export {path.relative_to(export)}"] = path.read_bytes().decode("utf-8", "replace")
    assert not committed & {p.name for p in export.rglob("*")}  # no withheld blob in the export
    replay_export(export, ledger_id)  # the replay written from docs/FORMATS.md alone accepts it too
    third = stranger("audit", ledger_id, "--from", str(export), "--json", "--out", str(root / "third.json"))
    assert third.exit_code == 5, third.output
    outputs["third-party audit"] = third.output
    reasons = {u["index"]: u["reason"] for u in json.loads(third.output)["not_rederived"]}
    assert set(ladder["indices"]) <= set(reasons)
    assert all("withheld under ladder release until gen1 is retired" in reasons[i] for i in ladder["indices"])

    written = {where: _numbers(text) for where, text in outputs.items()}
    leaks = [(where, key) for where, numbers in written.items() for key, value in secret.items()
             if round(value, 6) in numbers]
    assert not leaks, leaks[:10]

    # Retirement publishes the withheld blobs; the stranger's audit is then complete.
    retired = cli("retire", "gen1", "--reason", "expired", "--reveal", "--json", store=store)
    assert retired.exit_code == 0, retired.output
    assert json.loads(retired.output)["published"] == 2 * len(MODELS)
    assert all((st.blobs / d[:2] / d).exists() for d in committed)
    after = root / "export-after"
    assert cli("ledger", "export", ledger_id, str(after), store=store).exit_code == 0
    assert committed <= {p.name for p in (after / "blobs" / "sha256").rglob("*")}
    replay_export(after, ledger_id)
    complete = stranger("audit", ledger_id, "--from", str(after), "--json", "--out", str(root / "third-after.json"))
    assert complete.exit_code == 0, complete.output
    report = json.loads(complete.output)
    assert report["rederived"] == report["bundles"] and not report["not_rederived"]


def _withheld(st: Store, ledger_id: str, entry: dict[str, Any]) -> dict[str, Any]:
    from ledger import BlobStore

    return dict(json.loads(BlobStore(withheld_blobs_path(st, ledger_id)).get(entry["evaluation_sha256"])))


def test_a_forged_ladder_value_is_named_by_the_third_party_and_the_operator(ladder: dict[str, Any],
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A dishonest operator logs a ladder value below the best so far (or charges less than the description
    length): even without the withheld blobs the stranger's audit names it (exit 1)."""
    from heldout.generations import ledger_signer
    from seals import parse_utc

    store: Path = ladder["store"]
    st = Store.open(store)
    monkeypatch.setenv("HELDOUT_NOW", "2026-09-02T00:00:00Z")
    with open_ledger(st) as ledger:
        last = dict(next(e for i, e in ledger.entries() if i == ladder["indices"][-1]))
        forged = {**last, "model_id": "forger", "release": {**last["release"], "bits": 0.0, "value": 1.0,
                                                            "label_dependent": True}, "leakage_bits": 0.0}
        index = ledger.append(forged, signer=ledger_signer(st, ledger), now=parse_utc(NOW))
    export = ladder["root"] / "export"
    assert cli("ledger", "export", ladder["ledger_id"], str(export), store=store).exit_code == 0
    for result in (stranger("audit", ladder["ledger_id"], "--json", "--from", str(export), "--out",
                            str(ladder["root"] / "r.json")),
                   cli("audit", ladder["ledger_id"], "--json", store=store)):
        assert result.exit_code == 1, result.output
        findings = json.loads(result.output)["findings"]
        assert any(f["index"] == index and "ladder" in f["message"] for f in findings), findings


@pytest.mark.harness
def test_evaluate_on_a_ladder_generation_prints_only_the_ladder_value(ladder: dict[str, Any],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``heldout evaluate`` itself (a real model, majority): its --json output and its table carry the released
    value and the charge, not the evaluation."""
    pytest.importorskip("torch")
    store: Path = ladder["store"]
    monkeypatch.setenv("HELDOUT_NOW", NOW)
    data = str(ladder["root"] / "data")
    result = cli("evaluate", "majority", "--generation", "gen1", "--tasks", TASK, "--data-root", data, "--json",
                 store=store)
    assert result.exit_code == 0, result.output
    (outcome,) = json.loads(result.output)
    assert outcome["evaluation"] is None and outcome["release"]["mode"] == "ladder"
    entry = outcome["entry"]
    private = _withheld(Store.open(store), ladder["ledger_id"], entry)
    assert private["dimensions"]["accuracy"]["balanced_accuracy"] is not None
    assert "balanced_accuracy" not in result.output and "\"dimensions\":" not in result.output
    table = cli("evaluate", "majority", "--generation", "gen1", "--tasks", TASK, "--data-root", data, "--seed", "2",
                store=store)
    assert table.exit_code == 0, table.output
    assert "released value" in table.output and "bal. acc." not in table.output


def test_admission_is_decided_before_the_model_runs_on_the_worst_case(ladder: dict[str, Any]) -> None:
    """Whether the next answer is an improvement depends on the labels, so admission must not: the next bundle
    is admitted only if the budget can pay for an improvement (gamma(gap) + log2(levels above the best))."""
    from heldout.evaluation import admission_bits
    from heldout.generations import BudgetExhausted, check_budget, load_generations
    from seals import parse_utc

    now = parse_utc(NOW)
    with open_ledger(Store.open(ladder["store"])) as ledger:
        generations = load_generations(ledger, now)
        state = generations["gen1"]
        worst = admission_bits(ledger, state, TASK, N_CLASSES)
        values = [e["release"]["value"] for i, e in ledger.entries() if i in ladder["indices"]]
    best = max(v for v in values if v is not None)
    last = max(n for n, v in enumerate(values) if v is not None)
    gap = len(values) - last  # bundles since the last improvement, counting the next one
    levels_left = round(100 - best)  # step 1: the levels best + 1 .. 100
    expected = 0.0 if levels_left == 0 else round(2 * (gap.bit_length() - 1) + 1 + math.log2(levels_left), 6)
    assert worst == expected and worst > 0, values  # the fixture leaves room above the best
    check_budget(generations, "gen1", worst, now)  # 400 bits pay for it
    with pytest.raises(BudgetExhausted):
        check_budget(generations, "gen1", worst + (state.bits_left or 0.0) + 1.0, now)  # exit 4, nothing run


def test_an_inflated_ladder_value_is_caught_by_the_operator_audit_and_by_anyone_after_retirement(
        ladder: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A dishonest operator publishes a ladder value above what the committed evaluation scores, with a charge
    that fits the transcript: a stranger cannot tell before retirement (exit 5), the operator's audit names it
    at once, and after retirement the published blob (the one committed at evaluation time) convicts it."""
    from heldout.generations import Transcript, answer_bits
    from heldout.generations.release import transcripts
    from tests.audit_support import log_withheld_bundle

    def inflated(ledger: Any, state: Any) -> dict[str, Any]:
        transcript = transcripts(ledger.entries(state.seal_index), "gen1").get(TASK, Transcript())
        fake = (transcript.best() or 0.0) + 5.0  # far above a no-skill model's score, and a valid ladder step
        return {"mode": "ladder", "value": fake, "label_dependent": True,
                "bits": answer_bits("ladder", transcript, True, STEP), "score": "dimensions.accuracy.score"}

    store: Path = ladder["store"]
    index = log_withheld_bundle(store, "gen1", "inflated", seed=99, skill=0.0, release=inflated)
    monkeypatch.setenv("HELDOUT_NOW", "2026-09-02T00:00:00Z")
    export = ladder["root"] / "export"
    assert cli("ledger", "export", ladder["ledger_id"], str(export), store=store).exit_code == 0
    before = stranger("audit", ladder["ledger_id"], "--from", str(export), "--json", "--out",
                      str(ladder["root"] / "r0.json"))
    assert before.exit_code == 5, before.output  # consistent with the transcript: nothing to see yet
    operator = cli("audit", ladder["ledger_id"], "--json", store=store)
    assert operator.exit_code == 1
    assert any(f["index"] == index and "released value is not the ladder answer" in f["message"]
               for f in json.loads(operator.output)["findings"])
    assert cli("retire", "gen1", "--reason", "expired", "--reveal", store=store).exit_code == 0
    after = ladder["root"] / "after"
    assert cli("ledger", "export", ladder["ledger_id"], str(after), store=store).exit_code == 0
    convicted = stranger("audit", ladder["ledger_id"], "--from", str(after), "--json", "--out",
                         str(ladder["root"] / "r1.json"))
    assert convicted.exit_code == 1
    assert any(f["index"] == index and "released value is not the ladder answer" in f["message"]
               for f in json.loads(convicted.output)["findings"])
