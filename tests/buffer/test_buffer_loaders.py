import json
import re
from pathlib import Path

import numpy as np
import pytest

from dreamgym_env.buffer import LoadIssue, ReplayBuffer, dedup_key, detect_format, import_files, iter_records
from dreamgym_env.errors import DataFormatError

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
ALFWORLD = DATA / "alfworld" / "react_alfworld_3prompts.json"
SESSIONS = DATA / "webshop" / "human_session_logs"
needs_data = pytest.mark.skipif(not ALFWORLD.exists(), reason="shared benchmark data not present")


def _records(path, fmt="auto"):
    items = list(iter_records([path], fmt))
    return [i for i in items if not isinstance(i, LoadIssue)], [i for i in items if isinstance(i, LoadIssue)]


def _expected_alfworld_actions():
    """Count action lines independently of the loader: '> x' lines that are not thoughts."""
    transcripts = json.loads(ALFWORLD.read_text())
    return {
        name: sum(
            1
            for line in text.splitlines()
            if line.startswith(">") and not line[1:].strip().startswith("think:")
        )
        for name, text in transcripts.items()
    }


@needs_data
def test_alfworld_react_transcripts():
    records, issues = _records(ALFWORLD)
    assert issues == [] and len(records) == 36
    expected = _expected_alfworld_actions()
    assert {r.transitions[0].episode_id.split(":", 1)[1]: len(r.transitions) for r in records} == expected
    first = records[0].transitions
    assert first[0].task == "put some spraybottle on toilet."
    assert first[0].state.startswith("You are in the middle of a room")
    assert first[0].action == "go to cabinet 1" and first[0].next_state.startswith("On the cabinet 1")
    assert first[1].state == first[0].next_state
    assert "think" not in " ".join(t.action for t in first)
    assert first[0].metadata["agent_thoughts"][0].startswith("To solve the task")
    assert first[-1].done and first[-1].success and first[-1].reward == 1.0
    assert not any(t.done for t in first[:-1])


@needs_data
def test_webshop_sessions():
    records, issues = _records(SESSIONS)
    assert issues == [] and len(records) == 9
    pages = {p.stem: sum(1 for line in p.open() if line.strip()) for p in SESSIONS.glob("*.jsonl")}
    # one transition per pair of consecutive pages, less the one reload (index -> index) in session 13
    assert sum(len(r.transitions) for r in records) == sum(n - 1 for n in pages.values()) - 1 == 51
    by_session = {r.transitions[0].episode_id: r.transitions for r in records}
    s12 = by_session["webshop-session:20220427_1_12"]
    assert [t.action for t in s12] == [
        "search[living room furniture]",
        "click[back to search]",
        "search[living room and kitchen furniture]",
        "click[b09lylklvx]",
        "click[buy now]",
    ]
    assert s12[-1].done and s12[-1].reward == 0.5 and not s12[-1].success
    s17 = by_session["webshop-session:20220427_1_17"]
    assert [t.action for t in s17][2:] == ["click[teal]", "click[38 | 40 | 41 mm]", "click[buy now]"]
    assert s17[-1].success and s17[-1].reward == 1.0


@needs_data
def test_acceptance_import_counts_and_self_retrieval(tmp_path):
    alf, _ = _records(ALFWORLD)
    web, _ = _records(SESSIONS)
    all_t = [t for r in alf + web for t in r.transitions]
    with ReplayBuffer.open(tmp_path / "b.sqlite", dedup="episode") as buffer:
        report = import_files(buffer, [ALFWORLD, SESSIONS])
        assert (report.records, report.transitions_read, report.stored) == (45, len(all_t), len(all_t))
        assert len(buffer) == len(all_t) == 396 + 51
    with ReplayBuffer.open(tmp_path / "c.sqlite") as buffer:  # default: content dedup
        report = import_files(buffer, [ALFWORLD, SESSIONS])
        distinct = len({dedup_key(t) for t in all_t})
        assert len(buffer) == report.stored == distinct and report.duplicates == len(all_t) - distinct
        for t in all_t:
            hits = buffer.search(t.state, t.action, k=8, domain=t.domain)
            top = hits[0].transition
            assert (top.state, top.action) == (t.state, t.action) and hits[0].score == pytest.approx(
                1.0, abs=1e-5
            )
            # the same (state, action) can lead elsewhere in another game: then the copies tie at the top
            tied = [h.transition.next_state for h in hits if h.score > 1 - 1e-5]
            assert t.next_state in tied


