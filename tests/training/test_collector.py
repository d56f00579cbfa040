"""LLM-policy group rollouts: chat trajectories, group advantages, and their TRL dataset form."""

from __future__ import annotations

import asyncio
import string
from collections.abc import Sequence
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from dreamgym_env.experience.backends.base import CompletionRequest
from dreamgym_env.experience.backends.scripted import ScriptedBackend
from dreamgym_env.experience.schema import ExperienceOutput
from dreamgym_env.records import Task
from dreamgym_env.training.collector import (
    ChatPolicy,
    Message,
    RolloutBatch,
    collect_groups,
    group_advantages,
)

TASKS = [
    Task(task_id="t-key", domain="textworld", instruction="take the key from the chest."),
    Task(task_id="t-apple", domain="textworld", instruction="take the apple and eat it."),
]


def key_world(request: CompletionRequest) -> ExperienceOutput:
    """Taking the key wins; taking the stone ends the episode as a loss; anything else changes nothing.

    The answer is TextWorld's: a result line and the lines that change (a key and a stone on the floor,
    so the commands TextWorld lists for the state include ``take key`` and ``take stone``). ``look``,
    ``inventory`` and ``examine`` never reach it: the domain's rules answer them.
    """
    query = request.query
    assert query is not None
    won = query.action == "take key"
    lost = query.action == "take stone"
    return ExperienceOutput(
        reasoning="scripted",
        next_state=f"You did: {query.action}.\nHere: key, stone",
        admissible_actions=["take key", "take stone", "look"],
        done=won or lost,
        success=won,
    )


class RandomChoicePolicy:
    """A stand-in for a served model: a random admissible action, after a tiny await."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.seen: list[list[Message]] = []

    async def act(self, messages: Sequence[Message], admissible_actions: Sequence[str]) -> str:
        self.seen.append(list(messages))
        await asyncio.sleep(0)
        return str(self.rng.choice(list(admissible_actions)))


def collect(group_size: int = 6, **kwargs: object) -> RolloutBatch:
    env_kwargs = {"backend": ScriptedBackend(key_world), "max_steps": 4}
    return collect_groups(
        "DreamGym/TextWorld-v0", TASKS, RandomChoicePolicy(0), group_size, env_kwargs=env_kwargs, **kwargs
    )  # type: ignore[arg-type]


def test_group_advantages() -> None:
    np.testing.assert_allclose(group_advantages([1, 0, 0, 1]), [1, -1, -1, 1], atol=1e-5)
    np.testing.assert_allclose(group_advantages([1, 0, 0, 0], scale="none"), [0.75, -0.25, -0.25, -0.25])
    assert not group_advantages([1, 1, 1]).any()  # no signal in a uniform group


def test_groups_are_task_major_chats_with_centred_advantages() -> None:
    batch = collect(group_size=6, max_concurrency=5)
    assert len(batch) == 12 and [len(g) for g in batch.groups] == [6, 6]
    for task, group in zip(TASKS, batch.groups, strict=True):
        assert {t.task_id for t in group} == {task.task_id} and len({t.group_id for t in group}) == 1
        assert abs(sum(t.advantage for t in group)) < 1e-6
        for t in group:
            roles = [m["role"] for m in t.messages]
            assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"
            assert roles[1:] == ["user", "assistant"] * t.num_turns
            assert task.instruction in t.messages[1]["content"]
            assert t.reward == (1.0 if t.success else 0.0) and t.rewards[-1] == t.reward
            assert t.success == (t.messages[-1]["content"] == "take key") and t.source == "sim"
            assert t.final_observation.startswith("You did:") or t.truncated
    assert batch.groups[0][0].group_id != batch.groups[1][0].group_id
    assert 0 < batch.success_rate < 1  # random play both wins and loses: advantages carry signal
    assert set(batch.reward_variance()) == {"t-key", "t-apple"}


def test_policy_sees_the_growing_conversation() -> None:
    policy = RandomChoicePolicy(1)
    collect_groups(
        "DreamGym/TextWorld-v0",
        TASKS[:1],
        policy,
        2,
        env_kwargs={"backend": ScriptedBackend(key_world), "max_steps": 3},
    )
    lengths = sorted({len(m) for m in policy.seen})
    assert lengths[0] == 2 and all(b - a == 2 for a, b in zip(lengths, lengths[1:], strict=False))
    assert "Admissible actions:" in policy.seen[0][1]["content"]


def test_trl_dataset_formats_and_filtering() -> None:
    datasets = pytest.importorskip("datasets")
    pytest.importorskip("trl")
    from trl.data_utils import is_conversational

    from dreamgym_env.training.trl_format import to_trl_dataset

    batch = collect()
    ds = to_trl_dataset(batch, format="prompt_completion")
    assert isinstance(ds, datasets.Dataset) and len(ds) == len(batch)
    assert {"prompt", "completion", "reward", "advantage", "group_id"} <= set(ds.column_names)
    assert "messages" not in ds.column_names and is_conversational(ds[0])
    assert ds[0]["prompt"] + ds[0]["completion"] == batch.trajectories[0].messages
    chats = to_trl_dataset(batch, format="messages")
    assert is_conversational(chats[0]) and chats[0]["messages"] == batch.trajectories[0].messages
    better = to_trl_dataset(batch, min_advantage=0.0)
    kept = [t for t in batch.trajectories if t.advantage > 0]
    assert 0 < len(kept) < len(batch) and len(better) == sum(t.num_turns for t in kept)
    assert all(a > 0 for a in better["advantage"]) and all(s for s in better["success"])
    empty = to_trl_dataset(RolloutBatch([], 2))
    assert len(empty) == 0 and {"prompt", "completion", "turn"} <= set(empty.column_names)


def test_trl_sft_trainer_trains_on_the_rollouts(smoke_model_dir: Path, tmp_path: Path) -> None:
    """The exported dataset goes through TRL's own tokenisation and one optimiser step."""
    trl = pytest.importorskip("trl")
    import transformers

    from dreamgym_env.training.trl_format import to_trl_dataset

    batch = collect(group_size=4)
    dataset = to_trl_dataset(batch, min_advantage=0.0)
    model = transformers.AutoModelForCausalLM.from_pretrained(smoke_model_dir)
    tokenizer = transformers.AutoTokenizer.from_pretrained(smoke_model_dir)
    config = trl.SFTConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=2,
        report_to=[],
        use_cpu=True,
        max_length=1024,
        save_strategy="no",
    )
    trainer = trl.SFTTrainer(model=model, args=config, train_dataset=dataset, processing_class=tokenizer)
    assert "input_ids" in trainer.train_dataset.column_names
    output = trainer.train()
    assert np.isfinite(output.training_loss)


