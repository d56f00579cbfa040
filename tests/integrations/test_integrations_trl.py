"""TRL's GRPOTrainer drives DreamGym episodes through the environment_factory adapter."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from dreamgym_env.errors import ConfigError
from dreamgym_env.experience.backends.base import CompletionRequest
from dreamgym_env.experience.backends.scripted import ScriptedBackend
from dreamgym_env.experience.schema import ExperienceOutput
from dreamgym_env.integrations.trl import EPISODE_OVER, TASK_COLUMN, DreamGymEnvironments
from tests._toy import ToyDomain
from tests.training.test_collector import TASKS, key_world


def make_envs(**kwargs: Any) -> DreamGymEnvironments:
    kwargs = {"backend": ScriptedBackend(key_world), "max_steps": 3, "tasks": TASKS, **kwargs}
    return DreamGymEnvironments("DreamGym/TextWorld-v0", **kwargs)


def test_reset_starts_the_rows_task_and_act_plays_it_to_the_end() -> None:
    envs = make_envs()
    rows = envs.rows()
    assert [r["task_id"] for r in rows] == [t.task_id for t in TASKS]
    assert rows[0]["prompt"][0]["role"] == "system" and rows[0]["prompt"][-1] == {
        "role": "user",
        "content": "",
    }
    env = envs()
    first = env.reset(**rows[1])
    assert TASKS[1].instruction in first and "Admissible actions:" in first
    assert env.act("inventory").startswith("Nothing happens.")  # the domain's rules answer it
    assert "You did: take lamp from shelf." in env.act("take lamp from shelf")
    assert "the task is complete" in env.act("take key")
    assert env.act("take key") == EPISODE_OVER and env.get_reward() == 1.0
    record = env.episode
    assert (
        record is not None
        and record.task_id == TASKS[1].task_id
        and record.actions == ["inventory", "take lamp from shelf", "take key"]
    )
    assert record.success and list(envs.episodes) == [record]
    env.reset(**rows[0])
    assert env.get_reward() == 0.0 and env.act("take stone").endswith("the task was not completed.")


def test_every_environment_shares_one_backend() -> None:
    envs = DreamGymEnvironments("DreamGym/TextWorld-v0", backend="scripted", max_steps=2)
    assert envs.tasks  # the domain's seed tasks by default
    a, b = envs(), envs()
    a.reset(**envs.rows()[0])
    b.reset(**envs.rows()[0])
    assert a._env is not b._env and a._env.unwrapped.backend is b._env.unwrapped.backend is envs.backend


def test_a_row_without_a_task_is_refused_with_what_is_accepted() -> None:
    env = make_envs()()
    with pytest.raises(ConfigError, match=TASK_COLUMN):
        env.reset(prompt=[{"role": "user", "content": ""}])


def test_a_curriculum_draws_each_rows_task_and_hears_the_outcomes() -> None:
    pytest.importorskip("datasets")

    class Recorder:
        def __init__(self) -> None:
            self.outcomes: list[tuple[str, float]] = []
            self.db = sqlite3.connect(":memory:")  # like a curriculum's task pool: not picklable

        def sample(self, rng: np.random.Generator) -> Any:
            return TASKS[int(rng.integers(len(TASKS)))]

        def record_outcome(self, task: Any, reward: float, success: bool) -> None:
            self.outcomes.append((task.task_id, reward))

    sampler = Recorder()
    envs = make_envs(tasks=sampler)
    rows = list(envs.dataset(num_rows=4))
    assert len(rows) == 4 and {r["task_id"] for r in rows} <= {t.task_id for t in TASKS}
    env = envs()
    env.reset(**rows[0])
    env.act("take key")
    assert sampler.outcomes == [(rows[0]["task_id"], 1.0)]


TOY_ID = "DreamGym/Toy-v0"


def room_world(request: CompletionRequest) -> ExperienceOutput:
    """Going to room 1 wins, stopping loses: every episode ends at its first action."""
    assert request.query is not None
    action = request.query.action
    return ExperienceOutput(
        reasoning="scripted",
        next_state=f"You did {action}.",
        admissible_actions=["go[1]", "stop"],
        done=action in ("go[1]", "stop"),
        success=action == "go[1]",
    )


def toy_envs(backend: ScriptedBackend) -> DreamGymEnvironments:
    """The toy domain (short states, short prompts) under a registered id, as a user's own domain would be."""
    if TOY_ID not in gym.registry:
        gym.register(
            TOY_ID,
            entry_point="dreamgym_env.env:DreamGymEnv",
            vector_entry_point="dreamgym_env.vector:DreamGymVectorEnv",
            kwargs={"domain": ToyDomain()},
        )
    return DreamGymEnvironments(TOY_ID, backend=backend, max_steps=3, system_prompt="Reach the room.")


