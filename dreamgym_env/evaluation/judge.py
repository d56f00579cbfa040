"""Optional LLM-judge rubrics of the DreamGym paper: consistency, diversity, informativeness, hallucination.

A judge model (any OpenAI-compatible endpoint, usually stronger than the experience model) scores each
predicted transition from 1 (bad) to 5 (good) against the real one. ``hallucination`` is scored so
that 5 means *no* invented content, so higher is better on every rubric. Diversity is judged per
transition (does the state carry specific, varied content rather than a generic template); the
paper's set-level reading is the mean.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from dreamgym_env.evaluation.runner import EvalRecord
from dreamgym_env.experience.backends.base import Backend, CompletionRequest

_RUBRICS: tuple[str, ...] = ("consistency", "diversity", "informativeness", "hallucination")

_SYSTEM = """\
You grade a simulator of an interactive environment. Given the task, the agent's action, the real
environment's next state and the simulator's predicted next state, score the prediction from 1 to 5:
- consistency: agrees with the real outcome and with the situation (same effect, same objects);
- diversity: specific and varied content, not a generic template;
- informativeness: gives the agent what it needs to choose its next action;
- hallucination: 5 = invents nothing that contradicts the situation, 1 = invents objects or progress.
Answer with one JSON object with these four integer fields."""

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {name: {"type": "integer", "minimum": 1, "maximum": 5} for name in _RUBRICS},
    "required": list(_RUBRICS),
    "additionalProperties": False,
}


def _request(record: EvalRecord, task: str) -> CompletionRequest:
    predicted = record.predicted["next_state"] if record.predicted else "(no valid prediction)"
    user = (
        f"# Task\n{task}\n\n# Action\n{record.action}\n\n# Real next state\n{record.real_next_state}\n\n"
        f"# Predicted next state\n{predicted}\n"
    )
    return CompletionRequest(
        messages=[{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}],
        json_schema=_SCHEMA,
        schema_name="rubric_scores",
    )


async def judge_records(
    backend: Backend, records: Sequence[EvalRecord], tasks: dict[str, str], *, concurrency: int = 8
) -> dict[str, float | None]:
    """Mean judge score per rubric over ``records`` (unparsable judge answers are skipped).

    Args:
        backend: The judge's endpoint.
        records: Scored predictions from :func:`~dreamgym_env.evaluation.runner.evaluate`.
        tasks: Task instruction by task id.
        concurrency: Judge requests in flight.
    """
    gate = asyncio.Semaphore(concurrency)

    async def one(record: EvalRecord) -> dict[str, int] | None:
        if record.predicted is None:
            return dict.fromkeys(_RUBRICS, 1)
        async with gate:
            completion = await backend.acomplete(_request(record, tasks.get(record.task_id, "")))
        try:
            data = json.loads(completion.text)
            return {name: int(data[name]) for name in _RUBRICS}
        except (ValueError, KeyError, TypeError):
            return None

    scores = [s for s in await asyncio.gather(*(one(r) for r in records)) if s is not None]
    return {name: (sum(s[name] for s in scores) / len(scores) if scores else None) for name in _RUBRICS}
