"""The public API is the documented one: docs/api.md is current, and the guides import only from it.

docs/api.md is written from the source by ``scripts/api_reference.py``; these tests fail when a change
to an ``__all__`` or a docstring was not followed by a rerun, and when README.md, docs/ or examples/
import a name that the reference does not list (an internal name shown to users as if it were stable).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "api.md"
SECTION = re.compile(r"^## `([\w.]+)`$", re.M)
ROW = re.compile(r"^\| `(\w+)` \|", re.M)
CODE_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def listed() -> dict[str, set[str]]:
    """Module -> names, as docs/api.md lists them."""
    text = REFERENCE.read_text(encoding="utf-8")
    starts = [(m.start(), m.group(1)) for m in SECTION.finditer(text)] + [(len(text), "")]
    return {
        module: set(ROW.findall(text[start:end]))
        for (start, module), (end, _) in zip(starts, starts[1:], strict=False)
    }


def imports(source: str) -> list[tuple[str, str]]:
    """``(module, name)`` for each ``from dreamgym_env... import name`` in Python source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "dreamgym_env"
        ):
            found += [(str(node.module), alias.name) for alias in node.names]
    return found


def guide_imports() -> list[tuple[str, str, str]]:
    """``(file, module, name)`` for the imports in README.md, docs/*.md code blocks and examples/*.py."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in CODE_BLOCK.findall(path.read_text(encoding="utf-8")):
            found += [(path.name, m, n) for m, n in imports(block)]
    for path in sorted((ROOT / "examples").glob("*.py")):
        found += [(path.name, m, n) for m, n in imports(path.read_text(encoding="utf-8"))]
    return found


def test_the_reference_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "api_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def test_the_reference_lists_the_packages_and_their_names() -> None:
    modules = listed()
    assert {"dreamgym_env", "dreamgym_env.buffer", "dreamgym_env.integrations.trl"} <= set(modules)
    assert {"DreamGymEnv", "make_games"} <= modules["dreamgym_env"] | modules["dreamgym_env.real.textworld"]
    assert all(names for names in modules.values()), "a public module with no names"


def test_every_listed_name_is_described() -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    bare = [line for line in text.splitlines() if re.fullmatch(r"\| `\w+` \| \w+ \|\s*\|", line)]
    assert not bare, f"names without a docstring or #: comment: {bare}"


def test_the_guides_import_only_listed_names() -> None:
    modules = listed()
    found = guide_imports()
    assert len(found) > 30  # guards the extraction: a broken pattern would make this vacuous
    internal = [f"{f}: from {m} import {n}" for f, m, n in found if n not in modules.get(m, set())]
    assert not internal, "imports of names docs/api.md does not list:\n" + "\n".join(internal)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from dreamgym_env.episode import EpisodeEnv", [("dreamgym_env.episode", "EpisodeEnv")]),
        ("import dreamgym_env\nfrom os import path", []),
        (
            "from dreamgym_env import (\n    DreamGymEnv,\n    Task,\n)",
            [("dreamgym_env", "DreamGymEnv"), ("dreamgym_env", "Task")],
        ),
    ],
)
def test_imports_are_read_from_source(source: str, expected: list[tuple[str, str]]) -> None:
    assert imports(source) == expected
