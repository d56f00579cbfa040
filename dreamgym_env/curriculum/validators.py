"""Domain validators: a generated task enters the pool only if it is well-formed and realistic.

A validator takes a :class:`~dreamgym_env.records.Task` and returns ``None`` when the task is
acceptable, or one sentence saying what is wrong (the reason is stored with the rejected candidate,
so a user can see why a model's proposals fail). Every task first passes :func:`check_instruction`,
which refuses text that is not a readable instruction (the usual failure of a weak model), then its
domain's validator:

* WebShop: 1-6 attributes and 0-6 options, each stated in the instruction; a price limit that is a
  plausible number of dollars and is the one the instruction states; a known product category.
* ALFWorld: one of the six task types; an ALFRED object and receptacle (or lamp) that fit it (only
  heatable objects are heated; a coffee machine holds a mug or a cup; a pillow does not go in a
  drawer); a room kind that has both the target and the appliance the task needs; an instruction that
  reads as that task.
* WebArena: known sites; a start URL on one of them; an intent that is answerable: an evaluation
  of a known type, a question when the answer is a string, and no request for a site the task lacks.
* TextWorld (:mod:`dreamgym_env.domains.textworld.curriculum`): a quest made of the game's commands
  that names its object; when the task starts in a given first state, that state gives this quest.

Which validator a built-in domain uses is a column of the domain table
(:data:`dreamgym_env.domains.BUILTIN_DOMAINS`). User domains register their own with
:func:`register_validator`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from dreamgym_env.domains import BUILTIN_DOMAINS, load_entry_point
from dreamgym_env.domains.webshop import WEBSHOP_CATEGORIES
from dreamgym_env.records import Task

Validator = Callable[[Task], "str | None"]
"""``task -> None`` when acceptable, else the reason it is not."""

_MIN_CHARS, _MAX_CHARS = 12, 400
_TOKEN = re.compile(r"^[\w$%&'’().,:;!?\"/+\-#@*=\[\]]+$")
_WORD = re.compile(r"[a-z]{2,}")
_VOWEL = re.compile(r"[aeiouy]")


def check_instruction(text: Any) -> str | None:
    """Refuse an instruction that a person could not read as a request.

    Checks: a string of 12-400 characters on one line, at least three words, no control or unusual
    characters, words that look like words (letters with vowels, none over 25 characters) and no
    token repeated for half the text.
    """
    if not isinstance(text, str):
        return f"the instruction must be a string, got {type(text).__name__}"
    stripped = text.strip()
    if not _MIN_CHARS <= len(stripped) <= _MAX_CHARS:
        return f"the instruction has {len(stripped)} characters; {_MIN_CHARS} to {_MAX_CHARS} are accepted"
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in stripped):
        return "the instruction contains control characters or line breaks; write it as one plain sentence"
    tokens = stripped.split()
    if len(tokens) < 3:
        return f"the instruction has {len(tokens)} word(s); a task needs at least 3"
    odd = [t for t in tokens if not _TOKEN.match(t)]
    if len(odd) > len(tokens) // 10:
        return f"the instruction contains tokens that are not words: {odd[:3]}"
    lowered = [t.lower() for t in tokens]
    words = [w for w in lowered if _WORD.search(w)]
    if len(words) < max(3, 0.6 * len(tokens)):
        return "the instruction is mostly numbers or symbols, not words"
    if any(len(w) > 25 for w in words):
        return (
            f"the instruction contains a {max(len(w) for w in words)}-letter word, which is not a real word"
        )
    vowelless = [w for w in words if not _VOWEL.search(w) and len(w) > 3]
    if len(vowelless) > max(1, len(words) // 5):
        return f"the instruction contains words without vowels {vowelless[:3]}; it reads as gibberish"
    top, count = Counter(lowered).most_common(1)[0]
    if len(tokens) >= 6 and count > len(tokens) / 2:
        return f"the instruction repeats {top!r} {count} times in {len(tokens)} words"
    return None


# --------------------------------------------------------------------------------------------------
# WebShop
# --------------------------------------------------------------------------------------------------

_WEBSHOP_MAX_PRICE = 10_000.0


def mentions(instruction: str, phrase: str) -> bool:
    """Whether the instruction states the phrase: verbatim, or every one of its words."""
    text = instruction.lower()
    phrase = phrase.lower().strip()
    if phrase in text:
        return True
    words = re.findall(r"[\w.]+", phrase)
    return bool(words) and all(re.search(rf"(?<![\w]){re.escape(w)}(?![\w])", text) for w in words)


def _string_list(value: Any, name: str, lo: int, hi: int) -> str | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return f"{name} must be a list of strings"
    if not lo <= len(value) <= hi:
        return f"{name} has {len(value)} entries; {lo} to {hi} are accepted"
    for v in value:
        if not 1 <= len(v.strip()) <= 40 or check_phrase(v) is not None:
            return f"{name} entry {v!r:.60} is not a short phrase of words"
    if len({v.strip().lower() for v in value}) != len(value):
        return f"{name} repeats an entry: {value}"
    return None


def check_phrase(text: str) -> str | None:
    """Refuse a short phrase (attribute, option, object) that is not made of words."""
    tokens = text.split()
    if not tokens or not all(_TOKEN.match(t) for t in tokens):
        return "not words"
    if not any(_WORD.search(t.lower()) or re.search(r"\d", t) for t in tokens):
        return "not words"
    return None


def validate_webshop(task: Task) -> str | None:
    """WebShop: attributes and options stated in the instruction, a plausible price limit, known category."""
    from dreamgym_env.domains.webshop.tasks import OPTIONS_KEY, parse_price_upper

    meta = task.metadata
    problem = _string_list(meta.get("attributes"), "attributes", 1, 6) or _string_list(
        meta.get(OPTIONS_KEY, []), OPTIONS_KEY, 0, 6
    )
    if problem:
        return problem
    for kind in ("attributes", OPTIONS_KEY):
        missing = [v for v in meta.get(kind, []) if not mentions(task.instruction, v)]
        if missing:
            return (
                f"the instruction does not state the {kind} {missing}; "
                f"every goal {kind[:-1]} must appear in it"
            )
    price = meta.get("price_upper")
    if isinstance(price, bool) or not isinstance(price, int | float):
        return f"price_upper must be a number of dollars, got {price!r:.40}"
    if not 1.0 <= float(price) <= _WEBSHOP_MAX_PRICE:
        limit = f"1 to {_WEBSHOP_MAX_PRICE:.0f} dollars are accepted"
        return f"price_upper {price} is not a plausible limit; {limit}"
    stated = parse_price_upper(task.instruction)
    if stated is None:
        return "the instruction states no price limit; end it with 'and price lower than X.00 dollars'"
    if abs(stated - float(price)) > 0.005:
        return f"the instruction's price limit ({stated}) differs from price_upper ({price})"
    category = meta.get("category")
    if category is not None and category not in WEBSHOP_CATEGORIES:
        return f"unknown category {category!r:.40}; expected one of {sorted(WEBSHOP_CATEGORIES)}"
    return None


# --------------------------------------------------------------------------------------------------
# ALFWorld
# --------------------------------------------------------------------------------------------------

_ALFWORLD_OBJECTS = frozenset(
    {
        "alarmclock",
        "apple",
        "baseballbat",
        "basketball",
        "book",
        "bowl",
        "box",
        "bread",
        "butterknife",
        "candle",
        "cd",
        "cellphone",
        "cloth",
        "creditcard",
        "cup",
        "dishsponge",
        "egg",
        "fork",
        "glassbottle",
        "handtowel",
        "kettle",
        "keychain",
        "knife",
        "ladle",
        "laptop",
        "lettuce",
        "mug",
        "newspaper",
        "pan",
        "pen",
        "pencil",
        "peppershaker",
        "pillow",
        "plate",
        "plunger",
        "pot",
        "potato",
        "remotecontrol",
        "saltshaker",
        "soapbar",
        "soapbottle",
        "spatula",
        "spoon",
        "spraybottle",
        "statue",
        "tennisracket",
        "tissuebox",
        "toiletpaper",
        "tomato",
        "towel",
        "vase",
        "watch",
        "wateringcan",
        "winebottle",
    }
)
"""Object types an ALFWorld agent can pick up (ALFRED's pickupable objects, lowercase)."""

_HEATABLE = frozenset({"apple", "bread", "cup", "egg", "mug", "plate", "potato", "tomato"})
_COOLABLE = _HEATABLE | {"bowl", "lettuce", "pan", "pot", "winebottle"}
_CLEANABLE = frozenset(
    {
        "apple",
        "bowl",
        "butterknife",
        "cloth",
        "cup",
        "dishsponge",
        "egg",
        "fork",
        "kettle",
        "knife",
        "ladle",
        "lettuce",
        "mug",
        "pan",
        "plate",
        "pot",
        "potato",
        "soapbar",
        "spatula",
        "spoon",
        "tomato",
    }
)
_NEEDS = {
    "pick_heat_then_place_in_recep": ("heat", _HEATABLE),
    "pick_cool_then_place_in_recep": ("cool", _COOLABLE),
    "pick_clean_then_place_in_recep": ("clean", _CLEANABLE),
}
# Receptacles that hold only particular objects.
_ACCEPTS = {
    "coffeemachine": frozenset({"mug", "cup"}),
    "toaster": frozenset({"bread"}),
    "stoveburner": frozenset({"pan", "pot", "kettle"}),
    "toiletpaperhanger": frozenset({"toiletpaper"}),
    "handtowelholder": frozenset({"handtowel"}),
    "towelholder": frozenset({"towel", "handtowel"}),
    "microwave": _HEATABLE | {"bowl", "lettuce"},
    "fridge": _COOLABLE | {"glassbottle"},
    "sinkbasin": _CLEANABLE | {"soapbottle", "spraybottle", "handtowel", "glassbottle"},
    "bathtubbasin": _CLEANABLE | {"soapbottle", "spraybottle", "handtowel", "towel"},
}
_BULKY = frozenset({"pillow", "laptop", "basketball", "baseballbat", "tennisracket", "box"})
_SURFACES = frozenset(
    {
        "armchair",
        "bed",
        "sofa",
        "ottoman",
        "desk",
        "dresser",
        "diningtable",
        "coffeetable",
        "sidetable",
        "countertop",
        "tvstand",
    }
)


def validate_alfworld(task: Task) -> str | None:
    """ALFWorld: a known task type with an object and receptacle that fit it, in a room that can exist."""
    from dreamgym_env.domains.alfworld import LAMP_STANDS, LAMPS, ROOM_RECEPTACLES
    from dreamgym_env.domains.alfworld.tasks import ALFWORLD_TASK_TYPES, ALFWORLD_TOOLS, parse_alfworld_goal

    meta = task.metadata
    task_type = meta.get("task_type")
    if task_type not in ALFWORLD_TASK_TYPES:
        return f"task_type {task_type!r:.60} is not one of ALFWorld's six: {list(ALFWORLD_TASK_TYPES)}"
    obj = meta.get("object")
    if obj not in _ALFWORLD_OBJECTS:
        return f"object {obj!r:.40} is not an ALFWorld object an agent can pick up (e.g. apple, mug, book)"
    looking = task_type == "look_at_obj_in_light"
    receptacles = {kind for room in ROOM_RECEPTACLES.values() for kind in room}
    if looking:
        target = meta.get("lamp")
        if target not in LAMPS:
            return f"lamp {target!r:.40} is not one of {sorted(LAMPS)}"
    else:
        target = meta.get("receptacle")
        if target not in receptacles:
            return f"receptacle {target!r:.40} is not an ALFWorld receptacle; known: {sorted(receptacles)}"
        if task_type in _NEEDS:
            verb, able = _NEEDS[task_type]
            if obj not in able:
                return f"a {obj} cannot be {verb}ed in ALFWorld; objects that can: {sorted(able)}"
        accepted = _ACCEPTS.get(target)
        if accepted is not None and obj not in accepted:
            return f"a {target} does not hold a {obj}; it holds {sorted(accepted)}"
        if obj in _BULKY and target not in _SURFACES:
            return f"a {obj} does not fit in a {target}; put it on furniture such as {sorted(_SURFACES)[:4]}"
    needed = [r for r in (None if looking else target, ALFWORLD_TOOLS.get(task_type)) if r]
    rooms = [
        name
        for name, recs in ROOM_RECEPTACLES.items()
        if all(recs.get(r, (0, 0))[1] > 0 for r in needed)
        and (not looking or any(recs.get(s, (0, 0))[1] > 0 for s in LAMP_STANDS))
    ]
    if not rooms:
        return f"no ALFWorld room has all of {needed}; the task cannot be set up"
    parsed = parse_alfworld_goal(task.instruction)
    if parsed is None:
        return (
            "the instruction is not in an ALFWorld goal phrasing (e.g. 'put a clean mug in coffeemachine.')"
        )
    expected = {"task_type": task_type, "object": obj, ("lamp" if looking else "receptacle"): target}
    differing = {k: parsed.get(k) for k, v in expected.items() if parsed.get(k) != v}
    if differing:
        wanted = {k: expected[k] for k in differing}
        return f"the instruction reads as {differing} but the task says {wanted}"
    return None


# --------------------------------------------------------------------------------------------------
# WebArena
# --------------------------------------------------------------------------------------------------

_EVAL_TYPES = frozenset({"string_match", "url_match", "program_html"})
_QUESTION = re.compile(
    r"\?|^(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|list|tell|give|"
    r"find out|name|count|show me the (?:number|count|total|name))\b",
    re.IGNORECASE,
)
# Words that tie a request to one site; used only to catch intents aimed at a site the task lacks.
_SITE_WORDS = {
    "gitlab": ("repository", "repo", "merge request", "commit", "branch", "gitlab", "contributor"),
    "reddit": ("forum", "subreddit", "upvote", "downvote", "reddit", "submission"),
    "map": ("route", "directions", "driving", "walking distance", "on the map", "coordinates"),
    "wikipedia": ("wikipedia",),
    "shopping": ("wish list", "wishlist", "shopping cart", "add to cart", "my order", "my orders"),
    "shopping_admin": ("admin panel", "admin", "search term", "invoice", "customers"),
}


def validate_webarena(task: Task) -> str | None:
    """WebArena: known sites, a start URL on one of them and an answerable intent with an evaluation."""
    from dreamgym_env.domains.webarena import DEFAULT_SITE_URLS

    meta = task.metadata
    known = sorted(set(DEFAULT_SITE_URLS) - {"homepage"})
    sites = meta.get("sites")
    if not isinstance(sites, list) or not sites or not all(isinstance(s, str) for s in sites):
        return f"sites must be a non-empty list of site names from {known}"
    unknown = [s for s in sites if s not in known]
    if unknown:
        return f"unknown site(s) {unknown}; WebArena's sites are {known}"
    start = meta.get("start_url")
    if not isinstance(start, str) or not start.strip():
        return "start_url is missing; give a page of one of the task's sites, e.g. '__SHOPPING__'"
    for url in (u.strip() for u in start.split("|AND|")):
        placeholder = re.match(r"__([A-Z_]+?)__", url)
        on_site = (placeholder and placeholder.group(1).lower() in sites) or any(
            url.startswith(DEFAULT_SITE_URLS[s]) for s in sites
        )
        if not on_site:
            return (
                f"start_url {url!r:.80} is not on the task's sites {sites}; "
                f"start with e.g. '__{sites[0].upper()}__'"
            )
    lowered = task.instruction.lower()
    for site, words in _SITE_WORDS.items():
        hits = [w for w in words if re.search(rf"\b{re.escape(w)}\b", lowered)]
        if (
            hits
            and site not in sites
            and not (site.startswith("shopping") and any(s.startswith("shopping") for s in sites))
        ):
            return (
                f"the intent mentions {hits} ({site}) but the task's sites are {sites}: "
                "it cannot be done there"
            )
    evaluation = meta.get("eval")
    if not isinstance(evaluation, dict):
        return "the task has no evaluation ('eval'); without one, no answer can be judged"
    types = evaluation.get("eval_types")
    if not isinstance(types, list) or not types or not set(types) <= _EVAL_TYPES:
        return f"eval_types must be a non-empty list from {sorted(_EVAL_TYPES)}, got {types!r:.60}"
    if "string_match" in types and not _QUESTION.search(task.instruction.strip()):
        return "a string_match task must ask for information (a question); this intent asks for none"
    if "url_match" in types:
        reference = evaluation.get("reference_url")
        if not isinstance(reference, str) or not reference.strip():
            return "a url_match task needs the reference_url the agent must reach"
    return None


# --------------------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------------------

_VALIDATORS: dict[str, Validator] = {}


def register_validator(domain: str, validator: Validator) -> None:
    """Use ``validator`` for the tasks of ``domain`` (replacing any earlier one and the table's)."""
    _VALIDATORS[domain] = validator


def get_validator(domain: str) -> Validator | None:
    """The validator of ``domain``: one registered, else the built-in domain's, else ``None``.

    The built-in domain's is the ``validator`` column of :data:`dreamgym_env.domains.BUILTIN_DOMAINS`;
    a domain without one gets the instruction check only.
    """
    if domain in _VALIDATORS:
        return _VALIDATORS[domain]
    if domain in BUILTIN_DOMAINS:
        validator: Validator = load_entry_point(BUILTIN_DOMAINS[domain].validator)
        return validator
    return None


def validate_task(task: Task) -> str | None:
    """Run the instruction check, then the task's domain validator; return the first reason found."""
    reason = check_instruction(task.instruction)
    if reason is not None:
        return reason
    validator = get_validator(task.domain)
    return validator(task) if validator is not None else None
