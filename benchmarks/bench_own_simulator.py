"""From your own episodes to a served, measured simulator, for a domain other than TextWorld: ALFWorld.

Runs the commands ``docs/own_simulator.md`` walks through, as a user types them, and times each:

1. ``dreamgym buffer import``: real ALFWorld episodes (ReAct's 36 trajectories, as agents saw them)
   into a replay buffer;
2. ``dreamgym build-sft``: chat SFT data, held-out tasks apart (a game's ``act_`` and ``react_``
   episodes on the same side);
3. ``dreamgym train``: a LoRA adapter on the PyPI-built six-layer SmolLM2 base the shipped models use,
   on this machine's CPU;
4. ``dreamgym serve --model DIR``: the adapter merged into its base and served by vLLM;
5. ``dreamgym eval-fidelity``: the held-out transitions asked of the served model and of the
   model-free baselines;
6. ``gymnasium.make`` of the env id and keywords ``dreamgym serve`` prints: ``--episodes`` simulated
   episodes of a random admissible policy, with who answered each step.

Writes one JSON: each command and its seconds, the data's sizes, the fidelity of the model beside
the baselines on the held-out tasks, and the simulated episodes' steps by who answered them.

    python benchmarks/bench_own_simulator.py --out docs/results/own_simulator_alfworld.json
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from _harness import ROOT, arg_parser, git_commit, write_json

DATA = ROOT.parent / "shared" / "data" / "alfworld" / "react_alfworld_3prompts.json"
FIGURES = ("exact_match", "state_f1", "done_accuracy", "success_accuracy", "parse_failure_rate")


def dreamgym(*words: str) -> list[str]:
    """The ``dreamgym`` command of this interpreter's environment."""
    return [str(Path(sys.executable).with_name("dreamgym")), *words]


def shown(command: list[str]) -> str:
    """``command`` as a user types it from the project's root: ``dreamgym`` and relative paths."""
    words = ["dreamgym", *(os.path.relpath(w, ROOT) if os.path.isabs(w) else w for w in command[1:])]
    return shlex.join(words)


