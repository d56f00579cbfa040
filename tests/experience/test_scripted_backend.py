"""The scripted fake model: bounded memory of requests, and a terminal rule on whole actions."""

import asyncio
import pickle

import pytest

from dreamgym_env import ScriptedBackend
from dreamgym_env.errors import ConfigError
from dreamgym_env.experience.backends.base import CompletionRequest, TransitionQuery
from dreamgym_env.experience.backends.scripted import DEFAULT_KEEP_REQUESTS, echo_world
from dreamgym_env.records import Task

TASK = Task(task_id="t", domain="webshop", instruction="buy a watch")


def _request(i=0, action="search[watch]"):
    query = TransitionQuery(domain="webshop", task=TASK, history=(), state="Home", action=action)
    return CompletionRequest(messages=[{"role": "user", "content": str(i)}], json_schema={}, query=query)


def _send(backend, n):
    async def run():
        for i in range(n):
            await backend.acomplete(_request(i))

    asyncio.run(run())


def test_requests_keep_only_the_latest_by_default():
    backend = ScriptedBackend()
    assert backend.requests == []
    _send(backend, DEFAULT_KEEP_REQUESTS + 50)
    assert backend.requests_received == DEFAULT_KEEP_REQUESTS + 50
    assert len(backend.requests) == DEFAULT_KEEP_REQUESTS
    assert backend.requests[0].messages[0]["content"] == "50"  # oldest kept first
    assert backend.requests[-1].messages[0]["content"] == str(DEFAULT_KEEP_REQUESTS + 49)


def test_keep_requests_is_configurable_and_survives_pickling():
    backend = ScriptedBackend(keep_requests=3)
    _send(backend, 10)
    assert [r.messages[0]["content"] for r in backend.requests] == ["7", "8", "9"]
    assert [r.messages[0]["content"] for r in backend.requests[-2:]] == ["8", "9"]  # slices like a list
    copy = pickle.loads(pickle.dumps(backend))
    assert copy.requests.maxlen == 3 and copy.requests == list(backend.requests)
    everything = ScriptedBackend(keep_requests=None)
    _send(everything, 10)
    assert len(everything.requests) == 10
    with pytest.raises(ConfigError, match="keep_requests"):
        ScriptedBackend(keep_requests=-1)


@pytest.mark.parametrize(
    ("action", "done"),
    [
        ("search[stop watch]", False),
        ("click[stopwatch]", False),
        ("click[buy now please]", False),
        ("stop", True),
        ("stop [42]", True),
        ("click[buy now]", True),
        ("Click[Buy Now]", True),
        ("send_msg_to_user('done')", True),
        ("report_infeasible('no such item')", True),
    ],
)
def test_only_whole_terminal_actions_end_the_episode(action, done):
    assert echo_world(_request(action=action)).done is done
