"""Argument types for the ``dreamgym`` command's numbers and paths, shared by every sub-command group.

``type=int`` accepts ``-1`` for a count, and a value the command cannot use then surfaces late (a
search for ``-1`` results "finds nothing" and exits 0) or as a traceback from deep inside. These
types refuse it while parsing, as argparse's own usage error (exit 2), saying what is accepted.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def bounded_int(low: int, high: int | None = None, *, what: str | None = None) -> Callable[[str], int]:
    """An argparse ``type``: an integer from ``low`` to ``high`` (no upper bound when ``None``)."""
    accepted = what or (f"an integer from {low} to {high}" if high is not None else f"an integer >= {low}")

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {accepted}, got {value!r}") from None
        if number < low or (high is not None and number > high):
            raise argparse.ArgumentTypeError(f"must be {accepted}, got {number}")
        return number

    parse.__name__ = "int"  # argparse names the type in some messages
    return parse


positive_int = bounded_int(1, what="a positive integer")
"""Counts and sizes: 1, 2, ..."""


def text(value: str) -> str:
    """An argparse ``type``: non-empty text that UTF-8 can carry (no lone surrogate from undecodable bytes).

    For values that go into prompts, searches and stored rows, where such a character fails late, as
    an encoding error deep inside. A path is not checked with it: a file name may be any bytes.
    """
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise argparse.ArgumentTypeError(
            f"is not UTF-8 text (it holds {ascii(value[e.start])} at position {e.start}); give UTF-8 text"
        ) from None
    return value


def path(value: str) -> str:
    """An argparse ``type``: a non-empty path.

    ``""`` would otherwise mean the current folder (every file in it, to a loader) or, to SQLite, a
    throwaway database that vanishes with the command.
    """
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty: give a path")
    return value
