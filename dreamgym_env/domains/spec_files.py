"""Reading a domain spec file safely: UTF-8 text of bounded size, JSON or YAML without alias bombs.

A spec is a small hand-written file, so anything far from that is refused with a message that says
what was wrong and what is accepted, before it can cost time or memory:

* more than :data:`MAX_SPEC_BYTES` bytes (checked before reading);
* bytes that are not UTF-8 (latin-1, UTF-16, binary files);
* YAML whose aliases (``*name``) expand to more than :data:`MAX_SPEC_VALUES` values: a few hundred
  bytes of nested aliases ("billion laughs") otherwise expand to billions of values;
* YAML with a recursive alias (``loop: &l [*l]``, a value that contains itself), which no spec field
  can hold and which later steps (validation, JSON) cannot walk;
* nesting deeper than the parsers can follow.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from dreamgym_env.errors import DependencyNotInstalled, DomainError

MAX_SPEC_BYTES = 1 << 20
"""Largest spec file read (1 MiB); trajectories live in their own files, so a spec stays far below."""

MAX_SPEC_VALUES = 100_000
"""Most values (scalars, lists, mappings) a YAML spec may hold once its aliases are expanded."""


def read_spec_file(path: Path, *, max_bytes: int = MAX_SPEC_BYTES) -> dict[str, Any]:
    """Return the mapping a ``.json``, ``.yaml`` or ``.yml`` spec file holds.

    Raises:
        DomainError: the file is missing, unreadable, over ``max_bytes``, not UTF-8, not valid
            JSON/YAML (with line and column), nested too deeply, expands past
            :data:`MAX_SPEC_VALUES` values, or is not a mapping.
        DependencyNotInstalled: a YAML file without PyYAML installed (JSON needs nothing).
    """
    suffix = path.suffix.lower()
    if suffix not in (".json", ".yaml", ".yml"):
        raise DomainError(f"{path}: a spec file ends in .yaml, .yml or .json")
    text = _read_text(path, max_bytes)
    try:
        data = _parse_json(path, text) if suffix == ".json" else _parse_yaml(path, text)
    except RecursionError:
        raise DomainError(
            f"{path}: the spec is nested too deeply to read; a spec is a flat mapping of fields whose "
            "values are text, lists and small mappings"
        ) from None
    if not isinstance(data, dict):
        raise DomainError(
            f"{path}: a spec is a mapping of fields (name, description, ...), got {type(data).__name__}"
        )
    return data


def _read_text(path: Path, max_bytes: int) -> str:
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise DomainError(
                f"{path}: the spec file is {size:,} bytes; at most {max_bytes:,} are read "
                "(put trajectories in their own file and name it under 'trajectories')"
            )
        with path.open("rb") as handle:
            raw = handle.read(max_bytes + 1)  # the file may grow between stat and read
    except FileNotFoundError as e:
        raise DomainError(f"{path}: spec file not found") from e
    except OSError as e:
        raise DomainError(f"{path}: cannot read the spec file: {e}") from e
    if len(raw) > max_bytes:
        raise DomainError(
            f"{path}: the spec file is over {max_bytes:,} bytes; at most {max_bytes:,} are read"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DomainError(
            f"{path}: byte {e.start} ({raw[e.start : e.start + 1]!r}) is not UTF-8; a spec file must be "
            "UTF-8 text (re-save it as UTF-8, e.g. `iconv -f latin1 -t utf-8`)"
        ) from None


def _parse_json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DomainError(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from e


def _parse_yaml(path: Path, text: str) -> Any:
    try:
        import yaml
    except ImportError as e:
        raise DependencyNotInstalled("pyyaml", "yaml", "Reading YAML domain specs") from e
    loader = None
    try:
        loader = _bounded_loader(yaml)(text)  # the reader refuses control characters here
        return loader.get_single_data()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise DomainError(f"{path}{where}: not valid YAML: {problem}") from e
    except _RecursiveAlias as e:
        raise DomainError(
            f"{path}:{e.line + 1}: the alias *{_anchor_at(text, e.index)} refers to the value it is part "
            "of, so that value would contain itself; a spec value is plain data: write the repeated part "
            "out, or point the alias at a value outside the one that uses it"
        ) from None
    except _TooManyValues as e:
        if e.aliased:
            raise DomainError(
                f"{path}: the YAML expands to more than {MAX_SPEC_VALUES:,} values ({e.count:,} once its "
                "aliases are expanded); a spec uses few aliases (*name): write repeated values out"
            ) from None
        raise DomainError(
            f"{path}: the YAML holds {e.count:,} values; a spec holds at most {MAX_SPEC_VALUES:,} "
            "(put trajectories in their own file and name it under 'trajectories')"
        ) from None
    finally:
        if loader is not None:
            loader.dispose()


class _TooManyValues(Exception):
    def __init__(self, count: int, *, aliased: bool) -> None:
        super().__init__(count)
        self.count = count
        self.aliased = aliased


class _RecursiveAlias(Exception):
    """A node reached again through its own contents; where its anchor starts in the text."""

    def __init__(self, line: int, index: int) -> None:
        super().__init__(line, index)
        self.line = line
        self.index = index


_ANCHOR = re.compile(r"&([^\s,\[\]{}]+)")


def _anchor_at(text: str, index: int) -> str:
    """The anchor's name at ``index`` of ``text`` (where the parser marks an anchored node's start)."""
    found = _ANCHOR.match(text, index)
    return found.group(1) if found else "?"


def _bounded_loader(yaml: Any) -> type:
    """PyYAML's safe loader, refusing a document whose aliases expand past :data:`MAX_SPEC_VALUES`.

    The composed node graph shares one node per anchor, so it stays as small as the text; what blows
    up is building (and later validating) the expanded values. The expanded size is counted on the
    graph, each shared node once (memoised), before anything is built. libyaml's loader is used when
    PyYAML has it: it parses several times faster and refuses nesting past 1,000 levels itself.
    """
    base = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader

    class BoundedSafeLoader(base):  # type: ignore[misc, valid-type]
        def get_single_data(self) -> Any:
            node = self.get_single_node()
            if node is None:
                return None
            memo: dict[int, int] = {}
            count = _expanded_size(node, memo, set())
            if count > MAX_SPEC_VALUES:
                raise _TooManyValues(count, aliased=count > len(memo))
            return self.construct_document(node)

    return BoundedSafeLoader


def _expanded_size(node: Any, memo: dict[int, int], path: set[int]) -> int:
    """Values ``node`` stands for once every alias is replaced by a copy of its anchor's value.

    ``path`` holds the nodes being expanded above this one: meeting one of them again is a recursive
    alias, which :class:`_RecursiveAlias` reports at the anchored node (whose mark is its anchor).

    Raises:
        _RecursiveAlias: a node contains itself.
    """
    key = id(node)
    if key in path:
        raise _RecursiveAlias(node.start_mark.line, node.start_mark.index)
    if key in memo:
        return memo[key]
    value = node.value
    total = 1
    if isinstance(value, list):
        path.add(key)
        for item in value:
            pair = item if isinstance(item, tuple) else (item,)
            total += sum(_expanded_size(child, memo, path) for child in pair)
        path.discard(key)
    memo[key] = total
    return total
