"""The answer-only SFT loss equals the model's own causal-LM loss, value and gradients."""

from __future__ import annotations

import pytest

from dreamgym_env.training.answer_loss import answer_token_loss

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _llama() -> object:
    config = transformers.LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return transformers.LlamaForCausalLM(config)


def _gemma3() -> object:
    # Gemma 3 soft-caps its final logits: the answer-only loss must apply the cap as the model does.
    config = transformers.Gemma3TextConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=64,
        final_logit_softcapping=3.0,
        sliding_window=8,
    )
    return transformers.Gemma3ForCausalLM(config)


def _batch(seed: int = 0) -> dict[str, object]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 97, (3, 20), generator=g)
    attention = torch.ones_like(ids)
    attention[1, 16:] = 0  # a right-padded row, as the collator pads
    labels = torch.full_like(ids, -100)
    labels[0, 12:] = ids[0, 12:]  # answers of different lengths at the end of each row
    labels[1, 9:16] = ids[1, 9:16]
    labels[2, 18:] = ids[2, 18:]
    return {"input_ids": ids, "attention_mask": attention, "labels": labels}


@pytest.mark.parametrize("build", [_llama, _gemma3], ids=["llama", "gemma3-softcap"])
def test_answer_only_loss_and_gradients_match_the_models_own_loss(build):
    torch.manual_seed(0)
    model = build()
    if hasattr(model.config, "final_logit_softcapping") and model.config.final_logit_softcapping:
        # Scale the head up so the cap actually bends the logits: a loss without it would differ.
        with torch.no_grad():
            model.get_output_embeddings().weight.mul_(40.0)
    batch = _batch()

    reference = model(**batch).loss
    reference.backward()
    expected = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()

    loss, count, correct = answer_token_loss(model, batch)
    loss.backward()
    assert int(count) == int((batch["labels"][:, 1:] != -100).sum())
    assert 0 <= int(correct) <= int(count)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-5)
    for name, grad in expected.items():
        assert torch.allclose(dict(model.named_parameters())[name].grad, grad, atol=1e-6), name


def test_the_token_count_from_the_trainer_sets_the_denominator():
    model = _llama()
    batch = _batch(1)
    own, count, _ = answer_token_loss(model, batch)
    scaled, _, _ = answer_token_loss(model, batch, num_items_in_batch=count * 2)
    assert scaled.item() == pytest.approx(own.item() / 2, rel=1e-5)


def test_a_batch_without_trained_tokens_gives_a_zero_loss_that_backpropagates():
    model = _llama()
    batch = _batch(2)
    batch["labels"] = torch.full_like(batch["labels"], -100)
    loss, count, _ = answer_token_loss(model, batch)
    loss.backward()
    assert int(count) == 0 and loss.item() == 0.0


def test_lora_layers_inside_a_peft_model_are_trained():
    peft = pytest.importorskip("peft")
    model = peft.get_peft_model(
        _llama(), peft.LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    loss, _, _ = answer_token_loss(model, _batch(3))
    loss.backward()
    lora_grads = [p.grad for n, p in model.named_parameters() if "lora_A" in n]
    assert lora_grads and all(g is not None for g in lora_grads)
