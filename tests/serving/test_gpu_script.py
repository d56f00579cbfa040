"""The GPU throughput script runs on a CPU-only machine up to the GPU, then stops with a clear message."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.integration  # slow: builds a tokenizer and imports torch in a subprocess (10-20 s)
@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("torch", "transformers", "tokenizers")),
    reason="builds the tokenizer and config with torch, transformers and tokenizers",
)
def test_without_a_gpu_it_builds_the_config_and_stops_before_the_weights(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the script would serve a model")
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_throughput.py"), "--work-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "No CUDA GPU here" in result.stdout and "stopping before the weights" in result.stdout
    model = tmp_path / "qwen2-1.5b-random"
    config = json.loads((model / "config.json").read_text())
    assert config["model_type"] == "qwen2" and config["num_hidden_layers"] == len(config["layer_types"]) == 28
    assert (model / "tokenizer.json").exists() and not list(model.glob("*.safetensors"))
