"""Experience-model training: SFT data from real transitions, teacher reasoning annotation, TRL training.

Heavy dependencies (torch, transformers, TRL, peft) load only inside :mod:`dreamgym_env.training.train`.
"""

from __future__ import annotations

from dreamgym_env.training.sft_data import SFTBuildConfig, build_sft_dataset, split_by_task

__all__ = ["SFTBuildConfig", "build_sft_dataset", "split_by_task"]

# Group rollouts of an LLM policy (GRPO-style groups) and their export to TRL's dataset formats.
from dreamgym_env.training.collector import (  # noqa: E402
    ActionSample,
    ChatPolicy,
    RolloutBatch,
    Trajectory,
    collect_groups,
    group_advantages,
)
from dreamgym_env.training.trl_format import to_trl_dataset  # noqa: E402

__all__ += [
    "ActionSample",
    "ChatPolicy",
    "RolloutBatch",
    "Trajectory",
    "collect_groups",
    "group_advantages",
    "to_trl_dataset",
]
