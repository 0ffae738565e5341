"""The reworked budget and the release mechanisms against worked examples written out here (n, k, eps, delta,
bits), then Thresholdout end to end: seal, evaluate, withheld, audited by the operator, published at retirement
and recomputed by a stranger from the published noise secret."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from heldout.cli import app
from heldout.generations import Transcript, answer_bits, make_budget, worst_case_bits
from heldout.generations.budget import (
    TaskShape,
    default_budget_bits,
    full_evaluation_bits,
    implied_eps,
    released_families,
    statement_bits,
)
from heldout.generations.release import (
    gamma_bits,
    ladder_levels_above,
    laplace,
    laplace_quantile,
    levels,
    thresholdout_answer,
)
from keys import UsageError
from tests.audit_support import N_CLASSES, NOW, TASK, add_bundle, command_clock
from tests.generations_support import cli, init_store, runner, write_npz

LN2 = math.log(2)


# --- the bound, worked ---------------------------------------------------------------------------------------

def test_breastmnist_smallest_class_gives_eps_0_31_even_at_zero_bits() -> None:
    # n = 42 malignant cases, S = 100 statistics (100 models, one score each), delta = 0.05, L = 0:
    # eps = sqrt((0 + ln(2 * 100 / 0.05)) / (2 * 42)) = sqrt(8.294050 / 84) = 0.314227 on [0, 1];
    # on the published accuracy score 100*cc(bacc) with K = 2 the scale is 100 / (1 - 1/2) = 200: 62.8454.
    assert implied_eps(0.0, 42, 100, 0.05) == 0.314227
    shape = TaskShape(task="breastmnist", n=156, n_classes=2, smallest_class=42)
    (score,) = released_families("ladder", shape)
    assert (score.n, score.scale, score.per_evaluation) == (42, 200.0, 1)
    assert score.eps(0.0, 100, 0.05) == 62.8454


def test_default_budget_worked_example() -> None:
    # n = 1000, S = 100, delta = 0.05, eps = 0.1: L = (2 * 1000 * 0.01 - ln 4000) / ln 2 = (20 - 8.294050) / 0.693147
    assert default_budget_bits(1000, 100, 0.05, 0.1) == 16.888117
    assert implied_eps(16.888117, 1000, 100, 0.05) == pytest.approx(0.1, abs=1e-6)


def test_manifest_budget_states_each_family_at_its_n_and_scale() -> None:
    # breastmnist, 156 cases of which 42 in the smallest class, ladder release, k = 100 models, 50 bits:
    # one family, n = 42, S = 100 * 1 task * 1 score, eps = 200 * sqrt((50 ln 2 + ln 4000) / 84) = 143.0142,
    # and the seal itself states the smallest class: log2(156 + 1) = 7.294621 bits.
    shape = TaskShape(task="breastmnist", n=156, n_classes=2, smallest_class=42)
    budget = make_budget(n=156, k=100, bits=50.0, mode="ladder", shapes=[shape], step=1.0)
    assert budget.n == 42 and budget.statement_bits == 7.294621 == statement_bits([shape.n])
    (family,) = budget.families
    assert family == {"family": "accuracy score 100*cc(balanced accuracy), 0-100", "n": 42, "scale": 200.0,
                      "per_evaluation": 1, "statistics": 100, "eps": 143.0142}
    # full release: class-wise families at the smallest class, case-wise at n, ratios stated as not covered.
    full = {f.family.split(" (")[0].split(",")[0]: f for f in released_families("full", shape)}
    assert {f.n for f in full.values() if f.covered} == {42, 156}
    assert [f.covered for f in released_families("full", shape)].count(False) == 1


def test_task_shape_takes_the_smallest_class_from_the_labels() -> None:
    assert TaskShape.from_labels("breastmnist", [0] * 114 + [1] * 42, 2).smallest_class == 42
    assert TaskShape.from_labels("bloodmnist", [0, 1, 2], 8).smallest_class == 1  # absent classes: the floor is 1


def test_seal_refuses_a_budget_that_cannot_pay_for_one_evaluation_with_the_numbers() -> None:
    shape = TaskShape(task="bloodmnist", n=500, n_classes=8, smallest_class=40)
    one = full_evaluation_bits(500, 8)
    assert 1500 < one < 2500
    with pytest.raises(UsageError) as caught:
        make_budget(n=500, bits=2.46, mode="full", shapes=[shape])
    message = caught.value.message
    assert "2.46 bits cannot pay for one evaluation in full release" in message and f"{one:.2f}" in message
    # the ladder's first answer costs gamma(1) + log2(101) = 7.658211 bits at step 1, plus log2(501) for the seal
    assert worst_case_bits("ladder", Transcript(), 1.0) == 7.658211
    make_budget(n=500, bits=7.658211 + math.log2(501) + 1e-6, mode="ladder", shapes=[shape], step=1.0)
    with pytest.raises(UsageError, match="cannot pay for one evaluation in ladder release"):
        make_budget(n=500, bits=7.65 + math.log2(501), mode="ladder", shapes=[shape], step=1.0)


# --- the description length of released sequences --------------------------------------------------------------

def test_elias_gamma_lengths() -> None:
    assert [gamma_bits(g) for g in (1, 2, 3, 4, 7, 8, 100)] == [1, 3, 3, 5, 5, 7, 13]
    with pytest.raises(UsageError):
        gamma_bits(0)


def test_ladder_transcript_charge_worked_example() -> None:
    # step 1 on [0, 100]: 101 levels. Bundle 1 improves to 40: gamma(1) + log2(101) = 1 + 6.658211.
    # Bundle 2 does not improve: 0 bits now. Bundle 3 improves to 55, two bundles after the last improvement:
    # gamma(2) + log2(levels above 40 = 101 - 41 = 60) = 3 + 5.906891. In all 16.565102 bits, not 1 bit per
    # non-improvement plus a fixed price per improvement.
    assert levels(1.0) == 101 and ladder_levels_above(40.0, 1.0) == 60
    t = Transcript()
    first = answer_bits("ladder", t, True, 1.0)
    t = t.then(40.0, True)
    second = answer_bits("ladder", t, False, 1.0)
    t = t.then(None, False)
    third = answer_bits("ladder", t, True, 1.0)
    assert (first, second, third) == (7.658211, 0.0, 8.906891)
    assert round(first + second + third, 6) == 16.565102
    # the worst case admission checks equals the dearest answer; at the top level nothing can be released
    assert worst_case_bits("ladder", t, 1.0) == third
    assert worst_case_bits("ladder", Transcript().then(100.0, True), 1.0) == 0.0


def test_thresholdout_charges_only_over_threshold_answers() -> None:
    # 3 public answers then one over the threshold: gamma(4) + log2(101) = 5 + 6.658211 = 11.658211 bits.
    t = Transcript()
    for _ in range(3):
        assert answer_bits("thresholdout", t, False, 1.0) == 0.0
        t = t.then(None, False)
    assert answer_bits("thresholdout", t, True, 1.0) == 11.658211


def test_laplace_inverse_cdf_and_keyed_draws() -> None:
    # u = 0.75: -b * sign(0.25) * ln(1 - 0.5) = b ln 2; u = 0.25: -b ln 2; u = 0.5: 0.
    assert laplace_quantile(0.75, 2.0) == pytest.approx(2 * LN2)
    assert laplace_quantile(0.25, 2.0) == pytest.approx(-2 * LN2)
    assert laplace_quantile(0.5, 2.0) == 0.0
    secret = bytes(range(32))
    draws = [laplace(secret, 1.5, answer=i, draw="xi", task="bloodmnist") for i in range(4000)]
    assert draws == [laplace(secret, 1.5, answer=i, draw="xi", task="bloodmnist") for i in range(4000)]  # recomputable
    assert sum(abs(d) for d in draws) / len(draws) == pytest.approx(1.5, rel=0.08)  # E|Laplace(b)| = b
    assert sum(draws) / len(draws) == pytest.approx(0.0, abs=0.1)
    assert laplace(b"\x00" * 32, 1.5, answer=0, draw="xi", task="t") != laplace(secret, 1.5, answer=0, draw="xi",
                                                                                   task="t")


def test_thresholdout_answer_follows_the_paper() -> None:
    secret = bytes(32)
    # far apart (|80 - 20| = 60 >> T = 2): the held-out score plus xi ~ Lap(sigma), rounded to the step
    far = thresholdout_answer(80.0, 20.0, secret=secret, threshold=2.0, sigma=0.5, step=1.0, task="t", answer=5,
                              last_over_threshold=None)
    assert far.over_threshold and far.xi is not None
    assert far.value == round(80.0 + far.xi) and abs(far.value - 80.0) < 10
    # close (|50.3 - 50| = 0.3 << T = 20): the public estimate, nothing label-dependent
    close = thresholdout_answer(50.3, 50.0, secret=secret, threshold=20.0, sigma=0.5, step=1.0, task="t", answer=6,
                                last_over_threshold=None)
    assert not close.over_threshold and close.value == 50.0 and close.xi is None
    # the threshold in force is T + gamma, gamma ~ Lap(2 sigma), redrawn after each over-threshold answer
    assert far.threshold - 2.0 == pytest.approx(close.threshold - 20.0)  # the same gamma until an answer is over
    again = thresholdout_answer(50.3, 50.0, secret=secret, threshold=20.0, sigma=0.5, step=1.0, task="t", answer=7,
                                last_over_threshold=5)
    assert again.threshold != pytest.approx(close.threshold)


# --- Thresholdout end to end ----------------------------------------------------------------------------------

def stranger(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


def thresholdout_store(tmp_path: Path) -> tuple[Path, str, Path]:
    """public and a Thresholdout gen1 (T = 4, sigma = 1 on the 0-100 score) of bloodmnist, no bundles yet."""
    store = tmp_path / "store"
    data = tmp_path / "data"
    with command_clock(NOW):
        ledger_id = init_store(store)
        write_npz(data / f"{TASK}.npz", n_test=60, classes=N_CLASSES, shape=(28, 28, 3), seed=11)
        pool = write_npz(tmp_path / "pool.npz", n_test=120, classes=N_CLASSES, shape=(28, 28, 3), seed=12)
        for args in (("pool", "add", TASK, str(pool)),
                     ("seal", "public", "--tasks", TASK, "--data-root", str(data), "--expires", "2027-06-01"),
                     ("seal", "gen1", "--tasks", TASK, "--per-task", "80", "--expires", "2027-03-01",
                      "--budget-bits", "400", "--thresholdout", "--threshold", "4", "--sigma", "1")):
            result = cli(*args, store=store)
            assert result.exit_code == 0, result.output
    return store, ledger_id, data


def test_thresholdout_generation_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, ledger_id, data = thresholdout_store(tmp_path)
    manifest = json.loads((store / "seals" / "gen1.seal.json").read_text())
    assert manifest["release"]["mode"] == "thresholdout" and len(manifest["release"]["noise_sha256"]) == 64
    skills = (0.2, 0.5, 0.9, 1.4)
    for i, skill in enumerate(skills):  # the public estimate: each model's score on the public generation
        add_bundle(store, "public", f"m{i}", seed=50 + i, skill=skill, data_root=data)
    indices = [add_bundle(store, "gen1", f"m{i}", seed=50 + i, skill=skill) for i, skill in enumerate(skills)]
    monkeypatch.setenv("HELDOUT_NOW", "2026-09-02T00:00:00Z")
    status = json.loads(cli("status", "--json", store=store).output)
    gen1 = next(g for g in status["generations"] if g["generation"] == "gen1")
    assert gen1["release"]["withholding"] and gen1["budget"]["guarantee_now"][0]["statistics"] == len(skills)
    operator = cli("audit", ledger_id, "--json", store=store)
    assert operator.exit_code == 0, operator.output  # recomputes every answer from the private noise secret
    export = tmp_path / "export"
    assert cli("ledger", "export", ledger_id, str(export), store=store).exit_code == 0
    third = stranger("audit", ledger_id, "--from", str(export), "--json", "--out", str(tmp_path / "r1.json"))
    assert third.exit_code == 5
    reasons = {u["index"]: u["reason"] for u in json.loads(third.output)["not_rederived"]}
    assert all("withheld under thresholdout release" in reasons[i] for i in indices)
    assert cli("retire", "gen1", "--reason", "expired", "--reveal", store=store).exit_code == 0
    after = tmp_path / "after"
    assert cli("ledger", "export", ledger_id, str(after), store=store).exit_code == 0
    assert manifest["release"]["noise_sha256"] in {p.name for p in (after / "blobs").rglob("*")}
    complete = stranger("audit", ledger_id, "--from", str(after), "--json", "--out", str(tmp_path / "r2.json"))
    assert complete.exit_code == 0, complete.output


def test_a_thresholdout_answer_on_the_wrong_branch_is_named_by_the_operator_audit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dishonest operator releases a model's (flattering) public estimate at 0 bits although its held-out
    score is far from it, so the noise it committed to at seal time says the answer was over the threshold."""
    from heldout.evaluation import public_estimate
    from heldout.store import Store
    from ledger import BlobStore
    from tests.audit_support import log_withheld_bundle

    store, ledger_id, data = thresholdout_store(tmp_path)
    public_index = add_bundle(store, "public", "liar", seed=5, skill=3.0, data_root=data)  # scores ~100 in public

    def flattering(ledger: Any, state: Any) -> dict[str, Any]:
        _, estimate = public_estimate(ledger, BlobStore(Store.open(store).blobs), "liar", TASK)
        return {"mode": "thresholdout", "value": round(estimate, 6), "label_dependent": False, "bits": 0.0,
                "score": "dimensions.accuracy.score", "public_estimate": round(estimate, 6),
                "public_bundle": public_index}

    index = log_withheld_bundle(store, "gen1", "liar", seed=5, skill=0.0, release=flattering)  # no skill held out
    monkeypatch.setenv("HELDOUT_NOW", "2026-09-02T00:00:00Z")
    operator = cli("audit", ledger_id, "--json", store=store)
    assert operator.exit_code == 1, operator.output
    assert any(f["index"] == index and "Thresholdout branch" in f["message"]
               for f in json.loads(operator.output)["findings"])