def test_unreachable_policy_endpoint_is_blamed_on_the_server() -> None:
    from dreamgym_env.errors import ServerUnreachableError

    policy = ChatPolicy("http://127.0.0.1:9/v1", "nobody", timeout_s=2.0, max_retries=0)
    with pytest.raises(ServerUnreachableError, match="127.0.0.1:9"):
        collect_groups(
            "DreamGym/TextWorld-v0", TASKS[:1], policy, 1, env_kwargs={"backend": ScriptedBackend(key_world)}
        )


@pytest.mark.integration
def test_served_policy_plays_simulated_groups(vllm_server) -> None:  # type: ignore[no-untyped-def]
    """The smoke model is both the experience model and the policy; the policy answers are constrained."""
    # The choice grammar admits any tokenisation of an action, down to one character per token: 64
    # tokens let every listed action (under 30 characters here) end, however the model splits it.
    policy = ChatPolicy(vllm_server.base_url, vllm_server.model, temperature=1.0, max_tokens=64)
    env_kwargs = {
        "base_url": vllm_server.base_url,
        "model": vllm_server.model,
        "max_steps": 2,
        "on_invalid_output": "fail_state",
    }
    tasks = [t.model_copy(update={"domain": "textworld"}) for t in TASKS]
    batch = collect_groups("DreamGym/TextWorld-v0", tasks, policy, 2, env_kwargs=env_kwargs)
    assert len(batch) == 4
    for t in batch.trajectories:
        user_turns = [m["content"] for m in t.messages if m["role"] == "user"]
        actions = [m["content"] for m in t.messages if m["role"] == "assistant"]
        assert actions and len(user_turns) == len(actions)
        # The first action was chosen among the first state's admissible actions (structured outputs).
        listed = user_turns[0].split("Admissible actions: ")[1].split("; ")
        assert actions[0] in listed


def test_simulated_groups_step_one_vector_env_with_batched_retrieval() -> None:
    """All live episodes advance in one public vector step: one buffer search per step, not per episode."""
    from tests.test_vector import _seeded_buffer

    buffer = _seeded_buffer()
    calls = {"retrieve_many": 0, "retrieve": 0}
    for name in calls:
        method = getattr(buffer, name)

        def counted(*args: object, _method: object = method, _name: str = name, **kwargs: object) -> object:
            calls[_name] += 1
            return _method(*args, **kwargs)  # type: ignore[operator]

        setattr(buffer, name, counted)

    class Always:
        async def act(self, messages: Sequence[Message], admissible_actions: Sequence[str]) -> str:
            return "inventory"  # never ends an episode: all run to the step limit together

    env_kwargs = {"backend": ScriptedBackend(key_world), "max_steps": 3, "retriever": buffer, "top_k": 2}
    batch = collect_groups("DreamGym/TextWorld-v0", TASKS, Always(), 2, env_kwargs=env_kwargs)
    assert len(batch) == 4 and all(t.truncated and t.num_turns == 3 for t in batch.trajectories)
    assert calls == {"retrieve_many": 3, "retrieve": 0}  # 3 vector steps of 4 episodes each


class KeyRoom(gym.Env):
    """A real-style env (no ``astep``, no vector entry point): taking the key wins, looking loses."""

    observation_space = gym.spaces.Text(100, charset=string.printable)
    action_space = gym.spaces.Text(100, charset=string.printable)

    def _info(self, success: bool = False) -> dict:
        actions = ["take key", "look", "inventory"]
        return {"task": self.task.instruction, "task_id": self.task.task_id, "admissible_actions": actions,
                "success": success}  # fmt: skip

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.task, self.steps = (options or {})["task"], 0
        return "A room with a chest.", self._info()

    def step(self, action):
        self.steps += 1
        won, lost = action == "take key", action == "look"
        return f"You did: {action}.", float(won), won or lost, self.steps >= 4, self._info(won)


def test_group_rollouts_on_an_env_without_a_vector_entry_point_play_every_episode_in_threads():
    env_id = "TestKeyRoom-Real-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=KeyRoom)
    assert gym.spec(env_id).vector_entry_point is None
    batch = collect_groups(
        env_id,
        TASKS,
        RandomChoicePolicy(0),
        group_size=3,
        max_concurrency=2,
        seed=0,
        reset_options=lambda task: {"task": task},
    )
    assert len(batch) == 6 and [len(g) for g in batch.groups] == [3, 3]
    for trajectory in batch.trajectories:
        last = trajectory.messages[-1]["content"]
        assert trajectory.success == (last == "take key") and trajectory.reward == float(last == "take key")
        assert trajectory.terminated or trajectory.truncated
