"""WebShop: an online store where the agent searches, compares and buys one product for a written goal.

This module owns WebShop's formats: the page renderers (``render_*``), the admissible actions of a
page (:func:`page_actions`), the goal's hidden-fact keys (:data:`GOAL_FACT_KEYS`) and categories
(:data:`WEBSHOP_CATEGORIES`). Task files, task ids and a recorded goal's metadata are
:mod:`~dreamgym_env.domains.webshop.tasks`' (:meth:`WebShopDomain.load_tasks`). What uses them: the real env in :mod:`dreamgym_env.domains.webshop.engine` with the text
parser in :mod:`dreamgym_env.real.mapping`; the session-log import in
:mod:`dreamgym_env.buffer.loaders.webshop`; the curriculum's ``WEBSHOP_FORMAT`` and
``validate_webshop`` (named in the domain table, :data:`dreamgym_env.domains.BUILTIN_DOMAINS`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

import numpy as np

from dreamgym_env.domains import BUILTIN_DOMAINS
from dreamgym_env.domains.base import Domain, InitialState
from dreamgym_env.domains.webshop.tasks import OPTIONS_KEY, load_webshop_goals
from dreamgym_env.records import Task

GOAL_FACT_KEYS: tuple[str, ...] = ("attributes", OPTIONS_KEY, "price_upper", "category")
"""The goal's hidden facts (task metadata keys) the experience model sees and the agent does not."""

WEBSHOP_CATEGORIES: frozenset[str] = frozenset({"fashion", "beauty", "grocery", "electronics", "garden"})
"""WebShop's five product categories (garden covers furniture and home), a goal's ``category``."""


_BRACKETED = re.compile(r"\[([^\[\]\n]+)\]")
_NO_ELEMENTS = ("Instruction:", "Title:", "Selected:", "Bought:", "Price:", "Reward:")


def page_actions(state: str) -> list[str]:
    """The admissible actions of a page written by the ``render_*`` functions, in page order.

    ``click[X]`` for each bracketed element; nothing on the search page (its query is free text) or
    after buying. On a results line only the product id is an element (``[B09QKP7XQL] title | price``)
    and a sub-page's text has none, so brackets in a title or a description are not elements.
    """
    lines = state.split("\n")
    if not lines or lines[0].startswith(("WebShop | search page", "WebShop | purchase complete")):
        return []
    if lines[0].startswith("WebShop | item ") and lines[0].count(" | ") >= 2:
        lines = lines[:3]  # a sub-page: its buttons, then free text
    elements: dict[str, None] = {}
    for line in lines[1:]:
        if line.startswith(_NO_ELEMENTS):
            continue
        found = _BRACKETED.findall(line)
        if found and line.startswith(f"[{found[0]}] ") and "|" in line:
            found = found[:1]  # a result row: its product id
        elements.update(dict.fromkeys(found))
    return [f"click[{element}]" for element in elements]


def render_search_page(instruction: str) -> str:
    """The store's start page: the goal and a search box."""
    return f"WebShop | search page\nInstruction: {instruction}\n[Search]"


def render_results_page(
    instruction: str,
    query: str,
    results: Sequence[tuple[str, str, str]],
    *,
    page: int = 1,
    total_results: int | None = None,
) -> str:
    """A page of search results.

    Args:
        instruction: The goal, repeated on every page as WebShop does.
        query: The search query.
        results: ``(asin, title, price)`` per product, ``price`` as shown (``"$12.99"`` or a range).
        page: 1-based page number; a ``[< Prev]`` button appears after page 1.
        total_results: Results over all pages (WebShop shows 10 a page); ``[Next >]`` appears when more
            pages remain.

    A product whose title and price are both ``""`` (a record that names only the product id) is
    listed as ``[asin]`` alone.
    """
    total = len(results) if total_results is None else total_results
    buttons = ["[Back to Search]"]
    if page > 1:
        buttons.append("[< Prev]")
    if page * 10 < total:
        buttons.append("[Next >]")
    lines = [
        f'WebShop | results for "{query}" | page {page} ({total} results)',
        f"Instruction: {instruction}",
        " ".join(buttons),
    ]
    lines += [
        f"[{asin}] {title} | {price}" if title or price else f"[{asin}]" for asin, title, price in results
    ]
    return "\n".join(lines)


