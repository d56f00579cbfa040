"""WebArena / BrowserGym: the accessibility tree rewritten as the WebArena domain's ``[id] role: 'name'`` listing.

Pure text processing over BrowserGym's ``axtree_object``: no browser is needed to use or test it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["AXTREE_SKIPPED_ROLES", "axtree_to_state"]

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
