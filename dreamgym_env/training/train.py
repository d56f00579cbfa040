"""Fine-tune (or train from scratch) an experience model on SFT data with TRL's ``SFTTrainer``.

Three ways, one entry point (``dreamgym train``):

* **LoRA on a pretrained model** (a GPU; the production path): ``--base-model DIR --lora``. The output
  folder is a PEFT adapter, or a merged model with ``--merge-lora``. ``dreamgym serve --model OUT``
  serves either (an adapter merged into its base first); vLLM on a GPU also serves an adapter as it is
  (``--enable-lora --lora-modules NAME=OUT``).
* **Full fine-tuning** of a (small) pretrained model: ``--base-model DIR``.
* **From scratch** (CPU, minutes): ``--from-scratch`` trains a byte-level BPE tokenizer on the data and
  a small Llama-architecture model. Each domain's system prompt (instructions ~3k characters, identical
  in every request) becomes *one* added token of the tokenizer, so it costs one position instead of
  ~700 and the model's short context goes to the task, history and demonstrations.

The loss covers only the completion (the JSON answer): the prompt is given, not predicted. Examples
longer than ``max_length`` tokens are dropped, not cut (a cut prompt is not the env's request). The
output folder is a ``save_pretrained`` model (or adapter) plus ``dreamgym_training.json``, which records
the prompt settings the env must reuse (``history_window``, ``top_k``).
"""

from __future__ import annotations

import json
import os
import shlex
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dreamgym_env.errors import ConfigError, DataFormatError, DependencyNotInstalled
from dreamgym_env.training.answer_loss import answer_token_loss
from dreamgym_env.training.hf_model import (
    causal_lm,
    check_head_size,
    render_chat,
    save_for_vllm,
    train_bpe_tokenizer,
)
from dreamgym_env.training.sft_data import load_manifest

TRAINING_MANIFEST = "dreamgym_training.json"


@dataclass(frozen=True)
class ScratchModelSpec:
    """Architecture of a model trained from scratch.

    Besides ``vocab_size`` (the tokenizer's), the fields are the size arguments of
    :func:`~dreamgym_env.training.hf_model.causal_lm`, passed by name. ``hidden_size /
    num_attention_heads`` must be a head size vLLM's CPU attention supports (32, 64, 80, 96, 112,
    128...): 256 / 8 = 32.
    """

    vocab_size: int = 2048
    hidden_size: int = 256
    intermediate_size: int = 688
    num_hidden_layers: int = 4
    num_attention_heads: int = 8
    num_key_value_heads: int = 4
    max_position_embeddings: int = 2048

    def __post_init__(self) -> None:
        check_head_size(self.hidden_size, self.num_attention_heads)


