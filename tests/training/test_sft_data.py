"""SFT data: split by task, examples equal to the env's requests, manifest, resumable annotation."""

from __future__ import annotations

import json

import pytest

from dreamgym_env._event_loop import run_sync
from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.config import EnvConfig
from dreamgym_env.domains import get_domain
from dreamgym_env.errors import DataFormatError
from dreamgym_env.experience.backends.base import Completion, CompletionRequest
from dreamgym_env.experience.backends.scripted import ScriptedBackend
from dreamgym_env.experience.model import ExperienceModel
from dreamgym_env.experience.schema import ExperienceOutput
from dreamgym_env.records import Step, Transition
from dreamgym_env.training.annotate import annotate_buffer
from dreamgym_env.training.sft_data import (
    SFTBuildConfig,
    build_sft_dataset,
    episodes_of,
    load_manifest,
    split_by_task,
    target_output,
    task_of,
)


def _episode(task: int, episode: int, steps: int = 3, source: str = "real") -> list[Transition]:
    out = []
    for s in range(steps):
        last = s == steps - 1
        out.append(
            Transition(
                domain="textworld",
                task_id=f"tw-{task}",
                task=f"quest {task}: take the key {task}",
                episode_id=f"tw-{task}-ep{episode}",
                step=s,
                state=f"-= Room {task} =-\nstate {s} of {episode}",
                action=f"take key {task}" if last else f"go east {s}",
                next_state=f"next {task}.{episode}.{s}",
                done=last,
                success=last and episode % 2 == 0,
                reward=float(last and episode % 2 == 0),
                source=source,  # type: ignore[arg-type]
                metadata={
                    "admissible_actions": [f"look {s}", "inventory"],
                    "prev_admissible_actions": ["look"],
                    "task_metadata": {},
                },
            )
        )
    return out


def _data(tasks: int = 10, episodes: int = 2) -> list[Transition]:
    return [t for task in range(tasks) for ep in range(episodes) for t in _episode(task, ep)]


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_split_by_task_is_disjoint_deterministic_and_nonempty():
    ids = [f"t{i}" for i in range(20)]
    train, held = split_by_task(ids + ids, 0.2, seed=3)
    assert set(train).isdisjoint(held) and set(train) | set(held) == set(ids)
    assert len(held) == 4
    assert (train, held) == split_by_task(list(reversed(ids)), 0.2, seed=3)
    assert split_by_task(["a", "b"], 0.01)[1] and split_by_task(["a", "b"], 0.99)[0]


def test_no_transition_of_an_eval_task_reaches_training(tmp_path):
    report = build_sft_dataset(_data(), tmp_path, SFTBuildConfig(top_k=2, eval_fraction=0.3))
    train, held = _rows(tmp_path / "train.jsonl"), _rows(tmp_path / "eval.jsonl")
    assert {r["task_id"] for r in train} == set(report.train_tasks)
    assert {r["task_id"] for r in held} == set(report.eval_tasks)
    assert set(report.train_tasks).isdisjoint(report.eval_tasks)
    for row in train + held:  # demonstrations come from training tasks, never from the row's own task
        text = row["prompt"][1]["content"]
        for task in report.eval_tasks:
            quest = f"quest {task.split('-')[1]}:"
            if row["task_id"] != task:
                assert quest not in text
    assert len(train) + len(held) == 60


