"""MiniWoB++'s collection policies; the code lives in :mod:`dreamgym_env.domains.miniwob.policies`."""

from __future__ import annotations

from dreamgym_env.domains.miniwob.policies import SOLVED_TASKS as SOLVED_TASKS
from dreamgym_env.domains.miniwob.policies import Node as Node
from dreamgym_env.domains.miniwob.policies import find as find
from dreamgym_env.domains.miniwob.policies import interactive_actions as interactive_actions
from dreamgym_env.domains.miniwob.policies import nodes as nodes
from dreamgym_env.domains.miniwob.policies import random_action as random_action
from dreamgym_env.domains.miniwob.policies import solution as solution
