"""The ``dreamgym`` command: serve an experience model, list envs, and the buffer/domain/curriculum tools."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dreamgym_env._argtypes import bounded_int, path, text

if TYPE_CHECKING:
    from dreamgym_env.serving.trained import TrainedModel
    from dreamgym_env.serving.vllm_server import VLLMServer

# Sub-command groups contributed by subpackages: (module, function adding the sub-parsers).
_COMMAND_GROUPS = (
    ("dreamgym_env.buffer.cli", "add_buffer_commands"),
    ("dreamgym_env.domains.spec_cli", "add_domain_commands"),
    ("dreamgym_env.curriculum.cli", "add_curriculum_commands"),
    ("dreamgym_env.training.cli", "add_training_commands"),
    ("dreamgym_env.evaluation.cli", "add_evaluation_commands"),
)


def _cmd_envs(args: argparse.Namespace) -> int:
    import gymnasium as gym

    import dreamgym_env  # noqa: F401 - registers the ids

    for env_id in sorted(i for i in gym.registry if i.startswith("DreamGym/")):
        print(env_id)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from dreamgym_env.domains import get_domain
    from dreamgym_env.errors import ConfigError
    from dreamgym_env.serving import serve_smoke_model
    from dreamgym_env.serving.shipped import SHIPPED_MODELS, recommended_env_kwargs, serve_shipped_model
    from dreamgym_env.serving.trained import is_model_folder

    if args.model is None and not args.smoke:
        print(
            "Give --model PATH (a model folder `dreamgym train` wrote), --model NAME (a shipped model: "
            f"{', '.join(sorted(SHIPPED_MODELS))}) or --smoke.\n"
            "To serve a hub model on a GPU, run vLLM itself, e.g.:\n"
            "  vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000\n"
            "then set DREAMGYM_BASE_URL=http://127.0.0.1:8000/v1 DREAMGYM_MODEL=Qwen/Qwen2.5-7B-Instruct.",
            file=sys.stderr,
        )
        return 2
    # A model folder wins over a shipped model's name (as a named base does in training).
    own = args.model is not None and (is_model_folder(args.model) or args.model not in SHIPPED_MODELS)
    folder_only = [flag for flag, dest in _FOLDER_ONLY_FLAGS if getattr(args, dest) is not None]
    if folder_only and not own:  # before anything is built or started
        which = "--smoke" if args.smoke else f"the shipped model {args.model!r}"
        raise ConfigError(f"{', '.join(folder_only)} apply to a model folder (--model PATH), not to {which}.")
    if own:
        model, server = _own_model_server(args)
        server.start()
        print(_own_model_banner(model, server), flush=True)
    elif args.model:
        server = serve_shipped_model(args.model, port=args.port)
        kwargs = ", ".join(f"{k}={v!r}" for k, v in recommended_env_kwargs(args.model).items())
        env_id = get_domain(SHIPPED_MODELS[args.model].domain).env_id
        print(
            f"{SHIPPED_MODELS[args.model]} serving at {server.base_url} as {server.model!r}; started in "
            f"{server.startup_seconds:.1f}s.\n"
            f'gymnasium.make("{env_id}", base_url="{server.base_url}", {kwargs})',
            flush=True,
        )
    else:
        server = serve_smoke_model(port=args.port, train_steps=args.train_steps)
        print(
            f"SMOKE MODEL (a tiny model trained for seconds; its transitions are not meaningful) serving at "
            f"{server.base_url} as {server.model!r}; started in {server.startup_seconds:.1f}s.",
            flush=True,
        )
    print(f"export DREAMGYM_BASE_URL={server.base_url} DREAMGYM_MODEL={server.model}", flush=True)
    _serve_until_signalled(server)
    return 0


_FOLDER_ONLY_FLAGS = (
    ("--served-name", "served_name"),
    ("--base", "base"),
    ("--max-model-len", "max_model_len"),
    ("--dtype", "dtype"),
)
"""``dreamgym serve`` options that only a model folder takes: (flag, argparse dest)."""


def _own_model_server(args: argparse.Namespace) -> tuple[TrainedModel, VLLMServer]:
    """The model folder ``--model PATH``, checked (an adapter merged into its base), and its server, not started."""
    from dreamgym_env.errors import ConfigError
    from dreamgym_env.serving import vllm_server
    from dreamgym_env.serving.shipped import SHIPPED_MODELS
    from dreamgym_env.serving.trained import (
        SERVABLE,
        read_model_folder,
        servable_trained_folder,
        trained_server,
    )

    if not Path(args.model).exists():
        raise ConfigError(
            f"--model {args.model!r} is neither a model folder (there is no such path) nor a shipped model "
            f"({', '.join(sorted(SHIPPED_MODELS))}); {SERVABLE}."
        )
    model = read_model_folder(args.model, base=args.base)
    name = args.served_name or Path(args.model).resolve().name
    vllm_server.require_vllm(f"Serving the model in {args.model}")
    server = trained_server(
        servable_trained_folder(model, name),
        name,
        port=args.port,
        max_model_len=args.max_model_len,
        dtype=args.dtype,
    )
    return model, server


def _own_model_banner(model: TrainedModel, server: VLLMServer) -> str:
    """What ``dreamgym serve --model PATH`` prints once the server runs: its URL and the env's keywords."""
    from dreamgym_env.serving.trained import trained_env_kwargs

    what = "full weights" if model.kind == "weights" else f"a LoRA adapter merged into {model.base}"
    env_id = f'"{model.env_id}"' if model.env_id else "ENV_ID"
    kwargs = ", ".join(f"{k}={v!r}" for k, v in trained_env_kwargs(model, server.model).items())
    lines = [
        f"{model.folder} ({what}) serving at {server.base_url} as {server.model!r} (context "
        f"{server.max_model_len} tokens, {server.dtype}); started in {server.startup_seconds or 0:.1f}s.",
        f'gymnasium.make({env_id}, base_url="{server.base_url}", {kwargs})',
    ]
    if not model.env_settings:
        lines.append(
            f"(no env_settings in {model.folder}/dreamgym_training.json: give the env the ENV_ID of the "
            "domain, and the history_window, top_k, prompt_style and answer_format the model was trained with)"
        )
    elif not model.env_id:
        domain = model.env_settings.get("domain")
        lines.append(f"(ENV_ID: the id `dreamgym_env.register_domain` gave the {domain!r} domain)")
    return "\n".join(lines)


