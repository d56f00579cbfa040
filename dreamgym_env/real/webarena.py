"""WebArena (real): BrowserGym browser environments behind ``DreamGym/WebArena-v0``'s interface.

BrowserGym (ServiceNow) drives Chromium through Playwright and runs web tasks (WebArena's among
them, with ``browsergym-webarena``). This wrapper keeps BrowserGym's action language (the simulated
WebArena domain already uses it: ``click('12')``, ``fill('5', 'text')``...) and maps its
accessibility-tree observation to the abstract page: tab lines, the URL, then BrowserGym's own
``flatten_axtree_to_str`` listing (``[bid] role 'name'``, what AgentLab logs;
:func:`~dreamgym_env.real.axtree.axtree_to_state`), or through any ``state_mapper`` such as an
:class:`~dreamgym_env.real.extractor.LLMStateExtractor`. :class:`BrowserGymEnvBase` is the part every
BrowserGym wrapper shares (MiniWoB's is :mod:`dreamgym_env.real.miniwob`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any, ClassVar

from dreamgym_env.domains import Domain
from dreamgym_env.domains.webarena import WebArenaDomain
from dreamgym_env.episode import EpisodeStart, WorldStep
from dreamgym_env.errors import DependencyNotInstalled, DreamGymError
from dreamgym_env.real.axtree import axtree_to_state
from dreamgym_env.real.base import RealTextEnv
from dreamgym_env.real.browser import DEFAULT_CHROMIUM_FLAGS, BrowserOptions, use_system_chromium
from dreamgym_env.real.recording import EpisodeRecorder
from dreamgym_env.types import Task

__all__ = [
    "DEFAULT_CHROMIUM_FLAGS",
    "BrowserGymEnvBase",
    "BrowserOptions",
    "BrowserGymRealEnv",
    "browsergym_obs_to_state",
    "use_system_chromium",
]

_FINAL = re.compile(r"\s*(send_msg_to_user|report_infeasible)\(")


def browsergym_obs_to_state(
    obs: dict[str, Any], *, visible_only: bool = False, skip_generic: bool = True
) -> str:
    """A BrowserGym observation as the abstract page: tab lines, ``URL: ...``, BrowserGym's own listing."""
    return axtree_to_state(
        obs.get("axtree_object") or {},
        url=str(obs.get("url", "")),
        titles=list(obs.get("open_pages_titles") or ()),
        active_index=int(obs.get("active_page_index", 0) or 0),
        extra_properties=obs.get("extra_element_properties"),
        visible_only=visible_only,
        skip_generic=skip_generic,
    )


class _PlaywrightUsers:
    """Stops BrowserGym's process-wide Playwright once the last of our envs that used it is closed.

    BrowserGym starts one sync Playwright per process and never stops it; while it runs, the thread
    that started it has a running event loop, so ``asyncio.run`` (and every library that calls it)
    fails there. A Playwright that something else started is left alone.
    """

    def __init__(self) -> None:
        self._users: set[int] = set()
        self._owned = False

    def acquire(self, env: object) -> None:
        import browsergym.core as core

        if not self._users and core._PLAYWRIGHT is None:
            self._owned = True
        self._users.add(id(env))

    def release(self, env: object) -> None:
        if id(env) not in self._users:
            return
        self._users.discard(id(env))
        if self._users or not self._owned:
            return
        import browsergym.core as core

        playwright, self._owned = core._PLAYWRIGHT, False
        if playwright is not None:
            core._set_global_playwright(None)
            playwright.stop()


_playwright_users = _PlaywrightUsers()


