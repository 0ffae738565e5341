"""Named attacks by a dishonest operator (who holds the key, the clock and the server) against witnessing,
following and time, each refused: history rebuilt under the same id, a split view, the clock set back, a
backdated entry in a forged export, an evaluation logged after the witnesses attested the generation's expiry."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from heldout.store import Store
from heldout.witness.server import running
from keys import ExpiredError, verifier_key_string
from ledger import Checkpoint, Ledger, verify_checkpoint
from ledger.cosignature import verified_cosignatures, with_cosignatures
from ledger.entries import encode_entry
from ledger.policy import PolicyError, QuorumError, parse_policy
from ledger.witness import Witness
from tests.audit_support import AuditFixture, add_bundle, build_store
from tests.conftest import seeded_signer
from tests.test_ledger_support import T0
from tests.witness_support import (
    AT,
    Clock,
    append_key_entry,
    body_for,
    cli,
    cosigner,
    operator_store,
    post,
    witness_folder,
    witness_signer,
)

OPERATOR = seeded_signer(1, name="lab-operator", key_id="lab-1")


def policy_text(ledger: Ledger, k: int = 2, n: int = 3) -> str:
    lines = [f"log {ledger.verifier_key}", *(f"witness W{i} {cosigner(i).vkey}" for i in range(n)),
             f"group wit {k} {' '.join(f'W{i}' for i in range(n))}", "quorum wit"]
    return "\n".join(lines) + "\n"


def rebuild_under_same_id(honest: Ledger, folder: Path) -> Ledger:
    """What the operator can do with its own key: re-create entry 0 byte for byte (same name, time, nonce),
    so the ledger id is the same, and log another history after it."""
    genesis = honest.genesis
    created = datetime.strptime(genesis["created_utc"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    fork = Ledger.create(folder, OPERATOR, name=genesis["name"], now=created, nonce=bytes.fromhex(genesis["nonce"]))
    assert fork.ledger_id == honest.ledger_id
    return fork


def key_entry(i: int, when: str = AT) -> dict[str, object]:
    public = seeded_signer(80 + i, name=f"k{i}", key_id=f"k{i}").public_key.b64
    return {"type": "key", "v": 1, "key": {"key_id": f"k{i}", "name": f"k{i}", "public_key_b64": public},
            "role": "auditor", "created_utc": when}


@contextmanager
def served(folder: Path) -> Iterator[str]:
    """A static HTTP server over ``folder`` on 127.0.0.1 (an export published on the web)."""
    handler = functools.partial(_QuietFiles, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return None


def test_attack_history_rebuilt_under_the_same_id(tmp_path: Path) -> None:
    store, ledger_id, honest = operator_store(tmp_path)
    folders = [witness_folder(tmp_path, i, origin=honest.origin, vkey=honest.verifier_key) for i in range(3)]
    policy = tmp_path / "policy"
    policy.write_text(policy_text(honest))
    with honest, ExitStack() as stack:
        servers = [stack.enter_context(running(f, clock=Clock(T0 + timedelta(hours=1)))) for f in folders]
        for i, server in enumerate(servers):
            assert cli("witness", "add", server.url, "--key", cosigner(i).vkey, store=store).exit_code == 0
        for i in range(1, 4):
            assert append_key_entry(store, ledger_id, tmp_path, i).exit_code == 0
        # an append waits for the quorum only (2 of 3); sync brings the slowest witness up to date too
        assert cli("witness", "sync", ledger_id, store=store).exit_code == 0
        first = tmp_path / "export1"
        assert cli("ledger", "export", ledger_id, str(first), store=store).exit_code == 0
        state = tmp_path / "follower.json"
        with served(first) as url:  # the follower reads the published export over HTTP
            followed = cli("ledger", "follow", ledger_id, "--from", url, "--state", str(state), "--policy",
                           str(policy), "--json")
        assert followed.exit_code == 0, followed.output
        assert json.loads(followed.stdout)["size"] == 4

        # the operator rebuilds the ledger under the same id, drops entry 2 and logs more
        fork = rebuild_under_same_id(honest, tmp_path / "rebuilt")
        fork.append_batch([key_entry(1), key_entry(5), key_entry(6), key_entry(7)], signer=OPERATOR,
                          now=T0 + timedelta(days=1))
        # every witness refuses it: it does not extend what they cosigned (422), and nobody cosigns size 5
        for server in servers:
            assert post(server.url, body_for(fork, 4, size=5))[0] == 422
            assert post(server.url, body_for(fork, 0, size=5))[0:3:2] == (409, b"4\n")
        second = tmp_path / "export2"
        from ledger import export_ledger

        export_ledger(fork, second)
        # with the policy the follower refuses for want of a quorum, without touching its state
        unwitnessed = cli("ledger", "follow", ledger_id, "--from", str(second), "--state", str(state), "--policy",
                          str(policy))
        assert unwitnessed.exit_code == 1 and "quorum 'wit'" in unwitnessed.output
        # without a policy (or against colluding witnesses) the follower still refuses: fork evidence, exit 1
        refused = cli("ledger", "follow", ledger_id, "--from", str(second), "--state", str(state))
        assert refused.exit_code == 1 and "not proven to extend" in refused.output
        evidence = sorted((tmp_path / "follower.json.evidence").iterdir())
        assert len(evidence) == 1 and evidence[0].name.startswith("fork-4-5-")
        notes = [(evidence[0] / n).read_text() for n in ("accepted.note", "presented.note")]
        signed = [verify_checkpoint(n, name=OPERATOR.name, key=OPERATOR.public_key, origin=honest.origin)
                  for n in notes]
        assert [c.size for c in signed] == [4, 5]  # two signed heads that cannot both be one history
        assert json.loads(state.read_text())["note"].startswith(f"{honest.origin}\n4\n")  # state unchanged
        fork.close()


def test_attack_split_view_the_witnesses_cosign_at_most_one(tmp_path: Path) -> None:
    """Two different checkpoints of one size, shown to two groups of verifiers (and witnesses)."""
    _, _, honest = operator_store(tmp_path)
    with honest:
        fork = rebuild_under_same_id(honest, tmp_path / "other-view")
        honest.append_batch([key_entry(1), key_entry(2)], signer=OPERATOR, now=T0)
        fork.append_batch([key_entry(1), key_entry(3)], signer=OPERATOR, now=T0)
        left, right = honest.latest_checkpoint(), fork.latest_checkpoint()
        assert left.size == right.size == 3 and left.root != right.root
        folders = [witness_folder(tmp_path, i, origin=honest.origin, vkey=honest.verifier_key) for i in range(3)]
        views: dict[str, list[str]] = {"left": [], "right": []}
        with ExitStack() as stack:
            servers = [stack.enter_context(running(f, clock=Clock(T0))) for f in folders]
            # the operator shows the left view to witnesses 0 and 1, the right one to witness 2, then each
            # view to everyone else too: every witness cosigns the first it saw and refuses the other
            order = [(servers[0], "left"), (servers[1], "left"), (servers[2], "right"),
                     (servers[0], "right"), (servers[1], "right"), (servers[2], "left")]
            for server, view in order:
                ledger = honest if view == "left" else fork
                status, _, body = post(server.url, body_for(ledger, 0))
                if status == 200:
                    views[view].append(body.decode())
                else:
                    assert status == 409
        assert len(views["left"]) == 2 and len(views["right"]) == 1
        cosigners = [cosigner(i) for i in range(3)]
        left_signed = verified_cosignatures(with_cosignatures(left, views["left"]), cosigners)
        right_signed = verified_cosignatures(with_cosignatures(right, views["right"]), cosigners)
        assert not set(left_signed) & set(right_signed)  # no witness cosigned both views
        policy = parse_policy(policy_text(honest))
        assert policy.evaluate(with_cosignatures(left, views["left"]), origin=honest.origin).quorum == "wit"
        with pytest.raises(QuorumError, match="needs 2 of 3"):
            policy.evaluate(with_cosignatures(right, views["right"]), origin=honest.origin)
        for i, folder in enumerate(folders):  # and each witness's state is the view it cosigned
            with Witness(folder, witness_signer(i), clock=lambda: T0) as witness:
                state = witness.state(honest.origin)
            assert state is not None and state.root == (right.root if i == 2 else left.root)
        fork.close()


def test_attack_clock_set_back_the_append_is_refused(tmp_path: Path) -> None:
    store, ledger_id, ledger = operator_store(tmp_path)
    with ledger:
        assert append_key_entry(store, ledger_id, tmp_path, 1, at="2026-03-05T00:00:00Z").exit_code == 0
        size = ledger.size
        refused = append_key_entry(store, ledger_id, tmp_path, 2, at="2026-03-04T23:59:59Z")
        assert refused.exit_code == 2 and "only moves forward" in refused.output
        assert ledger.size == size  # nothing written
        assert append_key_entry(store, ledger_id, tmp_path, 3, at="2026-03-05T00:00:00Z").exit_code == 0


def test_attack_forged_backdated_entry_is_reported_by_the_audit(tmp_path: Path) -> None:
    """The operator's own modified program skips the time check; the audit of its export still names it."""
    store, ledger_id, ledger = operator_store(tmp_path)
    later = T0 + timedelta(days=5)  # (each entry dated no more than a day after its append)
    with ledger:
        ledger.append(key_entry(1, "2026-03-05T00:00:00Z"), signer=OPERATOR, now=later)
        ledger._append_encoded([encode_entry(key_entry(2, "2026-03-02T00:00:00Z"))], signer=OPERATOR, now=later)
        ledger.append(key_entry(3, "2026-03-06T00:00:00Z"), signer=OPERATOR, now=later)
        export = tmp_path / "export"
        assert cli("ledger", "export", ledger_id, str(export), store=store).exit_code == 0
    audit = cli("audit", ledger_id, "--from", str(export), "--out", str(tmp_path / "a.json"), "--json")
    assert audit.exit_code == 1
    findings = json.loads(audit.stdout)["findings"]
    assert [(f["check"], f["index"]) for f in findings] == [("time", 2)]
    assert "backwards" in findings[0]["message"]


