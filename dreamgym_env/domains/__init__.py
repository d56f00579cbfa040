"""Domains: one module per simulated world, looked up by name.

:data:`BUILTIN_DOMAINS` is the one table of built-in domains: their names, Gymnasium ids and classes.
The registered ids (:mod:`dreamgym_env.registration`) and the names a user spec may not take
(:mod:`dreamgym_env.domains.spec`) are read from it. Built-in domains are imported on first use, so
``import dreamgym_env`` stays light.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import NamedTuple

from dreamgym_env.domains.base import Domain, InitialState
from dreamgym_env.errors import DomainError

__all__ = [
    "BUILTIN_DOMAINS",
    "BuiltinDomain",
    "Domain",
    "InitialState",
    "available_domains",
    "get_domain",
    "register_domain_factory",
]


class BuiltinDomain(NamedTuple):
    """One built-in domain: its simulated Gymnasium id, its class as ``"module:attribute"``, its step limit.

    ``max_steps`` repeats the class's own, so that registering the id's ``max_episode_steps`` imports
    no domain module (a test keeps the two equal).
    """

    env_id: str
    entry_point: str
    max_steps: int


BUILTIN_DOMAINS: dict[str, BuiltinDomain] = {
    "webshop": BuiltinDomain("DreamGym/WebShop-v0", "dreamgym_env.domains.webshop:WebShopDomain", 15),
    "alfworld": BuiltinDomain("DreamGym/ALFWorld-v0", "dreamgym_env.domains.alfworld:ALFWorldDomain", 50),
    "webarena": BuiltinDomain("DreamGym/WebArena-v0", "dreamgym_env.domains.webarena:WebArenaDomain", 30),
    "textworld": BuiltinDomain("DreamGym/TextWorld-v0", "dreamgym_env.domains.textworld:TextWorldDomain", 50),
}
_FACTORIES: dict[str, Callable[[], Domain]] = {}
_INSTANCES: dict[str, Domain] = {}


def register_domain_factory(name: str, factory: Callable[[], Domain]) -> None:
    """Make ``get_domain(name)`` build its domain with ``factory`` (user-defined domains).

    Raises:
        DomainError: ``name`` is a built-in domain, which a user domain may not replace.
    """
    if name in BUILTIN_DOMAINS:
        raise DomainError(
            f"{name!r} is a built-in domain and cannot be replaced; choose another name "
            f"(built-in domains: {', '.join(sorted(BUILTIN_DOMAINS))})."
        )
    _FACTORIES[name] = factory
    _INSTANCES.pop(name, None)


def available_domains() -> list[str]:
    """Names of every domain that :func:`get_domain` accepts."""
    return sorted({*BUILTIN_DOMAINS, *_FACTORIES})


def get_domain(name: str | Domain) -> Domain:
    """Return the domain called ``name`` (a :class:`Domain` instance is returned as is)."""
    if isinstance(name, Domain):
        return name
    if name not in _INSTANCES:
        if name in _FACTORIES:
            _INSTANCES[name] = _FACTORIES[name]()
        elif name in BUILTIN_DOMAINS:
            module_name, _, attr = BUILTIN_DOMAINS[name].entry_point.partition(":")
            _INSTANCES[name] = getattr(importlib.import_module(module_name), attr)()
        else:
            raise DomainError(f"Unknown domain {name!r}; available domains: {available_domains()}")
    return _INSTANCES[name]
