"""The learned/privileged tables in docs/experience_model.md are the committed result file's."""

from __future__ import annotations

import json

from tests._scripts import ROOT, load_script


def test_the_docs_quote_the_committed_settings_result() -> None:
    bench = load_script("benchmarks/bench_fidelity_settings.py")
    docs = (ROOT / "docs" / "experience_model.md").read_text(encoding="utf-8")
    for name in (
        "fidelity_textworld_settings.json",
        "fidelity_textworld_settings_learned.json",
        "fidelity_textworld_guided_learned.json",
        "fidelity_textworld_guided_plan.json",
        "fidelity_textworld_families_unshipped.json",
        "fidelity_textworld_families.json",
    ):
        result = json.loads((ROOT / "docs" / "results" / name).read_text(encoding="utf-8"))
        assert set(result["settings"]) == {"learned", "privileged"}
        assert bench.markdown(result) in docs, (
            f"regenerate the tables: benchmarks/bench_fidelity_settings.py --markdown docs/results/{name}"
        )


def test_the_repeated_runs_summary_is_the_runs_own() -> None:
    bench = load_script("benchmarks/bench_fidelity_settings.py")
    result = json.loads((ROOT / "docs" / "results" / "fidelity_textworld_guided_plan.json").read_text())
    assert len(result["runs"]) == 3
    assert bench.run_figures(result["settings"]) == result["runs"][0]  # the first run is the one in full
    assert bench.spread(result["runs"]) == result["spread"]
    docs = (ROOT / "docs" / "experience_model.md").read_text(encoding="utf-8")
    assert bench.spread_markdown(result) in docs


def test_the_docs_quote_the_learned_training_runs_share() -> None:
    result = json.loads((ROOT / "docs" / "results" / "learned_training_share.json").read_text())
    assert result["setting"] == "learned" and sum(result["answered_by"].values()) == result["sim_steps"]
    docs = (ROOT / "docs" / "experience_model.md").read_text(encoding="utf-8")
    assert f"the model decided {result['model_share']:.2f} of the steps" in docs


def test_the_random_policys_difference_is_paired_and_its_interval_holds_the_mean() -> None:
    bench = load_script("benchmarks/bench_fidelity_settings.py")
    assert bench.paired_difference([(True, True)]) is None  # one pair: no interval
    alike = bench.paired_difference([(True, True), (False, False)] * 4)
    assert alike == {"n": 8, "mean": 0.0, "ci95": [0.0, 0.0]}
    worse = bench.paired_difference([(False, True), (True, True), (False, False), (False, True)])
    low, high = worse["ci95"]
    assert worse["mean"] == -0.5 and low < -0.5 < high < 0.5
    result = json.loads((ROOT / "docs" / "results" / "fidelity_textworld_families.json").read_text())
    for row in result["settings"]["learned"]["random_policy"].values():
        difference = row["random_success_difference"]
        assert difference["n"] == row["random_episodes"]
        assert abs(difference["mean"] - (row["random_success_dream"] - row["random_success_real"])) < 1e-9


def test_the_docs_quote_the_training_run_without_the_memo() -> None:
    result = json.loads((ROOT / "docs" / "results" / "learned_training_share_no_memo.json").read_text())
    assert result["config"]["memo"] is False and result["setting"] == "learned"
    answered = result["answered_by"]
    assert sum(answered.values()) == result["sim_steps"] and "memo" not in answered
    docs = (ROOT / "docs" / "experience_model.md").read_text(encoding="utf-8")
    share = (answered["chosen"] + answered["model"]) / result["sim_steps"]
    assert (
        f"the model decided {share:.2f} of the steps (chose {answered['chosen'] / result['sim_steps']:.2f}"
        in docs
    )
    assert f"the rules answered the other {answered['rule'] / result['sim_steps']:.2f}" in docs


def test_the_docs_quote_the_training_run_without_the_commands_that_change_nothing() -> None:
    result = json.loads((ROOT / "docs" / "results" / "learned_training_share_skip_verbs.json").read_text())
    assert result["setting"] == "learned" and result["config"]["skip_verbs"] == [
        "look",
        "inventory",
        "examine",
    ]
    answered, steps = result["answered_by"], result["sim_steps"]
    assert sum(answered.values()) == steps and "memo" not in answered
    docs = (ROOT / "docs" / "experience_model.md").read_text(encoding="utf-8")
    chose, wrote = answered.get("chosen", 0) / steps, answered.get("model", 0) / steps
    assert f"chose {chose:.2f} among the outcomes the rules wrote out,\n  wrote {wrote:.2f}" in docs
