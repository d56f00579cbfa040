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
``DreamGym/WebArena-Real-v0``   :class:`~.webarena.BrowserGymRealEnv`   browsergym-core + Chromium
=============================== ======================================= ===========================
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

__all__ = ["REAL_IDS", "register_real_envs"]

REAL_IDS: dict[str, str] = {
    "DreamGym/ALFWorld-Real-v0": "dreamgym_env.real.alfworld:ALFWorldRealEnv",
    "DreamGym/TextWorld-Real-v0": "dreamgym_env.real.textworld:TextWorldRealEnv",
    "DreamGym/WebShop-Real-v0": "dreamgym_env.real.webshop:WebShopRealEnv",
    "DreamGym/WebArena-Real-v0": "dreamgym_env.real.webarena:BrowserGymRealEnv",
}
"""Gymnasium id -> entry point of each real wrapper."""


def register_real_envs() -> None:
    """Register every real id (idempotent). Entry points are strings: nothing heavy is imported here."""
    for env_id, entry_point in REAL_IDS.items():
        if env_id in registry:
            continue
        # Real engines are deterministic given the game and seed except the web ones (live pages).
        register(
            id=env_id,
            entry_point=entry_point,
            nondeterministic=env_id in ("DreamGym/WebShop-Real-v0", "DreamGym/WebArena-Real-v0"),
        )
