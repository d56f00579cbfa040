"""Domains: one module (or package) per simulated world, looked up by name.

:data:`BUILTIN_DOMAINS` is the one table of built-in domains. A row names everything about a domain
that lives outside its module: the simulated Gymnasium id and step limit, the class, the real
environment (id and wrapper), and the curriculum's task format and validator. Everything else the
domain owns (state rendering, task ids, hidden-fact keys, admissible actions, seed tasks, task-file
loaders through ``load_tasks``) is in or reached from its class's module.

Derived from the table: the registered simulated ids (:mod:`dreamgym_env.registration`), the real ids
(:data:`dreamgym_env.real.REAL_IDS`), the names and ids a user spec may not take
(:mod:`dreamgym_env.domains.spec`), and the curriculum's formats and validators
(:func:`dreamgym_env.curriculum.formats.get_format`, :func:`dreamgym_env.curriculum.validators.get_validator`).
Entry points are ``"module:attribute"`` strings, imported on first use, so ``import dreamgym_env``
stays light.

A domain that is a package (``domains/<name>/``) lists the names it re-exports from its modules once,
in the package's ``__all__``; the module they come from does not list them again.

Step limits: a row's ``max_steps`` is the one definition of the domain's default episode step limit.
The domain class's :attr:`~dreamgym_env.domains.base.Domain.max_steps` reads it, and so, through the
class, do every env's default (:class:`~dreamgym_env.episode.EpisodeEnv`: the simulated env, the native
vector env and the real wrappers); :mod:`dreamgym_env.registration` registers it as the simulated and
the real id's ``max_episode_steps`` straight from the row, so registering imports no domain module. Per env, it is
overridden by ``max_steps=N`` (:attr:`dreamgym_env.config.EnvConfig.max_steps`; ``None`` keeps the
default) and by Gymnasium's ``max_episode_steps=N`` (``-1`` drops Gymnasium's limit); an episode is
truncated once, at the smaller of the two (``docs/training_rl.md``, "Step limits").
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, NamedTuple

from dreamgym_env.domains.base import Domain, InitialState
from dreamgym_env.errors import DomainError

__all__ = [
    "BUILTIN_DOMAINS",
    "BuiltinDomain",
    "Domain",
    "InitialState",
    "RealEnv",
    "available_domains",
    "get_domain",
    "load_entry_point",
    "register_domain_factory",
]


class RealEnv(NamedTuple):
    """A built-in domain's real environment: its Gymnasium id and wrapper as ``"module:attribute"``.

    ``nondeterministic``: the engine can answer the same seed and actions differently (live web pages);
    the text games are deterministic given the game and seed.
    """

    env_id: str
    entry_point: str
    nondeterministic: bool = False


class BuiltinDomain(NamedTuple):
    """One built-in domain, everything about it that lives outside its module.

    Attributes:
        env_id: The simulated Gymnasium id.
        entry_point: The :class:`Domain` subclass, ``"module:attribute"``.
        max_steps: The domain's default episode step limit, defined here only (see "Step limits"
            above): the class's ``max_steps`` and both ids' ``max_episode_steps`` read it.
        real: The real environment the simulated one stands for.
        task_format: The curriculum's :class:`~dreamgym_env.curriculum.formats.VariantFormat`.
        validator: The curriculum's task validator (``task -> reason or None``).
    """

    env_id: str
    entry_point: str
    max_steps: int
    real: RealEnv
    task_format: str
    validator: str


def _builtin(
    name: str,
    title: str,
    max_steps: int,
    *,
    nondeterministic: bool = False,
    curriculum: str | None = None,
    package: bool = False,
) -> BuiltinDomain:
    """The row of the built-in domain ``name``: its entry points follow the package's layout.

    The ids are ``DreamGym/<title>-v0`` and ``DreamGym/<title>-Real-v0``; the classes are ``<title>Domain``
    in ``dreamgym_env.domains.<name>`` and ``<title>RealEnv`` in ``dreamgym_env.real.<name>``, or, for a
    domain that is a package of its own (``package``), in ``dreamgym_env.domains.<name>.engine``; the
    curriculum's ``<NAME>_FORMAT`` and ``validate_<name>`` are in the module ``curriculum`` when the
    domain has one of its own, else in ``dreamgym_env.curriculum.formats`` and ``...validators``.
    ``nondeterministic`` is the real environment's (:class:`RealEnv`).
    """
    formats = curriculum or "dreamgym_env.curriculum.formats"
    validators = curriculum or "dreamgym_env.curriculum.validators"
    real_module = f"dreamgym_env.domains.{name}.engine" if package else f"dreamgym_env.real.{name}"
    return BuiltinDomain(
        env_id=f"DreamGym/{title}-v0",
        entry_point=f"dreamgym_env.domains.{name}:{title}Domain",
        max_steps=max_steps,
        real=RealEnv(f"DreamGym/{title}-Real-v0", f"{real_module}:{title}RealEnv", nondeterministic),
        task_format=f"{formats}:{name.upper()}_FORMAT",
        validator=f"{validators}:validate_{name}",
    )


#: Every built-in domain by name: its classes, ids and real environment.
BUILTIN_DOMAINS: dict[str, BuiltinDomain] = {
    "webshop": _builtin("webshop", "WebShop", max_steps=15, nondeterministic=True, package=True),
    "alfworld": _builtin("alfworld", "ALFWorld", max_steps=50, package=True),
    "webarena": _builtin("webarena", "WebArena", max_steps=30, nondeterministic=True, package=True),
    "miniwob": _builtin(
        "miniwob", "MiniWoB", max_steps=10, curriculum="dreamgym_env.domains.miniwob.curriculum", package=True
    ),
    "textworld": _builtin(
        "textworld",
        "TextWorld",
        max_steps=50,
        curriculum="dreamgym_env.domains.textworld.curriculum",
        package=True,
    ),
}
_FACTORIES: dict[str, Callable[[], Domain]] = {}
_INSTANCES: dict[str, Domain] = {}


def load_entry_point(entry_point: str) -> Any:
    """The object an entry point ``"module:attribute"`` of the table names, importing its module."""
    module_name, _, attr = entry_point.partition(":")
    return getattr(importlib.import_module(module_name), attr)


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
            _INSTANCES[name] = load_entry_point(BUILTIN_DOMAINS[name].entry_point)()
        else:
            raise DomainError(f"Unknown domain {name!r}; available domains: {available_domains()}")
    return _INSTANCES[name]
