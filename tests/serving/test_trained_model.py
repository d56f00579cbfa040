"""``dreamgym serve --model PATH``: a folder ``dreamgym train`` wrote, served as the shipped models are on a CPU.

Unit tests: vLLM is never started (its ``start`` and the wait for a signal are faked); what is checked is
the folder's check, the adapter's merge, the server's command and environment, and what is printed. The
server itself runs in ``tests/training/test_training.py``'s integration test.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from dreamgym_env.cli import main
from dreamgym_env.config import merge_overrides
from dreamgym_env.serving import SMOKE_SERVER_ARGS, cpu_dtype
from dreamgym_env.serving.shipped import SHIPPED_MODELS

ENV_SETTINGS = {
    "domain": "alfworld",
    "history_window": 2,
    "top_k": 1,
    "max_admissible_actions": 64,
    "prompt_style": "compact",
    "answer_format": "state",
    "setting": "learned",
}


def _record(folder: Path, base_model: str | None = None) -> None:
    record = {
        "config": {"base_model": base_model},
        "env_settings": ENV_SETTINGS,
        "lora_adapter": bool(base_model),
    }
    (folder / "dreamgym_training.json").write_text(json.dumps(record))


def weights_folder(folder: Path, *, context: int = 2048, record: bool = True) -> Path:
    """What ``dreamgym train --from-scratch`` writes (the weights are not read here)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(
        json.dumps({"architectures": ["LlamaForCausalLM"], "max_position_embeddings": context})
    )
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / "tokenizer.json").write_text("{}")
    (folder / "tokenizer_config.json").write_text("{}")
    if record:
        _record(folder)
    return folder


def adapter_folder(folder: Path, base_model: str | None, *, adapter_base: str = "/nowhere/base") -> Path:
    """What ``dreamgym train --base-model B --lora`` writes."""
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": adapter_base}))
    (folder / "adapter_model.safetensors").write_bytes(b"adapter")
    _record(folder, base_model)
    return folder


def flags(command: list[str]) -> dict[str, str]:
    return {arg: value for arg, value in zip(command, command[1:], strict=False) if arg.startswith("--")}


