"""``heldout site build``: the public static site (passport pages, leaderboard, ledger browser)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from heldout.cli.common import (
    NOW_ENV,
    JsonFlag,
    StoreOption,
    console,
    handle_errors,
    phase_progress,
    print_json,
    reference_time,
    refuse_output_in_source,
)
from keys import UsageError

app = typer.Typer(help="The public transparency site, rendered from public data.", no_args_is_help=True)


@app.command("build")
@handle_errors
def build(
    out: Annotated[Path, typer.Argument(help="Folder to write the site to (new, empty, or an earlier site).")],
    store: StoreOption = None,
    from_dir: Annotated[str | None, typer.Option(
        "--from", help="Build from a public ledger export, or a tiles directory or its http(s) URL.")] = None,
    release_tag: Annotated[str | None, typer.Option("--release-tag", help="A label printed on every page.")] = None,
    at: Annotated[str | None, typer.Option(help="Reference time (ISO 8601); default $HELDOUT_NOW, else the "
                                           "time of the ledger's last entry.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Replay the export (or the store's ledger through the same export view), verify every passport, and
    render the site. Anything that does not verify stops the build (exit 1, naming the file); nothing is written.
    The same inputs and reference time give a byte-identical tree; manifest.json lists every file's SHA-256.

    Example: heldout site build ./site --from ./public-export --release-tag v1"""
    from heldout.site import build_site

    refuse_output_in_source(out, from_dir, "the site folder")
    if release_tag is not None and (not release_tag.strip() or len(release_tag) > 128
                                    or not all(char.isprintable() for char in release_tag)):
        # (a byte that is not UTF-8 reaches here as an unprintable surrogate: bad input, exit 2)
        raise UsageError("--release-tag is a label of at most 128 printable characters", field="release_tag",
                         found=ascii(release_tag)[:80])
    moment = reference_time(at) if at or os.environ.get(NOW_ENV) else None
    if store is None and from_dir is None:
        from heldout.store import default_store_path

        store = default_store_path()
    with phase_progress(disable=as_json) as tick:
        built = build_site(out, store=store, from_dir=from_dir, at=moment, release_tag=release_tag, progress=tick)
    if as_json:
        print_json({"out": str(built.out), "index": str(built.index), "files": built.files,
                    "passports": built.passports, "ledger_id": built.ledger_id,
                    "manifest_sha256": built.manifest_sha256})
        return
    console.print(f"site for ledger {built.ledger_id}: {built.passports} passports, {built.files} files; "
                  f"manifest SHA-256 {built.manifest_sha256}")
    console.print(str(built.index))
