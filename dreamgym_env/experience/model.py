"""The experience model: one transition request in, one validated prediction out."""

from __future__ import annotations

import functools
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import ValidationError

from dreamgym_env.config import EnvConfig
from dreamgym_env.domains.base import Domain, facts_shown
from dreamgym_env.errors import ConfigError, InvalidResponseError, PromptTooLongError, ResponseFormatError
from dreamgym_env.experience.backends.base import Backend, Completion, CompletionRequest, TransitionQuery
from dreamgym_env.experience.memo import StepMemo, memo_key, task_fingerprint
from dreamgym_env.experience.prompt import build_messages
from dreamgym_env.experience.schema import ExperienceOutput, output_json_schema
from dreamgym_env.records import Step, Task, Transition
from dreamgym_env.spaces import CONTROL_CHARACTERS

logger = logging.getLogger(__name__)


AnsweredBy = Literal["model", "chosen", "rule", "replay", "memo"]
"""Who answered a step: the model writing the answer, the model choosing among the outcomes the domain
wrote out (:attr:`EnvConfig.guided_answers`), the domain's rules, a recorded real transition, or the
model's earlier answer to the same step (:class:`~dreamgym_env.experience.memo.StepMemo`)."""

MODEL_ANSWERS: tuple[AnsweredBy, ...] = ("model", "chosen")
"""The ways of answering in which the model decided the step."""


def model_share(counts: Mapping[str, int]) -> float:
    """The share of steps the model decided (writing or choosing the answer), from ``answered_by`` counts."""
    return sum(counts.get(who, 0) for who in MODEL_ANSWERS) / max(1, sum(counts.values()))


@dataclass
class Prediction:
    """A parsed answer, or the reason there is none (only under ``on_invalid_output="fail_state"``).

    Attributes:
        output: The validated transition, or ``None`` when every attempt was unparsable.
        completion: The last raw completion (usage, latency, endpoint).
        attempts: Requests sent, including parse retries.
        error: Why the last attempt was rejected, if it was.
        build_s: Seconds spent building the prompt (client-side overhead).
        parse_s: Seconds spent validating answers (client-side overhead).
        model_s: Seconds the backend took over every attempt (each completion's reported latency;
            the wall time of an attempt that raised :class:`InvalidResponseError`), so a step that
            was asked again does not hide its earlier round trips.
        completions: Every completion received, the unparsable ones too: what to hand to
            :meth:`Backend.discard` if the step is given up.
        answered_by: ``"model"``; ``"chosen"`` for a step whose outcome the model chose among the
            ones the domain wrote out (:meth:`Domain.outcomes`); ``"rule"`` for a step the domain's rules fix
            (:meth:`Domain.rule_state`, or a step with one possible outcome); ``"replay"`` for a step a stored real transition answers
            (:attr:`EnvConfig.replay_real`, or one added to the memo); ``"memo"`` for a step the
            model already answered (remembered, or an identical request in flight). None of the
            last three sends a request.
    """

    output: ExperienceOutput | None
    completion: Completion | None
    attempts: int
    error: str | None = None
    build_s: float = 0.0
    parse_s: float = 0.0
    model_s: float = 0.0
    completions: list[Completion] = field(default_factory=list)
    answered_by: AnsweredBy = "model"

    @property
    def confidence(self) -> float | None:
        """How sure the model was of the answer that decided the step: ``exp(mean token log-probability)``.

        In (0, 1], for a step the model answered or chose (:data:`MODEL_ANSWERS`) whose answer was
        kept (after parse retries, the last one), with :attr:`BackendConfig.logprobs` on and a server
        that sends log-probabilities; ``None`` otherwise (a step the rules, a replay or the memo
        answered sent no request; an unparsable answer decided nothing). ``info["confidence"]``.
        """
        if self.output is None or self.completion is None or self.answered_by not in MODEL_ANSWERS:
            return None
        return self.completion.confidence()


