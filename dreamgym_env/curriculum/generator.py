"""Task generation: the experience model proposes variants of tasks with mixed outcomes.

For each parent task, one structured-output request (through the same :class:`Backend` as the
experience model) asks for ``candidates`` variants in the domain's :mod:`~dreamgym_env.curriculum.formats`.
Each candidate then passes, in order:

1. parsing against the schema (``parse``),
2. the domain validator (``validator``),
3. near-duplicate rejection: cosine similarity of instruction embeddings to every pool task and to
   variants accepted earlier in the round must stay below ``duplicate_threshold`` (``duplicate``),
4. an optional drift check: similarity to the parent at least ``min_parent_similarity`` (``drift``).

Selection keeps one candidate per parent: the most novel survivor (lowest maximum similarity to the
pool), so each round widens the pool as much as it can while every variant stays valid and
recognisably derived from its parent. The others are reported with stage ``selection``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from dreamgym_env._event_loop import run_sync
from dreamgym_env.curriculum.formats import VariantFormat, get_format, strict_json_schema
from dreamgym_env.curriculum.stats import TaskEmbeddings, TaskStats
from dreamgym_env.curriculum.validators import validate_task
from dreamgym_env.errors import BackendError, ConfigError, ServerUnreachableError
from dreamgym_env.experience.backends.base import Backend, CompletionRequest
from dreamgym_env.records import Task
from dreamgym_env.storage.task_pool import Rejection

SCHEMA_NAME = "task_variants"


@dataclass
class GenerationResult:
    """What one generation round produced.

    Attributes:
        accepted: New tasks (``source="generated"``, ``parent_id`` set), at most one per parent.
        rejected: Every candidate that did not enter the pool, with its stage and reason.
        parents: Ids of the parent tasks asked about.
    """

    accepted: list[Task] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    parents: list[str] = field(default_factory=list)

    def reasons(self) -> list[str]:
        """``"stage: reason"`` for every rejection, for logs and tests."""
        return [f"{r.stage}: {r.reason}" for r in self.rejected]


def _answer_model(fmt: VariantFormat, candidates: int) -> type[BaseModel]:
    return create_model(
        "TaskVariants",
        __config__=ConfigDict(extra="forbid"),
        reasoning=(
            str,
            Field(max_length=400, description="Why these variants keep the parent's difficulty."),
        ),
        variants=(list[fmt.model], Field(min_length=1, max_length=candidates)),  # type: ignore[name-defined]
    )


def variant_request(
    parent: Task,
    stats: TaskStats | None,
    *,
    candidates: int = 4,
    avoid: Sequence[str] = (),
    seed: int | None = None,
) -> CompletionRequest:
    """The structured-output request that asks for variants of ``parent``.

    Args:
        parent: The task to vary.
        stats: Its outcome statistics (shown to the model so it knows the task sits at the edge).
        candidates: How many variants to ask for.
        avoid: Instructions already in the pool near this parent (e.g. its earlier variants).
        seed: Sampling seed of the request.
    """
    fmt = get_format(parent.domain)
    system = (
        f"You write training tasks for an agent acting in the {parent.domain} environment. {fmt.guidance}\n"
        "A curriculum gives the agent tasks at the edge of its ability: tasks it sometimes solves and "
        f"sometimes fails. You receive one such task and propose {candidates} variants of it. Each variant "
        "keeps the kind "
        "of goal and about the same difficulty but changes concrete details (the item, its attributes, the "
        "objects, places or pages involved), so that it is a new task and not a rewording. Every variant "
        "must be realistic and solvable in this environment, and its fields must agree with its "
        "instruction. Answer in JSON: brief reasoning first, then the variants."
    )
    record = ""
    if stats is not None and stats.rollouts:
        wins = round(stats.success_rate * stats.rollouts)
        record = f" (the agent succeeded in {wins} of {stats.rollouts} recent attempts)"
    lines = [f"Task{record}:", json.dumps(fmt.describe(parent), ensure_ascii=False)]
    if avoid:
        lines += ["", "Already in the pool; do not repeat these:"] + [f"- {text}" for text in avoid]
    lines += ["", f"Propose {candidates} variants."]
    schema = strict_json_schema(_answer_model(fmt, candidates))
    return CompletionRequest(
        messages=[{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}],
        json_schema=schema,
        schema_name=SCHEMA_NAME,
        seed=seed,
    )


class TaskGenerator:
    """Proposes, checks and selects task variants through an experience-model backend.

    Args:
        backend: The backend that answers the requests (the experience model's own, usually).
        embeddings: Instruction embeddings for the similarity checks (default: the offline hashing
            embedder).
        candidates: Variants asked for per parent.
        duplicate_threshold: A candidate at least this similar (cosine) to a pool task is a near-duplicate.
        min_parent_similarity: A candidate less similar than this to its parent is not a variant of it
            (0 disables the check).
        avoid_shown: How many existing variants of the parent the prompt lists as taken.

    Example:
        >>> generator = TaskGenerator(ScriptedBackend(lambda request: answer))
        >>> result = generator.generate([(parent, stats)], existing=pool_tasks)
        >>> result.accepted, result.reasons()
    """

    def __init__(
        self,
        backend: Backend,
        *,
        embeddings: TaskEmbeddings | None = None,
        candidates: int = 4,
        duplicate_threshold: float = 0.9,
        min_parent_similarity: float = 0.0,
        avoid_shown: int = 5,
    ) -> None:
        if candidates < 1:
            raise ConfigError(f"candidates must be at least 1, got {candidates}")
        if not 0.0 < duplicate_threshold <= 1.0:
            raise ConfigError(f"duplicate_threshold must be in (0, 1], got {duplicate_threshold}")
        self.backend = backend
        self.embeddings = embeddings or TaskEmbeddings()
        self.candidates = candidates
        self.duplicate_threshold = duplicate_threshold
        self.min_parent_similarity = min_parent_similarity
        self.avoid_shown = avoid_shown

    def generate(
        self,
        parents: Sequence[tuple[Task, TaskStats | None]],
        existing: Sequence[Task],
        *,
        seed: int | None = None,
    ) -> GenerationResult:
        """Synchronous form of :meth:`agenerate`."""
        return run_sync(self.agenerate(parents, existing, seed=seed))

    async def agenerate(
        self,
        parents: Sequence[tuple[Task, TaskStats | None]],
        existing: Sequence[Task],
        *,
        seed: int | None = None,
    ) -> GenerationResult:
        """Ask for variants of every parent at once, then check and select them.

        Args:
            parents: ``(task, stats)`` pairs, best parent first.
            existing: Every task already in the pool (near-duplicate check, ids already taken).
            seed: Base sampling seed; parent ``i`` uses ``seed + i``.

        Raises:
            ServerUnreachableError: The backend's server is down (other backend failures are reported
                as rejections with stage ``backend``).
        """
        result = GenerationResult(parents=[p.task_id for p, _ in parents])
        requests = [
            variant_request(
                parent,
                stats,
                candidates=self.candidates,
                avoid=self._siblings(parent, existing),
                seed=None if seed is None else seed + i,
            )
            for i, (parent, stats) in enumerate(parents)
        ]
        answers = await asyncio.gather(*(self._ask(r) for r in requests), return_exceptions=True)

        pool_tasks = list(existing)
        taken = {t.task_id for t in pool_tasks}
        pool_vectors = self.embeddings.of_tasks(pool_tasks)
        for (parent, _), answer in zip(parents, answers, strict=True):
            if isinstance(answer, ServerUnreachableError):
                raise answer
            if isinstance(answer, BaseException):
                if not isinstance(answer, BackendError):
                    raise answer
                result.rejected.append(Rejection("backend", str(answer), "", parent.task_id, parent.domain))
                continue
            tasks, rejected = self._parse(answer, parent)
            result.rejected += rejected
            chosen = self._select(parent, tasks, pool_vectors, taken, result)
            if chosen is not None:
                result.accepted.append(chosen)
                taken.add(chosen.task_id)
                pool_vectors = np.concatenate([pool_vectors, self.embeddings.of_tasks([chosen])])
        return result

    # ------------------------------------------------------------------ steps
    async def _ask(self, request: CompletionRequest) -> str:
        completion = await self.backend.acomplete(request)
        return completion.text

    def _siblings(self, parent: Task, existing: Sequence[Task]) -> list[str]:
        siblings = [t.instruction for t in existing if t.parent_id == parent.task_id]
        return siblings[-self.avoid_shown :] if self.avoid_shown else []

    def _parse(self, text: str, parent: Task) -> tuple[list[Task], list[Rejection]]:
        """Candidates that parse and pass the domain validator, and the rejections of the others."""
        fmt = get_format(parent.domain)
        rejected: list[Rejection] = []

        def reject(stage: str, reason: str, candidate: dict[str, Any] | str) -> None:
            rejected.append(Rejection(stage, reason, candidate, parent.task_id, parent.domain))

        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            reject(
                "parse",
                f"the answer is not JSON ({e.msg} at character {e.pos}); it may be truncated",
                text[:2000],
            )
            return [], rejected
        raw = data.get("variants") if isinstance(data, dict) else None
        if not isinstance(raw, list) or not raw:
            reject(
                "parse",
                "the answer has no non-empty 'variants' list",
                data if isinstance(data, dict) else text,
            )
            return [], rejected

        tasks: list[Task] = []
        for candidate in raw[: self.candidates]:
            shown = candidate if isinstance(candidate, dict) else str(candidate)
            try:
                variant = fmt.model.model_validate(candidate)
            except ValidationError as e:
                first = e.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "variant"
                reject("parse", f"{where}: {first['msg']}", shown)
                continue
            instruction = " ".join(getattr(variant, "instruction", "").split())
            digest = hashlib.sha1(f"{parent.domain}\n{instruction.lower()}".encode()).hexdigest()[:12]
            task = Task(
                task_id=f"{parent.domain}-gen-{digest}",
                domain=parent.domain,
                instruction=instruction,
                metadata=fmt.to_metadata(variant, parent),
                source="generated",
                parent_id=parent.task_id,
            )
            reason = validate_task(task)
            if reason is not None:
                reject("validator", reason, shown)
            else:
                tasks.append(task)
        return tasks, rejected

    def _select(
        self,
        parent: Task,
        tasks: list[Task],
        pool_vectors: np.ndarray,
        taken: set[str],
        result: GenerationResult,
    ) -> Task | None:
        """Drop near-duplicates and drifted candidates; keep the most novel survivor."""
        survivors: list[tuple[float, Task]] = []
        seen: set[str] = set()
        if not tasks:
            return None
        vectors = self.embeddings.of_texts([t.instruction for t in tasks])
        parent_vector = self.embeddings.of_tasks([parent])[0]
        for task, vector in zip(tasks, vectors, strict=True):
            candidate = {"instruction": task.instruction, **task.metadata}
            sims = pool_vectors @ vector if len(pool_vectors) else np.zeros(0)
            nearest = float(sims.max()) if len(sims) else 0.0
            if task.task_id in taken or task.task_id in seen:
                result.rejected.append(
                    Rejection(
                        "duplicate",
                        "the same instruction is already in the pool",
                        candidate,
                        parent.task_id,
                        parent.domain,
                    )
                )
                continue
            if nearest >= self.duplicate_threshold:
                result.rejected.append(
                    Rejection(
                        "duplicate",
                        f"too similar to a pool task (cosine {nearest:.2f} >= {self.duplicate_threshold})",
                        candidate,
                        parent.task_id,
                        parent.domain,
                    )
                )
                continue
            to_parent = float(parent_vector @ vector)
            if to_parent < self.min_parent_similarity:
                result.rejected.append(
                    Rejection(
                        "drift",
                        f"not a variant of its parent "
                        f"(cosine {to_parent:.2f} < {self.min_parent_similarity})",
                        candidate,
                        parent.task_id,
                        parent.domain,
                    )
                )
                continue
            seen.add(task.task_id)
            survivors.append((nearest, task))
        if not survivors:
            return None
        survivors.sort(key=lambda pair: pair[0])
        for nearest, task in survivors[1:]:
            result.rejected.append(
                Rejection(
                    "selection",
                    f"valid, but a more novel variant was kept (max pool cosine {nearest:.2f})",
                    {"instruction": task.instruction, **task.metadata},
                    parent.task_id,
                    parent.domain,
                )
            )
        return survivors[0][1]
