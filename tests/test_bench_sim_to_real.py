"""benchmarks/bench_sim_to_real.py at a tiny budget: arms, counts, per-arm files and the merged table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests._scripts import load_script


def _bench():  # type: ignore[no-untyped-def]
    return load_script("benchmarks/bench_sim_to_real.py")


@pytest.mark.real
def test_tiny_sim_to_real_table(tmp_path: Path) -> None:
    pytest.importorskip("textworld")
    pytest.importorskip("sb3_contrib")
    from dreamgym_env.real.textworld_suite import build_suite

    bench = _bench()
    build_suite(tmp_path / "suite", train_games=1, heldout_games=1, workers=1)
    out = tmp_path / "bench" / "table.md"
    common = [
        "--suite", str(tmp_path / "suite"), "--train-games", "1", "--heldout-games", "1",
        "--total-timesteps", "64", "--num-envs", "2", "--n-steps", "8", "--eval-episodes", "3",
        "--max-steps", "6", "--seeds", "0", "--out", str(out),
    ]  # fmt: skip
    bench.main([*common, "--arms", "random,real-10%"])
    table = bench.main([*common, "--arms", "s2r", "--backend", "scripted"])  # a second call, merged

    arms = {p.stem for p in (out.parent / "arms").glob("*.json")}
    assert arms == {"random", "real-10pct", "s2r"}
    payload = json.loads((out.parent / "results.json").read_text())
    results = payload["arms"]
    real10 = results["real-10%"]["seeds"]["0"]
    for arm in ("random", "real-10%", "s2r"):  # the table as the docs commit it: arm -> split -> figures
        for split in ("heldout", "train"):
            cell = payload["table"][arm][split]
            assert cell["seeds"] == [0] and cell["episodes"] == 3 and cell["std"] == 0.0
            assert cell["mean"] == results[arm]["seeds"]["0"][f"success_{split}"]
    memo = results["s2r"]["seeds"]["0"]["memo"]  # how its simulated steps were answered, without the rules'
    assert memo["model_answers"] >= 1 and memo["real_hits"] + memo["hits"] + memo["model_answers"] <= 64
    assert "s2r > real-10% (held-out)" in payload["targets"]
    # Who answered every simulated step of the training run, and the model's share of them.
    answered = results["s2r"]["seeds"]["0"]["answered_by"]
    assert sum(answered.values()) == 64 and set(answered) <= {"model", "chosen", "rule", "memo", "replay"}
    share = (answered.get("model", 0) + answered.get("chosen", 0)) / 64
    assert results["s2r"]["seeds"]["0"]["model_share"] == pytest.approx(share)
    assert payload["setting"] == "privileged"
    assert (
        real10["real_steps"] == 16 and real10["sim_steps"] == 0 and real10["updates"] == 1
    )  # 6 -> 1 rollout
    s2r = results["s2r"]["seeds"]["0"]
    assert (s2r["sim_steps"], s2r["real_steps"], s2r["updates_sim"], s2r["updates_real"]) == (64, 16, 4, 1)
    assert results["random"]["seeds"]["0"]["updates"] == 0
    for record in (real10, s2r):  # a share of the 3 evaluation episodes
        assert round(record["success_train"] * 3, 6).is_integer() and 0.0 <= record["success_train"] <= 1.0
        assert (
            round(record["success_heldout"] * 3, 6).is_integer() and 0.0 <= record["success_heldout"] <= 1.0
        )
    assert "| s2r | 1 | 16 | 64 |" in table and "s2r > real-10% (held-out)" in table
    assert "sim-only >= 0.9 x real-only (held-out): not measured" in table
    assert out.read_text() == table
