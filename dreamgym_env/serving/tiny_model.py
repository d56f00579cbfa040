"""A tiny experience model built offline, for smoke tests, CPU development and the README demo.

No weights can be downloaded where the tests run, so the package builds its own model: a byte-level BPE
tokenizer trained on the spot, a two-layer Llama-architecture network (about 0.15M parameters), and a
fixed number of seeded optimizer steps (under a minute on two CPU cores) on a synthetic corpus shaped
like the env's real traffic: chat prompts of a few hundred to a few thousand characters whose answers are
:class:`~dreamgym_env.experience.schema.ExperienceOutput` JSON objects with short strings. The model
knows nothing about any world; what it learns is the *form*, so that under vLLM's structured decoding it
closes its strings and ends its answer well before ``max_tokens``: end-to-end tests get real, valid
answers in a fraction of a second.

The output directory is a plain ``save_pretrained`` folder that vLLM (GPU or CPU build) and
transformers load. Building is idempotent: a marker file records the builder version and parameters,
and a directory that already holds a matching, complete model is returned at once.

Building is deterministic: the corpus, the tokenizer, the initial weights and the batch order come from
``seed``, training runs exactly ``train_steps`` steps with torch's deterministic algorithms on a fixed
number of threads, so two builds of one spec on the same kind of CPU save byte-identical weights. The
marker records their sha256 (``weights_sha256``) and the final loss, so two machines can compare.
(Across CPU instruction sets, e.g. AVX2 and AVX-512, the math libraries may pick kernels that round
differently, and the weights may differ in their last bits.)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dreamgym_env.errors import ConfigError, DependencyNotInstalled
from dreamgym_env.training.hf_model import (
    causal_lm,
    check_head_size,
    render_chat,
    save_for_vllm,
    train_bpe_tokenizer,
)

#: Bump when the corpus, tokenizer, architecture or training loop changes: cached models are rebuilt.
BUILDER_VERSION = "2"

#: Written last, after every model file, so its presence means the build finished.
MARKER_FILE = "dreamgym_smoke_model.json"

#: Files a complete model directory must hold besides the marker.
_REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")

_ARCHITECTURES = ("llama", "qwen2")

#: Optimizer steps of the default build: a build takes about 30 s on two idle CPU cores, about a
#: minute on busy ones; enough for answers that close their strings and stop well before ``max_tokens``.
DEFAULT_TRAIN_STEPS = 300

#: Threads torch uses during a build. Fixed, because the thread count can change the order of float
#: reductions, and with it the weights. One: the network is so small that more threads gain little,
#: and on a busy machine they lose much (they wait for each other at every operation).
_BUILD_THREADS = 1


@dataclass(frozen=True)
class SmokeModelSpec:
    """Everything that determines a built model; its hash names the build in the marker file.

    Attributes:
        arch: ``"llama"`` or ``"qwen2"``: both load in vLLM's CPU and GPU builds.
        train_steps: Optimizer steps (batches of 8); 0 leaves the weights random (loads, but rambles).
        seed: Seeds the corpus, the tokenizer's training text, the initial weights and the batch order.
        vocab_size: BPE vocabulary size, special tokens included.
        hidden_size: Model width. ``hidden_size / num_attention_heads`` must be a head size vLLM's CPU
            attention supports (32, 64, 80, ...); 64 with 2 heads gives 32.
        num_hidden_layers: Transformer blocks.
        num_attention_heads: Query heads.
        num_key_value_heads: Key/value heads (grouped-query attention, as in Qwen2.5).
        max_position_embeddings: Context length the config declares. The env's prompts are 1-3k
            tokens, so this must exceed the server's ``--max-model-len``.
        max_train_tokens: Training sequences are cut to this many tokens (from the left, keeping
            the answer) to bound the cost of a step on a CPU.
    """

    arch: str = "llama"
    train_steps: int = DEFAULT_TRAIN_STEPS
    seed: int = 0
    vocab_size: int = 1024
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    num_key_value_heads: int = 1
    max_position_embeddings: int = 4096
    max_train_tokens: int = 384

    def __post_init__(self) -> None:
        if self.arch not in _ARCHITECTURES:
            raise ConfigError(f"arch={self.arch!r} is not supported; use one of {list(_ARCHITECTURES)}.")
        if isinstance(self.train_steps, bool) or int(self.train_steps) != self.train_steps:
            raise ConfigError(f"train_steps must be a whole number, got {self.train_steps!r}.")
        object.__setattr__(self, "train_steps", int(self.train_steps))  # 300 and 300.0: one digest
        if self.train_steps < 0:
            raise ConfigError(f"train_steps must be >= 0, got {self.train_steps}.")
        check_head_size(self.hidden_size, self.num_attention_heads)

    def digest(self) -> str:
        """Stable short hash of the builder version and these parameters."""
        payload = json.dumps({"builder_version": BUILDER_VERSION, **asdict(self)}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


def default_smoke_model_dir() -> Path:
    """Where the smoke model is cached: ``$DREAMGYM_CACHE_DIR`` or ``~/.cache/dreamgym_env``.

    The folder name carries :data:`BUILDER_VERSION`, so a new builder never reuses an old model.
    """
    root = os.environ.get("DREAMGYM_CACHE_DIR")
    base = Path(root).expanduser() if root else Path.home() / ".cache" / "dreamgym_env"
    return base / f"smoke-model-{BUILDER_VERSION}"


def is_complete(out_dir: str | os.PathLike[str], spec: SmokeModelSpec) -> bool:
    """Return whether ``out_dir`` holds a finished build of exactly ``spec``.

    Cheap and import-free (no torch), so it can run before deciding to build.
    """
    out = Path(out_dir)
    try:
        marker = json.loads((out / MARKER_FILE).read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(marker, dict) or marker.get("digest") != spec.digest():
        return False
    return all((out / name).is_file() for name in _REQUIRED_FILES)


def build_tiny_model(
    out_dir: str | os.PathLike[str],
    *,
    train_steps: int = DEFAULT_TRAIN_STEPS,
    arch: str = "llama",
    seed: int = 0,
) -> Path:
    """Build (or reuse) the smoke model in ``out_dir`` and return the directory.

    Args:
        out_dir: Target folder. If it already holds a complete build with the same parameters and
            builder version, nothing is done. Otherwise the model is built in a sibling temporary
            folder and moved into place, so an interrupted build never leaves a half-written model
            that looks complete.
        train_steps: Optimizer steps (the default gives answers that close their strings and stop;
            0 gives random weights).
        arch: ``"llama"`` or ``"qwen2"``.
        seed: Seeds the corpus, weights and batch order. Two builds with the same parameters save
            the same weights (see the module docstring); the marker's ``weights_sha256`` says so.

    Returns:
        ``out_dir`` as a :class:`~pathlib.Path`, ready for ``vllm ... --model out_dir``.

    Raises:
        DependencyNotInstalled: torch, transformers or tokenizers is missing (extra ``cpu``).
        ConfigError: An unsupported ``arch`` or a negative ``train_steps``.
    """
    spec = SmokeModelSpec(arch=arch, train_steps=train_steps, seed=seed)
    out = Path(out_dir).expanduser()
    if is_complete(out, spec):
        return out

    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    try:
        stats = _build(staging, spec)
        marker = {"digest": spec.digest(), "builder_version": BUILDER_VERSION, "spec": asdict(spec), **stats}
        (staging / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n")
        if out.exists():
            if is_complete(out, spec):  # another process finished the same build meanwhile
                return out
            shutil.rmtree(out)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


# --------------------------------------------------------------------------------------------------
# Synthetic corpus: prompts and answers shaped like the env's requests to the experience model.
# --------------------------------------------------------------------------------------------------

_PRODUCTS = [
    "running shoes",
    "wool socks",
    "hair dryer",
    "usb microphone",
    "coffee beans",
    "phone case",
    "yoga mat",
    "desk lamp",
    "green tea",
    "backpack",
    "face cream",
    "wireless mouse",
]
_ATTRS = ["red", "black", "large", "small", "organic", "gluten free", "waterproof", "cotton", "pack of 2"]
_ROOM_OBJECTS = ["apple", "mug", "knife", "book", "spraybottle", "soapbar", "pen", "cellphone", "towel"]
_RECEPTACLES = [
    "countertop 1",
    "cabinet 2",
    "drawer 1",
    "fridge 1",
    "sinkbasin 1",
    "shelf 3",
    "desk 1",
    "microwave 1",
    "toilet 1",
    "sidetable 2",
]
_SITES = ["shopping admin", "forum", "gitlab", "map", "shop"]
_VERBS = ["shows", "lists", "now holds", "displays", "opens to", "returns"]


def _webshop_turn(rng: random.Random) -> tuple[str, str, str, list[str], bool, bool]:
    product, attr = rng.choice(_PRODUCTS), rng.choice(_ATTRS)
    price = rng.choice([20, 30, 40, 50, 100])
    task = f"i need {attr} {product}, and price lower than {price}.00 dollars"
    asins = [f"B0{rng.randrange(10**7, 10**8)}" for _ in range(3)]
    action = rng.choice(
        [
            f"search[{attr} {product}]",
            f"click[{asins[0].lower()}]",
            "click[buy now]",
            f"click[{attr}]",
            "click[next >]",
            "click[back to search]",
        ]
    )
    done = action == "click[buy now]"
    state = (
        f"[search results] page 1 | {asins[0]} {attr} {product} ${rng.randrange(5, price)}.99 | "
        f"{asins[1]} {product} ${rng.randrange(5, 90)}.50"
    )
    actions = (
        []
        if done
        else rng.sample(
            [f"click[{a.lower()}]" for a in asins] + ["click[next >]", "click[back to search]"], 3
        )
    )
    return task, action, state, actions, done, done and rng.random() < 0.6


def _alfworld_turn(rng: random.Random) -> tuple[str, str, str, list[str], bool, bool]:
    obj, place, other = rng.choice(_ROOM_OBJECTS), rng.choice(_RECEPTACLES), rng.choice(_RECEPTACLES)
    task = f"put some {obj} on {other}."
    action = rng.choice(
        [
            f"go to {place}",
            f"take {obj} 1 from {place}",
            f"put {obj} 1 in/on {other}",
            f"open {place}",
            "look",
            "inventory",
        ]
    )
    done = action.startswith("put") and rng.random() < 0.5
    seen = ", ".join(f"a {o} {rng.randint(1, 3)}" for o in rng.sample(_ROOM_OBJECTS, 2))
    state = f"You arrive at {place}. On the {place}, you see {seen}."
    if action.startswith("take"):
        state = f"You pick up the {obj} 1 from the {place}."
    choices = [f"go to {r}" for r in _RECEPTACLES] + [f"take {obj} 1 from {place}"]
    actions = [] if done else rng.sample(choices, 4)
    return task, action, state, actions, done, done


def _webarena_turn(rng: random.Random) -> tuple[str, str, str, list[str], bool, bool]:
    site = rng.choice(_SITES)
    thing = f"{rng.choice(['latest', 'top', 'first'])} {rng.choice(['order', 'post', 'issue'])}"
    task = f"on the {site}, find the {thing}"
    element = rng.randint(10, 400)
    action = rng.choice(
        [
            f"click [{element}]",
            f"type [{element}] [{rng.choice(_PRODUCTS)}]",
            "scroll [down]",
            "go_back",
            f"stop [{rng.randint(1, 90)}]",
        ]
    )
    done = action.startswith("stop")
    state = f"Tab 0 (current): {site.title()} | [{element}] link 'Orders' | [{element + 7}] button 'Search'"
    return task, action, state, [], done, done and rng.random() < 0.5


_DOMAINS = {
    "webshop": (_webshop_turn, "an online shop: pages list products, options and prices."),
    "alfworld": (_alfworld_turn, "a household: rooms hold receptacles and objects an agent can move."),
    "webarena": (_webarena_turn, "a set of websites shown as accessibility trees with element ids."),
}


def _example(rng: random.Random) -> tuple[list[dict[str, str]], str]:
    """One (messages, answer) pair: system text, task, history, demonstrations, current action."""
    name = rng.choice(sorted(_DOMAINS))
    turn, world = _DOMAINS[name]
    system = (
        f"You are the experience model of {name}, {world} Given the task, the interaction history, similar "
        "real transitions and the current state and action, reason briefly about the action's effect, "
        "then answer with one JSON object: reasoning, next_state, admissible_actions, done, success."
    )
    task, action, state, actions, done, success = turn(rng)
    history = [turn(rng) for _ in range(rng.choice([0, 1, 2, 4, 8, 16]))]
    demos = [turn(rng) for _ in range(rng.choice([0, 2, 3]))]
    lines = [f"Task: {task}", "", "History:"]
    lines += [f"{i}. state: {h[2]}\n   action: {h[1]}" for i, h in enumerate(history, 1)] or ["(none)"]
    if demos:
        lines += ["", "Similar transitions:"]
        lines += [f"- state: {d[2]}\n  action: {d[1]}\n  next: {d[2]}" for d in demos]
    lines += ["", f"Current state: {history[-1][2] if history else state}", f"Action: {action}"]
    verb = rng.choice(_VERBS)
    reasoning = rng.choice(
        [
            f"The action {action} is valid here; the page {verb} the result.",
            f"{action} changes the state; the task is {'complete' if success else 'not complete yet'}.",
            "The action does not apply in this state, so nothing changes.",
        ]
    )
    # Compact separators: what pydantic emits and what vLLM's grammar allows with whitespace disabled.
    answer = json.dumps(
        {
            "reasoning": reasoning,
            "next_state": state,
            "admissible_actions": actions,
            "done": done,
            "success": success,
        },
        separators=(",", ":"),
    )
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(lines)}]
    return messages, answer


# --------------------------------------------------------------------------------------------------
# Build: tokenizer, model, training, save.
# --------------------------------------------------------------------------------------------------


def _import_training_stack() -> tuple[Any, Any, Any]:
    try:
        import tokenizers
        import torch
        import transformers
    except ImportError as e:
        raise DependencyNotInstalled(e.name or "torch", "cpu", "Building the smoke model") from e
    return torch, transformers, tokenizers


def _build(out: Path, spec: SmokeModelSpec) -> dict[str, Any]:
    torch, transformers, tokenizers = _import_training_stack()
    started = time.monotonic()
    with _deterministic_torch(torch, spec.seed):
        rng = random.Random(spec.seed)
        examples = [_example(rng) for _ in range(3000)]
        texts = [render_chat(msgs) for msgs, _ in examples] + [answer for _, answer in examples]

        tok = train_bpe_tokenizer(
            transformers,
            tokenizers,
            texts,
            vocab_size=spec.vocab_size,
            model_max_length=spec.max_position_embeddings,
        )
        model = causal_lm(
            transformers,
            tok,
            arch=spec.arch,
            hidden_size=spec.hidden_size,
            intermediate_size=2 * spec.hidden_size,
            num_hidden_layers=spec.num_hidden_layers,
            num_attention_heads=spec.num_attention_heads,
            num_key_value_heads=spec.num_key_value_heads,
            max_position_embeddings=spec.max_position_embeddings,
        )

        sequences = [_encode(tok, msgs, answer, spec.max_train_tokens) for msgs, answer in examples]
        loss = _train(torch, model, sequences, tok.pad_token_id, spec.train_steps, rng)

    save_for_vllm(model, tok, out)
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_steps": spec.train_steps,
        "seed": spec.seed,
        "final_loss": loss,
        "weights_sha256": weights_checksum(out),
        "build_threads": _BUILD_THREADS,
        "torch_version": str(torch.__version__),
        "build_seconds": round(time.monotonic() - started, 1),
    }


def weights_checksum(model_dir: str | os.PathLike[str]) -> str:
    """The sha256 of ``model_dir``'s ``model.safetensors``: equal for two builds of one spec."""
    digest = hashlib.sha256()
    with open(Path(model_dir) / "model.safetensors", "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def _deterministic_torch(torch: Any, seed: int) -> Iterator[None]:
    """Seed torch, use its deterministic algorithms and :data:`_BUILD_THREADS` threads; restore after.

    The global RNG state is restored too, so building a model does not reseed the caller's torch.
    """
    threads = torch.get_num_threads()
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        torch.set_num_threads(_BUILD_THREADS)
        torch.use_deterministic_algorithms(True)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(was_deterministic, warn_only=warn_only)
            torch.set_num_threads(threads)


def _encode(tok: Any, messages: list[dict[str, str]], answer: str, limit: int) -> tuple[list[int], int]:
    """Token ids of prompt + answer + eos, and where the answer starts (the loss covers only the answer)."""
    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    prompt_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    answer_ids = tok(answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    keep = max(limit - len(answer_ids), 8)
    return prompt_ids[-keep:] + answer_ids, min(len(prompt_ids), keep)


def _train(
    torch: Any,
    model: Any,
    sequences: list[tuple[list[int], int]],
    pad_id: int,
    steps: int,
    rng: random.Random,
    batch_size: int = 8,
) -> float | None:
    """Run exactly ``steps`` AdamW steps on batches drawn by ``rng``; return the last batch's loss."""
    if steps <= 0:
        return None
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    loss_value = None
    try:
        for _ in range(steps):
            batch = rng.sample(sequences, batch_size)
            width = max(len(ids) for ids, _ in batch)
            input_ids = torch.full((batch_size, width), pad_id)
            attention = torch.zeros_like(input_ids)
            labels = torch.full_like(input_ids, -100)
            for row, (ids, answer_start) in enumerate(batch):
                input_ids[row, : len(ids)] = torch.tensor(ids)
                attention[row, : len(ids)] = 1
                labels[row, answer_start : len(ids)] = input_ids[row, answer_start : len(ids)]
            loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            loss_value = float(loss.item())
    finally:
        model.eval()
    return loss_value
