"""AgentGym / ETO conversation records: ``{"conversations": [{"from": ..., "value": ...}, ...]}``.

A file is a JSON list of records or a JSONL file with one record per line. Each record is one episode:
``from`` is ``human`` (the environment: instructions and observations) or ``gpt`` (the agent). Records
usually start with an instruction turn answered by a short acknowledgement (``OK``); those two turns are
a preamble, not a transition. After it, each (human observation, gpt reply, human observation) triple is
one transition. The agent's reply is split into its thought and its action: the text after the last
``Action:`` marker is the action, anything before it is kept as ``agent_thought`` in the metadata. An
agent reply with no observation after it (the final ``buy now``) gives a last transition with an empty
next state. A record's ``reward`` or ``success`` field, when present, goes to its last transition.

The domain comes from the loader's ``domain`` argument, else from the record id (``item_id`` or ``id``,
e.g. ``webshop_12`` gives ``webshop``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dreamgym_env.buffer.loaders.base import LoadIssue, Record, iter_json_lines, json_document, read_text
from dreamgym_env.records import Task, Transition

_ACTION = re.compile(r"action\s*:\s*", re.IGNORECASE)
_THOUGHT = re.compile(r"^\s*thought\s*:\s*", re.IGNORECASE)


def _split_thought_action(reply: str) -> tuple[str, str]:
    """Split an agent reply into (thought, action); a reply with no ``Action:`` marker is all action."""
    matches = list(_ACTION.finditer(reply))
    if not matches:
        return "", reply.strip()
    last = matches[-1]
    return _THOUGHT.sub("", reply[: last.start()]).strip(), reply[last.end() :].strip()


def _record_transitions(record: Any, index: int, domain: str | None) -> list[Transition]:
    if not isinstance(record, dict) or not isinstance(record.get("conversations"), list):
        raise ValueError("expected an object with a 'conversations' list")
    turns = record["conversations"]
    for turn in turns:
        if not (
            isinstance(turn, dict)
            and turn.get("from") in ("human", "gpt")
            and isinstance(turn.get("value"), str)
        ):
            raise ValueError("every turn needs 'from' ('human' or 'gpt') and a string 'value'")
    record_id = str(record.get("item_id") or record.get("id") or f"record-{index}")
    if domain is None:
        prefix = re.match(r"^([A-Za-z]+)", record_id)
        if not prefix or record_id.startswith("record-"):
            raise ValueError("record has no 'item_id'/'id' naming its domain; pass a domain to the loader")
        domain = prefix.group(1).lower()
    start = 0
    if (
        len(turns) >= 3
        and turns[0]["from"] == "human"
        and turns[1]["from"] == "gpt"
        and turns[2]["from"] == "human"
    ):
        start = 2  # instruction + acknowledgement preamble
    if start >= len(turns) or turns[start]["from"] != "human":
        raise ValueError("expected the first turn after the preamble to be a human observation")
    task = turns[start]["value"].strip()
    reward = record.get("reward")
    success = record.get("success")
    goal = Task(task_id=f"{domain}:{record_id}", domain=domain, instruction=task)
    transitions: list[Transition] = []
    i = start
    while i + 1 < len(turns):
        state, reply = turns[i], turns[i + 1]
        if state["from"] != "human" or reply["from"] != "gpt":
            raise ValueError(f"turns {i} and {i + 1} should be a human observation then a gpt reply")
        thought, action = _split_thought_action(reply["value"])
        has_next = i + 2 < len(turns)
        done = not has_next
        final_reward = float(reward) if done and isinstance(reward, int | float) else 0.0
        transitions.append(
            Transition.of_step(
                goal,
                episode_id=f"agentgym:{record_id}",
                step=len(transitions),
                state=state["value"].strip(),
                action=action,
                next_state=turns[i + 2]["value"].strip() if has_next else "",
                reward=final_reward,
                done=done,
                success=bool(done and (success if success is not None else final_reward >= 1.0)),
                source="offline",
                metadata={"origin": "agentgym", **({"agent_thought": thought} if thought else {})},
            )
        )
        i += 2
    if not transitions:
        raise ValueError("no (observation, action) turns")
    return transitions


def load_agentgym(path: Path, *, domain: str | None = None) -> Iterator[Record | LoadIssue]:
    """Yield one record per conversation in a JSON list or JSONL file."""
    if path.suffix == ".jsonl":
        for number, obj in iter_json_lines(path):
            if isinstance(obj, LoadIssue):
                yield obj
                continue
            try:
                yield Record(_record_transitions(obj, number, domain), str(path), number)
            except ValueError as e:
                yield LoadIssue(str(path), number, f"{e}; record skipped")
        return
    records = json_document(path, read_text(path), list, "a JSON list of conversation records")
    if isinstance(records, LoadIssue):
        yield records
        return
    for index, record in enumerate(records):
        try:
            yield Record(_record_transitions(record, index, domain), str(path), None)
        except ValueError as e:
            yield LoadIssue(str(path), None, f"record #{index}: {e}; skipped")
