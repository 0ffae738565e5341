"""Hostile-export campaign: a stranger hands our auditor a crafted export.

A real export (public, gen1 retired and revealed with images, gen2 sealed, bundles, a passport) is built once;
then every kind of file in it (manifest, entries, a checkpoint, a predictions blob, a reveal blob, an image
blob, a public key, a seal manifest, a published reveal, the passport) is replaced in turn by each hostile
shape: a FIFO, a symlink out of the export, a symlinked parent folder, a directory, a 2 GB sparse file, deeply
nested JSON, an .npy header claiming 116 TiB, a zip bomb, the file cut in half. Every command that reads that
file (``python audit.py ID --from``, ``heldout ledger verify --from``, ``heldout passport verify --from``,
``heldout verify-reveal --from``) runs as a subprocess, under a memory limit (RLIMIT_AS) and a timeout, and
must end with exit 1 or 2, a one-line message (the audit: its findings report), no traceback, no hang.

A symlink out of the export points at an identical copy of the file, so following it would succeed: the
command must refuse the link itself. Size knob: ``HELDOUT_HOSTILE_CASES`` (default 36, ``all`` for every one)
caps the number of (file, shape) cases, spread evenly.
"""

from __future__ import annotations

import base64
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from seals import canonical_bytes
from tests.audit_support import build_store, command_clock
from tests.generations_support import cli

REPO = Path(__file__).resolve().parent.parent
MEMORY_LIMIT = 768 * 1024 * 1024  # address space per command: far below the 4 GiB measured before the fix
TIMEOUT_S = 60
SPARSE_SIZE = 2 * 1024**3


@dataclass(frozen=True)
class Fixture:
    export: Path
    passport: Path
    ledger_id: str
    key_b64: str
    outside: Path  # a folder beside the export, for link targets


@pytest.fixture(scope="module")
def fixture(tmp_path_factory: pytest.TempPathFactory) -> Fixture:
    root = tmp_path_factory.mktemp("hostile")
    fx = build_store(root, bundles_per_generation=1, n_public=30, per_task=20)
    with command_clock("2026-09-02T00:00:00Z"):
        assert cli("audit", fx.ledger_id, store=fx.store).exit_code == 0
        assert cli("passport", "issue", "model_0", "--generation", "gen2", store=fx.store).exit_code == 0
        assert cli("retire", "gen1", "--reason", "expired", "--reveal", "--with-images",
                   store=fx.store).exit_code == 0
        assert cli("ledger", "export", fx.ledger_id, str(root / "export"), store=fx.store).exit_code == 0
    passport = next((fx.store / "passports").glob("*.passport.json"))
    outside = root / "outside"
    outside.mkdir()
    return Fixture(export=root / "export", passport=passport, ledger_id=fx.ledger_id, key_b64=fx.key_b64,
                   outside=outside)


# --- the files of an export, by kind ------------------------------------------------------------------------

def _entries(export: Path) -> list[dict]:
    return [json.loads(line) for line in (export / "entries.jsonl").read_text().splitlines()]


def _blob(digest: str) -> str:
    return f"blobs/sha256/{digest[:2]}/{digest}"


def target_files(fx: Fixture) -> dict[str, str]:
    """kind -> path relative to the export ('<passport>' for the passport file)."""
    entries = _entries(fx.export)
    public_bundle = next(e for e in entries if e["type"] == "bundle" and e["generation"] == "public")
    reveal = next(e for e in entries if e["type"] == "reveal" and e["generation"] == "gen1")
    reveal_doc = json.loads((fx.export / _blob(reveal["reveal_sha256"])).read_bytes())
    images = next(iter(reveal_doc["images"].values()))
    checkpoint = max(int(p.stem) for p in (fx.export / "checkpoints").glob("*.note"))
    return {
        "manifest": "export.json",
        "entries": "entries.jsonl",
        "checkpoint": f"checkpoints/{checkpoint}.note",
        "predictions blob": _blob(public_bundle["predictions_sha256"]),
        "evaluation blob": _blob(public_bundle["evaluation_sha256"]),
        "reveal blob": _blob(reveal["reveal_sha256"]),
        "image blob": _blob(images),
        "public key": next(f"keys/{p.name}" for p in (fx.export / "keys").glob("*.pub.json")),
        "seal manifest": "seals/gen1.seal.json",
        "published reveal": "seals/gen1.reveal.json",
        "passport": "<passport>",
    }