def backdated_past_the_witnesses(fixture: AuditFixture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *,
                                 witnessed: datetime, backdated: str, refused: type[Exception], words: str,
                                 audit_at: str) -> tuple[int, list[dict[str, Any]]]:
    """A witness cosigns the ledger at ``witnessed``; the operator sets its clock back to ``backdated`` to log one
    more gen1 bundle: refused (``refused`` naming ``words``). A modified program that ignores the witnessed time
    logs it anyway. Returns its index and the findings of the audit at ``audit_at``."""
    st = Store.open(fixture.store)
    with Ledger.open(Ledger.locate(st.ledgers, fixture.ledger_id)) as ledger:
        origin, vkey = ledger.origin, ledger.verifier_key
    folder = witness_folder(tmp_path, 0, origin=origin, vkey=vkey)
    with running(folder, clock=Clock(witnessed)) as server:
        assert cli("witness", "add", server.url, "--key", cosigner(0).vkey, store=fixture.store).exit_code == 0
        assert cli("witness", "sync", "--json", store=fixture.store).exit_code == 0
        with pytest.raises(refused, match=words):
            add_bundle(fixture.store, "gen1", "late-model", seed=5, at=backdated, data_root=fixture.data_root)
        monkeypatch.setattr("heldout.evaluation.attested_time", lambda store, ledger: None)  # the modified program
        late = add_bundle(fixture.store, "gen1", "late-model", seed=5, at=backdated, data_root=fixture.data_root)
        monkeypatch.undo()
        audit = cli("audit", fixture.ledger_id, "--json", "--at", audit_at, store=fixture.store)
    assert audit.exit_code == 1, audit.output
    return late, json.loads(audit.stdout)["findings"]


