"""Adapters around DreamGym envs: sim-to-real switching and adapters for existing RL libraries."""

from dreamgym_env.wrappers.sim_to_real import SimToRealEnv, SimToRealSchedule

__all__ = ["SimToRealEnv", "SimToRealSchedule"]
