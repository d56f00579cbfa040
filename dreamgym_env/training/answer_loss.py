"""The SFT loss computed only where it is defined: the answer's tokens.

An experience model's example is a long prompt (the task's facts, a demonstration, the state and the
action) and a short answer, and the loss covers only the answer. TRL's ``SFTTrainer`` projects the
hidden states through the LM head in tiles, but on a CPU it projects *every* position and masks the
result afterwards. With a large vocabulary that is most of a step's work: Gemma 3's head is 262,144 x
640, larger than the rest of the model, and a prompt of 900 tokens against an answer of 60 spends
fifteen times the head's cost on positions whose logits are thrown away.

:func:`answer_token_loss` runs the model's backbone, gathers the hidden states whose next token is
trained (label not ``-100``) and projects only those, applying the model's final-logit soft-capping
(Gemma) so the loss is the model's own causal-LM loss on the same tokens, to rounding. The trainer
class in :mod:`dreamgym_env.training.train` uses it as its ``compute_loss``.
"""

from __future__ import annotations

from typing import Any

IGNORE_INDEX = -100


def _unwrap(model: Any) -> Any:
    """The ``PreTrainedModel`` under a PEFT (or other) wrapper; PEFT's LoRA layers live inside it."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def answer_token_loss(
    model: Any, inputs: dict[str, Any], num_items_in_batch: Any = None
) -> tuple[Any, Any, Any]:
    """Mean negative log-likelihood of the trained tokens, projecting only their positions.

    ``inputs`` is a causal-LM batch (``input_ids``, ``labels``, optionally ``attention_mask`` and
    ``position_ids``), labels unshifted as Hugging Face's models take them. The sum over trained tokens
    is divided by ``num_items_in_batch`` when the trainer gives it (gradient accumulation across
    micro-batches), else by this batch's count of trained tokens. Returns the loss, the number of
    trained tokens and how many of them the model ranks first (for a token-accuracy metric).
    """
    import torch
    import torch.nn.functional as F

    causal_lm = _unwrap(model)
    backbone = getattr(causal_lm, causal_lm.base_model_prefix)
    kwargs = {k: inputs[k] for k in ("attention_mask", "position_ids") if inputs.get(k) is not None}
    hidden = backbone(input_ids=inputs["input_ids"], use_cache=False, **kwargs).last_hidden_state
    labels = inputs["labels"][:, 1:]
    trained = labels != IGNORE_INDEX
    logits = causal_lm.get_output_embeddings()(hidden[:, :-1][trained]).float()
    softcap = getattr(causal_lm.config.get_text_config(), "final_logit_softcapping", None)
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    targets = labels[trained]
    count = trained.sum()
    denominator = num_items_in_batch if num_items_in_batch is not None else count.clamp(min=1)
    # A batch with no trained token still returns a loss connected to the model (zero), so backward works.
    loss = (
        F.cross_entropy(logits, targets, reduction="sum") / denominator
        if targets.numel()
        else hidden.sum() * 0.0
    )
    with torch.no_grad():
        correct = (logits.argmax(dim=-1) == targets).sum()
    return loss, count, correct
