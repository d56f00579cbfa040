"""WebShop (real): a user's WebShop installation behind the simulated WebShop env's interface.

WebShop (Yao et al., 2022) ships a text environment, ``web_agent_site.envs.WebAgentTextEnv``, over its
product catalogue. This wrapper drives it in its ``text`` observation mode, maps each page to the
abstract WebShop format of ``DreamGym/WebShop-v0`` (:mod:`dreamgym_env.real.mapping`) and passes
WebShop's reward (in [0, 1], given when the agent buys) through unchanged.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

import numpy as np

from dreamgym_env.domains.webshop.tasks import webshop_task_id
from dreamgym_env.episode import EpisodeEnv, WorldAttribute
from dreamgym_env.errors import DependencyNotInstalled, DreamGymError
from dreamgym_env.real.mapping import parse_webshop_text, webshop_page_to_state
from dreamgym_env.records import Task
from dreamgym_env.world import EngineWorld, EpisodeStart, WorldStep

WEBSHOP_INSTALL = (
    "WebShop is not on PyPI and no dreamgym-env extra installs it: git clone "
    "https://github.com/princeton-nlp/WebShop, run its ./setup.sh -d small (it installs WebShop's "
    "requirements, downloads the product data and builds the search index, which needs Java), then "
    "put the checkout on PYTHONPATH, or pass engine=WebAgentTextEnv(...) built there."
)
"""What installs WebShop's ``web_agent_site`` package (the error of a missing WebShop says it)."""

_ACTION = re.compile(r"(search|click)\[(.*)\]", re.DOTALL)
_SUB_PAGES = ("description", "features", "reviews")


class WebShopTextEngine(Protocol):
    """What the wrapper uses of WebShop's ``WebAgentTextEnv`` (any object with these members works)."""

    def reset(self, session: Any = None, instruction_text: str | None = None) -> tuple[str, Any]:
        """Start a session; returns ``(observation, None)``."""
        ...

    def step(self, action: str) -> tuple[str, float, bool, Any]:
        """Apply ``search[...]`` or ``click[...]``; returns ``(observation, reward, done, info)``."""
        ...

    def get_available_actions(self) -> dict[str, Any]:
        """``{"has_search_bar": bool, "clickables": [lower-cased button texts, product ids, options]}``."""
        ...


