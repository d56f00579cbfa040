"""Real-to-abstract observation mapping: what each real engine prints, rewritten in the simulator's format.

DreamGym's experience model works in an abstract textual state space (clean element listings, not raw
HTML); a policy moves from simulator to real environment unchanged only if the real observations are
mapped into the same space. These functions do it by rules, one per engine format, and
:class:`~dreamgym_env.real.extractor.LLMStateExtractor` does it with an extraction prompt (as the paper
does) for formats the rules do not cover. Everything here is pure text processing: no engine needs to be installed to use or test it.

Text games and WebShop's text pages are mapped here; BrowserGym's accessibility tree in
:mod:`~dreamgym_env.domains.axtree` and the extraction prompt in :mod:`~dreamgym_env.real.extractor`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from dreamgym_env.domains.webshop import (
    render_done_page,
    render_item_page,
    render_results_page,
    render_search_page,
    render_sub_page,
)

# --------------------------------------------------------------------------------------------------
# Text games (ALFWorld, TextWorld)
# --------------------------------------------------------------------------------------------------

_WELCOME = re.compile(r"^\s*-= Welcome to TextWorld[^\n]*=-\s*$", re.MULTILINE)


def clean_game_text(text: str) -> str:
    """A text game's output without the welcome banner and with blank runs collapsed.

    ALFWorld opens with ``-= Welcome to TextWorld, ALFRED! =-``; the simulated state starts at the room.
    """
    text = _WELCOME.sub("", text)
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


# --------------------------------------------------------------------------------------------------
# WebShop (text observation mode of WebShop's WebAgentTextEnv)
# --------------------------------------------------------------------------------------------------

_SEP = " [SEP] "
_ASIN = re.compile(r"^[A-Z0-9]{10}$")
_PAGE = re.compile(r"^Page (\d+) \(Total results: (\d+)\)$")


@dataclass
class WebShopPage:
    """One WebShop page read from its text observation.

    Attributes:
        kind: ``"search"``, ``"results"``, ``"item"``, ``"sub"`` (description/features/reviews) or
            ``"done"`` (after buying).
        instruction: The goal shown on the page.
        page: Results page number; total: results over all pages.
        results: ``(asin, title, price)`` per product on a results page.
        title, price, rating: An item page's product.
        options: An item page's option groups (name -> values).
        text: A sub-page's or the final page's remaining text.
        buttons: Navigation buttons present (``"Back to Search"``, ``"< Prev"``, ``"Next >"``).
    """

    kind: str
    instruction: str = ""
    page: int = 1
    total: int = 0
    results: list[tuple[str, str, str]] = field(default_factory=list)
    title: str = ""
    price: str = ""
    rating: str = "N.A."
    options: dict[str, list[str]] = field(default_factory=dict)
    text: str = ""
    buttons: list[str] = field(default_factory=list)


def parse_webshop_text(observation: str, clickables: Iterable[str] = ()) -> WebShopPage:
    """Read a WebShop text observation (segments joined by ``" [SEP] "``).

    Args:
        observation: The observation of ``WebAgentTextEnv(observation_mode="text")``, e.g.
            ``"Instruction: [SEP] i need ... [SEP] Back to Search [SEP] Page 1 (Total results: 50) [SEP]
            Next > [SEP] B078GWRC1J [SEP] Bright Citrus Deodorant [SEP] $10.99"``.
        clickables: ``get_available_actions()["clickables"]`` for the page. On an item page it tells
            option values (clickable) from option group names (not); without it every segment between
            the navigation and the title is read as a value of one unnamed group.
    """
    segments = [s.strip() for s in observation.replace("\n", " ").split("[SEP]")]
    segments = [s for s in segments if s]
    clickable = {c.lower() for c in clickables}
    instruction = ""
    if "Instruction:" in segments:
        at = segments.index("Instruction:")
        instruction = segments[at + 1] if at + 1 < len(segments) else ""
        rest = segments[at + 2 :]
    else:
        rest = list(segments)
    if any(s.startswith("Thank you for shopping with us") for s in segments):
        return WebShopPage(
            kind="done", instruction=_done_goal(segments) or instruction, text=" | ".join(segments)
        )
    buttons = [s for s in rest[:3] if s in ("Back to Search", "< Prev", "Next >")]
    if rest == ["Search"] or (segments[:1] == ["WebShop"] and rest[-1:] == ["Search"]):
        return WebShopPage(kind="search", instruction=instruction)
    page_at = next((i for i, s in enumerate(rest) if _PAGE.match(s)), None)
    if page_at is not None:
        match = _PAGE.match(rest[page_at])
        assert match is not None
        body = rest[page_at + 1 :]
        buttons = ["Back to Search"] + [s for s in body[:2] if s in ("< Prev", "Next >")]
        body = body[len(buttons) - 1 :]
        results = []
        i = 0
        while i + 2 < len(body) + 0 and _ASIN.match(body[i]):
            results.append((body[i], body[i + 1], body[i + 2]))
            i += 3
        return WebShopPage(
            kind="results",
            instruction=instruction,
            page=int(match.group(1)),
            total=int(match.group(2)),
            results=results,
            buttons=buttons,
        )
    body = [s for s in rest if s not in ("Back to Search", "< Prev")]
    price_at = next((i for i, s in enumerate(body) if s.startswith("Price:")), None)
    if "Buy Now" in body and price_at is not None and price_at > 0:
        title = body[price_at - 1]
        options: dict[str, list[str]] = {}
        group = ""
        for s in body[: price_at - 1]:
            if clickable and s.lower() not in clickable:
                group = s
                options.setdefault(group, [])
            else:
                options.setdefault(group, []).append(s)
        rating = next((s.removeprefix("Rating:").strip() for s in body if s.startswith("Rating:")), "N.A.")
        return WebShopPage(
            kind="item",
            instruction=instruction,
            title=title,
            price=body[price_at].removeprefix("Price:").strip(),
            rating=rating,
            options=options,
            buttons=buttons,
        )
    return WebShopPage(kind="sub", instruction=instruction, text="\n".join(body), buttons=buttons)


def _done_goal(segments: Sequence[str]) -> str:
    if "Goal" in segments:
        at = segments.index("Goal")
        return segments[at + 1] if at + 1 < len(segments) else ""
    return ""


def webshop_page_to_state(
    page: WebShopPage,
    *,
    instruction: str,
    query: str = "",
    asin: str = "",
    selected: Mapping[str, str] | None = None,
    sub_page: str = "",
    reward: float | None = None,
) -> str:
    """Write a parsed WebShop page in the simulated WebShop domain's abstract format.

    The page is written by the domain's ``render_*`` functions (:mod:`dreamgym_env.domains.webshop`).

    What the text observation leaves out (the query searched, the product id of an item page, the
    options selected so far, which sub-page is open) comes from the wrapper, which saw the actions.
    """
    instruction = instruction or page.instruction
    if page.kind == "search":
        return render_search_page(instruction)
    if page.kind == "results":
        return render_results_page(instruction, query, page.results, page=page.page, total_results=page.total)
    if page.kind == "item":
        return render_item_page(
            instruction, asin, page.title, page.price, page.options, dict(selected or {}), rating=page.rating
        )
    if page.kind == "done":
        return render_done_page(instruction, asin, dict(selected or {}), reward)
    return render_sub_page(instruction, asin, sub_page, page.text)