def test_example_is_exactly_the_env_request(tmp_path):
    config = SFTBuildConfig(history_window=1, top_k=1, eval_fraction=0.3)
    build_sft_dataset(_data(), tmp_path, config)
    row = next(r for r in _rows(tmp_path / "train.jsonl") if r["step"] == 2)
    transitions = {(t.episode_id, t.step): t for t in _data()}
    episode = [transitions[(row["episode_id"], s)] for s in range(3)]
    current = episode[2]
    history = [Step(state=t.state, action=t.action) for t in episode[:2]]
    # The demonstration the builder chose is the one named in the prompt: find it to rebuild the request.
    demo = next(
        t
        for t in _data()
        if f"## Example 1 (task: {t.task})" in row["prompt"][1]["content"]
        and f"Next state:\n{t.next_state}\n" in row["prompt"][1]["content"]
    )
    model = ExperienceModel(get_domain("textworld"), ScriptedBackend(), EnvConfig(history_window=1, top_k=1))
    request = model.build_request(
        task_of(current),
        history,
        [demo],
        current.state,
        current.action,
        current.metadata["prev_admissible_actions"],
    )
    assert row["prompt"] == request.messages
    assert "state 0 of" not in row["prompt"][1]["content"]  # the window of 1 hides step 1
    answer = ExperienceOutput.model_validate_json(row["completion"][0]["content"])
    # TextWorld lists a state's commands itself, so its answers leave them out.
    assert answer.next_state == current.next_state and answer.done and answer.admissible_actions == []
    assert list(json.loads(row["completion"][0]["content"])) == list(ExperienceOutput.model_fields)


def test_targets_are_in_the_domains_answer_form():
    state = "Room: kitchen\nExits: east\nHere: key\nCarrying: nothing"
    after = "Done.\nRoom: kitchen\nExits: east\nHere: nothing\nCarrying: key"
    t = Transition(
        task_id="t", task="take the key", domain="textworld", episode_id="e", step=0, state=state,
        action="take key", next_state=after,
        metadata={"admissible_actions": ["drop key", "look"]},
    )  # fmt: skip
    textworld = target_output(t, get_domain("textworld"))
    assert (
        textworld.next_state == "Done.\nHere: nothing\nCarrying: key" and textworld.admissible_actions == []
    )
    webshop = target_output(t, get_domain("webshop"))  # a domain that asks the model for its actions
    assert webshop.next_state == after and webshop.admissible_actions == ["drop key", "look"]


def test_manifest_records_split_and_prompt_settings(tmp_path):
    build_sft_dataset(_data(), tmp_path, SFTBuildConfig(history_window=3, top_k=0, max_prompt_chars=10_000))
    manifest = load_manifest(tmp_path)
    assert manifest.settings["history_window"] == 3 and manifest.settings["top_k"] == 0
    assert manifest.train_examples + manifest.eval_examples == 60


def test_long_prompts_are_dropped_not_cut(tmp_path):
    report = build_sft_dataset(_data(), tmp_path, SFTBuildConfig(max_prompt_chars=1))
    assert report.train_examples == report.eval_examples == 0 and report.dropped_long == 60


def test_simulated_transitions_are_not_training_data(tmp_path):
    with pytest.raises(DataFormatError, match="no real or offline"):
        build_sft_dataset([t for t in _episode(0, 0, source="sim")], tmp_path)


def test_repeated_steps_in_an_episode_are_reported():
    data = _episode(0, 0)
    with pytest.raises(DataFormatError, match="dedup='episode'"):
        episodes_of(data + [data[0]])


def _teacher(request: CompletionRequest) -> str:
    user = request.messages[1]["content"]
    step = user.rsplit("Explain step ", 1)[1].rstrip(".")
    return json.dumps({"reasoning": f"because of step {step}"})


def test_annotation_is_recorded_and_resumes(tmp_path):
    path = tmp_path / "buffer.sqlite"
    with ReplayBuffer.open(path, dedup="episode") as buffer:
        buffer.add_many(_data(tasks=3))
        first = run_sync(annotate_buffer(buffer, ScriptedBackend(_teacher), limit=5, batch_size=2))
        assert (first.pending, first.annotated, first.failed) == (5, 5, 0)
    with ReplayBuffer.open(path, dedup="episode") as buffer:  # reopened: the traces survived
        done = [t for t in buffer.iter_transitions() if t.reasoning]
        assert len(done) == 5 and all(t.reasoning == f"because of step {t.step + 1}" for t in done)
        second = run_sync(annotate_buffer(buffer, ScriptedBackend(_teacher), concurrency=4))
        assert second.skipped_existing == 5 and second.annotated == 13
        assert all(t.reasoning for t in buffer.iter_transitions())


