"""Screenshots of a built site with the system's headless chromium (Debian's ``chromium`` package) driven by
Playwright's Python API, when both are installed; nothing is downloaded. Used by ``heldout demo`` to leave a
picture of the leaderboard and of a passport page beside the site."""

from __future__ import annotations

import importlib.util
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def screenshots_available() -> str | None:
    """None when screenshots can be taken; otherwise why not."""
    if not CHROMIUM.is_file():
        return f"{CHROMIUM} is not installed"
    if importlib.util.find_spec("playwright") is None:
        return "playwright is not installed (pip install playwright; its browser download is not needed)"
    return None


def take_screenshots(site: Path, out: Path) -> list[Path]:
    """``leaderboard.png`` and ``passport.png`` (the first passport page) of the site at ``site``, in ``out``."""
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    pages = [("leaderboard.png", site / "index.html")]
    passports = sorted((site / "passports").glob("*.html"))
    if passports:
        pages.append(("passport.png", passports[-1]))
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            for name, source in pages:
                page.goto(source.resolve().as_uri())
                page.screenshot(path=str(out / name), full_page=True)
                written.append(out / name)
        finally:
            browser.close()
    return written
