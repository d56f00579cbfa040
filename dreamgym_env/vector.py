"""A native vector env: N simulated episodes, all their model requests in flight at once.

``SyncVectorEnv`` waits for each sub-env's model call in turn, and ``AsyncVectorEnv`` spends a process
per sub-env to overlap them. Here every sub-env's ``astep`` runs on one event loop, so a step of N
envs costs about one model round trip while vLLM batches the N requests, in one process.
"""

from __future__ import annotations

import contextlib
import numbers
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from dreamgym_env._event_loop import gather_all_or_none, run_sync
from dreamgym_env._secrets import SpecWithoutSecrets
from dreamgym_env.config import EnvConfig, merge_overrides
from dreamgym_env.domains import Domain, get_domain
from dreamgym_env.env import simulated_query
from dreamgym_env.episode import EpisodeEnv, EpisodeSnapshot, PendingStep
from dreamgym_env.errors import ConfigError, DreamGymError, SnapshotError
from dreamgym_env.experience.backends import Backend, make_backend
from dreamgym_env.experience.memo import StepMemo
from dreamgym_env.records import Task, Transition
from dreamgym_env.retrieval import BatchRetriever, QueryRetriever, RetrievalQuery, Retriever, retrieve_query
from dreamgym_env.simulated import SimulatedWorld, default_retriever, episode_limits, make_step_memo
from dreamgym_env.tasks import EpisodeOutcome, OutcomeReporter, TaskSampler, as_task_sampler


def _stores_in_batches(retriever: Retriever | None) -> bool:
    """Whether ``retriever`` can store a step's transitions in one call (``add_many``)."""
    return callable(getattr(retriever, "add_many", None))


class _StepBatch(QueryRetriever):
    """The sub-envs' retriever: one batched search per vector step.

    Within a step it answers the sub-envs' queries from one ``retrieve_many``; outside one it passes
    calls straight through. Per transition, most of a retrieval's cost is fixed (an embedding call,
    SQLite round trips), so serving N sub-envs with one search divides it by about N. A retriever
    without ``retrieve_many`` is searched once per sub-env.
    """

    def __init__(self, inner: Retriever) -> None:
        self.inner = inner
        self._answers: dict[RetrievalQuery, list[Transition]] = {}

    def retrieve_query(self, query: RetrievalQuery) -> list[Transition]:
        answer = self._answers.pop(query, None)
        return answer if answer is not None else retrieve_query(self.inner, query)

    def add(self, transition: Transition) -> None:
        self.inner.add(transition)

    @contextlib.contextmanager
    def step(self, queries: list[RetrievalQuery]) -> Iterator[None]:
        """Answer ``queries`` in one search, for the sub-envs' requests of this step."""
        self._answers = {}
        if queries and isinstance(self.inner, BatchRetriever):
            self._answers = dict(zip(queries, self.inner.retrieve_many(queries), strict=True))
        try:
            yield
        finally:
            self._answers = {}