def test_attack_thresholdout_estimate_from_an_older_public_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Thresholdout answers against the model's public estimate: its latest public run before the bundle. An
    operator who cites an earlier, better public run (chosen after seeing the held-out score) is named by both
    audits (the rule reads public entries only)."""
    from heldout.store import Store
    from ledger import BlobStore
    from tests.audit_support import log_withheld_bundle

    store, ledger_id, data = thresholdout_store(tmp_path)
    better = add_bundle(store, "public", "picky", seed=5, skill=3.0, data_root=data)
    latest = add_bundle(store, "public", "picky", seed=6, skill=0.1, data_root=data)

    def from_the_better_run(ledger: Any, state: Any) -> dict[str, Any]:
        entry = dict(ledger.entries(better, better + 1).__next__()[1])
        score = json.loads(BlobStore(Store.open(store).blobs).get(entry["evaluation_sha256"]))
        estimate = round(score["dimensions"]["accuracy"]["score"], 6)
        return {"mode": "thresholdout", "value": estimate, "label_dependent": False, "bits": 0.0,
                "score": "dimensions.accuracy.score", "public_estimate": estimate, "public_bundle": better}

    index = log_withheld_bundle(store, "gen1", "picky", seed=5, skill=3.0, release=from_the_better_run)
    monkeypatch.setenv("HELDOUT_NOW", "2026-09-02T00:00:00Z")
    operator = cli("audit", ledger_id, "--json", store=store)
    assert operator.exit_code == 1, operator.output
    expected = f"cites public bundle {better}, not the model's latest before it ({latest})"
    assert any(f["index"] == index and expected in f["message"] for f in json.loads(operator.output)["findings"])
    export = tmp_path / "export"
    assert cli("ledger", "export", ledger_id, str(export), store=store).exit_code == 0
    third = stranger("audit", ledger_id, "--from", str(export), "--json", "--out", str(tmp_path / "r.json"))
    assert third.exit_code == 1
    assert any(f["index"] == index and expected in f["message"] for f in json.loads(third.output)["findings"])


def test_attack_thresholdout_estimate_from_another_run_of_the_model(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Public runs are free: the operator runs a model on the public generation under several seeds (another
    seed trains other weights) and keeps the best as the latest, then evaluates the held-out run under another
    seed. The Thresholdout answer is then measured against another model's public score. The estimate must be
    the same run's (seed, description, code): the operator's command refuses it, and when it is logged anyway
    both audits and the independent replay name it (red-team round 10)."""
    from heldout.store import Store
    from tests.audit_support import log_withheld_bundle
    from tests.independent.replay import ReplayFailure, replay_export

    store, ledger_id, data = thresholdout_store(tmp_path)
    add_bundle(store, "public", "seeds", seed=5, skill=3.0, data_root=data)
    with pytest.raises(UsageError, match="is another run of the model \\(seed 5, this one 9\\)"):
        add_bundle(store, "gen1", "seeds", seed=9, skill=0.5)

    def honest_looking(ledger: Any, state: Any) -> dict[str, Any]:
        from heldout.evaluation import public_estimate
        from ledger import BlobStore

        index, estimate = public_estimate(ledger, BlobStore(Store.open(store).blobs), "seeds", TASK)
        return {"mode": "thresholdout", "value": round(estimate, 6), "label_dependent": False, "bits": 0.0,
                "score": "dimensions.accuracy.score", "public_estimate": round(estimate, 6), "public_bundle": index}

    index = log_withheld_bundle(store, "gen1", "seeds", seed=9, skill=0.5, release=honest_looking)
    monkeypatch.setenv("HELDOUT_NOW", "2026-09-02T00:00:00Z")
    words = "its public estimate is of another run of the model"
    operator = cli("audit", ledger_id, "--json", store=store)
    assert operator.exit_code == 1 and any(f["index"] == index and words in f["message"]
                                           for f in json.loads(operator.output)["findings"]), operator.output
    export = tmp_path / "export"
    assert cli("ledger", "export", ledger_id, str(export), store=store).exit_code == 0
    third = stranger("audit", ledger_id, "--from", str(export), "--json", "--out", str(tmp_path / "r.json"))
    assert third.exit_code == 1
    assert any(f["index"] == index and words in f["message"] for f in json.loads(third.output)["findings"])
    with pytest.raises(ReplayFailure, match="public_bundle is another run of the model"):
        replay_export(export, ledger_id)


