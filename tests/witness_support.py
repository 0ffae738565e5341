"""Helpers of the witness tests: witness folders with deterministic keys, servers on ephemeral 127.0.0.1 ports,
raw add-checkpoint requests, and an operator store driven through the CLI."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

from typer.testing import CliRunner, Result

from heldout.cli import app
from heldout.store import Store
from heldout.witness.server import witness_key_path
from keys import Signer
from keys.files import ensure_private_dir
from ledger import Ledger
from ledger.cosignature import Cosigner
from ledger.witness import WitnessedLog, request_body, trust_log
from tests.conftest import seeded_signer

runner = CliRunner()
AT = "2026-03-01T12:00:00Z"


def witness_signer(i: int) -> Signer:
    return seeded_signer(40 + i, name=f"w{i}.witness.example", key_id="witness")


def witness_folder(root: Path, i: int, *, origin: str, vkey: str) -> Path:
    """A witness folder with the deterministic key of witness ``i``, following one log."""
    folder = root / f"witness{i}"
    ensure_private_dir(folder / "private")
    ensure_private_dir(witness_key_path(folder).parent)
    witness_signer(i).save(witness_key_path(folder))
    trust_log(folder, WitnessedLog.from_vkey(origin, vkey))
    return folder


def cosigner(i: int) -> Cosigner:
    return Cosigner.of(witness_signer(i))


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def post(url: str, body: bytes) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url + "/add-checkpoint", data=body, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


def body_for(ledger: Ledger, old: int, size: int | None = None) -> bytes:
    checkpoint = ledger.latest_checkpoint() if size is None else ledger.checkpoint_at(size)
    assert checkpoint is not None
    proof = () if old in (0, checkpoint.size) else ledger.consistency_proof(old, checkpoint.size).path
    return request_body(old, proof, checkpoint.note)


def cli(*args: str, store: Path | None = None) -> Result:
    extra = ["--store", str(store)] if store is not None else []
    result = runner.invoke(app, [*args, *extra])
    assert "Traceback" not in result.output, result.output
    return result


def operator_store(root: Path) -> tuple[Path, str, Ledger]:
    """A store with a deterministic operator key and a ledger (``heldout keys init`` + ``ledger init``)."""
    store = root / "store"
    signer = seeded_signer(1, name="lab-operator", key_id="lab-1")
    st = Store.open(store)
    st.create()
    signer.save(st.private_key_path(signer.key_id))
    result = cli("ledger", "init", "--name", "witnessed ledger", "--at", AT, "--json", store=store)
    assert result.exit_code == 0, result.output
    ledger_id = json.loads(result.stdout)["ledger_id"]
    return store, ledger_id, Ledger.open(Ledger.locate(st.ledgers, ledger_id))


def append_key_entry(store: Path, ledger_id: str, tmp: Path, i: int, *, at: str = AT) -> Result:
    """Append a ``key`` entry through ``heldout ledger append`` (a key entry audits clean without blobs)."""
    key = seeded_signer(60 + i, name=f"extra-{i}", key_id=f"extra-{i}").public_key.b64
    path = tmp / f"key{i}.json"
    path.write_text(json.dumps({"key": {"key_id": f"extra-{i}", "name": f"extra-{i}", "public_key_b64": key},
                                "role": "auditor"}))
    return cli("ledger", "append", ledger_id, "--type", "key", "--json-file", str(path), "--at", at, store=store)


class Clock:
    """A settable clock for witnesses in tests."""

    def __init__(self, moment: datetime) -> None:
        self.moment = moment

    def __call__(self) -> datetime:
        return self.moment
