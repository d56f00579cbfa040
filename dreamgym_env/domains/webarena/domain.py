"""WebArena: realistic self-hosted websites (store, store admin, GitLab, Reddit, map, Wikipedia).

This module owns the page listing (:func:`_render_page`), the sites (:data:`DEFAULT_SITE_URLS`) and
the first page; task files are in :mod:`~dreamgym_env.domains.webarena.tasks`
(:meth:`WebArenaDomain.load_tasks`). What uses them: the real env in :mod:`dreamgym_env.domains.webarena.engine`
with the accessibility-tree mapping in :mod:`dreamgym_env.domains.axtree`; the curriculum's
``WEBARENA_FORMAT`` and ``validate_webarena`` (named in the domain table,
:data:`dreamgym_env.domains.BUILTIN_DOMAINS`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from urllib.parse import unquote, urlsplit

import numpy as np

from dreamgym_env.domains import BUILTIN_DOMAINS
from dreamgym_env.domains.base import Domain, InitialState
from dreamgym_env.domains.webarena.tasks import load_webarena_tasks
from dreamgym_env.errors import DomainError
from dreamgym_env.records import Task

DEFAULT_SITE_URLS: Mapping[str, str] = MappingProxyType(
    {
        "shopping": "http://localhost:7770",
        "shopping_admin": "http://localhost:7780/admin",
        "gitlab": "http://localhost:8023",
        "reddit": "http://localhost:9999",
        "map": "http://localhost:3000",
        "wikipedia": "http://localhost:8888/wikipedia_en_all_maxi_2022-05/A/User:The_other_Kiwix_guy/Landing",
        "homepage": "http://localhost:4399",
    }
)
"""Base URL of each site as WebArena's docker images serve them; ``__SHOPPING__`` etc. resolve to these."""

Element = tuple[str, str]
"""An element of the abstract page: (accessibility role, name)."""


def page_header(url: str, titles: Sequence[str] = (), active_index: int = 0) -> list[str]:
    """A page's first lines: one ``Tab i[ (current)]: title`` line per open tab, then ``URL: ...``."""
    lines = [f"Tab {i}{' (current)' if i == active_index else ''}: {t}" for i, t in enumerate(titles)]
    return [*(lines or ["Tab 0 (current): "]), f"URL: {url}"]


def _render_page(
    title: str,
    url: str,
    elements: Sequence[Element],
    *,
    first_id: int = 1,
    other_tabs: Sequence[str] = (),
) -> str:
    """Write a page in the abstract format: tab lines, a URL line, then the page as BrowserGym lists it.

    The listing is what BrowserGym's ``flatten_axtree_to_str`` writes for the page (and AgentLab
    logs): a ``RootWebArea`` line, then one element a line, indented by a tab, as ``[id] role 'name'``
    (the name as Python writes a string); text carries no id, as in BrowserGym.

    Args:
        title: The page title.
        url: The page URL.
        elements: ``(role, name)`` pairs in page order; ids are numbered from ``first_id``.
        first_id: The first element id.
        other_tabs: Titles of the tabs opened after this one (this page is tab 0 and current).
    """
    lines = page_header(url, [title, *other_tabs])
    lines.append(f"RootWebArea {title!r}, focused, url={url!r}")
    for i, (role, name) in enumerate(elements):
        bid = "" if role == "StaticText" else f"[{first_id + i}] "
        lines.append(f"\t{bid}{role} {name!r}")
    return "\n".join(lines)


