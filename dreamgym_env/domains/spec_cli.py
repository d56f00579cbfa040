"""``dreamgym domain init|check|list``: start, validate and list user-defined domains."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dreamgym_env.errors import DreamGymError

_STARTER_TEMPLATE = """\
# A DreamGym domain spec. Edit every field, then run:  dreamgym domain check {path}
# Use it from Python:  env_id = dreamgym_env.register_domain("{path}"); gymnasium.make(env_id, ...)

name: {name}                       # lowercase identifier; becomes the Gymnasium id {env_id}
# env_id: {env_id}                 # optional: another Gymnasium id (it must end in -vN)
max_steps: 20                      # step limit: episodes are truncated after this many steps

# What the environment is and how it behaves. The experience model reads this on every step.
description: |
  A file manager with one working directory. The agent can list, open, move and delete files.
  Moving a file to a folder that does not exist fails. Deleted files are gone for good.

# How an abstract state is laid out: plain text, one element per line, no markup.
state_format: |
  A header line with the current directory, then one entry per line ("[dir] name/" or
  "[file] name (size)"), then "Last event:" and what the previous action did.

# One complete state in that format.
state_example: |
  Directory: /home/user/reports
  [dir] 2023/
  [file] q1.pdf (120 KB)
  [file] draft.txt (4 KB)
  Last event: listed the directory

# The action grammar: templates ({{slot}} is free text, {{a|b}} one of the words) and/or regular
# expressions matched against the whole action. Malformed actions never reach the model: the agent
# gets an "[Invalid action]" observation with reward 0.
actions:
  templates:
    - ls
    - cd[{{path}}]
    - open[{{file}}]
    - mv[{{source}} -> {{destination}}]
    - rm[{{file}}]
    - done
  # regex: ['find\\[[^\\]]+\\]']
  # help: One paragraph for agents; built from the templates when omitted.
  # open: false                    # true when valid actions cannot be listed per state

# What accomplishing a task means; the model sets success from this when the episode ends.
success: |
  The agent says done and the directory holds exactly what the task asks for; nothing else was deleted.

# Extra behaviour rules, one per item (quote an item that contains ": ").
rules:
  - Keep file names, sizes and folder contents consistent across the episode.

# The first state of every task that gives none of its own; {{instruction}} is replaced by the task.
initial_state: |
  Directory: /home/user/reports
  [dir] 2023/
  [file] q1.pdf (120 KB)
  [file] q2.pdf (131 KB)
  [file] draft.txt (4 KB)
  Last event: session started
initial_actions: [ls, done]        # actions listed in the first state

# Seed tasks: a string, or a mapping with id, instruction and optional initial_state,
# admissible_actions and metadata (facts the model may use to judge success).
tasks:
  - Move every PDF into the 2023 folder.
  - id: delete-draft
    instruction: Delete the draft and nothing else.
    metadata: {{must_remain: [q1.pdf, q2.pdf, 2023/]}}

