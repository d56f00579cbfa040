"""A scripted fake experience model: deterministic, instant, no server.

For unit tests (of this package and of users' own training code) and for trying an env without a GPU.
It is selected like a real backend (``gymnasium.make(id, backend="scripted")``), so code under test
runs unchanged. It is not a simulator: its worlds are trivially simple.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import re
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, SupportsIndex, overload

from dreamgym_env.errors import BackendError, ConfigError, DomainError
from dreamgym_env.experience.backends.base import Backend, Completion, CompletionRequest
from dreamgym_env.experience.schema import ExperienceOutput

Answer = ExperienceOutput | dict[str, Any] | str
Responder = Callable[[CompletionRequest], Answer]

# Whole actions that end an episode in the built-in domains' grammars (and the test domains' "stop").
# Matched against the entire action: "search[stop watch]" or "click[buy now please]" end nothing.
_TERMINAL = re.compile(
    r"click\[buy now\]|send_msg_to_user\(.*\)|report_infeasible\(.*\)|stop(?:\s*\[.*\])?", re.I | re.S
)
#: Requests a :class:`ScriptedBackend` keeps for inspection by default (a long run keeps only these).
DEFAULT_KEEP_REQUESTS = 1000


def echo_world(request: CompletionRequest) -> ExperienceOutput:
    """The default responder: the state records the action; a terminal action ends the episode.

    The record is the answer's first line, after the state's first line; in a domain whose answers
    carry only what changed (:meth:`Domain.complete_state`), it is the whole answer, the step's result.

    Success is a deterministic function of the request seed (even seeds succeed), so seeded runs
    repeat exactly and both outcomes occur across seeds.
    """
    query = request.query
    if query is None:
        raise BackendError("echo_world answers transition requests only; give ScriptedBackend a responder.")
    done = _TERMINAL.fullmatch(query.action.strip()) is not None
    record = f"You did: {query.action} (step {len(query.history) + 1})."
    if _completes(query.domain, query.state, record):
        next_state = record  # the domain keeps the rest of the state: an answer of changes only
    else:
        header = query.state.splitlines()[0] if query.state else ""
        next_state = f"{header}\n{record}"
    return ExperienceOutput(
        reasoning=f"The agent chose {query.action!r} at step {len(query.history)}.",
        next_state=next_state,
        admissible_actions=list(query.admissible_actions),
        done=done,
        success=done and (request.seed or 0) % 2 == 0,
    )


def _completes(domain_name: str, state: str, line: str) -> bool:
    """Whether the domain reads a one-line answer as a result line and keeps the rest of ``state``."""
    from dreamgym_env.domains import get_domain

    try:
        return get_domain(domain_name).complete_state(state, line) != line
    except (ValueError, DomainError):  # an unknown domain, or an answer it cannot complete
        return False


class RequestLog(deque[CompletionRequest]):
    """The latest requests, oldest first: a bounded ``deque`` that also slices and compares like a list."""

    @overload
    def __getitem__(self, index: SupportsIndex) -> CompletionRequest: ...
    @overload
    def __getitem__(self, index: slice) -> list[CompletionRequest]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> CompletionRequest | list[CompletionRequest]:
        if isinstance(index, slice):
            return list(self)[index]
        return super().__getitem__(index)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):
            return list(self) == other
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]


class ScriptedBackend(Backend):
    """Answers requests from a function or from a fixed script of answers.

    Args:
        responder: A function ``request -> answer``, or an iterable of answers used in order (an
            answer is an :class:`ExperienceOutput`, a dict of its fields, or raw text, which lets
            tests feed unparsable output). Defaults to :func:`echo_world`.
        latency_s: Simulated server latency, to exercise concurrency without a server.
        keep_requests: How many of the latest requests :attr:`requests` keeps; ``None`` keeps all.
            Bounded by default, so a long training run against the fake does not grow without end
            (each request carries its whole prompt).

    Attributes:
        requests: The latest requests received (oldest first), for tests to inspect prompts.
        requests_received: How many requests were received in all.
    """

    def __init__(
        self,
        responder: Responder | Iterable[Answer] | None = None,
        *,
        latency_s: float = 0.0,
        keep_requests: int | None = DEFAULT_KEEP_REQUESTS,
    ) -> None:
        if keep_requests is not None and keep_requests < 0:
            raise ConfigError(f"keep_requests must be None or at least 0, got {keep_requests}.")
        if responder is None:
            responder = echo_world
        self._responder: Responder | None = responder if callable(responder) else None
        self._script: list[Answer] = [] if callable(responder) else list(responder)
        self.latency_s = latency_s
        self.requests: RequestLog = RequestLog(maxlen=keep_requests)
        self.requests_received = 0

    async def acomplete(self, request: CompletionRequest) -> Completion:
        """Answer from the responder or the next scripted answer."""
        self.requests.append(request)
        self.requests_received += 1
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self._responder is not None:
            answer = self._responder(request)
        elif self._script:
            answer = self._script.pop(0)
        else:
            raise BackendError(
                f"ScriptedBackend ran out of scripted answers after {self.requests_received - 1}."
            )
        text = _to_text(answer, plain=request.json_schema is None)
        if request.choices:  # as structured decoding would: the listed answer nearest the script's
            text = max(request.choices, key=lambda c: difflib.SequenceMatcher(None, text, c).ratio())
        return Completion(text=text, latency_s=self.latency_s, endpoint="scripted")


def _to_text(answer: Answer, *, plain: bool = False) -> str:
    """The completion's text; ``plain`` (a request with no schema) takes a structured answer's next state alone."""
    if isinstance(answer, dict):
        return str(answer.get("next_state", "")) if plain else json.dumps(answer)
    if isinstance(answer, ExperienceOutput):
        return answer.next_state if plain else answer.model_dump_json()
    return answer
