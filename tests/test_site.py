"""``heldout site build``: fails closed (a tampered blob stops the build, exit 1, naming it; nothing written),
byte-identical builds, store build == export build, the manifest, the leaderboard document and its ranking
rule, the reference time, and bad input (exit 2, nothing written). The browser checks are in
test_site_browser.py."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from heldout.site import manifest_of
from tests.site_support import SITE_AT, SiteFixture, build_site_store, run, tree


@pytest.fixture(scope="module")
def site_store(tmp_path_factory: pytest.TempPathFactory) -> SiteFixture:
    return build_site_store(tmp_path_factory.mktemp("site-store"))


@pytest.fixture(scope="module")
def built(site_store: SiteFixture, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("built") / "site"
    result = run("site", "build", str(out), "--from", str(site_store.export), "--at", SITE_AT,
                 "--release-tag", "r1")
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == str(out / "index.html")
    return out


def build(out: Path, *args: str) -> tuple[int, str]:
    result = run("site", "build", str(out), *args)
    return result.exit_code, result.output


def test_two_builds_are_byte_identical(site_store: SiteFixture, built: Path, tmp_path: Path) -> None:
    code, output = build(tmp_path / "again", "--from", str(site_store.export), "--at", SITE_AT, "--release-tag", "r1")
    assert code == 0, output
    first, second = tree(built), tree(tmp_path / "again")
    assert sorted(first) == sorted(second)
    different = [path for path in first if first[path] != second[path]]
    assert different == []


def test_store_build_equals_export_build(site_store: SiteFixture, built: Path, tmp_path: Path) -> None:
    code, output = build(tmp_path / "from-store", "--store", str(site_store.store), "--at", SITE_AT,
                         "--release-tag", "r1")
    assert code == 0, output
    assert tree(tmp_path / "from-store") == tree(built)


def test_a_changed_byte_in_one_blob_stops_the_build_naming_it(site_store: SiteFixture, tmp_path: Path) -> None:
    export = tmp_path / "export"
    shutil.copytree(site_store.export, export)
    manifest = json.loads((export / "export.json").read_text())
    digest = manifest["blobs"][len(manifest["blobs"]) // 2]
    blob = export / "blobs" / "sha256" / digest[:2] / digest
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0x01
    blob.write_bytes(bytes(data))
    out = tmp_path / "site"
    code, output = build(out, "--from", str(export), "--at", SITE_AT)
    assert code == 1, output
    assert digest in output and str(blob) in output.replace("\n", "")
    assert not out.exists()
    assert not any(p.name.startswith(".site.tmp") for p in tmp_path.iterdir())


def test_an_altered_seal_manifest_stops_the_build_naming_it(site_store: SiteFixture, tmp_path: Path) -> None:
    export = tmp_path / "export"
    shutil.copytree(site_store.export, export)
    manifest = export / "seals" / "gen2.seal.json"
    manifest.write_bytes(manifest.read_bytes().replace(b"2027-04-01", b"2028-04-01"))
    code, output = build(tmp_path / "site", "--from", str(export), "--at", SITE_AT)
    assert code == 1 and str(manifest) in output.replace("\n", "")
    assert not (tmp_path / "site").exists()


def test_a_refused_rebuild_keeps_the_previous_site(site_store: SiteFixture, built: Path, tmp_path: Path) -> None:
    out = tmp_path / "site"
    shutil.copytree(built, out)
    before = tree(out)
    export = tmp_path / "export"
    shutil.copytree(site_store.export, export)
    (export / "entries.jsonl").write_bytes((export / "entries.jsonl").read_bytes().replace(b"model_1", b"model_9"))
    code, output = build(out, "--from", str(export), "--at", SITE_AT)
    assert code == 1, output
    assert tree(out) == before


def test_manifest_lists_every_file_with_its_sha256(built: Path) -> None:
    manifest = manifest_of(built)
    files = tree(built)
    assert set(manifest["files"]) == set(files) - {"manifest.json"}
    for path, digest in manifest["files"].items():
        assert hashlib.sha256(files[path]).hexdigest() == digest, path
    assert manifest["reference_time"] == SITE_AT and manifest["release_tag"] == "r1"


def test_leaderboard_document_ranks_and_separates(built: Path) -> None:
    doc = json.loads((built / "leaderboard.json").read_text())
    assert doc["schema_version"] == 1
    assert [k["key"] for k in doc["sort_keys"]] == ["composite_index", "ci95_low", "model_id"]
    assert doc["reference_time"] == SITE_AT and "composite index" in doc["rank_rule"]
    boards = {b["generation"]: b for b in doc["boards"]}
    assert sorted(boards) == ["gen2", "public"]
    gen2 = boards["gen2"]["rows"]
    assert [r["rank"] for r in gen2] == [1, 2]
    assert gen2[0]["composite_index"] >= gen2[1]["composite_index"]
    for row in gen2:
        assert row["state"] == "valid" and row["bundle_indices"] and len(row["passport_sha256"]) == 64
        assert (built / row["page"]).is_file()
    unranked = {(r["model_id"], r["generation"], r["state"], r["superseded_by"] is not None) for r in doc["unranked"]}
    assert ("model_0", "gen1", "lapsed", False) in unranked
    assert ("model_1", "gen2", "valid", True) in unranked  # re-issued: the earlier one is kept but not ranked
    assert ("model_2", "gen2", "lapsed", False) in unranked  # evaluated again after its passport
    assert all(r["rank"] is None for r in doc["unranked"])
    index = (built / "index.html").read_text()
    assert "Ranking rule" in index and "leaderboard.json" in index
    # the public generation's board is ranked too, and says it is not held-out evidence
    assert boards["gen2"]["held_out"] is True and boards["public"]["held_out"] is False
    assert index.count("Not held out:") == 1
    assert doc["later_findings"] == [] and 'id="later-findings"' not in index  # a clean log: no warning
    public_section = index[index.index('id="public--'):]
    assert public_section.index("Not held out:") < public_section.index("</section>")


def test_pages_make_no_external_request(built: Path) -> None:
    for path in built.rglob("*.html"):
        text = path.read_text()
        assert 'http-equiv="Content-Security-Policy"' in text and "default-src 'none'" in text
        for attr in ('src="http', "src='http", 'href="http', "href='http", "url(", "@import"):
            assert attr not in text, (path, attr)
    assert "url(" not in (built / "static" / "site.css").read_text()


def test_nothing_private_is_published(site_store: SiteFixture, built: Path) -> None:
    # A revealed generation's opening is its reveal, public on purpose (in the export): everything else under
    # private/ (keys, pools, salts of sealed generations) must not reach the site.
    exported = {hashlib.sha256(data).hexdigest() for data in tree(site_store.export).values()}
    private = {hashlib.sha256(p.read_bytes()).hexdigest() for p in (site_store.store / "private").rglob("*")
               if p.is_file()} - exported
    assert private
    assert not private & set(manifest_of(built)["files"].values())
    assert not any("private" in path for path in manifest_of(built)["files"])


def test_reference_time_from_env_or_the_ledger(site_store: SiteFixture, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELDOUT_NOW", SITE_AT)
    assert build(tmp_path / "env", "--from", str(site_store.export))[0] == 0
    assert manifest_of(tmp_path / "env")["reference_time"] == SITE_AT
    monkeypatch.delenv("HELDOUT_NOW")
    assert build(tmp_path / "data", "--from", str(site_store.export))[0] == 0
    last = (site_store.export / "entries.jsonl").read_text().splitlines()[-1]
    assert manifest_of(tmp_path / "data")["reference_time"] == json.loads(last)["created_utc"]
    assert "last entry" in (tmp_path / "data" / "index.html").read_text()


def test_bad_input_exits_2_and_writes_nothing(site_store: SiteFixture, tmp_path: Path) -> None:
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "notes.txt").write_text("mine")
    code, output = build(occupied, "--from", str(site_store.export), "--at", SITE_AT)
    assert code == 2 and "not a heldout site" in output
    assert [p.name for p in occupied.iterdir()] == ["notes.txt"]
    code, output = build(tmp_path / "both", "--from", str(site_store.export), "--store", str(site_store.store))
    assert code == 2 and not (tmp_path / "both").exists()
    code, output = build(tmp_path / "bad-at", "--from", str(site_store.export), "--at", "yesterday")
    assert code == 2 and not (tmp_path / "bad-at").exists()
    code, output = build(tmp_path / "none", "--from", str(tmp_path / "missing"))
    assert code == 2 and not (tmp_path / "none").exists()


def test_passport_page_carries_every_block_of_the_reference_layout(site_store: SiteFixture, built: Path) -> None:
    doc = json.loads((built / "leaderboard.json").read_text())
    row = next(b for b in doc["boards"] if b["generation"] == "gen2")["rows"][0]
    text = (built / row["page"]).read_text()
    for heading in ("Subject and configuration", "Spec", "Issued and expiry", "Tasks and the nine MedEval-1 "
                    "dimensions", "Pictures", "Known limitations", "Held-out track", "Audit chain", "Sources",
                    "Vendor declaration", "Observed in deployment", "Raw signed JSON"):
        assert f"<h2>{heading}</h2>" in text, heading
    assert row["verdict"] in text and f"python audit.py {site_store.ledger_id} --from EXPORT" in text
    assert text.count("<svg") >= 4  # dimensions, reliability, corruption and acquisition retention
    assert "No vendor declaration" in text and "continuous monitoring" in text


def test_reliability_bins_from_a_reveal_reproduce_the_signed_ece(site_store: SiteFixture) -> None:
    """Where the labels are public the site draws per-bin bars; the bins must give back the ECE the passport
    signed (same binning as MedEval-1), and a sealed generation gets none."""
    from heldout.site import collect, export_view
    from heldout.site.calibration import RevealedLabels
    from seals import parse_utc

    with export_view(store=None, from_dir=site_store.export) as export:
        site = collect(export, at=parse_utc(SITE_AT), release_tag=None)
        labels = RevealedLabels(site)
        checked = set()
        for record in site.passports:
            bins = labels.bins_for(record)
            if record.generation == "gen2":
                assert bins == {}
                continue
            assert bins, record.generation  # public and the revealed gen1
            for evaluation in record.verdict.passport.evaluations:
                task_bins = bins[str(evaluation["task"])]
                n = sum(b["count"] for b in task_bins)
                ece = sum(b["count"] / n * abs(b["accuracy"] - b["confidence"]) for b in task_bins if b["count"])
                assert n == evaluation["n_test"] and len(task_bins) == 15
                assert abs(ece - evaluation["dimensions"]["calibration"]["ece"]) < 1e-5
            checked.add(record.generation)
        assert checked == {"gen1", "public"}


def test_site_build_does_not_import_torch(site_store: SiteFixture, tmp_path: Path) -> None:
    """The site is built with the auditor's install (core only): torch and the rest are never loaded."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO_ROOT
    from tests.test_no_torch import PROBE

    home = tmp_path / "home"
    home.mkdir()
    argv = ["site", "build", str(tmp_path / "site"), "--from", str(site_store.export), "--at", SITE_AT]
    result = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True, text=True,
                            timeout=300, check=False, env={**os.environ, "HOME": str(home)}, cwd=REPO_ROOT)
    line = next((line for line in result.stdout.splitlines() if line.startswith("PROBE ")), None)
    assert line is not None, result.stdout + result.stderr
    assert json.loads(line[len("PROBE "):]) == {"code": 0, "heavy": []}
    assert (tmp_path / "site" / "index.html").is_file()


