"""The episode rules every DreamGym env follows, simulated or real, written once.

A policy trained on ``DreamGym/<Domain>-v0`` must run unchanged on ``DreamGym/<Domain>-Real-v0``, so
both are an :class:`EpisodeEnv`: the same spaces, reset and step guards, action check, ``info`` keys,
truncation, state cut, invalid-action feedback, stored-transition form and rendering. What differs is
the :class:`~dreamgym_env.world.World` it is given: the experience model
(:class:`~dreamgym_env.simulated.SimulatedWorld`) or a real engine. The env calls the world for the
first state of an episode and for the answer to each well-formed action, and nothing else calls back.

What a step leaves outside the episode goes to two callbacks the env is given: ``on_transition``
(the simulator's replay buffer) and ``on_episode_end`` (the curriculum's outcomes). A step is split in
two so that a vector env can make N of them atomic: :meth:`EpisodeEnv.apropose` asks the world and
changes nothing in the episode (a failure restores the env's RNG), and :meth:`EpisodeEnv.commit`
applies the answer. ``step``/``astep`` are the two in a row.

A simulated episode is all in the env (the world is the model's answers to the history), so it can be
frozen and played on elsewhere: :meth:`EpisodeEnv.snapshot` gives an :class:`EpisodeSnapshot`, and
``reset(options={"snapshot": s})`` continues it as a fork, ``reset(options={"group_start": s})`` starts
a new episode at its first state. A real env's world lives outside it, and refuses both.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, NoReturn, TypeVar, overload

import gymnasium as gym
import numpy as np

from dreamgym_env.config import EnvConfig
from dreamgym_env.domains import Domain, get_domain
from dreamgym_env.errors import (
    DreamGymError,
    InvalidActionError,
    RenderModeError,
    SnapshotError,
    UnsupportedError,
)
from dreamgym_env.records import Source, Step, Task, Transition
from dreamgym_env.spaces import DEFAULT_MAX_STATE_CHARS, FreeText, escape_non_text, fit_state, text_problem
from dreamgym_env.tasks import EpisodeOutcome
from dreamgym_env.world import EpisodeStart as EpisodeStart  # re-exported: where it was defined before
from dreamgym_env.world import EpisodeView, World, WorldStep, step_now

_DEFAULT_MAX_ACTION_CHARS: int = EnvConfig.model_fields["max_action_chars"].default
"""Longest accepted action unless configured (``max_action_chars``)."""
_FEEDBACK_CHARS = 1024
"""Room for the invalid-action line in front of the state: observations hold up to state + this."""
INVALID_ACTION = "[Invalid action]"
"""How the observation of a step whose action was rejected begins."""
_ECHO_CHARS = 120  # how much of a rejected action an error message repeats


_T = TypeVar("_T")


class WorldAttribute(Generic[_T]):
    """A read-only env attribute that is its world's: the world owns the value, the env shows it.

    The named envs are configurations of :class:`EpisodeEnv` around one world, so what a user reads
    on the env (its tasks, games, backend...) lives on the world; this keeps one place that reads it.

    Args:
        doc: The attribute's docstring.
        name: The world's attribute, when it is named differently from the env's.
    """

    def __init__(self, doc: str, *, name: str | None = None) -> None:
        self.__doc__ = doc
        self._world_name = name
        self._name = name or ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name
        self._world_name = self._world_name or name

    @overload
    def __get__(self, env: None, owner: type | None = None) -> WorldAttribute[_T]: ...

    @overload
    def __get__(self, env: EpisodeEnv, owner: type | None = None) -> _T: ...

    def __get__(self, env: EpisodeEnv | None, owner: type | None = None) -> WorldAttribute[_T] | _T:
        if env is None:
            return self
        value: _T = getattr(env.world, self._world_name or self._name)
        return value

    def __set__(self, env: EpisodeEnv, value: _T) -> NoReturn:
        raise AttributeError(f"{self._name!r} is the world's; it cannot be set on the env")


@dataclass(frozen=True)
class PendingStep:
    """A step asked of the world but not applied yet (see :meth:`EpisodeEnv.apropose`)."""

    action: str
    outcome: WorldStep
    episode_id: str
    step: int
    rng_state: Mapping[str, Any] | None = None
    transition: Transition | None = None
    """What committing it stores (``None`` if the state stays), built once when it is proposed."""


@dataclass(frozen=True)
class EpisodeSnapshot:
    """An episode frozen after one of its steps: everything a simulated env needs to play on from there.

    Immutable and picklable, so one snapshot may be kept, sent to another process and restored any
    number of times (``env.reset(options={"snapshot": snapshot})``, or :meth:`EpisodeEnv.restore`). It
    holds the episode only, not the machinery that simulates it: the restoring env brings its own
    backend, replay buffer and memo.

    Attributes:
        domain: The domain's name; only an env of this domain restores it.
        task: The task being played.
        episode_id: The frozen episode's id; a restored episode gets its own and names this one as
            ``forked_from``.
        step: Steps taken.
        state: The current abstract state.
        observation: The current observation (the state, or after a rejected action its feedback).
        admissible_actions: Valid actions in the current state.
        history: The (state, action) pairs so far, as the experience model is shown them.
        ended: The episode had terminated or truncated.
        rng_state: The env's random generator (numpy's ``bit_generator.state``) as JSON: the sampling
            seeds of the next requests come from it.
        ancestors: The episodes this one was forked from, oldest first (empty for an episode begun by
            a plain reset).
    """

    domain: str
    task: Task
    episode_id: str
    step: int
    state: str
    observation: str
    admissible_actions: tuple[str, ...]
    history: tuple[Step, ...]
    ended: bool
    rng_state: str
    ancestors: tuple[str, ...] = ()


_RESTORE_OPTIONS = ("snapshot", "group_start")
"""The reset options that put a simulated env at a snapshot instead of beginning an episode."""


def _rng_json(rng: np.random.Generator) -> str:
    """The generator's state as JSON, arrays (MT19937's key, Philox's counter) as lists."""

    def plain(value: Any) -> Any:
        if isinstance(value, np.ndarray):
            return value.tolist()
        if isinstance(value, np.integer):
            return int(value)
        raise TypeError(f"{type(value).__name__} in a bit generator's state")

    return json.dumps(rng.bit_generator.state, default=plain)


