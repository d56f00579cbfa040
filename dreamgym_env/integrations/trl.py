"""Online GRPO in the dream: an ``environment_factory`` for TRL's ``GRPOTrainer``.

TRL (>= 1.x) runs multi-turn agent rollouts itself when given an ``environment_factory``: it calls
the factory once per concurrent rollout, calls ``reset(**row)`` with the dataset row at the start of
each rollout (a returned string is appended to the prompt's last user message), exposes every other
public method of the environment's class as a tool the model may call, and scores the finished rollout
with ``get_reward()``. Tool results are masked out of the loss, so GRPO trains the policy's tokens
only. :class:`DreamGymEnvironments` is such a factory for any DreamGym id, simulated or real; its
environments (:class:`DreamGymToolEnv`) have one tool, ``act(action: str) -> str``.

TRL marks ``environment_factory`` experimental; the contract used here is the one of TRL 1.16
(``trl/trainer/grpo_trainer.py``).

Example:
    >>> envs = DreamGymEnvironments("DreamGym/TextWorld-v0", base_url=url, model="experience-model")
    >>> trainer = trl.GRPOTrainer(
    ...     model=policy, args=trl.GRPOConfig(...), train_dataset=envs.dataset(),
    ...     environment_factory=envs, processing_class=tokenizer,
    ... )
    >>> trainer.train()
"""

from __future__ import annotations

from dreamgym_env.integrations.episodes import (
    EPISODE_OVER,
    TASK_COLUMN,
    DreamGymEnvironments,
    DreamGymToolEnv,
)

__all__ = ["EPISODE_OVER", "TASK_COLUMN", "DreamGymEnvironments", "DreamGymToolEnv"]
