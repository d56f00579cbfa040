import pickle

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import dreamgym_env
from dreamgym_env import DreamGymEnv, ExperienceOutput, ScriptedBackend
from dreamgym_env.errors import (
    ConfigError,
    DomainError,
    DreamGymError,
    InvalidActionError,
    ResponseFormatError,
)
from dreamgym_env.records import Transition
from dreamgym_env.registration import BUILTIN_IDS
from tests._toy import ToyDomain


def make(**kwargs):
    kwargs.setdefault("backend", ScriptedBackend())
    return DreamGymEnv(ToyDomain(), **kwargs)


def test_reset_gives_state_and_info_fields():
    env = make()
    obs, info = env.reset(seed=3)
    assert obs.startswith("Room ")
    for key in (
        "task",
        "task_id",
        "episode_id",
        "step",
        "admissible_actions",
        "success",
        "reasoning",
        "simulated",
        "source",
        "last_action_error",
    ):
        assert key in info
    assert info["simulated"] is True and info["source"] == "sim" and info["step"] == 0
    assert info["admissible_actions"][-1] == "stop"


def test_step_uses_model_output_and_grows_history():
    backend = ScriptedBackend()
    env = make(backend=backend)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("go[2]")
    assert "You did: go[2]" in obs
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["step"] == 1 and info["reasoning"]
    env.step("go[3]")
    assert [s.action for s in env.history] == ["go[2]", "go[3]"]
    # The second prompt extends the first one's history (prefix-cache friendly order).
    first, second = (r.messages[1]["content"] for r in backend.requests)
    shared = first.split("# Current step")[0].replace("(first step)\n\n", "")
    assert second.startswith(shared)
    assert second.index("Action: go[2]") < second.index("# Current step")


def test_success_gives_reward_one_on_final_step_only():
    script = [
        ExperienceOutput(reasoning="r", next_state="Room 2.", done=False, success=True),
        ExperienceOutput(reasoning="r", next_state="Goal reached.", done=True, success=True),
    ]
    env = make(backend=ScriptedBackend(script))
    env.reset(seed=0)
    _, r1, t1, _, i1 = env.step("go[2]")
    assert (r1, t1, i1["success"]) == (0.0, False, False)  # success without done is not success
    _, r2, t2, _, i2 = env.step("stop")
    assert (r2, t2, i2["success"]) == (1.0, True, True)
    with pytest.raises(DreamGymError, match="reset"):
        env.step("stop")


def test_truncation_at_step_limit():
    env = make(max_steps=2)
    env.reset(seed=0)
    assert env.step("go[1]")[3] is False
    _, _, terminated, truncated, _ = env.step("go[1]")
    assert (terminated, truncated) == (False, True)


@pytest.mark.parametrize("action", ["", "   ", "fly away", "go[1]" * 200])
def test_bad_actions_give_failure_feedback_without_model_call(action):
    backend = ScriptedBackend()
    env = make(backend=backend, max_action_chars=100)
    obs0, _ = env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(action)
    assert backend.requests == []
    assert reward == 0.0 and not terminated
    assert info["last_action_error"]
    assert obs.startswith("[Invalid action]") and obs.endswith(obs0)


def test_non_string_action_raises():
    env = make()
    env.reset(seed=0)
    with pytest.raises(InvalidActionError, match="strings"):
        env.step(3)


def test_unparsable_output_retried_then_raises():
    env = make(backend=ScriptedBackend(["not json", "{}", '{"reasoning": 1}']), parse_retries=2)
    env.reset(seed=0)
    with pytest.raises(ResponseFormatError, match="3 attempts") as e:
        env.step("go[1]")
    assert e.value.raw_output == '{"reasoning": 1}'


def test_unparsable_output_retry_recovers():
    good = ExperienceOutput(reasoning="ok", next_state="Room 3.", done=False, success=False)
    env = make(backend=ScriptedBackend(["garbage", good]), parse_retries=1)
    env.reset(seed=0)
    obs, *_, info = env.step("go[3]")
    assert obs == "Room 3." and info["attempts"] == 2


