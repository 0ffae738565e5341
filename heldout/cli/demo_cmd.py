"""``heldout demo``: the whole product from nothing, on an embedded default, explained step by step.

Each step runs a real ``heldout`` command (the same code a user's shell would run, invoked in-process) and
states the exit code it must give; the demo stops at the first step that does not, with that step's output
above. Data are synthetic files in the official MedMNIST layout (no network); models are the offline ones.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer
from rich.panel import Panel
from rich.rule import Rule
from rich.text import Text

from heldout.cli.common import console, handle_errors, reference_time
from heldout.generations.ledgers import REHEARSAL_ENV
from heldout.store import Store, xdg_base
from keys import UsageError, VerificationError
from seals import format_utc

DEMO_MARKER = ".heldout-demo"


def default_demo_store() -> Path:
    """``$XDG_DATA_HOME/heldout-demo`` (normally ``~/.local/share/heldout-demo``): beside the default store,
    never in the current folder (which may be a source checkout)."""
    return xdg_base("XDG_DATA_HOME", ".local", "share") / "heldout-demo"


def heldout_command() -> str:
    """How this shell can run ``heldout``: the bare name when it resolves to this installation, else the
    script's full path beside this interpreter, else ``python -m heldout``."""
    beside = Path(sys.executable).parent / "heldout"
    found = shutil.which("heldout")
    if beside.is_file():
        if found is not None and Path(found).resolve() == beside.resolve():
            return "heldout"
        return shlex.quote(str(beside))
    return f"{shlex.quote(sys.executable)} -m heldout"


NOW_ENV = "HELDOUT_NOW"
TASKS = ("bloodmnist", "breastmnist", "pneumoniamnist")
MODELS = ("majority", "linear_probe", "cnn_small")
SIZES = {"n_train": 300, "n_val": 40, "n_test": 150, "pool": 260, "per_task": 80}


def _prepare_store(path: Path) -> Path:
    """Use ``path`` for the demo: refuse a folder that is not ours; start over in one that is."""
    path = path.expanduser().resolve()
    if path.exists() and any(path.iterdir()):
        if not (path / DEMO_MARKER).exists():
            raise UsageError(f"{path} exists and is not a demo store; choose another --store", path=str(path))
        shutil.rmtree(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / DEMO_MARKER).write_text("created by heldout demo; removed and rebuilt by the next demo run\n")
    return path


class Demo:
    def __init__(self, store: Path) -> None:
        self.store = store
        self.step_no = 0
        self.started = time.perf_counter()

    def say(self, title: str, why: str) -> None:
        self.step_no += 1
        console.print(Rule(Text(f"step {self.step_no}: {title}", style="bold"), align="left"))
        console.print(why)

    def run(self, args: Sequence[str], *, expect: int = 0, store: bool = True, script: bool = False,
            at: datetime | None = None) -> None:
        """Run one heldout command in-process as a user would, and require its exit code; ``at``: run it at
        that reference time (``$HELDOUT_NOW``, as a rehearsal of a later day would)."""
        if at is not None:
            previous = os.environ.get(NOW_ENV)
            os.environ[NOW_ENV] = format_utc(at)
            try:
                self.run(args, expect=expect, store=store, script=script)
            finally:
                if previous is None:
                    os.environ.pop(NOW_ENV, None)
                else:
                    os.environ[NOW_ENV] = previous
            return
        from heldout.cli import app

        visible = [*args, *(["--store", str(self.store)] if store else [])]
        full = ["audit", *visible] if script else visible  # `python audit.py X` is `heldout audit X`
        shown = ("python audit.py " if script else "heldout ") + " ".join(
            a if " " not in a else repr(a) for a in visible)
        console.print(Text(f"$ {shown}", style="dim"))
        command = typer.main.get_command(app)
        # The root group reports every failure as one line and returns its exit code (never raises).
        code = command.main(list(full), prog_name="heldout", standalone_mode=False)
        code = 0 if code is None else int(code)
        if code == 130 and expect != 130:  # a step interrupted: the demo was, not verified wrong (exit 1)
            raise KeyboardInterrupt
        if code != expect:
            raise VerificationError(f"demo step {self.step_no}: `{shown}` exited {code}, expected {expect}",
                                    expected=expect, found=code)
        console.print(Text.assemble((f"exit {code}", "green"), " (as expected)") if expect else Text("exit 0", "green"))

    def elapsed(self) -> float:
        return time.perf_counter() - self.started


