"""ALFWorld, all in one package: the simulated domain, its tasks, and the real engine.

=========== ======================================================================================
module      what it holds
=========== ======================================================================================
``domain``  :class:`ALFWorldDomain`, the room layouts and the first state
``tasks``   the six task types, their goal phrasings and parser, task ids and the task files
            (ReAct prompts, ALFRED ``traj_data.json``)
``engine``  the real games: :class:`~.engine.ALFWorldEngine`, :class:`~.engine.ALFWorldRealEnv`
=========== ======================================================================================

Importing this package loads the domain and its tasks only; ``engine`` (it drives the ``alfworld``
and ``textworld`` packages, extra ``real``) loads when imported, as :mod:`dreamgym_env.real.alfworld`
does.
"""

from __future__ import annotations

from dreamgym_env.domains.alfworld.domain import LAMP_STANDS, LAMPS, ROOM_RECEPTACLES, ALFWorldDomain

__all__ = ["LAMPS", "LAMP_STANDS", "ROOM_RECEPTACLES", "ALFWorldDomain"]
