"""ALFWorld's tasks; the code lives in :mod:`dreamgym_env.domains.alfworld.tasks`."""

from __future__ import annotations

from dreamgym_env.domains.alfworld.tasks import ALFWORLD_GOAL_TEMPLATES as ALFWORLD_GOAL_TEMPLATES
from dreamgym_env.domains.alfworld.tasks import ALFWORLD_TASK_TYPES as ALFWORLD_TASK_TYPES
from dreamgym_env.domains.alfworld.tasks import ALFWORLD_TOOLS as ALFWORLD_TOOLS
from dreamgym_env.domains.alfworld.tasks import PathLike as PathLike
from dreamgym_env.domains.alfworld.tasks import alfworld_react_game_id as alfworld_react_game_id
from dreamgym_env.domains.alfworld.tasks import alfworld_react_task as alfworld_react_task
from dreamgym_env.domains.alfworld.tasks import alfworld_tasks_from_templates as alfworld_tasks_from_templates
from dreamgym_env.domains.alfworld.tasks import alfworld_trial_task_id as alfworld_trial_task_id
from dreamgym_env.domains.alfworld.tasks import load_alfworld_react_tasks as load_alfworld_react_tasks
from dreamgym_env.domains.alfworld.tasks import load_alfworld_traj_data as load_alfworld_traj_data
from dreamgym_env.domains.alfworld.tasks import make_alfworld_task as make_alfworld_task
from dreamgym_env.domains.alfworld.tasks import parse_alfworld_goal as parse_alfworld_goal
