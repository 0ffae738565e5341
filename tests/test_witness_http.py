"""Witnesses over real HTTP on 127.0.0.1 (ephemeral ports, servers in-process on threads): three witnesses, a
2-of-3 policy, one witness down and the quorum still met; a witness fed a fork refuses (409/422) and keeps
its state; a restarted witness has its state intact; the operator's commands (witness add, policy, sync,
status, ledger verify --policy, export, audit --from --policy) as a user runs them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path

import pytest

from heldout.witness.server import WitnessServer, running
from keys import verifier_key_string
from ledger import Ledger
from ledger.cosignature import Cosignature, Cosigner, verified_cosignatures
from ledger.witness import Witness
from tests.audit_support import build_store
from tests.conftest import REPO_ROOT, seeded_signer
from tests.test_ledger_support import T0, bundle_entry, ledger_signer, new_ledger
from tests.witness_support import (
    Clock,
    append_key_entry,
    body_for,
    cli,
    closed_port,
    cosigner,
    operator_store,
    post,
    witness_folder,
    witness_signer,
)


def policy_file(tmp: Path, k: str, ledger: Ledger, n: int = 3) -> Path:
    lines = [f"log {ledger.verifier_key}"]
    lines += [f"witness W{i} {cosigner(i).vkey}" for i in range(n)]
    lines += [f"group wit {k} {' '.join(f'W{i}' for i in range(n))}", "quorum wit"]
    path = tmp / f"policy-{k}.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Path, str, Ledger, list[Path], Clock]]:
    store, ledger_id, ledger = operator_store(tmp_path)
    folders = [witness_folder(tmp_path, i, origin=ledger.origin, vkey=ledger.verifier_key) for i in range(3)]
    yield store, ledger_id, ledger, folders, Clock(T0 + timedelta(hours=1))
    ledger.close()


def test_two_of_three_with_one_witness_down(setup: tuple[Path, str, Ledger, list[Path], Clock],
                                            tmp_path: Path) -> None:
    store, ledger_id, ledger, folders, clock = setup
    with ExitStack() as stack:
        servers: list[WitnessServer] = [stack.enter_context(running(f, clock=clock)) for f in folders[:2]]
        urls = [s.url for s in servers] + [f"http://127.0.0.1:{closed_port()}"]  # witness 2 is down
        for i, url in enumerate(urls):
            added = cli("witness", "add", url, "--key", cosigner(i).vkey, store=store)
            assert added.exit_code == 0, added.output
        assert cli("witness", "policy", str(policy_file(tmp_path, "2", ledger)), store=store).exit_code == 0
        appended = append_key_entry(store, ledger_id, tmp_path, 1)
        assert appended.exit_code == 0, appended.output
        status = cli("witness", "status", ledger_id, "--json", store=store)
        assert status.exit_code == 0, status.output
        witnessed = json.loads(status.stdout)["witnessed"]
        assert witnessed["size"] == 2 and witnessed["cosigned_by"] == ["W0", "W1"]
        # the cosignatures are real: each verifies under its witness key on the ledger's checkpoint
        checkpoint = ledger.cosigned_checkpoint()
        assert set(verified_cosignatures(checkpoint, [cosigner(i) for i in range(3)])) == {
            "w0.witness.example", "w1.witness.example"}
        assert cli("ledger", "verify", ledger_id, "--policy", str(policy_file(tmp_path, "2", ledger)),
                   store=store).exit_code == 0
        strict = cli("ledger", "verify", ledger_id, "--policy", str(policy_file(tmp_path, "all", ledger)),
                     store=store)
        assert strict.exit_code == 1 and "quorum 'wit'" in strict.output and "needs 3 of 3" in strict.output
        # sync: the third witness is still down, quorum still met (exit 0), the outcome says who failed
        sync = cli("witness", "sync", ledger_id, "--json", store=store)
        assert sync.exit_code == 0, sync.output
        outcomes = {o["witness"]: o for o in json.loads(sync.stdout)["outcomes"]}
        assert outcomes["w2.witness.example"]["ok"] is False and "unreachable" in outcomes["w2.witness.example"][
            "detail"]
        assert outcomes["w0.witness.example"]["ok"] is True
        # export and third-party checks with the policy
        export = tmp_path / "export"
        assert cli("ledger", "export", ledger_id, str(export), store=store).exit_code == 0
        assert "cosignature" not in (export / "checkpoints" / "2.note").read_text()  # lines, not a word
        assert (export / "checkpoints" / "2.note").read_text().count("\u2014") == 3  # log + two witnesses
        verified = cli("ledger", "verify", ledger_id, "--from", str(export), "--policy",
                       str(policy_file(tmp_path, "2", ledger)), "--json")
        assert verified.exit_code == 0 and json.loads(verified.stdout)["witnessed"]["quorum"] == "wit"
        audit = cli("audit", ledger_id, "--from", str(export), "--policy", str(policy_file(tmp_path, "all", ledger)),
                    "--out", str(tmp_path / "audit.json"), "--json")
        assert audit.exit_code == 1
        findings = json.loads(audit.stdout)["findings"]
        assert [f["check"] for f in findings] == ["witnesses"] and "wit" in findings[0]["message"]
        clean = cli("audit", ledger_id, "--from", str(export), "--policy", str(policy_file(tmp_path, "2", ledger)),
                    "--out", str(tmp_path / "audit2.json"), "--json")
        assert clean.exit_code == 0, clean.output


def test_a_witness_fed_a_fork_refuses_and_keeps_its_state(tmp_path: Path) -> None:
    with new_ledger(tmp_path / "honest", entries=4) as honest, new_ledger(tmp_path / "fork") as fork:
        assert fork.ledger_id == honest.ledger_id  # same genesis: the history rebuilt under the same id
        signer = ledger_signer()
        for i in range(11, 15):
            fork.append(bundle_entry(i), signer=signer, now=T0)
        folder = witness_folder(tmp_path, 0, origin=honest.origin, vkey=honest.verifier_key)
        with running(folder, clock=Clock(T0)) as server:
            status, _, body = post(server.url, body_for(honest, 0))
            assert status == 200
            Cosignature.parse_line(body.decode()).verify(honest.latest_checkpoint(), cosigner(0))
            # same size (5), another root: 409 with the witness's size
            status, content_type, body = post(server.url, body_for(fork, 5))
            assert (status, content_type, body) == (409, "text/x.tlog.size", b"5\n")
            fork.append(bundle_entry(20), signer=signer, now=T0)
            # larger size with the fork's own proof from 5: it does not lead to the honest root -> 422
            status, _, _ = post(server.url, body_for(fork, 5))
            assert status == 422
            # a stale old size: 409 naming the size; an unknown signature: 403; an unknown log: 404
            assert post(server.url, body_for(honest, 1))[0:3:2] == (409, b"5\n")
            other = new_ledger(tmp_path / "other", seeded_signer(9))
            assert post(server.url, body_for(other, 0))[0] == 404
            forged_note = body_for(honest, 5).replace(b"ledger-operator", b"ledger-operatoR")
            assert post(server.url, forged_note)[0] == 403
            other.close()
        with Witness(folder, witness_signer(0), clock=lambda: T0) as witness:
            state = witness.state(honest.origin)
        assert state is not None and (state.size, state.root) == (5, honest.root())
        assert len(list((folder / "evidence").rglob("*.req"))) == 2  # the fork and the bad proof, kept


def test_a_restarted_witness_has_its_state(tmp_path: Path) -> None:
    signer = ledger_signer()
    with new_ledger(tmp_path / "log", entries=2) as ledger:
        folder = witness_folder(tmp_path, 1, origin=ledger.origin, vkey=ledger.verifier_key)
        with running(folder, clock=Clock(T0)) as server:
            assert post(server.url, body_for(ledger, 0))[0] == 200
        ledger.append(bundle_entry(8), signer=signer, now=T0)
        with running(folder, clock=Clock(T0 + timedelta(minutes=5))) as server:
            assert post(server.url, body_for(ledger, 0))[0:3:2] == (409, b"3\n")  # it remembers size 3
            status, _, body = post(server.url, body_for(ledger, 3))
            assert status == 200
            assert Cosignature.parse_line(body.decode()).timestamp == int((T0 + timedelta(minutes=5)).timestamp())


def test_the_operator_retries_409_from_the_witness_size(setup: tuple[Path, str, Ledger, list[Path], Clock],
                                                        tmp_path: Path) -> None:
    """A witness that already holds a later size than the operator believes (state lost on the operator's side,
    or a first contact): the 409 names its size and the operator resends with the proof from there."""
    store, ledger_id, ledger, folders, clock = setup
    with running(folders[0], clock=clock) as server:
        for i in range(1, 4):
            assert append_key_entry(store, ledger_id, tmp_path, i).exit_code == 0
        # the witness learns size 4 directly (the operator's table does not know it)
        assert post(server.url, body_for(ledger, 0))[0] == 200
        assert cli("witness", "add", server.url, "--key", cosigner(0).vkey, store=store).exit_code == 0
        assert append_key_entry(store, ledger_id, tmp_path, 4).exit_code == 0  # old 0 -> 409 "4" -> old 4 -> 200
        assert ledger.witness_sizes() == {cosigner(0).vkey: 5}


def test_witness_commands_refuse_bad_input(tmp_path: Path) -> None:
    store, ledger_id, ledger = operator_store(tmp_path)
    with ledger:
        assert cli("witness", "add", "ftp://x", "--key", cosigner(0).vkey, store=store).exit_code == 2
        assert cli("witness", "add", "http://127.0.0.1:1", "--key", ledger.verifier_key, store=store).exit_code == 2
        bad = tmp_path / "bad-policy"
        bad.write_text("quorum nobody\n")
        refused = cli("witness", "policy", str(bad), store=store)
        assert refused.exit_code == 2 and "line 1" in refused.output
        assert not (store / "witnesses" / "policy").exists()
        assert cli("witness", "sync", ledger_id, store=store).exit_code == 2  # none configured
        assert cli("witness", "trust-log", "o", verifier_key_string("x", cosigner(0).key),
                   "--store", str(tmp_path / "w")).exit_code == 0
        assert cli("witness", "serve", "--store", str(tmp_path / "nokey"), "--listen", "127.0.0.1:0",
                   "--max-seconds", "0.1").exit_code == 2


def test_a_failing_witness_never_fails_or_undoes_the_append(tmp_path: Path) -> None:
    """Whatever goes wrong after the commit (a witness answering garbage, a bug in the hook), the append stands,
    the error is kept, and the checkpoint is simply not witnessed."""
    signer = ledger_signer()
    with new_ledger(tmp_path / "log", entries=1) as ledger:
        def broken(_ledger: Ledger, _checkpoint: object) -> None:
            raise RuntimeError("witness exploded")

        ledger.after_checkpoint = broken
        index = ledger.append(bundle_entry(5), signer=signer, now=T0)
        assert index == 2 and ledger.size == 3 and ledger.latest_checkpoint().size == 3
        assert isinstance(ledger.witnessing_error, RuntimeError)
        assert ledger.cosignature_lines(3) == []
        ledger.verify()


def test_witness_serve_as_a_command_in_its_own_process(tmp_path: Path) -> None:
    """init, trust-log and serve as a user runs them: a subprocess on an ephemeral port, stopped by SIGTERM."""
    folder = tmp_path / "wdir"
    made = cli("witness", "init", "--store", str(folder), "--name", "w.example/cli", "--json")
    assert made.exit_code == 0, made.output
    vkey = json.loads(made.stdout)["vkey"]
    assert cli("witness", "init", "--store", str(folder), "--name", "again").exit_code == 2  # never overwritten
    with new_ledger(tmp_path / "log", entries=2) as ledger:
        assert cli("witness", "trust-log", ledger.origin, ledger.verifier_key, "--store", str(folder)).exit_code == 0
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HELDOUT_NOW": "2026-03-01T13:00:00Z"}
        process = subprocess.Popen([sys.executable, "-m", "heldout", "witness", "serve", "--store", str(folder),
                                    "--listen", "127.0.0.1:0", "--max-seconds", "60"], stdout=subprocess.PIPE,
                                   text=True, env=env)
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            assert line.startswith("listening on http://127.0.0.1:"), line
            url = line.split()[2]
            status, _, body = post(url, body_for(ledger, 0))
            assert status == 200
            cosignature = Cosignature.parse_line(body.decode())
            cosignature.verify(ledger.latest_checkpoint(), Cosigner.from_vkey(vkey))
            assert cosignature.timestamp == int(T0.timestamp()) + 3600  # the witness's clock ($HELDOUT_NOW)
        finally:
            process.terminate()
            assert process.wait(timeout=20) == 0


def test_a_hanging_witness_does_not_hold_the_append_once_the_quorum_is_met(
        setup: tuple[Path, str, Ledger, list[Path], Clock], tmp_path: Path) -> None:
    """Witness 2 accepts the connection and never answers; with 2 of 3 the append returns on the other two's
    cosignatures, long before the 5 s request timeout."""
    store, ledger_id, ledger, folders, clock = setup
    with ExitStack() as stack, socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nobody ever reads or answers
        servers = [stack.enter_context(running(f, clock=clock)) for f in folders[:2]]
        urls = [s.url for s in servers] + [f"http://127.0.0.1:{silent.getsockname()[1]}"]
        for i, url in enumerate(urls):
            assert cli("witness", "add", url, "--key", cosigner(i).vkey, store=store).exit_code == 0
        assert cli("witness", "policy", str(policy_file(tmp_path, "2", ledger)), store=store).exit_code == 0
        began = time.monotonic()
        assert append_key_entry(store, ledger_id, tmp_path, 1).exit_code == 0
        assert time.monotonic() - began < 4.0
        status = cli("witness", "status", ledger_id, "--json", store=store)
        assert status.exit_code == 0 and json.loads(status.stdout)["witnessed"]["cosigned_by"] == ["W0", "W1"]


def test_verify_reveal_with_a_policy_needs_a_witnessed_export(tmp_path: Path) -> None:
    fixture = build_store(tmp_path, bundles_per_generation=0, n_public=30, per_task=20)
    with Ledger.open(Ledger.locate(fixture.store / "ledgers", fixture.ledger_id)) as ledger:
        origin, vkey = ledger.origin, ledger.verifier_key
        folder = witness_folder(tmp_path, 0, origin=origin, vkey=vkey)
        with running(folder, clock=Clock(T0)) as server:
            assert cli("witness", "add", server.url, "--key", cosigner(0).vkey, store=fixture.store).exit_code == 0
            assert cli("witness", "sync", store=fixture.store).exit_code == 0
        export = tmp_path / "export"
        assert cli("ledger", "export", fixture.ledger_id, str(export), store=fixture.store).exit_code == 0
        one = tmp_path / "one.policy"
        one.write_text(f"log {vkey}\nwitness W0 {cosigner(0).vkey}\nquorum W0\n")
        two = tmp_path / "two.policy"
        two.write_text(f"log {vkey}\nwitness W0 {cosigner(0).vkey}\nwitness W1 {cosigner(1).vkey}\n"
                       "group both all W0 W1\nquorum both\n")
        key = ["--key", fixture.key_b64]
        assert cli("verify-reveal", "public", "--from", str(export), *key, "--policy", str(one)).exit_code == 0
        refused = cli("verify-reveal", "public", "--from", str(export), *key, "--policy", str(two))
        assert refused.exit_code == 1 and "quorum 'both'" in refused.output
        assert cli("verify-reveal", "public", "--policy", str(one), store=fixture.store).exit_code == 2


def test_witness_commands_print_their_data_as_json(tmp_path: Path) -> None:
    """trust-log, add, policy (both ways) and serve (one line, the server keeps running) each print a JSON
    document with --json that names what was done, and the served URL answers with the announced key."""
    folder = tmp_path / "wdir"
    made = cli("witness", "init", "--store", str(folder), "--name", "w-json", "--json")
    assert made.exit_code == 0, made.output
    vkey = json.loads(made.stdout)["vkey"]
    store, ledger_id, ledger = operator_store(tmp_path)
    with ledger:
        trusted = cli("witness", "trust-log", ledger.origin, ledger.verifier_key, "--store", str(folder), "--json")
        assert trusted.exit_code == 0, trusted.output
        assert json.loads(trusted.stdout) == {"origin": ledger.origin, "vkey": ledger.verifier_key,
                                              "store": str(folder.resolve())}
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "HELDOUT_NOW": "2026-03-01T13:00:00Z"}
        process = subprocess.Popen([sys.executable, "-m", "heldout", "witness", "serve", "--store", str(folder),
                                    "--listen", "127.0.0.1:0", "--max-seconds", "60", "--json"],
                                   stdout=subprocess.PIPE, text=True, env=env)
        try:
            assert process.stdout is not None
            announced = json.loads(process.stdout.readline())
            assert announced["name"] == "w-json" and announced["vkey"] == vkey
            assert announced["url"].startswith("http://127.0.0.1:")
            added = cli("witness", "add", announced["url"], "--key", vkey, "--json", store=store)
            assert added.exit_code == 0, added.output
            assert json.loads(added.stdout) == {"name": "w-json", "url": announced["url"], "vkey": vkey,
                                                "configured": 1}
            default = json.loads(cli("witness", "policy", "--json", store=store).stdout)
            assert default["path"] is None and default["quorum"] == "configured"
            assert default["witnesses"] == [{"name": "w-json", "url": announced["url"], "vkey": vkey}]
            policy = tmp_path / "policy.txt"
            policy.write_text(f"witness W {vkey}\nquorum W\n")
            set_now = cli("witness", "policy", str(policy), "--json", store=store)
            assert set_now.exit_code == 0, set_now.output
            assert json.loads(set_now.stdout)["quorum"] == "W"
            in_force = json.loads(cli("witness", "policy", "--json", store=store).stdout)
            assert in_force["text"] == policy.read_text() and in_force["path"] == json.loads(set_now.stdout)["path"]
            synced = cli("witness", "sync", ledger_id, "--json", store=store)
            assert synced.exit_code == 0, synced.output
            assert json.loads(synced.stdout)["witnessed"]["cosigned_by"] == ["W"]
        finally:
            process.terminate()
            assert process.wait(timeout=20) == 0


@pytest.mark.parametrize("answer", [b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000,
                                    b"HTTP/1.1 100 Continue\r\n\r\n" * 1000])
def test_a_witness_that_dribbles_its_answer_is_cut_off_at_its_deadline(
        setup: tuple[Path, str, Ledger, list[Path], Clock], answer: bytes) -> None:
    """Red-team round 19: a witness that sends its answer a byte at a time (each byte within the per-read
    timeout, or endless "100 Continue" lines) held its sender thread, and so the command that waits for it at
    its end, for as long as it liked. Each answer now has a deadline (twice the request timeout); the append's
    witnessing and the client's close both end within it."""
    from heldout.witness.operator import WitnessEndpoint, Witnessing

    _, _, ledger, _, clock = setup
    stop = threading.Event()

    def dribble(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            for k in range(len(answer)):
                if stop.wait(0.05):
                    return
                conn.sendall(answer[k:k + 1])

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        server.settimeout(5)
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        witnessing = Witnessing([WitnessEndpoint(url, cosigner(0))], clock=clock, timeout=0.4)
        accepting = threading.Thread(target=lambda: dribble(server.accept()[0]), daemon=True)
        accepting.start()
        began = time.monotonic()
        try:
            outcomes = witnessing.witness(ledger)
        finally:
            witnessing.close()
            stop.set()
        assert time.monotonic() - began < 3.0  # deadline 0.8 s (the dribble alone would run for minutes)
        assert [o.ok for o in outcomes] == [False]
