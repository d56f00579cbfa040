"""Domains defined by a spec file: bring your own world without writing a Python class.

A spec (YAML or JSON) says what the environment is, what its abstract states look like (with an
example), the action grammar (templates or regular expressions), what success means, the step limit,
seed tasks and, optionally, offline trajectories used as retrieval context. :func:`register_domain`
turns it into a Gymnasium id that behaves exactly like the built-in ones::

    import gymnasium, dreamgym_env

    env_id = dreamgym_env.register_domain("support_desk.yaml")   # "DreamGym/SupportDesk-v0"
    env = gymnasium.make(env_id, base_url="http://127.0.0.1:8000/v1", model="my-model")

Validation errors name the field, what was given and what is accepted, one line per problem
(:func:`_format_validation_error`), so ``dreamgym domain check`` can explain a bad spec.

This module holds the spec's fields, the domain built from them and registration; the action
grammar is in :mod:`~dreamgym_env.domains.spec_grammar`, reading files safely in
:mod:`~dreamgym_env.domains.spec_files` and the offline trajectories in
:mod:`~dreamgym_env.domains.spec_retrieval`.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from dreamgym_env.domains import BUILTIN_DOMAINS
from dreamgym_env.domains.base import Domain, InitialState
from dreamgym_env.domains.spec_files import MAX_SPEC_BYTES, read_spec_file
from dreamgym_env.domains.spec_grammar import ActionGrammar
from dreamgym_env.domains.spec_retrieval import (
    SpecTrajectoryRetriever,
    existing_trajectories,
)
from dreamgym_env.errors import DomainError
from dreamgym_env.records import Task

PathLike = str | os.PathLike[str]

_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_ENV_ID = re.compile(r"(?:[\w:.-]+/)?[\w:.-]+-v\d+")


def _builtin_env_ids() -> list[str]:
    """Every id the package registers itself, simulated and real: a spec may not take one."""
    return sorted(id_ for b in BUILTIN_DOMAINS.values() for id_ in (b.env_id, b.real.env_id))


# ---------------------------------------------------------------------------------------------- spec
class SpecTask(BaseModel):
    """A seed task. In a spec file a bare string is short for ``{instruction: ...}``.

    Attributes:
        id: Unique within the spec; defaults to ``<name>-<index>``.
        instruction: What the agent must do.
        initial_state: The first state of the episode; defaults to the spec's ``initial_state``.
        admissible_actions: Actions listed in the first state; defaults to the spec's ``initial_actions``.
        metadata: Facts the simulator may use to judge success (never shown verbatim to the agent).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = Field(None, min_length=1)
    instruction: str = Field(min_length=1)
    initial_state: str | None = None
    admissible_actions: list[str] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class DomainSpec(BaseModel):
    """Everything that defines a user domain. Loaded from YAML or JSON by :func:`load_spec`.

    Attributes:
        name: Lowercase identifier (``[a-z][a-z0-9_]*``), the domain's name in transitions and buffers.
        env_id: Gymnasium id; defaults to ``DreamGym/<CamelName>-v0``.
        description: What the environment is and how it behaves, for the experience model.
        state_format: How an abstract state is laid out (one element per line, brackets for clickable...).
        state_example: One complete state in that format.
        actions: The action grammar.
        success: What counts as accomplishing a task (the model decides ``success`` from this).
        max_steps: Step limit (truncation).
        initial_state: The first state of every task that does not give its own; ``{instruction}`` is
            replaced by the task's instruction.
        initial_actions: Actions listed in the first state.
        tasks: Seed tasks (at least one).
        trajectories: Offline trajectories (a file or folder, relative to the spec file) in any format the
            replay buffer loads; they become the env's retrieval context.
        trajectory_format: ``auto`` (detected from the content) or a key of
            :data:`dreamgym_env.buffer.FORMATS` (``jsonl``, ``webshop-session``, ``agentgym``...).
        rules: Extra behaviour rules for the experience model, one per item.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    env_id: str | None = None
    description: str = Field(min_length=1)
    state_format: str = Field(min_length=1)
    state_example: str = Field(min_length=1)
    actions: ActionGrammar
    success: str = Field(min_length=1)
    max_steps: int = Field(20, ge=1, le=10_000)
    initial_state: str | None = None
    initial_actions: list[str] = Field(default_factory=list)
    tasks: list[SpecTask] = Field(min_length=1)
    trajectories: str | None = None
    trajectory_format: str = "auto"
    rules: list[str] = Field(default_factory=list)
    # Where the spec was read from, so relative paths resolve against it; not part of the file format.
    base_dir: str | None = Field(None, exclude=True)

    @field_validator("name")
    @classmethod
    def _name_is_identifier(cls, value: str) -> str:
        if not _NAME.fullmatch(value):
            raise ValueError(
                "must be a lowercase identifier: a letter, then letters, digits or '_' (e.g. support_desk)"
            )
        if value in BUILTIN_DOMAINS:
            raise ValueError(
                f"{value!r} is a built-in domain; choose another name "
                f"(built-in domains: {', '.join(sorted(BUILTIN_DOMAINS))})"
            )
        return value

    @field_validator("env_id")
    @classmethod
    def _env_id_shape(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_ID.fullmatch(value):
            raise ValueError("must look like 'Namespace/Name-v0' (a version suffix -vN is required)")
        return value

    @field_validator("trajectory_format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        from dreamgym_env.buffer.loaders import FORMATS

        if value != "auto" and value not in FORMATS:
            raise ValueError(f"one of {['auto', *sorted(FORMATS)]}")
        return value

    @field_validator("tasks", mode="before")
    @classmethod
    def _bare_strings(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"instruction": t} if isinstance(t, str) else t for t in value]
        return value

    @model_validator(mode="after")
    def _consistent(self) -> DomainSpec:
        # Cross-field problems are already phrased as "field.path: given -> accepted" (see
        # _format_validation_error, which prints top-level messages as they are).
        seen: dict[str, int] = {}
        for i, task in enumerate(self.tasks):
            if task.id is not None and task.id in seen:
                raise ValueError(
                    f"tasks.{i}.id: {task.id!r} -> a unique task id "
                    f"({task.id!r} is already tasks.{seen[task.id]}.id)"
                )
            if task.id is not None:
                seen[task.id] = i
        builtin_ids = _builtin_env_ids()
        if self.resolved_env_id in builtin_ids:
            given = repr(self.env_id) if self.env_id else f"{self.resolved_env_id!r} (derived from the name)"
            raise ValueError(
                f"env_id: {given} -> an id of its own ({self.resolved_env_id!r} is a built-in id; choose "
                f"another env_id or name; built-in ids: {', '.join(builtin_ids)})"
            )
        if self.initial_state is None:
            missing = [f"tasks.{i}" for i, t in enumerate(self.tasks) if t.initial_state is None]
            if missing:
                raise ValueError(
                    f"initial_state: missing, and {', '.join(missing)} give no initial_state of their own -> "
                    "a first state for every task: a top-level initial_state (it may use {instruction}) "
                    "or one per task"
                )
        patterns = [re.compile(p, re.DOTALL) for p in self.actions.patterns()]
        for i, action in enumerate(self.initial_actions):
            if patterns and not any(p.fullmatch(action) for p in patterns):
                raise ValueError(
                    f"initial_actions.{i}: {action!r} -> an action in the grammar "
                    f"({self.actions.render_help()})"
                )
        return self

    @property
    def resolved_env_id(self) -> str:
        """The Gymnasium id this spec registers under."""
        if self.env_id:
            return self.env_id
        camel = "".join(part.capitalize() for part in self.name.split("_") if part)
        return f"DreamGym/{camel}-v0"

    def trajectories_path(self) -> Path | None:
        """The trajectories file, resolved against the spec's folder."""
        if self.trajectories is None:
            return None
        path = Path(self.trajectories).expanduser()
        if not path.is_absolute() and self.base_dir:
            path = Path(self.base_dir) / path
        return path

    def seed_tasks(self) -> list[Task]:
        """The spec's tasks as :class:`Task` objects (first state and actions kept in ``metadata``)."""
        tasks = []
        for i, t in enumerate(self.tasks):
            metadata = dict(t.metadata)
            if t.initial_state is not None:
                metadata["initial_state"] = t.initial_state
            if t.admissible_actions is not None:
                metadata["initial_actions"] = list(t.admissible_actions)
            tasks.append(
                Task(
                    task_id=t.id or f"{self.name}-{i}",
                    domain=self.name,
                    instruction=t.instruction,
                    metadata=metadata,
                )
            )
        return tasks

    def render_instructions(self) -> str:
        """The experience model's fixed system text for this domain."""
        parts = [
            f"You simulate the {self.name} environment.\n{self.description.strip()}",
            f"State format\n{self.state_format.strip()}\n\nExample state:\n{self.state_example.strip()}",
            f"Action grammar\n{self.actions.render_help()}",
            f"Success\n{self.success.strip()}",
        ]
        if self.rules:
            parts.append("Rules\n" + "\n".join(f"- {r.strip()}" for r in self.rules))
        return "\n\n".join(parts)


