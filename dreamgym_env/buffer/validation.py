"""What a transition must satisfy to be stored: checked before anything is written.

SQLite stores a NaN ``REAL`` as ``NULL``, so a ``NOT NULL`` column turns a NaN reward into a row that
``INSERT OR IGNORE`` skips without a word; an infinite reward is stored but exports as JSON ``null``,
which no longer imports; an integer past 64 bits or a string with a lone surrogate fails inside the
insert. Each is caught here instead, with a message naming the field.
"""

from __future__ import annotations

import math

from dreamgym_env.records import Transition

_INT64_RANGE = (-(2**63), 2**63 - 1)
"""The integers SQLite's ``INTEGER`` holds."""

_TEXT_FIELDS = ("domain", "task_id", "task", "episode_id", "state", "action", "next_state")


def transition_problem(t: Transition) -> str | None:
    """Why ``t`` cannot be stored (one line naming the field and what is accepted), or ``None``."""
    if not math.isfinite(t.reward):
        return f"reward is {t.reward!r}; rewards must be finite numbers"
    if not math.isfinite(t.timestamp):
        return f"timestamp is {t.timestamp!r}; timestamps must be finite numbers"
    low, high = _INT64_RANGE
    if not low <= t.step <= high:
        return f"step {t.step} is outside the 64-bit integer range [{low}, {high}]"
    for name in _TEXT_FIELDS:
        value = getattr(t, name)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            return f"{name} holds a lone surrogate at character {e.start} (not valid Unicode text)"
    if t.reasoning is not None:
        try:
            t.reasoning.encode("utf-8")
        except UnicodeEncodeError as e:
            return f"reasoning holds a lone surrogate at character {e.start} (not valid Unicode text)"
    return None