@pytest.mark.parametrize(
    ("retry_temperature", "expected"), [(0.7, [None, 0.7, 0.7]), (None, [None, None, None])]
)
def test_a_parse_retry_samples_a_new_answer(retry_temperature, expected):
    """A greedy model asked the same prompt again answers the same: retries sample, with their own seed."""
    good = ExperienceOutput(reasoning="ok", next_state="Room 3.", done=False, success=False)
    backend = ScriptedBackend(["garbage", "{}", good])
    env = make(backend=backend, parse_retries=2, retry_temperature=retry_temperature)
    env.reset(seed=0)
    env.step("go[3]")
    sent = list(backend.requests)
    assert [r.temperature for r in sent] == expected
    assert len({r.seed for r in sent}) == 3 and sent[1].messages == sent[0].messages


def test_model_time_adds_up_every_attempt():
    """A step asked again reports the backend time of both attempts, not only the last one's."""
    good = ExperienceOutput(reasoning="ok", next_state="Room 3.", done=False, success=False)
    env = make(backend=ScriptedBackend(["garbage", good], latency_s=0.05), parse_retries=1)
    env.reset(seed=0)
    *_, info = env.step("go[3]")
    assert info["attempts"] == 2 and info["timing"]["model_s"] == pytest.approx(0.10)


def test_fail_state_policy_keeps_state():
    env = make(backend=ScriptedBackend(["x", "y"]), parse_retries=1, on_invalid_output="fail_state")
    obs0, _ = env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("go[1]")
    assert obs == obs0 and reward == 0.0 and not terminated
    assert "not valid JSON" in info["model_error"]


def test_seeded_runs_repeat():
    def run(seed):
        env = make()
        out = [env.reset(seed=seed)[0]]
        for a in ["go[1]", "go[2]", "stop"]:
            obs, r, *_ = env.step(a)
            out.append((obs, r))
        return out, env.task.task_id

    assert run(5) == run(5)
    assert len({str(run(s)) for s in range(6)}) > 1


def test_retriever_receives_and_supplies_transitions():
    class ListRetriever:
        def __init__(self):
            self.items: list[Transition] = []

        def retrieve(self, state, action, k, *, domain=None, exclude_episode=None):
            return [t for t in self.items if t.episode_id != exclude_episode][:k]

        def add(self, transition):
            self.items.append(transition)

    retriever = ListRetriever()
    backend = ScriptedBackend()
    env = make(retriever=retriever, backend=backend, top_k=2)
    env.reset(seed=0)
    env.step("go[1]")
    assert len(retriever.items) == 1 and retriever.items[0].source == "sim"
    env.reset(seed=1)
    env.step("go[2]")
    assert "# Similar real transitions" in backend.requests[-1].messages[1]["content"]
    assert "Next state:\n" + retriever.items[0].next_state in backend.requests[-1].messages[1]["content"]


def test_pinned_task_and_pickling():
    env = make()
    obs, info = env.reset(seed=0, options={"task": "Reach room 9"})
    assert info["task"] == "Reach room 9"
    clone = pickle.loads(pickle.dumps(env))
    assert clone.task.instruction == "Reach room 9"


def test_unknown_option_is_a_config_error():
    with pytest.raises(ConfigError, match="Accepted options"):
        make(topk=3)


def test_check_env_passes():
    check_env(make(), skip_render_check=True)


def test_registered_ids_make_and_check(monkeypatch):
    for env_id in dreamgym_env.BUILTIN_IDS:
        env = gym.make(env_id, backend="scripted")
        check_env(env.unwrapped, skip_render_check=True)
        obs, info = env.reset(seed=0)
        assert isinstance(obs, str) and info["task"]


def test_openai_backend_requires_model_name(monkeypatch):
    monkeypatch.delenv("DREAMGYM_MODEL", raising=False)
    with pytest.raises(ConfigError, match="DREAMGYM_MODEL"):
        gym.make("DreamGym/WebShop-v0")


