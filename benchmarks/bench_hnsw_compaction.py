"""HNSW tombstones: search time before and after compaction, and the slowest step while it compacts.

faiss's HNSW graph cannot delete, so evicted ids stay in it as tombstones and every search asks the
graph for ``k`` plus all of them. Two measurements:

1. Search: a shard of ``--rows`` random unit vectors of which all but ``--live`` are evicted, searched
   (k=4) with compaction off, then after compacting it, against a graph built over the live rows alone.
2. Steps: a buffer capped at ``--live`` synthetic rows (``max_synthetic``) is filled and then evicted to
   just below the compaction threshold (as many tombstones as live rows), then stepped (one retrieve,
   one add that evicts one row) across it. Inline, one step pays for rebuilding the graph; in the
   background, the old graph keeps serving.

    python benchmarks/bench_hnsw_compaction.py [--rows 20000] [--live 1000] [--steps 200]
"""

from __future__ import annotations

import time

import numpy as np
from _harness import arg_parser, transition

from dreamgym_env.buffer import BufferConfig, IndexConfig, ReplayBuffer
from dreamgym_env.buffer.embedders import l2_normalize
from dreamgym_env.buffer.index import HNSWIndex, ShardedIndex

DIM = 256


def search_ms(index: ShardedIndex, queries: np.ndarray) -> float:
    """Median milliseconds of one k=4 search."""
    times = []
    for q in queries:
        t0 = time.perf_counter()
        index.search(q, 4, "a")
        times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1000)


def bench_search(rows: int, live: int) -> None:
    """Search time with ``rows - live`` tombstones, then compacted, then a graph of the live rows only."""
    rng = np.random.default_rng(0)
    ids = np.arange(1, rows + 1, dtype=np.int64)
    vectors = l2_normalize(rng.normal(size=(rows, DIM)))
    queries = vectors[rng.choice(rows, 500, replace=False)]
    kept = ids > rows - live

    def load_shard(domain: str, max_id: int) -> tuple[np.ndarray, np.ndarray]:
        return ids[kept], vectors[kept]

    config = IndexConfig(kind="hnsw", threads=1, background_retrain=False)
    index = ShardedIndex(DIM, config.model_copy(update={"hnsw_compact_ratio": None}), load_shard)
    index.add("a", ids, vectors)
    index.remove("a", ids[~kept])
    shard = index.shards["a"]
    assert isinstance(shard, HNSWIndex)
    with_tombstones = search_ms(index, queries)
    index.config = config  # compaction on: the next eviction compacts, inline
    t0 = time.perf_counter()
    index.remove("a", ids[:1])
    rebuild_s = time.perf_counter() - t0
    compacted = index.shards["a"]
    assert isinstance(compacted, HNSWIndex) and compacted.graph_size == live
    after = search_ms(index, queries)
    fresh = ShardedIndex(DIM, config, load_shard)
    fresh.add("a", ids[kept], vectors[kept])
    print(
        f"search, {shard.graph_size} in the graph, {shard.tombstones} of them tombstones: "
        f"{with_tombstones:.3f} ms; compacted ({rebuild_s:.2f} s) to {compacted.graph_size}: {after:.3f} ms; "
        f"a graph built over the {live} live rows: {search_ms(fresh, queries):.3f} ms"
    )


def bench_steps(live: int, steps: int, background: bool) -> None:
    """Step across the compaction of a shard of ``live`` rows and print the step latencies."""
    config = BufferConfig(
        max_synthetic=live,
        index=IndexConfig(kind="hnsw", threads=1, background_retrain=background),
    )
    with ReplayBuffer(config) as buffer:
        buffer.add_many(transition(i) for i in range(live))
        start = 2 * live - steps // 4  # tombstones just below the live count when the steps begin
        buffer.add_many(transition(i) for i in range(live, start))
        buffer.wait_for_index()
        shard = buffer.index.shards["webshop"]
        assert isinstance(shard, HNSWIndex)
        before = (shard.graph_size, shard.tombstones)
        times = []
        for i in range(start, start + steps):
            t0 = time.perf_counter()
            buffer.retrieve(transition(i).state, transition(i).action, 4, domain="webshop")
            buffer.add(transition(i))
            times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        buffer.wait_for_index()
        waited = time.perf_counter() - t0
        shard = buffer.index.shards["webshop"]
        assert isinstance(shard, HNSWIndex)
        times.sort()
        print(
            f"steps, {'background' if background else 'inline':<10} graph {before[0]} "
            f"({before[1]} tombstones) -> {shard.graph_size} ({shard.tombstones}): {steps} steps, "
            f"median {times[len(times) // 2] * 1000:6.1f} ms, slowest {times[-1] * 1000:8.1f} ms; "
            f"compaction done {waited:4.1f} s after the last step"
        )


def main() -> None:
    """Search first, then steps inline and in the background."""
    parser = arg_parser(__doc__)
    parser.add_argument("--rows", type=int, default=20_000, help="vectors in the searched graph")
    parser.add_argument("--live", type=int, default=1_000, help="of them live (the rest evicted)")
    parser.add_argument("--step-live", type=int, default=10_000, help="max_synthetic of the stepped buffer")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    bench_search(args.rows, args.live)
    for background in (False, True):
        bench_steps(args.step_live, args.steps, background)


if __name__ == "__main__":
    main()
