"""The package's imports point one way: no import cycle, and no module imports from a layer above its own.

Why: a cycle makes what a module sees depend on which module was imported first (a name missing from
a half-initialized module), and an upward import makes a light module load a heavy one: making
``DreamGym/TextWorld-v0`` with the scripted backend must not load the serving or training code (vLLM
servers, model building), which it never uses.

The graph is read from the source with :mod:`ast`, so it covers every module, installed extras or not:
each ``import`` and ``from ... import`` (relative ones too), at module level and inside functions,
since a function's import runs as soon as the function does. Importing ``a.b.c`` also runs the
``__init__`` of ``a.b`` (unless the importer is inside it), so that counts as importing it too; the
top-level ``dreamgym_env/__init__.py`` runs before any of its modules anyway and counts only where a
module imports the package itself. Imports under ``if TYPE_CHECKING:`` are left out: they are read by
type checkers only and load nothing. Entry points named by string (the domain table's, the command
line's subcommand groups) are looked up when used and are not imports.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "dreamgym_env"
PACKAGE_DIR = Path(__file__).resolve().parent.parent / PACKAGE

ALIASES: dict[str, str] = {f"{PACKAGE}.types": f"{PACKAGE}.records"}
"""Module names that the package's ``__init__`` maps to another module (a former name)."""

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("errors", ("dreamgym_env.errors",)),
    (
        "primitives: plain data, helpers and the shipped models' recorded settings",
        (
            "dreamgym_env._argtypes",
            "dreamgym_env._event_loop",
            "dreamgym_env._openai_client",
            "dreamgym_env._secrets",
            "dreamgym_env.records",
            "dreamgym_env.retrieval",
            "dreamgym_env.shipped_settings",
            "dreamgym_env.spaces",
            "dreamgym_env.tasks",
        ),
    ),
    ("configuration", ("dreamgym_env.config",)),
    ("domains and storage", ("dreamgym_env.domains", "dreamgym_env.storage")),
    ("replay buffer and experience model", ("dreamgym_env.buffer", "dreamgym_env.experience")),
    # A world answers an env's steps; the episode env plays one whatever world it is given.
    ("worlds' interface", ("dreamgym_env.world",)),
    ("episode rules", ("dreamgym_env.episode",)),
    (
        "envs, simulated and real (the simulated world, the engines), and rollouts",
        (
            "dreamgym_env.agent_chat",
            # A domain package's real engine and the games it builds sit with the other envs.
            "dreamgym_env.domains.alfworld.engine",
            "dreamgym_env.domains.miniwob.engine",
            "dreamgym_env.domains.textworld.engine",
            "dreamgym_env.domains.textworld.suite",
            "dreamgym_env.domains.webarena.engine",
            "dreamgym_env.domains.webshop.engine",
            "dreamgym_env.env",
            "dreamgym_env.real",
            "dreamgym_env.rollout",
            "dreamgym_env.simulated",
            "dreamgym_env.vector",
        ),
    ),
    (
        "what works on envs: wrappers and the curriculum (a domain package's curriculum format too)",
        (
            "dreamgym_env.curriculum",
            "dreamgym_env.domains.miniwob.curriculum",
            "dreamgym_env.domains.textworld.curriculum",
            "dreamgym_env.wrappers",
        ),
    ),
    (
        # User-defined domains (domains.spec*) read their trajectories with the buffer's loaders and
        # register their own ids, so they sit with the registration, above the built-in domains.
        "registration and the public facade",
        (
            "dreamgym_env",
            "dreamgym_env.domains.spec",
            "dreamgym_env.domains.spec_retrieval",
            "dreamgym_env.registration",
        ),
    ),
    ("trainer and RL-library adapters", ("dreamgym_env.integrations",)),
    # The PPO recipe trains on the stable-baselines3 adapter.
    ("training", ("dreamgym_env.training",)),
    # Serving a shipped model merges its adapter into a base that the training code builds.
    ("serving", ("dreamgym_env.serving",)),
    ("evaluation and distributed runs", ("dreamgym_env.distributed", "dreamgym_env.evaluation")),
    (
        "command line",
        (
            "dreamgym_env.buffer.cli",
            "dreamgym_env.cli",
            "dreamgym_env.curriculum.cli",
            "dreamgym_env.domains.spec_cli",
            "dreamgym_env.evaluation.cli",
            "dreamgym_env.training.cli",
        ),
    ),
)
"""Lowest first. A module belongs to the layer of the longest prefix that names it (itself or a
package above it); it may import its own layer and those below, never one above."""

ALLOWED_CYCLE_EDGES: dict[tuple[str, str], str] = {}
"""Imports that may close a cycle, each with why it cannot be avoided (none today)."""

ALLOWED_UPWARD: dict[tuple[str, str], str] = {}
"""Imports from a higher layer that are allowed, each with why it cannot be avoided (none today)."""


