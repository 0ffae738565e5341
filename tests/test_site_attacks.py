"""The site against an operator who logs hostile-but-valid data (the red-team campaign, tests.site_support's
``build_hostile_store``): every file name the site makes from logged strings is bounded, ASCII and unique (A1);
a passport page carries only the entries its passport needs and each entry is on its entries page once, and
the build writes pages as it renders them (A3); a passport's source paths link only to files the site publishes
under exactly that name and SHA-256 (A4). The browser half (the trimmed pages still verify as the CLI does) is
in test_site_browser.py."""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from heldout.site import manifest_of
from heldout.site.paths import (
    COPIED_NAME_BYTES,
    check_output_path,
    copied_seal_path,
    passport_page,
    readable,
    source_href,
)
from tests.site_support import (
    FAT_BYTES,
    FAT_SPECS,
    HOSTILE_GENERATION,
    LONG_ASCII_IDS,
    LONG_WIDE_ID,
    SITE_AT,
    HostileFixture,
    build_hostile_store,
    built_site,
    fat_marker,
    run,
    tree,
)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> HostileFixture:
    return build_hostile_store(tmp_path_factory.mktemp("hostile-store"))


@pytest.fixture(scope="module")
def hostile_site(hostile: HostileFixture, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_site(hostile.export, tmp_path_factory.mktemp("hostile-site") / "site")


def _pages(site: Path) -> dict[str, str]:
    return {str(p.relative_to(site)): p.read_text(encoding="utf-8") for p in sorted(site.rglob("*.html"))}


def _rows(site: Path) -> list[dict[str, object]]:
    doc = json.loads((site / "leaderboard.json").read_text())
    return [row for board in doc["boards"] for row in board["rows"]] + doc["unranked"]


# --- A1: file names from logged strings ----------------------------------------------------------------------

def test_attack_long_and_wide_model_ids_build_with_bounded_ascii_page_names(hostile: HostileFixture,
                                                                            hostile_site: Path) -> None:
    """A 200-letter model id of 4-byte letters (an 800-byte name before) and two 250-character ids that differ
    only after the readable part: the build succeeds, every page name is short ASCII, and they stay apart."""
    rows = {str(row["model_id"]): row for row in _rows(hostile_site)}
    assert set(rows) == set(hostile.passports)
    pages = {model: str(row["page"]) for model, row in rows.items()}
    assert len(set(pages.values())) == len(pages)
    for page in pages.values():
        name = page.removeprefix("passports/")
        assert name.isascii() and len(name.encode()) <= 120, name
        assert re.fullmatch(r"[0-9]+-[A-Za-z0-9_.-]+\.html", name), name
        assert (hostile_site / page).is_file()
    for model in (LONG_WIDE_ID, *LONG_ASCII_IDS):  # cut, and the hash of the full text tells them apart
        digest = hashlib.sha256(f"{model}__gen2".encode()).hexdigest()[:12]
        assert pages[model].endswith(f"-{digest}.html"), pages[model]
    assert pages["model_pub"].endswith("-model_pub__public.html")
    for path in manifest_of(hostile_site)["files"]:  # the whole tree, not only the passport pages
        assert check_output_path(path), path
        assert all(len(part.encode()) <= 200 for part in path.split("/")), path


def test_attack_page_names_are_bounded_whatever_is_logged() -> None:
    """The naming rule itself, on the longest strings the entry check allows (256 characters each)."""
    worst = "\U0001d400" * 256
    for model, generation in ((worst, worst), ("a" * 256, "b" * 256), ("../../x", "gen1"), ("\x00\u202e", ".."),
                              ("model_0", "gen2")):
        page = passport_page(2**63 - 1, model, generation)
        assert check_output_path(page) and page.isascii() and len(page) <= 130, page
    assert passport_page(7, "model_0", "gen2") == "passports/7-model_0__gen2.html"  # short names unchanged
    assert readable("a" * 81) != readable("a" * 80 + "b") and len(readable("x" * 10_000)) == 80 + 13
    assert copied_seal_path("gen2.seal.json") == "seals/gen2.seal.json"
    for name in ("x" * (COPIED_NAME_BYTES + 1), "\U0001d400.seal.json", ".hidden", "a/b", "..", "a b"):
        assert copied_seal_path(name) is None, name
    for path in ("../x", "a/../../x", "/abs", "a//b", ".x", "a/\u00e9", "x" * 201, ""):
        assert not check_output_path(path), path


def test_attack_an_unsafe_output_path_refuses_the_build() -> None:
    """The writer's last check: a path outside the site's forms, or written twice, stops the build."""
    from heldout.site.build import MemorySink
    from heldout.site.collect import SiteBuildRefused

    sink = MemorySink()
    sink.add("index.html", b"x")
    for path in ("../escape.html", "passports/" + "a" * 300 + ".html", "index.html", "manifest.json"):
        with pytest.raises(SiteBuildRefused):
            sink.add(path, b"y")
    assert sink.files == {"index.html": b"x"}


def test_attack_a_generation_named_like_a_path_is_never_a_link(hostile_site: Path) -> None:
    """A raw seal entry for ``../../<letters>/<b>x</b>``: no seal file exists for it, so the generations page
    shows its name as text, and every link on every page resolves to a file inside the site."""
    text = (hostile_site / "ledger" / "generations.html").read_text()
    assert "&lt;b&gt;x&lt;/b&gt;" in text and "<b>x</b>" not in text
    _assert_links_stay_inside(hostile_site)


def _assert_links_stay_inside(site: Path) -> None:
    files = set(tree(site))
    for page, text in _pages(site).items():
        for href in re.findall(r'href="([^"]*)"', text):
            target = unquote(href.replace("&amp;", "&")).split("#", 1)[0]
            if not target:
                continue  # an anchor on the same page
            assert ":" not in target, (page, href)
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(page), target))
            assert resolved in files, (page, href)