# Optional: offline trajectories (a file or folder, relative to this spec) in any format the replay
# buffer reads (see `dreamgym buffer import --help`); they become the retrieval context.
# trajectories: trajectories.jsonl
# trajectory_format: auto
"""


def starter_spec(name: str, path: str) -> str:
    """The commented starter spec for ``name`` (it passes ``dreamgym domain check`` as written).

    Raises:
        DomainError: ``name`` is not a valid domain name (the message says what is accepted).
    """
    from dreamgym_env.domains.spec import DomainSpec
    from dreamgym_env.errors import DomainError

    try:
        DomainSpec._name_is_identifier(name)
    except ValueError as e:
        raise DomainError(f"name: {name!r} -> {e}") from None
    camel = "".join(part.capitalize() for part in name.split("_") if part)
    return _STARTER_TEMPLATE.format(name=name, env_id=f"DreamGym/{camel}-v0", path=path)


def _cmd_init(args: argparse.Namespace) -> int:
    path = Path(args.output or f"{args.name}.yaml")
    try:  # the name first: an empty or invalid one would also make a meaningless default file name
        text = starter_spec(args.name, str(path))
    except DreamGymError as e:
        print(f"INVALID {e}", file=sys.stderr)
        return 1
    if path.suffix.lower() not in (".yaml", ".yml"):
        print(
            f"error: {path}: the starter is YAML (it carries comments); name it .yaml or .yml",
            file=sys.stderr,
        )
        return 1
    if path.exists() and not args.force:
        print(
            f"error: {path} exists; pass --force to overwrite it or --output to choose another file.",
            file=sys.stderr,
        )
        return 1
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as e:
        print(f"error: cannot write {path}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(f"wrote {path}; edit it, then run: dreamgym domain check {path}")
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from dreamgym_env.domains.spec import SpecDomain, load_spec
    from dreamgym_env.domains.spec_retrieval import load_trajectories

    try:
        spec = load_spec(args.spec)
        transitions = load_trajectories(spec)
    except DreamGymError as e:
        print(f"INVALID {e}", file=sys.stderr)
        return 1
    domain = SpecDomain(spec)
    summary = {
        "name": spec.name,
        "env_id": spec.resolved_env_id,
        "tasks": len(spec.tasks),
        "max_steps": spec.max_steps,
        "action_patterns": list(domain.action_patterns),
        "trajectories": str(spec.trajectories_path()) if spec.trajectories else None,
        "transitions": len(transitions),
        "episodes": len({t.episode_id for t in transitions}),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"OK {args.spec}: domain {spec.name!r} -> {spec.resolved_env_id}")
    patterns = len(domain.action_patterns)
    print(f"  {len(spec.tasks)} seed tasks, max_steps {spec.max_steps}, {patterns} action patterns")
    if spec.trajectories:
        source = summary["trajectories"]
        print(f"  {len(transitions)} transitions in {summary['episodes']} episodes from {source}")
    bad = [t.action for t in transitions if domain.validate_action(t.action) is not None]
    for action in bad[:5]:
        print(f"  warning: trajectory action {action!r} does not follow the grammar", file=sys.stderr)
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import dreamgym_env  # noqa: F401 - registers the built-in ids
    from dreamgym_env.domains import available_domains
    from dreamgym_env.domains.spec import register_domain

    try:
        for spec in args.specs:
            register_domain(spec)
    except DreamGymError as e:
        print(f"INVALID {e}", file=sys.stderr)
        return 1
    ids = {
        spec.kwargs.get("domain"): env_id
        for env_id, spec in gym.registry.items()
        if env_id.startswith("DreamGym/")
    }
    for name in available_domains():
        print(f"{name:<20} {ids.get(name, '(no env id)')}")
    return 0


def add_domain_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``domain init|check|list`` to the ``dreamgym`` command."""
    domain = subparsers.add_parser("domain", help="Start, check and list user-defined domains (spec files).")
    commands = domain.add_subparsers(dest="domain_command", metavar="COMMAND", required=True)

    init = commands.add_parser("init", help="Write a commented starter spec to edit.")
    init.add_argument("name", help="Domain name: a lowercase identifier such as support_desk.")
    init.add_argument("-o", "--output", help="Spec file to write (default NAME.yaml).")
    init.add_argument("--force", action="store_true", help="Overwrite an existing file.")
    init.set_defaults(func=_cmd_init)

    check = commands.add_parser("check", help="Validate a spec and explain each problem.")
    check.add_argument("spec", help="A .yaml, .yml or .json spec file.")
    check.add_argument("--json", action="store_true", help="Print the summary as JSON.")
    check.set_defaults(func=_cmd_check)

    listing = commands.add_parser("list", help="List available domains and their env ids.")
    listing.add_argument("specs", nargs="*", help="Spec files to register first.")
    listing.set_defaults(func=_cmd_list)
