"""DreamGymEnv: one episode of a world simulated by an LLM experience model."""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar

from dreamgym_env._event_loop import run_sync
from dreamgym_env._secrets import SpecWithoutSecrets
from dreamgym_env.config import EnvConfig, merge_overrides
from dreamgym_env.domains import Domain
from dreamgym_env.episode import EpisodeEnv, EpisodeStart, WorldStep
from dreamgym_env.experience.backends import Backend, make_backend
from dreamgym_env.experience.memo import StepMemo
from dreamgym_env.experience.model import ExperienceModel, Prediction
from dreamgym_env.records import Source, Task, Transition
from dreamgym_env.retrieval import RetrievalQuery, Retriever
from dreamgym_env.shipped_settings import SHIPPED_MODELS
from dreamgym_env.tasks import OutcomeReporter, TaskSampler, as_task_sampler, resolve_task


class DreamGymEnv(SpecWithoutSecrets, EpisodeEnv):
    """A text environment whose transitions are predicted by an LLM experience model.

    ## Description
    Each ``step`` sends the task, the episode's history, the top-k most similar transitions from a
    replay buffer and the current (state, action) to an experience model (an LLM served by vLLM or any
    OpenAI-compatible server), which reasons, then predicts the next abstract state, the admissible
    actions and whether the episode ended in success (DreamGym, Chen et al. 2025).

    ## Action Space
    ``FreeText(max_action_chars)``: one action string in the domain's grammar, e.g.
    ``search[red running shoes]`` (WebShop), ``go to cabinet 1`` (ALFWorld), ``click('12')`` (WebArena).

    ## Observation Space
    ``FreeText``: the abstract textual state (clean element listings, not raw HTML).

    ## Starting State
    The domain builds the first state for the sampled task from ``self.np_random``.

    ## Rewards
    Outcome-based and binary: 1.0 on the final step of a successful episode, else 0.0.

    ## Episode End
    Terminated when the model says ``done``; truncated after ``max_steps`` steps (by default the
    domain's limit, :data:`dreamgym_env.domains.BUILTIN_DOMAINS`, which also says how to override it).

    An action that is empty, too long, not text (control characters, lone surrogates) or outside the
    grammar (and not among the admissible actions) is not sent to the model: the state is unchanged,
    the observation starts with ``[Invalid action]`` and ``info["last_action_error"]`` says why (the
    action echoed with its control characters escaped); reward 0, and the step counts. A non-string
    action raises :class:`InvalidActionError`. These rules, the spaces and the ``info`` keys are
    :class:`~dreamgym_env.episode.EpisodeEnv`'s, shared with every real wrapper.

    ## Information
    ``task``, ``task_id``, ``episode_id``, ``step``, ``admissible_actions``, ``success`` (and
    ``is_success``, which stable-baselines3's ``Monitor`` reads), ``reasoning``, ``simulated`` (True),
    ``source`` ("sim"), ``last_action_error``, and after model calls ``usage`` (token counts),
    ``timing`` (model and client-side seconds), ``attempts``, ``answered_by`` (``"model"``; ``"ranked"``
    when the model chose among written-out outcomes, :attr:`EnvConfig.rank_outcomes`; or
    ``"rule"``/``"replay"``/``"memo"`` for a step answered without a request) and ``setting``
    (``"learned"`` or ``"privileged"``, :attr:`EnvConfig.setting`). :attr:`last_transition` is the
    step's stored form.

    ## Arguments
    ``domain``: name or :class:`Domain`. ``tasks``: list of :class:`Task` or a sampler (curriculum);
    default the domain's seed tasks. ``retriever``: replay buffer for demonstrations. ``backend``: a
    :class:`Backend` or its name. ``config``: :class:`EnvConfig`. Any config field may also be given
    as a keyword (``base_url``, ``model``, ``top_k``, ``temperature``...). ``outcome_reporter``: the
    :class:`~dreamgym_env.tasks.OutcomeReporter` that tells the sampler how episodes ended (a vector
    env shares one among its sub-envs, to send a step's outcomes in one write). ``step_memo``: the
    :class:`~dreamgym_env.experience.memo.StepMemo` of a deterministic domain's known steps, to share
    among envs or seed with real transitions (``add_real``); by default each env keeps its own of
    ``memo_size`` answers, and a vector env shares one among its sub-envs.

    ## Experience Model
    One structured-output request per transition; unparsable answers are retried ``parse_retries``
    times, then handled by ``on_invalid_output``. An unreachable server raises
    :class:`ServerUnreachableError` within the configured timeout and retries.

    ## Snapshots and forks
    The whole episode is in the env, so :meth:`snapshot` freezes it in an immutable, picklable
    :class:`~dreamgym_env.episode.EpisodeSnapshot`, and ``reset(options={"snapshot": s})`` (or
    :meth:`restore`) plays on from it as a fork, under a new episode id that ``info["forked_from"]``,
    the stored transitions' metadata and the outcome sent to the task sampler name the parent by; for
    the same action it sends the request the original would have. ``reset(options={"group_start": s})``
    begins a new episode at a step-0 snapshot's first state (``info["group_id"]``), as
    :class:`~dreamgym_env.vector.DreamGymVectorEnv`'s groups do. A fork is not shown the transitions of
    the episodes it was forked from as demonstrations: their first steps are its own history.

    ## Determinism
    Registered as nondeterministic: LLM serving is not bit-reproducible. Tasks, initial states and
    per-request sampling seeds come from ``reset(seed=...)``; exact replays come from the recording
    backend.

    ## Version History
    * v0: Initial version.
    """

    source: ClassVar[Source] = "sim"
    supports_snapshots: ClassVar[bool] = True

    def __init__(
        self,
        domain: str | Domain,
        *,
        tasks: Sequence[Task] | TaskSampler | None = None,
        retriever: Retriever | None = None,
        backend: Backend | str | None = None,
        config: EnvConfig | None = None,
        render_mode: str | None = None,
        outcome_reporter: OutcomeReporter | None = None,
        step_memo: StepMemo | None = None,
        **overrides: Any,
    ) -> None:
        if isinstance(backend, str):
            overrides["backend"] = backend
            backend = None
        config = merge_overrides(config, overrides)
        super().__init__(
            domain,
            max_steps=config.max_steps,
            max_state_chars=config.max_state_chars,
            max_action_chars=config.max_action_chars,
            render_mode=render_mode,
        )
        self.config = config
        self._owns_backend = backend is None
        self.backend = backend if backend is not None else make_backend(self.config.backend)
        self.step_memo = step_memo if step_memo is not None else make_step_memo(self.domain, self.config)
        self.experience_model = ExperienceModel(self.domain, self.backend, self.config, self.step_memo)
        self.retriever = retriever if retriever is not None else default_retriever(self.domain, self.config)
        self.task_sampler = as_task_sampler(tasks if tasks is not None else self.domain.seed_tasks())
        self.outcome_reporter = (
            outcome_reporter if outcome_reporter is not None else OutcomeReporter(self.task_sampler)
        )
        if tasks is None:
            _warn_if_untrained_tasks(self.domain, self.config.backend.model)

    # ------------------------------------------------------------------ EpisodeEnv hooks
    def _begin(self, options: dict[str, Any]) -> EpisodeStart:
        """A sampled task, or ``options["task"]`` (Task, dict, id or instruction), and its first state."""
        if "task" in options and options["task"] is not None:
            task = resolve_task(options["task"], self.domain.name, self.task_sampler)
        else:
            task = self.task_sampler.sample(self.np_random)
        task = self._restored_task(task)
        initial = self.domain.initial_state(task, self.np_random)
        return EpisodeStart(task, initial.state, list(initial.admissible_actions))

    def _restored_task(self, task: Task) -> Task:
        """In the learned setting the episode never holds the real world's hidden facts, even a snapshot's."""
        return self.domain.learned_view(task) if self.config.setting == "learned" else task

    async def _aadvance(self, action: str) -> WorldStep:
        """One model-predicted transition; a backend error propagates with the episode unchanged."""
        assert self._task is not None
        started = time.perf_counter()
        demos = self._retrieve(action)
        retrieve_s = time.perf_counter() - started
        prediction = await self.experience_model.apredict(
            self._task,
            self._history,
            demos,
            self._state,
            action,
            self._admissible,
            seed=int(self.np_random.integers(2**31 - 1)),
            episode_id=self._episode_id,
        )
        extra = _timing_info(prediction, retrieve_s, time.perf_counter() - started, self.config.setting)
        # A step given up after its answers came back: the backend hears they were not used.
        forget = functools.partial(self.backend.discard, prediction.completions)
        output = prediction.output
        if output is None:  # on_invalid_output == "fail_state": the world stays as it was
            return WorldStep(
                self._state,
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

    def _store(self, transition: Transition) -> None:
        if self.retriever is not None and self.config.store_transitions == "all":
            self.retriever.add(transition)

    def _episode_ended(self, reward: float, success: bool) -> None:
        assert self._task is not None
        self.outcome_reporter.add(
            self._task, reward, success, episode_id=self._episode_id, forked_from=self.forked_from
        )

    def report_outcomes(self) -> None:
        """Send the queued outcomes to the task sampler (:class:`~dreamgym_env.tasks.OutcomeReporter`)."""
        self.outcome_reporter.flush()

    def close(self) -> None:
        """Send any outcome still queued; release the backend's connections if this env created it."""
        self.outcome_reporter.flush()
        if self._owns_backend:
            run_sync(self.backend.aclose())
        super().close()

    # ------------------------------------------------------------------ retrieval
    def retrieval_query(self, action: str) -> RetrievalQuery | None:
        """The demonstrations request ``step(action)`` would make now, or ``None`` if it would make none.

        A vector env collects these from all its sub-envs to answer them in one batched search.
        """
        if self._task is None or self._ended or not isinstance(action, str) or self.action_error(action):
            return None
        return self._query(action)

    def _query(self, action: str) -> RetrievalQuery | None:
        if self.retriever is None or self.config.top_k == 0:
            return None
        filtered = self.config.setting == "learned" or bool(self._ancestors)
        k = self.config.top_k + (LEARNED_RETRIEVAL_SLACK if filtered else 0)
        return RetrievalQuery(self._state, action, k, self.domain.name, self._episode_id)

    def _retrieve(self, action: str) -> list[Transition]:
        query = self._query(action)
        if query is None or self.retriever is None:
            return []
        found = self.retriever.retrieve(
            query.state, query.action, query.k, domain=query.domain, exclude_episode=query.exclude_episode
        )
        if self._ancestors:  # a fork's first steps are its ancestors' stored ones: not demonstrations
            found = [t for t in found if t.episode_id not in self._ancestors]
        if self.config.setting == "learned":  # demonstrations of other tasks only
            assert self._task is not None
            found = [t for t in found if t.task_id != self._task.task_id]
        return found[: self.config.top_k]


LEARNED_RETRIEVAL_SLACK = 8
"""Extra demonstrations a step asks for, to fill ``top_k`` after those it may not see are dropped.

A learned-setting step drops its own task's; a fork drops those of the episodes it was forked from.
"""


def default_retriever(domain: Domain, config: EnvConfig) -> Retriever | None:
    """Where an env that brings no replay buffer finds demonstrations: a shipped model's own, or none.

    A shipped model (``model="textworld"`` for its domain) was trained with a real transition in every
    prompt; without a buffer it would be asked prompts it never saw. Its demonstrations
    (:func:`~dreamgym_env.buffer.demonstrations.shipped_demonstrations`) fill in, unless ``top_k`` is 0.
    They are imported only then: an env of any other model loads no replay buffer.
    """
    model = config.backend.model
    if not config.top_k or model != domain.name:
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
        "setting": setting,
        "timing": {
            "total_s": total_s,
            "model_s": prediction.model_s,
            "retrieve_s": retrieve_s,
            "build_s": prediction.build_s,
            "parse_s": prediction.parse_s,
        },
    }


def _warn_if_untrained_tasks(domain: Domain, model: str | None) -> None:
    """Warn when a shipped model is asked to simulate the domain's seed tasks, which it was not trained on.

    A shipped model learned the worlds of generated games, each task carrying its layout; the seed tasks'
    drawn rooms have none, so it would invent the world (and, before this warning, reported success for
    near-random policies).
    """
    if model in SHIPPED_MODELS and model == domain.name:
        warnings.warn(
            f"The shipped {model!r} experience model was trained on tasks made from generated games "
            f"(each with its layout), not on {domain.env_id}'s seed tasks: pass tasks=tasks_from_games(games) "
            "(dreamgym_env.real.textworld), e.g. games from dreamgym_env.real.textworld_suite.build_suite.",
            stacklevel=3,
        )
