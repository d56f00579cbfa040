"""Small ALFWorld games written by hand in ALFRED's PDDL game format, for the real engine without a download.

The benchmark's game files cannot be downloaded in CI, so each game here is a PDDL problem in ALFRED's
domain packed, with ALFWorld's grammar for its task, into a ``game.tw-pddl`` file next to a minimal
``traj_data.json``, as the benchmark lays them out.

``bench_real_vs_sim.py`` times the real engine on them and the tests play them (through
``tests/_alfworld_games.py``). The one copy lives here because a benchmark, run as
``python benchmarks/<name>.py``, sees only ``benchmarks/`` on its path, while the tests run from the
repository root and can import ``benchmarks._alfworld_games``.
"""

from __future__ import annotations

import json
from pathlib import Path

# Kitchen layout: receptacle id -> type, object id -> (type, where it starts).
RECEPTACLES = {
    "CounterTop_bar_1": "CounterTop",
    "Fridge_bar_1": "Fridge",
    "Microwave_bar_1": "Microwave",
    "Sink_bar_1_sinkbasin": "SinkBasin",
    "Cabinet_bar_1": "Cabinet",
    "Cabinet_bar_2": "Cabinet",
    "DiningTable_bar_1": "DiningTable",
}
OBJECTS = {
    "Apple_bar_1": ("Apple", "DiningTable_bar_1"),
    "Mug_bar_1": ("Mug", "Cabinet_bar_2"),
    "Mug_bar_2": ("Mug", "CounterTop_bar_1"),
    "Knife_bar_1": ("Knife", "CounterTop_bar_1"),
}
OPENABLE = ("Fridge_bar_1", "Microwave_bar_1", "Cabinet_bar_1", "Cabinet_bar_2")
CHANGEABLE = ("Apple_bar_1", "Mug_bar_1", "Mug_bar_2")

GAMES = {  # name -> (task type, object type, receptacle type, task sentence)
    "cool_apple": (
        "pick_cool_then_place_in_recep",
        "Apple",
        "CounterTop",
        "Put a cold apple on the counter.",
    ),
    "clean_mug": ("pick_clean_then_place_in_recep", "Mug", "DiningTable", "Put a clean mug on the table."),
    "place_knife": ("pick_and_place_simple", "Knife", "DiningTable", "Put a knife on the dining table."),
}


def _problem(task_type: str, obj: str, recep: str) -> str:
    import alfworld.gen.goal_library as goals

    locations = {r: f"loc_bar_{i}" for i, r in enumerate(RECEPTACLES)}
    otypes = sorted({t for t, _ in OBJECTS.values()})
    rtypes = sorted(set(RECEPTACLES.values()))
    lines = [
        "(define (problem handwritten_kitchen)",
        "(:domain alfred)",
        "(:objects",
        "agent1 - agent",
        "loc_bar_start - location",
    ]
    lines += [f"{t}Type - otype" for t in otypes] + [f"{t}Type - rtype" for t in rtypes]
    lines += [f"{o} - object" for o in OBJECTS] + [f"{r} - receptacle" for r in RECEPTACLES]
    lines += [f"{loc} - location" for loc in locations.values()] + [")"]
    init = ["(:init", "(atLocation agent1 loc_bar_start)"]
    for r, t in RECEPTACLES.items():
        init += [f"(receptacleType {r} {t}Type)", f"(receptacleAtLocation {r} {locations[r]})"]
    init += [f"(openable {r})" for r in OPENABLE]
    for o, (t, where) in OBJECTS.items():
        init += [
            f"(objectType {o} {t}Type)",
            f"(pickupable {o})",
            f"(inReceptacle {o} {where})",
            f"(objectAtLocation {o} {locations[where]})",
        ]
    for o in CHANGEABLE:
        init += [f"(coolable {o})", f"(heatable {o})", f"(cleanable {o})"]
    init += [f"(canContain {rt}Type {ot}Type)" for rt in rtypes for ot in otypes] + [")"]
    goal = goals.gdict[task_type]["pddl"].format(obj=obj, recep=recep).replace("#", "-")
    return "\n".join(lines + init) + "\n" + goal


def write_games(root: Path) -> list[str]:
    """Write every game of :data:`GAMES` under ``root/<name>/`` and return the game file paths."""
    from alfworld.agents.utils.misc import add_task_to_grammar
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    paths = []
    for name, (task_type, obj, recep, sentence) in GAMES.items():
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        traj = {
            "task_type": task_type,
            "pddl_params": {
                "object_target": obj,
                "parent_target": recep,
                "mrecep_target": "",
                "toggle_target": "",
                "object_sliced": False,
            },
        }
        game = {
            "pddl_domain": Path(ALFRED_PDDL_PATH).read_text(),
            "grammar": add_task_to_grammar(Path(ALFRED_TWL2_PATH).read_text(), traj),
            "pddl_problem": _problem(task_type, obj, recep),
            "solvable": True,
            "walkthrough": None,
        }
        (folder / "game.tw-pddl").write_text(json.dumps(game))
        traj["turk_annotations"] = {"anns": [{"task_desc": sentence}]}
        (folder / "traj_data.json").write_text(json.dumps(traj))
        paths.append(str(folder / "game.tw-pddl"))
    return paths
