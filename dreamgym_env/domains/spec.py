"""Domains defined by a spec file: bring your own world without writing a Python class.

A spec (YAML or JSON) says what the environment is, what its abstract states look like (with an
example), the action grammar (templates or regular expressions), what success means, the step limit,
seed tasks and, optionally, offline trajectories used as retrieval context. :func:`register_domain`
turns it into a Gymnasium id that behaves exactly like the built-in ones::

    import gymnasium, dreamgym_env

    env_id = dreamgym_env.register_domain("support_desk.yaml")   # "DreamGym/SupportDesk-v0"
    env = gymnasium.make(env_id, base_url="http://127.0.0.1:8000/v1", model="my-model")

Validation errors name the field, what was given and what is accepted, one line per problem
(:func:`format_validation_error`), so ``dreamgym domain check`` can explain a bad spec.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from dreamgym_env.domains import BUILTIN_DOMAINS
from dreamgym_env.domains.base import Domain, InitialState
from dreamgym_env.errors import DataFormatError, DependencyNotInstalled, DomainError
from dreamgym_env.retrieval import Retriever
from dreamgym_env.types import Task, Transition

__all__ = [
    "ActionGrammar",
    "DomainSpec",
    "SpecDomain",
    "SpecTask",
    "SpecTrajectoryRetriever",
    "build_retriever",
    "compile_template",
    "format_validation_error",
    "load_spec",
    "load_trajectories",
    "register_domain",
]

PathLike = str | os.PathLike[str]

_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
_ENV_ID = re.compile(r"(?:[\w:.-]+/)?[\w:.-]+-v\d+")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_FREE_SLOT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _builtin_env_ids() -> list[str]:
    """Every id the package registers itself, simulated and real: a spec may not take one."""
    from dreamgym_env.real import REAL_IDS

    return sorted({*(builtin.env_id for builtin in BUILTIN_DOMAINS.values()), *REAL_IDS})


# ---------------------------------------------------------------------------------------------- grammar
def compile_template(template: str) -> str:
    """Turn an action template into the regular expression it stands for.

    Template syntax: literal text, plus placeholders in braces. ``{name}`` is a free slot (one or more
    characters, no newline); ``{a|b|c}`` is exactly one of the listed words. Write ``{{`` and ``}}`` for
    literal braces. Example: ``assign[{billing|tech|sales}]``, ``reply[{message}]``, ``close``.

    Raises:
        ValueError: an unbalanced brace, an empty placeholder or a slot name that is not an identifier.
    """
    pieces: list[str] = []
    i = 0
    while i < len(template):
        char = template[i]
        if template.startswith("{{", i) or template.startswith("}}", i):
            pieces.append(re.escape(char))
            i += 2
        elif char == "{":
            end = template.find("}", i)
            if end < 0 or "{" in template[i + 1 : end]:
                raise ValueError(f"unbalanced '{{' at character {i} (write '{{{{' for a literal brace)")
            body = template[i + 1 : end].strip()
            if "|" in body:
                choices = [c.strip() for c in body.split("|")]
                if not all(choices):
                    raise ValueError(f"empty choice in '{{{body}}}'")
                pieces.append("(?:" + "|".join(re.escape(c) for c in choices) + ")")
            elif _FREE_SLOT.fullmatch(body):
                pieces.append(r"[^\n]+?")
            else:
                raise ValueError(
                    f"placeholder '{{{body}}}' is neither a slot name nor choices like '{{a|b}}'"
                )
            i = end + 1
        elif char == "}":
            raise ValueError(f"unbalanced '}}' at character {i} (write '}}}}' for a literal brace)")
        else:
            pieces.append(re.escape(char))
            i += 1
    return "".join(pieces)


class ActionGrammar(BaseModel):
    """Which action strings are well-formed. Give ``templates`` or ``regex`` (or both).

    Attributes:
        templates: Action templates (see :func:`compile_template`); shown to agents as written.
        regex: Regular expressions, each matched against the whole action.
        help: One paragraph for agents; built from the templates when omitted.
        open: True when valid actions cannot be listed per state (then ``admissible_actions`` may be
            empty and agents rely on ``help``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    templates: list[str] = Field(default_factory=list)
    regex: list[str] = Field(default_factory=list)
    help: str | None = None
    open: bool = False

    @field_validator("templates")
    @classmethod
    def _templates_compile(cls, value: list[str]) -> list[str]:
        for template in value:
            if not template.strip():
                raise ValueError("a template is empty; write the action's literal text, e.g. 'close'")
            try:
                compile_template(template)
            except ValueError as e:
                raise ValueError(f"template {template!r}: {e}") from None
        return value

    @field_validator("regex")
    @classmethod
    def _regex_compiles(cls, value: list[str]) -> list[str]:
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as e:
                raise ValueError(f"regular expression {pattern!r} does not compile: {e}") from None
        return value

    @model_validator(mode="after")
    def _something_given(self) -> ActionGrammar:
        if not self.templates and not self.regex and not self.open:
            raise ValueError("give at least one of 'templates' or 'regex', or set 'open: true'")
        return self

    def patterns(self) -> list[str]:
        """Every pattern an action may match in full."""
        return [compile_template(t) for t in self.templates] + list(self.regex)

    def render_help(self) -> str:
        """The grammar paragraph shown to agents and to the experience model."""
        if self.help:
            return self.help.strip()
        if self.templates:
            return "Actions (one per step; {x} is free text, {a|b} one of the words): " + "; ".join(
                self.templates
            )
        return "Actions must match one of: " + "; ".join(self.regex)


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
        # format_validation_error, which prints top-level messages as they are).
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
def format_validation_error(error: ValidationError, source: str | None = None) -> str:
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


def _read_mapping(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as e:
        raise DomainError(f"{path}: spec file not found") from e
    except OSError as e:
        raise DomainError(f"{path}: cannot read the spec file: {e}") from e
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise DomainError(f"{path}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from e
    else:
        if path.suffix.lower() not in (".yaml", ".yml"):
            raise DomainError(f"{path}: a spec file ends in .yaml, .yml or .json")
        try:
            import yaml
        except ImportError as e:
            raise DependencyNotInstalled("pyyaml", "yaml", "Reading YAML domain specs") from e
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
            problem = getattr(e, "problem", None) or str(e)
            raise DomainError(f"{path}{where}: not valid YAML: {problem}") from e
    if not isinstance(data, dict):
        raise DomainError(
            f"{path}: a spec is a mapping of fields (name, description, ...), got {type(data).__name__}"
        )
    return data


def load_spec(source: PathLike | dict[str, Any] | DomainSpec) -> DomainSpec:
    """Read and validate a spec from a YAML/JSON file, a dict, or pass a :class:`DomainSpec` through.

    Raises:
        DomainError: unreadable file, bad syntax (with line and column), or invalid fields (one line
            per problem, see :func:`format_validation_error`).
        DependencyNotInstalled: a YAML file without PyYAML installed (JSON needs nothing).
    """
    if isinstance(source, DomainSpec):
        return source
    origin: str | None = None
    if isinstance(source, dict):
        data = dict(source)
    else:
        path = Path(source).expanduser()
        data = _read_mapping(path)
        origin = str(path)
        data.setdefault("base_dir", str(path.resolve().parent))
    try:
        return DomainSpec.model_validate(data)
    except ValidationError as e:
        raise DomainError(format_validation_error(e, origin)) from e


# ---------------------------------------------------------------------------------------------- trajectories
def _existing_trajectories(spec: DomainSpec) -> Path | None:
    path = spec.trajectories_path()
    if path is not None and not path.exists():
        raise DomainError(
            f"trajectories: {str(path)!r} does not exist -> a file or folder of trajectories "
            "(a relative path is read from the spec file's folder)"
        )
    return path


def load_trajectories(spec: DomainSpec) -> list[Transition]:
    """Read the spec's offline trajectories with the replay buffer's loaders.

    Every transition is given the spec's domain name, so retrieval finds it.

    Raises:
        DomainError: the path does not exist.
        DataFormatError: a malformed record (names the file and line).
    """
    path = _existing_trajectories(spec)
    if path is None:
        return []
    from dreamgym_env.buffer.loaders import LoadIssue, iter_records

    transitions: list[Transition] = []
    for item in iter_records([path], spec.trajectory_format, domain=spec.name):
        if isinstance(item, LoadIssue):
            raise DataFormatError(item.message, path=item.path, line=item.line)
        transitions.extend(item.transitions)
    return transitions


def build_retriever(spec: DomainSpec) -> Retriever | None:
    """An in-memory replay buffer seeded with the spec's trajectories (``None`` when it has none).

    This is the default retriever of envs made from a spec; pass ``retriever=`` to ``gymnasium.make``
    to use a durable or shared buffer instead.
    """
    if spec.trajectories_path() is None:
        return None
    from dreamgym_env.buffer import ReplayBuffer

    buffer = ReplayBuffer.open(":memory:")
    buffer.add_many(load_trajectories(spec))
    return buffer


class SpecTrajectoryRetriever:
    """A :class:`Retriever` that builds the spec's buffer on first use.

    Registered as the env's default ``retriever`` so that ``gymnasium.make`` (which deep-copies its
    registered keyword arguments on every call) stays cheap, and each env gets its own buffer the first
    time it retrieves. A ``retriever=`` given to ``make`` replaces it.
    """

    def __init__(self, spec: DomainSpec) -> None:
        self.spec = spec
        self._inner: Retriever | None = None
        self._lock = threading.Lock()

    def _get(self) -> Retriever:
        with self._lock:
            if self._inner is None:
                built = build_retriever(self.spec)
                if built is None:
                    raise DomainError(f"domain {self.spec.name!r} has no trajectories to retrieve from")
                self._inner = built
            return self._inner

    def retrieve(
        self,
        state: str,
        action: str,
        k: int,
        *,
        domain: str | None = None,
        exclude_episode: str | None = None,
    ) -> list[Transition]:
        """Top-k most similar transitions of the spec's buffer."""
        return self._get().retrieve(state, action, k, domain=domain, exclude_episode=exclude_episode)

    def add(self, transition: Transition) -> None:
        """Offer a new transition to the spec's buffer."""
        self._get().add(transition)

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["spec"])  # type: ignore[misc]

    def __deepcopy__(self, memo: dict[int, Any]) -> SpecTrajectoryRetriever:
        return SpecTrajectoryRetriever(self.spec)

    def __repr__(self) -> str:
        return f"SpecTrajectoryRetriever({self.spec.name!r}, {self.spec.trajectories_path()})"


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
    from gymnasium.envs.registration import register, registry

    from dreamgym_env.domains import register_domain_factory

    loaded = load_spec(spec)
    trajectories = _existing_trajectories(loaded)
    domain = SpecDomain(loaded)
    register_domain_factory(loaded.name, lambda: domain)
    env_id = loaded.resolved_env_id
    kwargs: dict[str, Any] = {"domain": loaded.name}
    if trajectories is not None and retrieval == "auto":
        kwargs["retriever"] = SpecTrajectoryRetriever(loaded)
    registry.pop(env_id, None)
    register(
        id=env_id,
        entry_point="dreamgym_env.env:DreamGymEnv",
        vector_entry_point="dreamgym_env.vector:DreamGymVectorEnv",
        nondeterministic=True,
        kwargs=kwargs,
    )
    return env_id
