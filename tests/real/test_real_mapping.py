"""Real-to-abstract mapping on the engines' documented formats; needs no engine installed."""

from __future__ import annotations

import json

import pytest

from dreamgym_env.domains.axtree import axtree_to_state
from dreamgym_env.errors import ResponseFormatError
from dreamgym_env.experience.backends.scripted import ScriptedBackend
from dreamgym_env.real.extractor import LLMStateExtractor
from dreamgym_env.real.mapping import clean_game_text, parse_webshop_text, webshop_page_to_state

INSTR = "i need a deodorant for sensitive skin, and price lower than 40.00 dollars"
RESULTS = (
    f"Instruction: [SEP] {INSTR} [SEP] Back to Search [SEP] Page 1 (Total results: 50) [SEP] Next > [SEP] "
    "B078GWRC1J [SEP] Bright Citrus Deodorant by Earth Mama [SEP] $10.99 [SEP] "
    "B078GTKVXY [SEP] Ginger Fresh Deodorant by Earth Mama [SEP] $10.99"
)
ITEM = (
    f"Instruction: [SEP] {INSTR} [SEP] Back to Search [SEP] < Prev [SEP] scent [SEP] assorted scents [SEP] "
    "bright citrus [SEP] size [SEP] travel set (4-pack) [SEP] 3 ounce (pack of 1) [SEP] "
    "Bright Citrus Deodorant by Earth Mama [SEP] Price: $10.99 [SEP] Rating: N.A. [SEP] Description [SEP] "
    "Features [SEP] Reviews [SEP] Buy Now"
)
ITEM_CLICKABLES = [
    "back to search",
    "< prev",
    "assorted scents",
    "bright citrus",
    "travel set (4-pack)",
    "3 ounce (pack of 1)",
    "description",
    "features",
    "reviews",
    "buy now",
]


def test_clean_game_text_drops_alfworld_banner() -> None:
    raw = "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room.\n\n\n\nYour task is to: x."
    assert clean_game_text(raw) == "You are in the middle of a room.\n\nYour task is to: x."


def test_webshop_search_page() -> None:
    page = parse_webshop_text(f"WebShop [SEP] Instruction: [SEP] {INSTR} [SEP] Search")
    assert page.kind == "search" and page.instruction == INSTR
    assert (
        webshop_page_to_state(page, instruction=INSTR)
        == f"WebShop | search page\nInstruction: {INSTR}\n[Search]"
    )


def test_webshop_results_page_lists_products_in_sim_format() -> None:
    page = parse_webshop_text(RESULTS)
    assert page.kind == "results" and page.total == 50 and len(page.results) == 2
    state = webshop_page_to_state(page, instruction=INSTR, query="deodorant")
    assert state.splitlines()[0] == 'WebShop | results for "deodorant" | page 1 (50 results)'
    assert "[Back to Search] [Next >]" in state
    assert "[B078GWRC1J] Bright Citrus Deodorant by Earth Mama | $10.99" in state


def test_webshop_item_page_separates_option_groups_using_clickables() -> None:
    page = parse_webshop_text(ITEM, ITEM_CLICKABLES)
    assert page.kind == "item"
    assert page.options == {
        "scent": ["assorted scents", "bright citrus"],
        "size": ["travel set (4-pack)", "3 ounce (pack of 1)"],
    }
    assert page.title == "Bright Citrus Deodorant by Earth Mama" and page.price == "$10.99"
    state = webshop_page_to_state(
        page, instruction=INSTR, asin="B078GWRC1J", selected={"scent": "bright citrus"}
    )
    assert state.splitlines()[0] == "WebShop | item B078GWRC1J"
    assert "scent: [assorted scents] [bright citrus]" in state
    assert "Selected: scent=bright citrus" in state and state.endswith("[Buy Now]")


def test_webshop_done_page() -> None:
    done = "Thank you for shopping with us! [SEP] Your code: [SEP] None [SEP] Goal [SEP] " + INSTR
    page = parse_webshop_text(done)
    assert page.kind == "done" and page.instruction == INSTR
    state = webshop_page_to_state(page, instruction=INSTR, asin="B078GWRC1J", reward=0.75)
    assert state.startswith("WebShop | purchase complete") and "Reward: 0.75" in state


def _node(
    node_id: str,
    role: str,
    name: str = "",
    children: tuple[str, ...] = (),
    bid: str | None = None,
    ignored: bool = False,
) -> dict:
    node = {
        "nodeId": node_id,
        "role": {"value": role},
        "name": {"value": name},
        "childIds": list(children),
        "ignored": ignored,
    }
    if bid:
        node["browsergym_id"] = bid
    return node


AXTREE = {
    "nodes": [
        _node("1", "RootWebArea", "Shop", ("2", "3", "6", "8")),
        _node("2", "heading", "Shop", ("2a",), bid="4"),
        _node("2a", "StaticText", "Shop"),
        _node("3", "generic", "", ("4", "5")),
        _node("4", "button", "Add to Cart", bid="12"),
        _node("5", "StaticText", "Total: $12"),
        _node("6", "textbox", "", bid="13"),
        _node("8", "link", "It's here", bid="14", ignored=True),
    ]
}


def test_axtree_listing_is_browsergyms_own_under_the_tab_and_url_lines() -> None:
    pytest.importorskip("browsergym.utils.obs")
    state = axtree_to_state(AXTREE, url="http://127.0.0.1:8000/", titles=["Shop", "Cart"], active_index=0)
    assert state.splitlines() == [
        "Tab 0 (current): Shop",
        "Tab 1: Cart",
        "URL: http://127.0.0.1:8000/",
        "RootWebArea 'Shop'",
        "\t[4] heading 'Shop'",
        "\t[12] button 'Add to Cart'",
        "\tStaticText 'Total: $12'",
        "\t[13] textbox ''",
        '\t[14] link "It\'s here"',
    ]


def test_axtree_leaves_out_chromiums_inline_text_boxes() -> None:
    pytest.importorskip("browsergym.utils.obs")
    tree = {
        "nodes": [
            _node("1", "RootWebArea", "Page", ("2",)),
            _node("2", "button", "Go", ("3",), bid="7"),
            _node("3", "InlineTextBox", "Go"),
        ]
    }
    assert axtree_to_state(tree, url="u").splitlines()[2:] == ["RootWebArea 'Page'", "\t[7] button 'Go'"]


def test_axtree_visible_only_filters_by_visibility() -> None:
    pytest.importorskip("browsergym.utils.obs")
    hidden = {"visibility": 0.0, "bbox": None, "clickable": True, "set_of_marks": False}
    props = {"12": hidden, "4": {**hidden, "visibility": 1.0}}
    state = axtree_to_state(AXTREE, url="u", extra_properties=props, visible_only=True)
    assert "Add to Cart" not in state and "[4] heading" in state


def test_llm_extractor_sends_domain_format_and_parses_answer() -> None:
    backend = ScriptedBackend(
        [json.dumps({"state": "WebShop | search page\nInstruction: x\n[Search]"}), "garbage"]
    )
    extractor = LLMStateExtractor(backend, "webshop")
    assert extractor("<html>raw</html>").startswith("WebShop | search page")
    request = backend.requests[0]
    assert (
        "State format" in request.messages[0]["content"]
        and request.messages[1]["content"] == "<html>raw</html>"
    )
    with pytest.raises(ResponseFormatError):
        extractor("<html>again</html>")
