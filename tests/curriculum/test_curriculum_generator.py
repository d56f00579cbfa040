import json

import pytest

from dreamgym_env import ScriptedBackend
from dreamgym_env.curriculum.generator import TaskGenerator, variant_request
from dreamgym_env.curriculum.stats import TaskStats
from dreamgym_env.domains import get_domain
from dreamgym_env.errors import BackendError, ServerUnreachableError

WEBSHOP_PARENT = get_domain("webshop").seed_tasks()[0]  # waterproof hiking boots
ALF_PARENT = get_domain("alfworld").seed_tasks()[4]  # heat potato -> diningtable
ARENA_PARENT = get_domain("webarena").seed_tasks()[8]  # dotfiles commits question
STATS = TaskStats("p", 8, 8, 0.5, 0.5, 0.25, "task")

GOOD = {
    "webshop": {
        "category": "fashion",
        "attributes": ["waterproof", "insulated"],
        "options": ["black", "size 9"],
        "price_upper": 120.0,
        "instruction": "i need women's insulated waterproof snow boots in black, "
        "size 9, and price lower than 120.00 dollars",
    },
    "alfworld": {
        "task_type": "pick_heat_then_place_in_recep",
        "object": "egg",
        "target": "countertop",
        "instruction": "heat some egg and put it in countertop.",
    },
    "webarena": {
        "sites": ["gitlab"],
        "start_url": "__GITLAB__/byteblaze/dotfiles",
        "eval_type": "string_match",
        "reference": "",
        "instruction": "How many branches does the dotfiles repository have?",
    },
}
BAD = {
    "webshop": {
        "category": "fashion",
        "attributes": ["qzxv"],
        "options": [],
        "price_upper": -3.0,
        "instruction": "Ġ ĠĊĠ ĠĠĠ",
    },
    "alfworld": {
        "task_type": "pick_heat_then_place_in_recep",
        "object": "sofa",
        "target": "moon",
        "instruction": "heat some sofa and put it in moon.",
    },
    "webarena": {
        "sites": ["map"],
        "start_url": "__GITLAB__",
        "eval_type": "string_match",
        "reference": "",
        "instruction": "How many branches does the dotfiles repository have?",
    },
}
PARENTS = {"webshop": WEBSHOP_PARENT, "alfworld": ALF_PARENT, "webarena": ARENA_PARENT}


def _answer(*variants):
    return {"reasoning": "change the details", "variants": list(variants)}


@pytest.mark.parametrize("domain", ["webshop", "alfworld", "webarena"])
def test_well_formed_variant_is_accepted_and_garbage_rejected_with_reason(domain):
    backend = ScriptedBackend([_answer(BAD[domain], GOOD[domain])])
    parent = PARENTS[domain]
    result = TaskGenerator(backend).generate([(parent, STATS)], existing=[parent])
    assert len(result.accepted) == 1
    task = result.accepted[0]
    assert task.parent_id == parent.task_id and task.source == "generated" and task.domain == domain
    assert task.instruction == GOOD[domain]["instruction"]
    assert [r.stage for r in result.rejected] == ["validator"]
    assert result.rejected[0].reason and result.rejected[0].candidate == BAD[domain]


def test_generated_metadata_follows_domain_shape():
    backend = ScriptedBackend([_answer(GOOD["webarena"]), _answer(GOOD["alfworld"])])
    gen = TaskGenerator(backend)
    arena = gen.generate([(ARENA_PARENT, STATS)], existing=[]).accepted[0]
    assert arena.metadata == {
        "sites": ["gitlab"],
        "start_url": "__GITLAB__/byteblaze/dotfiles",
        "eval": {"eval_types": ["string_match"], "reference_answers": None},
    }
    alf = gen.generate([(ALF_PARENT, STATS)], existing=[]).accepted[0]
    assert alf.metadata == {
        "task_type": "pick_heat_then_place_in_recep",
        "object": "egg",
        "receptacle": "countertop",
    }
    assert get_domain("alfworld").initial_state(alf, __import__("numpy").random.default_rng(0)).state