def _serve_until_signalled(server: VLLMServer) -> None:
    """Keep ``server`` running until SIGINT or SIGTERM, then stop it."""
    # The server runs in its own process group, so a signal to this one does not reach it: catch
    # SIGINT/SIGTERM (the default SIGTERM action would end this process without stopping the server)
    # and stop the server on either.
    stopped = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stopped.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stopped.wait(0.5):
            pass
    finally:
        server.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def build_parser() -> argparse.ArgumentParser:
    """The full parser, including every installed sub-command group."""
    parser = argparse.ArgumentParser(prog="dreamgym", description=__doc__)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    envs = commands.add_parser("envs", help="List the registered DreamGym env ids.")
    envs.set_defaults(func=_cmd_envs)

    serve = commands.add_parser(
        "serve",
        help="Serve an experience model with vLLM (--model PATH: a folder `dreamgym train` wrote; "
        "--model textworld: the shipped one; --smoke).",
    )
    which = serve.add_mutually_exclusive_group()
    which.add_argument("--smoke", action="store_true", help="Build (once) and serve the tiny smoke model.")
    which.add_argument(
        "--model",
        type=path,
        metavar="PATH|NAME",
        help="A model folder `dreamgym train` wrote (full weights, or a LoRA adapter: merged into its base "
        "once, cached), or a model shipped with the package (textworld, textworld-learned); a model folder "
        "of a shipped model's name is served as the folder.",
    )
    serve.add_argument("--port", type=bounded_int(1, 65535), default=8000)
    serve.add_argument(
        "--served-name",
        type=text,
        help="With --model PATH: the name requests pass as model (default: the folder's name).",
    )
    serve.add_argument(
        "--base",
        type=path,
        metavar="DIR|NAME",
        help="With --model PATH of a LoRA adapter: its base, a model folder or a PyPI-built base's name "
        "(default: the one its dreamgym_training.json or adapter_config.json names).",
    )
    serve.add_argument(
        "--max-model-len",
        type=bounded_int(16, 10_000_000),
        help="With --model PATH: the context in tokens (default: the model's own, at most 4096).",
    )
    serve.add_argument(
        "--dtype",
        choices=["auto", "bfloat16", "float16", "float32"],
        help="With --model PATH: the weights' dtype (default: bfloat16 where the CPU computes it natively, "
        "else float32; auto on a GPU).",
    )
    serve.add_argument(
        "--train-steps",
        type=bounded_int(1, 1_000_000),
        default=None,
        help="Smoke model optimizer steps, if it has to be built (default: the builder's, under a minute).",
    )
    serve.set_defaults(func=_cmd_serve)

    for module_name, function in _COMMAND_GROUPS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name != module_name:  # the group exists but its own import failed: surface that
                raise
            continue
        getattr(module, function)(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dreamgym`` console script; package errors print one line and exit 1."""
    from dreamgym_env.errors import DreamGymError

    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except DreamGymError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