def test_markup_in_logged_names_is_escaped(tmp_path: Path) -> None:
    """A model id carrying markup (the operator, or whoever names models, controls it) is shown as text on every
    page and never becomes an element; the passport page's file name is sanitised."""
    from tests.audit_support import add_bundle, build_store, command_clock
    from tests.site_support import ISSUE_AT

    fixture = build_store(tmp_path, bundles_per_generation=0)
    hostile = '<img src=x onerror=alert(1)>"</script><script>alert(2)</script>'
    add_bundle(fixture.store, "gen2", hostile, seed=7)
    with command_clock(ISSUE_AT):
        assert run("audit", fixture.ledger_id, "--store", str(fixture.store)).exit_code == 0
        issued = run("passport", "issue", hostile, "--generation", "gen2", "--store", str(fixture.store))
        assert issued.exit_code == 0, issued.output
    out = tmp_path / "site"
    code, output = build(out, "--store", str(fixture.store), "--at", SITE_AT)
    assert code == 0, output
    pages = list(out.rglob("*.html"))
    assert len(list((out / "passports").glob("*.html"))) == 1
    for page in pages:
        text = page.read_text()
        assert "<img src=x" not in text and "<script>alert" not in text, page
        assert text.count("<script") == text.count("</script>")
    assert all(c.isalnum() or c in "-_." for c in next((out / "passports").glob("*.html")).name)
    assert "&lt;img src=x onerror=alert(1)&gt;" in (out / "index.html").read_text()


