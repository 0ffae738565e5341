"""``heldout evaluate``: a model on a generation's tasks -> stored predictions -> bundles on the ledger."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import TaskID

from heldout.cli.common import (
    SEED_MAX,
    JsonFlag,
    StoreOption,
    console,
    handle_errors,
    open_store,
    print_json,
    progress_bars,
    reference_time,
    table,
)
from heldout.evaluation import EvaluationRequest, bundle_rows, evaluate_on_generation
from heldout.generations import ledger_signer, open_ledger
from keys import UsageError


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def evaluate_command(
    model: Annotated[str, typer.Argument(help="Model id (majority, cnn_small, linear_probe, clip_zeroshot, "
                                              "biomedclip_zeroshot).")],
    generation: Annotated[str, typer.Option("--generation", help="The generation to evaluate on.")],
    tasks: Annotated[str, typer.Option("--tasks", help="Comma-separated task flags, e.g. bloodmnist,breastmnist.")],
    seed: Annotated[int, typer.Option(help="Evaluation seed (every random choice derives from it).", min=0,
                                      max=SEED_MAX)] = 20260727,
    data_root: Annotated[Path | None, typer.Option("--data-root", help="Folder of the task npz files "
                                                   "(default: medmnist's).")] = None,
    weights: Annotated[str | None, typer.Option(help="Model weights: a local file (or 'random' for open_clip "
                                                      "architectures in tests).")] = None,
    arch: Annotated[str | None, typer.Option(help="open_clip architecture for clip_zeroshot.")] = None,
    device: Annotated[str, typer.Option(help="Torch device.")] = "cpu",
    ledger: Annotated[str | None, typer.Option("--ledger", help="Ledger id (default: the store's).")] = None,
    store: StoreOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Evaluate MODEL on GENERATION, append one bundle per task (refused, exit 4, past the leakage budget).

    Example: heldout evaluate cnn_small --generation gen1 --tasks bloodmnist --data-root ./data"""
    now = reference_time()
    task_list = tuple(t.strip() for t in tasks.split(",") if t.strip())
    if not task_list:
        raise UsageError("--tasks names no task")
    st = open_store(store)
    opened = open_ledger(st, ledger)
    try:
        signer = ledger_signer(st, opened)
        request = EvaluationRequest(model_id=model, generation=generation, tasks=task_list, seed=seed,
                                    data_root=data_root, weights=weights, arch=arch, device=device)
        with progress_bars(disable=as_json) as bar:
            bars: dict[str, TaskID] = {}

            def progress(task: str, step: str, done: int, total: int) -> None:
                if task not in bars:
                    bars[task] = bar.add_task(f"{model} on {generation}/{task}", total=total)
                bar.update(bars[task], completed=done, total=total,
                           description=f"{model} on {generation}/{task}: {step}")

            outcomes = evaluate_on_generation(st, opened, signer, request, now=now, progress=progress)
    finally:
        opened.close()
    if as_json:
        print_json([o.to_json() for o in outcomes])
        return
    rows = bundle_rows(outcomes)
    if any(o.withheld for o in outcomes):  # only the released values are public until retirement
        released_columns = ("entry", "task", "n_test", "released value", "leakage bits")
        shown = table(f"{model} on {generation} ({outcomes[0].entry['release']['mode']} release)",
                      released_columns, right=tuple(c for c in released_columns if c != "task"))
        for row in rows:
            shown.add_row(str(row["index"]), row["task"], str(row["n_test"]),
                          "no improvement" if row.get("released") is None else _fmt(row["released"]),
                          _fmt(row["leakage_bits"]))
        console.print(shown)
        return
    columns = ("entry", "task", "n_test", "bal. acc.", "AUC", "composite", "coverage", "leakage bits")
    shown = table(f"{model} on {generation}", columns, right=tuple(c for c in columns if c != "task"))
    for row in rows:
        shown.add_row(str(row["index"]), row["task"], str(row["n_test"]), _fmt(row["balanced_accuracy"]),
                      _fmt(row["auc"]), _fmt(row["composite"]), _fmt(row["coverage"]), _fmt(row["leakage_bits"]))
    console.print(shown)


def register(app: typer.Typer) -> None:
    app.command(name="evaluate")(handle_errors(evaluate_command))
