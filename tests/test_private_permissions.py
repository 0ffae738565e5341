"""``private/`` and everything under it is checked before private data is read or written (issue 9, section 5).

Folders must be 0700 (or stricter), files 0600, neither a link, all owned by the user running the command;
one check (``keys.files``) is used by every reader and writer of private data: signing keys, pools, openings.
Each case loosens one thing and runs the commands that touch private data; each must refuse with exit 2,
name the path, write nothing and never echo a key file's content.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from heldout.store import Store
from tests.generations_support import BLOODMNIST, EXPIRES, NOW, cli, pooled_store, snapshot, write_npz


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    monkeypatch.setenv("HELDOUT_NOW", NOW)
    store, ledger_id, data = pooled_store(tmp_path, BLOODMNIST)
    assert cli("seal", "gen1", "--tasks", "bloodmnist", "--per-task", "20", "--expires", EXPIRES,
               "--budget-bits", "5000", store=store).exit_code == 0
    note = tmp_path / "note.json"
    note.write_text(json.dumps({"text": "hello"}))
    return SimpleNamespace(store=store, ledger_id=ledger_id, data=data, note=note, tmp=tmp_path)


def a_case_id(store: Path) -> str:
    found = sorted((store / "private" / "generations").glob("*/gen1/*.reveal.json"))
    return str(json.loads(found[0].read_text())["cases"][0]["case_id"])


def commands(env: SimpleNamespace) -> dict[str, list[str]]:
    return {
        "ledger append": ["ledger", "append", env.ledger_id, "--type", "note", "--json-file", str(env.note)],
        "seal": ["seal", "gen2", "--tasks", "bloodmnist", "--per-task", "10", "--expires", EXPIRES,
                 "--budget-bits", "5000"],
        "retire": ["retire", "gen1", "--reason", "leaked", "--reveal"],
        "prove-member": ["prove-member", "gen1", a_case_id(env.store)],
        "pool add": ["pool", "add", "bloodmnist", str(write_npz(env.data / "more.npz", shape=(28, 28, 3),
                                                                classes=8, seed=9)), "--split", "test"],
    }


def key_file(store: Path) -> Path:
    return next((store / "private" / "keys").glob("*.key"))


def pool_chunk(store: Path) -> Path:
    return next((store / "private" / "pools" / "bloodmnist").glob("*.npz"))


LOOSENINGS: dict[str, Callable[[Path], Path]] = {
    "private/ is 0755": lambda s: _chmod(s / "private", 0o755),
    "private/ is 0750": lambda s: _chmod(s / "private", 0o750),
    "private/keys is 0711": lambda s: _chmod(s / "private" / "keys", 0o711),
    "the key file is 0644": lambda s: _chmod(key_file(s), 0o644),
    "the key file is 0640": lambda s: _chmod(key_file(s), 0o640),
    "private/pools is 0755": lambda s: _chmod(s / "private" / "pools", 0o755),
    "a pool file is 0644": lambda s: _chmod(pool_chunk(s), 0o644),
    "private/generations is 0755": lambda s: _chmod(s / "private" / "generations", 0o755),
}

#: The commands that must refuse each loosening (each touches the loosened private data).
AFFECTED: dict[str, tuple[str, ...]] = {
    "private/ is 0755": ("ledger append", "seal", "retire", "prove-member", "pool add"),
    "private/ is 0750": ("ledger append", "seal", "prove-member", "pool add"),
    "private/keys is 0711": ("ledger append", "seal", "retire"),
    "the key file is 0644": ("ledger append", "seal", "retire"),
    "the key file is 0640": ("ledger append", "seal"),
    "private/pools is 0755": ("seal", "pool add"),
    "a pool file is 0644": ("seal", "pool add"),
    "private/generations is 0755": ("seal", "retire", "prove-member"),
}


def _chmod(path: Path, mode: int) -> Path:
    os.chmod(path, mode)
    return path


@pytest.mark.parametrize("loosening", sorted(LOOSENINGS))
def test_a_loosened_private_tree_is_refused(env: SimpleNamespace, loosening: str) -> None:
    argv = commands(env)
    loosened = LOOSENINGS[loosening](env.store)
    for command in AFFECTED[loosening]:
        before = snapshot(env.store)
        result = cli(*argv[command], store=env.store)
        assert result.exit_code == 2, (command, result.output)
        assert "open to others" in result.output and str(loosened) in result.output.replace("\n", ""), \
            (command, result.output)
        assert snapshot(env.store) == before, command


def test_a_private_file_owned_by_another_user_is_refused(env: SimpleNamespace) -> None:
    if os.geteuid() != 0:
        pytest.skip("changing a file's owner needs root")
    os.chown(key_file(env.store), 12345, -1)
    result = cli(*commands(env)["ledger append"], store=env.store)
    assert result.exit_code == 2 and "another user" in result.output, result.output


def test_a_linked_key_file_is_refused(env: SimpleNamespace) -> None:
    key = key_file(env.store)
    elsewhere = env.tmp / "elsewhere.key"
    os.rename(key, elsewhere)
    key.symlink_to(elsewhere)
    result = cli(*commands(env)["ledger append"], store=env.store)
    assert result.exit_code == 2 and "not a plain file" in result.output, result.output


@pytest.mark.parametrize("content", [b"SECRET-SEED-0123456789abcdef", b'{"seed_b64": "SECRET-SEED-0123456789abcdef"}',
                                     b'{"name": "SECRET-SEED-0123456789abcdef", "key_id": 1}',
                                     b'{"name": "SECRET SEED 0123456789abcdef", "key_id": "k",'
                                     b' "seed_b64": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}',
                                     b'{"name": "op", "key_id": "SECRET SEED 0123456789abcdef",'
                                     b' "seed_b64": "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}'])
def test_errors_never_echo_a_key_files_content(env: SimpleNamespace, content: bytes) -> None:
    key = key_file(env.store)
    os.chmod(key, 0o600)
    key.write_bytes(content)
    result = cli(*commands(env)["ledger append"], store=env.store)
    assert result.exit_code == 2, result.output
    assert "SECRET-SEED" not in result.output


def test_a_fresh_store_is_private_all_the_way_down(env: SimpleNamespace) -> None:
    """What the commands create themselves passes the check: every folder under private/ is 0700, every file
    0600 (umask cannot widen them; intermediate folders included)."""
    old = os.umask(0o022)
    try:
        assert cli("retire", "gen1", "--reason", "leaked", "--reveal", store=env.store).exit_code == 0
    finally:
        os.umask(old)
    private = Store.open(env.store).private
    for path in [private, *private.rglob("*")]:
        mode = path.stat().st_mode & 0o777
        assert mode & 0o077 == 0, (path, oct(mode))
