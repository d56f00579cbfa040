"""WebShop's real trajectories: human session logs and imitation-learning trajectories.

**Human session logs** (``human_session_logs/<session>.jsonl``, as published with WebShop and AgentGym):
one JSON object per page the human visited, in order. Each has ``page`` (``index``, ``search_results``,
``item_page``, ``item_sub_page`` or ``done``), ``url``, ``goal`` (``instruction_text``, ``asin``,
``attributes``, ``goal_options``, ``price_upper``...) and, except on ``index``, ``content``
(``keywords``, ``search_result_asins``, ``page``, ``asin``, ``options``, ``price``); the ``done`` page
adds ``reward`` and ``reward_info``. The log records pages, not clicks, so the action of each pair of
consecutive pages is inferred from how the page changed (a new search, a result clicked, an option
picked, ``buy now``...). A reload (the same page twice) carries no action and is dropped. The file is one
episode: a session with N pages gives N - 1 transitions, minus reloads. The last transition (to
``done``) has the session's reward; ``success`` is reward 1.0, WebShop's definition. States are the
WebShop domain's format (:func:`_render_session_page`); the task id is the domain's
:func:`~dreamgym_env.domains.webshop.tasks.webshop_task_id` of the session, and ``metadata["task_metadata"]``
holds the goal as the session's task carries it (:func:`~dreamgym_env.domains.webshop.tasks.session_goal_metadata`,
the hidden facts the simulator is shown).

**Imitation-learning trajectories** (WebShop's ``il_trajs_finalized_images.jsonl``): one episode per
line, ``{"states": [str], "actions": [str], "available_actions": [[str]], "action_idxs": [int],
"images": [...]}``. Transition i is (states[i], actions[i], states[i + 1]); the last action (buying)
has no following page, so its next state is empty and it ends the episode. The file holds no reward;
an optional ``reward`` field is used when present.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from dreamgym_env.buffer.loaders.base import LoadIssue, Record, iter_json_lines
from dreamgym_env.domains import webshop
from dreamgym_env.domains.webshop.tasks import session_goal_metadata, webshop_task_id
from dreamgym_env.records import Task, Transition

_PAGES = {"index", "search_results", "item_page", "item_sub_page", "done"}
_SEARCH_RESULTS = 50  # WebShop's search returns its top 50 products, 10 a page; the log does not say


def _options(content: dict[str, Any]) -> dict[str, str]:
    raw = content.get("options") or {}
    if isinstance(raw, str):
        try:
            raw = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            return {}
    return {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}


def _keywords(content: dict[str, Any]) -> str:
    words = content.get("keywords") or []
    if isinstance(words, str):
        try:
            words = ast.literal_eval(words)
        except (ValueError, SyntaxError):
            return words
    return " ".join(str(w) for w in words)


def _sub_page(url: str) -> str:
    match = re.search(r"/([A-Za-z ]+)/[^/]*$", unquote(url))
    return match.group(1).lower() if match else "description"


def _render_session_page(page: dict[str, Any], reward: float | None = None) -> str:
    """Write a logged page as the WebShop domain's state, with the domain's ``render_*`` functions.

    The state is the page the simulator (and the real wrapper) would show, less what the log does not
    record: result titles and prices (results are listed as ``[asin]``), an item's title, price and
    option groups, and a sub-page's text. A results page is written with WebShop's 50 results a
    search.
    """
    kind = page["page"]
    content = page.get("content") or {}
    goal = page.get("goal") or {}
    instruction = str(goal.get("instruction_text") or "").strip()
    if kind == "index":
        return webshop.render_search_page(instruction)
    if kind == "search_results":
        asins = [str(a) for a in content.get("search_result_asins") or []]
        number = int(content.get("page") or 1)
        return webshop.render_results_page(
            instruction,
            _keywords(content),
            [(a, "", "") for a in asins],
            page=number,
            total_results=max(_SEARCH_RESULTS, (number - 1) * 10 + len(asins)),
        )
    asin = str(content.get("asin", "?"))
    if kind == "item_page":
        return webshop.render_item_page(instruction, asin, "", "", selected=_options(content))
    if kind == "item_sub_page":
        return webshop.render_sub_page(instruction, asin, _sub_page(page.get("url", "")))
    return webshop.render_done_page(instruction, asin, _options(content), reward)


def _purchase(page: dict[str, Any]) -> dict[str, Any]:
    """What the ``done`` page records beyond its state: the price paid and WebShop's reward breakdown."""
    content = page.get("content") or {}
    extra: dict[str, Any] = {}
    if content.get("price") is not None:
        extra["price"] = float(content["price"])
    if "reward_info" in page:
        extra["reward_info"] = page["reward_info"]
    return extra


