"""The names README.md and docs/*.md give exist, so the docs cannot drift from the code unnoticed.

Every ``dreamgym_env.x.y`` dotted name must import (or be an attribute of what imports); every
``DreamGym/...-v0`` id must be registered (or be the id of a spec shipped under ``examples/``); every
repository path (``dreamgym_env/...``, ``examples/...``, ``scripts/...``, ``benchmarks/...``,
``tests/...``) must exist; every ``dreamgym`` command shown must be a subcommand of the CLI, given
only flags that subcommand takes; every install extra (``dreamgym-env[...]``, in the docs and in
the package's "install it with" errors) must be one of pyproject.toml's. A name behind an optional dependency that is not installed counts
when the package itself answers it with :class:`~dreamgym_env.errors.DependencyNotInstalled` and the
name is written in that module's source.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import re
import shlex
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest

import dreamgym_env
from dreamgym_env.cli import build_parser
from dreamgym_env.domains.spec import load_spec
from dreamgym_env.errors import DependencyNotInstalled

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

DOTTED = re.compile(r"\bdreamgym_env(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
ENV_ID = re.compile(r"\bDreamGym/[A-Za-z0-9_-]+-v\d+")
# A repository path: not part of a longer path (``~/.cache/dreamgym_env/...`` is a cache folder).
REPO_PATH = re.compile(
    r"(?<![\w./~-])((?:dreamgym_env|examples|benchmarks|scripts|tests)/[A-Za-z0-9_./-]*[A-Za-z0-9_])"
)


# A command as the docs show it: an inline code span, or a line of a code block (continuations joined).
INLINE_COMMAND = re.compile(r"`(dreamgym [^`]+)`")
BLOCK_COMMAND = re.compile(r"^(?:\$ )?(dreamgym [^\n]+)", re.M)
FLAG = re.compile(r"^--?[A-Za-z][\w-]*")


def mentions(pattern: re.Pattern[str], texts: dict[str, str]) -> list[tuple[str, str]]:
    """Each distinct match of ``pattern`` with the first file that has it, in file order."""
    found: dict[str, str] = {}
    for name, text in texts.items():
        for match in pattern.finditer(text):
            found.setdefault(match.group(1) if pattern.groups else match.group(0), name)
    return sorted(found.items())


def resolve(dotted: str) -> Any:
    """Import the longest module prefix of ``dotted`` and read the rest as attributes."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        module_name = ".".join(parts[:split])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only "this prefix is not a module" moves on to a shorter prefix; a module that exists
            # but fails to import its own dependencies is a real failure.
            if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
                continue
            raise
        for attribute in parts[split:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(dotted)


def defined_behind_optional_dependency(dotted: str) -> bool:
    """Whether ``dotted`` names a module file, or a name written in one, of this package."""
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:split])
        source = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if source.is_file():
            text = source.read_text(encoding="utf-8")
            return all(re.search(rf"\b{re.escape(name)}\b", text) for name in parts[split:])
    return False


def check_dotted(dotted: str) -> None:
    try:
        resolve(dotted)
    except DependencyNotInstalled:
        assert defined_behind_optional_dependency(dotted), f"{dotted} is not defined in the package"


def spec_ids() -> set[str]:
    """The ids of the domain specs shipped as examples (registered only when a user loads them)."""
    ids = set()
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        try:
            ids.add(load_spec(path).resolved_env_id)
        except Exception:  # not every YAML under examples/ is a domain spec
            continue
    return ids


def cli_commands() -> dict[tuple[str, ...], set[str]]:
    """Every subcommand path of ``dreamgym`` (``("buffer", "import")``...) with the flags it takes."""
    commands: dict[tuple[str, ...], set[str]] = {}

    def walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        commands[path] = {option for action in parser._actions for option in action.option_strings}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, (*path, name))

    walk(build_parser(), ())
    return commands


def shown_commands(texts: dict[str, str]) -> list[tuple[str, str]]:
    """The ``dreamgym ...`` commands the docs show, with the file that shows each."""
    shown = []
    for name, text in texts.items():
        fences = re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)
        blocks = "\n".join(body for language, body in fences if language in ("", "bash", "console", "sh"))
        for line in BLOCK_COMMAND.findall(blocks.replace("\\\n", " ")):
            shown.append((line.split("#")[0], name))
        shown += [(span, name) for span in INLINE_COMMAND.findall(text)]
    return shown


