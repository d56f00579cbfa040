"""Any DreamGym id as a multi-turn environment of Prime Intellect's ``verifiers`` (0.4, ``verifiers.v1``).

verifiers 0.4 replaced the older ``MultiTurnEnv`` class with its v1 stack: a *taskset* yields tasks,
and an *env*'s ``run(task, agents)`` plays one: it opens the agent's interaction, sends a user turn,
reads ``segment.last_reply``, and so on until the exchange ends, then records rewards on the trace.
Its own TextArena and OpenEnv tasksets drive text games that way, and so does this module:

* :class:`DreamGymTaskset` yields one task per DreamGym task of ``env_id`` (the domain's seed tasks,
  or the ``task_ids`` chosen), with the domain's system prompt and the task as data.
* :class:`DreamGymMultiTurnEnv` plays it: the first observation is the opening user turn, each reply
  is an action for ``act``, each observation the next user turn, until the episode ends; the episode's
  return is recorded as the reward ``dreamgym_return`` and its success in ``trace.info``.

verifiers loads an env by its taskset id, which must name an importable top-level module exporting
the taskset and the env in ``__all__`` (an id with dots, such as this module's name, fails): the
package installs :mod:`dreamgym_verifiers` for that, so the id is ``dreamgym_verifiers``
(``--env.taskset.id dreamgym_verifiers``; ``env_id`` and ``env_kwargs`` go in the same taskset config).
Give the player a chat agent (``--env.player.harness.id null``): without one,
verifiers' default ``bash`` harness frames the policy as a coding agent with a shell tool.

Environments come from one process-wide pool per configuration
(:func:`~dreamgym_env.integrations.episodes.environments_for`), so every rollout shares one
experience-model backend and connection pool. The episode logic is :func:`_play_interaction`, which
needs no verifiers. verifiers 0.4 requires ``openai<3``, older than the client this package uses, so
it is not installed alongside: the tests run against the real verifiers in a venv of its own
(``scripts/install_integrations.sh``; see ``docs/training_rl.md``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any, Protocol

from dreamgym_env.errors import DependencyNotInstalled
from dreamgym_env.integrations.episodes import TASK_COLUMN, DreamGymToolEnv, environments_for

__all__ = [
    "REWARD_NAME",
    "DreamGymData",
    "DreamGymEnvConfig",
    "DreamGymMultiTurnEnv",
    "DreamGymTask",
    "DreamGymTaskset",
    "DreamGymTasksetConfig",
]

#: The reward the trace records: the episode's return.
REWARD_NAME = "dreamgym_return"

try:
    import verifiers.v1 as vf
except ImportError as e:
    raise DependencyNotInstalled(
        "verifiers",
        "verifiers",
        "The verifiers environment",
        install="Install verifiers>=0.4 (pip install verifiers).",
    ) from e


class _Interaction(Protocol):
    """What :func:`_play_interaction` uses of a verifiers interaction."""

    trace: Any

    async def turn(self, messages: Any = None) -> Any: ...


async def _play_interaction(env: DreamGymToolEnv, task_json: str, interaction: _Interaction) -> float:
    """Play one episode of the task ``task_json`` through a verifiers interaction; return its return.

    An empty reply ends the episode (``trace.stop("empty_action")``): no action can advance it, and
    without a turn cap the same observation would be sent forever.
    """
    first = await asyncio.to_thread(env.reset, **{TASK_COLUMN: task_json})
    segment = await interaction.turn(first)
    while not segment.terminated:
        action = str(segment.last_reply).strip()
        if not action:
            interaction.trace.stop("empty_action")
            break
        observation = await asyncio.to_thread(env.act, action)
        if env.done:
            break
        segment = await interaction.turn(observation)
    reward = env.get_reward()
    interaction.trace.record_reward(REWARD_NAME, reward, 1.0)
    episode = env.episode
    interaction.trace.info["success"] = bool(episode.success) if episode is not None else False
    interaction.trace.info["actions"] = list(episode.actions) if episode is not None else []
    return reward


class DreamGymData(vf.TaskData):  # type: ignore[misc]
    """A task's data: the env id and the DreamGym task (its JSON)."""

    env_id: str
    task: str


class DreamGymTasksetConfig(vf.TasksetConfig):  # type: ignore[misc]
    """Which env and tasks; ``env_kwargs`` go to ``gymnasium.make`` (``base_url``, ``model``...)."""

    env_id: str = "DreamGym/TextWorld-v0"
    task_ids: list[str] | None = None
    env_kwargs: dict[str, Any] = {}


class DreamGymTask(vf.Task[DreamGymData]):  # type: ignore[misc]
    """One DreamGym task."""


class DreamGymTaskset(vf.Taskset[DreamGymTask, DreamGymTasksetConfig]):  # type: ignore[misc]
    """The tasks of a DreamGym id (the domain's seed tasks, or ``task_ids`` among them)."""

    def load(self) -> Iterator[DreamGymTask]:
        """One task per chosen DreamGym task, in the env's task order."""
        config = self.config
        envs = environments_for(config.env_id, config.env_kwargs)
        tasks = envs.tasks
        if config.task_ids is not None:
            by_id = {t.task_id: t for t in tasks}
            missing = [i for i in config.task_ids if i not in by_id]
            if missing:
                raise ValueError(f"Unknown task ids {missing}; available: {sorted(by_id)[:20]}")
            tasks = [by_id[i] for i in config.task_ids]
        for task in tasks:
            data = DreamGymData(
                id=task.task_id,
                name=task.task_id,
                prompt=None,  # the env opens with the first observation
                system_prompt=envs.system_prompt,
                env_id=config.env_id,
                task=task.model_dump_json(),
            )
            yield DreamGymTask(data, config.task)


class DreamGymEnvConfig(vf.EnvConfig):  # type: ignore[misc]
    """One agent, the player."""

    player: vf.AgentConfig = vf.AgentConfig()


class DreamGymMultiTurnEnv(vf.Env[DreamGymEnvConfig]):  # type: ignore[misc]
    """Plays a :class:`DreamGymTaskset` task as a multi-turn exchange (see the module docstring)."""

    async def run(self, task: Any, agents: Any) -> None:
        """Play ``task`` with the ``player`` agent on a pooled environment."""
        env_kwargs = getattr(getattr(self.taskset, "config", None), "env_kwargs", {}) or {}
        envs = environments_for(task.data.env_id, env_kwargs)
        env = envs.acquire()
        try:
            async with agents.player.interaction(task) as interaction:
                await _play_interaction(env, task.data.task, interaction)
        finally:
            envs.release(env)
