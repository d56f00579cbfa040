"""WebArena, all in one package: the simulated domain, its task files, and the real engine.

=========== ======================================================================================
module      what it holds
=========== ======================================================================================
``domain``  :class:`WebArenaDomain`, the sites, the page listing and its header, the first page
``tasks``   the task files (``test.raw.json``, one task config or a folder of them)
``engine``  the real sites: :class:`~.engine.WebArenaEngine`, :class:`~.engine.WebArenaRealEnv`
=========== ======================================================================================

Importing this package loads the domain and its task files only; ``engine`` (it drives
``browsergym-core`` and Chromium, extra ``real``) loads when imported, as
:mod:`dreamgym_env.real.webarena` does.
"""

from __future__ import annotations

from dreamgym_env.domains.webarena.domain import DEFAULT_SITE_URLS, WebArenaDomain, page_header
from dreamgym_env.domains.webarena.domain import Element as Element

__all__ = ["DEFAULT_SITE_URLS", "WebArenaDomain", "page_header"]