def command_problem(command: str, commands: dict[tuple[str, ...], set[str]]) -> str | None:
    """Why ``command`` is not one the CLI takes, or None. ``[--flag]`` and ``A|B`` are read as written."""
    words = shlex.split(command.replace("[", " ").replace("]", " ").replace("|", " "), posix=True)[1:]
    path: tuple[str, ...] = ()
    for word in words:
        if (*path, word) in commands:
            path = (*path, word)
        elif not path:
            return f"no subcommand {word!r}"
        else:
            break
    if not path:
        return "no subcommand"
    unknown = [m.group(0) for w in words if (m := FLAG.match(w)) and m.group(0) not in commands[path]]
    return f"{' '.join(path)} takes no {', '.join(unknown)}" if unknown else None


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8") for path in DOC_FILES}


def test_the_docs_name_things_at_all(texts: dict[str, str]) -> None:
    # Guards the extraction itself: a broken pattern would make the checks below vacuous.
    assert len(mentions(DOTTED, texts)) > 30
    assert len(mentions(ENV_ID, texts)) >= 10
    assert len(mentions(REPO_PATH, texts)) > 20


def test_every_dotted_name_resolves(texts: dict[str, str]) -> None:
    failures = []
    for dotted, doc in mentions(DOTTED, texts):
        try:
            check_dotted(dotted)
        except (ImportError, AttributeError, AssertionError) as exc:
            failures.append(f"{doc}: {dotted}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)


def test_every_env_id_is_registered(texts: dict[str, str]) -> None:
    assert dreamgym_env  # importing the package registers the built-in ids
    known = set(gym.registry) | spec_ids()
    missing = [f"{doc}: {env_id}" for env_id, doc in mentions(ENV_ID, texts) if env_id not in known]
    assert not missing, "ids named in the docs but not registered:\n" + "\n".join(missing)


def test_every_repository_path_exists(texts: dict[str, str]) -> None:
    missing = [f"{doc}: {path}" for path, doc in mentions(REPO_PATH, texts) if not (ROOT / path).exists()]
    assert not missing, "paths named in the docs that do not exist:\n" + "\n".join(missing)


def test_every_dreamgym_command_takes_its_flags(texts: dict[str, str]) -> None:
    commands = cli_commands()
    shown = shown_commands(texts)
    assert len(shown) > 20
    problems = [f"{doc}: {cmd}: {why}" for cmd, doc in shown if (why := command_problem(cmd, commands))]
    assert not problems, "\n".join(problems)


def test_a_wrong_command_or_flag_is_caught() -> None:
    commands = cli_commands()
    assert command_problem("dreamgym buffer search b.sqlite --state s -k 4", commands) is None
    assert command_problem("dreamgym buffer stats b.sqlite [--json]", commands) is None
    assert command_problem("dreamgym buffer search b.sqlite --no-such-flag", commands) is not None
    assert command_problem("dreamgym buffers stats b.sqlite", commands) is not None


def declared_extras() -> set[str]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with (ROOT / "pyproject.toml").open("rb") as f:
        return set(tomllib.load(f)["project"]["optional-dependencies"])


def extras_the_package_names() -> list[tuple[str, str]]:
    """The extras that ``DependencyNotInstalled(package, extra, ...)`` tells users to install."""
    named = []
    for path in sorted((ROOT / "dreamgym_env").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or getattr(node.func, "id", None) != "DependencyNotInstalled":
                continue
            if any(k.arg == "install" for k in node.keywords) or len(node.args) >= 4:
                continue  # the message says what installs it instead of an extra
            extra = node.args[1] if len(node.args) > 1 else None
            if isinstance(extra, ast.Constant) and isinstance(extra.value, str):
                named.append((extra.value, f"{path.relative_to(ROOT)}:{node.lineno}"))
    return named


def test_every_install_extra_exists(texts: dict[str, str]) -> None:
    extras = declared_extras()
    shown = [
        (name, doc)
        for doc, text in texts.items()
        for group in re.findall(r"(?:dreamgym-env|\.)\[([a-z0-9_,-]+)\]", text)
        for name in group.split(",")
    ]
    in_code = extras_the_package_names()
    assert len(shown) > 10 and len(in_code) > 5
    missing = [f"{where}: [{name}]" for name, where in shown + in_code if name not in extras]
    assert not missing, "extras that pyproject.toml does not declare:\n" + "\n".join(missing)


@pytest.mark.parametrize(
    "wrong",
    [
        "dreamgym_env.rollout.play_episodes_wrongly",
        "dreamgym_env.no_such_module",
        "dreamgym_env.integrations.verl.NoSuchLoop",
        "dreamgym_env.integrations.verifiers.no_such_function",
    ],
)
def test_a_wrong_dotted_name_is_caught(wrong: str) -> None:
    with pytest.raises((ImportError, AttributeError, AssertionError)):
        check_dotted(wrong)


def test_a_wrong_env_id_or_path_is_caught() -> None:
    texts = {"x.md": "`DreamGym/MiniWob-v0` and `dreamgym_env/vectors.py`, not `~/.cache/dreamgym_env/smoke`"}
    ids = [env_id for env_id, _ in mentions(ENV_ID, texts)]
    assert ids == ["DreamGym/MiniWob-v0"] and ids[0] not in set(gym.registry) | spec_ids()
    assert [path for path, _ in mentions(REPO_PATH, texts)] == ["dreamgym_env/vectors.py"]
    assert not (ROOT / "dreamgym_env/vectors.py").exists()


PPO_CALL = re.compile(r"^model = (?:Maskable)?PPO\(.*$", re.M)


def ppo_budget(line: str, num_envs: int) -> tuple[int, int, bool]:
    """``(steps a rollout waits for, steps learn() is given, progress shown)`` of a documented PPO line."""
    call = ast.parse(line.split("=", 1)[1].strip(), mode="eval").body
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute), line  # PPO(...).learn(...)
    ppo = call.func.value
    assert isinstance(ppo, ast.Call), line
    kwargs = {k.arg: ast.literal_eval(k.value) for k in ppo.keywords}
    learn = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    total = ast.literal_eval(call.args[0]) if call.args else learn["total_timesteps"]
    return int(kwargs.get("n_steps", 2048)) * num_envs, int(total), bool(learn.get("progress_bar"))


def test_documented_ppo_runs_fit_their_budget_and_show_progress(texts: dict[str, str]) -> None:
    """SB3's default ``n_steps=2048`` makes a first rollout of 16 envs 32,768 simulated steps (hours here):
    every documented PPO run sets a rollout that a learn() call completes, and shows its progress."""
    found = 0
    for name, text in texts.items():
        for match in PPO_CALL.finditer(text):
            block = text[: match.start()].rsplit("```", 1)[-1]  # the code block up to the call
            envs = re.findall(r"(?:num_envs|n_envs)=(\d+)", block)
            rollout, total, progress = ppo_budget(match.group(0), int(envs[-1]) if envs else 1)
            assert rollout <= 4_096 and total >= rollout, (name, match.group(0))
            assert progress, (name, match.group(0))
            found += 1
    assert found >= 3


def test_the_simulation_docs_lead_with_the_concurrent_path_and_it_runs(texts: dict[str, str]) -> None:
    """A single env waits for each answer (3.3 steps/s against 12.7 at 64 envs, docs/scaling.md): the
    first snippet of docs/env.md is a vector env, and it runs as written (a scripted backend for the server)."""
    first = texts["docs/env.md"].split("```python\n", 1)[1].split("```", 1)[0]
    assert "gym.make_vec(" in first
    served = 'base_url="http://127.0.0.1:8000/v1", model="my-experience-model"'
    assert served in first
    scope: dict[str, Any] = {}
    exec(first.replace(served, 'backend="scripted"'), scope)  # noqa: S102 - the docs' own snippet
    assert len(scope["rewards"]) == 32 and set(scope["infos"]["answered_by"]) == {"model"}
    scope["envs"].close()
