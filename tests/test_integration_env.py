"""The envs against the real vLLM OpenAI server serving the locally built smoke model."""

import os
import statistics
import time
import uuid

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import dreamgym_env
from dreamgym_env._event_loop import run_sync
from dreamgym_env.errors import ServerUnreachableError
from dreamgym_env.records import Step
from tests._grammar import answer_token_bound

pytestmark = pytest.mark.integration

FALLBACK_ACTIONS = {
    "DreamGym/WebShop-v0": "search[waterproof boots]",
    "DreamGym/ALFWorld-v0": "look",
    "DreamGym/WebArena-v0": "click('1')",
    "DreamGym/TextWorld-v0": "look",
    "DreamGym/MiniWoB-v0": "click('1')",
}
# Caps that keep the smoke model's answers short and always closable within max_tokens.
SMALL = dict(
    caps_in_schema=True,  # decoding enforces the caps, so the smoke model cannot ramble past them
    max_state_chars=300,
    max_reasoning_chars=160,
    max_admissible_actions=6,
    max_action_chars=40,
    max_tokens=900,
    timeout=60.0,
)


def pick_action(env_id, info):
    """The first listed action the grammar accepts (the smoke model lists nonsense), else a safe one."""
    domain = dreamgym_env.get_domain(dreamgym_env.BUILTIN_IDS[env_id])
    valid = [a for a in info["admissible_actions"] if domain.validate_action(a) is None]
    return valid[0] if valid else FALLBACK_ACTIONS[env_id]


@pytest.fixture
def make_env(vllm_server):
    def _make(env_id, **kwargs):
        return gym.make(env_id, base_url=vllm_server.base_url, model=vllm_server.model, **{**SMALL, **kwargs})

    return _make


# Caps under which the grammar's bound on an answer's tokens fits max_tokens beside the prompt: with
# max_tokens at that bound no answer is cut, whatever the smoke model generates. (The grammar allows
# an empty next_state, which the env rejects: parse retries cover that.)
STRICT = dict(max_state_chars=80, max_reasoning_chars=48, max_admissible_actions=3, max_action_chars=24)
STRICT["max_tokens"] = answer_token_bound(
    STRICT["max_reasoning_chars"],
    STRICT["max_state_chars"],
    STRICT["max_admissible_actions"],
    STRICT["max_action_chars"],
)


@pytest.mark.parametrize("env_id", sorted(dreamgym_env.BUILTIN_IDS))
def test_episode_through_gymnasium_make(make_env, env_id):
    env = make_env(env_id, max_steps=3, on_invalid_output="raise", parse_retries=3, **STRICT)
    sim = env.unwrapped
    obs, info = env.reset(seed=0)
    expected = []
    for step in range(1, 4):
        action = pick_action(env_id, info)
        expected.append(Step(state=obs, action=action))
        obs, reward, terminated, truncated, info = env.step(action)
        assert isinstance(obs, str) and obs
        assert env.observation_space.contains(obs)
        assert info["step"] == step and info["simulated"] is True and info["source"] == "sim"
        assert isinstance(info["reasoning"], str)
        assert reward in (0.0, 1.0) and reward == float(info["success"])
        assert info["usage"]["prompt_tokens"] > 0
        assert sim.history == expected  # every parsed transition joins the history, in order
        if terminated or truncated:
            break
    assert step == 3 or terminated
    assert truncated or terminated
    # The history is in the prompt: the next request shows every earlier state and action, in order.
    # (Prompt lengths prove nothing: the current state's listed actions may shrink from step to step.)
    request = sim.experience_model.build_request(
        sim.task, sim.history, [], obs, "look", info["admissible_actions"]
    )
    user, at = request.messages[-1]["content"], 0
    for past in expected:
        at = user.index(f"{past.state}\nAction: {past.action}\n", at) + 1  # ValueError: missing
    env.close()


def test_check_env_against_server(make_env):
    env = make_env("DreamGym/ALFWorld-v0", on_invalid_output="fail_state")
    check_env(env.unwrapped, skip_render_check=True)


