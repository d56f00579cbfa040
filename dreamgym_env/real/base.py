"""What every real-environment wrapper shares: the simulated envs' spaces, ``info`` keys and episode rules.

A policy trained on ``DreamGym/<Domain>-v0`` must run unchanged on the real environment, so a real
wrapper differs from :class:`~dreamgym_env.env.DreamGymEnv` only where the world comes from: the same
:class:`~dreamgym_env.spaces.FreeText` spaces, the same ``info`` keys (``simulated`` False, ``source``
"real", ``reasoning`` ""), the same grammar check on actions (a malformed action gets the
``[Invalid action]`` feedback state and reward 0 instead of reaching the engine), and the same
truncation at the domain's step limit. Subclasses only translate one real engine.
"""

from __future__ import annotations

import uuid
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from dreamgym_env.domains import Domain, get_domain
from dreamgym_env.env import render_episode
from dreamgym_env.errors import DreamGymError, InvalidActionError
from dreamgym_env.spaces import FreeText
from dreamgym_env.types import Task

__all__ = ["RealReset", "RealStep", "RealTextEnv"]


@dataclass
class RealReset:
    """The first abstract state of a real episode.

    Attributes:
        task: The task being played (its instruction is ``info["task"]``).
        state: The first observation, already mapped to the domain's abstract format.
        admissible_actions: Valid actions now (empty for open domains such as WebArena).
        extra: Additional ``info`` entries (e.g. ``expert_plan``).
    """

    task: Task
    state: str
    admissible_actions: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class RealStep:
    """One real transition, already mapped to the abstract format.

    Attributes:
        state: Next abstract state.
        reward: The engine's reward, passed through (binary in ALFWorld and TextWorld, in [0, 1] in
            WebShop).
        done: The engine ended the episode.
        success: The episode ended with the goal achieved.
        admissible_actions: Valid actions in the next state.
        last_action_error: Why the engine rejected the action, when it says so (BrowserGym does).
        extra: Additional ``info`` entries.
    """

    state: str
    reward: float
    done: bool
    success: bool
    admissible_actions: list[str] = field(default_factory=list)
    last_action_error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class RealTextEnv(gym.Env[str, str]):
    """Base class of the real wrappers: one real engine behind the simulated envs' interface.

    Subclasses implement :meth:`_real_reset`, :meth:`_real_step` and, when they hold resources,
    :meth:`_real_close`; engines are created lazily in the first reset so that constructing (and
    pickling) an env costs nothing and imports nothing heavy.

    Args:
        domain: The simulated domain whose interface this env speaks (name or :class:`Domain`).
        max_steps: Truncation limit; default the domain's (ALFWorld 50, WebShop 15, WebArena 30...).
        max_state_chars: Longest observation; longer real observations are cut at the end.
        max_action_chars: Longest accepted action.
        render_mode: ``"ansi"`` or ``"human"``.
    """

    metadata = {"render_modes": ["ansi", "human"], "render_fps": 4}
    observation_space: FreeText
    action_space: FreeText

    def __init__(
        self,
        domain: str | Domain,
        *,
        max_steps: int | None = None,
        max_state_chars: int = 8192,
        max_action_chars: int = 512,
        render_mode: str | None = None,
    ) -> None:
        self.domain = get_domain(domain)
        self.max_steps = max_steps or self.domain.max_steps
        if self.max_steps < 1:
            raise DreamGymError(f"max_steps must be at least 1, got {self.max_steps}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise DreamGymError(
                f"render_mode must be one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        self.render_mode = render_mode
        self.max_state_chars = max_state_chars
        self.max_action_chars = max_action_chars
        # Same room for a feedback line in front of the state as the simulated env keeps.
        self.observation_space = FreeText(max_length=max_state_chars + 1024)
        self.action_space = FreeText(max_length=max_action_chars)
        self._task: Task | None = None
        self._episode_id = ""
        self._state = ""
        self._obs = ""
        self._admissible: list[str] = []
        self._step = 0
        self._ended = True

    # ------------------------------------------------------------------ engine hooks
    @abstractmethod
    def _real_reset(self, options: dict[str, Any]) -> RealReset:
        """Start a real episode; draw any choice (which game, which task) from ``self.np_random``."""

    @abstractmethod
    def _real_step(self, action: str) -> RealStep:
        """Send one well-formed action to the real engine."""

    def _real_close(self) -> None:  # noqa: B027 - optional hook
        """Release the engine (browser, game process); called by :meth:`close`."""

    # ------------------------------------------------------------------ gymnasium API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start a real episode; ``options`` are engine-specific (see the subclass)."""
        super().reset(seed=seed)
        start = self._real_reset(dict(options or {}))
        self._task = start.task
        self._episode_id = str(uuid.UUID(bytes=self.np_random.bytes(16), version=4))
        self._state = self._obs = self._fit(start.state)
        self._admissible = list(start.admissible_actions)
        self._step = 0
        self._ended = False
        return self._obs, self._info(success=False, **start.extra)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Play one action in the real environment."""
        if self._task is None:
            raise DreamGymError("Call reset() before step().")
        if self._ended:
            raise DreamGymError(
                "The episode has ended (terminated or truncated); call reset() to start another."
            )
        if not isinstance(action, str):
            raise InvalidActionError(
                f"Actions are strings in the {self.domain.name} grammar, "
                f"got {type(action).__name__}: {action!r}. "
                f"{self.domain.action_help}"
            )
        self._step += 1
        error = self._action_error(action)
        if error is not None:
            self._obs = f"[Invalid action] {error}\n\n{self._state}"[-self.observation_space.max_length :]
            return self._finish(0.0, terminated=False, success=False, last_action_error=error)
        result = self._real_step(action)
        self._state = self._obs = self._fit(result.state)
        self._admissible = list(result.admissible_actions)
        return self._finish(
            float(result.reward),
            terminated=result.done,
            success=result.success,
            last_action_error=result.last_action_error,
            **result.extra,
        )

    def render(self) -> str | None:
        """``ansi``: return the task and current state; ``human``: print them."""
        return render_episode(self.render_mode, self._task, self._step, self._obs)

    def close(self) -> None:
        """Release the real engine."""
        self._real_close()
        super().close()

    # ------------------------------------------------------------------ helpers
    @property
    def task(self) -> Task | None:
        """The current episode's task."""
        return self._task

    @property
    def state(self) -> str:
        """The current abstract state (without any invalid-action feedback line)."""
        return self._state

    def _fit(self, state: str) -> str:
        return state[: self.max_state_chars]

    def _action_error(self, action: str) -> str | None:
        if not action.strip():
            return f"The action is empty. {self.domain.action_help}"
        if len(action) > self.max_action_chars:
            return f"The action has {len(action)} characters; at most {self.max_action_chars} are accepted."
        if (
            action in self._admissible
        ):  # the engine lists it: valid even where the grammar is narrower ("help")
            return None
        return self.domain.validate_action(action, self._admissible)

    def _finish(
        self, reward: float, *, terminated: bool, success: bool, last_action_error: str | None, **extra: Any
    ) -> tuple[str, float, bool, bool, dict[str, Any]]:
        truncated = not terminated and self._step >= self.max_steps
        self._ended = terminated or truncated
        info = self._info(success=success, last_action_error=last_action_error, **extra)
        if self.render_mode == "human":
            self.render()
        return self._obs, reward, terminated, truncated, info

    def _info(self, *, success: bool, last_action_error: str | None = None, **extra: Any) -> dict[str, Any]:
        assert self._task is not None
        info: dict[str, Any] = {
            "task": self._task.instruction,
            "task_id": self._task.task_id,
            "episode_id": self._episode_id,
            "step": self._step,
            "admissible_actions": list(self._admissible),
            "success": success,
            "reasoning": "",
            "simulated": False,
            "source": "real",
            "last_action_error": last_action_error,
        }
        info.update(extra)
        return info