def test_annotation_keeps_received_traces_when_the_teacher_fails(tmp_path):
    calls = {"n": 0}

    class Flaky(ScriptedBackend):
        async def acomplete(self, request: CompletionRequest) -> Completion:
            calls["n"] += 1
            if calls["n"] > 3:
                raise RuntimeError("teacher down")
            return await super().acomplete(request)

    with ReplayBuffer.open(tmp_path / "b.sqlite", dedup="episode") as buffer:
        buffer.add_many(_data(tasks=2))
        with pytest.raises(RuntimeError):
            run_sync(annotate_buffer(buffer, Flaky(_teacher), concurrency=1, batch_size=100))
        assert sum(1 for t in buffer.iter_transitions() if t.reasoning) == 3


def test_unparsable_teacher_answers_are_counted_not_stored(tmp_path):
    with ReplayBuffer.open(tmp_path / "b.sqlite", dedup="episode") as buffer:
        buffer.add_many(_episode(0, 0))
        report = run_sync(annotate_buffer(buffer, ScriptedBackend(lambda r: "not json")))
        assert report.failed == 3 and report.annotated == 0
        assert not any(t.reasoning for t in buffer.iter_transitions())


def test_sft_example_uses_teacher_reasoning(tmp_path):
    data = _data(tasks=3)
    data[0] = data[0].model_copy(update={"reasoning": "the door was open"})
    build_sft_dataset(data, tmp_path, SFTBuildConfig(eval_fraction=0.34))
    rows = _rows(tmp_path / "train.jsonl") + _rows(tmp_path / "eval.jsonl")
    row = next(r for r in rows if r["episode_id"] == data[0].episode_id and r["step"] == 0)
    assert json.loads(row["completion"][0]["content"])["reasoning"] == "the door was open"


def test_sft_prompts_are_what_the_env_sends_during_an_episode(tmp_path):
    from dreamgym_env.env import DreamGymEnv

    actions = ["open chest", "examine chest", "take key"]
    episode = [
        Transition(
            domain="textworld",
            task_id="tw-x",
            task="take the key",
            episode_id="ep",
            step=i,
            state=f"-= Kitchen =-\nstate {i}",
            action=a,
            next_state=f"-= Kitchen =-\nstate {i + 1}",
            done=i == 2,
            success=i == 2,
            source="real",
            metadata={"admissible_actions": [f"cmd {i + 1}"], "prev_admissible_actions": [f"cmd {i}"]},
        )
        for i, a in enumerate(actions)
    ]
    others = _data(tasks=4)  # other tasks, so the split has a training side
    config = SFTBuildConfig(history_window=1, top_k=0, eval_fraction=0.5, seed=1)
    report = build_sft_dataset(episode + others, tmp_path, config)
    side = "train" if "tw-x" in report.train_tasks else "eval"
    rows = [r for r in _rows(tmp_path / f"{side}.jsonl") if r["task_id"] == "tw-x"]

    real = {(t.state, t.action): t for t in episode}

    def world(request: CompletionRequest) -> ExperienceOutput:
        t = real[(request.query.state, request.query.action)]
        return ExperienceOutput(
            reasoning="",
            next_state=t.next_state,
            admissible_actions=t.metadata["admissible_actions"],
            done=t.done,
            success=t.success,
        )

    backend = ScriptedBackend(world)
    task = task_of(episode[0]).model_copy(
        update={"metadata": {"initial_observation": episode[0].state, "initial_admissible": ["cmd 0"]}}
    )
    env = DreamGymEnv("textworld", tasks=[task], backend=backend, history_window=1, top_k=0)
    env.reset(seed=0)
    for action in actions:
        env.step(action)
    assert [r.messages for r in backend.requests] == [
        row["prompt"] for row in sorted(rows, key=lambda r: r["step"])
    ]


