"""The verifiers environment: a DreamGym episode as a multi-turn exchange with a verifiers agent.

verifiers 0.4.0 requires ``openai<3``, older than the client this package uses, so it is installed in
a venv of its own (``.venv-verifiers``, made by ``scripts/install_integrations.sh``), where
``scripts/test.sh`` runs this file against the real package: the env is loaded by verifiers' own
plugin loader from a taskset id, and each episode is a real rollout: a verifiers agent (the ``null``
chat harness, run by ``uv`` in the subprocess runtime) talks through verifiers' interception server
and its training client to a scripted policy behind a vLLM-style ``/inference/v1/generate`` endpoint,
and the trace holds the tokens a trainer reads. Where verifiers is not installed (``.venv``), the same
tests run against a stand-in with verifiers 0.4.0's shapes (``TaskData``, ``Task``, ``Taskset``,
``TasksetConfig``, ``EnvConfig``, ``AgentConfig``, ``Env`` loading its taskset by id, and an agent's
``interaction(task)`` whose ``turn()`` gives a segment with ``last_reply`` and ``terminated``), and
the tests marked ``verifiers`` are deselected.

verifiers resolves a taskset id to an importable top-level module that exports the taskset (and the
env) in ``__all__``; ``dreamgym_env.integrations.verifiers`` is not one (an id with dots fails), so
these tests load it through the package's ``dreamgym_verifiers``, as a user does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import importlib.util
import os
import sys
import types
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest
from pydantic import BaseModel, ConfigDict

from dreamgym_env.experience.backends.scripted import ScriptedBackend
from tests._http import serve_json
from tests.integrations.test_integrations_trl import TOY_ID, room_world, toy_envs

D = TypeVar("D")
C = TypeVar("C")

REAL_VERIFIERS = importlib.util.find_spec("verifiers") is not None
#: The taskset id: a package in the test's folder that re-exports the adapter (see the docstring).
TASKSET_ID = "dreamgym_verifiers"


def stand_in_verifiers(monkeypatch: pytest.MonkeyPatch) -> None:
    class TaskData(BaseModel):
        model_config = ConfigDict(frozen=True)
        idx: int | None = None
        id: str | None = None
        name: str | None = None
        prompt: Any = None
        system_prompt: str | None = None

    class TaskConfig(BaseModel):
        pass

    class TasksetConfig(BaseModel):
        id: str = ""
        task: TaskConfig = TaskConfig()

    class AgentConfig(BaseModel):
        pass

    class EnvConfig(BaseModel):
        taskset: TasksetConfig = TasksetConfig()

    class Task(Generic[D]):
        def __init__(self, data: Any, config: Any = None) -> None:
            self.data, self.config = data, config

    class Taskset(Generic[D, C]):
        def __init__(self, config: Any) -> None:
            self.config = config

    class Env(Generic[C]):
        def __init__(self, config: Any) -> None:
            # As the real one: the taskset id names a module exporting one Taskset subclass.
            module = importlib.import_module(config.taskset.id)
            (taskset,) = [
                obj
                for name in module.__all__
                if isinstance(obj := getattr(module, name), type) and issubclass(obj, Taskset)
            ]
            self.config, self.taskset = config, taskset(config.taskset)

    v1 = types.ModuleType("verifiers.v1")
    for cls in (TaskData, TaskConfig, TasksetConfig, AgentConfig, EnvConfig, Task, Taskset, Env):
        setattr(v1, cls.__name__, cls)
    root = types.ModuleType("verifiers")
    root.v1 = v1  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "verifiers", root)
    monkeypatch.setitem(sys.modules, "verifiers.v1", v1)
    monkeypatch.delitem(sys.modules, "dreamgym_env.integrations.verifiers", raising=False)


@pytest.fixture
def adapter(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """The adapter module (on the real verifiers where it is installed), loadable as :data:`TASKSET_ID`."""
    if not REAL_VERIFIERS:
        stand_in_verifiers(monkeypatch)
    toy_envs(ScriptedBackend(room_world))  # registers the toy id
    module = importlib.import_module("dreamgym_env.integrations.verifiers")
    monkeypatch.delitem(sys.modules, TASKSET_ID, raising=False)  # re-export the module imported above
    # verifiers' agent runs its chat program with uv, which scripts/install_integrations.sh puts beside python.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return module


def make_env(adapter: Any, **taskset: Any) -> Any:
    """The env for a :class:`DreamGymTasksetConfig` of ``taskset``, loaded as verifiers loads it."""
    taskset = {"id": TASKSET_ID, "env_id": TOY_ID, **taskset}
    if not REAL_VERIFIERS:
        config = adapter.DreamGymEnvConfig(taskset=adapter.DreamGymTasksetConfig(**taskset))
        return adapter.DreamGymMultiTurnEnv(config)
    from verifiers.v1.utils.loaders import load_environment

    # The player is a plain chat agent (verifiers' `null` harness) run on this machine.
    player = {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}
    return load_environment(adapter.DreamGymEnvConfig.model_validate({"taskset": taskset, "player": player}))


@functools.cache
def chatml_tokenizer() -> Any:
    import tokenizers
    import transformers

    from dreamgym_env.training.hf_model import train_bpe_tokenizer

    texts = ["You did go[2]. Task: Reach room 1 Admissible actions: go[1]; stop"] * 20
    return train_bpe_tokenizer(transformers, tokenizers, texts, vocab_size=1000, model_max_length=2048)


@dataclass
class Played:
    """What one episode left: the trace's rewards, info and stop condition, the user turns the agent saw."""

    rewards: dict[str, float]
    info: dict[str, Any]
    stopped: str | None
    seen: list[str]
    trace: Any = None
    episode: Any = None
    tokenizer: Any = None
    prompts: list[str] = field(default_factory=list)


