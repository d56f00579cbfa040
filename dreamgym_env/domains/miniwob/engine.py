"""MiniWoB++ (real): BrowserGym's MiniWoB tasks in Chromium, behind ``DreamGym/MiniWoB-v0``'s interface.

The task pages are the ``miniwob`` package's HTML, served from 127.0.0.1 by a small HTTP server this
module starts (once per process, on a free port) unless ``base_url`` points elsewhere (a ``file://``
folder or another server). ``browsergym-miniwob`` runs each task: it seeds the page, reads its
utterance and gives MiniWoB's reward (1.0 when the page's raw reward is positive).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dreamgym_env.domains.miniwob.domain import MiniWoBDomain, miniwob_display_urls, miniwob_task
from dreamgym_env.domains.miniwob.policies import SOLVED_TASKS
from dreamgym_env.episode import EpisodeEnv, WorldAttribute
from dreamgym_env.errors import DependencyNotInstalled, DreamGymError
from dreamgym_env.real.browser import BrowserGymEngine, BrowserOptions
from dreamgym_env.records import Task
from dreamgym_env.world import EpisodeStart

DEFAULT_MINIWOB_TASKS: tuple[str, ...] = SOLVED_TASKS[:7]
"""The tasks an env plays when given none: the first seven of
:data:`~dreamgym_env.domains.miniwob.policies.SOLVED_TASKS` (single-page forms with a clear reward, each
solved by a scripted solution from the observation alone)."""

_SERVERS: dict[str, http.server.ThreadingHTTPServer] = {}
_SERVERS_LOCK = threading.Lock()


def _miniwob_html_dir() -> Path:
    """The ``miniwob`` package's task pages (``miniwob/html/miniwob/``, with ``core/`` beside them)."""
    try:
        import miniwob  # type: ignore[import-untyped]
    except ImportError as e:
        raise DependencyNotInstalled("miniwob", "real", "DreamGym/MiniWoB-Real-v0") from e
    return Path(miniwob.__file__).parent / "html" / "miniwob"


def _miniwob_task_classes() -> dict[str, Any]:
    """MiniWoB task name (``click-button``) -> ``browsergym-miniwob``'s task class."""
    try:
        from browsergym.miniwob import ALL_MINIWOB_TASKS
    except ImportError as e:
        raise DependencyNotInstalled("browsergym-miniwob", "real", "DreamGym/MiniWoB-Real-v0") from e
    return {cls.subdomain: cls for cls in ALL_MINIWOB_TASKS}


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Serve without a log line per request."""


def serve_miniwob(root: str | os.PathLike[str] | None = None) -> str:
    """Serve the MiniWoB pages ``root`` (default :func:`_miniwob_html_dir`) on 127.0.0.1; their base URL.

    The server serves the folder above ``root``, since the pages load ``../core/`` and ``../common/``
    scripts. One daemon-thread server per folder and process, started on first use on a free port;
    later calls return the same URL.
    """
    pages = Path(root) if root is not None else _miniwob_html_dir()
    folder = str(pages.parent)
    with _SERVERS_LOCK:
        server = _SERVERS.get(folder)
        if server is None:
            handler = functools.partial(_QuietHandler, directory=folder)
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
            threading.Thread(target=server.serve_forever, daemon=True, name="miniwob-http").start()
            _SERVERS[folder] = server
    return f"http://127.0.0.1:{server.server_address[1]}/{pages.name}/"


class MiniWoBEngine(BrowserGymEngine):
    """MiniWoB++ task pages in Chromium: the world of ``DreamGym/MiniWoB-Real-v0`` (see :class:`MiniWoBRealEnv`).

    Args:
        tasks: Task names or MiniWoB :class:`Task` objects drawn at reset (default
            :data:`DEFAULT_MINIWOB_TASKS`).
        task: One task name instead.
        base_url: Where the pages are (default: a loopback server, :func:`serve_miniwob`).
        **browser: :class:`~dreamgym_env.real.browser.BrowserGymEngine`'s arguments.
    """

    skip_generic = False

    def __init__(
        self,
        tasks: Sequence[str | Task] | None = None,
        *,
        task: str | None = None,
        base_url: str | None = None,
        **browser: Any,
    ) -> None:
        super().__init__(MiniWoBDomain(), **browser)
        if task is not None and tasks is not None:
            raise DreamGymError("Give task='name' or tasks=[...], not both.")
        self.tasks: list[str | Task] = [task] if task is not None else list(tasks or DEFAULT_MINIWOB_TASKS)
        if not self.tasks:
            raise DreamGymError("tasks is empty; give MiniWoB task names such as 'click-button'.")
        self.base_url = base_url

    def _task_class(self, name: str) -> Any:
        classes = _miniwob_task_classes()
        if name not in classes:
            raise DreamGymError(
                f"Unknown MiniWoB task {name!r}; known tasks include {', '.join(DEFAULT_MINIWOB_TASKS)} "
                f"({len(classes)} in all: browsergym.miniwob.ALL_MINIWOB_TASKS)."
            )
        return classes[name]

    def _choose(self, options: dict[str, Any], rng: np.random.Generator) -> tuple[str, int]:
        """The episode's MiniWoB task name and page seed."""
        chosen = options.get("task")
        if chosen is None:
            chosen = self.tasks[int(rng.integers(len(self.tasks)))]
        seed = options.get("page_seed")
        if isinstance(chosen, Task):
            name = chosen.metadata.get("miniwob_task")
            if not isinstance(name, str):
                raise DreamGymError(f"Task {chosen.task_id!r} has no metadata['miniwob_task'] to open.")
            if seed is None:
                seed = chosen.metadata.get("seed")
            chosen = name
        if not isinstance(chosen, str):
            raise DreamGymError(f"options['task'] must be a MiniWoB task name or Task, got {chosen!r}")
        if seed is None:
            seed = int(rng.integers(2**31 - 1))
        return chosen, int(seed)

    def reset(self, options: dict[str, Any], rng: np.random.Generator) -> EpisodeStart:
        """Open the chosen task page (``options["task"]``, ``["page_seed"]``, else drawn from ``rng``)."""
        name, seed = self._choose(options, rng)
        entrypoint = self._task_class(name)
        obs = self._open(entrypoint, {"base_url": self.base_url or serve_miniwob()}, seed)
        task = miniwob_task(name, seed, str(obs.get("goal") or ""))
        self._record(f"miniwob.{name}", task, obs)
        return EpisodeStart(task=task, state=self._map(obs), admissible_actions=[])

    def _map(self, obs: dict[str, Any]) -> str:
        return miniwob_display_urls(super()._map(obs))