def test_attack_evaluation_after_the_witnessed_expiry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gen1 expires 2027-03-01; a witness cosigns the ledger on 2027-03-05. The operator then sets its clock to
    2026-10-01 to log one more gen1 evaluation: refused. A modified program that ignores the witnessed time
    logs it anyway: the audit reports the late bundle."""
    fixture = build_store(tmp_path, bundles_per_generation=1, n_public=30, per_task=20)
    late, findings = backdated_past_the_witnesses(
        fixture, tmp_path, monkeypatch, witnessed=datetime(2027, 3, 5, tzinfo=UTC), backdated="2026-10-01T00:00:00Z",
        refused=ExpiredError, words="witnesses attest", audit_at="2026-10-02T00:00:00Z")
    # two findings on the late bundle: it was logged past gen1's expiry, and its own date is false (more than the
    # clock tolerance before the time the witnesses attest)
    assert [(f["check"], f["index"]) for f in findings] == [("witnessed-time", late)] * 2
    assert sum("past the expiry of gen1" in f["message"] for f in findings) == 1
    assert sum("before the witnesses attest it was logged" in f["message"] for f in findings) == 1


def test_a_checkpoint_note_with_cosignatures_still_verifies_as_the_logs(tmp_path: Path) -> None:
    _, _, ledger = operator_store(tmp_path)
    with ledger:
        checkpoint: Checkpoint = ledger.latest_checkpoint()
        folder = witness_folder(tmp_path, 0, origin=ledger.origin, vkey=ledger.verifier_key)
        with Witness(folder, witness_signer(0), clock=lambda: T0) as witness:
            cosigned = witness.add_checkpoint(body_for(ledger, 0))
        note = with_cosignatures(checkpoint, [cosigned.line]).note
        verify_checkpoint(note, name=OPERATOR.name, key=OPERATOR.public_key, origin=ledger.origin)
        assert verifier_key_string(OPERATOR.name, OPERATOR.public_key) == ledger.verifier_key


def test_attack_passport_of_a_fork_shown_to_one_auditor(tmp_path: Path) -> None:
    """A witness cosigns the ledger; the witnessed history then retires gen1, while a fork under the same id
    and key (never shown to the witness) logs a passport on gen1 instead and is handed to one auditor. Without
    a policy the fork's own export verifies the passport (nothing outside the operator says otherwise); with
    the policy, the ledger's head must be cosigned by the quorum, and the fork's is not."""
    import shutil

    from tests.audit_support import command_clock

    fixture = build_store(tmp_path, bundles_per_generation=1, n_public=30, per_task=20)
    st = Store.open(fixture.store)
    with Ledger.open(Ledger.locate(st.ledgers, fixture.ledger_id)) as ledger:
        origin, vkey = ledger.origin, ledger.verifier_key
    policy = tmp_path / "policy.txt"
    policy.write_text(f"log {vkey}\nwitness W0 {cosigner(0).vkey}\nquorum W0\n")
    folder = witness_folder(tmp_path, 0, origin=origin, vkey=vkey)
    fork = tmp_path / "fork-store"
    with running(folder, clock=Clock(datetime(2026, 9, 1, 1, tzinfo=UTC))) as server, \
            command_clock("2026-09-01T01:00:00Z"):
        assert cli("witness", "add", server.url, "--key", cosigner(0).vkey, store=fixture.store).exit_code == 0
        assert cli("witness", "sync", "--json", store=fixture.store).exit_code == 0
        shutil.copytree(fixture.store, fork)
        assert cli("retire", "gen1", "--reason", "leaked", store=fixture.store).exit_code == 0
        assert cli("witness", "sync", "--json", store=fixture.store).exit_code == 0
        assert cli("audit", "--jobs", "1", store=fork).exit_code == 0
        issued = cli("passport", "issue", "model_0", "--generation", "gen1", store=fork)
        assert issued.exit_code == 0, issued.output
        assert cli("ledger", "export", fixture.ledger_id, str(tmp_path / "fork-export"), store=fork).exit_code == 0
    passport = next((fork / "passports").glob("model_0__gen1*"))
    common = ("passport", "verify", str(passport), "--key", fixture.key_b64, "--at", "2026-09-10T00:00:00Z")
    assert cli(*common, "--from", str(tmp_path / "fork-export")).exit_code == 0  # the attack, without witnesses
    for where in (("--from", str(tmp_path / "fork-export")), ("--store", str(fork))):
        checked = cli(*common, *where, "--policy", str(policy))
        assert checked.exit_code == 1, checked.output
        assert "does not satisfy the policy quorum" in checked.output
    honest = cli(*common, "--store", str(fixture.store), "--policy", str(policy))
    assert honest.exit_code == 1 and "never logged" in honest.output


def test_attack_the_operator_names_its_own_key_as_a_witness(tmp_path: Path) -> None:
    """A witness holding the log's own key is the operator cosigning itself: refused by ``witness add`` (nothing
    written) and by an auditor's policy that lists the log."""
    from keys import TrustedKey
    from ledger.cosignature import COSIGNATURE_V1_TYPE

    store, _, ledger = operator_store(tmp_path)
    Store.open(store).keyring.add(TrustedKey(key_id=OPERATOR.key_id, name=OPERATOR.name,
                                             public_key=OPERATOR.public_key))
    with ledger:
        own = verifier_key_string("own-witness", OPERATOR.public_key, COSIGNATURE_V1_TYPE)
        refused = cli("witness", "add", "http://127.0.0.1:9", "--key", own, store=store)
        assert refused.exit_code == 2 and "the store's own key" in refused.output
        assert not (store / "witnesses" / "witnesses.json").exists()
        with pytest.raises(PolicyError, match="a log cannot witness itself"):
            parse_policy(f"log {ledger.verifier_key}\nwitness W0 {own}\nquorum W0\n")


