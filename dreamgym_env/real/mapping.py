"""Real-to-abstract observation mapping: what each real engine prints, rewritten in the simulator's format.

DreamGym's experience model works in an abstract textual state space (clean element listings, not raw
HTML); a policy moves from simulator to real environment unchanged only if the real observations are
mapped into the same space. These functions do it by rules, one per engine format, and
:class:`LLMStateExtractor` does it with an extraction prompt (as the paper does) for formats the rules
do not cover. Everything here is pure text processing: no engine needs to be installed to use or test it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dreamgym_env.domains import Domain, get_domain
from dreamgym_env.domains.webshop import (
    render_done_page,
    render_item_page,
    render_results_page,
    render_search_page,
    render_sub_page,
)
from dreamgym_env.errors import ResponseFormatError

__all__ = [
    "AXTREE_SKIPPED_ROLES",
    "LLMStateExtractor",
    "WebShopPage",
    "axtree_to_state",
    "clean_game_text",
    "parse_webshop_text",
    "webshop_page_to_state",
]

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


# --------------------------------------------------------------------------------------------------
# WebArena / BrowserGym: accessibility tree -> "[id] role: 'name'" listing
# --------------------------------------------------------------------------------------------------

AXTREE_SKIPPED_ROLES: frozenset[str] = frozenset(
    {
        "none",
        "generic",
        "presentation",
        "LineBreak",
        "InlineTextBox",
        "ListMarker",
        "group",
        "paragraph",
        "list",
        "listitem",
        "Section",
        "div",
        "RootWebArea",
        "WebArea",
        "ignored",
        "main",
        "navigation",
        "banner",
        "contentinfo",
        "region",
        "article",
        "form",
        "table",
        "rowgroup",
        "row",
        "LayoutTable",
        "LayoutTableRow",
        "LayoutTableCell",
    }
)
"""Container roles left out of the listing: their children carry the meaning (as in the paper's state)."""

_INTERACTIVE = frozenset(
    {
        "button",
        "link",
        "textbox",
        "searchbox",
        "combobox",
        "checkbox",
        "radio",
        "menuitem",
        "tab",
        "option",
        "slider",
        "spinbutton",
        "switch",
        "listbox",
        "menuitemcheckbox",
        "menuitemradio",
        "treeitem",
    }
)


def _ax_value(node: Mapping[str, Any], key: str) -> str:
    value = node.get(key)
    if isinstance(value, Mapping):
        value = value.get("value", "")
    return " ".join(str(value or "").split())


def _quote(name: str) -> str:
    return "'" + name.replace("\\", "\\\\").replace("'", "\\'") + "'"


def axtree_to_state(
    axtree: Mapping[str, Any],
    *,
    url: str,
    titles: Sequence[str] = (),
    active_index: int = 0,
    extra_properties: Mapping[str, Mapping[str, Any]] | None = None,
    visible_only: bool = False,
    max_elements: int = 200,
) -> str:
    """Map BrowserGym's accessibility tree to the WebArena domain's abstract page listing.

    The listing is the simulated domain's: tab lines, ``URL: ...``, then one meaningful element a
    line as ``[bid] role: 'name'``, where ``bid`` is BrowserGym's element id, so an action such as
    ``click('12')`` acts on the element listed as ``[12]``. Containers (:data:`AXTREE_SKIPPED_ROLES`)
    and ignored nodes are dropped; text repeating its parent's name is dropped; text that BrowserGym
    gives no id (it cannot be acted on) is listed without brackets, as ``StaticText: 'Total: $12'``.

    Args:
        axtree: ``obs["axtree_object"]`` (Chrome DevTools ``{"nodes": [...]}`` with ``browsergym_id``).
        url: ``obs["url"]``.
        titles: ``obs["open_pages_titles"]``.
        active_index: ``obs["active_page_index"]``.
        extra_properties: ``obs["extra_element_properties"]`` (bid -> ``{"visibility", ...}``).
        visible_only: Keep only elements BrowserGym reports at least half visible.
        max_elements: Cut the listing after this many elements.
    """
    nodes = list(axtree.get("nodes", []))
    by_id = {str(n.get("nodeId")): n for n in nodes}
    lines = [f"Tab {i}{' (current)' if i == active_index else ''}: {t}" for i, t in enumerate(titles)] or [
        "Tab 0 (current): "
    ]
    lines.append(f"URL: {url}")
    count = 0

    def visit(node: Mapping[str, Any], parent_name: str) -> None:
        nonlocal count
        role = _ax_value(node, "role")
        name = _ax_value(node, "name")
        bid = str(node.get("browsergym_id") or "")
        keep = not node.get("ignored") and role not in AXTREE_SKIPPED_ROLES
        if keep and role == "StaticText" and (not name or name in parent_name):
            keep = False
        if keep and not name and role not in _INTERACTIVE:
            keep = False
        if keep and visible_only and bid and extra_properties is not None:
            keep = float(extra_properties.get(bid, {}).get("visibility", 1.0)) >= 0.5
        if keep and count < max_elements:
            lines.append(f"[{bid}] {role}: {_quote(name)}" if bid else f"{role}: {_quote(name)}")
            count += 1
        for child_id in node.get("childIds", []):
            child = by_id.get(str(child_id))
            if child is not None:
                visit(child, name if keep or role in AXTREE_SKIPPED_ROLES and name else parent_name)

    if nodes:
        visit(nodes[0], "")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# LLM extraction (the paper's alternative to rules)
# --------------------------------------------------------------------------------------------------

_EXTRACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"state": {"type": "string"}},
    "required": ["state"],
    "additionalProperties": False,
}


