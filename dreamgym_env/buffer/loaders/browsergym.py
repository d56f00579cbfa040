"""BrowserGym / AgentLab experiment folders: one episode a folder of ``step_<n>.pkl.gz`` pickles.

AgentLab saves each episode of a study as a folder holding one gzipped pickle per step (a
``StepInfo``: the observation, the action chosen from it, the reward and end flags on reaching it)
and a ``summary_info.json``; the real browser wrappers record the same layout
(:mod:`dreamgym_env.real.recording`, with plain dicts instead of ``StepInfo`` objects). Step ``n``
and step ``n + 1`` make the transition (state of obs ``n``, action ``n``) -> (state of obs ``n + 1``,
its reward, its ``terminated``). States are written as the live wrappers write them
(:func:`~dreamgym_env.domains.axtree.axtree_to_state`: tab lines, URL, BrowserGym's listing; AgentLab's
``axtree_txt`` when the tree object was not kept); the domain comes from the task name
(``miniwob.*`` -> ``miniwob``, otherwise ``webarena``).

Pickles can run code when loaded, so they are read with an unpickler that builds only plain
containers, numpy arrays and inert stand-ins for AgentLab's and BrowserGym's classes; any other class
makes the episode a :class:`LoadIssue`. Import only folders you trust all the same.
"""

from __future__ import annotations

import gzip
import io
import json
import pickle
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from dreamgym_env.buffer.loaders.base import LoadIssue, Record
from dreamgym_env.domains import get_domain
from dreamgym_env.domains.axtree import axtree_to_state, page_header
from dreamgym_env.domains.miniwob import miniwob_display_urls, miniwob_task
from dreamgym_env.records import Task, Transition
from dreamgym_env.spaces import DEFAULT_MAX_STATE_CHARS, fit_state

_STEP = re.compile(r"^step_(\d+)\.pkl(?:\.gz)?$")
_AGENTLAB_NAME = re.compile(r"_on_(?P<task>[\w.-]+?)_(?P<seed>\d+)$")
_STAND_IN_MODULES = ("agentlab", "browsergym", "bgym")
_SAFE = {
    ("builtins", "set"),
    ("builtins", "frozenset"),
    ("builtins", "slice"),
    ("builtins", "complex"),
    ("builtins", "bytearray"),
    ("collections", "OrderedDict"),
    ("collections", "defaultdict"),
    ("datetime", "datetime"),
    ("datetime", "date"),
    ("datetime", "timedelta"),
    ("copyreg", "_reconstructor"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
}


class _StandIn:
    """An inert object in place of an AgentLab/BrowserGym class: it only keeps its pickled state."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.__dict__["_args"] = args

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2:  # (dict, slots)
            state = {**(state[0] or {}), **(state[1] or {})}
        if isinstance(state, Mapping):
            self.__dict__.update(state)

    def __reduce__(self) -> Any:  # pragma: no cover - stand-ins are never pickled again
        raise TypeError("a stand-in for an AgentLab class cannot be pickled")


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module.split(".")[0] in _STAND_IN_MODULES:
            return type(name, (_StandIn,), {"__module__": module})
        if (module, name) in _SAFE:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"the pickle needs {module}.{name}, which this loader does not load")


def _read_step_pickle(path: Path) -> dict[str, Any]:
    """One step of an experiment folder as a dict of AgentLab's ``StepInfo`` fields.

    Raises:
        pickle.UnpicklingError, OSError, EOFError: The file is not a step pickle this loader reads.
    """
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    value = _Unpickler(io.BytesIO(raw)).load()
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, _StandIn):
        return {k: v for k, v in value.__dict__.items() if k != "_args"}
    raise pickle.UnpicklingError(f"expected a StepInfo or a dict, got {type(value).__name__}")


def is_experiment_folder(path: Path) -> bool:
    """Whether ``path`` is one episode's folder (it holds ``step_<n>.pkl[.gz]`` files)."""
    return path.is_dir() and any(_STEP.match(p.name) for p in path.iterdir())


def _steps(folder: Path) -> list[tuple[int, Path]]:
    return sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := _STEP.match(p.name)))