class ExperienceModel:
    """Builds transition prompts for a domain and turns answers into validated predictions.

    Args:
        domain: The simulated world.
        backend: Where requests go.
        config: Decoding caps, parse retries and the policy for unparsable answers.
        memo: Known steps of a deterministic domain, shared by the envs of one run (see
            :mod:`~dreamgym_env.experience.memo`); ``None`` asks the model every time a step is not
            ruled or replayed. Ignored for a domain that is not deterministic.
    """

    def __init__(
        self, domain: Domain, backend: Backend, config: EnvConfig, memo: StepMemo | None = None
    ) -> None:
        self.domain = domain
        self.backend = backend
        self.config = config
        self.memo = memo if domain.deterministic else None
        if config.guided_answers and config.answer_format != "state":
            raise ConfigError(
                "guided_answers=True decodes a choice among the domain's written-out answers, which are plain next states: "
                f"it needs answer_format='state', not {config.answer_format!r}."
            )
        if config.answer_format == "state" and not domain.lists_actions:
            raise ConfigError(
                f"answer_format='state' needs a domain that lists its own admissible actions; "
                f"{domain.name!r} takes them from the model's answer. Use answer_format='json'."
            )
        caps = config.caps_in_schema
        #: Sent as ``response_format``; ``None`` for plain-text state answers (no structured decoding).
        self.json_schema: dict[str, Any] | None = (
            None
            if config.answer_format == "state"
            else output_json_schema(
                max_reasoning_chars=config.max_reasoning_chars if caps else None,
                max_state_chars=config.max_state_chars if caps else None,
                max_actions=0 if domain.lists_actions else config.max_admissible_actions,
                max_action_chars=config.max_action_chars if caps else None,
            )
        )

    def build_request(
        self,
        task: Task,
        history: Sequence[Step],
        demonstrations: Sequence[Transition],
        state: str,
        action: str,
        admissible_actions: Sequence[str] = (),
        seed: int | None = None,
        episode_id: str | None = None,
        step_facts: str | None = None,
    ) -> CompletionRequest:
        """The exact request sent for one transition (also used to build SFT data).

        ``episode_id`` routes every step of an episode to the same server (see
        :attr:`CompletionRequest.episode_id`); it is not part of the prompt. ``step_facts`` is
        :meth:`Domain.describe_step`'s answer when the caller has it already.
        """
        if step_facts is None:
            step_facts = self.domain.describe_step(task, history, state, action)
        return CompletionRequest(
            messages=build_messages(
                self.domain,
                task,
                self._shown(history),
                demonstrations,
                state,
                action,
                admissible_actions,
                style=self.config.prompt_style,
                step_facts=step_facts,
            ),
            json_schema=self.json_schema,
            seed=seed,
            episode_id=episode_id,
            query=TransitionQuery(
                domain=self.domain.name,
                task=task,
                history=tuple(history),
                state=state,
                action=action,
                admissible_actions=tuple(admissible_actions),
            ),
        )

    async def apredict(
        self,
        task: Task,
        history: Sequence[Step],
        demonstrations: Sequence[Transition],
        state: str,
        action: str,
        admissible_actions: Sequence[str] = (),
        seed: int | None = None,
        episode_id: str | None = None,
    ) -> Prediction:
        """Request and validate one transition, retrying unparsable answers.

        An answer that is not a chat completion at all (:class:`InvalidResponseError`: an HTML page,
        no ``choices``) counts as an unparsable attempt. A step the domain's rules fix
        (:meth:`Domain.rule_state`) sends no request: its prediction has no completion and 0 attempts.

        When it raises (or is cancelled), the answers it did receive are handed to
        :meth:`Backend.discard`: the step will be asked again, so they were never used.

        Raises:
            ResponseFormatError: every attempt was unparsable and the policy is ``"raise"``.
            BackendError: the backend failed (unreachable server, prompt too long...).
        """
        received: list[Completion] = []
        try:
            return await self._apredict(
                received, task, history, demonstrations, state, action, admissible_actions, seed, episode_id
            )
        except BaseException:
            self.backend.discard(received)
            raise

    async def _apredict(
        self,
        received: list[Completion],
        task: Task,
        history: Sequence[Step],
        demonstrations: Sequence[Transition],
        state: str,
        action: str,
        admissible_actions: Sequence[str],
        seed: int | None,
        episode_id: str | None,
    ) -> Prediction:
        """:meth:`apredict`, appending each completion to ``received`` as it arrives."""
        start = time.perf_counter()
        memo = self.memo
        fingerprint = functools.cache(  # a step the rules answer needs no fingerprint
            lambda: task_fingerprint(task.task_id, task.instruction, self.domain.hidden_facts(task))
        )
        known: tuple[tuple[AnsweredBy, Callable[[], ExperienceOutput | None]], ...] = (
            ("rule", lambda: self._ruled(task, history, state, action)),
            ("replay", lambda: self._replayed(task, fingerprint(), demonstrations, state, action)),
        )
        for answered_by, answer_of in known:  # the first that answers; the rest are not looked up
            answer = answer_of()
            if answer is None:
                continue
            output, _ = self._complete(answer, task, history, state, action)
            if output is not None:  # no request
                return Prediction(
                    output, None, 0, None, parse_s=time.perf_counter() - start, answered_by=answered_by
                )

        outcomes = self.domain.outcomes(task, history, state, action) if self.config.guided_answers else None
        if outcomes is not None and len(outcomes) == 1:  # it cannot succeed: nothing to ask
            output, _ = self._complete(self._as_output(outcomes[0]), task, history, state, action)
            if output is not None:
                return Prediction(
                    output, None, 0, None, parse_s=time.perf_counter() - start, answered_by="rule"
                )
        step_facts = self.domain.describe_step(task, history, state, action)
        key = memo_key(fingerprint(), self._shown(history), state, action, step_facts)
        fits = functools.partial(
            self._fits, outcomes=outcomes, task=task, history=history, state=state, action=action
        )
        remembered = None if memo is None else memo.get(key)
        if remembered is not None and fits(remembered):
            rejudged = self._rejudged(remembered, task, history, state, action)
            if rejudged is not None:
                return Prediction(rejudged, None, 0, None, answered_by="memo")
        request = self.build_request(
            task, history, demonstrations, state, action, admissible_actions, seed, episode_id, step_facts
        )
        if outcomes:  # the model chooses among them
            request = replace(request, choices=tuple(outcomes))
        elif self.config.guided_answers:  # it writes what the step shows, in the form the domain gives
            pattern = self.domain.answer_pattern(task, history, state, action)
            request = replace(request, pattern=pattern)
            if pattern is not None and self.config.reveal_temperature is not None:
                request = replace(request, temperature=self.config.reveal_temperature)
        build_s = time.perf_counter() - start

        def ask() -> Awaitable[Prediction]:
            return self._ask(received, request, build_s, task, history, state, action)

        if memo is None:
            return await ask()
        prediction, shared = await memo.share(key, ask)
        if not shared:
            if prediction.output is not None:
                memo.put(key, prediction.output)
            return prediction
        rejudged = (
            None
            if prediction.output is None or not fits(prediction.output)
            else self._rejudged(prediction.output, task, history, state, action)
        )
        if rejudged is None:  # the identical request in flight got nothing usable: ask anew
            return await ask()
        return Prediction(rejudged, None, 0, None, answered_by="memo")

    def _fits(
        self,
        known: ExperienceOutput,
        *,
        outcomes: Sequence[str] | None,
        task: Task,
        history: Sequence[Step],
        state: str,
        action: str,
    ) -> bool:
        """Whether an answer given in another episode keeps to this episode's guide (:attr:`EnvConfig.guided_answers`).

        The memo's key holds what the model is shown, not what the domain's guide asks of the answer,
        and the guide may read more of the episode: a new room must not take a name this episode gave
        another room, though an episode that had not seen that room was right to use it. An answer
        that is none of this step's outcomes, or out of its form, is asked for again.
        """
        if not self.config.guided_answers:
            return True
        answer = self.domain.state_answer(state, known.next_state)
        if outcomes:
            return answer in outcomes
        pattern = self.domain.answer_pattern(task, history, state, action)
        return pattern is None or re.fullmatch(pattern, answer) is not None

    def _rejudged(
        self, known: ExperienceOutput, task: Task, history: Sequence[Step], state: str, action: str
    ) -> ExperienceOutput | None:
        """An answer given in another episode, judged again with this episode's history.

        The memo's key holds what the model is shown, which need not include the whole episode; whether
        a step wins does depend on it (a quest done earlier in one episode and not in the other).
        """
        output, _ = self._complete(known, task, history, state, action)
        return output

    def _shown(self, history: Sequence[Step]) -> list[Step]:
        """The part of ``history`` the prompt shows (:attr:`EnvConfig.history_window`)."""
        window = self.config.history_window
        return list(history) if window is None else list(history)[len(history) - window :] if window else []

    async def _ask(
        self,
        received: list[Completion],
        request: CompletionRequest,
        build_s: float,
        task: Task,
        history: Sequence[Step],
        state: str,
        action: str,
    ) -> Prediction:
        """The model's answer to ``request``, asked again while it is unparsable (``parse_retries``)."""
        parse_s = model_s = 0.0
        completion: Completion | None = None
        error = ""
        attempts = self.config.parse_retries + 1
        first_seed = request.seed
        for attempt in range(attempts):
            if attempt:  # a new draw: another seed, and sampled even when the backend decodes greedily
                seed = None if first_seed is None else first_seed + attempt
                request = replace(request, seed=seed, temperature=self.config.retry_temperature)
            start = time.perf_counter()
            try:
                completion = await self.backend.acomplete(request)
            except InvalidResponseError as e:  # answered, but not with a completion: as unparsable
                completion, output, error = None, None, str(e)
                model_s += time.perf_counter() - start
            else:
                received.append(completion)
                model_s += completion.latency_s
                full = _context_full(
                    completion, getattr(getattr(self.backend, "config", None), "max_tokens", None)
                )
                if full:  # the same prompt would fill the context again: never send it twice
                    raise PromptTooLongError(full)
                start = time.perf_counter()
                output, error = _parse(completion, self.config)
                if output is not None:
                    error = _unguided(output.next_state, request)
                    output = None if error else output
                if output is not None:
                    output, error = self._complete(output, task, history, state, action)
                parse_s += time.perf_counter() - start
            if output is not None:
                answered_by: AnsweredBy = "chosen" if request.choices else "model"
                return Prediction(
                    output, completion, attempt + 1, None, build_s, parse_s, model_s, received, answered_by
                )
            if attempt + 1 < attempts:
                logger.warning(
                    "Unparsable transition from %s (attempt %d of %d): %s; asking again",
                    self.backend.describe(),
                    attempt + 1,
                    attempts,
                    error,
                )
        if self.config.on_invalid_output == "raise":
            raise ResponseFormatError(
                f"The experience model gave no valid transition in {attempts} attempts ({self.backend.describe()}). "
                f"Last problem: {error}. Use a stronger model, raise max_tokens or parse_retries, or set "
                "on_invalid_output='fail_state' to continue the episode with reward 0.",
                raw_output=completion.text if completion else None,
            )
        logger.warning(
            "No valid transition from %s in %d attempts (last problem: %s); on_invalid_output='fail_state' "
            "keeps the state, reward 0",
            self.backend.describe(),
            attempts,
            error,
        )
        return Prediction(None, completion, attempts, error, build_s, parse_s, model_s, received)

    @staticmethod
    def _as_output(next_state: str) -> ExperienceOutput:
        return ExperienceOutput(reasoning="", next_state=next_state, done=False, success=False)

    def _ruled(self, task: Task, history: Sequence[Step], state: str, action: str) -> ExperienceOutput | None:
        """The answer the domain's rules fix for this step (:meth:`Domain.rule_state`), if they fix it."""
        ruled = self.domain.rule_state(task, history, state, action)
        return None if ruled is None else self._as_output(ruled)

    def _replayed(
        self, task: Task, fingerprint: str, demonstrations: Sequence[Transition], state: str, action: str
    ) -> ExperienceOutput | None:
        """A real transition of this very step, as an answer (see :attr:`EnvConfig.replay_real`).

        One added to the memo (:meth:`StepMemo.add_real`), else one among the demonstrations. Only in
        a deterministic domain, and only a recorded one (``real`` or ``offline``): a simulated
        transition is the model's own guess. The ending is still ruled by :meth:`_complete`, as for a model's answer.
        """
        if not (
            self.config.replay_real and self.config.setting == "privileged" and self.domain.deterministic
        ):
            return None
        recorded = None if self.memo is None else self.memo.real(fingerprint, state, action)
        if recorded is not None:
            cap = self.config.max_admissible_actions
            return recorded.model_copy(update={"admissible_actions": recorded.admissible_actions[:cap]})
        fact_keys = self.domain.task_fact_keys
        for demo in demonstrations:
            if (
                demo.source != "sim"
                and (demo.state, demo.action) == (state, action)
                and task_fingerprint(demo.task_id, demo.task, facts_shown(demo.task_metadata, fact_keys))
                == fingerprint
            ):
                return ExperienceOutput(
                    reasoning="",
                    next_state=demo.next_state,
                    admissible_actions=demo.admissible_actions[: self.config.max_admissible_actions],
                    done=demo.done,
                    success=demo.success,
                )
        return None

    def _complete(
        self, output: ExperienceOutput, task: Task, history: Sequence[Step], state: str, action: str
    ) -> tuple[ExperienceOutput | None, str]:
        """The answer as a whole transition: the domain completes the state and, where it can, rules its ending.

        See :meth:`Domain.judge_step`; a domain that lists actions lists them for the completed state.
        """
        try:
            next_state = self.domain.complete_state(state, output.next_state)
        except ValueError as e:
            return None, f"next_state is not an answer after the current state: {e}"
        if len(next_state) > self.config.max_state_chars:
            return (
                None,
                f"the completed next_state has {len(next_state)} characters, over max_state_chars={self.config.max_state_chars}",
            )
        update: dict[str, object] = {}
        outcome = self.domain.judge_step(task, history, state, action, next_state)
        if outcome is not None:
            next_state = outcome.next_state
            update.update(done=outcome.done, success=outcome.success)
        update["next_state"] = next_state
        listed = self.domain.admissible_actions(next_state, task) if self.domain.lists_actions else None
        if listed is not None:
            update["admissible_actions"] = listed[: self.config.max_admissible_actions]
        return output.model_copy(update=update), ""