def test_heldout_tasks_and_episodes_split_three_ways(tmp_path):
    data = _data(tasks=6, episodes=3)
    config = SFTBuildConfig(
        history_window=1, top_k=1, heldout_tasks=("tw-4", "tw-5"), eval_episodes_per_task=1, seed=3
    )
    report = build_sft_dataset(data, tmp_path, config)
    assert report.eval_tasks == ["tw-4", "tw-5"] and len(report.train_tasks) == 4
    # One episode of each of the 4 training tasks is held out, never the same as a training episode.
    assert len(report.eval_episodes) == 4
    assert {e.rsplit("-ep", 1)[0] for e in report.eval_episodes} == {"tw-0", "tw-1", "tw-2", "tw-3"}
    train = _rows(tmp_path / "train.jsonl")
    episodes = _rows(tmp_path / "eval_episodes.jsonl")
    assert {r["episode_id"] for r in episodes} == set(report.eval_episodes)
    assert not {r["episode_id"] for r in train} & set(report.eval_episodes)
    assert {r["task_id"] for r in _rows(tmp_path / "eval.jsonl")} == {"tw-4", "tw-5"}
    assert report.eval_episode_examples == len(episodes) == 4 * 3
    # The manifest round-trips the settings, so evaluation rebuilds the same split.
    again = SFTBuildConfig(**load_manifest(tmp_path).settings)
    assert again == config


def test_other_episode_demonstrations_show_the_same_task_but_never_the_own_episode(tmp_path):
    config = SFTBuildConfig(
        history_window=0,
        top_k=1,
        eval_fraction=0.3,
        eval_episodes_per_task=1,
        demonstrations="other_episodes",
    )
    build_sft_dataset(_data(tasks=4, episodes=3), tmp_path, config)
    rows = _rows(tmp_path / "train.jsonl") + _rows(tmp_path / "eval_episodes.jsonl")
    same_task = 0
    for row in rows:
        text = row["prompt"][1]["content"]
        demo = text.split("# Similar real transitions\n", 1)[1].split("# Current step", 1)[0]
        own = row["episode_id"].rsplit("ep", 1)[1]
        assert f"of {own}\n" not in demo  # the example's own episode is never shown to it
        same_task += "(same task)" in demo
    assert same_task == len(rows)  # the state text matches its own task's other episodes best


def test_build_config_rejects_unknown_demonstration_scope():
    with pytest.raises(Exception, match="demonstrations must be"):
        SFTBuildConfig(demonstrations="anywhere")  # type: ignore[arg-type]


def test_state_answers_are_the_next_state_alone_with_the_same_prompts(tmp_path):
    as_json, as_state = tmp_path / "json", tmp_path / "state"
    build_sft_dataset(_data(), as_json, SFTBuildConfig(top_k=1, eval_fraction=0.3))
    report = build_sft_dataset(
        _data(), as_state, SFTBuildConfig(top_k=1, eval_fraction=0.3, answer_format="state")
    )
    json_rows, state_rows = _rows(as_json / "train.jsonl"), _rows(as_state / "train.jsonl")
    assert [r["prompt"] for r in json_rows] == [r["prompt"] for r in state_rows]
    for j, s in zip(json_rows, state_rows, strict=True):
        text = s["completion"][0]["content"]
        assert text == ExperienceOutput.model_validate_json(j["completion"][0]["content"]).next_state
        assert not text.startswith("{")
    assert report.settings["answer_format"] == "state"
    assert SFTBuildConfig(**report.settings).env_config().answer_format == "state"


