"""A demo-like store for the site tests, built without torch (``tests.audit_support``: synthetic bundles of the
``majority``-style made-up models): public, gen1 and gen2 sealed; passports issued after clean audits (one
re-issued, so the first is superseded); gen1 retired and revealed (its passport lapses); a public export."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from heldout.cli import app
from tests.audit_support import add_bundle, build_store, command_clock

ISSUE_AT = "2026-09-02T00:00:00Z"
SITE_AT = "2026-10-01T00:00:00Z"  # gen2 and public current, gen1 retired
LATER_RUN_AT = "2026-09-03T00:00:00Z"
runner = CliRunner()


@dataclass(frozen=True)
class SiteFixture:
    store: Path
    export: Path
    ledger_id: str
    key_b64: str


def run(*args: str) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"crashed: {result.exception!r}\n{result.output}")
    return result


def build_site_store(root: Path) -> SiteFixture:
    fixture = build_store(root)
    store = str(fixture.store)
    add_bundle(fixture.store, "gen2", "model_2", seed=51, skill=0.9, at=ISSUE_AT)
    with command_clock(ISSUE_AT):
        for model, generation in (("model_0", "gen1"), ("model_0", "gen2"), ("model_1", "gen2"),
                                  ("model_1", "gen2"), ("model_0", "public"), ("model_2", "gen2")):
            audited = run("audit", fixture.ledger_id, "--store", store)
            assert audited.exit_code == 0, audited.output
            issued = run("passport", "issue", model, "--generation", generation, "--store", store)
            assert issued.exit_code == 0, issued.output
    # model_2 is run again on gen2 after its passport, worse: the passport lapses (it no longer stands for the
    # model's latest evaluation)
    add_bundle(fixture.store, "gen2", "model_2", seed=52, skill=0.1, at=LATER_RUN_AT)
    with command_clock(LATER_RUN_AT):
        retired = run("retire", "gen1", "--reason", "superseded", "--reveal", "--store", store)
        assert retired.exit_code == 0, retired.output
        exported = run("ledger", "export", fixture.ledger_id, str(root / "export"), "--store", store)
        assert exported.exit_code == 0, exported.output
    return SiteFixture(store=fixture.store, export=root / "export", ledger_id=fixture.ledger_id,
                       key_b64=fixture.key_b64)


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# --- a hostile-but-valid ledger (the red-team campaign's operator) --------------------------------------------

LONG_WIDE_ID = "\U0001d400" * 200  # 200 letters (isalnum), 800 bytes of UTF-8: the longest page name once
LONG_ASCII_IDS = ("a" * 250, "a" * 249 + "b")  # the same first 80 characters: told apart by the hash
HOSTILE_GENERATION = "../../" + "\U0001d400" * 60 + "/<b>x</b>"  # sealed by a raw entry: no seal file exists
FAT_SPECS = 12  # spec entries of ~60 KB each for versions no passport uses
FAT_BYTES = 60_000


def fat_marker(i: int) -> str:
    return f"FATSPEC{i:04d}X"


@dataclass(frozen=True)
class HostileFixture:
    store: Path
    export: Path
    ledger_id: str
    passports: dict[str, str]  # model id -> generation
    spec_version: str
    manifest_sha256: str  # gen2's seal manifest
    evaluation_sha256: str  # the evaluation blob of LONG_WIDE_ID's bundle
    other_blob: str  # a blob the site publishes that is not that one


def hostile_sources(manifest: str, evaluation: str, other: str) -> list[dict[str, str]]:
    """What an operator may sign into ``computed.sources``: two honest ones, and paths that escape the site,
    name one file while pointing at another, or carry a wrong SHA-256."""
    return [
        {"path": f"blobs/sha256/{evaluation[:2]}/{evaluation}", "sha256": evaluation},  # linked
        {"path": "seals/gen2.seal.json", "sha256": manifest},  # linked
        {"path": "seals/../../../../etc/passwd", "sha256": manifest},
        {"path": "seals/gen2.seal.json", "sha256": "0" * 64},
        {"path": f"blobs/sha256/{other[:2]}/{other}", "sha256": evaluation},
        {"path": f"blobs/sha256/{evaluation[:2]}/{evaluation}/../../{other[:2]}/{other}", "sha256": evaluation},
        {"path": "blobs/../../../index.html", "sha256": evaluation},
        {"path": 'javascript:alert(1)"><b>', "sha256": evaluation},
    ]


def build_hostile_store(root: Path) -> HostileFixture:
    """An operator who logs hostile-but-valid strings and entries, all signed by the ledger key:

    * passports for a 200-letter non-ASCII model id (800 bytes) and two 250-character ASCII ids that share their
      first 80 characters, on gen2, and one on public;
    * the first passport signed with hostile ``computed.sources`` (:func:`hostile_sources`);
    * a raw seal entry for a generation named like a path (:data:`HOSTILE_GENERATION`);
    * :data:`FAT_SPECS` spec entries of ~60 KB for versions nobody uses, a small spec entry superseding the
      passports' spec version (the one that counts; dated before the passports were issued, so it counts from
      its own entry's time) and a fat second one for it (an anomaly: ignored);
    * a reveal of gen2 that was never retired (it counts as retired: gen2's passports lapse).
    """
    import hashlib

    import heldout.passports as passports_module
    from heldout.generations import ledger_signer, open_ledger
    from heldout.passports import issue_passport
    from heldout.store import Store
    from seals import parse_utc, sign_document
    from tests.audit_support import add_bundle, build_store

    fixture = build_store(root, bundles_per_generation=0)
    models = {LONG_WIDE_ID: "gen2", LONG_ASCII_IDS[0]: "gen2", LONG_ASCII_IDS[1]: "gen2", "model_pub": "public"}
    for k, (model, generation) in enumerate(models.items()):
        add_bundle(fixture.store, generation, model, seed=50 + k, data_root=fixture.data_root)
    st = Store.open(fixture.store)
    now = parse_utc(ISSUE_AT)
    with open_ledger(st) as ledger:
        entries = [e for _, e in ledger.entries()]
    bundles = {e["model_id"]: e for e in entries if e.get("type") == "bundle"}
    manifest = next(e["manifest_sha256"] for e in entries if e.get("type") == "seal" and e["generation"] == "gen2")
    evaluation = bundles[LONG_WIDE_ID]["evaluation_sha256"]
    other = bundles[LONG_ASCII_IDS[0]]["predictions_sha256"]

    def nbundles(ledger: object) -> int:
        return sum(1 for _, e in ledger.entries() if e.get("type") == "bundle")  # type: ignore[attr-defined]

    def clean_audit(store: object, ledger: object, **_: object) -> tuple[dict[str, object], bytes]:
        return ({"audit_command": "python audit.py x", "bundles": nbundles(ledger),
                 "ledger_entries": ledger.size, "ledger_head": ledger.root().hex(),  # type: ignore[attr-defined]
                 "ledger_intact": True, "rederived": nbundles(ledger)}, b"{}")

    def signing(sources: list[dict[str, str]] | None) -> object:
        def sign(document: dict[str, object], signer: object) -> dict[str, object]:
            if sources is not None:
                document["computed"]["sources"] = sources  # type: ignore[index]
            return sign_document(document, signer)  # type: ignore[arg-type]
        return sign

    with pytest.MonkeyPatch.context() as patch:
        # The operator's own tooling: passport files named by hash (an 800-byte name is not a file name).
        patch.setattr(passports_module, "passport_path", lambda store, m, g: store.passports / (
            hashlib.sha256(f"{m}\0{g}".encode()).hexdigest() + ".passport.json"))
        patch.setattr(passports_module, "load_clean_audit", clean_audit)
        for model, generation in models.items():
            hostile = hostile_sources(manifest, evaluation, other) if model == LONG_WIDE_ID else None
            patch.setattr(passports_module, "sign_document", signing(hostile))
            with open_ledger(st) as ledger:
                issued = issue_passport(st, ledger, ledger_signer(st, ledger), model, generation=generation, now=now)
        spec_version = str(issued.document["spec_version"])
    later = "2026-09-03T00:00:00Z"
    with open_ledger(st) as ledger:
        signer = ledger_signer(st, ledger)
        appended: list[dict[str, object]] = [
            {"type": "seal", "v": 1, "generation": HOSTILE_GENERATION, "manifest_sha256": "1" * 64,
             "set_hash": "2" * 64, "expiry_utc": "2027-01-01T00:00:00Z", "created_utc": later,
             "tasks": {"bloodmnist": 1}}]
        appended += [{"type": "spec", "v": 1, "spec_version": f"unused-{i}", "superseded_by": "x",
                      "effective_utc": "2030-01-01T00:00:00Z", "created_utc": later,
                      "pad": fat_marker(i) + "p" * FAT_BYTES} for i in range(FAT_SPECS)]
        appended += [
            {"type": "spec", "v": 1, "spec_version": spec_version, "superseded_by": "MedEval-1 v9",
             "effective_utc": "2026-09-01T00:00:00Z", "created_utc": later},  # retroactive: counts from `later`
            {"type": "spec", "v": 1, "spec_version": spec_version, "superseded_by": "MedEval-1 v8",
             "effective_utc": "2026-09-10T00:00:00Z", "created_utc": later,
             "pad": fat_marker(FAT_SPECS) + "p" * FAT_BYTES},
            {"type": "reveal", "v": 1, "generation": "gen2", "reveal_sha256": "3" * 64, "created_utc": later}]
        for entry in appended:
            ledger.append(entry, signer=signer, now=parse_utc(later))
    exported = run("ledger", "export", fixture.ledger_id, str(root / "export"), "--store", str(fixture.store))
    assert exported.exit_code == 0, exported.output
    return HostileFixture(store=fixture.store, export=root / "export", ledger_id=fixture.ledger_id,
                          passports=models, spec_version=spec_version, manifest_sha256=manifest,
                          evaluation_sha256=evaluation, other_blob=other)


def built_site(export: Path, out: Path, *extra: str) -> Path:
    """``heldout site build OUT --from EXPORT --at SITE_AT [extra]``, which must succeed; returns OUT."""
    result = run("site", "build", str(out), "--from", str(export), "--at", SITE_AT, *extra)
    assert result.exit_code == 0, result.output
    return out
