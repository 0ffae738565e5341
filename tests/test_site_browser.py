"""The site in a real headless browser (Debian's chromium driven by Playwright's Python API; nothing is
downloaded): Verify on every passport page gives the CLI's verdict and exit code; an agreement corpus of mutated
passports (and the reference passport under its own key) gets the same exit code in the browser as from
``heldout passport verify``; the JavaScript's canonical numbers and rounding equal Python's; pages render and
carry their facts with JavaScript off; no request leaves the page; screenshots are written.

Without chromium the tests skip, except in CI (``CI=true``), where they fail."""

from __future__ import annotations

import base64
import copy
import json
import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rfc8785
import typer
from typer.testing import CliRunner

from heldout.cli import passport_cmd
from seals import jcs_bytes
from tests.conftest import REFERENCE_KEY_B64, seeded_signer
from tests.site_support import SITE_AT, SiteFixture, build_site_store, run

pytestmark = pytest.mark.browser
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LATER = "2027-04-15T00:00:00Z"  # gen2 expired, public still current
PASSPORT_ONLY = typer.Typer()
PASSPORT_ONLY.add_typer(passport_cmd.app, name="passport")
cli_runner = CliRunner()


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"the browser tests need Debian's chromium and playwright in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).is_file():
        _unavailable(f"{CHROMIUM} is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (the dev extra)")
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[SiteFixture, Path]:
    fixture = build_site_store(tmp_path_factory.mktemp("browser-store"))
    out = tmp_path_factory.mktemp("browser-site") / "site"
    result = run("site", "build", str(out), "--from", str(fixture.export), "--at", SITE_AT)
    assert result.exit_code == 0, result.output
    return fixture, out


def passport_pages(out: Path) -> list[Path]:
    pages = sorted((out / "passports").glob("*.html"))
    assert len(pages) == 6
    return pages


def blob_of_page(page: Path) -> Path:
    text = page.read_text()
    marker = 'id="heldout-passport">'
    raw = json.loads(text[text.index(marker) + len(marker):text.index("</script>", text.index(marker))])
    digest = __import__("hashlib").sha256(raw.encode("utf-8")).hexdigest()
    return page.parent.parent / "blobs" / "sha256" / digest[:2] / digest


