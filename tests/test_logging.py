"""The package logs at its boundaries under the ``dreamgym_env`` logger, and never a key or a prompt."""

import asyncio
import logging

import pytest

import dreamgym_env
from dreamgym_env import DreamGymEnv, ScriptedBackend
from dreamgym_env.buffer import ReplayBuffer
from dreamgym_env.config import BackendConfig
from dreamgym_env.errors import ServerUnreachableError
from dreamgym_env.experience.backends.base import CompletionRequest
from dreamgym_env.experience.backends.openai_http import OpenAIBackend
from tests._toy import ToyDomain
from tests.buffer.test_buffer_replay import tr
from tests.experience.test_openai_backend import _endpoint, _stop, _url
from tests.serving.test_serving import _fake_server

KEY = "sk-test-do-not-log-0123456789"
VALID = (
    '{"reasoning": "ok", "next_state": "Room 2.", "admissible_actions": [], "done": false, "success": false}'
)


def _records(caplog, level, logger=None):
    return [r for r in caplog.records if r.levelno == level and r.name.startswith(logger or "dreamgym_env")]


def test_the_package_logger_has_a_null_handler():
    assert dreamgym_env.__name__ == "dreamgym_env"
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("dreamgym_env").handlers)


def test_retries_and_fail_over_are_warnings_without_the_key(caplog):
    caplog.set_level(logging.DEBUG)  # every logger, the openai client's included
    hits = []
    dead, live = _endpoint("dead", hits), _endpoint("live", hits)
    _stop(dead)
    backend = OpenAIBackend(
        BackendConfig(base_url=[_url(dead), _url(live)], model="m", api_key=KEY, max_retries=1)
    )
    # A request outside an episode takes the first endpoint on its first turn: the dead one.
    request = CompletionRequest(
        messages=[{"role": "user", "content": "the prompt"}], json_schema={"type": "object"}
    )

    async def run():
        await backend.acomplete(request)
        await backend.aclose()

    try:
        asyncio.run(run())
    finally:
        _stop(live)
    assert [name for name, _ in hits] == ["live"]
    warnings = [r.getMessage() for r in _records(caplog, logging.WARNING, "dreamgym_env.experience")]
    # The dead endpoint is not retried while another one may answer: the request fails over at once.
    assert any("failing over" in m and _url(dead) in m and _url(live) in m for m in warnings), warnings
    assert KEY not in caplog.text
    assert not any(
        "the prompt" in r.getMessage() for r in caplog.records if r.name.startswith("dreamgym_env")
    )


def test_an_unreachable_model_is_logged_and_raised_without_the_key(caplog):
    caplog.set_level(logging.DEBUG)
    hits = []
    dead = _endpoint("dead", hits)
    _stop(dead)
    backend = OpenAIBackend(
        BackendConfig(base_url=_url(dead), model="m", api_key=KEY, max_retries=1, retry_backoff=0.01)
    )
    request = CompletionRequest(messages=[{"role": "user", "content": "x"}], json_schema={"type": "object"})
    with pytest.raises(ServerUnreachableError) as caught:
        asyncio.run(backend.acomplete(request))
    assert KEY not in str(caught.value)
    warnings = [r.getMessage() for r in _records(caplog, logging.WARNING)]
    assert any("retry 1 of 1" in m and _url(dead) in m for m in warnings), warnings
    assert any("no endpoint left to try" in m and _url(dead) in m for m in warnings), warnings
    assert KEY not in caplog.text


def test_parse_retries_log_the_problem_not_the_prompt(caplog):
    caplog.set_level(logging.DEBUG, logger="dreamgym_env")
    env = DreamGymEnv(ToyDomain(), backend=ScriptedBackend(["not json at all", VALID]), parse_retries=1)
    env.reset(seed=0)
    obs, *_ = env.step("go[2]")
    assert obs == "Room 2."
    warnings = [r.getMessage() for r in _records(caplog, logging.WARNING, "dreamgym_env.experience.model")]
    assert len(warnings) == 1, warnings
    assert "attempt 1 of 2" in warnings[0] and "not valid JSON" in warnings[0]
    prompt = env.backend.requests[0].messages
    assert all(m["content"] not in caplog.text for m in prompt)


def test_all_answers_unparsable_under_fail_state_is_a_warning(caplog):
    caplog.set_level(logging.DEBUG, logger="dreamgym_env")
    env = DreamGymEnv(
        ToyDomain(),
        backend=ScriptedBackend(["nope", "nope"]),
        parse_retries=1,
        on_invalid_output="fail_state",
    )
    env.reset(seed=0)
    *_, info = env.step("go[2]")
    assert info["model_error"]
    warnings = [r.getMessage() for r in _records(caplog, logging.WARNING, "dreamgym_env.experience.model")]
    assert len(warnings) == 2 and "fail_state" in warnings[1], warnings


def test_buffer_evictions_are_logged(caplog):
    caplog.set_level(logging.DEBUG, logger="dreamgym_env")
    with ReplayBuffer(max_synthetic=3) as buffer:
        buffer.add_many([tr(i) for i in range(5)])
    infos = [r.getMessage() for r in _records(caplog, logging.INFO, "dreamgym_env.buffer")]
    assert any("evicted 2 simulated transitions" in m and "max_synthetic=3" in m for m in infos), infos


def test_server_start_and_stop_are_logged(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="dreamgym_env")
    server, _ = _fake_server(tmp_path, "serve", startup_timeout=20)
    with server:
        pass
    messages = [r.getMessage() for r in _records(caplog, logging.INFO, "dreamgym_env.serving")]
    assert any("starting" in m.lower() and server.base_url in m for m in messages), messages
    assert any("ready" in m and server.base_url in m for m in messages), messages
    assert any("stopped" in m and server.base_url in m for m in messages), messages