def _infer_action(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    a, b = before["page"], after["page"]
    ca, cb = before.get("content") or {}, after.get("content") or {}
    if b == "index":
        return "click[back to search]"
    if b == "done":
        return "click[buy now]"
    if b == "search_results":
        if a == "index" or _keywords(ca) != _keywords(cb):
            return f"search[{_keywords(cb)}]"
        pa, pb = int(ca.get("page") or 1), int(cb.get("page") or 1)
        if pb > pa:
            return "click[next >]"
        return "click[< prev]"
    if b == "item_page":
        if a == "search_results":
            return f"click[{str(cb.get('asin', '')).lower()}]"
        if a == "item_sub_page":
            return "click[< prev]"
        if a == "item_page":
            old, new = _options(ca), _options(cb)
            changed = [v for k, v in new.items() if old.get(k) != v]
            if changed:
                return f"click[{changed[0]}]"
        return None
    if b == "item_sub_page" and a in ("item_page", "item_sub_page"):
        return f"click[{_sub_page(after.get('url', ''))}]"
    return None


def load_webshop_session(path: Path, *, domain: str | None = None) -> Iterator[Record | LoadIssue]:
    """Yield the session in ``path`` as one record (or the issue that spoils it)."""
    pages: list[tuple[int, dict[str, Any]]] = []
    for number, obj in iter_json_lines(path):
        if isinstance(obj, LoadIssue):
            yield LoadIssue(obj.path, obj.line, f"{obj.message}; session skipped")
            return
        if (
            not isinstance(obj, dict)
            or obj.get("page") not in _PAGES
            or not isinstance(obj.get("goal"), dict)
        ):
            yield LoadIssue(
                str(path),
                number,
                f"expected a page record with 'page' in {sorted(_PAGES)} and a 'goal' object; session skipped",  # noqa: E501
            )
            return
        pages.append((number, obj))
    if not pages:
        yield LoadIssue(str(path), None, "no page records; session skipped")
        return
    goal = pages[0][1]["goal"]
    instruction = str(goal.get("instruction_text") or "")
    if not instruction:
        yield LoadIssue(str(path), pages[0][0], "goal has no 'instruction_text'; session skipped")
        return
    session = path.stem
    task = Task(
        task_id=webshop_task_id(session),
        domain=domain or "webshop",
        instruction=instruction,
        metadata=session_goal_metadata(goal),
    )
    transitions: list[Transition] = []
    for (_, before), (number, after) in zip(pages, pages[1:], strict=False):
        reward = float(after.get("reward", 0.0)) if after["page"] == "done" else None
        state, next_state = _render_session_page(before), _render_session_page(after, reward)
        if state == next_state:
            continue  # a reload: no action happened
        action = _infer_action(before, after)
        if action is None:
            yield LoadIssue(
                str(path),
                number,
                f"cannot tell which action leads from a {before['page']} page to this "
                f"{after['page']} page; session skipped",
            )
            return
        done = after["page"] == "done"
        transitions.append(
            Transition.of_step(
                task,
                episode_id=f"webshop-session:{session}",
                step=len(transitions),
                state=state,
                action=action,
                next_state=next_state,
                reward=reward or 0.0,
                done=done,
                success=done and (reward or 0.0) >= 1.0,
                source="offline",
                prev_admissible_actions=webshop.page_actions(state),
                admissible_actions=webshop.page_actions(next_state),
                metadata={"origin": "webshop-human-session", **(_purchase(after) if done else {})},
            )
        )
    yield Record(transitions, str(path), pages[0][0])


def _instruction_of(state: str) -> str:
    match = re.search(r"instruction:\s*(?:\[sep\]\s*)?(.+?)(?:\s*\[sep\]|\n|$)", state, re.IGNORECASE)
    return match.group(1).strip() if match else ""


def load_webshop_il(path: Path, *, domain: str | None = None) -> Iterator[Record | LoadIssue]:
    """Yield one record per imitation-learning trajectory line."""
    for number, obj in iter_json_lines(path):
        if isinstance(obj, LoadIssue):
            yield obj
            continue
        states, actions = (obj.get("states"), obj.get("actions")) if isinstance(obj, dict) else (None, None)
        if not (isinstance(states, list) and isinstance(actions, list) and actions):
            yield LoadIssue(
                str(path), number, "expected an object with non-empty 'states' and 'actions' lists"
            )
            continue
        if len(states) not in (len(actions), len(actions) + 1) or not all(
            isinstance(x, str) for x in [*states, *actions]
        ):
            yield LoadIssue(
                str(path),
                number,
                f"'states' ({len(states)}) must be strings, as many as 'actions' ({len(actions)}) or one more",  # noqa: E501
            )
            continue
        instruction = _instruction_of(states[0])
        episode = hashlib.blake2b(f"{path.name}:{number}".encode(), digest_size=8).hexdigest()
        reward = float(obj.get("reward", 0.0))
        transitions = []
        for i, action in enumerate(actions):
            done = i == len(actions) - 1
            transitions.append(
                Transition(
                    domain=domain or "webshop",
                    task_id=f"webshop-instruction:{hashlib.blake2b(instruction.encode(), digest_size=6).hexdigest()}",  # noqa: E501
                    task=instruction,
                    episode_id=f"webshop-il:{episode}",
                    step=i,
                    state=states[i],
                    action=action,
                    next_state=states[i + 1] if i + 1 < len(states) else "",
                    reward=reward if done else 0.0,
                    done=done,
                    success=done and reward >= 1.0,
                    source="offline",
                    metadata={"origin": "webshop-il", "line": number},
                )
            )
        yield Record(transitions, str(path), number)
