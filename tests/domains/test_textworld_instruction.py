"""A TextWorld quest's winning condition read from its instruction, and the domain judging by it."""

from __future__ import annotations

import pytest

from dreamgym_env.domains import get_domain
from dreamgym_env.domains.base import StepOutcome
from dreamgym_env.domains.textworld.instruction import Goal, goal_met, instruction_goal
from dreamgym_env.records import Step, Task

# TextWorld's generated quest text, one form each (from custom, treasure hunter, coin collector and
# tw-simple games), with the condition the quest's last command makes true.
FORMS = [
    (
        "Welcome to TextWorld! First, it would be great if you could try to travel west. Once you do "
        "that, take the loaf of bread from the bowl within the canteen. Then, eat the loaf of bread. That's it!",
        Goal("eaten", "loaf of bread"),
    ),
    (
        "Welcome to another exciting session of TextWorld! Here is how to play! First off, make an "
        "attempt to head west. If you can finish that, retrieve the tablet from the desk inside the "
        "bedchamber. And then, venture east. Next, you can deposit the tablet inside the cabinet in the "
        "kitchen. And if you do that, you're the winner!",
        Goal("in", "tablet", "cabinet", "kitchen"),
    ),
    (
        "Your objective is to place the ladle inside the box inside the chamber.",
        Goal("in", "ladle", "box", "chamber"),
    ),
    (
        "You are now playing a fast paced round of TextWorld! Here is how to play! First of all, you "
        "could, like, make an attempt to head east. If you can succeed at that, close the cake scented "
        "chest. After shutting the cake scented chest, Deposit the cake scented passkey into the cake "
        "scented chest to lock it. Alright, thanks!",
        Goal("locked", "cake scented chest"),
    ),
    (
        "Welcome to TextWorld! Here is your task for today. First, it would be a great idea if you "
        "could make sure that the box inside the bathroom is unlocked with the latchkey. And then, open "
        "the box. And once you've done that, you win!",
        Goal("open", "box"),
    ),
    (
        "First stop, make an attempt to move south. After that, recover the salad from the floor of the "
        "recreation zone. Alright, thanks!",
        Goal("carried", "salad", room="recreation zone"),
    ),
    (
        "First off, move west. Then, lift the coin from the floor of the parlor. That's it!",
        Goal("carried", "coin", room="parlor"),
    ),
    (
        "Here is your task for today. First step, go north. Then, pick-up the coin from the floor of "
        "the kitchen. And if you do that, you're the winner!",
        Goal("carried", "coin", room="kitchen"),
    ),
    (
        "First step, open the antique trunk. After opening the refrigerator, take the lettuce from the "
        "refrigerator. After that, place the half of a bag of chips on the stove within the kitchen. "
        "Once that's all handled, you can stop!",
        Goal("on", "half of a bag of chips", "stove", "kitchen"),
    ),
    (
        "And then, make an effort to move north. Then, rest the bell pepper on the stove. That's it!",
        Goal("on", "bell pepper", "stove"),
    ),
    ("The dinner is almost ready! It's only missing a grilled milk.", Goal("on", "milk", "stove")),
    (
        "Welcome to another fast paced episode of TextWorld! Lock the Canadian chest in the launderette.",
        Goal("locked", "Canadian chest", room="launderette"),
    ),
    (
        "First, recover the key from the mantle. And then, insert the key into the chest in the "
        "parlor's lock to unlock it. Alright, thanks!",
        Goal("unlocked", "chest", room="parlor"),
    ),
    (
        "Then, take a trip west. Then, make sure that the hatch in the parlor is shut. Got that? Good!",
        Goal("closed", "hatch", room="parlor"),
    ),
    ("Your objective is to doublecheck that the chest is shut.", Goal("closed", "chest")),
    (
        "First, go south. With that done, place the knife on the rack inside the bathroom. And once "
        "you've done that, you win!",
        Goal("on", "knife", "rack", "bathroom"),
    ),
    (
        "Hey, thanks for coming over to TextWorld! Please retrieve the manuscript from the trunk.",
        Goal("carried", "manuscript", "trunk"),
    ),
    (
        "First, take the sock. After that, drop the sock on the floor of the attic. That's it!",
        Goal("dropped", "sock", room="attic"),
    ),
    # One-sentence quests in the curriculum's format.
    ("put the book on the shelf in the study.", Goal("on", "book", "shelf", "study")),
    (
        "unlock the safe with the rusty key, then take the map from the safe.",
        Goal("carried", "map", "safe"),
    ),
    ("take the apple from the table and eat the apple.", Goal("eaten", "apple")),
]


@pytest.mark.parametrize(("instruction", "goal"), FORMS)
def test_the_last_command_of_the_quest_is_its_winning_condition(instruction: str, goal: Goal) -> None:
    assert instruction_goal(instruction) == goal


@pytest.mark.parametrize(
    "instruction",
    [
        "",
        "Welcome to TextWorld! That's it!",
        # A last command that moves the player: the text does not name the room it reaches.
        "First, take the apple from the table. And then, venture east. That's it!",
        # Free text the grammar does not write, or writes with a pronoun.
        "take the knife from the workbench and insert it into the crate.",
        "find the coin and insert it into the box.",
        "unlock the safe with the rusty key, then take the map from it.",
        # Cut short: the last name may be too.
        "First, open the chest. Then, take the key from the ches",
        # Several quests or ways to win: the last sentence is only one of them.
        "Take the apple from the table. AND Eat the carrot.",
        "Take the apple from the table. OR Take the carrot from the table.",
    ],
)
def test_text_that_does_not_end_with_a_command_of_the_grammar_is_not_read(instruction: str) -> None:
    assert instruction_goal(instruction) is None