def test_hidden_task_facts_reach_the_model_not_the_agent():
    import gymnasium as gym

    env = gym.make("DreamGym/WebShop-v0", backend="scripted")
    task = {
        "task_id": "t",
        "instruction": "buy blue socks",
        "metadata": {"price_upper": 12.5, "options": ["blue"]},
    }
    obs, info = env.reset(seed=0, options={"task": task})
    assert "12.5" not in obs
    env.step("search[blue socks]")
    prompt = env.unwrapped.backend.requests[-1].messages[1]["content"]
    assert "- price_upper: 12.5" in prompt and "- options: ['blue']" in prompt


def test_backend_failure_leaves_episode_retryable():
    from dreamgym_env.errors import ServerUnreachableError
    from dreamgym_env.experience.backends.scripted import echo_world

    calls = []

    def flaky(request):
        calls.append(1)
        if len(calls) == 2:
            raise ServerUnreachableError("down")
        return echo_world(request)

    env = make(backend=ScriptedBackend(flaky))
    env.reset(seed=0)
    env.step("go[1]")
    with pytest.raises(ServerUnreachableError):
        env.step("go[2]")
    obs, *_, info = env.step("go[2]")
    assert info["step"] == 2 and [s.action for s in env.history] == ["go[1]", "go[2]"]


def test_raw_control_characters_in_answers_are_dropped():
    raw = (
        '{"reasoning": "ok\x0f\x7f", "next_state": "Room\x01 2.\\nExit\tnorth", "admissible_actions": [], '
        '"done": false, "success": false}'
    )
    env = make(backend=ScriptedBackend([raw]), parse_retries=0)
    env.reset(seed=0)
    obs, *_, info = env.step("go[2]")
    assert obs == "Room 2.\nExit\tnorth" and info["reasoning"] == "ok"
    assert env.observation_space.contains(obs)


def test_step_works_inside_a_running_event_loop():
    """Notebooks, async trainers and Playwright's sync API leave a loop running in the caller's thread."""
    import asyncio

    async def inside():
        env = make()
        env.reset(seed=0)
        return env.step("go[1]")[0]

    assert "You did: go[1]" in asyncio.run(inside())


def test_requests_carry_the_episode_id():
    """The backend routes by episode (one server's prefix cache per episode), so every step says which."""
    env = make()
    _, first = env.reset(seed=0)
    env.step("go[1]")
    env.step("go[2]")
    _, second = env.reset(seed=1)
    env.step("go[1]")
    ids = [r.episode_id for r in env.unwrapped.backend.requests]
    assert ids == [first["episode_id"]] * 2 + [second["episode_id"]]
    assert first["episode_id"] != second["episode_id"]


def test_length_caps_are_checked_after_parsing_not_in_the_schema_by_default():
    """xgrammar admits no escape (no newline) in a maxLength-capped string: caps stay out of the schema."""
    from dreamgym_env.experience.model import ExperienceModel

    default = ExperienceModel(ToyDomain(), ScriptedBackend(), dreamgym_env.EnvConfig())
    assert "maxLength" not in str(default.json_schema)
    capped = ExperienceModel(ToyDomain(), ScriptedBackend(), dreamgym_env.EnvConfig(caps_in_schema=True))
    assert capped.json_schema["properties"]["next_state"]["maxLength"] == 4000

    long_state = ExperienceOutput(
        reasoning="", next_state="x" * 41, admissible_actions=[], done=False, success=False
    )
    env = DreamGymEnv(
        ToyDomain(),
        backend=ScriptedBackend(lambda request: long_state),
        max_state_chars=40,
        parse_retries=1,
        on_invalid_output="raise",
    )
    env.reset(seed=0)
    with pytest.raises(ResponseFormatError, match="41 characters, over max_state_chars=40"):
        env.step("go[2]")


