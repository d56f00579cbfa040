"""A text space that admits what LLM-simulated worlds actually produce.

Gymnasium's default :class:`~gymnasium.spaces.Text` charset is alphanumeric, which rejects
``search[red shoes]`` and every realistic web or game observation. This subclass samples from printable
ASCII (so random agents type plausible strings) and accepts any printable Unicode text plus newlines and
tabs, because product titles and page text contain characters such as ``™`` and ``é``.
"""

from __future__ import annotations

import string
from typing import Any

from gymnasium.spaces import Text

__all__ = ["FreeText"]

_SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " "
_ALLOWED_WHITESPACE = frozenset("\n\t\r")


class FreeText(Text):
    """Strings of printable Unicode characters with a length range.

    Args:
        max_length: Longest accepted string, in characters.
        min_length: Shortest accepted string.

    Example:
        >>> space = FreeText(max_length=64)
        >>> space.contains("search[red shoes, size 9 ™]")
        True
    """

    def __init__(self, max_length: int, *, min_length: int = 0, seed: Any = None) -> None:
        super().__init__(max_length=max_length, min_length=min_length, charset=_SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        """Accept any printable text whose length is within bounds."""
        if not isinstance(x, str) or not self.min_length <= len(x) <= self.max_length:
            return False
        return x.isprintable() or all(c.isprintable() or c in _ALLOWED_WHITESPACE for c in x)

    def __repr__(self) -> str:
        return f"FreeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return (
            isinstance(other, FreeText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )

    __hash__ = Text.__hash__ if Text.__hash__ is not None else object.__hash__
