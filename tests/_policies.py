"""A policy that reads only the shared interface, used unchanged on simulated and real envs."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


class ScriptedPolicy:
    """Follow ``info["expert_plan"]`` when the env gives one, else take the first admissible action."""

    def __init__(self, fallback: str = "look") -> None:
        self.fallback = fallback

    def __call__(self, observation: str, info: dict[str, Any]) -> str:
        plan = info.get("expert_plan") or []
        if plan:
            return str(plan[0])
        admissible = info.get("admissible_actions") or []
        return str(admissible[0]) if admissible else self.fallback


def run_episode(
    env: gym.Env, policy: ScriptedPolicy, *, seed: int = 0, options: dict | None = None, max_steps: int = 60
) -> tuple[float, bool, int, dict[str, Any]]:
    """Play one episode; return (last reward, success, steps, last info)."""
    obs, info = env.reset(seed=seed, options=options)
    reward, steps = 0.0, 0
    for steps in range(1, max_steps + 1):  # noqa: B007
        obs, reward, terminated, truncated, info = env.step(policy(obs, info))
        assert isinstance(obs, str) and env.observation_space.contains(obs)
        if terminated or truncated:
            break
    return float(reward), bool(info["success"]), steps, info
