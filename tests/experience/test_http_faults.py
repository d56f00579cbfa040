"""The HTTP backend under faults: deadlines, answers that are not completions, fail-over with health.

Every server here is a loopback stand-in (tests/_http.py) that misbehaves in one way: it trickles its
answer, hangs, answers 503 (with or without Retry-After), or answers 200 with something that is not a
chat completion.
"""

import asyncio
import json
import threading
import time

import gymnasium as gym
import pytest

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env import DreamGymEnv
from dreamgym_env._event_loop import run_sync
from dreamgym_env.config import BackendConfig
from dreamgym_env.errors import (
    BackendError,
    InvalidResponseError,
    ResponseFormatError,
    ServerUnreachableError,
)
from dreamgym_env.experience.backends.base import CompletionRequest
from dreamgym_env.experience.backends.health import EndpointHealth
from dreamgym_env.experience.backends.openai_http import OpenAIBackend
from tests._http import Reply, serve_replies
from tests._toy import ToyDomain
from tests.experience.test_openai_backend import _chat_completion

pytestmark = pytest.mark.timeout(60)  # before deadlines existed, these hung


def _url(server):
    return f"http://127.0.0.1:{server.server_port}/v1"


def _stop(*servers):
    for server in servers:
        server.shutdown()
        server.server_close()


def _request(episode=None):
    return CompletionRequest(
        messages=[{"role": "user", "content": episode or "x"}],
        json_schema={"type": "object"},
        episode_id=episode,
    )


def _backend(*servers, **overrides):
    return OpenAIBackend(BackendConfig(base_url=[_url(s) for s in servers], model="m", **overrides))


def _run(backend, *requests, limit=20.0):
    """Send ``requests`` concurrently; return (results or exceptions, seconds taken)."""

    async def run():
        try:
            return await asyncio.wait_for(
                asyncio.gather(*(backend.acomplete(r) for r in requests), return_exceptions=True), limit
            )
        finally:
            await backend.aclose()

    start = time.perf_counter()
    results = asyncio.run(run())
    return results, time.perf_counter() - start


class Counter:
    """A reply function that counts its calls and answers with ``make_reply(call_number)``."""

    def __init__(self, make_reply):
        self.calls = 0
        self._make_reply = make_reply
        self._lock = threading.Lock()

    def __call__(self, body, headers):
        with self._lock:
            self.calls += 1
            n = self.calls
        return self._make_reply(n)


def ok(_n=0):
    return Reply(body=_chat_completion())


# --------------------------------------------------------------------------------- deadlines
def test_a_server_that_trickles_its_answer_is_cut_off_at_the_timeout():
    """One byte every 0.25 s never trips a per-read timeout; the attempt's deadline does."""
    server = serve_replies(lambda body, headers: Reply(body=_chat_completion(), trickle_s=0.25))
    try:
        [error], took = _run(_backend(server, timeout=1.0, max_retries=0), _request())
    finally:
        _stop(server)
    assert isinstance(error, ServerUnreachableError), error
    assert "no complete answer within" in str(error)
    # Without a deadline it never ends: the answer's ~250 bytes take a minute at this pace.
    assert 0.9 < took < 15.0, took


def test_a_reset_connection_is_called_a_reset_not_a_timeout():
    """aiohttp's reset reaches openai as a connect timeout; the message says what happened."""
    server = serve_replies(lambda body, headers: Reply(reset=True))
    try:
        [error], took = _run(_backend(server, timeout=30.0, max_retries=0), _request())
    finally:
        _stop(server)
    assert isinstance(error, ServerUnreachableError), error
    assert "the connection was reset" in str(error) and "timed out" not in str(error), error
    assert took < 10.0, took


def test_a_reset_is_named_by_the_synchronous_clients_too():
    """The policy and embedding clients translate openai's errors through ``api_error``."""
    import httpx
    import openai

    from dreamgym_env._openai_client import api_error

    error = openai.APITimeoutError(request=httpx.Request("POST", "http://h/v1/chat/completions"))
    error.__cause__ = ConnectionResetError(104, "Connection reset by peer")
    translated = api_error(error, name="The policy endpoint", url="http://h/v1", model="m", redact=str)
    assert isinstance(translated, ServerUnreachableError)
    assert "the connection was reset" in str(translated) and "timed out" not in str(translated)


