"""The verifiers environment: a DreamGym episode as a multi-turn exchange with a verifiers agent.

verifiers 0.4 needs ``openai<3``, older than the client this package uses, so it is not installed
alongside; the adapter is tested against the interface verifiers 0.4.0 defines (``verifiers/v1``:
``TaskData``, ``Task``, ``Taskset``, ``TasksetConfig``, ``EnvConfig``, ``AgentConfig``, ``Env`` and an
agent's ``interaction(task)`` whose ``turn()`` gives a segment with ``last_reply`` and
``terminated``), with a stand-in module of the same shapes.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import sys
import types
from collections.abc import AsyncIterator
from typing import Any, Generic, TypeVar

import pytest
from pydantic import BaseModel, ConfigDict

from dreamgym_env.experience.backends.scripted import ScriptedBackend
from tests.test_integrations_trl import TOY_ID, room_world, toy_envs

D = TypeVar("D")
C = TypeVar("C")


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
        def __init__(self, config: Any, taskset: Any) -> None:  # the real one loads its taskset by id
            self.config, self.taskset = config, taskset

    v1 = types.ModuleType("verifiers.v1")
    for cls in (TaskData, TaskConfig, TasksetConfig, AgentConfig, EnvConfig, Task, Taskset, Env):
        setattr(v1, cls.__name__, cls)
    root = types.ModuleType("verifiers")
    root.v1 = v1  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "verifiers", root)
    monkeypatch.setitem(sys.modules, "verifiers.v1", v1)
    monkeypatch.delitem(sys.modules, "dreamgym_env.integrations.verifiers", raising=False)


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
    """An agent that replies with its script, one reply per user turn, and records what it saw."""

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


def load(monkeypatch: pytest.MonkeyPatch) -> Any:
    stand_in_verifiers(monkeypatch)
    toy_envs(ScriptedBackend(room_world))  # registers the toy id
    return importlib.import_module("dreamgym_env.integrations.verifiers")


def test_taskset_yields_the_ids_tasks_and_the_env_plays_one_to_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    adapter = load(monkeypatch)
    env_kwargs = {"backend": ScriptedBackend(room_world), "max_steps": 5}
    taskset = adapter.DreamGymTaskset(adapter.DreamGymTasksetConfig(env_id=TOY_ID, env_kwargs=env_kwargs))
    tasks = list(taskset.load())
    assert [t.data.id for t in tasks] == ["toy-1", "toy-2", "toy-3"]
    assert tasks[0].data.prompt is None and "go[N]" in tasks[0].data.system_prompt

    env = adapter.DreamGymMultiTurnEnv(adapter.DreamGymEnvConfig(), taskset)
    player = Player(["go[2]", "go[1]", "never sent"])
    asyncio.run(env.run(tasks[0], types.SimpleNamespace(player=player)))
    assert "Reach room 1" in player.seen[0] and "You did go[2]." in player.seen[1]
    assert len(player.seen) == 2  # the winning move ended the exchange
    assert player.trace.rewards == {adapter.REWARD_NAME: 1.0}
    assert player.trace.info["success"] and player.trace.info["actions"] == ["go[2]", "go[1]"]


def test_an_empty_reply_stops_the_episode(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = load(monkeypatch)
    env_kwargs = {"backend": ScriptedBackend(room_world), "max_steps": 5}
    taskset = adapter.DreamGymTaskset(
        adapter.DreamGymTasksetConfig(env_id=TOY_ID, env_kwargs=env_kwargs, task_ids=["toy-2"])
    )
    (task,) = taskset.load()
    player = Player([" "])
    asyncio.run(
        adapter.DreamGymMultiTurnEnv(adapter.DreamGymEnvConfig(), taskset).run(
            task, types.SimpleNamespace(player=player)
        )
    )
    assert player.trace.stopped == "empty_action" and player.trace.rewards[adapter.REWARD_NAME] == 0.0


def test_unknown_task_ids_are_named_with_the_available_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = load(monkeypatch)
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
