"""The benchmark workload: one fixed answer per request, pinned by the output schema."""

from __future__ import annotations

import jsonschema
import pytest

from dreamgym_env import DreamGymEnv, ScriptedBackend
from dreamgym_env.experience.schema import fixed_answer, fixed_answer_schema, pin_fixed_answers
from tests._toy import ToyDomain


def test_the_schema_admits_the_fixed_answer_and_nothing_else():
    schema = fixed_answer_schema(20)
    answer = fixed_answer(20).model_dump()
    jsonschema.validate(answer, schema)
    assert len(answer["reasoning"]) + len(answer["next_state"]) == 20
    for field, other in [
        ("done", True),
        ("success", True),
        ("reasoning", "x" * 9),
        ("next_state", "y" * 10),
        ("admissible_actions", ["look"]),
    ]:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**answer, field: other}, schema)


def test_an_env_with_fixed_answers_sends_the_schema_and_runs_to_its_step_limit():
    backend = ScriptedBackend(lambda request: fixed_answer(16))
    env = DreamGymEnv(ToyDomain(), backend=backend, max_steps=3)
    pin_fixed_answers(env, 16)
    env.reset(seed=0)
    ends = [env.step("stop")[2:4] for _ in range(3)]  # "stop" would end a scripted episode at once
    assert ends == [(False, False), (False, False), (False, True)]
    assert all(r.json_schema == fixed_answer_schema(16) for r in backend.requests)


def test_pinning_checks_its_length_and_its_target():
    with pytest.raises(ValueError, match="at least 2"):
        pin_fixed_answers(DreamGymEnv(ToyDomain(), backend="scripted"), 1)
    with pytest.raises(ValueError, match="no experience model"):
        pin_fixed_answers(object(), 8)


@pytest.mark.integration
def test_vllm_gives_every_fixed_answer_the_same_tokens_and_never_ends_an_episode(vllm_server):
    """Structured decoding pins the answer: constant completion tokens, no episode end before the limit."""
    import gymnasium as gym

    import dreamgym_env  # noqa: F401 - registers the ids

    envs = gym.make_vec(
        "DreamGym/ALFWorld-v0",
        num_envs=4,
        base_url=vllm_server.base_url,
        model=vllm_server.model,
        max_steps=3,
        temperature=0.0,
        parse_retries=0,
    )
    pin_fixed_answers(envs, 24)
    envs.reset(seed=0)
    tokens, ends = [], []
    for _ in range(3):
        obs, _, terminated, truncated, infos = envs.step(["look"] * 4)
        assert all(o == "x" * 12 for o in obs)
        tokens += list(infos["usage"]["completion_tokens"])
        ends.append((terminated.any(), truncated.all()))
    envs.close()
    assert len(set(tokens)) == 1 and tokens[0] >= 24
    assert ends == [(False, False), (False, False), (False, True)]
