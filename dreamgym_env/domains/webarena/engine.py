"""WebArena (real): BrowserGym's web tasks behind ``DreamGym/WebArena-v0``'s interface.

BrowserGym (ServiceNow) drives Chromium through Playwright and runs web tasks (WebArena's among
them, with ``browsergym-webarena``). :class:`WebArenaRealEnv` keeps BrowserGym's action language (the
simulated WebArena domain already uses it: ``click('12')``, ``fill('5', 'text')``...) and maps its
accessibility-tree observation to the abstract page (:class:`~dreamgym_env.real.browser.BrowserGymEngine`,
the world every BrowserGym wrapper shares; :class:`WebArenaEngine` is its WebArena variant), or
through any ``state_mapper`` such as an :class:`~dreamgym_env.real.extractor.LLMStateExtractor`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dreamgym_env.domains.webarena.domain import WebArenaDomain
from dreamgym_env.episode import EpisodeEnv, WorldAttribute
from dreamgym_env.errors import DependencyNotInstalled, DreamGymError
from dreamgym_env.real.browser import BrowserGymEngine, BrowserOptions
from dreamgym_env.records import Task
from dreamgym_env.world import EpisodeStart


class WebArenaEngine(BrowserGymEngine):
    """BrowserGym's web tasks in Chromium: the world of ``DreamGym/WebArena-Real-v0`` (:class:`WebArenaRealEnv`).

    Args:
        tasks: WebArena :class:`Task` objects (``metadata["start_url"]``) drawn at reset.
        start_url: A single open-ended task's page (with ``goal``).
        goal: The open-ended task's instruction.
        task_entrypoint: Any BrowserGym task class instead (with ``task_kwargs``).
        task_kwargs: Its arguments.
        site_urls: Where WebArena's sites are (:class:`~dreamgym_env.domains.webarena.WebArenaDomain`).
        **browser: :class:`~dreamgym_env.real.browser.BrowserGymEngine`'s arguments.
    """

    domain: WebArenaDomain

    def __init__(
        self,
        tasks: Sequence[Task] | None = None,
        *,
        start_url: str | None = None,
        goal: str = "",
        task_entrypoint: Any = None,
        task_kwargs: dict[str, Any] | None = None,
        site_urls: dict[str, str] | None = None,
        **browser: Any,
    ) -> None:
        super().__init__(WebArenaDomain(site_urls), **browser)
        self.tasks = list(tasks or [])
        self.start_url = start_url
        self.goal = goal
        self.task_entrypoint = task_entrypoint
        self.task_kwargs = dict(task_kwargs or {})
        if not (self.tasks or start_url or task_entrypoint):
            raise DreamGymError(
                "Give tasks=[...], start_url=... (with goal=...), or task_entrypoint=... to play."
            )

    def _choose(self, options: dict[str, Any], rng: np.random.Generator) -> tuple[Task, Any, dict[str, Any]]:
        """The task of this episode, BrowserGym's task class and its arguments."""
        if options.get("task") is not None or self.tasks:
            task = options.get("task") or self.tasks[int(rng.integers(len(self.tasks)))]
            if not isinstance(task, Task):
                raise DreamGymError(f"options['task'] must be a Task, got {type(task).__name__}")
            url = str(task.metadata.get("start_url") or "")
            if not url:
                raise DreamGymError(f"Task {task.task_id!r} has no metadata['start_url'] to open.")
            first = self.domain.resolve_url(url.split("|AND|")[0])
            return task, None, {"start_url": first, "goal": task.instruction}
        if self.task_entrypoint is not None:
            task = Task(
                task_id=f"browsergym-{getattr(self.task_entrypoint, '__name__', 'task')}",
                domain="webarena",
                instruction=self.goal,
                source="browsergym",
            )
            return task, self.task_entrypoint, self.task_kwargs
        url = str(options.get("start_url") or self.start_url)
        goal = str(options.get("goal") or self.goal)
        task = Task(
            task_id=f"openended-{url}",
            domain="webarena",
            instruction=goal,
            metadata={"start_url": url},
            source="browsergym",
        )
        return task, None, {"start_url": url, "goal": goal}

    def reset(self, options: dict[str, Any], rng: np.random.Generator) -> EpisodeStart:
        """Open the episode's task (``options["task"]``, or ``["start_url"]`` and ``["goal"]``)."""
        try:
            from browsergym.core.task import OpenEndedTask
        except ImportError as e:
            raise DependencyNotInstalled("browsergym-core", "real", "DreamGym/WebArena-Real-v0") from e
        task, entrypoint, task_kwargs = self._choose(options, rng)
        obs = self._open(entrypoint or OpenEndedTask, task_kwargs, int(rng.integers(2**31 - 1)))
        if entrypoint is not None and obs.get("goal"):
            task = task.model_copy(update={"instruction": str(obs["goal"])})
        name = entrypoint.get_task_id() if hasattr(entrypoint, "get_task_id") else f"webarena.{task.task_id}"
        self._record(str(name), task, obs)
        return EpisodeStart(task=task, state=self._map(obs), admissible_actions=[])