@dataclass(frozen=True)
class TrainConfig:
    """One training run.

    Attributes:
        data_dir: Folder written by ``dreamgym build-sft`` (``train.jsonl``, ``eval.jsonl``, manifest).
        output_dir: Where the model (or adapter) is saved.
        base_model: A local pretrained model folder; ``None`` with ``from_scratch``.
        from_scratch: Train a tokenizer and a :class:`ScratchModelSpec` model on the data.
        scratch: The from-scratch architecture.
        lora: Train a LoRA adapter instead of all weights (needs ``peft``).
        lora_r: LoRA rank.
        lora_alpha: LoRA scaling.
        merge_lora: Save the base model with the adapter merged in (served like any model).
        epochs: Passes over the training data (an upper bound when ``max_seconds`` is set).
        max_steps: Optimizer steps; ``-1`` uses ``epochs``.
        max_seconds: Wall-clock budget for this sitting; training stops at the first step past it (and
            saves a checkpoint when ``save_steps`` is set, so a later sitting resumes there). With a
            budget and no ``max_steps`` the learning rate is constant after 10 warm-up steps (the last
            step is not known in advance); with ``max_steps`` the cosine schedule spans every sitting.
        stop_at_step: End this sitting after this optimizer step (saving a checkpoint when
            ``save_steps`` is set) while the schedule still spans ``max_steps``: a run cut short at a
            step count, which, unlike a time budget, any machine repeats exactly.
        learning_rate: Peak learning rate (cosine decay after 3% warm-up without a time budget).
        batch_size: Examples per device step.
        grad_accum: Steps accumulated per optimizer update.
        max_length: Token limit per example; longer ones are dropped.
        seed: Seeds initialisation and data order.
        evaluate: Report the loss on ``eval.jsonl`` after training.
        use_cpu: Train on the CPU even when a GPU is present.
        group_by_length: Batch examples of similar length together (seeded), so little compute goes
            to padding; the order is still random at the level of batches.
        threads: CPU threads for torch during training; a fixed count (with a fixed seed and
            ``max_steps``) makes a CPU run repeat bit for bit on the same torch build. ``None`` keeps
            torch's default.
        save_steps: Save a checkpoint (weights, optimizer, scheduler, RNG and data position) every
            this many optimizer steps under ``<output_dir>/_trainer``; ``None`` saves none.
        resume: Continue from the newest checkpoint under ``<output_dir>/_trainer`` when there is one
            (a from-scratch run also reuses the tokenizer it saved there), so several sittings add up
            to one run; the training record sums their steps, tokens and wall time.
    """

    data_dir: str
    output_dir: str
    base_model: str | None = None
    from_scratch: bool = False
    scratch: ScratchModelSpec = ScratchModelSpec()
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    merge_lora: bool = False
    epochs: float = 3.0
    max_steps: int = -1
    max_seconds: float | None = None
    stop_at_step: int | None = None
    learning_rate: float | None = None
    batch_size: int = 8
    grad_accum: int = 1
    max_length: int = 1024
    seed: int = 0
    evaluate: bool = True
    use_cpu: bool = False
    group_by_length: bool = False
    threads: int | None = None
    save_steps: int | None = None
    resume: bool = False

    def __post_init__(self) -> None:
        if self.save_steps is not None and self.save_steps < 1:
            raise ConfigError(
                f"save_steps must be >= 1 (or None to save no checkpoint), got {self.save_steps}."
            )
        if self.from_scratch == (self.base_model is not None):
            raise ConfigError("Give exactly one of base_model (a local model folder) and from_scratch=True.")
        if self.lora and self.from_scratch:
            raise ConfigError("LoRA adapts a pretrained model; a from-scratch model trains all its weights.")
        if self.merge_lora and not self.lora:
            raise ConfigError("merge_lora needs lora=True.")

    @property
    def lr(self) -> float:
        """The learning rate: the given one, or a default suited to the kind of run."""
        if self.learning_rate is not None:
            return self.learning_rate
        return 2e-3 if self.from_scratch else 2e-4 if self.lora else 2e-5


@dataclass
class TrainResult:
    """What a run produced."""

    output_dir: str
    parameters: int
    train_examples: int
    dropped_long: int
    steps: int
    train_loss: float | None
    eval_loss: float | None
    seconds: float
    serve_hint: str


def _import_stack() -> tuple[Any, Any, Any, Any]:
    try:
        import datasets
        import torch
        import transformers
        import trl
    except ImportError as e:
        raise DependencyNotInstalled(e.name or "trl", "train", "Training the experience model") from e
    return torch, transformers, trl, datasets


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    try:
        with path.open(encoding="utf-8") as f:
            for line_no, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    rows.append({"prompt": row["prompt"], "completion": row["completion"]})
                except (ValueError, KeyError) as e:
                    raise DataFormatError(f"not an SFT example ({e})", path=str(path), line=line_no) from e
    except FileNotFoundError:
        return []
    return rows


def build_scratch_tokenizer(rows: list[dict[str, Any]], spec: ScratchModelSpec) -> Any:
    """A byte-level BPE trained on the examples, with each distinct system prompt as one added token."""
    _, transformers, _, _ = _import_stack()
    import tokenizers

    return train_bpe_tokenizer(
        transformers,
        tokenizers,
        [render_chat(r["prompt"] + r["completion"]) for r in rows],
        vocab_size=spec.vocab_size,
        model_max_length=spec.max_position_embeddings,
        added_tokens=sorted({m["content"] for r in rows for m in r["prompt"] if m["role"] == "system"}),
    )