def cli_verdict(path: Path, args: list[str], store: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    monkeypatch.setenv("HELDOUT_STORE", str(store))  # the keyring: the operator's trusted keys
    result = cli_runner.invoke(PASSPORT_ONLY, ["passport", "verify", str(path), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout.strip()


def open_page(browser: Any, path: Path, *, javascript: bool = True) -> tuple[Any, Any, list[str], list[str]]:
    context = browser.new_context(java_script_enabled=javascript)
    page = context.new_page()
    requests: list[str] = []
    problems: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(path.as_uri())
    return context, page, requests, problems


def test_verify_button_on_every_passport_page_matches_the_cli(browser: Any, site: tuple[SiteFixture, Path],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    fixture, out = site
    codes = set()
    for path in passport_pages(out):
        context, page, requests, problems = open_page(browser, path)
        page.click("#verify-button")
        page.wait_for_function("document.getElementById('verify-result').textContent.startsWith('exit ')")
        shown = page.text_content("#verify-result")
        code, line = cli_verdict(blob_of_page(path), ["--from", str(fixture.export), "--at", SITE_AT],
                                 fixture.store, monkeypatch)
        assert shown == f"exit {code}: {line}", path.name
        if "model_2__gen2" in path.name:  # run again after its passport: the page's own check says so too
            assert code == 4 and "evaluated on gen2 again after this passport's evidence" in shown, shown
        assert page.text_content("#build-exit") == str(code) and page.text_content("#build-verdict") == line
        assert all(url.startswith("file://") for url in requests), requests
        assert problems == [], problems
        codes.add(code)
        context.close()
    assert codes == {0, 4}


def test_verify_this_entry_in_the_ledger_browser(browser: Any, site: tuple[SiteFixture, Path]) -> None:
    _, out = site
    context, page, _, problems = open_page(browser, out / "ledger" / "entries-0001.html")
    count = page.locator("button.verify-entry").count()
    assert count > 10
    for index in (0, count // 2, count - 1):
        page.click(f"button[data-index='{index}']")
        page.wait_for_function(f"document.getElementById('v{index}').textContent.length > 0")
        assert page.text_content(f"#v{index}").startswith(f"exit 0: entry {index} is included")
    # a changed entry on the page is refused: the bytes checked are the text shown (each entry is on the page once)
    page.evaluate("""() => { const d = JSON.parse(document.getElementById('heldout-entries').textContent);
        const shown = document.getElementById('raw3');
        shown.textContent = shown.textContent.replace('"v":1', '"v":2');
        return window.heldoutVerify.entry(3, d).then(r => { window.tampered = r; }); }""")
    assert page.evaluate("window.tampered.exit") == 1
    assert "proof" in page.evaluate("window.tampered.text")
    assert problems == []
    context.close()


# --- the agreement corpus ----------------------------------------------------------------------------------

def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for key in sorted(value):
            yield from _leaves(value[key], (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, (*path, i))
    else:
        yield path


def _objects(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        yield path
        for key in sorted(value):
            yield from _objects(value[key], (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _objects(item, (*path, i))


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def _changed(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return round(value + 0.001, 6)
    if isinstance(value, str):
        return value + "x" if value else "x"
    return 0


def _text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, ensure_ascii=False)


def _resigned(doc: dict[str, Any]) -> str:
    """Signed as written (no rounding: the operator's key may sign anything)."""
    body = {k: v for k, v in doc.items() if k != "signature"}
    signature = seeded_signer(1, name="test-operator", key_id="test-key-1").sign(jcs_bytes(body))
    return _text({**body, "signature": base64.b64encode(signature).decode()})


def corpus(base_text: str, gen1_set_hash: str, other_entry: int) -> list[tuple[str, str]]:
    """(name, text) of at least 60 mutated copies of ``base_text`` (a valid gen2 passport)."""
    base = json.loads(base_text)
    rng = random.Random(20261201)
    items: list[tuple[str, str]] = []
    leaves = [p for p in _leaves(base) if p != ("signature",)]
    for path in rng.sample(leaves, 22):
        doc = copy.deepcopy(base)
        parent = _at(doc, path[:-1])
        parent[path[-1]] = _changed(parent[path[-1]])
        items.append((f"leaf {'.'.join(map(str, path))}", _text(doc)))
    objects = [p for p in _objects(base) if p]
    for path in rng.sample(objects, 9):
        doc = copy.deepcopy(base)
        _at(doc, path)["added_member"] = 1
        items.append((f"added at {'.'.join(map(str, path))}", _text(doc)))
    for path in rng.sample([p for p in objects if _at(base, p)], 9):
        doc = copy.deepcopy(base)
        target = _at(doc, path)
        del target[sorted(target)[rng.randrange(len(target))]]
        items.append((f"removed at {'.'.join(map(str, path))}", _text(doc)))
    signature = base["signature"]
    raw = base64.b64decode(signature)
    respelled = {
        "no padding": signature.rstrip("="),
        "url-safe alphabet": base64.urlsafe_b64encode(raw).decode() if "+" in signature or "/" in signature
        else signature.replace(signature[0], "-", 1),
        "unused bits set": signature[:-3] + chr(ord(signature[-3]) + 1) + "==",
        "trailing newline": signature + "\n",
        "another passport's signature": base64.b64encode(bytes(reversed(raw))).decode(),
    }
    for name, value in respelled.items():
        items.append((f"signature {name}", _text({**base, "signature": value})))
    heldout = base["computed"]["heldout"]

    def flip(text: str) -> str:
        data = bytearray(base64.b64decode(text))
        data[0] ^= 0x01
        return base64.b64encode(bytes(data)).decode()

    proof = heldout["bundles"][0]["inclusion_proof"]
    for k in range(len(proof)):
        doc = copy.deepcopy(base)
        doc["computed"]["heldout"]["bundles"][0]["inclusion_proof"][k] = flip(proof[k])
        items.append((f"inclusion proof hash {k} flipped", _text(doc)))
        items.append((f"inclusion proof hash {k} flipped, re-signed", _resigned(doc)))
    note = heldout["checkpoint"]["note"]
    origin, size, root, *rest = note.split("\n")
    notes = {
        "size": "\n".join([origin, str(int(size) + 1), root, *rest]),
        "root": "\n".join([origin, size, flip(root), *rest]),
        "origin": "\n".join([origin + "x", size, root, *rest]),
        "signature": note[:-6] + ("A" if note[-6] != "A" else "B") + note[-5:],
        "no blank line": note.replace("\n\n", "\n"),
    }
    for name, value in notes.items():
        doc = copy.deepcopy(base)
        doc["computed"]["heldout"]["checkpoint"]["note"] = value
        items.append((f"checkpoint note {name} altered", _text(doc)))
        items.append((f"checkpoint note {name} altered, re-signed", _resigned(doc)))

    def resigned(name: str, change: Any) -> None:
        doc = copy.deepcopy(base)
        change(doc)
        items.append((f"re-signed: {name}", _resigned(doc)))

    def set_path(path: tuple[Any, ...], value: Any) -> Any:
        return lambda doc: _at(doc, path[:-1]).__setitem__(path[-1], value)

    bundle = ("computed", "heldout", "bundles", 0)
    evaluation = ("computed", "evaluations", 0)
    index = heldout["bundles"][0]["index"]
    resigned("nothing changed", lambda doc: None)
    resigned("bundle index of another entry", set_path((*bundle, "index"), other_entry))
    resigned("bundle index true", set_path((*bundle, "index"), True))
    resigned("bundle index a string", set_path((*bundle, "index"), str(index)))
    resigned("evaluation score changed", set_path((*evaluation, "composite", "index"), 1.5))
    score = base["computed"]["evaluations"][0]["dimensions"]["acquisition"]["mean_retention"]
    resigned("evaluation float given 7 decimals that round back", set_path(
        (*evaluation, "dimensions", "acquisition", "mean_retention"), score + 4e-7))
    resigned("evaluation float a half-even tie", set_path((*evaluation, "dimensions", "acquisition",
                                                           "mean_retention"), 0.0078125))
    resigned("expiry in the past", set_path(("expiry_utc",), "2026-09-15T00:00:00Z"))
    resigned("expiry in another ISO form", set_path(("expiry_utc",), "2027-04-01 00:00:00+00:00"))
    resigned("expiry a date alone", set_path(("expiry_utc",), "2026-09-20"))
    resigned("issued garbage", set_path(("issued_utc",), "the second of September"))
    resigned("held-out track null", set_path(("computed", "heldout"), None))
    resigned("generation gen1", set_path(("computed", "heldout", "generation"), "gen1"))
    resigned("generation gen1 with its set hash", lambda doc: doc["computed"]["heldout"].update(
        generation="gen1", set_hash=gen1_set_hash))
    resigned("ledger id changed", set_path(("computed", "heldout", "ledger_id"), "0" * 20))
    resigned("model id removed", lambda doc: doc["subject"].pop("model_id"))
    resigned("issuer key id changed", set_path(("issuer", "key_id"), "test-key-9"))
    resigned("subject is another model", set_path(("subject", "model_id"), "model_9"))
    resigned("cited task renamed", set_path((*bundle, "task"), "breastmnist"))
    resigned("leaf hash flipped", set_path((*bundle, "leaf_hash_b64"), flip(heldout["bundles"][0]["leaf_hash_b64"])))
    resigned("predictions hash changed", set_path((*bundle, "predictions_sha256"), "0" * 64))
    resigned("an extra evaluation appended", lambda doc: doc["computed"]["evaluations"].append(
        doc["computed"]["evaluations"][0]))
    float_index = _resigned(base).replace(f'"index": {index},', f'"index": {index}.0,')
    assert float_index != _resigned(base)
    items.append(("re-signed: bundle index written 9.0", float_index))
    duplicate = base_text.replace('{"canonicalisation"', '{"spec_version":"x","canonicalisation"', 1)
    assert duplicate != base_text
    items.append(("duplicate member", duplicate))
    items.append(("not JSON", base_text[:-10]))
    return items


def test_agreement_corpus_browser_equals_cli(browser: Any, site: tuple[SiteFixture, Path], tmp_path: Path,
                                             reference_passport_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fixture, out = site
    doc = json.loads((out / "leaderboard.json").read_text())
    gen2_row = next(b for b in doc["boards"] if b["generation"] == "gen2")["rows"][0]
    page_path = out / gen2_row["page"]
    base_text = blob_of_page(page_path).read_text()
    entries = [json.loads(line) for line in (fixture.export / "entries.jsonl").read_text().splitlines()]
    gen1 = next(e for e in entries if e["type"] == "seal" and e["generation"] == "gen1")
    cited = json.loads(base_text)["computed"]["heldout"]["bundles"][0]["index"]
    other = next(i for i, e in enumerate(entries) if e["type"] == "bundle" and i != cited)
    cases: list[dict[str, Any]] = []
    for name, text in corpus(base_text, gen1["set_hash"], other):
        cases.append({"name": name, "text": text, "at": SITE_AT, "ledger": True, "key": None, "page": page_path})
    for page in passport_pages(out):  # each on its own page: the page carries the proofs for its passport
        for at in (SITE_AT, LATER):
            cases.append({"name": f"{page.name} at {at}", "text": blob_of_page(page).read_text(), "at": at,
                          "ledger": True, "key": None, "page": page})
    reference = reference_passport_path.read_text()
    for at in (SITE_AT, "2026-08-04T00:00:00Z"):
        cases.append({"name": f"reference at {at}", "text": reference, "at": at, "ledger": False,
                      "key": REFERENCE_KEY_B64, "page": page_path})
    cases.append({"name": "reference under the site key", "text": reference, "at": SITE_AT, "ledger": False,
                  "key": fixture.key_b64, "page": page_path})
    cases.append({"name": "a --key that is not base64", "text": reference, "at": SITE_AT, "ledger": False,
                  "key": "not-base64!", "page": page_path})  # a usage error (exit 2) in both
    assert len(cases) >= 60

    expected = []
    for k, case in enumerate(cases):
        path = tmp_path / f"case{k}.json"
        path.write_text(case["text"])
        args = ["--at", case["at"]]
        args += ["--from", str(fixture.export)] if case["ledger"] else []
        args += ["--key", case["key"]] if case["key"] else []
        expected.append(cli_verdict(path, args, fixture.store, monkeypatch))

    results: dict[int, dict[str, Any]] = {}
    for page_file in sorted({c["page"] for c in cases}):
        batch = [(k, c) for k, c in enumerate(cases) if c["page"] == page_file]
        context, page, requests, problems = open_page(browser, page_file)
        got = page.evaluate("""async (cases) => {
            const ledger = JSON.parse(document.getElementById('heldout-context').textContent).ledger;
            const out = [];
            for (const c of cases) {
                out.push(await window.heldoutVerify.passport(c.text, {key: c.key, ledger: c.ledger ? ledger : null,
                                                                      at: c.at}));
            }
            return out;
        }""", [{k: v for k, v in c.items() if k != "page"} for _, c in batch])
        results.update({k: result for (k, _), result in zip(batch, got, strict=True)})
        assert all(url.startswith("file://") for url in requests) and problems == []
        context.close()
    disagreements = []
    for k, (case, (code, line)) in enumerate(zip(cases, expected, strict=True)):
        got = results[k]
        if got["exit"] != code or (code in (0, 3, 4) and got["text"] != line):
            disagreements.append((case["name"], code, line, got))
    assert disagreements == []
    by_name = {case["name"]: code for case, (code, _) in zip(cases, expected, strict=True)}
    assert by_name["re-signed: nothing changed"] == 0
    # Signed as written, its signature is not the logged passport's: another document, never logged (a passport
    # counts only if the log carries its SHA-256), whatever its numbers round to.
    assert by_name["re-signed: evaluation float given 7 decimals that round back"] == 1
    assert by_name["re-signed: bundle index true"] == 1  # never logged, checked before the citations
    assert by_name["re-signed: expiry in the past"] == 1  # never logged: a changed passport is another one
    assert by_name["re-signed: generation gen1 with its set hash"] == 1  # its cited bundles are on gen2
    assert {code for name, code in by_name.items() if "__gen1.html" in name} == {4}  # gen1 retired: lapsed
    assert by_name["reference at 2026-08-04T00:00:00Z"] == 0
    assert by_name["re-signed: an extra evaluation appended"] == 1  # signed content no bundle logged
    for name in ("subject is another model", "cited task renamed", "leaf hash flipped", "predictions hash changed"):
        assert by_name[f"re-signed: {name}"] == 1, name  # the cited entry must be this model's bundle
    exits = {code for code, _ in expected}
    assert {0, 1, 2, 3, 4} <= exits  # the corpus reaches every verdict the CLI can give here


def test_javascript_numbers_and_rounding_equal_python(browser: Any, site: tuple[SiteFixture, Path]) -> None:
    _, out = site
    rng = random.Random(8785)
    values = [0.0078125, 0.0234375, -0.0078125, 1 / 128 * 3, 2.5e-7, 1e-7, 123456.0000005, 0.1 + 0.2, 1e21, 1e-6,
              9007199254740993.0, 5e-324, 1.7976931348623157e308, 100.0, -0.0]
    values += [rng.uniform(-1000, 1000) for _ in range(300)] + [rng.random() / 10 ** rng.randrange(0, 9)
                                                                for _ in range(300)]
    values += [k / 128 for k in range(1, 256, 2)]
    context, page, _, _ = open_page(browser, passport_pages(out)[0])  # a page that loads verify.js
    got = page.evaluate("vs => vs.map(v => [window.heldoutVerify.jcs(v), window.heldoutVerify.jcs("
                        "window.heldoutVerify.round6(v))])", values)
    for value, (jcs_text, rounded_text) in zip(values, got, strict=True):
        assert jcs_text == rfc8785.dumps(value).decode(), value
        python_rounded = round(value, 6)
        assert rounded_text == rfc8785.dumps(python_rounded).decode(), value
    context.close()


def test_pages_render_without_javascript(browser: Any, site: tuple[SiteFixture, Path], tmp_path: Path) -> None:
    fixture, out = site
    doc = json.loads((out / "leaderboard.json").read_text())
    row = next(b for b in doc["boards"] if b["generation"] == "gen2")["rows"][0]
    passport = json.loads(blob_of_page(out / row["page"]).read_text())
    context, page, requests, _ = open_page(browser, out / row["page"], javascript=False)
    body = page.inner_text("body")
    for fact in (row["verdict"], passport["computed"]["heldout"]["set_hash"], passport["subject"]["model_id"],
                 passport["issued_utc"], passport["expiry_utc"], f"python audit.py {fixture.ledger_id} --from EXPORT",
                 passport["computed"]["sources"][1]["sha256"], "No vendor declaration"):
        assert fact in body, fact
    assert page.is_disabled("#verify-button")
    assert page.locator("svg").count() >= 4
    page.screenshot(path=str(tmp_path / "passport.png"), full_page=True)
    context.close()
    context, page, _, _ = open_page(browser, out / "index.html", javascript=False)
    body = page.inner_text("body")
    assert "Ranking rule" in body and row["model_id"] in body and row["passport_sha256"] in body
    page.screenshot(path=str(tmp_path / "leaderboard.png"), full_page=True)
    context.close()
    for name in ("passport.png", "leaderboard.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert all(url.startswith("file://") for url in requests)


def test_the_site_works_moved_elsewhere(browser: Any, site: tuple[SiteFixture, Path], tmp_path: Path) -> None:
    """Relative links only: a copy of the tree verifies the same from another folder."""
    _, out = site
    moved = tmp_path / "moved"
    shutil.copytree(out, moved)
    page_path = passport_pages(moved)[-1]
    context, page, requests, problems = open_page(browser, page_path)
    page.click("#verify-button")
    page.wait_for_function("document.getElementById('verify-result').textContent.startsWith('exit ')")
    assert page.text_content("#verify-result") == f"exit {page.text_content('#build-exit')}: " \
                                                  f"{page.text_content('#build-verdict')}"
    assert all(url.startswith(moved.as_uri()) for url in requests) and problems == []
    context.close()


TIMES = [
    "2026-09-20T00:00:00Z", "2026-09-20", "20260920", "2026-09-20T00:00", "2026-09-20T00", "2026-09-20 00:00:00+02:00",
    "2026-09-20T00:00:00.123456Z", "2026-09-20T00:00:00.1Z", "2026-09-20T000000Z", "2026-09-20T00:00:00-0130",
    "2026-02-29T00:00:00Z", "2024-02-29", "2026-13-01", "2026-09-31", "2026-09-20T24:00:00Z", "garbage", "",
    " 2026-09-20T00:00:00Z ", "2026-09-20T00:00:00+00:00:30", "2026-09-20x00:00:00", "2026-W38-7", "2026-263",
    "2026-09-20T00:00:00.1234567Z", "2026-09-20T00:00:00,5Z", "2026-09-20T0000", "2026-09-20T00:00:00+02",
    "0099-01-01", "2026-09-20T00:00:00.Z", "2026-09-20T1:00", "2026-9-20", "2026-09-20T00:00:00z",
    "2026-09-20T00:00:00+24:00", "2026-09-20T00:00:00.123+01:30:15.5", "2026-W38", "2026W387", "2026W38",
    "2026-W53-1", "2020-W53-7", "2026-W00-1", "2026-W38-8", "2026-W38-0", "2026-09-20T00:00:00.1234567890Z",
    "2026-09-20T00:00:00.+01:00", "2026-09-20T00:00.5", "2026-09-20T00:00:00+013015", "2026-09-20T00:00:00+01:30:15",
    "2026-09-20T00.5", "2026-09-20T00:00:00+01:3", "2026-09-20T00:00:00+1", "2026-W38-7T12:00Z", "2026-09-20T12Z",
    "20260920T120000Z", "2026-0920", "202609-20", "2026-09-20T00:00:00+00:00Z", "2026-09-20T23:59:60Z",
    "2026-09-20T00:00:00-00:00", "2026-09-20T00:00:00.0000005Z", "2026-09-20T", "2026-09-20T00:00:00+01:75",
    "2026-09-20T00:00:00:5", "2026-09-20T0000001", "2026-09-20Z", "2025-W53-1", "9999-12-31T23:59:59Z",
]


def test_times_are_read_as_the_cli_reads_them(browser: Any, site: tuple[SiteFixture, Path]) -> None:
    """Passport times (issued, expiry, --at) accepted or refused exactly as seals.parse_utc does, with the same
    instant: a signed passport with an unusual but valid time gets the same verdict in both."""
    from datetime import UTC, datetime

    from keys import HeldoutError
    from seals import parse_utc

    _, out = site
    expected: list[int | None] = []
    for text in TIMES:
        try:
            moment = parse_utc(text)
        except HeldoutError:
            expected.append(None)
            continue
        delta = moment - datetime(1970, 1, 1, tzinfo=UTC)
        expected.append((delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds)
    context, page, _, _ = open_page(browser, passport_pages(out)[0])
    got = page.evaluate("""ts => ts.map(t => { try { return window.heldoutVerify.parseUtc(t, 'time'); }
                                             catch (e) { return null; } })""", TIMES)
    assert list(zip(TIMES, got, strict=True)) == list(zip(TIMES, expected, strict=True))
    context.close()


JSON_TEXTS = [
    '{"a":1}', '{"a":1,"a":2}', '{"a":1,}', '[1,]', '{,}', '01', '1.', '.5', '-', '+1', '1e', '1e5', '-0', '-0.0',
    '1E+2', 'NaN', 'Infinity', '-Infinity', '[NaN]', ' \t\n\r{"a":[]} \n', '\f{}', '{"a":"\x01"}', '{"a":"\\x"}',
    '{"a":"\\u12"}', '{"a":"\\ud800"}', '{"\\ud800":1}', '{"a":"\\ud83d\\ude00"}', '\ufeff{}', '{"a":1}x', '[]',
    '"text"', 'true', 'null', '{"b":1,"a":{"d":[1,2.5,{"c":null}],"c":"\\u00e9\\n"}}', '{"a":1e400}',
    '{"a":123456789012345678901234567890}', '{"a":0.1e-7}', '{"a":"</script>"}', '{"a" :1 , "b":[ 1 , 2 ]}',
    '', '   ', '{"a":tru}', '{"a":nul}', '{"a":"\\/"}', '{"é":1,"e":2,"z":3,"Z":4}', '[1,2', '{"a":1', '"\\u0000"',
    '{"__proto__":{"x":1},"constructor":2}', '{"1":1,"a":2,"10":3}', '1.0', '100', '1e21', '1e-7', '0.000001',
]


def test_json_and_canonical_bytes_as_python_reads_and_writes_them(browser: Any, site: tuple[SiteFixture, Path]) -> None:
    """Strict JSON (duplicate members, NaN, bad escapes refused as seals.parse_json refuses them) and RFC 8785
    bytes of what was read (lone surrogates refused as seals.jcs_bytes refuses them)."""
    from keys import HeldoutError
    from seals import jcs_bytes, parse_json

    _, out = site
    expected: list[str | None] = []
    for text in JSON_TEXTS:
        try:
            expected.append(jcs_bytes(parse_json(text)).decode("utf-8"))
        except HeldoutError:
            expected.append(None)
    context, page, _, _ = open_page(browser, passport_pages(out)[0])
    got = page.evaluate("""ts => ts.map(t => {
        try { return window.heldoutVerify.jcs(window.heldoutVerify.parseJson(t)); } catch (e) { return null; }
    })""", JSON_TEXTS)
    assert list(zip(JSON_TEXTS, got, strict=True)) == list(zip(JSON_TEXTS, expected, strict=True))
    context.close()


def test_checkpoint_notes_are_parsed_as_python_and_go_parse_them(browser: Any, site: tuple[SiteFixture, Path]) -> None:
    """Signature lines of other keys with names at the edges of "whitespace" (U+FEFF, U+0085, ...): the page's
    parser accepts and refuses exactly the notes ``ledger.checkpoint.parse_checkpoint`` does (Go's reading)."""
    import base64

    from keys import HeldoutError
    from ledger import parse_checkpoint, sign_checkpoint
    from tests.conftest import seeded_signer

    _, out = site
    head = sign_checkpoint("heldout/ledger/0123456789abcdef0123", 5, bytes(32), seeded_signer(8, name="op")).note
    blob = base64.b64encode(bytes(68)).decode()
    names = ["w", "w\ufeff", "w\u200b", "w\x85", "w\xa0", "w\u1680", "w\u2000", "w\u200a", "w\u2028", "w\u2029",
             "w\u202f", "w\u205f", "w\u3000", "w\u180e", "w+x", "w\x0b"]
    notes = [head + f"\u2014 {name} {blob}\n" for name in names] + [head + "\u2014 w AAAA\n"]
    expected = []
    for note in notes:
        try:
            parse_checkpoint(note)
            expected.append(True)
        except HeldoutError:
            expected.append(False)
    assert expected.count(True) == 4  # "w", U+FEFF, U+200B, U+180E: no whitespace to Go
    context, page, _, _ = open_page(browser, passport_pages(out)[0])
    got = page.evaluate("""ns => ns.map(n => {
        try { window.heldoutVerify.parseCheckpoint(n); return true; } catch (e) { return false; }
    })""", notes)
    labels = [*names, "short blob"]
    assert list(zip(labels, got, strict=True)) == list(zip(labels, expected, strict=True))
    context.close()


def test_attack_trimmed_pages_of_a_hostile_ledger_verify_as_the_cli(browser: Any, tmp_path: Path) -> None:
    """A passport page carries only the entries its passport needs (its seal, the early reveal that retires
    gen2, the first supersession of its spec, not the fat entries of other versions), and its page name is cut
    from an 800-byte model id: Verify still gives the build's verdict (the CLI's), lapsed by the reveal or by
    the spec; and "verify this entry" works on a fat entry shown once on its page."""
    from tests.site_support import build_hostile_store

    hostile = build_hostile_store(tmp_path / "store")
    out = tmp_path / "site"
    result = run("site", "build", str(out), "--from", str(hostile.export), "--at", SITE_AT)
    assert result.exit_code == 0, result.output
    verdicts = []
    for path in sorted((out / "passports").glob("*.html")):
        context, page, requests, problems = open_page(browser, path)
        page.click("#verify-button")
        page.wait_for_function("document.getElementById('verify-result').textContent.startsWith('exit ')")
        expected = f"exit {page.text_content('#build-exit')}: {page.text_content('#build-verdict')}"
        assert page.text_content("#verify-result") == expected, path.name
        assert all(url.startswith("file://") for url in requests) and problems == []
        verdicts.append(expected)
        context.close()
    assert len(verdicts) == 4
    assert sum("revealed before it was retired" in v for v in verdicts) == 3
    # The first supersession counts, from its own entry's time (it is dated before the passport was issued).
    assert sum("superseded by MedEval-1 v9 from 2026-09-03T00:00:00Z" in v for v in verdicts) == 1
    context, page, _, problems = open_page(browser, out / "ledger" / "entries-0001.html")
    entries = (hostile.export / "entries.jsonl").read_text().splitlines()
    fat = next(i for i, line in enumerate(entries) if "FATSPEC0000X" in line)
    page.click(f"button[data-index='{fat}']")
    page.wait_for_function(f"document.getElementById('v{fat}').textContent.length > 0")
    assert page.text_content(f"#v{fat}").startswith(f"exit 0: entry {fat} is included")
    assert problems == []
    context.close()


@pytest.mark.parametrize(("forged", "words"), [
    ({"subject": {"model_name": "BiomedCLIP ViT-B/16 (fine-tuned)"}},
     "subject.model_name is not what its cited bundles say"),
    ({"spec_version": "MedEval-1 v0.2"}, "evaluated under \"MedEval-1 v0.1\""),
    ({"declared": {"clearance": "FDA 510(k) cleared"}}, "its declared is not what its issue writes"),
    ({"declared_note": "Declared by the vendor and checked by the operator."},
     "its declared_note is not what its issue writes"),
    ({"expiry_basis": "the sealed held-out generation, witnessed by three witnesses, expires 2030"},
     "its expiry_basis is not what its issue writes"),
    ({"issued_utc": "2026-01-01T00:00:00Z"}, "states it was issued 2026-01-01T00:00:00Z, before entry"),
], ids=["another model's name", "another spec", "a vendor declaration", "a vendor's note", "an expiry basis",
        "issued before its evidence"])
def test_attack_a_logged_passport_that_says_other_than_its_bundles_is_refused_by_the_page(
        browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, forged: dict[str, Any], words: str) -> None:
    """A passport the operator signed and logged whose subject names another model, or whose spec is not its
    bundles': heldout's build refuses to publish it; a build that skips the check (the operator's own) publishes
    the page, and the page's Verify refuses it on its own, with the CLI's reason."""
    import heldout.passports as passports
    from seals import sign_document
    from tests.audit_support import build_store, command_clock
    from tests.site_support import ISSUE_AT

    fx = build_store(tmp_path / "root")
    store = str(fx.store)

    def forging(document: dict[str, Any], signer: Any) -> dict[str, Any]:
        changed = {**document, **{k: v for k, v in forged.items() if k != "subject"}}
        if "subject" in forged:
            changed["subject"] = {**document["subject"], **forged["subject"]}
        return sign_document(changed, signer)

    with command_clock(ISSUE_AT):
        assert run("audit", fx.ledger_id, "--store", store).exit_code == 0
        with monkeypatch.context() as patch:
            patch.setattr(passports, "sign_document", forging)
            assert run("passport", "issue", "model_0", "--generation", "gen2", "--store", store).exit_code == 0
        assert run("ledger", "export", fx.ledger_id, str(tmp_path / "export"), "--store", store).exit_code == 0
    refused = run("site", "build", str(tmp_path / "refused"), "--from", str(tmp_path / "export"), "--at", SITE_AT)
    assert refused.exit_code == 1 and not (tmp_path / "refused").exists(), refused.output
    out = tmp_path / "site"
    with monkeypatch.context() as patch:
        patch.setattr(passports, "check_subject_and_spec", lambda *args, **kwargs: None)
        patch.setattr(passports, "_check_issuer_statements", lambda *args, **kwargs: None)
        patch.setattr(passports, "_check_issued_after_evidence", lambda *args, **kwargs: None)
        patch.setattr(passports, "_check_passport_times", lambda *args, **kwargs: None)
        built = run("site", "build", str(out), "--from", str(tmp_path / "export"), "--at", SITE_AT)
    assert built.exit_code == 0, built.output
    (path,) = sorted((out / "passports").glob("*.html"))
    context, page, _, problems = open_page(browser, path)
    page.click("#verify-button")
    page.wait_for_function("document.getElementById('verify-result').textContent.startsWith('exit ')")
    result = page.text_content("#verify-result")
    assert result.startswith("exit 1") and words in result, result
    assert problems == []
    context.close()


@pytest.fixture(scope="module")
def withholding_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A ladder gen1 and a Thresholdout gen2, two models' bundles on each, an honest passport of one model on
    each (citing its withheld bundles by their public record), exported and built into a site."""
    from tests.audit_support import TASK, add_bundle, command_clock, withholding_store
    from tests.generations_support import cli

    root = tmp_path_factory.mktemp("browser-withholding")
    store, data, ledger_id = withholding_store(
        root, ("seal", "gen1", "--tasks", TASK, "--per-task", "80", "--expires", "2027-03-01", "--budget-bits", "400",
               "--ladder-step", "1.0"),
        ("seal", "gen2", "--tasks", TASK, "--per-task", "80", "--expires", "2027-04-01", "--budget-bits", "400",
         "--thresholdout", "--threshold", "4", "--sigma", "1"), pool_cases=200)
    for i, (model, skill) in enumerate([("good", 0.3), ("fair", 0.2)]):
        add_bundle(store, "public", model, seed=20 + i, skill=skill, data_root=data)
        add_bundle(store, "gen1", model, seed=10 + i, skill=skill)
        add_bundle(store, "gen2", model, seed=20 + i, skill=skill)
    with command_clock(SITE_AT):
        for generation in ("gen1", "gen2"):
            assert cli("audit", ledger_id, store=store).exit_code == 0
            assert cli("passport", "issue", "good", "--generation", generation, store=store).exit_code == 0
        export = root / "export"
        assert cli("ledger", "export", ledger_id, str(export), store=store).exit_code == 0
    out = root / "site"
    result = run("site", "build", str(out), "--from", str(export), "--at", SITE_AT)
    assert result.exit_code == 0, result.output
    return store, export, out


def test_verify_button_accepts_withheld_bundles_as_the_cli_does(browser: Any, monkeypatch: pytest.MonkeyPatch,
                                                                withholding_site: tuple[Path, Path, Path]) -> None:
    """A passport on a ladder or Thresholdout generation cites its bundles by their public record (the evaluation
    is withheld): the page's Verify said "evaluation 0 of the passport is not the one bundle logged" where the CLI
    and the site build said valid (red-team round 18). The browser applies the same rule: by the sealed mode."""
    store, export, out = withholding_site
    pages = sorted((out / "passports").glob("*.html"))
    assert len(pages) == 2
    for path in pages:
        evaluations = json.loads(blob_of_page(path).read_text())["computed"]["evaluations"]
        assert {e.get("kind") for e in evaluations} == {"withheld-bundle"}
        context, page, _, problems = open_page(browser, path)
        page.click("#verify-button")
        page.wait_for_function("document.getElementById('verify-result').textContent.startsWith('exit ')")
        code, line = cli_verdict(blob_of_page(path), ["--from", str(export), "--at", SITE_AT], store, monkeypatch)
        assert code == 0 and page.text_content("#verify-result") == f"exit 0: {line}", path.name
        assert problems == [], problems
        context.close()