# Start pages: a handful of the elements each site's home page shows, enough to orient the model.
_HOME_PAGES: dict[str, tuple[str, tuple[Element, ...]]] = {
    "shopping": (
        "One Stop Market",
        (
            ("link", "My Account"),
            ("link", "My Wish List"),
            ("link", "Sign Out"),
            ("link", "My Cart"),
            ("combobox", "Search"),
            ("link", "Advanced Search"),
            ("menuitem", "Beauty & Personal Care"),
            ("menuitem", "Sports & Outdoors"),
            ("menuitem", "Clothing, Shoes & Jewelry"),
            ("menuitem", "Home & Kitchen"),
            ("menuitem", "Office Products"),
            ("menuitem", "Tools & Home Improvement"),
            ("menuitem", "Health & Household"),
            ("menuitem", "Patio, Lawn & Garden"),
            ("menuitem", "Electronics"),
            ("menuitem", "Cell Phones & Accessories"),
            ("menuitem", "Video Games"),
            ("menuitem", "Grocery & Gourmet Food"),
            ("heading", "Product Showcases"),
        ),
    ),
    "shopping_admin": (
        "Dashboard / Magento Admin",
        (
            ("link", "Dashboard"),
            ("link", "Sales"),
            ("link", "Catalog"),
            ("link", "Customers"),
            ("link", "Marketing"),
            ("link", "Content"),
            ("link", "Reports"),
            ("link", "Stores"),
            ("link", "System"),
            ("heading", "Dashboard"),
            ("button", "Reload Data"),
            ("tab", "Bestsellers"),
            ("tab", "Most Viewed Products"),
            ("tab", "New Customers"),
            ("tab", "Customers"),
            ("heading", "Last Orders"),
            ("heading", "Last Search Terms"),
        ),
    ),
    "gitlab": (
        "Projects · Dashboard · GitLab",
        (
            ("link", "Skip to content"),
            ("link", "Dashboard"),
            ("button", "Menu"),
            ("textbox", "Search GitLab"),
            ("link", "Issues"),
            ("link", "Merge requests"),
            ("link", "To-Do List"),
            ("button", "Byte Blaze"),
            ("heading", "Projects"),
            ("link", "New project"),
            ("link", "Your projects"),
            ("link", "Starred projects"),
            ("link", "Explore projects"),
            ("textbox", "Filter by name"),
            ("link", "a11yproject.com"),
            ("link", "dotfiles"),
            ("link", "gimmiethat.space"),
            ("link", "millennials-to-snake-people"),
        ),
    ),
    "reddit": (
        "Postmill",
        (
            ("link", "Home"),
            ("link", "Forums"),
            ("link", "Wiki"),
            ("searchbox", "Search query"),
            ("link", "Notifications (0)"),
            ("link", "Submit"),
            ("button", "MarvelsGrantMan136"),
            ("link", "Hot"),
            ("link", "New"),
            ("link", "Top"),
            ("link", "Controversial"),
            ("link", "Most commented"),
            ("heading", "Forums"),
            ("link", "AskReddit"),
            ("link", "books"),
            ("link", "news"),
            ("link", "pics"),
            ("link", "Pittsburgh"),
        ),
    ),
    "map": (
        "OpenStreetMap",
        (
            ("link", "OpenStreetMap logo OpenStreetMap"),
            ("link", "Edit"),
            ("link", "History"),
            ("link", "Export"),
            ("link", "GPS Traces"),
            ("link", "User Diaries"),
            ("link", "Communities"),
            ("link", "Log In"),
            ("link", "Sign Up"),
            ("textbox", "Search"),
            ("button", "Go"),
            ("link", "Find directions between two points"),
            ("button", "Zoom In"),
            ("button", "Zoom Out"),
            ("button", "Show My Location"),
            ("link", "Layers"),
        ),
    ),
    "wikipedia": (
        "User:The other Kiwix guy/Landing",
        (
            ("link", "Go to welcome page"),
            ("textbox", "Search 'Wikipedia'"),
            ("button", "Search"),
            ("button", "Go to a randomly selected page"),
            ("heading", "Welcome to Wikipedia"),
            ("StaticText", "The free encyclopedia that anyone can edit."),
            ("link", "Geography"),
            ("link", "History"),
            ("link", "Science"),
            ("link", "Technology"),
            ("link", "Arts"),
            ("link", "People"),
        ),
    ),
    "homepage": (
        "Homepage",
        (
            ("link", "One Stop Market"),
            ("link", "Magento Admin"),
            ("link", "GitLab"),
            ("link", "Postmill"),
            ("link", "OpenStreetMap"),
            ("link", "Wikipedia"),
        ),
    ),
}

