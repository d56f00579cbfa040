"""SimulatedWorld: a world whose steps an LLM experience model predicts (DreamGym's simulator).

The world is configuration, not a class per variant: the domain, an :class:`~dreamgym_env.config.EnvConfig`
(the model, ``top_k``, the ``setting``: ``"learned"`` or ``"privileged"``), where tasks come from (a
list or the curriculum's sampler), the replay buffer it retrieves demonstrations from and the memo of
known steps. It keeps nothing of an episode (the env hands it the episode with each action), so the
env's snapshots are whole episodes.

What a simulated step leaves behind is not the world's to do: the env that plays it stores the
transition and reports the outcome through its callbacks (:func:`store_in`,
:meth:`~dreamgym_env.tasks.OutcomeReporter.report`), which :class:`~dreamgym_env.env.DreamGymEnv`
wires up and :class:`~dreamgym_env.vector.DreamGymVectorEnv` batches.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from dreamgym_env._event_loop import run_sync
from dreamgym_env.config import EnvConfig
from dreamgym_env.domains import Domain, get_domain
from dreamgym_env.errors import ConfigError
from dreamgym_env.experience.backends import Backend, make_backend
from dreamgym_env.experience.memo import StepMemo
from dreamgym_env.experience.model import ExperienceModel, Prediction
from dreamgym_env.records import Source, Task, Transition
from dreamgym_env.retrieval import RetrievalQuery, Retriever, retrieve_query
from dreamgym_env.shipped_settings import SHIPPED_MODELS
from dreamgym_env.tasks import TaskSampler, as_task_sampler, resolve_task
from dreamgym_env.world import EpisodeStart, EpisodeView, WorldStep

if TYPE_CHECKING:
    from dreamgym_env.episode import EpisodeSnapshot

LEARNED_RETRIEVAL_SLACK = 8
"""Extra demonstrations a step asks for, to fill ``top_k`` after those it may not see are dropped.

A learned-setting step drops its own task's; a fork drops those of the episodes it was forked from.
"""


class SimulatedWorld:
    """The experience model as a :class:`~dreamgym_env.world.World`: one request per transition.

    Reset samples a task (or takes ``options["task"]``: a Task, dict, id or instruction) and asks the
    domain for its first state; a step retrieves the top-k demonstrations and asks the model for the
    next state, reward and ending. In the ``learned`` setting the episode never holds the engine's
    hidden facts, and demonstrations of the task itself are left out.

    Args:
        domain: Name or :class:`Domain`.
        config: How the model is asked (:class:`EnvConfig`; default its defaults).
        backend: The model's :class:`Backend`; default one made from ``config.backend``, closed with
            the world.
        tasks: Tasks (or their fields as dicts) or a sampler (the curriculum); default the domain's seed
            tasks.
        retriever: The replay buffer demonstrations come from; default :func:`default_retriever`.
        step_memo: The known steps of a deterministic domain; default :func:`make_step_memo`.
    """

    source: ClassVar[Source] = "sim"
    supports_snapshots: ClassVar[bool] = True

    def __init__(
        self,
        domain: str | Domain,
        config: EnvConfig | None = None,
        *,
        backend: Backend | None = None,
        tasks: Sequence[Task | dict[str, Any]] | TaskSampler | None = None,
        retriever: Retriever | None = None,
        step_memo: StepMemo | None = None,
    ) -> None:
        self.domain = get_domain(domain)
        self.config = config if config is not None else EnvConfig()
        _check_shipped_model(self.domain, self.config.backend.model)
        self._owns_backend = backend is None
        self.backend = backend if backend is not None else make_backend(self.config.backend)
        self.step_memo = step_memo if step_memo is not None else make_step_memo(self.domain, self.config)
        self.experience_model = ExperienceModel(self.domain, self.backend, self.config, self.step_memo)
        self.retriever = retriever if retriever is not None else default_retriever(self.domain, self.config)
        self.task_sampler = as_task_sampler(
            tasks if tasks is not None else self.domain.seed_tasks(), self.domain.name
        )

    # ------------------------------------------------------------------ World
    def reset(self, options: dict[str, Any], rng: np.random.Generator) -> EpisodeStart:
        """A sampled task, or ``options["task"]`` (Task, dict, id or instruction), and its first state."""
        if "task" in options and options["task"] is not None:
            task = resolve_task(options["task"], self.domain.name, self.task_sampler)
        else:
            task = self.task_sampler.sample(rng)
        task = self.visible_task(task)
        initial = self.domain.initial_state(task, rng)
        return EpisodeStart(task, initial.state, list(initial.admissible_actions))

    def restore(self, snapshot: EpisodeSnapshot) -> Task:
        """A snapshot's task as this world plays it (:meth:`visible_task`); the rest of the episode is the env's."""
        return self.visible_task(snapshot.task)

    def visible_task(self, task: Task) -> Task:
        """In the learned setting the episode never holds the real world's hidden facts, even a snapshot's."""
        return self.domain.learned_view(task) if self.config.setting == "learned" else task

    async def step(self, action: str, episode: EpisodeView) -> WorldStep:
        """One model-predicted transition; a backend error propagates with the episode unchanged."""
        started = time.perf_counter()
        demos = self.demonstrations(action, episode)
        retrieve_s = time.perf_counter() - started
        prediction = await self.experience_model.apredict(
            episode.task,
            episode.history,
            demos,
            episode.state,
            action,
            episode.admissible_actions,
            seed=int(episode.rng.integers(2**31 - 1)),
            episode_id=episode.episode_id,
        )
        extra = _timing_info(prediction, retrieve_s, time.perf_counter() - started, self.config.setting)
        # A step given up after its answers came back: the backend hears they were not used.
        forget = functools.partial(self.backend.discard, prediction.completions)
        output = prediction.output
        if output is None:  # on_invalid_output == "fail_state": the world stays as it was
            return WorldStep(
                episode.state,
                extra={"model_error": prediction.error, **extra},
                changed=False,
                on_discard=forget,
            )
        success = output.done and output.success
        return WorldStep(
            output.next_state,
            reward=1.0 if success else 0.0,
            done=output.done,
            success=success,
            admissible_actions=list(output.admissible_actions),
            reasoning=output.reasoning,
            extra=extra,
            on_discard=forget,
        )

    def close(self) -> None:
        """Release the backend's connections if this world created it."""
        if self._owns_backend:
            run_sync(self.backend.aclose())

    # ------------------------------------------------------------------ retrieval
    def retrieval_query(self, action: str, episode: EpisodeView) -> RetrievalQuery | None:
        """The demonstrations request a step of ``action`` makes in ``episode``, or ``None`` if it makes none.

        A vector env collects these from all its sub-envs to answer them in one batched search.
        """
        if self.retriever is None or self.config.top_k == 0:
            return None
        filtered = self.config.setting == "learned" or bool(episode.ancestors)
        k = self.config.top_k + (LEARNED_RETRIEVAL_SLACK if filtered else 0)
        return RetrievalQuery(episode.state, action, k, self.domain.name, episode.episode_id)

    def demonstrations(self, action: str, episode: EpisodeView) -> list[Transition]:
        """The ``top_k`` stored transitions the model is shown for ``action`` in ``episode``."""
        query = self.retrieval_query(action, episode)
        if query is None or self.retriever is None:
            return []
        found = retrieve_query(self.retriever, query)
        if episode.ancestors:  # a fork's first steps are its ancestors' stored ones: not demonstrations
            found = [t for t in found if t.episode_id not in episode.ancestors]
        if self.config.setting == "learned":  # demonstrations of other tasks only
            found = [t for t in found if t.task_id != episode.task.task_id]
        return found[: self.config.top_k]


def store_in(retriever: Retriever | None, config: EnvConfig) -> Callable[[Transition], None] | None:
    """A simulated env's ``on_transition``: each transition offered to ``retriever``, if ``config`` stores them.

    ``None`` (nothing stored) without a retriever or with ``store_transitions="none"``. The retriever's
    ``add`` is looked up at each call, and the callback pickles with the env.
    """
    if retriever is None or config.store_transitions != "all":
        return None
    return functools.partial(_add, retriever)


def _add(retriever: Retriever, transition: Transition) -> None:
    retriever.add(transition)


def episode_limits(config: EnvConfig) -> dict[str, Any]:
    """The :class:`~dreamgym_env.episode.EpisodeEnv` limits a simulated env takes from its config."""
    return {
        "max_steps": config.max_steps,
        "max_state_chars": config.max_state_chars,
        "max_action_chars": config.max_action_chars,
    }


def default_retriever(domain: Domain, config: EnvConfig) -> Retriever | None:
    """Where an env that brings no replay buffer finds demonstrations: a shipped model's own, or none.

    A shipped model of the env's domain (``model="textworld"`` or ``"textworld-learned"`` for TextWorld)
    was trained with a real transition in every prompt; without a buffer it would be asked prompts it
    never saw. Its demonstrations (:func:`~dreamgym_env.buffer.demonstrations.shipped_demonstrations`)
    fill in, unless ``top_k`` is 0. They are imported only then: an env of any other model loads no
    replay buffer.
    """
    model = config.backend.model
    shipped = SHIPPED_MODELS.get(model)
    if not config.top_k or shipped is None or shipped.domain != domain.name:
        return None
    from dreamgym_env.buffer.demonstrations import shipped_demonstrations

    return shipped_demonstrations(model)


def make_step_memo(domain: Domain, config: EnvConfig) -> StepMemo | None:
    """A memo of ``config.memo_size`` steps for a deterministic domain; ``None`` for any other, or size 0."""
    if not (domain.deterministic and config.memo_size):
        return None
    return StepMemo(config.memo_size, fact_keys=domain.task_fact_keys)


def _timing_info(prediction: Prediction, retrieve_s: float, total_s: float, setting: str) -> dict[str, Any]:
    completion = prediction.completion
    return {
        "usage": completion.usage() if completion else {},
        "attempts": prediction.attempts,
        "answered_by": prediction.answered_by,
        "confidence": prediction.confidence,
        "setting": setting,
        "timing": {
            "total_s": total_s,
            "model_s": prediction.model_s,
            "retrieve_s": retrieve_s,
            "build_s": prediction.build_s,
            "parse_s": prediction.parse_s,
        },
    }


def _check_shipped_model(domain: Domain, model: str | None) -> None:
    """Refuse a shipped model named for a domain it does not simulate.

    Naming a shipped model brings its training settings (its answer form, answer budget, prompt
    style: :func:`~dreamgym_env.shipped_settings.recommended_env_kwargs`), which are its own domain's;
    applied to another domain they fail in ways that point elsewhere.

    Raises:
        ConfigError: naming the model, the domain it simulates, and what to do instead.
    """
    shipped = SHIPPED_MODELS.get(model or "")
    if shipped is not None and shipped.domain != domain.name:
        raise ConfigError(
            f"model={model!r} is the shipped experience model of {shipped.domain!r}, and its settings (answer "
            f"form, answer budget, prompts) are that domain's, not {domain.name!r}'s ({domain.env_id}). Serve "
            f"an experience model of {domain.name!r} and pass its served name as model=, or play {model!r} "
            f"in {get_domain(shipped.domain).env_id}."
        )