def test_attack_a_checkpoint_note_swapped_after_the_replay(tmp_path: Path) -> None:
    """An export or tiles directory of a fork (never witnessed) whose checkpoint note is replaced, once the
    replay has read it, by the witnessed history's note of the same size: a witness policy, a report or a site
    asking for the checkpoints afterwards must get the note whose root was replayed, not the file's new bytes
    (else the quorum is judged on one history and the entries verified are another's)."""
    from ledger.export import export_ledger, open_export
    from ledger.tiles import open_tiles, write_tiles

    _, _, honest = operator_store(tmp_path)
    with honest:
        fork = rebuild_under_same_id(honest, tmp_path / "other-view")
        honest.append(key_entry(1), signer=OPERATOR, now=T0)
        fork.append(key_entry(2), signer=OPERATOR, now=T0)
        witnessed, forked = honest.latest_checkpoint(), fork.latest_checkpoint()
        assert witnessed.size == forked.size == 2 and witnessed.root != forked.root
        export_ledger(fork, tmp_path / "export")
        write_tiles(fork, tmp_path / "tiles")
        export_ledger(honest, tmp_path / "honest-export")
        fork.close()
    swaps = {tmp_path / "export": tmp_path / "export" / "checkpoints" / "2.note",
             tmp_path / "tiles": tmp_path / "tiles" / "checkpoints" / "2.note"}
    for folder, note in swaps.items():
        log = open_export(folder) if folder.name == "export" else open_tiles(str(folder))
        log.verify(expected_id=honest.ledger_id)
        note.write_bytes((tmp_path / "honest-export" / "checkpoints" / "2.note").read_bytes())
        assert log.latest_checkpoint().root == forked.root, folder.name
        assert [c.root for c in log.checkpoints()][-1] == forked.root, folder.name


