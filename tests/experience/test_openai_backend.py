"""The OpenAI-compatible backend's HTTP behaviour, against a local stand-in server."""

import asyncio
import dataclasses
import gc
import json
import threading
import time
from collections import defaultdict

import pytest

from dreamgym_env.config import BackendConfig
from dreamgym_env.experience.backends.base import CompletionRequest
from dreamgym_env.experience.backends.openai_http import OpenAIBackend
from tests._http import serve_json

ANSWER = {"reasoning": "r", "next_state": "s", "admissible_actions": [], "done": False, "success": False}


def _chat_completion():
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": json.dumps(ANSWER)},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _serve(wave: int):
    """A chat-completions endpoint that records each request's client port and answers a wave at a time.

    Every request waits until ``wave`` requests are in, so exactly ``wave`` connections are open at once.
    """
    ports = []
    barrier = threading.Barrier(wave, timeout=30)

    def respond(body, port):
        ports.append(port)
        barrier.wait()
        return _chat_completion()

    return serve_json(respond), ports


def test_waves_wider_than_openais_default_pool_reuse_their_connections():
    """A vector env of 120 sends waves of 120 requests; the second wave must not open new connections.

    openai's default pool keeps 100 connections alive, so 20 would be closed after every wave and
    opened again (against vLLM, some requests on such fresh connections stalled until the read timeout).
    """
    server, ports = _serve(wave=120)
    backend = OpenAIBackend(
        BackendConfig(base_url=f"http://127.0.0.1:{server.server_port}/v1", model="m", max_concurrency=256)
    )
    request = CompletionRequest(messages=[{"role": "user", "content": "hi"}], json_schema={"type": "object"})

    async def waves():
        for _ in range(2):
            completions = await asyncio.gather(*(backend.acomplete(request) for _ in range(120)))
            assert all(json.loads(c.text) == ANSWER for c in completions)
        await backend.aclose()

    try:
        asyncio.run(waves())
    finally:
        server.shutdown()
    assert len(ports) == 240
    assert len(set(ports)) == 120


# ---------------------------------------------------------------------------------------------- routing
def _endpoint(name, hits, port=0):
    """An endpoint that records ``(name, episode)`` for every request (the episode is the message)."""

    def respond(body, _port):
        hits.append((name, body["messages"][0]["content"]))
        return _chat_completion()

    return serve_json(respond, port)


def _url(server):
    return f"http://127.0.0.1:{server.server_port}/v1"


def _request(episode):
    return CompletionRequest(
        messages=[{"role": "user", "content": episode}], json_schema={"type": "object"}, episode_id=episode
    )


def _play(backend, episodes, steps):
    """``steps`` lock-step steps of every episode, as a vector env sends them, on a fresh event loop."""

    async def run():
        for _ in range(steps):
            await asyncio.gather(*(backend.acomplete(_request(e)) for e in episodes))
        await backend.aclose()

    asyncio.run(run())


def _servers_by_episode(hits):
    servers = defaultdict(set)
    for name, episode in hits:
        servers[episode].add(name)
    return servers


def _stop(server):
    server.shutdown()
    server.server_close()


def test_every_step_of_an_episode_reaches_the_same_endpoint():
    """Step t+1's prompt extends step t's: only the server that saw step t has it in its prefix cache."""
    hits = []
    a, b = _endpoint("a", hits), _endpoint("b", hits)
    backend = OpenAIBackend(BackendConfig(base_url=[_url(a), _url(b)], model="m", max_retries=0))
    episodes = [f"episode-{i}" for i in range(16)]
    try:
        _play(backend, episodes, steps=4)
    finally:
        _stop(a)
        _stop(b)
    servers = _servers_by_episode(hits)
    assert len(hits) == 64 and set(servers) == set(episodes)
    assert all(len(names) == 1 for names in servers.values()), dict(servers)
    counts = {name: sum(names == {name} for names in servers.values()) for name in "ab"}
    assert counts["a"] >= 3 and counts["b"] >= 3, counts


def test_requests_without_an_episode_still_take_turns():
    hits = []
    a, b = _endpoint("a", hits), _endpoint("b", hits)
    backend = OpenAIBackend(BackendConfig(base_url=[_url(a), _url(b)], model="m", max_retries=0))
    request = CompletionRequest(
        messages=[{"role": "user", "content": "task"}], json_schema={"type": "object"}
    )

    async def run():
        for _ in range(4):
            await backend.acomplete(request)
        await backend.aclose()

    try:
        asyncio.run(run())
    finally:
        _stop(a)
        _stop(b)
    assert sorted(name for name, _ in hits) == ["a", "a", "b", "b"]


def test_episodes_of_a_dead_endpoint_move_to_a_live_one_and_stay(monkeypatch):
    hits = []
    a, b = _endpoint("a", hits), _endpoint("b", hits)
    port_a = a.server_port
    backend = OpenAIBackend(BackendConfig(base_url=[_url(a), _url(b)], model="m", max_retries=0))
    episodes = [f"episode-{i}" for i in range(16)]
    try:
        _play(backend, episodes, steps=1)
        on_a = {e for e, names in _servers_by_episode(hits).items() if names == {"a"}}
        assert on_a

        _stop(a)  # connections to a are refused from now on
        hits.clear()
        _play(backend, episodes, steps=2)
        assert len(hits) == 32 and {name for name, _ in hits} == {"b"}

        # a comes back at the same URL: the moved episodes stay on b (b holds their prefixes), new
        # episodes are spread over both again once a's cool-down has passed and a probe succeeded.
        later = time.monotonic() + backend.config.endpoint_cooldown
        monkeypatch.setattr(backend.health, "_clock", lambda: later)
        a = _endpoint("a", hits, port=port_a)
        hits.clear()
        fresh = [f"fresh-{i}" for i in range(16)]
        _play(backend, episodes + fresh, steps=2)
        servers = _servers_by_episode(hits)
        assert all(servers[e] == {"b"} for e in on_a), {e: servers[e] for e in on_a}
        assert all(len(servers[e]) == 1 for e in episodes + fresh)
        assert any(servers[e] == {"a"} for e in fresh)
    finally:
        _stop(a)
        _stop(b)