@pytest.mark.parametrize("action", ["go[\ud800]", "go[1]\x07", "\x1b[31mgo[1]", "look\x00 around"])
def test_actions_that_are_not_text_get_feedback_that_stays_in_the_observation_space(action):
    """A lone surrogate or a control character is rejected like any malformed action, never echoed raw."""
    backend = ScriptedBackend()
    env = make(backend=backend)
    obs0, _ = env.reset(seed=0)
    assert not env.action_space.contains(action)
    obs, reward, terminated, _, info = env.step(action)
    assert backend.requests == [] and reward == 0.0 and not terminated
    assert obs.startswith("[Invalid action]") and obs.endswith(obs0)
    assert "not text" in info["last_action_error"]
    assert env.observation_space.contains(obs) and env.observation_space.contains(info["last_action_error"])


def test_a_long_ungrammatical_action_leaves_the_feedback_and_state_whole():
    """The reason is cut to fit the room kept for it; the state is never cut and the prefix always stays."""
    env = make(max_action_chars=1000, max_state_chars=16)
    obs0, _ = env.reset(seed=0)
    obs, *_ = env.step("dance " * 165)
    assert obs.startswith("[Invalid action]") and obs.endswith("\n\n" + obs0)
    assert env.observation_space.contains(obs)


def test_an_admissible_action_outside_the_grammar_reaches_the_model():
    """What the world lists is playable (as in the real envs), so action masks and the sim agree."""
    listed = ExperienceOutput(
        reasoning="r",
        next_state="Room 2.",
        admissible_actions=["look around", "go[1]"],
        done=False,
        success=False,
    )
    backend = ScriptedBackend([listed, listed])
    env = make(backend=backend)
    env.reset(seed=0)
    env.step("go[2]")
    obs, *_, info = env.step("look around")
    assert len(backend.requests) == 2 and info["last_action_error"] is None and obs == "Room 2."


def test_is_success_and_the_stored_transition_carry_what_training_needs():
    script = [
        ExperienceOutput(
            reasoning="r", next_state="Room 2.", admissible_actions=["stop"], done=False, success=False
        ),
        ExperienceOutput(reasoning="r", next_state="Goal reached.", done=True, success=True),
    ]
    env = make(backend=ScriptedBackend(script))
    _, info = env.reset(
        seed=0, options={"task": {"task_id": "t", "instruction": "walk", "metadata": {"x": 1}}}
    )
    assert info["is_success"] is False
    before = info["admissible_actions"]
    *_, info = env.step("go[2]")
    stored = env.last_transition
    assert info["is_success"] is False and stored.source == "sim" and stored.step == 0
    assert stored.prev_admissible_actions == before and stored.admissible_actions == ["stop"]
    assert stored.task_metadata == {}  # the toy domain shows the model no task facts
    *_, info = env.step("stop")
    assert info["is_success"] is True and env.last_transition.success
    env.reset(seed=1)
    env.step("bad action")
    assert env.last_transition is None  # a rejected action stores nothing


@pytest.mark.parametrize(
    ("task", "message"),
    [
        # Measured before the fix: UnicodeEncodeError from hashing the instruction.
        ("caf\udce9", "it holds a lone surrogate (not encodable as UTF-8), U+DCE9, at position 3"),
        ("beep\x07", "it holds a control character, U+0007, at position 4"),
        ("", "is empty"),
        # Measured before the fix: a bare pydantic ValidationError.
        ({"foo": 1}, "options['task'] as a dict: instruction: Field required"),
        ({"instruction": 3}, "instruction: Input should be a valid string"),
        ({"instruction": "ok", "task_id": "caf\udce9"}, "task_id"),
        (3, "got int"),
    ],
)
def test_a_bad_task_option_is_a_domain_error(task, message):
    env = make()
    with pytest.raises(DomainError) as caught:
        env.reset(seed=0, options={"task": task})
    assert message in str(caught.value), str(caught.value)
    str(caught.value).encode("utf-8")  # the message itself is printable text
    env.reset(seed=0, options={"task": "Reach room 2"})  # the env is still usable


def test_tasks_of_another_domain_are_refused_naming_both_domains():
    from dreamgym_env.domains import get_domain

    webshop_tasks = get_domain("webshop").seed_tasks()
    for make_env in (
        lambda: gym.make("DreamGym/TextWorld-v0", backend=ScriptedBackend(), tasks=webshop_tasks),
        lambda: dreamgym_env.DreamGymVectorEnv(
            "textworld", num_envs=2, backend=ScriptedBackend(), tasks=webshop_tasks
        ),
    ):
        with pytest.raises(ConfigError) as info:
            make_env()
        message = str(info.value)
        assert "'webshop'" in message and "'textworld'" in message and webshop_tasks[0].task_id in message