def _scratch_model(tok: Any, spec: ScratchModelSpec, seed: int) -> Any:
    torch, transformers, _, _ = _import_stack()
    torch.manual_seed(seed)
    sizes = {name: value for name, value in asdict(spec).items() if name != "vocab_size"}
    return causal_lm(transformers, tok, **sizes)  # the vocabulary is the tokenizer's


def _fits(tok: Any, rows: list[dict[str, Any]], max_length: int) -> list[dict[str, Any]]:
    kept = []
    for row in rows:
        text = tok.apply_chat_template(row["prompt"] + row["completion"], tokenize=False)
        if len(tok(text, add_special_tokens=False)["input_ids"]) + 1 <= max_length:
            kept.append(row)
    return kept


def save_untrained(config: TrainConfig) -> str:
    """Save the from-scratch tokenizer and randomly initialised model without training (a baseline).

    Returns:
        The output folder, loadable by vLLM like a trained one.
    """
    rows = _read_jsonl(Path(config.data_dir) / "train.jsonl")
    if not rows:
        raise DataFormatError("no training examples", path=str(Path(config.data_dir) / "train.jsonl"))
    tok = build_scratch_tokenizer(rows, config.scratch)
    model = _scratch_model(tok, config.scratch, config.seed)
    save_for_vllm(model, tok, Path(config.output_dir))
    return config.output_dir


def train_experience_model(config: TrainConfig) -> TrainResult:
    """Run one SFT training and save a folder vLLM can serve.

    Raises:
        DataFormatError: the data folder holds no usable training examples.
        DependencyNotInstalled: TRL, datasets, transformers or torch (or peft for LoRA) is missing.
    """
    torch, transformers, trl, datasets = _import_stack()
    if config.threads is None:
        return _train(config, torch, transformers, trl, datasets)
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads)
    try:
        return _train(config, torch, transformers, trl, datasets)
    finally:
        torch.set_num_threads(threads)


