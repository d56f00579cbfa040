"""Adapters around DreamGym envs: sim-to-real switching and adapters for existing RL libraries.

:class:`SB3VecEnv` loads on first use and :func:`register_rllib_envs` imports ray when called, so
importing this package never imports stable-baselines3 or ray.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dreamgym_env.wrappers.discrete_actions import DiscreteActions, InvalidIndexPolicy
from dreamgym_env.wrappers.rllib import register_rllib_envs
from dreamgym_env.wrappers.sim_to_real import SimToRealEnv, SimToRealSchedule
from dreamgym_env.wrappers.text_embedding import EmbeddedField, TextEmbedding
from dreamgym_env.wrappers.vector import VectorDiscreteActions, VectorTextEmbedding

if TYPE_CHECKING:
    from dreamgym_env.wrappers.sb3_vec_env import SB3VecEnv

__all__ = [
    "DiscreteActions",
    "EmbeddedField",
    "InvalidIndexPolicy",
    "SB3VecEnv",
    "SimToRealEnv",
    "SimToRealSchedule",
    "TextEmbedding",
    "VectorDiscreteActions",
    "VectorTextEmbedding",
    "register_rllib_envs",
]


def __getattr__(name: str) -> Any:
    if name == "SB3VecEnv":  # needs stable-baselines3 (the "sb3" extra)
        from dreamgym_env.wrappers.sb3_vec_env import SB3VecEnv

        return SB3VecEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
