"""WebArena's task files; the code lives in :mod:`dreamgym_env.domains.webarena.tasks`."""

from __future__ import annotations

from dreamgym_env.domains.webarena.tasks import PathLike as PathLike
from dreamgym_env.domains.webarena.tasks import load_webarena_tasks as load_webarena_tasks