def _train(config: TrainConfig, torch: Any, transformers: Any, trl: Any, datasets: Any) -> TrainResult:
    started = time.monotonic()
    data = Path(config.data_dir)
    manifest = load_manifest(data)
    train_rows = _read_jsonl(data / "train.jsonl")
    eval_rows = _read_jsonl(data / "eval.jsonl")
    if not train_rows:
        raise DataFormatError("no training examples; build them with `dreamgym build-sft`", path=str(data))

    out = Path(config.output_dir)
    trainer_dir = out / "_trainer"
    checkpoint = _latest_checkpoint(trainer_dir) if config.resume else None
    if config.from_scratch:
        saved_tok = trainer_dir / "tokenizer"
        if checkpoint is not None and saved_tok.is_dir():
            tok = transformers.PreTrainedTokenizerFast.from_pretrained(str(saved_tok))
        else:
            tok = build_scratch_tokenizer(train_rows, config.scratch)
            tok.save_pretrained(str(saved_tok))
        model = _scratch_model(tok, config.scratch, config.seed)
    else:
        assert config.base_model is not None
        base = resolve_base_model(config.base_model)
        tok = transformers.AutoTokenizer.from_pretrained(base)
        model = transformers.AutoModelForCausalLM.from_pretrained(base, torch_dtype="auto")
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
    kept = _fits(tok, train_rows, config.max_length)
    dropped = len(train_rows) - len(kept)
    if not kept:
        raise DataFormatError(
            f"every training example is longer than max_length={config.max_length} tokens; raise max_length "
            "or rebuild the data with a smaller history_window/top_k",
            path=str(data / "train.jsonl"),
        )
    eval_kept = _fits(tok, eval_rows, config.max_length) if config.evaluate else []

    peft_config = None
    if config.lora:
        try:
            import peft
        except ImportError as e:
            raise DependencyNotInstalled("peft", "train", "LoRA training") from e
        peft_config = peft.LoraConfig(
            r=config.lora_r, lora_alpha=config.lora_alpha, target_modules="all-linear", task_type="CAUSAL_LM"
        )

    open_ended = bool(config.max_seconds) and config.max_steps < 0
    args = trl.SFTConfig(
        output_dir=str(trainer_dir),
        num_train_epochs=config.epochs,
        max_steps=config.max_steps,
        learning_rate=config.lr,
        # A wall-clock budget ends training at an unknown step, where a cosine schedule planned over
        # ``epochs`` would still be warming up: hold the rate constant after a short warm-up instead.
        lr_scheduler_type="constant_with_warmup" if open_ended else "cosine",
        warmup_steps=10 if open_ended else 0.03,
        per_device_train_batch_size=config.batch_size,
        per_device_eval_batch_size=config.batch_size,
        gradient_accumulation_steps=config.grad_accum,
        max_length=config.max_length,
        completion_only_loss=True,
        logging_steps=10,
        save_strategy="steps" if config.save_steps else "no",
        save_steps=config.save_steps or 500,
        save_total_limit=1,
        include_num_input_tokens_seen=True,
        report_to=[],
        seed=config.seed,
        use_cpu=config.use_cpu,
        bf16=False,
        fp16=False,
        dataloader_num_workers=0,
        train_sampling_strategy="group_by_length" if config.group_by_length else "random",
        disable_tqdm=os.environ.get("DREAMGYM_NO_PROGRESS") == "1",
    )
    sitting = _sitting_log(transformers, trainer_dir, checkpoint)
    trainer = _answer_loss_trainer(trl)(
        model=model,
        args=args,
        train_dataset=datasets.Dataset.from_list(kept),
        eval_dataset=datasets.Dataset.from_list(eval_kept) if eval_kept else None,
        processing_class=tok,
        peft_config=peft_config,
        callbacks=[
            sitting,
            *(
                [
                    _deadline_callback(
                        transformers, config.max_seconds, config.stop_at_step, save=bool(config.save_steps)
                    )
                ]
                if config.max_seconds or config.stop_at_step
                else []
            ),
        ],
    )
    output = trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    sittings = sitting.record(trainer.state)
    eval_loss = None
    if eval_kept:
        eval_loss = float(trainer.evaluate()["eval_loss"])

    final = trainer.model
    if config.lora and config.merge_lora:
        final = final.merge_and_unload()
    save_for_vllm(final, tok, out)
    served_as_adapter = config.lora and not config.merge_lora
    # Full weights or an adapter (merged into its base once), with the CPU server's settings and the
    # env keywords of the training record written below (dreamgym_env.serving.trained).
    hint = f"dreamgym serve --model {shlex.quote(str(out))}"
    result = TrainResult(
        output_dir=str(out),
        parameters=sum(p.numel() for p in final.parameters()),
        train_examples=len(kept),
        dropped_long=dropped,
        steps=int(output.global_step),
        train_loss=float(output.training_loss) if output.training_loss is not None else None,
        eval_loss=eval_loss,
        seconds=round(time.monotonic() - started, 1),
        serve_hint=hint,
    )
    settings = manifest.settings
    record = {
        "result": asdict(result),
        "config": {**asdict(config), "learning_rate": config.lr},
        "env_settings": {
            **{
                k: settings.get(k)
                for k in ("domain", "history_window", "top_k", "max_admissible_actions", "prompt_style")
            },
            "answer_format": settings.get("answer_format", "json"),  # data built before it: JSON
            "setting": settings.get("setting", "privileged"),  # data built before it: privileged
        },
        "eval_tasks": manifest.eval_tasks,
        "lora_adapter": served_as_adapter,
        "sittings": sittings,
        "total": {
            "steps": int(trainer.state.global_step),
            "tokens": int(getattr(trainer.state, "num_input_tokens_seen", 0) or 0),
            "seconds": round(sum(s["seconds"] for s in sittings), 1),
        },
    }
    (out / TRAINING_MANIFEST).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return result


