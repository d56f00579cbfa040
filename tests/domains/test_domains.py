"""The built-in domains: grammars, starting states, seed tasks and the official task-file loaders."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import numpy as np
import pytest

from dreamgym_env.domains import BUILTIN_DOMAINS, get_domain, load_entry_point
from dreamgym_env.domains.alfworld import ALFWorldDomain
from dreamgym_env.domains.alfworld.tasks import (
    ALFWORLD_TASK_TYPES,
    load_alfworld_react_tasks,
    load_alfworld_traj_data,
    make_alfworld_task,
    parse_alfworld_goal,
)
from dreamgym_env.domains.webarena import WebArenaDomain
from dreamgym_env.domains.webarena.tasks import load_webarena_tasks
from dreamgym_env.domains.webshop import WebShopDomain
from dreamgym_env.domains.webshop.tasks import load_webshop_goals
from dreamgym_env.errors import DataFormatError, DomainError
from dreamgym_env.records import Task

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason=f"benchmark data not found at {DATA}")

DOMAINS = sorted(BUILTIN_DOMAINS)


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# ----------------------------------------------------------------------------------------------- registry


@pytest.mark.parametrize(
    ("name", "cls", "env_id", "max_steps"),
    [
        ("webshop", WebShopDomain, "DreamGym/WebShop-v0", 15),
        ("alfworld", ALFWorldDomain, "DreamGym/ALFWorld-v0", 50),
        ("webarena", WebArenaDomain, "DreamGym/WebArena-v0", 30),
    ],
)
def test_registry_builds_each_domain(name, cls, env_id, max_steps):
    domain = get_domain(name)
    assert isinstance(domain, cls)
    assert (domain.name, domain.env_id, domain.max_steps) == (name, env_id, max_steps)
    assert len(domain.instructions) > 1000  # the experience model's system text is substantial
    assert "done" in domain.instructions and "success" in domain.instructions
    assert "admissible_actions" in domain.instructions


@pytest.mark.parametrize("name", DOMAINS)
def test_the_domain_table_row_matches_the_domain_and_what_is_registered(name):
    import gymnasium as gym

    import dreamgym_env  # noqa: F401 - registers the ids
    from dreamgym_env.real import REAL_IDS

    row = BUILTIN_DOMAINS[name]
    domain = get_domain(name)
    assert domain.env_id == row.env_id
    assert type(domain) is load_entry_point(row.entry_point)
    sim = gym.spec(row.env_id)
    assert sim.kwargs["domain"] == name
    real = gym.spec(row.real.env_id)
    assert real.entry_point == row.real.entry_point == REAL_IDS[row.real.env_id]
    assert real.nondeterministic == row.real.nondeterministic
    assert callable(load_entry_point(row.validator))
    assert load_entry_point(row.task_format).model is not None


@pytest.mark.parametrize("name", DOMAINS)
def test_the_step_limit_is_defined_once_in_the_domain_table(name):
    # The class reads the table's row; a number written into the class again would be a second source.
    cls = load_entry_point(BUILTIN_DOMAINS[name].entry_point)
    assert not re.search(r"\bmax_steps\b[^=\n]*=\s*\d", inspect.getsource(cls))
    assert cls.max_steps == BUILTIN_DOMAINS[name].max_steps


def test_every_real_id_belongs_to_a_built_in_domain():
    from dreamgym_env.real import REAL_IDS

    assert set(REAL_IDS) == {row.real.env_id for row in BUILTIN_DOMAINS.values()}
    assert len(REAL_IDS) == len(BUILTIN_DOMAINS)


def test_textworld_quest_lines_and_verbs():
    from dreamgym_env.domains.textworld import (
        TEXTWORLD_VERBS,
        render_textworld_start,
        state_quest,
        with_quest,
    )

    start = render_textworld_start("-= Hall =-\nA hall.", "take the  key.", "You are carrying nothing.")
    assert state_quest(start) == "take the key."
    changed = with_quest(start, "eat the apple.")
    assert state_quest(changed) == "eat the apple." and changed.startswith("-= Hall =-")
    assert changed.count("Your task is to:") == 1
    assert state_quest(with_quest("-= Hall =-", "go east.")) == "go east."
    assert state_quest("You open the chest.") is None
    grammar = " ".join(get_domain("textworld").action_patterns)
    assert all(verb in grammar for verb in TEXTWORLD_VERBS)


# ------------------------------------------------------------------------------------------------ grammars


@pytest.mark.parametrize(
    ("name", "action"),
    [
        ("webshop", "search[red shoes]"),
        ("webshop", "click[B09QKP7XQL]"),
        ("webshop", "click[Buy Now]"),
        ("webshop", "click[< Prev]"),
        ("webshop", "click[32 fl oz (pack of 6)]"),
        ("alfworld", "go to cabinet 1"),
        ("alfworld", "take spraybottle 2 from cabinet 2"),
        ("alfworld", "put spraybottle 2 in/on toilet 1"),
        ("alfworld", "move apple 1 to countertop 2"),
        ("alfworld", "open fridge 1"),
        ("alfworld", "clean lettuce 1 with sinkbasin 1"),
        ("alfworld", "heat egg 2 with microwave 1"),
        ("alfworld", "cool pan 1 with fridge 1"),
        ("alfworld", "use desklamp 1"),
        ("alfworld", "examine bowl 1"),
        ("alfworld", "look"),
        ("alfworld", "inventory"),
        ("webarena", "click('12')"),
        ("webarena", "click('a51', button='right')"),
        ("webarena", "fill('12', 'wireless mouse')"),
        ("webarena", "fill('12', 'it\\'s fine')"),
        ("webarena", "hover('12')"),
        ("webarena", "press('12', 'Enter')"),
        ("webarena", "select_option('12', 'value')"),
        ("webarena", "select_option('12', ['red', 'blue'])"),
        ("webarena", "scroll(0, 200)"),
        ("webarena", "scroll(0, -200.5)"),
        ("webarena", "goto('http://localhost:7770/')"),
        ("webarena", "go_back()"),
        ("webarena", "go_forward()"),
        ("webarena", "new_tab()"),
        ("webarena", "tab_close()"),
        ("webarena", "tab_focus(1)"),
        ("webarena", "noop()"),
        ("webarena", "noop(500)"),
        ("webarena", "send_msg_to_user('The answer is 42')"),
        ("webarena", 'send_msg_to_user("Quest Lumaflex Band")'),
        ("webarena", "report_infeasible('no such order')"),
    ],
)
def test_grammar_accepts(name, action):
    assert get_domain(name).validate_action(action) is None


@pytest.mark.parametrize(
    ("name", "action", "named"),
    [
        ("webshop", "buy shoes", "search["),
        ("webshop", "search[]", "search["),
        ("webshop", "click[ ]", "click["),
        ("webshop", "search[red shoes] click[Buy Now]", "search["),
        ("alfworld", "go to cabinet", "go to <recep>"),
        ("alfworld", "pick up the apple", "take <obj> from <recep>"),
        ("alfworld", "put apple 1 into fridge 1", "put <obj> in/on <recep>"),
        ("alfworld", "look around", "look"),
        ("webarena", "click(12)", "click('12')"),
        ("webarena", "click [12]", "click('12')"),
        ("webarena", "type('12', 'x')", "fill('12', 'text')"),
        ("webarena", "send_msg_to_user(answer)", "send_msg_to_user"),
        ("webarena", "fill('12', 'unterminated)", "fill('12', 'text')"),
    ],
)
def test_grammar_rejects_with_the_grammar_in_the_message(name, action, named):
    message = get_domain(name).validate_action(action)
    assert message is not None
    assert repr(action) in message or action in message
    assert named in message


# ------------------------------------------------------------------------------------------ starting states


@pytest.mark.parametrize("name", DOMAINS)
def test_initial_state_is_deterministic_per_seed(name):
    domain = get_domain(name)
    for task in domain.seed_tasks():
        assert domain.initial_state(task, rng(7)) == domain.initial_state(task, rng(7))


def test_alfworld_rooms_differ_across_seeds_and_fit_the_task():
    domain = get_domain("alfworld")
    task = make_alfworld_task("pick_heat_then_place_in_recep", "egg", "diningtable")
    states = {domain.initial_state(task, rng(seed)).state for seed in range(10)}
    assert len(states) > 5
    for seed in range(10):
        start = domain.initial_state(task, rng(seed))
        assert start.state.startswith("You are in the middle of a room. Looking quickly around you, you see ")
        assert start.state.endswith("Your task is to: put a hot egg in diningtable.")
        assert "a microwave 1" in start.state and "a diningtable 1" in start.state
        assert "go to microwave 1" in start.admissible_actions
        assert {"look", "inventory"} <= set(start.admissible_actions)
        assert all(domain.validate_action(a) is None for a in start.admissible_actions)


@pytest.mark.parametrize(
    ("task_type", "obj", "target", "must_have"),
    [
        ("pick_clean_then_place_in_recep", "cloth", "bathtubbasin", ["sinkbasin", "bathtubbasin"]),
        ("pick_cool_then_place_in_recep", "tomato", "microwave", ["fridge", "microwave"]),
        ("pick_and_place_simple", "pillow", "sofa", ["sofa"]),
    ],
)
def test_alfworld_room_holds_the_tools_the_task_needs(task_type, obj, target, must_have):
    domain = get_domain("alfworld")
    task = make_alfworld_task(task_type, obj, target)
    for seed in range(20):
        state = domain.initial_state(task, rng(seed)).state
        for kind in must_have:
            assert f"a {kind} 1" in state


def test_alfworld_look_task_gets_a_lamp_stand():
    domain = get_domain("alfworld")
    task = make_alfworld_task("look_at_obj_in_light", "book", lamp="desklamp")
    for seed in range(20):
        state = domain.initial_state(task, rng(seed)).state
        assert "a desk 1" in state or "a sidetable 1" in state


def test_alfworld_scene_metadata_picks_the_room():
    domain = get_domain("alfworld")
    task = make_alfworld_task("pick_and_place_simple", "towel", "toilet", scene="bathroom")
    assert "a toiletpaperhanger 1" in domain.initial_state(task, rng(0)).state


def test_webshop_start_is_the_search_page():
    domain = get_domain("webshop")
    task = domain.seed_tasks()[0]
    start = domain.initial_state(task, rng(0))
    assert start.state.splitlines() == [
        "WebShop | search page",
        f"Instruction: {task.instruction}",
        "[Search]",
    ]
    assert start.admissible_actions == []


def test_webarena_start_page_resolves_the_site_and_lists_elements():
    domain = get_domain("webarena")
    task = Task(
        task_id="t",
        domain="webarena",
        instruction="x",
        metadata={"sites": ["gitlab"], "start_url": "__GITLAB__"},
    )
    start = domain.initial_state(task, rng(0))
    lines = start.state.splitlines()
    assert lines[0] == "Tab 0 (current): Projects · Dashboard · GitLab"
    assert lines[1] == "URL: http://localhost:8023/"
    assert lines[2] == "RootWebArea 'Projects · Dashboard · GitLab', focused, url='http://localhost:8023/'"
    assert all(re.fullmatch(r"\t\[\d+\] \w+ '.*'", line) for line in lines[3:]), lines  # BrowserGym's
    assert start.admissible_actions == []
    assert domain.open_actions


def test_webarena_multi_tab_start_and_custom_site_urls():
    domain = WebArenaDomain(site_urls={"shopping": "http://shop.test:80"})
    start_url = "__SHOPPING__/red-mug.html |AND| __SHOPPING__/blue-mug.html"
    task = Task(
        task_id="t",
        domain="webarena",
        instruction="x",
        metadata={"sites": ["shopping"], "start_url": start_url},
    )
    lines = domain.initial_state(task, rng(0)).state.splitlines()
    assert lines[0] == "Tab 0 (current): red mug | One Stop Market"
    assert lines[1] == "Tab 1: blue mug | One Stop Market"
    assert lines[2] == "URL: http://shop.test:80/red-mug.html"
    assert any(line.endswith("] button 'Add to Cart'") for line in lines)


def test_webarena_unknown_site_placeholder_is_a_clear_error():
    task = Task(
        task_id="t", domain="webarena", instruction="x", metadata={"sites": ["x"], "start_url": "__NOPE__"}
    )
    with pytest.raises(DomainError, match="site_urls"):
        get_domain("webarena").initial_state(task, rng(0))


# -------------------------------------------------------------------------------------------- seed tasks


@pytest.mark.parametrize("name", DOMAINS)
def test_seed_tasks_are_valid(name):
    domain = get_domain(name)
    tasks = domain.seed_tasks()
    assert len(tasks) >= 10
    assert len({t.task_id for t in tasks}) == len(tasks)
    assert len({t.instruction for t in tasks}) == len(tasks)
    for task in tasks:
        assert task.domain == name and task.instruction.strip()
        start = domain.initial_state(task, rng(0))
        assert start.state.strip()


def test_webshop_seed_metadata():
    for task in get_domain("webshop").seed_tasks():
        meta = task.metadata
        assert meta["attributes"] and isinstance(meta["options"], list)
        assert f"price lower than {meta['price_upper']:.2f} dollars" in task.instruction


def test_alfworld_seed_tasks_cover_all_six_types():
    tasks = get_domain("alfworld").seed_tasks()
    assert {t.metadata["task_type"] for t in tasks} == set(ALFWORLD_TASK_TYPES)
    for task in tasks:
        assert parse_alfworld_goal(task.instruction) == {
            k: v for k, v in task.metadata.items() if k in ("task_type", "object", "receptacle", "lamp")
        }


def test_webarena_seed_tasks_name_known_sites():
    domain = get_domain("webarena")
    for task in domain.seed_tasks():
        assert set(task.metadata["sites"]) <= set(domain.site_urls)
        assert domain.resolve_url(task.metadata["start_url"]).startswith("http://")
        assert "eval_types" in task.metadata["eval"]


def test_make_alfworld_task_rejects_bad_arguments():
    with pytest.raises(DomainError, match="pick_and_place_simple"):
        make_alfworld_task("juggle", "apple", "table")
    with pytest.raises(DomainError, match="recep="):
        make_alfworld_task("pick_and_place_simple", "apple")


# --------------------------------------------------------------------------------- loaders on shared data


@needs_data
def test_webshop_human_goals():
    tasks = load_webshop_goals(DATA / "webshop" / "human_goals.json")
    assert len(tasks) == 12087
    assert len({t.task_id for t in tasks}) == 12087
    assert tasks[1].instruction == "i want a noise cancelling cosycost usb microphone"
    assert WebShopDomain.load_tasks(DATA / "webshop" / "human_goals.json")[5] == tasks[5]


@needs_data
def test_webshop_items_and_query_map():
    items = load_webshop_goals(DATA / "webshop" / "items_ins_v2_1000.json")
    assert len(items) == 415
    assert all(t.metadata["asin"].startswith("B") and t.metadata["attributes"] for t in items)
    queries = load_webshop_goals(DATA / "webshop" / "goal_query_map.json")
    assert len(queries) == 1506 and all(t.metadata["queries"] for t in queries)


@needs_data
def test_webshop_session_logs():
    tasks = load_webshop_goals(DATA / "webshop" / "human_session_logs")
    assert len(tasks) == 9
    sofa = next(t for t in tasks if t.task_id == "webshop-session-20220427_1_12")
    assert sofa.metadata["attributes"] == ["wood frame", "living room"]
    assert sofa.metadata["options"] == ["grey"]
    assert sofa.metadata["price_upper"] == 490.0


@needs_data
def test_webarena_tasks():
    tasks = load_webarena_tasks(DATA / "webarena" / "test.raw.json")
    assert len(tasks) == 812
    assert [t.task_id for t in tasks[:2]] == ["webarena-0", "webarena-1"]
    first = tasks[0]
    assert first.instruction == "What is the top-1 best-selling product in 2022"
    assert first.metadata["sites"] == ["shopping_admin"]
    assert first.metadata["start_url"] == "__SHOPPING_ADMIN__"
    assert first.metadata["eval"]["eval_types"] == ["string_match"]
    domain = get_domain("webarena")
    for task in tasks:  # every official start page renders
        assert domain.initial_state(task, rng(0)).state.startswith("Tab 0 (current): ")


@needs_data
def test_alfworld_react_tasks_cover_all_six_types():
    path = DATA / "alfworld" / "react_alfworld_3prompts.json"
    tasks = load_alfworld_react_tasks(path)
    assert len(tasks) == 36
    assert {t.metadata["task_type"] for t in tasks} == set(ALFWORLD_TASK_TYPES)
    put = next(t for t in tasks if t.task_id == "alfworld-react-react_put_0")
    assert put.instruction == "put some spraybottle on toilet."
    assert (put.metadata["object"], put.metadata["receptacle"]) == ("spraybottle", "toilet")
    start = get_domain("alfworld").initial_state(put, rng(0))
    assert start.state.endswith("Your task is to: put some spraybottle on toilet.")
    assert "go to towelholder 1" in start.admissible_actions
    assert "go to cabinet 4" in start.admissible_actions
    assert len(start.admissible_actions) == 13 + 2
    assert ALFWorldDomain.load_tasks(path) == tasks


# --------------------------------------------------------------------------------------- traj_data.json


def _traj(task_type="pick_heat_then_place_in_recep", **params):
    pddl = {"object_target": "Egg", "parent_target": "DiningTable", "toggle_target": "", "mrecep_target": ""}
    pddl.update(params)
    return {
        "task_id": "trial_T1",
        "task_type": task_type,
        "pddl_params": pddl,
        "scene": {"scene_num": 12},
        "turk_annotations": {
            "anns": [{"task_desc": "Put a warm egg on the table."}, {"task_desc": "Heat an egg."}]
        },
    }


def test_traj_data_file_and_folder(tmp_path):
    trial = tmp_path / "pick_heat_then_place_in_recep-Egg-None-DiningTable-12" / "trial_T1"
    trial.mkdir(parents=True)
    (trial / "traj_data.json").write_text(json.dumps(_traj()))
    other = tmp_path / "look" / "trial_T2"
    other.mkdir(parents=True)
    look = _traj("look_at_obj_in_light", object_target="Book", parent_target="", toggle_target="DeskLamp")
    look["task_id"] = "trial_T2"
    look["scene"] = {"scene_num": 305}
    (other / "traj_data.json").write_text(json.dumps(look))

    tasks = load_alfworld_traj_data(tmp_path)
    assert [t.instruction for t in tasks] == [
        "look at book under the desklamp.",
        "put a hot egg in diningtable.",
    ]
    heat = tasks[1]
    assert heat.metadata["scene"] == "kitchen" and heat.metadata["object"] == "egg"
    assert heat.metadata["human_descriptions"] == ["Put a warm egg on the table.", "Heat an egg."]
    assert tasks[0].metadata["scene"] == "bedroom" and tasks[0].metadata["lamp"] == "desklamp"

    annotated = load_alfworld_traj_data(trial / "traj_data.json", human_annotations=True)
    assert [t.instruction for t in annotated] == ["Put a warm egg on the table.", "Heat an egg."]
    assert ALFWorldDomain.load_tasks(trial / "traj_data.json") == load_alfworld_traj_data(
        trial / "traj_data.json"
    )


def test_traj_data_folder_skips_movable_receptacle_trials_with_a_warning(tmp_path):
    for name, kind in (("a", "pick_and_place_simple"), ("b", "pick_and_place_with_movable_recep")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "traj_data.json").write_text(json.dumps(_traj(kind)))
    with pytest.warns(UserWarning, match="skipped 1"):
        tasks = load_alfworld_traj_data(tmp_path)
    assert len(tasks) == 1


# ------------------------------------------------------------------------------------------ malformed files


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_malformed_json_names_the_line(tmp_path):
    path = _write(tmp_path, "human_goals.json", '[\n"a goal",\n"b goal",,\n]')
    with pytest.raises(DataFormatError) as info:
        load_webshop_goals(path)
    assert info.value.path == str(path) and info.value.line == 3  # the line with the double comma


def test_webshop_goal_list_with_a_bad_item_names_the_index(tmp_path):
    path = _write(tmp_path, "human_goals.json", json.dumps(["i want shoes", 7]))
    with pytest.raises(DataFormatError, match="item 1") as info:
        load_webshop_goals(path)
    assert str(path) in str(info.value)


def test_webshop_session_log_without_goal_names_the_line(tmp_path):
    good = {"page": "index", "goal": {"instruction_text": "i want shoes", "attributes": []}}
    path = _write(tmp_path, "s.jsonl", json.dumps(good) + "\n\n" + json.dumps({"page": "index"}) + "\n")
    with pytest.raises(DataFormatError, match="'goal'") as info:
        load_webshop_goals(path)
    assert info.value.line == 3


def test_webarena_config_missing_intent_names_the_index(tmp_path):
    configs = [
        {"task_id": 0, "intent": "x", "sites": ["map"], "start_url": "__MAP__"},
        {"task_id": 1, "sites": ["map"]},
    ]
    path = _write(tmp_path, "test.raw.json", json.dumps(configs))
    with pytest.raises(DataFormatError, match="item 1: missing required key 'intent'"):
        load_webarena_tasks(path)


def test_webarena_sites_must_be_a_list(tmp_path):
    path = _write(
        tmp_path, "0.json", json.dumps({"task_id": 0, "intent": "x", "sites": "map", "start_url": "__MAP__"})
    )
    with pytest.raises(DataFormatError, match="'sites' must be list"):
        load_webarena_tasks(path)


def test_react_file_without_task_line(tmp_path):
    path = _write(tmp_path, "react.json", json.dumps({"react_put_0": "You are in a room.\n> look\n"}))
    with pytest.raises(DataFormatError, match="react_put_0"):
        load_alfworld_react_tasks(path)


def test_traj_data_with_unknown_type_or_missing_params(tmp_path):
    path = _write(tmp_path, "traj_data.json", json.dumps(_traj("juggle")))
    with pytest.raises(DataFormatError, match="unknown task_type 'juggle'"):
        load_alfworld_traj_data(path)
    bad = _traj()
    del bad["pddl_params"]
    path.write_text(json.dumps(bad))
    with pytest.raises(DataFormatError, match="missing required key 'pddl_params'"):
        load_alfworld_traj_data(path)


def test_missing_file_is_a_data_format_error(tmp_path):
    with pytest.raises(DataFormatError, match="not found"):
        load_webarena_tasks(tmp_path / "absent.json")


def test_parse_price_upper():
    from dreamgym_env.domains.webshop.tasks import parse_price_upper

    assert parse_price_upper("red shoes, and price lower than 40.00 dollars") == 40.0
    assert parse_price_upper("price less than 7 dollars") == 7.0
    assert parse_price_upper("find it at a discounted price") is None


# ------------------------------------------------------------------------------------------- one task, one id
def test_an_imported_react_transcript_carries_the_task_the_domain_loads(tmp_path):
    from dreamgym_env.buffer.loaders import LoadIssue, iter_records
    from dreamgym_env.records import TASK_METADATA

    room = "You are in the middle of a room. Looking quickly around you, you see a cabinet 1 and a toilet 1."
    transcript = f"{room}\nYour task is to: put some spraybottle on toilet.\n> go to cabinet 1\nOn the cabinet 1, you see a spraybottle 1.\n"
    path = _write(tmp_path, "react.json", json.dumps({"react_put_0": transcript}))
    (task,) = load_alfworld_react_tasks(path)
    records = list(iter_records([path], "alfworld-react"))
    assert not [r for r in records if isinstance(r, LoadIssue)]
    (transition,) = records[0].transitions
    assert (transition.task_id, transition.task) == (task.task_id, task.instruction)
    assert transition.metadata[TASK_METADATA] == task.metadata
    assert task.metadata["task_type"] == "pick_and_place_simple"


@needs_data
def test_the_react_file_gives_the_same_task_ids_to_tasks_and_transitions():
    from dreamgym_env.buffer.loaders import iter_records

    path = DATA / "alfworld" / "react_alfworld_3prompts.json"
    task_ids = {t.task_id for t in load_alfworld_react_tasks(path)}
    transition_ids = {t.task_id for r in iter_records([path], "alfworld-react") for t in r.transitions}
    assert transition_ids == task_ids and len(task_ids) == 36


def test_a_textworld_game_task_id_is_the_domains():
    from dreamgym_env.domains.textworld import textworld_task_id

    assert textworld_task_id("/games/tw-cooking-3.z8") == "textworld-tw-cooking-3"


@pytest.mark.real
def test_real_textworld_tasks_use_the_domains_task_id_and_make_valid_variants(tmp_path):
    pytest.importorskip("textworld")
    from dreamgym_env.curriculum.formats import get_format
    from dreamgym_env.curriculum.validators import validate_task
    from dreamgym_env.domains.textworld import state_quest, textworld_task_id
    from dreamgym_env.real.textworld import make_games, tasks_from_games

    (game,) = make_games(tmp_path, n=1, seed=3)
    (task,) = tasks_from_games([game])
    assert task.task_id == textworld_task_id(game)
    assert state_quest(task.metadata["initial_observation"]) == task.instruction
    fmt = get_format("textworld")
    quest = "examine the room and take everything you can see."
    metadata = fmt.to_metadata(fmt.model.model_validate({"object": "room", "instruction": quest}), task)
    child = Task(task_id="c", domain="textworld", instruction=quest, metadata=metadata)
    assert validate_task(child) is None and "game_file" not in metadata
    start = get_domain("textworld").initial_state(child, rng(0))
    assert (
        state_quest(start.state) == quest and start.admissible_actions == task.metadata["initial_admissible"]
    )


def test_an_alfworld_trial_has_one_task_id_for_its_traj_data_and_its_real_game(tmp_path):
    from dreamgym_env.domains.alfworld.engine import ALFWorldEngine
    from dreamgym_env.domains.alfworld.tasks import alfworld_trial_task_id

    trial = tmp_path / "pick_and_place_simple-Mug-None-Desk-308" / "trial_T20190908_100000_000001"
    trial.mkdir(parents=True)
    data = {
        "task_id": trial.name,
        "task_type": "pick_and_place_simple",
        "pddl_params": {"object_target": "Mug", "parent_target": "Desk"},
    }
    (trial / "traj_data.json").write_text(json.dumps(data))
    (task,) = load_alfworld_traj_data(trial / "traj_data.json")
    state = "You are in the middle of a room.\nYour task is to: put a mug in desk."
    real = ALFWorldEngine._make_task(None, str(trial / "game.tw-pddl"), {}, state)  # type: ignore[arg-type]
    assert task.task_id == real.task_id == alfworld_trial_task_id(trial.name)


# ------------------------------------------------------------------------------------- WebShop page actions
def test_webshop_page_actions_are_the_pages_bracketed_elements():
    from dreamgym_env.domains.webshop import (
        page_actions,
        render_done_page,
        render_item_page,
        render_results_page,
        render_search_page,
        render_sub_page,
    )

    goal = "i want shoes, and price lower than 30.00 dollars"
    assert page_actions(render_search_page(goal)) == []
    assert page_actions(render_done_page(goal, "B1", {"size": "8"}, 1.0)) == []
    results = render_results_page(
        goal, "shoes", [("B1", "Shoes [2 Pack]", "$3"), ("B2", "", "")], page=2, total_results=50
    )
    assert page_actions(results) == [
        "click[Back to Search]",
        "click[< Prev]",
        "click[Next >]",
        "click[B1]",
        "click[B2]",
    ]
    item = render_item_page(goal, "B1", "Shoes [2 Pack]", "$3", {"size": ["8", "9"]}, {"size": "8"})
    assert page_actions(item) == [
        "click[Back to Search]",
        "click[< Prev]",
        "click[8]",
        "click[9]",
        "click[Description]",
        "click[Features]",
        "click[Reviews]",
        "click[Buy Now]",
    ]
    assert page_actions(render_sub_page(goal, "B1", "Reviews", "great [5 stars]")) == [
        "click[Back to Search]",
        "click[< Prev]",
    ]


def test_webshop_page_actions_agree_with_the_real_wrapper():
    from dreamgym_env.domains.webshop import page_actions
    from dreamgym_env.domains.webshop.engine import WebShopRealEnv
    from tests.real.test_real_webshop import FakeWebShop

    env = WebShopRealEnv(FakeWebShop(), sessions=[7])
    obs, info = env.reset(seed=0)
    for action in ("search[deodorant]", "click[B078GWRC1J]", "click[bright citrus]"):
        assert sorted(info["admissible_actions"]) == sorted(page_actions(obs)), obs
        obs, *_, info = env.step(action)
    assert sorted(info["admissible_actions"]) == sorted(page_actions(obs))


def test_imported_webshop_sessions_list_each_pages_actions(tmp_path):
    from dreamgym_env.buffer.loaders import iter_records
    from dreamgym_env.domains.webshop import page_actions
    from dreamgym_env.records import ADMISSIBLE_ACTIONS, PREV_ADMISSIBLE_ACTIONS

    goal = {"instruction_text": "i want a red mug, and price lower than 20.00 dollars", "asin": "B0MUG00001"}
    pages = [
        {"page": "index", "url": "http://x/", "goal": goal, "content": {}},
        {
            "page": "search_results",
            "url": "http://x/search?q=red+mug",
            "goal": goal,
            "content": {"keywords": ["red", "mug"], "page": 1, "products": [{"asin": "B0MUG00001"}]},
        },
        {
            "page": "item_page",
            "url": "http://x/item/B0MUG00001",
            "goal": goal,
            "content": {"asin": "B0MUG00001"},
        },
    ]
    path = tmp_path / "s1.jsonl"
    path.write_text("\n".join(json.dumps(p) for p in pages) + "\n")
    (record,) = iter_records([path], "webshop-session")
    transitions = record.transitions
    assert transitions, "the session gives transitions"
    for t in transitions:
        assert t.metadata[ADMISSIBLE_ACTIONS] == page_actions(t.next_state)
        assert t.metadata[PREV_ADMISSIBLE_ACTIONS] == page_actions(t.state)
    assert any(t.metadata[ADMISSIBLE_ACTIONS] for t in transitions)


def test_the_textworld_package_keeps_the_old_import_paths():
    # dreamgym_env.real.textworld and .textworld_suite are what users import: they name the same objects.
    import dreamgym_env.domains.textworld.engine as engine
    import dreamgym_env.domains.textworld.suite as suite
    import dreamgym_env.real.textworld as real_textworld
    import dreamgym_env.real.textworld_suite as real_suite

    for old, new in ((real_textworld, engine), (real_suite, suite)):
        assert old.__all__ == new.__all__
        assert all(getattr(old, name) is getattr(new, name) for name in old.__all__)
    assert load_entry_point(BUILTIN_DOMAINS["textworld"].real.entry_point) is real_textworld.TextWorldRealEnv


# A domain package's modules and the former module each stands for (kept as a re-export).
FORMER_MODULES = {
    "dreamgym_env.domains.alfworld.engine": "dreamgym_env.real.alfworld",
    "dreamgym_env.domains.alfworld.tasks": "dreamgym_env.domains.alfworld_tasks",
    "dreamgym_env.domains.miniwob.curriculum": "dreamgym_env.curriculum.miniwob",
    "dreamgym_env.domains.miniwob.domain": "dreamgym_env.domains.miniwob",
    "dreamgym_env.domains.miniwob.engine": "dreamgym_env.real.miniwob",
    "dreamgym_env.domains.miniwob.policies": "dreamgym_env.real.miniwob_policies",
    "dreamgym_env.domains.webarena.engine": "dreamgym_env.real.webarena",
    "dreamgym_env.domains.webarena.tasks": "dreamgym_env.domains.webarena_tasks",
    "dreamgym_env.domains.webshop.engine": "dreamgym_env.real.webshop",
    "dreamgym_env.domains.webshop.tasks": "dreamgym_env.domains.webshop_tasks",
}


@pytest.mark.parametrize(("new_name", "old_name"), sorted(FORMER_MODULES.items()))
def test_a_domain_packages_former_module_paths_name_the_same_objects(new_name, old_name):
    import ast
    import importlib

    new, old = importlib.import_module(new_name), importlib.import_module(old_name)
    defined = set()
    for node in ast.parse(Path(str(new.__file__)).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined.update(t.id for t in targets if isinstance(t, ast.Name))
    public = sorted(name for name in defined if not name.startswith("_"))
    assert public
    assert [name for name in public if getattr(old, name, None) is not getattr(new, name)] == []
    assert getattr(old, "__all__", None) == getattr(new, "__all__", None)


@pytest.mark.parametrize("name", ["alfworld", "miniwob", "webarena", "webshop"])
def test_a_domain_packages_real_entry_point_is_its_former_class(name):
    import importlib

    entry_point = BUILTIN_DOMAINS[name].real.entry_point
    assert entry_point.startswith(f"dreamgym_env.domains.{name}.engine:")
    former = importlib.import_module(f"dreamgym_env.real.{name}")
    assert load_entry_point(entry_point) is getattr(former, entry_point.rpartition(":")[2])
