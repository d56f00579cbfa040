"""Policies for collecting real MiniWoB transitions: scripted solutions and a random clicker.

Both read the observation text only (BrowserGym's listing, as ``DreamGym/MiniWoB-Real-v0`` writes it),
so a solved task also shows that the observation carries what the task needs. The scripted solutions
cover :data:`SOLVED_TASKS`; :func:`random_action` plays any page from its interactive elements (the
open action space listed, as an SB3-style policy would need it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

_LINE = re.compile(r"^(\t*)(?:\[(\w+)\] )?(\w+)(?: '((?:[^'\\]|\\.)*)'| \"((?:[^\"\\]|\\.)*)\")?(.*)$")


@dataclass(frozen=True)
class Node:
    """One line of the listing."""

    depth: int
    bid: str | None
    role: str
    name: str
    props: str
    label: str  # the name, or for an unnamed node the text of its StaticText children


def nodes(state: str) -> list[Node]:
    """The listing's lines under the tab and URL header, parsed."""
    raw = []
    for line in state.splitlines()[2:]:
        m = _LINE.match(line)
        if m:
            raw.append((len(m.group(1)), m.group(2), m.group(3), m.group(4) or m.group(5) or "", m.group(6)))
    out = []
    for i, (depth, bid, role, name, props) in enumerate(raw):
        label = name
        if not label:
            texts = []
            for d, _, r, n, _ in raw[i + 1 :]:
                if d <= depth:
                    break
                if r == "StaticText" and d == depth + 1:
                    texts.append(n)
            label = " ".join(texts)
        out.append(Node(depth, bid, role, name, props, label))
    return out


def find(state: str, role: str, label: str | None = None, nth: int = 0) -> str:
    """The bid of the ``nth`` element of ``role`` (with ``label``, if given)."""
    hits = [
        n.bid
        for n in nodes(state)
        if n.role == role and n.bid and (label is None or n.label.strip(" .,;:") == label)
    ]
    if len(hits) <= nth:
        raise AssertionError(f"no {role} {label!r} (#{nth}) in:\n{state}")
    return str(hits[nth])


def _quoted(utterance: str) -> list[str]:
    return re.findall(r'"([^"]*)"', utterance)


def _utterance_match(pattern: str, utterance: str) -> str:
    """The part of ``utterance`` that ``pattern``'s group captures; an utterance of another form fails."""
    match = re.search(pattern, utterance)
    assert match, utterance
    return match.group(1)


def _fill_two_and_press(state: str, first: str, second: str, button: str) -> list[str]:
    """Fill the page's first two text boxes, then press ``button`` (a password and its repeat, a login)."""
    return [
        f"fill('{find(state, 'textbox', nth=0)}', '{first}')",
        f"fill('{find(state, 'textbox', nth=1)}', '{second}')",
        f"click('{find(state, 'button', button)}')",
    ]


def _one_click(utterance: str, task: str) -> tuple[str, str | None, int] | None:
    """The role, label and index of the element a one-click task clicks (``None``: not a one-click task)."""
    if task == "click-button":
        return "button", _quoted(utterance)[0], 0
    if task == "click-link":
        return "generic", _quoted(utterance)[0], 0
    if task == "click-test-2":
        return "button", _utterance_match(r"Click button (\w+)", utterance), 0
    if task == "click-dialog":
        return "button", "Close", 0
    if task == "focus-text":
        return "textbox", None, 0
    if task == "focus-text-2":
        return "textbox", None, int(_utterance_match(r"(\d+)(?:st|nd|rd|th)", utterance)) - 1
    return None


def _plan(utterance: str, state: str, task: str) -> list[str]:
    target = _one_click(utterance, task)
    if target is not None:
        role, label, nth = target
        return [f"click('{find(state, role, label, nth)}')"]
    q = _quoted(utterance)
    if task in ("click-checkboxes", "click-option"):
        picked = _utterance_match(r"Select (.*) and click Submit", utterance)
        words = [] if picked == "nothing" else [w.strip() for w in picked.split(",")]
        role = "checkbox" if task == "click-checkboxes" else "radio"
        clicks = [f"click('{find(state, role, w)}')" for w in words if w]
        return [*clicks, f"click('{find(state, 'button', 'Submit')}')"]
    if task == "enter-text":
        return [f"fill('{find(state, 'textbox')}', '{q[0]}')", f"click('{find(state, 'button', 'Submit')}')"]
    if task == "enter-password":
        return _fill_two_and_press(state, q[0], q[0], "Submit")
    if task == "login-user":
        return _fill_two_and_press(state, q[0], q[1], "Login")
    if task == "choose-list":
        item = _utterance_match(r"Select (.*) from the list", utterance)
        return [
            f"select_option('{find(state, 'combobox')}', '{item}')",
            f"click('{find(state, 'button', 'Submit')}')",
        ]
    raise KeyError(task)


SOLVED_TASKS: tuple[str, ...] = (
    # the first seven are the real env's default tasks (engine.DEFAULT_MINIWOB_TASKS)
    "click-button",
    "click-link",
    "click-checkboxes",
    "enter-text",
    "focus-text",
    "login-user",
    "choose-list",
    "click-dialog",
    "click-option",
    "enter-password",
    "click-test-2",
    "focus-text-2",
)
"""The MiniWoB tasks :func:`solution` solves from the first page, in the order they were solved."""


def solution(task: str, utterance: str, first_state: str) -> list[str]:
    """The actions that solve MiniWoB ``task`` from its first page (planned once, from that page).

    Raises:
        KeyError: ``task`` is not one of :data:`SOLVED_TASKS`.
        AssertionError: The page or utterance does not read as the task's (an element is missing).
    """
    return _plan(utterance, first_state, task)


_WORDS = ("yes", "no", "submit", "hello", "Kasey", "11L", "ok")
_CLICKABLE = frozenset({"button", "link", "checkbox", "radio", "textbox", "option", "tab", "menuitem"})


def interactive_actions(state: str) -> list[str]:
    """Every action on the page's interactive elements: clicks, a few fills, each option of a list.

    ``generic`` elements with text count as clickable (MiniWoB's links are ``<span>``s).
    """
    actions = []
    for node in nodes(state):
        if not node.bid:
            continue
        if node.role in _CLICKABLE or (node.role == "generic" and node.label and not node.name):
            actions.append(f"click('{node.bid}')")
        if node.role == "textbox":
            actions += [f"fill('{node.bid}', '{word}')" for word in _WORDS[:3]]
        if node.role == "combobox":
            options = [n.label for n in nodes(state) if n.role == "option"]
            actions += [f"select_option('{node.bid}', {o!r})" for o in options]
    return actions


def random_action(state: str, rng: np.random.Generator) -> str:
    """One of :func:`interactive_actions`, uniformly; ``noop()`` on a page without any."""
    actions = interactive_actions(state)
    return actions[int(rng.integers(len(actions)))] if actions else "noop()"