class DreamGymVectorEnv(SpecWithoutSecrets, VectorEnv):
    """Steps ``num_envs`` simulated episodes concurrently against one shared backend.

    Each sub-env is an :class:`~dreamgym_env.episode.EpisodeEnv` of a
    :class:`~dreamgym_env.simulated.SimulatedWorld`, as :class:`~dreamgym_env.env.DreamGymEnv` is,
    except for its side effects, which the vector env batches: a vector step stores every sub-env's
    transition in one write before any sub-env moves, and sends the outcomes it ended in one write
    after all moved. A sub-env stepped on its own (``aplay_episodes(..., lockstep=False)``) stores
    and reports at once, as a single env does.

    Observations are tuples of strings; rewards, terminations and truncations are numpy arrays; infos
    follow Gymnasium's ``info["key"]`` / ``info["_key"]`` convention.

    Args:
        domain: Domain name or object.
        num_envs: Number of parallel episodes.
        group_size: Sub-envs ``[g*k, g*(k+1))`` start from one task and one first state at every
            ``reset()``, for GRPO-style groups of rollouts, each with its own episode id and RNG
            (``info["group_id"]`` names the group); ``num_envs`` must be a multiple of it. A reset may
            ask for another size (``options={"group_size": G}``). Autoresets sample tasks
            independently.
        autoreset_mode: Gymnasium's :class:`~gymnasium.vector.AutoresetMode` (or its value):
            ``NEXT_STEP`` (the default: the step after an episode ends resets that sub-env and
            ignores its action), ``SAME_STEP`` (the ending step returns the next episode's first
            observation, with ``info["final_obs"]`` / ``info["final_info"]`` for the one that ended)
            or ``DISABLED`` (no autoreset: ``reset(options={"reset_mask": mask})`` resets the ended
            sub-envs; an ended sub-env given ``None`` as its action sits the step out, so the last
            episodes of a batch can finish while the others stay ended).
        max_episode_steps: Gymnasium's step limit, which ``gymnasium.make_vec`` passes on (the id's
            registered limit unless given). Each sub-env truncates at the smaller of it and
            ``max_steps``; ``None`` or ``-1`` leaves ``max_steps`` alone.
        step_memo: The known steps every sub-env shares (a deterministic domain's; by default a new
            one of ``memo_size`` answers), so one sub-env's answer serves all.
        tasks, retriever, backend, config, **overrides: as for :class:`DreamGymEnv`; one backend
            (one connection pool, one concurrency bound) serves every sub-env. A step's transitions
            are stored all or nothing, so a retriever that stores them (``store_transitions="all"``,
            the default) needs ``add_many(transitions, apply_policy=True)`` committing them as one
            transaction (a :class:`~dreamgym_env.buffer.ReplayBuffer` has it); one with ``retrieve``
            and ``add`` only is refused, unless ``store_transitions="none"``.

    Example:
        >>> envs = gymnasium.make_vec("DreamGym/WebShop-v0", num_envs=32, model="my-model")
        >>> obs, infos = envs.reset(seed=0)
        >>> obs, rewards, terminations, truncations, infos = envs.step(actions)
        >>> obs, infos = envs.reset(seed=0, options={"group_size": 8})  # 4 groups of 8 alike starts
        >>> obs, infos = envs.fork(envs.snapshot(0), indices=range(8))  # 8 continuations of sub-env 0
    """

    def __init__(
        self,
        domain: str | Domain,
        num_envs: int = 1,
        *,
        group_size: int = 1,
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        tasks: Sequence[Task | dict[str, Any]] | TaskSampler | None = None,
        retriever: Retriever | None = None,
        backend: Backend | str | None = None,
        config: EnvConfig | None = None,
        render_mode: str | None = None,
        max_episode_steps: int | None = None,
        step_memo: StepMemo | None = None,
        **overrides: Any,
    ) -> None:
        for name, count in (("num_envs", num_envs), ("group_size", group_size)):
            if isinstance(count, bool) or not isinstance(count, numbers.Integral):
                raise ConfigError(f"{name} must be a positive int, got {count!r}.")
        if num_envs < 1:
            raise ConfigError(f"num_envs must be at least 1, got {num_envs}.")
        if group_size < 1 or num_envs % group_size:
            raise ConfigError(
                f"num_envs ({num_envs}) must be a positive multiple of group_size ({group_size})."
            )
        try:
            mode = AutoresetMode(autoreset_mode)
        except ValueError as e:
            raise ConfigError(
                f"autoreset_mode must be one of {[m.value for m in AutoresetMode]} "
                f"(gymnasium.vector.AutoresetMode), got {autoreset_mode!r}."
            ) from e
        domain = get_domain(domain)
        if isinstance(backend, str):
            overrides["backend"] = backend
            backend = None
        cfg = merge_overrides(config, overrides)
        limit = _step_limit(cfg.max_steps or domain.max_steps, max_episode_steps)
        if limit != cfg.max_steps:
            cfg = cfg.model_copy(update={"max_steps": limit})
        if retriever is None:
            retriever = default_retriever(domain, cfg)
        if retriever is not None and cfg.store_transitions == "all" and not _stores_in_batches(retriever):
            raise ConfigError(
                "A vector env stores each step's transitions all or nothing, in one "
                "add_many(transitions, apply_policy=True) call its retriever commits as one transaction; "
                f"{type(retriever).__name__} has no add_many, so a failed add would leave part of a step "
                "stored and the retried step would store it again. Give a ReplayBuffer (or add add_many "
                "to the retriever), or pass store_transitions='none' to only retrieve from it."
            )
        self._owns_backend = backend is None
        self.backend = backend if backend is not None else make_backend(cfg.backend)
        sampler = as_task_sampler(tasks if tasks is not None else domain.seed_tasks(), domain.name)
        self.outcome_reporter = OutcomeReporter(sampler)  # every sub-env's, sent once a step
        self.retriever = retriever
        self._stores = retriever is not None and cfg.store_transitions == "all"
        self._committing = False  # within astep, between the batched write and the last sub-env's commit
        self._batch = (
            _StepBatch(retriever) if retriever is not None and _stores_in_batches(retriever) else None
        )
        self.step_memo = step_memo if step_memo is not None else make_step_memo(domain, cfg)
        self.envs = [
            EpisodeEnv(
                domain,
                SimulatedWorld(
                    domain,
                    cfg,
                    backend=self.backend,
                    tasks=sampler,
                    retriever=self._batch or retriever,
                    step_memo=self.step_memo,
                ),
                render_mode=render_mode,
                on_transition=self._sub_env_transition,
                on_episode_end=self._sub_env_episode_end,
                **episode_limits(cfg),
            )
            for _ in range(num_envs)
        ]
        self.num_envs = num_envs
        self.group_size = group_size
        self.render_mode = render_mode
        self.metadata = {**EpisodeEnv.metadata, "autoreset_mode": mode}
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._needs_reset = np.zeros(num_envs, dtype=np.bool_)
        self._obs: list[str] = [""] * num_envs

    @property
    def action_help(self) -> str:
        """The domain's action grammar for agents, as each sub-env's :attr:`EpisodeEnv.action_help`."""
        return self.envs[0].action_help

    def reset(
        self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        """Reset every sub-env; in groups of ``group_size``, each group from one task and one first state.

        A group's first sub-env resets with the ``options`` given (a sampled or pinned task), and every
        sub-env of the group then begins its own episode at that first state
        (``options={"group_start": snapshot}``, :meth:`EpisodeEnv.reset`): equal observations and
        tasks within the group, an episode id and RNG (``seed + i``) per sub-env, and
        ``info["group_id"]`` the same for the group. ``options["group_size"]`` sets the size for this
        reset (a divisor of ``num_envs``; default the constructor's).

        ``options["reset_mask"]`` (a boolean array of shape ``(num_envs,)``, Gymnasium's convention)
        resets only the sub-envs it marks, each on a task of its own; the others keep their episode
        and their current observation, and only the reset ones have ``infos`` entries.
        ``options["snapshot"]`` puts every reset sub-env at that snapshot (see :meth:`fork`).
        """
        seeds: Sequence[int | None]
        if seed is None or isinstance(seed, int):
            seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ConfigError(f"Got {len(seeds)} seeds for {self.num_envs} envs.")
        options = dict(options or {})
        mask = _reset_mask(options.pop("reset_mask", None), self.num_envs)
        size = self._group_size(options.pop("group_size", None), mask, options)
        if isinstance(options.get("snapshot"), EpisodeSnapshot) and options["snapshot"].ended:
            raise SnapshotError(
                "The snapshot's episode has ended, and a sub-env put there could only be reset: fork from "
                "a snapshot taken before the episode's last step."
            )
        marked = range(self.num_envs) if mask is None else np.flatnonzero(mask).tolist()
        obs = list(self._obs)
        infos: dict[str, Any] = {}
        for group in _groups(marked, size):
            for i, (ob, info) in zip(group, self._reset_group(group, seeds, options), strict=True):
                obs[i] = ob
                infos = self._add_info(infos, info, i)
        self._needs_reset = np.zeros_like(self._needs_reset) if mask is None else self._needs_reset & ~mask
        self._obs = obs
        return tuple(obs), infos

    def snapshot(self, index: int) -> EpisodeSnapshot:
        """Sub-env ``index``'s episode, frozen (:meth:`EpisodeEnv.snapshot`), to :meth:`fork` from."""
        return self.envs[_check_index(index, self.num_envs)].snapshot()

    def fork(
        self,
        snapshot: EpisodeSnapshot,
        indices: Iterable[int] | None = None,
        *,
        seed: int | None = None,
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        """Put sub-envs ``indices`` (default all) at ``snapshot``: several continuations of one state.

        For tree search and per-step advantages: each forked sub-env plays on from the snapshot's
        step under its own episode id (``info["forked_from"]`` names the snapshot's episode), and the
        next :meth:`step` sends all their requests together. The other sub-envs keep their episodes.
        It is ``reset(seed=seed, options={"snapshot": snapshot, "reset_mask": mask})``: the result is
        every sub-env's observation and the forked sub-envs' ``infos``. With ``seed=None`` every fork
        continues the snapshot's RNG (for the same action, the request the original would send); an
        int gives sub-env ``i`` the RNG of ``seed + i``.

        Raises:
            ConfigError: ``indices`` are not distinct sub-env indices in ``range(num_envs)``.
            SnapshotError: not a snapshot of this domain, or one of an ended episode.
        """
        chosen = range(self.num_envs) if indices is None else indices
        if isinstance(chosen, (str, bytes)) or not isinstance(chosen, Iterable):
            raise ConfigError(
                f"fork's indices must be sub-env indices (ints in range({self.num_envs})), e.g. a list or a "
                f"range; got {type(chosen).__name__}."
            )
        mask = np.zeros(self.num_envs, dtype=np.bool_)
        for index in chosen:
            if mask[_check_index(index, self.num_envs)]:
                raise ConfigError(f"fork's indices name sub-env {index} twice; give each once.")
            mask[index] = True
        if not mask.any():
            raise ConfigError("fork's indices are empty; name at least one sub-env.")
        return self.reset(seed=seed, options={"snapshot": snapshot, "reset_mask": mask})

    def _group_size(self, value: Any, mask: np.ndarray | None, options: dict[str, Any]) -> int:
        """This reset's group size: ``options["group_size"]`` checked, else the constructor's (1 when masked)."""
        restoring = any(options.get(key) is not None for key in ("snapshot", "group_start"))
        if value is None:
            return 1 if mask is not None or restoring else self.group_size
        divisors = [d for d in range(1, self.num_envs + 1) if self.num_envs % d == 0]
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value not in divisors:
            raise ConfigError(
                f"options['group_size'] must be an int that divides num_envs ({self.num_envs}): one of "
                f"{divisors}; got {value!r}."
            )
        size = int(value)
        if size > 1 and mask is not None:
            raise ConfigError(
                "options['group_size'] does not combine with options['reset_mask']: a masked reset starts "
                "each marked sub-env on a task of its own. Reset whole groups without a mask."
            )
        if size > 1 and restoring:
            raise ConfigError(
                "options['group_size'] does not combine with options['snapshot'] or ['group_start']: "
                "those already put every reset sub-env at one state."
            )
        return size

    def _reset_group(
        self, group: Sequence[int], seeds: Sequence[int | None], options: dict[str, Any]
    ) -> list[tuple[str, dict[str, Any]]]:
        """Reset one group: its first sub-env as asked, then every member from that first state."""
        first = self.envs[group[0]]
        result = first.reset(seed=seeds[group[0]], options=options)
        if len(group) == 1:
            return [result]
        start = {"group_start": first.snapshot()}
        return [self.envs[i].reset(seed=seeds[i], options=start) for i in group]

    def step(
        self, actions: Sequence[str | None]
    ) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every sub-env; model requests of all sub-envs are sent concurrently."""
        return run_sync(self.astep(actions))

    async def astep(
        self, actions: Sequence[str | None]
    ) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Coroutine form of :meth:`step`, for callers that already run an event loop.

        All or nothing: every sub-env's transition is asked for first, and applied only once all have
        answered and been stored. If one fails (server down, unparsable answer under
        ``on_invalid_output="raise"``), the others' requests are cancelled and awaited, no sub-env
        advances, no transition is stored, and that error is raised; if the batched write fails (a
        full disk, an unreachable PostgreSQL), no sub-env advances either. Call ``step`` again with
        the same actions once the cause is fixed. The outcomes of the episodes the step ended go to the
        task sampler after every sub-env moved, in one write (:attr:`outcome_reporter`); if that write
        fails, the step still returns, and the outcomes are logged, kept and sent with the next step's.
        """
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ConfigError(f"Got {len(actions)} actions for {self.num_envs} envs.")
        next_step = self.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
        same_step = self.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
        # DISABLED: an ended sub-env whose action is None sits the step out (stays ended).
        idle = np.zeros(self.num_envs, dtype=np.bool_)
        if not (next_step or same_step):
            idle = self._needs_reset & np.array([a is None for a in actions], dtype=np.bool_)
            ended = np.flatnonzero(self._needs_reset & ~idle).tolist()
            if ended:
                raise DreamGymError(
                    f"Sub-envs {ended} have ended and autoreset_mode is DISABLED: reset them first with "
                    "envs.reset(options={'reset_mask': terminations | truncations}), or pass None as "
                    "their action to leave them ended."
                )
        stepping = [
            i for i in range(self.num_envs) if not (next_step and self._needs_reset[i]) and not idle[i]
        ]
        missing = [i for i in stepping if actions[i] is None]
        if missing:
            raise ConfigError(f"Sub-envs {missing} are running and got None as their action.")
        todo: dict[int, str] = {i: a for i in stepping if (a := actions[i]) is not None}
        batch: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if self._batch is not None:
            queries = [simulated_query(self.envs[i], todo[i]) for i in stepping]
            batch = self._batch.step([q for q in queries if q is not None])
        envs = [self.envs[i] for i in stepping]
        with batch:  # a failed proposal discards the others' (their RNG restored) and raises
            pending = await _propose_all(envs, [todo[i] for i in stepping])
        try:  # every sub-env's transition is written in one batch, before any sub-env moves
            self._store([env.proposed_transition(p) for env, p in zip(envs, pending, strict=True)])
        except BaseException:
            for env, p in zip(envs, pending, strict=True):
                env.discard(p)
            raise
        self._committing = True
        try:
            results = [env.commit(p) for env, p in zip(envs, pending, strict=True)]
        finally:
            self._committing = False
        self.outcome_reporter.flush()  # after every sub-env moved: one write, and a failed one keeps them queued

        obs: list[str] = [""] * self.num_envs
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}
        for i, (ob, reward, terminated, truncated, info) in zip(stepping, results, strict=True):
            obs[i], rewards[i], terminations[i], truncations[i] = ob, reward, terminated, truncated
            if same_step and (terminated or truncated):
                obs[i], reset_info = self.envs[i].reset()
                info = {**reset_info, "final_obs": ob, "final_info": info}
            infos = self._add_info(infos, info, i)
        for i in range(self.num_envs):
            if next_step and self._needs_reset[i]:
                obs[i], info = self.envs[i].reset()
                infos = self._add_info(infos, info, i)
        if not same_step:
            self._needs_reset = terminations | truncations | idle
        self._obs = obs
        return tuple(obs), rewards, terminations, truncations, infos

    def _sub_env_transition(self, transition: Transition) -> None:
        """A sub-env's ``on_transition``: stored at once, unless :meth:`astep` already wrote it in its batch.

        A sub-env is stepped on its own by :func:`~dreamgym_env.rollout.aplay_episodes` (``lockstep=False``).
        """
        if self._stores and not self._committing:
            assert self.retriever is not None
            self.retriever.add(transition)

    def _sub_env_episode_end(self, outcome: EpisodeOutcome) -> None:
        """A sub-env's ``on_episode_end``: sent at once, except within :meth:`astep`, which sends a step's together."""
        self.outcome_reporter.queue(outcome)
        if not self._committing:
            self.outcome_reporter.flush()

    def _store(self, transitions: Sequence[Transition | None]) -> None:
        """Write one step's transitions in one transaction (``add_many``), or nothing if the env stores none."""
        stored = [t for t in transitions if t is not None]
        if self._stores and stored:
            add_many: Callable[..., Any] = self.retriever.add_many  # type: ignore[union-attr]
            add_many(stored, apply_policy=True)

    # ``human`` mode prints and gives ``None`` per sub-env, which gymnasium's annotation does not allow.
    def render(self) -> tuple[str | None, ...] | None:  # type: ignore[override]
        """Each sub-env's rendering (``ansi`` mode)."""
        if self.render_mode is None:
            return None
        return tuple(env.render() for env in self.envs)

    def close_extras(self, **kwargs: Any) -> None:
        """Send any outcome still queued; release the shared backend if this vector env created it."""
        self.outcome_reporter.flush()
        if self._owns_backend:
            run_sync(self.backend.aclose())


async def _propose_all(envs: Sequence[EpisodeEnv], actions: Sequence[str]) -> list[PendingStep]:
    """Every sub-env's proposed step, or none.

    On the first failure, or when the caller is cancelled, the rest are cancelled and awaited, the
    proposals that did come back are discarded (their RNG restored), and the failure is raised.
    """
    return await gather_all_or_none(
        [env.apropose(action) for env, action in zip(envs, actions, strict=True)],
        abandon=lambda i, pending: envs[i].discard(pending),
    )


def _step_limit(max_steps: int, max_episode_steps: Any) -> int:
    """The sub-envs' step limit: ``max_steps``, lowered to Gymnasium's ``max_episode_steps`` if given."""
    if max_episode_steps is None or max_episode_steps == -1:
        return max_steps
    if isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, int) or max_episode_steps < 1:
        raise ConfigError(
            f"max_episode_steps must be a positive int (or None / -1 for no extra limit), got {max_episode_steps!r}."
        )
    return min(max_steps, max_episode_steps)


def _groups(indices: Sequence[int], size: int) -> list[list[int]]:
    """``indices`` cut into consecutive groups of ``size`` (which divides their number)."""
    return [list(indices[start : start + size]) for start in range(0, len(indices), size)]


def _check_index(index: Any, num_envs: int) -> int:
    """A sub-env index, checked: an int in ``range(num_envs)``."""
    if isinstance(index, bool) or not isinstance(index, numbers.Integral) or not 0 <= int(index) < num_envs:
        raise ConfigError(f"Sub-env indices are ints in range({num_envs}), got {index!r}.")
    return int(index)


def _reset_mask(mask: Any, num_envs: int) -> np.ndarray | None:
    """``options["reset_mask"]`` checked: ``None``, or a boolean array of shape ``(num_envs,)``."""
    if mask is None:
        return None
    array = np.asarray(mask)
    if array.dtype != np.bool_ or array.shape != (num_envs,):
        raise ConfigError(
            f"options['reset_mask'] must be a boolean array of shape ({num_envs},), got "
            f"{array.dtype} of shape {array.shape}."
        )
    return array
