"""TextWorld, all in one package: the simulated domain, its text formats, and the real engine.

=============== ==================================================================================
module          what it holds
=============== ==================================================================================
``domain``      :class:`TextWorldDomain` and the state renderers, quest line, verbs and task ids
``state``       the canonical state: parsing, the layout a dream keeps, what a step may change
``facts``       the canonical state rendered from the engine's facts, and the step results
``goal``        the game's winning and losing conditions, read from its facts
``instruction`` the goal read from the quest's words (the instruction, never the game's goal)
``outcomes``    what a command can do from a state: the outcomes offered to the experience model
``plan``        the walkthrough an instruction states, placed on the map
``engine``      the real games: :class:`~.engine.TextWorldEngine`, :class:`~.engine.TextWorldRealEnv`,
                :func:`~.engine.make_games`, :func:`~.engine.tasks_from_games`,
                :func:`~.engine.play_noisy_expert`
``suite``       a fixed benchmark of real games split into train and held out
``curriculum``  the curriculum's variant format and task validator
=============== ==================================================================================

Importing this package loads the domain and its formats only; ``curriculum``, ``engine`` and ``suite``
(the last two drive the ``textworld`` package, extra ``real``) load when imported, as
:mod:`dreamgym_env.real.textworld` and :mod:`dreamgym_env.real.textworld_suite` do.
"""

from __future__ import annotations

from dreamgym_env.domains.textworld.domain import (
    TEXTWORLD_VERBS,
    TextWorldDomain,
    render_textworld_start,
    render_textworld_state,
    state_quest,
    textworld_task_id,
    with_quest,
)
from dreamgym_env.domains.textworld.facts import QUEST_PREFIX

__all__ = [
    "QUEST_PREFIX",
    "TEXTWORLD_VERBS",
    "TextWorldDomain",
    "render_textworld_start",
    "render_textworld_state",
    "state_quest",
    "textworld_task_id",
    "with_quest",
]
