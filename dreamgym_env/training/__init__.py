"""Experience-model training: SFT data from real transitions, teacher reasoning annotation, TRL training.

Heavy dependencies (torch, transformers, TRL, peft) load only inside :mod:`dreamgym_env.training.train`.
"""

from __future__ import annotations

from dreamgym_env.training.sft_data import SFTBuildConfig, build_sft_dataset, split_by_task

__all__ = ["SFTBuildConfig", "build_sft_dataset", "split_by_task"]
