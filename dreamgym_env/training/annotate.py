"""Reasoning annotation: a teacher model explains each real transition, and the buffer keeps the trace.

DreamGym trains its experience model to reason before it predicts; the reasoning targets come from a
stronger teacher that sees the *whole* trajectory and its outcome, so it can say why a step had the
effect it had (which the student, seeing only the past, must learn to infer). The teacher is any
OpenAI-compatible endpoint (or any :class:`Backend`).

Annotation is resumable and concurrent: only transitions without reasoning are sent (unless
``overwrite``), ``concurrency`` requests are in flight, and traces are committed to the buffer's
SQLite file in small transactions as they arrive, so an interrupted run loses at most one batch and
the next run continues where it stopped.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.experience.backends.base import Backend, CompletionRequest
from dreamgym_env.records import Transition
from dreamgym_env.training.sft_data import episodes_of

_SYSTEM = """\
You annotate recorded episodes of an interactive environment to teach a simulator of it. For the marked
step, explain in a few sentences why the environment produced that next state: what the action does in
the current situation, which objects and conditions it depends on, and whether it ends the episode
(and why it succeeds or fails). Reason from the situation before the step, as a simulator would; do
not quote the future. Answer with one JSON object: {"reasoning": "..."}."""

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"reasoning": {"type": "string", "maxLength": 1200}},
    "required": ["reasoning"],
    "additionalProperties": False,
}


@dataclass
class AnnotationReport:
    """What a run did."""

    pending: int
    annotated: int
    failed: int
    skipped_existing: int


def _teacher_request(
    episode: Sequence[Transition], index: int, max_state_chars: int = 1500
) -> CompletionRequest:
    """The teacher's request for step ``index`` of ``episode``: whole trajectory, outcome, marked step."""
    first = episode[0]
    last = episode[-1]
    outcome = "success" if last.done and last.success else "failure" if last.done else "not finished"
    lines = [f"# Task\n{first.task}\n", f"# Outcome of the episode: {outcome}\n", "# Trajectory\n"]
    for i, t in enumerate(episode):
        marker = "  <== EXPLAIN THIS STEP" if i == index else ""
        lines.append(
            f"## Step {i + 1}{marker}\nState:\n{t.state[:max_state_chars]}\nAction: {t.action}\n"
            f"Next state:\n{t.next_state[:max_state_chars]}\nDone: {str(t.done).lower()}, "
            f"success: {str(t.success).lower()}\n"
        )
    lines.append(f"\nExplain step {index + 1}.")
    return CompletionRequest(
        messages=[{"role": "system", "content": _SYSTEM}, {"role": "user", "content": "\n".join(lines)}],
        json_schema=_SCHEMA,
        schema_name="reasoning",
    )


def _reasoning(text: str) -> str | None:
    try:
        value = json.loads(text, strict=False).get("reasoning")
    except (ValueError, AttributeError):
        return None
    return value.strip() if isinstance(value, str) and value.strip() else None


async def annotate_buffer(
    buffer: ReplayBuffer,
    teacher: Backend,
    *,
    domain: str | None = None,
    concurrency: int = 8,
    batch_size: int = 32,
    limit: int | None = None,
    overwrite: bool = False,
) -> AnnotationReport:
    """Ask ``teacher`` for the reasoning of every unannotated real/offline transition and store it.

    Args:
        buffer: The replay buffer; traces go to its ``reasoning`` column.
        teacher: The teacher's backend.
        domain: Only this domain's transitions.
        concurrency: Requests in flight.
        batch_size: Traces per committed transaction.
        limit: Annotate at most this many transitions in this run.
        overwrite: Also re-annotate transitions that already have reasoning.

    Raises:
        BackendError: the teacher failed (e.g. unreachable); traces received before are kept.
    """
    grounded = [t for t in buffer.iter_transitions(domain=domain) if t.source in ("offline", "real")]
    jobs: list[tuple[list[Transition], int]] = []
    existing = 0
    for steps in episodes_of(grounded).values():
        for i, t in enumerate(steps):
            if t.reasoning and not overwrite:
                existing += 1
            else:
                jobs.append((steps, i))
    if limit is not None:
        jobs = jobs[:limit]
    gate = asyncio.Semaphore(concurrency)
    written: list[tuple[str, int, str]] = []
    done = failed = 0

    def flush() -> None:
        nonlocal done
        if written:
            buffer.store.set_reasoning(written)
            done += len(written)
            written.clear()

    async def one(steps: list[Transition], i: int) -> tuple[Transition, str | None]:
        async with gate:
            completion = await teacher.acomplete(_teacher_request(steps, i))
        return steps[i], _reasoning(completion.text)

    tasks = [asyncio.ensure_future(one(s, i)) for s, i in jobs]
    try:
        for next_done in asyncio.as_completed(tasks):
            transition, reasoning = await next_done
            if reasoning is None:
                failed += 1
                continue
            written.append((transition.episode_id, transition.step, reasoning))
            if len(written) >= batch_size:
                flush()
    finally:
        for task in tasks:
            task.cancel()
        flush()
    return AnnotationReport(pending=len(jobs), annotated=done, failed=failed, skipped_existing=existing)
