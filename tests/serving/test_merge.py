"""A LoRA adapter merged into its base: the shipped-adapter path, on a tiny model built here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

from dreamgym_env.errors import ConfigError  # noqa: E402
from dreamgym_env.serving import shipped  # noqa: E402
from dreamgym_env.training.bases import BaseBuildError  # noqa: E402
from dreamgym_env.training.merge import MERGED_MARKER, merge_adapter  # noqa: E402


def _tiny_base(folder: Path) -> None:
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4
    )
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(folder)


def _adapter(base: Path, folder: Path) -> Path:
    model = transformers.AutoModelForCausalLM.from_pretrained(base)
    lora = peft.get_peft_model(
        model, peft.LoraConfig(r=4, target_modules="all-linear", init_lora_weights=False)
    )
    lora.save_pretrained(folder)
    return folder


def test_the_merged_model_answers_as_the_base_with_its_adapter(tmp_path: Path) -> None:
    base, adapter = tmp_path / "base", _adapter_folder(tmp_path)
    out = merge_adapter(adapter, base, "abc", tmp_path / "merged")
    ids = torch.tensor([[1, 5, 9, 3]])
    expected = peft.PeftModel.from_pretrained(
        transformers.AutoModelForCausalLM.from_pretrained(base), adapter
    )
    merged = transformers.AutoModelForCausalLM.from_pretrained(out)
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, expected(ids).logits, atol=1e-5)
        assert not torch.allclose(
            merged(ids).logits, transformers.AutoModelForCausalLM.from_pretrained(base)(ids).logits
        )
    assert json.loads((out / MERGED_MARKER).read_text())["adapter_sha256"] == "abc"
    written = (out / "model.safetensors").stat().st_mtime_ns  # a whole merge of the same adapter is reused
    assert (
        merge_adapter(adapter, base, "abc", out) == out
        and (out / "model.safetensors").stat().st_mtime_ns == written
    )


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage",
    [
        lambda out: _flip(out / "model.safetensors", -5),  # the weights' data
        lambda out: _flip(out / "model.safetensors", 20),  # its header
        lambda out: (out / "model.safetensors").unlink(),
        lambda out: (out / "config.json").unlink(),
    ],
    ids=["data flipped", "header flipped", "weights deleted", "config deleted"],
)
def test_a_damaged_merge_is_merged_again(tmp_path: Path, damage) -> None:
    base, adapter = tmp_path / "base", _adapter_folder(tmp_path)
    out = merge_adapter(adapter, base, "abc", tmp_path / "merged")
    whole = {p.name: p.read_bytes() for p in out.iterdir()}
    damage(out)
    assert merge_adapter(adapter, base, "abc", out) == out
    assert {p.name: p.read_bytes() for p in out.iterdir()} == whole


@pytest.mark.parametrize("garbage", ["{oops", "null"])
def test_a_garbage_merge_marker_is_named(tmp_path: Path, garbage: str) -> None:
    base, adapter = tmp_path / "base", _adapter_folder(tmp_path)
    out = merge_adapter(adapter, base, "abc", tmp_path / "merged")
    (out / MERGED_MARKER).write_text(garbage)
    with pytest.raises(BaseBuildError, match="cache check") as info:
        merge_adapter(adapter, base, "abc", out)
    assert str(out / MERGED_MARKER) in str(info.value) and "JSON" in str(info.value)


def test_a_garbage_manifest_is_a_config_error_naming_it(tmp_path: Path) -> None:
    adapter = _adapter_folder(tmp_path)
    (adapter / "manifest.json").write_text("{not json")
    with pytest.raises(ConfigError) as info:
        shipped.servable_folder(adapter, "textworld")
    assert str(adapter / "manifest.json") in str(info.value) and "JSON" in str(info.value)


def test_a_full_disk_while_saving_the_merge_says_so_with_the_space_needed(
    tmp_path: Path, monkeypatch
) -> None:
    base, adapter = tmp_path / "base", _adapter_folder(tmp_path)

    def full(self, *args, **kwargs):
        raise type("SafetensorError", (Exception,), {})("Error while serializing: No space left on device")

    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", full)
    with pytest.raises(BaseBuildError) as info:
        merge_adapter(adapter, base, "abc", tmp_path / "merged")
    assert info.value.step == "save" and "is full" in str(info.value) and "needs about" in str(info.value)
    assert [p.name for p in tmp_path.iterdir() if "merging" in p.name] == []


def _adapter_folder(tmp_path: Path) -> Path:
    _tiny_base(tmp_path / "base")
    return _adapter(tmp_path / "base", tmp_path / "adapter")


def test_an_adapter_that_does_not_fit_its_base_names_the_merge_step(tmp_path: Path) -> None:
    adapter = _adapter_folder(tmp_path)
    other = tmp_path / "other"
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=48, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4
    )
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained(other)
    with pytest.raises(BaseBuildError, match="at the merge step"):
        merge_adapter(adapter, other, "abc", tmp_path / "merged")


def test_a_shipped_adapter_is_checked_against_its_manifest_before_anything_is_built(tmp_path: Path) -> None:
    adapter = _adapter_folder(tmp_path)
    (adapter / "manifest.json").write_text(
        json.dumps({"base": "smollm2-135m-instruct", "weights_sha256": "0" * 64})
    )
    with pytest.raises(ConfigError, match="not the 0000000000000000"):
        shipped.servable_folder(adapter, "textworld")
