"""Record every experience-model request and answer to SQLite, and replay them without a server.

LLM serving is not bit-reproducible (batching changes floating-point sums), so exact reruns come from
a recording: wrap the live backend once, then rerun the same seeded code against the file::

    import dreamgym_env, gymnasium
    from dreamgym_env.experience.backends.openai_http import OpenAIBackend

    live = OpenAIBackend(dreamgym_env.BackendConfig(base_url="http://127.0.0.1:8000/v1", model="m"))
    env = gymnasium.make("DreamGym/WebShop-v0", backend=dreamgym_env.record(live, "run.sqlite"))
    ...                                                     # later, with the server stopped:
    env = gymnasium.make("DreamGym/WebShop-v0", backend=dreamgym_env.replay("run.sqlite"))

Each call is keyed by the SHA-256 of a canonical JSON of what decides the answer: the messages, the
output schema, the request seed and the sampling settings (model, temperature, top_p, max_tokens,
extra request fields). Identical requests repeated within one run are told apart by their occurrence
number, so a run that sends the same request twice replays both answers in order. Only what the env
commits counts: a request that fails or is cancelled gives its occurrence back, and an answer of a
step the env gave up (:meth:`Backend.discard`) is removed from the file, so the retried step is
recorded under the same occurrence a replay will ask for. The file is also an
audit log: :func:`read_recording` lists every request with its answer, usage, latency, endpoint,
finish reason and time.

Replayed completions report their own (near-zero) latency by default, so ``info["timing"]`` stays a
truthful measurement of the run that produced it; ``restore_latency=True`` reports the recorded
latency instead (e.g. to replay a throughput analysis). Everything else the env reports (observation,
reward, flags, reasoning, usage, confidence) is identical to the recorded run.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dreamgym_env._secrets import redact_url
from dreamgym_env.config import BackendConfig
from dreamgym_env.errors import ConfigError, ReplayMissError
from dreamgym_env.experience.backends.base import Backend, Completion, CompletionRequest
from dreamgym_env.storage.recordings import CallRow, RecordingFile, read_calls

__all__ = [
    "RecordedCall",
    "RecordingBackend",
    "RecordingMode",
    "read_recording",
    "record",
    "replay",
    "request_key",
    "sampling_settings",
]

#: What a :class:`RecordingBackend` does with each call: write it, answer from the file, or either.
RecordingMode = Literal["record", "replay", "replay_or_record"]
PathLike = str | os.PathLike[str]

KEY_VERSION = 1
_MODES = ("record", "replay", "replay_or_record")
# Where a call's Completion.mean_logprob is stored: among its extras (the calls table has no column for it).
_MEAN_LOGPROB = "mean_logprob"


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sampling_settings(backend: Backend | None) -> dict[str, Any]:
    """The settings of ``backend`` that change its answers, as they enter the recording key.

    Backends configured by a :class:`BackendConfig` contribute the model name, temperature, top_p,
    max_tokens, extra request fields and whether the request seed is sent (not endpoints, timeouts or
    keys, which do not change the answer). A backend may define ``sampling_settings() -> dict`` to say
    it itself; any other backend is identified by its class name.
    """
    if backend is None:
        return {}
    own = getattr(backend, "sampling_settings", None)
    if callable(own):
        return dict(own())
    config = getattr(backend, "config", None)
    if isinstance(config, BackendConfig):
        return {
            "model": config.model,
            "temperature": config.temperature,
            "top_p": config.top_p,
            "max_tokens": config.max_tokens,
            "extra_body": config.extra_body,
            "send_seed": config.send_seed,
        }
    return {"backend": type(backend).__name__}


def _keyed_fields(request: CompletionRequest, sampling: dict[str, Any]) -> dict[str, Any]:
    return {
        "v": KEY_VERSION,
        "messages": request.messages,
        "schema_name": request.schema_name,
        "json_schema": request.json_schema,
        "seed": request.seed,
        "sampling": sampling,
        **({} if request.temperature is None else {"temperature": request.temperature}),
        **({} if request.choices is None else {"choices": list(request.choices)}),
        **({} if request.pattern is None else {"pattern": request.pattern}),
    }


def request_key(request: CompletionRequest, sampling: dict[str, Any]) -> str:
    """The recording key of ``request`` under ``sampling`` (hex SHA-256 of its canonical JSON)."""
    return hashlib.sha256(_canonical(_keyed_fields(request, sampling)).encode()).hexdigest()


@dataclass(frozen=True)
class RecordedCall:
    """One recorded request and its answer, as :func:`read_recording` returns it."""

    key: str
    occurrence: int
    request: dict[str, Any]
    completion: Completion
    recorded_at: float


class RecordingBackend(Backend):
    """Wraps a backend to record its calls, or stands in for it by replaying a recording.

    Args:
        inner: The live backend. Required to record; optional to replay (then the sampling settings
            come from ``sampling`` or from the recording itself).
        path: The SQLite recording file (created when missing; WAL mode, one transaction per call, so
            every answer received survives a crash of the process).
        mode: ``"record"``: ask ``inner`` and store every answer (replacing an earlier recording of the
            same request). ``"replay"``: answer from the file only; a request never recorded raises
            :class:`ReplayMissError`. ``"replay_or_record"``: replay when recorded, else ask ``inner``
            and add the answer to the file.
        sampling: The sampling settings of the key, when ``inner`` is absent and the recording holds
            calls made with several settings.
        restore_latency: Report the recorded latency on replayed completions instead of the replay's own.
        synchronous: SQLite ``synchronous`` pragma: ``NORMAL`` survives process crashes, ``FULL`` also
            power loss.

    Attributes:
        hits: Answers served from the recording.
        recorded: Answers received from ``inner`` and written.

    Example:
        >>> backend = RecordingBackend(ScriptedBackend(), "run.sqlite", mode="record")
        >>> env = gymnasium.make("DreamGym/WebShop-v0", backend=backend)
    """

    def __init__(
        self,
        inner: Backend | None,
        path: PathLike,
        mode: RecordingMode = "record",
        *,
        sampling: dict[str, Any] | None = None,
        restore_latency: bool = False,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
    ) -> None:
        if mode not in _MODES:
            raise ConfigError(f"mode must be one of {list(_MODES)}, got {mode!r}")
        if inner is None and mode != "replay":
            raise ConfigError(
                f"mode={mode!r} asks the live backend for answers, so it needs one: "
                "RecordingBackend(live_backend, path, mode=...) (only mode='replay' works without it)"
            )
        if isinstance(inner, RecordingBackend):
            raise ConfigError("inner is already a RecordingBackend; wrap the live backend once")
        self.inner = inner
        self.path = Path(path).expanduser()
        self.mode: RecordingMode = mode
        self.restore_latency = restore_latency
        self.synchronous = synchronous
        self._explicit_sampling = dict(sampling) if sampling is not None else None
        self._sampling: dict[str, Any] | None = self._explicit_sampling
        if self._sampling is None and inner is not None:
            self._sampling = sampling_settings(inner)
        self._file: RecordingFile | None = None
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}  # key -> occurrences handed out (the next new one)
        self._free: dict[str, list[int]] = {}  # key -> occurrences given back (a heap), reused first
        self.hits = 0
        self.recorded = 0
        if mode == "replay" and not self.path.is_file():
            raise ConfigError(
                f"No recording at {self.path}. Record one first with dreamgym_env.record(live_backend, "
                f"{str(self.path)!r}), or check the path."
            )

    # ------------------------------------------------------------------ pickling (vector envs, subprocesses)
    def __getstate__(self) -> dict[str, Any]:
        return {
            "inner": self.inner,
            "path": str(self.path),
            "mode": self.mode,
            "sampling": self._explicit_sampling,
            "restore_latency": self.restore_latency,
            "synchronous": self.synchronous,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["inner"],
            state["path"],
            state["mode"],
            sampling=state["sampling"],
            restore_latency=state["restore_latency"],
            synchronous=state["synchronous"],
        )

    def describe(self) -> str:
        """The mode, the file and the live backend, for logs."""
        inner = self.inner.describe() if self.inner is not None else "no live backend"
        return f"{self.mode}({self.path}; {inner})"

    # ------------------------------------------------------------------ storage
    def _recording(self) -> RecordingFile:
        if self._file is None:
            self._file = RecordingFile(self.path, key_version=KEY_VERSION, synchronous=self.synchronous)
        return self._file

    def _resolve_sampling(self, recording: RecordingFile) -> dict[str, Any]:
        if self._sampling is None:
            found = recording.samplings(limit=2)
            if len(found) > 1:
                raise ConfigError(
                    f"{self.path} holds calls made with several sampling settings, so replay cannot tell "
                    "which to use. Pass the live backend (RecordingBackend(backend, path, 'replay')) or "
                    f"sampling=... (read_recording({str(self.path)!r}) lists them)."
                )
            self._sampling = json.loads(found[0]) if found else {}
        return self._sampling

    def _row(self, key: str, occurrence: int, fields: dict[str, Any], completion: Completion) -> CallRow:
        """The row that records ``completion`` as ``occurrence`` of ``key``."""
        extra = {k: v for k, v in completion.extra.items() if k not in ("recording", _MEAN_LOGPROB)}
        if completion.mean_logprob is not None:  # kept beside the extras, so the stored calls keep their form
            extra[_MEAN_LOGPROB] = completion.mean_logprob
        try:
            extra_json = _canonical(extra)
        except (TypeError, ValueError):
            extra_json = _canonical(
                {k: v for k, v in extra.items() if isinstance(v, (str, int, float, bool))}
            )
        return CallRow(
            key=key,
            occurrence=occurrence,
            messages_sha=hashlib.sha256(_canonical(fields["messages"]).encode()).hexdigest(),
            sampling=_canonical(fields["sampling"]),
            request=_canonical(fields),
            text=completion.text,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            cached_tokens=completion.cached_tokens,
            latency_s=completion.latency_s,
            endpoint=None
            if completion.endpoint is None
            else redact_url(completion.endpoint),  # a key in the URL
            finish_reason=completion.extra.get("finish_reason"),
            extra=extra_json,
            recorded_at=time.time(),
        )

    # ------------------------------------------------------------------ occurrences
    def _take_occurrence(self, key: str) -> int:
        """The occurrence of this sending of ``key``: the lowest given back, else the next new one.

        Called under the lock. A sending that was given back (it failed, was cancelled or discarded)
        is sent again by the retried step, which then gets the number the failed one had.
        """
        free = self._free.get(key)
        if free:
            return heapq.heappop(free)
        occurrence = self._seen.get(key, 0)
        self._seen[key] = occurrence + 1
        return occurrence

    def _give_back(self, key: str, occurrence: int) -> None:
        """Called under the lock: ``occurrence`` of ``key`` is free for the next identical request."""
        heapq.heappush(self._free.setdefault(key, []), occurrence)

    # ------------------------------------------------------------------ backend API
    async def acomplete(self, request: CompletionRequest) -> Completion:
        """Answer from the recording or from the live backend, as the mode says.

        A request that raises (the live backend failed, the caller cancelled it, a replay miss) gives
        its occurrence back, so the same request sent again is the same occurrence.

        Raises:
            ReplayMissError: mode ``"replay"`` and the request was never recorded.
        """
        start = time.perf_counter()
        with self._lock:
            recording = self._recording()
            sampling = self._resolve_sampling(recording)
            fields = _keyed_fields(request, sampling)
            key = hashlib.sha256(_canonical(fields).encode()).hexdigest()
            occurrence = self._take_occurrence(key)
            try:
                row = None
                if self.mode != "record":
                    row = recording.find(key, occurrence, exact=self.mode == "replay_or_record")
                if row is None and self.mode == "replay":
                    raise self._miss(recording, key, occurrence, fields)
            except BaseException:
                self._give_back(key, occurrence)
                raise
        if row is not None:
            self.hits += 1
            return self._from_row(row, time.perf_counter() - start)
        assert self.inner is not None
        try:
            completion = await self.inner.acomplete(request)
        except BaseException:
            with self._lock:
                self._give_back(key, occurrence)
            raise
        with self._lock:
            try:
                self._recording().write(self._row(key, occurrence, fields, completion))
            except BaseException:
                self._give_back(key, occurrence)
                raise
            self.recorded += 1
        completion.extra["recording"] = {"key": key, "occurrence": occurrence, "replayed": False}
        return completion

    def discard(self, completions: Sequence[Completion]) -> None:
        """Forget answers the env did not commit, so the file holds what it did commit.

        Each one's occurrence is given back, and an answer recorded by this backend is deleted from
        the file (a replayed one stays: it was recorded before). The retried step then asks again
        under the same occurrences, which is what a replay asks for. Discarding twice is harmless.
        """
        with self._lock:
            for completion in completions:
                entry = completion.extra.get("recording")
                if not isinstance(entry, dict) or entry.get("discarded"):
                    continue
                entry["discarded"] = True
                key, occurrence = str(entry["key"]), int(entry["occurrence"])
                if not entry.get("replayed"):
                    self._recording().delete(key, occurrence)
                    self.recorded -= 1
                self._give_back(key, occurrence)

    def _from_row(self, row: CallRow, elapsed: float) -> Completion:
        extra = json.loads(row.extra)
        mean_logprob = extra.pop(_MEAN_LOGPROB, None)
        extra["recording"] = {
            "key": row.key,
            "occurrence": row.occurrence,
            "replayed": True,
            "recorded_latency_s": row.latency_s,
        }
        return Completion(
            text=row.text,
            prompt_tokens=row.prompt_tokens,
            completion_tokens=row.completion_tokens,
            cached_tokens=row.cached_tokens,
            latency_s=row.latency_s if self.restore_latency else elapsed,
            endpoint=row.endpoint,
            extra=extra,
            mean_logprob=mean_logprob,
        )

    def _miss(
        self, recording: RecordingFile, key: str, occurrence: int, fields: dict[str, Any]
    ) -> ReplayMissError:
        total = recording.count()
        near = recording.request_with_messages(
            hashlib.sha256(_canonical(fields["messages"]).encode()).hexdigest()
        )
        others = recording.occurrences(key)
        if others:  # the same request, same settings: sent in another order or more often than recorded
            shown = ", ".join(str(o) for o in others[:5]) + (", ..." if len(others) > 5 else "")
            why = (
                f"This exact request was recorded only as occurrence {shown}, and the run now sends it as "
                f"occurrence {occurrence} (how many times this run sent it before): the recording lacks "
                "the earlier ones (made by a version that counted failed or abandoned requests, or "
                "edited?)."
            )
        elif near is not None:
            recorded = json.loads(near)
            differing = [
                f"{name}: recorded {_short(recorded.get(name))}, now {_short(fields[name])}"
                for name in ("seed", "sampling", "schema_name", "json_schema")
                if recorded.get(name) != fields[name]
            ]
            why = "The same messages were recorded with other settings (" + "; ".join(differing) + ")."
        else:
            why = (
                "No recorded request has these messages: the prompt differs (another seed, task, domain, "
                "top_k or history_window, other retrieved demonstrations, or a changed prompt template)."
            )
        error = ReplayMissError(
            f"Request {key} (seed {fields['seed']}) is not in the recording {self.path} "
            f"({total} calls). {why} "
            f"Record it by running the same code with backend=dreamgym_env.record(live_backend, "
            f"{str(self.path)!r}), or replay with dreamgym_env.replay({str(self.path)!r}, "
            "backend=live_backend, fallthrough=True) to answer misses live and add them to the file."
        )
        error.key = key  # type: ignore[attr-defined]
        error.path = str(self.path)  # type: ignore[attr-defined]
        return error

    async def aclose(self) -> None:
        """Close the recording file and the live backend."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
        if self.inner is not None:
            await self.inner.aclose()


