"""The pieces every model this package builds shares: chat format, tokenizer, network and saved folder.

The smoke model (:mod:`dreamgym_env.serving.tiny_model`) and experience models trained from scratch
(:mod:`dreamgym_env.training.train`) must look alike to vLLM: the same ChatML template and special
tokens, a byte-level BPE, a Llama- or Qwen2-architecture network with a head size vLLM's CPU attention
supports, and a ``save_pretrained`` folder without a generation config. Keeping the recipe in one place
keeps them alike. transformers and tokenizers are passed in by the callers, which import them lazily.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from dreamgym_env.errors import ConfigError

# ChatML, the format of the Qwen family the experience model is usually served with in production.
_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<pad>")


def render_chat(messages: Sequence[dict[str, str]]) -> str:
    """The chat template's rendering, without a tokenizer object (the BPE is trained on it)."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def check_head_size(hidden_size: int, num_attention_heads: int) -> None:
    """Raise :class:`ConfigError` unless the head size is one vLLM's CPU attention supports."""
    head_dim, rest = divmod(hidden_size, num_attention_heads)
    if rest or head_dim % 16 or head_dim < 32:
        raise ConfigError(
            f"hidden_size {hidden_size} / num_attention_heads {num_attention_heads} must be a whole head "
            "size of at least 32 and a multiple of 16 (vLLM's CPU attention supports 32, 64, 80, 96, "
            "112, 128, ...)."
        )


def train_bpe_tokenizer(
    transformers: Any,
    tokenizers: Any,
    texts: Iterable[str],
    *,
    vocab_size: int,
    model_max_length: int,
    added_tokens: Sequence[str] = (),
) -> Any:
    """A byte-level BPE trained on ``texts``, wrapped as a transformers tokenizer with the chat template.

    ``added_tokens`` become single tokens (e.g. each distinct system prompt, which then costs one id).
    """
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token=None))
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    bpe.post_processor = tokenizers.processors.ByteLevel(trim_offsets=False)
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    if added_tokens:
        bpe.add_tokens([tokenizers.AddedToken(t, normalized=False, special=False) for t in added_tokens])
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<pad>",
        model_max_length=model_max_length,
    )
    tok.chat_template = _CHAT_TEMPLATE
    return tok


def causal_lm(
    transformers: Any,
    tok: Any,
    *,
    arch: str = "llama",
    hidden_size: int,
    intermediate_size: int,
    num_hidden_layers: int,
    num_attention_heads: int,
    num_key_value_heads: int,
    max_position_embeddings: int,
) -> Any:
    """A randomly initialised ``arch`` (``llama`` or ``qwen2``) network sized for ``tok``, tied embeddings."""
    qwen = arch == "qwen2"
    config = (transformers.Qwen2Config if qwen else transformers.LlamaConfig)(
        vocab_size=len(tok),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=num_key_value_heads,
        max_position_embeddings=max_position_embeddings,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
        tie_word_embeddings=True,
    )
    return (transformers.Qwen2ForCausalLM if qwen else transformers.LlamaForCausalLM)(config)


def save_for_vllm(model: Any, tok: Any, out: Path) -> None:
    """Save model and tokenizer as a folder vLLM serves and transformers loads."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    # A saved generation_config.json would become the server's default sampling parameters (vLLM's
    # --generation-config auto); requests must keep vLLM's own defaults.
    (out / "generation_config.json").unlink(missing_ok=True)