def _answer_loss_trainer(trl: Any) -> Any:
    """``SFTTrainer`` whose loss projects only the answer's positions (:mod:`.answer_loss`)."""

    class AnswerLossSFTTrainer(trl.SFTTrainer):  # type: ignore[misc, name-defined]
        def compute_loss(
            self,
            model: Any,
            inputs: dict[str, Any],
            return_outputs: bool = False,
            num_items_in_batch: Any = None,
        ) -> Any:
            loss, count, correct = answer_token_loss(model, inputs, num_items_in_batch)
            metrics = getattr(self, "_metrics", None)
            if metrics is not None and int(count):
                mode = "train" if model.training else "eval"
                metrics[mode]["mean_token_accuracy"].append(float(correct) / float(count))
            return (loss, None) if return_outputs else loss

    return AnswerLossSFTTrainer


def resolve_base_model(base_model: str) -> str:
    """A model folder for ``base_model``: the folder itself, or a named PyPI-built base (built on first use).

    Names are those of :data:`dreamgym_env.training.bases.BASES` (``smollm2-135m-instruct``...); an
    existing folder of the same name wins.
    """
    from dreamgym_env.training.bases import BASES, build_base

    if base_model in BASES and not Path(base_model).is_dir():
        return str(build_base(base_model))
    return base_model


def _latest_checkpoint(trainer_dir: Path) -> Path | None:
    """The newest ``checkpoint-N`` folder a previous sitting saved, or ``None``."""
    found = [p for p in trainer_dir.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
    return max(found, key=lambda p: int(p.name.split("-")[-1]), default=None)


def _sitting_log(transformers: Any, trainer_dir: Path, resumed_from: Path | None) -> Any:
    """Keeps this sitting's line of ``sittings.json`` (beside the checkpoints) up to date.

    The line is written at every checkpoint as well as at the end, so a sitting that is killed still
    counts up to the checkpoint the next one resumes from: the run's total steps, tokens and wall time
    stay true across interruptions.
    """

    class SittingLog(transformers.TrainerCallback):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            self.started = time.monotonic()
            path = trainer_dir / "sittings.json"
            self.earlier: list[dict[str, Any]] = []
            if resumed_from is not None and path.is_file():
                step = int(resumed_from.name.rpartition("-")[2] or 0)
                kept = json.loads(path.read_text(encoding="utf-8"))
                self.earlier = [s for s in kept if int(s["last_step"]) <= step]  # none past the resume point

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.record(state)

        def record(self, state: Any) -> list[dict[str, Any]]:
            """Write every sitting so far, this one up to ``state``, and return them."""
            sittings = [
                *self.earlier,
                {
                    "resumed_from": resumed_from.name if resumed_from else None,
                    "last_step": int(state.global_step),
                    "tokens_seen": int(getattr(state, "num_input_tokens_seen", 0) or 0),
                    "seconds": round(time.monotonic() - self.started, 1),
                },
            ]
            trainer_dir.mkdir(parents=True, exist_ok=True)
            (trainer_dir / "sittings.json").write_text(
                json.dumps(sittings, indent=1) + "\n", encoding="utf-8"
            )
            return sittings

    return SittingLog()


def _deadline_callback(
    transformers: Any, seconds: float | None, last_step: int | None = None, *, save: bool = False
) -> Any:
    """Stops training at the first optimizer step past a wall-clock budget, or at ``last_step``.

    A checkpoint is saved there when ``save`` is set, so a later sitting resumes from it.
    """

    class Deadline(transformers.TrainerCallback):  # type: ignore[misc, name-defined]
        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.deadline = time.monotonic() + seconds if seconds else float("inf")

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if time.monotonic() >= self.deadline or (
                last_step is not None and state.global_step >= last_step
            ):
                control.should_training_stop = True
                control.should_save = save

    return Deadline()
