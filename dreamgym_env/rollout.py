"""The one home of rollouts: episode records, vector-env rollouts and GRPO groups.

* :class:`Episode` is the record every rollout path produces (what the agent saw and did, and how it
  ended); the Ray workers (:mod:`dreamgym_env.distributed`), the LLM group collector
  (:mod:`dreamgym_env.training.collector`) and the trainer adapters (:mod:`dreamgym_env.integrations`)
  all build on it.
* :func:`collect_episodes` steps a vector env in lock-step with a synchronous per-env policy and cuts the
  stream into finished episodes (Gymnasium's ``NEXT_STEP`` autoreset).
* :func:`aplay_episodes` plays a given list of episodes (each its own seed and reset options, e.g. a
  task) on a :class:`~dreamgym_env.vector.DreamGymVectorEnv` through its public async step, with an
  async policy: in lock-step, every step of all live episodes is one vector step (the model requests go
  out together, the replay buffer is searched once per step for all of them); with ``lockstep=False``
  each episode advances as soon as its own answer arrives, keeping the server busy.
* :func:`group_advantages` scores the episodes of one GRPO group against each other.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from dreamgym_env._event_loop import gather_all_or_none
from dreamgym_env.errors import ConfigError

__all__ = [
    "AdvantageScale",
    "AsyncPolicy",
    "Episode",
    "EpisodeJob",
    "Policy",
    "RandomPolicy",
    "aplay_episodes",
    "aplay_on_envs",
    "collect_episodes",
    "group_advantages",
    "is_simulated",
    "unbatch_info",
    "unbatch_infos",
]

Policy = Callable[[str, dict[str, Any]], str]
"""Maps one sub-env's (observation, info) to an action string."""

logger = logging.getLogger(__name__)

AsyncPolicy = Callable[[int, str, dict[str, Any]], Awaitable[str]]
"""Maps ``(job index, observation, info)`` to the next action of that episode, asynchronously."""

AdvantageScale = Literal["std", "none"]
"""How group advantages are scaled: ``"std"`` divides ``r - mean`` by the group's standard deviation
(GRPO); ``"none"`` keeps ``r - mean`` (Dr. GRPO, which argues the division biases toward easy and
hard tasks)."""


class RandomPolicy:
    """Uniform over ``info["admissible_actions"]``; ``fallback`` where the domain lists none.

    A baseline, and a picklable policy for tests of distributed collection.
    """

    def __init__(self, fallback: str = "look", seed: int | None = None) -> None:
        self.fallback = fallback
        self.rng = np.random.default_rng(seed)

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        """Pick an action for one sub-env."""
        actions = info.get("admissible_actions") or []
        return str(actions[int(self.rng.integers(len(actions)))]) if len(actions) else self.fallback


@dataclass
class Episode:
    """One finished episode: what the agent saw and did, and how it ended."""

    task: str
    task_id: str
    episode_id: str
    observations: list[str] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    success: bool = False
    terminated: bool = False
    truncated: bool = False
    source: str = ""

    @property
    def total_reward(self) -> float:
        """Sum of the episode's rewards."""
        return float(sum(self.rewards))


def unbatch_info(infos: dict[str, Any], index: int) -> dict[str, Any]:
    """Sub-env ``index``'s info from Gymnasium's batched ``info["key"]`` / ``info["_key"]`` dict.

    ``_key`` is a mask only beside ``key``; a key of the env's own that starts with ``_`` is kept.
    Numpy scalars become Python ones and arrays are copied, so the result owns its values.
    """
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_") and key[1:] in infos:
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not mask[index]:
            continue
        out[key] = unbatch_info(value, index) if isinstance(value, dict) else _item(value[index])
    return out