def _summary(folder: Path) -> dict[str, Any]:
    path = folder / "summary_info.json"
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def _state(obs: Mapping[str, Any], domain: str) -> str:
    url = str(obs.get("url", ""))
    titles = list(obs.get("open_pages_titles") or ())
    active = int(obs.get("active_page_index", 0) or 0)
    if obs.get("axtree_object"):
        state = axtree_to_state(
            obs["axtree_object"],
            url=url,
            titles=titles,
            active_index=active,
            skip_generic=domain != "miniwob",
        )
    elif isinstance(obs.get("axtree_txt"), str):
        state = "\n".join([*page_header(url, titles, active), obs["axtree_txt"]])
    else:
        raise ValueError("the observation holds neither axtree_object nor axtree_txt")
    if domain == "miniwob":
        state = miniwob_display_urls(state)
    return fit_state(state, DEFAULT_MAX_STATE_CHARS)


def _task(folder: Path, summary: Mapping[str, Any], first_obs: Mapping[str, Any], domain: str) -> Task:
    name = str(summary.get("task_name") or "")
    seed: int | None = None
    named = _AGENTLAB_NAME.search(folder.name)
    if not name and named:
        name, seed = named.group("task"), int(named.group("seed"))
    goal = str(summary.get("goal") or first_obs.get("goal") or "")
    metadata = summary.get("task_metadata")
    if isinstance(summary.get("task_id"), str):
        meta = dict(metadata) if isinstance(metadata, Mapping) else {}
        return Task(
            task_id=summary["task_id"], domain=domain, instruction=goal, metadata=meta, source="browsergym"
        )
    if domain == "miniwob" and seed is not None:
        return miniwob_task(name.removeprefix("miniwob."), seed, goal)
    return Task(task_id=name or folder.name, domain=domain, instruction=goal, source="browsergym")


def _domain_of(folder: Path, summary: Mapping[str, Any], override: str | None) -> str:
    if override:
        return override
    name = str(summary.get("task_name") or "")
    named = _AGENTLAB_NAME.search(folder.name)
    if not name and named:
        name = named.group("task")
    return "miniwob" if name.startswith("miniwob.") else "webarena"


def _record(folder: Path, domain: str | None) -> Record | LoadIssue:
    where = str(folder)
    files = _steps(folder)
    if [n for n, _ in files] != list(range(len(files))):
        return LoadIssue(where, None, "step pickles are not numbered 0..n without gaps; episode skipped")
    try:
        steps = [_read_step_pickle(p) for _, p in files]
    except (pickle.UnpicklingError, OSError, EOFError, AttributeError, ValueError) as e:
        return LoadIssue(where, None, f"cannot read a step pickle ({e}); episode skipped")
    if [s.get("step", i) for i, s in enumerate(steps)] != list(range(len(steps))):
        return LoadIssue(
            where, None, "a step pickle holds another step number than its name; episode skipped"
        )
    if len(steps) < 2:
        return LoadIssue(where, None, "the episode has no action (one observation only); nothing to import")
    summary = _summary(folder)
    name = _domain_of(folder, summary, domain)
    facts = get_domain(name).task_fact_keys
    try:
        states = [_state(s.get("obs") or {}, name) for s in steps]
    except ValueError as e:
        return LoadIssue(where, None, f"{e}; episode skipped")
    task = _task(folder, summary, steps[0].get("obs") or {}, name)
    hidden = {k: v for k, v in task.metadata.items() if k in {f.split(".")[0] for f in facts}}
    episode_id = f"browsergym:{folder.name}"
    transitions = []
    for i in range(len(steps) - 1):
        action = steps[i].get("action")
        if not isinstance(action, str) or not action.strip():
            return LoadIssue(where, None, f"step {i} has no action but a later step exists; episode skipped")
        after = steps[i + 1]
        reward = float(after.get("reward") or 0.0)
        done = bool(after.get("terminated"))
        transitions.append(
            Transition.of_step(
                task,
                episode_id=episode_id,
                step=i,
                state=states[i],
                action=action,
                next_state=states[i + 1],
                reward=reward,
                done=done,
                success=done and reward >= 1.0,
                source="offline",
                task_metadata=hidden,
                metadata={"origin": "browsergym", "experiment": folder.name},
            )
        )
    return Record(transitions, where, None)


def load_browsergym(path: Path, *, domain: str | None = None) -> Iterator[Record | LoadIssue]:
    """Yield one record per episode: ``path`` is an episode folder or a folder of them (a study)."""
    if is_experiment_folder(path):
        yield _record(path, domain)
        return
    folders = sorted(p for p in path.iterdir() if is_experiment_folder(p)) if path.is_dir() else []
    if not folders:
        yield LoadIssue(str(path), None, "no experiment folder (with step_<n>.pkl.gz files) here")
    for folder in folders:
        yield _record(folder, domain)
