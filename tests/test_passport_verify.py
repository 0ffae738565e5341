"""``heldout passport verify`` on the reference deployment's real passport: the issue's must-shows, a campaign
that changes every leaf, adds and removes members, and bad input that must never produce a traceback."""

from __future__ import annotations

import base64
import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from heldout.cli import app, passport_cmd
from keys import Signer, TrustedKey
from seals import parse_utc, sign_document, verify_passport
from tests.conftest import REFERENCE_KEY_B64, seeded_signer

runner = CliRunner()
AT_VALID = "2026-08-04T00:00:00Z"
# typer rebuilds the click command tree of the whole app on every invoke (~90 ms); the campaign runs thousands
# of invocations through the same `passport` sub-app mounted alone (same command functions, same exit codes).
PASSPORT_ONLY = typer.Typer()
PASSPORT_ONLY.add_typer(passport_cmd.app, name="passport")


def verify_cli(path: Path, *extra: str, cli: typer.Typer = app) -> Any:
    return runner.invoke(cli, ["passport", "verify", str(path), *extra])


def test_reference_passport_valid_at_issue_time(reference_passport_path: Path) -> None:
    result = verify_cli(reference_passport_path, "--key", REFERENCE_KEY_B64, "--at", AT_VALID)
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (
        "signature valid, issued by NakedSignal under key ns-passport-2026-07, valid until 2026-09-20T00:00:00Z; "
        "not checked against its ledger (give --store or --from)"
    )


def test_reference_passport_expired_now_still_reports_signature_valid(reference_passport_path: Path) -> None:
    # "now" is after 2026-09-20 for any run of this suite; the --at form pins the same check to a date.
    for extra in ([], ["--at", "2026-11-29T00:00:00Z"], ["--at", "2026-09-20T00:00:00Z"]):
        result = verify_cli(reference_passport_path, "--key", REFERENCE_KEY_B64, *extra)
        assert result.exit_code == 3, result.output
        assert result.output.strip() == (
            "signature valid, issued by NakedSignal under key ns-passport-2026-07, expired 2026-09-20T00:00:00Z; "
            "not checked against its ledger (give --store or --from)"
        )


def test_reference_passport_json_verdict(reference_passport_path: Path) -> None:
    result = verify_cli(reference_passport_path, "--key", REFERENCE_KEY_B64, "--at", AT_VALID, "--json")
    assert result.exit_code == 0
    verdict = json.loads(result.output)
    assert verdict["signature_valid"] is True and verdict["state"] == "valid"
    assert verdict["ledger_checked"] is False and verdict["qualification"] == "not checked against its ledger"
    assert verdict["model_id"] == "biomedclip_zeroshot" and verdict["issuer"]["key_id"] == "ns-passport-2026-07"


def test_reference_passport_with_another_key_exits_1(reference_passport_path: Path) -> None:
    other = seeded_signer(3).public_key.b64
    result = verify_cli(reference_passport_path, "--key", other, "--at", AT_VALID)
    assert result.exit_code == 1
    assert "not the trusted one" in result.output


def test_reference_passport_trusted_through_the_keyring(reference_passport_path: Path, store_dir: Path) -> None:
    from heldout.store import Store
    from keys import PublicKey

    st = Store.open(store_dir)
    st.create()
    st.keyring.add(TrustedKey("ns-passport-2026-07", "NakedSignal", PublicKey.from_b64(REFERENCE_KEY_B64)))
    assert verify_cli(reference_passport_path, "--store", str(store_dir), "--at", AT_VALID).exit_code == 0
    empty = store_dir.parent / "empty"
    result = verify_cli(reference_passport_path, "--store", str(empty), "--at", AT_VALID)
    assert result.exit_code == 1 and "not in the keyring" in result.output


def test_the_verdict_names_the_issuer_as_the_trusted_key_does(reference_passport_path: Path, store_dir: Path) -> None:
    """The keyring knows the key as "EvilLab"; the passport calls its issuer "NakedSignal". The verdict named the
    document's own claim (red-team round 16); it names the key as the verifier knows it, and what the passport
    says beside it."""
    from heldout.store import Store
    from keys import PublicKey

    st = Store.open(store_dir)
    st.create()
    st.keyring.add(TrustedKey("ns-passport-2026-07", "EvilLab", PublicKey.from_b64(REFERENCE_KEY_B64)))
    result = verify_cli(reference_passport_path, "--store", str(store_dir), "--at", AT_VALID, "--json")
    assert result.exit_code == 0, result.output
    verdict = json.loads(result.stdout)
    assert verdict["verdict"].startswith("signature valid, issued by EvilLab (the passport names its issuer "
                                         "NakedSignal) under key ns-passport-2026-07")
    assert verdict["trusted_key_name"] == "EvilLab" and verdict["issuer"]["name"] == "NakedSignal"


