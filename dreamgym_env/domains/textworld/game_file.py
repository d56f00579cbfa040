"""A compiled game file checked by reading it, before TextWorld's engine loads it.

Why: TextWorld plays ``.z8`` games with Jericho's Frotz inside this process, and a truncated or damaged
story file makes Frotz print ``Fatal error: Story file read error`` and call ``exit()``: no ``except``
runs, and the program (a training run, a worker of a process pool) ends with it. The file's own header
says how long the game is and what its bytes sum to (the Z-Machine Standard 1.1, section 11; the Glulx
specification, "The Header"), so a damaged file is found by reading it, in milliseconds, and refused
with an error naming it. Files of other kinds (ALFWorld's ``.tw-pddl``) are left to their engines,
which raise Python errors.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dreamgym_env.errors import DataFormatError

__all__ = ["check_game_file", "check_game_files"]

_Z_SUFFIXES = frozenset(f".z{version}" for version in range(1, 9))
_Z_HEADER = 0x40
_Z_LENGTH_SCALE = {1: 2, 2: 2, 3: 2, 4: 4, 5: 4, 6: 8, 7: 8, 8: 8}
"""What the header's file length (the word at 0x1A) is multiplied by, by Z-machine version."""

_GLULX_MAGIC = b"Glul"
_GLULX_HEADER = 36

_REMEDY = "regenerate it (tw-make, or dreamgym_env.real.textworld.make_games) or copy it again"


def check_game_file(path: str | os.PathLike[str]) -> None:
    """Refuse a Z-machine (``.z1``-``.z8``) or Glulx (``.ulx``) game that is not whole, before it is loaded.

    Raises:
        DataFormatError: the file is empty, not a game of its suffix's kind, shorter than its header
            says (truncated) or not summing to its header's checksum (damaged); the error names it.
    """
    problem = _problem(Path(path))
    if problem is not None:
        raise DataFormatError(f"{problem}; {_REMEDY}", path=os.fspath(path))


def check_game_files(paths: Sequence[str | os.PathLike[str]]) -> None:
    """:func:`check_game_file` for each of ``paths``, naming every file that fails in one error.

    Raises:
        DataFormatError: one or more files cannot be played.
    """
    problems = [(os.fspath(p), problem) for p in paths if (problem := _problem(Path(p))) is not None]
    if len(problems) == 1:
        check_game_file(problems[0][0])
    if problems:
        listed = "; ".join(f"{path}: {problem}" for path, problem in problems)
        raise DataFormatError(
            f"{len(problems)} of the {len(paths)} game files cannot be played ({listed}); {_REMEDY}"
        )


def _problem(path: Path) -> str | None:
    """What is wrong with the game file ``path``, or ``None`` when it is whole or of a kind not checked."""
    suffix = path.suffix.lower()
    if suffix not in _Z_SUFFIXES and suffix != ".ulx":
        return None
    try:
        data = path.read_bytes()
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if not data:
        return "the file is empty"
    return _z_machine_problem(data) if suffix in _Z_SUFFIXES else _glulx_problem(data)


def _z_machine_problem(data: bytes) -> str | None:
    version = data[0]
    if version not in _Z_LENGTH_SCALE:
        return f"not a Z-machine story file (its first byte, the version, is {version}, not 1 to 8)"
    if len(data) < _Z_HEADER:
        return f"truncated: {len(data)} bytes, fewer than the 64 of a story file's header"
    length = int.from_bytes(data[0x1A:0x1C], "big") * _Z_LENGTH_SCALE[version]
    if length == 0:  # early compilers left the length and checksum out
        return None
    if len(data) < length:
        return f"truncated: its header says {length} bytes and the file has {len(data)}"
    expected = int.from_bytes(data[0x1C:0x1E], "big")
    actual = sum(data[_Z_HEADER:length]) % 0x10000
    if actual != expected:
        return f"damaged: its bytes sum to checksum {actual:#06x}, and its header records {expected:#06x}"
    return None


def _glulx_problem(data: bytes) -> str | None:
    if data[:4] != _GLULX_MAGIC:
        return f"not a Glulx game file (it starts with {data[:4]!r}, not {_GLULX_MAGIC!r})"
    if len(data) < _GLULX_HEADER:
        return f"truncated: {len(data)} bytes, fewer than the 36 of a Glulx header"
    length = int.from_bytes(data[12:16], "big")  # EXTSTART: where the file ends and memory goes on
    if len(data) < length:
        return f"truncated: its header says {length} bytes and the file has {len(data)}"
    if length % 4:
        return f"damaged: its header gives a length of {length} bytes, not a whole number of words"
    words = np.frombuffer(data, dtype=">u4", count=length // 4).astype(np.uint64)
    expected = int(words[8])
    actual = (int(words.sum()) - expected) % 2**32  # the checksum word counts as zero
    if actual != expected:
        return f"damaged: its words sum to checksum {actual:#010x}, and its header records {expected:#010x}"
    return None
