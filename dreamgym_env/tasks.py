"""Where an episode's task comes from: a fixed list, or a sampler such as the curriculum."""

from __future__ import annotations

import hashlib
import logging
import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import PurePath
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np
from pydantic import ValidationError

from dreamgym_env.errors import ConfigError, DomainError
from dreamgym_env.records import Task
from dreamgym_env.spaces import text_problem

logger = logging.getLogger(__name__)


@runtime_checkable
class TaskSampler(Protocol):
    """Chooses the task of each new episode and hears how episodes ended."""

    def sample(self, rng: np.random.Generator) -> Task:
        """Return the next task, using only ``rng`` for randomness."""
        ...

    def record_outcome(self, task: Task, reward: float, success: bool) -> None:
        """Called once per finished episode (terminated or truncated)."""
        ...


class TaskList:
    """Uniform sampling over a fixed list of tasks."""

    def __init__(self, tasks: Sequence[Task]) -> None:
        if not tasks:
            raise DomainError("The task list is empty; give at least one Task.")
        self.tasks = list(tasks)
        self._by_id = {t.task_id: t for t in self.tasks}
        if len(self._by_id) < len(self.tasks):
            counts = Counter(t.task_id for t in self.tasks)
            twice = sorted(task_id for task_id, n in counts.items() if n > 1)
            raise DomainError(
                f"The task list has {len(self.tasks) - len(self._by_id)} task(s) under an id it already "
                f"holds ({', '.join(map(repr, twice[:5]))}): an id names one task (its outcomes, its memo). "
                "Give each task its own task_id, e.g. from the game's path rather than its file stem."
            )

    def sample(self, rng: np.random.Generator) -> Task:
        """A task drawn uniformly with ``rng``."""
        return self.tasks[int(rng.integers(len(self.tasks)))]

    def record_outcome(self, task: Task, reward: float, success: bool) -> None:
        """Uniform sampling ignores outcomes."""

    def get(self, task_id: str) -> Task | None:
        """The task with this id, if listed."""
        return self._by_id.get(task_id)

    def __len__(self) -> int:
        return len(self.tasks)


class EpisodeOutcome(NamedTuple):
    """How one episode ended, as a task sampler hears it.

    ``episode_id`` and ``forked_from`` tell a fork's outcome (an episode played on from another's
    snapshot, tree search) from a whole episode's, for a sampler that should count only the latter.
    """

    task: Task
    reward: float
    success: bool
    episode_id: str = ""
    forked_from: str | None = None


class OutcomeReporter:
    """Hands ended episodes' outcomes to a task sampler, all those of a step in one write.

    An env's ``on_episode_end`` hands it each outcome, after the env's state has moved: a single env
    gives it to :meth:`report` (queued and sent at once); a vector env's sub-envs give theirs to
    :meth:`queue`, and the vector env calls :meth:`flush` once every sub-env has committed. A sampler
    with ``record_outcomes(outcomes)`` (the curriculum's, one transaction) takes them in one call; any
    other hears ``record_outcome`` once per outcome. A failed write loses nothing: the outcomes it did
    not take stay queued, are sent with the next flush, and the step that ended them still returns its
    results.
    """

    def __init__(self, sampler: TaskSampler) -> None:
        self.sampler = sampler
        self.pending: list[EpisodeOutcome] = []

    def add(
        self,
        task: Task,
        reward: float,
        success: bool,
        *,
        episode_id: str = "",
        forked_from: str | None = None,
    ) -> None:
        """Queue one ended episode's outcome (sent by the next :meth:`flush`)."""
        self.pending.append(EpisodeOutcome(task, float(reward), bool(success), episode_id, forked_from))

    def queue(self, outcome: EpisodeOutcome) -> None:
        """Queue ``outcome`` for the next :meth:`flush`: a vector env's sub-envs' ``on_episode_end``."""
        self.pending.append(outcome)

    def report(self, outcome: EpisodeOutcome) -> None:
        """Queue ``outcome`` and send every queued one now: a single env's ``on_episode_end``."""
        self.queue(outcome)
        self.flush()

    def flush(self) -> bool:
        """Send every queued outcome; ``False`` (logged, outcomes kept) if the sampler's write failed."""
        if not self.pending:
            return True
        try:
            record_many = getattr(self.sampler, "record_outcomes", None)
            if callable(record_many):
                record_many(list(self.pending))
                self.pending.clear()
            while self.pending:  # one at a time, each dropped once taken, so a retry sends no duplicate
                first = self.pending[0]
                self.sampler.record_outcome(first.task, first.reward, first.success)
                self.pending.pop(0)
        except Exception as e:  # a curriculum store that is down must not lose the step, nor the outcomes
            logger.warning(
                "Could not record %d episode outcome(s) with %s (%s: %s); kept, sent again after the next step",
                len(self.pending),
                type(self.sampler).__name__,
                type(e).__name__,
                e,
            )
            return False
        return True


