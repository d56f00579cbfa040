"""Fidelity metrics on hand-made cases, baselines, the runner, the report, and eval-fidelity against vLLM."""

from __future__ import annotations

import json

import pytest

from dreamgym_env._event_loop import run_sync
from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.evaluation.fidelity import aggregate, score_transition, set_f1, token_f1
from dreamgym_env.evaluation.report import load_reports, markdown_table
from dreamgym_env.evaluation.runner import (
    evaluate,
    load_eval_cases,
    model_predictor,
    nearest_transition,
    repeat_state,
)
from dreamgym_env.experience.backends.scripted import ScriptedBackend
from dreamgym_env.experience.schema import ExperienceOutput
from dreamgym_env.records import Transition
from dreamgym_env.training.sft_data import SFTBuildConfig, build_sft_dataset
from tests.training.test_sft_data import _data


def _real(next_state: str = "You open the chest.", done: bool = False, success: bool = False) -> Transition:
    return Transition(
        domain="textworld",
        task_id="t",
        task="q",
        episode_id="e",
        step=0,
        state="s",
        action="open chest",
        next_state=next_state,
        done=done,
        success=success,
        source="real",
        metadata={"admissible_actions": ["take key", "close chest"]},
    )


def _out(next_state: str, done: bool = False, success: bool = False, actions=()) -> ExperienceOutput:
    return ExperienceOutput(
        reasoning="", next_state=next_state, admissible_actions=list(actions), done=done, success=success
    )


def test_token_f1_and_set_f1_on_known_values():
    assert token_f1("You open the chest.", "you open  the chest .") == 1.0
    assert token_f1("a b", "c d") == 0.0
    assert token_f1("open the chest", "open the box") == pytest.approx(2 / 3)
    assert token_f1("", "") == 1.0 and token_f1("x", "") == 0.0
    assert set_f1(["take key", "look"], ["Take key ", "close chest"]) == pytest.approx(0.5)
    assert set_f1([], []) == 1.0


def test_score_of_a_perfect_and_of_a_wrong_prediction():
    perfect = score_transition(_out("you open the chest.", actions=["close chest", "take key"]), _real())
    assert perfect.parsed and perfect.exact_match and perfect.state_f1 == 1.0 and perfect.actions_f1 == 1.0
    assert perfect.done_correct and perfect.success_correct
    wrong = score_transition(_out("You win.", done=True, success=True), _real())
    assert not wrong.done_correct and not wrong.success_correct and wrong.predicted_success
    assert wrong.actions_f1 == 0.0


def test_success_only_counts_when_done():
    # success=True without done is no reward: it matches a real non-final step.
    score = score_transition(_out("x", done=False, success=True), _real())
    assert score.success_correct and not score.predicted_success


def test_parse_failure_is_wrong_on_every_metric():
    score = score_transition(None, _real(done=True, success=True))
    assert not (score.parsed or score.done_correct or score.success_correct or score.exact_match)
    assert score.state_f1 == 0.0 and score.real_success


def test_aggregate_rates_recall_and_precision():
    real_win, real_step = _real(done=True, success=True), _real()
    scores = [
        score_transition(_out("a", done=True, success=True), real_win),  # win found
        score_transition(_out("a"), real_win),  # win missed
        score_transition(_out("a", done=True, success=True), real_step),  # false win
        score_transition(None, real_step),
    ]
    report = aggregate("m", scores)
    assert report.transitions == 4 and report.parse_failure_rate == 0.25
    assert report.success_recall == 0.5 and report.success_precision == 0.5
    assert report.success_accuracy == 0.25 and report.done_accuracy == 0.25


def test_missing_admissible_actions_are_not_scored():
    real = _real().model_copy(update={"metadata": {}})
    assert aggregate("m", [score_transition(_out("x"), real)]).actions_f1 is None


@pytest.fixture
def split(tmp_path):
    path = tmp_path / "buffer.sqlite"
    with ReplayBuffer.open(path, dedup="episode") as buffer:
        buffer.add_many(_data())
    with ReplayBuffer.open(path) as buffer:
        build_sft_dataset(
            buffer.iter_transitions(), tmp_path / "sft", SFTBuildConfig(top_k=1, eval_fraction=0.3)
        )
    return path, tmp_path / "sft"


def test_eval_cases_are_the_held_out_tasks_only(split):
    buffer, data = split
    cases, config = load_eval_cases(buffer, data)
    manifest = json.loads((data / "manifest.json").read_text())
    assert {c.task.task_id for c in cases} == set(manifest["eval_tasks"])
    assert all(d.task_id in manifest["train_tasks"] for c in cases for d in c.demonstrations)
    assert len(load_eval_cases(buffer, data, limit=4)[0]) == 4


