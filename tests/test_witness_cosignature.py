"""C2SP cosignature/v1 conformance (bytes derived from the spec text, computed here with hashlib/struct/nacl
directly, not with the code under test), the witness protocol's checks without HTTP, and tlog-policy parsing
and evaluation."""

from __future__ import annotations

import base64
import hashlib
import struct
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.signing import SigningKey

from keys import MalformedInput, Signer
from ledger import CheckpointError, Ledger, NoteFormatError, parse_checkpoint, sign_checkpoint
from ledger.cosignature import (
    MAX_TIME_TIMESTAMP,
    Cosignature,
    Cosigner,
    cosign,
    cosigned_message,
    cosigner_key_id,
    time_of,
    verified_cosignatures,
    with_cosignatures,
)
from ledger.policy import PolicyError, QuorumError, WitnessedTimeError, WitnessedTimes, parse_policy
from ledger.witness import (
    BadProof,
    BadRequest,
    SizeConflict,
    UnknownLog,
    UnknownSignature,
    Witness,
    WitnessedLog,
    parse_request,
    request_body,
    trust_log,
)
from seals import CLOCK_TOLERANCE
from tests.conftest import seeded_signer
from tests.test_ledger_support import T0, bundle_entry, ledger_signer, new_ledger
from tests.witness_support import Clock, body_for

SPEC_ORIGIN = "example.com/behind-the-sofa"
SPEC_ROOT = "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="
SPEC_BODY = f"{SPEC_ORIGIN}\n20852163\n{SPEC_ROOT}\n"
# The example cosignature line of c2sp.org/tlog-cosignature (its key is not published; its layout is).
SPEC_LINE = ("\u2014 witness.example.com/w1 jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2"
             "oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==")


def witness_signer(i: int = 7, name: str = "witness.example/w1") -> Signer:
    return seeded_signer(i, name=name, key_id=f"witness-{i}")


def test_the_spec_example_line_has_the_layout_key_id_timestamp_signature() -> None:
    cosignature = Cosignature.parse_line(SPEC_LINE)
    raw = base64.b64decode(SPEC_LINE.split(" ")[2])
    assert cosignature.name == "witness.example.com/w1"
    assert cosignature.key_id == raw[:4]
    assert cosignature.timestamp == 1679315147  # the "time 1679315147" of the spec's example message
    assert cosignature.signature == raw[12:] and len(raw) == 76
    assert cosignature.line == SPEC_LINE + "\n"


def test_cosignature_v1_bytes_match_the_spec_worked_example() -> None:
    """Fixed seed 0x07 * 32, name witness.example/w1, the spec's checkpoint body and timestamp."""
    seed = bytes([7]) * 32
    signing = SigningKey(seed)
    public = bytes(signing.verify_key)
    name = "witness.example/w1"
    # key ID = SHA-256(<name> || "\n" || 0x04 || 32-byte Ed25519 public key)[:4]
    expected_id = hashlib.sha256(name.encode() + b"\n" + b"\x04" + public).digest()[:4]
    # message = "cosignature/v1\n" "time <ts>\n" then the whole note body
    expected_message = b"cosignature/v1\ntime 1679315147\n" + SPEC_BODY.encode()
    assert expected_message == (b"cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\n"
                                b"CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n")
    expected_sig = signing.sign(expected_message).signature
    expected_blob = expected_id + struct.pack(">Q", 1679315147) + expected_sig

    signer = Signer.from_seed(seed, name=name, key_id="w1")
    assert cosigner_key_id(name, signer.public_key) == expected_id
    assert cosigned_message(SPEC_BODY, 1679315147) == expected_message
    note = SPEC_BODY + "\n\u2014 example.com/behind-the-sofa " + base64.b64encode(b"\0" * 68).decode() + "\n"
    checkpoint = parse_checkpoint(note)
    line = cosign(checkpoint, signer, 1679315147).line
    assert line == f"\u2014 {name} {base64.b64encode(expected_blob).decode()}\n"
    # the vkey: <name>+<hex key id>+base64(0x04 || key)
    key_b64 = base64.b64encode(bytes([4]) + public).decode()
    assert Cosigner.of(signer).vkey == f"{name}+{expected_id.hex()}+{key_b64}"
    assert Cosigner.from_vkey(Cosigner.of(signer).vkey) == Cosigner.of(signer)
    # and it verifies in the note it was added to, by this key only
    cosigned = with_cosignatures(checkpoint, [line])
    assert set(verified_cosignatures(cosigned, [Cosigner.of(signer)])) == {name}
    assert verified_cosignatures(cosigned, [Cosigner.of(witness_signer(8))]) == {}


