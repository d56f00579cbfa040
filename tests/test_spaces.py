import numpy as np
import pytest
from gymnasium.spaces.utils import flatten, flatten_space, unflatten
from gymnasium.vector import AsyncVectorEnv

from dreamgym_env import DreamGymEnv, FreeText, ScriptedBackend
from tests._toy import ToyDomain

TEXT = "search[red shoes, size 9™]\nPrice: 12€\tok"


def test_contains_printable_unicode_and_length_bounds():
    space = FreeText(max_length=64)
    assert space.contains(TEXT)
    assert not space.contains("x" * 65)
    assert not space.contains("bell\x07")
    assert not space.contains("del\x7f") and not space.contains("c1\x85")
    assert space.contains("non\u00a0breaking space, zero\u200bwidth")
    assert not space.contains(3)
    assert FreeText(max_length=5, min_length=2).contains("ab")
    assert space.contains(space.sample())


def test_flatten_round_trip_keeps_every_character():
    space = FreeText(max_length=64)
    flat = flatten(space, TEXT)
    assert flat.dtype == np.int32 and flat.shape == (64,)
    assert flatten_space(space).contains(flat)
    assert unflatten(space, flat) == TEXT


def _make_env():
    return DreamGymEnv(ToyDomain(), backend=ScriptedBackend())


@pytest.mark.parametrize("shared_memory", [True, False])
def test_async_vector_env_carries_multiline_unicode_observations(shared_memory):
    envs = AsyncVectorEnv([_make_env, _make_env], shared_memory=shared_memory)
    try:
        obs, _ = envs.reset(seed=0)
        obs, *_ = envs.step(["go[1]", "go[2]"])
        assert obs[0].endswith("You did: go[1] (step 1).") and "\n" in obs[0]
        assert obs[1].endswith("You did: go[2] (step 1).")
    finally:
        envs.close()


def test_lone_surrogates_are_not_text():
    """A string the space admits can be encoded, sent and stored; one with a lone surrogate cannot."""
    space = FreeText(max_length=64)
    assert not space.contains("search[\ud800]") and not space.contains("\udfff")
    assert space.contains("emoji 😀 is a pair of code units in UTF-16, one code point here")
    "search[😀]".encode()  # what is admitted encodes


def test_escaping_keeps_echoed_text_in_the_space():
    from dreamgym_env.spaces import escape_non_text, text_problem

    raw = "go\x07[\ud800]\x1b"
    assert text_problem(raw) == "it holds a control character, U+0007, at position 2"
    escaped = escape_non_text(raw)
    assert escaped == "go\\x07[\\ud800]\\x1b" and FreeText(max_length=64).contains(escaped)
    assert text_problem("tabs\tand\nnewlines") is None
