"""``logprobs=True``: the answer's mean token log-probability, and ``info["confidence"]`` on the steps the model decided.

The server is a loopback stand-in (tests/_http.py) that answers every transition with log-probabilities,
whether or not it was asked for them, so the env's own switch is what is tested.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import types
from typing import Any

import gymnasium as gym
import pytest

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.experience.backends.base import Backend, Completion, CompletionRequest
from dreamgym_env.experience.backends.openai_http import _to_completion
from dreamgym_env.experience.backends.recording import read_recording, record, replay
from dreamgym_env.experience.backends.vllm_engine import VLLMEngineBackend
from tests._http import serve_json
from tests.experience.test_vllm_engine_backend import _restore_engine_env_after

pytestmark = pytest.mark.timeout(120)

ANSWER = {
    "reasoning": "",
    "next_state": "Nothing happens.",
    "admissible_actions": [],
    "done": False,
    "success": False,
}
LOGPROBS = [-0.1, -0.7, -0.4]  # each answer's tokens, as the stand-in reports them
UNSURE = [-2.0, -3.0]


def _completion(content: str, logprobs: list[float]) -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "logprobs": {
                    "content": [
                        {"token": "t", "logprob": v, "bytes": [116], "top_logprobs": []} for v in logprobs
                    ]
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": len(logprobs),
            "total_tokens": 10 + len(logprobs),
        },
    }


@pytest.fixture
def server():
    """A chat endpoint that keeps each request body in ``server.bodies``.

    It answers from ``server.answers``, ``(content, token logprobs)`` pairs taken in turn, the last
    one repeated.
    """
    bodies: list[dict[str, Any]] = []
    answers = [(json.dumps(ANSWER), LOGPROBS)]

    def respond(body, _port):
        bodies.append(body)
        content, logprobs = answers.pop(0) if len(answers) > 1 else answers[0]
        return _completion(content, logprobs)

    stub = serve_json(respond)
    stub.bodies, stub.answers = bodies, answers
    yield stub
    stub.shutdown()
    stub.server_close()


def _env(server, **kwargs):
    url = f"http://127.0.0.1:{server.server_port}/v1"
    return gym.make("DreamGym/TextWorld-v0", base_url=url, model="m", top_k=0, **kwargs)


def _model_action(info) -> str:
    """An action of the first TextWorld state that the domain's rules do not answer."""
    ruled = ("look", "inventory", "examine")
    return next(a for a in info["admissible_actions"] if a.split()[0] not in ruled)


def test_a_model_step_reports_the_answers_confidence_and_a_rule_step_none(server):
    env = _env(server, logprobs=True)
    _, info = env.reset(seed=0)
    *_, info = env.step("look")  # TextWorld's rules answer it: no request
    assert info["answered_by"] == "rule" and info["confidence"] is None and not server.bodies
    *_, info = env.step(_model_action(info))
    assert info["answered_by"] == "model"
    assert info["confidence"] == pytest.approx(math.exp(sum(LOGPROBS) / len(LOGPROBS)))
    assert 0 < info["confidence"] <= 1
    assert [b.get("logprobs") for b in server.bodies] == [True]
    env.close()


def test_without_the_switch_no_logprobs_are_asked_for_and_there_is_no_confidence(server):
    env = _env(server)
    _, info = env.reset(seed=0)
    *_, info = env.step(_model_action(info))
    assert info["answered_by"] == "model" and info.get("confidence") is None
    assert "logprobs" not in server.bodies[0]  # the stand-in sent them anyway: the env does not read them
    env.close()


def test_a_retried_step_reports_the_confidence_of_the_answer_it_kept(server):
    server.answers[:] = [("not json", UNSURE), (json.dumps(ANSWER), LOGPROBS)]
    env = _env(server, logprobs=True, parse_retries=1)
    _, info = env.reset(seed=0)
    *_, info = env.step(_model_action(info))
    assert info["attempts"] == 2
    assert info["confidence"] == pytest.approx(math.exp(sum(LOGPROBS) / len(LOGPROBS)))
    env.close()