class LLMStateExtractor:
    """Map a raw real observation to the abstract state with an extraction prompt.

    The prompt gives the domain's own description of the simulated world (which includes its state
    format and an example) and asks the model to rewrite the raw observation in that format, keeping
    every fact and element id an agent needs and dropping markup. The request uses the same backends
    as the experience model (a vLLM server over HTTP, or the scripted fake in tests) with a JSON schema
    ``{"state": str}``.

    Args:
        backend: A :class:`~dreamgym_env.experience.backends.Backend`.
        domain: The domain whose state format to produce.
        max_raw_chars: Longest raw observation sent; longer ones are cut.

    Example:
        >>> extractor = LLMStateExtractor(make_backend(BackendConfig(base_url=...)), "webarena")
        >>> state = extractor(raw_html_or_axtree_text)
    """

    def __init__(self, backend: Any, domain: str | Domain, *, max_raw_chars: int = 24_000) -> None:
        self.backend = backend
        self.domain = get_domain(domain)
        self.max_raw_chars = max_raw_chars

    def messages(self, raw: str) -> list[dict[str, str]]:
        """The extraction prompt: fixed system text first (prefix-cache friendly), the observation last."""
        system = (
            "You convert raw observations of a real environment into the abstract text state an agent and a "
            "simulator share. Here is how that environment and its state format are described:\n\n"
            f"{self.domain.instructions}\n\n"
            "Rewrite the raw observation you receive in exactly that state format. Keep every fact, number, "
            "product id and element id an agent would need; drop markup, scripts, styling and boilerplate; "
            'invent nothing. Answer with JSON {"state": "..."}.'
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": raw[: self.max_raw_chars]}]

    async def aextract(self, raw: str) -> str:
        """Coroutine form of :meth:`__call__`."""
        from dreamgym_env.experience.backends import CompletionRequest

        request = CompletionRequest(
            messages=self.messages(raw), json_schema=_EXTRACTION_SCHEMA, schema_name="abstract_state"
        )
        completion = await self.backend.acomplete(request)
        try:
            state = json.loads(completion.text)["state"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ResponseFormatError(
                f"The extraction model did not answer {{'state': str}}: {e}", raw_output=completion.text
            ) from e
        if not isinstance(state, str) or not state.strip():
            raise ResponseFormatError(
                "The extraction model returned an empty state.", raw_output=completion.text
            )
        return state.strip()

    def __call__(self, raw: str) -> str:
        """Return the abstract state for ``raw``.

        Raises:
            ResponseFormatError: The model's answer is not ``{"state": "<non-empty text>"}``.
        """
        from dreamgym_env._runner import run_sync

        return run_sync(self.aextract(raw))