#: How far past its start the demo dates anything (its longest-lived generation's expiry).
DEMO_SPAN = timedelta(days=120)


def _check_room(now: datetime) -> None:
    if now > datetime.max.replace(tzinfo=UTC) - DEMO_SPAN:
        raise UsageError(f"the demo dates things up to {DEMO_SPAN.days} days after its start ({format_utc(now)}): "
                         f"start it before {format_utc(datetime.max - DEMO_SPAN)}", found=format_utc(now))


def run_demo(store: Path, *, fast: bool, database: str | None = None) -> None:
    now = reference_time()
    _check_room(now)
    d = Demo(store)
    data = store / "demo-data" / "official"
    pools = store / "demo-data" / "incoming"
    # (fast: two tasks of 8 and 2 classes, so that a multi-task passport cites bundles whose parameter counts
    # differ, as the full demo's do)
    tasks = TASKS[:2] if fast else TASKS
    models = ("majority", "cnn_small") if fast else MODELS
    tasks_arg = ",".join(tasks)
    day = timedelta(days=1)

    console.print(Panel.fit(
        "heldout demo: an evaluation operator seals held-out test sets, logs every evaluation on an append-only\n"
        "Merkle ledger, audits it by re-deriving every number, issues passports, retires a set, and lets a\n"
        f"stranger replay it all from a public export. Store: {store}", title="heldout"))

    d.say("create the store, the operator's signing key and the ledger",
          "The ledger id is the hash of the genesis entry: anyone can recompute it from entry 0.")
    d.run(["init", "--name", "demo-lab", *(["--database", database] if database else [])])
    ledger_id = Store.open(store).default_ledger_id()

    d.say("write task data in the official MedMNIST layout",
          "No network here: synthetic files with the official keys, dtypes, shapes and class counts, and a\n"
          "learnable class structure. 'official' plays the released dataset; 'incoming' plays new, unreleased\n"
          "cases that the operator keeps private. Only a file with medmnist's MD5 is labelled official: these\n"
          "are labelled 'synthetic' with their SHA-256 in the public seal and in every evaluation on it.")
    for i, task in enumerate(tasks):
        d.run(["data", "synth", task, "--out", str(data), "--n-train", str(SIZES["n_train"]),
               "--n-val", str(SIZES["n_val"]), "--n-test", str(SIZES["n_test"]), "--seed", str(10 + i)], store=False)
        d.run(["data", "synth", task, "--out", str(pools), "--n-train", "1", "--n-val", "1",
               "--n-test", str(SIZES["pool"]), "--seed", str(20 + i)], store=False)

    d.say("register the private pool", "Held-out cases live under private/ (mode 0700) and never leave it.")
    for task in tasks:
        d.run(["pool", "add", task, str(pools / f"{task}.npz")])

    d.say("seal the public generation and two held-out generations",
          "A seal commits to its cases (salted per-case commitments, RFC 6962 set hash) before any model sees\n"
          "them, with a published expiry and leakage budget. gen1 and gen2 are drawn disjoint from each other.\n"
          "A full MedEval-1 evaluation releases about 2,000 bits per bundle, so the budgets are explicit here.")
    d.run(["seal", "public", "--tasks", tasks_arg, "--data-root", str(data),
           "--expires", format_utc(now + DEMO_SPAN)])
    d.run(["seal", "gen1", "--tasks", tasks_arg, "--per-task", str(SIZES["per_task"]),
           "--expires", format_utc(now + 60 * day), "--budget-bits", "40000"])
    d.run(["seal", "gen2", "--tasks", tasks_arg, "--per-task", str(SIZES["per_task"]),
           "--expires", format_utc(now + 90 * day), "--budget-bits", "40000"])

    d.say("evaluate offline models",
          "Each evaluation runs the nine MedEval-1 dimensions (clean pass, 12 perturbations x 3 severities,\n"
          "training-data fractions), stores the predictions as a content-addressed blob and appends a bundle.")
    for model in models:
        for generation in ("gen1", "gen2"):
            d.run(["evaluate", model, "--generation", generation, "--tasks", tasks_arg, "--data-root", str(data)])
    d.run(["evaluate", "majority", "--generation", "public", "--tasks", tasks_arg, "--data-root", str(data)])

    d.say("status, derived from the ledger", "Every state change is a ledger entry; nothing else is kept.")
    d.run(["status"])

    d.say("audit", "Replay the ledger and re-derive every bundle from its stored predictions (no model, no torch).")
    d.run([ledger_id], script=True)

    d.say("issue passports", "Only after a clean audit at the ledger head, and only on a current generation.")
    d.run(["passport", "issue", "cnn_small", "--generation", "gen1"])
    d.run([ledger_id], script=True)
    d.run(["passport", "issue", "cnn_small", "--generation", "gen2"])
    gen1_passport = store / "passports" / "cnn_small__gen1.passport.json"
    gen2_passport = store / "passports" / "cnn_small__gen2.passport.json"
    d.run(["passport", "verify", str(gen1_passport)])
    d.run(["passport", "verify", str(gen2_passport)])

    d.say("retire gen1 and reveal it",
          "The reveal publishes each case's id, content hash, label and salt: anyone can recompute the set hash.")
    d.run(["retire", "gen1", "--reason", "superseded", "--reveal"])
    d.run(["verify-reveal", "gen1"])

    export = store / "public-export"
    d.say("export the ledger for third parties", "Entries, checkpoints, blobs, public keys, seals; nothing private.")
    d.run(["ledger", "export", ledger_id, str(export)])
    key = json.loads((store / "keys" / next(p.name for p in (store / "keys").glob("*.pub.json"))).read_text())

    d.say("replay as a third party",
          "With the export alone: gen2 is still sealed, so its bundles cannot be re-derived (exit 5, each named);\n"
          "public and the revealed gen1 are re-derived in full.")
    d.run([ledger_id, "--from", str(export), "--out", str(store / "third-party-audit.json")], store=False,
          script=True, expect=5)

    d.say("the gen1 passport has lapsed",
          "Its generation is retired: exit 4. The gen2 passport still verifies against the same export.")
    d.run(["passport", "verify", str(gen1_passport), "--from", str(export), "--key", key["public_key_b64"]],
          store=False, expect=4)
    d.run(["passport", "verify", str(gen2_passport), "--from", str(export), "--key", key["public_key_b64"]],
          store=False)

    d.say("announce MedEval-1 v0.2 through the ledger",
          "v0.1's composite rewards consistency, so a model with no skill (majority) scores well above zero;\n"
          "v0.2 gates every other dimension on accuracy's ci95 being above chance, scores uncertainty against the\n"
          "model's own accuracy, reports a ci95 for every number, and draws its randomness from raw PCG64 words\n"
          "so any numpy re-derives it (docs/MEDEVAL-1.2.md). From the effective date v0.1 passports lapse and\n"
          "new evaluations use v0.2.")
    effective = reference_time() + day
    later = effective + timedelta(hours=1)
    d.run(["spec", "supersede", "MedEval-1 v0.1", "--by", "MedEval-1 v0.2", "--effective", format_utc(effective)])
    d.run(["spec", "list"])

    d.say("a day later: evaluate under v0.2",
          "The same majority model on the public generation, now under v0.2: its index is 0 (no skill shown).\n"
          "The gen2 passport (v0.1) has lapsed; the audit re-derives each bundle under its own spec version.")
    d.run(["evaluate", "majority", "--generation", "public", "--tasks", tasks_arg, "--data-root", str(data)],
          at=later)
    d.run(["evaluate", "cnn_small", "--generation", "public", "--tasks", tasks[0], "--data-root", str(data)],
          at=later)
    d.run(["passport", "verify", str(gen2_passport)], at=later, expect=4)
    d.run([ledger_id], script=True, at=later)
    site = store / "site"
    d.say("build the public site",
          "Static pages from the public data alone (the store read through its export view): every passport is\n"
          "verified first, the build is byte-reproducible, and each passport page re-checks itself in a browser.")
    d.run(["site", "build", str(site)], at=later)  # as of the ledger's last entry (or $HELDOUT_NOW): reproducible
    _site_screenshots(site, store / "site-screenshots")
    console.print(Rule())
    console.print(str(site / "index.html"))
    console.print(Text.assemble(("demo complete", "bold green"), f" in {d.elapsed():.0f} s. Store: {store}"))
    console.print(f"The demo's last steps ran a day ahead ($HELDOUT_NOW={format_utc(later)}); so do the commands "
                  "below, since an audit names an entry dated after its own time as a false date.")
    for line in try_lines(store, ledger_id, at=later):
        console.print(f"Try: {line}", soft_wrap=True)