def _modules() -> dict[str, Path]:
    """Dotted name -> file of every module of the package (a package is its ``__init__.py``)."""
    found = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Ids of the nodes under ``if TYPE_CHECKING:`` (never run)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def _imported_names(
    module: str, source: str, is_package: bool, modules: dict[str, Path]
) -> Iterator[tuple[str, int]]:
    """``(module imported, line)`` for each import in ``module``'s source (a package's: its ``__init__``)."""
    tree = ast.parse(source)
    skipped = _type_checking_only(tree)
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                source_module = ".".join([*base, node.module] if node.module else base)
            else:
                source_module = node.module or ""
            for alias in node.names:
                submodule = f"{source_module}.{alias.name}"
                yield (
                    (submodule if ALIASES.get(submodule, submodule) in modules else source_module),
                    node.lineno,
                )


def _loaded(importer: str, target: str, modules: dict[str, Path]) -> list[str]:
    """What importing ``target`` from ``importer`` runs: ``target`` and the packages above it with an
    ``__init__``, but not the top-level package (it runs first in any case) nor those ``importer`` is in."""
    parts = target.split(".")
    parents = [".".join(parts[:i]) for i in range(2, len(parts))]
    return [p for p in parents if p in modules and not (importer + ".").startswith(p + ".")] + [target]


@functools.cache
def import_graph() -> dict[str, dict[str, int]]:
    """Module -> {module it imports: the first line that does}, for the package's own modules."""
    modules = _modules()
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        edges: dict[str, int] = {}
        source = path.read_text(encoding="utf-8")
        for name, line in _imported_names(module, source, path.name == "__init__.py", modules):
            if name != PACKAGE and not name.startswith(PACKAGE + "."):
                continue
            name = ALIASES.get(name, name)
            assert name in modules, f"{path}:{line} imports {name}, which is no module of the package"
            for target in _loaded(module, name, modules):
                if target != module:
                    edges.setdefault(target, line)
        graph[module] = edges
    return graph


def layer_of(module: str) -> int:
    """Index in :data:`LAYERS` of the layer that owns ``module`` (longest matching prefix), else -1.

    The top-level package names only its ``__init__``, so that a new module is not silently placed in
    the facade's layer but fails :func:`test_every_module_has_a_layer` until it is given one.
    """
    best, best_length = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            owns = module == prefix or (prefix != PACKAGE and module.startswith(prefix + "."))
            if owns and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    return best


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def upward_imports(graph: dict[str, dict[str, int]]) -> list[str]:
    """Each import of a higher layer, as ``importer:line -> imported (layer -> layer)``."""
    found = []
    for importer, edges in sorted(graph.items()):
        for imported, line in sorted(edges.items()):
            if (importer, imported) in ALLOWED_UPWARD:
                continue
            if layer_of(imported) > layer_of(importer):
                found.append(
                    f"{importer}:{line} -> {imported} "
                    f"({LAYERS[layer_of(importer)][0]} -> {LAYERS[layer_of(imported)][0]})"
                )
    return found


def test_every_module_has_a_layer() -> None:
    assert [module for module in import_graph() if layer_of(module) < 0] == []


def test_the_graph_sees_imports_inside_functions_and_relative_ones() -> None:
    graph = import_graph()
    assert "dreamgym_env.experience.backends.vllm_engine" in graph["dreamgym_env.experience.backends"]
    assert "dreamgym_env.training.merge" in graph["dreamgym_env.serving.shipped"]  # inside a function
    assert "dreamgym_env.training" in graph["dreamgym_env.serving.shipped"]  # the package it runs first
    source = "from . import records\nfrom .domains import base\nfrom .config import EnvConfig\n"
    found = {name for name, _ in _imported_names("dreamgym_env.env", source, False, _modules())}
    assert found == {"dreamgym_env.records", "dreamgym_env.domains.base", "dreamgym_env.config"}
    source = "def f():\n    from ..errors import ConfigError\n"
    found = {name for name, _ in _imported_names("dreamgym_env.buffer", source, True, _modules())}
    assert found == {"dreamgym_env.errors"}


def test_there_is_no_import_cycle() -> None:
    graph = {
        module: {t: line for t, line in edges.items() if (module, t) not in ALLOWED_CYCLE_EDGES}
        for module, edges in import_graph().items()
    }
    assert cycles(graph) == []


def test_no_module_imports_a_higher_layer() -> None:
    assert upward_imports(import_graph()) == []


def test_every_allowed_exception_is_still_needed() -> None:
    graph = import_graph()
    for importer, imported in [*ALLOWED_CYCLE_EDGES, *ALLOWED_UPWARD]:
        assert imported in graph[importer], f"{importer} no longer imports {imported}: drop its exception"


def test_layers_name_only_existing_modules_once() -> None:
    named = [prefix for _, prefixes in LAYERS for prefix in prefixes]
    assert len(named) == len(set(named))
    modules = import_graph()
    assert [p for p in named if not any(m == p or m.startswith(p + ".") for m in modules)] == []


def test_making_a_scripted_env_loads_no_serving_or_training_code() -> None:
    script = (
        "import sys, gymnasium, dreamgym_env\n"
        "env = gymnasium.make('DreamGym/TextWorld-v0', backend='scripted')\n"
        "env.reset(seed=0)\n"
        "env.close()\n"
        "print(' '.join(sorted(m for m in sys.modules "
        "if m.startswith(('dreamgym_env.serving', 'dreamgym_env.training')))))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == []
