"""A text space that admits what LLM-simulated worlds actually produce.

Gymnasium's default :class:`~gymnasium.spaces.Text` charset is alphanumeric, which rejects
``search[red shoes]`` and every realistic web or game observation. This subclass samples from printable
ASCII (so random agents type plausible strings) and accepts any Unicode text without control characters
(tab and newlines allowed), because product titles and page text hold ``™``, ``é`` and non-breaking spaces.
Lone surrogates (``"\ud800"``, which Python strings may hold but no UTF-8 text can) are rejected too: a
string the space admits can always be encoded, sent to a server and stored.

Flattened (for ``AsyncVectorEnv``'s shared memory and ``FlattenObservation``), a string becomes its
Unicode code points padded with -1, since no finite charset indexes every character it may hold.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from typing import Any, overload

import numpy as np
from gymnasium.spaces import Box, Text
from gymnasium.spaces.utils import flatten, flatten_space, unflatten
from gymnasium.vector.utils import read_from_shared_memory

DEFAULT_MAX_STATE_CHARS = 4000
"""Longest state, simulated or real, unless configured (``max_state_chars``). It is kept with the text
spaces, below the config and the replay buffer's loaders, so that both read this one value."""

_SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " "
CONTROL_CHARACTERS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
"""Characters that carry no text: Unicode control characters (category Cc) other than tab, newline and
carriage return, and lone surrogates (category Cs, which cannot be encoded as UTF-8)."""


def text_problem(x: str) -> str | None:
    """Why ``x`` is not text a :class:`FreeText` admits (whatever its length), or ``None``.

    The message names the first offending character by its code point, never the character itself.
    """
    found = CONTROL_CHARACTERS.search(x)
    if found is None:
        return None
    code = ord(found.group())
    kind = "a lone surrogate (not encodable as UTF-8)" if 0xD800 <= code <= 0xDFFF else "a control character"
    return f"it holds {kind}, U+{code:04X}, at position {found.start()}"


def fit_state(state: str, max_chars: int) -> str:
    """``state`` within ``max_chars``, cut at the end: a listing's head (page, room, task) is kept."""
    return state[:max_chars]


def escape_non_text(x: str) -> str:
    r"""``x`` with every character :data:`CONTROL_CHARACTERS` matches written as an escape (``\x07``).

    For echoing untrusted text (an agent's action) into an observation, which must stay in the space.
    """
    return CONTROL_CHARACTERS.sub(
        lambda m: m.group().encode("unicode_escape", "backslashreplace").decode(), x
    )


class FreeText(Text):
    """Strings of Unicode text without control characters, with a length range.

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
        """Accept text within the length bounds: no control characters but tab and newlines, no lone surrogate."""
        if not isinstance(x, str) or not self.min_length <= len(x) <= self.max_length:
            return False
        return CONTROL_CHARACTERS.search(x) is None

    def __repr__(self) -> str:
        return f"FreeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return (
            isinstance(other, FreeText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )

    __hash__ = Text.__hash__ if Text.__hash__ is not None else object.__hash__


_PAD = -1
_MAX_CODE_POINT = 0x10FFFF


def _flatten_free_text(space: FreeText, x: str) -> np.ndarray:
    codes = np.full(space.max_length, _PAD, dtype=np.int32)
    codes[: len(x)] = [ord(c) for c in x]
    return codes


def _unflatten_free_text(space: FreeText, x: np.ndarray) -> str:
    return "".join(chr(int(c)) for c in x if c != _PAD)


# Registered by call, not as decorators: mypy checks a decorator's dispatch type against the fallback's
# first argument, ``Space[T]``, and cannot match the type variable (``FreeText`` is a ``Space[str]``).
flatten.register(FreeText, _flatten_free_text)
unflatten.register(FreeText, _unflatten_free_text)


@flatten_space.register(FreeText)
def _flatten_free_text_space(space: FreeText) -> Box:
    return Box(low=_PAD, high=_MAX_CODE_POINT, shape=(space.max_length,), dtype=np.int32)


class SharedTextBatch(Sequence[str]):
    """A live, read-only view of N strings in ``AsyncVectorEnv``'s shared memory.

    ``AsyncVectorEnv`` reads its shared observation buffer once, at construction, and relies on the
    result being a view that later writes show through (true of numpy arrays, not of a tuple of str).
    This sequence decodes on access; ``copy.deepcopy`` (what ``AsyncVectorEnv(copy=True)``, the default,
    returns) gives a plain tuple snapshot.
    """

    def __init__(self, space: FreeText, codes: np.ndarray) -> None:
        self._space = space
        self._codes = codes

    def __len__(self) -> int:
        return len(self._codes)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...
    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        if isinstance(index, slice):
            return tuple(self)[index]
        return _unflatten_free_text(self._space, self._codes[index])

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]  # mutable view

    def __repr__(self) -> str:
        return f"SharedTextBatch({tuple(self)!r})"


@read_from_shared_memory.register(FreeText)
def _read_free_text(space: FreeText, shared_memory: Any, n: int = 1) -> SharedTextBatch:
    codes = np.frombuffer(shared_memory.get_obj(), dtype=np.int32).reshape((n, space.max_length))
    return SharedTextBatch(space, codes)