# --- the mutation campaign ----------------------------------------------------------------------------------

Path_ = tuple[str | int, ...]


def leaves(node: Any, path: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from leaves(value, (*path, i))
    else:
        yield path, node


def objects(node: Any, path: Path_ = ()) -> Iterator[tuple[Path_, dict]]:
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from objects(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from objects(value, (*path, i))


def get(doc: Any, path: Path_) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def mutate_leaf(value: Any, rng: random.Random) -> Any:
    """Change one digit of a number, one character of a string, flip a boolean, replace a null."""
    if isinstance(value, bool):
        return not value
    if value is None:
        return 0
    if isinstance(value, (int, float)):
        text = json.dumps(value)
        positions = [i for i, ch in enumerate(text) if ch.isdigit()]
        i = rng.choice(positions)
        digit = str((int(text[i]) + rng.randint(1, 9)) % 10)
        changed = text[:i] + digit + text[i + 1:]
        return int(changed) if isinstance(value, int) else float(changed)
    assert isinstance(value, str)
    if not value:
        return "x"
    i = rng.randrange(len(value))
    return value[:i] + ("a" if value[i] != "a" else "b") + value[i + 1:]


def mutations(doc: dict) -> Iterator[tuple[str, dict]]:
    rng = random.Random(20260727)
    for path, value in leaves(doc):
        mutated = copy.deepcopy(doc)
        parent = get(mutated, path[:-1])
        parent[path[-1]] = mutate_leaf(value, rng)
        yield f"change {path}", mutated
    for path, node in objects(doc):
        added = copy.deepcopy(doc)
        get(added, path)["zz_added"] = 1
        yield f"add member at {path}", added
        if len(path) >= 3 and path[:2] == ("computed", "evaluations") and path[2] != 0:
            continue  # evaluations 1..11 have evaluation 0's members: removal is covered there
        for key in node:
            removed = copy.deepcopy(doc)
            del get(removed, path)[key]
            yield f"remove {(*path, key)}", removed


@pytest.mark.slow
def test_every_single_change_of_the_reference_passport_exits_1(reference_passport_path: Path, tmp_path: Path) -> None:
    original = json.loads(reference_passport_path.read_text())
    target = tmp_path / "mutated.json"
    failures: list[str] = []
    count = 0
    for label, mutated in mutations(original):
        count += 1
        target.write_text(json.dumps(mutated))
        result = verify_cli(target, "--key", REFERENCE_KEY_B64, "--at", AT_VALID, cli=PASSPORT_ONLY)
        if result.exit_code != 1 or "Traceback" in result.output:
            failures.append(f"{label}: exit {result.exit_code}: {result.output.strip()[:120]}")
    # every leaf (2,694), a member added to every object (431), every member removed (outside the repeated
    # evaluations 1..11)
    assert count > 3300
    assert not failures, "\n".join(failures[:20])


def test_non_canonical_base64_signature_is_refused(reference_passport_path: Path, tmp_path: Path) -> None:
    # The last base64 character of a 64-byte signature carries 2 data bits and 4 unused ones; Python's decoder
    # ignores the unused bits, so flipping them would leave the bytes unchanged. It must still fail.
    doc = json.loads(reference_passport_path.read_text())
    sig = doc["signature"]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    last = alphabet.index(sig[-3])
    doc["signature"] = sig[:-3] + alphabet[last ^ 0b0001] + "=="
    assert base64.b64decode(doc["signature"]) == base64.b64decode(sig)
    target = tmp_path / "p.json"
    target.write_text(json.dumps(doc))
    result = verify_cli(target, "--key", REFERENCE_KEY_B64, "--at", AT_VALID)
    assert result.exit_code == 1 and "canonical base64" in result.output


# --- bad input ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "code", "phrase"),
    [
        ("truncated", None, 1, "not valid JSON"),
        ("not-json", b"this is not json\n", 1, "not valid JSON"),
        ("array", b"[1, 2, 3]", 1, "not an object"),
        ("empty", b"", 1, "empty"),
        ("binary", b"\xff\xfe\x00", 1, "not UTF-8"),
    ],
)
def test_bad_files(reference_passport_path: Path, tmp_path: Path, name: str, content: bytes | None, code: int,
                   phrase: str) -> None:
    data = reference_passport_path.read_bytes()
    target = tmp_path / f"{name}.json"
    target.write_bytes(data[: len(data) // 2] if content is None else content)
    result = verify_cli(target, "--key", REFERENCE_KEY_B64, "--at", AT_VALID)
    assert result.exit_code == code, result.output
    assert phrase in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        (lambda d: d.pop("signature"), "no signature"),
        (lambda d: d.update(signature="%%% not base64 %%%"), "not valid base64"),
        (lambda d: d.update(signature=base64.b64encode(b"\x00" * 63).decode()), "63 bytes"),
        (lambda d: d.update(signature=12345), "not a base64 string"),
        (lambda d: d.pop("issuer"), "no issuer"),
        (lambda d: d["issuer"].update(public_key_b64=base64.b64encode(b"\x00" * 31).decode()), "32 bytes"),
    ],
)
def test_bad_signatures_and_issuers(reference_passport_path: Path, tmp_path: Path, change: Any, phrase: str) -> None:
    doc = json.loads(reference_passport_path.read_text())
    change(doc)
    target = tmp_path / "p.json"
    target.write_text(json.dumps(doc))
    result = verify_cli(target, "--key", REFERENCE_KEY_B64, "--at", AT_VALID)
    assert result.exit_code == 1, result.output
    assert phrase in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (["--key", base64.b64encode(b"\x00" * 31).decode()], "31 bytes"),
        (["--key", "###"], "--key must be"),
        (["--key", REFERENCE_KEY_B64, "--at", "yesterday"], "not an ISO 8601 time"),
    ],
)
def test_usage_errors_exit_2(reference_passport_path: Path, args: list[str], phrase: str) -> None:
    result = verify_cli(reference_passport_path, *args)
    assert result.exit_code == 2, result.output
    assert phrase in result.output and "Traceback" not in result.output