def render_item_page(
    instruction: str,
    asin: str,
    title: str,
    price: str,
    options: Mapping[str, Sequence[str]] = {},  # noqa: B006 - read-only default
    selected: Mapping[str, str] = {},  # noqa: B006 - read-only default
    *,
    rating: str = "N.A.",
) -> str:
    """A product page: title, price, option groups (each value clickable) and the purchase buttons.

    An empty ``title`` or ``price`` (a record that does not name them) leaves out its line.
    """
    lines = [f"WebShop | item {asin}", f"Instruction: {instruction}", "[Back to Search] [< Prev]"]
    if title:
        lines.append(f"Title: {title}")
    if price:
        lines.append(f"Price: {price} | Rating: {rating}")
    lines += [f"{name}: " + " ".join(f"[{v}]" for v in values) for name, values in options.items()]
    if selected:
        lines.append("Selected: " + ", ".join(f"{k}={v}" for k, v in selected.items()))
    lines.append("[Description] [Features] [Reviews] [Buy Now]")
    return "\n".join(lines)


def render_sub_page(instruction: str, asin: str, sub_page: str = "", text: str = "") -> str:
    """A product's Description, Features or Reviews page (``sub_page``), with its text when known."""
    header = f"WebShop | item {asin} | {sub_page.lower()}" if sub_page else f"WebShop | item {asin}"
    lines = [header, f"Instruction: {instruction}", "[Back to Search] [< Prev]"]
    if text:
        lines.append(text)
    return "\n".join(lines)


def render_done_page(
    instruction: str,
    asin: str,
    selected: Mapping[str, str] = {},  # noqa: B006 - read-only default
    reward: float | None = None,
) -> str:
    """The page after buying: the product bought, the options selected and, when known, the reward."""
    chosen = ", ".join(f"{k}={v}" for k, v in selected.items()) or "none"
    lines = [
        "WebShop | purchase complete",
        f"Instruction: {instruction}",
        f"Bought: {asin} | options: {chosen}",
    ]
    if reward is not None:
        lines.append(f"Reward: {reward:.2f}")
    return "\n".join(lines)


_INSTRUCTIONS = """\
You simulate WebShop, an online store with over a million real Amazon products. An agent reads a \
shopping goal and must find and buy one product that fits it. You receive the agent's action and \
answer with the page the store shows next.

How the store behaves
- Pages: the search page; a results page (10 products a page, ranked by how well the title and \
description match the query words); an item page; an item sub-page (Description, Features or Reviews \
text, with [< Prev] to return); after buying, the episode ends.
- search[query] works only on the search page. Results are real-looking products of the kind the query \
names: some fit the goal, many fit only in part (wrong colour, wrong size range, over the budget, \
another product type). Vague or misspelled queries give less relevant results. Never return zero results \
for a sensible query.
- click[X] clicks the element whose bracketed text is X (case-insensitive): a product id opens its item \
page; [Back to Search] returns to the search page; [Next >] and [< Prev] change the results page (or go \
back from an item page to the results); an option value selects it (one value per option group, a new \
click replaces the old one) and the page is shown again with a "Selected:" line; [Description], \
[Features] and [Reviews] open a sub-page; [Buy Now] buys the product with the selected options.
- Keep a product's id, title, price and options the same every time it appears in the episode.

State format (one element per line; clickable elements in brackets; keep it this compact, no HTML):
WebShop | results for "red running shoes" | page 1 (50 results)
Instruction: i need red running shoes for men in size 10, and price lower than 60.00 dollars
[Back to Search] [Next >]
[B09QKP7XQL] Men's Lightweight Running Shoes Breathable Mesh Sneakers | $39.99
[B07WFK2ZJT] Women's Trail Running Shoe | $24.50 to $31.00

An item page looks like:
WebShop | item B09QKP7XQL
Instruction: i need red running shoes for men in size 10, and price lower than 60.00 dollars
[Back to Search] [< Prev]
Title: Men's Lightweight Running Shoes Breathable Mesh Sneakers
Price: $39.99 | Rating: N.A.
color: [black] [red] [grey]
size: [8] [9] [10] [11]
Selected: color=red
[Description] [Features] [Reviews] [Buy Now]

Invalid or ineffective actions
An action that is malformed, names an element not on the current page, or searches outside the search \
page changes nothing: return the current page unchanged, with the first line followed by \
"(Invalid action: <short reason>)", done=false, success=false.

Ending and success
- done is true only after click[Buy Now] on an item page (and when the page budget runs out, which the \
environment handles).
- success is true only when the bought product matches the goal: the right product type, every \
attribute the goal asks for, every required option (size, colour, count...) selected, and a price below \
the goal's limit. Buying a product that matches only in part is done=true, success=false. The final \
state after buying reads "WebShop | purchase complete" and names the product, its selected options and \
price.

admissible_actions: the click[X] action for each bracketed element of the new page (e.g. \
"click[Back to Search]", "click[B09QKP7XQL]", "click[red]", "click[Buy Now]"). On the search page list \
nothing: any search[query] is allowed there."""


