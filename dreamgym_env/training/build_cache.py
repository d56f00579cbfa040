"""Folders that first-use builds cache (a base model, a merged model): checked on use, built by one.

Why: every later run trusts what a build leaves in the cache and hands it to vLLM, which serves flipped
weights without a word; a build killed by SIGKILL leaves its staging folder (hundreds of MB) that
nothing else removes; and two processes building into one cache would both do all the work. So a build
holds a file lock beside its folder (:func:`exclusive_build`), which also makes any staging folder
found there a dead build's, removed; the marker a build writes last records each file's size and
SHA-256 (:func:`file_records`), checked on use (:func:`damaged_file`); and a marker that is not JSON
is named as such (:func:`read_marker`), not taken for a missing one.
"""

from __future__ import annotations

import errno
import json
import logging
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dreamgym_env.errors import DataFormatError
from dreamgym_env.shipped_settings import file_sha256

logger = logging.getLogger(__name__)

STAGING_KINDS = ("building", "merging", "old")
"""Staging folders a build makes beside its folder ``out``: ``.<out name>.<kind>-<random>``."""

_LOCK_POLL_S = 1.0


def staging_prefix(out: Path, kind: str) -> str:
    """The name a staging folder of ``kind`` for ``out`` starts with (``tempfile.mkdtemp``'s prefix)."""
    return f".{out.name}.{kind}-"


@contextmanager
def exclusive_build(out: Path) -> Iterator[None]:
    """Hold the build of ``out``: wait for another process building it, then clear its dead builds.

    The lock is a file beside ``out`` (``.<name>.lock``, ``filelock``'s advisory lock, released by the
    system when its holder dies, even by SIGKILL). Whoever holds it is the only builder of ``out``,
    so a staging folder found then was left by a build that died, and is removed.
    """
    from filelock import FileLock, Timeout

    out.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(out.parent / f".{out.name}.lock")
    try:
        lock.acquire(blocking=False)
    except Timeout:
        logger.info("waiting for another process building %s", out)
        lock.acquire(poll_interval=_LOCK_POLL_S)
    try:
        for kind in STAGING_KINDS:
            for stale in out.parent.glob(staging_prefix(out, kind) + "*"):
                logger.info("removing %s, left by a build that did not finish", stale)
                shutil.rmtree(stale, ignore_errors=True)
        yield
    finally:
        lock.release()


def file_records(folder: Path, *, leave_out: str) -> dict[str, dict[str, Any]]:
    """Size and SHA-256 of every file under ``folder`` but ``leave_out`` (the marker that holds them)."""
    return {
        path.relative_to(folder).as_posix(): {"size": path.stat().st_size, "sha256": file_sha256(path)}
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.name != leave_out
    }


def damaged_file(folder: Path, files: Any, *, check_digests: bool = True) -> str | None:
    """What is wrong with the first file of ``folder`` unlike its record in ``files``, else ``None``.

    ``files`` is what :func:`file_records` returned at build time; a marker without it (a build of an
    older builder) has nothing to check against and is reported so. ``check_digests=False`` compares
    sizes only (a cheap look, before deciding to build).
    """
    if not isinstance(files, Mapping) or not files:
        return "no record of its files (built by an older version)"
    for name, record in files.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        size = path.stat().st_size
        if not isinstance(record, Mapping) or size != record.get("size"):
            return f"{name} has {size} bytes, and its build recorded {_get(record, 'size')}"
        if check_digests and file_sha256(path) != record.get("sha256"):
            return f"{name} has another SHA-256 than its build recorded (its bytes changed)"
    return None


def _get(record: Any, key: str) -> Any:
    return record.get(key) if isinstance(record, Mapping) else None


def read_marker(path: Path) -> dict[str, Any] | None:
    """The JSON object a build wrote last into its folder, or ``None`` when there is no such file.

    Raises:
        DataFormatError: the file exists but is not a JSON object (garbage, or cut short); it names it.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise DataFormatError(f"the build marker cannot be read ({e})", path=str(path)) from e
    try:
        marker = json.loads(text)
    except ValueError as e:
        raise DataFormatError(
            f"the build marker is not valid JSON ({e}); remove {path.parent} to build it again",
            path=str(path),
        ) from None
    if not isinstance(marker, dict):
        raise DataFormatError(
            f"the build marker holds a JSON {type(marker).__name__}, not an object; remove {path.parent} "
            "to build it again",
            path=str(path),
        )
    return marker


def is_disk_full(e: BaseException) -> bool:
    """Whether ``e`` or an error behind it says the disk is full (``ENOSPC``, or a library's text of it).

    safetensors raises its own ``SafetensorError`` with the system's message, not an ``OSError``.
    """
    seen: set[int] = set()
    link: BaseException | None = e
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, OSError) and link.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "No space left on device" in str(link) or "Disk quota exceeded" in str(link):
            return True
        link = link.__cause__ or link.__context__
    return False


def disk_full_message(folder: Path, needed_bytes: int | None) -> str:
    """Says the disk of ``folder`` is full, how much is free, and how much the build needs there."""
    place = folder if folder.exists() else next((p for p in folder.parents if p.exists()), Path("/"))
    free = shutil.disk_usage(place).free
    need = f"; the build needs about {_mb(needed_bytes)} free there" if needed_bytes else ""
    return (
        f"the disk holding {folder} is full ({_mb(free)} free{need}). Free space, or set "
        "DREAMGYM_CACHE_DIR to a folder on a larger disk."
    )


def _mb(size: int) -> str:
    return f"{size / 1e6:,.0f} MB"


def folder_size(folder: Path) -> int:
    """Bytes of the files under ``folder``."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0
