"""The TextWorld game suite; the code lives in :mod:`dreamgym_env.domains.textworld.suite`."""

from __future__ import annotations

from dreamgym_env.domains.textworld.suite import (
    HELDOUT_SEED_OFFSET,
    GameEntry,
    GameSuite,
    build_suite,
    load_suite,
)
from dreamgym_env.domains.textworld.suite import recipe_for as recipe_for

__all__ = ["HELDOUT_SEED_OFFSET", "GameEntry", "GameSuite", "build_suite", "load_suite"]
