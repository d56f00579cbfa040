"""CurriculumSampler: the TaskSampler that keeps training at the edge of the agent's ability.

At every ``reset`` it draws a task from a mixture: with probability ``generated_fraction`` (lambda) a
generated task, else a seed task, and never more than a fraction lambda of all draws from generated
tasks. Within each part, a task's chance is proportional to its priority: its group reward variance
V (DreamGym's selection signal), an optimistic ``unexplored_weight`` while it has too few outcomes,
and at least ``min_weight`` so that a task the agent has mastered or given up on is still revisited
now and then (the agent changes).

Generation is explicit: the training loop calls :meth:`CurriculumSampler.update` between batches.
It is not triggered from inside ``record_outcome``, because that runs inside ``env.step`` and a
generation round is a batch of LLM calls that would stall every env of a vector env mid-rollout.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dreamgym_env._event_loop import run_sync
from dreamgym_env.curriculum.generator import GenerationResult, TaskGenerator
from dreamgym_env.curriculum.pool import TaskPool
from dreamgym_env.curriculum.stats import TaskEmbeddings, TaskStats, compute_task_stats, similarity_clusters
from dreamgym_env.domains import Domain, get_domain
from dreamgym_env.errors import ConfigError
from dreamgym_env.experience.backends.base import Backend
from dreamgym_env.records import Task
from dreamgym_env.storage.task_pool import Outcome, PoolTask
from dreamgym_env.tasks import EpisodeOutcome


class CurriculumConfig(BaseModel):
    """Settings of the curriculum (the paper publishes none of these; the defaults are ours).

    Attributes:
        generated_fraction: lambda, the largest fraction of episodes that use generated tasks.
        group_n: n, the latest outcomes a task's variance is computed over.
        min_rollouts: A task with fewer own outcomes borrows its similarity cluster's (see
            :mod:`~dreamgym_env.curriculum.stats`) and, with none at all, counts as unexplored.
        similarity_threshold: Cosine similarity at which two tasks share a cluster for statistics.
        weighting: ``"variance"`` (curriculum) or ``"uniform"`` (within each part of the mixture).
        unexplored_weight: Priority of a task with no outcome yet (0.25 is the largest possible V of
            a binary reward, so new tasks are tried early).
        min_weight: Floor of every priority.
        parents_per_update: Top tasks by V (V > 0) given to the generator per :meth:`update`.
        candidates_per_task: Variants asked for per parent.
        duplicate_threshold: Cosine similarity at which a candidate is a near-duplicate of a pool task.
        min_parent_similarity: A candidate less similar to its parent is rejected (0 disables).
        max_generated: Stop generating once the domain has this many generated tasks (None: no cap).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    generated_fraction: float = Field(0.5, ge=0.0, le=1.0)
    group_n: int = Field(8, ge=2)
    min_rollouts: int = Field(4, ge=1)
    similarity_threshold: float = Field(0.8, gt=0.0, le=1.0)
    weighting: Literal["variance", "uniform"] = "variance"
    unexplored_weight: float = Field(0.25, gt=0.0)
    min_weight: float = Field(0.01, gt=0.0)
    parents_per_update: int = Field(8, ge=1)
    candidates_per_task: int = Field(4, ge=1)
    duplicate_threshold: float = Field(0.9, gt=0.0, le=1.0)
    min_parent_similarity: float = Field(0.0, ge=0.0, le=1.0)
    max_generated: int | None = Field(None, ge=0)


