"""Text-episode environments that trainers step one action at a time, shared by the trainer adapters.

An LLM-RL trainer that runs its own multi-turn rollouts (TRL's ``environment_factory``, verl's agent
loops, verifiers' ``MultiTurnEnv``) needs, per rollout, something that starts a task and returns the
first observation, takes one action and returns the next observation, and scores the episode. This
module is that, for any DreamGym id, simulated or real:

* :class:`DreamGymEnvironments` makes the environments. Every environment it makes shares one
  experience-model backend (one connection pool and concurrency bound) and one replay buffer, however
  many rollouts run at once; it also builds the ``prompt``/task rows trainers read, from a task list
  or a curriculum, which is then asked for each row's task while training runs and told each
  episode's outcome.
* :class:`DreamGymToolEnv` is one rollout's environment: ``reset(**row)`` starts the row's task and
  returns its first observation, the single tool ``act(action)`` steps the env and returns what the
  agent sees next, and ``get_reward()`` returns the episode's return. That is exactly TRL's
  ``environment_factory`` contract (see :mod:`dreamgym_env.integrations.trl`).
"""

from __future__ import annotations

import itertools
import json
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from dreamgym_env.agent_chat import default_observation_message, default_reset_options, default_system_prompt
from dreamgym_env.errors import ConfigError, DependencyNotInstalled
from dreamgym_env.records import Task
from dreamgym_env.rollout import Episode
from dreamgym_env.tasks import TaskSampler

#: The dataset column that carries a row's task (its JSON), read by :meth:`DreamGymToolEnv.reset`.
TASK_COLUMN = "dreamgym_task"

#: Tokens a tool call takes besides its observation: the call's markup and a short action.
_ACTION_CALL_TOKENS = 32

#: What ``act`` answers once the episode has ended (the model may keep calling the tool).
EPISODE_OVER = "The episode is over; no further actions are taken."


class DreamGymToolEnv:
    """One rollout's environment for ``trl.GRPOTrainer``: ``reset``, the ``act`` tool, ``get_reward``.

    Made by :class:`DreamGymEnvironments`; TRL keeps a pool of them and resets one per rollout, so the
    underlying Gymnasium env is created once and reused. Every public method other than ``reset`` and
    ``get_reward`` becomes a tool the model sees, so this class has exactly one: :meth:`act`.
    """

    def __init__(self, factory: DreamGymEnvironments) -> None:
        self._factory = factory
        self._env: gym.Env[Any, Any] | None = None
        self._task: Task | None = None
        self._episode: Episode | None = None
        self._info: dict[str, Any] = {}
        self._done = True

    def reset(self, **row: Any) -> str:
        """Start the row's task (or one the factory's tasks give) and return the first observation.

        Args:
            **row: The dataset row TRL is rolling out; its ``dreamgym_task`` column (see
                :data:`TASK_COLUMN`) names the task; other columns are ignored.

        Returns:
            The first observation, rendered with the task and the admissible actions.
        """
        task = self._factory._task_for(row)
        if self._env is None:
            self._env = self._factory._make_env()
        obs, info = self._env.reset(
            seed=self._factory._next_seed(), options=self._factory._reset_options(task)
        )
        self._task = task
        self._info = dict(info)
        self._done = False
        self._episode = Episode(
            task=task.instruction,
            task_id=task.task_id,
            episode_id=str(info.get("episode_id", "")),
            observations=[obs],
        )
        return self._factory._render(obs, info, True)

    def act(self, action: str) -> str:
        """Take one action in the environment and see what happens.

        Args:
            action: The action, exactly as the environment accepts it (one of the admissible actions
                where they are listed).

        Returns:
            The observation after the action, and whether the episode is over.
        """
        if self._env is None or self._episode is None:
            raise ConfigError("act() was called before reset(): TRL resets every rollout first.")
        if self._done:
            return EPISODE_OVER
        obs, reward, terminated, truncated, info = self._env.step(str(action))
        self._info = dict(info)
        episode = self._episode
        episode.actions.append(str(action))
        episode.rewards.append(float(reward))
        episode.observations.append(obs)
        text = self._factory._render(obs, info, False)
        if not (terminated or truncated):
            return text
        self._done = True
        episode.success = bool(info.get("success", False))
        episode.terminated, episode.truncated = bool(terminated), bool(truncated)
        self._factory._finished(self._task, episode)
        ending = "the task is complete" if episode.success else "the task was not completed"
        reason = "the step limit is reached" if truncated and not terminated else ending
        return f"{text}\n\nThe episode is over: {reason}."

    @property
    def done(self) -> bool:
        """The episode has ended (or none was started)."""
        return self._done

    @property
    def info(self) -> dict[str, Any]:
        """The env's ``info`` of the last reset or step (its ``admissible_actions``, ``answered_by``...)."""
        return self._info

    def get_reward(self) -> float:
        """The episode's return: the sum of its rewards (0 when the model never acted)."""
        return self._episode.total_reward if self._episode is not None else 0.0

    @property
    def episode(self) -> Episode | None:
        """The current (or last) episode's record: observations, actions, rewards, outcome."""
        return self._episode

    def _close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None


