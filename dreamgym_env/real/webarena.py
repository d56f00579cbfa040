"""WebArena (real): BrowserGym's web tasks behind ``DreamGym/WebArena-v0``'s interface.

BrowserGym (ServiceNow) drives Chromium through Playwright and runs web tasks (WebArena's among
them, with ``browsergym-webarena``). :class:`WebArenaRealEnv` keeps BrowserGym's action language (the
simulated WebArena domain already uses it: ``click('12')``, ``fill('5', 'text')``...) and maps its
accessibility-tree observation to the abstract page (:class:`~dreamgym_env.real.browser.BrowserGymEnv`,
the part every BrowserGym wrapper shares), or through any ``state_mapper`` such as an
:class:`~dreamgym_env.real.extractor.LLMStateExtractor`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dreamgym_env.domains.webarena import WebArenaDomain
from dreamgym_env.episode import EpisodeStart
from dreamgym_env.errors import DependencyNotInstalled, DreamGymError
from dreamgym_env.real.browser import (
    BrowserGymEnv,
)
from dreamgym_env.records import Task


class WebArenaRealEnv(BrowserGymEnv):
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
    Reset options: ``{"task": Task}`` or ``{"start_url": ..., "goal": ...}``.
    """

    def __init__(
        self,
        tasks: Sequence[Task] | None = None,
        *,
        start_url: str | None = None,
        goal: str = "",
        task_entrypoint: Any = None,
        task_kwargs: dict[str, Any] | None = None,
        site_urls: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        domain = WebArenaDomain(site_urls)
        super().__init__(domain, **kwargs)
        self.webarena = domain
        self.tasks = list(tasks or [])
        self.start_url = start_url
        self.goal = goal
        self.task_entrypoint = task_entrypoint
        self.task_kwargs = dict(task_kwargs or {})
        if not (self.tasks or start_url or task_entrypoint):
            raise DreamGymError(
                "Give tasks=[...], start_url=... (with goal=...), or task_entrypoint=... to play."
            )

    def _choose(self, options: dict[str, Any]) -> tuple[Task, Any, dict[str, Any]]:
        """The task of this episode, BrowserGym's task class and its arguments."""
        if options.get("task") is not None or self.tasks:
            task = options.get("task") or self.tasks[int(self.np_random.integers(len(self.tasks)))]
            if not isinstance(task, Task):
                raise DreamGymError(f"options['task'] must be a Task, got {type(task).__name__}")
            url = str(task.metadata.get("start_url") or "")
            if not url:
                raise DreamGymError(f"Task {task.task_id!r} has no metadata['start_url'] to open.")
            first = self.webarena.resolve_url(url.split("|AND|")[0])
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

    def _real_reset(self, options: dict[str, Any]) -> EpisodeStart:
        try:
            from browsergym.core.task import OpenEndedTask
        except ImportError as e:
            raise DependencyNotInstalled("browsergym-core", "real", "DreamGym/WebArena-Real-v0") from e
        task, entrypoint, task_kwargs = self._choose(options)
        obs = self._open(entrypoint or OpenEndedTask, task_kwargs, int(self.np_random.integers(2**31 - 1)))
        if entrypoint is not None and obs.get("goal"):
            task = task.model_copy(update={"instruction": str(obs["goal"])})
        name = entrypoint.get_task_id() if hasattr(entrypoint, "get_task_id") else f"webarena.{task.task_id}"
        self._record(str(name), task, obs)
        return EpisodeStart(task=task, state=self._map(obs), admissible_actions=[])