def timed(command: list[str], log: Path) -> float:
    """Run ``command`` to its end (its output to ``log``); its seconds. A failure stops the benchmark."""
    started = time.perf_counter()
    with log.open("w") as out:
        subprocess.run(command, check=True, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    return round(time.perf_counter() - started, 1)


def wait_ready(base_url: str, server: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait until the server lists its model, or fail with its exit status."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"dreamgym serve exited with status {server.returncode}")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(2)
    raise SystemExit(f"dreamgym serve was not ready in {timeout:.0f}s")


def play(model: Path, served_name: str, base_url: str, episodes: int) -> dict[str, Any]:
    """Random admissible episodes in the simulated env, made as ``dreamgym serve`` prints it."""
    from collections import Counter

    import gymnasium as gym

    import dreamgym_env  # noqa: F401 - registers the ids
    from dreamgym_env.errors import DreamGymError
    from dreamgym_env.rollout import RandomPolicy
    from dreamgym_env.serving.trained import read_model_folder, trained_env_kwargs

    trained = read_model_folder(model)
    kwargs = trained_env_kwargs(trained, served_name)
    env = gym.make(str(trained.env_id), base_url=base_url, max_steps=10, **kwargs)
    answered: Counter[str] = Counter()
    steps = successes = 0
    error = None
    try:
        for episode in range(episodes):
            policy = RandomPolicy(seed=episode)
            observation, info = env.reset(seed=episode)
            done = False
            while not done:
                observation, _, terminated, truncated, info = env.step(policy(observation, info))
                answered[str(info.get("answered_by"))] += 1
                steps += 1
                done = terminated or truncated
            successes += bool(info.get("success"))
    except DreamGymError as e:  # a model that cannot answer in form yet: what it did, and why it stopped
        error = f"{type(e).__name__}: {e}"
    finally:
        env.close()
    return {
        "env_id": trained.env_id,
        "kwargs": {k: v for k, v in kwargs.items() if k != "model"},
        "episodes": episodes,
        "steps": steps,
        "answered_by": dict(answered),
        "successes": successes,
        "error": error,
    }


def markdown(result: dict[str, Any]) -> str:
    """The result's two tables: the commands with their seconds, and the fidelity on held-out tasks."""
    lines = ["| step | command | seconds |", "|---|---|---|"]
    for name, command in result["commands"].items():
        lines.append(f"| {name} | `{command}` | {result['seconds'].get(name, '-')} |")
    played = result["played"]
    lines.append(
        f"| play | {played['episodes']} random episodes in `gymnasium.make({played['env_id']!r}, ...)` "
        f"({played['steps']} steps) | {result['seconds'].get('play', '-')} |"
    )
    lines += [
        "",
        "| predictor | held-out transitions | state exact match | state F1 | done accuracy | success accuracy |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in result["fidelity"].items():
        lines.append(
            f"| {name} | {row['transitions']} | {row['exact_match']:.3f} | {row['state_f1']:.3f} | "
            f"{row['done_accuracy']:.3f} | {row['success_accuracy']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--work", default=str(ROOT / "runs" / "own_simulator_alfworld"))
    parser.add_argument("--data", default=str(DATA), help="ALFWorld episodes (ReAct's JSON).")
    parser.add_argument("--max-steps", type=int, default=40, help="Optimizer steps of `dreamgym train`.")
    parser.add_argument(
        "--base-model",
        default="smollm2-135m-instruct-6l",
        help="`dreamgym train --base-model` (default: the shipped models' six-layer SmolLM2 base).",
    )
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--episodes", type=int, default=8, help="Simulated episodes played at the end.")
    parser.add_argument("--out", default=str(ROOT / "docs" / "results" / "own_simulator_alfworld.json"))
    parser.add_argument(
        "--resume", action="store_true", help="Skip the steps --work records as done (their seconds kept)."
    )
    parser.add_argument("--markdown", help="Print the tables of this result file and stop.")
    args = parser.parse_args()
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text(encoding="utf-8"))), end="")
        return 0

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    buffer, sft, model, evals = work / "buffer.sqlite", work / "sft", work / "model", work / "eval"
    if not args.resume:
        for stale in (buffer, buffer.with_name(buffer.name + ".index"), work / "seconds.json"):
            stale.unlink(missing_ok=True)
    steps: dict[str, list[str]] = {
        "import": dreamgym("buffer", "import", str(buffer), args.data, "--quiet"),
        "build-sft": dreamgym(
            "build-sft",
            "--buffer",
            str(buffer),
            "--domain",
            "alfworld",
            "--out",
            str(sft),
            "--eval-fraction",
            "0.2",
            "--prompt-style",
            "compact",
        ),  # fmt: skip
        "train": dreamgym(
            "train",
            "--data",
            str(sft),
            "--out",
            str(model),
            "--base-model",
            args.base_model,
            "--lora",
            "--max-steps",
            str(args.max_steps),
            "--batch-size",
            "4",
            "--cpu",
        ),  # fmt: skip
    }
    # Each step's seconds are kept in the work folder, so a run stopped after training (the long
    # step) goes on from there with --resume and still reports every step's time.
    record = work / "seconds.json"
    seconds: dict[str, float] = json.loads(record.read_text()) if args.resume and record.exists() else {}
    load_before = os.getloadavg()[0]
    for name, command in steps.items():
        print(f"$ {shown(command)}", flush=True)
        if name in seconds:
            print(f"  {seconds[name]}s (done before)", flush=True)
            continue
        seconds[name] = timed(command, work / f"{name}.log")
        record.write_text(json.dumps(seconds))
        print(f"  {seconds[name]}s", flush=True)

    base_url = f"http://127.0.0.1:{args.port}/v1"
    served_name = model.name
    serve = dreamgym("serve", "--model", str(model), "--port", str(args.port))
    evaluate = dreamgym(
        "eval-fidelity", "--data", str(sft), "--buffer", str(buffer), "--base-url", base_url,
        "--model", served_name, "--name", "model", "--out", str(evals), "--no-replay", "--timeout", "600",
        "--baseline", "repeat-state", "--baseline", "nearest-transition",
    )  # fmt: skip
    print(f"$ {shown(serve)} &", flush=True)
    started = time.perf_counter()
    with (work / "serve.log").open("w") as log:
        server = subprocess.Popen(
            serve, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True
        )
    try:
        wait_ready(base_url, server, timeout=900)
        seconds["serve"] = round(time.perf_counter() - started, 1)
        print(f"  ready in {seconds['serve']}s\n$ {shown(evaluate)}", flush=True)
        seconds["eval-fidelity"] = timed(evaluate, work / "eval-fidelity.log")
        started = time.perf_counter()
        played = play(model, served_name, base_url, args.episodes)
        seconds["play"] = round(time.perf_counter() - started, 1)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)

    manifest = json.loads((sft / "manifest.json").read_text(encoding="utf-8"))
    scores: dict[str, Any] = {}
    for path in sorted(evals.glob("*.fidelity.json")):
        report = json.loads(path.read_text(encoding="utf-8"))
        scores[path.name.removesuffix(".fidelity.json")] = {
            k: report.get(k) for k in ("transitions", *FIGURES)
        }
    training = json.loads((model / "dreamgym_training.json").read_text(encoding="utf-8"))
    result = {
        "commit": git_commit(),
        "data": Path(args.data).name,
        "commands": {
            name: shown(command)
            for name, command in {**steps, "serve": serve, "eval-fidelity": evaluate}.items()
        },
        "seconds": seconds,
        # The machine's cores and its 1-minute load when the run began and ended: the seconds are
        # this machine's, and a load above the cores means the run shared them.
        "cpus": os.cpu_count(),
        "load_average": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "examples": {"train": manifest.get("train_examples"), "eval": manifest.get("eval_examples")},
        "train_loss": training["result"].get("train_loss"),
        "eval_loss": training["result"].get("eval_loss"),
        "fidelity": scores,
        "played": played,
    }
    write_json(args.out, result)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
