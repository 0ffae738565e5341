"""``heldout data``: task data files. ``synth`` writes a synthetic task in the official MedMNIST layout.

Nothing here imports torch: the synthetic generator is numpy, and the task table is read from medmnist's
info file without importing the package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from heldout.cli.common import SEED_MAX, JsonFlag, console, handle_errors, print_json

app = typer.Typer(help="Task data: synthetic files in the official MedMNIST layout.", no_args_is_help=True)


@app.command("synth")
@handle_errors
def synth(
    task: Annotated[str, typer.Argument(help="A 2D MedMNIST dataset (bloodmnist), or with its size (bloodmnist_224).")],
    out: Annotated[Path, typer.Option("--out", help="Directory to write <flag>.npz / <flag>_224.npz into.")],
    size: Annotated[int | None, typer.Option("--size", help="Image side: 28 or 224 (default: from TASK, else 28).",
                                             show_default=False)] = None,
    n_train: Annotated[int | None, typer.Option("--n-train", help="Training images (default 2000 / 300).",
                                                show_default=False)] = None,
    n_val: Annotated[int | None, typer.Option("--n-val", help="Validation images (default 300 / 60 at 28 / 224 px).",
                                              show_default=False)] = None,
    n_test: Annotated[int | None, typer.Option("--n-test", help="Test images (default 600 / 120).",
                                               show_default=False)] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed: the file is a function of its arguments.", min=0,
                                      max=SEED_MAX)] = 0,
    as_json: JsonFlag = False,
) -> None:
    """Write a synthetic TASK file (official keys, dtypes, shapes and classes; learnable class structure).
    Needs medmnist's task table (the harness extra).

    Example: heldout data synth bloodmnist --out ./data --n-test 200"""
    from harness.synth import write_synth
    from harness.tasks import task_spec

    spec = task_spec(task, size)
    path = write_synth(spec, out, seed=seed, n_train=n_train, n_val=n_val, n_test=n_test)
    import numpy as np

    with np.load(path) as npz:
        counts = {split: int(npz[f"{split}_labels"].shape[0]) for split in ("train", "val", "test")}
    summary = {"task": spec.task, "file": str(path), "size": spec.size, "channels": spec.channels,
               "n_classes": spec.n_classes, "counts": counts, "seed": seed}
    if as_json:
        print_json(summary)
        return
    console.print(f"wrote {path}: {spec.task_name}, {spec.n_classes} classes, {spec.channels} channel(s), "
                  f"{spec.size} px; train {counts['train']}, val {counts['val']}, test {counts['test']} (seed {seed})")