def test_one_witness_whose_clock_runs_ahead_does_not_expire_the_generation(tmp_path: Path) -> None:
    """Two witnesses, a quorum of both (the default policy: a majority of those configured). One cosigns with its
    clock at 2027-03-05, past gen1's expiry (2027-03-01); the other at 2026-09-30. The operator's evaluate judges
    expiry by what the quorum attests (2026-09-30), as every verifier does, so it logs the evaluation and the
    audit agrees; once the other witness cosigns past the expiry too, evaluate refuses."""
    fixture = build_store(tmp_path, bundles_per_generation=1, n_public=30, per_task=20)
    st = Store.open(fixture.store)
    with Ledger.open(Ledger.locate(st.ledgers, fixture.ledger_id)) as ledger:
        origin, vkey = ledger.origin, ledger.verifier_key
    ahead, honest = Clock(datetime(2027, 3, 5, tzinfo=UTC)), Clock(datetime(2026, 9, 30, tzinfo=UTC))
    with ExitStack() as stack:
        for i, clock in enumerate((ahead, honest)):
            server = stack.enter_context(running(witness_folder(tmp_path, i, origin=origin, vkey=vkey), clock=clock))
            assert cli("witness", "add", server.url, "--key", cosigner(i).vkey, store=fixture.store).exit_code == 0
        assert cli("witness", "sync", "--json", store=fixture.store).exit_code == 0
        index = add_bundle(fixture.store, "gen1", "on-time", seed=5, at="2026-10-01T00:00:00Z",
                           data_root=fixture.data_root)
        audit = cli("audit", fixture.ledger_id, "--json", "--at", "2026-10-02T00:00:00Z", store=fixture.store)
        assert audit.exit_code == 0, audit.output
        assert json.loads(audit.stdout)["findings"] == []
        honest.moment = datetime(2027, 3, 2, tzinfo=UTC)  # a witness cosigns a checkpoint once: a new one
        note = tmp_path / "note.json"
        note.write_text(json.dumps({"text": "incident 1"}))
        appended = cli("ledger", "append", fixture.ledger_id, "--type", "note", "--json-file", str(note), "--at",
                       "2026-10-02T00:00:00Z", store=fixture.store)
        assert appended.exit_code == 0, appended.output
        assert cli("witness", "sync", "--json", store=fixture.store).exit_code == 0
        with pytest.raises(ExpiredError, match="witnesses attest the ledger reached 2027-03-02"):
            add_bundle(fixture.store, "gen1", "too-late", seed=6, at="2026-10-03T00:00:00Z",
                       data_root=fixture.data_root)
    with Ledger.open(Ledger.locate(st.ledgers, fixture.ledger_id)) as ledger:
        assert ledger.size == index + 2  # the note; the refused evaluation wrote nothing


