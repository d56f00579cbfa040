"""DreamGymEnv: one episode of a world simulated by an LLM experience model."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from dreamgym_env._secrets import SpecWithoutSecrets
from dreamgym_env.config import EnvConfig, merge_overrides
from dreamgym_env.domains import Domain
from dreamgym_env.episode import EpisodeEnv, WorldAttribute
from dreamgym_env.experience.backends import Backend
from dreamgym_env.experience.memo import StepMemo
from dreamgym_env.experience.model import ExperienceModel
from dreamgym_env.records import Task, Transition
from dreamgym_env.retrieval import RetrievalQuery, Retriever
from dreamgym_env.shipped_settings import SHIPPED_MODELS, trained_recipes
from dreamgym_env.simulated import SimulatedWorld, episode_limits, store_in
from dreamgym_env.tasks import OutcomeReporter, TaskSampler


class DreamGymEnv(SpecWithoutSecrets, EpisodeEnv):
    """A text environment whose transitions are predicted by an LLM experience model.

    ## Description
    Each ``step`` sends the task, the episode's history, the top-k most similar transitions from a
    replay buffer and the current (state, action) to an experience model (an LLM served by vLLM or any
    OpenAI-compatible server), which reasons, then predicts the next abstract state, the admissible
    actions and whether the episode ended in success (DreamGym, Chen et al. 2025).

    It is an :class:`~dreamgym_env.episode.EpisodeEnv` whose world is a
    :class:`~dreamgym_env.simulated.SimulatedWorld` made from these arguments, with the replay buffer
    and the task sampler wired as the env's ``on_transition`` and ``on_episode_end``; the real envs
    are the same env with an engine as the world.

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
    ``domain``: name or :class:`Domain`. ``tasks``: list of :class:`Task` (or of their fields as
    dicts, as ``env.spec`` keeps them) or a sampler (curriculum); default the domain's seed tasks. ``retriever``: replay buffer for demonstrations. ``backend``: a
    :class:`Backend` or its name. ``config``: :class:`EnvConfig`. Any config field may also be given
    as a keyword (``base_url``, ``model``, ``top_k``, ``temperature``...). ``outcome_reporter``: the
    :class:`~dreamgym_env.tasks.OutcomeReporter` that tells the sampler how episodes ended (one may be
    shared among envs). ``step_memo``: the
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

    world: SimulatedWorld

    def __init__(
        self,
        domain: str | Domain,
        *,
        tasks: Sequence[Task | dict[str, Any]] | TaskSampler | None = None,
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
        world = SimulatedWorld(
            domain, config, backend=backend, tasks=tasks, retriever=retriever, step_memo=step_memo
        )
        self.outcome_reporter = (
            outcome_reporter if outcome_reporter is not None else OutcomeReporter(world.task_sampler)
        )
        super().__init__(
            world.domain,
            world,
            render_mode=render_mode,
            on_transition=store_in(world.retriever, config),
            on_episode_end=self.outcome_reporter.report,
            **episode_limits(config),
        )
        _warn_if_untrained_tasks(self.domain, config.backend.model, tasks)

    # ------------------------------------------------------------------ the simulated world's parts
    config = WorldAttribute[EnvConfig](
        "How the model is asked (:class:`EnvConfig`, the ``setting`` included)."
    )
    backend = WorldAttribute[Backend]("The experience model's backend.")
    experience_model = WorldAttribute[ExperienceModel]("Builds each request and reads each answer.")
    retriever = WorldAttribute[Retriever | None](
        "The replay buffer demonstrations come from (and transitions go to), if any."
    )
    step_memo = WorldAttribute[StepMemo | None]("The known steps of a deterministic domain, if kept.")
    task_sampler = WorldAttribute[TaskSampler](
        "Where each episode's task comes from (a list, the curriculum)."
    )

    def close(self) -> None:
        """Send any outcome still queued; release the backend's connections if this env created it."""
        self.outcome_reporter.flush()
        super().close()

    # ------------------------------------------------------------------ retrieval
    def retrieval_query(self, action: str) -> RetrievalQuery | None:
        """The demonstrations request ``step(action)`` would make now, or ``None`` if it would make none."""
        return simulated_query(self, action)

    def _retrieve(self, action: str) -> list[Transition]:
        return self.world.demonstrations(action, self.view())


def simulated_query(env: EpisodeEnv, action: Any) -> RetrievalQuery | None:
    """The demonstrations request ``env.step(action)`` would make now (``env``'s world simulated), else ``None``.

    None for a step that would not reach the world (no episode, an ended one, a rejected action). A
    vector env collects these from all its sub-envs to answer them in one batched search.
    """
    world = env.world
    if env.task is None or env.ended or not isinstance(action, str) or env.action_error(action):
        return None
    if not isinstance(world, SimulatedWorld):
        return None
    return world.retrieval_query(action, env.view())


def _warn_if_untrained_tasks(domain: Domain, model: str | None, tasks: object) -> None:
    """Warn when a shipped model is asked to simulate worlds unlike those it was trained on.

    A shipped model learned the worlds of generated games, each task carrying its layout; the seed
    tasks' drawn rooms have none, so it would invent the world (and, before this warning, reported
    success for near-random policies). Games of a family it never saw (``tw-cooking``, whose
    recipes, knives and stoves are in none of its training games) it answers untested: a cooking game
    came back carrying two candy bars after one ``put``.
    """
    shipped = SHIPPED_MODELS.get(model or "")
    if shipped is None or shipped.domain != domain.name:
        return
    if tasks is None:
        warnings.warn(
            f"The shipped {model!r} experience model was trained on tasks made from generated games "
            f"(each with its layout), not on {domain.env_id}'s seed tasks: pass tasks=tasks_from_games(games) "
            "(dreamgym_env.real.textworld), e.g. games from dreamgym_env.real.textworld_suite.build_suite.",
            stacklevel=3,
        )
        return
    trained = trained_recipes(str(model))
    listed = getattr(tasks, "tasks", tasks)
    if not trained or not isinstance(listed, Sequence):
        return
    unseen = sorted(
        {
            str(f)
            for t in listed
            if isinstance(t, Task) and (f := t.metadata.get("family")) and f not in trained
        }
    )
    if unseen:
        warnings.warn(
            f"The shipped {model!r} experience model was trained on games of {sorted(trained)}; these tasks "
            f"include {unseen}, which it never saw: its answers there are untested (measure them with "
            "dreamgym eval-fidelity --games before training on them).",
            stacklevel=3,
        )
