"""Endpoint URLs are checked when the config is made, and a refused URL's secret is never shown."""

import gymnasium as gym
import pytest
from pydantic import ValidationError

import dreamgym_env  # noqa: F401 - registers the ids
from dreamgym_env.config import BackendConfig
from dreamgym_env.errors import ConfigError

ID = "DreamGym/WebShop-v0"
PASSWORD = "hunter,2-s3cret"  # a raw comma: the URL list splits there, inside the password


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        # Measured before the fix: accepted, then the first step raised ExceptionGroup(OverflowError).
        ("http://127.0.0.1:99999/v1", "port 99999 is out of range 1-65535"),
        ("http://127.0.0.1:0/v1", "port 0 is out of range 1-65535"),
        ("http://127.0.0.1:80a/v1", "its port is not a number"),
        ("ftp://127.0.0.1/v1", "scheme 'ftp' is not http or https"),
        ("127.0.0.1:8000/v1", "has no scheme"),
        ("http:///v1", "has no host"),
        ("http://exa mple.com/v1", "is not a host name"),
        ("http://caf\udce9.example/v1", "is not a host name"),
        ("http://[::1/v1", "is not a URL"),
    ],
)
def test_a_bad_base_url_is_refused_when_the_env_is_made(url, problem):
    with pytest.raises(ConfigError, match="base_url") as caught:
        gym.make(ID, base_url=url, model="m")
    message = str(caught.value)
    assert problem in message and "http://host:port/v1" in message, message
    with pytest.raises(ValidationError):
        BackendConfig(base_url=url)


@pytest.mark.parametrize(
    "url",
    [
        # Measured before the fix: httpx's "InvalidURL: Invalid port: 'pa'" at the first step.
        f"http://user:{PASSWORD}@127.0.0.1:8000/v1",
        f"http://{PASSWORD}@127.0.0.1:8000/v1",  # a key written as the user
        "http://user:pa ss@127.0.0.1:8000/v1",
        "http://user:pa#ss@127.0.0.1:8000/v1",
        "http://user:50%zz@127.0.0.1:8000/v1",
    ],
)
def test_a_url_whose_credentials_break_it_is_refused_without_showing_them(url):
    with pytest.raises(ConfigError) as caught:
        gym.make(ID, base_url=url, model="m")
    message = str(caught.value)
    assert "percent-encode" in message, message
    secrets = ("hunter", "s3cret", "pa ss", "pa#", "50%zz")
    assert not [part for part in secrets if part in message], message
    with pytest.raises(ValidationError) as invalid:
        BackendConfig(base_url=url)
    assert not [part for part in secrets if part in str(invalid.value)]


def test_a_bad_url_from_the_environment_is_refused_too(monkeypatch):
    monkeypatch.setenv("DREAMGYM_BASE_URL", "http://127.0.0.1:8000/v1,http://127.0.0.1:70000/v1")
    with pytest.raises(ConfigError, match=r"base_url entry 2 of 2 .*port 70000 is out of range"):
        gym.make(ID, model="m")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/v1",
        "https://api.example.com/v1",
        "http://[::1]:8000/v1",
        "http://localhost/v1",
        "http://user:pa%2Cssword@127.0.0.1:8000/v1",  # the comma percent-encoded
        "http://a.example:1/v1,https://b.example:65535/v1",
        "http://bücher.example/v1",
    ],
)
def test_good_urls_are_accepted(url):
    config = BackendConfig(base_url=url)
    assert len(config.base_url) == url.count(",") + 1