def test_a_log_vkey_is_not_a_witness_vkey_and_back() -> None:
    from keys import verifier_key_string

    signer = witness_signer()
    with pytest.raises(MalformedInput, match="cosignature"):
        Cosigner.from_vkey(verifier_key_string(signer.name, signer.public_key))  # type 0x01
    with pytest.raises(MalformedInput):
        WitnessedLog.from_vkey("o", Cosigner.of(signer).vkey)  # type 0x04 where a log key is due


@settings(max_examples=50, deadline=None)
@given(timestamp=st.integers(min_value=0, max_value=MAX_TIME_TIMESTAMP - 1),
       size=st.integers(min_value=1, max_value=10**6))
def test_cosignatures_round_trip_and_a_changed_byte_fails(timestamp: int, size: int) -> None:
    log = ledger_signer()
    checkpoint = sign_checkpoint("heldout/ledger/abc", size, hashlib.sha256(str(size).encode()).digest(), log)
    signer = witness_signer()
    line = cosign(checkpoint, signer, timestamp).line
    parsed = Cosignature.parse_line(line)
    assert parsed.timestamp == timestamp and parsed.line == line
    parsed.verify(checkpoint, Cosigner.of(signer))
    with pytest.raises(CheckpointError):
        Cosignature(parsed.name, parsed.key_id, timestamp ^ 1, parsed.signature).verify(checkpoint, Cosigner.of(signer))
    other = sign_checkpoint("heldout/ledger/abc", size + 1, checkpoint.root, log)
    with pytest.raises(CheckpointError):
        parsed.verify(other, Cosigner.of(signer))


@pytest.mark.parametrize("timestamp", [MAX_TIME_TIMESTAMP + 1, (1 << 63) - 1])
def test_a_cosignature_dated_past_year_9999_is_malformed_not_a_crash(timestamp: int) -> None:
    """C2SP allows timestamps up to 2^63 - 1; a time past 9999-12-31 cannot be held, so such a line (from a
    crafted export or a broken witness) is refused where it is parsed, not where its time is read."""
    import base64
    import struct

    blob = b"\0" * 4 + struct.pack(">Q", timestamp) + b"\0" * 64
    line = f"\u2014 w.example {base64.b64encode(blob).decode()}"
    with pytest.raises(NoteFormatError, match="after 9999-12-31"):
        Cosignature.parse_line(line)
    with pytest.raises(NoteFormatError):
        time_of(timestamp)


def test_a_bad_cosignature_by_a_known_witness_is_refused_not_ignored() -> None:
    checkpoint = sign_checkpoint("o", 3, bytes(32), ledger_signer())
    signer = witness_signer()
    good = cosign(checkpoint, signer, 100)
    forged = Cosignature(good.name, good.key_id, 101, good.signature)  # timestamp changed after signing
    with pytest.raises(CheckpointError, match="does not verify"):
        verified_cosignatures(with_cosignatures(checkpoint, [forged.line]), [Cosigner.of(signer)])
    with pytest.raises(NoteFormatError):
        Cosignature.parse_line("\u2014 w " + base64.b64encode(b"x" * 20).decode())


# --- the witness protocol, without HTTP ------------------------------------------------------------------------

def make_witness(tmp_path: Path, ledger: Ledger, *, when: datetime = T0,
                 clock: Callable[[], datetime] | None = None) -> Witness:
    folder = tmp_path / "witness"
    trust_log(folder, WitnessedLog(ledger.origin, ledger.key.name, ledger.key.public_key))
    # closed by the caller (a context manager)
    return Witness(folder, witness_signer(), clock=clock if clock is not None else lambda: when)


