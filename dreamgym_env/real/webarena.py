"""WebArena's real engine and env; the code lives in :mod:`dreamgym_env.domains.webarena.engine`."""

from __future__ import annotations

from dreamgym_env.domains.webarena.engine import WebArenaEngine as WebArenaEngine
from dreamgym_env.domains.webarena.engine import WebArenaRealEnv as WebArenaRealEnv
