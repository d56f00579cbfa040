"""Remembered steps of a deterministic world: a repeated step is answered without a request.

RL training revisits the same few states of a game thousands of times (64 envs on 64 games, 10,000
steps), and in a deterministic domain (:attr:`Domain.deterministic`) a step's outcome is a function of
the task, the state and the action. So once a step is known, its repeats need no model call:

* a recorded real transition (:meth:`StepMemo.add_real`) is what the world does; it answers the same
  (task, state, action) whatever history led there, and is never dropped;
* the model's accepted answer answers the same request again: keyed by the task, the history the
  model is shown (``EnvConfig.history_window``), the state, the action and the step's facts
  (:meth:`Domain.describe_step`, which may depend on the whole episode). Under greedy decoding this
  is what the model would answer anyway (up to the server's batching noise); under sampling it keeps
  the simulated world consistent with itself. The least recently used of these are dropped past
  ``max_size``.

A task is known by its content (:func:`task_fingerprint`: id, instruction and the facts the model is
shown), not by its id alone: two games saved under the same file name are two tasks to the memo.
The memo keeps states, not verdicts: the experience model judges a remembered answer again with the
episode that reached it (a win depends on the whole episode, which the key need not show).

Concurrent asks for one step (sub-envs of a vector env on the same game) share one request: the first
asks, the others wait for its answer (:meth:`StepMemo.share`). A memo never decides anything a
simulated transition is judged by: :class:`~dreamgym_env.experience.model.ExperienceModel` stores the
answer after the domain completed and judged it, and reports a reused answer as
``answered_by="memo"`` (``"replay"`` for a real one), so a run says how many steps the model made.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from dreamgym_env.domains.base import facts_shown
from dreamgym_env.errors import ConfigError
from dreamgym_env.experience.schema import ExperienceOutput
from dreamgym_env.records import Step, Transition

__all__ = ["MemoKey", "StepMemo", "task_fingerprint"]

MemoKey = tuple[str, tuple[tuple[str, str], ...], str, str, str]
"""(task fingerprint, shown history as (state, action) pairs, state, action, the step's facts)."""

T = TypeVar("T")


def task_fingerprint(task_id: str, instruction: str, facts: Mapping[str, Any]) -> str:
    """A task's identity as the simulator knows it: its id, instruction and the facts the model is shown.

    ``facts`` are :meth:`Domain.hidden_facts` of a task, or :attr:`Transition.task_metadata` of a
    stored step (the same facts, stored with it).
    """
    payload = json.dumps([task_id, instruction, facts], sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def memo_key(
    fingerprint: str, shown: Sequence[Step], state: str, action: str, step_facts: str = ""
) -> MemoKey:
    """The key of a step as the model is asked it (the history it is shown, not the whole episode)."""
    return (fingerprint, tuple((s.state, s.action) for s in shown), state, action, step_facts)


class StepMemo:
    """Known answers of a deterministic domain's steps, real ones first.

    Args:
        max_size: How many model answers to keep (least recently used dropped first); real
            transitions added with :meth:`add_real` are kept besides, all of them.
        fact_keys: The domain's :attr:`Domain.task_fact_keys`: the part of a real transition's
            :attr:`Transition.task_metadata` that tells its task apart (``None``: all of it, as the
            real wrappers and loaders store only those facts).

    Attributes:
        real_hits: Steps answered by an added real transition.
        hits: Steps answered by a remembered model answer.
        shared: Steps that waited for an identical step's request in flight instead of sending their own.
    """

    def __init__(self, max_size: int = 8_192, fact_keys: Sequence[str] | None = None) -> None:
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise ConfigError(f"max_size must be a positive int, got {max_size!r}")
        self.max_size = max_size
        self.fact_keys = None if fact_keys is None else tuple(fact_keys)
        self.real_hits = 0
        self.hits = 0
        self.shared = 0
        self._real: dict[tuple[str, str, str], ExperienceOutput] = {}  # (fingerprint, state, action)
        self._answers: OrderedDict[MemoKey, ExperienceOutput] = OrderedDict()
        self._lock = threading.Lock()
        self._inflight: dict[MemoKey, asyncio.Future[Any]] = {}

    def __len__(self) -> int:
        return len(self._real) + len(self._answers)

    def add_real(self, transitions: Iterable[Transition]) -> int:
        """Remember recorded transitions (``real`` and ``offline``; simulated ones are skipped); how many were new.

        Each belongs to the task of its id, instruction and the facts the model is shown
        (:meth:`Domain.hidden_facts`, read from :attr:`Transition.task_metadata`): a step of another
        game under the same id answers nothing.
        """
        added = 0
        with self._lock:
            for t in transitions:
                if t.source == "sim":
                    continue
                facts = (
                    t.task_metadata
                    if self.fact_keys is None
                    else facts_shown(t.task_metadata, self.fact_keys)
                )
                key = (task_fingerprint(t.task_id, t.task, facts), t.state, t.action)
                if key not in self._real:
                    added += 1
                self._real[key] = ExperienceOutput(
                    reasoning="",
                    next_state=t.next_state,
                    admissible_actions=list(t.admissible_actions),
                    done=t.done,
                    success=t.success,
                )
        return added

    def real(self, fingerprint: str, state: str, action: str) -> ExperienceOutput | None:
        """The recorded outcome of this step of the task with ``fingerprint``, if one was added."""
        found = self._real.get((fingerprint, state, action))
        if found is not None:
            self.real_hits += 1
        return found

    def get(self, key: MemoKey) -> ExperienceOutput | None:
        """The remembered model answer of this step, if any (it becomes the most recently used)."""
        with self._lock:
            found = self._answers.get(key)
            if found is not None:
                self._answers.move_to_end(key)
                self.hits += 1
        return found

    def put(self, key: MemoKey, output: ExperienceOutput) -> None:
        """Remember an accepted answer, dropping the least recently used past ``max_size``."""
        with self._lock:
            self._answers[key] = output
            self._answers.move_to_end(key)
            while len(self._answers) > self.max_size:
                self._answers.popitem(last=False)

    async def share(self, key: MemoKey, ask: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """``ask()``'s result, or that of an identical ask already in flight; and whether it was shared.

        Only asks from the same event loop share. A follower whose leader failed asks itself: the
        failure (a timeout, a cancelled step) belongs to the leader's step.
        """
        loop = asyncio.get_running_loop()
        leader = self._inflight.get(key)
        if leader is not None and leader.get_loop() is loop:
            try:
                result = await asyncio.shield(leader)
            except asyncio.CancelledError:
                if not leader.cancelled():
                    raise  # this follower itself was cancelled
            except Exception:  # noqa: S110 - the leader's failure is its own; ask below
                pass
            else:
                self.shared += 1
                return result, True
        future: asyncio.Future[Any] = loop.create_future()
        self._inflight[key] = future
        try:
            result = await ask()
        except Exception as e:
            future.set_exception(e)
            future.exception()  # retrieved: a failure no follower awaited must not be logged as lost
            raise
        except BaseException:
            future.cancel()
            raise
        else:
            future.set_result(result)
            return result, False
        finally:
            if self._inflight.get(key) is future:
                del self._inflight[key]

    def stats(self) -> dict[str, int]:
        """What the memo holds and how often it answered."""
        return {
            "real_transitions": len(self._real),
            "model_answers": len(self._answers),
            "real_hits": self.real_hits,
            "hits": self.hits,
            "shared": self.shared,
        }

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (vector envs send envs to subprocesses): the lock and requests in flight stay behind."""
        state = self.__dict__.copy()
        del state["_lock"], state["_inflight"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._inflight = {}