def test_witness_checks_in_spec_order_and_keeps_its_state(tmp_path: Path) -> None:
    signer = ledger_signer()
    with new_ledger(tmp_path / "log", entries=3) as ledger, make_witness(tmp_path, ledger) as witness:
        first = witness.add_checkpoint(body_for(ledger, 0))
        first.verify(ledger.latest_checkpoint(), Cosigner.of(witness_signer()))
        assert first.timestamp == int(T0.timestamp())
        with pytest.raises(SizeConflict) as conflict:
            witness.add_checkpoint(body_for(ledger, 0))  # the witness is at 4 now
        assert conflict.value.size == 4 and conflict.value.status == 409
        witness.add_checkpoint(body_for(ledger, 4))  # same size, same root: cosigned again
        ledger.append(bundle_entry(9), signer=signer, now=T0)
        good = body_for(ledger, 4)
        bad = good.replace(good.split(b"\n")[1], base64.b64encode(bytes(32)))
        with pytest.raises(BadProof):
            witness.add_checkpoint(bad)
        assert witness.state(ledger.origin).size == 4  # type: ignore[union-attr]
        witness.add_checkpoint(good)
        assert witness.state(ledger.origin).size == 5  # type: ignore[union-attr]
        with pytest.raises(SizeConflict):
            witness.add_checkpoint(body_for(ledger, 4, size=4))  # an older checkpoint: a smaller size
        foreign = sign_checkpoint(ledger.origin, 6, bytes(32), seeded_signer(9, name=ledger.key.name))
        with pytest.raises(UnknownSignature):
            witness.add_checkpoint(request_body(5, [bytes(32)], foreign.note))
        stranger = sign_checkpoint("heldout/ledger/other", 6, bytes(32), signer)
        with pytest.raises(UnknownLog):
            witness.add_checkpoint(request_body(0, [], stranger.note))
        for malformed in (b"", b"old 01\n\n" + ledger.latest_checkpoint().note_bytes, b"old 9\n\n"
                          + ledger.latest_checkpoint().note_bytes, b"old 1\nnot base64!\n\n"):
            with pytest.raises(BadRequest):
                witness.add_checkpoint(malformed)


def test_request_body_round_trip(tmp_path: Path) -> None:
    with new_ledger(tmp_path, entries=6) as ledger:
        body = body_for(ledger, 3)
        request = parse_request(body)
        assert request.old_size == 3 and request.checkpoint.size == 7
        assert request.proof == ledger.consistency_proof(3).path and request.body() == body


# --- tlog-policy -----------------------------------------------------------------------------------------------

def three_witnesses() -> list[Signer]:
    return [witness_signer(10 + i, name=f"w{i}.example") for i in range(3)]


def policy_text(witnesses: list[Signer], quorum: str = "2", log: str | None = None) -> str:
    lines = [f"log {log}"] if log else []
    lines += ["# three witnesses", *(f"witness W{i} {Cosigner.of(w).vkey}" for i, w in enumerate(witnesses))]
    lines += [f"group main {quorum} W0 W1 W2", "  quorum\tmain  "]
    return "\n".join(lines) + "\n"


def test_policy_two_of_three_names_the_missing_quorum(tmp_path: Path) -> None:
    witnesses = three_witnesses()
    with new_ledger(tmp_path, entries=1) as ledger:
        policy = parse_policy(policy_text(witnesses, log=ledger.verifier_key))
        checkpoint = ledger.latest_checkpoint()
        one = with_cosignatures(checkpoint, [cosign(checkpoint, witnesses[0], 10).line])
        with pytest.raises(QuorumError, match=r"main.*needs 2 of 3") as failed:
            policy.evaluate(one, origin=ledger.origin)
        assert failed.value.evidence["quorum"] == "main" and failed.value.evidence["missing"] == ["W1", "W2"]
        two = with_cosignatures(one, [cosign(checkpoint, witnesses[2], 20).line])
        witnessed = policy.evaluate(two, origin=ledger.origin)
        assert witnessed.quorum == "main" and set(witnessed.cosignatures) == {"W0", "W2"}
        assert witnessed.time == datetime.fromtimestamp(20, tz=UTC)
        other_log = parse_policy(policy_text(witnesses, log=new_ledger(tmp_path / "b", seeded_signer(5)).verifier_key))
        with pytest.raises(QuorumError, match="not signed by a log"):
            other_log.evaluate(two)


