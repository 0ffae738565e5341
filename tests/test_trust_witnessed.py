"""Draws and passports with witnesses (issue 10 sections 1, 2 and 4 together), over real HTTP on 127.0.0.1.

* a seal on a witnessed ledger takes its seed from the witnesses' cosignatures on the checkpoint containing
  its intent (``seed_source: witness-cosignatures``), and the reveal and the audit recompute it;
* attack: the operator rebuilds its history under the same ledger id and presents a passport anchored on the
  rebuilt checkpoint: the witnesses refuse to cosign it, so ``passport verify --policy`` refuses the passport
  (offline: no export, no store), while the honest passport passes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from heldout.generations import open_ledger
from heldout.store import Store
from heldout.witness.server import running
from ledger import BlobStore, Checkpoint, Ledger
from ledger.tlogproof import TlogProof
from seals import canonical_bytes, sha256_hex, sign_document
from tests.audit_support import AuditFixture
from tests.conftest import seeded_signer
from tests.generations_support import EXPIRES, NOW, store_with_pools
from tests.generations_support import cli as gen_cli
from tests.test_passport_issue import ISSUE_AT, issued, passport_store, run, verify
from tests.witness_support import Clock, body_for, cosigner, post, witness_folder

OPERATOR = seeded_signer(1, name="test-operator", key_id="test-key-1")
WITNESS_TIME = datetime(2026, 9, 1, 1, tzinfo=UTC)


def policy_file(folder: Path, ledger: Ledger) -> Path:
    lines = [f"log {ledger.verifier_key}", *(f"witness W{i} {cosigner(i).vkey}" for i in range(3)),
             "group wit 2 W0 W1 W2", "quorum wit"]
    path = folder / "policy"
    path.write_text("\n".join(lines) + "\n")
    return path


@contextmanager
def witnesses(root: Path, store: Path, ledger_id: str, at: datetime = WITNESS_TIME) -> Iterator[list[Any]]:
    """Three witnesses on 127.0.0.1 following the store's ledger, added to the store with ``witness add``, their
    clocks at ``at``."""
    with open_ledger(Store.open(store), ledger_id) as ledger:
        origin, vkey = ledger.origin, ledger.verifier_key
    folders = [witness_folder(root, i, origin=origin, vkey=vkey) for i in range(3)]
    with ExitStack() as stack:
        servers = [stack.enter_context(running(f, clock=Clock(at))) for f in folders]
        for i, server in enumerate(servers):
            result = gen_cli("witness", "add", server.url, "--key", cosigner(i).vkey, store=store)
            assert result.exit_code == 0, result.output
        yield servers


def test_a_witnessed_seal_draws_from_the_witnesses_cosignatures(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELDOUT_NOW", NOW)
    store, ledger_id, _ = store_with_pools(tmp_path, ("bloodmnist",))
    with witnesses(tmp_path, store, ledger_id):
        result = gen_cli("seal", "gen1", "--tasks", "bloodmnist", "--per-task", "20", "--budget-bits", "5000",
                         "--expires", EXPIRES, store=store)
        assert result.exit_code == 0, result.output
        manifest = json.loads((store / "seals" / "gen1.seal.json").read_text())
        draw = manifest["draw"]
        assert draw["seed_source"] == "witness-cosignatures" and len(draw["cosignatures"]) >= 2
        assert all(line in draw["checkpoint"]["note"] for line in draw["cosignatures"])
        assert gen_cli("retire", "gen1", "--reason", "expired", "--reveal", store=store).exit_code == 0
        verified = gen_cli("verify-reveal", "gen1", "--key", OPERATOR.public_key.b64, store=store)
        assert verified.exit_code == 0, verified.output
        report = json.loads(gen_cli("audit", ledger_id, "--json", store=store).stdout)
        assert not [f for f in report["findings"] if f["check"] in ("draw", "seal", "reveal", "witnessed-time")], \
            report["findings"]  # (the witnesses' clock an hour ahead of the operator's: within the tolerance)


def test_attack_a_seal_dated_before_the_cosignatures_its_draw_seed_comes_from(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator sets its clock back a month: the seal manifest says the generation was sealed on 1 August,
    but the witnesses cosigned the checkpoint its seed comes from on 1 September (their time is in the
    manifest). A generation sealed before its cases could be known: refused by the reveal check, the audit and
    the independent replay (FORMATS rule 8; a day's clock tolerance)."""
    from tests.independent.replay import ReplayFailure, replay_export

    monkeypatch.setenv("HELDOUT_NOW", "2026-08-01T00:00:00Z")
    store, ledger_id, _ = store_with_pools(tmp_path, ("bloodmnist",))
    with witnesses(tmp_path, store, ledger_id, at=WITNESS_TIME):
        result = gen_cli("seal", "gen1", "--tasks", "bloodmnist", "--per-task", "20", "--budget-bits", "5000",
                         "--expires", EXPIRES, store=store)
        assert result.exit_code == 0, result.output  # the operator's own tool dates the seal by its clock
        assert gen_cli("retire", "gen1", "--reason", "expired", "--reveal", store=store).exit_code == 1
        report = json.loads(gen_cli("audit", ledger_id, "--json", store=store).stdout)
        words = "is dated 2026-08-01T00:00:00Z, more than the clock tolerance (a day) before the witness cosignature"
        assert any(f["check"] == "seal" and words in f["message"] for f in report["findings"]), report["findings"]
        # and the audit's witnessed-time rule names the entry's date (the witnesses' word, under the store's policy)
        assert any(f["check"] == "witnessed-time" and "more than the clock tolerance (a day) before the witnesses "
                   "attest it was logged" in f["message"] for f in report["findings"]), report["findings"]
        assert gen_cli("ledger", "export", ledger_id, str(tmp_path / "export"), store=store).exit_code == 0
        with pytest.raises(ReplayFailure, match="dated more than a day before a cosignature its seed comes from"):
            replay_export(tmp_path / "export", ledger_id)


