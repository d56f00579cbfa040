"""Adapters around DreamGym envs: sim-to-real switching and adapters for existing RL libraries."""

from dreamgym_env.wrappers.discrete_actions import DiscreteActions, InvalidIndexPolicy
from dreamgym_env.wrappers.sim_to_real import SimToRealEnv, SimToRealSchedule
from dreamgym_env.wrappers.text_embedding import EmbeddedField, TextEmbedding

__all__ = [
    "DiscreteActions",
    "EmbeddedField",
    "InvalidIndexPolicy",
    "SimToRealEnv",
    "SimToRealSchedule",
    "TextEmbedding",
]
