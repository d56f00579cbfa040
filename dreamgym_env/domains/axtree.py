"""BrowserGym's accessibility tree as the web domains' abstract page: tab lines, the URL, BrowserGym's own listing.

The listing is what BrowserGym's ``flatten_axtree_to_str`` writes (and what AgentLab logs and prompts
with): one node a line, indented by depth, as ``[bid] role 'name'`` plus properties, ``bid`` being
BrowserGym's element id, so an action such as ``click('12')`` acts on the element listed as ``[12]``.
A model trained on BrowserGym/AgentLab trajectories therefore reads the same text in the simulator
and in the real browser. Text processing only: BrowserGym's ``browsergym.utils.obs`` is needed, a
browser is not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dreamgym_env.domains.webarena import page_header
from dreamgym_env.errors import DependencyNotInstalled

_AXTREE_SKIPPED_ROLES: tuple[str, ...] = ("LineBreak", "InlineTextBox")
"""Roles left out of the listing: BrowserGym's own ignored roles plus Chromium's ``InlineTextBox``
(newer Chromium builds report one under every text node; its text is already its parent's)."""


def axtree_to_state(
    axtree: Mapping[str, Any],
    *,
    url: str,
    titles: Sequence[str] = (),
    active_index: int = 0,
    extra_properties: Mapping[str, Mapping[str, Any]] | None = None,
    visible_only: bool = False,
    skip_generic: bool = True,
) -> str:
    """Map BrowserGym's accessibility tree to the abstract page: :func:`~dreamgym_env.domains.webarena.page_header`, then BrowserGym's listing.

    Args:
        axtree: ``obs["axtree_object"]`` (Chrome DevTools ``{"nodes": [...]}`` with ``browsergym_id``).
        url: ``obs["url"]``.
        titles: ``obs["open_pages_titles"]``.
        active_index: ``obs["active_page_index"]``.
        extra_properties: ``obs["extra_element_properties"]`` (bid -> ``{"visibility", ...}``).
        visible_only: Keep only elements BrowserGym reports at least half visible.
        skip_generic: Leave out ``generic`` nodes without properties (BrowserGym's default). Pages
            whose clickable elements are plain ``<span>``s (MiniWoB's links) need them listed, with
            their ids.

    Raises:
        DependencyNotInstalled: ``browsergym-core`` is not installed.
    """
    try:
        from browsergym.utils.obs import IGNORED_AXTREE_ROLES, flatten_axtree_to_str
    except ImportError as e:
        raise DependencyNotInstalled("browsergym-core", "real", "the BrowserGym page listing") from e
    lines = page_header(url, titles, active_index)
    if axtree.get("nodes"):
        filter_visible = visible_only and extra_properties is not None
        listing = flatten_axtree_to_str(
            dict(axtree),
            extra_properties=dict(extra_properties or {}) if filter_visible else None,
            filter_visible_only=filter_visible,
            skip_generic=skip_generic,
            ignored_roles=[*IGNORED_AXTREE_ROLES, *_AXTREE_SKIPPED_ROLES],
        )
        lines.append(listing)
    return "\n".join(lines)
