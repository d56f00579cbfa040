"""What answers an env's steps: a world, simulated (the experience model) or real (an engine).

An env is a domain (formats, action grammar) plus a :class:`World`. :class:`~dreamgym_env.episode.EpisodeEnv`
holds the episode and its rules (spaces, action checks, truncation, ``info``, snapshots); the world only
starts episodes and answers well-formed actions, so sim-to-real is swapping the world::

    EpisodeEnv(domain, SimulatedWorld(domain, config))   # DreamGym/<Domain>-v0
    EpisodeEnv(domain, TextWorldEngine(game_files))      # DreamGym/TextWorld-Real-v0

The data a world returns are :class:`EpisodeStart` (reset) and :class:`WorldStep` (step). A world whose
engine blocks (a game process, Playwright's sync API) subclasses :class:`EngineWorld`: its steps run in
the thread that steps the env, as those engines need (:func:`step_now`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from dreamgym_env._event_loop import run_sync
from dreamgym_env.errors import UnsupportedError
from dreamgym_env.records import Source, Step, Task

if TYPE_CHECKING:
    from dreamgym_env.episode import EpisodeSnapshot


@dataclass
class EpisodeStart:
    """The first abstract state of an episode, as :meth:`World.reset` returns it.

    Attributes:
        task: The task being played (its instruction is ``info["task"]``).
        state: The first observation, in the domain's abstract format.
        admissible_actions: Valid actions now (empty for open domains such as WebArena).
        extra: Additional ``info`` entries (e.g. ``expert_plan``).
    """

    task: Task
    state: str
    admissible_actions: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class WorldStep:
    """The world's answer to one action, as :meth:`World.step` returns it.

    Attributes:
        state: Next abstract state (ignored when ``changed`` is False: the state stays).
        reward: The step's reward (binary outcome in the simulator; the engine's, passed through).
        done: The episode ended.
        success: The episode ended with the goal achieved.
        admissible_actions: Valid actions in the next state.
        last_action_error: Why the action failed, when the world says so (BrowserGym does).
        extra: Additional ``info`` entries.
        reasoning: The experience model's reasoning ("" for real engines).
        changed: False when the world did not move (rejected action, unparsable model answer): the
            state, history and admissible actions stay, and no transition is stored.
        on_discard: Undoes what asking the world left outside the env (a recording's entries of the
            model's answers), called once if the step is discarded instead of committed.
    """

    state: str
    reward: float = 0.0
    done: bool = False
    success: bool = False
    admissible_actions: list[str] = field(default_factory=list)
    last_action_error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    reasoning: str = ""
    changed: bool = True
    on_discard: Callable[[], None] | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class EpisodeView:
    """The episode so far, as the env hands it to its world with each action.

    The env keeps the episode (it is what a snapshot freezes and a fork restores); a simulated world
    predicts from it, so it is given, not copied into the world. A real engine keeps its own state and
    may ignore it.

    Attributes:
        task: The task being played.
        episode_id: The episode's id.
        step: Steps taken so far.
        state: The current abstract state.
        admissible_actions: Valid actions in the current state.
        history: The (state, action) pairs of the steps that moved the world.
        ancestors: The episodes this one was forked from, oldest first.
        rng: The env's random generator: a world draws what it samples (request seeds) from it, so a
            failed step that the env rolls back draws nothing.
    """

    task: Task
    episode_id: str
    step: int
    state: str
    admissible_actions: tuple[str, ...]
    history: tuple[Step, ...]
    ancestors: tuple[str, ...]
    rng: np.random.Generator


@runtime_checkable
class World(Protocol):
    """Where an env's episodes come from: it starts them and answers well-formed actions.

    Attributes:
        source: ``"sim"`` (simulated: ``info["simulated"]`` True, the model's reasoning kept in stored
            transitions) or ``"real"``.
        supports_snapshots: Whether the env's :class:`~dreamgym_env.episode.EpisodeSnapshot` is the
            whole episode (the world keeps nothing of it), so episodes can be frozen, forked and
            started as groups. True for the simulated world; a real engine's state lives outside.
    """

    @property
    def source(self) -> Source:
        """``"sim"`` or ``"real"``."""
        ...

    @property
    def supports_snapshots(self) -> bool:
        """Whether the env's snapshots are whole episodes of this world."""
        ...

    def reset(self, options: dict[str, Any], rng: np.random.Generator) -> EpisodeStart:
        """Start an episode (``options`` are the world's: a task, a game file...); draw every choice from ``rng``."""
        ...

    async def step(self, action: str, episode: EpisodeView) -> WorldStep:
        """The world's answer to one well-formed action played in ``episode``.

        Raises what the world raises (an unreachable server, a crashed engine); the env then leaves
        the episode as it was.
        """
        ...

    def restore(self, snapshot: EpisodeSnapshot) -> Task:
        """Get ready to play on from ``snapshot`` (only asked if :attr:`supports_snapshots`).

        Returns the task as this world plays it (the learned setting hides the engine's facts).
        """
        ...

    def close(self) -> None:
        """Release what the world holds (a game process, a browser, connections it opened)."""
        ...


class EngineWorld(ABC):
    """Base of a world whose engine blocks: a game process, a browser driven by Playwright's sync API.

    Subclasses implement :meth:`reset` and :meth:`advance` (one synchronous step), and :meth:`close`
    when they hold resources; engines are best created lazily in the first reset, so that
    constructing (and pickling) an env costs nothing. :func:`step_now` runs :meth:`advance` in the
    caller's thread, the one those engines are bound to; awaited, :meth:`step` runs it in place too.
    The worlds of the real envs are these, so ``source`` is ``"real"`` unless a subclass says otherwise.
    """

    source: ClassVar[Source] = "real"
    supports_snapshots: ClassVar[bool] = False

    @abstractmethod
    def reset(self, options: dict[str, Any], rng: np.random.Generator) -> EpisodeStart:
        """Start an episode; draw any choice (game, task, page seed) from ``rng``."""

    @abstractmethod
    def advance(self, action: str) -> WorldStep:
        """Send one well-formed action to the engine; its answer mapped to the abstract format."""

    async def step(self, action: str, episode: EpisodeView) -> WorldStep:
        """:meth:`advance`, awaited (a vector env or rollout loop): it runs in the awaiting thread."""
        return self.advance(action)

    def restore(self, snapshot: EpisodeSnapshot) -> Task:
        """An engine's state lives outside the env: nothing to restore an episode into."""
        raise UnsupportedError(f"{type(self).__name__} cannot restore an episode from a snapshot.")

    def close(self) -> None:  # noqa: B027 - an engine without resources needs no close
        """Release the engine (browser, game process)."""


def step_now(world: World, action: str, episode: EpisodeView) -> WorldStep:
    """One step of ``world`` from synchronous code (``env.step``).

    An :class:`EngineWorld` steps in the caller's thread; any other world's coroutine runs on the
    package's shared event loop (its HTTP clients stay bound to that loop across steps).
    """
    if isinstance(world, EngineWorld):
        return world.advance(action)
    return run_sync(world.step(action, episode))
