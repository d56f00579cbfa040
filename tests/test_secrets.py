"""API keys, given as ``api_key=`` or inside a URL, appear nowhere: spec, repr, errors, logs, recordings."""

import asyncio
import base64
import logging
import pickle

import gymnasium as gym
import pytest
from pydantic import ValidationError

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.config import BackendConfig
from dreamgym_env.errors import BackendError, ConfigError, ServerUnreachableError
from dreamgym_env.experience.backends.openai_http import OpenAIBackend
from dreamgym_env.experience.backends.recording import read_recording, record
from tests._http import Reply, serve_replies
from tests.experience.test_http_faults import _request, _stop, _url
from tests.experience.test_openai_backend import _chat_completion

KEY = "sk-secret-0123456789abcdef"
ID = "DreamGym/WebShop-v0"


def _leaks(*texts):
    return [t for t in texts if KEY in t]


def test_a_key_given_to_make_is_not_in_the_spec_yet_remakes_the_env():
    env = gym.make(ID, backend="scripted", api_key=KEY)
    assert not _leaks(str(env.spec), repr(env.spec), env.spec.to_json(), str(env.unwrapped.spec))
    assert not _leaks(repr(env.unwrapped.config))
    # The spec still makes the same env in this process (and in one it is pickled to).
    again = gym.make(env.spec)
    assert again.unwrapped.config.backend.api_key.get_secret_value() == KEY
    copied = pickle.loads(pickle.dumps(env.spec))
    assert gym.make(copied).unwrapped.config.backend.api_key.get_secret_value() == KEY
    # A spec read back from JSON holds no key: the key comes from the environment again.
    restored = gym.envs.registration.EnvSpec.from_json(env.spec.to_json())
    assert gym.make(restored).unwrapped.config.backend.api_key.get_secret_value() != KEY
    env.close(), again.close()


def test_a_key_given_to_make_vec_is_not_in_its_spec():
    envs = gym.make_vec(ID, num_envs=2, backend="scripted", api_key=KEY)
    assert not _leaks(str(envs.spec), envs.spec.to_json(), repr(envs.unwrapped.spec))
    envs.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    "secret", [{"api_key": KEY}, {"base_url": f"http://user:{KEY}@127.0.0.1:8000/v1"}], ids=["key", "url"]
)
def test_gymnasiums_own_vector_envs_refuse_a_secret_they_would_show(mode, secret):
    with pytest.raises(ConfigError, match="DREAMGYM_API_KEY") as caught:
        gym.make_vec(ID, num_envs=2, vectorization_mode=mode, backend="scripted", **secret)
    assert not _leaks(str(caught.value))
    # Without a secret among the keywords, the same modes work.
    envs = gym.make_vec(ID, num_envs=2, vectorization_mode=mode, backend="scripted")
    envs.reset(seed=0)
    envs.close()


def test_a_key_in_the_url_is_sent_as_basic_auth_and_shown_nowhere(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)  # every logger, the HTTP client's included
    seen = []

    def reply(body, headers):
        seen.append(headers.get("Authorization"))
        return Reply(body=_chat_completion())

    server = serve_replies(reply)
    url = f"http://user:{KEY}@127.0.0.1:{server.server_port}/v1"
    config = BackendConfig(base_url=url, model="m", max_retries=0)
    assert config.base_url == [_url(server)]
    assert not _leaks(repr(config), str(config), config.model_dump_json())
    path = tmp_path / "run.sqlite"
    backend = record(OpenAIBackend(config), path)

    async def run():
        await backend.acomplete(_request())
        await backend.aclose()

    try:
        asyncio.run(run())
        env = gym.make(ID, backend="scripted", base_url=url)
        assert not _leaks(str(env.spec), env.spec.to_json())
        assert (
            gym.make(env.spec).unwrapped.config.backend.endpoint_auth[0].get_secret_value() == f"user:{KEY}"
        )
    finally:
        _stop(server)
    assert seen == ["Basic " + base64.b64encode(f"user:{KEY}".encode()).decode()]
    [call] = read_recording(path)
    assert call.completion.endpoint == _url(server)
    # The endpoint is down now: the error names it, without the key.
    with pytest.raises(ServerUnreachableError) as caught:
        asyncio.run(OpenAIBackend(config).acomplete(_request()))
    assert _url(server) in str(caught.value)
    assert not _leaks(str(caught.value), caplog.text)


def test_an_error_body_that_echoes_the_key_is_redacted():
    def reply(body, headers):
        return Reply(status=401, body={"error": {"message": f"bad header: {headers.get('Authorization')}"}})

    server = serve_replies(reply)
    backend = OpenAIBackend(BackendConfig(base_url=_url(server), model="m", api_key=KEY, max_retries=0))
    try:
        with pytest.raises(BackendError) as caught:
            asyncio.run(backend.acomplete(_request()))
    finally:
        _stop(server)
    assert "HTTP 401" in str(caught.value) and "**********" in str(caught.value)
    chain, error = [], caught.value
    while error is not None:
        chain.append(str(error))
        error = error.__cause__ or error.__context__
    assert not _leaks(*chain), chain


def test_a_key_of_the_wrong_type_is_not_echoed():
    with pytest.raises(ConfigError) as caught:
        gym.make(ID, backend="scripted", api_key=[KEY])
    assert "api_key" in str(caught.value) and not _leaks(str(caught.value))
    with pytest.raises(ValidationError) as invalid:
        BackendConfig(api_key=[KEY])
    assert not _leaks(str(invalid.value))


def _closed_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_policy_and_embedding_clients_show_no_key_when_their_endpoint_fails():
    from dreamgym_env.buffer.embedders import OpenAIEmbedder
    from dreamgym_env.training.collector import ChatPolicy

    url = f"http://user:{KEY}@127.0.0.1:{_closed_port()}/v1"
    policy = ChatPolicy(url, "m", api_key=KEY, max_retries=0, timeout_s=5)
    with pytest.raises(ServerUnreachableError) as policy_error:
        asyncio.run(policy.act([{"role": "user", "content": "hi"}], []))
    with pytest.raises(ServerUnreachableError) as embed_error:
        OpenAIEmbedder("m", url, api_key=KEY, timeout_s=5).embed(["x"])
    for caught in (policy_error, embed_error):
        assert "127.0.0.1" in str(caught.value)
        chain, error = [], caught.value
        while error is not None:
            chain.append(str(error))
            error = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
        assert not _leaks(*chain, repr(caught.value)), chain
