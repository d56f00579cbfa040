"""Outcome statistics: the group reward variance that tells where the agent's ability ends.

DreamGym scores a task by the variance of its rewards over a group of n rollouts,
``V = mean((r_i - mean r)^2)`` (``p(1 - p)`` for binary rewards). A task the agent always solves or
always fails has ``V = 0``: its rollouts carry no advantage signal for GRPO-style training. A task
with mixed outcomes has ``V > 0`` and sits at the edge of the agent's ability.

Rollouts that come in groups (a vector env with ``group_size``) give each task its own n outcomes.
Rollouts sampled one at a time leave most tasks with one or two outcomes; those tasks are first
grouped with similar tasks (cosine similarity of their instruction embeddings), and the group's latest
n outcomes stand for each member.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from dreamgym_env.records import Task
from dreamgym_env.storage.task_pool import Outcome

if TYPE_CHECKING:
    from dreamgym_env.buffer.embedders import Embedder


def group_variance(rewards: Sequence[float]) -> float:
    """Population variance of a group's rewards, ``mean((r_i - mean r)^2)``; 0.0 for an empty group."""
    n = len(rewards)
    if n == 0:
        return 0.0
    mean = sum(rewards) / n  # plain Python: groups are small and this runs for every task at every reset
    return float(sum((r - mean) ** 2 for r in rewards) / n)


@dataclass(frozen=True)
class TaskStats:
    """Outcome statistics of one task.

    Attributes:
        task_id: The task.
        rollouts: Outcomes the statistics are computed from (at most n).
        own_rollouts: How many of them are the task's own (the rest come from similar tasks).
        mean_reward: Mean reward over those outcomes.
        success_rate: Fraction of them that succeeded.
        variance: Group reward variance ``V``.
        grouped_by: ``"task"`` when the task's own outcomes sufficed, ``"similarity"`` when its cluster's
            outcomes were used, ``"none"`` when there is no outcome yet.
    """

    task_id: str
    rollouts: int
    own_rollouts: int
    mean_reward: float
    success_rate: float
    variance: float
    grouped_by: Literal["task", "similarity", "none"]

    @property
    def explored(self) -> bool:
        """Whether any outcome informs the statistics."""
        return self.rollouts > 0


def similarity_clusters(vectors: np.ndarray, threshold: float) -> np.ndarray:
    """Single-link clusters of unit vectors: rows with cosine similarity >= ``threshold`` share a label.

    Args:
        vectors: An (m, d) array of L2-normalised rows.
        threshold: Cosine similarity at which two rows are linked.

    Returns:
        An (m,) int array of cluster labels (the smallest member index of each cluster).
    """
    m = len(vectors)
    parent = np.arange(m)

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = int(parent[i])
        return i

    if m > 1:
        sims = np.asarray(vectors, dtype=np.float32) @ np.asarray(vectors, dtype=np.float32).T
        rows, cols = np.nonzero(np.triu(sims >= threshold, k=1))
        for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
            a, b = find(i), find(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    return np.fromiter((find(i) for i in range(m)), dtype=np.int64, count=m)


def _seq(outcome: Outcome) -> int:
    return outcome.seq


def compute_task_stats(
    task_ids: Sequence[str],
    history: Mapping[str, Sequence[Outcome]],
    *,
    n: int = 8,
    min_rollouts: int = 4,
    clusters: Sequence[int] | np.ndarray | None = None,
) -> dict[str, TaskStats]:
    """Statistics of every task over its latest ``n`` outcomes.

    Args:
        task_ids: The tasks to describe.
        history: Outcomes per task id, any order (e.g. :meth:`TaskPool.recent_outcomes`).
        n: Group size: outcomes the variance is computed over.
        min_rollouts: A task with fewer own outcomes is described by its similarity cluster's latest
            ``n`` outcomes instead, when ``clusters`` is given.
        clusters: A cluster label per entry of ``task_ids`` (see :func:`similarity_clusters`), or
            ``None`` to use each task's own outcomes only.

    Returns:
        ``task_id -> TaskStats`` for every id in ``task_ids``.
    """
    own = {tid: sorted(history.get(tid, ()), key=_seq, reverse=True)[:n] for tid in task_ids}
    pooled: dict[int, list[Outcome]] = {}
    if clusters is not None:
        if len(clusters) != len(task_ids):
            raise ValueError(
                f"got {len(clusters)} cluster labels for {len(task_ids)} tasks; give one per task"
            )
        for tid, label in zip(task_ids, clusters, strict=True):
            pooled.setdefault(int(label), []).extend(own[tid])
        for label, outcomes in pooled.items():
            pooled[label] = sorted(outcomes, key=_seq, reverse=True)[:n]

    stats: dict[str, TaskStats] = {}
    for i, tid in enumerate(task_ids):
        outcomes = own[tid]
        grouped_by: Literal["task", "similarity", "none"] = "task"
        if len(outcomes) < min_rollouts and clusters is not None:
            cluster = pooled[int(clusters[i])]
            if len(cluster) > len(outcomes):
                outcomes, grouped_by = cluster, "similarity"
        if not outcomes:
            stats[tid] = TaskStats(tid, 0, 0, 0.0, 0.0, 0.0, "none")
            continue
        rewards = [o.reward for o in outcomes]
        stats[tid] = TaskStats(
            task_id=tid,
            rollouts=len(outcomes),
            own_rollouts=len(own[tid]),
            mean_reward=sum(rewards) / len(rewards),
            success_rate=sum(o.success for o in outcomes) / len(outcomes),
            variance=group_variance(rewards),
            grouped_by=grouped_by,
        )
    return stats


class TaskEmbeddings:
    """Instruction embeddings of tasks, computed once per task id.

    Args:
        embedder: Any :class:`~dreamgym_env.buffer.embedders.Embedder`; default the replay buffer's
            offline :class:`~dreamgym_env.buffer.embedders.HashingEmbedder` (numpy only, deterministic).
    """

    def __init__(self, embedder: Embedder | None = None) -> None:
        if embedder is None:
            from dreamgym_env.buffer.embedders import HashingEmbedder

            embedder = HashingEmbedder()
        self.embedder = embedder
        self._cache: dict[str, np.ndarray] = {}

    def of_tasks(self, tasks: Sequence[Task]) -> np.ndarray:
        """An (m, dim) array of unit rows, one per task (cached by ``task_id``)."""
        missing = [t for t in tasks if t.task_id not in self._cache]
        if missing:
            for task, vector in zip(
                missing, self.embedder.embed([t.instruction for t in missing]), strict=True
            ):
                self._cache[task.task_id] = vector
        if not tasks:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.stack([self._cache[t.task_id] for t in tasks])

    def of_texts(self, texts: Sequence[str]) -> np.ndarray:
        """Embed free texts (not cached): candidates that are not tasks yet."""
        return self.embedder.embed(list(texts))