class WebShopDomain(Domain):
    """WebShop as an abstract text world (Yao et al., 2022).

    State format: one element per line, clickable elements in square brackets, the goal repeated on
    every page. The first line names the page kind. The search page::

        WebShop | search page
        Instruction: i need a natural looking clip-in hair extension, and price lower than 40.00 dollars
        [Search]

    A results page lists ``[ASIN] title | price``; an item page lists the option groups
    (``size: [16 inch] [20 inch]``), a ``Selected:`` line and ``[Buy Now]``. The ``render_*`` helpers
    (:func:`render_search_page`, :func:`render_results_page`, :func:`render_item_page`,
    :func:`render_sub_page`, :func:`render_done_page`) are the one home of this format: the
    real-to-abstract mapping and the session-log loader write their states with them.

    Actions: ``search[<query>]`` (search page only) and ``click[<bracketed text>]``.
    ``admissible_actions`` lists the ``click[...]`` actions of the page; the search page's is empty, as
    its query is free text.

    Episode end: ``click[Buy Now]``; success when the product bought matches the goal's product type,
    attributes, options and price limit (WebShop's reward equal to 1).

    Tasks: :meth:`seed_tasks` (12, with ``attributes``, ``options``, ``price_upper`` metadata) and
    :meth:`load_tasks` for the official files (see :func:`~dreamgym_env.domains.webshop.tasks.load_webshop_goals`).
    A session's task id is :func:`~dreamgym_env.domains.webshop.tasks.webshop_task_id`; a recorded
    goal's metadata is :func:`~dreamgym_env.domains.webshop.tasks.session_goal_metadata`, whose hidden facts are :data:`GOAL_FACT_KEYS`.
    """

    name = "webshop"
    env_id = "DreamGym/WebShop-v0"
    max_steps = BUILTIN_DOMAINS[name].max_steps  # the one definition: the domain table
    task_fact_keys = GOAL_FACT_KEYS
    instructions = _INSTRUCTIONS
    action_help = (
        "WebShop actions: search[<query>] on the search page (e.g. search[red running shoes men]) and "
        "click[<element>] for any bracketed element of the page: a product id (click[B09QKP7XQL]), an "
        "option value (click[size 10]), click[Back to Search], click[Next >], click[< Prev], "
        "click[Description], click[Features], click[Reviews], click[Buy Now]."
    )
    action_patterns = (r"search\[[^\[\]\n]*\S[^\[\]\n]*\]", r"click\[[^\[\]\n]*\S[^\[\]\n]*\]")

    def initial_state(self, task: Task, rng: np.random.Generator) -> InitialState:
        """The search page with the task's instruction; no randomness is needed (``rng`` is unused)."""
        return InitialState(state=render_search_page(task.instruction), admissible_actions=[])

    def seed_tasks(self) -> list[Task]:
        """Twelve shopping goals across WebShop's five categories, written for this package."""
        return [
            Task(task_id=f"webshop-seed-{i}", domain=self.name, instruction=text, metadata=meta)
            for i, (text, meta) in enumerate(_SEED_GOALS)
        ]

    @classmethod
    def load_tasks(cls, path: str | os.PathLike[str]) -> list[Task]:
        """Load tasks from an official WebShop file or session-log folder (format detected by content)."""
        return load_webshop_goals(path)


