"""MiniWoB++'s real engine and env; the code lives in :mod:`dreamgym_env.domains.miniwob.engine`."""

from __future__ import annotations

from dreamgym_env.domains.miniwob.engine import DEFAULT_MINIWOB_TASKS as DEFAULT_MINIWOB_TASKS
from dreamgym_env.domains.miniwob.engine import MiniWoBEngine as MiniWoBEngine
from dreamgym_env.domains.miniwob.engine import MiniWoBRealEnv as MiniWoBRealEnv
from dreamgym_env.domains.miniwob.engine import record_miniwob_tasks as record_miniwob_tasks
from dreamgym_env.domains.miniwob.engine import serve_miniwob as serve_miniwob