class WebArenaRealEnv(EpisodeEnv):
    """A real browser task (BrowserGym), observed like ``DreamGym/WebArena-v0``.

    ## Description
    Each episode runs one BrowserGym task in a fresh headless Chromium: WebArena's tasks (pass their
    :class:`Task` objects, whose ``start_url`` resolves with the WebArena domain's ``site_urls``, or a
    BrowserGym task class such as ``browsergym.webarena``'s) or an open-ended task on any page
    (``start_url`` and ``goal``). Observations are the tab lines, the URL and the page's
    accessibility tree as BrowserGym lists it (``[bid] role 'name'`` lines indented by depth, ``bid``
    being BrowserGym's element id).

    ## Action Space / Observation Space
    ``FreeText``: BrowserGym's high-level actions, as in the simulated env.

    ## Rewards
    The task's own reward, passed through (WebArena's evaluators give 1.0 on success). Open-ended
    tasks have no evaluator: their reward is 0.

    ## Episode End
    Terminated when the task says so, or after ``send_msg_to_user(...)``/``report_infeasible(...)``
    (the simulated domain's final actions); truncated after 30 steps. An action BrowserGym cannot
    execute leaves the page and puts BrowserGym's message in ``info["last_action_error"]``.

    ## Arguments
    ``tasks``: WebArena :class:`Task` objects (``metadata["start_url"]``) drawn at reset;
    ``start_url``/``goal``: a single open-ended task; ``task_entrypoint``/``task_kwargs``: any
    BrowserGym task class instead. Browser keywords, validated by
    :class:`~dreamgym_env.real.browser.BrowserOptions`: ``executable_path`` (the Chromium to launch;
    default ``/usr/bin/chromium``, Debian's; ``None`` uses Playwright's download), ``chromium_flags``
    (:data:`DEFAULT_CHROMIUM_FLAGS`), ``headless``, ``visible_only``, ``state_mapper`` (BrowserGym
    observation dict -> state; default the rule-based mapping) and ``browser_kwargs`` (more
    ``BrowserEnv`` arguments, e.g. Playwright's ``timeout`` in ms). ``record_dir``: write each episode there as an AgentLab-style folder
    (:mod:`~dreamgym_env.real.recording`; ``dreamgym buffer import --format browsergym`` reads it).
    Reset options: ``{"task": Task}`` or ``{"start_url": ..., "goal": ...}``. Other keywords are
    :class:`~dreamgym_env.episode.EpisodeEnv`'s.

    It is ``EpisodeEnv(WebArenaDomain(site_urls), WebArenaEngine(...))``: the simulated env with the
    browser as its world.
    """

    world: WebArenaEngine

    def __init__(
        self,
        tasks: Sequence[Task] | None = None,
        *,
        start_url: str | None = None,
        goal: str = "",
        task_entrypoint: Any = None,
        task_kwargs: dict[str, Any] | None = None,
        site_urls: dict[str, str] | None = None,
        record_dir: str | os.PathLike[str] | None = None,
        record_screenshots: bool = False,
        **kwargs: Any,
    ) -> None:
        engine = WebArenaEngine(
            tasks,
            start_url=start_url,
            goal=goal,
            task_entrypoint=task_entrypoint,
            task_kwargs=task_kwargs,
            site_urls=site_urls,
            browser_options=BrowserOptions.take(kwargs),
            record_dir=record_dir,
            record_screenshots=record_screenshots,
        )
        super().__init__(engine.domain, engine, **kwargs)

    webarena = WorldAttribute[WebArenaDomain](
        "The WebArena domain, with the ``site_urls`` task URLs resolve against.", name="domain"
    )
    tasks = WorldAttribute[list[Task]]("The tasks reset draws from.")
    browser_options = WorldAttribute[BrowserOptions]("The browser keywords, validated.")
    last_browsergym_obs = WorldAttribute[dict[str, Any]](
        "BrowserGym's raw observation of the last reset or step (axtree, DOM, screenshot...)."
    )
