"""Group rollouts as a Hugging Face ``datasets.Dataset`` in TRL's conversational formats.

Why TRL: its dataset formats (conversational ``messages``, and ``prompt`` + ``completion`` lists of
``{"role", "content"}`` messages) are documented, shared by its SFT, GRPO, RLOO, DPO and KTO trainers,
and have stayed the same across releases. verl reads the same ``messages`` column for multi-turn data
(``dataset.to_parquet(path)``), and OpenRLHF and others read chat lists too.

What matters most is which tokens a trainer puts the loss on. An episode interleaves the agent's
actions with the environment's observations, and a policy must learn to say only the former: trained
on the observations it would learn to imitate the simulator. TRL's prompt-completion loss covers every
``completion`` token, and its conversational loss covers every token unless ``assistant_only_loss``
is set. So the formats are:

* ``"decisions"`` (the default): one row per action; ``prompt`` is the episode up to that action and
  ``completion`` is the action alone. Any prompt-completion trainer then trains the agent's tokens only,
  with no option to remember.
* ``"messages"``: one row per episode, the whole conversation; train it with TRL's
  ``SFTConfig(assistant_only_loss=True)``, which masks every non-assistant turn.
* ``"prompt_completion"``: one row per episode, ``completion`` is everything from the first action on
  (actions *and* observations). Only for trainers that mask the observations themselves.

Every row carries ``reward``, ``advantage``, ``success``, ``num_turns``, ``task_id``, ``task``,
``group_id`` and ``source``: what an advantage-weighted or filtered (rejection-sampling) update needs.
Where the policy reported them (:class:`~dreamgym_env.training.collector.ChatPolicy` with
``return_tokens=True``), ``completion_ids`` and ``completion_logprobs`` hold the sampled tokens and
their log-probabilities (per action in ``"decisions"`` rows, one list per action otherwise).
"""

from __future__ import annotations

from typing import Any, Literal

from dreamgym_env.errors import ConfigError, DependencyNotInstalled
from dreamgym_env.training.collector import RolloutBatch, Trajectory

TRLFormat = Literal["decisions", "messages", "prompt_completion"]
"""``"decisions"``: one row per action (prompt = episode so far, completion = the action);
``"messages"``: one row per episode, for ``assistant_only_loss=True``; ``"prompt_completion"``: one
row per episode with observations inside ``completion`` (see the module docstring)."""

_TRL_FORMATS: tuple[str, ...] = ("decisions", "messages", "prompt_completion")

_OUTCOME = ("reward", "advantage", "success", "num_turns", "task_id", "task", "group_id", "source")
_COLUMNS: dict[str, tuple[str, ...]] = {
    "decisions": ("prompt", "completion", "turn", *_OUTCOME),
    "messages": ("messages", *_OUTCOME),
    "prompt_completion": ("prompt", "completion", *_OUTCOME),
}


def _to_trl_rows(
    batch: RolloutBatch, *, format: TRLFormat = "decisions", min_advantage: float | None = None
) -> list[dict[str, Any]]:
    """The rows of :func:`to_trl_dataset` as plain dicts (no ``datasets`` needed).

    Raises:
        ConfigError: ``format`` is not one of :data:`_TRL_FORMATS`.
    """
    if format not in _TRL_FORMATS:
        raise ConfigError(f"format must be one of {list(_TRL_FORMATS)}, got {format!r}.")
    rows: list[dict[str, Any]] = []
    for trajectory in batch.trajectories:
        if min_advantage is not None and trajectory.advantage <= min_advantage:
            continue
        rows.extend(_rows(trajectory, format))
    return rows


def _rows(trajectory: Trajectory, format: str) -> list[dict[str, Any]]:
    if format == "decisions":
        return trajectory.decisions()
    record = trajectory.to_record()
    drop = ("prompt", "completion") if format == "messages" else ("messages",)
    return [{k: v for k, v in record.items() if k not in drop}]


def to_trl_dataset(
    batch: RolloutBatch, *, format: TRLFormat = "decisions", min_advantage: float | None = None
) -> Any:
    """Turn a :class:`~dreamgym_env.training.collector.RolloutBatch` into a ``datasets.Dataset``.

    Args:
        batch: Trajectories from :func:`~dreamgym_env.training.collector.collect_groups`.
        format: ``"decisions"`` (default), ``"messages"`` or ``"prompt_completion"`` (see
            :data:`TRLFormat`); the first two train the agent's tokens only.
        min_advantage: Keep only trajectories whose advantage exceeds it (e.g. ``0.0``: the better
            half of each mixed group), the filtered-SFT form of a policy-improvement step; None keeps all.

    Returns:
        A ``datasets.Dataset``: one row per kept action (``"decisions"``) or trajectory (the others).

    Raises:
        ConfigError: ``format`` is not one of :data:`_TRL_FORMATS`.
        DependencyNotInstalled: ``datasets`` is missing.

    Example:
        >>> batch = collect_groups("DreamGym/TextWorld-v0", tasks, ChatPolicy(url, "policy"), group_size=8)
        >>> dataset = to_trl_dataset(batch, min_advantage=0.0)  # one row per good decision
        >>> trainer = trl.SFTTrainer(model, train_dataset=dataset, args=trl.SFTConfig(...))
    """
    try:
        import datasets
    except ImportError as e:
        raise DependencyNotInstalled("datasets", "train", "Exporting rollouts for TRL") from e
    rows = _to_trl_rows(batch, format=format, min_advantage=min_advantage)
    if not rows:
        return datasets.Dataset.from_dict({k: [] for k in _COLUMNS[format]})
    return datasets.Dataset.from_list(rows)