def test_a_logged_passport_that_does_not_verify_stops_the_build_naming_it(tmp_path: Path) -> None:
    """The operator logs a passport whose content was changed after signing (the entry and the blob hash are
    intact, the signature is not): the build refuses it by file instead of publishing an unverifiable row."""
    from heldout.generations import ledger_signer, open_ledger
    from heldout.store import Store
    from ledger import BlobStore
    from seals import canonical_bytes, parse_utc
    from tests.audit_support import build_store, command_clock
    from tests.site_support import ISSUE_AT

    fixture = build_store(tmp_path)
    with command_clock(ISSUE_AT):
        assert run("audit", fixture.ledger_id, "--store", str(fixture.store)).exit_code == 0
        assert run("passport", "issue", "model_0", "--generation", "gen2", "--store", str(fixture.store)).exit_code == 0
    doc = json.loads((fixture.store / "passports" / "model_0__gen2.passport.json").read_text())
    doc["computed"]["evaluations"][0]["composite"]["index"] = 99.9  # a better score, not re-signed
    st = Store.open(fixture.store)
    digest = BlobStore(st.blobs).put(canonical_bytes(doc))
    with open_ledger(st) as ledger:
        ledger.append({"type": "passport", "v": 1, "model_id": "model_0", "generation": "gen2",
                       "passport_sha256": digest, "created_utc": ISSUE_AT}, signer=ledger_signer(st, ledger),
                      now=parse_utc(ISSUE_AT))
    out = tmp_path / "site"
    code, output = build(out, "--store", str(fixture.store), "--at", SITE_AT)
    assert code == 1, output
    flat = output.replace("\n", "")
    assert digest in flat and "signature does not verify" in flat
    assert not out.exists()