def test_a_spec_with_tasks_serialises_and_makes_the_same_env_again():
    from dreamgym_env.domains import get_domain

    tasks = get_domain("textworld").seed_tasks()[:2]
    env = gym.make("DreamGym/TextWorld-v0", backend="scripted", tasks=tasks)
    text = env.spec.to_json()
    again = gym.make(gym.envs.registration.EnvSpec.from_json(text))
    assert again.unwrapped.task_sampler.tasks == tasks  # the tasks came back as Tasks, equal
    assert again.spec.to_json() == text
    assert again.reset(seed=3)[0] == env.reset(seed=3)[0]
    envs = gym.make_vec("DreamGym/TextWorld-v0", num_envs=2, backend="scripted", tasks=tasks)
    vector_again = gym.make_vec(gym.envs.registration.EnvSpec.from_json(envs.spec.to_json()), num_envs=2)
    assert [o for o in vector_again.reset(seed=3)[0]] == [o for o in envs.reset(seed=3)[0]]


def test_tasks_given_as_dicts_are_made_tasks_of_the_envs_domain():
    env = gym.make(
        "DreamGym/TextWorld-v0",
        backend="scripted",
        tasks=[{"task_id": "a", "instruction": "Reach room 2", "metadata": {"k": 1}}],
    )
    [task] = env.unwrapped.task_sampler.tasks
    assert task == dreamgym_env.Task(
        task_id="a", domain="textworld", instruction="Reach room 2", metadata={"k": 1}
    )
    with pytest.raises(ConfigError, match=r"tasks\[0\] is a dict that does not make a Task \(instruction"):
        gym.make("DreamGym/TextWorld-v0", backend="scripted", tasks=[{"task_id": "a"}])


@pytest.mark.parametrize("tasks", [["games/g.z8"], "games/g.z8"])
def test_game_file_paths_as_tasks_point_to_tasks_from_games(tasks):
    for make_env in (
        lambda: gym.make("DreamGym/TextWorld-v0", backend=ScriptedBackend(), tasks=tasks),
        lambda: dreamgym_env.DreamGymVectorEnv(
            "textworld", num_envs=2, backend=ScriptedBackend(), tasks=tasks
        ),
    ):
        with pytest.raises(ConfigError) as info:
            make_env()
        message = str(info.value)
        assert "Task objects" in message and "'games/g.z8'" in message
        assert "dreamgym_env.real.textworld.tasks_from_games(paths)" in message
        assert "tasks=tasks_from_games(['games/g.z8'])" in message


@pytest.mark.parametrize("bad", [{"foo": 1}, "buy shoes", None])
def test_a_task_that_is_not_a_task_says_what_a_task_holds(bad):
    with pytest.raises(ConfigError) as info:
        gym.make("DreamGym/TextWorld-v0", backend=ScriptedBackend(), tasks=[bad])
    message = str(info.value)
    assert "tasks[0]" in message and type(bad).__name__ in message
    assert all(field in message for field in ("task_id", "domain", "instruction"))


@pytest.mark.parametrize("env_id", sorted(BUILTIN_IDS))
def test_the_action_grammar_is_readable_before_any_invalid_action(env_id):
    from dreamgym_env.domains import get_domain

    env = gym.make(env_id, backend="scripted")
    grammar = env.unwrapped.action_help
    assert grammar and grammar == get_domain(BUILTIN_IDS[env_id]).action_help
    with pytest.raises(AttributeError):
        env.unwrapped.action_help = "something else"  # read-only: the domain's
    env.reset(seed=0)
    *_, info = env.step("")  # the feedback of an invalid action quotes the same text
    assert grammar in info["last_action_error"]
    assert gym.make_vec(env_id, num_envs=2, backend="scripted").unwrapped.action_help == grammar
