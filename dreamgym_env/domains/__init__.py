"""Domains: one module per simulated world, looked up by name.

Built-in domains are imported on first use, so ``import dreamgym_env`` stays light.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from dreamgym_env.domains.base import Domain, InitialState
from dreamgym_env.errors import DomainError

__all__ = ["Domain", "InitialState", "available_domains", "get_domain", "register_domain_factory"]

_BUILTIN: dict[str, str] = {
    "webshop": "dreamgym_env.domains.webshop:WebShopDomain",
    "alfworld": "dreamgym_env.domains.alfworld:ALFWorldDomain",
    "webarena": "dreamgym_env.domains.webarena:WebArenaDomain",
    "textworld": "dreamgym_env.domains.textworld:TextWorldDomain",
}
_FACTORIES: dict[str, Callable[[], Domain]] = {}
_INSTANCES: dict[str, Domain] = {}


def register_domain_factory(name: str, factory: Callable[[], Domain]) -> None:
    """Make ``get_domain(name)`` build its domain with ``factory`` (user-defined domains)."""
    _FACTORIES[name] = factory
    _INSTANCES.pop(name, None)


def available_domains() -> list[str]:
    """Names of every domain that :func:`get_domain` accepts."""
    return sorted({*_BUILTIN, *_FACTORIES})


def get_domain(name: str | Domain) -> Domain:
    """Return the domain called ``name`` (a :class:`Domain` instance is returned as is)."""
    if isinstance(name, Domain):
        return name
    if name not in _INSTANCES:
        if name in _FACTORIES:
            _INSTANCES[name] = _FACTORIES[name]()
        elif name in _BUILTIN:
            module_name, _, attr = _BUILTIN[name].partition(":")
            _INSTANCES[name] = getattr(importlib.import_module(module_name), attr)()
        else:
            raise DomainError(f"Unknown domain {name!r}; available domains: {available_domains()}")
    return _INSTANCES[name]
