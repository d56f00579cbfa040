"""Exports of rollouts for TRL: which tokens carry the loss, checked with TRL's own tokenisation."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from dreamgym_env.experience.backends.scripted import ScriptedBackend
from dreamgym_env.training.collector import ActionSample, Message, RolloutBatch, collect_groups
from tests._tiny_policy import tiny_model, tiny_tokenizer
from tests.training.test_collector import TASKS, key_world

pytest.importorskip("trl")
pytest.importorskip("datasets")

PLAN = ["inventory", "inventory", "take key"]


class PlanPolicy:
    """Plays ``PLAN`` (three decisions, the last wins), reporting made-up token ids and logprobs."""

    async def act(self, messages: Sequence[Message], admissible_actions: Sequence[str]) -> ActionSample:
        await asyncio.sleep(0)
        turn = sum(m["role"] == "assistant" for m in messages)
        return ActionSample(PLAN[turn], token_ids=[100 + turn, 7], logprobs=[-0.5 * turn, -0.1])


def plan_batch(group_size: int = 2) -> RolloutBatch:
    env_kwargs = {"backend": ScriptedBackend(key_world), "max_steps": 5}
    return collect_groups("DreamGym/TextWorld-v0", TASKS[:1], PlanPolicy(), group_size, env_kwargs=env_kwargs)


def trained_text(dataset: Any, tmp_path: Path, **config: Any) -> list[str]:
    """Per row, the text of the tokens TRL's SFT collator gives a label (the ones that carry loss)."""
    import trl

    tok = tiny_tokenizer()
    args = trl.SFTConfig(
        output_dir=str(tmp_path), report_to=[], use_cpu=True, max_length=2048, save_strategy="no", **config
    )
    trainer = trl.SFTTrainer(model=tiny_model(tok), args=args, train_dataset=dataset, processing_class=tok)
    texts = []
    for row in trainer.train_dataset:
        batch = trainer.data_collator([row])
        labels = batch["labels"][0]
        texts.append(tok.decode(batch["input_ids"][0][labels != -100]))
    return texts


def words(text: str) -> str:
    """The text without the chat format's markup: what the model is taught to say."""
    return " ".join(re.sub(r"<\|im_end\|>|<think>|</think>", " ", text).split())


def test_default_export_trains_only_the_agents_actions(tmp_path: Path) -> None:
    from dreamgym_env.training.trl_format import to_trl_dataset

    batch = plan_batch()
    dataset = to_trl_dataset(batch)
    texts = trained_text(dataset, tmp_path)
    assert len(texts) == len(dataset) > 0
    for text in texts:
        assert "You did" not in text and "Task:" not in text and "Admissible" not in text
        assert words(text) in {words(a) for a in PLAN}


def test_decision_rows_are_the_episode_so_far_and_the_next_action() -> None:
    from dreamgym_env.training.trl_format import to_trl_dataset

    batch = plan_batch(group_size=1)
    trajectory = batch.trajectories[0]
    rows = to_trl_dataset(batch, format="decisions")
    assert len(rows) == trajectory.num_turns == len(PLAN)
    for turn, row in enumerate(rows):
        assert row["completion"] == [{"role": "assistant", "content": PLAN[turn]}]
        assert row["prompt"] == trajectory.messages[: 2 + 2 * turn] and row["prompt"][-1]["role"] == "user"
        assert row["turn"] == turn and row["reward"] == 1.0 and row["group_id"] == trajectory.group_id
        assert row["completion_ids"] == [100 + turn, 7]
        assert row["completion_logprobs"] == [-0.5 * turn, -0.1]


def test_messages_export_with_assistant_only_loss_trains_every_action_and_nothing_else(
    tmp_path: Path,
) -> None:
    from dreamgym_env.training.trl_format import to_trl_dataset

    batch = plan_batch(group_size=1)
    dataset = to_trl_dataset(batch, format="messages")
    (text,) = trained_text(dataset, tmp_path, assistant_only_loss=True)
    assert "You did" not in text and "Task:" not in text
    assert words(text) == words(" ".join(PLAN))


def test_trajectory_export_keeps_the_whole_episode_for_those_who_want_it() -> None:
    from dreamgym_env.training.trl_format import to_trl_dataset

    batch = plan_batch(group_size=1)
    (row,) = to_trl_dataset(batch, format="prompt_completion")
    assert row["prompt"] + row["completion"] == batch.trajectories[0].messages
    assert row["completion_ids"] == [[100, 7], [101, 7], [102, 7]]


def test_unknown_format_is_named_with_the_accepted_ones() -> None:
    from dreamgym_env.errors import ConfigError
    from dreamgym_env.training.trl_format import to_trl_dataset

    with pytest.raises(ConfigError, match="decisions"):
        to_trl_dataset(plan_batch(1), format="chat")  # type: ignore[arg-type]


def test_tokens_are_absent_where_the_policy_gives_none() -> None:
    from dreamgym_env.training.trl_format import to_trl_dataset
    from tests.training.test_collector import RandomChoicePolicy

    env_kwargs = {"backend": ScriptedBackend(key_world), "max_steps": 3}
    batch = collect_groups(
        "DreamGym/TextWorld-v0", TASKS[:1], RandomChoicePolicy(0), 2, env_kwargs=env_kwargs
    )
    rows = to_trl_dataset(batch, format="decisions")
    assert len(rows) > 0 and "completion_ids" not in rows.column_names


def test_chat_policy_reads_vllms_token_ids_and_logprobs() -> None:
    """The fields vLLM adds with ``return_token_ids`` and ``logprobs`` become an ActionSample."""
    from types import SimpleNamespace

    from dreamgym_env.training.collector import _sample_from

    choice = SimpleNamespace(
        token_ids=[5, 9],
        logprobs=SimpleNamespace(content=[SimpleNamespace(logprob=-0.5), SimpleNamespace(logprob=-0.25)]),
    )
    sample = _sample_from("look", SimpleNamespace(prompt_token_ids=[1, 2, 3]), choice)
    assert sample == ActionSample(
        "look", token_ids=[5, 9], logprobs=[-0.5, -0.25], prompt_token_ids=[1, 2, 3]
    )
    bare = _sample_from("look", SimpleNamespace(), SimpleNamespace(logprobs=None))
    assert bare == ActionSample("look")
