"""The throughput benchmark on a GPU with a model of realistic size, built here: nothing is downloaded.

1. Builds a BPE tokenizer locally (the smoke model's, untrained weights) and a randomly initialised
   Qwen2 config of about 1.3B parameters (hidden 1536, 28 layers, 12 heads, 2 key/value heads: the
   shape of Qwen2-1.5B, with the local 1k-token vocabulary).
2. Stops here without a CUDA GPU, saying so (exit status 0): everything before needs only a CPU.
3. Initialises the weights on the GPU (bfloat16, about 2.6 GB), serves them with vLLM's GPU build on
   loopback (compact JSON, as the smoke model is served) and runs
   ``benchmarks/bench_vector_throughput.py`` against that server, which prints the same tables as
   on a CPU. About 5-10 minutes in all.

    python benchmarks/gpu_throughput.py [--model-dir DIR] [--sizes 8 32 128 256] [--repeats 3]

``--model-dir`` serves a model folder you already have (any vLLM-loadable one) instead of building.
Random weights answer nonsense, which is fine here: the fixed-answer table pins every answer through
the output schema, and the real-answer table bounds them with the schema's length caps.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from _harness import ROOT, arg_parser

#: Qwen2-1.5B's shape, with whatever vocabulary the local tokenizer has.
SHAPE = dict(
    hidden_size=1536,
    intermediate_size=8960,
    num_hidden_layers=28,
    num_attention_heads=12,
    num_key_value_heads=2,
    head_dim=128,
    max_position_embeddings=32768,
    tie_word_embeddings=True,
)
SERVED_NAME = "bench"
SERVER_ARGS = (
    "--structured-outputs-config",
    '{"backend": "xgrammar", "disable_any_whitespace": true}',
    "--enable-prompt-tokens-details",
    "--generation-config",
    "vllm",
)


def build_config(out: Path) -> Path:
    """Tokenizer and config of the benchmark model in ``out`` (CPU only, seconds); no weights yet."""
    from dreamgym_env.serving import build_tiny_model

    tokenizer_dir = build_tiny_model(out.parent / "gpu-bench-tokenizer", train_steps=0, arch="qwen2")
    out.mkdir(parents=True, exist_ok=True)
    for path in tokenizer_dir.iterdir():
        if path.name.startswith("tokenizer") or path.name == "chat_template.jinja":
            shutil.copy(path, out / path.name)
    import torch
    import transformers

    tiny = transformers.AutoConfig.from_pretrained(tokenizer_dir)
    config = transformers.Qwen2Config(
        vocab_size=tiny.vocab_size,
        bos_token_id=tiny.bos_token_id,
        eos_token_id=tiny.eos_token_id,
        pad_token_id=tiny.pad_token_id,
        dtype="bfloat16",
        **SHAPE,
    )
    config.save_pretrained(out)
    with torch.device("meta"):  # checks that the config builds, and counts, without allocating
        model = transformers.AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())
    print(f"config: {config.model_type}, {params / 1e9:.2f}B parameters, vocabulary {config.vocab_size}")
    return out


def cuda_device() -> str | None:
    """The GPU's name, or None without a usable CUDA device."""
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def build_weights(out: Path) -> None:
    """Random bfloat16 weights for ``out/config.json``, initialised on the GPU (seconds), saved there."""
    import torch
    import transformers

    if (out / "model.safetensors").exists() or (out / "model.safetensors.index.json").exists():
        return
    config = transformers.AutoConfig.from_pretrained(out)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(out)
    print(f"random {config.model_type} model: {params / 1e9:.2f}B parameters in {out}", flush=True)


def serve(model_dir: Path, port: int, max_model_len: int, log: Path) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        SERVED_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        str(max_model_len),
        *SERVER_ARGS,
    ]
    env = {"HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
    return subprocess.Popen(
        command, stdout=log.open("wb"), stderr=subprocess.STDOUT, env={**os.environ, **env}
    )


def wait_healthy(server: subprocess.Popen[bytes], port: int, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(
                f"vLLM exited with status {server.returncode} before it was healthy:\n{log.read_text()[-4000:]}"
            )
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return
        except OSError:
            time.sleep(2)
    sys.exit(f"vLLM was not healthy after {timeout:.0f}s:\n{log.read_text()[-4000:]}")


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--model-dir", type=Path, default=None, help="Serve this model folder instead.")
    parser.add_argument("--work-dir", type=Path, default=Path(tempfile.gettempdir()) / "dreamgym-gpu-bench")
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 32, 128, 256])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--max-model-len", type=int, default=8192)
    parser.add_argument("--startup-timeout", type=float, default=600)
    args = parser.parse_args()
    started = time.monotonic()

    model_dir = args.model_dir or build_config(args.work_dir / "qwen2-1.5b-random")
    print(f"model folder: {model_dir}", flush=True)
    device = cuda_device()
    if device is None:
        print(
            "No CUDA GPU here (torch.cuda.is_available() is False): stopping before the weights are "
            "initialised and served. The tokenizer and config are built; run this script on a GPU "
            "machine with vLLM's GPU build (pip install vllm) for the tables, or run "
            "benchmarks/bench_vector_throughput.py for the CPU figures."
        )
        return
    print(f"GPU: {device}", flush=True)
    try:
        import vllm  # noqa: F401
    except ImportError:
        sys.exit("vLLM is not installed: pip install vllm (the GPU build), then run this again.")
    if args.model_dir is None:
        build_weights(model_dir)

    log = args.work_dir / "vllm.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    server = serve(model_dir, args.port, args.max_model_len, log)
    try:
        wait_healthy(server, args.port, args.startup_timeout, log)
        print(f"served in {time.monotonic() - started:.0f}s since start; log {log}\n", flush=True)
        bench = [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_vector_throughput.py"),
            "--base-url",
            f"http://127.0.0.1:{args.port}/v1",
            "--model",
            SERVED_NAME,
            "--sizes",
            *map(str, args.sizes),
            "--steps",
            str(args.steps),
            "--repeats",
            str(args.repeats),
            "--detail-n",
            "128",
        ]
        status = subprocess.call(bench, cwd=ROOT)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    print(f"\n(total {time.monotonic() - started:.0f}s)")
    sys.exit(status)


if __name__ == "__main__":
    main()