@pytest.mark.parametrize(("operator_now", "words"), [
    ("2026-08-01T00:00:00Z", "before the witnesses attest it was logged"),
    ("2026-10-01T00:00:00Z", "after the witnesses attest the log held it"),
], ids=["backdated", "postdated"])
def test_attack_entries_dated_outside_the_window_the_witnesses_attest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      operator_now: str, words: str) -> None:
    """The operator holds the clock: a month behind the witnesses, every entry it logs after their cosignature is
    dated before it; a month ahead, every entry they cosigned is dated after they saw it. Each date is a false
    statement the witnesses' timestamps refute: the audit (the store's witness policy) names each entry dated
    outside [latest cosignature without it, earliest cosignature with it] by more than the clock tolerance."""
    monkeypatch.setenv("HELDOUT_NOW", operator_now)
    store, ledger_id, _ = store_with_pools(tmp_path, ("bloodmnist",))
    with witnesses(tmp_path, store, ledger_id, at=WITNESS_TIME):
        assert gen_cli("witness", "sync", ledger_id, store=store).exit_code == 0
        note = tmp_path / "note.json"
        note.write_text(json.dumps({"text": "logged after the witnesses cosigned"}))
        assert gen_cli("ledger", "append", "--type", "note", "--json-file", str(note), store=store).exit_code == 0
        assert gen_cli("witness", "sync", ledger_id, store=store).exit_code == 0
        report = json.loads(gen_cli("audit", ledger_id, "--json", store=store).stdout)
        policy = tmp_path / "policy.txt"
        policy.write_text(json.loads(gen_cli("witness", "policy", "--json", store=store).stdout)["text"])
        export = tmp_path / "export"
        assert gen_cli("ledger", "export", ledger_id, str(export), store=store).exit_code == 0
    dated = [f for f in report["findings"] if f["check"] == "witnessed-time" and words in f["message"]]
    assert dated, report["findings"]
    assert report["exit_code"] == 1
    # the ledger's own verifier with the same policy judges the same window, on the ledger and on its export
    for where in ((), ("--from", str(export))):
        verified = gen_cli("ledger", "verify", ledger_id, *where, "--policy", str(policy), store=store)
        assert verified.exit_code == 1, verified.output
        assert words in " ".join(verified.output.split()), verified.output
    honest = gen_cli("ledger", "verify", ledger_id, "--from", str(export), store=store)
    assert honest.exit_code == 0, honest.output  # without a policy: no witness, no window


@pytest.fixture
def fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AuditFixture:
    built = passport_store(tmp_path, monkeypatch)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no default store: the passport file and the policy
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    return built


