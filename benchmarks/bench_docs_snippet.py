"""The docs' served-model snippet, as written, against the shipped TextWorld model: failed transitions of N.

``docs/experience_model.md`` tells a user to serve the shipped model and make the env with only
``base_url``, ``model="textworld"`` and ``tasks=tasks_from_games(games)``; everything else comes from
the model's name (its settings, and its shipped demonstrations where the env gets no ``retriever``).
This plays a seeded random policy (admissible commands) through exactly that env on
games made from seeds the suite never uses, and counts the transitions that failed (a step that raised,
or one the env answered with ``model_error``: an unparsable answer kept as the old state).

    python benchmarks/bench_docs_snippet.py --transitions 400 --out docs/results/docs_snippet.json
"""

from __future__ import annotations

import collections
import json
import tempfile
import time
import warnings

import gymnasium as gym
import numpy as np
from _harness import arg_parser, write_json

warnings.filterwarnings("ignore")

import dreamgym_env  # noqa: E402,F401 - registers the ids
from dreamgym_env.real.textworld import make_games, tasks_from_games  # noqa: E402
from dreamgym_env.serving.shipped import serve_shipped_model  # noqa: E402


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--transitions", type=int, default=400)
    parser.add_argument("--games", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="Write the counts as JSON here.")
    args = parser.parse_args()
    server = serve_shipped_model("textworld")
    try:
        with tempfile.TemporaryDirectory() as folder:
            games = make_games(
                folder, args.games, seed=6_000_000, challenge="custom", settings={"nb_rooms": 3}
            )
            env = gym.make(  # the snippet, as written
                "DreamGym/TextWorld-v0",
                base_url=server.base_url,
                model="textworld",
                tasks=tasks_from_games(games),
            )
            rng = np.random.default_rng(args.seed)
            failed, errors, episodes, done = 0, [], 0, 0
            answered_by: collections.Counter[str] = collections.Counter()
            failures: list[dict[str, object]] = []  # what a failed step was asked, and its last answer
            start = time.perf_counter()
            state, info = env.reset(seed=args.seed)
            while done < args.transitions:
                action = str(rng.choice(info["admissible_actions"]))
                try:
                    state, _, terminated, truncated, info = env.step(action)
                except Exception as e:  # noqa: BLE001 - a failed transition is what is counted
                    failed += 1
                    errors.append(f"{type(e).__name__}: {e}"[:300])
                    failures.append(
                        {"state": state, "action": action, "last_answer": getattr(e, "raw_output", None)}
                    )
                    terminated, truncated = True, False
                else:
                    answered_by[str(info.get("answered_by", "?"))] += 1
                    if info.get("model_error"):
                        failed += 1
                        errors.append(str(info["model_error"])[:300])
                done += 1
                if terminated or truncated:
                    episodes += 1
                    state, info = env.reset()
            seconds = time.perf_counter() - start
            env.close()
    finally:
        server.stop()
    result = {
        "transitions": done,
        "failed": failed,
        "episodes_ended": episodes,
        "seconds": round(seconds, 1),
        "games": args.games,
        "answered_by": dict(answered_by),
        "errors": errors[:20],
        "failures": failures[:20],
    }
    print(json.dumps(result, indent=1))
    if args.out:
        write_json(args.out, result)


if __name__ == "__main__":
    main()