COMMANDS = ("audit", "ledger verify", "passport verify", "verify-reveal")

#: Which commands read each kind of file, so must refuse it when hostile (exit 1 or 2). The others must only
#: never crash or hang (their own exit code may be 0, or 5 for the audit's still-sealed gen2).
READERS: dict[str, tuple[str, ...]] = {
    "manifest": COMMANDS,
    "entries": COMMANDS,
    "checkpoint": COMMANDS,  # verify-reveal replays a published log before it reads its entries
    # every verifier of a published log applies every rule of FORMATS 15 to it, the blobs' (rule 7) included: one
    # published log, one verdict (heldout.generations.verify_public_log)
    "predictions blob": COMMANDS,
    "evaluation blob": COMMANDS,
    "reveal blob": COMMANDS,
    "image blob": COMMANDS,
    "public key": COMMANDS,  # each key file is compared with the key its entry declares
    # every verifier of a published log checks that seals/ is what it says (heldout.generations.verify_public_log)
    "seal manifest": ("audit", "ledger verify", "passport verify", "verify-reveal"),
    "published reveal": ("ledger verify", "passport verify", "verify-reveal"),
    "passport": ("passport verify",),
}


# --- hostile shapes -------------------------------------------------------------------------------------------

def _npz(members: dict[str, bytes], *, compress: bool = False) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def huge_npy_claim() -> bytes:
    """An npz whose member header claims (2**21, 2**21, 8) float32 = 116 TiB, with 16 bytes of data."""
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (2097152, 2097152, 8), }"
    header = header + b" " * (63 - (10 + len(header)) % 64) + b"\n"
    npy = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\x00" * 16
    return _npz({"clean_probs.npy": npy, "format.npy": npy})


def zip_bomb() -> bytes:
    """A valid npz whose one member (a 256 MiB float32 array of zeros) deflates to about 250 KiB."""
    buffer = io.BytesIO()
    array = np.lib.format
    header = io.BytesIO()
    array.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (64 * 1024**2,)})
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf, \
            zf.open("clean_probs.npy", "w", force_zip64=True) as member:
        member.write(header.getvalue())
        zeros = bytes(1024**2)
        for _ in range(256):
            member.write(zeros)
    return buffer.getvalue()


DEEP_JSON = b"[" * 30000 + b"]" * 30000 + b"\n"  # 60 KB: inside the 64 KiB entry limit


def _replace(path: Path, data: bytes) -> None:
    _remove(path)
    path.write_bytes(data)


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def fifo(path: Path, outside: Path) -> None:
    _remove(path)
    os.mkfifo(path)


def symlink_out(path: Path, outside: Path) -> None:
    copy = outside / f"copy-{path.name}"
    shutil.copyfile(path, copy)
    _remove(path)
    path.symlink_to(copy)


def symlinked_parent(path: Path, outside: Path) -> None:
    folder = path.parent
    copy = outside / f"dir-{folder.name}-{len(list(outside.iterdir()))}"
    shutil.copytree(folder, copy)
    shutil.rmtree(folder)
    folder.symlink_to(copy, target_is_directory=True)


def directory(path: Path, outside: Path) -> None:
    _remove(path)
    path.mkdir()
    (path / "x").write_bytes(b"{}")


def sparse(path: Path, outside: Path) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(SPARSE_SIZE)  # the original bytes, then 2 GB of holes


def deep_json(path: Path, outside: Path) -> None:
    _replace(path, DEEP_JSON)


#: 24 MiB of empty arrays: within every document bound, and about 20 times its size in memory once parsed (the
#: readers refuse it before parsing, FORMATS section 2; they once used 850 MB and died under the limit below).
WIDE_JSON = b'{"blobs":[' + b"[]," * (8 * 1024 * 1024) + b'[]]}\n'