@pytest.mark.parametrize(("text", "problem"), [
    ("", "no quorum"),
    ("quorum none\nquorum none\n", "exactly one"),
    ("quorum W0\n", "not a witness or group"),
    ("witness none {v0}\nquorum none\n", "reserved"),
    ("witness A {v0}\nwitness B {v0}\nquorum A\n", "duplicate witness key"),
    ("witness A {v0}\ngroup g 2 A\nquorum g\n", "threshold"),
    ("witness A {v0}\ngroup g 0 A\nquorum g\n", "threshold"),
    ("witness A {v0}\ngroup g any A A\nquorum g\n", "at most once"),
    ("witness A {v0}\ngroup g any B\nquorum g\n", "defined earlier"),
    ("witness A {v0}\nfrobnicate\nquorum A\n", "unknown keyword"),
    ("witness A {v0}\x0c\nquorum A\n", "control character"),
    ("witness A {log}\nquorum A\n", "cosignature"),
    ("log {log}\nwitness A {v0}\nquorum A\n", "a log cannot witness itself"),  # the operator cosigning itself
    ("witness A {v0}\nquorum A\nlog {log}\n", "a log cannot witness itself"),
])
def test_bad_policies_are_refused_naming_the_line(text: str, problem: str) -> None:
    from keys import verifier_key_string

    w = witness_signer()
    filled = text.format(v0=Cosigner.of(w).vkey, log=verifier_key_string(w.name, w.public_key))
    with pytest.raises(PolicyError, match=problem):
        parse_policy(filled)


def test_policy_keywords_all_any_none_and_nested_groups() -> None:
    w = three_witnesses()
    text = "\n".join(f"witness W{i} {Cosigner.of(s).vkey}" for i, s in enumerate(w))
    policy = parse_policy(text + "\ngroup a all W0 W1\ngroup b any W2\ngroup both all a b\nquorum both\n")
    checkpoint = sign_checkpoint("o", 1, bytes(32), ledger_signer())
    lines = [cosign(checkpoint, s, 1).line for s in w]
    assert policy.evaluate(with_cosignatures(checkpoint, lines)).quorum == "both"
    with pytest.raises(QuorumError, match="group both"):
        policy.evaluate(with_cosignatures(checkpoint, lines[1:]))
    assert parse_policy("quorum none\n").evaluate(checkpoint).quorum == "none"


@settings(max_examples=40, deadline=None)
@given(n=st.integers(min_value=1, max_value=5), data=st.data())
def test_a_k_of_n_group_is_met_exactly_when_k_members_cosigned(n: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(min_value=1, max_value=n))
    signers = [witness_signer(20 + i, name=f"h{i}.example") for i in range(n)]
    cosigned = data.draw(st.sets(st.integers(min_value=0, max_value=n - 1)))
    text = "".join(f"witness H{i} {Cosigner.of(s).vkey}\n" for i, s in enumerate(signers))
    policy = parse_policy(text + f"group g {k} {' '.join(f'H{i}' for i in range(n))}\nquorum g\n")
    checkpoint = sign_checkpoint("o", 2, bytes(32), ledger_signer())
    note = with_cosignatures(checkpoint, [cosign(checkpoint, signers[i], 5 + i).line for i in sorted(cosigned)])
    if len(cosigned) >= k:
        witnessed = policy.evaluate(note)
        assert set(witnessed.cosignatures) == {f"H{i}" for i in cosigned}
        assert witnessed.time == datetime.fromtimestamp(5 + max(cosigned), tz=UTC)
    else:
        with pytest.raises(QuorumError, match=f"needs {k} of {n}"):
            policy.evaluate(note)