def _closed_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


SECRET = "pw-0123456789abcdef"


def test_a_refused_connection_says_the_server_refused_it_and_asks_if_it_runs():
    """Nothing listens on the port: the step's error says so, naming the URL without its password."""
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    env = gym.make(
        "DreamGym/TextWorld-v0", base_url=url.replace("//", f"//user:{SECRET}@"), model="m", api_key=SECRET
    )
    try:
        _, info = env.reset(seed=0)
        action = next(a for a in info["admissible_actions"] if a.split()[0] == "go")  # the model answers it
        with pytest.raises(ServerUnreachableError) as caught:
            env.step(action)
    finally:
        env.close()
    message = str(caught.value)
    assert message.startswith(f"The experience model server at {url} refused the connection"), message
    assert "Is the server running?" in message and "timed out" not in message
    assert SECRET not in message and SECRET not in repr(caught.value)


def test_a_refused_connection_is_named_by_the_synchronous_clients_too():
    from dreamgym_env.buffer.embedders import OpenAIEmbedder
    from dreamgym_env.training.collector import ChatPolicy

    url = f"http://127.0.0.1:{_closed_port()}/v1"
    secret_url = url.replace("//", f"//user:{SECRET}@")
    with pytest.raises(ServerUnreachableError) as embed_error:
        OpenAIEmbedder("m", secret_url, api_key=SECRET, timeout_s=5).embed(["x"])
    policy = ChatPolicy(secret_url, "m", api_key=SECRET, max_retries=0, timeout_s=5)
    with pytest.raises(ServerUnreachableError) as policy_error:
        asyncio.run(policy.act([{"role": "user", "content": "hi"}], []))
    for caught, name in ((embed_error, "The embedding endpoint"), (policy_error, "The policy endpoint")):
        message = str(caught.value)
        assert "refused the connection" in message and "Is the server running?" in message, message
        assert name in message and "127.0.0.1" in message and SECRET not in message


def test_retries_share_one_deadline():
    server = serve_replies(lambda body, headers: Reply(body=_chat_completion(), trickle_s=0.25))
    try:
        [error], took = _run(
            _backend(server, timeout=1.0, max_retries=20, retry_backoff=0.0, deadline=2.5), _request()
        )
    finally:
        _stop(server)
    assert isinstance(error, ServerUnreachableError), error
    assert "deadline" in str(error)
    assert 2.4 < took < 15.0, took  # 21 attempts of 1 s each would take 21 s or more


def _first_action(info, i=None):
    actions = info["admissible_actions"] if i is None else info["admissible_actions"][i]
    return actions[0] if len(actions) else "search[shoes]"


def test_env_and_vector_env_steps_end_at_the_deadline():
    """``step()`` of both env kinds raises within the deadline, and the episode has not advanced."""
    server = serve_replies(lambda body, headers: Reply(body=_chat_completion(), trickle_s=0.25))
    kwargs = {"base_url": _url(server), "model": "m", "timeout": 1.0, "max_retries": 1, "retry_backoff": 0.1}
    try:
        env = gym.make("DreamGym/WebShop-v0", **kwargs)
        _, info = env.reset(seed=0)
        start = time.perf_counter()
        with pytest.raises(ServerUnreachableError):
            env.step(_first_action(info))
        took = time.perf_counter() - start
        assert 1.9 < took < 15.0, took  # the default deadline: 2 attempts of 1 s (no deadline: minutes)
        assert env.unwrapped.history == []
        env.close()

        envs = gym.make_vec("DreamGym/WebShop-v0", num_envs=4, **kwargs)
        _, infos = envs.reset(seed=0)
        start = time.perf_counter()
        with pytest.raises(ServerUnreachableError):
            envs.step([_first_action(infos, i) for i in range(4)])
        took = time.perf_counter() - start
        assert 1.9 < took < 15.0, took
        envs.close()
    finally:
        _stop(server)


