"""What every real-environment wrapper adds to the shared episode core: a real engine as the world.

A policy trained on ``DreamGym/<Domain>-v0`` must run unchanged on the real environment, so a real
wrapper is an :class:`~dreamgym_env.episode.EpisodeEnv` like :class:`~dreamgym_env.env.DreamGymEnv`:
the same spaces, ``info`` keys (``simulated`` False, ``source`` "real", ``reasoning`` ""), action
check, truncation, state cut and stored-transition form, by construction. Subclasses only translate
one real engine, in :meth:`RealTextEnv._real_reset` and :meth:`RealTextEnv._real_step`.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, ClassVar

from dreamgym_env.episode import EpisodeEnv, EpisodeStart, WorldStep
from dreamgym_env.records import Source


class RealTextEnv(EpisodeEnv):
    """Base class of the real wrappers: one real engine behind the simulated envs' interface.

    Subclasses implement :meth:`_real_reset`, :meth:`_real_step` and, when they hold resources,
    :meth:`_real_close`; engines are created lazily in the first reset so that constructing (and
    pickling) an env costs nothing and imports nothing heavy. The engine is stepped in the caller's
    thread (Playwright's sync API, game processes).

    Args:
        domain: The simulated domain whose interface this env speaks (name or :class:`Domain`).
        max_steps: Truncation limit; default the domain's (:data:`dreamgym_env.domains.BUILTIN_DOMAINS`).
        max_state_chars: Longest observation, as in the simulated env (default the same); longer real
            observations are cut at the end.
        max_action_chars: Longest accepted action.
        render_mode: ``"ansi"`` or ``"human"``.
    """

    source: ClassVar[Source] = "real"

    # ------------------------------------------------------------------ engine hooks
    @abstractmethod
    def _real_reset(self, options: dict[str, Any]) -> EpisodeStart:
        """Start a real episode (its first abstract state); draw any choice from ``self.np_random``."""

    @abstractmethod
    def _real_step(self, action: str) -> WorldStep:
        """Send one well-formed action to the real engine; its answer mapped to the abstract format.

        The reward is the engine's, passed through.
        """

    def _real_close(self) -> None:  # noqa: B027 - optional hook
        """Release the engine (browser, game process); called by :meth:`close`."""

    # ------------------------------------------------------------------ EpisodeEnv hooks
    def _begin(self, options: dict[str, Any]) -> EpisodeStart:
        return self._real_reset(options)

    def _advance(self, action: str) -> WorldStep:
        return self._real_step(action)

    def close(self) -> None:
        """Release the real engine."""
        self._real_close()
        super().close()