def test_missing_file_is_usage_error(tmp_path: Path) -> None:
    result = verify_cli(tmp_path / "absent.json", "--key", REFERENCE_KEY_B64)
    assert result.exit_code == 2 and "no passport file" in result.output


# --- our own signed passports ------------------------------------------------------------------------------


def minimal_passport(expiry: str) -> dict[str, Any]:
    return {
        "passport_version": "0.1",
        "spec_version": "MedEval-1 v0.1",
        "subject": {"model_id": "majority", "model_name": "Majority class"},
        "computed": {"audit": {"bundles": 1, "rederived": 1}, "cross_site": None,
                     "evaluations": [{"task": "bloodmnist", "composite": {"index": 12.3456789}}],
                     "heldout": None, "sources": []},
        "declared": None, "observed": None,
        "issued_utc": "2026-01-01T00:00:00Z", "expiry_utc": expiry, "expiry_basis": "test",
        "canonicalisation": {"form": "RFC 8785"},
    }


def test_own_signed_passport_verifies_and_expires(tmp_path: Path) -> None:
    signer: Signer = seeded_signer(5, name="Lab", key_id="lab-2026")
    doc = sign_document(minimal_passport("2026-06-01T00:00:00Z"), signer)
    assert doc["computed"]["evaluations"][0]["composite"]["index"] == 12.345679  # rounded once at emit
    target = tmp_path / "own.json"
    target.write_text(json.dumps(doc, indent=2))
    ok = verify_cli(target, "--key", signer.public_key.b64, "--at", "2026-05-01T00:00:00Z")
    assert ok.exit_code == 0 and "issued by Lab under key lab-2026" in ok.output
    assert verify_cli(target, "--key", signer.public_key.b64, "--at", "2026-06-01T00:00:00Z").exit_code == 3
    verdict = verify_passport(json.loads(target.read_text()), signer.public_key, at=parse_utc("2026-05-01"))
    assert verdict.passport.model_id == "majority"