def _rng_from_json(rng_state: str) -> np.random.Generator:
    """A generator in the state :func:`_rng_json` wrote; :class:`SnapshotError` for anything else."""
    try:
        state = json.loads(rng_state)
        kind = getattr(np.random, str(state["bit_generator"]), None)
        if not (isinstance(kind, type) and issubclass(kind, np.random.BitGenerator)):
            raise ValueError(f"{state['bit_generator']!r} is not a numpy bit generator")
        bit_generator = kind()
        bit_generator.state = state
    except (TypeError, ValueError, KeyError) as e:
        raise SnapshotError(
            f"The snapshot's rng_state is not a numpy bit generator's state as JSON ({e}); take snapshots "
            "with env.snapshot() rather than building them."
        ) from None
    return np.random.Generator(bit_generator)


_ENVS_MADE = itertools.count()
"""This process's envs, counted as they are made: each new episode's id names its env's number."""

_PROCESS_SALT = os.urandom(16)
"""Random bytes of this process, drawn again in a forked child: ids from two processes never meet."""


def _new_process_salt() -> None:
    global _PROCESS_SALT
    _PROCESS_SALT = os.urandom(16)


os.register_at_fork(after_in_child=_new_process_salt)


def _new_episode_id(draw: bytes, env_number: int) -> str:
    """A new episode's id: 16 bytes ``draw`` from the env's RNG, the env's number and the process's salt.

    The draw alone repeats whenever an RNG state does: sub-env 1 of a vector ``reset(seed=3)`` and
    sub-env 0 of ``reset(seed=4)`` are both seeded 4, and so is a second run of the same seeds; what
    groups stored transitions by episode would mix their steps. The env's number sets envs of one
    process apart, and the process's salt (random, drawn again in every forked child) the workers of an
    ``AsyncVectorEnv``, which count their envs from the same number, and two runs writing to one buffer.
    One env reset with one seed repeats its id, as Gymnasium's determinism check asks (``check_env``:
    the same seed, the same ``info``); a seeded script run again gets new ids.
    """
    digest = hashlib.sha256(draw + env_number.to_bytes(8, "big") + _PROCESS_SALT).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def _fork_id(parent: str, previous: str, nonce: bytes) -> str:
    """A restored episode's id: new, and drawn from the env's RNG, so seeded runs repeat their ids.

    The episode the env played before enters too, so an env that restores one snapshot again and
    again (tree search from one state) gets a new id each time, though its RNG is put back each time.
    """
    digest = hashlib.sha256(f"{parent}\0{previous}\0".encode() + nonce).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def _feedback_observation(error: str, state: str) -> str:
    """The observation of a rejected action: ``[Invalid action] <why>``, a blank line, then the state.

    The reason is cut to fit :data:`_FEEDBACK_CHARS`, so the state is never cut and the observation
    always starts with :data:`INVALID_ACTION`.
    """
    room = _FEEDBACK_CHARS - len(INVALID_ACTION) - 3
    why = error if len(error) <= room else error[: room - 1] + "…"
    return f"{INVALID_ACTION} {why}\n\n{state}"