# Extra elements of inner pages, by site, shown under a heading named after the page.
_INNER_PAGE_ELEMENTS: dict[str, tuple[Element, ...]] = {
    "shopping": (
        ("spinbutton", "Qty"),
        ("button", "Add to Cart"),
        ("link", "Add to Wish List"),
        ("tab", "Details"),
        ("tab", "Reviews"),
    ),
    "shopping_admin": (
        ("textbox", "Search by keyword"),
        ("button", "Search"),
        ("button", "Filters"),
        ("button", "Export"),
    ),
    "gitlab": (
        ("link", "Project information"),
        ("link", "Repository"),
        ("link", "Issues"),
        ("link", "Merge requests"),
        ("link", "CI/CD"),
        ("link", "Wiki"),
        ("button", "Star"),
        ("button", "Fork"),
    ),
    "reddit": (
        ("link", "Submit"),
        ("button", "Subscribe"),
        ("link", "Hot"),
        ("link", "New"),
        ("link", "Top"),
        ("link", "Comments"),
    ),
    "map": (("textbox", "Search"), ("button", "Go"), ("link", "Find directions between two points")),
    "wikipedia": (("textbox", "Search 'Wikipedia'"), ("button", "Search")),
    "homepage": (),
}

_PLACEHOLDER = re.compile(r"__([A-Z_]+?)__")


def _page_heading(path: str, site: str) -> str:
    """A readable page name from a URL path.

    A slug names the page ("/f/books/59421/friendly-help" -> "friendly help"); a GitLab path ends with
    the project or file; other paths are read as a breadcrumb ("/sales/order/view/order_id/189" ->
    "sales › order › view").
    """
    segments = [seg for seg in unquote(urlsplit(path).path).split("/") if seg and seg != "-"]
    if not segments:
        return ""
    last = re.sub(r"\.html?$", "", segments[-1])
    if site == "gitlab":
        return last
    if "-" in last or site == "reddit":
        return re.sub(r"[-_]+", " ", last).strip() or last
    words = [seg for seg in segments if not seg.isdigit() and not seg.endswith("id") and seg != "index"]
    return " › ".join(words) or last


_INSTRUCTIONS = """\
You simulate WebArena: self-hosted copies of real websites: an online store (One Stop Market, \
Magento), its admin panel (Magento Admin), GitLab, a Reddit-like forum (Postmill), OpenStreetMap and \
an offline Wikipedia (Kiwix). An agent works through a browser to carry out a user's request. You \
receive its browser action and answer with the page the browser shows next.

How the sites behave
- The sites hold realistic data (products with prices and reviews, orders, customers, repositories with \
issues and merge requests, forum posts with comments and votes, places and routes) and behave like the \
real software: links navigate, forms validate their fields, saving shows a success or error message, \
searches list matching items. Keep every fact consistent with the history (an order total, a user name, \
a star count never changes unless the agent changes it).
- Element ids are the numbers in brackets. click('12') activates element 12; fill('12', 'text') types \
into a field (replacing its value); select_option('12', 'value') picks an option; press('12', 'Enter') \
sends a key (Enter submits a form or search); hover('12') may reveal a menu; scroll(0, 200) shows more \
of a long page; goto('url') loads a URL; go_back()/go_forward() move in history; new_tab(), \
tab_focus(1), tab_close() manage tabs; noop() waits.
- New pages get new element ids; keep the ids of elements that stay on the same page.

State format (the page as BrowserGym lists its accessibility tree: the tab line(s), the URL, then \
one node a line, indented by one tab per level, as [id] role 'name' followed by its properties; text \
without an id cannot be acted on; no HTML, at most about 40 elements; write long lists and tables as \
their first rows):
Tab 0 (current): One Stop Market
URL: http://localhost:7770/
RootWebArea 'One Stop Market', focused, url='http://localhost:7770/'
\t[27] link 'My Account'
\t[1235] combobox 'Search', hasPopup='listbox', expanded=False
\t[1238] menuitem 'Grocery & Gourmet Food', hasPopup='menu'
\t[1301] link 'Quest Lumaflex Band'
\t\tStaticText '$19.99'

Invalid or ineffective actions
An action on an id that is not on the page, or one the element does not support, leaves the page \
unchanged: return the same page with a first line "Error: <short reason>" added, done=false, \
success=false. A click on a plain text element does nothing visible: return the same page.

Ending and success
- done is true when the agent calls send_msg_to_user('...') (its final answer) or \
report_infeasible('...') (it claims the request is impossible); the page after it stays as it was.
- success is true only when the request is really accomplished: for a question, the answer sent \
contains the correct information (the right number, name, date...); for a navigation request, the final \
page is the one asked for; for a change (post a comment, update an order, create a project), the change \
was made correctly and saved. report_infeasible succeeds only when the request truly cannot be done. \
Anything else is done=true, success=false.

admissible_actions: return an empty list; the agent's action space is open."""