def wide_json(path: Path, outside: Path) -> None:
    _replace(path, WIDE_JSON)


def npy_claim(path: Path, outside: Path) -> None:
    _replace(path, huge_npy_claim())


_BOMB: list[bytes] = []


def bomb(path: Path, outside: Path) -> None:
    if not _BOMB:
        _BOMB.append(zip_bomb())
    _replace(path, _BOMB[0])


def truncated(path: Path, outside: Path) -> None:
    data = path.read_bytes()
    _replace(path, data[: len(data) // 2])


SHAPES: dict[str, Callable[[Path, Path], None]] = {
    "fifo": fifo, "symlink out of the export": symlink_out, "symlinked parent folder": symlinked_parent,
    "directory": directory, "2 GB sparse file": sparse, "deeply nested JSON": deep_json, "wide JSON": wide_json,
    "npy header claiming 116 TiB": npy_claim, "zip bomb": bomb, "truncated": truncated,
}

# A symlinked parent of the passport (which the user names) or of a top-level file (the export folder itself,
# which the user names with --from) is the user's own choice of path, not something inside the export; so is a
# passport that is itself a link.
_TOP_LEVEL = ("passport", "manifest", "entries")
CASES = [(kind, shape) for kind in READERS for shape in SHAPES
         if not (kind in _TOP_LEVEL and shape == "symlinked parent folder")
         and not (kind == "passport" and shape == "symlink out of the export")]
#: Cases run (spread evenly over kinds and shapes); "all" runs every one (about 90, a few minutes on 2 cores).
_knob = os.environ.get("HELDOUT_HOSTILE_CASES", "36")
_limit = len(CASES) if _knob == "all" else int(_knob)
if 0 < _limit < len(CASES):
    CASES = [CASES[round(i * (len(CASES) - 1) / max(_limit - 1, 1))] for i in range(_limit)]


# --- running the auditor's commands -----------------------------------------------------------------------------

def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run(command: str, fx: Fixture, export: Path, passport: Path, work: Path) -> subprocess.CompletedProcess[str]:
    heldout = [sys.executable, "-m", "heldout"]
    argv = {
        "audit": [sys.executable, str(REPO / "audit.py"), fx.ledger_id, "--from", str(export),
                  "--out", str(work / "audit_report.json"), "--at", "2026-09-03T00:00:00Z"],
        "ledger verify": [*heldout, "ledger", "verify", fx.ledger_id, "--from", str(export)],
        "passport verify": [*heldout, "passport", "verify", str(passport), "--from", str(export),
                            "--key", fx.key_b64, "--at", "2026-09-03T00:00:00Z"],
        "verify-reveal": [*heldout, "verify-reveal", "gen1", "--from", str(export), "--key", fx.key_b64,
                          "--store", str(work / "store")],
    }[command]
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "OPENBLAS_NUM_THREADS": "1",
           "HOME": str(work), "COLUMNS": "200", "HELDOUT_STORE": str(work / "store")}
    try:
        return subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=TIMEOUT_S,
                              preexec_fn=_limit_memory, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{command} hung (over {TIMEOUT_S} s)")


def check_clean_failure(command: str, result: subprocess.CompletedProcess[str], *, must_fail: bool) -> None:
    where = f"{command}: exit {result.returncode}\nstdout: {result.stdout[-600:]}\nstderr: {result.stderr[-1500:]}"
    assert "Traceback" not in result.stderr + result.stdout, where
    if must_fail:
        assert result.returncode in (1, 2), where
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        # The audit's verdict is its findings report (stdout, exit 1); every other refusal is one line.
        assert len(lines) == 1 or (command == "audit" and "failed" in result.stdout.splitlines()[0]), where
    else:
        assert result.returncode in (0, 1, 2, 4, 5), where


def test_the_pristine_export_passes_every_command(fixture: Fixture, tmp_path: Path) -> None:
    expected = {"audit": 5, "ledger verify": 0, "passport verify": 0, "verify-reveal": 0}  # 5: gen2 sealed
    for command in COMMANDS:
        result = run(command, fixture, fixture.export, fixture.passport, tmp_path)
        assert result.returncode == expected[command], (command, result.stdout[-500:], result.stderr[-800:])


@pytest.mark.parametrize(("kind", "shape"), CASES, ids=[f"{k}-{s}".replace(" ", "_") for k, s in CASES])
def test_hostile_file_is_refused_cleanly(fixture: Fixture, tmp_path: Path, kind: str, shape: str) -> None:
    export = tmp_path / "export"
    shutil.copytree(fixture.export, export, symlinks=True)
    passport = tmp_path / "passport.json"
    shutil.copyfile(fixture.passport, passport)
    outside = tmp_path / "outside"
    outside.mkdir()
    relative = target_files(fixture)[kind]
    target = passport if relative == "<passport>" else export / relative
    SHAPES[shape](target, outside)
    work = tmp_path / "work"
    work.mkdir()
    # The commands that read the file must refuse it; a file nobody reads (the public keys, kept for
    # reference) must at least not disturb any command.
    for command in READERS[kind] or COMMANDS:
        result = run(command, fixture, export, passport, work)
        check_clean_failure(command, result, must_fail=command in READERS[kind])
        if command == "audit" and result.returncode == 1 and kind != "manifest":
            # a failed audit is a report of findings, whatever the damage (a FIFO in place of a blob ended it
            # with one line and no report: red-team round 14); an export whose manifest cannot be read is not
            # opened at all (one line: nothing in it can be named yet)
            assert (work / "audit_report.json").is_file(), (kind, shape, result.stderr[-800:])


#: Nested past the limit and never closed: 3,001 bytes, within every size and width bound.
UNCLOSED_JSON = b"[" * 3000 + b"1\n"


@pytest.mark.parametrize("kind", ["manifest", "entries", "evaluation blob", "public key", "seal manifest",
                                  "published reveal", "passport"])
def test_attack_json_nested_deep_and_never_closed_is_refused_in_one_line(fixture: Fixture, tmp_path: Path,
                                                                         kind: str) -> None:
    """Deep nesting that never closes passed the depth check ("unbalanced: the parser reports it"), and the
    parser recursed into every bracket before the fault: a RecursionError traceback from every command that
    read the file, while the independent replay refused it in one line (red-team round 20). Every reader
    refuses it in one line now."""
    export = tmp_path / "export"
    shutil.copytree(fixture.export, export, symlinks=True)
    passport = tmp_path / "passport.json"
    shutil.copyfile(fixture.passport, passport)
    relative = target_files(fixture)[kind]
    _replace(passport if relative == "<passport>" else export / relative, UNCLOSED_JSON)
    work = tmp_path / "work"
    work.mkdir()
    for command in READERS[kind]:
        check_clean_failure(command, run(command, fixture, export, passport, work), must_fail=True)


def test_attack_a_wide_export_manifest_is_refused_before_it_is_parsed(fixture: Fixture, tmp_path: Path) -> None:
    """Empty arrays, 3 bytes each, within the document bounds: every reader refuses the text by its count of
    arrays and objects before parsing it, in one line, under the memory limit (whatever the case knob)."""
    export = tmp_path / "export"
    shutil.copytree(fixture.export, export, symlinks=True)
    wide_json(export / target_files(fixture)["manifest"], tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    for command in COMMANDS:
        result = run(command, fixture, export, fixture.passport, work)
        check_clean_failure(command, result, must_fail=True)
        assert "arrays and objects" in result.stderr + result.stdout, (command, result.stderr[-800:])


def _padded_note(export: Path) -> None:
    """The latest checkpoint note past 16 KiB, with signature lines of keys nobody knows (which anyone may add:
    a verifier ignores them)."""
    size = json.loads((export / "export.json").read_bytes())["size"]
    note = export / "checkpoints" / f"{size}.note"
    text = note.read_text(encoding="utf-8")
    number = 0
    while len(text.encode("utf-8")) <= 16 * 1024:
        text += f"\u2014 stranger{number} {base64.b64encode(bytes(68)).decode()}\n"
        number += 1
    note.write_text(text, encoding="utf-8")


LAYOUT_EDGES: dict[str, tuple[Callable[[Path], object], bool]] = {
    # (how the export is changed, whether it is refused)
    "hidden file among the seals": (lambda e: shutil.copyfile(e / "seals" / "gen1.seal.json",
                                                              e / "seals" / ".gen1.seal.json"), False),
    "empty folder that is not a blob prefix": (lambda e: (e / "blobs" / "sha256" / "zz").mkdir(), True),
    "checkpoint note over 16 KiB": (_padded_note, True),
    "tiles beside the export": (lambda e: ((e / "checkpoint").write_bytes(
        (e / "checkpoints" / f"{json.loads((e / 'export.json').read_bytes())['size']}.note").read_bytes()),
        (e / "tile").mkdir()), True),
}


@pytest.mark.parametrize("edge", sorted(LAYOUT_EDGES))
def test_attack_layout_edges_have_one_verdict_from_heldout_and_the_independent_replay(fixture: Fixture,
                                                                                     tmp_path: Path, edge: str) -> None:
    """Each of these once had two verdicts: heldout's readers and tests/independent/replay.py differed on a
    hidden seal file (FORMATS rule 8 sets hidden names aside), an empty folder under blobs/sha256 named like no
    prefix (rule 7), a note past section 7's 16 KiB (the replay did not bound it), and a folder that is both an
    export and tiles (each took it for another log; section 17 refuses it)."""
    from tests.independent.replay import ReplayFailure, replay_export

    export = _copy(fixture, tmp_path)
    change, refused = LAYOUT_EDGES[edge]
    change(export)
    result = run("ledger verify", fixture, export, fixture.passport, tmp_path / "work")
    check_clean_failure("ledger verify", result, must_fail=refused)
    assert result.returncode == (1 if refused else 0), (result.stdout[-400:], result.stderr[-800:])
    if refused:
        with pytest.raises(ReplayFailure):
            replay_export(export, fixture.ledger_id)
    else:
        replay_export(export, fixture.ledger_id)


@pytest.mark.parametrize("lines", ["many lines", "short lines, size edited", "bad entries, size edited"])
def test_attack_an_entries_file_of_many_bad_lines_is_judged_in_bounded_time(fixture: Fixture, tmp_path: Path,
                                                                           lines: str) -> None:
    """entries.jsonl padded with lines that are no entries: the audit named each one (a million blank lines kept
    it busy past two minutes and 1.7 GB), and every reader split the whole file first (23 times its size). The
    lines are counted before the split (no more than 10,000 past the manifest's size, and none shorter than the
    shortest entry on average), and the audit names at most 100 entries that do not decode, then says the rest
    is not judged."""
    export = _copy(fixture, tmp_path)
    manifest = json.loads((export / "export.json").read_bytes())
    pad = {"many lines": b'{"type":"note","v":1,"text":"not an entry of this log"}\n' * 200_000,
           "short lines, size edited": b"ab\n" * 200_000,
           "bad entries, size edited": b'{"type":"note","v":1,"text":"not canonical" }\n' * 20_000}[lines]
    with open(export / "entries.jsonl", "ab") as handle:
        handle.write(pad)
    if "size edited" in lines:
        manifest["size"] += pad.count(b"\n")
        (export / "export.json").write_bytes(canonical_bytes(manifest) + b"\n")
    started = time.monotonic()
    for command in COMMANDS:
        check_clean_failure(command, run(command, fixture, export, fixture.passport, tmp_path / "work"),
                            must_fail=True)
    assert time.monotonic() - started < 120
    if lines == "bad entries, size edited":
        report = json.loads((tmp_path / "work" / "audit_report.json").read_bytes())
        undecoded = [f for f in report["findings"] if f["check"] == "entry"]
        assert len(undecoded) == 101 and "the entries after it are not judged" in undecoded[-1]["message"]


def test_every_kind_of_export_file_is_covered(fixture: Fixture) -> None:
    """The campaign's file kinds cover every folder of the export, so a new kind of file is noticed here."""
    covered = {Path(p).parts[0] for p in target_files(fixture).values() if p != "<passport>"}
    present = {p.name for p in fixture.export.iterdir()}
    assert present <= covered, present - covered


# --- named attacks on what an export publishes beside its log ----------------------------------------------------

def _copy(fx: Fixture, tmp_path: Path) -> Path:
    export = tmp_path / "export"
    shutil.copytree(fx.export, export, symlinks=True)
    (tmp_path / "work").mkdir()
    return export


def _site_build(export: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "COLUMNS": "200",
           "HELDOUT_STORE": str(out.parent / "store")}
    return subprocess.run([sys.executable, "-m", "heldout", "site", "build", str(out), "--from", str(export),
                           "--at", "2026-09-03T00:00:00Z"], env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)


def test_attack_seal_manifests_swapped_between_generations(fixture: Fixture, tmp_path: Path) -> None:
    """Each file hashes to a manifest the ledger logs, but under the other generation's name: whoever reads
    seals/gen1.seal.json would take gen2's manifest for gen1's. Every reader refuses, and the site publishes
    nothing."""
    export = _copy(fixture, tmp_path)
    gen1, gen2 = export / "seals" / "gen1.seal.json", export / "seals" / "gen2.seal.json"
    first, second = gen1.read_bytes(), gen2.read_bytes()
    gen1.write_bytes(second)
    gen2.write_bytes(first)
    for command in ("ledger verify", "audit"):
        result = run(command, fixture, export, fixture.passport, tmp_path / "work")
        check_clean_failure(command, result, must_fail=True)
    verify = run("ledger verify", fixture, export, fixture.passport, tmp_path / "work")
    assert "seals/gen1.seal.json is not the document the ledger logs under that name" in verify.stderr
    site = _site_build(export, tmp_path / "site")
    assert site.returncode == 1 and "seals/gen1.seal.json" in site.stderr, site.stderr
    assert not (tmp_path / "site").exists()


def test_attack_a_logged_document_published_under_a_name_no_entry_logs(fixture: Fixture, tmp_path: Path) -> None:
    export = _copy(fixture, tmp_path)
    (export / "seals" / "index.html").write_bytes((export / "seals" / "gen1.seal.json").read_bytes())
    manifest = json.loads((export / "export.json").read_bytes())
    manifest["seals"] = sorted([*manifest["seals"], "index.html"])
    from seals import canonical_bytes

    (export / "export.json").write_bytes(canonical_bytes(manifest) + b"\n")
    verify = run("ledger verify", fixture, export, fixture.passport, tmp_path / "work")
    assert verify.returncode == 1 and "seals/index.html is neither" in verify.stderr, verify.stderr
    audit = run("audit", fixture, export, fixture.passport, tmp_path / "work")
    report = json.loads((tmp_path / "work" / "audit_report.json").read_bytes())
    assert audit.returncode == 1 and any(f["file"] == "seals/index.html" for f in report["findings"])
    assert _site_build(export, tmp_path / "site").returncode == 1


def test_attack_a_reveal_published_for_a_generation_still_sealed_has_one_verdict(fixture: Fixture,
                                                                                tmp_path: Path) -> None:
    """gen1's reveal copied to seals/gen2.reveal.json (gen2 is sealed: no entry reveals it) and listed in the
    manifest. ledger verify, the audit, the site and the independent replay refused the export; passport verify
    and verify-reveal judged it as if nothing were wrong (FORMATS 15: the first rule that fails rejects an export,
    for every verifier). Every command refuses it now, naming the file."""
    from seals import canonical_bytes

    export = _copy(fixture, tmp_path)
    (export / "seals" / "gen2.reveal.json").write_bytes((export / "seals" / "gen1.reveal.json").read_bytes())
    manifest = json.loads((export / "export.json").read_bytes())
    manifest["seals"] = sorted([*manifest["seals"], "gen2.reveal.json"])
    (export / "export.json").write_bytes(canonical_bytes(manifest) + b"\n")
    for command in COMMANDS:
        result = run(command, fixture, export, fixture.passport, tmp_path / "work")
        check_clean_failure(command, result, must_fail=True)
        if command != "audit":  # (the audit names it in its report's findings)
            assert "seals/gen2.reveal.json is neither" in result.stderr, (command, result.stderr)


@pytest.mark.parametrize("shape", ["symlink out of the export", "2 GB sparse file", "directory"])
def test_attack_key_file_that_is_not_a_small_plain_file(fixture: Fixture, tmp_path: Path, shape: str) -> None:
    """The key files are read by the verifiers (each compared with the key its entry declares): confined and
    bounded like every other file of an export, under the memory limit."""
    export = _copy(fixture, tmp_path)
    key = next((export / "keys").glob("*.pub.json"))
    SHAPES[shape](key, tmp_path / "work")
    for command in ("ledger verify", "audit"):
        check_clean_failure(command, run(command, fixture, export, fixture.passport, tmp_path / "work"), must_fail=True)


def test_attack_a_number_too_large_for_a_double(fixture: Fixture, tmp_path: Path) -> None:
    """1e400 is valid JSON grammar but no double: read as infinity it would enter the audit's evidence, which
    then cannot be written as JSON. It is refused where it is read, like NaN."""
    export = _copy(fixture, tmp_path)
    text = (export / "export.json").read_text()
    manifest = json.loads(text)
    (export / "export.json").write_text(text.replace(f'"size":{manifest["size"]}', '"size":1e400'))
    for command in ("ledger verify", "audit"):
        result = run(command, fixture, export, fixture.passport, tmp_path / "work")
        check_clean_failure(command, result, must_fail=True)
        assert "too large for a double" in result.stderr, result.stderr


@pytest.mark.parametrize("kind", ["evaluation blob", "reveal blob"])
def test_attack_a_blob_altered_in_place_has_one_verdict(fixture: Fixture, tmp_path: Path, kind: str) -> None:
    """One byte of a published blob changed. ledger verify, the audit and the independent replay refused the
    export; passport verify --from and verify-reveal --from skipped the blob rule (FORMATS 15 rule 7) and said
    valid, since neither verdict rests on those bytes. One published log has one verdict: every command
    refuses it, naming the blob."""
    export = _copy(fixture, tmp_path)
    relative = target_files(fixture)[kind]
    data = bytearray((export / relative).read_bytes())
    data[len(data) // 2] ^= 0x01
    (export / relative).write_bytes(bytes(data))
    for command in COMMANDS:
        result = run(command, fixture, export, fixture.passport, tmp_path / "work")
        check_clean_failure(command, result, must_fail=True)
        assert result.returncode == 1, (command, result.stderr)
        if command != "audit":  # (the audit names it in its report's findings)
            assert relative.split("/")[-1] in result.stderr, (command, result.stderr)


@pytest.mark.parametrize("change", ["version true", "a checkpoint size true", "an extra member"])
def test_attack_an_export_manifest_that_says_what_it_should_in_another_type_or_more(fixture: Fixture,
                                                                                  tmp_path: Path, change: str) -> None:
    """export.json still canonical, but "version": true, a checkpoint size true (Python's True == 1 took them
    for 1), or a member FORMATS section 14 does not have. The tiles reader refused the first two, the replay the
    third; now every command refuses each, naming export.json."""
    from seals import canonical_bytes

    export = _copy(fixture, tmp_path)
    manifest = json.loads((export / "export.json").read_bytes())
    if change == "version true":
        manifest["version"] = True
    elif change == "a checkpoint size true":
        manifest["checkpoints"] = [True, *manifest["checkpoints"][1:]]
        assert manifest["checkpoints"][0] is True and json.loads((fixture.export / "export.json").read_bytes())[
            "checkpoints"][0] == 1
    else:
        manifest["zz_unknown"] = 1
    (export / "export.json").write_bytes(canonical_bytes(manifest) + b"\n")
    for command in COMMANDS:
        result = run(command, fixture, export, fixture.passport, tmp_path / "work")
        check_clean_failure(command, result, must_fail=True)
        assert result.returncode == 1, (command, result.stderr)
