"""What a proposed task variant looks like, per domain: fields, JSON schema, prompt guidance, Task metadata.

The generator asks the model for variants in the shape of the domain's seed-task metadata (WebShop
attributes, options and price limit; ALFWorld task type, object and target; WebArena sites, start URL
and evaluation), so the validators can check the facts the simulator will rely on. A domain that is
a package of its own keeps its format there (TextWorld's: :mod:`dreamgym_env.domains.textworld.curriculum`). Which format a built-in domain uses is a column of the domain
table (:data:`dreamgym_env.domains.BUILTIN_DOMAINS`); the fields' choices are the domain's own
constants (ALFWorld's task types, WebArena's sites, WebShop's categories). A domain without a format
gets :data:`GENERIC_FORMAT`: the instruction only, metadata copied from the parent.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from dreamgym_env.domains import BUILTIN_DOMAINS, load_entry_point
from dreamgym_env.domains.alfworld.tasks import ALFWORLD_TASK_TYPES
from dreamgym_env.domains.webarena import DEFAULT_SITE_URLS
from dreamgym_env.domains.webshop import WEBSHOP_CATEGORIES
from dreamgym_env.domains.webshop.tasks import OPTIONS_KEY
from dreamgym_env.records import Task

if TYPE_CHECKING:
    _ALFWorldTaskType = str
    _WebArenaSite = str
    _WebShopCategory = str
else:  # the choices are the domains' own tables, so the schema cannot drift from them
    _ALFWorldTaskType = Literal[ALFWORLD_TASK_TYPES]
    _WebArenaSite = Literal[tuple(sorted(set(DEFAULT_SITE_URLS) - {"homepage"}))]
    _WebShopCategory = Literal[tuple(sorted(WEBSHOP_CATEGORIES))]

INSTRUCTION_FIELD = Field(description="The task as the agent reads it.", min_length=1, max_length=300)
"""Every variant's ``instruction`` field, its last: the new task's instruction."""


class VariantModel(BaseModel):
    """Base of a variant's model: a field the schema does not name is an error, not dropped.

    It declares no fields, so a variant's fields stay in its own order (the order the JSON schema, and
    so the model's answer, lists them in).
    """

    model_config = ConfigDict(extra="forbid")


class WebShopVariant(VariantModel):
    """A WebShop goal."""

    category: _WebShopCategory = Field(description="The product category.")
    attributes: list[str] = Field(max_length=6, description="Product attributes the goal requires.")
    options: list[str] = Field(max_length=6, description="Options to select: size, colour, count...")
    price_upper: float = Field(description="Price limit in dollars, as stated in the instruction.")
    instruction: str = INSTRUCTION_FIELD


class ALFWorldVariant(VariantModel):
    """An ALFWorld household task."""

    task_type: _ALFWorldTaskType
    object: str = Field(max_length=20, description="Lowercase ALFRED object type, e.g. 'mug'.")
    target: str = Field(max_length=20, description="Target receptacle, or the lamp for look_at_obj_in_light.")
    instruction: str = INSTRUCTION_FIELD


class WebArenaVariant(VariantModel):
    """A WebArena request."""

    sites: list[_WebArenaSite] = Field(min_length=1, max_length=2)
    start_url: str = Field(
        max_length=120, description="Start page, with the site placeholder: '__GITLAB__/...'."
    )
    eval_type: Literal["string_match", "url_match", "program_html"]
    reference: str = Field(max_length=120, description="Answer, URL to reach, or how to check the change.")
    instruction: str = INSTRUCTION_FIELD


class GenericVariant(VariantModel):
    """Any domain: the instruction only."""

    instruction: str = INSTRUCTION_FIELD


@dataclass(frozen=True)
class VariantFormat:
    """How one domain's variants are asked for and turned into tasks.

    Attributes:
        model: Pydantic model of one variant (its JSON schema is sent to the model).
        guidance: Domain facts for the prompt: what fields mean and how the instruction is phrased.
        describe: ``task -> dict`` of the variant fields, to show the parent in the same shape.
        to_metadata: ``(variant, parent) -> Task.metadata`` of the new task.
    """

    model: type[BaseModel]
    guidance: str
    describe: Callable[[Task], dict[str, Any]]
    to_metadata: Callable[[BaseModel, Task], dict[str, Any]]


def describe_metadata(key: str) -> Callable[[Task], dict[str, Any]]:
    """A format's ``describe`` for a variant of one metadata field and the instruction.

    The task is shown as ``{key: task.metadata[key], "instruction": task.instruction}``, with ``""``
    for a task without ``key``.
    """

    def describe(task: Task) -> dict[str, Any]:
        return {key: task.metadata.get(key, ""), "instruction": task.instruction}

    return describe


def _webshop_describe(task: Task) -> dict[str, Any]:
    m = task.metadata
    return {
        "category": m.get("category", ""),
        "attributes": m.get("attributes", []),
        "options": m.get(OPTIONS_KEY, []),
        "price_upper": m.get("price_upper"),
        "instruction": task.instruction,
    }


def _webshop_metadata(v: BaseModel, parent: Task) -> dict[str, Any]:
    assert isinstance(v, WebShopVariant)
    return {
        "category": v.category,
        "attributes": list(v.attributes),
        OPTIONS_KEY: list(v.options),
        "price_upper": v.price_upper,
    }


def _alfworld_describe(task: Task) -> dict[str, Any]:
    m = task.metadata
    target = m.get("lamp") if m.get("task_type") == "look_at_obj_in_light" else m.get("receptacle")
    return {
        "task_type": m.get("task_type"),
        "object": m.get("object"),
        "target": target,
        "instruction": task.instruction,
    }


def _alfworld_metadata(v: BaseModel, parent: Task) -> dict[str, Any]:
    assert isinstance(v, ALFWorldVariant)
    key = "lamp" if v.task_type == "look_at_obj_in_light" else "receptacle"
    return {"task_type": v.task_type, "object": v.object.strip().lower(), key: v.target.strip().lower()}


def _webarena_describe(task: Task) -> dict[str, Any]:
    m = task.metadata
    raw = m.get("eval")
    evaluation: dict[str, Any] = raw if isinstance(raw, dict) else {}
    types = evaluation.get("eval_types") or ["string_match"]
    reference = evaluation.get("reference_url") or evaluation.get("note") or ""
    answers = evaluation.get("reference_answers")
    if isinstance(answers, dict) and answers.get("must_include"):
        reference = ", ".join(map(str, answers["must_include"]))
    return {
        "sites": m.get("sites", []),
        "start_url": m.get("start_url", ""),
        "eval_type": types[0],
        "reference": reference,
        "instruction": task.instruction,
    }


def _webarena_metadata(v: BaseModel, parent: Task) -> dict[str, Any]:
    assert isinstance(v, WebArenaVariant)
    reference = v.reference.strip()
    evaluation: dict[str, Any] = {"eval_types": [v.eval_type]}
    if v.eval_type == "string_match":
        evaluation["reference_answers"] = {"must_include": [reference]} if reference else None
    elif v.eval_type == "url_match":
        evaluation["reference_url"] = reference
    else:
        evaluation["reference_answers"] = None
        evaluation["note"] = reference
    return {"sites": list(v.sites), "start_url": v.start_url.strip(), "eval": evaluation}


WEBSHOP_FORMAT = VariantFormat(
    WebShopVariant,
    "A WebShop goal names one product, 1-6 attributes it must have (e.g. 'gluten free', 'long lasting') "
    "and 0-6 options to select (size, colour, count), and ends with 'and price lower than X.00 dollars'. "
    "Every attribute and option appears in the instruction word for word, and price_upper is the same "
    "number as in the instruction. category is one of fashion, beauty, grocery, electronics, garden.",
    _webshop_describe,
    _webshop_metadata,
)
"""WebShop goals: category, attributes, options and price limit, each stated in the instruction."""

ALFWORLD_FORMAT = VariantFormat(
    ALFWorldVariant,
    "ALFWorld tasks are one of six types: pick_and_place_simple, pick_clean_then_place_in_recep (clean "
    "at a sinkbasin), pick_heat_then_place_in_recep (heat in a microwave), pick_cool_then_place_in_recep "
    "(cool in a fridge), look_at_obj_in_light, pick_two_obj_and_place. Objects and receptacles are "
    "lowercase ALFRED names (apple, mug, soapbar; countertop, cabinet, diningtable). target is the "
    "receptacle, or the lamp (desklamp or floorlamp) for look_at_obj_in_light. The instruction uses "
    "ALFWorld's phrasing: 'put a clean mug in coffeemachine.', 'heat some potato and put it in "
    "diningtable.', 'look at book under the desklamp.', 'put two pillow in sofa.'.",
    _alfworld_describe,
    _alfworld_metadata,
)
"""ALFWorld tasks: task type, object and receptacle or lamp, in ALFWorld's goal phrasing."""