def grpo_trainer(
    envs: DreamGymEnvironments, tmp_path: Path, max_steps: int = 2, max_completion_length: int = 48
) -> Any:
    """GRPO on a tiny policy that was taught the form of an ``act`` call (its tokenizer makes each call
    one token, so a few optimizer steps suffice); the choice between the calls is left to GRPO."""
    import trl

    from tests._tiny_policy import teach_tool_calls, tiny_model, tiny_tokenizer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    probe = envs()
    prompts = []
    for row in envs.rows():
        prompt = [dict(m) for m in row["prompt"]]
        prompt[-1]["content"] = probe.reset(**row)
        prompts.append(prompt)
    plain = tiny_tokenizer()
    texts = [plain.apply_chat_template(p, tools=[probe.act], tokenize=False) for p in prompts]
    tok = tiny_tokenizer(texts * 20, TOY_ACTIONS)
    model = tiny_model(tok)
    teach_tool_calls(model, tok, prompts, TOY_ACTIONS, tools=[probe.act], steps=60)
    args = trl.GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=max_steps,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=max_completion_length,
        max_tool_calling_iterations=2,
        learning_rate=1e-3,
        logging_steps=1,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        seed=0,
    )
    return trl.GRPOTrainer(
        model=model,
        args=args,
        train_dataset=envs.dataset(repeats=4),
        processing_class=tok,
        environment_factory=envs,
    )


TOY_ACTIONS = ["go[1]", "stop"]  # one wins, one loses: a group of both carries a learning signal


def test_grpo_trainer_takes_two_optimisation_steps_through_the_adapter(tmp_path: Path) -> None:
    pytest.importorskip("trl")
    backend = ScriptedBackend(room_world)
    envs = toy_envs(backend)
    trainer = grpo_trainer(envs, tmp_path)
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 2
    played = [e for e in envs.episodes if e.actions]
    assert len(played) == 2 * 4, "every rollout should have called the act tool and ended its episode"
    assert {a for e in played for a in e.actions} <= set(TOY_ACTIONS) and len(backend.requests) == len(played)
    for episode in played:
        assert episode.total_reward == (1.0 if episode.actions == ["go[1]"] else 0.0)
    logged = [log for log in trainer.state.log_history if "rewards/DreamGymToolEnv/mean" in log]
    assert len(logged) == 2
    assert np.mean([log["rewards/DreamGymToolEnv/mean"] for log in logged]) == pytest.approx(
        np.mean([e.total_reward for e in played])
    )
    assert any(not torch_allclose(before[k], v) for k, v in trainer.model.named_parameters())


def torch_allclose(a: Any, b: Any) -> bool:
    import torch

    return bool(torch.allclose(a, b.detach()))


@pytest.mark.integration
def test_grpo_trainer_steps_against_the_served_experience_model(vllm_server: Any, tmp_path: Path) -> None:
    """The same two GRPO steps, with every transition predicted by the real vLLM server."""
    pytest.importorskip("trl")
    if TOY_ID not in gym.registry:
        toy_envs(ScriptedBackend(room_world))
    envs = DreamGymEnvironments(
        TOY_ID,
        base_url=vllm_server.base_url,
        model=vllm_server.model,
        max_steps=2,
        on_invalid_output="fail_state",
        system_prompt="Reach the room.",
    )
    trainer = grpo_trainer(envs, tmp_path, max_completion_length=256)
    trainer.train()
    assert trainer.state.global_step == 2
    # Episodes the served model did not end within the tool-call budget are left unfinished: look at
    # every rollout's record, finished or not.
    played = [i.episode for i in envs._instances if i.episode is not None and i.episode.actions]
    assert played and all(set(e.actions) <= set(TOY_ACTIONS) for e in played)
    assert all(len(e.observations) == len(e.actions) + 1 for e in played)
    backend = envs.backend
    assert backend is not None and all(
        r._env is None or r._env.unwrapped.backend is backend for r in envs._instances
    )


def test_a_completion_budget_that_cannot_hold_one_observation_is_refused_with_the_size_needed() -> None:
    from tests._tiny_policy import tiny_tokenizer

    envs, tok = make_envs(), tiny_tokenizer()
    per_turn = envs.check_completion_budget(tok, 4096, turns=2)
    first = envs().reset(**envs.rows()[0])  # the first task's observation, as a rollout sees it
    assert per_turn > len(tok(first)["input_ids"]) // 2 > 0
    with pytest.raises(ConfigError, match=rf"at least {3 * per_turn}\b"):
        envs.check_completion_budget(tok, 3 * per_turn - 1, turns=3)
    assert envs.check_completion_budget(tok, 3 * per_turn, turns=3) == per_turn
