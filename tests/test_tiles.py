"""C2SP tlog-tiles (``heldout ledger tiles``, ``ledger.tiles``): the layout and its encodings, incremental
re-runs that never rewrite a full tile, the ``--from`` consumers (audit, passport verify, verify-reveal,
ledger verify) giving the same verdicts and exit codes from a tiles directory, local or served over HTTP on
127.0.0.1, as from the export of the same store, and hostile tiles directories refused in one line (exit 1
or 2, never a traceback). The Go interop test is tests/test_tiles_go.py."""

from __future__ import annotations

import fcntl
import functools
import json
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

import ledger.tiles as tiles_module
from heldout.cli import app
from ledger import LedgerIntegrityError, LedgerUsageError, SourceUnavailable
from ledger.tiles import (
    CHECKPOINT,
    LOCK,
    MANIFEST,
    TilesLog,
    bundle_path,
    decode_bundle,
    encode_bundle,
    hash_tile_path,
    index_path,
    write_tiles,
)
from seals import canonical_bytes
from tests.audit_support import AuditFixture, build_store, command_clock
from tests.test_ledger_support import T0, bundle_entry, ledger_signer, new_ledger

AT = "2026-09-02T00:00:00Z"
runner = CliRunner()


# --- encodings ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("index", "path"), [(0, "000"), (5, "005"), (999, "999"), (1000, "x001/000"),
                                             (1234067, "x001/x234/067"), (10**9, "x001/x000/x000/000")])
def test_index_path_is_the_specs(index: int, path: str) -> None:
    assert index_path(index) == path


def test_tile_paths() -> None:
    assert hash_tile_path(0, 1234067) == "tile/0/x001/x234/067"
    assert hash_tile_path(2, 3, 17) == "tile/2/003.p/17"
    assert bundle_path(1, 255) == "tile/entries/001.p/255"
    with pytest.raises(LedgerUsageError):
        hash_tile_path(0, 0, 257)


@given(st.lists(st.binary(max_size=300), max_size=40))
def test_entry_bundle_round_trip(entries: list[bytes]) -> None:
    data = encode_bundle(entries)
    assert decode_bundle(data, where="t") == entries
    assert len(data) == sum(2 + len(e) for e in entries)


@pytest.mark.parametrize(("keep", "phrase"), [(11, "inside an entry"), (6, "inside a length")])
def test_truncated_bundle_is_refused(keep: int, phrase: str) -> None:
    data = encode_bundle([b"abc", b"defgh"])  # 12 bytes: 2 + 3, 2 + 5
    with pytest.raises(LedgerIntegrityError, match=phrase):
        decode_bundle(data[:keep], where="t")


# --- writing and re-writing ---------------------------------------------------------------------------------