def _react_file(path, games: int = 5):
    """ALFWorld's ReAct file in small: each game twice, as ``act_clean_<g>`` and ``react_clean_<g>`` (thoughts
    between the same actions), as ``react_alfworld_3prompts.json`` holds it; ``zq<g>x`` marks game g's text."""
    transcripts = {}
    for g in range(games):
        opening = (
            f"You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a countertop 1, "
            f"and a sinkbasin 1 (zq{g}x).\nYour task is to: put a clean cup in cabinet.\n"
        )
        turns = [
            ("go to countertop 1", f"On the countertop 1, you see a cup {g + 1} (zq{g}x)."),
            (f"take cup {g + 1} from countertop 1", f"You pick up the cup {g + 1} from the countertop 1."),
            ("go to sinkbasin 1", f"On the sinkbasin 1, you see nothing (zq{g}x)."),
            (f"clean cup {g + 1} with sinkbasin 1", f"You clean the cup {g + 1} using the sinkbasin 1."),
        ]
        acted = "".join(f"> {action}\n{seen}\n" for action, seen in turns)
        transcripts[f"act_clean_{g}"] = opening + acted
        transcripts[f"react_clean_{g}"] = opening + "> think: First I need a cup.\nOK.\n" + acted
    path.write_text(json.dumps(transcripts))
    return path


def _demonstrations_section(row) -> str:
    text = row["prompt"][-1]["content"]
    return next((part for part in text.split("\n# ") if part.startswith("Similar real transitions")), "")


def test_one_alfworld_game_never_lands_on_both_sides_of_the_split(tmp_path):
    """The ReAct file plays each game twice under two task ids (act_X, react_X).

    Measured before: the split was by task id, so a game's act_X trained while its react_X was held out
    (every seed here put a game on both sides), and a react_X prompt's demonstrations were its act_X
    twin's steps, the same states; the nearest-transition baseline scored 0.892 exact match on the
    real file's "held-out" split.
    """
    from dreamgym_env.buffer.loaders.alfworld import load_alfworld_react

    transitions = [
        t for r in load_alfworld_react(_react_file(tmp_path / "react.json")) for t in r.transitions
    ]
    games = {t.task_id: t.game_id for t in transitions}
    assert (
        games["alfworld-react-act_clean_3"]
        == games["alfworld-react-react_clean_3"]
        != games["alfworld-react-act_clean_2"]
    )
    assert len(set(games.values())) == 5 and len(games) == 10
    for seed in range(6):
        out = tmp_path / f"sft-{seed}"
        report = build_sft_dataset(
            transitions, out, SFTBuildConfig(domain="alfworld", top_k=2, eval_fraction=0.2, seed=seed)
        )
        train_games = {games[t] for t in report.train_tasks}
        eval_games = {games[t] for t in report.eval_tasks}
        assert train_games.isdisjoint(eval_games), (seed, report.eval_tasks)
        assert len(eval_games) == 1 and len(report.eval_tasks) == 2  # 0.2 of the 5 games, both runs of it
        for row in _rows(out / "train.jsonl") + _rows(out / "eval.jsonl"):
            own = f"zq{row['task_id'][-1]}x"  # the row's game's mark: no demonstration shows its twin
            section = _demonstrations_section(row)
            assert section and own not in section, (seed, row["task_id"])
    # Holding out one run of a game holds out the game.
    report = build_sft_dataset(
        transitions,
        tmp_path / "named",
        SFTBuildConfig(domain="alfworld", top_k=1, heldout_tasks=("alfworld-react-react_clean_0",)),
    )
    assert report.eval_tasks == ["alfworld-react-act_clean_0", "alfworld-react-react_clean_0"]


def test_a_transition_without_a_game_id_is_its_own_tasks_game():
    (first, *_) = _episode(0, 0)
    assert first.game_id == "tw-0"
    assert split_by_task([f"t{i}" for i in range(20)], 0.2, seed=3) == split_by_task(
        [f"t{i}" for i in range(20)], 0.2, seed=3, game_of={}
    )