WEBARENA_FORMAT = VariantFormat(
    WebArenaVariant,
    "WebArena tasks run on one or two of these sites: shopping (an online store), shopping_admin (its "
    "admin panel), gitlab, reddit (a forum site), map (OpenStreetMap) and wikipedia. start_url is a page "
    "of a listed site written with its placeholder ('__SHOPPING__', '__GITLAB__/byteblaze/dotfiles'). "
    "eval_type: string_match for questions (reference: the answer if known, else empty), url_match for "
    "tasks that end on a page (reference: that URL), program_html for tasks that change the site "
    "(reference: how to check the change).",
    _webarena_describe,
    _webarena_metadata,
)
"""WebArena requests: sites, start URL and an evaluation of a known type."""

_FORMATS: dict[str, VariantFormat] = {}

GENERIC_FORMAT = VariantFormat(
    GenericVariant,
    "Keep the task's setting; change its concrete details.",
    lambda task: {"instruction": task.instruction},
    lambda variant, parent: copy.deepcopy(dict(parent.metadata)),
)
"""The format of domains without their own: instruction only, metadata inherited from the parent."""


def register_format(domain: str, fmt: VariantFormat) -> None:
    """Use ``fmt`` to ask for and build variants of ``domain``'s tasks (it takes precedence over the table)."""
    _FORMATS[domain] = fmt


def get_format(domain: str) -> VariantFormat:
    """The variant format of ``domain``.

    One registered with :func:`register_format`, else the built-in domain's (the ``task_format``
    column of :data:`dreamgym_env.domains.BUILTIN_DOMAINS`), else :data:`GENERIC_FORMAT`.
    """
    if domain in _FORMATS:
        return _FORMATS[domain]
    if domain in BUILTIN_DOMAINS:
        fmt = load_entry_point(BUILTIN_DOMAINS[domain].task_format)
        assert isinstance(fmt, VariantFormat)
        return fmt
    return GENERIC_FORMAT


def strict_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema in the form strict structured decoding needs.

    References are inlined, every property is required, extra properties are forbidden and defaults
    are dropped (vLLM and OpenAI's strict mode accept this subset).
    """
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def fix(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return fix(copy.deepcopy(defs[node["$ref"].rsplit("/", 1)[-1]]))
            node = {k: fix(v) for k, v in node.items() if k != "default"}
            if node.get("type") == "object" and "properties" in node:
                node["required"] = list(node["properties"])
                node["additionalProperties"] = False
            return node
        if isinstance(node, list):
            return [fix(v) for v in node]
        return node

    return fix(schema)