def _goal(attributes: list[str], options: list[str], price: float, category: str) -> dict[str, object]:
    return {"attributes": attributes, OPTIONS_KEY: options, "price_upper": price, "category": category}


_SEED_GOALS: list[tuple[str, dict[str, object]]] = [
    (
        "i want a pair of men's waterproof hiking boots with a rubber sole, in brown, size 10.5, "
        "and price lower than 90.00 dollars",
        _goal(["waterproof", "rubber sole"], ["brown", "10.5"], 90.0, "fashion"),
    ),
    (
        "i need a sulfate free shampoo for dry hair in a 16 ounce bottle, and price lower than 25.00 dollars",
        _goal(["sulfate free", "dry hair"], ["16 ounce"], 25.0, "beauty"),
    ),
    (
        "find me a gluten free dark chocolate snack bar, pack of 12, and price lower than 30.00 dollars",
        _goal(["gluten free", "dark chocolate"], ["pack of 12"], 30.0, "grocery"),
    ),
    (
        "i am looking for a wireless bluetooth speaker that is water resistant, in blue, "
        "and price lower than 50.00 dollars",
        _goal(["wireless bluetooth", "water resistant"], ["blue"], 50.0, "electronics"),
    ),
    (
        "i'd like a queen size memory foam mattress topper that is easy to clean, "
        "and price lower than 120.00 dollars",
        _goal(["memory foam", "easy clean"], ["queen"], 120.0, "garden"),
    ),
    (
        "i need a women's short sleeve cotton t-shirt for daily wear in white, size medium, "
        "and price lower than 20.00 dollars",
        _goal(["short sleeve", "cotton", "daily wear"], ["white", "medium"], 20.0, "fashion"),
    ),
    (
        "looking for a long lasting matte liquid lipstick in red that is cruelty free, "
        "and price lower than 15.00 dollars",
        _goal(["long lasting", "cruelty free"], ["red"], 15.0, "beauty"),
    ),
    (
        "i want low sodium organic vegetable broth, 32 fl oz (pack of 6), and price lower than 35.00 dollars",
        _goal(["low sodium", "organic"], ["32 fl oz (pack of 6)"], 35.0, "grocery"),
    ),
    (
        "i need a usb c fast charging cable that is 6 feet long, 2 pack, and price lower than 15.00 dollars",
        _goal(["fast charging", "usb c"], ["6 feet", "2 pack"], 15.0, "electronics"),
    ),
    (
        "find me a mid century modern accent chair with wood legs for the living room, in grey, "
        "and price lower than 200.00 dollars",
        _goal(["mid century", "wood legs", "living room"], ["grey"], 200.0, "garden"),
    ),
    (
        "i want a non slip yoga mat, 6mm thick, in purple, and price lower than 40.00 dollars",
        _goal(["non slip"], ["6mm", "purple"], 40.0, "fashion"),
    ),
    (
        "i am looking for a hair dryer with a diffuser for curly hair that is lightweight, "
        "and price lower than 60.00 dollars",
        _goal(["diffuser", "lightweight", "curly hair"], [], 60.0, "beauty"),
    ),
]