def as_task_sampler(tasks: Sequence[Task | dict[str, Any]] | TaskSampler, domain: str) -> TaskSampler:
    """Wrap a plain list in :class:`TaskList`, checked to hold tasks of ``domain``; pass samplers through.

    A list may hold a task's fields as a dict (``task.model_dump()``, what ``env.spec`` keeps): each is
    made a :class:`Task`, its ``domain`` defaulting to ``domain``.

    Raises:
        ConfigError: ``tasks`` is not a list, or it holds something that is not a :class:`Task` (a game
            file's path, an instruction), a dict that is not one's fields, or a task of another domain
            (:func:`check_tasks`).
    """
    if isinstance(tasks, TaskSampler):
        return tasks
    if isinstance(tasks, (str, bytes, os.PathLike, Task, dict)) or not isinstance(tasks, Iterable):
        raise ConfigError(
            f"tasks must be a list of Task objects (or a task sampler such as the curriculum), got a "
            f"{type(tasks).__name__}: {_short(tasks)}. {_making_tasks(domain, tasks)}"
        )
    given = list(tasks)
    listed = [_as_task(task, i, domain, given) for i, task in enumerate(given)]
    check_tasks(listed, domain)
    return TaskList(listed)


def tasks_as_dicts(tasks: Any) -> Any:
    """``tasks`` as JSON-ready dicts (each :class:`Task`'s ``model_dump(mode="json")``), else unchanged.

    What an env's spec keeps of ``tasks=``, so ``env.spec.to_json()`` works and ``gymnasium.make`` of
    the spec read back gives the same tasks (:func:`as_task_sampler` takes the dicts). A sampler is
    left as it is, and so is what a list holds besides tasks.
    """
    if isinstance(tasks, (list, tuple)):
        return [t.model_dump(mode="json") if isinstance(t, Task) else t for t in tasks]
    return tasks


_TASK_FIELDS = (
    "task_id (text), domain (the env's domain name) and instruction (text); metadata (a dict of facts "
    "for the model), source and parent_id are optional"
)

_TASK_LOADERS = {
    "textworld": (
        "For TextWorld game files (.z8, .ulx), dreamgym_env.real.textworld.tasks_from_games(paths) makes "
        "the tasks: tasks=tasks_from_games({paths})."
    ),
    "alfworld": "For ALFWorld's task files, dreamgym_env.domains.alfworld.ALFWorldDomain.load_tasks(path) reads them.",
    "webshop": "For WebShop's goal files, dreamgym_env.domains.webshop.WebShopDomain.load_tasks(path) reads them.",
    "webarena": "For WebArena's config files, dreamgym_env.domains.webarena.WebArenaDomain.load_tasks(path) reads them.",
    "miniwob": "For recorded MiniWoB tasks, dreamgym_env.domains.miniwob.MiniWoBDomain.load_tasks(path) reads them.",
}


def _making_tasks(domain: str, given: object) -> str:
    """How to make tasks of ``domain``: a Task by hand, and the domain's loader of files where it has one.

    ``given`` (what came as ``tasks``) fills the loader's example where it is a path or a list of them.
    """
    by_hand = f"Make one with Task(task_id=..., domain={domain!r}, instruction=...)."
    loader = _TASK_LOADERS.get(domain)
    if loader is None:
        return by_hand
    items = [given] if isinstance(given, (str, os.PathLike)) else given
    paths = "paths"
    if isinstance(items, list) and items and all(_looks_like_path(p) for p in items):
        paths = _short([os.fspath(p) for p in items])
    return f"{loader.format(paths=paths)} {by_hand}"