class MiniWoBRealEnv(EpisodeEnv):
    """A real MiniWoB++ task in Chromium (BrowserGym), observed like ``DreamGym/MiniWoB-v0``.

    ## Description
    Each episode opens one MiniWoB task page with one seed (the seed fixes the page and its
    utterance) in a fresh headless Chromium. The instruction is the page's utterance
    (``info["task"]``); the observation is the tab line, the URL and the page's accessibility tree as
    BrowserGym's ``flatten_axtree_to_str`` lists it (``[bid] role 'name'``), with page URLs shown under
    :data:`~dreamgym_env.domains.miniwob.MINIWOB_DISPLAY_URL` (:func:`~dreamgym_env.domains.miniwob.miniwob_display_urls`).

    ## Action Space / Observation Space
    ``FreeText``: BrowserGym's high-level actions (``click('13')``, ``fill('19', 'text')``...).

    ## Rewards
    MiniWoB's reward through BrowserGym: 1.0 when the task is done right, else 0.

    ## Episode End
    Terminated when the page ends the episode; truncated after 10 steps. An action BrowserGym cannot
    execute leaves the page and puts BrowserGym's message in ``info["last_action_error"]``.

    ## Arguments
    ``task``: one MiniWoB task name, or ``tasks``: names or MiniWoB :class:`Task` objects (their
    ``metadata["seed"]`` is the page seed) drawn at reset (default :data:`DEFAULT_MINIWOB_TASKS`).
    ``base_url``: where the pages are (default: a loopback server, :func:`serve_miniwob`).
    Browser keywords (``executable_path``, ``chromium_flags``, ``headless``, ``visible_only``,
    ``state_mapper``, ``browser_kwargs``: :class:`~dreamgym_env.real.browser.BrowserOptions`) and
    recording (``record_dir``) as :class:`~dreamgym_env.domains.webarena.engine.WebArenaRealEnv`.
    Reset options: ``{"task": "click-button" or Task, "page_seed": int}`` (the page seed is otherwise
    drawn from the env's RNG).

    It is ``EpisodeEnv(MiniWoBDomain(), MiniWoBEngine(...))``: the simulated env with the browser as
    its world. Other keywords are :class:`~dreamgym_env.episode.EpisodeEnv`'s.

    The listing keeps BrowserGym's ``generic`` nodes (``skip_generic=False``): MiniWoB's links and
    some of its widgets are plain ``<span>``s, which only a ``generic`` line gives an id.
    """

    world: MiniWoBEngine

    def __init__(
        self,
        tasks: Sequence[str | Task] | None = None,
        *,
        task: str | None = None,
        base_url: str | None = None,
        record_dir: str | os.PathLike[str] | None = None,
        record_screenshots: bool = False,
        **kwargs: Any,
    ) -> None:
        engine = MiniWoBEngine(
            tasks,
            task=task,
            base_url=base_url,
            browser_options=BrowserOptions.take(kwargs),
            record_dir=record_dir,
            record_screenshots=record_screenshots,
        )
        super().__init__(engine.domain, engine, **kwargs)

    tasks = WorldAttribute[list[str | Task]]("The tasks reset draws from.")
    base_url = WorldAttribute[str | None]("Where the pages are (``None``: the loopback server).")
    browser_options = WorldAttribute[BrowserOptions]("The browser keywords, validated.")
    last_browsergym_obs = WorldAttribute[dict[str, Any]](
        "BrowserGym's raw observation of the last reset or step (axtree, DOM, screenshot...)."
    )


def record_miniwob_tasks(
    names: Iterable[str],
    seeds: Iterable[int],
    path: str | os.PathLike[str],
    **env_kwargs: Any,
) -> list[Task]:
    """Reset the real env once per (task, seed) and write the tasks with their first pages to ``path``.

    The file is what :meth:`~dreamgym_env.domains.miniwob.MiniWoBDomain.load_tasks` reads (JSON
    lines: ``miniwob_task``, ``seed``, ``instruction``, ``state``), so the simulator starts each task
    from the page the real env shows. It is written once all resets succeeded.
    """
    seeds = list(seeds)
    env = MiniWoBRealEnv(list(names), **env_kwargs)
    tasks, lines = [], []
    try:
        for name in env.tasks:
            for seed in seeds:
                state, _ = env.reset(seed=0, options={"task": name, "page_seed": seed})
                assert env.task is not None
                tasks.append(miniwob_task(str(name), seed, env.task.instruction, state))
                record = {"miniwob_task": name, "seed": seed, "instruction": env.task.instruction}
                lines.append(json.dumps({**record, "state": state}, ensure_ascii=False))
    finally:
        env.close()
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tasks