def _strip_controls(value: object) -> object:
    """Drop control characters from every string of a parsed answer.

    JSON forbids them raw and the env's spaces reject them, yet structured-decoding grammars let some
    through (DEL, raw C0 bytes). They carry no text, so dropping them loses nothing.
    """
    if isinstance(value, str):
        return CONTROL_CHARACTERS.sub("", value)
    if isinstance(value, list):
        return [_strip_controls(v) for v in value]
    if isinstance(value, dict):
        return {k: _strip_controls(v) for k, v in value.items()}
    return value


def _context_full(completion: Completion, budget: int | None) -> str:
    """Why an answer stopped at the model's context rather than at ``max_tokens`` ("" if it did not).

    A ``length`` finish means one of two things: the answer used its whole ``max_tokens`` budget (a
    long or rambling answer), or the prompt left less room than that in the served context and the
    answer hit the end of the context first. Only the token counts tell them apart, and the advice
    differs: more ``max_tokens`` cannot help the second.
    """
    used = completion.completion_tokens
    if completion.extra.get("finish_reason") != "length" or budget is None or used is None or used >= budget:
        return ""
    return (
        f"The model's context is full: the prompt took {completion.prompt_tokens} tokens, leaving room for "
        f"{used} of the {budget} answer tokens asked for ({completion.endpoint}). Shorten the prompt "
        "(lower history_window or top_k) or serve the model with a larger --max-model-len; raising "
        "max_tokens or parse_retries cannot help."
    )