def test_seeded_greedy_episodes_repeat(make_env):
    """Two greedy runs from one seed get the same transitions, however soon the model ends an episode.

    Each run makes exactly three model requests: an episode the model ends (``done`` is whatever the
    smoke model says) or that hits ``max_steps`` is followed by ``reset()``, whose next task comes from
    the env's seeded RNG. The raw answer shows in the compared fields (reasoning, admissible actions,
    completion tokens, or the parse error under ``fail_state``), so differing answers fail the test.
    Each run salts the server's prefix cache with a fresh ``cache_salt``, so both start from the same
    (empty) cache, whatever earlier tests sent: a prompt prefilled from cached blocks is computed in
    other chunks than a cold one, and greedy decoding of a tiny model can follow the difference.
    """

    def run():
        env = make_env(
            "DreamGym/ALFWorld-v0",
            temperature=0.0,
            max_steps=2,
            on_invalid_output="fail_state",
            extra_body={"cache_salt": uuid.uuid4().hex},
        )
        obs, info = env.reset(seed=7)
        trace = [obs]
        for _ in range(3):
            obs, reward, terminated, truncated, info = env.step(pick_action("DreamGym/ALFWorld-v0", info))
            assert info["usage"]["prompt_tokens"] > 0  # the model was asked (a grammatical action)
            answer = (info["reasoning"], info["admissible_actions"], info.get("model_error"))
            trace.append((obs, reward, terminated, truncated, answer, info["usage"]["completion_tokens"]))
            if terminated or truncated:
                obs, info = env.reset()
                trace.append(obs)
        env.close()
        return trace

    first = run()
    assert len([t for t in first if isinstance(t, tuple)]) == 3
    assert run() == first


def test_vector_env_against_server(vllm_server):
    envs = gym.make_vec(
        "DreamGym/WebShop-v0",
        num_envs=4,
        base_url=vllm_server.base_url,
        model=vllm_server.model,
        on_invalid_output="fail_state",
        **SMALL,
    )
    assert isinstance(envs, dreamgym_env.DreamGymVectorEnv)
    obs, infos = envs.reset(seed=0)
    obs, rewards, terms, truncs, infos = envs.step(["search[red shoes]"] * 4)
    assert len(obs) == 4 and all(isinstance(o, str) and o for o in obs)
    assert infos["_usage"].all()
    envs.close()


def test_unreachable_server_fails_fast_with_url():
    env = gym.make(
        "DreamGym/ALFWorld-v0",
        base_url="http://127.0.0.1:9/v1",
        model="m",
        timeout=2.0,
        connect_timeout=1.0,
        max_retries=1,
    )
    env.reset(seed=0)
    start = time.perf_counter()
    with pytest.raises(ServerUnreachableError, match="127.0.0.1:9"):
        env.step("look")
    assert time.perf_counter() - start < 10.0


def test_server_killed_mid_episode(smoke_model_dir):
    from dreamgym_env.serving import VLLMServer

    server = VLLMServer(smoke_model_dir, served_model_name="doomed", max_model_len=4096).start()
    try:
        # SMALL's 60 s timeout: a fresh server's first answer (grammar compilation included) can take
        # seconds on a busy machine.
        env = gym.make(
            "DreamGym/ALFWorld-v0",
            base_url=server.base_url,
            model="doomed",
            on_invalid_output="fail_state",
            **{**SMALL, "max_retries": 1},
        )
        env.reset(seed=0)
        env.step("look")  # the server answers
        server.kill()
        start = time.perf_counter()
        with pytest.raises(ServerUnreachableError, match=server.base_url.split("/v1")[0]):
            env.step("inventory")
        elapsed = time.perf_counter() - start
        # Nothing listens on the port any more: refused connections end the step long before one timeout.
        assert elapsed < 30.0, f"took {elapsed:.1f}s: the dead server was waited for, not refused"
    finally:
        server.stop()


def test_step_latency_is_mostly_server_time(make_env):
    """Client-side work (prompt building, parsing, retrieval) is a small share of a step."""
    env = make_env("DreamGym/ALFWorld-v0", on_invalid_output="fail_state", max_steps=50)
    obs, info = env.reset(seed=1)
    overheads, totals = [], []
    for _ in range(6):
        obs, _, terminated, truncated, info = env.step(pick_action("DreamGym/ALFWorld-v0", info))
        timing = info["timing"]
        totals.append(timing["total_s"])
        overheads.append(timing["build_s"] + timing["parse_s"] + timing["retrieve_s"])
        if terminated or truncated:
            obs, info = env.reset()
    assert statistics.median(overheads) < 0.05 * statistics.median(totals)