def test_a_trained_folder_is_served_with_the_cpu_settings_that_work(
    tmp_path, vllm_starts, capsys, monkeypatch
):
    """Measured before: `--model PATH` was refused (a shipped model's name only), and the command
    `dreamgym train` printed (`python -m vllm.entrypoints.openai.api_server --model OUT ...`) stopped
    on a CPU with "Available memory ... less than desired CPU memory utilization (0.92 ...)"."""
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    folder = weights_folder(tmp_path / "runs" / "my-model")
    assert main(["serve", "--model", str(folder), "--port", "8123"]) == 0
    (server,) = vllm_starts
    command = server.command
    given = flags(command)
    assert given["--model"] == str(folder) and given["--served-model-name"] == "my-model"
    assert given["--max-model-len"] == "2048"  # the model's own context (4096 would be refused)
    assert given["--dtype"] == cpu_dtype() and "--enforce-eager" not in command  # as the shipped model
    assert command[-len(SMOKE_SERVER_ARGS) :] == list(SMOKE_SERVER_ARGS)
    # A 1 GiB KV cache instead of 92% of the machine's memory: what the bare command lacked.
    assert server.environment["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert server.environment["HF_HUB_OFFLINE"] == "1"
    out = capsys.readouterr().out
    url = "http://127.0.0.1:8123/v1"
    assert f"{folder} (full weights) serving at {url} as 'my-model'" in out
    make = (
        f'gymnasium.make("DreamGym/ALFWorld-v0", base_url="{url}", model=\'my-model\', history_window=2, '
        "top_k=1, max_admissible_actions=64, prompt_style='compact', answer_format='state', "
        "setting='learned', temperature=0.0)"
    )
    assert make in out.splitlines()
    assert f"export DREAMGYM_BASE_URL={url} DREAMGYM_MODEL=my-model" in out
    # The printed keywords are ones the env takes.
    kwargs = dict(ENV_SETTINGS, model="my-model", temperature=0.0)
    del kwargs["domain"]
    config = merge_overrides(None, {**kwargs, "base_url": url})
    assert (
        config.prompt_style == "compact" and config.setting == "learned" and config.backend.temperature == 0.0
    )


def test_served_name_context_and_dtype_can_be_given(tmp_path, vllm_starts, capsys):
    big = weights_folder(tmp_path / "big", context=32768, record=False)
    assert main(["serve", "--model", str(big)]) == 0
    assert flags(vllm_starts[0].command)["--max-model-len"] == "4096"  # at most 4096 unless asked
    out = capsys.readouterr().out
    assert "gymnasium.make(ENV_ID, base_url=\"http://127.0.0.1:8000/v1\", model='big')" in out
    assert "no env_settings" in out  # no training record: the user must set the prompt settings
    args = ["--served-name", "experience", "--max-model-len", "8192", "--dtype", "auto"]
    assert main(["serve", "--model", str(big), *args]) == 0
    given = flags(vllm_starts[1].command)
    assert (given["--served-model-name"], given["--max-model-len"], given["--dtype"]) == (
        "experience",
        "8192",
        "auto",
    )


def test_an_adapter_is_merged_into_the_base_its_training_record_names(
    tmp_path, vllm_starts, capsys, monkeypatch
):
    from dreamgym_env.training import merge

    monkeypatch.setenv("DREAMGYM_CACHE_DIR", str(tmp_path / "cache"))
    merges = []

    def fake_merge(adapter, base, digest, out):
        merges.append((adapter, base, digest, out))
        weights_folder(out, context=1024, record=False)
        return out

    monkeypatch.setattr(merge, "merge_adapter", fake_merge)
    base = weights_folder(tmp_path / "base-model", record=False)
    adapter = adapter_folder(tmp_path / "adapter", str(base))
    assert main(["serve", "--model", str(adapter)]) == 0
    digest = hashlib.sha256(b"adapter").hexdigest()
    merged = merge.merged_dir("adapter-on-base-model", digest)
    assert merges == [(adapter, base, digest, merged)]
    given = flags(vllm_starts[0].command)
    assert given["--model"] == str(merged) and given["--served-model-name"] == "adapter"
    assert given["--max-model-len"] == "1024"  # the merged model's context
    assert f"(a LoRA adapter merged into {base})" in capsys.readouterr().out
    # A named PyPI-built base is merged by name (built on first use); --base wins over the record.
    named = adapter_folder(tmp_path / "named", "smollm2-135m-instruct")
    assert main(["serve", "--model", str(named)]) == 0
    assert merges[-1][1] == "smollm2-135m-instruct"
    assert main(["serve", "--model", str(named), "--base", str(base)]) == 0
    assert merges[-1][1] == base
    # No record: the base adapter_config.json names.
    bare = adapter_folder(tmp_path / "bare", None, adapter_base=str(base))
    (bare / "dreamgym_training.json").unlink()
    assert main(["serve", "--model", str(bare)]) == 0
    assert merges[-1][1] == base


def test_a_model_folder_named_like_a_shipped_model_is_served_as_the_folder(
    tmp_path, vllm_starts, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    weights_folder(tmp_path / "textworld")
    assert main(["serve", "--model", "textworld"]) == 0
    assert flags(vllm_starts[0].command)["--model"] == "textworld"


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (
            lambda d: d / "missing",
            "is neither a model folder (there is no such path) nor a shipped model "
            f"({', '.join(sorted(SHIPPED_MODELS))})",
        ),
        (lambda d: d, "is not a model folder (it holds data.jsonl)"),
        (lambda d: d / "data.jsonl", "is not a folder"),
    ],
)
def test_a_path_that_is_not_a_model_folder_is_one_line_naming_what_one_holds(
    tmp_path, vllm_starts, capsys, make, says
):
    (tmp_path / "data.jsonl").write_text("{}\n")
    assert main(["serve", "--model", str(make(tmp_path))]) == 1
    err = _one_line_error(capsys)
    assert says in err
    assert "config.json, model.safetensors and a tokenizer" in err and "adapter_config.json" in err
    assert vllm_starts == []


def test_incomplete_folders_and_misplaced_options_are_refused_before_anything_starts(
    tmp_path, vllm_starts, capsys, monkeypatch
):
    no_tokenizer = weights_folder(tmp_path / "no-tok", record=False)
    (no_tokenizer / "tokenizer.json").unlink()
    (no_tokenizer / "tokenizer_config.json").unlink()
    assert main(["serve", "--model", str(no_tokenizer)]) == 1
    assert "holds weights but no tokenizer" in _one_line_error(capsys)

    orphan = adapter_folder(tmp_path / "orphan", "/gone/base")
    assert main(["serve", "--model", str(orphan)]) == 1
    err = _one_line_error(capsys)
    assert "'/gone/base' (dreamgym_training.json)" in err and "'/nowhere/base' (adapter_config.json)" in err
    assert "--base DIR|NAME" in err

    broken = weights_folder(tmp_path / "broken", record=False)
    (broken / "dreamgym_training.json").write_text("{not json")
    assert main(["serve", "--model", str(broken)]) == 1
    assert "cannot be read as JSON" in _one_line_error(capsys)

    assert main(["serve", "--smoke", "--served-name", "x"]) == 1
    assert "--served-name apply to a model folder (--model PATH), not to --smoke" in _one_line_error(capsys)
    assert main(["serve", "--model", "textworld", "--base", "b", "--dtype", "auto"]) == 1
    assert "not to the shipped model 'textworld'" in _one_line_error(capsys)
    assert vllm_starts == []


def test_serve_help_names_every_shipped_model(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name in SHIPPED_MODELS:
        assert name in text, name
