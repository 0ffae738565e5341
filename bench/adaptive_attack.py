"""How much Blum & Hardt's boosting attack overfits a synthetic generation under each release mode.

Labels are coin flips, so every point above 50% held-out accuracy is overfitting. The attacker submits k random
classifiers, keeps those the mechanism shows as better than chance, and scores their majority vote
(tests/attack_support.py). Full release is the baseline the two mechanisms are compared against (ratio of
overfitting, measured in the same run), with the bits each released sequence carries.

    python bench/adaptive_attack.py [--n 4000] [--k 2000] [--trials 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console
from rich.table import Table

from tests.attack_support import MECHANISMS, overfitting


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4000, help="held-out cases")
    parser.add_argument("--k", type=int, default=2000, help="queries (random classifiers) the attacker submits")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    result = overfitting(n=args.n, k=args.k, trials=args.trials)
    seconds = time.perf_counter() - started
    baseline = result["full release"]["overfitting_pp"]
    for row in result.values():
        row["ratio_to_full_release"] = round(row["overfitting_pp"] / baseline, 3) if baseline else None
    if args.json:
        print(json.dumps({"n": args.n, "k": args.k, "trials": args.trials, "seconds": round(seconds, 1),
                          "mechanisms": result}, indent=1))
        return
    table = Table(title=f"boosting attack: n = {args.n}, k = {args.k}, {args.trials} trials ({seconds:.1f} s)")
    for column in ("mechanism", "overfitting (pp)", "max (pp)", "vs full release", "bits released"):
        table.add_column(column, justify="left" if column == "mechanism" else "right")
    for mechanism in MECHANISMS:
        row = result[mechanism]
        table.add_row(mechanism, f"{row['overfitting_pp']:.2f}", f"{row['max_overfitting_pp']:.2f}",
                      f"{row['ratio_to_full_release']:.3f}", f"{row['bits']:.1f}")
    Console().print(table)


if __name__ == "__main__":
    main()