# ------------------------------------------------------------------------------------ a full context
def _cut_answer(completion_tokens: int):
    def respond(body, _port):
        requests.append(body)
        reply = _chat_completion()
        reply["choices"][0]["finish_reason"] = "length"
        reply["choices"][0]["message"]["content"] = '{"reasoning": "r", "next_st'
        reply["usage"] = {"prompt_tokens": 2000, "completion_tokens": completion_tokens, "total_tokens": 0}
        return reply

    requests: list = []
    return serve_json(respond), requests


def _predict(server, on_invalid_output: str):
    from dreamgym_env.config import EnvConfig
    from dreamgym_env.domains.textworld import TextWorldDomain
    from dreamgym_env.experience.model import ExperienceModel
    from dreamgym_env.records import Task

    config = EnvConfig(parse_retries=2, on_invalid_output=on_invalid_output)
    backend = OpenAIBackend(
        BackendConfig(base_url=f"http://127.0.0.1:{server.server_port}/v1", model="m", max_tokens=512)
    )
    model = ExperienceModel(TextWorldDomain(), backend, config)
    task = Task(task_id="t", domain="textworld", instruction="win")

    async def predict():
        try:
            return await model.apredict(task, [], [], "Room: hall", "look")
        finally:
            await backend.aclose()

    return asyncio.run(predict())


def test_an_answer_stopped_by_a_full_context_is_prompt_too_long_and_sent_once():
    import pytest

    from dreamgym_env.errors import PromptTooLongError

    server, requests = _cut_answer(completion_tokens=48)  # 2000 + 48 filled the context before 512
    try:
        with pytest.raises(PromptTooLongError, match="context is full.*history_window"):
            _predict(server, "fail_state")
    finally:
        server.shutdown()
    assert len(requests) == 1  # never the same failing prompt twice


def test_an_answer_cut_at_max_tokens_is_still_an_unparsable_answer_retried():
    server, requests = _cut_answer(completion_tokens=512)
    try:
        prediction = _predict(server, "fail_state")
    finally:
        server.shutdown()
    assert prediction.output is None and "cut at max_tokens" in (prediction.error or "")
    assert len(requests) == 3


def test_a_request_temperature_overrides_the_backends_for_that_request_only():
    sent = []

    def respond(body, _port):
        sent.append(body["temperature"])
        return _chat_completion()

    server = serve_json(respond)
    backend = OpenAIBackend(BackendConfig(base_url=_url(server), model="m", temperature=0.0))
    request = CompletionRequest(messages=[{"role": "user", "content": "hi"}], json_schema={"type": "object"})

    async def run():
        await backend.acomplete(request)
        await backend.acomplete(dataclasses.replace(request, temperature=0.7))
        await backend.aclose()

    try:
        asyncio.run(run())
    finally:
        server.shutdown()
    assert sent == [0.0, 0.7]


def test_closing_closes_the_loops_clients_when_the_work_ends(recwarn):
    """``asyncio.run(backend.closing(work))`` leaves no client open, after an answer or an error."""
    gc.collect()  # what earlier tests left is reported now, not below
    recwarn.clear()
    server = serve_json(lambda body, port: _chat_completion())
    backend = OpenAIBackend(BackendConfig(base_url=f"http://127.0.0.1:{server.server_port}/v1", model="m"))
    request = CompletionRequest(messages=[{"role": "user", "content": "hi"}], json_schema={"type": "object"})
    try:
        completion = asyncio.run(backend.closing(backend.acomplete(request)))
        assert json.loads(completion.text) == ANSWER and not backend._states

        async def fails():
            await backend.acomplete(request)  # opens this loop's clients
            raise ValueError("the work failed")

        with pytest.raises(ValueError, match="the work failed"):
            asyncio.run(backend.closing(fails()))
        assert not backend._states
        gc.collect()
        assert not [w for w in recwarn if "Unclosed client session" in str(w.message)]
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "ending",
    [
        pytest.param("", id="left-open-at-exit"),
        pytest.param("del env\ngc.collect()\nprint('collected')\n", id="garbage-collected"),
        pytest.param("env.close()\n", id="closed"),
    ],
)
@pytest.mark.parametrize("make", ["gym.make(ID, **KW)", "gym.make_vec(ID, num_envs=2, **KW)"])
def test_an_env_not_closed_releases_its_http_client_quietly(ending, make):
    """A stepped env that is dropped or still open at exit closes its clients: no aiohttp warning."""
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    server = serve_json(lambda body, port: _chat_completion())
    url = f"http://127.0.0.1:{server.server_port}/v1"
    script = (
        textwrap.dedent(
            f"""
        import gc
        import gymnasium as gym
        import dreamgym_env
        ID, KW = "DreamGym/TextWorld-v0", dict(base_url={url!r}, model="m", on_invalid_output="fail_state")
        env = {make}
        _, info = env.reset(seed=0)
        first = info["admissible_actions"] if "num_envs" not in {make!r} else info["admissible_actions"][0]
        action = next(a for a in first if a.split()[0] == "go")  # the model answers it
        env.step(action if "num_envs" not in {make!r} else [action, action])
        print("stepped")
        """
        )
        + ending
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", script],
            cwd=Path(__file__).resolve().parents[2],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0 and "stepped" in done.stdout, done.stderr
    assert "Unclosed" not in done.stderr, done.stderr