def test_attack_thresholdout_noise_ground_by_padding_the_ledger(tmp_path: Path) -> None:
    """The operator holds the noise secret, so it can compute in advance what each entry index would release.
    When the noise was keyed on the bundle's ledger index, a batch of k notes before the bundle chose among k
    answers (the campaign moved a release from 52 to 61). The noise is keyed on the answer's place in the
    task's transcript: notes before the bundle change nothing (red-team round 10). An over-threshold answer
    (public score far from the held-out one) releases the held-out score plus its noise, rounded."""
    import shutil

    store, _, data = thresholdout_store(tmp_path)
    add_bundle(store, "public", "grinder", seed=5, skill=3.0, data_root=data)
    releases = []
    for padding in (0, 1, 2, 3, 5, 8):
        where = tmp_path / f"padded-{padding}"
        shutil.copytree(store, where)
        if padding:
            note = tmp_path / f"notes-{padding}.jsonl"
            note.write_text("".join(json.dumps({"text": f"padding {k}"}) + "\n" for k in range(padding)))
            with command_clock(NOW):
                assert cli("ledger", "append", "--type", "note", "--jsonl-file", str(note), store=where).exit_code == 0
        index = add_bundle(where, "gen1", "grinder", seed=5, skill=0.0)
        releases.append(_entry(where, index)["release"])
    assert releases[0]["label_dependent"] is True  # over the threshold: the released value carries the noise
    assert all(release == releases[0] for release in releases)


