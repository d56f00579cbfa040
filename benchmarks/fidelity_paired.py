"""Two experience models scored on the same transitions, compared transition by transition.

``dreamgym eval-fidelity`` keeps every scored prediction (``NAME.predictions.jsonl`` in its ``--out``).
When two models were scored on the same seeded sample, their exact-match rates differ only through the
transitions one gets right and the other wrong; McNemar's exact test asks whether that split is more
lopsided than a fair coin would make it. Both rates, the discordant counts and the p-value, per split:

    python benchmarks/fidelity_paired.py \\
        --before runs/tw_small/results-shipped-30l-eval --after runs/tw_small/results-eval \\
        --before runs/tw_small/results-shipped-30l-unseen_games --after runs/tw_small/results-unseen_games \\
        --out docs/results/fidelity_textworld_paired.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from scipy.stats import binomtest

KEY_FIELDS = ("task_id", "episode_id", "step", "action")
"""What names a scored transition in both files."""


def exact_matches(folder: Path, name: str) -> dict[tuple[Any, ...], bool]:
    """Each scored transition of ``folder/name.predictions.jsonl`` and whether its state matched exactly."""
    path = folder / f"{name}.predictions.jsonl"
    if not path.is_file():
        raise SystemExit(f"{path} does not exist: give an eval-fidelity --out folder that scored {name!r}.")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {tuple(row[k] for k in KEY_FIELDS): bool(row["score"]["exact_match"]) for row in rows}


def compare(before: dict[tuple[Any, ...], bool], after: dict[tuple[Any, ...], bool]) -> dict[str, Any]:
    """Exact match of both on the transitions both scored, the discordant pairs and McNemar's exact p."""
    shared = sorted(set(before) & set(after))
    if not shared:
        raise SystemExit("The two runs scored no transition in common: were they given the same split?")
    only_before = sum(before[k] and not after[k] for k in shared)
    only_after = sum(after[k] and not before[k] for k in shared)
    discordant = only_before + only_after
    p_value = binomtest(only_after, discordant, 0.5).pvalue if discordant else 1.0
    return {
        "transitions": len(shared),
        "unpaired": len(set(before) ^ set(after)),
        "exact_match_before": round(sum(before[k] for k in shared) / len(shared), 3),
        "exact_match_after": round(sum(after[k] for k in shared) / len(shared), 3),
        "right_only_before": only_before,
        "right_only_after": only_after,
        "mcnemar_exact_p": round(float(p_value), 3),
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