# ---------------------------------------------------------------------------------------------- domain
class SpecDomain(Domain):
    """A :class:`Domain` whose every attribute comes from a :class:`DomainSpec`."""

    def __init__(self, spec: DomainSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.env_id = spec.resolved_env_id
        self.max_steps = spec.max_steps
        self.instructions = spec.render_instructions()
        self.action_help = spec.actions.render_help()
        self.action_patterns = tuple(spec.actions.patterns())
        self.open_actions = spec.actions.open
        super().__init__()

    def seed_tasks(self) -> list[Task]:
        """The spec's tasks."""
        return self.spec.seed_tasks()

    def initial_state(self, task: Task, rng: np.random.Generator) -> InitialState:
        """The task's own first state, else the spec's template with ``{instruction}`` filled in."""
        state = task.metadata.get("initial_state") or self.spec.initial_state or ""
        actions = task.metadata.get("initial_actions", self.spec.initial_actions)
        return InitialState(state.replace("{instruction}", task.instruction), list(actions))


# ---------------------------------------------------------------------------------------------- loading
def _format_validation_error(error: ValidationError, source: str | None = None) -> str:
    """Render pydantic errors one per line as ``field.path: what was given -> what is accepted``."""
    lines = []
    for item in error.errors(include_url=False):
        if not item["loc"] and item["type"] == "value_error":
            lines.append(_accepted(item))
            continue
        loc = ".".join(str(part) for part in item["loc"]) or "(top level)"
        given = _show(item.get("input"))
        accepted = _accepted(item)
        if item["type"] == "missing":
            lines.append(f"{loc}: missing -> {accepted}")
        else:
            lines.append(f"{loc}: {given} -> {accepted}")
    head = f"{source}: " if source else ""
    noun = "problem" if len(lines) == 1 else "problems"
    return f"{head}{len(lines)} {noun} in the domain spec:\n" + "\n".join(f"  {line}" for line in lines)


def _show(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _accepted(item: ErrorDetails) -> str:
    kind, loc = item["type"], item["loc"]
    if kind == "missing":
        return "required; see `dreamgym domain init` for an example"
    if kind == "extra_forbidden":
        model = _model_at(loc[:-1])
        fields = sorted(model.model_fields) if model else []
        fields = [f for f in fields if f != "base_dir"]
        guess = difflib.get_close_matches(str(loc[-1]), fields, n=1)
        hint = f"did you mean {guess[0]!r}? " if guess else ""
        return f"unknown field; {hint}accepted fields: {', '.join(fields)}"
    message = str(item["msg"])
    return message.removeprefix("Value error, ")


def _model_at(loc: Sequence[Any]) -> type[BaseModel] | None:
    """The pydantic model that owns the fields at ``loc`` (for listing accepted field names)."""
    model: type[BaseModel] = DomainSpec
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        target = field.annotation if field else None
        args = getattr(target, "__args__", ())
        candidates = [target, *args]
        nested = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
        if not nested:
            return None
        model = nested[0]
    return model


def load_spec(
    source: PathLike | dict[str, Any] | DomainSpec, *, max_bytes: int = MAX_SPEC_BYTES
) -> DomainSpec:
    """Read and validate a spec from a YAML/JSON file, a dict, or pass a :class:`DomainSpec` through.

    Args:
        source: A ``.yaml``, ``.yml`` or ``.json`` file, a dict of spec fields or a :class:`DomainSpec`.
        max_bytes: Largest file read (see :func:`~dreamgym_env.domains.spec_files.read_spec_file`,
            which also refuses non-UTF-8 files and YAML whose aliases expand too far).

    Raises:
        DomainError: unreadable, oversized or non-UTF-8 file, bad syntax (with line and column), or
            invalid fields (one line per problem, see :func:`_format_validation_error`).
        DependencyNotInstalled: a YAML file without PyYAML installed (JSON needs nothing).
    """
    if isinstance(source, DomainSpec):
        return source
    origin: str | None = None
    if isinstance(source, dict):
        data = dict(source)
    else:
        path = Path(source).expanduser()
        data = read_spec_file(path, max_bytes=max_bytes)
        origin = str(path)
        data.setdefault("base_dir", str(path.resolve().parent))
    try:
        return DomainSpec.model_validate(data)
    except ValidationError as e:
        raise DomainError(_format_validation_error(e, origin)) from e


# ---------------------------------------------------------------------------------------------- registration
def register_domain(
    spec: PathLike | dict[str, Any] | DomainSpec, *, retrieval: Literal["auto", "none"] = "auto"
) -> str:
    """Register a spec's domain and its Gymnasium id; return the id.

    Calling it again with the same name replaces the earlier registration (so a notebook can edit
    and reload a spec).

    Args:
        spec: A spec file path, a dict of spec fields or a :class:`DomainSpec`.
        retrieval: ``"auto"``: when the spec names trajectories, envs retrieve demonstrations from an
            in-memory buffer seeded with them (unless ``make`` is given a ``retriever``). ``"none"``: no
            default retriever.

    Raises:
        DomainError: the spec is invalid (see :func:`load_spec`) or its trajectories are missing.
    """
    from dreamgym_env.domains import register_domain_factory
    from dreamgym_env.registration import register_simulated

    loaded = load_spec(spec)
    trajectories = existing_trajectories(loaded)
    domain = SpecDomain(loaded)
    register_domain_factory(loaded.name, lambda: domain)
    env_id = loaded.resolved_env_id
    kwargs: dict[str, Any] = {}
    if trajectories is not None and retrieval == "auto":
        kwargs["retriever"] = SpecTrajectoryRetriever(loaded)
    register_simulated(env_id, loaded.name, loaded.max_steps, kwargs)
    return env_id
