"""Adapters that let LLM-RL trainers drive DreamGym envs: TRL, verl and verifiers.

Each lives in its own module and imports its trainer lazily, so ``import dreamgym_env`` stays light
and a missing trainer is named with the extra to install:

* :mod:`dreamgym_env.integrations.trl`: an ``environment_factory`` for ``trl.GRPOTrainer``.
* :mod:`dreamgym_env.integrations.verl`: an agent loop for verl's multi-turn rollout.
* :mod:`dreamgym_env.integrations.verifiers`: a ``verifiers.MultiTurnEnv`` over any DreamGym id.
"""

from __future__ import annotations

__all__: list[str] = []
