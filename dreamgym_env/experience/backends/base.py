"""One interface for every way of reaching an experience model."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from dreamgym_env.records import Step, Task

T = TypeVar("T")


@dataclass(frozen=True)
class TransitionQuery:
    """The structured facts behind a transition prompt.

    Real backends only read the rendered ``messages``; the scripted fake model and tooling (recording,
    SFT data building) use these fields instead of parsing prompt text.
    """

    domain: str
    task: Task
    history: tuple[Step, ...]
    state: str
    action: str
    admissible_actions: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompletionRequest:
    """One chat request, for a structured (JSON) answer or a plain-text one.

    Attributes:
        messages: OpenAI-style chat messages.
        json_schema: The JSON schema the answer must follow (sent as ``response_format``); ``None``
            asks for plain text, ended by the model (a next state alone, :attr:`EnvConfig.answer_format`).
        schema_name: Name of the schema in the request.
        seed: Per-request sampling seed, derived from the env's RNG so seeded runs repeat.
        query: Structured facts for non-LLM backends; ``None`` for requests that are not transitions
            (e.g. task generation).
        episode_id: The episode the request belongs to. Step t+1's prompt extends step t's, so a
            backend with several servers sends all of an episode's requests to one of them, whose
            prefix cache holds the shared part; ``None`` (requests outside an episode) routes freely.
        temperature: This request's sampling temperature, over the backend's own; ``None`` keeps the
            backend's. A parse retry samples (:attr:`EnvConfig.retry_temperature`): a greedy model asked
            the same prompt again would give the same unusable answer.
        choices: The answers the model may give, exactly (structured decoding of a choice: each
            token is the model's most likely one among those that keep to a listed answer); ``None``
            leaves the answer free. The outcomes the domain wrote out (:attr:`EnvConfig.guided_answers`).
        pattern: A regular expression the whole answer must match (structured decoding), for an
            answer the domain can shape but not write (:meth:`Domain.answer_pattern`); ``None`` leaves it free.
    """

    messages: list[dict[str, str]]
    json_schema: dict[str, Any] | None
    schema_name: str = "transition"
    seed: int | None = None
    query: TransitionQuery | None = None
    episode_id: str | None = None
    temperature: float | None = None
    choices: tuple[str, ...] | None = None
    pattern: str | None = None


@dataclass
class Completion:
    """The model's raw answer and what it cost.

    ``mean_logprob`` is the mean log-probability of the answer's tokens, where the backend was asked
    for it (:attr:`BackendConfig.logprobs`) and the server sent it; ``None`` otherwise.
    """

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    latency_s: float = 0.0
    endpoint: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    mean_logprob: float | None = None

    def usage(self) -> dict[str, Any]:
        """Token usage in the shape ``info["usage"]`` reports."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
        }

    def confidence(self) -> float | None:
        """``exp(mean_logprob)``, the geometric mean of the answer's token probabilities, in (0, 1]; else ``None``."""
        return None if self.mean_logprob is None else math.exp(self.mean_logprob)


class Backend(ABC):
    """Turns a :class:`CompletionRequest` into a :class:`Completion`.

    Implementations are coroutine-first so a vector env can keep hundreds of requests in flight from one
    thread. They must be picklable (create clients and engines lazily) because vector envs and
    multiprocessing send envs to subprocesses.
    """

    @abstractmethod
    async def acomplete(self, request: CompletionRequest) -> Completion:
        """Answer one request.

        Raises:
            ServerUnreachableError: no endpoint answered.
            PromptTooLongError: the prompt exceeds the model's context.
            BackendError: any other failure of the backend.
        """

    def discard(self, completions: Sequence[Completion]) -> None:  # noqa: B027 - optional hook
        """Hear that the caller did not use these answers: the step they were for was given up.

        An env calls it when a step is abandoned after some answers came back (a vector step in which
        another sub-env's request failed, a write that failed): the step will be asked again, and a
        backend that keeps a record of its calls (the recording backend) must keep only the answers
        the env committed, or a replay of the run would not match it. Most backends keep nothing.
        """

    async def aclose(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release connections or engines."""

    async def closing(self, work: Awaitable[T]) -> T:
        """``await work``, then :meth:`aclose`, whatever happened: for a one-off ``asyncio.run``.

        An HTTP client is bound to the loop it was made on; one still open when its loop ends is
        reported as unclosed when it is collected. ``asyncio.run(backend.closing(evaluate(...)))``.
        """
        try:
            return await work
        finally:
            await self.aclose()

    def describe(self) -> str:
        """A short, secret-free description for logs and ``info``."""
        return type(self).__name__