def _state(
    here: str, carrying: str = "nothing", room: str = "kitchen", exits: str = "east", result: str = "Done."
) -> str:
    return f"{result}\nRoom: {room}\nExits: {exits}\nHere: {here}\nCarrying: {carrying}"


def test_carried_in_and_on_read_the_inventory_and_what_is_in_view() -> None:
    assert goal_met(Goal("carried", "key"), [_state("nothing", carrying="apple, key")])
    # A name that is part of another is not it.
    assert not goal_met(Goal("carried", "key"), [_state("nothing", carrying="type W key")])
    assert not goal_met(Goal("carried", "key"), [_state("key")])
    inside = _state("chest (open, holds: key), table (on: apple)")
    assert goal_met(Goal("in", "key", "chest"), [inside])
    assert goal_met(Goal("on", "apple", "table"), [inside])
    assert not goal_met(Goal("on", "key", "table"), [inside])
    assert not goal_met(Goal("in", "key", "chest"), [_state("chest (closed), table (on: apple)")])
    # At any depth: a box on a table.
    assert goal_met(Goal("in", "key", "box"), [_state("table (on: box (open, holds: key))")])
    assert goal_met(Goal("dropped", "sock", room="attic"), [_state("sock", room="attic")])
    assert not goal_met(Goal("dropped", "sock", room="attic"), [_state("table (on: sock)", room="attic")])


def test_states_of_containers_and_doors_and_the_named_room() -> None:
    door = _state("chest (locked)", exits="east, north (hatch: closed)", room="parlor")
    assert goal_met(Goal("closed", "hatch", room="parlor"), [door])
    assert not goal_met(Goal("closed", "hatch", room="pantry"), [door])
    assert goal_met(Goal("locked", "chest"), [door])
    assert not goal_met(Goal("unlocked", "chest"), [door])
    assert goal_met(Goal("unlocked", "chest"), [_state("chest (closed)")])
    assert goal_met(Goal("open", "chest"), [_state("chest (open, empty)")])
    assert not goal_met(Goal("open", "chest"), [_state("big chest (open, empty)")])
    assert not goal_met(Goal("open", "chest"), ["You are in the kitchen."])  # not a canonical state


def test_eaten_means_carried_then_gone_from_view_in_the_same_room() -> None:
    goal = Goal("eaten", "apple")
    holding = _state("table", carrying="apple")
    assert goal_met(goal, [holding, _state("table")])
    assert not goal_met(goal, [_state("table"), _state("table")])  # never carried
    assert not goal_met(goal, [holding, _state("table (on: apple)")])  # put down
    assert not goal_met(goal, [holding, _state("apple, table")])  # dropped
    assert not goal_met(goal, [holding, _state("bed", room="hall")])  # in another room: not read as eaten
    assert not goal_met(goal, [holding])


QUEST = "First step, open the chest. Then, take the key from the chest. That's it!"
START = _state("chest (closed)", result="") + f"\n\nYour task is to: {QUEST}"
OPENED = _state("chest (open, holds: key)")
TAKEN = _state("chest (open, empty)", carrying="key")


def _judge(
    next_state: str, history: list[Step], state: str, action: str, instruction: str = QUEST
) -> StepOutcome | None:
    task = Task(
        task_id="t", domain="textworld", instruction=instruction
    )  # no goal facts: the learned setting
    return get_domain("textworld").judge_step(task, history, state, action, next_state)


def test_the_step_that_makes_the_instruction_true_wins_whatever_the_result_line_says() -> None:
    history = [Step(state=START, action="open chest")]
    won = _judge(TAKEN, history, OPENED, "take key from chest")
    assert won is not None and won.done and won.success
    assert won.next_state.startswith("You won.\n")


def test_a_claimed_win_the_states_do_not_show_reads_done() -> None:
    claimed = _judge(OPENED.replace("Done.", "You won."), [], START, "open chest")
    assert claimed is not None and not claimed.done and not claimed.success
    assert claimed.next_state == OPENED
    # Met before and still met: not a new win.
    again = _judge(TAKEN.replace("Done.", "You won."), [Step(state=OPENED, action="look")], TAKEN, "look")
    assert again is not None and not again.success and again.next_state.startswith("Done.")


def test_losses_stay_the_result_lines_and_unread_instructions_keep_todays_ruling() -> None:
    lost = _judge(OPENED.replace("Done.", "You lost."), [], START, "open chest")
    assert lost is not None and lost.done and not lost.success
    free = "find the key somewhere."
    claimed = _judge(OPENED.replace("Done.", "You won."), [], START, "open chest", instruction=free)
    assert claimed is not None and claimed.done and claimed.success


def test_a_task_with_goal_facts_is_still_judged_by_them() -> None:
    task = Task(task_id="t", domain="textworld", instruction=QUEST, metadata={"goal": "open(chest)"})
    outcome = get_domain("textworld").judge_step(task, [], START, "open chest", OPENED)
    assert outcome is not None and outcome.success  # the goal facts, not the instruction's last command