# --- A3: amplification -----------------------------------------------------------------------------------------

def test_attack_fat_entries_do_not_amplify_passport_pages(hostile: HostileFixture, hostile_site: Path) -> None:
    """Twelve ~60 KB spec entries for unused versions and a fat second supersession of the passports' own
    version (ignored: the first counts): no passport page carries any of them; each carries its own entry, its
    generation's seal and early reveal (or its spec's supersession), and at most two keys."""
    entries = [json.loads(line) for line in (hostile.export / "entries.jsonl").read_text().splitlines()]
    counting_spec = next(i for i, e in enumerate(entries) if e.get("type") == "spec"
                         and e["spec_version"] == hostile.spec_version)
    reveal = next(i for i, e in enumerate(entries) if e.get("type") == "reveal" and e["generation"] == "gen2")
    seals = {e["generation"]: i for i, e in enumerate(entries) if e.get("type") == "seal"}
    for row in _rows(hostile_site):
        text = (hostile_site / str(row["page"])).read_text()
        assert not any(fat_marker(i) in text for i in range(FAT_SPECS + 1)), row["page"]
        assert len(text.encode()) < 120_000, (row["page"], len(text.encode()))
        context = json.loads(re.search(r'id="heldout-context">(.*?)</script>', text).group(1))  # type: ignore[union-attr]
        proven = sorted(int(i) for i in context["ledger"]["inclusion"])
        generation = str(row["generation"])
        expected = {int(str(row["passport_entry"])), seals[generation], counting_spec}
        if generation == "gen2":
            expected.add(reveal)
        assert proven == sorted(expected), (row["page"], proven)
        keys = json.loads(re.search(r'id="heldout-keys">(.*?)</script>', text).group(1))  # type: ignore[union-attr]
        assert 1 <= len(keys) <= 2


def test_attack_each_entry_is_on_its_entries_page_once(hostile_site: Path) -> None:
    """The entries page shows each entry's bytes once (its data island carries only the proofs)."""
    text = (hostile_site / "ledger" / "entries-0001.html").read_text()
    for i in range(FAT_SPECS + 1):
        assert text.count(fat_marker(i)) == 1, i
    assert len(text.encode()) < (FAT_SPECS + 1) * FAT_BYTES * 1.2
    data = json.loads(re.search(r'id="heldout-entries">(.*?)</script>', text).group(1))  # type: ignore[union-attr]
    assert all(set(item) == {"proof"} for item in data["page"].values())
    assert 'id="heldout-keys"' not in text


