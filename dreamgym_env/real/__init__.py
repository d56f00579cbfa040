"""Real environments behind the simulated envs' interface, and the real-to-abstract observation mapping.

Each real wrapper speaks exactly the interface of its simulated counterpart (``FreeText`` spaces, the
same ``info`` keys with ``simulated`` False and ``source`` "real"), so a policy moves from simulator to
real environment without code changes. Importing this package imports no engine: alfworld, textworld,
playwright/browsergym and WebShop load when an env is first reset.

=============================== ======================================= ===========================
id                              wrapper                                 engine (extra ``real``)
=============================== ======================================= ===========================
``DreamGym/ALFWorld-Real-v0``   :class:`~.alfworld.ALFWorldRealEnv`     alfworld + TextWorld
``DreamGym/TextWorld-Real-v0``  :class:`~.textworld.TextWorldRealEnv`   textworld (``tw-make``)
``DreamGym/WebShop-Real-v0``    :class:`~.webshop.WebShopRealEnv`       a WebShop checkout
``DreamGym/WebArena-Real-v0``   :class:`~.webarena.WebArenaRealEnv`   browsergym-core + Chromium
``DreamGym/MiniWoB-Real-v0``    :class:`~.miniwob.MiniWoBRealEnv`       browsergym-miniwob + miniwob
=============================== ======================================= ===========================
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

from dreamgym_env.domains import BUILTIN_DOMAINS

__all__ = ["REAL_IDS", "register_real_envs"]

REAL_IDS: dict[str, str] = {
    builtin.real.env_id: builtin.real.entry_point for builtin in BUILTIN_DOMAINS.values()
}
"""Gymnasium id -> entry point of each real wrapper, read from the domain table
(:data:`dreamgym_env.domains.BUILTIN_DOMAINS`)."""


def register_real_envs() -> None:
    """Register every real id (idempotent). Entry points are strings: nothing heavy is imported here.

    Each real id carries the same ``max_episode_steps`` as its simulated twin (the domain's step limit,
    which is also the real wrapper's own ``max_steps`` default), so swapping a simulated id for its
    real one keeps the episode length and Gymnasium's ``TimeLimit``.
    """
    for builtin in BUILTIN_DOMAINS.values():
        if builtin.real.env_id in registry:
            continue
        register(
            id=builtin.real.env_id,
            entry_point=builtin.real.entry_point,
            max_episode_steps=builtin.max_steps,
            nondeterministic=builtin.real.nondeterministic,
        )