class DreamGymEnvironments:
    """The ``environment_factory`` for ``trl.GRPOTrainer``: makes :class:`DreamGymToolEnv` instances.

    Args:
        env_id: Any registered id, simulated (``DreamGym/TextWorld-v0``) or real
            (``DreamGym/TextWorld-Real-v0``).
        tasks: The tasks rows may name: a list (e.g. a domain's seed tasks, or
            :func:`~dreamgym_env.domains.textworld.engine.tasks_from_games`), or a sampler such as a
            :class:`~dreamgym_env.curriculum.CurriculumSampler`, which then draws each row's task and is
            told each episode's outcome. Default: the domain's seed tasks for a simulated id.
        system_prompt: The system message of every prompt; default the agent's role and the domain's
            action grammar (:func:`~dreamgym_env.agent_chat.default_system_prompt`).
        observation_message: Renders ``(observation, info, is_first)`` as the text the model sees.
        reset_options: Reset options that start a task (``game_file`` for real TextWorld games).
        seed: The ``k``-th reset (over all environments) is seeded ``seed + k``.
        keep_episodes: Finished episodes kept in :attr:`episodes` (the most recent ones).
        **env_kwargs: Passed to ``gymnasium.make`` (``base_url``, ``model``, ``max_steps``, ``backend``,
            ``retriever``...). For simulated ids the first environment's backend is handed to every
            later one, so all rollouts share one connection pool.

    Raises:
        ConfigError: ``env_id`` is not registered, or no tasks are given for an id without seed tasks.
    """

    def __init__(
        self,
        env_id: str,
        *,
        tasks: Sequence[Task] | TaskSampler | None = None,
        system_prompt: str | None = None,
        observation_message: Callable[[str, Mapping[str, Any], bool], str] = default_observation_message,
        reset_options: Callable[[Task], dict[str, Any]] = default_reset_options,
        seed: int = 0,
        keep_episodes: int = 10_000,
        **env_kwargs: Any,
    ) -> None:
        try:
            self.spec = gym.spec(env_id)
        except gym.error.Error as e:
            raise ConfigError(f"Unknown env id {env_id!r}: {e}") from e
        self.env_id = env_id
        self.simulated = self.spec.vector_entry_point is not None
        self.env_kwargs = dict(env_kwargs)
        self._render = observation_message
        self._reset_options = reset_options
        self._seeds = itertools.count(seed)
        self._seed = seed
        self.episodes: deque[Episode] = deque(maxlen=keep_episodes)
        self._instances: list[DreamGymToolEnv] = []
        self._free: list[DreamGymToolEnv] = []
        self._lock = threading.RLock()  # rollouts may reset from worker threads
        self._probe: gym.Env[Any, Any] | None = None
        self.sampler: TaskSampler | None = None
        self.tasks: list[Task] = []
        if tasks is None:
            self.tasks = list(self._default_tasks())
        elif isinstance(tasks, TaskSampler):
            self.sampler = tasks
            if self.simulated:
                # A simulated env reports each episode's outcome to its own sampler.
                self.env_kwargs.setdefault("tasks", tasks)
        else:
            self.tasks = list(tasks)
        self._by_id = {t.task_id: t for t in self.tasks}
        self.system_prompt = (
            system_prompt if system_prompt is not None else default_system_prompt(self._env())
        )

    def __call__(self) -> DreamGymToolEnv:
        """One environment (TRL calls this once per concurrent rollout)."""
        instance = DreamGymToolEnv(self)
        self._instances.append(instance)
        return instance

    def acquire(self) -> DreamGymToolEnv:
        """A free environment from the pool (a new one when all are in use); :meth:`release` it after.

        For trainers that create a rollout object per episode (verl's agent loops), so the Gymnasium
        envs behind them are reused instead of made anew each time.
        """
        with self._lock:
            if self._free:
                return self._free.pop()
        return self()

    def release(self, instance: DreamGymToolEnv) -> None:
        """Give an environment from :meth:`acquire` back to the pool."""
        with self._lock:
            self._free.append(instance)

    # ------------------------------------------------------------------ datasets
    def prompt(self) -> list[dict[str, str]]:
        """A row's ``prompt``: the system message and an empty user turn, filled by ``reset``."""
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": ""}]

    def rows(self, tasks: Sequence[Task] | None = None, repeats: int = 1) -> list[dict[str, Any]]:
        """Dataset rows: ``prompt``, the task (:data:`TASK_COLUMN`, its JSON) and ``task_id``.

        Args:
            tasks: The tasks; default the factory's list.
            repeats: Each task appears this many times (TRL repeats every row ``num_generations``
                times on its own, to form a group).
        """
        chosen = list(tasks) if tasks is not None else self.tasks
        if not chosen:
            raise ConfigError("No tasks to build rows from: pass tasks=[...] or a sampler to the factory.")
        return [self._row(t) for _ in range(repeats) for t in chosen]

    def dataset(self, repeats: int = 1, *, num_rows: int | None = None) -> Any:
        """The ``train_dataset`` for ``GRPOTrainer``.

        With a task list: a ``datasets.Dataset`` of :meth:`rows`. With a sampler (curriculum): a
        ``datasets.IterableDataset`` that asks the sampler for each row's task when TRL draws it, so
        the curriculum's current view decides (set ``GRPOConfig(max_steps=...)``, as TRL requires for
        iterable datasets); ``num_rows`` bounds it, default unbounded.

        Raises:
            DependencyNotInstalled: ``datasets`` is missing.
        """
        try:
            import datasets
        except ImportError as e:
            raise DependencyNotInstalled("datasets", "train", "Building a TRL dataset") from e
        if self.sampler is None:
            return datasets.Dataset.from_list(self.rows(repeats=repeats))
        # datasets pickles gen_kwargs to fingerprint them; a curriculum holds a database connection,
        # so the generator gets a key to this factory instead of the factory itself.
        _DATASET_FACTORIES[id(self)] = self
        return datasets.IterableDataset.from_generator(
            _sampled_rows, gen_kwargs={"factory_key": id(self), "num_rows": num_rows}
        )

    def _row(self, task: Task) -> dict[str, Any]:
        return {"prompt": self.prompt(), TASK_COLUMN: task.model_dump_json(), "task_id": task.task_id}

    def check_completion_budget(self, tokenizer: Any, max_completion_length: int, *, turns: int = 1) -> int:
        """Check that a rollout's completion budget holds ``turns`` actions and what the env answers them.

        TRL counts tool results in ``max_completion_length`` and, when one would pass it, drops that
        result without a word: the env has stepped, yet the policy never sees what happened. Call this
        before training with the trainer's tokenizer. An observation's size is measured on the first
        state of one of the factory's tasks (a step's answer is of the same form).

        Args:
            tokenizer: The policy's tokenizer (anything callable as ``tokenizer(text)["input_ids"]``).
            max_completion_length: ``GRPOConfig.max_completion_length``.
            turns: How many actions a rollout should fit at least.

        Returns:
            The tokens one turn takes (an action call and its observation), as measured.

        Raises:
            ConfigError: the budget is below ``turns`` turns; the message says how many tokens they need.
        """
        task = self.tasks[0] if self.tasks else self._task_for({})
        env = self._env()
        obs, info = env.reset(seed=self._seed, options=self._reset_options(task))
        observation = self._render(obs, info, False)
        per_turn = len(tokenizer(observation)["input_ids"]) + _ACTION_CALL_TOKENS
        if max_completion_length < turns * per_turn:
            raise ConfigError(
                f"max_completion_length={max_completion_length} does not fit {turns} turn(s) of {self.env_id}: "
                f"one observation is {per_turn - _ACTION_CALL_TOKENS} tokens (plus about {_ACTION_CALL_TOKENS} "
                f"for the action call), so {turns} need {turns * per_turn}. TRL drops a tool result that would "
                f"pass the budget without saying so; raise max_completion_length to at least {turns * per_turn}."
            )
        return per_turn

    # ------------------------------------------------------------------ used by DreamGymToolEnv
    def _task_for(self, row: Mapping[str, Any]) -> Task:
        raw = row.get(TASK_COLUMN)
        if raw is not None:
            return Task.model_validate_json(raw) if isinstance(raw, str) else Task.model_validate(raw)
        task_id = row.get("task_id")
        if task_id is not None and task_id in self._by_id:
            return self._by_id[task_id]
        if self.sampler is not None:
            return self.sampler.sample(np.random.default_rng(self._next_seed()))
        raise ConfigError(
            f"The dataset row names no task: give it a {TASK_COLUMN!r} column (DreamGymEnvironments.dataset() "
            f"builds one) or a 'task_id' among {sorted(self._by_id)[:10]}; got columns {sorted(row)}."
        )

    def _next_seed(self) -> int:
        return next(self._seeds)

    def _make_env(self) -> gym.Env[Any, Any]:
        with self._lock:
            env = self._env()
            self._probe = None  # the probe env becomes the first rollout's env
            return env

    def _env(self) -> gym.Env[Any, Any]:
        """A new Gymnasium env; the first simulated one's backend is shared with all later ones."""
        with self._lock:
            return self._probe if self._probe is not None else self._new_env()

    def _new_env(self) -> gym.Env[Any, Any]:
        env = gym.make(self.env_id, **self.env_kwargs)
        backend = getattr(env.unwrapped, "backend", None)
        given = self.env_kwargs.get("backend")
        if self.simulated and backend is not None and (given is None or isinstance(given, str)):
            self.env_kwargs["backend"] = backend
        self._probe = env
        return env

    def _finished(self, task: Task | None, episode: Episode) -> None:
        self.episodes.append(episode)
        if self.sampler is not None and task is not None and not self.simulated:
            # Simulated envs tell their own sampler; real ones do not know the curriculum.
            self.sampler.record_outcome(task, episode.total_reward, episode.success)

    def _default_tasks(self) -> Sequence[Task]:
        if not self.simulated:
            return ()
        env = self._env()
        domain = getattr(env.unwrapped, "domain", None)
        return domain.seed_tasks() if domain is not None else ()

    # ------------------------------------------------------------------ lifecycle
    @property
    def backend(self) -> Any:
        """The experience-model backend every simulated environment shares (None for real ids)."""
        return self.env_kwargs.get("backend") if self.simulated else None

    def close(self) -> None:
        """Close every environment made so far."""
        for instance in self._instances:
            instance._close()
        if self._probe is not None:
            self._probe.close()
            self._probe = None