def _unguided(answer: str, request: CompletionRequest) -> str:
    """Why an answer decoded under the request's choice or pattern does not keep to it ("" if it does).

    Structured decoding makes it keep to it; a server that ignores the request's ``structured_outputs``
    (one that is not vLLM's) may not, and its answer is then refused rather than trusted.
    """
    fix = "the server did not apply vLLM's structured_outputs: serve the model with vLLM, or set guided_answers=False"
    if request.choices and answer not in request.choices:
        return f"the answer {answer[:80]!r} is none of the {len(request.choices)} outcomes to choose from ({fix})"
    if request.pattern and re.fullmatch(request.pattern, answer) is None:
        return f"the answer {answer[:80]!r} does not have the form the domain gives ({fix})"
    return ""


def _parse(completion: Completion, config: EnvConfig) -> tuple[ExperienceOutput | None, str]:
    if completion.extra.get("finish_reason") == "length":
        return None, f"the answer was cut at max_tokens ({len(completion.text)} chars)"
    if config.answer_format == "state":
        return _parse_state(completion.text, config)
    try:
        output = ExperienceOutput.model_validate(_strip_controls(json.loads(completion.text, strict=False)))
    except json.JSONDecodeError as e:
        snippet = completion.text[:200].replace("\n", " ")
        return None, f"not valid JSON ({e.msg} at char {e.pos}): {snippet!r}"
    except ValidationError as e:
        snippet = completion.text[:200].replace("\n", " ")
        return (
            None,
            f"not a valid transition JSON ({e.error_count()} errors, e.g. {e.errors()[0]['msg']}): {snippet!r}",
        )
    if not output.next_state.strip():
        return None, "next_state is empty"
    too_long = _over_caps(output, config)
    if too_long:
        return None, too_long
    return output, ""


def _parse_state(text: str, config: EnvConfig) -> tuple[ExperienceOutput | None, str]:
    """A plain-text answer: the next state alone; the domain completes it, lists actions and rules the end."""
    state = str(_strip_controls(text)).strip()
    if not state:
        return None, "the answer is empty"
    output = ExperienceOutput(reasoning="", next_state=state, done=False, success=False)
    too_long = _over_caps(output, config)
    return (None, too_long) if too_long else (output, "")


def _over_caps(output: ExperienceOutput, config: EnvConfig) -> str:
    """Which length cap the answer breaks ("" if none): the caps the schema may not carry."""
    if len(output.next_state) > config.max_state_chars:
        return f"next_state has {len(output.next_state)} characters, over max_state_chars={config.max_state_chars}"
    if len(output.reasoning) > config.max_reasoning_chars:
        return f"reasoning has {len(output.reasoning)} characters, over max_reasoning_chars={config.max_reasoning_chars}"
    longest = max((len(a) for a in output.admissible_actions), default=0)
    if longest > config.max_action_chars:
        return (
            f"an admissible action has {longest} characters, over max_action_chars={config.max_action_chars}"
        )
    return ""
