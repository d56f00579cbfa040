"""A scripted fake experience model: deterministic, instant, no server.

For unit tests (of this package and of users' own training code) and for trying an env without a GPU.
It is selected like a real backend (``gymnasium.make(id, backend="scripted")``), so code under test
runs unchanged. It is not a simulator: its worlds are trivially simple.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from dreamgym_env.errors import BackendError
from dreamgym_env.experience.backends.base import Backend, Completion, CompletionRequest
from dreamgym_env.experience.schema import ExperienceOutput

__all__ = ["ScriptedBackend", "echo_world"]

Answer = ExperienceOutput | dict[str, Any] | str
Responder = Callable[[CompletionRequest], Answer]

# Actions that end an episode in the built-in domains' grammars.
_TERMINAL = re.compile(r"click\[buy now\]|send_msg_to_user\(.*\)|report_infeasible\(.*\)|stop\b", re.I | re.S)


def echo_world(request: CompletionRequest) -> ExperienceOutput:
    """The default responder: the state records the action; a terminal action ends the episode.

    Success is a deterministic function of the request seed (even seeds succeed), so seeded runs
    repeat exactly and both outcomes occur across seeds.
    """
    query = request.query
    if query is None:
        raise BackendError("echo_world answers transition requests only; give ScriptedBackend a responder.")
    done = bool(_TERMINAL.search(query.action))
    header = query.state.splitlines()[0] if query.state else ""
    return ExperienceOutput(
        reasoning=f"The agent chose {query.action!r} at step {len(query.history)}.",
        next_state=f"{header}\nYou did: {query.action} (step {len(query.history) + 1}).",
        admissible_actions=list(query.admissible_actions),
        done=done,
        success=done and (request.seed or 0) % 2 == 0,
    )


class ScriptedBackend(Backend):
    """Answers requests from a function or from a fixed script of answers.

    Args:
        responder: A function ``request -> answer``, or an iterable of answers used in order (an
            answer is an :class:`ExperienceOutput`, a dict of its fields, or raw text, which lets
            tests feed unparsable output). Defaults to :func:`echo_world`.
        latency_s: Simulated server latency, to exercise concurrency without a server.

    Attributes:
        requests: Every request received, for tests to inspect prompts.
    """

    def __init__(
        self, responder: Responder | Iterable[Answer] | None = None, *, latency_s: float = 0.0
    ) -> None:
        if responder is None:
            responder = echo_world
        self._responder: Responder | None = responder if callable(responder) else None
        self._script: list[Answer] = [] if callable(responder) else list(responder)
        self.latency_s = latency_s
        self.requests: list[CompletionRequest] = []

    async def acomplete(self, request: CompletionRequest) -> Completion:
        """Answer from the responder or the next scripted answer."""
        self.requests.append(request)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self._responder is not None:
            answer = self._responder(request)
        elif self._script:
            answer = self._script.pop(0)
        else:
            raise BackendError(f"ScriptedBackend ran out of scripted answers after {len(self.requests) - 1}.")
        return Completion(text=_to_text(answer), latency_s=self.latency_s, endpoint="scripted")


def _to_text(answer: Answer) -> str:
    if isinstance(answer, ExperienceOutput):
        return answer.model_dump_json()
    if isinstance(answer, dict):
        return json.dumps(answer)
    return answer
