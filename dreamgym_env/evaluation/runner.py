"""Replay held-out real transitions through a predictor (a served model or a baseline) and score them.

The held-out cases are rebuilt exactly as the SFT data was (:mod:`dreamgym_env.training.sft_data`):
same task split, same history window, demonstrations retrieved from training tasks only. A served
model therefore sees the very requests the env would send it, and a baseline sees the same facts.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, NamedTuple

from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.config import EnvConfig, Setting
from dreamgym_env.domains import get_domain
from dreamgym_env.errors import DataFormatError, PromptTooLongError
from dreamgym_env.evaluation.fidelity import FidelityReport, TransitionScore, aggregate, score_transition
from dreamgym_env.experience.backends.base import Backend
from dreamgym_env.experience.model import ExperienceModel
from dreamgym_env.experience.schema import ExperienceOutput
from dreamgym_env.training.sft_data import (
    PROMPT_SETTINGS,
    DemonstrationIndex,
    SFTBuildConfig,
    TransitionCase,
    build_cases,
    load_manifest,
    split_transitions,
)


class Answer(NamedTuple):
    """A predictor's answer to one case: the transition (``None``: no valid answer) and who gave it."""

    output: ExperienceOutput | None
    answered_by: str


Predictor = Callable[[TransitionCase], Awaitable[Answer]]
"""Predicts one transition (:class:`Answer`)."""


@dataclass(frozen=True)
class EvalRecord:
    """One scored prediction, kept for inspection (``predictions.jsonl``)."""

    task_id: str
    episode_id: str
    step: int
    action: str
    real_next_state: str
    predicted: dict[str, Any] | None
    score: TransitionScore


def load_eval_cases(
    buffer_path: str | Path,
    data_dir: str | Path,
    *,
    limit: int | None = None,
    seed: int = 0,
    split: Literal["eval", "eval_episodes"] = "eval",
    setting: Setting | None = None,
) -> tuple[list[TransitionCase], SFTBuildConfig]:
    """The held-out transitions of the split recorded in ``data_dir``'s manifest, with their requests' facts.

    Args:
        buffer_path: The replay buffer the SFT data was built from.
        data_dir: The SFT data folder (its ``manifest.json`` names the held-out tasks and prompt settings).
        limit: Score at most this many transitions (a seeded sample, the same for every predictor).
        seed: Seeds the sample.
        split: ``"eval"`` (held-out tasks) or ``"eval_episodes"`` (held-out episodes of training tasks).
        setting: Build the requests of this setting (default: the one the data was built in).
    """
    manifest = load_manifest(data_dir)
    config = SFTBuildConfig(**manifest.settings)
    if setting is not None:
        config = replace(config, setting=setting)
    with ReplayBuffer.open(buffer_path) as buffer:
        transitions = list(buffer.iter_transitions(domain=config.domain))
    splits, train_ids, eval_ids, _ = split_transitions(transitions, config)
    if sorted(train_ids) != sorted(manifest.train_tasks) or sorted(eval_ids) != sorted(manifest.eval_tasks):
        raise DataFormatError(
            "the buffer's tasks do not match the SFT manifest's split; evaluate with the buffer the data "
            "was built from, or rebuild the data with `dreamgym build-sft` if it was built before the split "
            "kept the tasks of one game together (ALFWorld's act_X and react_X)",
            path=str(buffer_path),
        )
    index = DemonstrationIndex(splits["train"], config.demonstrations)
    try:
        cases = list(
            build_cases(
                splits[split],
                index,
                config.top_k,
                learned_view=config.learned_view(get_domain(config.domain)),
            )
        )
    finally:
        index.close()
    if limit is not None and len(cases) > limit:
        cases = random.Random(seed).sample(cases, limit)
    return cases, config


def model_predictor(
    backend: Backend, config: SFTBuildConfig, env_config: EnvConfig | None = None
) -> Predictor:
    """Predictions of an experience model behind ``backend``, with the env's prompt settings.

    Unparsable answers (after the configured retries) and prompts longer than the served context become
    ``None``, counted as parse failures.
    """
    base = env_config or EnvConfig()
    settings = config.env_config()
    env_config = base.model_copy(
        update={
            **{name: getattr(settings, name) for name in PROMPT_SETTINGS},
            "on_invalid_output": "fail_state",
        }
    )
    model = ExperienceModel(get_domain(config.domain), backend, env_config)

    async def predict(case: TransitionCase) -> Answer:
        t = case.transition
        try:
            prediction = await model.apredict(
                case.task,
                case.history,
                case.demonstrations,
                t.state,
                t.action,
                case.prev_admissible,
                episode_id=t.episode_id,  # one endpoint per episode: its prefix stays cached there
            )
        except PromptTooLongError:  # the model cannot take this request: a failure, as the env would fail
            return Answer(None, "model")
        return Answer(prediction.output, prediction.answered_by)

    return predict


async def repeat_state(case: TransitionCase) -> Answer:
    """Trivial baseline: nothing happens (the state and its commands stay; the episode goes on)."""
    output = ExperienceOutput(
        reasoning="",
        next_state=case.transition.state,
        admissible_actions=case.prev_admissible,
        done=False,
        success=False,
    )
    return Answer(output, "baseline")


async def nearest_transition(case: TransitionCase) -> Answer:
    """Retrieval baseline: the outcome of the most similar training transition (the top demonstration)."""
    if not case.demonstrations:
        return await repeat_state(case)
    demo = case.demonstrations[0]
    output = ExperienceOutput(
        reasoning="",
        next_state=demo.next_state,
        admissible_actions=list(demo.metadata.get("admissible_actions") or []),
        done=demo.done,
        success=demo.success,
    )
    return Answer(output, "baseline")


BASELINES: dict[str, Predictor] = {"repeat-state": repeat_state, "nearest-transition": nearest_transition}
"""Predictors that need no model, by name."""


async def evaluate(
    name: str,
    predictor: Predictor,
    cases: Sequence[TransitionCase],
    *,
    concurrency: int = 16,
    setting: str | None = None,
) -> tuple[FidelityReport, list[EvalRecord]]:
    """Score ``predictor`` on every case, ``concurrency`` requests at a time.

    Each step is also scored by its verb family and kind (:meth:`Domain.step_kind`) and who answered
    it; ``setting`` is recorded in the report.
    """
    gate = asyncio.Semaphore(concurrency)

    async def one(case: TransitionCase) -> EvalRecord:
        async with gate:
            output, answered_by = await predictor(case)
        t = case.transition
        domain = get_domain(t.domain)
        family, kind = domain.step_kind([s.state for s in case.history], t.state, t.action, t.next_state)
        consistent = None
        if kind == "revealing":
            consistent = output is not None and domain.consistent_reveal(
                t.state, t.action, output.next_state, t.next_state
            )
        return EvalRecord(
            task_id=t.task_id,
            episode_id=t.episode_id,
            step=t.step,
            action=t.action,
            real_next_state=t.next_state,
            predicted=None if output is None else output.model_dump(),
            score=score_transition(
                output,
                t,
                family=family,
                kind=kind,
                answered_by=answered_by if output is not None else "none",
                consistent=consistent,
            ),
        )

    records = list(await asyncio.gather(*(one(c) for c in cases)))
    return aggregate(name, [r.score for r in records], setting), records


def with_name(report: FidelityReport, name: str) -> FidelityReport:
    """The same report under another name."""
    return replace(report, name=name)
