"""Collect whole episodes from a vector env with any per-env policy.

The shared piece under the Ray workers, the LLM rollout collector and examples: step N envs in lock-step,
ask the policy for each live sub-env's action, and cut the stream into finished episodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

from dreamgym_env.errors import ConfigError

__all__ = ["Episode", "Policy", "RandomPolicy", "collect_episodes", "unbatch_info"]

Policy = Callable[[str, dict[str, Any]], str]
"""Maps one sub-env's (observation, info) to an action string."""


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

    @property
    def total_reward(self) -> float:
        """Sum of the episode's rewards."""
        return float(sum(self.rewards))


def unbatch_info(infos: dict[str, Any], index: int) -> dict[str, Any]:
    """Sub-env ``index``'s info from Gymnasium's batched ``info`` / ``_info`` dict."""
    out: dict[str, Any] = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not mask[index]:
            continue
        out[key] = unbatch_info(value, index) if isinstance(value, dict) else _item(value[index])
    return out


def _item(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


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
        max_env_steps: Safety bound on vector steps.
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
    return finished[:num_episodes]


def _start(observation: str, info: dict[str, Any]) -> Episode:
    return Episode(
        task=str(info.get("task", "")),
        task_id=str(info.get("task_id", "")),
        episode_id=str(info.get("episode_id", "")),
        observations=[observation],
    )
