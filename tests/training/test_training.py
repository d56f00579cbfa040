"""`dreamgym train`: config checks, the from-scratch tokenizer, LoRA, and a run whose output vLLM serves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dreamgym_env.errors import ConfigError
from dreamgym_env.training.sft_data import SFTBuildConfig, build_sft_dataset
from dreamgym_env.training.train import ScratchModelSpec, TrainConfig
from tests.serving.test_trained_model import flags
from tests.training.test_sft_data import _data

TINY = ScratchModelSpec(
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
    max_position_embeddings=1024,
)


@pytest.fixture
def sft_dir(tmp_path):
    build_sft_dataset(_data(tasks=6), tmp_path / "sft", SFTBuildConfig(top_k=1, eval_fraction=0.34))
    return tmp_path / "sft"


def test_config_rejects_ambiguous_or_impossible_runs():
    with pytest.raises(ConfigError, match="exactly one"):
        TrainConfig(data_dir="d", output_dir="o")
    with pytest.raises(ConfigError, match="exactly one"):
        TrainConfig(data_dir="d", output_dir="o", base_model="m", from_scratch=True)
    with pytest.raises(ConfigError, match="LoRA"):
        TrainConfig(data_dir="d", output_dir="o", from_scratch=True, lora=True)
    with pytest.raises(ConfigError, match="head size"):
        ScratchModelSpec(hidden_size=64, num_attention_heads=4)


def test_scratch_tokenizer_makes_the_system_prompt_one_token(sft_dir):
    pytest.importorskip("transformers")
    from dreamgym_env.training.train import _read_jsonl, build_scratch_tokenizer

    rows = _read_jsonl(sft_dir / "train.jsonl")
    tok = build_scratch_tokenizer(rows, TINY)
    system = rows[0]["prompt"][0]["content"]
    assert len(system) > 2000 and len(tok(system, add_special_tokens=False)["input_ids"]) == 1
    text = tok.apply_chat_template(rows[0]["prompt"] + rows[0]["completion"], tokenize=False)
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text  # lossless round trip


def test_from_scratch_then_lora_runs_and_saves(sft_dir, tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("peft")
    from dreamgym_env.training.train import TRAINING_MANIFEST, train_experience_model

    scratch = train_experience_model(
        TrainConfig(
            data_dir=str(sft_dir),
            output_dir=str(tmp_path / "m"),
            from_scratch=True,
            scratch=TINY,
            max_steps=2,
            batch_size=4,
            use_cpu=True,
            evaluate=False,
        )
    )
    assert scratch.steps == 2 and scratch.train_examples > 0
    record = json.loads((tmp_path / "m" / TRAINING_MANIFEST).read_text())
    assert record["env_settings"]["top_k"] == 1 and record["env_settings"]["history_window"] == 2
    assert not (tmp_path / "m" / "generation_config.json").exists()

    lora = train_experience_model(
        TrainConfig(
            data_dir=str(sft_dir),
            output_dir=str(tmp_path / "a"),
            base_model=str(tmp_path / "m"),
            lora=True,
            lora_r=4,
            max_steps=1,
            batch_size=2,
            use_cpu=True,
            evaluate=True,
        )
    )
    assert (tmp_path / "a" / "adapter_config.json").exists() and lora.eval_loss is not None
    assert scratch.serve_hint == f"dreamgym serve --model {tmp_path / 'm'}"
    assert lora.serve_hint == f"dreamgym serve --model {tmp_path / 'a'}"


def test_the_serve_command_train_prints_serves_the_folder_it_wrote(
    sft_dir, tmp_path, vllm_starts, capsys, monkeypatch
):
    """Measured before: `dreamgym train` printed `python -m vllm.entrypoints.openai.api_server --model OUT
    --served-model-name experience` (and `vllm serve BASE --enable-lora ...` for an adapter), which stops on
    a CPU ("Available memory ... less than desired CPU memory utilization (0.92 ...)")."""
    pytest.importorskip("trl")
    pytest.importorskip("peft")
    import shlex

    from dreamgym_env.cli import main

    monkeypatch.setenv("DREAMGYM_CACHE_DIR", str(tmp_path / "cache"))
    run = ["train", "--data", str(sft_dir), "--cpu", "--no-eval", "--max-steps", "1", "--batch-size", "2"]
    tiny = ["--hidden-size", "64", "--heads", "2", "--kv-heads", "1", "--layers", "1"]
    tiny += ["--intermediate-size", "128", "--vocab-size", "512"]

    def served_by_its_hint(out: Path) -> tuple[dict[str, str], str]:
        printed = capsys.readouterr().out.splitlines()
        assert printed[-1] == f"serve it with: dreamgym serve --model {out}"
        assert main(shlex.split(printed[-1].split(": ", 1)[1])[1:]) == 0
        return flags(vllm_starts[-1].command), capsys.readouterr().out

    assert main([*run, "--out", str(tmp_path / "m"), "--from-scratch", *tiny]) == 0
    given, printed = served_by_its_hint(tmp_path / "m")
    assert given["--model"] == str(tmp_path / "m") and given["--served-model-name"] == "m"
    assert given["--max-model-len"] == "2048"  # the scratch model's context
    assert (
        'gymnasium.make("DreamGym/TextWorld-v0", base_url="http://127.0.0.1:8000/v1", model=\'m\', '
        in printed
    )
    assert "history_window=2, top_k=1," in printed  # the SFT data's settings

    assert (
        main(
            [
                *run,
                "--out",
                str(tmp_path / "a"),
                "--base-model",
                str(tmp_path / "m"),
                "--lora",
                "--lora-r",
                "4",
            ]
        )
        == 0
    )
    given, printed = served_by_its_hint(tmp_path / "a")
    merged = Path(given["--model"])  # the adapter merged into its base, in the cache
    assert merged.parent == tmp_path / "cache" / "models" and merged.name.startswith("a-on-m-")
    assert (merged / "model.safetensors").is_file() and (merged / "tokenizer.json").is_file()
    assert given["--served-model-name"] == "a" and f"a LoRA adapter merged into {tmp_path / 'm'}" in printed


def _resumable(sft_dir: Path, tmp_path: Path, max_seconds: float | None) -> TrainConfig:
    """A tiny from-scratch run of 4 steps into ``tmp_path/m``, checkpointed every 2, resuming."""
    return TrainConfig(
        data_dir=str(sft_dir),
        output_dir=str(tmp_path / "m"),
        from_scratch=True,
        scratch=TINY,
        max_steps=4,
        batch_size=2,
        use_cpu=True,
        evaluate=False,
        save_steps=2,
        resume=True,
        max_seconds=max_seconds,
    )


def test_interrupted_training_resumes_where_it_stopped_and_sums_its_sittings(sft_dir, tmp_path):
    pytest.importorskip("trl")
    from dreamgym_env.training.train import TRAINING_MANIFEST, train_experience_model

    def sitting(max_seconds: float | None) -> dict:
        train_experience_model(_resumable(sft_dir, tmp_path, max_seconds))
        return json.loads((tmp_path / "m" / TRAINING_MANIFEST).read_text())

    first = sitting(1e-9)  # the budget is spent at once: stops after one step, with a checkpoint
    assert first["total"]["steps"] == 1 and (tmp_path / "m" / "_trainer" / "checkpoint-1").is_dir()
    second = sitting(None)
    assert [s["resumed_from"] for s in second["sittings"]] == [None, "checkpoint-1"]
    assert second["total"]["steps"] == 4 and second["sittings"][-1]["last_step"] == 4
    assert second["total"]["tokens"] > first["total"]["tokens"] > 0
    assert second["total"]["seconds"] >= sum(s["seconds"] for s in first["sittings"])
    with pytest.raises(ConfigError, match="save_steps"):
        TrainConfig(data_dir="d", output_dir="o", from_scratch=True, save_steps=0)


def test_a_killed_sitting_still_counts_up_to_its_last_checkpoint(sft_dir, tmp_path, monkeypatch):
    pytest.importorskip("trl")
    import transformers

    import dreamgym_env.training.train as train_module

    class Killed(Exception):
        pass

    class KillAtStep3(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):  # type: ignore[no-untyped-def]
            if state.global_step == 3:  # after the checkpoint at step 2, before the next
                raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(train_module, "_deadline_callback", lambda *args, **kwargs: KillAtStep3())
        with pytest.raises(Killed):
            train_module.train_experience_model(_resumable(sft_dir, tmp_path, 1e6))
    log = json.loads((tmp_path / "m" / "_trainer" / "sittings.json").read_text())
    assert [s["last_step"] for s in log] == [2] and log[0]["seconds"] > 0
    train_module.train_experience_model(_resumable(sft_dir, tmp_path, None))
    manifest = json.loads((tmp_path / "m" / train_module.TRAINING_MANIFEST).read_text())
    assert [(s["resumed_from"], s["last_step"]) for s in manifest["sittings"]] == [
        (None, 2),
        ("checkpoint-2", 4),
    ]
    assert manifest["total"]["seconds"] >= log[0]["seconds"]


@pytest.mark.integration
def test_dreamgym_train_output_is_served_by_vllm(sft_dir, tmp_path):
    pytest.importorskip("trl")
    pytest.importorskip("vllm")
    import openai

    from dreamgym_env.cli import main
    from dreamgym_env.experience.schema import output_json_schema
    from dreamgym_env.serving.trained import read_model_folder, servable_trained_folder, trained_server

    out = tmp_path / "model"
    code = main(
        [
            "train",
            "--data",
            str(sft_dir),
            "--out",
            str(out),
            "--from-scratch",
            "--cpu",
            "--no-eval",
            "--max-steps",
            "3",
            "--batch-size",
            "4",
            "--hidden-size",
            "64",
            "--heads",
            "2",
            "--kv-heads",
            "1",
            "--layers",
            "1",
            "--intermediate-size",
            "128",
            "--vocab-size",
            "512",
        ]
    )
    assert code == 0
    prompt = json.loads((sft_dir / "eval.jsonl").read_text().splitlines()[0])["prompt"]
    # Served as `dreamgym serve --model OUT` serves it: the folder checked, the shipped CPU settings.
    model = read_model_folder(out)
    assert model.kind == "weights" and model.env_settings["domain"] == "textworld"
    with trained_server(
        servable_trained_folder(model, "trained"),
        "trained",
        max_model_len=1024,
        log_path=tmp_path / "vllm.log",
    ) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0, timeout=120)
        schema = output_json_schema(
            max_reasoning_chars=20, max_state_chars=40, max_actions=2, max_action_chars=16
        )
        reply = client.chat.completions.create(
            model="trained",
            messages=prompt,
            temperature=0,
            max_tokens=200,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "t", "schema": schema, "strict": True},
            },
        )
    assert reply.choices[0].message.content and reply.usage.prompt_tokens < 1024
