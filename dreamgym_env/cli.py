"""The ``dreamgym`` command: serve the smoke model, list envs, and the buffer/domain/curriculum tools."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Sequence

from dreamgym_env._argtypes import bounded_int, text

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
    from dreamgym_env.errors import ConfigError
    from dreamgym_env.serving import serve_smoke_model
    from dreamgym_env.serving.shipped import SHIPPED_MODELS, recommended_env_kwargs, serve_shipped_model

    if args.model is not None and args.model not in SHIPPED_MODELS:  # before anything starts
        raise ConfigError(
            f"--model {args.model!r} is not a model shipped with the package; shipped: "
            f"{', '.join(sorted(SHIPPED_MODELS))} (or --smoke)"
        )
    if args.model:
        server = serve_shipped_model(args.model, port=args.port)
        kwargs = ", ".join(f"{k}={v!r}" for k, v in recommended_env_kwargs(args.model).items())
        print(
            f"{SHIPPED_MODELS[args.model]} serving at {server.base_url} as {server.model!r}; started in "
            f"{server.startup_seconds:.1f}s.\n"
            f'gymnasium.make("DreamGym/TextWorld-v0", base_url="{server.base_url}", {kwargs})',
            flush=True,
        )
    elif args.smoke:
        server = serve_smoke_model(port=args.port, train_steps=args.train_steps)
        print(
            f"SMOKE MODEL (a tiny model trained for seconds; its transitions are not meaningful) serving at "
            f"{server.base_url} as {server.model!r}; started in {server.startup_seconds:.1f}s.",
            flush=True,
        )
    else:
        print(
            f"Give --model NAME (a shipped model: {', '.join(sorted(SHIPPED_MODELS))}) or --smoke.\n"
            "To serve a real experience model, run vLLM itself, e.g.:\n"
            "  vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000\n"
            "then set DREAMGYM_BASE_URL=http://127.0.0.1:8000/v1 DREAMGYM_MODEL=Qwen/Qwen2.5-7B-Instruct.",
            file=sys.stderr,
        )
        return 2
    print(f"export DREAMGYM_BASE_URL={server.base_url} DREAMGYM_MODEL={server.model}", flush=True)
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
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The full parser, including every installed sub-command group."""
    parser = argparse.ArgumentParser(prog="dreamgym", description=__doc__)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    envs = commands.add_parser("envs", help="List the registered DreamGym env ids.")
    envs.set_defaults(func=_cmd_envs)

    serve = commands.add_parser(
        "serve", help="Serve an experience model with vLLM (--model textworld: the shipped one; --smoke)."
    )
    which = serve.add_mutually_exclusive_group()
    which.add_argument("--smoke", action="store_true", help="Build (once) and serve the tiny smoke model.")
    which.add_argument("--model", type=text, help="Serve a model shipped with the package (textworld).")
    serve.add_argument("--port", type=bounded_int(1, 65535), default=8000)
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
