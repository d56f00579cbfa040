"""SQLite against PostgreSQL as the replay buffer's store, on the same machine.

Prints one markdown table: median and min-max of ``--runs`` runs (a fresh store each run) of

- bulk insert throughput filling the store to ``--rows`` rows (batches of 1,000, one transaction each);
- one-transition ``add`` (one transaction, what an env step costs) at that size;
- ``retrieve`` latency (k=4, IVF index) at that size: embedding, checking for other writers' commits,
  search, reading the rows back;
- catch-up: the first ``retrieve`` of a second handle after another handle wrote ``--catch-up`` rows;
- ``--writers`` processes writing at once (8-transition batches, as a vector env of 8 writes per step).

PostgreSQL runs in a throwaway cluster (:class:`~dreamgym_env.storage.pg_cluster.TemporaryPostgres`,
default server settings, ``fsync`` on) on 127.0.0.1; SQLite is a WAL file in a temp directory.
Bulk rows carry random unit vectors (the store's cost does not depend on them), so no time goes to
embedding 100k texts; ``add`` and ``retrieve`` embed with the default hashing embedder.

    python benchmarks/bench_buffer_stores.py                     # 100k rows, 10k catch-up, 8 writers, 3 runs
    python benchmarks/bench_buffer_stores.py --rows 20000 --runs 1   # a quick look
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
from _harness import arg_parser, format_range

from dreamgym_env.buffer import BufferConfig, IndexConfig, ReplayBuffer
from dreamgym_env.records import Transition
from dreamgym_env.storage.pg_cluster import TemporaryPostgres

DIM = 256
WRITER = textwrap.dedent(
    """
    import sys, time
    from dreamgym_env.buffer import ReplayBuffer
    from dreamgym_env.records import Transition

    location, name, rows, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with ReplayBuffer.open(location, busy_timeout_s=120, index={"kind": "exact"}) as buffer:
        print("ready", flush=True)
        for line in sys.stdin:
            round_ = line.strip()
            for start in range(0, rows, batch):
                buffer.add_many([
                    Transition(domain="w", task_id="t", task="x", episode_id=f"{name}-{round_}",
                               step=start + i, state=f"{name} {round_} state {start + i}", action="act",
                               next_state="n", source="sim")
                    for i in range(batch)
                ])
            print("done", flush=True)
    """
)


def transition(i: int, tag: str = "bulk") -> Transition:
    return Transition(
        domain="webshop", task_id=f"t{i % 500}", task=f"buy item {i % 500}", episode_id=f"{tag}{i // 10}",
        step=i % 10, state=f"[search results] page {i % 7} item {i} shoes size {i % 13} {tag}",
        action=f"click[item {i}]", next_state=f"[item page] item {i}", source="sim",
    )  # fmt: skip


def bulk_rows(n: int, tag: str, seed: int) -> tuple[list[Transition], list[bytes], np.ndarray]:
    transitions = [transition(i, tag) for i in range(n)]
    keys = [hashlib.blake2b(f"{tag}:{i}".encode(), digest_size=16).digest() for i in range(n)]
    vectors = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return transitions, keys, vectors


def fill(buffer: ReplayBuffer, rows: tuple[list[Transition], list[bytes], np.ndarray], batch: int) -> float:
    transitions, keys, vectors = rows
    start = time.perf_counter()
    for i in range(0, len(transitions), batch):
        buffer.store.insert(transitions[i : i + batch], keys[i : i + batch], vectors[i : i + batch])
    return len(transitions) / (time.perf_counter() - start)


def one_run(location: str, args: argparse.Namespace, bulk, extra, seed: int) -> dict[str, float]:
    config = BufferConfig(
        path=location, index=IndexConfig(kind="ivf", nlist=256, min_train=1000, persist=False)
    )
    out: dict[str, float] = {}
    with ReplayBuffer(config) as writer:
        out["bulk insert (rows/s)"] = fill(writer, bulk, 1000)
    start = time.perf_counter()
    with ReplayBuffer(config) as a, ReplayBuffer(config) as b:
        out["open at full size (s)"] = (time.perf_counter() - start) / 2
        rng = np.random.default_rng(seed)
        queries = [transition(int(i)) for i in rng.integers(0, args.rows, 200)]
        times = []
        for q in queries:
            t0 = time.perf_counter()
            a.retrieve(q.state, q.action, 4)
            times.append(time.perf_counter() - t0)
        out["retrieve k=4 (ms, median)"] = 1000 * statistics.median(times)
        times = []
        for i in range(300):
            t = transition(args.rows + i, f"add{seed}")
            t0 = time.perf_counter()
            a.add(t)
            times.append(time.perf_counter() - t0)
        out["add one (ms, median)"] = 1000 * statistics.median(times)
        b.retrieve(queries[0].state, queries[0].action, 4)  # b is in sync
        t0 = time.perf_counter()
        b.retrieve(queries[1].state, queries[1].action, 4)
        idle = time.perf_counter() - t0
        fill(a, extra, 1000)
        t0 = time.perf_counter()
        b.retrieve(queries[2].state, queries[2].action, 4)
        out[f"catch-up after {args.catch_up // 1000}k rows (ms)"] = 1000 * (time.perf_counter() - t0 - idle)
        assert len(b.index) == len(b), "the second handle did not catch up"
    return out


def writers(location: str, args: argparse.Namespace, script: Path) -> list[float]:
    ReplayBuffer.open(location, index={"kind": "exact"}).close()
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), location, f"w{i}", str(args.writer_rows), "8"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for i in range(args.writers)
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        rates = []
        for r in range(args.runs):
            t0 = time.perf_counter()
            for p in procs:
                assert p.stdin is not None
                p.stdin.write(f"r{r}\n")
                p.stdin.flush()
            for p in procs:
                assert p.stdout is not None and p.stdout.readline().strip() == "done"
            rates.append(args.writers * args.writer_rows / (time.perf_counter() - t0))
        return rates
    finally:
        for p in procs:
            assert p.stdin is not None
            p.stdin.close()
            p.wait(timeout=60)


def summary(values: list[float]) -> str:
    """``median (min-max)``: rates in whole thousands-separated numbers, small figures with 2 decimals."""
    return format_range(values, "{:,.0f}" if max(values) >= 100 else "{:.2f}")


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--catch-up", type=int, default=10_000)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--writer-rows", type=int, default=800, help="rows each writer adds per run")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    bulk = bulk_rows(args.rows, "bulk", 0)
    extra = bulk_rows(args.catch_up, "extra", 1)
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp, TemporaryPostgres() as pg:
        script = Path(tmp) / "writer.py"
        script.write_text(WRITER)
        for store in ("sqlite", "postgresql"):
            table = results.setdefault(store, {})
            for run in range(args.runs):
                location = (
                    str(Path(tmp) / f"run{run}.sqlite")
                    if store == "sqlite"
                    else pg.create_database(f"run{run}")
                )
                for name, value in one_run(location, args, bulk, extra, run).items():
                    table.setdefault(name, []).append(value)
                print(f"{store} run {run + 1}/{args.runs} done", file=sys.stderr, flush=True)
            location = (
                str(Path(tmp) / "writers.sqlite") if store == "sqlite" else pg.create_database("writers")
            )
            table[f"{args.writers} writer processes (rows/s, all)"] = writers(location, args, script)

    names = list(results["sqlite"])
    print(f"\nrows={args.rows:,}, runs={args.runs}: median (min-max)\n")
    print("| measure | SQLite (WAL file) | PostgreSQL 127.0.0.1 |")
    print("|---|---|---|")
    for name in names:
        print(f"| {name} | {summary(results['sqlite'][name])} | {summary(results['postgresql'][name])} |")


if __name__ == "__main__":
    main()