def full_files(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every full hash tile and full entry bundle: inode, mtime (ns) and bytes."""
    out = {}
    for path in (folder / "tile").rglob("*"):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and ".p/" not in rel:
            info = path.stat()
            out[rel] = (info.st_ino, info.st_mtime_ns, path.read_bytes())
    return out


def grow(ledger: Any, count: int, day: int, batch: int = 37) -> None:
    signer = ledger_signer()
    start = ledger.size
    for first in range(start, start + count, batch):
        ledger.append_batch([bundle_entry(i) for i in range(first, min(first + batch, start + count))],
                            signer=signer, now=T0 + timedelta(days=day, minutes=first))


def test_rerun_after_appends_rewrites_no_full_tile(tmp_path: Path) -> None:
    ledger = new_ledger(tmp_path / "ledger", entries=600, batch=7)
    out = tmp_path / "tiles"
    first = write_tiles(ledger, out)
    assert first.previous_size == 0 and first.size == 601 and first.written[-1] == CHECKPOINT
    before = full_files(out)
    assert {hash_tile_path(0, 0), hash_tile_path(0, 1), bundle_path(0), bundle_path(1)} <= set(before)
    assert (out / hash_tile_path(0, 2, 89)).is_file() and (out / bundle_path(2, 89)).is_file()

    grow(ledger, 66_000, day=1, batch=997)  # completes tile 2, the first level-1 tile, and starts level 2
    second = write_tiles(ledger, out)
    after = full_files(out)
    for rel, (inode, mtime, data) in before.items():
        assert after[rel] == (inode, mtime, data), f"{rel} was rewritten"
    assert not set(before) & set(second.written)
    assert {hash_tile_path(0, 2), hash_tile_path(1, 0), bundle_path(257)} <= set(second.written)
    assert second.written[-1] == CHECKPOINT
    assert not (out / "tile/0/002.p").exists() and not (out / "tile/entries/002.p").exists()  # completed: removed
    assert "tile/0/002.p" in second.removed
    assert (out / hash_tile_path(2, 0, 1)).is_file()

    grow(ledger, 5, day=2)  # extends only partial tiles
    third = write_tiles(ledger, out)
    assert all(".p/" in rel for rel in third.written if rel.startswith("tile/")), third.written
    assert full_files(out) == after
    assert write_tiles(ledger, out).written == []  # nothing new: nothing written

    log = TilesLog(out)
    report = log.verify(expected_id=ledger.ledger_id)
    assert report.size == ledger.size == log.size and log.root() == ledger.root()
    assert log.inclusion_proof(12345, 60000).path == ledger.inclusion_proof(12345, 60000).path
    assert log.consistency_proof(601, ledger.size).path == ledger.consistency_proof(601).path

    fresh = tmp_path / "fresh"
    write_tiles(ledger, fresh)
    assert full_files(fresh).keys() == full_files(out).keys()
    for rel in [MANIFEST, CHECKPOINT, *full_files(out)]:
        assert (fresh / rel).read_bytes() == (out / rel).read_bytes(), rel
    ledger.close()


def test_rerun_refuses_a_damaged_full_tile_and_publishes_nothing(tmp_path: Path) -> None:
    ledger = new_ledger(tmp_path / "ledger", entries=600, batch=50)
    out = tmp_path / "tiles"
    write_tiles(ledger, out)
    published = (out / CHECKPOINT).read_bytes()
    tile = out / hash_tile_path(0, 0)
    data = bytearray(tile.read_bytes())
    data[0] ^= 1
    tile.write_bytes(bytes(data))
    grow(ledger, 100, day=1)
    with pytest.raises(LedgerIntegrityError, match="another root"):
        write_tiles(ledger, out)
    assert (out / CHECKPOINT).read_bytes() == published
    ledger.close()


def test_tiles_of_another_ledger_or_a_foreign_folder_are_refused(tmp_path: Path) -> None:
    ledger = new_ledger(tmp_path / "a", entries=3)
    other = new_ledger(tmp_path / "b", entries=3, name="another ledger")
    write_tiles(ledger, tmp_path / "tiles")
    with pytest.raises(LedgerUsageError, match="another ledger"):
        write_tiles(other, tmp_path / "tiles")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    with pytest.raises(LedgerUsageError, match="not a tiles directory"):
        write_tiles(ledger, tmp_path / "foreign")
    ledger.close()
    other.close()


# --- the same verdicts from tiles as from the export ----------------------------------------------------------

@dataclass
class Published:
    fixture: AuditFixture
    export: Path
    tiles: Path
    url: str
    passports: dict[str, Path]


class QuietHandler(SimpleHTTPRequestHandler):
    timeout = 10

    def log_message(self, format: str, *args: Any) -> None:
        pass


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that refuses an oversized body hangs up mid-send: not the test's output


@dataclass
class Server:
    url: str
    httpd: QuietServer
    thread: threading.Thread

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


def serve(folder: Path) -> Server:
    """Serve ``folder`` on 127.0.0.1 (an ephemeral port) from a thread until :meth:`Server.close`."""
    httpd = QuietServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(folder)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    return Server(f"http://127.0.0.1:{httpd.server_address[1]}", httpd, thread)


def cli(*args: str) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"crashed: {result.exception!r}\n{result.output}")
    return result


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Published]:
    """One store: public, gen1 and gen2 with bundles; passports for model_0 on gen1 and gen2; gen1 retired
    with its reveal (so its passport lapses and its bundles re-derive); gen2 still sealed. Its export, its
    tiles directory, and that directory served over HTTP."""
    root = tmp_path_factory.mktemp("published")
    fixture = build_store(root)
    store = str(fixture.store)
    passports = {}
    with command_clock(AT):
        for generation in ("gen1", "gen2"):
            assert cli("audit", fixture.ledger_id, "--store", store).exit_code == 0  # issuing needs it at the head
            done = cli("passport", "issue", "model_0", "--generation", generation, "--store", store)
            assert done.exit_code == 0, done.output
            passports[generation] = fixture.store / "passports" / f"model_0__{generation}.passport.json"
        done = cli("retire", "gen1", "--reason", "leaked", "--reveal", "--store", store)
        assert done.exit_code == 0, done.output
        for command in ("export", "tiles"):
            done = cli("ledger", command, fixture.ledger_id, str(root / command), "--store", store)
            assert done.exit_code == 0, done.output
    server = serve(root / "tiles")
    try:
        yield Published(fixture, root / "export", root / "tiles", server.url, passports)
    finally:
        server.close()


def sources(pub: Published) -> dict[str, str]:
    return {"export": str(pub.export), "tiles": str(pub.tiles), "http": pub.url}


def outcome(result: Result, drop: tuple[str, ...] = ()) -> tuple[int, Any]:
    body = json.loads(result.stdout)
    for key in drop:
        body.pop(key, None)
    return result.exit_code, body


def test_tiles_hold_only_public_files(published: Published) -> None:
    """Beside the tiles, exactly the export's public files (byte for byte, same paths); nothing private that
    the export leaves out (the still-sealed gen2's opening, the private key) anywhere."""
    exported = {p.relative_to(published.export).as_posix(): p.read_bytes()
                for p in published.export.rglob("*") if p.is_file()}
    private = published.fixture.store / "private"
    secrets = {p.read_bytes() for p in private.rglob("*") if p.is_file()} - set(exported.values())
    assert any(b"gen2" in secret for secret in secrets)
    files = {p.relative_to(published.tiles).as_posix(): p.read_bytes()
             for p in published.tiles.rglob("*") if p.is_file()}
    assert not set(files.values()) & secrets
    beside = {rel: data for rel, data in files.items() if not rel.startswith("tile/") and rel not in
              (MANIFEST, CHECKPOINT, LOCK)}
    assert beside == {rel: data for rel, data in exported.items() if rel not in ("export.json", "entries.jsonl")}
    manifest = json.loads((published.tiles / MANIFEST).read_text())
    exported = json.loads((published.export / "export.json").read_text())
    for member in ("ledger_id", "origin", "size", "root", "note_verifier_key", "checkpoints", "blobs",
                   "missing_blobs", "keys", "seals"):
        assert manifest[member] == exported[member], member


def test_audit_from_tiles_and_url_gives_the_exports_report(published: Published, tmp_path: Path) -> None:
    outcomes = {}
    with command_clock(AT):
        for name, source in sources(published).items():
            out = tmp_path / f"{name}.json"
            result = cli("audit", published.fixture.ledger_id, "--from", source, "--out", str(out), "--json")
            outcomes[name] = outcome(result, drop=("audit_command",))
            assert json.loads(out.read_text())["audit_command"].endswith(f"--from {source}")
    code, report = outcomes["export"]
    assert code == 5 and report["verdict"] == "incomplete" and report["ledger_intact"] is True  # gen2 sealed
    assert report["rederived"] > 0 and {u["generation"] for u in report["not_rederived"]} == {"gen2"}
    assert outcomes["tiles"] == outcomes["export"]
    assert outcomes["http"] == outcomes["export"]


@pytest.mark.parametrize(("generation", "expected"), [("gen2", 0), ("gen1", 4)])
def test_passport_verify_from_tiles_and_url_gives_the_exports_verdict(published: Published, generation: str,
                                                                        expected: int) -> None:
    outcomes = {}
    with command_clock(AT):
        for name, source in sources(published).items():
            result = cli("passport", "verify", str(published.passports[generation]), "--key",
                         published.fixture.key_b64, "--from", source, "--json")
            outcomes[name] = outcome(result)
    assert outcomes["export"][0] == expected, outcomes["export"]
    assert outcomes["tiles"] == outcomes["export"] and outcomes["http"] == outcomes["export"]


def test_verify_reveal_from_tiles_and_url_gives_the_exports_verdict(published: Published) -> None:
    outcomes = {}
    with command_clock(AT):
        for name, source in sources(published).items():
            result = cli("verify-reveal", "gen1", "--from", source, "--key", published.fixture.key_b64, "--json")
            outcomes[name] = outcome(result, drop=("source",))
            assert result.exit_code == 0, result.output
            sealed = cli("verify-reveal", "gen2", "--from", source, "--key", published.fixture.key_b64)
            assert sealed.exit_code == 2 and "has not been revealed" in sealed.output
    body = outcomes["export"][1]
    assert body["verified"] is True and body["ledger_checked"] is True and body["reveal_index"] is not None
    assert outcomes["tiles"] == outcomes["export"] and outcomes["http"] == outcomes["export"]


def test_ledger_verify_from_tiles_and_url(published: Published) -> None:
    for source in (str(published.tiles), published.url):
        result = cli("ledger", "verify", published.fixture.ledger_id, "--from", source, "--json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["size"] == json.loads((published.tiles / MANIFEST).read_text())["size"]


# --- hostile tiles directories --------------------------------------------------------------------------------

def first_file(folder: Path, under: str) -> Path:
    return sorted(p for p in (folder / under).rglob("*") if p.is_file())[0]


def flip(path: Path, offset: int = 40) -> None:
    data = bytearray(path.read_bytes())
    data[offset % len(data)] ^= 0x01
    path.write_bytes(bytes(data))


def leaf_tile_flip(folder: Path) -> None:
    flip(first_file(folder, "tile/0"))


def bundle_flip(folder: Path) -> None:
    flip(first_file(folder, "tile/entries"))


def truncated_tile(folder: Path) -> None:
    tile = first_file(folder, "tile/0")
    tile.write_bytes(tile.read_bytes()[:-5])


def symlinked_bundle(folder: Path) -> None:
    bundle = first_file(folder, "tile/entries")
    copy = folder.parent / "elsewhere"
    shutil.copy(bundle, copy)
    bundle.unlink()
    bundle.symlink_to(copy)


def symlinked_tile_folder(folder: Path) -> None:
    shutil.move(folder / "tile" / "0", folder.parent / "level0")
    (folder / "tile" / "0").symlink_to(folder.parent / "level0")


def oversized_tile(folder: Path) -> None:
    os.truncate(first_file(folder, "tile/0"), 3 * 1024 * 1024 * 1024)  # sparse: refused before a byte is read


def oversized_checkpoint(folder: Path) -> None:
    with open(folder / CHECKPOINT, "ab") as handle:
        handle.write(b"\n" * 70_000)


def bad_checkpoint_signature(folder: Path) -> None:
    lines = (folder / CHECKPOINT).read_text().split("\n")
    signature = lines[4].rsplit(" ", 1)
    changed = signature[1][:10] + ("A" if signature[1][10] != "A" else "B") + signature[1][11:]
    lines[4] = f"{signature[0]} {changed}"
    (folder / CHECKPOINT).write_text("\n".join(lines))


def deep_manifest(folder: Path) -> None:
    (folder / MANIFEST).write_bytes(b"[" * 100_000 + b"]" * 100_000)


def fifo_tile(folder: Path) -> None:
    tile = first_file(folder, "tile/0")
    tile.unlink()
    os.mkfifo(tile)


HOSTILE = {
    "flipped leaf tile": (leaf_tile_flip, "do not hash to its leaf in tile/0/"),
    "flipped entry bundle": (bundle_flip, ""),
    "truncated tile": (truncated_tile, "wrong length"),
    "symlinked bundle": (symlinked_bundle, "symbolic link"),
    "symlinked tile folder": (symlinked_tile_folder, "symbolic link"),
    "oversized tile": (oversized_tile, "limit"),
    "oversized checkpoint": (oversized_checkpoint, "limit"),
    "bad checkpoint signature": (bad_checkpoint_signature, ""),
    "deeply nested manifest": (deep_manifest, "nested more than"),
    "fifo for a tile": (fifo_tile, "not a regular file"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_tiles_are_refused_in_one_line(published: Published, tmp_path: Path, kind: str) -> None:
    damage, phrase = HOSTILE[kind]
    folder = tmp_path / "tiles"
    shutil.copytree(published.tiles, folder, symlinks=True)
    damage(folder)
    ledger_id = published.fixture.ledger_id
    with command_clock(AT):
        for args in (["ledger", "verify", ledger_id, "--from", str(folder)],
                     ["passport", "verify", str(published.passports["gen2"]), "--key", published.fixture.key_b64,
                      "--from", str(folder)]):
            result = cli(*args)
            assert result.exit_code in (1, 2), (kind, result.output)
            assert "Traceback" not in result.output
            lines = result.output.strip().splitlines()
            assert len(lines) == 1 and phrase in lines[0], (kind, result.output)
        audit = cli("audit", ledger_id, "--from", str(folder), "--out", str(tmp_path / "report.json"))
        assert audit.exit_code in (1, 2), (kind, audit.output)
        assert "Traceback" not in audit.output


HTTP_HOSTILE = ("flipped leaf tile", "truncated tile", "oversized checkpoint", "bad checkpoint signature",
                "deeply nested manifest")


@pytest.mark.parametrize("kind", HTTP_HOSTILE)
def test_hostile_tiles_over_http_are_refused(published: Published, tmp_path: Path, kind: str) -> None:
    damage, phrase = HOSTILE[kind]
    folder = tmp_path / "tiles"
    shutil.copytree(published.tiles, folder)
    damage(folder)
    server = serve(folder)
    try:
        result = cli("ledger", "verify", published.fixture.ledger_id, "--from", server.url)
    finally:
        server.close()
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and phrase in lines[0], result.output
    unreachable = cli("ledger", "verify", published.fixture.ledger_id, "--from", server.url)  # closed now
    assert unreachable.exit_code == 2 and "cannot fetch" in unreachable.output
    assert len(unreachable.output.strip().splitlines()) == 1


def test_a_second_concurrent_run_is_refused(tmp_path: Path) -> None:
    ledger = new_ledger(tmp_path / "ledger", entries=3)
    out = tmp_path / "tiles"
    write_tiles(ledger, out)
    fd = os.open(out / LOCK, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(LedgerUsageError, match="another 'ledger tiles' run"):
            write_tiles(ledger, out)
    finally:
        os.close(fd)
    assert write_tiles(ledger, out).written == []
    ledger.close()


def test_follow_a_growing_tiles_directory_locally_and_over_http(tmp_path: Path) -> None:
    """``ledger follow --from`` a tiles folder or URL: trust on first use, then each larger checkpoint only
    with the consistency proof from the tiles; a history rewritten under the same key is a fork."""
    ledger = new_ledger(tmp_path / "ledger", entries=300, batch=20)
    out = tmp_path / "tiles"
    write_tiles(ledger, out)
    server = serve(out)
    try:
        for source, state in ((str(out), tmp_path / "local.json"), (server.url, tmp_path / "http.json")):
            first = cli("ledger", "follow", ledger.ledger_id, "--from", source, "--state", str(state), "--json")
            assert first.exit_code == 0 and json.loads(first.stdout)["size"] == ledger.size, first.output
        grow(ledger, 400, day=1)
        write_tiles(ledger, out)
        for source, state in ((str(out), tmp_path / "local.json"), (server.url, tmp_path / "http.json")):
            second = cli("ledger", "follow", ledger.ledger_id, "--from", source, "--state", str(state), "--json")
            assert second.exit_code == 0, second.output
            assert json.loads(second.stdout)["previous_size"] == 301
            assert json.loads(second.stdout)["size"] == ledger.size
    finally:
        server.close()
    forked = new_ledger(tmp_path / "forked")  # same key and genesis, then another history
    forked.append_batch([bundle_entry(i, pad=5) for i in range(1, 900)], signer=ledger_signer(), now=T0)
    assert forked.ledger_id == ledger.ledger_id
    write_tiles(forked, tmp_path / "forked-tiles")
    refused = cli("ledger", "follow", ledger.ledger_id, "--from", str(tmp_path / "forked-tiles"), "--state",
                  str(tmp_path / "local.json"))
    assert refused.exit_code == 1 and "not proven to extend" in refused.output
    ledger.close()
    forked.close()


def test_an_entry_too_long_for_a_bundle_is_refused_and_nothing_is_published(tmp_path: Path) -> None:
    """The ledger takes entries of up to 65536 bytes; a bundle's uint16 length holds 65535: refused, in one
    line (exit 2), before any checkpoint is written."""
    ledger = new_ledger(tmp_path / "ledger")
    base = len(canonical_bytes(bundle_entry(1, pad=1)))
    entry = bundle_entry(1, pad=1 + 65536 - base)
    assert len(canonical_bytes(entry)) == 65536
    ledger.append(entry, signer=ledger_signer(), now=T0)
    with pytest.raises(LedgerUsageError, match="at most 65535 bytes"):
        write_tiles(ledger, tmp_path / "tiles")
    assert not (tmp_path / "tiles" / CHECKPOINT).exists()
    ledger.close()


def test_a_run_that_dies_before_its_checkpoint_leaves_the_old_state_and_the_next_run_completes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = new_ledger(tmp_path / "ledger", entries=300, batch=30)
    out = tmp_path / "tiles"
    write_tiles(ledger, out)
    published = (out / CHECKPOINT).read_bytes()
    grow(ledger, 500, day=1)
    original = tiles_module._Writer.replaceable

    def dies_at_the_checkpoint(self: Any, rel: str, data: bytes) -> None:
        if rel == CHECKPOINT:
            raise OSError("power cut")
        original(self, rel, data)

    monkeypatch.setattr(tiles_module._Writer, "replaceable", dies_at_the_checkpoint)
    with pytest.raises(OSError, match="power cut"):
        write_tiles(ledger, out)
    monkeypatch.undo()
    assert (out / CHECKPOINT).read_bytes() == published  # readers still see the old state...
    with pytest.raises(SourceUnavailable, match="being updated"):
        TilesLog(out)  # ...and a reader of the new manifest is told to read again (exit 2: no verdict)
    assert SourceUnavailable("").exit_code == 2
    done = write_tiles(ledger, out)
    assert done.previous_size == 301 and done.size == ledger.size and done.written[-1] == CHECKPOINT
    assert TilesLog(out).verify(expected_id=ledger.ledger_id).size == ledger.size
    ledger.close()


def site_tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_site_build_from_tiles_and_url_is_the_exports_site_byte_for_byte(published: Published,
                                                                          tmp_path: Path) -> None:
    trees = {}
    for name, source in sources(published).items():
        out = tmp_path / name
        result = cli("site", "build", str(out), "--from", source, "--at", AT, "--json")
        assert result.exit_code == 0, (name, result.output)
        trees[name] = site_tree(out)
    assert "index.html" in trees["export"] and any(rel.startswith("seals/") for rel in trees["export"])
    assert trees["tiles"] == trees["export"]
    assert trees["http"] == trees["export"]