def _looks_like_path(value: object) -> bool:
    """A path object, or text with a file suffix (``games/g.z8``; not an instruction)."""
    return isinstance(value, os.PathLike) or (isinstance(value, str) and bool(PurePath(value).suffix))


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _as_task(item: object, i: int, domain: str, given: object = None) -> Task:
    """``tasks[i]`` as a :class:`Task`: a Task as is, a dict of its fields validated (domain defaulted).

    Raises:
        ConfigError: anything else, or a dict whose fields do not make a Task.
    """
    if isinstance(item, Task):
        return item
    if isinstance(item, dict):
        try:
            return Task.model_validate({"domain": domain, **item})
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in p['loc']) or 'task'}: {p['msg']}"
                for p in e.errors(include_url=False)
            )
            raise ConfigError(
                f"tasks[{i}] is a dict that does not make a Task ({problems}). A task holds "
                f"{_TASK_FIELDS}: Task.model_validate(a dict of those fields) reads one."
            ) from None
    if isinstance(item, (str, bytes, os.PathLike)):
        raise ConfigError(
            f"tasks[{i}] is a {type(item).__name__} ({_short(item)}), not a Task: tasks= takes Task objects, "
            f"not file paths or instruction texts. A task is a dreamgym_env.Task holding {_TASK_FIELDS}. "
            f"{_making_tasks(domain, given)} (One instruction for one episode: "
            "reset(options={'task': text}).)"
        )
    raise ConfigError(
        f"tasks[{i}] is a {type(item).__name__}, not a Task. A task is a dreamgym_env.Task holding "
        f"{_TASK_FIELDS}: Task(task_id=..., domain={domain!r}, instruction=...), or "
        "Task.model_validate(a dict of those fields)."
    )


def check_tasks(tasks: Sequence[object], domain: str) -> None:
    """Refuse a task list that an env of ``domain`` cannot play, naming the first task that does not fit.

    A task of another domain is not an error anywhere later: the episode starts in this domain's world
    with that domain's instruction (a TextWorld room and a shampoo to buy), and the model plays on.

    Raises:
        ConfigError: an item is not a :class:`Task`, or a task's ``domain`` is not ``domain``.
    """
    for i, task in enumerate(tasks):
        task = _as_task(task, i, domain) if not isinstance(task, Task) else task
        if task.domain != domain:
            others = Counter(t.domain for t in tasks if isinstance(t, Task) and t.domain != domain)
            counts = ", ".join(f"{n} of {name!r}" for name, n in sorted(others.items()))
            raise ConfigError(
                f"tasks[{i}] ({task.task_id!r}) is a task of the {task.domain!r} domain, and this env plays "
                f"{domain!r} ({counts} of the {len(tasks)} tasks are of another domain). Give tasks whose "
                f"domain is {domain!r}: the domain's seed_tasks(), tasks built for it, or Task(..., "
                f"domain={domain!r})."
            )


_ACCEPTED = "a Task, a dict of Task fields (instruction, and optionally task_id, metadata), a task id or an instruction"


def resolve_task(spec: Any, domain: str, sampler: TaskSampler) -> Task:
    """Turn ``reset(options={"task": spec})`` into a Task.

    Accepts a :class:`Task`, a dict of Task fields, a task id the sampler lists (any sampler with a
    ``get(task_id)`` method), or free instruction text. The instruction and id must be text (no
    control characters or lone surrogates): they are hashed, sent to the model and stored.

    Raises:
        DomainError: anything else, an invalid dict, an empty instruction or one that is not text.
    """
    if isinstance(spec, Task):
        task = spec
    elif isinstance(spec, dict):
        try:
            task = Task.model_validate({"domain": domain, "task_id": spec.get("task_id", "custom"), **spec})
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in p['loc']) or 'task'}: {p['msg']}"
                for p in e.errors(include_url=False)
            )
            raise DomainError(f"options['task'] as a dict: {problems}. Accepted: {_ACCEPTED}.") from None
    elif isinstance(spec, str):
        _check_text("instruction", spec)
        getter = getattr(sampler, "get", None)  # TaskList, CurriculumSampler: pin a listed task by id
        listed = getter(spec) if callable(getter) else None
        if listed is not None:
            return listed
        digest = hashlib.sha1(spec.encode()).hexdigest()[:12]
        return Task(task_id=f"user-{digest}", domain=domain, instruction=spec, source="user")
    else:
        raise DomainError(f"options['task'] must be {_ACCEPTED} string; got {type(spec).__name__}.")
    _check_text("instruction", task.instruction)
    _check_text("task_id", task.task_id)
    return task


def _check_text(field: str, value: str) -> None:
    """Refuse an empty value or one that is not text, naming the offending character by code point."""
    if not value.strip():
        raise DomainError(f"options['task'] {field} is empty; give the task's {field} as text.")
    problem = text_problem(value)
    if problem is not None:
        raise DomainError(
            f"options['task'] {field} is not text: {problem}. Accepted: {_ACCEPTED} in plain text."
        )