def _short(value: Any) -> str:
    text = _canonical(value)
    return text if len(text) <= 120 else text[:117] + "..."


def read_recording(path: PathLike) -> Iterator[RecordedCall]:
    """Every recorded call in ``path``, in the order they were recorded (for audits and analysis).

    Raises:
        StoreError: the file is missing or not a recording.
    """
    for row in read_calls(Path(path)):
        extra = json.loads(row.extra)
        completion = Completion(
            row.text,
            row.prompt_tokens,
            row.completion_tokens,
            row.cached_tokens,
            row.latency_s,
            row.endpoint,
            extra,
            mean_logprob=extra.pop(_MEAN_LOGPROB, None),
        )
        yield RecordedCall(row.key, row.occurrence, json.loads(row.request), completion, row.recorded_at)


def record(backend: Backend, path: PathLike) -> RecordingBackend:
    """Wrap a live backend so every request and answer is written to ``path``."""
    return RecordingBackend(backend, path, "record")


def replay(path: PathLike, backend: Backend | None = None, *, fallthrough: bool = False) -> RecordingBackend:
    """A backend that answers from the recording at ``path``, with no server.

    Args:
        path: A file written by :func:`record`.
        backend: The live backend the run was recorded with (optional; gives the sampling settings, and
            answers misses when ``fallthrough`` is set).
        fallthrough: Answer requests that were never recorded with ``backend`` (and record them)
            instead of raising :class:`ReplayMissError`.
    """
    return RecordingBackend(backend, path, "replay_or_record" if fallthrough else "replay")