# ------------------------------------------------------------- answers that are not completions
NOT_COMPLETIONS = {
    "html": Reply(body="<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
    "not JSON": Reply(body="upstream connect error"),
    "latin-1": Reply(body="caf\xe9 \xff".encode("latin-1")),
    "no choices": Reply(body={"id": "x", "object": "chat.completion"}),
    "empty choices": Reply(body={"id": "x", "object": "chat.completion", "choices": []}),
    "null message": Reply(body={"id": "x", "choices": [{"index": 0, "message": None}]}),
    "null content": Reply(
        body={"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": None}}]}
    ),
    "message a string": Reply(body={"id": "x", "choices": [{"index": 0, "message": "hello"}]}),
}


@pytest.mark.parametrize("name", NOT_COMPLETIONS)
def test_a_200_that_is_not_a_completion_is_an_invalid_response(name):
    server = serve_replies(lambda body, headers: NOT_COMPLETIONS[name])
    try:
        [error], _ = _run(_backend(server, max_retries=0), _request())
    finally:
        _stop(server)
    assert isinstance(error, InvalidResponseError) and isinstance(error, BackendError), repr(error)
    assert _url(server) in str(error) and "not" in str(error) and "chat completion" in str(error)


@pytest.mark.parametrize("name", ["html", "empty choices"])
def test_an_invalid_response_follows_the_invalid_output_policy(name):
    replies = Counter(lambda n: NOT_COMPLETIONS[name])
    server = serve_replies(replies)
    backend = _backend(server, max_retries=0)
    try:
        with DreamGymEnv(
            ToyDomain(), backend=backend, parse_retries=1, on_invalid_output="fail_state"
        ) as env:
            obs, _ = env.reset(seed=0)
            obs2, reward, terminated, truncated, info = env.step("go[2]")
        assert (obs2, reward, terminated, truncated) == (obs, 0.0, False, False)
        assert "chat completion" in info["model_error"] and info["attempts"] == 2
        assert replies.calls == 2

        with DreamGymEnv(ToyDomain(), backend=backend, parse_retries=0, on_invalid_output="raise") as env:
            env.reset(seed=0)
            with pytest.raises(ResponseFormatError, match="chat completion"):
                env.step("go[2]")
    finally:
        run_sync(backend.aclose())  # the caller's backend: the envs leave it open
        _stop(server)


# --------------------------------------------------------------------------- fail-over and health
def test_an_endpoint_answering_503_is_failed_over_and_remembered():
    bad = Counter(lambda n: Reply(status=503, body={"error": {"message": "overloaded"}}))
    good = Counter(ok)
    a, b = serve_replies(bad), serve_replies(good)
    # A cool-down no slow machine outlasts: the bad endpoint is never probed again during the test.
    backend = _backend(a, b, max_retries=2, endpoint_cooldown=600)
    episodes = [f"episode-{i}" for i in range(8)]

    async def play():
        for _ in range(5):  # five lock-step steps of 8 episodes
            await asyncio.gather(*(backend.acomplete(_request(e)) for e in episodes))
        await backend.aclose()

    try:
        asyncio.run(asyncio.wait_for(play(), 30))
    finally:
        _stop(a, b)
    assert good.calls == 40
    # Only the first step's requests reached the bad endpoint, before its failure was known.
    assert 1 <= bad.calls <= 8, bad.calls


def test_a_hanging_endpoint_costs_one_timeout_then_fails_over():
    """With retries left, a timed-out endpoint is not retried before the others are tried."""
    # The timeout leaves the live endpoint room on a slow machine; the hang outlasts it many times over.
    hang = Counter(lambda n: Reply(body=_chat_completion(), delay_s=30))
    good = Counter(ok)
    a, b = serve_replies(hang), serve_replies(good)
    backend = _backend(a, b, timeout=2.0, max_retries=2, endpoint_cooldown=600)
    try:
        [first], took = _run(backend, _request())  # the first turn goes to endpoint 0: the hanging one
        assert not isinstance(first, Exception), first
        assert hang.calls == 1 and took >= 1.9, (hang.calls, took)  # one timeout, then fail-over
        # Within the cool-down the hanging endpoint is not tried again (turns would alternate).
        results, _ = _run(backend, *[_request() for _ in range(6)])
        assert not any(isinstance(r, Exception) for r in results), results
        assert hang.calls == 1, hang.calls
        assert good.calls == 1 + 6
    finally:
        _stop(a, b)