class WebArenaDomain(Domain):
    """WebArena as an abstract text world (Zhou et al., 2024), with BrowserGym's action set.

    State format: a tab line per open tab, the URL, then the page's accessibility tree as BrowserGym's
    ``flatten_axtree_to_str`` writes it (what AgentLab logs, and what ``DreamGym/WebArena-Real-v0``
    shows): ``[id] role 'name'`` lines indented by depth (one tab a level), under the ``RootWebArea``
    line::

        Tab 0 (current): One Stop Market
        URL: http://localhost:7770/
        RootWebArea 'One Stop Market', focused, url='http://localhost:7770/'
            [1] link 'My Account'
            [5] combobox 'Search'
            [12] menuitem 'Grocery & Gourmet Food'

    Starting state: the page at the task's ``start_url`` (WebArena's ``__SHOPPING__``-style placeholders
    resolved with ``site_urls``): a site's home page lists a fixed set of its real elements; a deeper
    URL lists a heading named after the page plus the site's usual controls; several start URLs
    (joined by ``|AND|``) open as tabs. The start page involves no randomness (``rng`` is unused).
    ``admissible_actions`` is empty (:attr:`open_actions` is True).

    Actions: BrowserGym's high-level primitives (see :attr:`action_help`).

    Episode end: ``send_msg_to_user(...)`` or ``report_infeasible(...)``; success when the answer or the
    final page satisfies the intent.

    Args:
        site_urls: Base URL per site name, overriding :data:`DEFAULT_SITE_URLS` (e.g. where the sites
            are served on other hosts).
    """

    name = "webarena"
    env_id = "DreamGym/WebArena-v0"
    max_steps = BUILTIN_DOMAINS[name].max_steps  # the one definition: the domain table
    task_fact_keys = ("sites", "eval.reference_answers", "eval.reference_url")
    instructions = _INSTRUCTIONS
    open_actions = True
    action_help = (
        "WebArena actions (BrowserGym, element ids from the page as strings): click('12'), "
        "dblclick('12'), hover('12'), focus('12'), clear('12'), fill('12', 'text'), press('12', 'Enter'), "
        "select_option('12', 'value'), drag_and_drop('3', '7'), scroll(0, 200), goto('http://...'), "
        "go_back(), go_forward(), new_tab(), tab_close(), tab_focus(1), noop(), "
        "send_msg_to_user('final answer'), report_infeasible('reason')."
    )
    _STR = r"""(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
    _ID = r"""(?:'[^'\s]+'|"[^"\s]+")"""
    _NUM = r"-?\d+(?:\.\d+)?"
    action_patterns = (
        rf"(?:click|dblclick)\(\s*{_ID}\s*(?:,\s*(?:button\s*=\s*)?{_STR}\s*)?"
        rf"(?:,\s*(?:modifiers\s*=\s*)?\[\s*(?:{_STR}\s*(?:,\s*{_STR}\s*)*)?\]\s*)?\)",
        rf"(?:hover|focus|clear)\(\s*{_ID}\s*\)",
        rf"(?:fill|press)\(\s*{_ID}\s*,\s*{_STR}\s*\)",
        rf"select_option\(\s*{_ID}\s*,\s*(?:{_STR}|\[\s*{_STR}\s*(?:,\s*{_STR}\s*)*\])\s*\)",
        rf"drag_and_drop\(\s*{_ID}\s*,\s*{_ID}\s*\)",
        rf"scroll\(\s*{_NUM}\s*,\s*{_NUM}\s*\)",
        rf"goto\(\s*{_STR}\s*\)",
        r"(?:go_back|go_forward|new_tab|tab_close)\(\s*\)",
        r"tab_focus\(\s*\d+\s*\)",
        rf"noop\(\s*(?:(?:wait_ms\s*=\s*)?{_NUM}\s*)?\)",
        rf"(?:send_msg_to_user|report_infeasible)\(\s*{_STR}\s*\)",
    )

    def __init__(self, site_urls: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.site_urls = {**DEFAULT_SITE_URLS, **(site_urls or {})}

    def resolve_url(self, url: str) -> str:
        """Replace WebArena's site placeholders (``__GITLAB__/a/b`` -> ``http://localhost:8023/a/b``).

        Raises:
            DomainError: A placeholder names a site with no known URL.
        """

        def site_url(match: re.Match[str]) -> str:
            site = match.group(1).lower()
            if site not in self.site_urls:
                raise DomainError(
                    f"No URL for WebArena site {site!r} in {url!r}; known sites: "
                    f"{sorted(self.site_urls)}. Pass site_urls={{{site!r}: 'http://...'}}."
                )
            return self.site_urls[site].rstrip("/")

        return _PLACEHOLDER.sub(site_url, url.strip())

    def initial_state(self, task: Task, rng: np.random.Generator) -> InitialState:
        """The page(s) at the task's start URL; ``rng`` is unused (start pages are fixed)."""
        sites = list(task.metadata.get("sites") or ["shopping"])
        start = str(task.metadata.get("start_url") or f"__{sites[0].upper()}__")
        urls = [self.resolve_url(u) for u in start.split("|AND|") if u.strip()]
        titles = [self._page(url, sites)[0] for url in urls]
        title, elements = self._page(urls[0], sites)
        url = urls[0] if urlsplit(urls[0]).path else urls[0] + "/"
        state = _render_page(title, url, elements, other_tabs=titles[1:])
        return InitialState(state=state, admissible_actions=[])

    def _site_of(self, url: str, fallback: str) -> str:
        """The site whose base URL is the longest prefix of ``url``."""
        bases = self.site_urls.items()
        matches = [(len(base), site) for site, base in bases if url.startswith(base.rstrip("/"))]
        return max(matches)[1] if matches else fallback

    def _page(self, url: str, sites: Sequence[str]) -> tuple[str, tuple[Element, ...]]:
        site = self._site_of(url, sites[0])
        home_title, home_elements = _HOME_PAGES.get(site, _HOME_PAGES["homepage"])
        base = self.site_urls.get(site, "").rstrip("/")
        rest = url[len(base) :] if base and url.startswith(base) else urlsplit(url).path
        if not rest.strip("/"):
            return home_title, home_elements
        heading = _page_heading(rest, site)
        title = f"{heading} · {home_title}" if site == "gitlab" else f"{heading} | {home_title}"
        nav = home_elements[:4]
        return title, (*nav, ("heading", heading), *_INNER_PAGE_ELEMENTS.get(site, ()))

    def seed_tasks(self) -> list[Task]:
        """Fourteen requests across the six sites, written for this package."""
        return [
            Task(
                task_id=f"webarena-seed-{i}",
                domain=self.name,
                instruction=intent,
                metadata={"sites": sites, "start_url": start, "eval": evaluation},
            )
            for i, (intent, sites, start, evaluation) in enumerate(_SEED_TASKS)
        ]

    @classmethod
    def load_tasks(cls, path: str | os.PathLike[str]) -> list[Task]:
        """Load tasks from ``test.raw.json``, one config file or a folder of config files."""
        return load_webarena_tasks(path)


def _answer(*must_include: str) -> dict[str, object]:
    """A question's evaluation; without a reference the experience model judges the answer itself."""
    references = {"must_include": list(must_include)} if must_include else None
    return {"eval_types": ["string_match"], "reference_answers": references}


def _at_url(url: str) -> dict[str, object]:
    return {"eval_types": ["url_match"], "reference_url": url}


def _program(note: str) -> dict[str, object]:
    return {"eval_types": ["program_html"], "reference_answers": None, "note": note}


_SEED_TASKS: list[tuple[str, list[str], str, dict[str, object]]] = [
    ("How much did I spend on my most recent order in the store?", ["shopping"], "__SHOPPING__", _answer()),
    (
        "Add a pack of AA rechargeable batteries to my wish list",
        ["shopping"],
        "__SHOPPING__",
        _program("a rechargeable AA battery pack appears in the wish list"),
    ),
    (
        "Show me the reviews of the cheapest electric toothbrush in the store",
        ["shopping"],
        "__SHOPPING__",
        _program("the final page is the reviews tab of the cheapest electric toothbrush"),
    ),
    (
        "How many orders are still pending in the admin panel?",
        ["shopping_admin"],
        "__SHOPPING_ADMIN__",
        _answer(),
    ),
    (
        "Disable the product 'Zing Jump Rope' so it no longer shows in the store",
        ["shopping_admin"],
        "__SHOPPING_ADMIN__",
        _program("the product's status is Disabled"),
    ),
    (
        "Which search term did customers use most often this year?",
        ["shopping_admin"],
        "__SHOPPING_ADMIN__",
        _answer(),
    ),
    (
        "Open the list of open issues labelled 'bug' in the a11yproject.com repository",
        ["gitlab"],
        "__GITLAB__/a11yproject/a11yproject.com",
        _at_url("__GITLAB__/a11yproject/a11yproject.com/-/issues/?label_name[]=bug"),
    ),
    (
        "Create a new private project called 'weekend-notes' with a README",
        ["gitlab"],
        "__GITLAB__",
        _program("a private project weekend-notes exists with a README file"),
    ),
    (
        "Who made the most commits to the dotfiles repository?",
        ["gitlab"],
        "__GITLAB__/byteblaze/dotfiles",
        _answer(),
    ),
    (
        "Subscribe to the books forum and upvote its newest post",
        ["reddit"],
        "__REDDIT__/f/books",
        _program("the user is subscribed to f/books and the newest post carries the user's upvote"),
    ),
    (
        "Post in the Pittsburgh forum asking for a good bakery near Shadyside, "
        "titled 'Bakery near Shadyside?'",
        ["reddit"],
        "__REDDIT__",
        _program("a post with that title exists in f/Pittsburgh"),
    ),
    (
        "How long does it take to walk from Carnegie Mellon University to the Phipps Conservatory?",
        ["map"],
        "__MAP__",
        _answer(),
    ),
    (
        "Show the driving route from Pittsburgh International Airport to Heinz Field on the map",
        ["map"],
        "__MAP__",
        _program("the directions panel shows a car route between the two places"),
    ),
    (
        "In which year was the university whose campus hosts the Cathedral of Learning founded? "
        "Look it up on Wikipedia",
        ["wikipedia"],
        "__WIKIPEDIA__",
        _answer("1787"),
    ),
]