def test_attack_pages_are_written_as_they_are_rendered(hostile: HostileFixture, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The build does not hold the site in memory: when a passport page is rendered, the pages before it are
    already on disk in the temporary folder, and ``out`` appears only once the whole tree is there."""
    import heldout.site.build as build_module

    out = tmp_path / "site"
    seen: list[tuple[bool, bool]] = []
    render_passport = build_module.passport_page

    def watching(site, record, carried, bins):  # type: ignore[no-untyped-def]
        staged = list(tmp_path.glob(".site.tmp*"))
        seen.append((len(staged) == 1 and (staged[0] / "ledger" / "entries-0001.html").is_file(), out.exists()))
        return render_passport(site, record, carried, bins)

    monkeypatch.setattr(build_module, "passport_page", watching)
    result = run("site", "build", str(out), "--from", str(hostile.export), "--at", SITE_AT)
    assert result.exit_code == 0, result.output
    assert len(seen) == len(hostile.passports) and all(on_disk and not published for on_disk, published in seen), seen
    manifest = manifest_of(out)
    assert set(manifest["files"]) == set(tree(out)) - {"manifest.json"}
    assert not list(tmp_path.glob(".site.tmp*"))


# --- A4: source links ------------------------------------------------------------------------------------------

def test_attack_source_paths_link_only_to_what_the_site_publishes(hostile: HostileFixture,
                                                                  hostile_site: Path) -> None:
    row = next(r for r in _rows(hostile_site) if r["model_id"] == LONG_WIDE_ID)
    text = (hostile_site / str(row["page"])).read_text()
    section = text[text.index("<h2>Sources</h2>"):text.index("<h2>Vendor declaration</h2>")]
    links = re.findall(r'<a href="([^"]*)">([^<]*)</a>', section)
    evaluation = hostile.evaluation_sha256
    assert links == [(f"../blobs/sha256/{evaluation[:2]}/{evaluation}", f"blobs/sha256/{evaluation[:2]}/{evaluation}"),
                     ("../seals/gen2.seal.json", "seals/gen2.seal.json")]
    for shown in ("seals/../../../../etc/passwd", f"blobs/sha256/{hostile.other_blob[:2]}/{hostile.other_blob}",
                  "blobs/../../../index.html", "javascript:alert(1)&quot;&gt;&lt;b&gt;"):
        assert shown in section, shown
    assert "<b>" not in section
    _assert_links_stay_inside(hostile_site)


def test_attack_source_href_accepts_only_the_exact_published_forms() -> None:
    digest, other = "ab" + "0" * 62, "cd" + "1" * 62
    seals = {"seals/gen2.seal.json": digest, "seals/gen2.reveal.json": other}
    blobs = {digest, other}

    def href(path: str, sha: str = digest) -> str | None:
        return source_href(path, sha, seals=seals, blobs=blobs)

    assert href("seals/gen2.seal.json") == "seals/gen2.seal.json"
    assert href(f"blobs/sha256/ab/{digest}") == f"blobs/sha256/ab/{digest}"
    assert href(f"blobs/sha256/cd/{other}", other) == f"blobs/sha256/cd/{other}"
    for path, sha in (("seals/gen2.seal.json", other), ("seals/gen2.reveal.json", other),
                      ("seals/../gen2.seal.json", digest), ("seals/gen9.seal.json", digest),
                      (f"blobs/sha256/cd/{other}", digest), (f"blobs/sha256/ab/{digest}/", digest),
                      (f"blobs/sha256/AB/{digest}", digest), (f"blobs/sha256/ee/{'e' * 64}", "e" * 64),
                      (f"blobs/sha256/ab/{digest.upper()}", digest.upper()), ("/etc/passwd", digest),
                      (f"./blobs/sha256/ab/{digest}", digest), (HOSTILE_GENERATION, digest)):
        assert href(path, sha) is None, (path, sha)


def test_attack_look_alike_names_are_shown_apart() -> None:
    """Ids that differ only by a zero-width, bidi or control character would render alike ("model_0" three
    times on a leaderboard): every text a page shows writes those characters as escapes, while the exact texts
    the page's check hashes stay byte for byte (HTML-escaped only)."""
    from heldout.site.html import esc, raw_text

    names = ["model_0", "model_0\u200b", "\u202e0_ledom", "model_\x1b[31m"]
    shown = [esc(name) for name in names]
    assert len(set(shown)) == len(names)
    assert shown[1] == "model_0\\u200b" and shown[2] == "\\u202e0_ledom" and shown[3] == "model_\\u001b[31m"
    for text in shown:
        assert all(ch.isprintable() for ch in text)
    assert raw_text('{"model_id":"model_0\u200b<"}') == '{&quot;model_id&quot;:&quot;model_0\u200b&lt;&quot;}'