class WebShopEngine(EngineWorld):
    """A WebShop text env, its pages mapped to the abstract WebShop format: ``DreamGym/WebShop-Real-v0``'s world.

    What WebShop's text observation leaves out (the query, the product id of an item page, the
    options selected, the sub-page) is tracked from the actions. See :class:`WebShopRealEnv`.

    Args:
        engine: A WebShop text env (or any :class:`WebShopTextEngine`); default built on first use.
        sessions: Session indices or names drawn from at reset; default ``range(num_sessions)``.
        num_sessions: How many sessions the default draws from.
        engine_kwargs: ``WebAgentTextEnv`` arguments for the default engine.
    """

    def __init__(
        self,
        engine: WebShopTextEngine | None = None,
        *,
        sessions: list[int | str] | None = None,
        num_sessions: int = 500,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self._engine = engine
        self._engine_kwargs = dict(engine_kwargs or {})
        self.sessions: list[int | str] = list(sessions) if sessions is not None else list(range(num_sessions))
        if not self.sessions:
            raise DreamGymError("sessions is empty; give at least one WebShop session index.")
        self._instruction = ""
        self._query = ""
        self._asin = ""
        self._selected: dict[str, str] = {}
        self._options: dict[str, list[str]] = {}
        self._sub_page = ""

    @property
    def engine(self) -> WebShopTextEngine:
        """The WebShop text env, created on first use."""
        if self._engine is None:
            try:
                from web_agent_site.envs.web_agent_text_env import WebAgentTextEnv
            except ImportError as e:
                raise DependencyNotInstalled(
                    "web_agent_site",
                    "real",
                    "DreamGym/WebShop-Real-v0",
                    install=WEBSHOP_INSTALL,
                ) from e
            self._engine = WebAgentTextEnv(observation_mode="text", **self._engine_kwargs)
        return self._engine

    def reset(self, options: dict[str, Any], rng: np.random.Generator) -> EpisodeStart:
        """Start a session (``options["session"]``, else drawn from ``rng``)."""
        session = options.get("session")
        if session is None:
            session = self.sessions[int(rng.integers(len(self.sessions)))]
        observation, _ = self.engine.reset(session=session)
        self._query, self._asin, self._sub_page = "", "", ""
        self._selected, self._options = {}, {}
        page = parse_webshop_text(observation)
        self._instruction = page.instruction or str(getattr(self.engine, "instruction_text", ""))
        task = Task(
            task_id=webshop_task_id(session),
            domain="webshop",
            instruction=self._instruction,
            metadata={"session": session},
            source="webshop:real",
        )
        state, admissible = self._map(observation, None)
        return EpisodeStart(task=task, state=state, admissible_actions=admissible)

    def advance(self, action: str) -> WorldStep:
        """One ``search[...]`` or ``click[...]`` sent to the store."""
        observation, reward, done, _ = self.engine.step(action)
        self._track(action)
        state, admissible = self._map(observation, float(reward) if done else None)
        return WorldStep(
            state=state,
            reward=float(reward),
            done=bool(done),
            success=bool(done) and float(reward) >= 1.0,
            admissible_actions=admissible,
        )

    # ------------------------------------------------------------------ state tracking
    def _track(self, action: str) -> None:
        """Remember what the text observation does not show: query, product, options, sub-page."""
        match = _ACTION.fullmatch(action.strip())
        if match is None:
            return
        verb, arg = match.group(1), match.group(2).strip()
        low = arg.lower()
        if verb == "search":
            self._query, self._asin, self._sub_page, self._selected = arg, "", "", {}
        elif low == "back to search":
            self._query, self._asin, self._sub_page, self._selected = "", "", "", {}
        elif low == "< prev":
            if self._sub_page:
                self._sub_page = ""
            else:
                self._asin, self._selected = "", {}
        elif low in _SUB_PAGES:
            self._sub_page = arg.title()
        elif re.fullmatch(r"[a-z0-9]{10}", low) and not self._asin:
            self._asin, self._selected, self._options = arg.upper(), {}, {}
        else:
            for group, values in self._options.items():
                if any(low == v.lower() for v in values):
                    self._selected[group or "option"] = next(v for v in values if v.lower() == low)

    def _map(self, observation: str, reward: float | None) -> tuple[str, list[str]]:
        available = self.engine.get_available_actions()
        clickables = [str(c) for c in available.get("clickables", [])]
        page = parse_webshop_text(observation, clickables)
        if page.kind == "item":
            self._options = page.options
        state = webshop_page_to_state(
            page,
            instruction=self._instruction,
            query=self._query,
            asin=self._asin,
            selected=self._selected,
            sub_page=self._sub_page,
            reward=reward,
        )
        # The simulator lists click[...] for each bracketed element and nothing on the search page.
        admissible = (
            []
            if page.kind in ("search", "done")
            else [f"click[{_display(c, state)}]" for c in clickables if c.lower() != "search"]
        )
        return state, admissible


class WebShopRealEnv(EpisodeEnv):
    """WebShop's real store, observed in the abstract format of ``DreamGym/WebShop-v0``.

    ## Description
    Each episode is one WebShop session (one shopping goal). Observations are the same page listings
    the simulator produces (``WebShop | results for "..." | page 1 (50 results)``, ``[ASIN] title |
    price``, option groups, ``[Buy Now]``); what WebShop's text observation leaves out (the query, the
    product id of an item page, the options selected) is tracked from the actions.

    ## Action Space / Observation Space
    ``FreeText``, as in the simulated env: ``search[<query>]`` and ``click[<element>]``.

    ## Rewards
    WebShop's own reward, passed through: a score in [0, 1] on ``click[Buy Now]`` (1.0 is an exact
    match), 0 otherwise. ``info["success"]`` is True when that score is 1.0.

    ## Episode End
    Terminated when WebShop reports done (after buying); truncated after 15 steps.

    ## Arguments
    ``engine``: a WebShop text env (or any :class:`WebShopTextEngine`); default: built on first reset
    as ``WebAgentTextEnv(observation_mode="text", **engine_kwargs)`` from the ``web_agent_site``
    package of the user's WebShop checkout (on ``PYTHONPATH``, with its data set up).
    ``sessions``: session indices (goal indices) or names drawn from at reset; default
    0..num_sessions-1.

    Reset options: ``{"session": index}`` plays that goal; a session name (``"20220427_1_12"``, as a
    human session log is named) is passed to WebShop as it is. The task id is
    :func:`~dreamgym_env.domains.webshop.tasks.webshop_task_id` of the session, the id the session log's
    task and imported transitions get.

    It is ``EpisodeEnv("webshop", WebShopEngine(...))``: the simulated env with the store as its
    world. Other keywords are :class:`~dreamgym_env.episode.EpisodeEnv`'s.
    """

    world: WebShopEngine

    def __init__(
        self,
        engine: WebShopTextEngine | None = None,
        *,
        sessions: list[int | str] | None = None,
        num_sessions: int = 500,
        engine_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        world = WebShopEngine(
            engine, sessions=sessions, num_sessions=num_sessions, engine_kwargs=engine_kwargs
        )
        super().__init__("webshop", world, **kwargs)

    engine = WorldAttribute[WebShopTextEngine]("The WebShop text env, created on first use.")
    sessions = WorldAttribute[list[int | str]]("The sessions reset draws from.")


def _display(clickable: str, state: str) -> str:
    """A lower-cased WebShop clickable as the page writes it (``back to search`` -> ``Back to Search``)."""
    match = re.search(r"\[(" + re.escape(clickable) + r")\]", state, re.IGNORECASE)
    return match.group(1) if match else clickable