def test_request_is_strict_structured_output_with_parent_and_record():
    request = variant_request(WEBSHOP_PARENT, STATS, candidates=3, avoid=["an earlier variant"], seed=7)
    schema = request.json_schema
    assert request.schema_name == "task_variants" and request.seed == 7 and request.query is None
    assert schema["required"] == ["reasoning", "variants"] and schema["additionalProperties"] is False
    item = schema["properties"]["variants"]["items"]
    assert item["additionalProperties"] is False and set(item["required"]) == set(item["properties"])
    assert schema["properties"]["variants"]["maxItems"] == 3
    assert "$ref" not in json.dumps(schema) and "default" not in json.dumps(schema)
    user = request.messages[1]["content"]
    assert WEBSHOP_PARENT.instruction in user and "4 of 8" in user and "an earlier variant" in user


def test_unparsable_and_schema_invalid_answers_are_rejected_at_parse():
    backend = ScriptedBackend(['{"reasoning": "tru', _answer({"instruction": "x"}), {"nothing": 1}])
    gen = TaskGenerator(backend)
    reasons = [gen.generate([(WEBSHOP_PARENT, STATS)], existing=[]).rejected for _ in range(3)]
    assert [r[0].stage for r in reasons] == ["parse", "parse", "parse"]
    assert "not JSON" in reasons[0][0].reason
    assert "Field required" in reasons[1][0].reason
    assert "variants" in reasons[2][0].reason


def test_near_duplicates_of_pool_tasks_are_rejected():
    copy = dict(
        GOOD["webshop"],
        instruction=WEBSHOP_PARENT.instruction.replace("90.00", "90.00 "),
        attributes=["waterproof", "rubber sole"],
        options=["brown", "10.5"],
        price_upper=90.0,
    )
    backend = ScriptedBackend([_answer(copy, GOOD["webshop"])])
    result = TaskGenerator(backend).generate([(WEBSHOP_PARENT, STATS)], existing=[WEBSHOP_PARENT])
    assert [r.stage for r in result.rejected] == ["duplicate"]
    assert len(result.accepted) == 1


def test_selection_keeps_the_most_novel_candidate():
    close = dict(
        GOOD["webshop"],
        instruction="i want a pair of men's waterproof hiking boots with a rubber sole, "
        "in black, size 9, and price lower than 120.00 dollars",
        attributes=["waterproof", "rubber sole"],
    )
    backend = ScriptedBackend([_answer(close, GOOD["webshop"])])
    result = TaskGenerator(backend, duplicate_threshold=0.99).generate(
        [(WEBSHOP_PARENT, STATS)], existing=[WEBSHOP_PARENT]
    )
    assert [t.instruction for t in result.accepted] == [GOOD["webshop"]["instruction"]]
    assert [r.stage for r in result.rejected] == ["selection"]


def test_drift_check_rejects_unrelated_candidates():
    unrelated = {
        "category": "grocery",
        "attributes": ["organic"],
        "options": [],
        "price_upper": 9.0,
        "instruction": "organic basil seeds pack, and price lower than 9.00 dollars",
    }
    backend = ScriptedBackend([_answer(unrelated)])
    result = TaskGenerator(backend, min_parent_similarity=0.5).generate(
        [(WEBSHOP_PARENT, STATS)], existing=[]
    )
    assert not result.accepted and result.rejected[0].stage == "drift"


def test_backend_failures():
    def fail(request):
        raise BackendError("prompt too long for the model")

    result = TaskGenerator(ScriptedBackend(fail)).generate([(WEBSHOP_PARENT, STATS)], existing=[])
    assert result.rejected[0].stage == "backend" and "too long" in result.rejected[0].reason

    def down(request):
        raise ServerUnreachableError("no endpoint answered")

    with pytest.raises(ServerUnreachableError):
        TaskGenerator(ScriptedBackend(down)).generate([(WEBSHOP_PARENT, STATS)], existing=[])


def test_two_parents_cannot_add_the_same_variant():
    backend = ScriptedBackend(lambda request: _answer(GOOD["webshop"]))
    other = get_domain("webshop").seed_tasks()[5]
    result = TaskGenerator(backend).generate([(WEBSHOP_PARENT, STATS), (other, STATS)], existing=[])
    assert len(result.accepted) == 1 and result.rejected[0].stage == "duplicate"
