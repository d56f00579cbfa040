"""The tool-calling policy's tokenizer, and playing it through TRL's rollout rendering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")

from dreamgym_env.errors import ConfigError  # noqa: E402
from dreamgym_env.experience.backends.scripted import ScriptedBackend  # noqa: E402
from dreamgym_env.integrations.trl import DreamGymEnvironments, DreamGymToolEnv  # noqa: E402
from dreamgym_env.training.policy import play_tool_policy, tool_policy_tokenizer  # noqa: E402
from tests._tiny_policy import tiny_tokenizer, tool_call  # noqa: E402
from tests.training.test_collector import TASKS, key_world  # noqa: E402


@pytest.fixture(scope="module")
def tok(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("tok")
    tiny_tokenizer(texts=[t.instruction for t in TASKS]).save_pretrained(folder)
    return tool_policy_tokenizer(folder)


def envs() -> DreamGymEnvironments:
    return DreamGymEnvironments(
        "DreamGym/TextWorld-v0", backend=ScriptedBackend(key_world), max_steps=3, tasks=TASKS
    )


def test_the_tokenizer_parses_its_own_tool_calls(tok: Any) -> None:
    from trl.chat_template_utils import parse_response

    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "take the key"}],
        tools=[DreamGymToolEnv.act],
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
    )
    answer = tok(tool_call("take key"), add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    reply = parse_response(tok, answer, prefix=prompt, tools=[DreamGymToolEnv.act])
    assert reply["tool_calls"][0]["function"]["arguments"] == {"action": "take key"}
    assert tok.padding_side == "left" and tok.eos_token == "<|im_end|>"


def test_a_tokenizer_without_chatml_is_refused(tmp_path: Path) -> None:
    import tokenizers
    import transformers

    raw = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    transformers.PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]").save_pretrained(tmp_path)
    with pytest.raises(ConfigError, match="ChatML"):
        tool_policy_tokenizer(tmp_path)


def scripted(tok: Any, choose: Any) -> Any:
    """A policy that reads the rendered prompt and answers ``choose(prompt_text)`` (token ids)."""
    seen: list[tuple[str, int]] = []

    def complete(prompts: list[list[int]], seeds: list[int]) -> list[list[int]]:
        answers = []
        for ids, seed in zip(prompts, seeds, strict=True):
            text = tok.decode(ids)
            seen.append((text, seed))
            answers.append(tok(choose(text), add_special_tokens=False)["input_ids"] + [tok.eos_token_id])
        return answers

    complete.seen = seen  # type: ignore[attr-defined]
    return complete


def test_played_episodes_follow_trls_rendering_and_end_when_won(tok: Any) -> None:
    factory = envs()
    key_row = factory.rows()[0]
    policy = scripted(tok, lambda text: tool_call("take key" if "<tool_response>" in text else "look"))
    played = play_tool_policy(factory, [key_row, key_row], tok, policy, max_turns=3, seed=7)
    assert [p.actions for p in played] == [["look", "take key"]] * 2
    assert all(p.success and p.called_tool and p.reward == 1.0 for p in played)
    texts = [text for text, _ in policy.seen]
    # Turn 2 sees turn 1's call and the env's answer as a tool response, as TRL renders them.
    assert (
        "<tool_response>" in texts[2] and '"action": "look"' in texts[2] and TASKS[0].instruction in texts[0]
    )
    seeds = [seed for _, seed in policy.seen]
    assert len(set(seeds)) == len(seeds)  # each episode and turn samples with its own seed


def test_a_reply_without_a_call_ends_the_episode_unsolved(tok: Any) -> None:
    factory = envs()
    played = play_tool_policy(
        factory, factory.rows(), tok, scripted(tok, lambda _: "I would look."), max_turns=3
    )
    assert [(p.actions, p.success, p.called_tool) for p in played] == [([], False, False)] * len(TASKS)


def test_the_step_limit_bounds_an_episode(tok: Any) -> None:
    factory = envs()
    played = play_tool_policy(
        factory, factory.rows()[:1], tok, scripted(tok, lambda _: tool_call("look")), max_turns=5
    )
    assert played[0].actions == ["look"] * 3 and not played[0].success  # max_steps=3 truncates


def test_the_tool_env_shows_the_last_info_without_making_it_a_tool() -> None:
    env = envs()()
    env.reset(**envs().rows()[0])
    assert "look" in env.info["admissible_actions"]
    env.act("look")
    assert env.info["answered_by"] == "rule"
    # TRL exposes every public *function* of the class as a tool: ``info`` is a property, not one.
    import inspect

    tools = [n for n, _ in inspect.getmembers(DreamGymToolEnv, inspect.isfunction) if not n.startswith("_")]
    assert sorted(tools) == ["act", "get_reward", "reset"]


@pytest.mark.parametrize(
    "reply",
    [
        '<tool_call>\n{"name": "act", "arguments": "look"}\n</tool_call>',
        '<tool_call>\n{"name": "act", "arguments": {"command": "look"}}\n</tool_call>',
        '<tool_call>\n{"name": "move", "arguments": {"action": "look"}}\n</tool_call>',
    ],
)
def test_a_malformed_call_is_answered_with_an_error_and_steps_nothing(tok: Any, reply: str) -> None:
    factory = envs()
    policy = scripted(tok, lambda text: reply if "<tool_response>" not in text else tool_call("take key"))
    played = play_tool_policy(factory, factory.rows()[:1], tok, policy, max_turns=3)
    assert played[0].actions == ["take key"] and played[0].success  # the bad call did not step the env
    second_prompt = policy.seen[1][0]
    assert "error" in second_prompt.split("<tool_response>")[-1]
