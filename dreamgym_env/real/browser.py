"""How the real web envs start Chromium and read its pages: the options every BrowserGym wrapper takes.

:class:`BrowserOptions` is the one home of the keywords ``DreamGym/WebArena-Real-v0`` and
``DreamGym/MiniWoB-Real-v0`` accept for the browser (``gym.make(..., headless=False,
executable_path=None)``); the wrappers validate them here and launch BrowserGym's ``BrowserEnv``
with :meth:`BrowserOptions.browser_env_kwargs`. :func:`use_system_chromium` makes Playwright run a
system Chromium (BrowserGym's pinned Playwright cannot download its own here).
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dreamgym_env.config import _describe
from dreamgym_env.errors import ConfigError, DreamGymError

__all__ = ["DEFAULT_CHROMIUM_FLAGS", "BrowserOptions", "use_system_chromium"]

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
