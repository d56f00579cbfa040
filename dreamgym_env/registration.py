"""Gymnasium ids for the built-in simulated domains (and, through ``dreamgym_env.real``, the real ones)."""

from __future__ import annotations

from typing import Any

from gymnasium.envs.registration import register, registry

from dreamgym_env.domains import BUILTIN_DOMAINS

#: Simulated id -> domain name, read from the domain table (:data:`dreamgym_env.domains.BUILTIN_DOMAINS`).
BUILTIN_IDS: dict[str, str] = {builtin.env_id: name for name, builtin in BUILTIN_DOMAINS.items()}


def register_envs() -> None:
    """Register every built-in simulated and real id (idempotent, so re-imports are harmless).

    Each simulated id carries its domain's step limit as ``max_episode_steps``, read from the domain
    table (:data:`dreamgym_env.domains.BUILTIN_DOMAINS`, which the domain class reads too), so it is the
    env's own ``max_steps`` default: ``gymnasium.make`` adds its ``TimeLimit`` at that same step, and
    ``gymnasium.make_vec`` hands it to the native vector env, which truncates its sub-envs there itself
    (no ``TimeLimit`` on top). So the episode ends once, at the first of the two limits (see
    ``docs/env.md``).
    """
    from dreamgym_env.real import register_real_envs

    register_real_envs()
    for env_id, domain in BUILTIN_IDS.items():
        if env_id not in registry:
            register_simulated(env_id, domain, BUILTIN_DOMAINS[domain].max_steps)


def register_simulated(
    env_id: str, domain: str, max_steps: int, kwargs: dict[str, Any] | None = None
) -> None:
    """Register (or replace) a simulated id: the one way built-in and spec domains get their ids.

    Args:
        env_id: The Gymnasium id.
        domain: The name :func:`dreamgym_env.domains.get_domain` knows the domain by.
        max_steps: The domain's step limit, registered as ``max_episode_steps``.
        kwargs: Further default keyword arguments of ``gymnasium.make`` (e.g. a spec's retriever).
    """
    registry.pop(env_id, None)
    register(
        id=env_id,
        entry_point="dreamgym_env.env:DreamGymEnv",
        vector_entry_point="dreamgym_env.vector:DreamGymVectorEnv",
        max_episode_steps=max_steps,
        nondeterministic=True,
        kwargs={"domain": domain, **(kwargs or {})},
    )
