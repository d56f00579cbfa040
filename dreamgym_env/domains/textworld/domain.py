"""TextWorld: generated text adventures (Côté et al., 2018), the domain whose real games run anywhere.

TextWorld generates its games locally (``tw-make``), so it is the domain where the simulator and the
real engine can always be compared side by side: :func:`dreamgym_env.domains.textworld.engine.tasks_from_games`
turns generated games into tasks whose first state is the real game's, and
``DreamGym/TextWorld-Real-v0`` plays the same games.

This module owns TextWorld's formats: the state renderers (:func:`render_textworld_state`,
:func:`render_textworld_start`), the quest line (:func:`state_quest`, :func:`with_quest`), the
command verbs (:data:`TEXTWORLD_VERBS`) and task ids (:func:`textworld_task_id`). What uses them: the
real env, game generation and the game suite in :mod:`dreamgym_env.domains.textworld.engine` and
:mod:`dreamgym_env.domains.textworld.suite`; the curriculum's ``TEXTWORLD_FORMAT`` and
``validate_textworld`` in :mod:`dreamgym_env.domains.textworld.curriculum` (named in the domain table,
:data:`dreamgym_env.domains.BUILTIN_DOMAINS`).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dreamgym_env.domains import BUILTIN_DOMAINS
from dreamgym_env.domains.base import Domain, InitialState, StepOutcome
from dreamgym_env.domains.textworld.facts import (
    QUEST_PREFIX,
    RESULT_CHANGED,
    RESULT_LOST,
    RESULT_NOTHING,
    RESULT_WON,
    Fact,
    render_facts_state,
)
from dreamgym_env.domains.textworld.families import chain_map, family_lost
from dreamgym_env.domains.textworld.goal import goal_outcome
from dreamgym_env.domains.textworld.instruction import goal_met, instruction_goal
from dreamgym_env.domains.textworld.outcomes import step_outcomes, step_pattern
from dreamgym_env.domains.textworld.plan import reveal_needs
from dreamgym_env.domains.textworld.state import (
    CanonicalState,
    admissible_commands,
    complete_state,
    consistent_reveal,
    dream_layout,
    nearby_facts,
    parse_state,
    state_changes,
    step_kind,
)
from dreamgym_env.records import Step, Task

_RESULTS = frozenset({RESULT_CHANGED, RESULT_NOTHING, RESULT_WON, RESULT_LOST})
"""The result lines a canonical state starts with."""


_TEXTWORLD_DIRECTIONS: tuple[str, ...] = ("north", "south", "east", "west")

TEXTWORLD_VERBS: frozenset[str] = frozenset(
    {"go", "open", "close", "take", "drop", "put", "insert", "unlock", "lock", "eat", "drink", "examine"}
    | {"cook", "slice", "chop", "dice", "prepare"}
)
"""The command verbs of the action grammar; a quest is carried out with them."""


def textworld_task_id(game: str | os.PathLike[str]) -> str:
    """The task id of a generated game: ``textworld-<file stem>`` (``tw-cooking-3.z8`` -> ``textworld-tw-cooking-3``).

    The real wrapper's tasks, :func:`dreamgym_env.domains.textworld.engine.tasks_from_games` and the collection
    script's held-out lists all name a game's task with it.
    """
    return f"textworld-{Path(game).stem}"


def _tidy(text: str) -> str:
    text = re.sub(r"[ \t]+\n", "\n", text.strip())
    return re.sub(r"\n{3,}", "\n\n", text)


def render_textworld_state(feedback: str, room: str = "", inventory: str = "") -> str:
    """The abstract state after a step: what the game printed, then where the agent is and what it carries.

    TextWorld's feedback alone ("You pick up the key.") does not say which room the agent is in or what
    it holds, so neither a policy nor the experience model could tell two such states apart. The room as
    ``look`` prints it and the inventory make the state Markov; each is left out when the feedback
    already is it (``look``, a move, ``inventory``).

    Args:
        feedback: The game's text for the step (banner and status line removed).
        room: The current room's description (``-= Kitchen =-`` ...); empty leaves it out.
        inventory: ``You are carrying: ...``; empty leaves it out.
    """
    parts = [_tidy(feedback)]
    for extra in (_tidy(room), _tidy(inventory)):
        if extra and extra not in parts[0]:
            parts.append(extra)
    return "\n\n".join(p for p in parts if p)


def render_textworld_start(description: str, objective: str, inventory: str = "") -> str:
    """The first abstract state: the room as ``look`` shows it, the inventory, then the quest.

    Args:
        description: The room text TextWorld prints for ``look`` (starting with ``-= Room =-``).
        objective: The quest text TextWorld gives for ``goal``.
        inventory: ``You are carrying: ...`` (left out when empty).
    """
    head = render_textworld_state(description, "", inventory)
    return f"{head}\n\n{QUEST_PREFIX}{' '.join(objective.split())}"


def state_quest(state: str) -> str | None:
    """The quest a first state ends with (its ``Your task is to: ...`` line), or ``None``."""
    last = state.rstrip().rpartition("\n")[2]
    return last.removeprefix(QUEST_PREFIX).strip() if last.startswith(QUEST_PREFIX) else None


def with_quest(state: str, quest: str) -> str:
    """The first state ``state`` with its quest line replaced by ``quest`` (added when it has none).

    A curriculum variant of a game's task starts in the same room with another quest.
    """
    head = state.rstrip()
    if state_quest(head) is not None:
        head = head.rpartition("\n")[0].rstrip()
    return f"{head}\n\n{QUEST_PREFIX}{' '.join(quest.split())}"


_INSTRUCTIONS = """\
You simulate a TextWorld game: a text adventure of connected rooms, doors, containers (chests, boxes), \
supporters (tables, shelves) and portable objects (keys, food). The agent types commands to carry out \
its quest; you answer with the next state.

