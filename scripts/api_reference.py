"""Write docs/api.md: the public API, each public module's ``__all__`` with a line on every name.

The public modules are every package whose ``__init__`` has an ``__all__``, and the modules in
:data:`MODULES`, which the guides import from. Everything else is internal: importable, but free to
change. The reference is read from the source with :mod:`ast`, not by importing, so the adapters whose
packages are not installed (verl, verifiers) are listed too. The docs test checks that docs/api.md is
current and that every import in README.md, docs/ and examples/ takes a name this reference lists.

    python scripts/api_reference.py           # rewrite docs/api.md
    python scripts/api_reference.py --check   # exit 1 when docs/api.md is stale
"""

from __future__ import annotations

import argparse
import ast
import functools
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "api.md"

#: Public modules that are not packages: what a user imports from directly.
MODULES: tuple[str, ...] = (
    "dreamgym_env.rollout",
    "dreamgym_env.distributed",
    "dreamgym_env.experience.backends.openai_http",
    "dreamgym_env.experience.backends.recording",
    "dreamgym_env.experience.memo",
    "dreamgym_env.integrations.rllib",
    "dreamgym_env.integrations.sb3",
    "dreamgym_env.integrations.trl",
    "dreamgym_env.integrations.verifiers",
    "dreamgym_env.integrations.verl",
    "dreamgym_env.real.textworld",
    "dreamgym_env.real.textworld_suite",
    "dreamgym_env.serving.shipped",
    "dreamgym_env.training.policy",
    "dreamgym_env.training.ppo",
)


@dataclass(frozen=True)
class Entry:
    """One public name: what it is and the first line of its docstring."""

    name: str
    kind: str  # class | function | constant
    summary: str


def module_file(module: str) -> Path:
    """The source file of a dotted module name (a package's ``__init__.py``)."""
    base = ROOT.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def public_modules() -> list[str]:
    """The packages with an ``__all__``, then :data:`MODULES`."""
    packages = sorted(
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "dreamgym_env").rglob("__init__.py")
        if exported_names(init)
    )
    return packages + sorted(MODULES)


@functools.cache
def _source(path: Path) -> tuple[str, ast.Module]:
    """A file's text and syntax tree, read once however many of its names are described."""
    text = path.read_text()
    return text, ast.parse(text)


def exported_names(path: Path) -> list[str]:
    """The module's ``__all__``: its top-level assignment plus any ``__all__ +=`` after it."""
    names: list[str] = []
    for node in _source(path)[1].body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            names = list(ast.literal_eval(node.value))
        elif isinstance(node, ast.AugAssign) and getattr(node.target, "id", None) == "__all__":
            names += list(ast.literal_eval(node.value))
    return names


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """Top-level statements, with those inside ``try`` and ``if`` blocks (optional imports)."""
    out: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.Try):
            out += node.body
        elif isinstance(node, ast.If):
            out += node.body + node.orelse
        else:
            out.append(node)
    return out


def describe(module: str, name: str, depth: int = 0) -> Entry:
    """Where ``name`` is defined (following ``from x import name``), its kind and first docstring line."""
    tree = _source(module_file(module))[1]
    body = _top_level(tree)
    for i, node in enumerate(body):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            return Entry(name, kind, _first_line(ast.get_docstring(node)))
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and name in _assigned(node):
            return Entry(name, "constant", _attribute_doc(module, node, body[i + 1 : i + 2]))
        if isinstance(node, ast.ImportFrom) and depth < 5:
            for alias in node.names:
                if (alias.asname or alias.name) == name and node.module:
                    source = node.module if node.level == 0 else _relative(module, node)
                    return replace(describe(source, alias.name, depth + 1), name=name)
    raise LookupError(f"{module}.__all__ names {name!r}, which the module does not define or import")


def _relative(module: str, node: ast.ImportFrom) -> str:
    package = module.split(".")
    if module_file(module).name != "__init__.py":
        package = package[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join(package + ([node.module] if node.module else []))


def _assigned(node: ast.Assign | ast.AnnAssign) -> set[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def _attribute_doc(module: str, node: ast.stmt, following: list[ast.stmt]) -> str:
    """A constant's doc: a ``#:`` comment above it, or a string right after it."""
    after = following[0] if following else None
    if (
        isinstance(after, ast.Expr)
        and isinstance(after.value, ast.Constant)
        and isinstance(after.value.value, str)
    ):
        return _first_line(after.value.value)
    lines = _source(module_file(module))[0].splitlines()
    comment: list[str] = []
    row = node.lineno - 2
    while row >= 0 and lines[row].lstrip().startswith("#:"):
        comment.insert(0, lines[row].lstrip()[2:].strip())
        row -= 1
    return _first_line(" ".join(comment))


def _first_line(doc: str | None) -> str:
    """The docstring's first sentence-line, with table pipes escaped."""
    text = (doc or "").strip().split("\n\n")[0].replace("\n", " ")
    return " ".join(text.split()).replace("|", "\\|")


def module_summary(module: str) -> str:
    """The first line of the module's docstring."""
    return _first_line(ast.get_docstring(_source(module_file(module))[1]))


def render() -> str:
    """docs/api.md's text."""
    parts = [
        "# API reference\n",
        "The public API: the names each module below exports (its `__all__`). Everything else in the",
        "package is internal: importable, but it may change in any release. Written by",
        "`python scripts/api_reference.py` from the source; the docs test fails when it is stale.\n",
    ]
    for module in public_modules():
        parts.append(f"## `{module}`\n")
        summary = module_summary(module)
        if summary:
            parts.append(f"{summary}\n")
        parts.append("| name | kind | what it is |")
        parts.append("| --- | --- | --- |")
        for name in exported_names(module_file(module)):
            entry = describe(module, name)
            parts.append(f"| `{entry.name}` | {entry.kind} | {entry.summary} |")
        parts.append("")
    return "\n".join(parts)


def main() -> int:
    """Write docs/api.md, or with ``--check`` compare it."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when docs/api.md is stale")
    args = parser.parse_args()
    text = render()
    if args.check:
        if OUTPUT.read_text() != text:
            print(
                f"{OUTPUT.relative_to(ROOT)} is stale: run python scripts/api_reference.py", file=sys.stderr
            )
            return 1
        return 0
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
