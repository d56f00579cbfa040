"""Reset and step times of the real wrappers next to the simulated envs.

Rows: each real wrapper this machine can run (TextWorld on generated games, ALFWorld on hand-written
games, BrowserGym with Chromium on a loopback page), and the simulated env of the same domain with
the scripted fake model (the env's own overhead) and, with --vllm, the CPU vLLM server with the
smoke model (a real model round trip; the model is tiny, so its answers are not meaningful).

    python benchmarks/bench_real_vs_sim.py [--episodes 3] [--steps 10] [--vllm]
"""

from __future__ import annotations

import functools
import http.server
import shutil
import statistics
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _harness import arg_parser

warnings.filterwarnings("ignore")

from dreamgym_env.domains.textworld import TextWorldDomain  # noqa: E402
from dreamgym_env.env import DreamGymEnv  # noqa: E402

PAGE = (
    "<html><head><title>Bench</title></head>"
    "<body><h1>Bench</h1><button>Go</button><a href='#'>Link</a></body></html>"
)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def policy(info: dict[str, Any], fallback: str) -> str:
    plan = info.get("expert_plan") or []
    actions = info.get("admissible_actions") or []
    return str(plan[0]) if plan else str(actions[0]) if actions else fallback


def measure(make: Callable[[], Any], episodes: int, steps: int, fallback: str) -> tuple[float, float, int]:
    env = make()
    resets, step_times = [], []
    for episode in range(episodes):
        t = time.perf_counter()
        obs, info = env.reset(seed=episode)
        resets.append(time.perf_counter() - t)
        for _ in range(steps):
            t = time.perf_counter()
            obs, reward, terminated, truncated, info = env.step(policy(info, fallback))
            step_times.append(time.perf_counter() - t)
            if terminated or truncated:
                break
    env.close()
    return statistics.median(resets), statistics.median(step_times), len(step_times)


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument(
        "--vllm", action="store_true", help="also time the simulated envs on the CPU vLLM server"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_real_"))
    rows: list[tuple[str, str, Any]] = []

    try:
        from dreamgym_env.real.textworld import TextWorldRealEnv, make_games, tasks_from_games

        games = make_games(work / "tw", n=args.episodes, seed=0)
        tasks = tasks_from_games(games)
        rows.append(("TextWorld", "real (TextWorld engine)", lambda: TextWorldRealEnv(games)))
        rows.append(
            (
                "TextWorld",
                "sim (scripted model)",
                lambda: DreamGymEnv(TextWorldDomain(), tasks=tasks, backend="scripted"),
            )
        )
    except ImportError as e:
        print(f"skipping TextWorld: {e}")
    try:
        from _alfworld_games import write_games

        from dreamgym_env.real.alfworld import ALFWorldRealEnv

        alf_games = write_games(work / "alfworld")
        rows.append(("ALFWorld", "real (alfworld engine)", lambda: ALFWorldRealEnv(alf_games)))
        rows.append(("ALFWorld", "sim (scripted model)", lambda: DreamGymEnv("alfworld", backend="scripted")))
    except ImportError as e:
        print(f"skipping ALFWorld: {e}")
    server = None
    if shutil.which("chromium"):
        try:
            from dreamgym_env.real.webarena import WebArenaRealEnv

            (work / "index.html").write_text(PAGE)
            handler = functools.partial(_QuietHandler, directory=str(work))
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            url = f"http://127.0.0.1:{server.server_port}/index.html"
            rows.append(
                (
                    "WebArena",
                    "real (BrowserGym + Chromium, loopback page)",
                    lambda: WebArenaRealEnv(start_url=url, goal="bench"),
                )
            )
            rows.append(
                ("WebArena", "sim (scripted model)", lambda: DreamGymEnv("webarena", backend="scripted"))
            )
        except ImportError as e:
            print(f"skipping BrowserGym: {e}")
    vllm = None
    if args.vllm:
        from dreamgym_env.serving import SMOKE_MODEL_NAME, serve_smoke_model

        vllm = serve_smoke_model()
        base = {"base_url": vllm.base_url, "model": SMOKE_MODEL_NAME, "on_invalid_output": "fail_state"}
        rows.append(
            (
                "TextWorld",
                "sim (CPU vLLM, smoke model)",
                lambda: DreamGymEnv(TextWorldDomain(), tasks=tasks, **base),
            )
        )
        rows.append(("ALFWorld", "sim (CPU vLLM, smoke model)", lambda: DreamGymEnv("alfworld", **base)))

    print("\n| domain | env | reset median (ms) | step median (ms) | steps timed |\n|---|---|---|---|---|")
    for domain, label, make in rows:
        fallback = "noop()" if domain == "WebArena" else "look"
        reset_s, step_s, n = measure(make, args.episodes, args.steps, fallback)
        print(f"| {domain} | {label} | {reset_s * 1000:.1f} | {step_s * 1000:.1f} | {n} |", flush=True)
    if server is not None:
        server.shutdown()
    if vllm is not None:
        vllm.stop()


if __name__ == "__main__":
    main()
