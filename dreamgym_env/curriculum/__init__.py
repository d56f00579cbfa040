"""Curriculum task generation: sample where the agent's outcomes are mixed, and grow the pool there.

DreamGym keeps training at the edge of the agent's ability: tasks whose group of rollouts both
succeeds and fails (high reward variance) seed new variants written by the experience model itself.

* :class:`TaskPool`: durable SQLite store of seed and generated tasks and every episode outcome.
* :func:`compute_task_stats`: group reward variance over the latest n rollouts, with similarity
  grouping for tasks sampled one rollout at a time.
* :class:`TaskGenerator`: asks a :class:`~dreamgym_env.experience.backends.Backend` for variants,
  validates (:mod:`~dreamgym_env.curriculum.validators`), deduplicates and selects them.
* :class:`CurriculumSampler`: the :class:`~dreamgym_env.tasks.TaskSampler` to give an env
  (``tasks=sampler``); call its :meth:`~CurriculumSampler.update` between batches.
* :func:`build_report`, :func:`plot_report`: what a user reads about the pool.
"""

from dreamgym_env.curriculum.generator import GenerationResult, TaskGenerator
from dreamgym_env.curriculum.pool import TaskPool, task_family
from dreamgym_env.curriculum.report import CurriculumReport, build_report, format_report, plot_report
from dreamgym_env.curriculum.sampler import CurriculumConfig, CurriculumSampler
from dreamgym_env.curriculum.stats import TaskEmbeddings, TaskStats, compute_task_stats, group_variance
from dreamgym_env.curriculum.validators import register_validator, validate_task
from dreamgym_env.storage.task_pool import Outcome, PoolTask, Rejection

__all__ = [
    "CurriculumConfig",
    "CurriculumReport",
    "CurriculumSampler",
    "GenerationResult",
    "Outcome",
    "PoolTask",
    "Rejection",
    "TaskEmbeddings",
    "TaskGenerator",
    "TaskPool",
    "TaskStats",
    "build_report",
    "compute_task_stats",
    "format_report",
    "group_variance",
    "plot_report",
    "register_validator",
    "task_family",
    "validate_task",
]