def try_lines(store: Path, ledger_id: str, *, at: datetime) -> list[str]:
    """Commands to paste after the demo: each runs as printed in the shell the demo ran from, at the reference
    time of the demo's last step."""
    heldout = heldout_command()
    where = shlex.quote(str(store))
    clock = f"{NOW_ENV}={format_utc(at)}"
    return [f"{clock} {heldout} status --store {where}",
            f"{clock} {heldout} audit {ledger_id} --store {where}",
            f"{heldout} ledger show --store {where}"]


def _site_screenshots(site: Path, out: Path) -> None:
    """Pictures of the leaderboard and a passport page when the system's chromium and playwright are there."""
    from heldout.site.screenshot import screenshots_available, take_screenshots

    missing = screenshots_available()
    if missing:
        console.print(Text(f"no screenshots: {missing}", style="dim"))
        return
    for path in take_screenshots(site, out):
        console.print(f"screenshot: {path}")


def demo_command(
    store: Annotated[Path | None, typer.Option(
        "--store", help="Where to build the demo store, rebuilt if it is one (default: $XDG_DATA_HOME/heldout-demo,"
        " normally ~/.local/share/heldout-demo).", show_default=False)] = None,
    fast: Annotated[bool, typer.Option("--fast", help="Two tasks, two models (for tests).")] = False,
    database: Annotated[str | None, typer.Option(
        "--database", help="Keep the demo's ledger in this PostgreSQL database (postgresql://..., no password "
        "in it); default: SQLite in the store.", show_default=False)] = None,
) -> None:
    """Run the whole product end to end on synthetic data: seal, evaluate, audit, passports, retire, replay.

    Example: heldout demo --store /tmp/heldout-demo"""
    _check_room(reference_time())  # before the store is rebuilt: a refusal writes nothing
    with as_rehearsal():
        run_demo(_prepare_store(store if store is not None else default_demo_store()), fast=fast, database=database)


@contextmanager
def as_rehearsal() -> Iterator[None]:
    """Run as a rehearsal (``$HELDOUT_REHEARSAL=1``): the demo's store is its own, and its later steps run a day
    ahead of the machine's clock (an operator's store refuses entries dated so far ahead)."""
    previous = os.environ.get(REHEARSAL_ENV)
    os.environ[REHEARSAL_ENV] = "1"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(REHEARSAL_ENV, None)
        else:
            os.environ[REHEARSAL_ENV] = previous


def register(app: typer.Typer) -> None:
    app.command(name="demo")(handle_errors(demo_command))


__all__ = ["register", "run_demo"]