def unbatch_infos(infos: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Every sub-env's info (:func:`unbatch_info` for ``0 .. n-1``), as stable-baselines3 wants them."""
    return [unbatch_info(infos, i) for i in range(n)]


def _item(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


def collect_episodes(
    envs: VectorEnv,
    policy: Policy,
    num_episodes: int,
    *,
    seed: int | None = None,
    max_env_steps: int = 100_000,
) -> list[Episode]:
    """Run ``envs`` until ``num_episodes`` episodes have finished; return them in finishing order.

    Args:
        envs: A vector env with ``NEXT_STEP`` autoreset (Gymnasium's default).
        policy: Called once per live sub-env per step.
        num_episodes: Episodes to collect (episodes still running at the end are dropped).
        seed: Seed for the first reset.
        max_env_steps: Safety bound on vector steps; reaching it returns the episodes finished so
            far, with a warning.
    """
    if envs.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP) is not AutoresetMode.NEXT_STEP:
        raise ConfigError("collect_episodes needs a vector env with autoreset_mode NEXT_STEP.")
    n = envs.num_envs
    obs, infos = envs.reset(seed=seed)
    current = [_start(obs[i], unbatch_info(infos, i)) for i in range(n)]
    finished: list[Episode] = []
    restarting = np.zeros(n, dtype=bool)
    for _ in range(max_env_steps):
        if len(finished) >= num_episodes:
            break
        per_env = [unbatch_info(infos, i) for i in range(n)]
        actions = ["" if restarting[i] else policy(obs[i], per_env[i]) for i in range(n)]
        obs, rewards, terms, truncs, infos = envs.step(actions)
        for i in range(n):
            info = unbatch_info(infos, i)
            if restarting[i]:
                current[i] = _start(obs[i], info)
                continue
            episode = current[i]
            episode.actions.append(actions[i])
            episode.rewards.append(float(rewards[i]))
            episode.observations.append(obs[i])
            if terms[i] or truncs[i]:
                episode.success = bool(info.get("success", False))
                episode.terminated, episode.truncated = bool(terms[i]), bool(truncs[i])
                finished.append(episode)
        restarting = terms | truncs
    if len(finished) < num_episodes:
        logger.warning(
            "collect_episodes stopped at max_env_steps=%d with %d of %d episodes finished",
            max_env_steps,
            len(finished),
            num_episodes,
        )
    return finished[:num_episodes]


def _start(observation: str, info: dict[str, Any]) -> Episode:
    return Episode(
        task=str(info.get("task", "")),
        task_id=str(info.get("task_id", "")),
        episode_id=str(info.get("episode_id", "")),
        observations=[observation],
        source=str(info.get("source", "")),
    )


def group_advantages(
    rewards: Sequence[float], scale: AdvantageScale = "std", eps: float = 1e-6
) -> np.ndarray:
    """Advantages of one group's rewards relative to the group: ``(r - mean) [/ (std + eps)]``.

    A group whose rewards are all equal has zero advantages (it carries no learning signal), whatever
    the scale.
    """
    r = np.asarray(rewards, dtype=np.float64)
    centred = r - r.mean()
    if scale == "none":
        return centred
    if scale != "std":
        raise ConfigError(f"scale must be 'std' or 'none', got {scale!r}.")
    return centred / (r.std() + eps)


def is_simulated(env_id: str) -> bool:
    """The id has a concurrent vector env (the simulated DreamGym ids; real wrappers have none)."""
    return gym.spec(env_id).vector_entry_point is not None


@dataclass(frozen=True)
class EpisodeJob:
    """One episode to play: its reset seed and options (``{"task": ...}``, ``game_file``...)."""

    seed: int | None
    options: dict[str, Any] = field(default_factory=dict)


async def aplay_episodes(
    envs: Any,
    jobs: Sequence[EpisodeJob],
    policy: AsyncPolicy,
    *,
    on_finish: Callable[[int, Episode], None] | None = None,
    lockstep: bool = True,
) -> list[Episode]:
    """Play every job to its end on ``envs``, ``envs.num_envs`` at a time; return them in job order.

    Two schedules. ``lockstep=True`` (below) moves all live episodes one vector step at a time.
    ``lockstep=False`` lets each episode advance as soon as its own answer arrives: sub-env ``i``
    plays its jobs one after another, stepping its own :class:`~dreamgym_env.env.DreamGymEnv`
    (``envs.envs[i]``) with no barrier between sub-envs, so a short answer never waits for a long
    one, an ended episode's slot takes the next job at once, and the server always has
    ``num_envs`` requests in flight. Trainers that need no synchronised steps (GRPO-style group
    rollouts) get the server's continuous throughput this way; the price is one buffer search
    per transition instead of one per vector step, and a failure (server down) cancels the other
    episodes' pending requests and raises, losing the episodes still running (none advances on a
    cancelled request). The vector env's own step state is not used: reset it before stepping
    it directly again.

    ``envs`` is a :class:`~dreamgym_env.vector.DreamGymVectorEnv` made with
    ``autoreset_mode=DISABLED``: a sub-env whose episode ends is reset with the next job
    (``options["reset_mask"]``), and once no job is left it sits out the remaining steps (its action
    is None). Each vector step asks the policy for every live episode's action concurrently, then
    sends all of them in one :meth:`~dreamgym_env.vector.DreamGymVectorEnv.astep`, so the model
    requests of all episodes are in flight together and retrieval is batched. A failed step (server
    down) raises with no episode advanced.

    Args:
        envs: The vector env (``autoreset_mode=DISABLED``).
        jobs: The episodes to play.
        policy: ``await policy(job_index, observation, info)`` gives that episode's next action.
        on_finish: Called with ``(job_index, episode)`` as each episode ends (e.g. a progress bar).
        lockstep: ``True``: one vector step at a time; ``False``: each episode at its own pace.
    """
    if envs.metadata.get("autoreset_mode") is not AutoresetMode.DISABLED:
        raise ConfigError(
            "aplay_episodes needs a vector env made with autoreset_mode=AutoresetMode.DISABLED."
        )
    n = envs.num_envs
    queue = deque(enumerate(jobs))
    results: list[Episode | None] = [None] * len(jobs)
    if not lockstep:
        return await aplay_on_envs(envs.envs, jobs, policy, on_finish=on_finish)
    running: list[tuple[int, Episode, dict[str, Any]] | None] = [None] * n

    async def start(i: int) -> None:
        k, job = queue.popleft()
        mask = np.zeros(n, dtype=np.bool_)
        mask[i] = True
        seeds = [job.seed if j == i else None for j in range(n)]
        # A reset may start a game process: keep it off the event loop.
        obs, infos = await asyncio.to_thread(
            envs.reset, seed=seeds, options={**job.options, "reset_mask": mask}
        )
        info = unbatch_info(infos, i)
        running[i] = (k, _start(obs[i], info), info)

    for i in range(min(n, len(queue))):
        await start(i)
    while any(r is not None for r in running):
        live = [i for i in range(n) if running[i] is not None]
        chosen = await gather_all_or_none(
            [policy(r[0], r[1].observations[-1], r[2]) for r in (running[i] for i in live) if r is not None]
        )
        actions: list[str | None] = [None] * n
        for i, action in zip(live, chosen, strict=True):
            actions[i] = str(action)
        obs, rewards, terms, truncs, infos = await envs.astep(actions)
        for i in live:
            k, episode, _ = running[i]  # type: ignore[misc]
            info = unbatch_info(infos, i)
            episode.actions.append(str(actions[i]))
            episode.rewards.append(float(rewards[i]))
            episode.observations.append(obs[i])
            running[i] = (k, episode, info)
            if not (terms[i] or truncs[i]):
                continue
            episode.success = bool(info.get("success", False))
            episode.terminated, episode.truncated = bool(terms[i]), bool(truncs[i])
            results[k] = episode
            running[i] = None
            if on_finish is not None:
                on_finish(k, episode)
            if queue:
                await start(i)
    return [e for e in results if e is not None]


async def aplay_on_envs(
    envs: Sequence[Any],
    jobs: Sequence[EpisodeJob],
    policy: AsyncPolicy,
    *,
    on_finish: Callable[[int, Episode], None] | None = None,
) -> list[Episode]:
    """Play every job to its end on single envs, ``len(envs)`` at a time; return them in job order.

    For ids without a concurrent vector env (the real wrappers) and for :func:`aplay_episodes`
    without lock-step: each env plays its jobs one after another, at its own pace. An env with an
    ``astep`` coroutine (the simulated envs) is stepped on the event loop; any other env's ``step``
    (a real engine may drive a game process or a browser) runs in a thread. A failure cancels the
    other episodes and raises.
    """
    queue = deque(enumerate(jobs))
    results: list[Episode | None] = [None] * len(jobs)
    await _play_unsynchronised(envs, queue, policy, results, on_finish)
    return [e for e in results if e is not None]


async def _step(env: Any, action: str) -> tuple[Any, ...]:
    if hasattr(env, "astep"):
        return tuple(await env.astep(action))
    return tuple(await asyncio.to_thread(env.step, action))


async def _play_unsynchronised(
    sub_envs: Sequence[Any],
    queue: deque[tuple[int, EpisodeJob]],
    policy: AsyncPolicy,
    results: list[Episode | None],
    on_finish: Callable[[int, Episode], None] | None,
) -> None:
    """One task per env, each pulling jobs from ``queue`` (see :func:`aplay_on_envs`)."""

    async def slot(env: Any) -> None:
        while queue:
            k, job = queue.popleft()
            # A reset may start a game process: keep it off the event loop.
            obs, info = await asyncio.to_thread(env.reset, seed=job.seed, options=dict(job.options))
            episode = _start(obs, info)
            while True:
                action = str(await policy(k, obs, info))
                obs, reward, terminated, truncated, info = await _step(env, action)
                episode.actions.append(action)
                episode.rewards.append(float(reward))
                episode.observations.append(obs)
                if terminated or truncated:
                    break
            episode.success = bool(info.get("success", False))
            episode.terminated, episode.truncated = bool(terminated), bool(truncated)
            results[k] = episode
            if on_finish is not None:
                on_finish(k, episode)

    # On a failure, or the caller's cancellation, the other slots are cancelled and awaited.
    await gather_all_or_none([slot(env) for env in sub_envs[: len(queue)]])
