"""Group rollouts as a Hugging Face ``datasets.Dataset`` in TRL's conversational formats.

Why TRL: its dataset formats (conversational ``messages``, and ``prompt`` + ``completion`` lists of
``{"role", "content"}`` messages) are documented, shared by its SFT, GRPO, RLOO, DPO and KTO trainers,
and have stayed the same across releases, while its hooks for multi-turn environment rollouts
(``rollout_func``, ``environment_factory``) are still marked experimental. verl reads the same
``messages`` column for multi-turn data (``dataset.to_parquet(path)``), and OpenRLHF and others read
chat lists too, so one format serves them all.

The columns are the trajectory's messages plus ``reward``, ``advantage``, ``success``, ``num_turns``,
``task_id``, ``task``, ``group_id`` and ``source``: everything an advantage-weighted or filtered
(rejection-sampling) update needs, and what a custom GRPO loss reads per sequence.
"""

from __future__ import annotations

from typing import Any, Literal

from dreamgym_env.errors import ConfigError, DependencyNotInstalled
from dreamgym_env.training.collector import RolloutBatch

__all__ = ["TRLFormat", "to_trl_dataset"]

TRLFormat = Literal["prompt_completion", "messages"]
"""``"prompt_completion"``: ``prompt`` (system + first observation) and ``completion`` (the rest of
the episode); ``"messages"``: the whole conversation in one column (TRL's SFT with
``assistant_only_loss=True`` trains on the actions only)."""


def to_trl_dataset(
    batch: RolloutBatch, *, format: TRLFormat = "prompt_completion", min_advantage: float | None = None
) -> Any:
    """Turn a :class:`~dreamgym_env.training.collector.RolloutBatch` into a ``datasets.Dataset``.

    Args:
        batch: Trajectories from :func:`~dreamgym_env.training.collector.collect_groups`.
        format: ``"prompt_completion"`` or ``"messages"`` (see :data:`TRLFormat`).
        min_advantage: Keep only trajectories whose advantage exceeds it (e.g. ``0.0``: the better
            half of each mixed group), the filtered-SFT form of a policy-improvement step; None keeps all.

    Returns:
        A ``datasets.Dataset`` with one row per kept trajectory.

    Example:
        >>> batch = collect_groups("DreamGym/TextWorld-v0", tasks, ChatPolicy(url, "policy"), group_size=8)
        >>> dataset = to_trl_dataset(batch, min_advantage=0.0)
        >>> trainer = trl.SFTTrainer(model, train_dataset=dataset, args=trl.SFTConfig(...))
    """
    try:
        import datasets
    except ImportError as e:
        raise DependencyNotInstalled("datasets", "train", "Exporting rollouts for TRL") from e
    if format not in ("prompt_completion", "messages"):
        raise ConfigError(f"format must be 'prompt_completion' or 'messages', got {format!r}.")
    drop = ("messages",) if format == "prompt_completion" else ("prompt", "completion")
    rows = []
    for trajectory in batch.trajectories:
        if min_advantage is not None and trajectory.advantage <= min_advantage:
            continue
        record = trajectory.to_record()
        rows.append({k: v for k, v in record.items() if k not in drop})
    if not rows:
        columns = [k for k in _COLUMNS if k not in drop]
        return datasets.Dataset.from_dict({k: [] for k in columns})
    return datasets.Dataset.from_list(rows)


_COLUMNS = (
    "messages",
    "prompt",
    "completion",
    "reward",
    "advantage",
    "success",
    "num_turns",
    "task_id",
    "task",
    "group_id",
    "source",
)