class CurriculumSampler:
    """A :class:`~dreamgym_env.tasks.TaskSampler` over a durable :class:`TaskPool`, with task generation.

    Args:
        pool: A :class:`TaskPool` or the path of its database file.
        domain: The domain whose tasks are sampled (name or object).
        seeds: Seed tasks added to the pool (known ids are skipped, so a restart is safe); default the
            domain's own seed tasks when the pool holds none for this domain.
        backend: The backend that proposes variants in :meth:`update` (usually the experience model's).
            Without one, the sampler only reweights existing tasks.
        embeddings: Instruction embeddings for similarity grouping and near-duplicate checks (default:
            the replay buffer's offline hashing embedder).
        config: :class:`CurriculumConfig`; its fields may also be given as keywords.

    Example:
        >>> sampler = CurriculumSampler("runs/pool.sqlite", domain="webshop", backend=env.unwrapped.backend)
        >>> envs = DreamGymVectorEnv("webshop", num_envs=32, group_size=8, tasks=sampler, ...)
        >>> for batch in range(100):
        ...     rollout(envs)          # record_outcome is called by the envs at every episode end
        ...     sampler.update()       # propose variants of the tasks with the highest reward variance
    """

    def __init__(
        self,
        pool: TaskPool | str,
        domain: str | Domain,
        *,
        seeds: Sequence[Task] | None = None,
        backend: Backend | None = None,
        embeddings: TaskEmbeddings | None = None,
        config: CurriculumConfig | None = None,
        **overrides: Any,
    ) -> None:
        unknown = set(overrides) - set(CurriculumConfig.model_fields)
        if unknown:
            raise ConfigError(
                f"unknown curriculum setting(s) {sorted(unknown)}; "
                f"known: {sorted(CurriculumConfig.model_fields)}"
            )
        try:
            self.config = CurriculumConfig.model_validate(
                {**(config or CurriculumConfig()).model_dump(), **overrides}
            )
        except ValidationError as e:
            raise ConfigError(f"invalid curriculum setting: {e}") from e
        self.pool = pool if isinstance(pool, TaskPool) else TaskPool(pool)
        self.domain = get_domain(domain).name
        if seeds is None and self.pool.count(domain=self.domain, origin="seed") == 0:
            seeds = get_domain(domain).seed_tasks()
        if seeds:
            wrong = [t.task_id for t in seeds if t.domain != self.domain]
            if wrong:
                raise ConfigError(f"seed tasks {wrong[:5]} are not of domain {self.domain!r}")
            self.pool.add_tasks(seeds, origin="seed")
        self.embeddings = embeddings or TaskEmbeddings()
        self.generator = (
            TaskGenerator(
                backend,
                embeddings=self.embeddings,
                candidates=self.config.candidates_per_task,
                duplicate_threshold=self.config.duplicate_threshold,
                min_parent_similarity=self.config.min_parent_similarity,
            )
            if backend is not None
            else None
        )
        self.sampled_total = 0
        self.sampled_generated = 0
        self._entries: dict[str, PoolTask] = {}
        self._seeds: list[PoolTask] = []
        self._generated: list[PoolTask] = []
        self._history: dict[str, deque[Outcome]] = {}
        self._last_seq = 0
        self._stats: dict[str, TaskStats] | None = None
        self._clusters: np.ndarray | None = None
        self.refresh()

    # ------------------------------------------------------------------ TaskSampler
    def sample(self, rng: np.random.Generator) -> Task:
        """Draw the next episode's task (from ``rng`` only)."""
        lam = self.config.generated_fraction
        use_generated = (
            bool(self._generated)
            and lam > 0.0
            and float(rng.random()) < lam
            and self.sampled_generated + 1 <= lam * (self.sampled_total + 1)
        )
        part = self._generated if use_generated else self._seeds
        weights = self._weights(part)
        index = int(rng.choice(len(part), p=weights / weights.sum()))
        self.sampled_total += 1
        self.sampled_generated += int(use_generated)
        return part[index].task

    def record_outcome(self, task: Task, reward: float, success: bool) -> None:
        """Append the episode's outcome to the pool (a task not in the pool is added as ``external``)."""
        self.record_outcomes([EpisodeOutcome(task, reward, success)])

    def record_outcomes(self, outcomes: Sequence[EpisodeOutcome]) -> None:
        """Append several episodes' outcomes to the pool in one transaction (a vector env's step)."""
        unknown = {o.task.task_id: o.task for o in outcomes if o.task.task_id not in self._entries}
        if unknown:
            self.pool.add_tasks(list(unknown.values()), origin="external")
            for task_id in unknown:
                entry = self.pool.get(task_id)
                if entry is not None:
                    self._entries[task_id] = entry
        seqs = self.pool.record_outcomes([(o.task.task_id, o.reward, o.success) for o in outcomes])
        for seq, o in zip(seqs, outcomes, strict=True):
            self._history.setdefault(o.task.task_id, deque(maxlen=self.config.group_n)).appendleft(
                Outcome(seq, o.task.task_id, float(o.reward), bool(o.success), 0.0)
            )
            self._last_seq = max(self._last_seq, seq)
        self._stats = None

    def get(self, task_id: str) -> Task | None:
        """The pool's task with this id (lets ``reset(options={"task": id})`` pin a pool task)."""
        entry = self._entries.get(task_id) or self.pool.get(task_id)
        return entry.task if entry is not None else None

    # ------------------------------------------------------------------ curriculum
    def stats(self) -> dict[str, TaskStats]:
        """Outcome statistics of every sampled task of the domain (cached until the next outcome)."""
        if self._stats is not None:
            return self._stats
        tasks = self._seeds + self._generated
        if self._clusters is None and tasks:  # depends on the task set only: kept until refresh()
            vectors = self.embeddings.of_tasks([e.task for e in tasks])
            self._clusters = similarity_clusters(vectors, self.config.similarity_threshold)
        stats = compute_task_stats(
            [e.task_id for e in tasks],
            self._history,
            n=self.config.group_n,
            min_rollouts=self.config.min_rollouts,
            clusters=self._clusters,
        )
        self._stats = stats
        return stats

    def parents(self) -> list[tuple[Task, TaskStats]]:
        """The tasks the next :meth:`update` would vary: the top ``parents_per_update`` by V, V > 0."""
        stats = self.stats()
        ranked = sorted(
            (e for e in self._seeds + self._generated if stats[e.task_id].variance > 0.0),
            key=lambda e: (-stats[e.task_id].variance, -stats[e.task_id].rollouts, e.seq),
        )
        return [(e.task, stats[e.task_id]) for e in ranked[: self.config.parents_per_update]]

    def update(self, *, seed: int | None = None) -> GenerationResult:
        """One generation round: vary the top tasks by V, keep what passes the checks, store both.

        Call it between batches. Returns an empty result when there is no backend, no task with
        V > 0, or the ``max_generated`` cap is reached.
        """
        return run_sync(self.aupdate(seed=seed))

    async def aupdate(self, *, seed: int | None = None) -> GenerationResult:
        """Coroutine form of :meth:`update`."""
        self.refresh()
        cap = self.config.max_generated
        if self.generator is None or (cap is not None and len(self._generated) >= cap):
            return GenerationResult()
        parents = self.parents()
        if not parents:
            return GenerationResult()
        existing = [e.task for e in self.pool.tasks(domain=self.domain)]
        result = await self.generator.agenerate(parents, existing, seed=seed)
        if cap is not None:
            room = max(cap - len(self._generated), 0)
            result.accepted = result.accepted[:room]
        self.pool.add_tasks(result.accepted, origin="generated")
        if result.rejected:
            self.pool.record_rejections(result.rejected)
        self.refresh()
        return result

    def refresh(self) -> None:
        """Reload tasks and recent outcomes from the pool (other processes may have written to it)."""
        entries = self.pool.tasks(domain=self.domain)
        self._entries = {e.task_id: e for e in entries}
        self._seeds = [e for e in entries if e.origin == "seed"]
        self._generated = [e for e in entries if e.origin == "generated"]
        n = self.config.group_n
        recent = self.pool.recent_outcomes(n, domain=self.domain)
        self._history = {tid: deque(outcomes, maxlen=n) for tid, outcomes in recent.items()}
        self._last_seq = max((o.seq for outs in recent.values() for o in outs), default=0)
        self._stats = None
        self._clusters = None
        if not self._seeds and not self._generated:
            raise ConfigError(
                f"the task pool {self.pool.path} holds no {self.domain} tasks to sample; give seeds=[...]"
            )

    @property
    def generated_share(self) -> float:
        """Fraction of the draws so far that used generated tasks."""
        return self.sampled_generated / self.sampled_total if self.sampled_total else 0.0

    def _weights(self, part: Sequence[PoolTask]) -> np.ndarray:
        if self.config.weighting == "uniform":
            return np.ones(len(part))
        stats = self.stats()
        cfg = self.config
        weights = np.empty(len(part))
        for i, entry in enumerate(part):
            s = stats[entry.task_id]
            weights[i] = cfg.unexplored_weight if s.rollouts < cfg.min_rollouts else s.variance
        return np.maximum(weights, cfg.min_weight)

    def __repr__(self) -> str:
        return (
            f"CurriculumSampler(domain={self.domain!r}, seeds={len(self._seeds)}, "
            f"generated={len(self._generated)}, "
            f"generated_fraction={self.config.generated_fraction})"
        )