def test_attack_evaluation_backdated_past_a_witnessed_supersession(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The spec is superseded from 09-05; a witness cosigns the ledger on 09-06. The operator sets its clock to
    09-04 to log one more evaluation under the old spec: refused. A modified program that ignores the witnessed
    time logs it anyway: the audit judges the bundle at the time the witnesses attest, and names it."""
    from keys import LapsedError
    from tests.audit_support import command_clock

    fixture = build_store(tmp_path, bundles_per_generation=1, n_public=30, per_task=20)
    with command_clock("2026-09-01T12:00:00Z"):
        superseded = cli("spec", "supersede", "MedEval-1 v0.1", "--by", "MedEval-1 v0.2", "--effective",
                         "2026-09-05T00:00:00Z", store=fixture.store)
    assert superseded.exit_code == 0, superseded.output
    late, findings = backdated_past_the_witnesses(
        fixture, tmp_path, monkeypatch, witnessed=datetime(2026, 9, 6, tzinfo=UTC), backdated="2026-09-04T23:59:59Z",
        refused=LapsedError, words="superseded by MedEval-1 v0.2", audit_at="2026-09-07T00:00:00Z")
    assert [(f["check"], f["index"]) for f in findings] == [("witnessed-time", late)] * 2
    assert sum("superseded by MedEval-1 v0.2" in f["message"] for f in findings) == 1
    assert sum("before the witnesses attest it was logged" in f["message"] for f in findings) == 1


def test_attack_the_witness_list_deleted_to_switch_the_policy_off(tmp_path: Path) -> None:
    """The store's policy file says a witness must cosign; the operator deletes its witness list (or never had
    one): the audit still holds the head to the policy, as witness status does."""
    store, ledger_id, ledger = operator_store(tmp_path)
    with ledger:
        policy = tmp_path / "policy.txt"
        policy.write_text(f"log {ledger.verifier_key}\nwitness W0 {cosigner(0).vkey}\nquorum W0\n")
        ledger.append(key_entry(1), signer=OPERATOR, now=T0)
    assert cli("witness", "policy", str(policy), store=store).exit_code == 0
    assert not (store / "witnesses" / "witnesses.json").exists()
    audit = cli("audit", ledger_id, "--json", "--at", AT, store=store)
    assert audit.exit_code == 1, audit.output
    assert [f["check"] for f in json.loads(audit.stdout)["findings"]] == ["witnesses"]
