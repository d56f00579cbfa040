"""benchmarks/fidelity_paired.py: pairing two scored runs and McNemar's exact test on their disagreements."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._scripts import load_script


def _script():  # type: ignore[no-untyped-def]
    return load_script("benchmarks/fidelity_paired.py")


def _write(folder: Path, matches: list[bool], first_step: int = 0) -> Path:
    folder.mkdir(parents=True)
    lines = [
        json.dumps({"task_id": "t", "episode_id": "e", "step": first_step + i, "action": "go east",
                    "score": {"exact_match": m}})
        for i, m in enumerate(matches)
    ]  # fmt: skip
    (folder / "textworld.predictions.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def test_only_the_disagreements_count_and_the_test_is_two_sided(tmp_path: Path) -> None:
    paired = _script()
    before = paired.exact_matches(_write(tmp_path / "a", [True] * 10 + [False] * 10), "textworld")
    # After: right on the same 10, plus 8 of the ten before got wrong; wrong on none before got right.
    after = paired.exact_matches(_write(tmp_path / "b", [True] * 18 + [False] * 2), "textworld")
    row = paired.compare(before, after)
    assert row["transitions"] == 20 and row["unpaired"] == 0
    assert (row["exact_match_before"], row["exact_match_after"]) == (0.5, 0.9)
    assert (row["right_only_before"], row["right_only_after"]) == (0, 8)
    assert row["mcnemar_exact_p"] == pytest.approx(2 * 0.5**8, abs=1e-3)  # 8 of 8 one way
    # The same counts the other way round give the same p; identical runs give no evidence at all.
    assert paired.compare(after, before)["mcnemar_exact_p"] == row["mcnemar_exact_p"]
    assert paired.compare(before, before)["mcnemar_exact_p"] == 1.0


def test_runs_on_different_transitions_are_refused(tmp_path: Path) -> None:
    paired = _script()
    before = paired.exact_matches(_write(tmp_path / "a", [True, False]), "textworld")
    after = paired.exact_matches(_write(tmp_path / "b", [True, False], first_step=5), "textworld")
    with pytest.raises(SystemExit, match="no transition in common"):
        paired.compare(before, after)
    with pytest.raises(SystemExit, match="does not exist"):
        paired.exact_matches(tmp_path / "missing", "textworld")
