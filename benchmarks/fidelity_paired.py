"""Two experience models scored on the same transitions, compared transition by transition.

``dreamgym eval-fidelity`` keeps every scored prediction (``NAME.predictions.jsonl`` in its ``--out``).
When two models were scored on the same seeded sample, their exact-match rates differ only through the
transitions one gets right and the other wrong; McNemar's exact test asks whether that split is more
lopsided than a fair coin would make it. Both rates, the discordant counts and the p-value, per split:

    python benchmarks/fidelity_paired.py \\
        --before runs/textworld_model/results-smollm2-135m-instruct-eval \\
        --after runs/textworld_model/results-eval \\
        --before runs/textworld_model/results-smollm2-135m-instruct-unseen_games \\
        --after runs/textworld_model/results-unseen_games --out docs/results/fidelity_textworld_paired.json

(``scripts/build_textworld_model.sh`` writes the shipped model's folders, ``results-<split>``, and with
``BASE=smollm2-135m-instruct`` the 30-layer row's, ``results-smollm2-135m-instruct-<split>``.)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

KEY_FIELDS = ("task_id", "episode_id", "step", "action")
"""What names a scored transition in both files."""


def exact_matches(folder: Path, name: str) -> dict[tuple[Any, ...], bool]:
    """Each scored transition of ``folder/name.predictions.jsonl`` and whether its state matched exactly."""
    path = folder / f"{name}.predictions.jsonl"
    if not path.is_file():
        raise SystemExit(f"{path} does not exist: give an eval-fidelity --out folder that scored {name!r}.")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {tuple(row[k] for k in KEY_FIELDS): bool(row["score"]["exact_match"]) for row in rows}


def mcnemar_exact_p(only_before: int, only_after: int) -> float:
    """Two-sided exact p of McNemar's test: the chance that a fair coin splits the disagreements this unevenly."""
    n = only_before + only_after
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_before, only_after) + 1)) / 2**n
    return min(1.0, 2 * tail)


def compare(before: dict[tuple[Any, ...], bool], after: dict[tuple[Any, ...], bool]) -> dict[str, Any]:
    """Exact match of both on the transitions both scored, the discordant pairs and McNemar's exact p."""
    shared = sorted(set(before) & set(after))
    if not shared:
        raise SystemExit("The two runs scored no transition in common: were they given the same split?")
    only_before = sum(before[k] and not after[k] for k in shared)
    only_after = sum(after[k] and not before[k] for k in shared)
    return {
        "transitions": len(shared),
        "unpaired": len(set(before) ^ set(after)),
        "exact_match_before": round(sum(before[k] for k in shared) / len(shared), 3),
        "exact_match_after": round(sum(after[k] for k in shared) / len(shared), 3),
        "right_only_before": only_before,
        "right_only_after": only_after,
        "mcnemar_exact_p": round(mcnemar_exact_p(only_before, only_after), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--before", type=Path, action="append", required=True, help="eval-fidelity --out folder."
    )
    parser.add_argument("--after", type=Path, action="append", required=True, help="Its pair, same split.")
    parser.add_argument("--name", default="textworld", help="The scored model's name in both folders.")
    parser.add_argument("--out", type=Path, help="Write the comparison as JSON here.")
    args = parser.parse_args()
    if len(args.before) != len(args.after):
        parser.error("give one --after for each --before")
    splits = []
    for before, after in zip(args.before, args.after, strict=True):
        row = {"before": str(before), "after": str(after)}
        row |= compare(exact_matches(before, args.name), exact_matches(after, args.name))
        splits.append(row)
        print(json.dumps(row))
    if args.out:
        args.out.write_text(
            json.dumps({"model": args.name, "splits": splits}, indent=1) + "\n", encoding="utf-8"
        )


if __name__ == "__main__":
    sys.exit(main())
