"""MiniWoB++, all in one package: the simulated domain, the real engine, its policies and curriculum format.

============== ===================================================================================
module         what it holds
============== ===================================================================================
``domain``     :class:`MiniWoBDomain`, the display URL, task ids and the packaged recorded pages
``engine``     the real pages: :class:`~.engine.MiniWoBEngine`, :class:`~.engine.MiniWoBRealEnv`,
               :func:`~.engine.serve_miniwob`, :func:`~.engine.record_miniwob_tasks`
``policies``   scripted solutions (:data:`~.policies.SOLVED_TASKS`) and a random clicker for
               collecting real transitions
``curriculum`` the curriculum's variant format and task validator
============== ===================================================================================

Importing this package loads the domain only; ``engine`` (it drives ``browsergym-miniwob`` and
Chromium, extra ``real``), ``policies`` and ``curriculum`` load when imported, as
:mod:`dreamgym_env.real.miniwob`, :mod:`dreamgym_env.real.miniwob_policies` and
:mod:`dreamgym_env.curriculum.miniwob` do.
"""

from __future__ import annotations

from dreamgym_env.domains.miniwob.domain import MINIWOB_DISPLAY_URL as MINIWOB_DISPLAY_URL
from dreamgym_env.domains.miniwob.domain import MiniWoBDomain as MiniWoBDomain
from dreamgym_env.domains.miniwob.domain import load_miniwob_tasks as load_miniwob_tasks
from dreamgym_env.domains.miniwob.domain import miniwob_display_urls as miniwob_display_urls
from dreamgym_env.domains.miniwob.domain import miniwob_task as miniwob_task