State format (canonical, rendered from the game's facts; things sorted by name):
Done.
Room: kitchen
Exits: east, north (wooden door: closed)
Here: chest (open, holds: apple, key), table (on: knife), box (closed)
Carrying: nothing

The first line is the step's result: "Done." when the command changed the world, "Nothing happens." \
when it did not (a refused or impossible command, look, examine, inventory), "You won." on the step \
that completes the quest, "You lost." on the step that makes it impossible. A closed or locked \
container hides what it holds; "open" reveals it ("chest (open, holds: key)", or "(open, empty)"). The \
first state has no result line and ends with "Your task is to: <quest>".

How the world behaves: "go D" moves through an exit of the room, unless a closed or locked door is on \
it; "open/close X", "unlock/lock X with K" (K carried and matching X); "take X", "take X from Y" move X \
into the inventory; "drop X" puts it in the room, "put X on S", "insert X into C" onto or into a \
supporter or an open container; "eat X" consumes carried food. The layout in the goal details (hidden \
from the agent) says what each room holds at the start, where exits lead, what closed containers hold \
and which key opens what; the winning conditions say when the quest is complete. Never contradict them. \
The hidden facts for this step give the part of the layout one step away, as the episode last showed \
it: the room behind each exit ("north: Room: hall | Exits: .. | Here: .."), what closed containers here \
hold, which key fits a lock here.

Ending: done=true and success=true on the step that makes the winning conditions true ("You won."); \
done=true, success=false when the quest becomes impossible ("You lost."); otherwise done=false.

How to answer: "next_state" is the result line, then only the lines that change (the others stay as \
they are): "take apple" answers "Done.\\nHere: chest (open, holds: key)\\nCarrying: apple", "look" \
answers "Nothing happens.", a move answers the new Room, Exits and Here lines. Leave \
"admissible_actions" empty: the game lists the commands of the new state itself."""

# Rooms, furniture and portable things a generated start room draws from (TextWorld's usual vocabulary).
_ROOMS: tuple[str, ...] = (
    "kitchen",
    "bedroom",
    "bathroom",
    "living room",
    "pantry",
    "study",
    "garage",
    "attic",
)
_CONTAINERS: tuple[str, ...] = ("chest", "box", "cabinet", "locker", "crate", "safe")
_SUPPORTERS: tuple[str, ...] = ("table", "shelf", "counter", "desk", "workbench", "stand")
_OBJECTS: tuple[str, ...] = ("key", "apple", "book", "lamp", "coin", "carrot", "knife", "map", "mug", "shoe")
_ADJECTIVES: tuple[str, ...] = ("red", "old", "wooden", "small", "rusty", "shiny", "blue", "heavy")


@functools.lru_cache(maxsize=1024)
def _shown_layout(states: tuple[str, ...], actions: tuple[str, ...]) -> str:
    """:func:`dream_layout`, remembered: a step asks for it up to three times (facts, outcomes, answer form)."""
    return dream_layout(states, actions)


def _layout(task: Task, history: Sequence[Step], state: str) -> tuple[str, bool, list[str]]:
    """The layout the simulator may use, whether it is the game's whole one, and the episode's earlier states.

    The game's layout when the task carries it (the privileged setting); otherwise the one the episode
    showed itself (:func:`~dreamgym_env.domains.textworld.state.dream_layout`).
    """
    seen = [step.state for step in history]
    world = task.metadata.get("world")
    if isinstance(world, str):
        return world, True, seen
    return _shown_layout((*seen, state), tuple(step.action for step in history)), False, seen


class TextWorldDomain(Domain):
    """TextWorld as an abstract text world.

    State format: the canonical state of :mod:`dreamgym_env.domains.textworld.facts`, rendered from the
    engine's world facts, so that the state alone tells where the agent is, what is around and what it
    holds, and the same world always reads the same. The first state ends with the quest::

        Room: kitchen
        Exits: east, north (wooden door: closed)
        Here: chest (closed), table (on: red apple)
        Carrying: nothing

        Your task is to: take the key from the chest and put it on the table in the bedroom.

    Later states start with the step's result (``Done.``, ``Nothing happens.``, ``You won.``,
    ``You lost.``). Tasks made from games carry the game's starting layout (``world``) and winning
    conditions (``goal``) as hidden facts for the experience model (:attr:`task_fact_keys`); a
    curriculum variant without them still works. The game's prose (:func:`render_textworld_state`)
    remains available from the real wrapper (``state_format="text"``).

    Starting state: when the task's metadata has ``initial_observation`` (tasks made from generated
    games by :func:`dreamgym_env.domains.textworld.engine.tasks_from_games`), that real first state and its
    ``initial_admissible`` commands are used, so sim and real episodes start identically. Otherwise a
    room is drawn with ``rng`` (one container, one supporter, a portable object and one to three exits).

    Actions: TextWorld's command grammar (see :attr:`action_help`).

    Episode end: the quest is complete (success) or lost, or the step limit.
    """

    name = "textworld"
    env_id = "DreamGym/TextWorld-v0"
    max_steps = BUILTIN_DOMAINS[name].max_steps  # the one definition: the domain table
    instructions = _INSTRUCTIONS
    task_fact_keys = ("world", "goal")
    # What made the game (families.py): its challenge, or a custom game's number of rooms; public, as a
    # user who generated the game chose them, so known to a learned dream.
    task_attribute_keys = ("family", "rooms")
    step_fact_keys = ("world",)
    lists_actions = True
    # Only the player changes a game. In the offline data 46 of the 4,637 (state, action) pairs seen in
    # two episodes of one game led to two next states (a door or container changed out of view).
    deterministic = True
    action_help = (
        "TextWorld commands (things are named as the game names them, e.g. 'wooden door'): look, inventory, "
        "goal, go north|south|east|west, open <x>, close <x>, take <x>, take <x> from <y>, drop <x>, "
        "put <x> on <y>, insert <x> into <y>, unlock <x> with <y>, lock <x> with <y>, eat <x>, "
        "examine <x>; cooking games add cook <x> with <y>, slice|chop|dice <x> with <y>, prepare meal. "
        "Example: take key from chest."
    )
    _NAME = r"[\w][\w'’.:-]*(?: [\w'’.:-]+)*"
    action_patterns = (
        r"look|inventory|goal|score|prepare meal|eat meal",
        rf"go (?:{'|'.join(_TEXTWORLD_DIRECTIONS)})",
        rf"(?:open|close|take|drop|eat|examine|drink) {_NAME}",
        rf"take {_NAME} from {_NAME}",
        rf"put {_NAME} on {_NAME}",
        rf"insert {_NAME} into {_NAME}",
        rf"(?:lock|unlock|cook|slice|chop|dice) {_NAME} with {_NAME}",
    )

    def describe_step(self, task: Task, history: Sequence[Step], state: str, action: str) -> str:
        """The layout the action reaches: the room a move enters, the contents and keys of what it names.

        As the episode last showed them (:func:`~dreamgym_env.domains.textworld.state.nearby_facts`).
        A task without the game's layout (the learned setting, or a curriculum variant) gets the layout
        its episode has shown itself (:func:`~dreamgym_env.domains.textworld.state.dream_layout`): the
        rooms it entered and the way back, what containers held when last seen open.
        """
        world, _, seen = _layout(task, history, state)
        return nearby_facts(state, world, seen, action)

    def outcomes(self, task: Task, history: Sequence[Step], state: str, action: str) -> list[str] | None:
        """Nothing happens, or the command succeeds and the game goes on, is won or is lost.

        Written out by :func:`~dreamgym_env.domains.textworld.outcomes.step_outcomes` from the same
        layout :meth:`describe_step` shows the model: the game's, or the one the episode showed itself.
        """
        world, whole, seen = _layout(task, history, state)
        return step_outcomes(state, action, world, seen, whole_layout=whole)

    def answer_pattern(self, task: Task, history: Sequence[Step], state: str, action: str) -> str | None:
        """The form of a revealing step's answer (:func:`~dreamgym_env.domains.textworld.outcomes.step_pattern`).

        A new room with the way back among its exits; a container opened and holding something or empty.
        In a family whose maps are a chain (:func:`~dreamgym_env.domains.textworld.families.chain_map`),
        a room off the walkthrough is a dead end; in a custom game of a known size (``rooms``), a new room
        lists no more ways on than the rooms not yet shown can fill.
        """
        world, whole, seen = _layout(task, history, state)
        chain = chain_map(task.metadata.get("family"))
        rooms = task.metadata.get("rooms")
        reveal = (
            None
            if whole
            else reveal_needs(
                task.instruction,
                (*seen, state),
                world,
                action,
                chain=chain,
                rooms=rooms if isinstance(rooms, int) else None,
            )
        )
        return step_pattern(state, action, world, seen, whole_layout=whole, reveal=reveal)

    def state_answer(self, state: str, next_state: str) -> str:
        """The result line and the lines that change (:func:`~dreamgym_env.domains.textworld.state.state_changes`)."""
        return state_changes(state, next_state)

    def complete_state(self, state: str, answer: str) -> str:
        """``state`` with an answer's result line and changed lines (a whole state stands for itself)."""
        return complete_state(state, answer)

    def admissible_actions(self, state: str, task: Task) -> list[str] | None:
        """TextWorld's commands for ``state`` by the game's rules, with the task's layout when it has one.

        Without one (the learned setting, a curriculum variant) no key is known to fit a lock, so every
        carried thing may be tried on it and the model answers whether it fits. ``None`` for a state
        that is not canonical (the prose format): then the model lists them.
        """
        world = task.metadata.get("world")
        if isinstance(world, str):
            return admissible_commands(state, world)
        return admissible_commands(state, any_key=True)

    def step_kind(self, seen: Sequence[str], state: str, action: str, next_state: str) -> tuple[str, str]:
        """The verb family and kind of a real step (:func:`~dreamgym_env.domains.textworld.state.step_kind`)."""
        return step_kind(seen, state, action, next_state)

    def consistent_reveal(self, state: str, action: str, predicted: str, real: str) -> bool:
        """See :func:`~dreamgym_env.domains.textworld.state.consistent_reveal`."""
        return consistent_reveal(state, action, predicted, real)

    def rule_state(self, task: Task, history: Sequence[Step], state: str, action: str) -> str | None:
        """``look``, ``inventory`` and ``examine ...`` change no fact: the state again, after ``Nothing happens.``.

        So on all 3,523 such real transitions of the offline data. ``None`` for any other action and for
        a state that is not canonical (prose, where ``examine`` answers with a description).
        """
        parsed = parse_state(state)
        if parsed is None or not (action in ("look", "inventory") or action.startswith("examine ")):
            return None
        return CanonicalState(RESULT_NOTHING, parsed.lines).render()

    def judge_step(
        self, task: Task, history: Sequence[Step], state: str, action: str, next_state: str
    ) -> StepOutcome | None:
        """The ending by the task's winning conditions (:func:`~dreamgym_env.domains.textworld.goal.goal_reached`).

        With a goal to check, the states decide: the step wins exactly when the episode's states meet
        every quest, and loses exactly when they meet the goal's ``lost if:`` line (a fail event),
        whatever the answer's result line said, and the line is made to agree (``You won.``, ``You
        lost.``, or ``Done.`` for a win or loss the states do not show). So a simulated reward is paid only for
        a state that shows the goal met, as in the game, and a policy cannot learn to collect wins the
        model merely claims. Without a goal (the learned setting, a curriculum variant), the quest's
        instruction is read instead (:func:`~dreamgym_env.domains.textworld.instruction.instruction_goal`):
        the step wins exactly when it makes the condition of the quest's last command newly true, and a
        claimed win it does not show reads ``Done.``. Losses, which an instruction does not describe,
        follow the rules of the game's challenge family when the task names one (``family``,
        :func:`~dreamgym_env.domains.textworld.families.family_lost`: a treasure hunter's wrong
        pickup loses, a claimed loss the rule does not give reads ``Done.``), and stay the result
        line's otherwise. An instruction that cannot be read leaves the result line to rule:
        ``You won.`` or ``You lost.`` ends the episode. ``None`` for a state that is not canonical
        (prose, or a result line of another form).
        """
        parsed = parse_state(next_state)
        if parsed is None or parsed.result not in _RESULTS:
            return None
        won = parsed.result == RESULT_WON
        goal, world = task.metadata.get("goal"), task.metadata.get("world")
        if isinstance(goal, str) and goal.strip():
            states = [step.state for step in history] + [state, next_state]
            steps = list(zip([step.action for step in history] + [action], states[1:], strict=True))
            judged = goal_outcome(goal, world if isinstance(world, str) else "", states[0], steps)
            if judged is not None:
                won, lost = judged
                claimed = parsed.result in (RESULT_WON, RESULT_LOST)
                result = (
                    RESULT_WON
                    if won
                    else RESULT_LOST
                    if lost
                    else RESULT_CHANGED
                    if claimed
                    else parsed.result
                )
                if result != parsed.result:
                    parsed.result = result
                    next_state = parsed.render()
        else:
            states = [step.state for step in history] + [state, next_state]
            target = instruction_goal(task.instruction)
            result = parsed.result
            if target is not None:
                won = goal_met(target, states) and not goal_met(target, states[:-1])
                result = RESULT_WON if won else RESULT_CHANGED if result == RESULT_WON else result
            ruled = family_lost(task.metadata.get("family"), task.instruction, states)
            if ruled is not None and not won:
                result = RESULT_LOST if ruled else RESULT_CHANGED if result == RESULT_LOST else result
            if result != parsed.result:
                parsed.result = result
                next_state = parsed.render()
        return StepOutcome(next_state, done=won or parsed.result == RESULT_LOST, success=won)

    def initial_state(self, task: Task, rng: np.random.Generator) -> InitialState:
        """The real first state when the task carries one, else a room drawn with ``rng``."""
        observation = task.metadata.get("initial_observation")
        if isinstance(observation, str) and observation.strip():
            admissible = task.metadata.get("initial_admissible") or []
            return InitialState(state=observation.strip(), admissible_actions=[str(a) for a in admissible])
        return self._draw_room(task, rng)

    def _draw_room(self, task: Task, rng: np.random.Generator) -> InitialState:
        def pick(options: Sequence[str]) -> str:
            return options[int(rng.integers(len(options)))]

        room = str(task.metadata.get("room") or pick(_ROOMS))
        container = f"{pick(_ADJECTIVES)} {pick(_CONTAINERS)}"
        supporter = pick(_SUPPORTERS)
        thing = str(task.metadata.get("object") or pick(_OBJECTS))
        count = int(rng.integers(1, 4))
        exits = sorted(rng.choice(np.array(_TEXTWORLD_DIRECTIONS), size=count, replace=False).tolist())
        beyond = [(f"{d}_of", ((f"{d} of {room}", "r"), (room, "r"))) for d in exits]
        facts: list[Fact] = [
            ("at", (("P", "P"), (room, "r"))),
            ("at", ((container, "c"), (room, "r"))),
            ("closed", ((container, "c"),)),
            ("at", ((supporter, "s"), (room, "r"))),
            ("on", ((thing, "o"), (supporter, "s"))),
            *beyond,
        ]
        actions = [f"go {d}" for d in exits] + [
            f"open {container}",
            f"take {thing}",
            f"take {thing} from {supporter}",
            f"examine {container}",
            f"examine {supporter}",
            f"examine {thing}",
            "inventory",
            "look",
        ]
        start = render_facts_state(facts, quest=task.instruction)
        return InitialState(start, sorted(actions))

    def seed_tasks(self) -> list[Task]:
        """Ten quests in TextWorld's style, written for this package."""
        return [
            Task(task_id=f"textworld-seed-{i}", domain=self.name, instruction=text, metadata=meta)
            for i, (text, meta) in enumerate(_SEED_QUESTS)
        ]


_SEED_QUESTS: tuple[tuple[str, dict[str, str]], ...] = (
    ("take the apple from the table and eat it.", {"object": "apple"}),
    ("go east, open the chest and take the key from it.", {"object": "key"}),
    ("put the book on the shelf in the study.", {"object": "book", "room": "study"}),
    ("find the coin and insert it into the box.", {"object": "coin"}),
    ("unlock the safe with the rusty key, then take the map from the safe.", {"object": "map"}),
    ("take the carrot, go north and put it on the counter.", {"object": "carrot", "room": "pantry"}),
    ("go west, then south, and drop the mug in the kitchen.", {"object": "mug", "room": "kitchen"}),
    ("examine the lamp on the desk, then take it.", {"object": "lamp", "room": "bedroom"}),
    (
        "open the locker, take the shoe out of it and put it on the stand.",
        {"object": "shoe", "room": "garage"},
    ),
    (
        "take the knife from the workbench and insert it into the crate.",
        {"object": "knife", "room": "garage"},
    ),
)
