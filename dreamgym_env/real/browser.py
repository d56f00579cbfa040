"""What every BrowserGym wrapper shares: how Chromium starts, how a page is read, how a step is sent.

:class:`BrowserGymEngine` is the world of the real web envs (WebArena's and MiniWoB's are thin
variants of it): Chromium's launch, the page mapping (BrowserGym's accessibility tree as the abstract
page: :func:`_browsergym_obs_to_state`), stepping and closing. :class:`BrowserOptions` is the one home
of the keywords ``DreamGym/WebArena-Real-v0`` and ``DreamGym/MiniWoB-Real-v0`` accept for the browser (``gym.make(..., headless=False,
executable_path=None)``); the wrappers validate them here and launch BrowserGym's ``BrowserEnv``
with :meth:`BrowserOptions.browser_env_kwargs`. :func:`use_system_chromium` makes Playwright run a
system Chromium (BrowserGym's pinned Playwright cannot download its own here).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dreamgym_env.config import _describe
from dreamgym_env.domains import Domain
from dreamgym_env.domains.axtree import axtree_to_state
from dreamgym_env.errors import ConfigError, DependencyNotInstalled, DreamGymError
from dreamgym_env.real.recording import EpisodeRecorder
from dreamgym_env.records import Task
from dreamgym_env.world import EngineWorld, WorldStep

DEFAULT_CHROMIUM_FLAGS: tuple[str, ...] = (
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
"""Flags that keep a headless Chromium from calling home (added to Playwright's own)."""

_SET_BY_THE_WRAPPER = frozenset({"task_entrypoint", "task_kwargs", "headless", "pw_chromium_kwargs"})


def use_system_chromium(executable: str, flags: Sequence[str] = DEFAULT_CHROMIUM_FLAGS) -> Path:
    """Make Playwright launch a system Chromium (e.g. Debian's) with ``flags``, for every browser it starts.

    BrowserGym pins a Playwright whose own browser build must be downloaded, and it launches a second
    browser (its chat window) without an ``executable_path``. This writes a launcher script that runs
    ``executable`` with ``flags`` into a Playwright browsers folder, in the place Playwright looks for
    its Chromium build, and points ``PLAYWRIGHT_BROWSERS_PATH`` there (unless already set), before
    Playwright starts.

    Returns:
        The launcher script, to pass as ``executable_path`` too.

    Raises:
        DreamGymError: ``executable`` does not exist.
    """
    if not os.path.exists(executable):
        raise DreamGymError(
            f"Chromium not found at {executable}; install it (Debian: apt-get install chromium) or pass "
            "executable_path=None to use Playwright's own browser download."
        )
    import playwright

    browsers = Path(playwright.__file__).parent / "driver" / "package" / "browsers.json"
    revision = next(
        b["revision"] for b in json.loads(browsers.read_text())["browsers"] if b["name"] == "chromium"
    )
    root = Path(
        os.environ.get("PLAYWRIGHT_BROWSERS_PATH")
        or Path(tempfile.gettempdir()) / f"dreamgym-playwright-{os.getuid()}"
    )
    os.environ.setdefault("PLAYWRIGHT_BROWSERS_PATH", str(root))
    launcher = root / f"chromium-{revision}" / "chrome-linux" / "chrome"
    script = "#!/bin/sh\nexec " + " ".join(shlex.quote(a) for a in [executable, *flags]) + ' "$@"\n'
    if not launcher.exists() or launcher.read_text() != script:
        # Written aside and renamed into place: another process may launch this path at any moment.
        launcher.parent.mkdir(parents=True, exist_ok=True)
        fd, staging = tempfile.mkstemp(dir=launcher.parent, prefix=".chrome-")
        with os.fdopen(fd, "w") as f:
            f.write(script)
        os.chmod(staging, 0o755)
        os.replace(staging, launcher)
    return launcher


class BrowserOptions(BaseModel):
    """The browser keywords of the real web envs, validated once for all of them.

    Args:
        executable_path: The Chromium to launch (default ``/usr/bin/chromium``, Debian's), through
            :func:`use_system_chromium`; ``None`` uses Playwright's own browser download.
        chromium_flags: Flags the system Chromium starts with (:data:`DEFAULT_CHROMIUM_FLAGS`).
        headless: Run Chromium without a window.
        visible_only: List only elements at least half visible on the page.
        state_mapper: BrowserGym observation dict -> state text, instead of the rule-based listing
            (e.g. an :class:`~dreamgym_env.real.extractor.LLMStateExtractor`).
        browser_kwargs: More arguments of BrowserGym's ``BrowserEnv``: ``timeout`` (Playwright's, in
            ms), ``viewport``, ``slow_mo``, ``locale``, ``pw_context_kwargs``... The ones the
            wrapper sets itself (the task, ``headless``, ``pw_chromium_kwargs``) are refused here.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    executable_path: str | None = "/usr/bin/chromium"
    chromium_flags: tuple[str, ...] = DEFAULT_CHROMIUM_FLAGS
    headless: bool = True
    visible_only: bool = False
    state_mapper: Callable[[dict[str, Any]], str] | None = None
    browser_kwargs: dict[str, Any] = Field(default_factory=dict)

    @field_validator("browser_kwargs", mode="before")
    @classmethod
    def _no_none_or_wrapper_keys(cls, value: Any) -> Any:
        if value is None:
            return {}
        if isinstance(value, Mapping):
            taken = sorted(_SET_BY_THE_WRAPPER & set(value))
            if taken:
                raise ValueError(
                    f"{', '.join(taken)} cannot go in browser_kwargs: the wrapper sets them "
                    "(pass headless=... and chromium_flags=... as keywords of the env)"
                )
        return value

    @classmethod
    def take(cls, kwargs: dict[str, Any]) -> BrowserOptions:
        """The options among an env's keyword arguments, removed from ``kwargs``.

        Raises:
            ConfigError: A value of the wrong type; the message names the keyword and what it takes.
        """
        given = {name: kwargs.pop(name) for name in list(kwargs) if name in cls.model_fields}
        try:
            return cls.model_validate(given)
        except ValidationError as e:
            raise ConfigError(f"Invalid browser option: {_describe(e)}") from e

    def launch_kwargs(self) -> dict[str, Any]:
        """Playwright's ``chromium.launch`` arguments (BrowserGym's ``pw_chromium_kwargs``)."""
        launch: dict[str, Any] = {"chromium_sandbox": False}
        if self.executable_path:
            launch["executable_path"] = str(use_system_chromium(self.executable_path, self.chromium_flags))
        return launch

    def browser_env_kwargs(self) -> dict[str, Any]:
        """BrowserGym ``BrowserEnv`` arguments for these options (all but the task)."""
        return {"headless": self.headless, "pw_chromium_kwargs": self.launch_kwargs(), **self.browser_kwargs}


_FINAL = re.compile(r"\s*(send_msg_to_user|report_infeasible)\(")


def _browsergym_obs_to_state(
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


class BrowserGymEngine(EngineWorld):
    """What every BrowserGym world shares: Chromium's launch, the page mapping, stepping and closing.

    Variants (:class:`~dreamgym_env.domains.webarena.engine.WebArenaEngine`,
    :class:`~dreamgym_env.domains.miniwob.engine.MiniWoBEngine`) implement :meth:`reset` (which task, then
    :meth:`_open`); a step sends the action to BrowserGym as is, and an action it cannot execute
    leaves the page and puts BrowserGym's message in ``info["last_action_error"]``.

    Args:
        domain: The simulated domain mirrored (its id names the env in errors).
        browser_options: The browser keywords (:class:`BrowserOptions`, their one definition, so every
            wrapper accepts and checks the same ones); default its defaults.
        record_dir: Write each episode there as an AgentLab-style folder
            (:mod:`~dreamgym_env.real.recording`).
        record_screenshots: Keep each observation's screenshot in the recording.
    """

    skip_generic: ClassVar[bool] = True
    """Whether the listing leaves out ``generic`` nodes (see :func:`~dreamgym_env.domains.axtree.axtree_to_state`)."""

    def __init__(
        self,
        domain: Domain,
        *,
        browser_options: BrowserOptions | None = None,
        record_dir: str | os.PathLike[str] | None = None,
        record_screenshots: bool = False,
    ) -> None:
        self.domain = domain
        self.browser_options = browser_options if browser_options is not None else BrowserOptions()
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
        return _browsergym_obs_to_state(
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

    def advance(self, action: str) -> WorldStep:
        """One BrowserGym action on the page; the page it leads to is the next state."""
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

    def close(self) -> None:
        """Close the browser (and BrowserGym's Playwright once no other env uses it)."""
        self._close_browser()
        _playwright_users.release(self)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_browser"] = None
        state["_last_obs"] = {}
        state["_recorder"] = None
        return state
