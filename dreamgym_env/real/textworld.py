"""TextWorld's real engine and env; the code lives in :mod:`dreamgym_env.domains.textworld.engine`."""

from __future__ import annotations

from dreamgym_env.domains.textworld.engine import (
    TextGameEngine,
    TextGameEnv,
    TextWorldEngine,
    TextWorldRealEnv,
    make_games,
    play_noisy_expert,
    tasks_from_games,
)

__all__ = [
    "TextGameEngine",
    "TextGameEnv",
    "TextWorldEngine",
    "TextWorldRealEnv",
    "make_games",
    "play_noisy_expert",
    "tasks_from_games",
]
