"""Sim-to-real: train in the simulator, then continue in (or mix in) the real environment.

DreamGym-S2R trains a policy on synthetic experience and then carries on in the real environment with
few real transitions, which are also written to the replay buffer so that they ground the simulator.
:class:`SimToRealEnv` is one env in front of a simulated and a real env that speak the same interface;
a :class:`SimToRealSchedule` (by episode count) or the caller (:meth:`SimToRealEnv.use`) decides, per
episode, which of the two plays.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.core import RenderFrame

from dreamgym_env.episode import INVALID_ACTION, EpisodeEnv
from dreamgym_env.errors import ConfigError, DreamGymError
from dreamgym_env.records import Task, Transition
from dreamgym_env.retrieval import Retriever
from dreamgym_env.spaces import FreeText

Phase = Literal["sim", "real"]


@dataclass(frozen=True)
class SimToRealSchedule:
    """Which env plays each episode.

    Before ``switch_after`` episodes, an episode is real with probability ``real_fraction_before``;
    from then on with probability ``real_fraction_after``. The defaults switch for good: simulator
    only, then real only. ``switch_after=None`` never switches (mixing with ``real_fraction_before``).

    Args:
        switch_after: Number of episodes after which the second regime starts.
        real_fraction_before: Probability of a real episode before the switch.
        real_fraction_after: Probability of a real episode after the switch.
    """

    switch_after: int | None = None
    real_fraction_before: float = 0.0
    real_fraction_after: float = 1.0

    def __post_init__(self) -> None:
        if self.switch_after is not None and self.switch_after < 0:
            raise ConfigError(f"switch_after must be >= 0 or None, got {self.switch_after}")
        for name in ("real_fraction_before", "real_fraction_after"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} must be within [0, 1], got {value}")

    def choose(self, episode: int, rng: np.random.Generator) -> Phase:
        """The phase of episode number ``episode`` (0-based), drawing mixing choices from ``rng``."""
        switched = self.switch_after is not None and episode >= self.switch_after
        fraction = self.real_fraction_after if switched else self.real_fraction_before
        if fraction in (0.0, 1.0):
            return "real" if fraction == 1.0 else "sim"
        return "real" if rng.random() < fraction else "sim"


class SimToRealEnv(gym.Env[str, str]):
    """One env that plays each episode in the simulated or the real env, by schedule or on request.

    Both envs must speak the same interface (a DreamGym id and its real counterpart, e.g.
    ``DreamGym/TextWorld-v0`` and ``DreamGym/TextWorld-Real-v0``), so the policy never knows which it
    faces; ``info["source"]`` says (``"sim"`` or ``"real"``) and ``info["phase_episode"]`` counts the
    episodes played. Real transitions are offered to ``retriever`` (the replay buffer) with
    ``source="real"``, in the real env's own stored form (``last_transition``: with the task's facts
    and the admissible actions before and after the step, which ``dreamgym build-sft`` needs); steps
    whose action failed the action check (the ``[Invalid action]`` feedback state, which never reached
    the engine) are not stored.

    Args:
        sim_env: The simulated env (an instance or a registered id).
        real_env: The real env (an instance or a registered id).
        schedule: A :class:`SimToRealSchedule`; default: simulator until told otherwise.
        retriever: Where real transitions go (``add(Transition)``); None stores nothing.
        sim_kwargs, real_kwargs: Keyword arguments for ``gymnasium.make`` when an id is given.

    Example:
        >>> env = SimToRealEnv("DreamGym/TextWorld-v0", "DreamGym/TextWorld-Real-v0",
        ...                    schedule=SimToRealSchedule(switch_after=100), retriever=buffer,
        ...                    sim_kwargs={"base_url": "http://127.0.0.1:8000/v1"},
        ...                    real_kwargs={"game_files": games})
        >>> obs, info = env.reset(seed=0)       # episodes 0-99 simulated, then real
        >>> env.unwrapped.use("real")           # or switch now, on the caller's signal
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}
    observation_space: FreeText
    action_space: FreeText

    def __init__(
        self,
        sim_env: gym.Env[str, str] | str,
        real_env: gym.Env[str, str] | str,
        *,
        schedule: SimToRealSchedule | None = None,
        retriever: Retriever | None = None,
        sim_kwargs: dict[str, Any] | None = None,
        real_kwargs: dict[str, Any] | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.sim_env = gym.make(sim_env, **(sim_kwargs or {})) if isinstance(sim_env, str) else sim_env
        self.real_env = gym.make(real_env, **(real_kwargs or {})) if isinstance(real_env, str) else real_env
        spaces: list[tuple[FreeText, FreeText]] = []
        for name, env in (("sim_env", self.sim_env), ("real_env", self.real_env)):
            obs_space, act_space = env.observation_space, env.action_space
            if not isinstance(obs_space, FreeText) or not isinstance(act_space, FreeText):
                raise ConfigError(
                    f"{name} must have FreeText observation and action spaces (a DreamGym env or a real "
                    f"wrapper), got {obs_space} and {act_space}"
                )
            spaces.append((obs_space, act_space))
        (sim_obs_space, sim_act_space), (real_obs_space, real_act_space) = spaces
        self.schedule = schedule or SimToRealSchedule()
        self.retriever = retriever
        self.render_mode = render_mode
        self.observation_space = FreeText(max_length=max(sim_obs_space.max_length, real_obs_space.max_length))
        # An action must be accepted by both envs.
        self.action_space = FreeText(max_length=min(sim_act_space.max_length, real_act_space.max_length))
        self.episodes = {"sim": 0, "real": 0}
        self._forced: Phase | None = None
        self._phase: Phase = "sim"
        self._pending_seed: dict[Phase, int | None] = {"sim": None, "real": None}
        self._obs = ""
        self._admissible: list[str] = []
        self._active = False

    # ------------------------------------------------------------------ caller's signal
    def use(self, phase: Phase | None) -> None:
        """Play the next episodes in ``"sim"`` or ``"real"``; ``None`` lets the schedule choose again."""
        if phase not in ("sim", "real", None):
            raise ConfigError(f"phase must be 'sim', 'real' or None, got {phase!r}")
        self._forced = phase

    @property
    def phase(self) -> Phase:
        """Which env plays the current (or last) episode."""
        return self._phase

    @property
    def current(self) -> gym.Env[str, str]:
        """The env playing the current episode."""
        return self.real_env if self._phase == "real" else self.sim_env

    # ------------------------------------------------------------------ gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Choose the env for this episode (caller's signal first, else the schedule) and reset it."""
        super().reset(seed=seed)
        if seed is not None:  # each sub-env is seeded once from the same seed, on its next reset
            self._pending_seed = {"sim": seed, "real": seed}
        episode = self.episodes["sim"] + self.episodes["real"]
        self._phase = self._forced or self.schedule.choose(episode, self.np_random)
        sub_seed, self._pending_seed[self._phase] = self._pending_seed[self._phase], None
        obs, info = self.current.reset(seed=sub_seed, options=options)
        self.episodes[self._phase] += 1
        self._obs, self._admissible = obs, list(info.get("admissible_actions") or [])
        self._active = True
        return obs, self._info(info)

    def step(self, action: str) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        """Forward the action to the env of the current episode; store a real transition."""
        if not self._active:
            raise DreamGymError("Call reset() before step().")
        state, admissible = self._obs, self._admissible
        obs, reward, terminated, truncated, info = self.current.step(action)
        self._obs, self._admissible = obs, list(info.get("admissible_actions") or [])
        if self._phase == "real" and self.retriever is not None:
            transition = self._transition(info, state, admissible, action, obs, float(reward), terminated)
            if transition is not None:
                self.retriever.add(transition)
        if terminated or truncated:
            self._active = False
        return obs, reward, terminated, truncated, self._info(info)

    def render(self) -> RenderFrame | list[RenderFrame] | None:
        """Render the env of the current episode."""
        return self.current.render()

    def close(self) -> None:
        """Close both envs."""
        self.sim_env.close()
        self.real_env.close()
        super().close()

    # ------------------------------------------------------------------ helpers
    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        info = dict(info)
        info.setdefault("source", self._phase)
        info["phase_episode"] = dict(self.episodes)
        return info

    def _transition(
        self,
        info: dict[str, Any],
        state: str,
        admissible: list[str],
        action: str,
        next_state: str,
        reward: float,
        done: bool,
    ) -> Transition | None:
        """The real env's own record of the step (``last_transition``), else one built from ``info``.

        ``None`` when the action was rejected before reaching the engine (``[Invalid action]``).
        """
        real = self.real_env.unwrapped
        if isinstance(real, EpisodeEnv):
            return real.last_transition
        if info.get("last_action_error") and next_state.startswith(INVALID_ACTION):
            return None
        domain = getattr(getattr(real, "domain", None), "name", "unknown")
        task = Task(
            task_id=str(info.get("task_id", "")), domain=domain, instruction=str(info.get("task", ""))
        )
        return Transition.of_step(
            task,
            episode_id=str(info.get("episode_id", "")),
            step=int(info.get("step", 1)) - 1,
            state=state,
            action=action,
            next_state=next_state,
            reward=reward,
            done=done,
            success=bool(info.get("success", False)),
            source="real",
            prev_admissible_actions=admissible,
            admissible_actions=list(info.get("admissible_actions") or []),
        )
