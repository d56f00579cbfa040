"""WebShop, all in one package: the simulated domain, its task files, and the real engine.

=========== ======================================================================================
module      what it holds
=========== ======================================================================================
``domain``  :class:`WebShopDomain`, the page renderers, a page's admissible actions, the goal's keys
``tasks``   the task files (human goals, item instructions, goal queries, session logs), task ids
            and a recorded goal's metadata
``engine``  the real store: :class:`~.engine.WebShopEngine`, :class:`~.engine.WebShopRealEnv`
=========== ======================================================================================

Importing this package loads the domain and its task files only; ``engine`` (it drives a WebShop
checkout, see :data:`~.engine.WEBSHOP_INSTALL`) loads when imported, as :mod:`dreamgym_env.real.webshop`
does.
"""

from __future__ import annotations

from dreamgym_env.domains.webshop.domain import (
    GOAL_FACT_KEYS,
    WEBSHOP_CATEGORIES,
    WebShopDomain,
    page_actions,
    render_done_page,
    render_item_page,
    render_results_page,
    render_search_page,
    render_sub_page,
)

__all__ = [
    "GOAL_FACT_KEYS",
    "WEBSHOP_CATEGORIES",
    "WebShopDomain",
    "page_actions",
    "render_done_page",
    "render_item_page",
    "render_results_page",
    "render_search_page",
    "render_sub_page",
]
