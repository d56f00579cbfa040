"""Adapters that let RL libraries and LLM-RL trainers drive DreamGym envs.

Each lives in its own module and imports its trainer lazily, so ``import dreamgym_env`` stays light
and a missing trainer is named with the extra to install:

* :mod:`dreamgym_env.integrations.sb3`: a stable-baselines3 ``VecEnv`` over the native vector env.
* :mod:`dreamgym_env.integrations.rllib`: DreamGym ids in RLlib's env registry.
* :mod:`dreamgym_env.integrations.trl`: an ``environment_factory`` for ``trl.GRPOTrainer``.
* :mod:`dreamgym_env.integrations.verl`: an agent loop for verl's multi-turn rollout.
* :mod:`dreamgym_env.integrations.verifiers`: a ``verifiers.MultiTurnEnv`` over any DreamGym id.
"""

from __future__ import annotations

__all__: list[str] = []