_DATASET_FACTORIES: weakref.WeakValueDictionary[int, DreamGymEnvironments] = weakref.WeakValueDictionary()


def _sampled_rows(factory_key: int, num_rows: int | None) -> Iterator[dict[str, Any]]:
    factory = _DATASET_FACTORIES[factory_key]
    assert factory.sampler is not None
    rng = np.random.default_rng(factory._seed)
    for _ in itertools.count() if num_rows is None else range(num_rows):
        yield factory._row(factory.sampler.sample(rng))


_POOLS: dict[str, DreamGymEnvironments] = {}
_POOLS_LOCK = threading.Lock()


def environments_for(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> DreamGymEnvironments:
    """The process-wide environments of ``env_id`` with ``env_kwargs`` (one backend, one pool).

    Trainers that make a rollout object per episode (verl's agent loops, verifiers' envs) cannot hold
    the envs, their shared backend and its connections themselves, so they are kept here, one set
    per distinct configuration (keyword values that are objects are told apart by their ``repr``).
    """
    key = json.dumps([env_id, dict(env_kwargs or {})], sort_keys=True, default=repr)
    with _POOLS_LOCK:
        if key not in _POOLS:
            _POOLS[key] = DreamGymEnvironments(env_id, **dict(env_kwargs or {}))
        return _POOLS[key]