def render_episode(render_mode: str | None, task: Task | None, step: int, observation: str) -> str | None:
    """The text every env renders: ``ansi`` returns it, ``human`` prints it."""
    if render_mode is None:
        return None
    text = f"Task: {task.instruction if task else '(not reset)'}\nStep {step}\n{observation}"
    if render_mode == "human":
        print(text)
        return None
    return text


def _echo(action: str) -> str:
    shown = escape_non_text(action)
    return shown if len(shown) <= _ECHO_CHARS else shown[:_ECHO_CHARS] + "…"


class EpisodeEnv(gym.Env[str, str]):
    """One text episode of a domain, its steps answered by a world: the env of every DreamGym id.

    The env holds the episode and its rules; the :class:`~dreamgym_env.world.World` starts episodes
    and answers well-formed actions (the experience model, or a real engine). Side effects of a step
    are the callbacks': ``on_transition`` hears each transition that moved the world before the
    episode moves (if it raises, the step is undone and the error raised, so the step may be played
    again), ``on_episode_end`` each ended episode's outcome once, after the state moved.

    Args:
        domain: The domain whose formats and action grammar the env speaks (name or :class:`Domain`).
        world: What answers the steps (:class:`~dreamgym_env.simulated.SimulatedWorld`, an engine).
        max_steps: Truncation limit; default the domain's (:data:`dreamgym_env.domains.BUILTIN_DOMAINS`).
        max_state_chars: Longest state; a longer one is cut at the end (:func:`fit_state`).
        max_action_chars: Longest accepted action.
        render_mode: ``"ansi"`` or ``"human"``.
        on_transition: Receives each committed :class:`~dreamgym_env.records.Transition` (the replay
            buffer's ``add``); ``None`` stores nothing.
        on_episode_end: Receives each ended episode's :class:`~dreamgym_env.tasks.EpisodeOutcome`
            (the curriculum); an episode left unfinished by a reset is reported then, as truncated.

    Example:
        >>> env = EpisodeEnv("textworld", TextWorldEngine(game_files))  # as DreamGym/TextWorld-Real-v0
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}
    observation_space: FreeText
    action_space: FreeText

    def __init__(
        self,
        domain: str | Domain,
        world: World,
        *,
        max_steps: int | None = None,
        max_state_chars: int = DEFAULT_MAX_STATE_CHARS,
        max_action_chars: int = _DEFAULT_MAX_ACTION_CHARS,
        render_mode: str | None = None,
        on_transition: Callable[[Transition], None] | None = None,
        on_episode_end: Callable[[EpisodeOutcome], None] | None = None,
    ) -> None:
        self.domain = get_domain(domain)
        self.max_steps = max_steps if max_steps is not None else self.domain.max_steps
        if self.max_steps < 1:
            raise DreamGymError(f"max_steps must be at least 1, got {self.max_steps}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise RenderModeError(
                f"render_mode must be None or one of {self.metadata['render_modes']} (text envs), got "
                f"{render_mode!r}."
            )
        self.world = world
        self.on_transition = on_transition
        self.on_episode_end = on_episode_end
        self.render_mode = render_mode
        self.max_state_chars = max_state_chars
        self.max_action_chars = max_action_chars
        self.observation_space = FreeText(max_length=max_state_chars + _FEEDBACK_CHARS)
        self.action_space = FreeText(max_length=max_action_chars)
        self.last_transition: Transition | None = None
        self._task: Task | None = None
        self._episode_id = ""
        self._state = ""
        self._obs = ""
        self._admissible: list[str] = []
        self._history: list[Step] = []
        self._step = 0
        self._ended = True
        self._ancestors: tuple[str, ...] = ()
        self._group_id: str | None = None
        self._env_number = next(_ENVS_MADE)

    source = WorldAttribute[Source](
        """``"sim"`` or ``"real"``: the world's (``info["source"]``, the stored transitions')."""
    )
    supports_snapshots = WorldAttribute[bool](
        "Whether the whole episode is in the env, so :meth:`snapshot` can freeze it (the simulated world's)."
    )

    # ------------------------------------------------------------------ gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode (``options`` are the world's: a task, a game file, a session...).

        An episode that took steps but never ended here was truncated from outside, by Gymnasium's
        ``TimeLimit`` (``gymnasium.make(..., max_episode_steps=N)`` below ``max_steps``) or an early
        reset: its outcome (reward 0, no success) is reported now, so the curriculum counts it.

        Two options put an env that :attr:`supports_snapshots` at an :class:`EpisodeSnapshot` instead,
        through ``reset`` so that Gymnasium's wrappers (``OrderEnforcing``, ``TimeLimit``) and vector
        envs see a new episode begin. Each takes no other option:

        * ``{"snapshot": s}`` continues ``s``'s episode as a fork: its task, history, state, step count
          and RNG (``seed`` reseeds the RNG instead), under a new episode id; ``info["forked_from"]``
          names ``s``'s episode.
        * ``{"group_start": s}`` begins a new episode at the first state of ``s``, taken right after a
          reset (a GRPO group's shared start); its RNG is its own, as after a plain reset, and
          ``info["group_id"]`` names ``s``'s episode.
        """
        options = dict(options or {})
        restoring = self._restore_option(options)
        self._end_abandoned_episode()
        if restoring is not None:
            return self._start_from(*restoring, seed=seed)
        super().reset(seed=seed)
        start = self.world.reset(options, self.np_random)
        self._task = start.task
        self._episode_id = _new_episode_id(self.np_random.bytes(16), self._env_number)
        self._state = self._obs = fit_state(start.state, self.max_state_chars)
        self._admissible = list(start.admissible_actions)
        self._history = []
        self._step = 0
        self._ended = False
        self._ancestors, self._group_id = (), None
        self.last_transition = None
        info = self._info(success=False, reasoning="", last_action_error=None, **start.extra)
        if self.render_mode == "human":
            self.render()
        return self._obs, info

    def snapshot(self) -> EpisodeSnapshot:
        """The current episode, frozen: restore it here or in another env of the domain to play on from now.

        Cheap in a dream (strings and the RNG's state), so tree search and per-step advantages can
        branch an episode at every step. Raises :class:`UnsupportedError` in a real env, whose world
        lives outside it.
        """
        self._check_snapshots()
        if self._task is None:
            raise DreamGymError("Call reset() before snapshot(): there is no episode to freeze yet.")
        return EpisodeSnapshot(
            domain=self.domain.name,
            task=self._task,
            episode_id=self._episode_id,
            step=self._step,
            state=self._state,
            observation=self._obs,
            admissible_actions=tuple(self._admissible),
            history=tuple(self._history),
            ended=self._ended,
            rng_state=_rng_json(self.np_random),
            ancestors=self._ancestors,
        )

    def restore(self, snapshot: EpisodeSnapshot, *, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        """Continue ``snapshot``'s episode here as a fork: ``reset(seed=seed, options={"snapshot": snapshot})``.

        Through a Gymnasium wrapper (``gymnasium.make``), call that ``reset`` instead, so the wrappers
        see the new episode. With ``seed=None`` the fork sends the requests the original would have
        (the same prompts and sampling seeds) for the same actions; a ``seed`` gives it its own RNG.
        """
        return self.reset(seed=seed, options={"snapshot": snapshot})

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Play one action; a failure of the world (server down) leaves the episode as it was."""
        rejected = self._rejection(action)
        if rejected is not None:
            return self.commit(rejected)
        rng_state = self.np_random.bit_generator.state
        try:
            outcome = step_now(self.world, action, self.view())
        except BaseException:
            self.np_random.bit_generator.state = rng_state
            raise
        return self.commit(self._pending(action, outcome, rng_state))

    async def astep(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Coroutine form of :meth:`step`; a vector env awaits many of these at once."""
        return self.commit(await self.apropose(action))

    async def apropose(self, action: str) -> PendingStep:
        """Ask the world for ``action``'s outcome without changing the episode; :meth:`commit` applies it.

        Raises what the world raises (an unreachable server...), with the env's RNG restored, so the
        same step may be asked again. A rejected action is answered here, without asking the world.
        """
        rejected = self._rejection(action)
        if rejected is not None:
            return rejected
        rng_state = self.np_random.bit_generator.state
        try:
            outcome = await self.world.step(action, self.view())
        except BaseException:
            self.np_random.bit_generator.state = rng_state
            raise
        return self._pending(action, outcome, rng_state)

    def discard(self, pending: PendingStep) -> None:
        """Give up a proposed step: the RNG as before :meth:`apropose`, the world told it was not used.

        The world hears it through :attr:`WorldStep.on_discard` (a recording forgets the answers).
        """
        if pending.rng_state is not None and self._is_current(pending):
            self.np_random.bit_generator.state = pending.rng_state
        if pending.outcome.on_discard is not None:
            pending.outcome.on_discard()

    def proposed_transition(self, pending: PendingStep) -> Transition | None:
        """The transition :meth:`commit` would store for ``pending`` (``None`` if the state stays)."""
        self._check_current(pending)
        return pending.transition

    def commit(self, pending: PendingStep) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply a proposed step: hand over the transition, count the step, move the state, end the episode if due.

        ``on_transition`` hears the transition first, so one that fails (a full disk) leaves the
        episode (and its RNG) as it was, and the same step may be played again. An ended episode's
        outcome goes to ``on_episode_end`` last, after the state moved.
        """
        transition = self.proposed_transition(pending)
        if self.on_transition is not None and transition is not None:
            try:
                self.on_transition(transition)
            except BaseException:
                self.discard(pending)
                raise
        outcome, action = pending.outcome, pending.action
        self._step += 1
        reward = float(outcome.reward)
        if transition is not None:
            self.last_transition = transition
            self._history.append(Step(state=self._state, action=action))
            self._state = self._obs = transition.next_state
            self._admissible = list(outcome.admissible_actions)
        else:
            self.last_transition = None
            error = outcome.last_action_error
            self._obs = _feedback_observation(error, self._state) if error else self._state
        terminated = bool(outcome.done)
        truncated = not terminated and self._step >= self.max_steps
        if terminated or truncated:
            self._ended = True
            self._report_end(reward, outcome.success)
        info = self._info(
            success=outcome.success,
            reasoning=outcome.reasoning,
            last_action_error=outcome.last_action_error,
            **outcome.extra,
        )
        if self.render_mode == "human":
            self.render()
        return self._obs, reward, terminated, truncated, info

    def render(self) -> str | None:
        """``ansi``: return the task and current observation; ``human``: print them."""
        return render_episode(self.render_mode, self._task, self._step, self._obs)

    def close(self) -> None:
        """Release the world (a game process, a browser, the connections a simulated world opened)."""
        self.world.close()
        super().close()

    # ------------------------------------------------------------------ the episode, read-only
    @property
    def task(self) -> Task | None:
        """The current episode's task."""
        return self._task

    @property
    def state(self) -> str:
        """The current abstract state (without any invalid-action feedback line)."""
        return self._state

    @property
    def history(self) -> list[Step]:
        """The (state, action) pairs of the current episode so far (steps that moved the world)."""
        return list(self._history)

    @property
    def episode_id(self) -> str:
        """The current episode's id (``info["episode_id"]``, the stored transitions' ``episode_id``)."""
        return self._episode_id

    @property
    def ended(self) -> bool:
        """Whether the episode terminated or truncated (or none began): ``step`` needs a ``reset`` first."""
        return self._ended

    @property
    def forked_from(self) -> str | None:
        """The episode the current one was restored from (``info["forked_from"]``), else ``None``."""
        return self._ancestors[-1] if self._ancestors else None

    @property
    def action_help(self) -> str:
        """The domain's action grammar for agents: its commands and their forms, with examples.

        The text an invalid action's feedback quotes, to put in an agent's prompt before its first
        step (BrowserGym's ``env.unwrapped.action_set.describe()`` plays this part). The actions of
        the current state are ``info["admissible_actions"]`` (empty in an open domain: WebArena).
        """
        return self.domain.action_help

    def action_error(self, action: str) -> str | None:
        """Why ``action`` would be rejected now without reaching the world, or ``None``.

        Empty, longer than ``max_action_chars``, not text (control characters, lone surrogates), or
        outside the domain's grammar and not among the admissible actions: an action the world lists
        is playable even where the grammar is narrower (ALFWorld's ``help``), in the simulator as in
        the real env.
        """
        if not action.strip():
            return f"The action is empty. {self.domain.action_help}"
        if len(action) > self.max_action_chars:
            return (
                f"The action has {len(action)} characters; at most {self.max_action_chars} are accepted "
                "(max_action_chars)."
            )
        problem = text_problem(action)
        if problem is not None:
            return f"The action '{_echo(action)}' is not text: {problem}. {self.domain.action_help}"
        if action in self._admissible:
            return None
        error = self.domain.validate_action(action, self._admissible)
        if error is not None and len(action) > _ECHO_CHARS:
            error = error.replace(action, _echo(action))
        return error

    def view(self) -> EpisodeView:
        """The episode so far as its world sees it with each action (:class:`~dreamgym_env.world.EpisodeView`)."""
        if self._task is None:
            raise DreamGymError("Call reset() first: there is no episode yet.")
        return EpisodeView(
            task=self._task,
            episode_id=self._episode_id,
            step=self._step,
            state=self._state,
            admissible_actions=tuple(self._admissible),
            history=tuple(self._history),
            ancestors=self._ancestors,
            rng=self.np_random,
        )

    # ------------------------------------------------------------------ helpers
    def _end_abandoned_episode(self) -> None:
        """Report an episode left unfinished by a reset or restore as truncated (reward 0, no success)."""
        if not self._ended and self._step > 0:
            self._ended = True  # reported once, even if starting the next episode fails
            self._report_end(0.0, False)

    def _report_end(self, reward: float, success: bool) -> None:
        """Hand the episode that just ended to ``on_episode_end`` (called once per episode)."""
        if self.on_episode_end is not None:
            assert self._task is not None
            self.on_episode_end(
                EpisodeOutcome(self._task, float(reward), bool(success), self._episode_id, self.forked_from)
            )

    def _check_snapshots(self) -> None:
        if not self.supports_snapshots:
            name = self.spec.id if self.spec is not None else type(self).__name__
            raise UnsupportedError(
                f"{name} cannot take or restore snapshots: its world lives outside the env (a game "
                "process, a browser page) and cannot be frozen or copied. Snapshots, forks and group "
                "starts are for the simulated envs, DreamGym/<Domain>-v0."
            )

    def _restore_option(self, options: dict[str, Any]) -> tuple[EpisodeSnapshot, bool] | None:
        """``(snapshot, is_fork)`` when ``options`` ask to start from a snapshot (checked), else ``None``."""
        for key in _RESTORE_OPTIONS:
            if key in options and options[key] is None:
                del options[key]  # None: a plain reset, as a vector env passes an option along
        given = [key for key in _RESTORE_OPTIONS if key in options]
        if not given:
            return None
        self._check_snapshots()
        key = given[0]
        if len(options) > 1:
            others = sorted(k for k in options if k != key)
            raise SnapshotError(
                f"options[{key!r}] puts the env at a snapshot as it was and takes no other option; got "
                f"{others} too. Pass the snapshot alone (and seed= for a new RNG)."
            )
        snapshot = options[key]
        self._check_snapshot(key, snapshot)
        if key == "group_start" and snapshot.step:
            raise SnapshotError(
                f"options['group_start'] takes a snapshot taken right after reset (step 0), got one at "
                f"step {snapshot.step}. To play on from a later step, pass it as options['snapshot'] (a fork)."
            )
        return snapshot, key == "snapshot"

    def _check_snapshot(self, key: str, snapshot: Any) -> None:
        """Refuse what would not continue its episode here, naming what is accepted."""
        if not isinstance(snapshot, EpisodeSnapshot):
            raise SnapshotError(
                f"options[{key!r}] takes an EpisodeSnapshot, as env.unwrapped.snapshot() returns; got "
                f"{type(snapshot).__name__}."
            )
        if snapshot.domain != self.domain.name:
            raise SnapshotError(
                f"This snapshot is of a {snapshot.domain!r} episode and this env plays {self.domain.name!r}: "
                f"restore it into an env of the {snapshot.domain!r} domain."
            )
        if len(snapshot.state) > self.max_state_chars:
            raise SnapshotError(
                f"The snapshot's state has {len(snapshot.state)} characters, more than this env's "
                f"max_state_chars ({self.max_state_chars}): restore it into an env with "
                f"max_state_chars >= {len(snapshot.state)}."
            )
        _rng_from_json(snapshot.rng_state)

    def _start_from(
        self, snapshot: EpisodeSnapshot, fork: bool, *, seed: int | None
    ) -> tuple[str, dict[str, Any]]:
        """Put the env at ``snapshot``: a fork of its episode, or a new episode at its first state."""
        super().reset(seed=seed)
        nonce = self.np_random.bytes(16)
        if fork and seed is None:
            self.np_random = _rng_from_json(snapshot.rng_state)
        self._task = self.world.restore(snapshot)
        self._episode_id = _fork_id(snapshot.episode_id, self._episode_id, nonce)
        self._state, self._obs = snapshot.state, snapshot.observation
        self._admissible = list(snapshot.admissible_actions)
        self._history = list(snapshot.history)
        self._step = snapshot.step
        self._ended = snapshot.ended
        if fork:
            self._ancestors, self._group_id = (*snapshot.ancestors, snapshot.episode_id), None
        else:
            self._ancestors, self._group_id = (), snapshot.episode_id
        self.last_transition = None
        info = self._info(success=False, reasoning="", last_action_error=None)
        if self.render_mode == "human":
            self.render()
        return self._obs, info

    def _episode_tags(self) -> dict[str, str]:
        """Where the episode came from, in its ``info`` and stored transitions: a fork's parent, a group."""
        tags: dict[str, str] = {}
        if self._ancestors:
            tags["forked_from"] = self._ancestors[-1]
        if self._group_id is not None:
            tags["group_id"] = self._group_id
        return tags

    def _rejection(self, action: str) -> PendingStep | None:
        """The guards every step passes; a malformed action's feedback step, or ``None`` to ask the world."""
        if self._task is None:
            raise DreamGymError("Call reset() before step().")
        if self._ended:
            raise DreamGymError(
                "The episode has ended (terminated or truncated); call reset() to start another."
            )
        if not isinstance(action, str):
            raise InvalidActionError(
                f"Actions are strings in the {self.domain.name} grammar, "
                f"got {type(action).__name__}: {action!r}. {self.domain.action_help}"
            )
        error = self.action_error(action)
        if error is None:
            return None
        return self._pending(action, WorldStep(self._state, last_action_error=error, changed=False), None)

    def _pending(self, action: str, outcome: WorldStep, rng_state: Mapping[str, Any] | None) -> PendingStep:
        transition = None
        if outcome.changed:
            next_state = fit_state(outcome.state, self.max_state_chars)
            transition = self._transition(action, outcome, next_state, float(outcome.reward))
        return PendingStep(action, outcome, self._episode_id, self._step, rng_state, transition)

    def _is_current(self, pending: PendingStep) -> bool:
        return not self._ended and pending.episode_id == self._episode_id and pending.step == self._step

    def _check_current(self, pending: PendingStep) -> None:
        if not self._is_current(pending):
            raise DreamGymError(
                "This proposed step belongs to another state of the episode (it was committed or the env "
                "was reset since); propose it again."
            )

    def _transition(self, action: str, outcome: WorldStep, next_state: str, reward: float) -> Transition:
        """The transition of playing ``action`` from the current (not yet committed) state."""
        assert self._task is not None
        return Transition.of_step(
            self._task,
            domain=self.domain.name,
            episode_id=self._episode_id,
            step=self._step,
            state=self._state,
            action=action,
            next_state=next_state,
            reward=reward,
            done=bool(outcome.done),
            success=bool(outcome.success),
            source=self.source,
            reasoning=outcome.reasoning if self.source == "sim" else None,
            prev_admissible_actions=self._admissible,
            admissible_actions=outcome.admissible_actions,
            task_metadata=self.domain.stored_task_metadata(self._task),
            metadata=self._episode_tags(),
        )

    def _info(
        self, *, success: bool, reasoning: str, last_action_error: str | None, **extra: Any
    ) -> dict[str, Any]:
        assert self._task is not None
        info: dict[str, Any] = {
            "task": self._task.instruction,
            "task_id": self._task.task_id,
            "episode_id": self._episode_id,
            "step": self._step,
            "admissible_actions": list(self._admissible),
            "success": bool(success),
            "is_success": bool(success),
            "reasoning": reasoning,
            "simulated": self.source == "sim",
            "source": self.source,
            "last_action_error": last_action_error,
            **self._episode_tags(),
        }
        info.update(extra)
        return info