def test_attack_a_draw_seed_ground_by_asking_the_witness_again(tmp_path: Path) -> None:
    """A seal draws from the cosignatures on its intent's checkpoint. The witness cosigned that checkpoint again,
    with a fresh timestamp, whenever asked: each second waited gave the operator a new line, so a new seed and a
    new draw, with nothing deleted and the audit clean. The same checkpoint now gets the same cosignature (its
    first timestamp); only a larger checkpoint gets a new one."""
    clock = Clock(T0)
    with new_ledger(tmp_path / "log", entries=3) as ledger, make_witness(tmp_path, ledger, clock=clock) as witness:
        first = witness.add_checkpoint(body_for(ledger, 0))
        for seconds in (1, 60, 86_400):
            clock.moment = T0 + timedelta(seconds=seconds)
            again = witness.add_checkpoint(body_for(ledger, 4))
            assert (again.timestamp, again.line) == (first.timestamp, first.line)
        ledger.append(bundle_entry(9), signer=ledger_signer(), now=T0)
        grown = witness.add_checkpoint(body_for(ledger, 4))
        assert grown.timestamp == int((T0 + timedelta(seconds=86_400)).timestamp()) and grown.line != first.line


def _at(day: int) -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=day)


def test_the_witnessed_window_is_what_the_quorum_attests_not_any_one_witness() -> None:
    """A 2-of-3 policy; witness c's clock is 400 days ahead (or a witness colluding with nobody lies): alone it
    moves no bound, as alone it could not certify a checkpoint (an honest log's entries were named as dated
    "before the witnesses attest it was logged"). Two witnesses agreeing do move it."""
    ahead = timedelta(days=400)

    def times(day: int, late: str | None = None) -> dict[str, tuple[datetime, datetime]]:
        return {name: ((_at(day) + ahead, _at(day) + ahead) if name == late else (_at(day), _at(day)))
                for name in ("a", "b", "c")}

    def two_of_three(names: frozenset[str]) -> bool:
        return len(names) >= 2

    window = WitnessedTimes([(3, times(10, late="c")), (6, times(20, late="c"))], two_of_three)
    assert window.logged_after(4) == (3, _at(10)) and window.logged_by(4) == (6, _at(20))
    window.check_date(4, _at(15))  # honest: inside the quorum's window
    with pytest.raises(WitnessedTimeError):
        WitnessedTimes([(3, times(10, late="c")), (6, times(20, late="c"))]).check_date(4, _at(15))  # any one
    colluding = {**times(10), "b": (_at(10) + ahead, _at(10) + ahead), "c": (_at(10) + ahead, _at(10) + ahead)}
    assert WitnessedTimes([(3, colluding)], two_of_three).logged_after(4) == (3, _at(10) + ahead)
    assert WitnessedTimes([(3, {"a": (_at(10), _at(10))})], two_of_three).logged_after(4) is None  # no quorum


def test_two_keys_under_one_witness_name_are_two_witnesses_of_the_time_quorum(tmp_path: Path) -> None:
    """A policy may list a witness's old and new key under one name (two policy witnesses). Only the key that
    signed has its times: the time quorum took a witness by its name, so one witness (its clock 400 days ahead)
    filled a 2-witness quorum alone and honest entries read as backdated; the checkpoint quorum counted it once."""
    from ledger.cosignature import cosign, with_cosignatures
    from tests.witness_support import witness_signer

    ledger = new_ledger(tmp_path / "ledger", entries=2)
    try:
        checkpoint = ledger.latest_checkpoint()
        honest, ahead = witness_signer(0), witness_signer(2)
        renamed = seeded_signer(99, name=ahead.name, key_id="witness")  # the same name, another key: never signs
        moment = int(T0.timestamp())
        lines = [cosign(checkpoint, honest, moment).line,
                 cosign(checkpoint, ahead, moment + 400 * 86_400).line]
        cosigned = with_cosignatures(checkpoint, lines)
        policy = parse_policy("".join(f"witness W{i} {Cosigner.of(s).vkey}\n" for i, s in
                                      enumerate((honest, ahead, renamed))) + "group two 2 W0 W1 W2\nquorum two\n")
        times = policy.cosignature_times(cosigned)
        assert set(times) == {"W0", "W1"}  # W2's key signed nothing
        window = WitnessedTimes.of(policy, [cosigned])
        assert window.logged_after(checkpoint.size) == (checkpoint.size, T0)
    finally:
        ledger.close()