class BrowserGymEnvBase(RealTextEnv):
    """What every BrowserGym wrapper shares: Chromium's launch, the page mapping, stepping and closing.

    Subclasses take their task keywords and pass the rest here: the browser keywords become
    :attr:`browser_options` (:class:`~dreamgym_env.real.browser.BrowserOptions`, their one
    definition), so every wrapper accepts and checks the same ones.

    Subclasses implement :meth:`_real_reset` (which task, then :meth:`_open`); a step sends the action
    to BrowserGym as is, and an action it cannot execute leaves the page and puts BrowserGym's message
    in ``info["last_action_error"]``.
    """

    skip_generic: ClassVar[bool] = True
    """Whether the listing leaves out ``generic`` nodes (see :func:`~dreamgym_env.real.axtree.axtree_to_state`)."""

    def __init__(
        self,
        domain: Domain,
        *,
        record_dir: str | os.PathLike[str] | None = None,
        record_screenshots: bool = False,
        **kwargs: Any,
    ) -> None:
        """Take the browser keywords (:class:`~dreamgym_env.real.browser.BrowserOptions`) out of ``kwargs``.

        The rest (``max_steps``, ``max_state_chars``, ``render_mode``...) go to
        :class:`~dreamgym_env.real.base.RealTextEnv`, which refuses unknown ones.

        Raises:
            ConfigError: A browser keyword of the wrong type.
        """
        self.browser_options = BrowserOptions.take(kwargs)
        super().__init__(domain, **kwargs)
        self.record_dir = record_dir
        self.record_screenshots = record_screenshots
        self._recorder: EpisodeRecorder | None = None
        self._browser: Any = None
        self._last_obs: dict[str, Any] = {}

    @property
    def last_browsergym_obs(self) -> dict[str, Any]:
        """BrowserGym's raw observation of the last reset or step (axtree, DOM, screenshot...)."""
        return self._last_obs

    def _map(self, obs: dict[str, Any]) -> str:
        self._last_obs = obs
        if self.browser_options.state_mapper is not None:
            return self.browser_options.state_mapper(obs)
        return browsergym_obs_to_state(
            obs, visible_only=self.browser_options.visible_only, skip_generic=self.skip_generic
        )

    def _open(self, entrypoint: Any, task_kwargs: dict[str, Any], seed: int) -> dict[str, Any]:
        """Start BrowserGym's task ``entrypoint(seed=seed, **task_kwargs)`` in a fresh browser."""
        try:
            from browsergym.core.env import BrowserEnv
        except ImportError as e:
            raise DependencyNotInstalled("browsergym-core", "real", self.domain.env_id + " (real)") from e
        self._close_browser()
        _playwright_users.acquire(self)
        self._browser = BrowserEnv(
            task_entrypoint=entrypoint, task_kwargs=task_kwargs, **self.browser_options.browser_env_kwargs()
        )
        obs, _ = self._browser.reset(seed=seed)
        return dict(obs)

    def _record(self, task_name: str, task: Task, obs: dict[str, Any]) -> None:
        """Start recording the episode (when ``record_dir`` is set): call once the task is known."""
        self._recorder = None
        if self.record_dir is not None:
            self._recorder = EpisodeRecorder(
                self.record_dir, task_name, task, obs, screenshots=self.record_screenshots
            )

    def _real_step(self, action: str) -> WorldStep:
        obs, reward, terminated, truncated, info = self._browser.step(action)
        if self._recorder is not None:
            self._recorder.step(action, obs, float(reward), bool(terminated), bool(truncated), info)
        error = str(obs.get("last_action_error") or "") or None
        final = bool(_FINAL.match(action)) and error is None
        return WorldStep(
            state=self._map(obs),
            reward=float(reward),
            done=bool(terminated) or final,
            success=float(reward) >= 1.0,
            admissible_actions=[],
            last_action_error=error,
        )

    def _close_browser(self) -> None:
        if self._browser is not None:
            self._browser.close()
            self._browser = None

    def _real_close(self) -> None:
        self._close_browser()
        _playwright_users.release(self)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_browser"] = None
        state["_last_obs"] = {}
        state["_recorder"] = None
        return state


class BrowserGymRealEnv(BrowserGymEnvBase):
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
