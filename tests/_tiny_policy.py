"""A tiny policy language model built offline, in a chat format TRL knows (Qwen3's template).

TRL recognises a handful of chat templates: for those it swaps in a training template with
``{% generation %}`` markers (``assistant_only_loss``) and knows how to parse tool calls
(``environment_factory``). The smoke experience model's plain ChatML template is neither, so the
tests that go through TRL's own tokenisation build this tokenizer instead: a byte-level BPE trained
on a few sentences, carrying TRL's copy of the Qwen3 template, and a two-layer Qwen2 network.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

CORPUS = (
    "You are an agent acting in a text environment. Reply with exactly one action.",
    "Task: take the key from the chest. You did: look. Admissible actions: take key; look; inventory",
    '<tool_call>\n{"name": "act", "arguments": {"action": "take key"}}\n</tool_call>',
    '<tool_call>\n{"name": "act", "arguments": {"action": "look"}}\n</tool_call>',
    "<think>\n\n</think>\n\n",
)

#: Tokens of Qwen3's format that must stay whole (the template and the tool-call parser rely on them).
ADDED_TOKENS = ("<tool_call>", "</tool_call>", "<think>", "</think>", "<tool_response>", "</tool_response>")


def tiny_tokenizer(texts: Sequence[str] = (), tool_actions: Sequence[str] = ()) -> Any:
    """A byte-level BPE with Qwen3's chat template (as TRL ships it); eos ``<|im_end|>``.

    Args:
        texts: More text to train the BPE on (the prompts a test renders), so they stay short.
        tool_actions: Actions whose whole ``act`` call (:func:`tool_call`) becomes one token, so a
            policy learns to call the tool in a few optimizer steps.
    """
    import tokenizers
    import transformers
    from trl.chat_template_utils import qwen3_chat_template

    from dreamgym_env.training.hf_model import train_bpe_tokenizer

    tok = train_bpe_tokenizer(
        transformers,
        tokenizers,
        [*CORPUS * 20, *texts],
        vocab_size=1000 if texts else 400,
        model_max_length=2048,
        added_tokens=(*[tool_call(a) for a in tool_actions], *ADDED_TOKENS),
    )
    tok.chat_template = qwen3_chat_template
    tok.padding_side = "left"
    return tok


def tiny_model(tok: Any, seed: int = 0) -> Any:
    """A randomly initialised two-layer Qwen2 sized for ``tok`` (float32, about 60k parameters)."""
    import torch
    import transformers

    from dreamgym_env.training.hf_model import causal_lm

    torch.manual_seed(seed)
    return causal_lm(
        transformers,
        tok,
        arch="qwen2",
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=2048,
    )


def tool_call(action: str) -> str:
    """The assistant text of one ``act`` tool call in Qwen3's format."""
    return "<tool_call>\n" + json.dumps({"name": "act", "arguments": {"action": action}}) + "\n</tool_call>"


def teach_tool_calls(
    model: Any,
    tok: Any,
    prompts: Sequence[list[dict[str, str]]],
    actions: Sequence[str],
    *,
    tools: Sequence[Any] | None = None,
    steps: int = 150,
) -> float:
    """Fit ``model`` to answer every prompt with an ``act`` call of one of ``actions``; return the last loss.

    A fixed number of seeded AdamW steps: the model learns the call's form (which the parser needs)
    and spreads its mass over the actions, so a group's rollouts differ and GRPO has signal.
    """
    import torch

    rng = random.Random(0)
    torch.manual_seed(0)
    rows = []
    for prompt in prompts:
        ids = tok.apply_chat_template(
            prompt,
            tools=list(tools) if tools else None,
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
        for action in actions:
            answer = tok(tool_call(action), add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            rows.append((list(ids), answer))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    loss = torch.tensor(0.0)
    for _ in range(steps):
        prompt_ids, answer = rng.choice(rows)
        input_ids = torch.tensor([prompt_ids + answer])
        labels = torch.tensor([[-100] * len(prompt_ids) + answer])
        loss = model(input_ids=input_ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    return float(loss.item())
