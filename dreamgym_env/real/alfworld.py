"""ALFWorld's real engine and env; the code lives in :mod:`dreamgym_env.domains.alfworld.engine`."""

from __future__ import annotations

from dreamgym_env.domains.alfworld.engine import ALFWorldEngine as ALFWorldEngine
from dreamgym_env.domains.alfworld.engine import ALFWorldRealEnv as ALFWorldRealEnv
from dreamgym_env.domains.alfworld.engine import PathLike as PathLike