def test_prefix_cache_reuses_the_previous_step(make_env, smoke_model_dir):
    """vLLM reports cached prompt tokens: step t+1's request reuses step t's prompt up to its history.

    The first request is a real ``step``. The second is the request the env's experience model builds
    for the next step from the env's history and state, sent through the env's backend directly: the
    smoke model may have ended the episode (its ``done`` is noise), and this way it cannot matter. The
    two prompts share everything before the history; the current step (state, its admissible actions,
    the action) differs, so the bound is on the shared prefix, counted with the served tokenizer.
    """
    from transformers import AutoTokenizer

    env = make_env("DreamGym/ALFWorld-v0", on_invalid_output="fail_state", max_steps=10)
    sim = env.unwrapped
    start, reset_info = env.reset(seed=3)
    first_request = sim.experience_model.build_request(
        sim.task, [], [], start, "look", reset_info["admissible_actions"]
    )
    obs, _, _, _, info = env.step("look")
    first = info["usage"]
    # The env's history after a parsed answer (an unparsable one, under fail_state, adds none).
    history = [Step(state=start, action="look")]
    assert sim.history in ([], history)
    request = sim.experience_model.build_request(
        sim.task, history, [], obs, "inventory", info["admissible_actions"]
    )
    second = run_sync(sim.backend.acomplete(request)).usage()
    env.close()
    tok = AutoTokenizer.from_pretrained(smoke_model_dir)
    texts = [
        tok.apply_chat_template(r.messages, tokenize=False, add_generation_prompt=True)
        for r in (first_request, request)
    ]
    shared = len(tok(os.path.commonprefix(texts), add_special_tokens=False)["input_ids"])
    assert shared >= 0.5 * first["prompt_tokens"]  # the fixed instructions and the task lead both prompts
    assert second["cached_tokens"] is not None, "server should run with --enable-prompt-tokens-details"
    assert second["cached_tokens"] >= 0.9 * shared - 128  # whole cache blocks only


def test_state_answers_go_to_the_server_as_plain_text_requests(make_env):
    """No ``response_format``: the server generates free text, which the env reads as the next state."""
    env = make_env(
        "DreamGym/TextWorld-v0", answer_format="state", on_invalid_output="fail_state", parse_retries=0,
        max_tokens=24, top_k=0,
    )  # fmt: skip
    sim = env.unwrapped
    assert sim.experience_model.json_schema is None
    obs, info = env.reset(seed=0)
    for _ in range(2):
        ruled = ("look", "inventory", "examine")  # the domain's rules answer these without a request
        action = next((a for a in info["admissible_actions"] if a.split()[0] not in ruled), "go north")
        obs, reward, terminated, truncated, info = env.step(action)
        assert info["answered_by"] == "model"
        assert 0 < info["usage"]["completion_tokens"] <= 24
        # The smoke model's text is noise: either the domain read it as a state, or the step failed as
        # unparsable (reward 0, the state kept) without raising.
        assert env.observation_space.contains(obs) and (info.get("model_error") is None or reward == 0.0)
        if terminated or truncated:
            break
    env.close()


def test_logprobs_give_a_model_step_a_confidence(make_env):
    """vLLM's server sends each answer token's log-probability, under structured decoding too; the step
    reports their mean as a probability."""
    env = make_env(
        "DreamGym/TextWorld-v0", logprobs=True, answer_format="state", guided_answers=True, top_k=0,
        on_invalid_output="fail_state", parse_retries=2, max_admissible_actions=16,
    )  # fmt: skip
    _, info = env.reset(seed=0)
    *_, info = env.step("look")  # the domain's rules answer it
    assert info["answered_by"] == "rule" and info["confidence"] is None
    # The first seed task's garage holds a closed locker: the model writes what opening it shows, in the
    # form the domain gives (a pattern the server decodes to, so the answer always parses).
    assert "open shiny locker" in info["admissible_actions"]
    *_, info = env.step("open shiny locker")
    assert info["answered_by"] == "model" and info.get("model_error") is None, info.get("model_error")
    assert 0 < info["confidence"] <= 1
    env.close()