def _rebuilt(honest: Ledger, folder: Path, keep: int) -> Ledger:
    """The operator's rebuilt history under the same id: entry 0 re-created byte for byte, the first ``keep``
    entries copied, then another entry where the honest ledger had something else."""
    genesis = honest.genesis
    created = datetime.strptime(genesis["created_utc"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    fork = Ledger.create(folder, OPERATOR, name=genesis["name"], now=created, nonce=bytes.fromhex(genesis["nonce"]))
    assert fork.ledger_id == honest.ledger_id
    copied = [entry for _, entry in honest.entries(1, keep)]
    fork.append_batch(copied, signer=OPERATOR, now=created)
    fork.append({"type": "key", "v": 1, "role": "auditor", "created_utc": ISSUE_AT,
                 "key": {"key_id": "fork", "name": "fork", "public_key_b64": seeded_signer(77).public_key.b64}},
                signer=OPERATOR, now=created + timedelta(days=300))
    return fork


def _anchored_on(doc: dict[str, Any], fork: Ledger, checkpoint: Checkpoint) -> dict[str, Any]:
    """The passport re-anchored on the rebuilt history's checkpoint, re-signed with the operator key."""
    heldout = doc["computed"]["heldout"]

    def proof(index: int) -> str:
        path = tuple(fork.inclusion_proof(index, checkpoint.size).path)
        return TlogProof(index, path, checkpoint.note, fork.entry_bytes(index)).text()

    heldout["checkpoint"] = {"size": checkpoint.size, "root_b64": checkpoint.root_b64, "note": checkpoint.note}
    heldout["proofs"] = {"seal": proof(heldout["seal_index"]),
                         "bundles": [proof(b["index"]) for b in heldout["bundles"]]}
    return sign_document({k: v for k, v in doc.items() if k not in ("issuer", "signature")}, OPERATOR)


def test_attack_a_passport_anchored_on_a_rebuilt_history_is_refused_by_policy(fixture: AuditFixture,
                                                                             tmp_path: Path) -> None:
    with witnesses(tmp_path, fixture.store, fixture.ledger_id) as servers:
        assert run("witness", "sync", fixture.ledger_id, "--store", str(fixture.store)).exit_code == 0
        path = issued(fixture)
        with open_ledger(Store.open(fixture.store), fixture.ledger_id) as honest:
            policy = policy_file(tmp_path, honest)
            result = verify(path, "--key", fixture.key_b64, "--policy", str(policy), "--json")
            assert result.exit_code == 0, result.output
            verdict = json.loads(result.stdout)
            assert verdict["witnessed"]["quorum"] == "wit" and verdict["ledger_checked"] is False
            doc = json.loads(path.read_text())
            cited = max(b["index"] for b in doc["computed"]["heldout"]["bundles"])
            fork = _rebuilt(honest, tmp_path / "rebuilt", keep=cited + 1)
        try:
            forked = fork.latest_checkpoint()
            for server in servers:  # the witnesses have seen the honest history: they refuse the rebuilt one
                status, _, _ = post(server.url, body_for(fork, 0, size=forked.size))
                assert status in (409, 422)
            rebuilt = tmp_path / "rebuilt.passport.json"
            rebuilt.write_bytes(canonical_bytes(_anchored_on(doc, fork, forked)) + b"\n")
        finally:
            fork.close()
    # without a policy the rebuilt passport's proofs hold against the operator's key: that is the attack
    assert verify(rebuilt, "--key", fixture.key_b64).exit_code == 0
    refused = verify(rebuilt, "--key", fixture.key_b64, "--policy", str(policy))
    assert refused.exit_code == 1, refused.output
    assert "quorum 'wit'" in refused.output


def test_attack_a_passport_issued_days_before_the_cosignature_on_its_own_checkpoint(fixture: AuditFixture,
                                                                                   tmp_path: Path) -> None:
    """The issuer's clock runs days behind the witnesses: the checkpoint its passport carries was cosigned on
    09-07, yet the passport says it was issued on 09-02. The document contradicts itself: refused offline, by
    the independent replay (FORMATS rule 11), as by every other verifier."""
    from tests.independent.replay import ReplayFailure, replay_export

    with witnesses(tmp_path, fixture.store, fixture.ledger_id, at=datetime(2026, 9, 7, tzinfo=UTC)):
        assert run("witness", "sync", fixture.ledger_id, "--store", str(fixture.store)).exit_code == 0
        path = issued(fixture)
    offline = verify(path, "--key", fixture.key_b64)
    assert offline.exit_code == 1, offline.output
    assert "more than the clock tolerance (a day) before a witness cosigned the checkpoint it carries" in \
        offline.output
    export = tmp_path / "export"
    assert run("ledger", "export", fixture.ledger_id, str(export), "--store", str(fixture.store)).exit_code == 0
    with pytest.raises(ReplayFailure, match="more than a day before a cosignature on its checkpoint"):
        replay_export(export, fixture.ledger_id)


def test_attack_a_later_cosignature_only_on_the_passports_own_checkpoint_note(fixture: AuditFixture,
                                                                              tmp_path: Path) -> None:
    """The passport's own checkpoint note (``computed.heldout.checkpoint.note``) carries a cosignature dated days
    after its ``issued_utc``; its proofs' notes carry none. FORMATS rule 11 dates a passport by the cosignatures
    in its checkpoint note or its proofs' notes: the independent replay refused it while ``passport verify``,
    which read the proofs' notes only, passed it (two verdicts on one document)."""
    from ledger import parse_checkpoint
    from ledger.cosignature import cosign, with_cosignatures
    from tests.independent.replay import ReplayFailure, replay_export
    from tests.witness_support import witness_signer

    path = issued(fixture)
    doc = json.loads(path.read_text())
    own = doc["computed"]["heldout"]["checkpoint"]
    checkpoint = parse_checkpoint(own["note"])
    later = int(datetime(2026, 9, 20, tzinfo=UTC).timestamp())
    own["note"] = with_cosignatures(checkpoint, [cosign(checkpoint, witness_signer(0), later).line]).note
    forged = tmp_path / "forged.passport.json"
    forged.write_bytes(canonical_bytes(sign_document({k: v for k, v in doc.items() if k not in ("issuer", "signature")},
                                                     OPERATOR)) + b"\n")
    offline = verify(forged, "--key", fixture.key_b64)
    assert offline.exit_code == 1, offline.output
    assert "before a witness cosigned the checkpoint it carries" in " ".join(offline.output.split())
    with open_ledger(Store.open(fixture.store), fixture.ledger_id) as ledger:
        ledger.append({"type": "passport", "v": 1, "model_id": doc["subject"]["model_id"],
                       "generation": doc["computed"]["heldout"]["generation"],
                       "passport_sha256": sha256_hex(canonical_bytes(json.loads(forged.read_text()))),
                       "created_utc": "2026-09-03T00:00:00Z"}, signer=OPERATOR,
                      now=datetime(2026, 9, 3, tzinfo=UTC))
        BlobStore(Store.open(fixture.store).blobs).put(canonical_bytes(json.loads(forged.read_text())))
    export = tmp_path / "export"
    assert run("ledger", "export", fixture.ledger_id, str(export), "--store", str(fixture.store)).exit_code == 0
    with pytest.raises(ReplayFailure, match="more than a day before a cosignature on its checkpoint"):
        replay_export(export, fixture.ledger_id)


@pytest.mark.parametrize("config", ["deleted", "folder"])
def test_attack_a_seal_run_without_its_witnesses_to_grind_the_draw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  config: str) -> None:
    """gen1 is drawn from the witnesses' cosignatures. For gen2 the operator deletes its witness configuration (or
    it is damaged: a folder in its place, which read as "no witnesses"): its seal then drew from the checkpoint
    root, a seed the operator knows before it logs, and every verifier accepted it. A damaged configuration is
    now an error (exit 2, nothing written); a removed one gives a checkpoint-root draw that the audit under the
    policy names: the policy's witnesses had cosigned the log before it."""
    monkeypatch.setenv("HELDOUT_NOW", NOW)
    store, ledger_id, _ = store_with_pools(tmp_path, ("bloodmnist",))
    config_file = store / "witnesses" / "witnesses.json"
    with witnesses(tmp_path, store, ledger_id):
        assert gen_cli("seal", "gen1", "--tasks", "bloodmnist", "--per-task", "20", "--budget-bits", "5000",
                       "--expires", EXPIRES, store=store).exit_code == 0
        with open_ledger(Store.open(store), ledger_id) as ledger:
            policy = policy_file(tmp_path, ledger)
        saved = config_file.read_bytes()
        config_file.unlink()
        if config == "folder":
            config_file.mkdir()
            size = len(list((store / "ledgers").glob("*.sqlite")))
            refused = gen_cli("seal", "gen2", "--tasks", "bloodmnist", "--per-task", "20", "--budget-bits", "5000",
                              "--expires", EXPIRES, store=store)
            assert refused.exit_code == 2 and "witness configuration is damaged" in refused.output, refused.output
            assert not (store / "seals" / "gen2.seal.json").exists()
            assert len(list((store / "ledgers").glob("*.sqlite"))) == size
            return
        assert gen_cli("seal", "gen2", "--tasks", "bloodmnist", "--per-task", "20", "--budget-bits", "5000",
                       "--expires", EXPIRES, store=store).exit_code == 0
        assert json.loads((store / "seals" / "gen2.seal.json").read_text())["draw"]["seed_source"] == "checkpoint-root"
        config_file.write_bytes(saved)
        report = json.loads(gen_cli("audit", ledger_id, "--json", "--policy", str(policy), store=store).stdout)
    words = "is seeded by the root of checkpoint"
    assert any(f["check"] == "draw" and words in f["message"] and "gen2" in f["message"]
               for f in report["findings"]), report["findings"]
    assert not any(words in f["message"] and "gen1" in f["message"] for f in report["findings"])
