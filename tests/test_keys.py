"""Keys: signing, verification that raises, private file permissions, note verifier keys, the keyring, CLI."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from heldout.cli import app
from keys import (
    InvalidSignature,
    KeyFileError,
    Keyring,
    MalformedInput,
    PublicKey,
    Signer,
    TrustedKey,
    UsageError,
    note_key_hash,
    parse_key_argument,
    parse_verifier_key,
    verifier_key_string,
)
from tests.conftest import seeded_signer

runner = CliRunner()


def test_sign_and_verify(signer: Signer) -> None:
    signature = signer.sign(b"message")
    assert len(signature) == 64
    signer.public_key.verify(b"message", signature)


def test_wrong_key_raises(signer: Signer, other_signer: Signer) -> None:
    with pytest.raises(InvalidSignature):
        other_signer.public_key.verify(b"message", signer.sign(b"message"))


def test_changed_message_raises(signer: Signer) -> None:
    with pytest.raises(InvalidSignature):
        signer.public_key.verify(b"messagf", signer.sign(b"message"))


def test_truncated_signature_raises(signer: Signer) -> None:
    with pytest.raises(InvalidSignature, match="64 bytes"):
        signer.public_key.verify(b"m", signer.sign(b"m")[:63])


def test_deterministic_from_seed() -> None:
    assert seeded_signer(7).public_key == seeded_signer(7).public_key
    assert seeded_signer(7).public_key != seeded_signer(8).public_key


def test_public_key_length_checked() -> None:
    with pytest.raises(MalformedInput):
        PublicKey(b"\x00" * 31)


def test_private_key_file_modes(tmp_path: Path, signer: Signer) -> None:
    path = tmp_path / "private" / "k.key"
    signer.save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    loaded = Signer.load(path)
    assert loaded.public_key == signer.public_key and loaded.key_id == signer.key_id


def test_private_key_file_too_open_refused(tmp_path: Path, signer: Signer) -> None:
    path = tmp_path / "private" / "k.key"
    signer.save(path)
    os.chmod(path, 0o644)
    with pytest.raises(KeyFileError, match="open to others"):
        Signer.load(path)
    os.chmod(path, 0o600)
    os.chmod(path.parent, 0o755)
    with pytest.raises(KeyFileError, match="open to others"):
        Signer.load(path)


def test_private_key_never_overwritten(tmp_path: Path, signer: Signer, other_signer: Signer) -> None:
    path = tmp_path / "private" / "k.key"
    signer.save(path)
    with pytest.raises(KeyFileError, match="overwrite"):
        other_signer.save(path)
    assert Signer.load(path).public_key == signer.public_key


def test_private_key_never_in_repr_or_error(tmp_path: Path, signer: Signer) -> None:
    path = tmp_path / "private" / "k.key"
    signer.save(path)
    seed_b64 = json.loads(path.read_text())["seed_b64"]
    assert seed_b64 not in repr(signer) and seed_b64 not in str(signer)
    body = json.loads(path.read_text())
    body["public_key_b64"] = base64.b64encode(b"\x01" * 32).decode()
    bad = tmp_path / "private" / "bad.key"
    fd = os.open(bad, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, json.dumps(body).encode())
    os.close(fd)
    with pytest.raises(KeyFileError) as info:
        Signer.load(bad)
    assert seed_b64 not in str(info.value) and seed_b64 not in repr(info.value.evidence)


def test_note_verifier_key_round_trip(signer: Signer) -> None:
    text = verifier_key_string(signer.name, signer.public_key)
    name, key_hash, key = parse_verifier_key(text)
    assert (name, key) == (signer.name, signer.public_key)
    assert key_hash == note_key_hash(signer.name, signer.public_key)
    tampered = text.replace(name, name + "x", 1)
    with pytest.raises(MalformedInput, match="hash"):
        parse_verifier_key(tampered)


def test_keyring_refuses_a_second_key_under_one_id(tmp_path: Path, signer: Signer, other_signer: Signer) -> None:
    ring = Keyring(tmp_path / "keys")
    ring.add(TrustedKey(signer.key_id, signer.name, signer.public_key))
    ring.add(TrustedKey(signer.key_id, signer.name, signer.public_key))  # idempotent
    with pytest.raises(UsageError):
        ring.add(TrustedKey(signer.key_id, signer.name, other_signer.public_key))
    assert [k.key_id for k in ring.list()] == [signer.key_id]
    assert ring.find(signer.public_key) is not None and ring.find(other_signer.public_key) is None


def test_parse_key_argument_forms(tmp_path: Path, signer: Signer) -> None:
    key = signer.public_key
    assert parse_key_argument(key.b64) == key
    assert parse_key_argument(verifier_key_string(signer.name, key)) == key
    raw_file = tmp_path / "raw.pub"
    raw_file.write_bytes(key.raw)
    assert parse_key_argument(str(raw_file)) == key
    json_file = tmp_path / "k.pub.json"
    json_file.write_text(json.dumps(TrustedKey(signer.key_id, signer.name, key).to_json()))
    assert parse_key_argument(str(json_file)) == key
    with pytest.raises(UsageError, match="30 bytes"):
        parse_key_argument(base64.b64encode(b"\x00" * 30).decode())
    with pytest.raises(UsageError):
        parse_key_argument("not base64!")


def test_cli_keys_init_list_show_export(store_dir: Path) -> None:
    result = runner.invoke(app, ["keys", "init", "--store", str(store_dir), "--name", "lab", "--key-id", "lab-1"])
    assert result.exit_code == 0, result.output
    private = store_dir / "private" / "keys" / "lab-1.key"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    seed_b64 = json.loads(private.read_text())["seed_b64"]
    outputs = [result.output]
    listed = runner.invoke(app, ["keys", "list", "--store", str(store_dir), "--json"])
    assert listed.exit_code == 0 and json.loads(listed.output)[0]["key_id"] == "lab-1"
    outputs.append(listed.output)
    shown = runner.invoke(app, ["keys", "show", "lab-1", "--store", str(store_dir), "--json"])
    assert shown.exit_code == 0
    outputs.append(shown.output)
    note = runner.invoke(app, ["keys", "export-public", "lab-1", "--store", str(store_dir), "--format", "note"])
    assert note.exit_code == 0 and note.output.startswith("lab+")
    outputs.append(note.output)
    parse_verifier_key(note.output.strip())
    assert all(seed_b64 not in out for out in outputs)
    again = runner.invoke(app, ["keys", "init", "--store", str(store_dir), "--name", "lab", "--key-id", "lab-1"])
    assert again.exit_code == 2 and "already exists" in again.output


def test_cli_keys_show_unknown_is_usage_error(store_dir: Path) -> None:
    result = runner.invoke(app, ["keys", "show", "nope", "--store", str(store_dir)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", [["keys", "init", "--key-id", "k2"], ["init"]], ids=["keys init", "init"])
def test_a_key_saved_by_an_init_killed_before_trusting_it_is_trusted_by_the_rerun(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    """An init killed between saving the private key and adding its public key to the keyring left the key
    untrusted for good: ``keys init`` refused the re-run ("already exists"), ``init`` used the key and the
    store's own verify-reveal refused its manifests (red-team round 10). The re-run trusts the saved key."""
    from keys.keyring import Keyring

    store = tmp_path / "store"
    monkeypatch.setenv("HELDOUT_NOW", "2026-09-01T00:00:00Z")

    def killed_run() -> None:  # in a forked child: killed as SIGKILL would (no clean-up runs)
        def killed(self: Keyring, key: TrustedKey) -> Path:
            os._exit(9)

        Keyring.add = killed  # type: ignore[method-assign]
        runner.invoke(app, [*command, "--store", str(store)])
        os._exit(0)

    import multiprocessing

    child = multiprocessing.get_context("fork").Process(target=killed_run)
    child.start()
    child.join(60)
    assert child.exitcode == 9
    saved = sorted(p.name for p in (store / "private" / "keys").glob("*.key"))
    assert len(saved) == 1 and not list((store / "keys").glob("*.pub.json"))
    result = runner.invoke(app, [*command, "--store", str(store)])
    assert result.exit_code == 0, result.output
    listed = json.loads(runner.invoke(app, ["keys", "list", "--json", "--store", str(store)]).stdout)
    assert [k["key_id"] for k in listed] == [saved[0].removesuffix(".key")]
    assert sorted(p.name for p in (store / "private" / "keys").glob("*.key")) == saved  # no second key made
