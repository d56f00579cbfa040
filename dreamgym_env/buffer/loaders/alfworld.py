"""ALFWorld transcripts in the ReAct prompt format (``react_alfworld_3prompts.json``).

The file is a JSON object mapping a name (``react_put_0``, ``act_clean_2``...) to a transcript: the first
observation (``You are in the middle of a room...``), a ``Your task is to: ...`` line, then turns. A turn
is a ``> command`` line followed by the observation lines it produced. ``> think: ...`` turns are the
agent's reasoning, not actions: they are answered by ``OK.`` (or nothing) and are kept, joined, in the
metadata (``agent_thoughts``) of the next action's transition. Each action gives one transition
(previous observation, action, observation). The transcripts are expert demonstrations that end with
the task done: the last transition has ``done``, ``success`` and reward 1.0. ``act_X`` and ``react_X``
play one game, so their transitions carry the same ``game_id`` (``alfworld-react-X``,
:func:`~dreamgym_env.domains.alfworld.tasks.alfworld_react_game_id`) under their two task ids, and a
split by game keeps both on one side. A plain ``.txt`` file holding one transcript is read the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from dreamgym_env.buffer.loaders.base import LoadIssue, Record, json_document, line_of_key, read_text
from dreamgym_env.domains.alfworld.tasks import alfworld_react_game_id, alfworld_react_task
from dreamgym_env.records import GAME_ID, Transition

_TASK = re.compile(r"^Your task is to:\s*(.+)$")


def _parse_react_transcript(text: str) -> tuple[str, list[tuple[str, str, str, list[str]]]]:
    """Split a transcript into its task and (state, action, next state, thoughts) steps.

    Raises:
        ValueError: When the transcript has no task line or no action.
    """
    lines = [line.rstrip() for line in text.strip().splitlines()]
    task_at = next((i for i, line in enumerate(lines) if _TASK.match(line)), None)
    if task_at is None:
        raise ValueError("no 'Your task is to: ...' line")
    task = _TASK.match(lines[task_at]).group(1).strip()  # type: ignore[union-attr]
    observation = "\n".join(line for line in lines[:task_at] if line).strip()
    steps: list[tuple[str, str, str, list[str]]] = []
    thoughts: list[str] = []
    i = task_at + 1
    while i < len(lines):
        line = lines[i]
        if not line.strip() or (line.strip() == "OK." and not steps):
            # Blank lines, and a stray acknowledgement left before the first command by a removed thought.
            i += 1
            continue
        if not line.startswith(">"):
            raise ValueError(f"expected a '> command' line, got {line[:60]!r}")
        command = line[1:].strip()
        j = i + 1
        while j < len(lines) and not lines[j].startswith(">"):
            j += 1
        reply = "\n".join(x for x in lines[i + 1 : j] if x.strip()).strip()
        if command.startswith("think:"):
            thoughts.append(command[len("think:") :].strip())
        else:
            steps.append((observation, command, reply, thoughts))
            observation, thoughts = reply, []
        i = j
    if not steps:
        raise ValueError("no action lines ('> go to ...')")
    return task, steps


def _transitions(name: str, text: str, domain: str) -> list[Transition]:
    _, steps = _parse_react_transcript(text)
    style, _, rest = name.partition("_")
    task_type = rest.rsplit("_", 1)[0] if rest else ""
    goal = alfworld_react_task(name, text)  # the task (id, facts) the ALFWorld domain loads for it
    if goal.domain != domain:
        goal = goal.model_copy(update={"domain": domain})
    game = alfworld_react_game_id(name)
    transitions = []
    for step, (state, action, next_state, thoughts) in enumerate(steps):
        last = step == len(steps) - 1
        metadata: dict[str, object] = {"origin": "alfworld-react", "transcript": name, "task_type": task_type}
        if style in ("react", "act"):
            metadata["style"] = style
        if game is not None:
            metadata[GAME_ID] = game
        if thoughts:
            metadata["agent_thoughts"] = thoughts
        transitions.append(
            Transition.of_step(
                goal,
                episode_id=f"alfworld-react:{name}",
                step=step,
                state=state,
                action=action,
                next_state=next_state,
                reward=1.0 if last else 0.0,
                done=last,
                success=last,
                source="offline",
                metadata=metadata,
            )
        )
    return transitions


def load_alfworld_react(path: Path, *, domain: str | None = None) -> Iterator[Record | LoadIssue]:
    """Yield one record per transcript in ``path`` (a JSON object of transcripts, or one ``.txt``)."""
    text = read_text(path)
    domain = domain or "alfworld"
    if path.suffix == ".txt":
        try:
            yield Record(_transitions(path.stem, text, domain), str(path), 1)
        except ValueError as e:
            yield LoadIssue(str(path), None, f"{e}; transcript skipped")
        return
    transcripts = json_document(path, text, dict, "a JSON object mapping names to transcript strings")
    if isinstance(transcripts, LoadIssue):
        yield transcripts
        return
    for name, transcript in transcripts.items():
        line = line_of_key(text, name)
        if not isinstance(transcript, str):
            yield LoadIssue(str(path), line, f"transcript {name!r} is not a string; skipped")
            continue
        try:
            yield Record(_transitions(name, transcript, domain), str(path), line)
        except ValueError as e:
            yield LoadIssue(str(path), line, f"transcript {name!r}: {e}; skipped")