def test_a_step_no_answer_decided_has_none(server):
    server.answers[:] = [("not json", UNSURE)]
    env = _env(server, logprobs=True, parse_retries=0, on_invalid_output="fail_state")
    _, info = env.reset(seed=0)
    *_, info = env.step(_model_action(info))
    assert info["model_error"] and info["answered_by"] == "model" and info["confidence"] is None
    env.close()


def test_a_step_the_memo_answers_has_none(server):
    env = _env(server, logprobs=True)
    for answered_by in ("model", "memo"):  # the same first step again: the model's answer is remembered
        _, info = env.reset(seed=0)
        *_, info = env.step(_model_action(info))
        assert info["answered_by"] == answered_by
        assert (info["confidence"] is None) == (answered_by == "memo")
    assert len(server.bodies) == 1
    env.close()


def test_a_completion_without_usable_logprobs_has_no_mean():
    def mean(logprobs: Any) -> float | None:
        body = _completion("a", [-1.0])
        body["choices"][0]["logprobs"] = logprobs
        return _to_completion(body, 0.0, "http://x/v1", logprobs=True).mean_logprob

    assert mean({"content": [{"logprob": -1.0}, {"logprob": -2.0}]}) == pytest.approx(-1.5)
    assert mean({"content": [{"logprob": 0.0}]}) == 0.0
    for unusable in (None, {}, {"content": None}, {"content": []}, {"content": [{"token": "a"}]}, "x"):
        assert mean(unusable) is None, unusable
    assert mean({"content": [{"logprob": float("-inf")}]}) is None


class _Sure(Backend):
    """Answers every request with the same text and mean log-probability."""

    async def acomplete(self, request: CompletionRequest) -> Completion:
        return Completion("answer", 3, 2, None, 0.01, "sure", {"finish_reason": "stop"}, mean_logprob=-0.25)


def test_a_recording_keeps_the_mean_logprob(tmp_path):
    path = tmp_path / "run.sqlite"
    request = CompletionRequest(messages=[{"role": "user", "content": "hi"}], json_schema=None)
    recorder = record(_Sure(), path)
    asyncio.run(recorder.closing(recorder.acomplete(request)))
    [call] = read_recording(path)
    assert call.completion.mean_logprob == -0.25 and call.completion.extra == {"finish_reason": "stop"}
    player = replay(path)
    replayed = asyncio.run(player.closing(player.acomplete(request)))
    assert replayed.mean_logprob == -0.25 and "mean_logprob" not in replayed.extra


@pytest.mark.parametrize("switch", [False, True])
def test_the_engine_backend_asks_for_the_sampled_tokens_logprob_only_when_switched_on(monkeypatch, switch):
    params: list[dict[str, Any]] = []

    class FakeLLM:
        def __init__(self, model: str, **kwargs: Any) -> None:
            pass

        def chat(self, messages, sampling, use_tqdm=False):
            out = types.SimpleNamespace(
                text="a",
                token_ids=[1, 2, 3, 4],
                finish_reason="stop",
                cumulative_logprob=-2.0 if switch else None,
            )
            return [
                types.SimpleNamespace(outputs=[out], prompt_token_ids=[1], num_cached_tokens=0)
                for _ in messages
            ]

    fake = types.ModuleType("vllm")
    fake.LLM = FakeLLM
    fake.SamplingParams = lambda **kwargs: params.append(kwargs) or kwargs
    fake_params = types.ModuleType("vllm.sampling_params")
    fake_params.StructuredOutputsParams = lambda **kwargs: kwargs
    monkeypatch.setitem(sys.modules, "vllm", fake)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", fake_params)
    _restore_engine_env_after(monkeypatch)
    backend = VLLMEngineBackend("/models/m", logprobs=switch)
    request = CompletionRequest(messages=[{"role": "user", "content": "hi"}], json_schema=None)
    [completion] = backend._generate([request])
    assert params[0]["logprobs"] == (0 if switch else None)
    assert completion.mean_logprob == (-0.5 if switch else None)