def test_own_jsonl_round_trip_and_bad_line_drops_its_episode(tmp_path):
    good = {"domain": "d", "task_id": "t", "task": "x", "state": "s", "action": "a", "next_state": "n"}
    lines = [
        json.dumps({**good, "episode_id": "e1", "step": 0}),
        json.dumps({**good, "episode_id": "e2", "step": 0}),
        "{not json",
        json.dumps({**good, "episode_id": "e2", "step": 2, "state": "s2"}),
        json.dumps({**good, "episode_id": "e3", "step": "zero"}),
        json.dumps({**good, "episode_id": "e4", "step": 0, "state": "s4"}),
    ]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert detect_format(path) == "jsonl"
    records, issues = _records(path)
    assert [r.transitions[0].episode_id for r in records] == ["e1", "e4"]
    assert [(i.line, "e2" in i.message) for i in issues] == [(3, True), (5, False)]
    with ReplayBuffer.open(":memory:") as buffer:
        report = import_files(buffer, [path])
        assert len(buffer) == 2 and len(report.issues) == 2
        out = tmp_path / "out.jsonl"
        assert buffer.export_jsonl(out) == 2
        with ReplayBuffer.open(":memory:") as again:
            import_files(again, [out])
            assert [t.model_dump() for t in again.iter_transitions()] == [
                t.model_dump() for t in buffer.iter_transitions()
            ]


def test_strict_import_writes_nothing(tmp_path):
    good = {
        "domain": "d",
        "task_id": "t",
        "task": "x",
        "episode_id": "e",
        "step": 0,
        "state": "s",
        "action": "a",
        "next_state": "n",
    }
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "step": 1, "reward": "lots"}) + "\n")
    with ReplayBuffer.open(":memory:") as buffer:
        with pytest.raises(DataFormatError) as info:
            import_files(buffer, [path], strict=True)
        assert info.value.line == 2 and str(path) in str(info.value)
        assert len(buffer) == 0


def test_webshop_il_and_agentgym_formats(tmp_path):
    il = tmp_path / "il.jsonl"
    il.write_text(
        json.dumps(
            {
                "states": [
                    "WebShop [SEP] Instruction: [SEP] i need red shoes [SEP] Search",
                    "results page",
                    "item page",
                ],
                "actions": ["search[red shoes]", "click[b0001]", "click[buy now]"],
                "available_actions": [[], ["b0001"], ["buy now"]],
                "action_idxs": [-1, 0, 0],
            }
        )
        + "\n"
        + json.dumps({"states": ["only"], "actions": []})
        + "\n"
    )
    assert detect_format(il) == "webshop-il"
    records, issues = _records(il)
    t = records[0].transitions
    assert [x.action for x in t] == ["search[red shoes]", "click[b0001]", "click[buy now]"]
    assert (
        t[0].task == "i need red shoes"
        and t[1].next_state == "item page"
        and t[2].done
        and t[2].next_state == ""
    )
    assert issues[0].line == 2

    conv = tmp_path / "conv.json"
    conv.write_text(
        json.dumps(
            [
                {
                    "item_id": "webshop_3",
                    "reward": 1.0,
                    "conversations": [
                        {"from": "human", "value": "You are web shopping..."},
                        {"from": "gpt", "value": "OK"},
                        {
                            "from": "human",
                            "value": "WebShop [SEP] Instruction: [SEP] i need a lamp [SEP] Search",
                        },
                        {"from": "gpt", "value": "Thought: I should search.\n\nAction:\nsearch[lamp]"},
                        {"from": "human", "value": "results: [b01] lamp"},
                        {"from": "gpt", "value": "Thought: buy it\nAction: click[buy now]"},
                    ],
                },
                {"conversations": [{"from": "robot", "value": "?"}]},
            ]
        )
    )
    assert detect_format(conv) == "agentgym"
    records, issues = _records(conv)
    t = records[0].transitions
    assert t[0].domain == "webshop" and t[0].action == "search[lamp]"
    assert t[0].metadata["agent_thought"] == "I should search." and t[0].next_state == "results: [b01] lamp"
    assert t[1].done and t[1].success and t[1].reward == 1.0
    assert "record #1" in issues[0].message