def test_baselines_and_a_scripted_model_through_the_runner(split, tmp_path):
    from dreamgym_env.evaluation.report import write_run

    buffer, data = split
    cases, config = load_eval_cases(buffer, data)
    repeat, _ = run_sync(evaluate("repeat-state", repeat_state, cases))
    assert repeat.exact_match == 0.0 and repeat.done_accuracy == pytest.approx(2 / 3)  # 1 final step in 3
    nearest, _ = run_sync(evaluate("nearest", nearest_transition, cases))
    assert nearest.transitions == len(cases)

    def oracle(request):  # a model that knows the answer: the metrics must say so
        case = next(
            c
            for c in cases
            if c.transition.action == request.query.action and c.transition.state == request.query.state
        )
        t = case.transition
        return _out(t.next_state, t.done, t.success, t.metadata["admissible_actions"])

    backend = ScriptedBackend(oracle)
    report, records = run_sync(evaluate("oracle", model_predictor(backend, config), cases, concurrency=3))
    assert (report.exact_match, report.done_accuracy, report.success_accuracy, report.actions_f1) == (
        1,
        1,
        1,
        1,
    )
    prompt = backend.requests[0].messages[1]["content"]
    assert "# Similar real transitions" in prompt  # top_k from the manifest reached the request

    garbage = ScriptedBackend(lambda request: "{not json")
    failed, _ = run_sync(evaluate("garbage", model_predictor(garbage, config), cases))
    assert failed.parse_failure_rate == 1.0

    out = tmp_path / "results"
    for rep, recs in ((report, records), (repeat, []), (failed, [])):
        write_run(out, rep, recs)
    table = markdown_table(load_reports(out))
    assert table.count("\n") == 5 and "| oracle | " in table
    assert (out / "oracle.predictions.jsonl").read_text().count("\n") == len(cases)
    assert (out / "fidelity.md").exists()


@pytest.mark.integration
def test_eval_fidelity_cli_against_the_vllm_server(split, tmp_path, vllm_server, capsys):
    from dreamgym_env.cli import main

    buffer, data = split
    out = tmp_path / "results"
    code = main(
        [
            "eval-fidelity",
            "--buffer",
            str(buffer),
            "--data",
            str(data),
            "--out",
            str(out),
            "--limit",
            "6",
            "--base-url",
            vllm_server.base_url,
            "--model",
            vllm_server.model,
            "--name",
            "smoke",
            "--max-tokens",
            "256",
            "--baseline",
            "repeat-state",
        ]
    )
    assert code == 0
    report = json.loads((out / "smoke.fidelity.json").read_text())
    assert report["transitions"] == 6 and 0.0 <= report["parse_failure_rate"] <= 1.0
    assert (
        "| smoke |" in (out / "fidelity.md").read_text()
        and "| repeat-state |" in (out / "fidelity.md").read_text()
    )


def test_success_f1_combines_precision_and_recall():
    from dreamgym_env.evaluation.fidelity import TransitionScore, aggregate

    def score(real: bool, predicted: bool) -> TransitionScore:
        return TransitionScore(True, True, real == predicted, real, predicted, False, 0.5, None)

    report = aggregate("m", [score(True, True), score(True, False), score(False, True), score(False, False)])
    assert report.success_recall == 0.5 and report.success_precision == 0.5
    assert report.success_f1 == pytest.approx(0.5)
    assert aggregate("m", [score(False, False)]).success_f1 is None
    assert aggregate("m", [score(True, False)]).success_f1 == 0.0


def test_the_learned_setting_hides_the_games_facts_and_its_own_demonstrations(tmp_path):
    """The same held-out cases in both settings: only the privileged ones carry the layout and goal."""
    from dreamgym_env.buffer import ReplayBuffer

    facts = {"world": "Map: secret-layout", "goal": "in(key, I)"}
    rows = [
        t.model_copy(update={"metadata": {**t.metadata, "task_metadata": facts}})
        for t in _data(tasks=6, episodes=2)
    ]
    path = str(tmp_path / "buffer.sqlite")
    with ReplayBuffer.open(path, dedup="episode") as buffer:
        buffer.add_many(rows)
        build_sft_dataset(
            buffer.iter_transitions(),
            tmp_path / "sft",
            SFTBuildConfig(top_k=1, eval_fraction=0.3, demonstrations="other_episodes"),
        )
    privileged, config = load_eval_cases(path, tmp_path / "sft")
    learned, learned_config = load_eval_cases(path, tmp_path / "sft", setting="learned")
    assert config.setting == "privileged" and learned_config.setting == "learned"
    assert all(c.task.metadata == facts for c in privileged)
    assert all(not c.task.metadata for c in learned)
    assert all(d.task_id != c.task.task_id for c in learned for d in c.demonstrations)

    backend = ScriptedBackend(lambda request: _out("nothing"))
    report, records = run_sync(
        evaluate("learned", model_predictor(backend, learned_config), learned, setting="learned")
    )
    assert report.setting == "learned" and report.by_answered_by["model"]["n"] == len(learned)
    assert all("secret-layout" not in str(r.messages) for r in backend.requests)
    assert {r.score.family for r in records} == {"go", "take"}
