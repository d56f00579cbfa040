"""What a model's depth and an answer's length cost vLLM's CPU engine: one batch, fixed work.

The simulator's time on a CPU is the engine's decode iterations (docs/scaling.md), and an iteration's
cost grows with the model's depth; the number of iterations is the answer's length in tokens. This
benchmark times both apart from everything else: for each depth it keeps that many of the base's
decoder layers (the first, the last and others evenly between; which ones does not change the time),
starts the in-process engine with the shipped serving settings (bfloat16 where the CPU has it,
compiled, the package's thread binding), and generates exactly ``--new-tokens`` tokens (``ignore_eos``)
for batches of prompts of about ``--prompt-tokens`` tokens sharing a prefix, as a vector step's
requests do. Weights do not change the arithmetic, so an untrained cut of the base times the same as a
trained one. Each depth runs in a process of its own; median (min-max) of ``--repeats`` batches.

    python benchmarks/bench_engine_depth.py --depths 30 6 --batches 1 20 --new-tokens 46 20 \\
        --out docs/results/engine_depth.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _harness import arg_parser, format_range, git_commit, median_range, write_json

BASE = "smollm2-135m-instruct"
FILLER = "the kitchen has a fridge and a table north of the hall where a key lies"
"""Prompt words: room-like text, so the tokenizer splits it as it splits states."""


def spread(depth: int, of: int) -> tuple[int, ...]:
    """``depth`` layer indices of ``of``: the first, the last and the rest evenly between."""
    if depth >= of:
        return tuple(range(of))
    if depth == 1:
        return (of - 1,)
    return tuple(round(i * (of - 1) / (depth - 1)) for i in range(depth))


def cut_model(base: Path, layers: tuple[int, ...], out: Path) -> Path:
    """A copy of ``base`` with only ``layers`` (renumbered), saved where vLLM loads it."""
    from safetensors.torch import load_file, save_file

    from dreamgym_env.training.bases import _keep_layers

    config = json.loads((base / "config.json").read_text())
    state = _keep_layers(load_file(base / "model.safetensors"), layers, config["num_hidden_layers"])
    out.mkdir(parents=True, exist_ok=True)
    save_file(state, out / "model.safetensors", metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps({**config, "num_hidden_layers": len(layers)}))
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json", "chat_template.jinja"):
        if (base / name).is_file():
            (out / name).write_bytes((base / name).read_bytes())
    return out


def worker(folder: str, batches: list[int], new_tokens: list[int], prompt_tokens: int, repeats: int) -> None:
    """Time the batches in this process's engine; print one JSON line of seconds per batch."""
    from dreamgym_env.serving import cpu_dtype, default_engine_env

    for key, value in {**default_engine_env(), "VLLM_WORKER_MULTIPROC_METHOD": "spawn"}.items():
        os.environ.setdefault(key, value)
    from vllm import LLM, SamplingParams

    llm = LLM(folder, dtype=cpu_dtype(), max_model_len=2048, enforce_eager=False, seed=0)
    words = FILLER.split()
    shared = " ".join(words * (prompt_tokens // 2 // len(words) + 1))

    def prompts(n: int, tag: str) -> list[str]:
        tail = prompt_tokens // 2
        return [
            f"{shared} {tag} {i} " + " ".join(words[(i + j) % len(words)] for j in range(tail))
            for i in range(n)
        ]

    def sampling(tokens: int) -> SamplingParams:
        return SamplingParams(max_tokens=tokens, min_tokens=tokens, ignore_eos=True, temperature=0.0)

    llm.generate(prompts(4, "warm-up"), sampling(8), use_tqdm=False)
    seconds: dict[str, list[float]] = {}
    for tokens in new_tokens:
        for n in batches:
            runs = []
            for r in range(repeats):
                started = time.perf_counter()
                llm.generate(prompts(n, f"t{tokens}-n{n}-r{r}"), sampling(tokens), use_tqdm=False)
                runs.append(time.perf_counter() - started)
            seconds[f"{tokens}x{n}"] = runs
    print("RESULT " + json.dumps(seconds), flush=True)


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--depths", type=int, nargs="+", default=[30, 6])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 20])
    parser.add_argument("--new-tokens", type=int, nargs="+", default=[46, 20])
    parser.add_argument("--prompt-tokens", type=int, default=270)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", help="Write the result as JSON here.")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # one depth's engine, in its own process
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.batches, args.new_tokens, args.prompt_tokens, args.repeats)
        return

    from dreamgym_env.training.bases import build_base

    base = build_base(BASE)
    depth_of = json.loads((base / "config.json").read_text())["num_hidden_layers"]
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="engine-depth-") as tmp:
        for depth in args.depths:
            layers = spread(depth, depth_of)
            folder = base if depth >= depth_of else cut_model(base, layers, Path(tmp) / f"depth{depth}")
            command = [sys.executable, __file__, "--worker", str(folder), "--repeats", str(args.repeats),
                       "--prompt-tokens", str(args.prompt_tokens), "--batches", *map(str, args.batches),
                       "--new-tokens", *map(str, args.new_tokens)]  # fmt: skip
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
            if line is None:
                sys.exit(f"depth {depth} failed:\n{done.stderr[-3000:]}")
            seconds = json.loads(line.removeprefix("RESULT "))
            rows[str(depth)] = {
                "layers": list(layers),
                "batch_s": {k: median_range(v) for k, v in seconds.items()},
            }
            for key, runs in seconds.items():
                tokens = int(key.split("x")[0])
                per_iteration = [1000 * s / tokens for s in runs]
                print(f"depth {depth:2d}, {key} (tokens x batch): {format_range(runs)} s a batch, "
                      f"{format_range(per_iteration, '{:.1f}')} ms an iteration", flush=True)  # fmt: skip
    result = {
        "base": BASE,
        "depths": rows,
        "prompt_tokens": args.prompt_tokens,
        "repeats": args.repeats,
        "commit": git_commit(),
    }
    if args.out:
        write_json(args.out, result)


if __name__ == "__main__":
    sys.exit(main())