class _ReplayedWebShop:
    """WebShop's text mode replaying a logged session's pages, one page per step, in the log's order.

    Results show a made-up title and price per product, item pages the option groups of the options
    the session picks: what the real store prints and the log does not record.
    """

    def __init__(self, pages: list[dict]) -> None:
        self.pages = [p for i, p in enumerate(pages) if i == 0 or p != pages[i - 1]]
        self.at = 0
        self.instruction = pages[0]["goal"]["instruction_text"]
        self.groups = {
            k: [v] for p in pages for k, v in ((p.get("content") or {}).get("options") or {}).items()
        }

    def _text(self) -> str:
        page, instr = self.pages[self.at], self.instruction
        content = page.get("content") or {}
        head = f"Instruction: [SEP] {instr} [SEP] Back to Search"
        if page["page"] == "index":
            return f"WebShop [SEP] Instruction: [SEP] {instr} [SEP] Search"
        if page["page"] == "search_results":
            number = int(content["page"])
            nav = ("< Prev [SEP] " if number > 1 else "") + "Next >"
            products = " [SEP] ".join(
                f"{a} [SEP] Product {a} [SEP] $10.00" for a in content["search_result_asins"]
            )
            return f"{head} [SEP] Page {number} (Total results: 50) [SEP] {nav} [SEP] {products}"
        if page["page"] == "item_page":
            groups = " [SEP] ".join(f"{g} [SEP] " + " [SEP] ".join(vs) for g, vs in self.groups.items())
            return (
                f"{head} [SEP] < Prev [SEP] {groups + ' [SEP] ' if groups else ''}A product [SEP] Price: $10.00 "
                "[SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now"
            )
        return f"Thank you for shopping with us! [SEP] Your code: [SEP] None [SEP] Goal [SEP] {instr}"

    def reset(self, session=None, instruction_text=None):
        self.at = 0
        return self._text(), None

    def step(self, action):
        self.at += 1
        done = self.pages[self.at]["page"] == "done"
        return self._text(), float(self.pages[self.at].get("reward", 0.0)) if done else 0.0, done, None

    def get_available_actions(self):
        kind = self.pages[self.at]["page"]
        values = [v.lower() for vs in self.groups.values() for v in vs]
        clickables = {
            "index": ["search"],
            "search_results": ["back to search", "next >"]
            + [a.lower() for a in (self.pages[self.at].get("content") or {}).get("search_result_asins", [])],
            "item_page": [
                "back to search",
                "< prev",
                *values,
                "description",
                "features",
                "reviews",
                "buy now",
            ],
        }.get(kind, [])
        return {"has_search_bar": kind == "index", "clickables": clickables}


def _less_unlogged(state: str) -> str:
    """A real page's state without what a session log does not record (titles, prices, option groups)."""
    lines = []
    for line in state.splitlines():
        if line.startswith(("Title: ", "Price: ")) or re.match(r"^[^\[\]]+: \[", line):
            continue
        lines.append(re.sub(r"^(\[[A-Z0-9]{10}\]) .*$", r"\1", line))
    return "\n".join(lines)


@needs_data
def test_webshop_session_states_are_what_the_real_wrapper_and_the_domain_give():
    from dreamgym_env.domains import get_domain
    from dreamgym_env.domains.webshop.engine import WebShopRealEnv
    from dreamgym_env.domains.webshop.tasks import load_webshop_goals

    log = SESSIONS / "20220427_1_17.jsonl"
    (record,), _ = _records(log)
    pages = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    env = WebShopRealEnv(_ReplayedWebShop(pages), sessions=[log.stem])
    obs, info = env.reset(seed=0)
    task = load_webshop_goals(log)[0]
    first = record.transitions[0].state
    assert first == obs == get_domain("webshop").initial_state(task, np.random.default_rng(0)).state
    for t in record.transitions:
        obs, *_ = env.step(t.action)
        assert t.next_state == _less_unlogged(obs)
    assert t.next_state.startswith("WebShop | purchase complete") and t.next_state == obs
    assert "Selected: color=teal, size=38 | 40 | 41 mm" in record.transitions[-1].state


@needs_data
def test_webshop_session_task_id_is_the_same_in_loader_real_wrapper_and_task_loader():
    from dreamgym_env.domains.webshop.engine import WebShopRealEnv
    from dreamgym_env.domains.webshop.tasks import load_webshop_goals

    for log in sorted(SESSIONS.glob("*.jsonl")):
        (record,), _ = _records(log)
        pages = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        _, info = WebShopRealEnv(_ReplayedWebShop(pages), sessions=[log.stem]).reset(seed=0)
        (task,) = load_webshop_goals(log)
        assert {t.task_id for t in record.transitions} == {info["task_id"]} == {task.task_id}


@needs_data
def test_webshop_session_goal_facts_reach_the_simulator():
    from dreamgym_env.domains import get_domain
    from dreamgym_env.domains.webshop.tasks import load_webshop_goals
    from dreamgym_env.training.sft_data import task_of

    log = SESSIONS / "20220427_1_17.jsonl"
    (record,), _ = _records(log)
    goal = json.loads(log.read_text().splitlines()[0])["goal"]
    domain = get_domain("webshop")
    facts = domain.describe_task(task_of(record.transitions[0]))
    assert f"- options: {goal['goal_options']}" in facts
    assert f"- attributes: {goal['attributes']}" in facts and f"- price_upper: {goal['price_upper']}" in facts
    assert facts == domain.describe_task(load_webshop_goals(log)[0])


@needs_data
def test_imported_transitions_carry_the_stored_form_build_sft_reads():
    """Loaders write through Transition.of_step: task facts and both admissible lists under the same keys."""
    keys = {"task_metadata", "admissible_actions", "prev_admissible_actions"}
    alfworld, _ = _records(ALFWORLD)
    first = alfworld[0].transitions[0]
    assert set(first.metadata) >= keys and first.metadata["origin"] == "alfworld-react"
    assert first.task_metadata["task_type"] == "pick_and_place_simple"
    assert first.task_metadata["object"] == "spraybottle"
    webshop, _ = _records(SESSIONS)
    assert all(set(t.metadata) >= keys for r in webshop for t in r.transitions)
    assert any(r.transitions[0].task_metadata for r in webshop)