def test_a_witness_that_cosigned_a_checkpoint_twice_attests_both_times() -> None:
    """Cosigned at day 10 and again at day 30 (C2SP lets a witness re-date): the log held the checkpoint by day
    10 and had not grown past it by day 30; keeping only the later time let an entry in the checkpoint be dated
    20 days after the witness first attested it."""
    window = WitnessedTimes([(5, {"a": (_at(10), _at(30))})])
    assert window.logged_by(4) == (5, _at(10)) and window.logged_after(5) == (5, _at(30))
    with pytest.raises(WitnessedTimeError, match="after the witnesses attest the log held it"):
        window.check_date(4, _at(20))


def test_the_witnessed_window_of_an_entry_is_between_checkpoints_cosigned_without_and_with_it() -> None:
    """Checkpoints of sizes 3 (cosigned days 10 and 12), 5 (day 11: a witness with a slow clock) and 8 (days 20
    and 30): entry 4 was logged after day 12 (size 3 lacks it; the latest time it was cosigned) and by day 11
    (size 5 holds it, cosigned then): a window the tolerance makes [day 11, day 12]; entry 6 lies in (12, 20]."""
    window = WitnessedTimes([(8, {"a": (_at(20), _at(20)), "b": (_at(30), _at(30))}),
                             (3, {"a": (_at(10), _at(10)), "b": (_at(12), _at(12))}),
                             (5, {"a": (_at(11), _at(11))}), (6, {})])
    assert window.logged_after(2) is None and window.logged_by(2) == (3, _at(10))
    assert window.logged_after(4) == (3, _at(12)) and window.logged_by(4) == (5, _at(11))
    assert window.logged_after(6) == (3, _at(12)) and window.logged_by(6) == (8, _at(20))
    assert window.logged_after(9) == (8, _at(30)) and window.logged_by(9) is None
    window.check_date(6, _at(12) - CLOCK_TOLERANCE)  # a day's disagreement of clocks either way is honest
    window.check_date(6, _at(20) + CLOCK_TOLERANCE)
    with pytest.raises(WitnessedTimeError, match="before the witnesses attest it was logged") as before:
        window.check_date(6, _at(10))
    assert before.value.evidence["index"] == 6
    with pytest.raises(WitnessedTimeError, match="after the witnesses attest the log held it"):
        window.check_date(6, _at(22))
    window.check_entry(6, {"created_utc": "not a date"})  # the entry checks name a malformed date, not this one
    with pytest.raises(WitnessedTimeError):
        window.check_entry(9, {"created_utc": "2026-01-10T00:00:00Z"})


_POLICY_TAILS = ["quorum none\n", "group any 1 W0 W1 W2\nquorum any\n", "group two 2 W0 W1 W2\nquorum two\n",
                 "group pair 2 W0 W1\nquorum pair\n", "quorum W2\n"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 4), st.integers(0, 900)), max_size=10),
       st.sampled_from(_POLICY_TAILS))
def test_the_attested_time_from_stored_latest_times_is_the_window_of_every_checkpoint(
        cosignings: list[tuple[int, int, int]], tail: str) -> None:
    """What ``heldout evaluate`` judges expiry by (the policy over each witness key's latest stored time, one
    query) equals what every verifier computes from all checkpoints (``WitnessedTimes``): three policy witnesses
    and one the policy does not list cosign checkpoints at random times, some re-dated, under each kind of
    quorum."""
    import tempfile

    signers = [witness_signer(20 + i, name=f"witness.example/w{i}") for i in range(4)]
    policy = parse_policy("".join(f"witness W{i} {Cosigner.of(s).vkey}\n" for i, s in enumerate(signers[:3])) + tail)
    with tempfile.TemporaryDirectory() as folder, new_ledger(Path(folder), entries=4, batch=1) as ledger:
        sizes = [checkpoint.size for checkpoint in ledger.checkpoints()]
        for who, which, day in cosignings:
            checkpoint = ledger.checkpoint_at(sizes[which])
            assert checkpoint is not None
            cosignature = cosign(checkpoint, signers[who], int(_at(day).timestamp()))
            ledger.add_cosignatures(checkpoint.size, [(Cosigner.of(signers[who]), cosignature)], now=T0)
        window = WitnessedTimes.of(policy, ledger.cosigned_checkpoints()).logged_after(ledger.size)
        assert policy.attested_latest(ledger.witness_latest_times()) == (None if window is None else window[1])
