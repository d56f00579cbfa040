"""Gymnasium wrappers around DreamGym envs: admissible actions as ``Discrete``, text as vectors, sim-to-real.

The single-env wrappers (:class:`DiscreteActions`, :class:`TextEmbedding`) and their vector twins make a
text env readable by classic RL libraries; :class:`SimToRealEnv` switches between a simulated and a real
env. The adapters for the libraries themselves (stable-baselines3's ``VecEnv``, RLlib's registry, TRL,
verl, verifiers) live in :mod:`dreamgym_env.integrations`.
"""

from __future__ import annotations

from dreamgym_env.wrappers.discrete_actions import DiscreteActions, InvalidIndexPolicy
from dreamgym_env.wrappers.sim_to_real import SimToRealEnv, SimToRealSchedule
from dreamgym_env.wrappers.text_embedding import EmbeddedField, TextEmbedding
from dreamgym_env.wrappers.vector import VectorDiscreteActions, VectorTextEmbedding

__all__ = [
    "DiscreteActions",
    "EmbeddedField",
    "InvalidIndexPolicy",
    "SimToRealEnv",
    "SimToRealSchedule",
    "TextEmbedding",
    "VectorDiscreteActions",
    "VectorTextEmbedding",
]
