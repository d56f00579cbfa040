"""The slowest step while a replay buffer's IVF shard retrains: inline against background.

A "step" is what an env does per transition: one retrieve, then one add. The buffer is filled to just
below a retrain (``retrain_growth=2``: the shard, trained at 50,000 rows, retrains past 2x that), then
stepped across it. Inline, one step pays for reading the shard back and training its cells; in the
background, the old cells keep serving.

    python benchmarks/bench_retrain_stall.py [--rows 100000] [--steps 200]
"""

from __future__ import annotations

import time

from _harness import arg_parser, transition

from dreamgym_env.buffer import BufferConfig, IndexConfig, ReplayBuffer


def run(rows: int, steps: int, background: bool) -> None:
    """Fill, step across the retrain, and print the step latencies."""
    config = BufferConfig(
        index=IndexConfig(threshold=10_000, retrain_growth=2.0, background_retrain=background, threads=1)
    )
    with ReplayBuffer(config) as buffer:
        buffer.add_many(transition(i) for i in range(rows - steps // 4))
        buffer.wait_for_index()
        times = []
        start = time.perf_counter()
        for i in range(rows - steps // 4, rows - steps // 4 + steps):
            t0 = time.perf_counter()
            buffer.retrieve(transition(i).state, transition(i).action, 4, domain="webshop")
            buffer.add(transition(i))
            times.append(time.perf_counter() - t0)
        total = time.perf_counter() - start
        t0 = time.perf_counter()
        buffer.wait_for_index()
        waited = time.perf_counter() - t0
        times.sort()
        print(
            f"{'background' if background else 'inline':<10} {steps} steps in {total:6.2f} s: "
            f"median {times[len(times) // 2] * 1000:6.1f} ms, slowest {times[-1] * 1000:8.1f} ms; "
            f"retrain done {waited:5.1f} s after the last step "
            f"(trained on {buffer.index.shards['webshop'].trained_size} rows)"
        )


def main() -> None:
    """Inline first, then in the background."""
    parser = arg_parser(__doc__)
    parser.add_argument("--rows", type=int, default=100_000, help="rows at which the retrain starts")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    for background in (False, True):
        run(args.rows, args.steps, background)


if __name__ == "__main__":
    main()