class Trace:
    def __init__(self) -> None:
        self.rewards: dict[str, float] = {}
        self.info: dict[str, Any] = {}
        self.stopped: str | None = None

    def record_reward(self, name: str, value: float, weight: float = 1.0) -> None:
        self.rewards[name] = value * weight

    def stop(self, condition: str, override: bool = False) -> None:
        self.stopped = condition


class Player:
    """A stand-in agent that replies with its script, one reply per user turn, and records what it saw."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.seen: list[str] = []
        self.trace = Trace()

    @contextlib.asynccontextmanager
    async def interaction(self, task: Any) -> AsyncIterator[Any]:
        player = self

        class Interaction:
            trace = player.trace

            async def turn(self, messages: Any = None) -> Any:
                player.seen.append(str(messages))
                reply = (
                    player.replies[len(player.seen) - 1] if len(player.seen) <= len(player.replies) else ""
                )
                return types.SimpleNamespace(last_reply=reply, terminated=False)

        yield Interaction()


@contextlib.contextmanager
def scripted_policy(replies: list[str]) -> Iterator[tuple[str, list[str]]]:
    """A vLLM-style ``/inference/v1/generate`` endpoint whose policy gives ``replies[k]`` at its k-th user turn.

    Yields the base URL and the prompts it was sent (decoded). Each reply's tokens end with the eos.
    """
    tok = chatml_tokenizer()
    prompts: list[str] = []

    def generate(body: dict[str, Any], _port: int) -> dict[str, Any]:
        prompt = tok.decode(body["token_ids"])
        prompts.append(prompt)
        turn = prompt.count("<|im_start|>user")
        reply = replies[turn - 1] if turn <= len(replies) else ""
        ids = tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        logprobs = [{"token": f"token_id:{i}", "logprob": -0.25} for i in ids]
        return {
            "request_id": f"generate-{len(prompts)}",
            "prompt_token_ids": body["token_ids"],
            "choices": [
                {"index": 0, "token_ids": ids, "finish_reason": "stop", "logprobs": {"content": logprobs}}
            ],
        }

    server = serve_json(generate)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", prompts
    finally:
        server.shutdown()
        server.server_close()


def play(env: Any, task: Any, replies: list[str], tmp_path: Path) -> Played:
    """One episode of ``task`` with a policy that gives ``replies`` in turn (then empty replies)."""
    if not REAL_VERIFIERS:
        player = Player(replies)
        asyncio.run(env.run(task, types.SimpleNamespace(player=player)))
        trace = player.trace
        return Played(trace.rewards, trace.info, trace.stopped, player.seen)
    import verifiers.v1 as vf

    tok = chatml_tokenizer()
    tok.save_pretrained(tmp_path / "policy")

    async def episode(base_url: str) -> Any:
        client = vf.TrainClientConfig(
            base_url=base_url, api_key_var="DREAMGYM_TEST_KEY", renderer_model_name=str(tmp_path / "policy")
        )
        async with env.serving():
            return await env.run_episode(task, vf.ModelContext(model="policy", client=client))

    with scripted_policy(replies) as (base_url, prompts):
        result = asyncio.run(asyncio.wait_for(episode(base_url), timeout=300))
    assert not result.errors, result.errors
    (trace,) = result.traces
    # The user turn each generation answered: the last one of its prompt.
    seen = [p.split("<|im_start|>user\n")[-1].split("<|im_end|>")[0] for p in prompts]
    rewards = {
        name: reward.score * reward.weight for name, reward in trace.rewards.items() if reward is not None
    }
    return Played(rewards, trace.info, trace.stop_condition, seen, trace, result, tok, prompts)


def test_taskset_yields_the_ids_tasks_and_the_env_plays_one_to_its_end(adapter: Any, tmp_path: Path) -> None:
    env = make_env(adapter, env_kwargs={"backend": ScriptedBackend(room_world), "max_steps": 5})
    assert isinstance(env, adapter.DreamGymMultiTurnEnv) and isinstance(env.taskset, adapter.DreamGymTaskset)
    tasks = list(env.taskset.load())
    assert [t.data.id for t in tasks] == ["toy-1", "toy-2", "toy-3"]
    assert tasks[0].data.prompt is None and "go[N]" in tasks[0].data.system_prompt

    played = play(env, tasks[0], ["go[2]", "go[1]", "never sent"], tmp_path)
    assert "Reach room 1" in played.seen[0] and "You did go[2]." in played.seen[1]
    assert len(played.seen) == 2  # the winning move ended the exchange
    assert played.rewards == {adapter.REWARD_NAME: 1.0}
    assert played.info["success"] and played.info["actions"] == ["go[2]", "go[1]"]


def test_an_empty_reply_stops_the_episode(adapter: Any, tmp_path: Path) -> None:
    env = make_env(
        adapter, env_kwargs={"backend": ScriptedBackend(room_world), "max_steps": 5}, task_ids=["toy-2"]
    )
    (task,) = env.taskset.load()
    played = play(env, task, [" "], tmp_path)
    assert played.stopped == "empty_action" and played.rewards[adapter.REWARD_NAME] == 0.0
    assert played.info["actions"] == [] and len(played.seen) == 1


def test_unknown_task_ids_are_named_with_the_available_ones(adapter: Any) -> None:
    config = adapter.DreamGymTasksetConfig(
        env_id=TOY_ID, env_kwargs={"backend": "scripted"}, task_ids=["nope"]
    )
    with pytest.raises(ValueError, match="toy-1"):
        list(adapter.DreamGymTaskset(config).load())


def test_without_verifiers_the_import_names_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from dreamgym_env.errors import DependencyNotInstalled

    monkeypatch.setitem(sys.modules, "verifiers", None)
    monkeypatch.setitem(sys.modules, "verifiers.v1", None)
    monkeypatch.delitem(sys.modules, "dreamgym_env.integrations.verifiers", raising=False)
    with pytest.raises(DependencyNotInstalled, match="verifiers"):
        importlib.import_module("dreamgym_env.integrations.verifiers")


@pytest.mark.verifiers
def test_a_real_rollout_trains_only_on_the_policys_tokens(adapter: Any, tmp_path: Path) -> None:
    """The trace's training sample: the tokens with sampled mask 1 are the policy's replies, nothing else."""
    import verifiers.v1 as vf

    env = make_env(
        adapter, env_kwargs={"backend": ScriptedBackend(room_world), "max_steps": 5}, task_ids=["toy-1"]
    )
    assert isinstance(env, vf.Env) and isinstance(env.taskset, vf.Taskset)
    (task,) = env.taskset.load()
    played = play(env, task, ["go[2]", "go[3]", "go[1]"], tmp_path)
    assert played.episode.ok and played.rewards == {adapter.REWARD_NAME: 1.0}
    assert played.info["actions"] == ["go[2]", "go[3]", "go[1]"]
    (branch,) = played.trace.branches
    ids, mask = branch.token_ids, branch.sampled_mask
    assert len(ids) == len(mask) and sum(mask) > 0
    tok = played.tokenizer
    trained = tok.decode([t for t, m in zip(ids, mask, strict=True) if m])
    assert trained == "go[2]<|im_end|>go[3]<|im_end|>go[1]<|im_end|>"
    context = tok.decode([t for t, m in zip(ids, mask, strict=True) if not m])
    assert "Reach room 1" in context and "You did go[2]." in context and "You did go[3]." in context
    # The sample is the conversation the policy was sent, turn after turn.
    assert tok.decode(ids).startswith(played.prompts[-1])