def _entry(store: Path, index: int) -> dict[str, Any]:
    from heldout.generations import open_ledger
    from heldout.store import Store

    with open_ledger(Store.open(store)) as ledger:
        return dict(next(iter(ledger.entries(index, index + 1)))[1])


def test_a_sealed_generation_bundle_states_no_hash_of_its_labels(tmp_path: Path) -> None:
    """An unsalted hash of the sealed labels in every public bundle entry let anyone recover them by enumeration
    on a small task set, before the reveal (the campaign recovered 20 binary labels from one entry, red-team
    round 10). Only the public generation's entries state it; the audit re-derives every number from the
    labels, so the sealed ones lose no check."""
    store, ledger_id, data = thresholdout_store(tmp_path)
    public = add_bundle(store, "public", "m", seed=5, skill=0.9, data_root=data)
    sealed = add_bundle(store, "gen1", "m", seed=5, skill=0.9)
    assert "labels_hash" in _entry(store, public) and "labels_hash" not in _entry(store, sealed)
    with command_clock("2026-09-02T00:00:00Z"):
        assert cli("audit", ledger_id, "--json", store=store).exit_code == 0


def test_attack_two_generations_sealed_with_one_thresholdout_noise_secret(tmp_path: Path) -> None:
    """The Thresholdout draws are keyed by the secret, the task and the answer's place, not by the generation: a
    secret used for two generations is the same noise for both, and the first retirement publishes it (anyone
    could then read the second generation's held-out answers through it). Every reader of the log names a seal
    entry that reuses another generation's noise_sha256 (FORMATS rule 8)."""
    from heldout.generations import load_generations, open_ledger
    from heldout.store import Store
    from seals import parse_utc

    store, _, _ = thresholdout_store(tmp_path)
    with command_clock(NOW):
        assert cli("seal", "gen2", "--tasks", TASK, "--per-task", "20", "--expires", "2027-03-01", "--budget-bits",
                   "400", "--thresholdout", "--threshold", "4", "--sigma", "1", store=store).exit_code == 0
    with open_ledger(Store.open(store)) as ledger:
        entries = list(ledger.entries())
    seals = {entry["generation"]: index for index, entry in entries if entry["type"] == "seal"}
    honest = load_generations(entries, parse_utc(NOW))
    assert not [a for a in honest.anomalies if "noise secret" in a.message]
    first = entries[seals["gen1"]][1]["release"]["noise_sha256"]
    index, second = entries[seals["gen2"]]
    reused = [*entries[:index], (index, {**second, "release": {**second["release"], "noise_sha256": first}}),
              *entries[index + 1:]]
    found = [a for a in load_generations(reused, parse_utc(NOW)).anomalies if "noise secret" in a.message]
    assert len(found) == 1 and found[0].evidence["index"] == index and "of gen1" in found[0].message