def test_after_the_cooldown_one_request_probes_the_endpoint(monkeypatch):
    hang = Counter(lambda n: Reply(body=_chat_completion(), delay_s=30))
    good = Counter(ok)
    a, b = serve_replies(hang), serve_replies(good)
    backend = _backend(a, b, timeout=2.0, max_retries=0)
    try:
        _run(backend, _request())
        assert hang.calls == 1 and backend.health.down() == [0]
        later = time.monotonic() + backend.config.endpoint_cooldown
        monkeypatch.setattr(backend.health, "_clock", lambda: later)
        results, _ = _run(backend, *[_request(f"e{i}") for i in range(16)])
        assert not any(isinstance(r, Exception) for r in results), [
            r for r in results if isinstance(r, Exception)
        ]
        assert hang.calls == 2, hang.calls  # one probe, not every request routed there
        assert good.calls == 1 + 16
    finally:
        _stop(a, b)


def test_retry_after_beyond_the_deadline_fails_at_once():
    busy = Counter(lambda n: Reply(status=503, headers={"Retry-After": "20"}, body={"error": "busy"}))
    server = serve_replies(busy)
    try:
        [error], took = _run(_backend(server, timeout=3.0, max_retries=2), _request())
    finally:
        _stop(server)
    assert isinstance(error, ServerUnreachableError), error
    assert "Retry-After 20s" in str(error) and "deadline" in str(error)
    # Failing at once takes milliseconds; waiting until the 9 s deadline or the 20 s Retry-After does not.
    assert busy.calls == 1 and took < 8.0, (busy.calls, took)


def test_retry_after_within_the_deadline_is_honoured():
    busy = Counter(lambda n: ok() if n > 1 else Reply(status=429, headers={"Retry-After": "0.4"}, body={}))
    server = serve_replies(busy)
    try:
        [answer], took = _run(_backend(server, timeout=3.0, max_retries=1, retry_backoff=0.0), _request())
    finally:
        _stop(server)
    assert not isinstance(answer, Exception), answer
    assert json.loads(answer.text)["next_state"] == "s"
    assert busy.calls == 2 and 0.4 <= took < 5.0, (busy.calls, took)


def test_a_rejected_request_is_not_retried():
    rejected = Counter(lambda n: Reply(status=401, body={"error": {"message": "invalid key"}}))
    server = serve_replies(rejected)
    try:
        [error], _ = _run(_backend(server, max_retries=3), _request())
    finally:
        _stop(server)
    assert isinstance(error, BackendError) and not isinstance(error, ServerUnreachableError)
    assert "HTTP 401" in str(error) and rejected.calls == 1


def test_health_cooldown_then_a_single_probe():
    now = [0.0]
    health = EndpointHealth(cooldown=10.0, clock=lambda: now[0])
    health.failed(0)
    assert health.pick([0, 1], set()) == 1  # down endpoints go last
    assert health.pick([0, 1], {1}) == 0  # ... but are the last resort
    now[0] = 11.0
    assert health.pick([0, 1], set()) == 0  # cool-down over: this request probes
    assert health.pick([0, 1], set()) == 1  # while the probe is in flight, others go elsewhere
    health.succeeded(0)
    assert health.pick([0, 1], set()) == 0 and health.down() == []
    health.failed(1, retry_after=30.0)  # Retry-After longer than the cool-down wins
    now[0] = 31.0
    assert health.down() == [1]
    now[0] = 41.5
    assert health.down() == []


def test_run_sync_cancels_the_work_it_stops_waiting_for():
    from dreamgym_env._event_loop import run_sync

    cancelled = threading.Event()

    async def forever():
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError, match="cancelled"):
        run_sync(forever(), timeout=0.2)
    assert cancelled.wait(5)
