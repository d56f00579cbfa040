"""WebShop's task files; the code lives in :mod:`dreamgym_env.domains.webshop.tasks`."""

from __future__ import annotations

from dreamgym_env.domains.webshop.tasks import OPTIONS_KEY as OPTIONS_KEY
from dreamgym_env.domains.webshop.tasks import PathLike as PathLike
from dreamgym_env.domains.webshop.tasks import load_webshop_goals as load_webshop_goals
from dreamgym_env.domains.webshop.tasks import parse_price_upper as parse_price_upper
from dreamgym_env.domains.webshop.tasks import session_goal_metadata as session_goal_metadata
from dreamgym_env.domains.webshop.tasks import webshop_task_id as webshop_task_id
